/* torch_graph.h — memory of CUDA graph captures seen by the PyTorch hooks (torch_graph.c): kept
 * out of eager reuse while a graph may replay. */
#ifndef GPOOL_TORCH_GRAPH_H
#define GPOOL_TORCH_GRAPH_H

#include <stddef.h>

#include "gpool.h"

/* ptr was allocated on device `device` by a capturing stream: it belongs to the graph. 0, or
 * -1 when it could not be recorded (no host memory; the caller frees it and fails). */
int gp_torch_graph_note(int device, void *ptr);

/* Is ptr (freed by PyTorch on stream) graph memory (gp_torch_graph_note), or is `capturing` set
 * (freed inside a capture)?
 * Then it is held (1 returned) until gp_torch_graph_release; else 0 and nothing changes. */
int gp_torch_graph_hold(int device, void *ptr, size_t size, gpool_stream_t stream, int capturing);

/* Give the held memory of a device back to the pool after a device synchronize: the graphs
 * that used it must be gone. Returns the number of blocks, or 0 when the synchronize failed. */
size_t gp_torch_graph_release(int device, gpool_t *pool);

/* Blocks and bytes held on a device. */
void gp_torch_graph_held(int device, size_t *blocks, size_t *bytes);

/* Up to cap of the device's held graph block addresses into ptrs; returns how many are held. */
size_t gp_torch_graph_list(int device, void **ptrs, size_t cap);

/* ptr is no graph memory any more (its graphs are gone): drop it from the live set. */
void gp_torch_graph_forget(int device, void *ptr);

#endif
