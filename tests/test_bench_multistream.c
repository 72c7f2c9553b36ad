/* test_bench_multistream.c — the harness's multi-stream variants of a trace and its lagged
 * completion: the variants keep every size and the order of operations, put allocations on the
 * streams they promise, and a lagged replay really leaves memory pending across streams. */
#include <criterion/criterion.h>
#include <string.h>

#include "../bench/bench.h"
#include "util_skip.h"

#define MIB BENCH_MIB

/* n rounds of: allocate 4 blocks of 4 MiB, free them */
static void rounds_trace(bench_trace *t, unsigned n)
{
    bench_trace_init(t, "rounds");
    for (unsigned r = 0; r < n; r++) {
        uint32_t s[4];
        for (int i = 0; i < 4; i++)
            s[i] = bench_trace_add_alloc(t, 4 * MIB, 0);
        for (int i = 0; i < 4; i++)
            bench_trace_add_free(t, s[i]);
    }
    bench_trace_finish(t);
}

Test(bench_multistream, bursts_keep_sizes_and_order_and_free_on_the_blocks_stream)
{
    bench_trace t, v;
    char err[256];
    rounds_trace(&t, 64);
    cr_assert_eq(bench_trace_multistream(&t, 4, 0, &v, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(v.name, "rounds@4s");
    cr_assert_eq(v.n_ops, t.n_ops);
    cr_assert_eq(v.peak_live, t.peak_live);
    cr_assert_eq(v.n_streams, 4);
    uint16_t stream_of[4096];
    unsigned used[4] = {0};
    for (size_t i = 0; i < v.n_ops; i++) {
        cr_assert_eq(v.ops[i].kind, t.ops[i].kind);
        cr_assert_eq(v.ops[i].size, t.ops[i].size);
        cr_assert_eq(v.ops[i].slot, t.ops[i].slot);
        cr_assert_lt(v.ops[i].stream, 4);
        if (v.ops[i].kind == BENCH_OP_ALLOC) {
            stream_of[v.ops[i].slot] = v.ops[i].stream;
            used[v.ops[i].stream]++;
        } else {
            cr_assert_eq(v.ops[i].stream, stream_of[v.ops[i].slot], "a free keeps its stream");
        }
    }
    for (int s = 0; s < 4; s++)
        cr_assert_gt(used[s], 0, "stream %d gets bursts", s);
    bench_trace_free(&v);
    bench_trace_free(&t);
}

Test(bench_multistream, side_variant_allocates_inputs_on_the_side_and_frees_on_the_main_stream)
{
    bench_trace t, v;
    char err[256];
    rounds_trace(&t, 16);
    cr_assert_eq(bench_trace_multistream(&t, BENCH_STREAMS_SIDE, 8, &v, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(v.lag_ops, 8);
    size_t side = 0, allocs = 0;
    for (size_t i = 0; i < v.n_ops; i++) {
        if (v.ops[i].kind == BENCH_OP_ALLOC) {
            allocs++;
            side += v.ops[i].stream == 1;
        } else {
            cr_assert_eq(v.ops[i].stream, 0, "every free on the main stream");
        }
    }
    cr_assert_eq(side, allocs / 8, "one input in eight on the side stream");
    bench_trace_free(&v);
    bench_trace_free(&t);
}

Test(bench_multistream, unknown_variants_are_refused)
{
    unsigned v;
    bench_trace t, out;
    char err[256];
    cr_assert_eq(bench_parse_streams("3", &v), -1);
    cr_assert_eq(bench_parse_streams("side", &v), 0);
    cr_assert_eq(v, BENCH_STREAMS_SIDE);
    rounds_trace(&t, 1);
    cr_assert_eq(bench_trace_multistream(&t, 1, 0, &out, err, sizeof err), -1);
    cr_assert_eq(bench_trace_multistream(&t, 3, 0, &out, err, sizeof err), -1);
    bench_trace_free(&t);
}

/* Two streams alternate bursts; with completion lagging, what one stream freed is still pending
 * when the other allocates, so the pool needs more memory than with instant completion (or it
 * waits): either way the replay sees the pending memory, and the fit never beats peak live. */
Test(bench_multistream, lagged_completion_leaves_memory_pending_across_streams)
{
    NEED_SIM();
    bench_device dev;
    char err[600];
    cr_assert_eq(bench_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    bench_trace t, now, lag;
    rounds_trace(&t, 64);
    cr_assert_eq(bench_trace_multistream(&t, 2, 0, &now, err, sizeof err), 0, "%s", err);
    cr_assert_eq(bench_trace_multistream(&t, 2, 1000, &lag, err, sizeof err), 0, "%s", err);
    bench_replay_opts o = {0};
    bench_result r_now, r_lag;
    bench_replay(&dev, "gpool", &now, &o, &r_now);
    bench_replay(&dev, "gpool", &lag, &o, &r_lag);
    cr_assert(!r_now.error && !r_lag.error, "%s %s", r_now.note, r_lag.note);
    cr_assert_eq(r_lag.failed_allocs, 0);
    cr_assert_geq(r_now.peak_reserved, 16 * MIB);
    cr_assert_gt(r_lag.peak_reserved, r_now.peak_reserved,
                 "pending memory is real under lag: %llu vs %llu bytes",
                 (unsigned long long)r_lag.peak_reserved, (unsigned long long)r_now.peak_reserved);
    bench_result_free(&r_now);
    bench_result_free(&r_lag);
    bench_trace_free(&now);
    bench_trace_free(&lag);
    bench_trace_free(&t);
    bench_device_close(&dev);
}
