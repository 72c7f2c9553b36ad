/* test_preload_adversarial4.c — a fourth outside campaign against the drop-in's contract (a
 * program correct on CUDA's own allocator stays correct under LD_PRELOAD). Each test runs one
 * mode of tests/preload/adv4_prog under the interposer on the simulated driver, which counts
 * happens-before violations (adv4_prog exits 4 when it saw one, 1 when a check of CUDA's
 * documented answer failed). */
#include <criterion/criterion.h>

#include "util_preload.h"
#include "util_skip.h"

TestSuite(adversarial4, .init = suite_needs_sim);

/* another device's block, written by a kernel of the current device still running, freed with
 * cudaFreeAsync on the current device's legacy or per-thread stream (cudaFreeAsync: "Inserts
 * a free operation into hStream"; stream 0 is the current context's default stream), with and
 * without a non-blocking stream in the process: the block's device does not hand it out
 * before that kernel is done */
Test(adversarial4, peer_block_freed_on_the_callers_default_stream, .timeout = 120)
{
    static const char *const modes[] = {
        "dev_peer_free_async_legacy", "dev_peer_free_async_per_thread", "dev_peer_free_async_ptsz",
        "dev_peer_free_async_legacy_nb", "dev_peer_free_async_per_thread_nb"};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        adv_run_all_modes("adv4_prog", modes[m], "GPOOL_SIM_DEVICES=2");
}

/* the process's first non-blocking stream made during a global or thread-local capture, by
 * the capturing thread or another: cuStreamCreate is not a potentially unsafe call, so the
 * capture ends valid; a block freed before (its kernel still running) and written on the new
 * stream after meets that kernel in order */
Test(adversarial4, first_nonblocking_stream_during_a_capture)
{
    adv_run_all_modes("adv4_prog", "capture_global_first_nonblocking", NULL);
    adv_run_all_modes("adv4_prog", "capture_global_first_nonblocking_other", NULL);
    adv_run_all_modes("adv4_prog", "capture_local_first_nonblocking", NULL);
}

/* pinned pairs (cudaMallocHost/cudaFreeHost, cuMemAllocHost/cuMemFreeHost) in a relaxed
 * capture of a blocking stream: nothing is queued on the legacy stream, which would join the
 * capture (cuda.h, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) */
Test(adversarial4, pinned_pairs_during_a_blocking_capture)
{
    adv_run_all_modes("adv4_prog", "capture_blocking_pinned_runtime", NULL);
    adv_run_all_modes("adv4_prog", "capture_blocking_pinned_driver", NULL);
}

/* a thread whose batch holds a freed block exits during a global capture; another thread's
 * stream-ordered allocation on a stream that is not capturing needs memory freed before it:
 * neither a thread's exit nor that allocation is a potentially unsafe call */
Test(adversarial4, batches_drained_around_a_capture)
{
    adv_run_all_modes("adv4_prog", "capture_thread_exit", NULL);
    adv_run_all_modes("adv4_prog", "capture_thread_exit_nb", NULL);
    adv_run_all_modes("adv4_prog", "capture_pressure_other_stream", "GPOOL_SIM_MEMORY=256M");
}

/* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE agrees with cudaIpcGetMemHandle, with and
 * without exportable pages */
Test(adversarial4, ipc_capable_attribute)
{
    adv_run("adv4_prog", "ipc_capable", NULL);
    adv_run("adv4_prog", "ipc_capable", "GPOOL_CONF=ipc=1");
}
