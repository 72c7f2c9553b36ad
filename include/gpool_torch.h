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
 * value, is an error and the allocation returns NULL). Allocations
 * and frees are ordered on the stream PyTorch passes: a block freed on stream S is reused at once
 * by allocations on S, by other streams only once the work queued on S at the free has completed.
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

/** Free a block from gpool_torch_alloc(), ordered on a stream. NULL and unknown pointers are
 *  ignored (gpool_last_error() says so). Thread-safe.
 *  @param ptr    the block's address.
 *  @param size   the size it was allocated with (unused: gpool knows it).
 *  @param device the device it was allocated on.
 *  @param stream the stream PyTorch passes (the one the block was allocated on). */
GPOOL_API void gpool_torch_free(void *ptr, size_t size, int device, gpool_stream_t stream);

/** Give every device pool's cached physical memory back to the driver (after the pending
 *  frees' stream work completed), as torch.cuda.empty_cache() does for the native allocator.
 *  Call it from Python through ctypes: ctypes.CDLL(path).gpool_torch_empty_cache() (what
 *  torch.cuda.empty_cache() does with a pluggable allocator depends on the PyTorch version). */
GPOOL_API void gpool_torch_empty_cache(void);

/** The pool behind the hooks for one device, for statistics and snapshots (gpool_get_stats(),
 *  gpool_dump_json()); the Python package's gpool.torch.stats() uses it.
 *  @param device the CUDA device ordinal.
 *  @return the pool, owned by the hooks (never destroy it), or NULL when no allocation has
 *          been made on that device yet or the ordinal is out of range. Thread-safe. */
GPOOL_API gpool_t *gpool_torch_pool(int device);

#ifdef __cplusplus
}
#endif

#endif /* GPOOL_TORCH_H */
