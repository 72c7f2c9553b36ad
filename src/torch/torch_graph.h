/* torch_graph.h — memory of CUDA graph captures seen by the PyTorch hooks (torch_graph.c): kept
 * out of eager reuse while a graph may replay. */
#ifndef GPOOL_TORCH_GRAPH_H
#define GPOOL_TORCH_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

/* ptr was allocated on device `device` by a capturing stream: it belongs to the graph of pool
 * `tag` (torch_pools.h serial; 0: unknown). 0, or -1 when it could not be recorded (no host
 * memory; the caller frees it and fails). */
int gp_torch_graph_note(int device, void *ptr, uint32_t tag);

/* Is a graph block (gp_torch_graph_note) still live on any device? One relaxed load. */
int gp_torch_graph_live(void);

/* Is ptr (freed by PyTorch on stream) graph memory (gp_torch_graph_note) whose pool is live, or
 * is `capturing` set (freed inside a capture of pool capture_tag, 0 when several run; own_tag:
 * the pool of the capture stream itself runs, if it does)? Then it is held (1 returned) until
 * gp_torch_graph_release, tagged with its capture's pool when only that capture can use it
 * (capture_tag, or own_tag for a block that capture allocated), else 0; otherwise 0 is
 * returned, and ptr is no graph memory any more. */
int gp_torch_graph_hold(int device, void *ptr, size_t size, gpool_stream_t stream, int capturing,
                        uint32_t capture_tag, uint32_t own_tag);

/* ptr (a live block of `size` bytes, `requested` as PyTorch passed it, freed on stream) is no
 * graph memory and no capture is known, but a pool window is open on the device: a capture may
 * have begun that has not allocated yet, whose kernels read ptr. Held as a suspect (1) until a
 * capture shows itself (gp_torch_graph_adopt) or the window ends (gp_torch_graph_unsuspect); 0
 * (not held) when the device's suspects would exceed limit bytes, ptr is held already, or no
 * host memory is left. */
int gp_torch_graph_suspect(int device, void *ptr, size_t size, size_t requested,
                           gpool_stream_t stream, size_t limit);

/* A capture of pool tag (0: unknown) allocated on the device: its suspects are its memory. */
void gp_torch_graph_adopt(int device, uint32_t tag);

/* The device's suspects go to the free batch, as frees with no capture; returns how many. */
size_t gp_torch_graph_unsuspect(int device, gpool_t *pool);

/* Give held memory of a device back to the pool after a device synchronize: all of it, or (all
 * 0) that of pools no longer live (then live blocks of those pools stop being graph memory).
 * 0, or -1 when the synchronize failed or would invalidate a capture (kept for the next try). */
int gp_torch_graph_release(int device, gpool_t *pool, int all);

/* Blocks and bytes held on a device. */
void gp_torch_graph_held(int device, size_t *blocks, size_t *bytes);

/* Up to cap of the device's held graph block addresses into ptrs; returns how many are held. */
size_t gp_torch_graph_list(int device, void **ptrs, size_t cap);

#endif
