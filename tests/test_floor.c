/* The middle floor's defects (issue 24), each with the test that failed before its fix:
 * budgets bind through the thread cache, gpool_page_size answers what placement does, and
 * gpool_trim reports a driver call that failed during it. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)

TestSuite(floor_defects, .init = NULL);

/* 1 KiB blocks until one fails: how many the budget let through */
static int count_until_refused(gpool_t *pool, void **keep, int max)
{
    int n = 0;
    while (n < max && gpool_alloc(pool, KiB, NULL, &keep[n]) == GPOOL_OK)
        n++;
    return n;
}

static void budget_binds(const char *conf)
{
    gpool_t *pool = test_pool(conf);
    cr_assert_not_null(pool);
    enum { MAX = 20000 };
    static void *keep[MAX];
    int n = count_until_refused(pool, keep, MAX);
    cr_expect_eq(n, 1024, "%s: a 1 MiB budget admits 1,024 1-KiB blocks, %d were served", conf, n);
    cr_expect(strstr(gpool_last_error(), "device budget"), "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_leq(s.kind[GPOOL_MEM_DEVICE].in_use_bytes, MiB);
    /* freeing one makes room for one, whatever size class (the caches give back first) */
    cr_assert_eq(gpool_free(pool, keep[--n]), GPOOL_OK);
    cr_expect_eq(gpool_alloc(pool, 768, NULL, &keep[n]), GPOOL_OK, "%s", gpool_last_error());
    n++;
    while (n)
        cr_assert_eq(gpool_free(pool, keep[--n]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(floor_defects, device_budget_binds_with_the_thread_cache_on)
{
    budget_binds("budget_device=1MiB");
}

Test(floor_defects, device_budget_binds_with_the_thread_cache_off)
{
    budget_binds("budget_device=1MiB,tcache_bytes=0");
}

/* The pinned budget binds on the host small-block arena too, and a freed block's room is there
 * for the next request at once (its free waits on the event clock, which is asked before the
 * budget refuses or moves an AUTO request to mapped memory). */
Test(floor_defects, pinned_budget_binds_and_a_free_makes_room)
{
    gpool_t *pool = test_pool("budget_pinned=1MiB");
    cr_assert_not_null(pool);
    enum { MAX = 2000 };
    static void *keep[MAX];
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    p.kind = GPOOL_MEM_HOST_PINNED;
    int n = 0;
    while (n < MAX && gpool_alloc(pool, KiB, &p, &keep[n]) == GPOOL_OK)
        n++;
    cr_expect_eq(n, 1024, "a 1 MiB budget admits 1,024 1-KiB pinned blocks, %d were served", n);
    cr_expect(strstr(gpool_last_error(), "host_pinned budget"), "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, keep[--n]), GPOOL_OK);
    gpool_alloc_params a = GPOOL_ALLOC_PARAMS_INIT;
    a.kind = GPOOL_MEM_AUTO;
    a.usage = GPOOL_USAGE_STAGING;
    cr_assert_eq(gpool_alloc(pool, KiB, &a, &keep[n]), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, keep[n], &d), GPOOL_OK);
    cr_expect_eq(d.kind, GPOOL_MEM_HOST_PINNED, "the freed block's room went unused: kind %d",
                 (int)d.kind);
    cr_expect_eq(d.fell_back, 0);
    n++;
    while (n)
        cr_assert_eq(gpool_free(pool, keep[--n]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* gpool_page_size says the chunk a block of that size gets, and asking for that page size is
 * accepted: sizes just below the chunk thresholds, which placement rounds up to 256 bytes. */
Test(floor_defects, page_size_answers_what_placement_does)
{
    gpool_t *pool = test_pool("va_reserve=8GiB");
    cr_assert_not_null(pool);
    const size_t thresholds[] = {64 * MiB, 256 * MiB, (size_t)1 << 30};
    const size_t below[] = {1, 100, 255};
    for (size_t t = 0; t < 3; t++)
        for (size_t b = 0; b < 3; b++) {
            size_t size = thresholds[t] - below[b], page = 0, at = 0;
            cr_assert_eq(gpool_page_size(pool, GPOOL_MEM_DEVICE, size, &page), GPOOL_OK);
            cr_assert_eq(gpool_page_size(pool, GPOOL_MEM_DEVICE, thresholds[t], &at), GPOOL_OK);
            cr_expect_eq(page, at, "%zu bytes: gpool_page_size %zu, placement (rounded to %zu) %zu",
                         size, page, thresholds[t], at);
            gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
            p.page_size = page;
            void *d = NULL;
            gpool_status st = gpool_alloc(pool, size, &p, &d);
            cr_expect_eq(st, GPOOL_OK, "%zu bytes with page_size %zu: %s", size, page,
                         gpool_last_error());
            if (st != GPOOL_OK) continue;
            gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, d, &desc), GPOOL_OK);
            cr_expect_eq(desc.page_size, page, "%zu bytes: the block has %zu-byte chunks", size,
                         desc.page_size);
            cr_assert_eq(gpool_free(pool, d), GPOOL_OK);
            cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
        }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A failing cuMemHostUnregister during gpool_trim is reported, for each host source: the page
 * arenas (3 MiB and 64 KiB blocks: the memory stays cached, the next trim gives it back) and
 * the small-block extents (1 KiB blocks: an extent's unregister is tried 3 times, then the
 * extent goes anyway). fails: how many unregisters in a row fail. */
static void trim_reports(gpool_mem_kind kind, size_t size, unsigned fails)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    p.kind = kind;
    void *h = NULL;
    cr_assert_eq(gpool_alloc(pool, size, &p, &h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, h), GPOOL_OK);
    for (unsigned i = 1; i <= fails; i++)
        cr_assert_eq(sim->fail_nth("cuMemHostUnregister", i), 0);
    gpool_status st = gpool_trim(pool, 0);
    sim->fail_clear();
    cr_expect_eq(st, GPOOL_ERR_DRIVER, "%zu-byte block: gpool_trim gave %s", size,
                 gpool_strerror(st));
    cr_expect(strstr(gpool_last_error(), "cuMemHostUnregister"), "%s", gpool_last_error());
    /* the memory stayed cached: the next trim gives it back */
    cr_expect_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.kind[kind].reserved_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    if (fails == 1) cr_assert_eq(sim_live_total(), 0);
}

Test(floor_defects, trim_reports_a_failed_host_unregister_large)
{
    trim_reports(GPOOL_MEM_HOST_PINNED, 3 * MiB, 1);
}

Test(floor_defects, trim_reports_a_failed_host_unregister_small)
{
    trim_reports(GPOOL_MEM_HOST_PINNED, KiB, 3);
}

Test(floor_defects, trim_reports_a_failed_host_unregister_mapped)
{
    trim_reports(GPOOL_MEM_HOST_MAPPED, 64 * KiB, 1);
}

/* A host free waiting on the event clock, and the synchronize gpool_trim makes for it fails:
 * GPOOL_ERR_DRIVER naming it; the free stays waiting and the next trim finishes it. */
Test(floor_defects, trim_reports_a_failed_synchronize_for_waiting_host_frees)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    p.kind = GPOOL_MEM_HOST_PINNED;
    void *h = NULL;
    cr_assert_eq(gpool_alloc(pool, KiB, &p, &h), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, h), GPOOL_OK);
    unsigned long syncs = sim->call_count("cuCtxSynchronize");
    cr_assert_eq(sim->fail_nth("cuCtxSynchronize", 1), 0);
    gpool_status st = gpool_trim(pool, 0);
    int fired = sim->call_count("cuCtxSynchronize") > syncs;
    sim->fail_clear();
    cr_expect(fired, "gpool_trim synchronizes for the waiting host free");
    cr_expect_eq(st, GPOOL_ERR_DRIVER, "gpool_trim gave %s", gpool_strerror(st));
    cr_expect(strstr(gpool_last_error(), "cuCtxSynchronize"), "%s", gpool_last_error());
    cr_expect_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.pending_frees, 0);
    cr_expect_eq(s.kind[GPOOL_MEM_HOST_PINNED].reserved_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0);
}

/* ---------- host frees on the event clock ---------- */

TestSuite(floor_host_clock, .init = NULL);

static uint64_t driver_calls(gpool_t *pool)
{
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    return s.driver_calls_total;
}

/* 100,000 pairs made 300,000 driver calls (an event recorded and queried at each free); then
 * one event per 256 small frees; now one per 4096 small ones or 8 MiB (kind_host.c HOST_*POLL*;
 * 4 MiB of large ones when fresh memory would be needed), and a free on the block's own stream
 * makes none. At most one driver call per per_call pairs. */
static void pairs_make_few_driver_calls(gpool_mem_kind kind, size_t size, int per_call)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    p.kind = kind;
    void *h = NULL;
    for (int i = 0; i < 200; i++) { /* warm: the extent or pages are there */
        cr_assert_eq(gpool_alloc(pool, size, &p, &h), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_free(pool, h), GPOOL_OK);
    }
    cr_assert_eq(gpool_alloc(pool, size, &p, &h), GPOOL_OK);
    uint64_t before = driver_calls(pool);
    cr_assert_eq(gpool_free(pool, h), GPOOL_OK);
    cr_expect_eq(driver_calls(pool), before, "a free on the block's own stream: no driver call");
    enum { PAIRS = 10000 };
    before = driver_calls(pool);
    for (int i = 0; i < PAIRS; i++) {
        cr_assert_eq(gpool_alloc(pool, size, &p, &h), GPOOL_OK, "%s", gpool_last_error());
        memset(h, i, size);
        cr_assert_eq(gpool_free(pool, h), GPOOL_OK);
    }
    uint64_t calls = driver_calls(pool) - before;
    cr_expect_leq(calls, PAIRS / per_call,
                  "%zu-byte pairs of kind %d: %llu driver calls per %d pairs", size, (int)kind,
                  (unsigned long long)calls, PAIRS);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.kind[kind].live_blocks, 0);
    cr_expect_eq(s.kind[kind].in_use_bytes, 0, "waiting frees are frees");
    cr_expect_lt(s.kind[kind].reserved_bytes, 16 * MiB, "the waiting frees are reused");
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.pending_frees, 0, "trim finishes the waiting frees");
    cr_expect_eq(s.kind[kind].reserved_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0);
}

Test(floor_host_clock, pinned_small_pairs_make_few_driver_calls)
{
    pairs_make_few_driver_calls(GPOOL_MEM_HOST_PINNED, 512, 1000);
}

Test(floor_host_clock, mapped_small_pairs_make_few_driver_calls)
{
    pairs_make_few_driver_calls(GPOOL_MEM_HOST_MAPPED, 512, 1000);
}

/* polls per 4-8 MiB freed, each with one more driver call on the legacy stream since
 * 2026-12-05 (whether a blocking stream captures: stream.c legacy_joins_capture): 2,856 calls
 * per 10,000 pairs of 300 KiB then */
Test(floor_host_clock, pinned_large_pairs_make_few_driver_calls)
{
    pairs_make_few_driver_calls(GPOOL_MEM_HOST_PINNED, 300 * KiB, 3);
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bn && y < x + an;
}

/* A pinned block read by an async copy on a non-blocking stream A, freed with
 * gpool_free_async on A while the copy may still run, is not handed to stream B (nor to A)
 * before that copy is done; once it is, B may have it. The strict referee stays silent. */
static void copy_then_other_stream(size_t size)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream) =
        sim_driver_proc("cuMemcpyHtoDAsync");
    CUresult (*dtoh)(void *, CUdeviceptr, size_t, CUstream) = sim_driver_proc("cuMemcpyDtoHAsync");
    CUresult (*ssync)(CUstream) = sim_driver_proc("cuStreamSynchronize");
    cr_assert(mk && destroy && htod && dtoh && ssync);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    CUstream A, B;
    cr_assert_eq(mk(&A, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(mk(&B, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    void *da = NULL, *db = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, NULL, A, &da), GPOOL_OK);
    cr_assert_eq(gpool_alloc_async(pool, size, NULL, B, &db), GPOOL_OK);
    gpool_alloc_params pin = GPOOL_ALLOC_PARAMS_INIT;
    pin.kind = GPOOL_MEM_HOST_PINNED;
    unsigned long violations = sim->violations();
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, &pin, A, &p), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(A);
    cr_assert_eq(htod((CUdeviceptr)da, p, size, A), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *q[4];
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(gpool_alloc_async(pool, size, &pin, i % 2 ? A : B, &q[i]), GPOOL_OK, "%s",
                     gpool_last_error());
        cr_assert(!overlaps(p, size, q[i], size), "the block went to %s while A's copy reads it",
                  i % 2 ? "A" : "B");
        cr_assert_eq(dtoh(q[i], (CUdeviceptr)db, size, B), CUDA_SUCCESS); /* B writes it */
    }
    cr_assert_eq(ssync(B), CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gpool_free_async(pool, q[i], B), GPOOL_OK);
    sim->stream_release(A);
    /* A's copy is done: B may reuse the memory now, and the referee sees that in order */
    int reused = 0;
    for (int i = 0; i < 10000 && !reused; i++) { /* within 4096 frees (kind_host.c) */
        void *r = NULL;
        cr_assert_eq(gpool_alloc_async(pool, size, &pin, B, &r), GPOOL_OK);
        reused = overlaps(p, size, r, size);
        cr_assert_eq(dtoh(r, (CUdeviceptr)db, size, B), CUDA_SUCCESS);
        cr_assert_eq(gpool_free_async(pool, r, B), GPOOL_OK);
    }
    cr_expect(reused, "the block is reused once A's copy is done");
    cr_expect_eq(sim->violations(), violations, "the referee saw an unordered access");
    cr_assert_eq(gpool_free_async(pool, da, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, db, B), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(A), CUDA_SUCCESS);
    cr_assert_eq(destroy(B), CUDA_SUCCESS);
    cr_assert_eq(sim_live_total(), 0);
}

Test(floor_host_clock, pinned_copy_on_a_nonblocking_stream_then_another_stream_small)
{
    copy_then_other_stream(512);
}

Test(floor_host_clock, pinned_copy_on_a_nonblocking_stream_then_another_stream_large)
{
    copy_then_other_stream(3 * MiB);
}

/* More streams with waiting host frees than the clock has slots (GP_HOST_CLOCKS, 64): every
 * waiting block stays off limits while its stream's work may use it -- a slot is never handed
 * to another stream while it has marks, and a free finding no slot takes the deferred path. */
Test(floor_host_clock, more_streams_than_clock_slots_keep_their_blocks)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    cr_assert(mk && destroy);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    enum { NS = 70, MORE = 600 };
    CUstream st[NS];
    void *held[NS];
    gpool_alloc_params pin = GPOOL_ALLOC_PARAMS_INIT;
    pin.kind = GPOOL_MEM_HOST_PINNED;
    for (int i = 0; i < NS; i++) {
        cr_assert_eq(mk(&st[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        cr_assert_eq(gpool_alloc_async(pool, KiB, &pin, st[i], &held[i]), GPOOL_OK, "%s",
                     gpool_last_error());
        sim->stream_hold(st[i]);
        cr_assert_eq(gpool_free_async(pool, held[i], st[i]), GPOOL_OK, "%s", gpool_last_error());
    }
    /* enough frees on the default stream for the pool to settle several times */
    static void *more[MORE];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < MORE; i++) {
            cr_assert_eq(gpool_alloc(pool, KiB, &pin, &more[i]), GPOOL_OK, "%s",
                         gpool_last_error());
            for (int k = 0; k < NS; k++)
                cr_assert(!overlaps(more[i], KiB, held[k], KiB),
                          "stream %d's block reused while its work may use it", k);
        }
        for (int i = 0; i < MORE; i++)
            cr_assert_eq(gpool_free(pool, more[i]), GPOOL_OK);
    }
    for (int i = 0; i < NS; i++)
        sim->stream_release(st[i]);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.pending_frees, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < NS; i++)
        cr_assert_eq(destroy(st[i]), CUDA_SUCCESS);
    cr_assert_eq(sim_live_total(), 0);
}

/* Threads allocating and freeing host blocks on their own streams and the default one at once:
 * the clock lets the lock go while it asks the driver; nothing is lost or handed out twice. */
struct host_job {
    gpool_t *pool;
    CUstream stream;
    unsigned seed;
    int failed;
};

static void *host_worker(void *arg)
{
    struct host_job *j = arg;
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    enum { LIVE = 8 };
    void *live[LIVE] = {0};
    uint32_t seed = j->seed;
    for (int i = 0; i < 6000 && !j->failed; i++) {
        int slot = (int)(rnd(&seed) % LIVE);
        CUstream s = rnd(&seed) % 2 ? j->stream : NULL;
        if (live[slot]) {
            if (*(uint32_t *)live[slot] != (uint32_t)(uintptr_t)live[slot]) j->failed = 1;
            if (gpool_free_async(j->pool, live[slot], s) != GPOOL_OK) j->failed = 2;
            live[slot] = NULL;
            continue;
        }
        p.kind = rnd(&seed) % 3 ? GPOOL_MEM_HOST_PINNED : GPOOL_MEM_HOST_MAPPED;
        size_t size = rnd(&seed) % 4 ? 64 + rnd(&seed) % 4000 : 100 * KiB + rnd(&seed) % 400000;
        if (gpool_alloc_async(j->pool, size, &p, s, &live[slot]) != GPOOL_OK) {
            j->failed = 3;
            break;
        }
        *(uint32_t *)live[slot] = (uint32_t)(uintptr_t)live[slot]; /* owned by this thread */
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k] && gpool_free(j->pool, live[k]) != GPOOL_OK) j->failed = 4;
    return NULL;
}

Test(floor_host_clock, threads_share_the_clock)
{
    NEED_SIM();
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    cr_assert(mk && destroy);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    enum { NT = 4 };
    struct host_job job[NT];
    pthread_t tid[NT];
    for (int i = 0; i < NT; i++) {
        job[i] = (struct host_job){.pool = pool, .seed = 77u + (unsigned)i};
        cr_assert_eq(mk(&job[i].stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        pthread_create(&tid[i], NULL, host_worker, &job[i]);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(tid[i], NULL);
        cr_expect_eq(job[i].failed, 0, "thread %d failed (%d): %s", i, job[i].failed,
                     gpool_last_error());
    }
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_expect_eq(s.pending_frees, 0);
    cr_expect_eq(s.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 0);
    cr_expect_eq(s.kind[GPOOL_MEM_HOST_MAPPED].live_blocks, 0);
    cr_expect_eq(s.kind[GPOOL_MEM_HOST_PINNED].reserved_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < NT; i++)
        cr_assert_eq(destroy(job[i].stream), CUDA_SUCCESS);
    cr_assert_eq(sim_live_total(), 0);
}
