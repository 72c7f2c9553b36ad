/* test_preload_adversarial.c — an adversarial campaign against the drop-in's contract (issue
 * 23's promise: a program correct on CUDA's own allocator stays correct under LD_PRELOAD).
 * Each test runs one mode of tests/preload/adv_prog, a small program a correct CUDA program
 * could be, under the interposer on the simulated driver, which counts happens-before
 * violations (adv_prog exits 4 when it saw one, 1 when a check of CUDA's documented answer
 * failed). The findings come last, each with what failed before its fix; the others are
 * promises that held. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_skip.h"

/* every mode runs against the simulated driver, which referees it */
TestSuite(adversarial, .init = suite_needs_sim);

/* ---------------- promises that held ---------------- */

/* Programming Guide, "Implicit Synchronization" / cudaFree: memory freed with cudaFree is not
 * handed to other work before the work queued on it completes, whatever stream touched it. */
Test(adversarial, ptds_free_on_one_thread_malloc_on_another)
{
    adv_run_all_modes("adv_prog", "ptds", NULL);
}

Test(adversarial, cudafree_held_nonblocking_stream_then_other_stream)
{
    adv_run_all_modes("adv_prog", "free_nb", NULL);
}

Test(adversarial, cudafree_held_blocking_stream_then_other_blocking_stream)
{
    adv_run_all_modes("adv_prog", "free_blocking", NULL);
}

Test(adversarial, cudafree_held_blocking_stream_then_legacy_stream)
{
    adv_run_all_modes("adv_prog", "free_legacy", NULL);
}

/* cudaFree of a cudaMallocAsync block, then cudaMallocAsync on another stream */
Test(adversarial, mallocasync_block_cudafree_then_mallocasync_elsewhere)
{
    adv_run_all_modes("adv_prog", "async_then_free", NULL);
}

/* cudaFreeAsync on s1 then cudaMallocAsync on s2: reuse is ordered (cudaMallocAsync's pool
 * reuse rules) */
Test(adversarial, freeasync_then_mallocasync_other_stream)
{
    adv_run_all_modes("adv_prog", "async_cross", NULL);
}

/* cudaFreeAsync then cudaMalloc: a legacy-stream or blocking-stream consumer is ordered */
Test(adversarial, freeasync_then_cudamalloc_legacy_or_blocking_consumer)
{
    adv_run_all_modes("adv_prog", "async_then_malloc_legacy", NULL);
    adv_run_all_modes("adv_prog", "async_then_malloc_blocking", NULL);
}

/* two threads' per-thread default streams share a handle value but not an order */
Test(adversarial, ptds_handle_value_shared_by_two_threads)
{
    adv_run_all_modes("adv_prog", "ptds_async", NULL);
    adv_run_all_modes("adv_prog", "ptds_async_ptsz", NULL);
}

/* cudaFreeHost: pinned (and mapped) blocks an async copy still uses are not reused early */
Test(adversarial, cudafreehost_with_async_copy_queued)
{
    adv_run_all_modes("adv_prog", "host_blocking", NULL);
    adv_run_all_modes("adv_prog", "host_nb", NULL);
    adv_run_all_modes("adv_prog", "host_mapped_nb", NULL);
}

/* cuStreamDestroy: "in case the device is still doing work in the stream hStream when
 * cuStreamDestroy() is called, the function will return immediately and the resources
 * associated with hStream will be released automatically once the device has completed all
 * work"; the driver may reuse the handle value */
Test(adversarial, stream_destroyed_with_work_queued_and_handle_reused)
{
    adv_run_all_modes("adv_prog", "destroy_freeasync", "GPOOL_SIM_REUSE_STREAM_HANDLES=1");
    adv_run_all_modes("adv_prog", "destroy_free", "GPOOL_SIM_REUSE_STREAM_HANDLES=1");
    adv_run("adv_prog", "destroy_freeasync", NULL);
    adv_run("adv_prog", "destroy_free", NULL);
}

/* cuMemAllocAsync during capture makes a graph memory node: eager work never gets it */
Test(adversarial, capture_modes_graph_memory_not_given_to_eager_work)
{
    adv_run("adv_prog", "capture_global", NULL);
    adv_run("adv_prog", "capture_thread", NULL);
    adv_run("adv_prog", "capture_relaxed", NULL);
}

/* cuStreamBeginCapture: relaxed and thread-local captures do not forbid another thread's
 * cudaMalloc/cudaFree; the capture ends valid (batch and sync modes) */
Test(adversarial, other_thread_allocates_during_capture_batch_and_sync)
{
    const char *modes[] = {"", "GPOOL_CONF=cudafree=stream", "GPOOL_CONF=cudafree=sync",
                           "GPOOL_CONF=sync_free=1"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        adv_run("adv_prog", "capture_side_relaxed", modes[i]);
        adv_run("adv_prog", "capture_side_thread", modes[i]);
        /* near capacity: each 200 MiB cudaMalloc needs the block the last cudaFree gave */
        char e[256];
        snprintf(e, sizeof e, "%s GPOOL_SIM_MEMORY=256M", modes[i]);
        adv_run("adv_prog", "capture_side_oom", e);
    }
}

/* fork() while two threads allocate: the child gets CUDA_ERROR_NOT_INITIALIZED
 * (cudaErrorInitializationError), never hangs */
Test(adversarial, fork_while_threads_allocate, .timeout = 120)
{
    adv_run("adv_prog", "fork_threads", "GPOOL_SIM_FORK=driver");
    adv_run("adv_prog", "fork_threads", "GPOOL_SIM_FORK=driver GPOOL_CONF=cudafree=sync");
}

/* a device-1 block freed while device 0 is current (cuCtxSetCurrent, cuCtxPushCurrent) */
Test(adversarial, free_other_devices_block_with_work_queued)
{
    adv_run_all_modes("adv_prog", "devices", "GPOOL_SIM_DEVICES=2");
    adv_run_all_modes("adv_prog", "devices_push", "GPOOL_SIM_DEVICES=2");
}

/* cuMemGetAddressRange / RANGE_START_ADDR on an interior pointer: the allocation's base and
 * size */
Test(adversarial, interior_pointer_queries)
{
    adv_run("adv_prog", "query_range", NULL);
}

/* out of memory, then retry; blocks another live thread freed are found again */
Test(adversarial, oom_then_retry)
{
    adv_run_all_modes("adv_prog", "oom", "GPOOL_SIM_MEMORY=256M");
    adv_run("adv_prog", "oom_nb", "GPOOL_SIM_MEMORY=256M");
}

/* cudaMemGetInfo: a freed block counts as free again */
Test(adversarial, meminfo_after_free)
{
    adv_run_all_modes("adv_prog", "meminfo", "GPOOL_SIM_MEMORY=256M");
}

/* bad pointers: an interior cudaFree, cudaFree of a pinned or mapped host block, a second
 * cudaFreeAsync, cudaFree after cudaFreeAsync: each an error, nothing freed twice */
Test(adversarial, bad_pointers_are_errors)
{
    adv_run("adv_prog", "bad_interior", NULL);
    adv_run("adv_prog", "bad_sequence", NULL);
    adv_run("adv_prog", "bad_sequence0", NULL);
    adv_run("adv_prog", "host_to_cudafree", NULL);
    adv_run("adv_prog", "mapped_to_cudafree", NULL);
    adv_run("adv_prog", "double_free_async", NULL);
    adv_run("adv_prog", "freeasync_then_free", NULL);
}

/* in the synchronizing mode a double free is an error */
Test(adversarial, double_free_is_an_error_in_sync_mode)
{
    adv_run("adv_prog", "double_free", "GPOOL_CONF=cudafree=sync");
    adv_run("adv_prog", "double_free_driver", "GPOOL_CONF=cudafree=sync");
    adv_run("adv_prog", "free_then_freeasync", "GPOOL_CONF=cudafree=sync");
}

/* pinned and mapped host blocks: interior pointer queries, cuMemHostGetFlags, the device
 * pointer's range (also with a device pointer that differs from the host pointer) */
Test(adversarial, host_block_queries)
{
    adv_run("adv_prog", "host_query", NULL);
    adv_run("adv_prog", "host_query", "GPOOL_SIM_HOST_ALIAS=1");
}

/* a kernel on the legacy stream (held), cudaFree, cudaMalloc before any non-blocking stream
 * exists; the block is then used on a new non-blocking stream */
Test(adversarial, legacy_block_reused_on_a_later_nonblocking_stream)
{
    adv_run_all_modes("adv_prog", "legacy_then_new_nb", NULL);
}

/* a pinned block a device-1 copy still writes, cudaFreeHost'd with device 0 current */
Test(adversarial, cudafreehost_other_device_copy_queued)
{
    adv_run_all_modes("adv_prog", "host_devices", "GPOOL_SIM_DEVICES=2");
}

/* cudaMemGetInfo once a non-blocking stream exists (frees wait in the synchronizing batch) */
Test(adversarial, meminfo_after_free_nonblocking)
{
    adv_run_all_modes("adv_prog", "meminfo_nb", "GPOOL_SIM_MEMORY=256M");
}

/* allocated on s1, last used and cudaFreeAsync'd on s2 (after an event wait), reallocated on
 * s1: the free is in s2's order */
Test(adversarial, freeasync_on_another_stream_than_the_allocation)
{
    adv_run_all_modes("adv_prog", "free_on_other_stream", NULL);
}

/* capture on the per-thread default stream: cudaMallocAsync(cudaStreamPerThread) and
 * cudaMallocAsync_ptsz(NULL) become graph memory */
Test(adversarial, capture_on_per_thread_stream)
{
    adv_run("adv_prog", "capture_ptds", NULL);
    adv_run("adv_prog", "capture_ptds", "GPOOL_CONF=cudafree=sync");
}

/* cudaFree of a block a held non-blocking stream writes, then cudaMallocAsync on another */
Test(adversarial, cudafree_then_mallocasync_other_stream)
{
    adv_run_all_modes("adv_prog", "free_then_mallocasync", NULL);
}

/* a forked child's frees and allocations of the parent's memory: NOT_INITIALIZED, no hang */
Test(adversarial, forked_child_calls_answer_not_initialized, .timeout = 60)
{
    adv_run("adv_prog", "fork_child_calls", "GPOOL_SIM_FORK=driver");
    adv_run("adv_prog", "fork_child_calls", "GPOOL_SIM_FORK=driver GPOOL_CONF=cudafree=sync");
}

/* cudaFreeAsync on the legacy stream (held), cudaMallocAsync on a non-blocking stream */
Test(adversarial, legacy_freeasync_then_mallocasync_nonblocking)
{
    adv_run_all_modes("adv_prog", "legacy_freeasync_then_mallocasync", NULL);
}

/* a block larger than a page: queries in its last page, and a small block's last byte */
Test(adversarial, multi_page_block_queries)
{
    adv_run("adv_prog", "query_large", NULL);
}

/* cudaFree of a block a held non-blocking stream writes, the stream destroyed with that work
 * queued, then flushes: the block is not reused before the destroyed stream's work completes
 * (the event flush records on live streams only) */
Test(adversarial, cudafree_then_stream_destroyed_with_work_queued)
{
    adv_run_all_modes("adv_prog", "destroyed_nb_then_flush", NULL);
    adv_run_all_modes("adv_prog", "destroyed_nb_then_flush", "GPOOL_SIM_REUSE_STREAM_HANDLES=1");
}

/* a kernel writes a mapped host block through its device pointer, cudaFreeHost, reuse (also
 * with a device pointer that differs from the host pointer) */
Test(adversarial, cudafreehost_mapped_block_kernel_queued)
{
    adv_run_all_modes("adv_prog", "mapped_kernel", NULL);
    adv_run_all_modes("adv_prog", "mapped_kernel", "GPOOL_SIM_HOST_ALIAS=1");
}

/* ---------------- findings, fixed ---------------- */

/* Finding 1 (ordering, every cudafree mode). cudaMallocAsync + kernel on non-blocking s1
 * (still running) + cudaFreeAsync(p, s1), then cudaMalloc: the drop-in hands out the same
 * block (50 of 50), and a kernel on another non-blocking stream writes it while s1's kernel may
 * still run: 50 happens-before violations. Under CUDA cudaMalloc never returns memory whose
 * stream-ordered free has not completed (cudaMalloc does not come from the stream-ordered pool;
 * cudaFreeAsync: the memory is reusable only in stream order). The legacy and blocking-stream
 * consumers are ordered (freeasync_then_cudamalloc_legacy_or_blocking_consumer), a
 * non-blocking one is not. The same near capacity (oom_async_then_malloc: 1 violation in
 * every mode). Failed before cudaMalloc got GPOOL_ALLOC_NO_STREAM_WAIT once a non-blocking
 * stream exists. */
Test(adversarial, freeasync_then_cudamalloc_nonblocking_consumer)
{
    adv_run_all_modes("adv_prog", "async_then_malloc", NULL);
    /* near capacity too: 200 of 256 MiB freed async on held s1, cudaMalloc(200 MiB) gets it */
    adv_run_all_modes("adv_prog", "oom_async_then_malloc", "GPOOL_SIM_MEMORY=256M");
    /* and from the legacy stream: cudaFreeAsync(p, 0) (held), cudaMalloc, a non-blocking
     * consumer: 50 of 50 */
    adv_run_all_modes("adv_prog", "legacy_freeasync_then_malloc", NULL);
}

/* Finding 2 (capture, cudafree_flush=event). Thread A captures non-blocking s1 in relaxed or
 * thread-local mode; thread B does 200 cudaMalloc/cudaFree pairs of 4 MiB (legal under CUDA:
 * cuStreamBeginCapture, only global mode forbids other threads' unsafe calls, and cudaMalloc/
 * cudaFree are not stream operations on s1). The event flush records an event on every live
 * non-blocking stream, s1 included, so the capture ends CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
 * (901). Batch and sync modes hold (other_thread_allocates_during_capture_batch_and_sync).
 * Failed before the event flush synchronized instead while a capture runs. */
Test(adversarial, other_thread_allocates_during_capture_flush_event)
{
    adv_run("adv_prog", "capture_side_relaxed", "GPOOL_CONF=cudafree_flush=event");
    adv_run("adv_prog", "capture_side_thread", "GPOOL_CONF=cudafree_flush=event");
    /* near capacity: 2 of the other thread's 3 cudaMalloc(200 MiB) fail with out-of-memory
     * (the freed block never comes back), and the capture is invalidated too */
    adv_run("adv_prog", "capture_side_oom",
            "GPOOL_CONF=cudafree_flush=event GPOOL_SIM_MEMORY=256M");
}

/* Finding 3 (pointer queries). CU_POINTER_ATTRIBUTE_BUFFER_ID: a process-wide unique id for an
 * allocated memory region (cuda.h, CUpointer_attribute; cuPointerGetAttribute). Two live 4 KiB
 * cudaMalloc blocks get the same id (1): the driver's id of gpool's chunk passes through. UCX's and
 * NCCL's registration caches key on it, so they would take one block's registration for another's.
 * A block reallocated at a freed one's address must get a new id too. Failed before each block
 * got its own id (preload/preload_bufid.c). */
Test(adversarial, buffer_id_unique_per_allocation)
{
    adv_run("adv_prog", "query_buffer_id", NULL);
}

/* Finding 4 (double free, batch and event modes). cudaFree(p) twice, cuMemFree(p) twice, and
 * cudaFree then cudaFreeAsync each answer success for the second free (cudaFree reference:
 * cudaErrorInvalidValue for a pointer not allocated by cudaMalloc, or already freed). No
 * duplicate block came out of 256 allocations after it, but the program is not told of its
 * bug, and the sync mode does say (double_free_is_an_error_in_sync_mode). Failed before the
 * batched blocks were kept in the pending set (preload/preload_pending.c). */
Test(adversarial, double_free_is_an_error)
{
    adv_run("adv_prog", "double_free", NULL);
    adv_run("adv_prog", "double_free_driver", NULL);
    adv_run("adv_prog", "free_then_freeasync", NULL);
    adv_run("adv_prog", "double_free", "GPOOL_CONF=cudafree_flush=event");
}

/* Finding 5 (pointer queries). After cudaFree(p) and cuCtxSynchronize, cuPointerGetAttribute(
 * RANGE_START_ADDR, p) and cuMemGetAddressRange(p) succeed and describe p as a live 4 KiB
 * allocation (batch, event modes) or a 2 MiB one (sync mode: gpool's chunk). A freed address is
 * no allocation: CUDA_ERROR_INVALID_VALUE / CUDA_ERROR_NOT_FOUND, as for any address no
 * allocation holds (cuMemGetAddressRange, cuPointerGetAttribute). Registration caches probe
 * pointers this way to drop stale entries. Failed before the queries looked at the pending set
 * and at the memory kinds' own lookup (preload/preload_query.c). */
Test(adversarial, freed_pointer_is_not_an_allocation)
{
    adv_run("adv_prog", "query_freed", NULL);
    adv_run("adv_prog", "query_freed", "GPOOL_CONF=cudafree=sync");
}
