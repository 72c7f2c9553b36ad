/* test_bench_strategies.c — gpool-bench strategies, replay and fit on the simulated driver,
 * with hand-made traces whose answers are known. On a real GPU (GPOOL_TEST_REAL_GPU=1) the
 * whole suite skips. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "../bench/bench.h"
#include "util_skip.h"

#define MIB BENCH_MIB

static bench_device dev;

static void open_device(void)
{
    NEED_SIM(); /* skips every test of the suite on a real GPU */
    char err[600];
    cr_assert_eq(bench_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    cr_assert(dev.simulated, "tests expect the simulated driver (GPOOL_LIBCUDA)");
    cr_assert(bench_sim_available());
}

static void close_device(void)
{
    bench_device_close(&dev);
}

TestSuite(bench_strategies, .init = open_device, .fini = close_device);

/* A trace from a compact script: "+S" allocates S bytes (slot = order of '+'), "-N" frees
 * slot N. */
static void make_trace(bench_trace *t, const uint64_t *script, size_t n)
{
    bench_trace_init(t, "hand-made");
    for (size_t i = 0; i < n; i++) {
        if (script[i] & (1ull << 63))
            bench_trace_add_free(t, (uint32_t)(script[i] & 0xffffffff));
        else
            bench_trace_add_alloc(t, script[i], 0);
    }
    bench_trace_finish(t);
}
#define FREE(slot) ((1ull << 63) | (slot))

static bench_result run(const char *spec, const bench_trace *t, uint64_t capacity)
{
    bench_replay_opts o = {.capacity = capacity, .time_ops = 1};
    bench_result r;
    cr_assert_eq(bench_replay(&dev, spec, t, &o, &r), 0);
    if (capacity) bench_sim_set_capacity(dev.ordinal, dev.total_mem);
    return r;
}

/* Replay under a capacity too small for the trace: `failed` allocations fail, replay goes on
 * and leaks nothing. The caller checks more and frees the result. */
static bench_result run_short(const char *spec, const bench_trace *t, uint64_t capacity,
                              uint64_t failed)
{
    bench_result r = run(spec, t, capacity);
    cr_assert_eq(r.failed_allocs, failed);
    cr_assert_eq(r.sim_leaked, 0);
    return r;
}

static void expect_clean(const bench_result *r)
{
    cr_assert_not(r->error, "%s: %s", r->strategy, r->note);
    cr_assert_not(r->skipped, "%s: %s", r->strategy, r->note);
    cr_assert_eq(r->sim_leaked, 0, "%s leaked %llu bytes", r->strategy,
                 (unsigned long long)r->sim_leaked);
    cr_assert_eq(bench_sim_bytes_in_use(dev.ordinal), 0);
    cr_assert_eq(bench_sim_live_objects(), 0);
}

Test(bench_strategies, device_is_labelled_simulated)
{
    cr_assert_str_eq(dev.name, "simulated");
    cr_assert(dev.total_mem > 0);
}

Test(bench_strategies, bfc_sizes)
{
    cr_assert_eq(bench_bfc_round_size(1), 512);
    cr_assert_eq(bench_bfc_round_size(512), 512);
    cr_assert_eq(bench_bfc_round_size(513), 1024);
    cr_assert_eq(bench_bfc_segment_size(512), 2 * MIB);
    cr_assert_eq(bench_bfc_segment_size(MIB), 2 * MIB);
    cr_assert_eq(bench_bfc_segment_size(MIB + 512), 20 * MIB);
    cr_assert_eq(bench_bfc_segment_size(10 * MIB - 512), 20 * MIB);
    cr_assert_eq(bench_bfc_segment_size(10 * MIB), 10 * MIB);
    cr_assert_eq(bench_bfc_segment_size(12 * MIB + 512), 14 * MIB);
}

Test(bench_strategies, bfc_segments_per_pool)
{
    /* 1000 B: a 2 MiB small segment; 3 MiB: a 20 MiB large segment, split; 12 MiB fits the
     * 17 MiB remainder; 18 MiB + 1 gets its own segment, rounded up to 20 MiB. After all are
     * freed a 1500 B request reuses the small segment: no new driver call. */
    const uint64_t script[] = {1000,    3 * MIB, 12 * MIB, 18 * MIB + 1, FREE(0),
                               FREE(1), FREE(2), FREE(3),  1500,         FREE(4)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    bench_result r = run("bfc", &t, 0);
    expect_clean(&r);
    cr_assert_eq(r.failed_allocs, 0);
    cr_assert_eq(r.peak_reserved, 42 * MIB);
    cr_assert_eq(r.driver_calls, 3);
    cr_assert_eq(r.peak_live, 1000 + 3 * MIB + 12 * MIB + 18 * MIB + 1);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, bfc_splits_and_coalesces)
{
    /* four 512 KiB blocks fill one 2 MiB small segment; freeing the middle two coalesces them
     * into the 1 MiB the next request takes. */
    const uint64_t K512 = 512 * 1024;
    const uint64_t script[] = {K512,    K512, K512,    K512,    FREE(1),
                               FREE(2), MIB,  FREE(0), FREE(3), FREE(4)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    bench_result r = run("bfc", &t, 0);
    expect_clean(&r);
    cr_assert_eq(r.peak_reserved, 2 * MIB);
    cr_assert_eq(r.driver_calls, 1);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, bfc_releases_cache_and_retries)
{
    /* 2 MiB and 20 MiB segments end up cached; a 21 MiB request needs a 22 MiB segment. */
    const uint64_t script[] = {1024, FREE(0), 3 * MIB, FREE(1), 21 * MIB, FREE(2)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    /* 24 MiB: the 22 MiB segment fails, the cache is released, the retry succeeds:
     * alloc, alloc, failed alloc, free, free, alloc */
    bench_result r = run("bfc", &t, 24 * MIB);
    expect_clean(&r);
    cr_assert_eq(r.failed_allocs, 0);
    cr_assert_eq(r.driver_calls, 6);
    cr_assert_eq(r.peak_reserved, 22 * MIB);
    bench_result_free(&r);
    r = run("bfc", &t, 22 * MIB);
    expect_clean(&r);
    cr_assert_eq(r.failed_allocs, 0);
    bench_result_free(&r);
    /* 20 MiB: the 20 MiB segment fits once the small one is released; 22 MiB never fits */
    r = run_short("bfc", &t, 20 * MIB, 1);
    cr_assert_eq(r.first_failure, 5);
    bench_result_free(&r);
    r = run_short("bfc", &t, 10 * MIB, 2);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, cuda_counts_every_call)
{
    const uint64_t script[] = {1000, 2000, FREE(0), 3000, FREE(1), FREE(2)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    bench_result r = run("cuda", &t, 0);
    expect_clean(&r);
    cr_assert_eq(r.driver_calls, 6);
    cr_assert_eq(r.peak_reserved, 5000);
    cr_assert_eq(r.peak_live, 5000);
    cr_assert_eq(r.allocs, 3);
    cr_assert_eq(r.frees, 3);
    cr_assert(r.p50_ns > 0);
    cr_assert(r.sim_calls >= 6);
    bench_result_free(&r);
    /* a capacity below the peak makes the last allocation fail, and replay goes on */
    r = run_short("cuda", &t, 4000, 1);
    cr_assert_eq(r.first_failure, 4);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, fit_cuda_one_6mib_block)
{
    bench_trace t;
    char err[512];
    cr_assert_eq(bench_trace_load("bench/traces/test/one-6mib.csv", &t, err, sizeof err), 0, "%s",
                 err);
    bench_fit f;
    cr_assert_eq(bench_fit_run(&dev, "cuda", &t, 0, &f), 0);
    cr_assert_not(f.error, "%s", f.note);
    cr_assert_eq(f.min_capacity, 6 * MIB); /* the simulator charges cuMemAlloc exactly */
    cr_assert_float_eq(f.ratio, 1.0, 1e-9);
    cr_assert(f.goal_met);
    cr_assert_not(f.leak_warned);
    cr_assert_eq(f.driver_calls, 2);
    /* bfc puts a 6 MiB request in a 20 MiB large segment */
    cr_assert_eq(bench_fit_run(&dev, "bfc", &t, 0, &f), 0);
    cr_assert_eq(f.min_capacity, 20 * MIB);
    cr_assert_not(f.goal_met);
    bench_trace_free(&t);
    /* 5 MiB + 1 byte with cuda: the next 2 MiB step, 6 MiB */
    const uint64_t script[] = {5 * MIB + 1, FREE(0)};
    make_trace(&t, script, 2);
    cr_assert_eq(bench_fit_run(&dev, "cuda", &t, 0, &f), 0);
    cr_assert_eq(f.min_capacity, 6 * MIB);
    cr_assert_eq(bench_sim_bytes_in_use(dev.ordinal), 0);
    bench_trace_free(&t);
}

Test(bench_strategies, fit_bfc_on_a_shipped_trace_matches_the_readme)
{
    /* traces/README.md: the model of PyTorch's allocator needs 1.036 on transformer-train */
    bench_trace t;
    char err[512];
    cr_assert_eq(bench_trace_load("bench/traces/transformer-train.csv", &t, err, sizeof err), 0,
                 "%s", err);
    bench_fit f;
    cr_assert_eq(bench_fit_run(&dev, "bfc", &t, 0, &f), 0);
    cr_assert_not(f.error, "%s", f.note);
    cr_assert_float_eq(f.ratio, 1.036, 0.0015);
    bench_trace_free(&t);
}

Test(bench_strategies, gpool_replays_cleanly)
{
    bench_workload_opts o;
    bench_workload_defaults(&o);
    o.ops = 5000;
    bench_trace t;
    char err[256];
    cr_assert_eq(bench_workload_make("random", &o, &t, err, sizeof err), 0, "%s", err);
    bench_result r = run("gpool", &t, 0);
    expect_clean(&r);
    cr_assert_eq(r.failed_allocs, 0);
    cr_assert(r.peak_reserved >= r.peak_live);
    cr_assert(r.driver_calls > 0);
    bench_result_free(&r);
    r = run("gpool:tcache_bytes=0", &t, 0);
    expect_clean(&r);
    bench_result_free(&r);
    r = run("gpool:no_such_key=1", &t, 0);
    cr_assert(r.error);
    cr_assert(strstr(r.note, "no_such_key"), "%s", r.note);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, host_and_async_strategies_run_or_skip)
{
    const uint64_t script[] = {4096, 100000, FREE(0), FREE(1)};
    bench_trace t;
    make_trace(&t, script, 4);
    bench_result r = run("cuda-async", &t, 0);
    cr_assert(r.skipped, "cuda-async must skip on the simulated driver");
    cr_assert(strstr(r.note, "real GPU only"), "%s", r.note);
    bench_result_free(&r);
    r = run("cuda-host", &t, 0);
    cr_assert_not(r.error, "%s", r.note);
    cr_assert_eq(r.driver_calls, 4);
    bench_result_free(&r);
    r = run("gpool-pinned", &t, 0);
    cr_assert_not(r.error, "%s", r.note); /* ok, or skipped when the library lacks pinned */
    cr_assert_eq(bench_sim_live_objects(), 0);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, lookup)
{
    bench_strategy s;
    char err[300];
    cr_assert_eq(bench_strategy_lookup("bfc", &s, err, sizeof err), 0);
    cr_assert_str_eq(s.ops->name, "bfc");
    cr_assert_eq(bench_strategy_lookup("gpool:tcache_bytes=0", &s, err, sizeof err), 0);
    cr_assert_str_eq(s.args, "tcache_bytes=0");
    cr_assert_eq(bench_strategy_lookup("bfc:x=1", &s, err, sizeof err), -1);
    cr_assert(strstr(err, "takes no options"), "%s", err);
    cr_assert_eq(bench_strategy_lookup("slab", &s, err, sizeof err), -1);
    cr_assert(strstr(err, "unknown strategy \"slab\""), "%s", err);
}

static bench_result run_passes(const char *spec, const bench_trace *t, unsigned passes)
{
    bench_replay_opts o = {.passes = passes};
    bench_result r;
    cr_assert_eq(bench_replay(&dev, spec, t, &o, &r), 0);
    return r;
}

Test(bench_strategies, passes_count_driver_calls_per_pass)
{
    /* slot 2 is never freed: each pass ends by freeing it, so every pass starts empty */
    const uint64_t script[] = {1000, 3 * MIB, 12 * MIB, FREE(0), FREE(1), 18 * MIB + 1, FREE(3)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    cr_assert_eq(t.unfreed, 1);

    /* cuda: the same 8 calls in every pass (4 allocs, 4 frees with the end-of-pass one) */
    bench_result r = run_passes("cuda", &t, 3);
    expect_clean(&r);
    cr_assert_eq(r.passes, 3);
    cr_assert_eq(r.allocs, 12);
    cr_assert_eq(r.frees, 9); /* the trace's frees; the end-of-pass ones are not counted */
    cr_assert_eq(r.driver_calls_first_pass, 8);
    cr_assert_eq(r.driver_calls_last_pass, 8);
    cr_assert_eq(r.driver_calls, 24);
    bench_result_free(&r);

    /* bfc: segments are made in the first pass only (2 MiB small, 20 MiB large, 20 MiB for
     * 18 MiB + 1), then everything comes from its cache */
    r = run_passes("bfc", &t, 3);
    expect_clean(&r);
    cr_assert_eq(r.driver_calls_first_pass, 3);
    cr_assert_eq(r.driver_calls_last_pass, 0);
    cr_assert_eq(r.driver_calls, 3); /* counted before fini releases the segments */
    cr_assert_eq(r.peak_reserved, 42 * MIB);
    bench_result_free(&r);

    /* gpool: steady state after the first pass */
    r = run_passes("gpool", &t, 2);
    expect_clean(&r);
    cr_assert_eq(r.passes, 2);
    cr_assert(r.driver_calls_first_pass > 0);
    cr_assert_eq(r.driver_calls_last_pass, 0, "gpool made %llu driver calls in the last pass",
                 (unsigned long long)r.driver_calls_last_pass);
    cr_assert_eq(r.failed_allocs, 0);
    bench_result_free(&r);

    /* one pass (the default): first and last are the same pass */
    r = run_passes("bfc", &t, 0);
    cr_assert_eq(r.passes, 1);
    cr_assert_eq(r.driver_calls_first_pass, 3);
    cr_assert_eq(r.driver_calls_last_pass, 3);
    bench_result_free(&r);
    bench_trace_free(&t);
}

Test(bench_strategies, passes_on_a_workload_reach_steady_state)
{
    bench_workload_opts o;
    bench_workload_defaults(&o);
    o.frames = 30;
    bench_trace t;
    char err[256];
    cr_assert_eq(bench_workload_make("frame", &o, &t, err, sizeof err), 0, "%s", err);
    bench_result r = run_passes("gpool", &t, 3);
    expect_clean(&r);
    cr_assert_eq(r.passes, 3);
    cr_assert_eq(r.allocs, 3 * t.n_allocs);
    cr_assert_eq(r.driver_calls_last_pass, 0, "gpool: %llu driver calls in the last pass",
                 (unsigned long long)r.driver_calls_last_pass);
    bench_result_free(&r);
    r = run_passes("bfc", &t, 3);
    expect_clean(&r);
    cr_assert_eq(r.driver_calls_last_pass, 0);
    bench_result_free(&r);
    bench_trace_free(&t);
}

/* The snapshot written at the trace's peak reads back with the blocks live there. */
Test(bench_strategies, snapshot_at_peak_round_trips)
{
    const uint64_t script[] = {3 * MIB,    5 * MIB, FREE(0), 4 * MIB, 1000,
                               600 * 1024, FREE(2), FREE(1), FREE(3), FREE(4)};
    bench_trace t;
    make_trace(&t, script, sizeof script / sizeof script[0]);
    cr_assert_eq(bench_trace_peak_op(&t), 5);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test-bench-snap-%d.json", (int)getpid());
    bench_replay_opts o = {.snapshot = path};
    bench_result r;
    cr_assert_eq(bench_replay(&dev, "gpool", &t, &o, &r), 0);
    expect_clean(&r);
    cr_assert_eq(r.snapshot, 1, "%s", r.snapshot_err);
    bench_snapshot s;
    char err[512];
    cr_assert_eq(bench_snapshot_load(path, &s, err, sizeof err), 0, "%s", err);
    cr_assert(s.n_regions >= 1);
    cr_assert_str_eq(s.regions[0].kind, "device");
    /* live at op 5: 5 MiB, 4 MiB, 1000 B and 600 KiB */
    uint64_t live = 5 * MIB + 4 * MIB + 1000 + 600 * 1024;
    cr_assert_eq(s.stats_requested, live);
    uint64_t in_use = s.state_bytes[BENCH_RANGE_IN_USE] + s.state_bytes[BENCH_RANGE_SLAB];
    cr_assert(in_use >= 5 * MIB + 4 * MIB + 600 * 1024, "in use %llu", (unsigned long long)in_use);
    cr_assert(s.backed >= in_use - s.state_bytes[BENCH_RANGE_SLAB]);
    cr_assert(s.driver_calls > 0);
    size_t blocks = 0;
    for (size_t i = 0; i < s.n_regions; i++)
        for (size_t j = 0; j < s.regions[i].n_ranges; j++)
            blocks += s.regions[i].ranges[j].state == BENCH_RANGE_IN_USE;
    cr_assert(blocks >= 3, "%zu in-use ranges", blocks);
    bench_snapshot_free(&s);
    unlink(path);
    bench_result_free(&r);

    /* bfc has no snapshot: nothing written, no error */
    r.snapshot = 7;
    cr_assert_eq(bench_replay(&dev, "bfc", &t, &o, &r), 0);
    cr_assert_eq(r.snapshot, 0);
    cr_assert_neq(access(path, F_OK), 0);
    bench_result_free(&r);
    bench_trace_free(&t);
}
