/* The placement policy, table-driven: which kind AUTO picks for each usage hint, where an
 * AUTO request goes when its kind's budget is spent, and that explicit kinds never move. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpool.h"
#include "policy.h"
#include "util_pool.h"
#include "util_sim.h"

#define KiB ((size_t)1 << 10)

TestSuite(policy, .init = NULL);

static const struct {
    gpool_usage usage;
    gpool_mem_kind kind;
} usage_table[] = {
    {GPOOL_USAGE_DEFAULT, GPOOL_MEM_DEVICE},
    {GPOOL_USAGE_GPU_ONLY, GPOOL_MEM_DEVICE},
    {GPOOL_USAGE_UPLOAD, GPOOL_MEM_HOST_MAPPED},
    {GPOOL_USAGE_READBACK, GPOOL_MEM_HOST_PINNED},
    {GPOOL_USAGE_STAGING, GPOOL_MEM_HOST_PINNED},
    {GPOOL_USAGE_MULTI_GPU, GPOOL_MEM_HOST_MAPPED},
    {GPOOL_USAGE_LARGE_DATASET, GPOOL_MEM_HOST_MAPPED},
};
enum { NUSAGE = sizeof usage_table / sizeof usage_table[0] };

Test(policy, table_covers_every_usage)
{
    cr_assert_eq(NUSAGE, GPOOL_USAGE_COUNT);
    for (int i = 0; i < NUSAGE; i++) {
        for (size_t sz = 1; sz <= ((size_t)1 << 32); sz <<= 4)
            cr_assert_eq(gp_policy_kind(usage_table[i].usage, sz), usage_table[i].kind,
                         "usage %d size %zu", usage_table[i].usage, sz);
        cr_assert_gt(strlen(gp_policy_reason(usage_table[i].usage)), 0);
    }
    cr_assert_eq(gp_policy_kind((gpool_usage)99, 1), GPOOL_MEM_DEVICE, "unknown: device");
}

Test(policy, spill_order)
{
    static const struct {
        gpool_mem_kind from, to;
    } spills[] = {
        {GPOOL_MEM_DEVICE, GPOOL_MEM_HOST_MAPPED},      /* with GPOOL_ALLOC_ALLOW_FALLBACK */
        {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED}, /* mapped is pinned + a device address */
        {GPOOL_MEM_HOST_MAPPED, GPOOL_MEM_AUTO},        /* nothing else serves zero-copy */
        {GPOOL_MEM_AUTO, GPOOL_MEM_AUTO},
    };
    for (size_t i = 0; i < sizeof spills / sizeof spills[0]; i++)
        cr_assert_eq(gp_policy_spill(spills[i].from), spills[i].to, "from %d", spills[i].from);
    cr_assert_eq(gp_policy_spill((gpool_mem_kind)42), GPOOL_MEM_AUTO);
}

Test(policy, auto_requests_land_where_the_table_says)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    const size_t sizes[] = {100, 20 * KiB, 300 * KiB, 3 * MiB};
    for (int i = 0; i < NUSAGE; i++)
        for (int j = 0; j < 4; j++) {
            gpool_alloc_params p = {0};
            p.kind = GPOOL_MEM_AUTO;
            p.usage = usage_table[i].usage;
            void *x;
            cr_assert_eq(gpool_alloc(pool, sizes[j], &p, &x), GPOOL_OK, "%s", gpool_last_error());
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, x, &d), GPOOL_OK);
            cr_assert_eq(d.kind, usage_table[i].kind, "usage %d size %zu -> kind %d",
                         usage_table[i].usage, sizes[j], d.kind);
            cr_assert_eq(d.fell_back, 0);
            cr_assert_eq(d.host_ptr == NULL, d.kind == GPOOL_MEM_DEVICE);
            if (d.kind != GPOOL_MEM_DEVICE) cr_assert_eq(d.usage, usage_table[i].usage);
            cr_assert_eq(gpool_free(pool, x), GPOOL_OK);
        }
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.fallbacks, 0);
    size_t ps;
    cr_assert_eq(gpool_page_size(pool, GPOOL_MEM_AUTO, 4096, &ps), GPOOL_OK);
    cr_assert_eq(ps, 2 * MiB, "AUTO with no hint is device memory");
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* One row: pool budgets, a request, and what must happen. */
static const struct budget_case {
    const char *conf;
    gpool_mem_kind kind;
    gpool_usage usage;
    unsigned flags;
    size_t fill;           /* bytes allocated first in the request's first-choice kind */
    size_t size;           /* then this request */
    gpool_status expect;   /* its status */
    gpool_mem_kind landed; /* and where it went */
    int fell_back;
} budget_cases[] = {
    /* explicit kinds are never moved */
    {"budget_pinned=1M", GPOOL_MEM_HOST_PINNED, 0, GPOOL_ALLOC_ALLOW_FALLBACK, 768 * KiB, 512 * KiB,
     GPOOL_ERR_OUT_OF_MEMORY, 0, 0},
    {"budget_mapped=1M", GPOOL_MEM_HOST_MAPPED, 0, 0, 768 * KiB, 512 * KiB, GPOOL_ERR_OUT_OF_MEMORY,
     0, 0},
    {"budget_device=4M", GPOOL_MEM_DEVICE, 0, GPOOL_ALLOC_ALLOW_FALLBACK, 3 * MiB, 2 * MiB,
     GPOOL_ERR_OUT_OF_MEMORY, 0, 0},
    /* AUTO: pinned spills to mapped by itself */
    {"budget_pinned=1M", GPOOL_MEM_AUTO, GPOOL_USAGE_STAGING, 0, 768 * KiB, 512 * KiB, GPOOL_OK,
     GPOOL_MEM_HOST_MAPPED, 1},
    {"budget_pinned=1M", GPOOL_MEM_AUTO, GPOOL_USAGE_READBACK, 0, 1000 * KiB, 40 * KiB, GPOOL_OK,
     GPOOL_MEM_HOST_MAPPED, 1},
    /* ... unless mapped is full too */
    {"budget_pinned=1M,budget_mapped=256K", GPOOL_MEM_AUTO, GPOOL_USAGE_STAGING, 0, 768 * KiB,
     512 * KiB, GPOOL_ERR_OUT_OF_MEMORY, 0, 0},
    /* mapped has no substitute */
    {"budget_mapped=1M", GPOOL_MEM_AUTO, GPOOL_USAGE_UPLOAD, GPOOL_ALLOC_ALLOW_FALLBACK, 768 * KiB,
     512 * KiB, GPOOL_ERR_OUT_OF_MEMORY, 0, 0},
    /* device: only with the flag */
    {"budget_device=4M", GPOOL_MEM_AUTO, GPOOL_USAGE_GPU_ONLY, 0, 3 * MiB, 2 * MiB,
     GPOOL_ERR_OUT_OF_MEMORY, 0, 0},
    {"budget_device=4M", GPOOL_MEM_AUTO, GPOOL_USAGE_GPU_ONLY, GPOOL_ALLOC_ALLOW_FALLBACK, 3 * MiB,
     2 * MiB, GPOOL_OK, GPOOL_MEM_HOST_MAPPED, 1},
    /* within budget nothing moves */
    {"budget_pinned=4M", GPOOL_MEM_AUTO, GPOOL_USAGE_STAGING, 0, 768 * KiB, 512 * KiB, GPOOL_OK,
     GPOOL_MEM_HOST_PINNED, 0},
};

Test(policy, budgets_table)
{
    for (size_t i = 0; i < sizeof budget_cases / sizeof budget_cases[0]; i++) {
        const struct budget_case *c = &budget_cases[i];
        gpool_t *pool = test_pool(c->conf);
        cr_assert_not_null(pool, "case %zu", i);
        gpool_mem_kind first =
            c->kind == GPOOL_MEM_AUTO ? gp_policy_kind(c->usage, c->size) : c->kind;
        gpool_alloc_params fp = {0};
        fp.kind = first;
        void *fill = NULL;
        cr_assert_eq(gpool_alloc(pool, c->fill, &fp, &fill), GPOOL_OK, "case %zu: %s", i,
                     gpool_last_error());
        gpool_alloc_params p = {0};
        p.kind = c->kind;
        p.usage = c->usage;
        p.flags = c->flags;
        void *x = (void *)1;
        gpool_status st = gpool_alloc(pool, c->size, &p, &x);
        cr_assert_eq(st, c->expect, "case %zu (%s): status %d: %s", i, c->conf, st,
                     gpool_last_error());
        gpool_stats s = GPOOL_STATS_INIT;
        gpool_get_stats(pool, &s);
        if (st == GPOOL_OK) {
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, x, &d), GPOOL_OK);
            cr_assert_eq(d.kind, c->landed, "case %zu: landed in %d", i, d.kind);
            cr_assert_eq(d.fell_back, c->fell_back, "case %zu", i);
            cr_assert_eq(s.fallbacks, (uint64_t)c->fell_back, "case %zu", i);
            cr_assert_eq(gpool_free(pool, x), GPOOL_OK);
        } else {
            cr_assert_null(x);
            cr_assert(strstr(gpool_last_error(), "budget"), "case %zu: %s", i, gpool_last_error());
            cr_assert_eq(s.fallbacks, 0);
        }
        cr_assert_eq(gpool_free(pool, fill), GPOOL_OK);
        cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "case %zu: %s", i, gpool_last_error());
        cr_assert_eq(sim_live_total(), 0, "case %zu", i);
    }
}
