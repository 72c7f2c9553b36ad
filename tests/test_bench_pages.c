/* test_bench_pages.c — issue 27's distance to the physical limit in gpool-bench: compare's
 * pages-goal line and --require-pages (how make fit-check shows, and later enforces, "at most
 * 2 pages above the limit on one stream"), and --scale (the same trace at N times the bytes).
 * Runs build/gpool-bench (from $GPOOL_TEST_BUILD) on the simulated driver; skips on a real
 * GPU. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util_skip.h"

static char out_path[64], err_path[64];

static void setup(void)
{
    NEED_SIM();
    snprintf(out_path, sizeof out_path, "/tmp/test-bench-pages-%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/test-bench-pages-%d.err", (int)getpid());
}

static void teardown(void)
{
    if (out_path[0]) unlink(out_path);
    if (err_path[0]) unlink(err_path);
}

TestSuite(bench_pages, .init = setup, .fini = teardown);

/* Run gpool-bench with args; stdout and stderr go to files. Returns the exit status. */
static int bench(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bench(const char *fmt, ...)
{
    char args[1024], cmd[2048];
    const char *b = getenv("GPOOL_TEST_BUILD");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s/gpool-bench %s >%s 2>%s", b && *b ? b : "build", args, out_path,
             err_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return buf;
}

/* one-page-above: 1.5 MiB and 1 MiB live, the first freed, then 1.9 MiB: peak live 2.9 MiB
 * (2 pages); the 1.5 MiB hole alone cannot take the 1.9 MiB block (gpool needed 3 pages before
 * spans), the hole at the head of page 0 and the free tail of page 1 together can. */
#define ABOVE "bench/traces/test/one-page-above.csv"
/* mid-holes: two 0.5 MiB holes in the middles of pages 0 and 1 (no free tail or head), then
 * 1 MiB: peak live 6 MiB (3 pages), and no placement serves it without a 4th. */
#define MID "bench/traces/test/mid-holes.csv"

Test(bench_pages, compare_prints_the_distance_to_the_two_page_goal)
{
    cr_assert_eq(bench("compare " MID " bench/traces/test/one-6mib.csv --strategy gpool"), 0, "%s",
                 slurp(err_path));
    const char *out = slurp(out_path);
    cr_assert(strstr(out, "pages-goal (gpool at most 2 pages above the physical limit, one "
                          "stream): 2 of 2 traces\n"),
              "%s", out);
    cr_assert_eq(bench("compare " MID " bench/traces/test/one-6mib.csv --strategy gpool "
                       "--require-pages 0"),
                 3, "%s", slurp(err_path));
    cr_assert(strstr(slurp(out_path), "pages-goal (gpool at most 0 pages above the physical "
                                      "limit, one stream): 1 of 2 traces; above it: "
                                      "mid-holes +1\n"),
              "%s", slurp(out_path));
    cr_assert(
        strstr(slurp(err_path), "gpool is more than 0 pages above the physical limit on mid-holes"),
        "%s", slurp(err_path));
    cr_assert_null(strstr(slurp(err_path), "on one-6mib"), "%s", slurp(err_path));
    cr_assert_eq(bench("compare " MID " --strategy gpool --require-pages 1"), 0, "%s",
                 slurp(err_path));
    cr_assert_eq(bench("compare " MID " --strategy gpool --require-pages 0 --json"), 3);
    cr_assert_null(strstr(slurp(out_path), "pages-goal"), "JSON stays JSON: %s", slurp(out_path));
    cr_assert_eq(bench("compare " MID " --strategy gpool --require-pages -1"), 2);
}

Test(bench_pages, scale_multiplies_every_request_size)
{
    cr_assert_eq(bench("fit bench/traces/test/one-6mib.csv --strategy cuda --scale 32 --json"), 0,
                 "%s", slurp(err_path));
    const char *out = slurp(out_path);
    cr_assert(strstr(out, "\"name\":\"one-6mib@x32\""), "%s", out);
    cr_assert(strstr(out, "\"peak_live_bytes\":201326592"), "%s", out);
    cr_assert(strstr(out, "\"min_capacity_bytes\":201326592"), "%s", out);
    cr_assert_eq(bench("fit " ABOVE " --strategy gpool --scale 4"), 0, "%s", slurp(err_path));
    cr_assert(strstr(slurp(out_path), "peak_live_bytes     12163480 (11.6 MiB)"), "%s",
              slurp(out_path));
    cr_assert_eq(bench("fit " ABOVE " --strategy gpool --scale 0"), 2);
    cr_assert(strstr(slurp(err_path), "--scale: 1 to 1024"), "%s", slurp(err_path));
    cr_assert_eq(bench("fit " ABOVE " --strategy gpool --scale 1025"), 2);
}

/* Issue 27: under pressure a request goes where it needs the fewest fresh pages
 * (src/placement/heap.c, the arena's retry): transformer-train fits 4 pages above its physical
 * limit (was 5). */
Test(bench_pages, pressure_placement_saves_a_page, .timeout = 120)
{
    cr_assert_eq(bench("fit bench/traces/transformer-train.csv --strategy gpool --json"), 0, "%s",
                 slurp(err_path));
    const char *k = strstr(slurp(out_path), "\"pages_above_limit\":");
    long above = -1;
    cr_assert(k && sscanf(k + strlen("\"pages_above_limit\":"), "%ld", &above) == 1, "%s",
              slurp(out_path));
    cr_assert(above >= 0 && above <= 4, "%ld pages above", above);
}

/* fit says what the allocation that fails one page below the min capacity found: on
 * mid-holes, the 1 MiB request at 6 MiB meets 3 backed pages, 2 of them with a 0.5 MiB hole
 * inside, no idle page. */
Test(bench_pages, fit_says_what_the_failing_request_found)
{
    cr_assert_eq(bench("fit " MID " --strategy gpool --json"), 0, "%s", slurp(err_path));
    cr_assert(strstr(slurp(out_path),
                     "\"at_failure\":{\"capacity_bytes\":6291456,\"request_bytes\":1048576,"
                     "\"backed_pages\":3,\"partial_pages\":2,\"partial_free_bytes\":1048576,"
                     "\"idle_pages\":0}"),
              "%s", slurp(out_path));
    cr_assert_eq(bench("fit " MID " --strategy gpool"), 0, "%s", slurp(err_path));
    cr_assert(strstr(slurp(out_path), "  at the failure     a request of 1.00 MiB at 6.0 MiB (min "
                                      "capacity - 1 page) found 3 backed pages: 2 partly used "
                                      "(1.00 MiB free in them), 0 holding nothing"),
              "%s", slurp(out_path));
    /* a strategy without snapshots says nothing about it */
    cr_assert_eq(bench("fit bench/traces/test/one-6mib.csv --strategy cuda --json"), 0);
    cr_assert(strstr(slurp(out_path), "\"at_failure\":null"), "%s", slurp(out_path));
}

/* Issue 27's tail-spanning placement (src/placement/arena_span.c): on one-page-above the
 * 1.9 MiB block begins in page 1's free tail and ends in page 0's free head, mapped again side
 * by side, so the trace fits at its physical limit (it needed a 3rd page before). */
Test(bench_pages, a_span_over_a_tail_and_a_head_reaches_the_limit)
{
    cr_assert_eq(bench("fit " ABOVE " --strategy gpool --json"), 0, "%s", slurp(err_path));
    cr_assert(strstr(slurp(out_path), "\"pages_above_limit\":0,"), "%s", slurp(out_path));
    cr_assert(strstr(slurp(out_path), "\"min_capacity_bytes\":4194304,"), "%s", slurp(out_path));
}
