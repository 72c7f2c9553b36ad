/* The examples in examples/ run on the simulated driver: each exits 0, prints its key line,
 * and leaves no driver object behind (the simulator's GPOOL_SIM_STATS summary). The binaries
 * are in $GPOOL_TEST_BUILD/examples/ (make test builds them first). On a real GPU
 * (GPOOL_TEST_REAL_GPU=1) the whole suite skips. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util_skip.h"

struct run {
    int exit_code;
    char output[16384]; /* stdout and stderr */
    char stats[16384];  /* the simulator's JSON summary */
};

/* Run examples/<name> with the given extra environment ("VAR=value ..." or ""). */
static void run_example(const char *name, const char *env, struct run *r)
{
    const char *build = getenv("GPOOL_TEST_BUILD");
    const char *libcuda = getenv("GPOOL_LIBCUDA");
    cr_assert(build && libcuda, "run the tests with make test (GPOOL_TEST_BUILD, GPOOL_LIBCUDA)");
    char bin[4096];
    snprintf(bin, sizeof bin, "%s/examples/%s", build, name);
    cr_assert_eq(access(bin, X_OK), 0, "%s is missing: make examples", bin);

    char stats_path[] = "/tmp/gpool-example-stats-XXXXXX";
    int fd = mkstemp(stats_path);
    cr_assert_geq(fd, 0);
    close(fd);
    /* Under LeakSanitizer: hwloc's PCI plugin leaks ~1 KiB per topology load (hwloc 2.9; a
     * bare hwloc_topology_init/load/destroy shows it too) and is unloaded before the report,
     * so its frames are only attributed with slow unwinding. Suppress exactly that. */
    char supp_path[] = "/tmp/gpool-example-lsan-XXXXXX";
    fd = mkstemp(supp_path);
    cr_assert_geq(fd, 0);
    static const char supp[] = "leak:libhwloc.so\n";
    cr_assert_eq(write(fd, supp, sizeof supp - 1), (ssize_t)(sizeof supp - 1));
    close(fd);
    /* The example links libcuda.so.1; point the loader at the simulator gpool also loads. */
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "LD_LIBRARY_PATH='%s/sim' GPOOL_SIM_STATS='%s' "
             "LSAN_OPTIONS=\"${LSAN_OPTIONS:+$LSAN_OPTIONS:}fast_unwind_on_malloc=0:"
             "suppressions=%s\" %s '%s' 2>&1",
             build, stats_path, supp_path, env, bin);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r->output, 1, sizeof r->output - 1, p);
    r->output[n] = '\0';
    int status = pclose(p);
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    FILE *f = fopen(stats_path, "r");
    r->stats[0] = '\0';
    if (f) {
        r->stats[fread(r->stats, 1, sizeof r->stats - 1, f)] = '\0';
        fclose(f);
    }
    unlink(stats_path);
    unlink(supp_path);
}

/* The simulator's "live" counters are all zero: every handle, mapping, reservation, host
 * allocation, stream and event was given back. */
static void assert_nothing_left(const char *name, const struct run *r)
{
    const char *live = strstr(r->stats, "\"live\":{");
    cr_assert_not_null(live, "%s: no simulator summary (GPOOL_SIM_STATS):\n%s", name, r->stats);
    const char *end = strchr(live, '}');
    cr_assert_not_null(end);
    for (const char *c = live + 8; c < end; c++)
        if (*c == ':')
            cr_assert(c[1] == '0' && (c[2] == ',' || c[2] == '}'),
                      "%s left driver objects behind: %.*s", name, (int)(end - live + 1), live);
}

static void expect_success(const char *name, const struct run *r, const char *key_line)
{
    cr_assert_eq(r->exit_code, 0, "%s exited with %d:\n%s", name, r->exit_code, r->output);
    cr_assert_not_null(strstr(r->output, key_line), "%s did not print \"%s\":\n%s", name, key_line,
                       r->output);
    assert_nothing_left(name, r);
}

/* Run examples/<name> and expect_success(); the run stays for the test's own checks. */
static const struct run *run_ok(const char *name, const char *env, const char *key_line)
{
    static struct run r;
    run_example(name, env, &r);
    expect_success(name, &r, key_line);
    return &r;
}

TestSuite(examples, .init = suite_needs_sim); /* every test skips on a real GPU */

Test(examples, training_step_steady_state_makes_no_driver_calls)
{
    const struct run *r = run_ok("training_step", "", "steady state (steps 2..50): 0 driver calls");
    cr_assert_not_null(strstr(r->output, "driver_calls_total before steady state: "));
}

Test(examples, renderer_frame_verifies_every_readback)
{
    const struct run *r =
        run_ok("renderer_frame", "", "renderer_frame: 120 frames rendered, 120 readbacks verified");
    /* statistics every 30 frames, with every memory kind in use */
    cr_assert_not_null(strstr(r->output, "frame 120:"), "%s", r->output);
    cr_assert_not_null(strstr(r->output, "pinned"), "%s", r->output);
    /* what its comment claims: memory calls flat from frame 30 to 120, event calls counted */
    const char *f30 = strstr(r->output, "frame  30:"), *f120 = strstr(r->output, "frame 120:");
    cr_assert(f30 && f120, "%s", r->output);
    unsigned long long m30, m120;
    double e120;
    cr_assert_eq(sscanf(strstr(f30, "memory calls "), "memory calls %llu", &m30), 1);
    cr_assert_eq(sscanf(strstr(f120, "memory calls "),
                        "memory calls %llu, event calls per frame %lf", &m120, &e120),
                 2, "%s", r->output);
    cr_assert_eq(m30, m120, "memory calls grew from frame 30 to 120:\n%s", r->output);
    cr_assert_gt(e120, 0.0, "%s", r->output);
}

Test(examples, multi_gpu_shares_a_block_across_two_devices)
{
    const struct run *r =
        run_ok("multi_gpu", "GPOOL_SIM_DEVICES=2",
               "multi_gpu: 2 slices of the shared block verified on the CPU, peer copy 1 -> "
               "0 verified");
    cr_assert_not_null(strstr(r->output, "placed in mapped sysmem by the policy"), "%s", r->output);
}

/* Without peer capability the peer copy is staged through the host: VMM memory of device 1
 * is an illegal address for device 0 then (sim: access only by cuMemSetAccess). */
Test(examples, multi_gpu_without_peer_access_stages_through_the_host)
{
    const struct run *r =
        run_ok("multi_gpu", "GPOOL_SIM_DEVICES=3 GPOOL_SIM_PEER=none",
               "multi_gpu: 3 slices of the shared block verified on the CPU, peer copy 1 -> "
               "0 verified");
    cr_assert_not_null(strstr(r->output, "peer access 0 -> 1: no"), "%s", r->output);
}

Test(examples, multi_gpu_runs_on_one_device)
{
    run_ok("multi_gpu", "GPOOL_SIM_DEVICES=1", "multi_gpu: 1 slices of the shared block verified");
}
