/* torch_batch.h — the PyTorch hooks' free batch (torch_batch.c): frees that carry no
 * record_stream hint wait for a device synchronize before the pool may hand them out again. */
#ifndef GPOOL_TORCH_BATCH_H
#define GPOOL_TORCH_BATCH_H

#include <stddef.h>

#include "gpool.h"
#include "gpool_torch.h"

#define GP_TORCH_MAX_DEVICES 64

/* Set a device's batch limit (bytes; 0: 1/64 of the device's memory, at least 64 MiB), once,
 * when its pool is made. */
void gp_torch_batch_init(int device, gpool_t *pool, size_t limit);

/* Queue ptr (requested: the size PyTorch passes; a live block of pool, device `device`, freed on
 * stream) for the device's next flush; marks the batch due once it holds its limit.
 * GPOOL_ERR_INVALID_POINTER (nothing queued) when ptr is not a live block of the pool. Thread-safe.
 */
gpool_status gp_torch_batch_free(int device, gpool_t *pool, void *ptr, size_t requested,
                                 gpool_stream_t stream);

/* 1 when the device's batch holds its limit: the caller (an allocation) should flush it.
 * Frees never synchronize themselves. Cost: one relaxed atomic load. */
int gp_torch_batch_due(int device);

/* Flush the device's batch now: one cuCtxSynchronize, then every block back to the pool
 * (gpool_free_async on its stream). Not while `stream` (the caller's) captures a graph, nor
 * while another capture may run (gp_torch_may_sync(oom); oom: memory is short): synchronizing
 * would invalidate it. Returns the number of blocks given back. Thread-safe. */
size_t gp_torch_batch_flush(int device, gpool_t *pool, gpool_stream_t stream, int oom);

/* Give the blocks freed on `stream` back to the pool without a synchronize (reusable at once
 * on that stream, as before the batch): only for an allocation on a capturing stream that
 * found no memory, where a synchronize is prohibited and the alternative is a failed capture.
 * Returns the number of blocks. Thread-safe. */
size_t gp_torch_batch_release_stream(int device, gpool_t *pool, gpool_stream_t stream);

/* The device's batch now (all zeros for a bad ordinal). */
void gp_torch_batch_stats(int device, gpool_torch_batch_stats *out);

/* Up to cap of the device's queued block addresses into ptrs; returns how many are queued. */
size_t gp_torch_batch_list(int device, void **ptrs, size_t cap);

#endif
