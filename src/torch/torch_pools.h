/* torch_pools.h — PyTorch's graph-pool hooks (torch_pools.c), as the rest of the hooks see them. */
#ifndef GPOOL_TORCH_POOLS_H
#define GPOOL_TORCH_POOLS_H

#include <stdint.h>

#include "gpool.h"

/* The serial of the live pool a capture on `stream` (a stream tag) allocates to: the open
 * window begun on that stream, else the device's only open window; 0 when none or several. */
uint32_t gp_torch_pool_of_capture(int device, uintptr_t stream);

/* May a graph of the pool with this serial still replay? For serial 0 (a capture no window
 * named): 1 unless the pool hooks are in use and no pool is live at all. */
int gp_torch_pool_live(uint32_t serial);

/* Give back the held graph memory of pools no longer live, on every device (torch.c). */
gpool_status gp_torch_release_dead_graph_memory(void);

#endif
