/* test_bench_multistream.c — the harness's multi-stream variants of a trace and its lagged
 * completion: the variants keep every size and the order of operations, put allocations on the
 * streams they promise, and a lagged replay really leaves memory pending across streams. */
#include <criterion/criterion.h>
#include <string.h>

#include "../bench/bench.h"
#include "util_sim.h"
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
 * when the other allocates, so the pool needs more memory than with instant completion, or it
 * makes the stream wait: either way the replay sees the pending memory. */
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
    /* gpool either maps more memory or makes one stream wait for the other's work (an event
     * recorded and waited on: stream calls the instant replay never makes) */
    uint64_t waits_lag = r_lag.first_pass_by_entry[BENCH_DRV_STREAM];
    uint64_t waits_now = r_now.first_pass_by_entry[BENCH_DRV_STREAM];
    cr_assert(r_lag.peak_reserved > r_now.peak_reserved || waits_lag > waits_now,
              "pending memory is real under lag: %llu vs %llu bytes, %llu vs %llu stream calls",
              (unsigned long long)r_lag.peak_reserved, (unsigned long long)r_now.peak_reserved,
              (unsigned long long)waits_lag, (unsigned long long)waits_now);
    bench_result_free(&r_now);
    bench_result_free(&r_lag);
    bench_trace_free(&now);
    bench_trace_free(&lag);
    bench_trace_free(&t);
    bench_device_close(&dev);
}

/* One lag step completes all the work queued before it, a chain of waits between streams too:
 * A waits on an event of B recorded after B's work, so A's work completes only after B's. A step
 * that let one stream go and held it again before letting the next go left A behind (it saw B
 * still held), and with every wait gpool added completion fell further behind. */
Test(bench_multistream, a_lag_step_completes_waits_across_streams)
{
    NEED_SIM();
    bench_device dev;
    char err[600];
    cr_assert_eq(bench_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*ctx_set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*rm)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*ev_mk)(CUevent *, unsigned) = sim_driver_proc("cuEventCreate");
    CUresult (*ev_rm)(CUevent) = sim_driver_proc("cuEventDestroy");
    CUresult (*rec)(CUevent, CUstream) = sim_driver_proc("cuEventRecord");
    CUresult (*query)(CUevent) = sim_driver_proc("cuEventQuery");
    CUresult (*wait)(CUstream, CUevent, unsigned) = sim_driver_proc("cuStreamWaitEvent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = sim_driver_proc("cuMemAlloc");
    CUresult (*mfree)(CUdeviceptr) = sim_driver_proc("cuMemFree");
    CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream) =
        sim_driver_proc("cuMemsetD8Async");
    cr_assert(retain && ctx_set && mk && rm && ev_mk && ev_rm && rec && query && wait && alloc &&
              mfree && memset_async);
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    CUstream s[2]; /* s[0] = A waits on s[1] = B */
    CUevent on_b, on_a;
    CUdeviceptr p;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(mk(&s[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(ev_mk(&on_b, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(ev_mk(&on_a, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(alloc(&p, 4096), CUDA_SUCCESS);
    bench_trace t;
    bench_trace_init(&t, "waits");
    t.n_streams = 2;
    t.streams[0] = 0;
    t.streams[1] = 1;
    t.lag_ops = 1;
    bench_lag_begin(&t, s);
    cr_assert_eq(memset_async(p, 1, 4096, s[1]), CUDA_SUCCESS); /* B's work */
    cr_assert_eq(rec(on_b, s[1]), CUDA_SUCCESS);
    cr_assert_eq(wait(s[0], on_b, 0), CUDA_SUCCESS);
    cr_assert_eq(memset_async(p, 2, 4096, s[0]), CUDA_SUCCESS); /* A's, after B's */
    cr_assert_eq(rec(on_a, s[0]), CUDA_SUCCESS);
    cr_assert_eq(query(on_a), CUDA_ERROR_NOT_READY, "held: nothing completes before the step");
    bench_lag_step(&t, s, 0);
    cr_assert_eq(query(on_b), CUDA_SUCCESS, "B's work queued before the step completed");
    cr_assert_eq(query(on_a), CUDA_SUCCESS, "A's work, which waited only for B's, completed too");
    bench_lag_end(&t, s);
    cr_assert_eq(mfree(p), CUDA_SUCCESS);
    cr_assert_eq(ev_rm(on_a), CUDA_SUCCESS);
    cr_assert_eq(ev_rm(on_b), CUDA_SUCCESS);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(rm(s[i]), CUDA_SUCCESS);
    bench_trace_free(&t);
    bench_device_close(&dev);
}
