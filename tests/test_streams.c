/* Stream-ordered reuse, proven on the simulated driver's held-completion mode: work held on
 * a stream does not complete until the test releases it. The pools here use
 * stream_reuse=events, the rule without waits gpool adds on its own (another stream's frees
 * only once done, or with GPOOL_ALLOC_STREAM_WAIT); the default (wait) is tested in
 * test_streams_rules.c (stream_reuse) and by the race oracle. Every test needs that (and the setup
 * makes its streams through the simulator), so on a real GPU (GPOOL_TEST_REAL_GPU=1) the whole
 * suite skips. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;
static gpool_t *pool;
static CUstream A, B;

static void setup(void)
{
    NEED_SIM(); /* skips every test of the suite on a real GPU */
    sim = sim_api();
    cr_assert_not_null(sim);
    pool = test_pool("stream_reuse=events");
    cr_assert_not_null(pool);
    /* the test thread needs the primary context current to create streams */
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(mk(&A, 0), CUDA_SUCCESS);
    cr_assert_eq(mk(&B, 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return; /* skipped (real GPU) or setup failed before the streams existed */
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    sim->stream_release(A);
    sim->stream_release(B);
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    destroy(A);
    destroy(B);
    release(0);
    teardown_expect(sim_live_total() == 0, "events, mappings and handles all returned");
    teardown_end();
}

TestSuite(streams, .init = setup, .fini = teardown);

static void *alloc_on(size_t size, CUstream s, unsigned flags)
{
    gpool_alloc_params prm = {.flags = flags};
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, &prm, s, &p), GPOOL_OK, "%s", gpool_last_error());
    return p;
}

static int overlaps(void *a, size_t na, void *b, size_t nb)
{
    return (char *)a < (char *)b + nb && (char *)b < (char *)a + na;
}

Test(streams, large_block_reused_on_its_stream_at_once_and_elsewhere_only_after_completion)
{
    const size_t sz = 4 * MiB;
    sim->set_capacity(0, 12 * MiB);
    void *p = alloc_on(sz, A, 0);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *q = alloc_on(sz, B, 0);
    cr_assert(!overlaps(p, sz, q, sz), "stream B got memory stream A may still be using");
    void *r = alloc_on(sz, A, 0);
    cr_assert_eq(r, p, "stream A reuses its own free block at once");
    cr_assert_eq(gpool_free_async(pool, r, A), GPOOL_OK);
    /* Still held: B gets other memory, or, when the 12 MiB are all mapped (the pool's first
     * growth mapped spare pages next to p, which the second stream's arrival left waiting for
     * A), the out-of-memory path synchronizes first, which completes A's work. Never p while A's
     * work on it is queued. */
    unsigned long syncs_before = sim->forced_syncs();
    void *q2 = alloc_on(sz, B, 0);
    cr_assert(!overlaps(p, sz, q2, sz) || sim->forced_syncs() > syncs_before,
              "stream B got memory stream A may still be using");
    cr_assert_eq(gpool_free_async(pool, q2, B), GPOOL_OK);
    sim->stream_release(A);
    /* A's pages are reusable by B now: 8 MiB next to q's 4 MiB fits in 12 MiB only with them,
     * and no synchronize is needed to get them (the pool polls A's event) */
    unsigned long forced = sim->forced_syncs();
    void *big = alloc_on(2 * sz, B, 0);
    cr_assert_eq(sim->forced_syncs(), forced);
    fill_pattern(big, 2 * sz, 5);
    cr_assert(check_pattern(big, 2 * sz, 5));
    cr_assert_eq(gpool_free_async(pool, big, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK, "%s", gpool_last_error());
}

/* A block that stream A got from its own pending free, then freed on B: B must not reuse it
 * while A's earlier work on that memory is still queued (a fuzz_ops finding). */
Test(streams, block_freed_on_another_stream_waits_for_its_allocating_stream)
{
    const size_t sz = 512 * 1024;
    void *p = alloc_on(sz, A, 0);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK); /* A's queued work may still use p */
    void *q = alloc_on(16 * 1024, A, 0);                  /* A reuses its own free at once */
    cr_assert_eq(q, p);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK); /* B is done with q at once ... */
    void *r = alloc_on(200, B, 0);                        /* ... but A is not done with p */
    cr_assert(!overlaps(p, sz, r, 200), "stream B got memory stream A's queued work may use");
    void *big = alloc_on(sz, B, 0);
    cr_assert(!overlaps(p, sz, big, sz));
    cr_assert_eq(gpool_free_async(pool, r, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, big, B), GPOOL_OK);
    sim->stream_release(A);
    /* once A completed, B gets that memory back without a forced synchronize */
    unsigned long forced = sim->forced_syncs();
    int back = 0;
    void *keep[64];
    int n = 0;
    for (; n < 64 && !back; n++) {
        keep[n] = alloc_on(sz, B, 0);
        back = overlaps(p, sz, keep[n], sz);
    }
    cr_assert(back, "the block is B's to reuse after A completed");
    cr_assert_eq(sim->forced_syncs(), forced);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free_async(pool, keep[i], B), GPOOL_OK);
}

/* The same with the block recorded on the freeing stream (the record_stream path). */
Test(streams, recorded_block_freed_on_another_stream_waits_for_its_allocating_stream)
{
    const size_t sz = 512 * 1024;
    void *p = alloc_on(sz, A, 0);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *q = alloc_on(16 * 1024, A, 0);
    cr_assert_eq(q, p);
    cr_assert_eq(gpool_record_stream(pool, q, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    void *r = alloc_on(200, B, 0);
    cr_assert(!overlaps(p, sz, r, 200), "stream B got memory stream A's queued work may use");
    cr_assert_eq(gpool_free_async(pool, r, B), GPOOL_OK);
    sim->stream_release(A);
}

/* A device budget counts a block freed on another stream only until its streams are done:
 * with A idle, the next allocation is within the budget at once. */
Test(streams, budget_frees_cross_stream_blocks_once_their_streams_are_done)
{
    gpool_t *bp = test_pool("budget_device=4M");
    cr_assert_not_null(bp);
    gpool_alloc_params prm = {0};
    void *p = NULL, *q = NULL;
    cr_assert_eq(gpool_alloc_async(bp, 3 * MiB, &prm, A, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free_async(bp, p, B), GPOOL_OK);
    cr_assert_eq(gpool_alloc_async(bp, 3 * MiB, &prm, B, &q), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free_async(bp, q, B), GPOOL_OK);
    cr_assert_eq(gpool_destroy(bp), GPOOL_OK, "%s", gpool_last_error());
}

Test(streams, small_block_freed_on_another_stream_waits_for_it)
{
    /* small blocks of the default stream come from slabs and thread caches */
    void *s = NULL;
    cr_assert_eq(gpool_alloc(pool, 100, NULL, &s), GPOOL_OK);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, s, A), GPOOL_OK, "%s", gpool_last_error());
    enum { N = 2000 };
    static void *keep[N];
    for (int i = 0; i < 600; i++) {
        cr_assert_eq(gpool_alloc(pool, 100, NULL, &keep[i]), GPOOL_OK);
        cr_assert_neq(keep[i], s, "slot reused on the default stream while A runs (alloc %d)", i);
    }
    sim->stream_release(A);
    int n = 600, back = 0;
    for (; n < N && !back; n++) {
        cr_assert_eq(gpool_alloc(pool, 100, NULL, &keep[n]), GPOOL_OK);
        back = keep[n] == s;
    }
    cr_assert(back, "slot comes back once A completed");
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free(pool, keep[i]), GPOOL_OK);
}

Test(streams, small_blocks_of_other_streams_follow_the_same_rules)
{
    void *s = alloc_on(100, B, 0);
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, s, B), GPOOL_OK);
    void *mine = alloc_on(100, B, 0);
    cr_assert_eq(mine, s, "B reuses its own small block at once");
    cr_assert_eq(gpool_free_async(pool, mine, B), GPOOL_OK);
    for (int i = 0; i < 50; i++) {
        void *other = alloc_on(100, A, 0);
        cr_assert_neq(other, s, "A got B's pending block");
        cr_assert_eq(gpool_free_async(pool, other, A), GPOOL_OK);
    }
}

Test(streams, record_stream_defers_reuse_until_every_user_is_done)
{
    const size_t sz = 3 * MiB;
    void *p = alloc_on(sz, A, 0);
    cr_assert_eq(gpool_record_stream(pool, p, B), GPOOL_OK);
    cr_assert_eq(gpool_record_stream(pool, (char *)p + 256, B), GPOOL_ERR_INVALID_POINTER);
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *r = alloc_on(sz, A, 0);
    cr_assert(!overlaps(p, sz, r, sz), "reused while stream B (recorded) still runs");
    gpool_free_async(pool, r, A);
    sim->stream_release(B);
    int seen = 0;
    void *got[4];
    for (int i = 0; i < 4; i++) {
        got[i] = alloc_on(sz, A, 0);
        seen |= got[i] == p;
    }
    cr_assert(seen, "reusable after B's work completed");
    for (int i = 0; i < 4; i++)
        gpool_free_async(pool, got[i], A);
}

Test(streams, record_stream_on_small_block_and_plain_free)
{
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 64, NULL, &p), GPOOL_OK);
    cr_assert_eq(gpool_record_stream(pool, p, A), GPOOL_OK);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    for (int i = 0; i < 300; i++) {
        void *q;
        cr_assert_eq(gpool_alloc(pool, 64, NULL, &q), GPOOL_OK);
        cr_assert_neq(q, p, "small block recorded on A reused while A runs");
        cr_assert_eq(gpool_free(pool, q), GPOOL_OK);
    }
    cr_assert_eq(gpool_record_stream(pool, p, A), GPOOL_ERR_INVALID_POINTER, "freed block");
    cr_assert_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER, "double free while pending");
}

Test(streams, oom_waits_for_pending_work_instead_of_failing)
{
    sim->set_capacity(0, 16 * MiB);
    void *p = alloc_on(12 * MiB, A, 0);
    sim->stream_hold(A);
    gpool_free_async(pool, p, A);
    unsigned long forced = sim->forced_syncs();
    void *q = alloc_on(12 * MiB, B, 0);
    cr_assert_not_null(q);
    cr_assert_gt(sim->forced_syncs(), forced, "the allocator waited for A's work");
    gpool_free_async(pool, q, B);
}

Test(streams, stream_wait_flag_reuses_pending_block_by_ordering_streams)
{
    const size_t sz = 6 * MiB;
    void *p = alloc_on(sz, A, 0);
    sim->stream_hold(A);
    gpool_free_async(pool, p, A);
    unsigned long waits = sim->call_count("cuStreamWaitEvent");
    void *q = alloc_on(sz, B, GPOOL_ALLOC_STREAM_WAIT);
    cr_assert_eq(q, p, "with STREAM_WAIT, B takes A's pending block");
    cr_assert_gt(sim->call_count("cuStreamWaitEvent"), waits, "and B waits on A's event");
    gpool_free_async(pool, q, B);
}

Test(streams, one_stream_records_no_events)
{
    sim->reset_counts();
    void *p[50];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 50; i++)
            p[i] = alloc_on((size_t)(i + 1) * 40000, A, 0);
        for (int i = 0; i < 50; i++)
            gpool_free_async(pool, p[i], A);
    }
    cr_assert_eq(sim->call_count("cuEventRecord"), 0);
    cr_assert_eq(sim->call_count("cuEventQuery"), 0);
}

Test(streams, destroy_with_deferred_frees_is_clean)
{
    void *p = alloc_on(5 * MiB, A, 0);
    gpool_record_stream(pool, p, B);
    sim->stream_hold(B);
    gpool_free_async(pool, p, A);
    /* teardown destroys the pool with the free still deferred: must not count as live */
}

/* One stream: its frees are reusable by it at once, but their pages may still be touched by
 * the work queued before the free, so trim and the OOM path wait before unmapping them. */
Test(streams, trim_waits_for_queued_work_before_unmapping)
{
    void *p = alloc_on(8 * MiB, A, 0);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    unsigned long syncs = sim->call_count("cuCtxSynchronize");
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    cr_assert_gt(sim->call_count("cuCtxSynchronize"), syncs,
                 "trim unmapped pages A's work may still use without waiting");
    cr_assert_eq(sim->bytes_in_use(0), 0);
}

Test(streams, oom_path_waits_for_queued_work_of_the_only_stream)
{
    sim->set_capacity(0, 16 * MiB);
    void *p = alloc_on(12 * MiB, A, 0);
    void *blocker = alloc_on(256, A, 0); /* keeps the next request off p's range */
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    /* a request that does not fit the freed range: p's pages must be remapped */
    unsigned long syncs = sim->call_count("cuCtxSynchronize");
    void *q = alloc_on(14 * MiB, A, 0);
    cr_assert_not_null(q);
    cr_assert_gt(sim->call_count("cuCtxSynchronize"), syncs, "remapped without waiting");
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, blocker, A), GPOOL_OK);
}

/* Host memory: the CPU writes a block as soon as it is handed out again, so a pinned block
 * freed on a stream whose copies may still read it is not reused — not even on that stream —
 * until the stream's work is done. */
Test(streams, pinned_block_waits_for_its_stream_before_any_reuse)
{
    gpool_alloc_params pin = {.kind = GPOOL_MEM_HOST_PINNED};
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 3 * MiB, &pin, A, &p), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_ERR_INVALID_POINTER, "double free");
    gpool_stats st = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &st);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 0, "freed from the caller's view");
    cr_assert_eq(st.pending_frees, 1);
    void *q = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 3 * MiB, &pin, A, &q), GPOOL_OK);
    cr_assert_neq(q, p, "reused while A's copies may still read it");
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    sim->stream_release(A);
    void *r = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 3 * MiB, &pin, A, &r), GPOOL_OK);
    gpool_get_stats(pool, &st);
    cr_assert_eq(st.pending_frees, 0, "completed frees are processed at the next allocation");
    cr_assert_eq(gpool_free(pool, r), GPOOL_OK);
}

/* STREAM_WAIT orders only the requesting stream after the pending work: the rest of the
 * pending range must stay off limits for every other stream (a fuzzer finding). */
Test(streams, stream_wait_hands_pending_memory_to_the_requester_only)
{
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUstream C;
    cr_assert_eq(mk(&C, 0), CUDA_SUCCESS);
    void *p = alloc_on(12 * MiB, A, 0);
    sim->stream_hold(A);
    gpool_free_async(pool, p, A);
    void *q = alloc_on(4 * MiB, B, GPOOL_ALLOC_STREAM_WAIT);
    cr_assert(overlaps(p, 12 * MiB, q, 4 * MiB), "B waited on A and took part of its block");
    for (int i = 0; i < 3; i++) {
        void *c = alloc_on(4 * MiB, C, 0);
        cr_assert(!overlaps(p, 12 * MiB, c, 4 * MiB), "stream C got memory A may still use");
        gpool_free_async(pool, c, C);
    }
    gpool_free_async(pool, q, B);
    sim->stream_release(A);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    pool = test_pool("stream_reuse=events"); /* teardown destroys this one */
    destroy(C);
}

/* A program that uses many streams over time does not grow gpool's per-stream state: streams
 * with nothing pending are forgotten, and idle events beyond a small reserve are destroyed. */
Test(streams, many_streams_over_time_keep_state_bounded)
{
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    enum { N = 200 };
    static CUstream s[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(mk(&s[i], 0), CUDA_SUCCESS);
        void *p = alloc_on(3 * MiB, s[i], 0);
        cr_assert_eq(gpool_free_async(pool, p, s[i]), GPOOL_OK);
        void *q = alloc_on(3 * MiB, B, 0); /* B polls the others' events */
        cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    }
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    struct gpoolsim_live live;
    sim->get_live(&live);
    cr_assert_leq(live.events, 80, "%zu events alive for %d streams", live.events, N);
    for (int i = 0; i < N; i++)
        destroy(s[i]);
}

/* A request on A that would cut a larger clean range first polls B: B's freed block, its work
 * done, is the exact fit and is reused in place instead of A cutting the cached space next to
 * it (the multi-stream traces' fragmentation, issue 15, section 3). */
Test(streams, split_fit_polls_other_streams_and_reuses_their_completed_block)
{
    const size_t sz = 1 * MiB;
    void *p = alloc_on(sz, B, 0); /* the first 2 MiB page: p and 1 MiB of clean, backed space */
    void *keep = alloc_on(sz, A, 0);
    cr_assert_eq((char *)keep, (char *)p + sz, "A fills the rest of p's page");
    void *keep2 = alloc_on(sz / 4, A, 0); /* a second page: 1.75 MiB of clean backed space */
    /* such polls are rate-limited (one per 4 large requests): nothing else is pending now */
    void *more[4];
    for (int i = 0; i < 4; i++)
        more[i] = alloc_on(sz / 8, A, 0); /* 1.25 MiB of it left: q fits without fresh pages */
    cr_assert_eq(gpool_free_async(pool, p, B), GPOOL_OK);
    /* B's work is not held: its free completes at once, but only a poll can know */
    void *q = alloc_on(sz, A, 0);
    cr_assert_eq(q, p, "A reuses B's completed free block (exact fit) instead of cutting %p", q);
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, keep, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, keep2, A), GPOOL_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gpool_free_async(pool, more[i], A), GPOOL_OK);
}

/* A pinned block recorded on another stream waits behind its events; once that stream's work
 * is done, gpool_trim finishes the free and gives the memory back, and the pool's counters
 * say so (the host kind finishes its deferred frees itself, src/kinds/deferred.c). */
Test(streams, recorded_pinned_free_is_finished_by_trim)
{
    gpool_alloc_params pin = {.kind = GPOOL_MEM_HOST_PINNED};
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 3 * MiB, &pin, A, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_record_stream(pool, p, B), GPOOL_OK);
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    gpool_stats st = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &st);
    cr_assert_eq(st.pending_frees, 1, "waits for B");
    sim->stream_release(B);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_get_stats(pool, &st);
    cr_assert_eq(st.pending_frees, 0);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_PINNED].in_use_bytes, 0);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_PINNED].reserved_bytes, 0, "trim gave the pages back");
}
