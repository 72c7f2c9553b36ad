/* fuzz_ops.c — libFuzzer target: an operation sequence read from the input runs against a
 * fresh pool on the simulated driver (64 MiB device), and every invariant is checked after
 * every operation:
 *   - live blocks never overlap (own interval set) and are aligned as asked;
 *   - contents survive (pattern written at alloc, checked at free and at the end);
 *   - GPOOL_ALLOC_ZERO blocks read as zero;
 *   - gpool_get_stats adds up: live_blocks, requested and in-use bytes match the model,
 *     allocs - frees == live_blocks, totals are the sums of the kinds, reserved bytes match
 *     the simulator's bytes in use;
 *   - a rejected free (interior, foreign, double) changes nothing;
 *   - a block freed on a held stream is not handed to another stream until that stream's
 *     work completed (released, or a forced synchronization), under stream_reuse=events;
 *     under the default (wait) another stream may get it once gpool made it wait for that
 *     work (cuStreamWaitEvent), which the simulator's happens-before referee checks at the
 *     new block's first touch (every block is touched on its stream when allocated);
 *   - out of memory only when the pages live blocks touch leave no room (no OOM from
 *     fragmentation), and trim(0) gives back every page that holds no live byte;
 *   - destroy gives everything back: simulator live objects 0, bytes in use 0;
 *   - the executable model (tests/util_model.c, shared with test_model) agrees after every
 *     operation: its stats invariants (peaks never fall, ooms once per failed allocation,
 *     cached = reserved - in use, totals) and its must-succeed rule (gpool.h).
 * Host kinds may answer GPOOL_ERR_UNSUPPORTED (not built yet); that status is accepted.
 *
 * Input format: byte 0 picks a pool configuration, then each op is one opcode byte followed
 * by its argument bytes (missing bytes read as 0). At most MAX_OPS ops run per input.
 * GPOOL_FUZZ_TRACE=1 prints each operation, to read what a crash input did. */
#include <stdint.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "gpool.h"
#include "util_model.h"
#include "util_pool.h"
#include "util_sim.h"

#define CAPACITY  ((size_t)64 << 20)
#define GRAN      ((size_t)2 << 20)
#define SLOTS     48
#define MAX_OPS   200
#define NSTREAMS  3 /* index 0: the default (NULL) stream, 1..2 created streams */
#define MAX_LARGE ((size_t)24 << 20)
#define SAMPLE    997 /* the step fill_pattern/check_pattern use above 4 KiB */

/* ---- failure reporting: print what broke and abort so libFuzzer saves the input ---------- */

static unsigned long cur_op;
static const char *cur_opname = "";

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_ops: invariant broken at op %lu (%s): ", cur_op, cur_opname);    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n  [%s:%d] %s\n  gpool_last_error: %s\n", __FILE__, __LINE__, #cond, \
                    gpool_last_error());                                                           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* GPOOL_FUZZ_TRACE=1 prints every operation (to read a crash input). */
#define TRACE(...)                                                                                 \
    do {                                                                                           \
        static int on_ = -1;                                                                       \
        if (on_ < 0) on_ = getenv("GPOOL_FUZZ_TRACE") != NULL;                                     \
        if (on_) {                                                                                 \
            fprintf(stderr, "op %lu: ", cur_op);                                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Known, reported library bugs can be skipped while fuzzing for others:
 * GPOOL_FUZZ_SKIP=name,name (names: see the skip_known() calls). */
static int skip_known(const char *name)
{
    const char *v = getenv("GPOOL_FUZZ_SKIP");
    return v && strstr(v, name) != NULL;
}

/* ---- input reader ------------------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}
static uint16_t u16(reader *r)
{
    uint16_t lo = u8(r);
    return (uint16_t)(lo | (uint16_t)u8(r) << 8);
}
static uint32_t u24(reader *r)
{
    uint32_t v = u16(r);
    return v | (uint32_t)u8(r) << 16;
}

/* ---- the model --------------------------------------------------------------------------- */

typedef struct block {
    int live;
    uintptr_t ptr;
    size_t size, rounded; /* requested, and the size gpool_block_info reports */
    gpool_mem_kind kind;
    int stream; /* index into streams[] it was allocated on */
    uint32_t seed;
} block;

typedef struct pending {
    uintptr_t ptr;
    size_t size;
    int stream;
    unsigned waited_by; /* streams made to wait on this work (STREAM_WAIT): safe for them */
} pending;

static const struct sim_api *sim;
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned);
static CUresult (*p_cuEventDestroy)(CUevent);
/* The simulator's happens-before referee: a kernel on a stream writing a block, and the count of
 * stream-ordering violations (0 is the oracle for stream safety: every block is "used" on its
 * stream as soon as it is handed out, so reuse that is not ordered after earlier work races). */
static CUresult (*p_touch)(CUstream, CUdeviceptr, size_t, int);
static unsigned long (*p_violations)(void);

static struct state {
    gpool_t *pool;
    block b[SLOTS];
    CUstream streams[NSTREAMS];
    int held[NSTREAMS];
    pending pend[SLOTS * 2];
    size_t npend;
    unsigned long forced_syncs;
    unsigned long syncs; /* synchronize calls of any kind: all prior work is then done */
    /* Small blocks freed on another stream than they were allocated on park as "pending"
     * slots, which count as in use until that stream's work is done: an upper bound. */
    uint64_t maybe_pending_rounded, maybe_pending_requested;
    uint32_t next_seed;
    int stream_wait_used; /* a GPOOL_ALLOC_STREAM_WAIT block was allocated in this input */
    int events_only;      /* stream_reuse=events: gpool never makes a stream wait on its own */
} S;

static model M; /* the executable model, mirrored from S.b */

static void *load_proc(const char *name)
{
    void *f = sim_driver_proc(name);
    if (!f) {
        fprintf(stderr, "fuzz_ops: simulator lacks %s\n", name);
        abort();
    }
    return f;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv; /* libFuzzer's signature; no options of our own */
    /* The simulator: $GPOOL_LIBCUDA, else the one built next to this binary's build tree. */
    if (!getenv("GPOOL_LIBCUDA")) setenv("GPOOL_LIBCUDA", "build/fuzz/sim/libcuda.so.1", 1);
    unsetenv("GPOOL_CONF");
    sim = sim_api();
    if (!sim) {
        fprintf(stderr, "fuzz_ops: GPOOL_LIBCUDA=%s is not the simulated driver\n",
                getenv("GPOOL_LIBCUDA"));
        exit(2);
    }
    *(void **)&p_cuInit = load_proc("cuInit");
    *(void **)&p_cuCtxSetCurrent = load_proc("cuCtxSetCurrent");
    *(void **)&p_cuDevicePrimaryCtxRetain = load_proc("cuDevicePrimaryCtxRetain");
    *(void **)&p_cuDevicePrimaryCtxRelease = load_proc("cuDevicePrimaryCtxRelease");
    *(void **)&p_cuStreamCreate = load_proc("cuStreamCreate");
    *(void **)&p_cuStreamDestroy = load_proc("cuStreamDestroy");
    *(void **)&p_cuMemsetD8Async = load_proc("cuMemsetD8Async");
    *(void **)&p_cuEventCreate = load_proc("cuEventCreate");
    *(void **)&p_cuEventRecord = load_proc("cuEventRecord");
    *(void **)&p_cuStreamWaitEvent = load_proc("cuStreamWaitEvent");
    *(void **)&p_cuEventDestroy = load_proc("cuEventDestroy");
    *(void **)&p_touch = dlsym(sim->lib, "gpoolsim_touch");
    *(void **)&p_violations = dlsym(sim->lib, "gpoolsim_violations");
    if (!p_touch || !p_violations) {
        fprintf(stderr, "fuzz_ops: the simulator has no happens-before referee\n");
        exit(2);
    }
    sim->set_capacity(0, CAPACITY);
    return 0;
}

/* ---- model queries ----------------------------------------------------------------------- */

static int overlaps(uintptr_t a, size_t an, uintptr_t b, size_t bn)
{
    return a < b + bn && b < a + an;
}

/* Number of distinct granularity pages touched by live device blocks. */
static size_t touched_pages(void)
{
    uintptr_t first[SLOTS], last[SLOTS];
    size_t n = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (!S.b[i].live || S.b[i].kind != GPOOL_MEM_DEVICE) continue;
        first[n] = S.b[i].ptr / GRAN;
        last[n] = (S.b[i].ptr + S.b[i].rounded - 1) / GRAN;
        n++;
    }
    /* insertion sort by first page, then count the union */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && first[j - 1] > first[j]; j--) {
            uintptr_t f = first[j], l = last[j];
            first[j] = first[j - 1], last[j] = last[j - 1];
            first[j - 1] = f, last[j - 1] = l;
        }
    size_t pages = 0;
    uintptr_t end = 0; /* one past the last page counted */
    for (size_t i = 0; i < n; i++) {
        uintptr_t lo = first[i] > end ? first[i] : end;
        if (last[i] + 1 > lo) pages += last[i] + 1 - lo;
        if (last[i] + 1 > end) end = last[i] + 1;
    }
    return pages;
}

static int live_at(uintptr_t p)
{
    for (int i = 0; i < SLOTS; i++)
        if (S.b[i].live && S.b[i].ptr == p) return i;
    return -1;
}

/* A forced synchronization completes every held stream's work as far as we can tell: the
 * holds are gone (sim_complete clears them) and pending blocks became reusable. */
static unsigned long sync_calls(void)
{
    return sim->call_count("cuCtxSynchronize") + sim->call_count("cuStreamSynchronize") +
           sim->call_count("cuEventSynchronize");
}

static void note_forced_syncs(void)
{
    /* Any synchronize completes the work queued so far (conservatively: on every stream), so
     * blocks pending before it may be reused; later frees on held streams pend again. */
    unsigned long n = sync_calls();
    if (n != S.syncs) {
        TRACE("a synchronize ran: nothing pending any more");
        S.syncs = n;
        S.npend = 0;
    }
    unsigned long f = sim->forced_syncs();
    if (f == S.forced_syncs) return;
    S.forced_syncs = f;
    S.npend = 0;
    for (int s = 1; s < NSTREAMS; s++)
        if (S.held[s]) {
            sim->stream_release(S.streams[s]);
            S.held[s] = 0;
        }
}

static void check_zero(uintptr_t p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t step = n > 4096 ? SAMPLE : 1;
    for (size_t i = 0; i < n; i += step)
        CHECK(b[i] == 0, "ZERO block %#lx byte %zu is %u", (unsigned long)p, i, b[i]);
    CHECK(b[n - 1] == 0, "ZERO block last byte");
}

static void check_stats(void)
{
    gpool_stats s = GPOOL_STATS_INIT;
    CHECK(gpool_get_stats(S.pool, &s) == GPOOL_OK, "gpool_get_stats failed");
    uint64_t live[GPOOL_MEM_KIND_COUNT] = {0}, req[GPOOL_MEM_KIND_COUNT] = {0},
             used[GPOOL_MEM_KIND_COUNT] = {0};
    for (int i = 0; i < SLOTS; i++) {
        if (!S.b[i].live) continue;
        live[S.b[i].kind]++;
        req[S.b[i].kind] += S.b[i].size;
        used[S.b[i].kind] += S.b[i].rounded;
    }
    gpool_kind_stats tot = {0};
    for (int k = 1; k < GPOOL_MEM_KIND_COUNT; k++) {
        const gpool_kind_stats *ks = &s.kind[k];
        CHECK(ks->live_blocks == live[k], "kind %d live_blocks %llu, model %llu", k,
              (unsigned long long)ks->live_blocks, (unsigned long long)live[k]);
        CHECK(ks->allocs - ks->frees == ks->live_blocks,
              "kind %d allocs %llu - frees %llu != live %llu", k, (unsigned long long)ks->allocs,
              (unsigned long long)ks->frees, (unsigned long long)ks->live_blocks);
        uint64_t slack_req = k == GPOOL_MEM_DEVICE ? S.maybe_pending_requested : 0;
        uint64_t slack_used = k == GPOOL_MEM_DEVICE ? S.maybe_pending_rounded : 0;
        CHECK(ks->requested_bytes >= req[k] && ks->requested_bytes <= req[k] + slack_req,
              "kind %d requested_bytes %llu, model %llu (+ up to %llu pending)", k,
              (unsigned long long)ks->requested_bytes, (unsigned long long)req[k],
              (unsigned long long)slack_req);
        CHECK(ks->in_use_bytes >= used[k] && ks->in_use_bytes <= used[k] + slack_used,
              "kind %d in_use_bytes %llu, model (block sizes) %llu (+ up to %llu pending)", k,
              (unsigned long long)ks->in_use_bytes, (unsigned long long)used[k],
              (unsigned long long)slack_used);
        CHECK(ks->reserved_bytes >= ks->in_use_bytes, "kind %d reserved %llu < in use %llu", k,
              (unsigned long long)ks->reserved_bytes, (unsigned long long)ks->in_use_bytes);
        CHECK(ks->cached_bytes == ks->reserved_bytes - ks->in_use_bytes,
              "kind %d cached %llu != reserved - in use", k, (unsigned long long)ks->cached_bytes);
        CHECK(ks->peak_in_use_bytes >= ks->in_use_bytes, "kind %d peak_in_use below in_use", k);
        if (!skip_known("peak_reserved"))
            CHECK(ks->peak_reserved_bytes >= ks->reserved_bytes,
                  "kind %d peak_reserved_bytes %llu below reserved_bytes %llu", k,
                  (unsigned long long)ks->peak_reserved_bytes,
                  (unsigned long long)ks->reserved_bytes);
        tot.live_blocks += ks->live_blocks;
        tot.requested_bytes += ks->requested_bytes;
        tot.in_use_bytes += ks->in_use_bytes;
        tot.reserved_bytes += ks->reserved_bytes;
        tot.allocs += ks->allocs;
        tot.frees += ks->frees;
    }
    const gpool_kind_stats *t = &s.kind[GPOOL_MEM_AUTO];
    CHECK(t->live_blocks == tot.live_blocks && t->requested_bytes == tot.requested_bytes &&
              t->in_use_bytes == tot.in_use_bytes && t->reserved_bytes == tot.reserved_bytes &&
              t->allocs == tot.allocs && t->frees == tot.frees,
          "kind[AUTO] is not the sum of the kinds");
    size_t sim_bytes = sim->bytes_in_use(0);
    CHECK(s.kind[GPOOL_MEM_DEVICE].reserved_bytes == sim_bytes,
          "device reserved_bytes %llu but the driver holds %zu bytes",
          (unsigned long long)s.kind[GPOOL_MEM_DEVICE].reserved_bytes, sim_bytes);
    CHECK(sim_bytes <= CAPACITY, "driver holds %zu bytes, over the capacity", sim_bytes);
    char why[1024];
    M.slack_requested = S.maybe_pending_requested;
    CHECK(model_check_stats(&M, 0, why, sizeof why), "model: %s", why);
}

/* ---- operations -------------------------------------------------------------------------- */

static size_t pick_size(reader *r)
{
    uint8_t sel = u8(r);
    static const size_t edges[] = {
        1,       255,   256,           257,     4096,          16384,           16385,
        65536,   65537, (2 << 20) - 1, 2 << 20, (2 << 20) + 1, (4 << 20) - 256, 6 << 20,
        62 << 20};
    switch (sel % 4) {
    case 0:
        return (size_t)u16(r) % 16384 + 1; /* small */
    case 1:
        return (size_t)u24(r) % (1 << 20) + 1; /* medium */
    case 2:
        return (size_t)u24(r) * 2 % MAX_LARGE + 1; /* large */
    default:
        return edges[(sel / 4) % (sizeof edges / sizeof edges[0])];
    }
}

static void op_alloc(reader *r)
{
    int slot = u8(r) % SLOTS;
    size_t size = pick_size(r);
    uint8_t kb = u8(r), ab = u8(r), sb = u8(r);
    if (S.b[slot].live) return; /* keep the model simple: one block per slot */
    gpool_alloc_params prm = {0};
    int bad_kind = kb % 16 == 15;
    prm.kind = bad_kind ? (gpool_mem_kind)(GPOOL_MEM_KIND_COUNT + kb % 3)
                        : (gpool_mem_kind)(kb % 8 < 5 ? GPOOL_MEM_DEVICE : kb % 4);
    prm.usage = (gpool_usage)((kb >> 4) % GPOOL_USAGE_COUNT);
    if (prm.kind == GPOOL_MEM_AUTO && (kb & 0x80)) prm.flags |= GPOOL_ALLOC_ALLOW_FALLBACK;
    size_t align = ab % 2 ? 0 : (size_t)1 << (ab / 2 % 24); /* up to 8 MiB: > page is invalid */
    prm.alignment = align;
    if (sb & 0x10) prm.flags |= GPOOL_ALLOC_ZERO;
    if (sb & 0x20) prm.flags |= GPOOL_ALLOC_STREAM_WAIT;
    int stream = sb % NSTREAMS;
    if (size > CAPACITY) size = CAPACITY; /* 62 MiB edge stays below the capacity */

    size_t pages_before = touched_pages();
    int must =
        prm.kind == GPOOL_MEM_DEVICE && model_must_fit(&M, 0, GPOOL_MEM_DEVICE, size + align, 0);
    void *p = (void *)1;
    gpool_status st = stream == 0 && !(sb & 0x40)
                          ? gpool_alloc(S.pool, size, &prm, &p)
                          : gpool_alloc_async(S.pool, size, &prm, S.streams[stream], &p);
    note_forced_syncs();
    TRACE("alloc slot %d: %zu bytes kind %d align %zu stream %d%s%s -> %d %p", slot, size,
          (int)prm.kind, align, stream, prm.flags & GPOOL_ALLOC_STREAM_WAIT ? " STREAM_WAIT" : "",
          stream == 0 && !(sb & 0x40) ? "" : " (async)", (int)st, p);
    int invalid = bad_kind || (align & (align - 1)) || align > GRAN;
    if (invalid) {
        CHECK(st == GPOOL_ERR_INVALID_ARG, "invalid params (kind %d align %zu) gave status %d",
              (int)prm.kind, align, (int)st);
        CHECK(p == NULL, "*out not NULL after an error");
        return;
    }
    if (st == GPOOL_ERR_UNSUPPORTED) {
        CHECK(prm.kind != GPOOL_MEM_DEVICE, "UNSUPPORTED for device memory");
        CHECK(p == NULL, "*out not NULL after an error");
        return;
    }
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        CHECK(p == NULL, "*out not NULL after an error");
        M.oom_fails[0]++;
        CHECK(!must, "out of memory for %zu bytes where the model says it must succeed", size);
        if (prm.kind == GPOOL_MEM_DEVICE) {
            size_t need = (size + align) / GRAN + 2;
            CHECK(pages_before + need > CAPACITY / GRAN,
                  "out of memory for %zu bytes (align %zu) while live blocks touch only %zu of %zu "
                  "pages",
                  size, align, pages_before, CAPACITY / GRAN);
        }
        return;
    }
    CHECK(st == GPOOL_OK, "alloc of %zu bytes (kind %d, align %zu, stream %d) gave status %d (%s)",
          size, (int)prm.kind, align, stream, (int)st, gpool_strerror(st));
    CHECK(p != NULL, "OK but NULL for %zu bytes", size);
    uintptr_t up = (uintptr_t)p;
    size_t want_align = align > 256 ? align : 256;
    CHECK(up % want_align == 0, "%#lx is not %zu-aligned", (unsigned long)up, want_align);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    CHECK(gpool_get_block_desc(S.pool, p, &d) == GPOOL_OK, "block_info of a fresh block");
    CHECK(d.requested_size == size, "block_info requested %zu, asked %zu", d.requested_size, size);
    CHECK(d.size >= size, "block_info size %zu < %zu", d.size, size);
    CHECK(d.kind != GPOOL_MEM_AUTO && (prm.kind == GPOOL_MEM_AUTO || d.kind == prm.kind),
          "block_info kind %d for a kind %d request", (int)d.kind, (int)prm.kind);
    for (int i = 0; i < SLOTS; i++)
        if (S.b[i].live)
            CHECK(!overlaps(up, d.size, S.b[i].ptr, S.b[i].rounded),
                  "new block [%#lx,+%zu) overlaps live slot %d [%#lx,+%zu)", (unsigned long)up,
                  d.size, i, (unsigned long)S.b[i].ptr, S.b[i].rounded);
    for (size_t i = 0; i < S.npend; i++)
        if (S.events_only && S.pend[i].stream != stream && !(prm.flags & GPOOL_ALLOC_STREAM_WAIT) &&
            !(S.pend[i].waited_by & (1u << stream)) &&
            !(S.stream_wait_used && skip_known("stream_wait")))
            CHECK(!overlaps(up, size, S.pend[i].ptr, S.pend[i].size),
                  "block on stream %d reuses [%#lx,+%zu) still pending on held stream %d", stream,
                  (unsigned long)S.pend[i].ptr, S.pend[i].size, S.pend[i].stream);
    if (prm.flags & GPOOL_ALLOC_STREAM_WAIT) {
        /* This stream now runs after the pending work it waited on: what was pending so far
         * is safe for it from now on (a superset of what gpool hands it, so no false alarm). */
        S.stream_wait_used = 1;
        for (size_t i = 0; i < S.npend; i++)
            S.pend[i].waited_by |= 1u << stream;
    }
    if (prm.flags & GPOOL_ALLOC_ZERO) check_zero(up, size);
    /* a kernel on the allocating stream writes the whole block at once */
    CHECK(p_touch(S.streams[stream], (CUdeviceptr)up, size, 1) == CUDA_SUCCESS,
          "gpoolsim_touch of the new block [%#lx,+%zu) on stream %d", (unsigned long)up, size,
          stream);
    CHECK(p_violations() == 0,
          "the happens-before referee saw %lu violations (block [%#lx,+%zu) on stream %d)",
          p_violations(), (unsigned long)up, size, stream);
    block *b = &S.b[slot];
    *b = (block){1, up, size, d.size, d.kind, stream, ++S.next_seed};
    fill_pattern(p, size, b->seed);
    model_add(&M, 0, p, size, d.kind, S.streams[stream], b->seed);
    if (d.kind == GPOOL_MEM_DEVICE) model_note_chunk(&M, d.page_size);
}

static void free_slot(int slot, int stream, int async)
{
    block *b = &S.b[slot];
    CHECK(check_pattern((void *)b->ptr, b->size, b->seed), "slot %d [%#lx,+%zu) lost its contents",
          slot, (unsigned long)b->ptr, b->size);
    if (async && stream && S.held[stream] && b->kind == GPOOL_MEM_DEVICE && stream != b->stream) {
        /* a correct client orders its use of the block on another stream after the work of
         * the block's own stream (the kernel that wrote it when it was allocated) */
        CUevent ev;
        CHECK(p_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "cuEventCreate");
        CHECK(p_cuEventRecord(ev, S.streams[b->stream]) == CUDA_SUCCESS, "cuEventRecord");
        CHECK(p_cuStreamWaitEvent(S.streams[stream], ev, 0) == CUDA_SUCCESS, "cuStreamWaitEvent");
        CHECK(p_cuEventDestroy(ev) == CUDA_SUCCESS, "cuEventDestroy");
    }
    if (async && stream && S.held[stream] && b->kind == GPOOL_MEM_DEVICE)
        /* work that still uses the block, queued on the held stream: it completes only when
         * the stream is released or someone synchronizes with it */
        CHECK(p_cuMemsetD8Async((CUdeviceptr)b->ptr, 0xa5, b->size, S.streams[stream]) ==
                  CUDA_SUCCESS,
              "cuMemsetD8Async on the held stream");
    gpool_status st = async ? gpool_free_async(S.pool, (void *)b->ptr, S.streams[stream])
                            : gpool_free(S.pool, (void *)b->ptr);
    note_forced_syncs();
    CHECK(st == GPOOL_OK, "free of slot %d [%#lx,+%zu) gave %d", slot, (unsigned long)b->ptr,
          b->size, (int)st);
    TRACE("free slot %d [%#lx,+%zu) on stream %d%s%s", slot, (unsigned long)b->ptr, b->size, stream,
          async ? " (async)" : "", async && S.held[stream] ? " HELD" : "");
    b->live = 0;
    model_remove(&M, (void *)b->ptr, NULL);
    if (async && stream != b->stream) {
        S.maybe_pending_rounded += b->rounded;
        S.maybe_pending_requested += b->size;
    }
    if (async && S.held[stream] && b->kind == GPOOL_MEM_DEVICE && S.npend < SLOTS * 2)
        S.pend[S.npend++] = (pending){b->ptr, b->size, stream, 0};
}

static void expect_rejected(void *p, const char *what)
{
    gpool_stats before = GPOOL_STATS_INIT, after = GPOOL_STATS_INIT;
    gpool_get_stats(S.pool, &before);
    gpool_status st = gpool_free(S.pool, p);
    CHECK(st == GPOOL_ERR_INVALID_POINTER, "free of %s %p gave %d", what, p, (int)st);
    CHECK(strlen(gpool_last_error()) > 0, "no message for a rejected free");
    gpool_get_stats(S.pool, &after);
    CHECK(before.kind[GPOOL_MEM_AUTO].live_blocks == after.kind[GPOOL_MEM_AUTO].live_blocks &&
              before.kind[GPOOL_MEM_AUTO].frees == after.kind[GPOOL_MEM_AUTO].frees,
          "a rejected free of %s changed the counters", what);
}

static void op_free(reader *r)
{
    int slot = u8(r) % SLOTS;
    uint8_t mode = u8(r);
    uint32_t off = u24(r);
    block *b = &S.b[slot];
    switch (mode % 8) {
    case 0:
    case 1:
    case 2:
        if (b->live) free_slot(slot, b->stream, b->stream != 0);
        return;
    case 3: /* interior pointer */
        if (b->live && b->rounded > 1) {
            size_t o = off % (b->rounded - 1) + 1;
            expect_rejected((void *)(b->ptr + o), "an interior pointer");
        }
        return;
    case 4: /* the address of a freed block, unless something live starts there now */
        if (!b->live && b->ptr && live_at(b->ptr) < 0)
            expect_rejected((void *)b->ptr, "a freed block");
        return;
    case 5: { /* foreign pointers: stack, heap, wild */
        int local = 0;
        void *heap = malloc(16);
        expect_rejected(&local, "a stack address");
        if (heap) expect_rejected(heap, "a heap address");
        free(heap);
        uintptr_t wild = ((uintptr_t)off << 12) | 0x100;
        if (live_at(wild) < 0) expect_rejected((void *)wild, "a wild address");
        return;
    }
    case 6: /* NULL is a no-op */
        CHECK(gpool_free(S.pool, NULL) == GPOOL_OK, "free(NULL)");
        CHECK(gpool_free_async(S.pool, NULL, S.streams[1]) == GPOOL_OK, "free_async(NULL)");
        return;
    default: /* free on another stream than the block's */
        if (b->live) {
            int s = (int)(off % NSTREAMS);
            free_slot(slot, s, 1);
        }
        return;
    }
}

static void op_hold_free(reader *r)
{
    int slot = u8(r) % SLOTS;
    int s = u8(r) % (NSTREAMS - 1) + 1;
    if (!S.held[s]) {
        TRACE("hold stream %d", s);
        CHECK(sim->stream_hold(S.streams[s]) == 0, "stream_hold");
        S.held[s] = 1;
    }
    if (S.b[slot].live) free_slot(slot, s, 1);
}

static void op_release(reader *r)
{
    int s = u8(r) % (NSTREAMS - 1) + 1;
    if (!S.held[s]) return;
    CHECK(sim->stream_release(S.streams[s]) == 0, "stream_release");
    TRACE("release stream %d", s);
    S.held[s] = 0;
    size_t j = 0;
    for (size_t i = 0; i < S.npend; i++)
        if (S.pend[i].stream != s) S.pend[j++] = S.pend[i];
    S.npend = j;
}

static void op_trim(reader *r)
{
    uint8_t k = u8(r);
    size_t keep = k % 4 == 0 ? 0 : (size_t)(k % 64) << 20;
    gpool_status st = gpool_trim(S.pool, keep);
    note_forced_syncs();
    CHECK(st == GPOOL_OK, "trim(%zu) gave %d", keep, (int)st);
    if (!skip_known("trim_wait"))
        CHECK(S.npend == 0, "trim returned without waiting for %zu blocks pending on held streams",
              S.npend);
    S.maybe_pending_rounded = S.maybe_pending_requested = 0;
    if (keep == 0 && S.npend == 0 && !skip_known("trim_keep0")) {
        size_t pages = touched_pages(), held = sim->bytes_in_use(0);
        CHECK(held <= pages * GRAN,
              "after trim(0) the driver holds %zu bytes, but live blocks touch only %zu pages "
              "(%zu bytes)",
              held, pages, pages * GRAN);
    }
}

static void op_info(reader *r)
{
    int slot = u8(r) % SLOTS;
    uint32_t off = u24(r);
    block *b = &S.b[slot];
    if (!b->live) return;
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    void *inner = (void *)(b->ptr + off % b->size);
    CHECK(gpool_get_block_desc(S.pool, inner, &d) == GPOOL_OK, "block_info inside slot %d", slot);
    CHECK(d.device_ptr == b->ptr || (uintptr_t)d.host_ptr == b->ptr,
          "block_info of an interior pointer names another block");
    CHECK(d.requested_size == b->size && d.size == b->rounded, "block_info sizes changed");
}

/* ---- one input --------------------------------------------------------------------------- */

static const char *const configs[] = {
    "",                               /* defaults */
    "tcache_bytes=0",                 /* no thread cache */
    "va_reserve=64M",                 /* small reservations: several regions */
    "small_max=64K,tcache_bytes=64K", /* big small classes, small cache */
    "small_max=0",                    /* everything through the large path */
    "release_threshold=8M,va_reserve=256M",
    "stream_reuse=events", /* no waits added by gpool: the pending check below is exact */
    "stream_reuse=events,tcache_bytes=0,small_max=0",
};

static void setup_input(uint8_t cfgsel)
{
    memset(&S, 0, sizeof S);
    sim->fail_clear();
    sim->set_capacity(0, CAPACITY);
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    const char *conf = configs[cfgsel % (sizeof configs / sizeof configs[0])];
    CHECK(gpool_config_parse(&cfg, conf) == GPOOL_OK, "config %s", conf);
    CHECK(gpool_create(&cfg, &S.pool) == GPOOL_OK, "gpool_create (%s)", conf);
    S.events_only = cfg.stream_reuse == GPOOL_STREAM_REUSE_EVENTS;
    CUcontext ctx;
    CHECK(p_cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
    CHECK(p_cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
    for (int s = 1; s < NSTREAMS; s++)
        CHECK(p_cuStreamCreate(&S.streams[s], 0) == CUDA_SUCCESS, "cuStreamCreate");
    S.forced_syncs = sim->forced_syncs();
    S.syncs = sync_calls();
    model_init(&M, CAPACITY, GRAN, 1, &S.pool);
}

static void finish_input(int leave_live)
{
    cur_opname = "teardown";
    int left = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (!S.b[i].live) continue;
        CHECK(check_pattern((void *)S.b[i].ptr, S.b[i].size, S.b[i].seed),
              "slot %d lost its contents by the end", i);
        if (leave_live) {
            left++;
            continue;
        }
        free_slot(i, S.b[i].stream, S.b[i].stream != 0);
    }
    check_stats();
    for (int s = 1; s < NSTREAMS; s++)
        if (S.held[s]) sim->stream_release(S.streams[s]);
    gpool_status st = gpool_destroy(S.pool);
    if (left)
        CHECK(st == GPOOL_ERR_LIVE_BLOCKS, "destroy with %d live blocks gave %d", left, (int)st);
    else
        CHECK(st == GPOOL_OK, "destroy gave %d", (int)st);
    for (int s = 1; s < NSTREAMS; s++)
        CHECK(p_cuStreamDestroy(S.streams[s]) == CUDA_SUCCESS, "cuStreamDestroy");
    CHECK(p_cuCtxSetCurrent(NULL) == CUDA_SUCCESS, "cuCtxSetCurrent(NULL)");
    CHECK(p_cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "cuDevicePrimaryCtxRelease");
    CHECK(p_violations() == 0, "the happens-before referee saw %lu violations", p_violations());
    CHECK(sim_live_total() == 0, "%zu driver objects left after destroy", sim_live_total());
    CHECK(sim->bytes_in_use(0) == 0, "%zu device bytes left after destroy", sim->bytes_in_use(0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    cur_op = 0;
    cur_opname = "setup";
    uint8_t head = u8(&r);
    setup_input(head);
    while (r.n && cur_op < MAX_OPS) {
        uint8_t op = u8(&r);
        cur_op++;
        switch (op % 16) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4:
        case 5:
            cur_opname = "alloc";
            op_alloc(&r);
            break;
        case 6:
        case 7:
        case 8:
        case 9:
            cur_opname = "free";
            op_free(&r);
            break;
        case 10:
        case 11:
            cur_opname = "free on a held stream";
            op_hold_free(&r);
            break;
        case 12:
            cur_opname = "release stream";
            op_release(&r);
            break;
        case 13:
            cur_opname = "trim";
            op_trim(&r);
            break;
        case 14:
            cur_opname = "block info";
            op_info(&r);
            break;
        default:
            cur_opname = "stats";
            break; /* stats are checked after every op anyway */
        }
        check_stats();
    }
    finish_input(head & 0x80);
    return 0;
}
