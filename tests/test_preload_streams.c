/* test_preload_streams.c — streams the program destroys and graphs it captures, under the
 * drop-in (issue 23), on the strict simulator (the first ordering violation aborts the helper).
 * tests/preload/streams_prog.c is the program; docs/dropin-streams.md says what is promised. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util_preload.h"

static struct run r;

#define STRICT "GPOOL_SIM_STRICT=1"

/* Create a non-blocking stream, cuMemAllocAsync x3, kernels, cuMemFreeAsync, cuStreamDestroy
 * with the work still queued (legal: cuda.h, cuStreamDestroy), the driver reusing handle
 * values. Was: 26,015 violations over 10,000 cycles (the first one aborts here). */
Test(preload_streams, destroyed_streams_with_reused_handles_have_no_violation, .timeout = 120)
{
    run_expect(&r, "streams_prog", "lifetime 2000 0", 1, STRICT " GPOOL_SIM_REUSE_STREAM_HANDLES=1",
               0);
    cr_expect_eq(field(&r, "violations"), 0, "%s", r.out);
}

/* No driver call names a destroyed stream (was: 855 of 915 cuEventRecord calls). */
Test(preload_streams, no_driver_call_names_a_destroyed_stream, .timeout = 120)
{
    for (int sync = 0; sync < 2; sync++) {
        char mode[64];
        snprintf(mode, sizeof mode, "lifetime 2000 %d", sync);
        run_expect(&r, "streams_prog", mode, 1, STRICT, 0);
        cr_expect_eq(field(&r, "destroyed_stream_calls"), 0, "sync=%d: %s", sync, r.out);
        cr_expect_eq(field(&r, "violations"), 0, "sync=%d: %s", sync, r.out);
    }
}

/* Resources stay flat: reserved bytes and live events at cycle 10,000 are those of cycle 1,000,
 * and no stream stays alive; with and without handle reuse, with and without a synchronize
 * before each destroy. Was: 2.08 GB reserved at 10,000 (no reuse, synchronized), 18.9 MB when
 * the streams are kept; 256 events kept by the interposer. */
Test(preload_streams, resources_stay_flat_over_ten_thousand_cycles, .timeout = 600)
{
    for (int reuse = 0; reuse < 2; reuse++)
        for (int sync = 0; sync < 2; sync++) {
            char env[128];
            snprintf(env, sizeof env, STRICT " GPOOL_SIM_REUSE_STREAM_HANDLES=%d", reuse);
            char mode[64];
            snprintf(mode, sizeof mode, "lifetime 10000 %d", sync);
            run_expect(&r, "streams_prog", mode, 1, env, 0);
            unsigned long res1 = field(&r, "c1000_reserved"), res2 = field(&r, "end_reserved");
            unsigned long ev1 = field(&r, "c1000_events"), ev2 = field(&r, "end_events");
            printf("lifetime reuse=%d sync=%d: reserved %lu -> %lu bytes, events %lu -> %lu, "
                   "event records %lu\n",
                   reuse, sync, res1, res2, ev1, ev2, field(&r, "event_records"));
            cr_expect_leq(res2, res1, "reuse=%d sync=%d: %s", reuse, sync, r.out);
            cr_expect_leq(res2, (unsigned long)64 << 20, "reuse=%d sync=%d: %s", reuse, sync,
                          r.out);
            cr_expect_leq(ev2, ev1, "reuse=%d sync=%d: %s", reuse, sync, r.out);
            cr_expect_leq(ev2, 70, "reuse=%d sync=%d: %s", reuse, sync, r.out);
            cr_expect_eq(field(&r, "end_streams"), 0, "%s", r.out);
            cr_expect_eq(field(&r, "violations"), 0, "%s", r.out);
            cr_expect_eq(field(&r, "destroyed_stream_calls"), 0, "%s", r.out);
        }
}

/* Every stream destroyed with its kernels still queued (held until the end): no violation, no
 * call naming a destroyed stream, reserved bytes flat (a new stream reuses the old memory by
 * waiting for the release event); the events, one per stream still working, all come back
 * once that work has completed. */
Test(preload_streams, streams_destroyed_with_work_queued_stay_flat, .timeout = 120)
{
    for (int reuse = 0; reuse < 2; reuse++) {
        char env[128];
        snprintf(env, sizeof env, STRICT " GPOOL_SIM_REUSE_STREAM_HANDLES=%d", reuse);
        run_expect(&r, "streams_prog", "lifetime 2000 0 1", 1, env, 0);
        cr_expect_eq(field(&r, "violations"), 0, "%s", r.out);
        cr_expect_eq(field(&r, "destroyed_stream_calls"), 0, "%s", r.out);
        cr_expect_leq(field(&r, "end_reserved"), field(&r, "c1000_reserved"), "%s", r.out);
        cr_expect_leq(field(&r, "end_events"), 70, "%s", r.out);
    }
}

/* cuMemAllocAsync / cudaMallocAsync and their frees on a capturing stream become graph memory
 * nodes (the driver sees them), in global and relaxed mode, and an eager allocation made while
 * the graph exists never gets the graph's memory. Was: served from the cache, no graph node,
 * the eager allocation got the graph's buffer. */
Test(preload_streams, stream_ordered_allocations_in_a_capture_become_graph_nodes, .timeout = 60)
{
    static const char *const modes[] = {"capture global", "capture relaxed"};
    for (size_t i = 0; i < 2; i++) {
        run_expect(&r, "streams_prog", modes[i], 1, STRICT, 0);
        cr_expect_eq(field(&r, "runtime"), 1, "%s", r.out);
        cr_expect_eq(field(&r, "graph_alloc_nodes"), 2, "%s: %s", modes[i], r.out);
        cr_expect_eq(field(&r, "eager_overlaps_graph"), 0, "%s: %s", modes[i], r.out);
        cr_expect_eq(field(&r, "graph_allocs_live"), 0, "%s: %s", modes[i], r.out);
        /* an eager block freed in the capture: CUDA_ERROR_INVALID_VALUE / cudaErrorInvalidValue
         * (only graph allocations get free nodes), the block still live */
        cr_expect_eq(field(&r, "eager_free_in_capture"), 1, "%s: %s", modes[i], r.out);
        cr_expect_eq(field(&r, "rt_eager_free_in_capture"), 1, "%s: %s", modes[i], r.out);
        cr_expect_eq(field(&r, "violations"), 0, "%s", r.out);
    }
    /* without the interposer the driver makes the same nodes */
    run_expect(&r, "streams_prog", "capture global", 0, STRICT, 0);
    cr_expect_eq(field(&r, "graph_alloc_nodes"), 1, "%s", r.out);
    cr_expect_eq(field(&r, "eager_overlaps_graph"), 0, "%s", r.out);
    cr_expect_eq(field(&r, "eager_free_in_capture"), 1, "%s", r.out);
}
