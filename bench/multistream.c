/* multistream.c — multi-stream variants of a (single-stream) trace, and the replay's lagged
 * completion.
 *
 * Real programs allocate on several streams: a server runs each batch on its own stream, a
 * trainer prefetches inputs on a side stream. A recorded PyTorch trace mostly has one stream, so
 * the harness derives variants from it, keeping every size and the order of every operation:
 *   "2", "4"  bursts: the trace is cut into bursts of BURST_OPS operations and burst k allocates on
 *             stream k mod N; a free keeps its block's stream (as PyTorch and gpool_free_async
 *             do), so blocks of one burst are freed on their stream while the next burst runs on
 *             another;
 *   "side"    every SIDE_EVERY-th allocation is an input prepared on a side stream and freed on the
 *             main stream after the main stream used it (the side-stream block is then pending on
 *             both streams until their work is done).
 * The lagged completion (bench_trace.lag_ops): work queued on each stream completes only lag_ops
 * operations later, as on a GPU where kernels run behind the host, so memory freed on one stream
 * is really pending for the others. It needs the simulated driver's held completion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define BURST_OPS  64
#define SIDE_EVERY 8

int bench_parse_streams(const char *s, unsigned *out)
{
    if (!strcmp(s, "1"))
        *out = 1;
    else if (!strcmp(s, "2"))
        *out = 2;
    else if (!strcmp(s, "4"))
        *out = 4;
    else if (!strcmp(s, "side"))
        *out = BENCH_STREAMS_SIDE;
    else
        return -1;
    return 0;
}

const char *bench_streams_name(unsigned variant)
{
    switch (variant) {
    case 2:
        return "2 streams in bursts";
    case 4:
        return "4 streams in bursts";
    case BENCH_STREAMS_SIDE:
        return "inputs on a side stream";
    default:
        return "as recorded";
    }
}

int bench_trace_multistream(const bench_trace *in, unsigned variant, unsigned lag_ops,
                            bench_trace *out, char *err, size_t errlen)
{
    char name[sizeof out->name];
    const char *suffix = variant == BENCH_STREAMS_SIDE ? "side" : variant == 2 ? "2s" : "4s";
    if (variant == 1) {
        snprintf(err, errlen, "1 stream is the trace as recorded: nothing to derive");
        return -1;
    }
    if (variant != 2 && variant != 4 && variant != BENCH_STREAMS_SIDE) {
        snprintf(err, errlen, "unknown stream variant %u (2, 4 or side)", variant);
        return -1;
    }
    snprintf(name, sizeof name, "%.100s@%s", in->name, suffix);
    bench_trace_init(out, name);
    unsigned nstreams = variant == BENCH_STREAMS_SIDE ? 2 : variant;
    out->n_streams = nstreams;
    for (unsigned i = 0; i < nstreams; i++)
        out->streams[i] = i; /* synthetic handles: index 0 is the default stream */
    out->lag_ops = lag_ops;
    uint16_t *slot_stream = calloc(in->n_allocs ? in->n_allocs : 1, sizeof *slot_stream);
    if (!slot_stream) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    size_t nalloc = 0;
    for (size_t i = 0; i < in->n_ops; i++) {
        const bench_op *op = &in->ops[i];
        if (op->kind == BENCH_OP_ALLOC) {
            unsigned s = variant == BENCH_STREAMS_SIDE ? (nalloc % SIDE_EVERY == SIDE_EVERY - 1)
                                                       : (unsigned)(i / BURST_OPS) % nstreams;
            nalloc++;
            slot_stream[op->slot] = (uint16_t)s;
            uint32_t slot = bench_trace_add_alloc(out, op->size, s);
            if (out->gen_failed) break;
            /* the allocation keeps its memory kind */
            out->ops[out->n_ops - 1].mem = op->mem;
            out->mem_allocs[BENCH_MEM_DEVICE]--;
            out->mem_allocs[op->mem < BENCH_MEM_KINDS ? op->mem : BENCH_MEM_DEVICE]++;
            if (slot != op->slot) {
                snprintf(err, errlen, "%s: allocation slots out of order at op %zu", in->name, i);
                free(slot_stream);
                bench_trace_free(out);
                return -1;
            }
        } else {
            bench_trace_add_free(out, op->slot);
            if (out->gen_failed) break;
            /* bursts: the block's own stream; side: every free on the main stream */
            out->ops[out->n_ops - 1].stream =
                variant == BENCH_STREAMS_SIDE ? 0 : slot_stream[op->slot];
        }
    }
    free(slot_stream);
    if (out->gen_failed || bench_trace_finish(out) != 0) {
        snprintf(err, errlen, "%s: out of host memory for the %s variant", in->name, suffix);
        bench_trace_free(out);
        return -1;
    }
    /* bench_trace_finish gives a free on stream 0 its block's stream: the side variant frees
     * on the main stream (0), so put those back */
    if (variant == BENCH_STREAMS_SIDE)
        for (size_t i = 0; i < out->n_ops; i++)
            if (out->ops[i].kind == BENCH_OP_FREE) out->ops[i].stream = 0;
    return 0;
}

/* ---- lagged completion ------------------------------------------------------------------ */

void bench_lag_begin(const bench_trace *t, CUstream *streams)
{
    if (!t->lag_ops) return;
    for (size_t i = 0; i < t->n_streams; i++)
        bench_sim_stream_hold(streams[i]);
}

void bench_lag_step(const bench_trace *t, CUstream *streams, size_t op_index)
{
    if (!t->lag_ops || (op_index + 1) % t->lag_ops) return;
    /* what was queued up to lag_ops operations ago completes; newer work stays queued. Every
     * stream is let go before any is held again: work waiting on another stream's event
     * (cuStreamWaitEvent) completes once that stream's work has, as on a GPU where all streams
     * run. Releasing and re-holding one stream at a time let a chain of waits between two
     * streams advance one link per step, so completion fell further behind with every wait
     * (lstm-train@side at lag 32 kept 545 deferred frees and grew 3x). */
    for (size_t i = 0; i < t->n_streams; i++)
        bench_sim_stream_release(streams[i]);
    for (size_t i = 0; i < t->n_streams; i++)
        bench_sim_stream_hold(streams[i]);
}

void bench_lag_end(const bench_trace *t, CUstream *streams)
{
    if (!t->lag_ops) return;
    for (size_t i = 0; i < t->n_streams; i++)
        bench_sim_stream_release(streams[i]);
}
