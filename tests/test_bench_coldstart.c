/* test_bench_coldstart.c — the first-pass columns of gpool-bench compare (issue 15, section 4):
 * driver calls per entry point, the cost table that prices them, and its replacement by
 * measured numbers (GPOOL_BENCH_DRV_COSTS). Simulated driver only. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/bench.h"
#include "util_skip.h"

static bench_device dev;

static void open_device(void)
{
    NEED_SIM();
    char err[600];
    cr_assert_eq(bench_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    cr_assert(dev.simulated, "tests expect the simulated driver (GPOOL_LIBCUDA)");
}

static void close_device(void)
{
    bench_device_close(&dev);
}

TestSuite(bench_coldstart, .init = open_device, .fini = close_device);

/* Every entry point has a positive cost and a source that says whether it is an estimate. */
Test(bench_coldstart, cost_table_names_a_source_for_every_entry)
{
    unsetenv("GPOOL_BENCH_DRV_COSTS");
    for (int e = 0; e < BENCH_DRV_N; e++) {
        cr_assert_gt(bench_drvcost_us((bench_drv)e), 0, "%s", bench_drvcost_name((bench_drv)e));
        cr_assert(strncmp(bench_drvcost_name((bench_drv)e), "cu", 2) == 0);
        cr_assert(strstr(bench_drvcost_source((bench_drv)e), "estimate"), "%s: %s",
                  bench_drvcost_name((bench_drv)e), bench_drvcost_source((bench_drv)e));
    }
    cr_assert_eq(bench_drvcost_measured(), 0);
    uint64_t calls[BENCH_DRV_N] = {0};
    calls[BENCH_DRV_MEM_CREATE] = 3;
    calls[BENCH_DRV_MEM_MAP] = 2;
    cr_assert_float_eq(
        bench_drvcost_total_us(calls),
        3 * bench_drvcost_us(BENCH_DRV_MEM_CREATE) + 2 * bench_drvcost_us(BENCH_DRV_MEM_MAP), 1e-9);
}

/* A cost file (what gpu-drvcost --out writes) replaces the entries it names, only those. */
Test(bench_coldstart, measured_costs_replace_estimates)
{
    char path[] = "/tmp/gpool-drvcost-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "cuMemCreate 123.5\ncuMemSetAccess 7.25\nnotAnEntry 9\n");
    fclose(f);
    setenv("GPOOL_BENCH_DRV_COSTS", path, 1);
    cr_assert_float_eq(bench_drvcost_us(BENCH_DRV_MEM_CREATE), 123.5, 1e-9);
    cr_assert_float_eq(bench_drvcost_us(BENCH_DRV_MEM_SET_ACCESS), 7.25, 1e-9);
    cr_assert(strstr(bench_drvcost_source(BENCH_DRV_MEM_CREATE), "measured"));
    cr_assert(strstr(bench_drvcost_source(BENCH_DRV_MEM_MAP), "estimate"));
    cr_assert_eq(bench_drvcost_measured(), 1);
    unlink(path);
}

/* The first-pass calls by entry point add up to the first-pass total, for gpool and bfc, and
 * on a shipped trace gpool's first pass makes at most a quarter of the calls it made before
 * growth (90 on batch-decode, measured on the merge base b33ed95). */
Test(bench_coldstart, first_pass_by_entry_adds_up)
{
    char err[600];
    bench_trace t;
    cr_assert_eq(bench_trace_load("bench/traces/batch-decode.csv", &t, err, sizeof err), 0, "%s",
                 err);
    const char *specs[] = {"gpool", "bfc"};
    for (int i = 0; i < 2; i++) {
        bench_replay_opts o = {.passes = 2};
        bench_result r;
        cr_assert_eq(bench_replay(&dev, specs[i], &t, &o, &r), 0);
        cr_assert(!r.error && !r.failed_allocs, "%s: %s", specs[i], r.note);
        uint64_t sum = 0;
        for (int e = 0; e < BENCH_DRV_N; e++)
            sum += r.first_pass_by_entry[e];
        cr_assert_eq(sum, r.driver_calls_first_pass, "%s", specs[i]);
        cr_assert_gt(sum, 0);
        cr_assert_eq(r.driver_calls_last_pass, 0, "%s", specs[i]);
        if (i == 0) {
            cr_assert_leq(r.driver_calls_first_pass * 4, 90, "%llu",
                          (unsigned long long)r.driver_calls_first_pass);
            cr_assert_eq(r.first_pass_by_entry[BENCH_DRV_MEM_ALLOC], 0);
        } else {
            cr_assert_eq(r.first_pass_by_entry[BENCH_DRV_MEM_ALLOC], sum);
        }
        bench_result_free(&r);
    }
    bench_trace_free(&t);
}
