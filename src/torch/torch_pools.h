/* torch_pools.h — PyTorch's graph-pool hooks (torch_pools.c), as the rest of the hooks see them. */
#ifndef GPOOL_TORCH_POOLS_H
#define GPOOL_TORCH_POOLS_H

#include <stdint.h>

#include "gpool.h"

/* The tag of a capture that began no pool window (an extension's own cuStreamBeginCapture, or
 * hooks without the pool setters): no release names it, so its memory waits for
 * gpool_torch_release_graph_memory(). */
#define GP_TORCH_NO_WINDOW UINT32_MAX

/* The serial of the live pool a capture on `stream` (a stream tag) allocates to: the open
 * window begun on that stream, else the device's only open window; GP_TORCH_NO_WINDOW when no
 * window is open, 0 when several are and the stream tells none apart. */
uint32_t gp_torch_pool_of_capture(int device, uintptr_t stream);

/* May a graph of the pool with this serial still replay? For serial 0 (a capture one of
 * several windows holds): 1 unless the pool hooks are in use and no pool is live at all;
 * GP_TORCH_NO_WINDOW: always. */
int gp_torch_pool_live(uint32_t serial);

/* Is a window open on any device? One relaxed load. */
int gp_torch_windows_open(void);

/* The device's open windows (begun, not ended): up to max streams of those begun with one
 * (torch 2.1/2.2) into streams[] (*nstreams of them); returns how many were begun without one
 * (2.3+: a capture or a use_mem_pool block, which the hooks cannot tell apart until a capturing
 * stream allocates). graphs (NULL: not asked) gets how many of those are windows of a graph's
 * own pool (id.first set: CUDAGraph::capture_begin makes {uid, 0} when no pool is given;
 * torch.cuda.MemPool and, before torch 2.5, graph_pool_handle make {0, uid}): each is a
 * capture, allocating or not. Cost: one relaxed load while no window is open anywhere. */
size_t gp_torch_windows(int device, uintptr_t *streams, size_t max, size_t *nstreams,
                        size_t *graphs);

/* A window on the device ended (an end hook, or its pool's last release): the frees held as
 * suspects go to the free batch (torch.c). */
void gp_torch_window_closed(int device);

/* Give back the held graph memory of pools no longer live, on every device (torch.c). */
gpool_status gp_torch_release_dead_graph_memory(void);

#endif
