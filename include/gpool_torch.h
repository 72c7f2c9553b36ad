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
 * Frees: PyTorch gives a pluggable allocator no record_stream hint, so a freed block may still
 * be used by work queued on any stream (Tensor.record_stream(u): DDP/NCCL, prefetchers,
 * pin_memory + non_blocking copies). The hooks therefore keep freed blocks in a per-device
 * batch, as the drop-in does with cudaFree: once it holds `cudafree_batch` bytes (GPOOL_CONF;
 * default 1/64 of the device's memory, at least 64 MiB) one cuCtxSynchronize makes them safe
 * for every stream and they go back to the pool. An allocation that finds no memory flushes
 * the batch and retries first; gpool_torch_empty_cache() flushes it. No flush happens while the
 * calling stream captures a CUDA graph (synchronizing is prohibited then); an allocation on a
 * capturing stream that finds no memory takes back that stream's own batched frees without a
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
 *  ignored (gpool_last_error() says so). Thread-safe. Cost: a lock and a size lookup; one
 *  cuCtxSynchronize when the batch is full.
 *  @param ptr    the block's address.
 *  @param size   the size it was allocated with (counted in the batch's requested_bytes).
 *  @param device the device it was allocated on.
 *  @param stream the stream PyTorch passes (the one the block was allocated on). */
GPOOL_API void gpool_torch_free(void *ptr, size_t size, int device, gpool_stream_t stream);

/** Flush every device's free batch (one cuCtxSynchronize per device holding one), then give
 *  every device pool's cached physical memory back to the driver (after the pending frees'
 *  stream work completed), as torch.cuda.empty_cache() does for the native allocator.
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
                                     gpool_torch_release_graph_memory() */
    size_t graph_bytes;         /**< their bytes */
} gpool_torch_batch_stats;

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

#ifdef __cplusplus
}
#endif

#endif /* GPOOL_TORCH_H */
