/* The drop-in's cached pair (`gpool-bench hotpath --dropin`, issue 23's "within 4x of the
 * library's pair"): cudaMalloc/cudaFree of one size under LD_PRELOAD, default configuration,
 * on the strict simulator (tests/preload/hot_prog.c). The cudaFree batch hands its blocks back
 * after the legacy-stream fence; it must do so in a way that keeps gpool's thread cache from
 * refilling and spilling on every flush (preload/preload_batch.c, GPP_FENCE_BLOCKS), which cost
 * the pair more than the rest of the batch. */
#include <criterion/criterion.h>

#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

static void setup(void)
{
    NEED_SIM();
    cr_assert_not_null(sim_api(), "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(hot, .init = setup, .timeout = 120);

Test(hot, cached_pair_of_512_bytes_stays_in_the_thread_cache)
{
    static struct run r;
    run_expect(&r, "hot_prog", "512 10", 1, NULL, 0);
}

Test(hot, cached_pair_of_4_kib_stays_in_the_thread_cache)
{
    static struct run r;
    run_expect(&r, "hot_prog", "4096 1000", 1, NULL, 0);
}
