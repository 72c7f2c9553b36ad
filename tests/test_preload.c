/* The LD_PRELOAD interposer (build/libgpool_preload.so) and the PyTorch pluggable-allocator
 * hooks, on the simulated driver. The interposer tests run the helper programs under
 * tests/preload/ (built into $GPOOL_TEST_BUILD/tests/preload by preload/preload.mk) with and
 * without LD_PRELOAD and check their exit codes and output. On a real GPU
 * (GPOOL_TEST_REAL_GPU=1) they skip (they run against build/sim), as does the torch test that
 * reads the simulator's bytes in use; the other torch tests run there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gpool.h"
#include "gpool_torch.h"
#include "util_preload.h"
#include "util_sim.h"
#include "util_sizes.h"
#include "util_skip.h"

static void setup(void)
{
    NEED_SIM(); /* skips every test of the suite on a real GPU */
    cr_assert_not_null(sim_api(), "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(preload, .init = setup, .timeout = 120);

/* ---------------- driver API: dlsym + cuGetProcAddress ---------------- */

Test(preload, driver_allocations_are_cached)
{
    static struct run plain, pre;
    run_expect(&plain, "driver_prog", "cache", 0, NULL, 0);
    cr_assert_eq(field(&plain, "cuMemAlloc"), field(&plain, "allocs"),
                 "one cuMemAlloc per allocation");
    cr_assert(strstr(plain.out, "cuMemAlloc_from=libcuda.so.1 dlsym_from=libcuda.so.1"), "%s",
              plain.out);

    run_expect(&pre, "driver_prog", "cache", 1, NULL, 0);
    cr_assert(strstr(pre.out, "cuMemAlloc_from=libgpool_preload.so dlsym_from=libgpool_preload.so"),
              "%s", pre.out);
    cr_assert_eq(field(&pre, "cuMemAlloc"), 0, "%s", pre.out);
    cr_assert_eq(field(&pre, "cuMemAllocAsync"), 0, "%s", pre.out);
    cr_assert_lt(field(&pre, "cuMemCreate") * 20, field(&pre, "allocs"),
                 "gpool's cache should need far fewer cuMemCreate than allocations:\n%s", pre.out);
}

Test(preload, get_proc_address_no_recursion_and_versions)
{
    static struct run plain, pre;
    run_expect(&plain, "driver_prog", "getproc", 0, NULL, 0);
    run_expect(&pre, "driver_prog", "getproc", 1, NULL, 0);
    cr_assert(strstr(pre.out, "cuMemAlloc_from=libgpool_preload.so "
                              "cuGetProcAddress_from=libgpool_preload.so "
                              "cuCtxSynchronize_from=libcuda.so.1"),
              "%s", pre.out);
}

Test(preload, driver_foreign_pointers_and_bad_args_get_the_drivers_answer)
{
    static struct run plain, pre;
    run_expect(&plain, "driver_prog", "foreign", 0, NULL, 0);
    run_expect(&pre, "driver_prog", "foreign", 1, NULL, 0);
    cr_assert_str_eq(pre.out, plain.out);
}

Test(preload, driver_out_of_memory_is_cuda_error_out_of_memory)
{
    static struct run pre;
    run_expect(&pre, "driver_prog", "oom", 1, "GPOOL_SIM_MEMORY=64M", 0);
    cr_assert(strstr(pre.out, "cuMemAlloc=2"), "%s", pre.out);
}

Test(preload, driver_frees_at_exit_are_safe)
{
    static struct run pre;
    run_expect(&pre, "driver_prog", "exit", 1, NULL, 0);
    cr_assert(strstr(pre.out, "exit=armed"), "%s", pre.out);
}

/* ---------------- runtime API ---------------- */

Test(preload, runtime_calls_are_served_by_gpool)
{
    static struct run plain, pre;
    run(&plain, "runtime_prog", "serve", 0, NULL);
    cr_assert_eq(plain.rc, 3, "without the interposer the stand-in answers:\n%s", plain.out);
    cr_assert(strstr(plain.out, "libcudart stand-in: cudaMalloc called"), "%s", plain.out);

    run_expect(&pre, "runtime_prog", "serve", 1, NULL, 0);
    cr_assert_eq(field(&pre, "standin"), 0);
    cr_assert_eq(field(&pre, "cuMemAlloc"), 0);
    cr_assert_lt(field(&pre, "cuMemCreate") * 20, field(&pre, "allocs"), "%s", pre.out);
    /* cudaFree (batch mode, no non-blocking stream): no synchronize; one legacy-stream event
     * record per allocation after a free orders the reuse (preload/preload_fence.c) */
    cr_assert_leq(field(&pre, "cuEventRecord"), field(&pre, "frees"), "%s", pre.out);
    cr_assert_lt(field(&pre, "cuCtxSynchronize"), field(&pre, "frees") / 10, "%s", pre.out);
}

Test(preload, cudafree_stream_mode_makes_no_synchronize)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "serve", 1, "GPOOL_CONF=cudafree=stream", 0);
    cr_assert_leq(field(&pre, "cuCtxSynchronize"), 1, "%s", pre.out);
    cr_assert_leq(field(&pre, "cuEventRecord"), field(&pre, "frees"), "%s", pre.out);
    cr_assert_lt(field(&pre, "cuMemCreate") * 20, field(&pre, "allocs"), "%s", pre.out);
}

Test(preload, cudafree_batch_bounds_pending_memory)
{
    static struct run small, big;
    /* the batch is in use once a non-blocking stream exists */
    run_expect(&small, "runtime_prog", "serve nb", 1, "GPOOL_CONF=cudafree_batch=8M", 0);
    run_expect(&big, "runtime_prog", "serve nb", 1, "GPOOL_CONF=cudafree_batch=512M", 0);
    cr_assert_gt(field(&small, "cuCtxSynchronize"), field(&big, "cuCtxSynchronize"),
                 "a smaller batch synchronizes more often:\n%s\n%s", small.out, big.out);
    cr_assert_lt(field(&small, "cuMemCreate"), field(&big, "cuMemCreate"),
                 "and holds less memory back:\n%s\n%s", small.out, big.out);
}

/* Without a non-blocking stream a cudaFree'd block is reusable after the legacy-stream fence,
 * with no synchronize; the first such stream costs one synchronize and sends later frees to
 * the synchronizing batch. */
Test(preload, cudafree_batch_only_once_a_nonblocking_stream_exists)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "reuse", 1, NULL, 0);
}

/* Each thread's batch is its own and is flushed when the thread exits. */
Test(preload, cudafree_batches_are_per_thread_and_flushed_at_thread_exit)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "threads", 1, NULL, 0);
}

/* The cached path of cuMemAlloc+cuMemFree makes one driver call, the legacy-stream event
 * record that orders the reuse (preload/preload_fence.c; its event made once: push, create,
 * pop), no cuCtxGetCurrent, no cuMemGetInfo, and the device still follows the thread's
 * context switches. */
Test(preload, cached_pairs_make_no_driver_call_and_follow_context_switches)
{
    static struct run pre;
    run_expect(&pre, "driver_prog", "devices", 1, "GPOOL_SIM_DEVICES=2", 0);
    cr_assert(strstr(pre.out, "cuCtxSetCurrent_from=libgpool_preload.so"), "%s", pre.out);
    cr_assert_leq(field(&pre, "driver_calls"), field(&pre, "pairs") + 3, "%s", pre.out);
    cr_assert_eq(field(&pre, "cuCtxGetCurrent"), 0, "%s", pre.out);
    cr_assert_eq(field(&pre, "cuMemGetInfo"), 0, "%s", pre.out);
}

/* cudafree_flush=event: a flush records events (legacy stream + the non-blocking stream)
 * instead of synchronizing; the only synchronize is the one when the stream appeared. */
Test(preload, cudafree_flush_event_records_events_instead_of_synchronizing)
{
    static struct run sync, event;
    run_expect(&sync, "runtime_prog", "serve nb", 1, "GPOOL_CONF=cudafree_batch=8M", 0);
    run_expect(&event, "runtime_prog", "serve nb", 1,
               "GPOOL_CONF=cudafree_batch=8M,cudafree_flush=event", 0);
    cr_assert_gt(field(&sync, "syncs_free_part"), 2, "%s", sync.out);
    /* the cudaFreeAsync(p, 0) part after it joins the batch too (a non-blocking stream exists) */
    cr_assert_eq(field(&event, "cuCtxSynchronize"), 1, "%s", event.out);
    cr_assert_geq(field(&event, "cuEventRecord"), 2 * (field(&sync, "syncs_free_part") - 1),
                  "two events per flush:\n%s\n%s", sync.out, event.out);
    cr_assert_eq(field(&event, "standin"), 0, "%s", event.out);
}

Test(preload, bad_cudafree_mode_disables_the_interposer)
{
    static struct run pre;
    run(&pre, "runtime_prog", "serve", 1, "GPOOL_CONF=cudafree=sometimes");
    cr_assert(strstr(pre.out, "cudafree must be batch, stream or sync"), "%s", pre.out);
}

Test(preload, sync_free_synchronizes_each_free)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "serve", 1, "GPOOL_CONF=sync_free=1,tcache_bytes=512K", 0);
    cr_assert_geq(field(&pre, "cuCtxSynchronize"), field(&pre, "frees"), "%s", pre.out);
}

Test(preload, runtime_host_memory)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "host", 1, NULL, 0);
}

Test(preload, runtime_foreign_pointers_pass_through)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "foreign", 1, NULL, 0);
    cr_assert_eq(count_lines_with(pre.out, "libcudart stand-in: "), 3, "%s", pre.out);
}

Test(preload, runtime_null_arguments)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "nullargs", 1, NULL, 0);
}

Test(preload, runtime_out_of_memory_is_cudaErrorMemoryAllocation)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "oom", 1, "GPOOL_SIM_MEMORY=64M", 0);
    cr_assert(strstr(pre.out, "cudaMalloc=2 "), "%s", pre.out);
}

Test(preload, runtime_mem_get_info_counts_the_cache_as_free)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "meminfo", 1, NULL, 0);
}

Test(preload, runtime_frees_at_exit_are_safe)
{
    static struct run pre;
    run_expect(&pre, "runtime_prog", "exit", 1, NULL, 0);
}

/* ---------------- programs linked with -lcuda: the driver's versioned symbols ------------- */

Test(preload, direct_driver_calls_are_served_by_gpool)
{
    static struct run plain, pre;
    run_expect(&plain, "direct_prog", "serve", 0, NULL, 0);
    cr_assert_eq(field(&plain, "cuMemAlloc"), field(&plain, "allocs"), "%s", plain.out);
    cr_assert(strstr(plain.out, "pool=none"), "%s", plain.out);

    run_expect(&pre, "direct_prog", "serve", 1, NULL, 0);
    static const char *const none[] = {"cuMemAlloc",     "cuMemFree",      "cuMemAllocAsync",
                                       "cuMemFreeAsync", "cuMemHostAlloc", "cuMemAllocHost",
                                       "cuMemFreeHost"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        cr_assert_eq(field(&pre, none[i]), 0, "%s reached the driver:\n%s", none[i], pre.out);
    /* the pool served them all: 2000 cuMemAlloc + 300 cuMemAllocAsync (legacy, stream,
     * per-thread), 150 host blocks, all freed */
    cr_assert_eq(field(&pre, "pool_device_allocs"), 2300, "%s", pre.out);
    /* up to 64 cuMemFree'd blocks still wait in the thread's batch for their legacy-stream
     * fence (preload/preload_batch.c) */
    cr_assert_geq(field(&pre, "pool_device_frees") + 64, 2300, "%s", pre.out);
    cr_assert_leq(field(&pre, "pool_device_frees"), 2300, "%s", pre.out);
    cr_assert_eq(field(&pre, "pool_host_allocs"), 150, "%s", pre.out);
    cr_assert_eq(field(&pre, "pool_host_frees"), 150, "%s", pre.out);
    cr_assert_lt(field(&pre, "cuMemCreate") * 20, field(&pre, "allocs"), "%s", pre.out);
    /* cuMemGetInfo is gpool's: its cache counts as free */
    cr_assert_eq(field(&pre, "info_free_above_driver"), 1, "%s", pre.out);
    cr_assert_eq(field(&pre, "violations"), 0, "%s", pre.out);
    cr_assert_null(strstr(pre.out, "gpool preload"), "%s", pre.out);
}

Test(preload, direct_driver_calls_pass_through_when_disabled)
{
    static struct run pre;
    run_expect(&pre, "direct_prog", "serve", 1, "GPOOL_CONF=disable=1", 0);
    cr_assert_eq(field(&pre, "cuMemAlloc"), field(&pre, "allocs"), "%s", pre.out);
    cr_assert_eq(field(&pre, "cuMemHostAlloc"), 100, "%s", pre.out);
}

/* ---------------- one line on stderr when the interposer cannot serve ---------------- */

/* The program still runs (every call reaches the driver) and stderr says why, once. */
static void expect_one_notice(const char *env, const char *needle)
{
    static struct run pre;
    run_expect(&pre, "direct_prog", "serve", 1, env, 0);
    cr_assert_eq(field(&pre, "cuMemAlloc"), field(&pre, "allocs"), "%s", pre.out);
    cr_assert_eq(count_lines_with(pre.out, "gpool preload:"), 1, "%s", pre.out);
    cr_assert(strstr(pre.out, needle), "no \"%s\" in:\n%s", needle, pre.out);
}

Test(preload, unwritable_trace_path_says_so_once)
{
    expect_one_notice("GPOOL_CONF=trace=/nonexistent-gpool-dir/t.csv",
                      "/nonexistent-gpool-dir/t.csv");
}

Test(preload, unwritable_gpool_trace_says_so_once)
{
    expect_one_notice("GPOOL_TRACE=/nonexistent-gpool-dir/t.csv", "GPOOL_TRACE");
}

Test(preload, failed_reservation_says_so_once)
{
    expect_one_notice("GPOOL_SIM_FAIL=cuMemAddressReserve:1", "va_reserve");
}

Test(preload, unloadable_driver_says_so_once)
{
    expect_one_notice("GPOOL_LIBCUDA=/nonexistent-gpool-dir/libcuda.so.1", "cannot load");
}

/* GPOOL_LIBCUDA names another copy of the driver than the one the program is linked with:
 * gpool's pools live in that copy, so the program's direct calls go to its own. */
Test(preload, linked_driver_other_than_gpools_says_so_once)
{
    char dir[] = "/tmp/gpool-linked-XXXXXX", cmd[4400], env[4400];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp '%s/sim/libcuda.so.1' '%s/libcuda.so.1'", build_dir(), dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(env, sizeof env, "GPOOL_LIBCUDA='%s/libcuda.so.1'", dir);
    expect_one_notice(env, "not the driver gpool loads");
    snprintf(cmd, sizeof cmd, "rm -r '%s'", dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(preload, untrackable_streams_with_flush_event_say_so_once)
{
    static struct run ev, dflt;
    run_expect(&ev, "direct_prog", "streams", 1, "GPOOL_CONF=cudafree_flush=event", 0);
    cr_assert_eq(count_lines_with(ev.out, "gpool preload:"), 1, "%s", ev.out);
    cr_assert(strstr(ev.out, "cudafree_flush=event"), "%s", ev.out);
    /* the default flush synchronizes anyway: nothing to say */
    run_expect(&dflt, "direct_prog", "streams", 1, NULL, 0);
    cr_assert_null(strstr(dflt.out, "gpool preload"), "%s", dflt.out);
}

/* ---------------- stream capture ---------------- */

/* cuMemAlloc/cuMemFree/cudaMalloc/cudaFree during a capture answer what CUDA answers: in
 * global and thread-local mode (capture on the calling thread) CUDA_ERROR_STREAM_CAPTURE_
 * UNSUPPORTED / cudaErrorStreamCaptureUnsupported (900), the capture then invalidated
 * (cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901); relaxed mode allows them. */
Test(preload, allocations_during_capture_answer_what_cuda_answers)
{
    static struct run plain, pre;
    run_expect(&plain, "direct_prog", "capture", 0, NULL, 0);
    run_expect(&pre, "direct_prog", "capture", 1, NULL, 0);
    static const char *const lines[] = {
        "global: cuMemAlloc=900 cuMemFree=900 cudaMalloc=900 cudaFree=-1 cuStreamEndCapture=901",
        ("thread_local: cuMemAlloc=900 cuMemFree=900 cudaMalloc=900 cudaFree=-1 "
         "cuStreamEndCapture=901"),
        "relaxed: cuMemAlloc=0 cuMemFree=0 cudaMalloc=0 cudaFree=0 cuStreamEndCapture=0"};
    for (size_t i = 0; i < 3; i++) {
        char drv[200];
        snprintf(drv, sizeof drv, "%.*s cudaMalloc=-1 cudaFree=-1 %s",
                 (int)(strstr(lines[i], " cudaMalloc") - lines[i]), lines[i],
                 strstr(lines[i], "cuStreamEndCapture"));
        cr_assert(strstr(plain.out, drv), "the simulator: no \"%s\" in\n%s", drv, plain.out);
        cr_assert(strstr(pre.out, lines[i]), "no \"%s\" in\n%s", lines[i], pre.out);
    }
    /* a capture on another thread: thread-local mode allows the call, global mode does not */
    static const char *const other[] = {"other_thread_local: cuMemAlloc=0 cuStreamEndCapture=0",
                                        "other_global: cuMemAlloc=900 cuStreamEndCapture=901"};
    for (size_t i = 0; i < 2; i++) {
        cr_assert(strstr(plain.out, other[i]), "the simulator: no \"%s\" in\n%s", other[i],
                  plain.out);
        cr_assert(strstr(pre.out, other[i]), "no \"%s\" in\n%s", other[i], pre.out);
    }
    /* no capture left: the cached pairs make no driver call; relaxed mode's were gpool's */
    cr_assert_eq(field(&pre, "after_cuMemAlloc"), 0, "%s", pre.out);
    cr_assert_geq(field(&pre, "pool_device_allocs"), 105, "%s", pre.out);
}

/* ---------------- configuration ---------------- */

Test(preload, disable_passes_everything_through)
{
    static struct run rt, drv;
    run_expect(&rt, "runtime_prog", "serve", 1, "GPOOL_CONF=disable=1", 3);
    cr_assert(strstr(rt.out, "libcudart stand-in: cudaMalloc called"), "%s", rt.out);
    cr_assert_null(strstr(rt.out, "gpool preload"), "disable=1 is not an error:\n%s", rt.out);
    run_expect(&drv, "driver_prog", "cache", 1, "GPOOL_CONF=disable=1", 0);
    cr_assert_eq(field(&drv, "cuMemAlloc"), field(&drv, "allocs"), "%s", drv.out);
}

Test(preload, bad_conf_says_so_once_and_passes_through)
{
    static struct run rt, drv, val;
    run_expect(&rt, "runtime_prog", "serve", 1, "GPOOL_CONF=tcache_bytes=1M,bogus_key=1", 3);
    cr_assert_eq(count_lines_with(rt.out, "gpool preload: bad GPOOL_CONF"), 1, "%s", rt.out);
    cr_assert(strstr(rt.out, "bogus_key"), "the message names the key:\n%s", rt.out);
    run_expect(&drv, "driver_prog", "cache", 1, "GPOOL_CONF=bogus_key=1", 0);
    cr_assert_eq(field(&drv, "cuMemAlloc"), field(&drv, "allocs"), "%s", drv.out);
    run(&val, "runtime_prog", "nullargs", 1, "GPOOL_CONF=disable=maybe");
    cr_assert_eq(count_lines_with(val.out, "gpool preload: bad GPOOL_CONF"), 1, "%s", val.out);
}

/* The interposer's own size key takes what gpool_config_parse takes: 64MiB was refused. */
Test(preload, cudafree_batch_takes_binary_unit_spellings)
{
    static struct run mib;
    run_expect(&mib, "runtime_prog", "serve nb", 1, "GPOOL_CONF=cudafree_batch=64MiB", 0);
    cr_assert_null(strstr(mib.out, "bad GPOOL_CONF"), "%s", mib.out);
}

/* Every spelling of tests/util_sizes.h means the same to the interposer as to
 * gpool_config_parse, for its own key (cudafree_batch) and for gpool's (budget_device). */
Test(preload, sizes_are_spelled_as_everywhere_else, .timeout = 120)
{
    static struct run r;
    for (size_t i = 0; i < SIZES_ACCEPTED_COUNT; i++) {
        char env[160];
        snprintf(env, sizeof env, "GPOOL_CONF=cudafree_batch=%s,budget_device=%s",
                 sizes_accepted[i].text, sizes_accepted[i].text);
        run(&r, "runtime_prog", "nullargs", 1, env);
        cr_assert_null(strstr(r.out, "bad GPOOL_CONF"), "%s refused:\n%s", env, r.out);
        cr_assert_eq(r.rc, 0, "%s:\n%s", env, r.out);
    }
    static const char *const keys[] = {"cudafree_batch", "budget_device"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < SIZES_REJECTED_COUNT; i++) {
            char env[160];
            snprintf(env, sizeof env, "GPOOL_CONF='%s=%s'", keys[k], sizes_rejected[i]);
            run(&r, "runtime_prog", "nullargs", 1, env);
            cr_assert_eq(count_lines_with(r.out, "gpool preload: bad GPOOL_CONF"), 1,
                         "%s accepted:\n%s", env, r.out);
            cr_assert(strstr(r.out, keys[k]), "%s: the message names the key:\n%s", env, r.out);
        }
}

Test(preload, gpool_keys_reach_the_pools)
{
    static struct run pre;
    /* a 1 MiB device budget: the first 4 MiB cudaMalloc of the serve loop fails with OOM */
    run_expect(&pre, "runtime_prog", "serve", 1, "GPOOL_CONF=sync_free=0,budget_device=1M", 3);
    cr_assert(strstr(pre.out, "cudaMalloc=2"), "%s", pre.out);
}

/* dlsym(RTLD_NEXT) keeps resolving relative to its real caller through the interposed dlsym. */
Test(preload, rtld_next_lookups_are_unchanged)
{
    static struct run plain, pre;
    run_expect(&plain, "next_prog", "", 0, NULL, 0);
    run_expect(&pre, "next_prog", "", 1, NULL, 0);
    cr_assert(strstr(pre.out, "next_value=42"), "%s", pre.out);
}

/* ---------------- benchmarks of the drop-in (ran briefly: that they run, not how fast) ------- */

/* Run a command line under sh, output (stdout and stderr) into r. */
static void run_shell(struct run *r, const char *cmd)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = 0;
    int st = pclose(p);
    r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* gpool-bench hotpath --dropin prints a row for every heap size and block size (measured, or
 * skipped when the heap does not fit), each with the library's pair and both APIs' pairs. */
Test(preload, hotpath_dropin_benchmark_prints_every_row, .timeout = 300)
{
    static struct run r;
    char cmd[4400];
    snprintf(cmd, sizeof cmd,
             "env -u GPOOL_CONF -u LD_PRELOAD "
             "ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" "
             "'%s/gpool-bench' hotpath --dropin --pairs 200 "
             "--rounds 1 2>&1",
             build_dir());
    run_shell(&r, cmd);
    cr_assert_eq(r.rc, 0, "%s", r.out);
    static const char *const heaps[] = {"      10 ", "    1000 ", "   20000 ", "  100000 "};
    static const char *const sizes[] = {"512 B", "4 KiB", "1 MiB"};
    for (int h = 0; h < 4; h++)
        for (int z = 0; z < 3; z++) {
            char row[64];
            snprintf(row, sizeof row, "\n%s%8s ", heaps[h], sizes[z]);
            cr_assert(strstr(r.out, row), "no row \"%s\":\n%s", row + 1, r.out);
        }
    cr_assert(strstr(r.out, "figures on the simulated driver"), "%s", r.out);
    cr_assert(strstr(r.out, "goal <= 4x at every row"), "%s", r.out);
    cr_assert_geq(count_lines_with(r.out, "x\n"), 9, "at least the rows that fit are measured:\n%s",
                  r.out);
}

/* A trace replayed through the interposer: no batch (and no synchronize) without a
 * non-blocking stream; with one, every free is batched and a flush happens per batch limit. */
Test(preload, trace_replay_reports_the_batch)
{
    static struct run plain, nb;
    char cmd[4400];
    const char *b = build_dir();
    const char *fmt = "env -u GPOOL_CONF ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" "
                      "GPOOL_SIM_MEMORY=8G LD_PRELOAD='%s/libgpool_preload.so' "
                      "'%s/bench/dropin_replay' %s bench/traces/cnn-train.csv 2>&1";
    snprintf(cmd, sizeof cmd, fmt, b, b, "");
    run_shell(&plain, cmd);
    cr_assert_eq(plain.rc, 0, "%s", plain.out);
    cr_assert_gt(field(&plain, "frees"), 1000, "%s", plain.out);
    cr_assert_eq(field(&plain, "batched"), 0, "%s", plain.out);
    cr_assert_eq(field(&plain, "syncs"), 0, "%s", plain.out);
    snprintf(cmd, sizeof cmd, fmt, b, b, "--nb");
    run_shell(&nb, cmd);
    cr_assert_eq(nb.rc, 0, "%s", nb.out);
    cr_assert_eq(field(&nb, "batched"), field(&nb, "frees"), "%s", nb.out);
    cr_assert_gt(field(&nb, "flushes"), 0, "%s", nb.out);
    cr_assert_geq(field(&nb, "peak_batch_bytes"), field(&nb, "limit_bytes"), "%s", nb.out);
}

/* ---------------- PyTorch pluggable allocator (libgpool itself, in this process) ---------- */

Test(torch, alloc_free_reuse_and_empty_cache)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    /* the interposer's keys are checked and ignored */
    setenv("GPOOL_CONF",
           "disable=0,sync_free=1,cudafree=stream,cudafree_batch=64MiB,cudafree_flush=event,"
           "tcache_bytes=0",
           1);
    void *a = gpool_torch_alloc(3 << 20, 0, NULL);
    cr_assert_not_null(a, "%s", gpool_last_error());
    memset(a, 7, 3 << 20); /* simulated device memory is host memory */
    cr_assert_gt(sim->bytes_in_use(0), 0);
    gpool_torch_free(a, 3 << 20, 0, NULL);
    void *b = gpool_torch_alloc(3 << 20, 0, NULL);
    /* the hooks hear of no record_stream: a freed block waits for the batch's synchronize
     * (src/torch/torch_batch.c, tests/test_torch_hooks.c), so b is another block */
    cr_assert_neq(b, a, "a block freed through the hook is not reused before a synchronize");
    gpool_torch_free(b, 3 << 20, 0, NULL);
    cr_assert_null(gpool_torch_alloc(0, 0, NULL));
    gpool_torch_free(NULL, 0, 0, NULL);
    gpool_torch_empty_cache();
    cr_assert_eq(sim->bytes_in_use(0), 0, "empty_cache gives the cached pages back");
}

Test(torch, bad_device_and_bad_conf_return_null)
{
    cr_assert_null(gpool_torch_alloc(1 << 20, 99, NULL));
    cr_assert_null(gpool_torch_alloc(1 << 20, -1, NULL));
    setenv("GPOOL_CONF", "bogus=1", 1);
    cr_assert_null(gpool_torch_alloc(1 << 20, 0, NULL));
    cr_assert(strstr(gpool_last_error(), "bogus"), "%s", gpool_last_error());
    setenv("GPOOL_CONF", "cudafree_batch=64Q", 1); /* an interposer key: checked all the same */
    cr_assert_null(gpool_torch_alloc(1 << 20, 0, NULL));
    cr_assert(strstr(gpool_last_error(), "cudafree_batch"), "%s", gpool_last_error());
    unsetenv("GPOOL_CONF");
    void *p = gpool_torch_alloc(1 << 20, 0, NULL);
    cr_assert_not_null(p, "a later call retries: %s", gpool_last_error());
    gpool_torch_free(p, 1 << 20, 0, NULL);
}

Test(torch, out_of_memory_returns_null)
{
    cr_assert_null(gpool_torch_alloc((size_t)1 << 40, 0, NULL));
    void *p = gpool_torch_alloc(1 << 20, 0, NULL);
    cr_assert_not_null(p);
    gpool_torch_free(p, 1 << 20, 0, NULL);
}

/* gpool_block_size (the interposer's lock-free lookup before batching a cudaFree): the size
 * gpool_block_info reports, for small (slab) and large blocks; only the start of a live device
 * block is accepted. */
Test(block_size, matches_block_info_and_rejects_what_is_not_a_live_block_start)
{
    NEED_SIM();
    gpool_t *pool;
    cr_assert_eq(gpool_create(NULL, &pool), GPOOL_OK, "%s", gpool_last_error());
    static const size_t sizes[] = {1, 512, 4096, 16 << 10, 1 << 20, 5 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p;
        cr_assert_eq(gpool_alloc(pool, sizes[i], NULL, &p), GPOOL_OK, "%s", gpool_last_error());
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        size_t n = 0;
        cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
        cr_assert_eq(gpool_block_size(pool, p, &n), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(n, d.size, "size %zu: %zu vs block_info's %zu", sizes[i], n, d.size);
        cr_assert_geq(n, sizes[i]);
        if (sizes[i] > 1)
            cr_assert_eq(gpool_block_size(pool, (char *)p + 1, &n), GPOOL_ERR_INVALID_POINTER);
        cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
        cr_assert_eq(gpool_block_size(pool, p, &n), GPOOL_ERR_INVALID_POINTER, "freed: %zu", n);
    }
    size_t n;
    int local;
    cr_assert_eq(gpool_block_size(pool, &local, &n), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_block_size(NULL, &local, &n), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_block_size(pool, &local, NULL), GPOOL_ERR_INVALID_ARG);
    gpool_destroy(pool);
}
