/* The drop-in's free ordering and its small CUDA-contract answers (issue 23), on the strict
 * simulator: programs that are correct on CUDA's allocator (tests/preload/order_prog.c) run
 * under LD_PRELOAD in every cudafree mode with 0 happens-before violations (GPOOL_SIM_STRICT=1
 * aborts at the first), and get the answers CUDA's headers document. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

static void setup(void)
{
    NEED_SIM();
    cr_assert_not_null(sim_api(), "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(order, .init = setup, .timeout = 120);

/* Run order_prog `mode` in every cudafree mode on the strict simulator: rc 0 each time. */
static void every_mode(const char *mode, const char *extra_env)
{
    static struct run r;
    for (size_t i = 0; i < CUDAFREE_MODES; i++) {
        char env[512];
        snprintf(env, sizeof env, "GPOOL_SIM_STRICT=1 %s %s", cudafree_modes[i],
                 extra_env ? extra_env : "");
        run(&r, "order_prog", mode, 1, env);
        cr_assert_eq(r.rc, 0, "order_prog %s under '%s':\n%s", mode, env, r.out);
        cr_assert_eq(field(&r, "violations"), 0, "%s", r.out);
    }
}

Test(order, blocking_streams_are_ordered_only_through_the_free)
{
    every_mode("blocking", NULL);
}

Test(order, nonblocking_streams_are_ordered_through_the_free)
{
    every_mode("nonblocking", NULL);
}

Test(order, per_thread_default_streams_of_two_threads)
{
    every_mode("ptds", NULL);
}

Test(order, pinned_host_block_used_on_a_nonblocking_stream)
{
    every_mode("host", NULL);
}

/* The blocking-stream case needs no synchronize in the default mode: one legacy-stream event
 * record per flush of the batch orders it (8 MiB here: 16 frees of 1 MiB, 2 records). */
Test(order, default_mode_orders_blocking_streams_without_a_synchronize)
{
    static struct run r;
    run_expect(&r, "order_prog", "blocking", 1, "GPOOL_SIM_STRICT=1", 0);
    cr_assert_eq(field(&r, "cuCtxSynchronize"), 0, "%s", r.out);
    cr_assert_eq(field(&r, "cuEventRecord"), 2, "%s", r.out);
}

/* cudafree=stream assumes no non-blocking stream: when one appears it says so once and
 * falls back to the batch. */
Test(order, stream_mode_falls_back_with_a_notice_when_a_nonblocking_stream_appears)
{
    static struct run r;
    run_expect(&r, "order_prog", "nonblocking", 1, "GPOOL_SIM_STRICT=1 GPOOL_CONF=cudafree=stream",
               0);
    cr_assert_eq(count_lines_with(r.out, "gpool preload: cudafree=stream"), 1, "%s", r.out);
}

/* cuda_runtime_api.h, cudaFree: "If devPtr is 0, no operation is performed" by cudart, which
 * NCCL and cuDF call to bring the runtime up: the call reaches it. */
Test(order, cudafree_null_reaches_cudart)
{
    static struct run r;
    run_expect(&r, "order_prog", "null_free", 1, NULL, 0);
}

/* cuda_runtime_api.h, cudaFree: the pointer "must have been returned by" cudaMalloc & co.;
 * cudaErrorInvalidValue otherwise. cuda.h, cuMemFree: CUDA_ERROR_INVALID_VALUE. */
Test(order, cudafree_of_a_pinned_host_block_is_invalid_value_and_frees_nothing)
{
    static struct run r;
    run_expect(&r, "order_prog", "host_to_free", 1, "GPOOL_SIM_STRICT=1", 0);
}

/* cuda.h, cuMemHostAlloc: Flags are PORTABLE, DEVICEMAP, WRITECOMBINED; cuda_runtime_api.h,
 * cudaHostAlloc likewise: anything else is invalid value. */
Test(order, host_alloc_with_an_undefined_flag_is_invalid_value)
{
    static struct run r;
    run_expect(&r, "order_prog", "host_flags_bad", 1, NULL, 0);
}

/* cuda.h, cuMemHostGetFlags / cuda_runtime_api.h, cudaHostGetFlags: the flags the block was
 * allocated with, for any address in it. */
Test(order, host_get_flags_on_a_gpool_block_gives_its_flags)
{
    static struct run r;
    run_expect(&r, "order_prog", "host_get_flags", 1, NULL, 0);
}

/* cuda.h, cuMemAllocAsync: the allocation is made on the stream's device (its context,
 * cuStreamGetCtx), not the current one. */
Test(order, malloc_async_on_a_stream_of_another_device_serves_that_device)
{
    static struct run r;
    run_expect(&r, "order_prog", "other_device", 1,
               "GPOOL_SIM_STRICT=1 GPOOL_SIM_DEVICES=2 GPOOL_SIM_PEER=none", 0);
}
