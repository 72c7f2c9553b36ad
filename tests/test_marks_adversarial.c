/* Adversarial tests of the free-space marks (heap.c, arena.c, reuse.c: the stream-reuse rule in
 * 7 points). Every block handed out is written by a "kernel" (gpoolsim_touch) on the stream it
 * was allocated on, so the simulator's happens-before referee sees any memory handed to a stream
 * whose earlier work is not ordered before it, and any unmap with work still queued. Streams are
 * non-blocking (no implicit legacy-stream edges) and held (their work does not complete), so a
 * pending free is really pending. The client is correct: every violation is gpool's.
 * Needs the simulator (held completion, the referee); skips on a real GPU. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define NS 8 /* created streams */

static const struct sim_api *sim;
static CUresult (*touch)(CUstream, CUdeviceptr, size_t, int);
static unsigned long (*violations)(void);
static CUresult (*ev_create)(CUevent *, unsigned);
static CUresult (*ev_record)(CUevent, CUstream);
static CUresult (*ev_destroy)(CUevent);
static CUresult (*stream_wait)(CUstream, CUevent, unsigned);
static CUresult (*ctx_set)(CUcontext);
static gpool_t *pool;
static CUcontext ctx;
static CUstream S[NS];

static gpool_t *make_pool(const char *conf)
{
    gpool_t *p = test_pool(conf);
    cr_assert_not_null(p, "%s", gpool_last_error());
    return p;
}

static void setup(void)
{
    NEED_SIM();
    sim = sim_api();
    cr_assert_not_null(sim);
    touch = dlsym(sim->lib, "gpoolsim_touch");
    violations = dlsym(sim->lib, "gpoolsim_violations");
    if (!touch || !violations) cr_skip_test("the simulator has no happens-before referee");
    ev_create = sim_driver_proc("cuEventCreate");
    ev_record = sim_driver_proc("cuEventRecord");
    ev_destroy = sim_driver_proc("cuEventDestroy");
    stream_wait = sim_driver_proc("cuStreamWaitEvent");
    ctx_set = sim_driver_proc("cuCtxSetCurrent");
    pool = make_pool(NULL);
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < NS; i++)
        cr_assert_eq(mk(&S[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
}

static void release_all(void)
{
    for (int i = 0; i < NS; i++)
        sim->stream_release(S[i]);
    sim->stream_release(NULL);
    sim->stream_release(CU_STREAM_PER_THREAD);
}

/* The end of every test, in its body (Criterion does not fail a test for an assertion in
 * .fini): release the streams, destroy the pool, check the referee and the leak counters. */
static void finish(void)
{
    release_all();
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    pool = NULL;
    cr_assert_eq(violations(), 0, "happens-before violations (see stderr)");
    struct gpoolsim_live l;
    sim->get_live(&l);
    cr_assert_eq(l.events, 0, "gpool_destroy left %zu events", l.events);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    release_all();
    if (pool) gpool_destroy(pool);
    for (int i = 0; i < NS; i++)
        destroy(S[i]);
    release(0);
    struct gpoolsim_live l;
    sim->get_live(&l);
    teardown_expect(sim_live_total() == 0,
                    "events, mappings and handles all returned: handles %zu mappings %zu "
                    "reservations %zu host %zu reg %zu streams %zu events %zu legacy %zu",
                    l.handles, l.mappings, l.reservations, l.host_allocs, l.host_registrations,
                    l.streams, l.events, l.legacy_allocs);
    teardown_end();
}

TestSuite(marks_adv, .init = setup, .fini = teardown, .timeout = 60);

/* A kernel on stream s writes [p, p+n), one touch per mapping (gpool maps page by page). */
static void kernel(CUstream s, void *p, size_t n)
{
    CUresult rc = sim_kernel(s, p, n);
    cr_assert_eq(rc, CUDA_SUCCESS, "gpoolsim_touch: %d", (int)rc);
}

/* Allocate on s and have a kernel on s write the whole block at once. */
static void *get(size_t size, CUstream s)
{
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, NULL, s, &p), GPOOL_OK, "%zu bytes on %p: %s", size,
                 (void *)s, gpool_last_error());
    kernel(s, p, size);
    return p;
}

static void put(void *p, CUstream s)
{
    cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK, "%s", gpool_last_error());
}

/* The client orders stream t after stream s's work so far (event record + stream wait). */
static void order_after(CUstream t, CUstream s)
{
    CUevent ev;
    cr_assert_eq(ev_create(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(ev_record(ev, s), CUDA_SUCCESS);
    cr_assert_eq(stream_wait(t, ev, 0), CUDA_SUCCESS);
    cr_assert_eq(ev_destroy(ev), CUDA_SUCCESS);
}

static void no_violation(const char *what)
{
    cr_assert_eq(violations(), 0, "%s: the referee saw %lu violations", what, violations());
}

static void stats_match(uint64_t live, uint64_t requested, const char *what)
{
    gpool_stats st = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].live_blocks, live, "%s: live_blocks %llu, expected %llu",
                 what, (unsigned long long)st.kind[GPOOL_MEM_DEVICE].live_blocks,
                 (unsigned long long)live);
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].requested_bytes, requested,
                 "%s: requested_bytes %llu, expected %llu", what,
                 (unsigned long long)st.kind[GPOOL_MEM_DEVICE].requested_bytes,
                 (unsigned long long)requested);
}

/* ---------- more streams than marks ---------- */

/* Eight streams free adjacent blocks (some sharing a 2 MiB page) while all are held: a free range
 * can carry four streams' marks, so ranges must stay apart or every stream kept off the others'
 * frees. Then every stream asks for blocks that would fit the joined space best. */
static void many_streams_adjacent(size_t each)
{
    void *blk[NS];
    put(get(256 << 10, S[1]), S[1]); /* a second stream from the start */
    for (int i = 0; i < NS; i++)
        blk[i] = get(each, S[i]);
    for (int i = 0; i < NS; i++)
        sim->stream_hold(S[i]);
    for (int i = 0; i < NS; i++)
        put(blk[i], S[i]);
    void *again[NS][3];
    for (int i = 0; i < NS; i++) {
        again[i][0] = get(each * NS, S[(i + 3) % NS]);
        again[i][1] = get(each, S[(i + 5) % NS]);
        again[i][2] = get(each / 2 + 256, S[(i + 1) % NS]);
    }
    no_violation("after reuse across eight streams");
    for (int i = 0; i < NS; i++) {
        put(again[i][0], S[(i + 3) % NS]);
        put(again[i][1], S[(i + 5) % NS]);
        put(again[i][2], S[(i + 1) % NS]);
    }
    /* every stream's frees are pending again: one more round, all sizes */
    for (int i = 0; i < NS; i++) {
        void *p = get(each * (i + 1), S[(i + 7) % NS]);
        put(p, S[(i + 7) % NS]);
    }
    no_violation("second round");
}

Test(marks_adv, eight_streams_free_adjacent_2mib_blocks)
{
    many_streams_adjacent(2 * MiB);
    finish();
}

Test(marks_adv, eight_streams_free_adjacent_blocks_sharing_pages)
{
    many_streams_adjacent(768 << 10); /* two or three streams' frees on one backed page */
    finish();
}

Test(marks_adv, eight_streams_in_events_mode)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    pool = make_pool("stream_reuse=events");
    many_streams_adjacent(768 << 10);
    finish();
}

/* Interleaved: stream i%5 frees the i-th of twenty adjacent blocks, so one range would need five
 * streams' marks and each stream's joined span covers every other stream's frees. */
Test(marks_adv, five_streams_interleaved_frees_spans_cover_each_other)
{
    enum { N = 20 };
    void *b[N];
    void *first = get(MiB, S[0]);
    put(first, S[0]);
    (void)first;
    void *x = get(MiB, S[1]); /* second stream */
    put(x, S[1]);
    for (int i = 0; i < N; i++)
        b[i] = get(MiB, S[i % 5]);
    for (int i = 0; i < 5; i++)
        sim->stream_hold(S[i]);
    for (int i = 0; i < N; i++)
        put(b[i], S[i % 5]);
    /* each stream asks for a block of its own frees' size and for one of all of them */
    void *o[5], *big[6];
    for (int i = 0; i < 5; i++)
        o[i] = get(MiB, S[i]);
    for (int i = 0; i < 6; i++)
        big[i] = get((size_t)N * MiB, S[(i + 2) % NS]);
    no_violation("interleaved");
    for (int i = 0; i < 5; i++)
        put(o[i], S[i]);
    for (int i = 0; i < 6; i++)
        put(big[i], S[(i + 2) % NS]);
    release_all();
    for (int i = 0; i < 6; i++)
        put(get((size_t)N * MiB, S[5 + i % 3]), S[5 + i % 3]);
    finish();
}

/* ---------- one stream's far-apart frees around another's ---------- */

Test(marks_adv, far_apart_frees_of_one_stream_around_another_streams_free)
{
    CUstream A = S[0], B = S[1], C = S[2];
    const size_t sz = 3 * MiB;
    void *w = get(MiB, B); /* multi-stream mode first */
    put(w, B);
    void *a0 = get(sz, A), *a1 = get(sz, B), *a2 = get(sz, A);
    sim->stream_hold(A);
    sim->stream_hold(B);
    put(a0, A);
    put(a1, B);
    put(a2, A);
    /* A's span covers B's free; B's is inside. B takes its own back, then A and C ask */
    void *b = get(sz, B);
    void *a = get(sz, A);
    void *c = get(3 * sz, C);
    void *c2 = get(sz, C);
    no_violation("far apart");
    put(a, A);
    put(b, B);
    /* A frees after the claims too: a new mark above an event C may have waited on */
    void *c3 = get(2 * sz, C);
    put(c, C);
    put(c2, C);
    put(c3, C);
    void *d = get(3 * sz, S[3]);
    put(d, S[3]);
    finish();
}

/* ---------- claims: hand-over and transitivity ---------- */

Test(marks_adv, claims_after_a_hand_over_are_transitive)
{
    CUstream A = S[0], B = S[1], C = S[2], D = S[3];
    const size_t sz = 6 * MiB;
    void *w = get(MiB, B);
    put(w, B);
    void *p1 = get(sz, A), *p2 = get(sz, A);
    void *fill = NULL;
    gpool_stats st = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    if (st.kind[GPOOL_MEM_DEVICE].cached_bytes >= MiB)
        fill = get(st.kind[GPOOL_MEM_DEVICE].cached_bytes, A); /* nothing else cached */
    sim->stream_hold(A);
    put(p1, A);
    unsigned long waits = sim->call_count("cuStreamWaitEvent");
    void *q = get(sz, B); /* claims p1: B waits for A */
    cr_log_info("B got %p (p1 %p), waits %lu", q, p1, sim->call_count("cuStreamWaitEvent") - waits);
    put(p2, A); /* after the event B waited on */
    sim->stream_hold(B);
    put(q, B);
    void *r = get(sz, C); /* p1 (B's now) or p2 (A's, newer than the event) */
    void *r2 = get(sz, D);
    no_violation("transitive claim");
    put(r, C);
    put(r2, D);
    void *r3 = get(2 * sz, D);
    put(r3, D);
    if (fill) put(fill, A);
    finish();
}

/* The event a claim reuses was recorded before later frees of that stream: it must not hand
 * them over. Several rounds, each stream's marks reused by the next. */
Test(marks_adv, claim_rounds_with_stale_events)
{
    const size_t sz = 4 * MiB;
    void *w = get(MiB, S[1]);
    put(w, S[1]);
    void *held[NS][2];
    for (int i = 0; i < NS; i++) {
        held[i][0] = get(sz, S[i]);
        held[i][1] = get(sz, S[i]);
    }
    for (int i = 0; i < NS; i++)
        sim->stream_hold(S[i]);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NS; i++) {
            CUstream me = S[i], next = S[(i + 1) % NS];
            put(held[i][0], me);
            void *n = get(sz, next); /* may claim held[i][0] */
            put(held[i][1], me);     /* after that event */
            held[i][0] = n;
            held[i][1] = get(sz, S[(i + 2) % NS]);
            /* ownership: n is next's block now, the other (i+2)'s */
            void *t = held[i][1];
            held[i][1] = NULL;
            put(t, S[(i + 2) % NS]);
            held[i][1] = get(sz, me);
            /* keep the [i][0] block on stream me for the next round: move it by freeing on its
             * own stream and allocating again on me */
            put(held[i][0], next);
            held[i][0] = get(sz, me);
        }
    no_violation("rounds");
    for (int i = 0; i < NS; i++) {
        put(held[i][0], S[i]);
        put(held[i][1], S[i]);
    }
    finish();
}

/* reuse.c claim() takes `r = gp_ss_rec(ss, from)` and then calls gp_ss_other_ctx(pool, tag),
 * which makes the requesting stream's record when it has none; with the record table full
 * (8, 16, ... records) that reallocs ss->recs and r dangles: the event is recorded into freed
 * memory (use after free; its ev, ev_seq, ev_live and seq are lost) and leaks. Here: eight
 * records (NULL and S0..S6), then S7, new, claims S6's pending free. */
Test(marks_adv, claim_by_a_new_stream_when_the_stream_table_grows)
{
    /* small blocks (heap ranges) of S0..S3 freed on S1, S3, S5, S4 (cross frees: deferred, with
     * events); new small blocks on S0, S7, S6, S5; a 5 MiB block freed on S6, then S7 asks for
     * 5 MiB: claim(from S6, tag S7) while the table holds 8 records and S7's is made */
    static const size_t sz[4] = {13690, 2735, 4256, 746};
    static const int on[4] = {0, 1, 2, 3}, freed_on[4] = {1, 3, 5, 4}, again[4] = {0, 7, 6, 5};
    void *p[4];
    put(get(1000, NULL), NULL);
    for (int i = 0; i < 4; i++)
        p[i] = get(sz[i], S[on[i]]);
    void *big = get(5 * MiB, S[6]);
    for (int i = 0; i < 4; i++)
        put(p[i], S[freed_on[i]]);
    for (int i = 0; i < 4; i++)
        p[i] = get(sz[(i + 1) % 4], S[again[i]]);
    put(big, S[6]);
    void *big2 = get(5 * MiB, S[7]);
    for (int i = 0; i < 4; i++)
        put(p[i], S[again[i]]);
    put(big2, S[7]);
    no_violation("claim by a new stream");
    finish(); /* gpool_destroy left 1 events: the one recorded through the dangling record */
}

/* ---------- second stream after single-stream mode: backed and unbacked islands ---------- */

static void islands(size_t unit, int trim_between)
{
    CUstream A = S[0], B = S[1];
    enum { N = 9 };
    void *b[N];
    for (int i = 0; i < N; i++)
        b[i] = get(unit, A);
    /* free every block but the ends and the middle; give their pages back */
    for (int i = 1; i < N - 1; i++)
        if (i != N / 2) put(b[i], A);
    if (trim_between) cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(A);
    kernel(A, b[0], unit);
    kernel(A, b[N / 2], unit);
    kernel(A, b[N - 1], unit);
    put(b[0], A);
    put(b[N / 2], A);
    put(b[N - 1], A);
    /* single-stream mode: those frees are clean; B's first request marks the backed pages */
    void *q[6];
    q[0] = get(unit * N, B);
    q[1] = get(unit, B);
    q[2] = get(unit * 3, B);
    q[3] = get(unit / 3 + 256, B);
    q[4] = get(unit * 2, S[2]);
    q[5] = get(unit * N * 2, S[3]);
    no_violation("islands");
    put(q[0], B);
    put(q[1], B);
    put(q[2], B);
    put(q[3], B);
    put(q[4], S[2]);
    put(q[5], S[3]);
}

Test(marks_adv, second_stream_after_backed_and_unbacked_islands)
{
    islands(2 * MiB, 1);
    finish();
}

Test(marks_adv, second_stream_after_unaligned_islands)
{
    islands(1536 << 10, 1);
    finish();
}

Test(marks_adv, second_stream_after_single_stream_frees_no_trim)
{
    islands(1536 << 10, 0);
    finish();
}

/* ---------- trim and memory pressure with live marks ---------- */

Test(marks_adv, trim_and_pressure_while_marks_are_live)
{
    void *w = get(MiB, S[1]);
    put(w, S[1]);
    void *b[6];
    for (int i = 0; i < 6; i++)
        b[i] = get((size_t)(i + 1) * 1536 << 10, S[i % 4]);
    for (int i = 0; i < 4; i++)
        sim->stream_hold(S[i]);
    for (int i = 0; i < 6; i++)
        put(b[i], S[i % 4]);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    no_violation("trim with marks live");
    void *c = get(5 * MiB, S[4]);
    for (int i = 0; i < 4; i++)
        sim->stream_hold(S[i]);
    sim->stream_hold(S[4]);
    put(c, S[4]);
    for (int i = 0; i < 6; i++)
        b[i] = get((size_t)(i + 1) * MiB, S[(i + 1) % 5]);
    for (int i = 0; i < 6; i++)
        put(b[i], S[(i + 1) % 5]);
    /* the device shrinks: what is cached must be given back (after a synchronize) */
    size_t used = sim->bytes_in_use(0);
    sim->set_capacity(0, used + 4 * MiB);
    void *big = get(used, S[5]);
    no_violation("pressure with marks live");
    sim->stream_hold(S[5]);
    put(big, S[5]);
    sim->set_capacity(0, used / 2 + 8 * MiB);
    void *half = get(used / 2, S[6]);
    put(half, S[6]);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    finish();
}

/* ---------- record_stream and cross-stream frees with claims ---------- */

Test(marks_adv, record_stream_and_cross_frees_with_claims)
{
    CUstream A = S[0], B = S[1], C = S[2], D = S[3];
    const size_t sz = 4 * MiB;
    void *w = get(MiB, B);
    put(w, B);
    void *p = get(sz, A);
    order_after(B, A);
    kernel(B, p, sz);
    cr_assert_eq(gpool_record_stream(pool, p, B), GPOOL_OK, "%s", gpool_last_error());
    void *x = get(sz, A);
    void *y = get(sz, C);
    sim->stream_hold(A);
    sim->stream_hold(B);
    sim->stream_hold(C);
    put(p, A);
    put(x, B); /* cross free, the client did not order B after A: rule 3 */
    order_after(D, C);
    put(y, D); /* cross free, ordered by the client */
    void *q[4];
    for (int i = 0; i < 4; i++)
        q[i] = get(sz, S[(i + 1) % 4]);
    void *big = get(3 * sz, D);
    no_violation("record and cross frees");
    sim->stream_release(B);
    void *q2 = get(sz, D);
    put(q2, D);
    for (int i = 0; i < 4; i++)
        put(q[i], S[(i + 1) % 4]);
    put(big, D);
    release_all();
    put(get(3 * sz, C), C);
    finish();
}

/* ---------- per-thread default streams and the legacy stream ---------- */

struct th_job {
    size_t size;
    int n;
    void *p[8];
};

static void *ptds_worker(void *arg)
{
    struct th_job *j = arg;
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < j->n; i++)
        j->p[i] = get(j->size * (size_t)(i + 1), CU_STREAM_PER_THREAD);
    sim->stream_hold(CU_STREAM_PER_THREAD);
    for (int i = 0; i < j->n; i++)
        put(j->p[i], CU_STREAM_PER_THREAD);
    return NULL;
}

static void *ptds_asker(void *arg)
{
    struct th_job *j = arg;
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < j->n; i++)
        j->p[i] = get(j->size * (size_t)(i + 1), CU_STREAM_PER_THREAD);
    for (int i = 0; i < j->n; i++)
        put(j->p[i], CU_STREAM_PER_THREAD);
    sim->stream_release(CU_STREAM_PER_THREAD);
    return NULL;
}

Test(marks_adv, per_thread_and_legacy_streams_claims)
{
    struct th_job j = {.size = 3 * MiB, .n = 4};
    pthread_t t;
    void *w = get(MiB, S[1]);
    put(w, S[1]);
    cr_assert_eq(pthread_create(&t, NULL, ptds_worker, &j), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    /* another thread's per-thread stream: its frees are pending, nobody can name its stream */
    void *mine[4];
    for (int i = 0; i < 4; i++)
        mine[i] = get(j.size * (size_t)(i + 1), i & 1 ? NULL : CU_STREAM_PER_THREAD);
    sim->stream_hold(NULL);
    for (int i = 0; i < 4; i++)
        put(mine[i], i & 1 ? NULL : CU_STREAM_PER_THREAD);
    struct th_job k = {.size = 3 * MiB, .n = 4};
    cr_assert_eq(pthread_create(&t, NULL, ptds_asker, &k), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    for (int i = 0; i < 4; i++)
        mine[i] = get(j.size * (size_t)(i + 1), S[i]);
    no_violation("per-thread and legacy");
    for (int i = 0; i < 4; i++)
        put(mine[i], S[i]);
    finish();
}

/* ---------- small blocks near the slabs ---------- */

Test(marks_adv, small_blocks_of_several_streams_freed_on_others)
{
    enum { N = 64 };
    void *p[N];
    size_t sz[N];
    int on[N];
    uint32_t seed = 12345;
    put(get(1000, NULL), NULL); /* the slab stream first */
    for (int i = 0; i < N; i++) {
        sz[i] = 256 + rnd(&seed) % (16 << 10);
        on[i] = i % 5;
        p[i] = get(sz[i], S[on[i]]);
    }
    void *big = get(5 * MiB, S[6]);
    for (int i = 0; i < 6; i++)
        sim->stream_hold(S[i]);
    for (int i = 0; i < N; i++) {
        CUstream f = S[(on[i] + 1 + i % 3) % 6];
        if (i % 2) order_after(f, S[on[i]]);
        put(p[i], f);
    }
    for (int i = 0; i < N; i++) {
        on[i] = (i * 7) % NS;
        p[i] = get(sz[(i + 5) % N], S[on[i]]);
    }
    put(big, S[6]);
    void *big2 = get(5 * MiB, S[7]);
    no_violation("small blocks");
    for (int i = 0; i < N; i++)
        put(p[i], S[on[i]]);
    put(big2, S[7]);
    finish();
}

/* ---------- graph capture while claims would happen ---------- */

Test(marks_adv, capture_on_requesting_or_marked_stream_during_claims)
{
    CUresult (*begin)(CUstream, CUstreamCaptureMode) = sim_driver_proc("cuStreamBeginCapture");
    CUresult (*end)(CUstream, CUgraph *) = sim_driver_proc("cuStreamEndCapture");
    CUresult (*is)(CUstream, CUstreamCaptureStatus *) = sim_driver_proc("cuStreamIsCapturing");
    CUresult (*graph_destroy)(CUgraph) = sim_driver_proc("cuGraphDestroy");
    if (!begin || !end || !is) cr_skip_test("no graph capture in the simulator");
    CUstream A = S[0], B = S[1], C = S[2];
    const size_t sz = 6 * MiB;
    void *w = get(MiB, B);
    put(w, B);
    void *p = get(sz, A), *p2 = get(sz, A);
    sim->stream_hold(A);
    put(p, A);
    /* B captures and asks: no claim on a capturing stream (no wait, no record, no query) */
    cr_assert_eq(begin(B, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    void *q = NULL;
    gpool_status s = gpool_alloc_async(pool, sz, NULL, B, &q);
    cr_assert(s == GPOOL_OK || s == GPOOL_ERR_UNSUPPORTED, "%s", gpool_last_error());
    if (s == GPOOL_OK) put(q, B);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(is(B, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture was invalidated");
    CUgraph g = NULL;
    cr_assert_eq(end(B, &g), CUDA_SUCCESS);
    if (graph_destroy && g) graph_destroy(g);
    /* A (the marked stream) captures; C asks for A's pending place */
    cr_assert_eq(begin(A, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    void *r = get(sz, C);
    cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(is(A, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture of A was invalidated");
    cr_assert_eq(is(C, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_NONE, "C was joined to A's capture");
    g = NULL;
    cr_assert_eq(end(A, &g), CUDA_SUCCESS);
    if (graph_destroy && g) graph_destroy(g);
    no_violation("capture");
    put(r, C);
    put(p2, A);
    finish();
}

/* ---------- random sequences ---------- */

typedef struct rblock {
    void *p;
    size_t size;
    int s;        /* stream index allocated on (NS: legacy) */
    int recorded; /* used on another stream too (record_stream) */
} rblock;

static CUstream sidx(int i)
{
    return i == NS ? NULL : S[i];
}

static size_t rsize(uint32_t *seed)
{
    uint32_t r = rnd(seed);
    int lg = 8 + (int)(r % 16); /* 256 B .. 8 MiB, log-uniform */
    size_t lo = (size_t)1 << lg;
    size_t n = lo + (size_t)(rnd(seed) % lo);
    return n > 8 * MiB ? 8 * MiB : n;
}

static void random_run(const char *conf, uint32_t seed, int nstreams, int steps, int pressure)
{
    enum { SLOTS = 40 };
    if (conf) {
        cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
        pool = make_pool(conf);
    }
    size_t cap = 160 * MiB;
    if (pressure) sim->set_capacity(0, cap);
    rblock b[SLOTS] = {{0}};
    uint64_t live = 0, req = 0;
    for (int step = 0; step < steps; step++) {
        rblock *x = &b[rnd(&seed) % SLOTS];
        uint32_t what = rnd(&seed) % 100;
        if (!x->p) {
            int si = (int)(rnd(&seed) % (unsigned)(nstreams + 1));
            if (si == nstreams) si = NS; /* legacy now and then */
            size_t n = rsize(&seed);
            void *p = NULL;
            gpool_status st = gpool_alloc_async(pool, n, NULL, sidx(si), &p);
            if (st == GPOOL_ERR_OUT_OF_MEMORY && pressure) {
                /* must succeed when what is live leaves room: pages the live blocks span */
                size_t pages = 0;
                for (int i = 0; i < SLOTS; i++)
                    if (b[i].p) pages += b[i].size / GPOOL_SIM_GRANULARITY + 2;
                pages += n / GPOOL_SIM_GRANULARITY + 2;
                cr_assert_gt(pages * GPOOL_SIM_GRANULARITY + 16 * MiB, cap,
                             "seed step %d: %zu bytes refused with %zu pages live: %s", step, n,
                             pages, gpool_last_error());
                continue;
            }
            cr_assert_eq(st, GPOOL_OK, "step %d: alloc %zu on %d: %s", step, n, si,
                         gpool_last_error());
            kernel(sidx(si), p, n);
            *x = (rblock){.p = p, .size = n, .s = si};
            live++;
            req += n;
        } else if (what < 20 && !x->recorded) {
            kernel(sidx(x->s), x->p, x->size);
        } else if (what < 27 && !x->recorded) {
            int t = (int)(rnd(&seed) % (unsigned)nstreams);
            if (t != x->s) {
                order_after(sidx(t), sidx(x->s));
                kernel(sidx(t), x->p, x->size);
                cr_assert_eq(gpool_record_stream(pool, x->p, sidx(t)), GPOOL_OK, "%s",
                             gpool_last_error());
                x->recorded = 1;
            }
        } else if (what < 75) {
            int f = x->s;
            if (what >= 60) { /* free on another stream, ordered by the client or not */
                f = (int)(rnd(&seed) % (unsigned)nstreams);
                if (what < 68 && f != x->s) order_after(sidx(f), sidx(x->s));
            }
            put(x->p, sidx(f));
            x->p = NULL;
            x->recorded = 0;
            live--;
            req -= x->size;
        } else if (what < 93) {
            int t = (int)(rnd(&seed) % (unsigned)(nstreams + 1));
            if (t == nstreams) t = NS;
            if (rnd(&seed) % 3)
                sim->stream_hold(sidx(t));
            else
                sim->stream_release(sidx(t));
        } else if (what < 96) {
            cr_assert_eq(gpool_trim(pool, (size_t)(rnd(&seed) % 3) * 16 * MiB), GPOOL_OK, "%s",
                         gpool_last_error());
        } else if (pressure) {
            /* the device shrinks or grows, never below what the live blocks need */
            size_t pages = 0;
            for (int i = 0; i < SLOTS; i++)
                if (b[i].p) pages += b[i].size / GPOOL_SIM_GRANULARITY + 2;
            cap = (size_t)(96 + rnd(&seed) % 96) * MiB;
            if (cap < pages * GPOOL_SIM_GRANULARITY + 32 * MiB)
                cap = pages * GPOOL_SIM_GRANULARITY + 32 * MiB;
            sim->set_capacity(0, cap);
        }
        stats_match(live, req, "random step");
        cr_assert_eq(violations(), 0, "step %d: the referee saw %lu violations", step,
                     violations());
    }
    for (int i = 0; i < SLOTS; i++)
        if (b[i].p) put(b[i].p, sidx(b[i].s));
    stats_match(0, 0, "all freed");
    release_all();
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats st = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    cr_assert_eq(st.pending_frees, 0, "pending frees after trim");
}

Test(marks_adv, random_wait_mode_5_streams)
{
    for (uint32_t s = 1; s <= 3; s++)
        random_run(NULL, 0x1234u * s, 5, 1500, 0);
    finish();
}

Test(marks_adv, random_wait_mode_8_streams)
{
    for (uint32_t s = 1; s <= 3; s++)
        random_run(NULL, 0xbeefu * s, 8, 1500, 0);
    finish();
}

Test(marks_adv, random_events_mode_8_streams)
{
    for (uint32_t s = 1; s <= 3; s++)
        random_run("stream_reuse=events", 0x777u * s, 8, 1500, 0);
    finish();
}

Test(marks_adv, random_wait_mode_pressure)
{
    for (uint32_t s = 1; s <= 3; s++)
        random_run(NULL, 0x4242u * s, 6, 1500, 1);
    finish();
}

Test(marks_adv, random_events_mode_pressure)
{
    for (uint32_t s = 1; s <= 2; s++)
        random_run("stream_reuse=events", 0x5151u * s, 6, 1500, 1);
    finish();
}

Test(marks_adv, random_no_tcache_small_max)
{
    random_run("tcache_bytes=0", 0x9999u, 7, 2000, 0);
    finish();
}
