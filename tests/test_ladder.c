/* The retry ladder (src/kinds/ladder.h): one order of rungs for every kind, and a request the
 * policy moves to another kind climbs that kind's whole ladder. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

TestSuite(ladder);

/* The mapped budget is spent on a block whose free waits on a held stream's work. A device
 * request over the device budget falls back to mapped memory: the mapped kind's make-room rung
 * (finish the waiting frees) serves it, as it serves a request placed on mapped memory. Before
 * the one ladder, a request moved off device memory skipped that rung and failed. */
static void moved_request_climbs(int explicit_mapped)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream) =
        sim_driver_proc("cuMemcpyHtoDAsync");
    cr_assert(mk && destroy && htod);
    gpool_t *pool = test_pool("budget_device=1MiB,budget_mapped=1MiB");
    cr_assert_not_null(pool);
    CUstream A;
    cr_assert_eq(mk(&A, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    void *dev = NULL, *m = NULL, *again = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 512 * KiB, NULL, A, &dev), GPOOL_OK);
    gpool_alloc_params mp = GPOOL_ALLOC_PARAMS_INIT;
    mp.kind = GPOOL_MEM_HOST_MAPPED;
    cr_assert_eq(gpool_alloc_async(pool, MiB, &mp, A, &m), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(A);
    cr_assert_eq(htod((CUdeviceptr)dev, m, 512 * KiB, A), CUDA_SUCCESS); /* A reads m */
    cr_assert_eq(gpool_free_async(pool, m, A), GPOOL_OK);
    gpool_alloc_params ap = GPOOL_ALLOC_PARAMS_INIT;
    if (explicit_mapped) {
        ap.kind = GPOOL_MEM_HOST_MAPPED;
    } else {
        ap.kind = GPOOL_MEM_AUTO; /* default usage: device memory, over its budget */
        ap.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    }
    gpool_status st = gpool_alloc_async(pool, MiB, &ap, A, &again);
    cr_expect_eq(st, GPOOL_OK, "%s", gpool_last_error());
    if (st == GPOOL_OK) {
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, again, &d), GPOOL_OK);
        cr_expect_eq(d.kind, GPOOL_MEM_HOST_MAPPED);
        cr_expect_eq(d.fell_back, !explicit_mapped);
        cr_assert_eq(gpool_free_async(pool, again, A), GPOOL_OK);
    }
    sim->stream_release(A);
    cr_assert_eq(gpool_free_async(pool, dev, A), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(A), CUDA_SUCCESS);
}

Test(ladder, a_mapped_request_finishes_waiting_frees_before_it_fails)
{
    moved_request_climbs(1);
}

Test(ladder, a_device_request_moved_to_mapped_memory_climbs_the_mapped_ladder)
{
    moved_request_climbs(0);
}

/* One failed request: the policy's budget message, and no make-room (no synchronize) for a
 * request the budget refused: pages given back do not change what the budget counts. */
Test(ladder, a_budget_refusal_makes_no_driver_call)
{
    gpool_t *pool = test_pool("budget_device=1MiB");
    cr_assert_not_null(pool);
    void *a = NULL, *b = NULL;
    cr_assert_eq(gpool_alloc(pool, 768 * KiB, NULL, &a), GPOOL_OK);
    gpool_stats s0 = GPOOL_STATS_INIT, s1 = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s0), GPOOL_OK);
    cr_assert_eq(gpool_alloc(pool, 512 * KiB, NULL, &b), GPOOL_ERR_OUT_OF_MEMORY);
    cr_expect(strstr(gpool_last_error(), "device budget"), "%s", gpool_last_error());
    cr_assert_eq(gpool_get_stats(pool, &s1), GPOOL_OK);
    cr_expect_eq(s1.driver_calls_total, s0.driver_calls_total, "%llu driver calls",
                 (unsigned long long)(s1.driver_calls_total - s0.driver_calls_total));
    cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}
