/* test_bench_scale.c — gpool-bench scale fills every figure of every row, for gpool and for
 * jemalloc, on a small heap (the timing itself is the benchmark's business, not a test's). */
#include <criterion/criterion.h>

#include "../bench/bench.h"
#include "util_skip.h"

Test(bench_scale, every_row_gets_every_figure)
{
    NOT_UNDER_VALGRIND("the scale rows reserve 128 GiB of address space");
    NEED_SIM();
    bench_device dev;
    char err[600];
    cr_assert_eq(bench_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    bench_scale_row rows[] = {{.live = 100}, {.live = 1000}, {.live = 2000, .small = 1}};
    cr_assert_eq(bench_scale_run(&dev, rows, 3, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < 3; i++) {
        const bench_scale_row *r = &rows[i];
        cr_expect_gt(r->gpool_pair_ns, 0);
        cr_expect_gt(r->jem_pair_ns, 0);
        cr_expect_gt(r->gpool_stats_ns, 0);
        cr_expect_gt(r->jem_stats_ns, 0);
        cr_expect_gt(r->gpool_lookup_ns, 0);
        cr_expect_gt(r->jem_lookup_ns, 0);
        cr_expect_gt(r->gpool_trim_ns, 0);
        cr_expect_gt(r->jem_trim_ns, 0);
    }
    cr_assert_eq(sim_bytes_in_use(0), 0, "every block freed and the pool destroyed");
    bench_device_close(&dev);
}
