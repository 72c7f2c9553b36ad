/* Statistics in constant time (issue 15, section 1): gpool_get_stats and gpool_mem_get_info
 * read running counters, so their cost does not grow with the heap; the running counters agree
 * with gpool_calculate_stats, which walks every slab, after every kind of traffic (thread
 * caches, frees on other threads and other streams, deferred frees). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;
static gpool_t *pool;
static CUstream B;

static void setup(void)
{
    NEED_SIM(); /* counts bytes exactly and creates streams through the simulated driver */
    sim = sim_api();
    cr_assert_not_null(sim);
    pool = test_pool(NULL);
    cr_assert_not_null(pool);
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(mk(&B, 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    sim->stream_release(B);
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    destroy(B);
    release(0);
    teardown_end();
}

TestSuite(stats, .init = setup, .fini = teardown);

/* The running counters against the walk and against what the test itself knows is live. */
static void expect_agree(uint64_t want_requested, const char *when)
{
    gpool_stats fast = GPOOL_STATS_INIT, walk = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &fast), GPOOL_OK);
    cr_assert_eq(gpool_calculate_stats(pool, &walk), GPOOL_OK);
    const gpool_kind_stats *f = &fast.kind[GPOOL_MEM_DEVICE], *w = &walk.kind[GPOOL_MEM_DEVICE];
    cr_expect_eq(f->requested_bytes, w->requested_bytes, "%s: counters %llu, walk %llu", when,
                 (unsigned long long)f->requested_bytes, (unsigned long long)w->requested_bytes);
    cr_expect_eq(f->requested_bytes, want_requested, "%s: counters %llu, live %llu", when,
                 (unsigned long long)f->requested_bytes, (unsigned long long)want_requested);
    cr_expect_eq(f->in_use_bytes, w->in_use_bytes, "%s: in_use", when);
    cr_expect_eq(f->live_blocks, w->live_blocks, "%s: live_blocks", when);
    cr_expect_eq(fast.pending_frees, walk.pending_frees, "%s: pending_frees", when);
    cr_expect_leq(f->in_use_bytes, f->reserved_bytes, "%s", when);
    cr_expect_eq(f->cached_bytes, f->reserved_bytes - f->in_use_bytes, "%s", when);
}

#define NSMALL 600
struct half {
    void **ptrs;
    size_t n;
};

static void *free_half(void *arg) /* frees another thread's blocks into this thread's cache */
{
    struct half *h = arg;
    for (size_t i = 0; i < h->n; i++)
        if (gpool_free(pool, h->ptrs[i]) != GPOOL_OK) return (void *)1;
    return NULL;
}

Test(stats, running_counters_match_the_walk_through_every_free_path)
{
    void *p[NSMALL];
    size_t sz[NSMALL];
    uint64_t live = 0;
    uint32_t seed = 15;
    for (size_t i = 0; i < NSMALL; i++) { /* small blocks (thread cache and slabs), some large */
        sz[i] = i % 50 == 0 ? (size_t)(1 + rnd(&seed) % 4) * MiB : 1 + rnd(&seed) % 4000;
        cr_assert_eq(gpool_alloc(pool, sz[i], NULL, &p[i]), GPOOL_OK, "%s", gpool_last_error());
        live += sz[i];
    }
    expect_agree(live, "after allocating");
    /* a third freed on this thread (into its cache or the arena) */
    for (size_t i = 0; i < NSMALL; i += 3) {
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK);
        live -= sz[i];
    }
    expect_agree(live, "after frees on the allocating thread");
    /* a third freed by another thread */
    void *other[NSMALL];
    struct half h = {other, 0};
    for (size_t i = 1; i < NSMALL; i += 3) {
        other[h.n++] = p[i];
        live -= sz[i];
    }
    pthread_t t;
    void *rc;
    cr_assert_eq(pthread_create(&t, NULL, free_half, &h), 0);
    pthread_join(t, &rc);
    cr_assert_null(rc);
    expect_agree(live, "after frees on another thread (which then exited)");
    /* the rest freed on another stream: pending slots and deferred frees */
    for (size_t i = 2; i < NSMALL; i += 3) {
        cr_assert_eq(gpool_free_async(pool, p[i], (gpool_stream_t)B), GPOOL_OK, "%s",
                     gpool_last_error());
        live -= sz[i];
    }
    expect_agree(live, "after frees on another stream");
    /* reuse: the freed slots come back with other requested sizes */
    for (size_t i = 0; i < NSMALL; i += 3) {
        sz[i] = 1 + rnd(&seed) % 3000;
        cr_assert_eq(gpool_alloc(pool, sz[i], NULL, &p[i]), GPOOL_OK);
        live += sz[i];
    }
    expect_agree(live, "after reuse");
    for (size_t i = 0; i < NSMALL; i += 3) {
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK);
        live -= sz[i];
    }
    expect_agree(live, "after freeing everything");
    cr_expect_eq(live, 0);
}

/* Cost is the benchmark's business (gpool-bench scale: statistics at 10^2..10^6 live blocks,
 * next to jemalloc), not a timed test's; here: at 10^5 live small blocks the running counters
 * still agree with the walk to the byte. */
Test(stats, counters_agree_with_the_walk_at_100000_blocks)
{
    enum { FEW = 1000, MANY = 100000 };
    void **p = malloc(MANY * sizeof *p);
    cr_assert_not_null(p);
    for (size_t i = 0; i < FEW; i++)
        cr_assert_eq(gpool_alloc(pool, 256, NULL, &p[i]), GPOOL_OK);
    for (size_t i = FEW; i < MANY; i++)
        cr_assert_eq(gpool_alloc(pool, 256, NULL, &p[i]), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT, w = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    cr_assert_eq(gpool_calculate_stats(pool, &w), GPOOL_OK);
    cr_expect_eq(s.kind[GPOOL_MEM_DEVICE].requested_bytes, (uint64_t)MANY * 256);
    cr_expect_eq(w.kind[GPOOL_MEM_DEVICE].requested_bytes, (uint64_t)MANY * 256);
    for (size_t i = 0; i < MANY; i++)
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK);
    free(p);
}

Test(stats, calculate_stats_rejects_null)
{
    gpool_stats s = GPOOL_STATS_INIT;
    cr_expect_eq(gpool_calculate_stats(NULL, &s), GPOOL_ERR_INVALID_ARG);
    cr_expect_eq(gpool_calculate_stats(pool, NULL), GPOOL_ERR_INVALID_ARG);
}

/* gpool_mem_get_info's own counter path adds the same cached bytes gpool_get_stats reports. */
Test(stats, mem_get_info_counts_the_cache)
{
    size_t f0, t0, f1, t1;
    cr_assert_eq(gpool_mem_get_info(pool, &f0, &t0), GPOOL_OK);
    void *p;
    cr_assert_eq(gpool_alloc(pool, 8 * MiB, NULL, &p), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK); /* cached now: still free to the application */
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    cr_assert_eq(gpool_mem_get_info(pool, &f1, &t1), GPOOL_OK);
    cr_expect_eq(t0, t1);
    cr_expect_geq(s.kind[GPOOL_MEM_DEVICE].cached_bytes, 8 * MiB);
    cr_expect_eq(f1, f0, "free %zu before, %zu after an alloc/free pair that stays cached", f0, f1);
}
