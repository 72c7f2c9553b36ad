/* fuzz_trace.c — libFuzzer target: the RMM replay-log parser (bench/trace.c).
 * Any input must give either 0 and a consistent trace, or -1 with a "NAME:..." message and
 * nothing allocated. A parsed trace is checked: every free names an earlier live slot with
 * the same size, stream indices are in range, peak/largest/total/unfreed agree with a
 * recount, and writing it back as CSV and parsing that gives the same ops. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_trace: ");                                                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n  [%s:%d] %s\n", __FILE__, __LINE__, #cond);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_trace(const bench_trace *t)
{
    CHECK(t->n_ops <= t->cap_ops, "n_ops > cap_ops");
    CHECK(t->n_streams >= 1 && t->n_streams <= BENCH_MAX_STREAMS, "n_streams %zu", t->n_streams);
    uint64_t *size = calloc(t->n_allocs + 1, sizeof *size);
    unsigned char *state = calloc(t->n_allocs + 1, 1); /* 0 unseen, 1 live, 2 freed */
    CHECK(size && state, "out of memory in the harness");
    uint64_t cur = 0, peak = 0, largest = 0, total = 0;
    size_t allocs = 0, live = 0;
    for (size_t i = 0; i < t->n_ops; i++) {
        const bench_op *op = &t->ops[i];
        CHECK(op->stream < t->n_streams, "op %zu stream %u >= %zu", i, op->stream, t->n_streams);
        CHECK(op->slot < t->n_allocs, "op %zu slot %u >= %zu", i, op->slot, t->n_allocs);
        CHECK(op->size <= BENCH_MAX_REQUEST, "op %zu size %llu above the limit", i,
              (unsigned long long)op->size);
        if (op->kind == BENCH_OP_ALLOC) {
            CHECK(op->slot == allocs, "allocation %zu has slot %u", allocs, op->slot);
            CHECK(state[op->slot] == 0, "slot %u allocated twice", op->slot);
            state[op->slot] = 1;
            size[op->slot] = op->size;
            allocs++;
            live++;
            cur += op->size;
            total += op->size;
            if (cur > peak) peak = cur;
            if (op->size > largest) largest = op->size;
        } else {
            CHECK(op->kind == BENCH_OP_FREE, "op %zu kind %u", i, op->kind);
            CHECK(state[op->slot] == 1, "op %zu frees slot %u, which is not live", i, op->slot);
            CHECK(op->size == size[op->slot], "op %zu free size %llu != %llu", i,
                  (unsigned long long)op->size, (unsigned long long)size[op->slot]);
            state[op->slot] = 2;
            live--;
            cur -= op->size;
        }
    }
    CHECK(allocs == t->n_allocs, "n_allocs %zu, counted %zu", t->n_allocs, allocs);
    CHECK(live == t->unfreed, "unfreed %zu, counted %zu", t->unfreed, live);
    CHECK(peak == t->peak_live, "peak_live %llu, counted %llu", (unsigned long long)t->peak_live,
          (unsigned long long)peak);
    CHECK(largest == t->largest, "largest");
    CHECK(total == t->total_bytes, "total_bytes");
    free(size);
    free(state);
}

/* Write t as CSV and parse it back: the same ops must come out. */
static void check_round_trip(const bench_trace *t)
{
    if (t->n_ops > 2000) return; /* keep each input fast */
    char path[] = "/tmp/fuzz_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CHECK(bench_trace_write_csv(t, path) == 0, "bench_trace_write_csv");
    bench_trace u;
    char err[512] = "";
    int rc = bench_trace_load(path, &u, err, sizeof err);
    unlink(path);
    CHECK(rc == 0, "re-parsing the written CSV failed: %s", err);
    CHECK(u.n_ops == t->n_ops && u.n_allocs == t->n_allocs && u.peak_live == t->peak_live &&
              u.n_streams == t->n_streams,
          "round trip changed the trace (%zu/%zu ops, %zu/%zu allocs)", u.n_ops, t->n_ops,
          u.n_allocs, t->n_allocs);
    for (size_t i = 0; i < t->n_ops; i++)
        CHECK(u.ops[i].kind == t->ops[i].kind && u.ops[i].size == t->ops[i].size &&
                  u.ops[i].slot == t->ops[i].slot,
              "round trip changed op %zu", i);
    bench_trace_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size heap copy, so reading past `size` is an ASan report */
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    bench_trace t;
    char err[256];
    memset(err, 0x55, sizeof err);
    int rc = bench_trace_parse("fuzz.csv", text, size, &t, err, sizeof err);
    if (rc == 0) {
        check_trace(&t);
        check_round_trip(&t);
        bench_trace_free(&t);
    } else {
        CHECK(rc == -1, "bench_trace_parse returned %d", rc);
        CHECK(memchr(err, 0, sizeof err) != NULL, "error message not terminated");
        CHECK(strncmp(err, "fuzz.csv", 8) == 0, "error message does not name the file: %s", err);
        CHECK(t.ops == NULL && t.n_ops == 0, "failed parse left ops allocated");
    }
    free(text);
    return 0;
}
