/* torch_pools.h — PyTorch's graph-pool hooks (torch_pools.c), as the rest of the hooks see them. */
#ifndef GPOOL_TORCH_POOLS_H
#define GPOOL_TORCH_POOLS_H

/* 1 when PyTorch's pool hooks are in use (a pool was begun and counted) and no pool is live:
 * no graph is left that may replay, so a graph block freed now may go to the batch. */
int gp_torch_pools_idle(void);

#endif
