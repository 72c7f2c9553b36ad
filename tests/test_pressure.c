/* The pressure and fault paths keep their promises (issue 13): one test per defect, each
 * written to fail before its fix. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "gpool.h"
#include "util_model.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;

static void setup(void)
{
    if (test_real_gpu()) return;
    sim = sim_api();
    cr_assert_not_null(sim, "needs GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(pressure, .init = setup);

static void write_all(void *p, size_t n)
{
    memset(p, 0x5a, n);
}

/* 128 MiB device: fill with 4 MiB blocks, free every other, 60 MiB (served by remapping),
 * free everything, then 64 MiB or more (8 MiB chunks): the chunk fails, single cached pages
 * serve it. Before the fix the failed chunk's status was kept: OUT_OF_MEMORY. */
Test(pressure, chunk_fallback_uses_cached_pages)
{
    NEED_SIM();
    sim->set_capacity(0, 128 * MiB);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *b[32];
    int n = 0;
    while (n < 32 && gpool_alloc(pool, 4 * MiB, NULL, &b[n]) == GPOOL_OK)
        n++;
    cr_assert_geq(n, 30);
    for (int i = 0; i < n; i += 2)
        cr_assert_eq(gpool_free(pool, b[i]), GPOOL_OK);
    void *big = NULL;
    cr_assert_eq(gpool_alloc(pool, 60 * MiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, big), GPOOL_OK);
    for (int i = 1; i < n; i += 2)
        cr_assert_eq(gpool_free(pool, b[i]), GPOOL_OK);
    for (size_t sz = 64 * MiB; sz <= 120 * MiB; sz += 28 * MiB) {
        cr_assert_eq(gpool_alloc(pool, sz, NULL, &big), GPOOL_OK, "%zu MiB: %s", sz / MiB,
                     gpool_last_error());
        write_all(big, sz);
        cr_assert_eq(gpool_free(pool, big), GPOOL_OK);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* A request larger than the whole device is refused at once, with a message that says so,
 * without driver calls and without growing the pool. */
Test(pressure, never_fitting_request_refused_up_front)
{
    NEED_SIM();
    sim->set_capacity(0, 128 * MiB);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 8 * MiB, NULL, &p), GPOOL_OK);
    gpool_stats before = GPOOL_STATS_INIT, after = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &before);
    unsigned long calls = sim->call_total();
    void *q = NULL;
    cr_assert_eq(gpool_alloc(pool, 200 * MiB, NULL, &q), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_leq(sim->call_total() - calls, 4, "%lu driver calls", sim->call_total() - calls);
    cr_assert(strstr(gpool_last_error(), "never fit"), "%s", gpool_last_error());
    cr_assert_null(strstr(gpool_last_error(), "live blocks hold"), "%s", gpool_last_error());
    gpool_get_stats(pool, &after);
    cr_assert_eq(after.kind[GPOOL_MEM_DEVICE].reserved_bytes,
                 before.kind[GPOOL_MEM_DEVICE].reserved_bytes);
    cr_assert_eq(after.ooms, before.ooms + 1);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* One failed allocation counts once in ooms, at most once in oom_retries. */
Test(pressure, one_failure_counts_once)
{
    NEED_SIM();
    sim->set_capacity(0, 64 * MiB);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL, *q = NULL;
    cr_assert_eq(gpool_alloc(pool, 40 * MiB, NULL, &p), GPOOL_OK);
    gpool_stats s0 = GPOOL_STATS_INIT, s1 = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s0);
    cr_assert_eq(gpool_alloc(pool, 40 * MiB, NULL, &q), GPOOL_ERR_OUT_OF_MEMORY);
    gpool_get_stats(pool, &s1);
    cr_assert_eq(s1.ooms - s0.ooms, 1);
    cr_assert_eq(s1.oom_retries - s0.oom_retries, 1);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* Every driver call a pool makes is in its driver_calls, cuGetErrorName/String included. */
Test(pressure, every_driver_call_counted)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_stats s0 = GPOOL_STATS_INIT, s1 = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s0);
    unsigned long c0 = sim->call_total();
    sim->fail_nth("cuMemCreate", 1);
    void *p = NULL;
    gpool_alloc(pool, 4 * MiB, NULL, &p); /* a failure is described by the driver */
    if (p) gpool_free(pool, p);
    gpool_get_stats(pool, &s1);
    cr_assert_eq(s1.driver_calls_total - s0.driver_calls_total, sim->call_total() - c0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* Peaks never go down and are never below the current value. */
Test(pressure, peaks_monotone)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *a = NULL, *b = NULL;
    gpool_stats s0 = GPOOL_STATS_INIT, s1 = GPOOL_STATS_INIT, s2 = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_alloc(pool, 8 * MiB, NULL, &a), GPOOL_OK);
    gpool_get_stats(pool, &s0);
    cr_assert_eq(gpool_free(pool, a), GPOOL_OK); /* cached rises to 8 MiB */
    gpool_get_stats(pool, &s1);
    cr_assert_geq(s1.kind[GPOOL_MEM_DEVICE].peak_cached_bytes,
                  s1.kind[GPOOL_MEM_DEVICE].cached_bytes);
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &b), GPOOL_OK);
    gpool_get_stats(pool, &s2);
    for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++) {
        cr_assert_geq(s2.kind[k].peak_cached_bytes, s1.kind[k].peak_cached_bytes);
        cr_assert_geq(s2.kind[k].peak_requested_bytes, s0.kind[k].peak_requested_bytes);
    }
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* An address-space reservation the driver cannot give is reported by gpool_create (before:
 * create succeeded and every allocation then failed as out of memory). */
Test(pressure, va_reserve_failure_reported_by_create)
{
    NEED_SIM();
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cr_assert_eq(gpool_config_parse(&cfg, "va_reserve=200T"), GPOOL_OK);
    gpool_t *pool = NULL;
    gpool_status st = gpool_create(&cfg, &pool);
    cr_assert_neq(st, GPOOL_OK, "gpool_create succeeded with an impossible va_reserve");
    cr_assert_null(pool);
    cr_assert(strstr(gpool_last_error(), "va_reserve"), "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0);
    /* and a reservation that fails once is reported the same way */
    sim->fail_nth("cuMemAddressReserve", 1);
    cr_assert_eq(gpool_create(NULL, &pool), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_eq(gpool_create(NULL, &pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* cuMemSetAccess fails, then the rollback's cuMemUnmap fails: the pages stay mapped without
 * access. Before the fix they were cached as backed, the next allocation returned them and
 * writing the block crashed (SIGSEGV). Every byte of the next block is written. */
Test(pressure, setaccess_then_unmap_failure_never_hands_out_inaccessible_pages)
{
    NEED_SIM();
    NEED_HOST_VIDMEM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    sim->fail_nth("cuMemSetAccess", 1);
    sim->fail_nth("cuMemUnmap", 1);
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_ERR_DRIVER);
    cr_assert(strstr(gpool_last_error(), "cuMemSetAccess"), "%s", gpool_last_error());
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
        write_all(p, 4 * MiB);
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    }
    /* and when the unmap keeps failing, the allocation fails instead of crashing later */
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    sim->fail_nth("cuMemSetAccess", 1);
    sim->fail_nth("cuMemUnmap", 1);
    sim->fail_nth("cuMemUnmap", 2);
    gpool_status st = gpool_alloc(pool, 4 * MiB, NULL, &p);
    if (st == GPOOL_OK) {
        write_all(p, 4 * MiB);
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    }
    sim->fail_clear();
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    write_all(p, 4 * MiB);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* A registration failing while the small host arena is created leaves every counter as it
 * was (before: in-use bytes went negative); a failed attribute query is a driver error, not
 * "unsupported". */
Test(pressure, failed_host_setup_leaves_counters_alone)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    gpool_alloc_params hp = {.kind = GPOOL_MEM_HOST_PINNED};
    void *p = NULL;
    sim->fail_nth("cuMemHostRegister", 1);
    cr_assert_eq(gpool_alloc(pool, 1000, &hp, &p), GPOOL_ERR_OUT_OF_MEMORY);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++) {
        cr_assert_eq(s.kind[k].in_use_bytes, 0, "kind %d in use %llu", k,
                     (unsigned long long)s.kind[k].in_use_bytes);
        cr_assert_leq(s.kind[k].in_use_bytes, s.kind[k].reserved_bytes);
    }
    cr_assert_eq(gpool_alloc(pool, 1000, &hp, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    gpool_destroy(pool);
    pool = test_pool(NULL);
    sim->fail_nth("cuDeviceGetAttribute", 1);
    gpool_status st = gpool_alloc(pool, 1000, &hp, &p);
    cr_assert(st == GPOOL_OK || st == GPOOL_ERR_DRIVER, "status %d: %s", st, gpool_last_error());
    if (st == GPOOL_OK) gpool_free(pool, p);
    cr_assert_eq(gpool_alloc(pool, 1000, &hp, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* cuCtxSynchronize fails: gpool_trim unmaps nothing (queued work may still use the cached
 * pages) and says so; cuMemUnmap fails: trim says so too. Before: success both times, and
 * 8 MiB unmapped under queued work. */
Test(pressure, trim_reports_failed_sync_and_unmap)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 8 * MiB, NULL, &p), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    unsigned long unmaps = sim->call_count("cuMemUnmap");
    sim->fail_nth("cuCtxSynchronize", 1);
    gpool_status st = gpool_trim(pool, 0);
    cr_assert_neq(st, GPOOL_OK, "trim after a failed synchronize returned success");
    cr_assert(strstr(gpool_last_error(), "cuCtxSynchronize"), "%s", gpool_last_error());
    cr_assert_eq(sim->call_count("cuMemUnmap"), unmaps, "trim unmapped after a failed sync");
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].reserved_bytes, 8 * MiB);
    sim->fail_nth("cuMemUnmap", 1);
    st = gpool_trim(pool, 0);
    cr_assert_eq(st, GPOOL_ERR_DRIVER, "trim after a failed unmap: %d", st);
    cr_assert(strstr(gpool_last_error(), "cuMemUnmap"), "%s", gpool_last_error());
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error()); /* retried */
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].reserved_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* A thread whose pools were destroyed by another thread caches again in new pools (before:
 * its thread-cache slots stayed taken by the dead pools for good). */
static gpool_t *tc_pools[6];
static pthread_barrier_t tc_bar;

static void *tc_worker(void *arg)
{
    (void)arg;
    void *p = NULL;
    for (int i = 0; i < 4; i++) { /* caches in four pools: every slot taken */
        gpool_alloc(tc_pools[i], 64, NULL, &p);
        gpool_free(tc_pools[i], p);
    }
    pthread_barrier_wait(&tc_bar); /* main destroys them */
    pthread_barrier_wait(&tc_bar);
    for (int k = 0; k < 100; k++) {
        gpool_alloc(tc_pools[4], 64, NULL, &p);
        gpool_free(tc_pools[4], p);
    }
    return NULL;
}

Test(pressure, thread_cache_survives_other_pools_destruction)
{
    NEED_SIM();
    for (int i = 0; i < 4; i++)
        cr_assert_not_null(tc_pools[i] = test_pool(NULL));
    pthread_barrier_init(&tc_bar, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, tc_worker, NULL), 0);
    pthread_barrier_wait(&tc_bar);
    for (int i = 0; i < 4; i++)
        gpool_destroy(tc_pools[i]);
    cr_assert_not_null(tc_pools[4] = test_pool(NULL));
    pthread_barrier_wait(&tc_bar);
    pthread_join(t, NULL);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(tc_pools[4], &s);
    cr_assert_gt(s.tcache_hits, 50, "the thread never used a cache again: %llu hits",
                 (unsigned long long)s.tcache_hits);
    cr_assert_eq(gpool_destroy(tc_pools[4]), GPOOL_OK);
    pthread_barrier_destroy(&tc_bar);
}

/* Failed cuMemHostUnregister calls are retried: no registration outlives gpool_destroy (one
 * failure leaked one before) and later small host allocations work, in a new pool too (two
 * failures made every one fail before). */
Test(pressure, host_unregister_failures_retried_never_leaked)
{
    NEED_SIM();
    for (int fails = 1; fails <= 2; fails++) {
        gpool_t *pool = test_pool(NULL);
        cr_assert_not_null(pool);
        gpool_alloc_params hp = {.kind = GPOOL_MEM_HOST_PINNED};
        void *a = NULL, *b = NULL;
        cr_assert_eq(gpool_alloc(pool, 3000, &hp, &a), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_alloc(pool, 4 * MiB, &hp, &b), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
        for (int k = 1; k <= fails; k++)
            sim->fail_nth("cuMemHostUnregister", (unsigned long)k);
        gpool_destroy(pool);
        sim->fail_clear();
        struct gpoolsim_live live;
        sim->get_live(&live);
        cr_assert_eq(live.host_registrations, 0, "%d failures: %zu registrations leaked", fails,
                     live.host_registrations);
        pool = test_pool(NULL);
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(gpool_alloc(pool, 3000, &hp, &a), GPOOL_OK, "%s", gpool_last_error());
            memset(a, 1, 3000);
            cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        }
        cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
        cr_assert_eq(sim_live_total(), 0);
    }
}

/* Pools on one device share pressure: pool B does not fail while pool A holds everything as
 * cache and nothing is live (before: OUT_OF_MEMORY with nothing live anywhere). */
Test(pressure, two_pools_share_pressure)
{
    NEED_SIM();
    sim->set_capacity(0, 128 * MiB);
    gpool_t *a = test_pool(NULL), *b = test_pool(NULL);
    cr_assert(a && b);
    void *p[16];
    int n = 0;
    while (n < 16 && gpool_alloc(a, 8 * MiB, NULL, &p[n]) == GPOOL_OK)
        n++;
    while (n > 0)
        cr_assert_eq(gpool_free(a, p[--n]), GPOOL_OK); /* A caches all 128 MiB */
    void *q = NULL;
    cr_assert_eq(gpool_alloc(b, 100 * MiB, NULL, &q), GPOOL_OK, "%s", gpool_last_error());
    write_all(q, 100 * MiB);
    cr_assert_eq(gpool_free(b, q), GPOOL_OK);
    cr_assert_eq(gpool_destroy(a), GPOOL_OK);
    cr_assert_eq(gpool_destroy(b), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* Pools under threads: each thread first fills its own pool's cache with a share of the
 * device (all of it cached, nothing live), then thread 0 asks for 96 MiB while the others
 * churn 1 MiB blocks: live pages never exceed the device, so nothing may fail; the big block
 * needs the other pools' cached pages. */
#define SHARE_POOLS 4
#define SHARE_CAP   (128 * MiB)
static gpool_t *share[SHARE_POOLS];
static int share_fail[SHARE_POOLS], share_n;
static pthread_barrier_t share_bar;

static void *share_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    void *p[64];
    int n = 0;
    for (size_t got = 0; got < SHARE_CAP / (size_t)share_n && n < 64; got += 4 * MiB)
        if (gpool_alloc(share[me], 4 * MiB, NULL, &p[n]) == GPOOL_OK) n++;
    while (n > 0)
        gpool_free(share[me], p[--n]);
    pthread_barrier_wait(&share_bar);
    for (int k = 0; k < (me ? 100 : 10); k++) {
        size_t sz = me ? 1 * MiB : 96 * MiB;
        void *q = NULL;
        if (gpool_alloc(share[me], sz, NULL, &q) != GPOOL_OK) {
            share_fail[me]++;
            continue;
        }
        memset(q, me, 4096);
        memset((char *)q + sz - 4096, me, 4096);
        gpool_free(share[me], q);
    }
    return NULL;
}

static void pools_under_threads(int npools)
{
    sim->set_capacity(0, SHARE_CAP);
    share_n = npools;
    pthread_barrier_init(&share_bar, NULL, (unsigned)npools);
    for (int i = 0; i < npools; i++) {
        cr_assert_not_null(share[i] = test_pool(NULL));
        share_fail[i] = 0;
    }
    pthread_t t[SHARE_POOLS];
    for (int i = 0; i < npools; i++)
        pthread_create(&t[i], NULL, share_worker, (void *)(intptr_t)i);
    for (int i = 0; i < npools; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < npools; i++) {
        cr_expect_eq(share_fail[i], 0, "pool %d of %d: %d allocations failed", i, npools,
                     share_fail[i]);
        cr_assert_eq(gpool_destroy(share[i]), GPOOL_OK);
    }
    pthread_barrier_destroy(&share_bar);
    cr_assert_eq(sim_live_total(), 0);
}

Test(pressure, two_pools_under_threads_share_pressure)
{
    NEED_SIM();
    pools_under_threads(2);
}

Test(pressure, four_pools_under_threads_share_pressure)
{
    NEED_SIM();
    pools_under_threads(4);
}

/* gpool_alloc_params.page_size is honoured or refused with a status, never ignored: host
 * blocks get the page size asked for (4 KiB or 2 MiB); device blocks accept the granularity
 * or the chunk size gpool backs that size with, and refuse others. */
Test(pressure, page_size_honoured_or_refused)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    static const gpool_mem_kind hk[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    static const size_t hp_sizes[] = {4096, 2 * MiB};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            gpool_alloc_params prm = {.kind = hk[k], .page_size = hp_sizes[i]};
            void *p = NULL;
            cr_assert_eq(gpool_alloc(pool, 3 * MiB, &prm, &p), GPOOL_OK, "%s", gpool_last_error());
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
            cr_assert_eq(d.page_size, hp_sizes[i], "kind %d asked %zu got %zu", (int)hk[k],
                         hp_sizes[i], d.page_size);
            cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
        }
    gpool_alloc_params dp = {.kind = GPOOL_MEM_DEVICE, .page_size = 2 * MiB};
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, &dp, &p), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
    cr_assert_eq(d.page_size, 2 * MiB);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    dp.page_size = 8 * MiB; /* 4 MiB blocks are backed by 2 MiB pages: refused, not ignored */
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, &dp, &p), GPOOL_ERR_UNSUPPORTED);
    cr_assert(strstr(gpool_last_error(), "page_size"), "%s", gpool_last_error());
    cr_assert_null(p);
    dp.page_size = 8 * MiB; /* 64 MiB blocks are backed by 8 MiB chunks: as asked */
    cr_assert_eq(gpool_alloc(pool, 64 * MiB, &dp, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
    cr_assert_eq(d.page_size, 8 * MiB);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A free that gives memory back (release_threshold) reports a failed unmap instead of
 * swallowing it; the block is freed all the same. */
Test(pressure, free_reports_failed_give_back)
{
    NEED_SIM();
    gpool_t *pool = test_pool("release_threshold=2M");
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 16 * MiB, NULL, &p), GPOOL_OK);
    sim->fail_nth("cuMemUnmap", 1);
    gpool_status st = gpool_free(pool, p);
    cr_assert_eq(st, GPOOL_ERR_DRIVER, "free gave %d: %s", st, gpool_last_error());
    cr_assert(strstr(gpool_last_error(), "cuMemUnmap"), "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].live_blocks, 0);
    cr_assert_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* The OOM report's cause is the true one: another pool's live blocks are named as other
 * users of the device, not as this pool's live blocks (before: "real exhaustion: live
 * blocks hold the memory" with nothing live in the pool). */
Test(pressure, oom_cause_names_what_holds_the_memory)
{
    NEED_SIM();
    sim->set_capacity(0, 128 * MiB);
    gpool_t *a = test_pool(NULL), *b = test_pool(NULL);
    cr_assert(a && b);
    void *big = NULL, *q = NULL;
    cr_assert_eq(gpool_alloc(a, 100 * MiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_alloc(b, 64 * MiB, NULL, &q), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(gpool_last_error(), "other users of the device"), "%s", gpool_last_error());
    cr_assert_null(strstr(gpool_last_error(), "live blocks of this pool hold"), "%s",
                   gpool_last_error());
    cr_assert_eq(gpool_free(a, big), GPOOL_OK);
    cr_assert_eq(gpool_destroy(a), GPOOL_OK);
    cr_assert_eq(gpool_destroy(b), GPOOL_OK);
}
