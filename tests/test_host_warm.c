/* The warm host alloc (issue 24): a pinned or mapped block served from a registered small-block
 * extent or from a page arena's cached backed pages takes the host lock once (kind_host.c
 * warm_locked). It keeps every promise of the cold path: zeroing, the budget, the
 * counters, and a freed block's reuse only once its stream is done. */
#include <criterion/criterion.h>
#include <string.h>

#include "util_pool.h"

#define KiB ((size_t)1 << 10)

TestSuite(host_warm);

static gpool_alloc_params params_of(gpool_mem_kind kind, unsigned flags)
{
    gpool_alloc_params p = {0};
    p.kind = kind;
    p.flags = flags;
    return p;
}

Test(host_warm, zeroed_blocks_are_zero_when_reused)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    const gpool_mem_kind kinds[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    const size_t sizes[] = {512, 300 * KiB}; /* the small arena, a page arena */
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k / 2];
        gpool_alloc_params plain = params_of(kinds[k % 2], 0), zero = params_of(kinds[k % 2], 0);
        zero.flags = GPOOL_ALLOC_ZERO;
        for (int i = 0; i < 300; i++) {
            unsigned char *p = NULL;
            cr_assert_eq(gpool_alloc(pool, n, &plain, (void **)&p), GPOOL_OK, "%s",
                         gpool_last_error());
            memset(p, 0xff, n);
            cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
            cr_assert_eq(gpool_alloc(pool, n, &zero, (void **)&p), GPOOL_OK, "%s",
                         gpool_last_error());
            for (size_t b = 0; b < n; b++)
                cr_assert_eq(p[b], 0, "kind %d, %zu B, round %d, byte %zu", (int)kinds[k % 2], n, i,
                             b);
            memset(p, 0xff, n);
            cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
        }
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(host_warm, the_budget_binds_and_the_counters_add_up)
{
    gpool_t *pool = test_pool("budget_pinned=64K");
    cr_assert_not_null(pool);
    gpool_alloc_params pinned = params_of(GPOOL_MEM_HOST_PINNED, 0);
    void *warm = NULL;
    cr_assert_eq(gpool_alloc(pool, 1000, &pinned, &warm), GPOOL_OK); /* the extent exists */
    void *p[256];
    size_t n = 0;
    while (n < 256 && gpool_alloc(pool, 1000, &pinned, &p[n]) == GPOOL_OK)
        n++;
    cr_expect_lt(n, 256u, "the budget stopped the warm path");
    cr_expect_leq((n + 1) * 1000, 64 * KiB, "%zu blocks of 1000 B within 64 KiB", n + 1);
    cr_expect_geq((n + 1) * 1024, 60 * KiB, "%zu blocks: the budget was not hit early", n + 1);
    gpool_stats st;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    cr_expect_eq(st.kind[GPOOL_MEM_HOST_PINNED].requested_bytes, (n + 1) * 1000);
    cr_expect_eq(st.kind[GPOOL_MEM_HOST_PINNED].live_blocks, n + 1);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, warm), GPOOL_OK);
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    cr_expect_eq(st.kind[GPOOL_MEM_HOST_PINNED].requested_bytes, 0);
    cr_expect_eq(st.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}
