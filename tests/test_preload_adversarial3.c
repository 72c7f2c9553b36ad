/* test_preload_adversarial3.c — a third outside campaign against the drop-in's contract (a
 * program correct on CUDA's own allocator stays correct under LD_PRELOAD), on patterns the
 * first two campaigns do not cover. Each test runs one mode of tests/preload/adv3_prog under
 * the interposer on the simulated driver, which counts happens-before violations (adv3_prog
 * exits 4 when it saw one, 1 when a check of CUDA's documented answer failed). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_skip.h"

/* every mode runs against the simulated driver, which referees it */
TestSuite(adversarial3, .init = suite_needs_sim);

/* cudaGetLastError / cudaPeekAtLastError after gpool-served failures: cudaMalloc,
 * cudaMallocAsync, cudaMallocHost out of memory and with NULL result pointers leave the error as
 * the thread's last error (cudaGetLastError: "Returns the last error that has been produced by
 * any of the runtime calls ... in the host thread and resets it to cudaSuccess"), a success
 * after does not clear it, another thread does not see it */
Test(adversarial3, last_error_after_served_failures)
{
    adv_run("adv3_prog", "last_error_oom", NULL);
    adv_run("adv3_prog", "last_error_invalid", NULL);
    adv_run("adv3_prog", "last_error_thread", NULL);
}

/* cudart's own failures and gpool's alternating: the newer is the last error, one
 * cudaGetLastError clears both */
Test(adversarial3, last_error_newest_of_cudart_and_gpool)
{
    adv_run("adv3_prog", "last_error_mixed", NULL);
}

/* cudaSetDevice switching between two devices: cudaMalloc, cudaMallocAsync on the legacy
 * stream and cuMemAlloc land on the current device, cudaMemGetInfo answers as cuMemGetInfo
 * does, a bad ordinal is cudaErrorInvalidDevice and changes nothing */
Test(adversarial3, set_device_switching)
{
    adv_run("adv3_prog", "dev_setdevice_ordinals", "GPOOL_SIM_DEVICES=2");
    adv_run("adv3_prog", "dev_setdevice_threads", "GPOOL_SIM_DEVICES=2");
}

/* a device-1 block with held work, cudaFree'd with device 0 current (cudaSetDevice), reused on
 * device 1 by cudaMalloc / cudaMallocAsync */
Test(adversarial3, set_device_free_across_devices)
{
    for (size_t i = 0; i < CUDAFREE_BASIC_MODES; i++) {
        char e[256];
        snprintf(e, sizeof e, "%s GPOOL_SIM_DEVICES=2", cudafree_modes[i]);
        adv_run("adv3_prog", "dev_setdevice_free_across", e);
    }
}

/* synchronous memsets and device-to-device / pageable host-to-device copies return with their
 * work queued ("API synchronization behavior"); cudaFree then cudaMalloc and a write on a
 * non-blocking stream */
Test(adversarial3, sync_copy_or_memset_then_reuse, .timeout = 120)
{
    adv_run_all_modes("adv3_prog", "sync_memset8_reuse", NULL);
    adv_run_all_modes("adv3_prog", "sync_memset32_reuse", NULL);
    adv_run_all_modes("adv3_prog", "sync_d2d_from_reuse", NULL);
    adv_run_all_modes("adv3_prog", "sync_d2d_into_reuse", NULL);
    adv_run_all_modes("adv3_prog", "sync_h2d_pageable_reuse", NULL);
}

/* non-blocking streams made by another thread (cudaStreamCreateWithFlags / WithPriority), a
 * block freed before they existed with legacy work queued, reuse across them */
Test(adversarial3, streams_from_another_thread)
{
    adv_run_all_modes("adv3_prog", "other_thread_streams", NULL);
}

/* 30000 live blocks of mixed sizes: disjoint, contents intact, all freed, memory back */
Test(adversarial3, very_many_live_blocks, .timeout = 120)
{
    adv_run("adv3_prog", "many_live_blocks", NULL);
    adv_run("adv3_prog", "many_live_blocks", "GPOOL_CONF=cudafree=sync");
}

/* cudaMallocPitch / cuMemAllocPitch / cudaMallocManaged answers beside gpool's blocks */
Test(adversarial3, pitch_and_managed_answers)
{
    adv_run("adv3_prog", "pitch_and_managed", NULL);
}

/* the program's own cuMemHostRegister beside gpool's pinned blocks; cuMemHostUnregister of a
 * cudaMallocHost / cudaHostAlloc block answers CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED and leaves
 * the blocks pinned; nonzero flags to cudaHostGetDevicePointer / cuMemHostGetDevicePointer are
 * invalid values */
Test(adversarial3, host_register_near_pinned_blocks)
{
    adv_run("adv3_prog", "host_register_near", NULL);
}

/* cudaDeviceReset / cuDevicePrimaryCtxReset (cuda.h: "Destroy all allocations and reset all
 * state on the primary context"): blocks live, cached, freed with work held and pinned die
 * with the reset; cudaMalloc, cudaMallocAsync, cuMemAlloc and cudaMallocHost afterwards hand
 * out memory the device has, cudaMemGetInfo sees the device empty, repeated cycles stay flat */
Test(adversarial3, device_reset_then_allocate, .timeout = 120)
{
    adv_run_all_modes("adv3_prog", "device_reset_runtime", NULL);
    adv_run_all_modes("adv3_prog", "device_reset_driver", NULL);
}

/* a reset of device 1 leaves device 0's blocks, contents and cache as they were */
Test(adversarial3, device_reset_leaves_other_devices)
{
    for (size_t i = 0; i < CUDAFREE_BASIC_MODES; i++) {
        char e[256];
        snprintf(e, sizeof e, "%s GPOOL_SIM_DEVICES=2", cudafree_modes[i]);
        adv_run("adv3_prog", "dev_reset_other_device", e);
    }
}
