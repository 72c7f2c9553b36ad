/* The middle floor's defects (issue 24), each with the test that failed before its fix:
 * budgets bind through the thread cache, gpool_page_size answers what placement does, and
 * gpool_trim reports a driver call that failed during it. */
#include <criterion/criterion.h>
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
