/**
 * @file gpool_torch.h
 * @brief gpool as PyTorch's CUDA allocator.
 *
 * gpool_torch.h — gpool as PyTorch's CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator),
 * exported by libgpool.so. From Python:
 *
 *     import torch
 *     alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *         "/path/to/libgpool.so", "gpool_torch_alloc", "gpool_torch_free")
 *     torch.cuda.memory.change_current_allocator(alloc)   # before the first CUDA tensor
 *
 * Each device gets one gpool pool, created on its first allocation with the defaults plus the
 * GPOOL_CONF environment variable (its `device` key is ignored; the LD_PRELOAD interposer's
 * keys -- `disable`, `sync_free`, `cudafree`, `cudafree_batch`, `cudafree_flush` -- are
 * checked as the interposer checks them and otherwise ignored; any other unknown key, or a bad
 * value, is an error and the allocation returns NULL). Allocations are ordered on the stream
 * PyTorch passes.
 *
 * Frees: PyTorch 2.0 gives a pluggable allocator no record_stream hint (2.1 and later can
 * pass it, gpool_torch_record_stream() below, but only where the program installs it), so a
 * freed block may still be used by work queued on any stream (Tensor.record_stream(u): DDP/NCCL,
 * prefetchers, pin_memory + non_blocking copies). The hooks therefore keep freed blocks in a
 * per-device batch, as the drop-in does with cudaFree: once it holds `cudafree_batch` bytes
 * (GPOOL_CONF; default 1/64 of the device's memory, at least 64 MiB) the next allocation on a
 * stream that is not capturing makes one cuCtxSynchronize, which makes them safe for every
 * stream, and they go back to the pool. A free never synchronizes (it may run inside another
 * stream's graph capture, which a synchronize would invalidate). An allocation that finds no memory
 * flushes the batch and retries first; gpool_torch_empty_cache() flushes it. No flush happens while
 * a CUDA graph capture may run on any device (synchronizing would invalidate it): one the hooks
 * saw allocate, a pool window begun on a stream that captures, or, except when memory is short,
 * a pool window begun without a stream (torch 2.3+: a capture that has not allocated yet, or a
 * use_mem_pool block). On the calling stream's own capture an allocation on a
 * capturing stream maps fresh pages where it needs them (GPOOL_ALLOC_IN_CAPTURE, gpool.h), and
 * one that still finds no memory takes back that stream's own batched frees without a
 * synchronize instead (as before the batch: stream order covers them, but not a block of that
 * stream that was record_stream'd elsewhere -- the one case left unproven). Cost: one device
 * synchronize per batch (measured on the simulator: 62 per 1,000 frees of 4 MiB with a 64 MiB
 * batch, tests/test_torch_hooks.c), and up to one batch of memory held back.
 * Other libraries (C or ctypes) may call these functions too; they are thread-safe.
 */
#ifndef GPOOL_TORCH_H
#define GPOOL_TORCH_H

#include <stddef.h>

#include "gpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Allocate device memory for PyTorch, ordered on a stream.
 *  @param size   bytes to allocate.
 *  @param device the CUDA device ordinal.
 *  @param stream a cudaStream_t; NULL is the legacy default stream.
 *  @return the device address, or NULL when size is 0, when the memory is exhausted (after
 *          gpool released its cache and retried) or when no pool can be created for the
 *          device; gpool_last_error() then says why (PyTorch reports NULL as CUDA out of
 *          memory). Thread-safe. */
GPOOL_API void *gpool_torch_alloc(size_t size, int device, gpool_stream_t stream);

/** Free a block from gpool_torch_alloc(): it joins the device's free batch (above) and is
 *  handed out again only after the batch's device synchronize. NULL and unknown pointers are
 *  ignored (gpool_last_error() says so), and so is a second free of a block still waiting in
 *  the batch ("freed already"). Thread-safe. Cost while no pool window is open, no capture
 *  was seen and no graph block lives: a size lookup, three relaxed loads and the batch's
 *  lock, no driver call (a full batch is flushed by the next allocation); else the graph
 *  bookkeeping's locks and a cuStreamIsCapturing per stream in question (docs/python.md).
 *  @param ptr    the block's address.
 *  @param size   the size it was allocated with (counted in the batch's requested_bytes).
 *  @param device the device it was allocated on.
 *  @param stream the stream PyTorch passes (the one the block was allocated on). */
GPOOL_API void gpool_torch_free(void *ptr, size_t size, int device, gpool_stream_t stream);

/** Flush every device's free batch (one cuCtxSynchronize per device holding one), give back
 *  the graph memory of released pools whose release a running capture put off, then give
 *  every device pool's cached physical memory back to the driver (after the pending frees'
 *  stream work completed), as torch.cuda.empty_cache() does for the native allocator. None of
 *  it while a capture may run (above): what is due then waits for the next call.
 *  Call it from Python through ctypes: ctypes.CDLL(path).gpool_torch_empty_cache() (what
 *  torch.cuda.empty_cache() does with a pluggable allocator depends on the PyTorch version). */
GPOOL_API void gpool_torch_empty_cache(void);

/** The pool behind the hooks for one device, for statistics and snapshots (gpool_get_stats(),
 *  gpool_dump_json()); the Python package's gpool.torch.stats() uses it.
 *  @param device the CUDA device ordinal.
 *  @return the pool, owned by the hooks (never destroy it), or NULL when no allocation has
 *          been made on that device yet or the ordinal is out of range. Thread-safe. */
GPOOL_API gpool_t *gpool_torch_pool(int device);

/** A device's free batch (gpool_torch_get_batch_stats()). The blocks in it are still live blocks of
 *  the pool (gpool_get_stats() counts them in use) though PyTorch has freed them. Fixed
 *  layout within a major version. */
typedef struct gpool_torch_batch_stats {
    size_t blocks;              /**< blocks waiting for the batch's synchronize */
    size_t bytes;               /**< their sizes as the pool rounded them */
    size_t requested_bytes;     /**< their sizes as PyTorch passed them to the free hook */
    size_t limit;               /**< bytes that trigger a flush (cudafree_batch; 0 before the
                                     device's first allocation) */
    unsigned long long frees;   /**< frees through the hook so far */
    unsigned long long flushes; /**< flushes (one cuCtxSynchronize each) so far */
    size_t graph_blocks;        /**< graph blocks freed and held for
                                     gpool_torch_release_graph_memory(), with frees of an
                                     open pool window that a capture may yet claim
                                     (docs/python.md) */
    size_t graph_bytes;         /**< their bytes */
} gpool_torch_batch_stats;

/** Peaks of what PyTorch held through the hooks on a device (blocks handed out by
 *  gpool_torch_alloc() and not yet given to gpool_torch_free(); the free batch and held graph
 *  memory do not count), since the device's first allocation or gpool_torch_reset_peaks():
 *  torch.cuda.max_memory_allocated()'s meaning (gpool.torch.memory_stats() uses them).
 *  @param device the CUDA device ordinal.
 *  @param[out] allocated the peak in the pool's rounded block sizes.
 *  @param[out] requested the peak in the sizes PyTorch asked for.
 *  @retval GPOOL_OK
 *  @retval GPOOL_ERR_INVALID_ARG an out pointer is NULL.
 *  @retval GPOOL_ERR_NO_DEVICE the ordinal is out of range.
 *  @return a gpool_status as listed. Thread-safe. Cost: two atomic loads. */
GPOOL_API gpool_status gpool_torch_get_peaks(int device, size_t *allocated, size_t *requested);

/** Restart a device's peaks (gpool_torch_get_peaks()) from what PyTorch holds now
 *  (torch.cuda.reset_peak_memory_stats()). Thread-safe. Cost: two atomic stores.
 *  @param device the CUDA device ordinal; one out of range is ignored. */
GPOOL_API void gpool_torch_reset_peaks(int device);

/** Give the memory of CUDA graphs back to the pools: blocks allocated by a capturing stream
 *  (torch.cuda.graph) or freed inside a capture are held out of all reuse once freed, since
 *  the graph replays on those addresses (PyTorch's own allocator keeps a private pool per
 *  capture); call this once the graphs that used them are destroyed. One cuCtxSynchronize per
 *  device holding such blocks, then they go back to the pool.
 *  @retval GPOOL_OK
 *  @retval GPOOL_ERR_DRIVER a synchronize failed (e.g. a capture is running): those blocks
 *          stay held; gpool_last_error() says why.
 *  @return a gpool_status as listed. Thread-safe; not during a capture. */
GPOOL_API gpool_status gpool_torch_release_graph_memory(void);

/** What waits in a device's free batch, and the batch's counters (gpool.torch.memory_stats()
 *  subtracts the waiting blocks from the allocated bytes).
 *  @param device the CUDA device ordinal.
 *  @param[out] out receives the numbers (zeros before the device's first allocation).
 *  @retval GPOOL_OK
 *  @retval GPOOL_ERR_INVALID_ARG out is NULL.
 *  @retval GPOOL_ERR_NO_DEVICE the ordinal is out of range.
 *  @return a gpool_status as listed. Thread-safe. Cost: one uncontended lock. */
GPOOL_API gpool_status gpool_torch_get_batch_stats(int device, gpool_torch_batch_stats *out);

/** The id of a PyTorch memory pool (c10::cuda::MempoolId_t, a std::pair of two unsigned long
 *  long, passed by value as this struct is in the C calling convention). */
typedef struct gpool_torch_mempool_id {
    unsigned long long first;  /**< the pool's first id (a graph's own pool) */
    unsigned long long second; /**< the pool's second id (a user-made pool, graph_pool_handle) */
} gpool_torch_mempool_id;

/** PyTorch's record-stream hook (torch 2.1+: torch.cuda.memory.CUDAPluggableAllocator's
 *  allocator().set_record_stream_fn, which gpool.torch.enable() installs): Tensor.record_stream
 *  (stream) on a block from gpool_torch_alloc(). The block's free then also waits for the work
 *  queued on `stream` at that free (gpool_record_stream()), on top of the free batch's rule.
 *  Unknown pointers are ignored (gpool_last_error() says so). Thread-safe. Cost: a lookup.
 *  @param ptr    a block from gpool_torch_alloc().
 *  @param stream the stream that also uses it (a cudaStream_t). */
GPOOL_API void gpool_torch_record_stream(void *ptr, gpool_stream_t stream);

/** PyTorch's begin-allocate-to-pool hook of torch 2.3 and later (set_begin_allocate_to_pool):
 *  a CUDA graph capture (or torch.cuda.use_mem_pool) starts allocating to pool `id` on
 *  `device`. gpool counts the pool live until gpool_torch_release_pool() of the same id.
 *  @param device the CUDA device ordinal.
 *  @param id     the pool.
 *  @param filter PyTorch's std::function stream filter, passed by reference; not called (the
 *                alloc hook asks the driver whether its stream captures). Thread-safe. */
GPOOL_API void gpool_torch_begin_allocate_to_pool(int device, gpool_torch_mempool_id id,
                                                  void *filter);

/** The same for torch 2.1 and 2.2 (set_begin_allocate_stream_to_pool: device, stream, pool).
 *  @param device the CUDA device ordinal.
 *  @param stream the capturing stream: blocks it allocates while it captures belong to `id`.
 *  @param id     the pool. Thread-safe. */
GPOOL_API void gpool_torch_begin_allocate_stream_to_pool(int device, gpool_stream_t stream,
                                                         gpool_torch_mempool_id id);

/** PyTorch's end-allocate-to-pool hook of torch 2.3 and later (set_end_allocate_to_pool_fn):
 *  the capture (or torch.cuda.use_mem_pool block) that began allocating to pool `id` on
 *  `device` stops. Closes the window gpool_torch_begin_allocate_to_pool() opened, so that the
 *  next capture's blocks are told apart from this one's and each pool's graph memory goes back
 *  at its own release. Frees of the window that no capture claimed (docs/python.md) go to the
 *  free batch. An id with no open window is ignored. Thread-safe. Cost: one lock.
 *  @param device the CUDA device ordinal.
 *  @param id     the pool. */
GPOOL_API void gpool_torch_end_allocate_to_pool(int device, gpool_torch_mempool_id id);

/** The same for torch 2.1 and 2.2 (set_end_allocate_stream_to_pool_fn: device, stream): closes
 *  the latest window begun on `stream`. Thread-safe. Cost: one lock.
 *  @param device the CUDA device ordinal.
 *  @param stream the capturing stream given to gpool_torch_begin_allocate_stream_to_pool(). */
GPOOL_API void gpool_torch_end_allocate_stream_to_pool(int device, gpool_stream_t stream);

/** PyTorch's release-pool hook (set_release_pool; CUDAGraph::reset, i.e. a graph destroyed or
 *  reset, and the end of torch.cuda.use_mem_pool): pool `id` on `device` may no longer be
 *  used. When its last begin is released, no graph can replay on the graph memory captured
 *  into it (the begin and end hooks above tell which), and that memory goes back to the pool
 *  as gpool_torch_release_graph_memory() gives it (one cuCtxSynchronize per device holding
 *  some). While a capture may run (a pool window still open, or a capture the hooks saw) that
 *  synchronize would invalidate it: the memory then stays held until the next release or
 *  gpool_torch_empty_cache(). Memory a capture shares with others (captured while two windows
 *  were open and no stream told them apart, an eager block freed while several captures ran)
 *  goes back once no pool is live at all; memory of a capture that began no window waits for
 *  gpool_torch_release_graph_memory().
 *  A release of an id never begun is ignored. Thread-safe.
 *  @param device the CUDA device ordinal.
 *  @param id     the pool. */
GPOOL_API void gpool_torch_release_pool(int device, gpool_torch_mempool_id id);

/** How many pools begun through the hooks above are live, on every device together.
 *  @return the begins not yet matched by a release (a pool begun twice counts twice).
 *  Thread-safe. */
GPOOL_API size_t gpool_torch_live_pools(void);

/** The blocks of a device that PyTorch freed but gpool does not hand out yet: those waiting in
 *  the free batch and the graph memory held for a release (gpool.torch.snapshot() shows them
 *  as "active_pending_free").
 *  @param device the CUDA device ordinal.
 *  @param[out] ptrs receives up to `cap` block addresses (may be NULL when cap is 0).
 *  @param cap   room in ptrs.
 *  @param[out] count receives how many there are (may exceed cap: call again with more room).
 *  @retval GPOOL_OK
 *  @retval GPOOL_ERR_INVALID_ARG count is NULL, or ptrs is NULL with cap > 0.
 *  @retval GPOOL_ERR_NO_DEVICE the ordinal is out of range.
 *  @return a gpool_status as listed. Thread-safe. Cost: one pass over those blocks. */
GPOOL_API gpool_status gpool_torch_get_freed(int device, void **ptrs, size_t cap, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GPOOL_TORCH_H */
