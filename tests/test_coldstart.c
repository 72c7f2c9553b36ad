/* Cold start (issue 15, section 4): the first pass maps several pages per driver call while
 * the device has room, falls back to single pages under pressure, and the documented
 * must-succeed bound (gpool.h, with G) still holds. Counts come from the pool's own
 * statistics (gpool_get_stats, driver_calls by entry point). */
#include <criterion/criterion.h>
#include <string.h>

#include "gpool.h"
#include "util_model.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define MiB  ((size_t)1 << 20)
#define GiB  ((size_t)1 << 30)
#define PAGE ((size_t)2 << 20)

static const struct sim_api *sim;

static void setup(void)
{
    if (test_real_gpu()) return;
    sim = sim_api();
    cr_assert_not_null(sim, "needs GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(coldstart, .init = setup);

typedef struct counts {
    uint64_t create, map, access, held_pages;
} counts;

static counts count(gpool_t *p)
{
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(p, &s), GPOOL_OK);
    return (counts){s.driver_calls[GPOOL_DRV_MEM_CREATE], s.driver_calls[GPOOL_DRV_MEM_MAP],
                    s.driver_calls[GPOOL_DRV_MEM_SET_ACCESS],
                    s.kind[GPOOL_MEM_AUTO].reserved_bytes / PAGE};
}

/* A training-like first pass (small and mid-size blocks) on an 8 GiB device: at least four
 * pages per cuMemCreate and per cuMemMap, and cuMemSetAccess no more often than cuMemMap.
 * Before growth every page was its own handle: creates == pages held. */
Test(coldstart, first_pass_maps_several_pages_per_call)
{
    NEED_SIM();
    sim->set_capacity(0, 8 * GiB);
    gpool_t *p = test_pool(NULL);
    cr_assert_not_null(p);
    void *b[160];
    for (int i = 0; i < 160; i++) {
        size_t sz = i % 8 == 7 ? 24 * MiB : (size_t)(i % 5 + 1) * MiB;
        cr_assert_eq(gpool_alloc(p, sz, NULL, &b[i]), GPOOL_OK, "%d: %s", i, gpool_last_error());
    }
    counts c = count(p);
    cr_assert_geq(c.held_pages, 200, "held %llu pages", (unsigned long long)c.held_pages);
    cr_assert_leq(c.create * 4, c.held_pages, "%llu creates for %llu pages",
                  (unsigned long long)c.create, (unsigned long long)c.held_pages);
    cr_assert_eq(c.map, c.create);
    cr_assert_leq(c.access, c.map);
    for (int i = 0; i < 160; i++)
        cr_assert_eq(gpool_free(p, b[i]), GPOOL_OK);
    /* the steady state: the same pass again makes no driver call */
    counts before = count(p);
    for (int i = 0; i < 160; i++) {
        size_t sz = i % 8 == 7 ? 24 * MiB : (size_t)(i % 5 + 1) * MiB;
        cr_assert_eq(gpool_alloc(p, sz, NULL, &b[i]), GPOOL_OK);
    }
    counts after = count(p);
    cr_assert_eq(after.create + after.map + after.access,
                 before.create + before.map + before.access);
    for (int i = 0; i < 160; i++)
        cr_assert_eq(gpool_free(p, b[i]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* Below 4 GiB there is no growth (single pages, as before): one create per page held. */
Test(coldstart, small_device_backs_single_pages)
{
    NEED_SIM();
    sim->set_capacity(0, 1 * GiB);
    gpool_t *p = test_pool(NULL);
    void *b[40];
    for (int i = 0; i < 40; i++)
        cr_assert_eq(gpool_alloc(p, 3 * MiB, NULL, &b[i]), GPOOL_OK);
    counts c = count(p);
    cr_assert_eq(c.create, c.held_pages);
    for (int i = 0; i < 40; i++)
        gpool_free(p, b[i]);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}

/* A pool with a release threshold wants memory back: no growth, whatever the device. */
Test(coldstart, release_threshold_turns_growth_off)
{
    NEED_SIM();
    sim->set_capacity(0, 8 * GiB);
    gpool_t *p = test_pool("release_threshold=8M");
    void *b[40];
    for (int i = 0; i < 40; i++)
        cr_assert_eq(gpool_alloc(p, 3 * MiB, NULL, &b[i]), GPOOL_OK);
    counts c = count(p);
    cr_assert_eq(c.create, c.held_pages);
    for (int i = 0; i < 40; i++)
        gpool_free(p, b[i]);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}

/* Growth stops at its budget (a quarter of a 4 GiB device, 512 pages): past it, every new
 * page is one cuMemCreate. */
Test(coldstart, growth_stops_at_its_budget)
{
    NEED_SIM();
    sim->set_capacity(0, 4 * GiB);
    gpool_t *p = test_pool(NULL);
    static void *b[1400];
    int n = 0;
    while (count(p).held_pages < 580) {
        cr_assert_lt(n, 1300);
        cr_assert_eq(gpool_alloc(p, 1 * MiB, NULL, &b[n]), GPOOL_OK);
        n++;
    }
    counts mid = count(p);
    for (int i = 0; i < 64; i++, n++)
        cr_assert_eq(gpool_alloc(p, 1 * MiB, NULL, &b[n]), GPOOL_OK);
    counts end = count(p);
    cr_assert_eq(end.create - mid.create, end.held_pages - mid.held_pages,
                 "%llu creates for %llu new pages", (unsigned long long)(end.create - mid.create),
                 (unsigned long long)(end.held_pages - mid.held_pages));
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free(p, b[i]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}

/* Under pressure (the pool had to give memory back) growth falls back to single pages. */
Test(coldstart, pressure_falls_back_to_single_pages)
{
    NEED_SIM();
    sim->set_capacity(0, 4 * GiB);
    gpool_t *p = test_pool(NULL);
    void *big = NULL, *other = NULL;
    cr_assert_eq(gpool_alloc(p, 3 * GiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    /* more than the device has left once the cache is counted: the cache is given back */
    cr_assert_eq(gpool_alloc(p, 3 * GiB + 512 * MiB, NULL, &big), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    cr_assert_eq(gpool_trim(p, 0), GPOOL_OK);
    counts before = count(p);
    cr_assert_eq(before.held_pages, 0);
    cr_assert_eq(gpool_alloc(p, 9 * MiB, NULL, &other), GPOOL_OK);
    counts after = count(p);
    cr_assert_eq(after.create - before.create, after.held_pages);
    gpool_free(p, other);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}

/* The worst case for growth: one small live block in each grown handle, everything else
 * freed. The documented bound (gpool.h, with G = capacity/(4P)) says a request of S bytes
 * must succeed; it does. util_model.c's model_must_fit states the same rule. */
Test(coldstart, must_succeed_bound_holds_with_pinned_growth)
{
    NEED_SIM();
    size_t cap = 4 * GiB;
    sim->set_capacity(0, cap);
    gpool_t *p = test_pool("tcache_bytes=0");
    static void *b[1200];
    int n = 0;
    while (count(p).held_pages < 600 && n < 1200) {
        cr_assert_eq(gpool_alloc(p, 1 * MiB, NULL, &b[n]), GPOOL_OK);
        n++;
    }
    static model m;
    model_init(&m, cap, PAGE, 1, &p);
    for (int i = 0; i < n; i++) {
        if (i % 40 == 0) {
            model_add(&m, 0, b[i], 1 * MiB, GPOOL_MEM_DEVICE, NULL, 0);
            continue;
        }
        cr_assert_eq(gpool_free(p, b[i]), GPOOL_OK);
        b[i] = NULL;
    }
    /* the largest S the bound promises */
    size_t have = cap / PAGE - m.grow_max - m.nlive * 2;
    size_t s = (have - 1) * PAGE;
    cr_assert(model_must_fit(&m, 0, GPOOL_MEM_DEVICE, s, 0));
    cr_assert(!model_must_fit(&m, 0, GPOOL_MEM_DEVICE, s + PAGE, 0));
    void *big = NULL;
    cr_assert_eq(gpool_alloc(p, s, NULL, &big), GPOOL_OK, "%zu MiB: %s", s / MiB,
                 gpool_last_error());
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    for (int i = 0; i < n; i++)
        if (b[i]) cr_assert_eq(gpool_free(p, b[i]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}
