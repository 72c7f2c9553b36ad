/* test_preload_adversarial2.c — a second outside campaign against the drop-in's contract (issue
 * 23's promise: a program correct on CUDA's own allocator stays correct under LD_PRELOAD), on
 * patterns tests/test_preload_adversarial.c does not cover. Each test runs one mode of
 * tests/preload/adv2_prog under the interposer on the simulated driver, which counts
 * happens-before violations (adv2_prog exits 4 when it saw one, 1 when a check of CUDA's
 * documented answer failed). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_skip.h"

/* every mode runs against the simulated driver, which referees it */
TestSuite(adversarial2, .init = suite_needs_sim);

/* cudaFreeAsync on s1 of a cudaMalloc'd block last written on s2, s1 ordered after s2 by an
 * event wait; the block then reused by cudaMalloc / cudaMallocAsync(s3) (cudaFreeAsync: freed
 * once all preceding work in the stream, event waits included, completes) */
Test(adversarial2, freeasync_after_event_wait_of_cudamalloc_block)
{
    adv_run_all_modes("adv2_prog", "event_free_cudamalloc_block", NULL);
}

/* blocks of a stream destroyed with work queued, freed on another stream (event-ordered) and by
 * cudaFree; the destroyed stream's handle value reused by the next stream (cuStreamDestroy:
 * resources released once the device completes the work) */
Test(adversarial2, destroyed_stream_blocks_freed_elsewhere)
{
    adv_run_all_modes("adv2_prog", "destroyed_blocks_freed_elsewhere", NULL);
    adv_run_all_modes("adv2_prog", "destroyed_blocks_freed_elsewhere",
                      "GPOOL_SIM_REUSE_STREAM_HANDLES=1");
}

/* near capacity: cudaFreeAsync (stream live or destroyed), cudaDeviceSynchronize, then a
 * 200 MiB cudaMalloc / cudaMallocAsync / cuMemAlloc must succeed: after a device synchronize
 * every stream-ordered free has completed */
Test(adversarial2, device_synchronize_then_full_reuse)
{
    adv_run_all_modes("adv2_prog", "ctxsync_then_full_reuse", "GPOOL_SIM_MEMORY=256M");
}

/* cuMemAlloc(&d, 0): CUDA_ERROR_INVALID_VALUE (driver API reference, cuMemAlloc); cudaMalloc(0)
 * succeeds and its pointer can be cudaFree'd */
Test(adversarial2, zero_sizes)
{
    adv_run("adv2_prog", "zero_sizes", NULL);
}

/* six threads, cudaMallocAsync/cudaFreeAsync on cudaStreamPerThread, memset content checked */
Test(adversarial2, many_threads_per_thread_stream, .timeout = 120)
{
    adv_run_all_modes("adv2_prog", "ptds_many_threads", NULL);
}

/* cudaPointerGetAttributes on an interior pointer; cuPointerGetAttribute(s) and
 * cuMemGetAddressRange after cudaFreeAsync + synchronize */
Test(adversarial2, pointer_queries_around_freeasync)
{
    adv_run("adv2_prog", "query_freeasync", NULL);
    adv_run("adv2_prog", "query_freeasync", "GPOOL_CONF=cudafree=sync");
}

/* cudaMemGetInfo after cudaFreeAsync + sync and around cuMemAlloc/cuMemFree */
Test(adversarial2, meminfo_after_freeasync_and_driver_alloc)
{
    adv_run_all_modes("adv2_prog", "meminfo_async", "GPOOL_SIM_MEMORY=1G");
}

/* cuMemFree of a cudaMallocAsync block once its work completed (cuMemFree accepts
 * cuMemAllocAsync memory) */
Test(adversarial2, cumemfree_of_mallocasync_block)
{
    adv_run_all_modes("adv2_prog", "cumemfree_of_async", NULL);
}

/* exit() with stream-ordered frees and batched cudaFrees pending on a stream that completes
 * later: no hang, exit code 0 */
Test(adversarial2, exit_with_pending_frees, .timeout = 60)
{
    adv_run_all_modes("adv2_prog", "exit_pending", NULL);
}

/* the capturing thread's own cudaMalloc: legal in relaxed mode (the capture ends valid),
 * cudaErrorStreamCaptureUnsupported in thread-local and global mode (cudaStreamBeginCapture) */
Test(adversarial2, capturing_thread_cudamalloc)
{
    adv_run("adv2_prog", "capture_same_relaxed", NULL);
    adv_run("adv2_prog", "capture_same_thread", NULL);
    adv_run("adv2_prog", "capture_same_global", NULL);
    adv_run("adv2_prog", "capture_same_relaxed", "GPOOL_CONF=cudafree=sync");
}

/* cudaFreeHost of a pinned or mapped block with a legacy-stream copy pending, reuse on a
 * non-blocking stream */
Test(adversarial2, cudafreehost_with_legacy_copy_pending)
{
    adv_run_all_modes("adv2_prog", "freehost_legacy_copy", NULL);
}

/* cudaFreeAsync, event carried to another stream which the host synchronizes, then cudaMalloc
 * and a third stream's write */
Test(adversarial2, freeasync_completed_through_event_then_cudamalloc)
{
    adv_run_all_modes("adv2_prog", "freeasync_event_then_malloc", NULL);
}

/* a block another thread wrote on its (still running) per-thread default stream and cudaFree'd
 * while a non-blocking stream exists (the batched cudaFree), then flushed and reused on a
 * non-blocking or a blocking stream */
Test(adversarial2, ptds_block_cudafree_batched_then_reused)
{
    adv_run_all_modes("adv2_prog", "ptds_batch_nb", NULL);
    adv_run_all_modes("adv2_prog", "ptds_batch_blocking", NULL);
}

/* cudaMallocAsync/cudaFreeAsync on the explicit handles cudaStreamLegacy and
 * cudaStreamPerThread, reuse on a non-blocking stream */
Test(adversarial2, explicit_legacy_and_per_thread_handles)
{
    adv_run_all_modes("adv2_prog", "legacy_handle", NULL);
    adv_run_all_modes("adv2_prog", "per_thread_handle", NULL);
}

/* exit() from a worker thread while two threads allocate and free: exit code 0, no hang */
Test(adversarial2, exit_from_thread_while_others_allocate, .timeout = 60)
{
    adv_run_all_modes("adv2_prog", "exit_from_thread", NULL);
}

/* gpool's blocks freed through the wrong driver call or at interior addresses (cuMemFreeHost of
 * device blocks, cuMemFreeAsync of host blocks and interior device addresses):
 * CUDA_ERROR_INVALID_VALUE, nothing freed */
Test(adversarial2, wrong_kind_and_interior_device_frees)
{
    adv_run("adv2_prog", "wrong_kind_frees", NULL);
    adv_run("adv2_prog", "wrong_kind_frees", "GPOOL_CONF=cudafree=sync");
}

/* pinned blocks: distinct buffer ids; a freed one is no allocation for cuPointerGetAttribute,
 * cuMemGetAddressRange, cuMemHostGetFlags, cuMemHostGetDevicePointer */
Test(adversarial2, freed_pinned_block_queries)
{
    adv_run("adv2_prog", "host_freed_queries", NULL);
    adv_run("adv2_prog", "host_freed_queries", "GPOOL_CONF=cudafree=sync");
}

/* the legacy stream's implicit synchronization with blocking streams orders a cudaFreeAsync
 * after a write on the other kind of stream, with no event; reuse on a non-blocking stream */
Test(adversarial2, legacy_implicit_sync_orders_freeasync)
{
    adv_run_all_modes("adv2_prog", "blocking_write_legacy_freeasync", NULL);
    adv_run_all_modes("adv2_prog", "legacy_write_blocking_freeasync", NULL);
}

/* cudaMallocAsync on another device's stream: the block is that device's; cudaMemGetInfo is
 * per device */
Test(adversarial2, mallocasync_on_other_devices_stream)
{
    adv_run("adv2_prog", "dev_stream_alloc", "GPOOL_SIM_DEVICES=2");
    adv_run("adv2_prog", "dev_stream_alloc", "GPOOL_SIM_DEVICES=2 GPOOL_CONF=cudafree=sync");
}

/* a thread with no current context: the runtime calls succeed on device 0 */
Test(adversarial2, runtime_calls_from_a_thread_without_context)
{
    adv_run_all_modes("adv2_prog", "fresh_thread_runtime", NULL);
}

/* ---------------- findings ---------------- */

/* Finding B (huge sizes, runtime calls). cudaMalloc and cudaMallocAsync of sizes at or above
 * gpool's MAX_REQUEST (SIZE_MAX, SIZE_MAX - 4095, 2^63, 2^50) should answer
 * cudaErrorMemoryAllocation (cudaMalloc / cudaMallocAsync: "cudaErrorMemoryAllocation" when the
 * memory cannot be allocated), as cudaMallocHost, cudaHostAlloc, cuMemAlloc and cuMemAllocAsync
 * do under the drop-in. gpool answers GPOOL_ERR_INVALID_ARG (src/api/pool.c, check_params), and
 * cudaMalloc / serve_alloc (preload/preload_runtime.c) treat every status but OK and
 * OUT_OF_MEMORY as "not ours" and call the real cudart: the stand-in answers
 * cudaErrorStubLibrary (34). A real cudart would likely answer out of memory by reaching the
 * driver, but the request leaves gpool's allocator, which the drop-in promises it does not.
 * 2^40 + 1 is answered by gpool (2). */
Test(adversarial2, huge_sizes_are_out_of_memory)
{
    adv_run("adv2_prog", "huge_sizes", NULL);
    adv_run("adv2_prog", "huge_sizes", "GPOOL_CONF=cudafree=sync");
}

/* Finding A (bad input, every cudafree mode). cudaFreeHost(h + 64) and cuMemFreeHost(h + 64),
 * h from cudaMallocHost or cudaHostAlloc(Mapped): CUDA answers cudaErrorInvalidValue /
 * CUDA_ERROR_INVALID_VALUE (cudaFreeHost: ptr must be what cudaMallocHost/cudaHostAlloc
 * returned; cuMemFreeHost likewise), and h stays the program's. The drop-in answers success and
 * frees h's block: h's own cudaFreeHost then fails (cudaErrorInvalidValue), and with
 * cudafree=sync the block's memory is given back at once, so the program's next read of its
 * still-live h is a SIGSEGV. gpp_free_host (preload/preload.c) resolves the address with
 * gpool_get_block_desc, which accepts any address inside a block, and frees the block's base. */
Test(adversarial2, interior_host_free_is_an_error)
{
    adv_run_all_modes("adv2_prog", "interior_host_free_rt", NULL);
    adv_run_all_modes("adv2_prog", "interior_host_free_drv", NULL);
}

/* Finding C (pointer queries, mapped host blocks). cudaHostAlloc(&h, 4096, Mapped),
 * cudaFreeHost(h), cuCtxSynchronize, then cuMemHostGetDevicePointer(&d, h, 0) -- what cudart's
 * cudaHostGetDevicePointer reaches for a pointer the drop-in does not hold -- answers
 * CUDA_SUCCESS with a device pointer: h is no longer an allocation of the program, so CUDA answers
 * CUDA_ERROR_INVALID_VALUE (cuMemHostGetDevicePointer: p must be memory allocated by
 * cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP or registered). The drop-in interposes neither
 * cuMemHostGetDevicePointer nor answers for freed blocks in cudaHostGetDevicePointer
 * (preload/preload_runtime.c passes them through), so the driver answers for gpool's still-mapped
 * slab. cuPointerGetAttribute, cuMemGetAddressRange and cuMemHostGetFlags answer correctly for the
 * same address (freed_pinned_block_queries). Missing hook: preload/preload_driver.c /
 * preload/preload.map (cuMemHostGetDevicePointer_v2). */
Test(adversarial2, freed_mapped_block_has_no_device_pointer)
{
    adv_run("adv2_prog", "mapped_freed_queries", NULL);
    adv_run("adv2_prog", "mapped_freed_queries", "GPOOL_CONF=cudafree=sync");
    adv_run("adv2_prog", "mapped_freed_queries", "GPOOL_SIM_HOST_ALIAS=1");
}
