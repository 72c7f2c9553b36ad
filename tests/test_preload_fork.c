/* fork(), process start and GPOOL_TRACE: the interposer (helper tests/preload/fork_prog.c) and
 * the C API, on the strict simulator. Every forked child arms alarm(): a hang is a counted
 * SIGALRM, never a test that waits forever. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

/* A sanitizer build's interposer needs the sanitizer's runtime, which /bin/true lacks: the
 * start-up tests (which preload it into /bin/true) skip there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED_BUILD 1
#endif
#endif
#ifndef SANITIZED_BUILD
#define SANITIZED_BUILD 0
#endif
#define NOT_SANITIZED()                                                                            \
    do {                                                                                           \
        if (SANITIZED_BUILD)                                                                       \
            cr_skip_test("a sanitizer build's interposer cannot load in /bin/true");               \
    } while (0)

static void setup(void)
{
    NEED_SIM();
    cr_assert_not_null(sim_api(), "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(fork, .init = setup, .timeout = 120);

static void expect_every_child_refused(const struct run *r, unsigned long children)
{
    cr_assert_eq(field(r, "children"), children, "%s", r->out);
    cr_assert_eq(field(r, "hung"), 0, "children hung at fork's locks:\n%s", r->out);
    cr_assert_eq(field(r, "success"), 0, "children got the parent's memory:\n%s", r->out);
    cr_assert_eq(field(r, "not_initialized"), children, "%s", r->out);
    cr_assert_eq(field(r, "parent_ok"), 1, "%s", r->out);
}

/* ---------------- fork: driver, runtime, simulator, C API ---------------- */

Test(fork, child_driver_calls_get_not_initialized_and_never_hang)
{
    static struct run r;
    run_expect(&r, "fork_prog", "child_driver 20", 1, NULL, 0);
    cr_assert(strstr(r.out, "child_alloc=3 child_free=3 child_getproc=ok"), "%s", r.out);
    expect_every_child_refused(&r, 20);
}

Test(fork, child_runtime_calls_get_initialization_error)
{
    static struct run r;
    run_expect(&r, "fork_prog", "child_runtime 5", 1, NULL, 0);
    cr_assert(strstr(r.out, "child_malloc=3 child_free=3"), "%s", r.out); /* cudaError 3 */
    cr_assert_null(strstr(r.out, "libcudart stand-in"), "a call reached cudart:\n%s", r.out);
    expect_every_child_refused(&r, 5);
}

/* The simulator's rule (GPOOL_SIM_FORK=driver), without the interposer: a child forked after
 * cuInit is answered CUDA_ERROR_NOT_INITIALIZED and never waits on the driver lock. */
Test(fork, simulator_answers_a_child_forked_after_cuinit_not_initialized)
{
    static struct run r;
    run_expect(&r, "fork_prog", "child_driver 20", 0, "GPOOL_SIM_FORK=driver", 0);
    cr_assert(strstr(r.out, "child_alloc=3 child_free=3"), "%s", r.out);
    expect_every_child_refused(&r, 20);
}

static atomic_int churn_stop;

static void *churn(void *arg)
{
    gpool_t *pool = arg;
    void *p[8] = {0};
    for (unsigned i = 0; !atomic_load(&churn_stop); i++) {
        unsigned k = i % 8;
        if (p[k]) gpool_free(pool, p[k]);
        p[k] = NULL;
        if (gpool_alloc(pool, (1 + i % 5) * MiB + (i % 3) * 4096, NULL, &p[k]) != GPOOL_OK)
            p[k] = NULL;
    }
    for (unsigned k = 0; k < 8; k++)
        if (p[k]) gpool_free(pool, p[k]);
    return NULL;
}

/* The C API in a child: calls on the parent's pool answer GPOOL_ERR_DRIVER at once (no hang
 * on a lock held at fork, never the parent's block); the parent goes on. */
Test(fork, c_api_child_is_refused_the_parents_pool)
{
    /* valgrind's leak check at each child's _exit fails the children (--error-exitcode): the
     * children's answers are checked in the plain and sanitizer runs */
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload")) cr_skip_test("children run under valgrind's leak check");
    gpool_t *pool = test_pool(NULL);
    void *cached, *held;
    cr_assert_eq(gpool_alloc(pool, 256, NULL, &cached), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, cached), GPOOL_OK); /* in this thread's cache */
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &held), GPOOL_OK);
    pthread_t th;
    atomic_store(&churn_stop, 0);
    cr_assert_eq(pthread_create(&th, NULL, churn, pool), 0);
    int refused = 0, hung = 0, served = 0;
    for (int i = 0; i < 10; i++) {
        usleep(200);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            alarm(5);
            void *small = (void *)1, *big = (void *)1;
            gpool_status a = gpool_alloc(pool, 256, NULL, &small);
            gpool_status b = gpool_alloc(pool, 3 * MiB, NULL, &big);
            gpool_status f = gpool_free(pool, held);
            gpool_stats st = GPOOL_STATS_INIT;
            gpool_status s = gpool_get_stats(pool, &st);
            int says = strstr(gpool_last_error(), "forked") != NULL;
            if (a == GPOOL_OK || b == GPOOL_OK) _exit(2);
            _exit(a == GPOOL_ERR_DRIVER && b == GPOOL_ERR_DRIVER && f == GPOOL_ERR_DRIVER &&
                          s == GPOOL_ERR_DRIVER && !small && !big && says
                      ? 0
                      : 3);
        }
        int st = 0;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            hung++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            refused++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
            served++;
    }
    atomic_store(&churn_stop, 1);
    pthread_join(th, NULL);
    cr_assert_eq(hung, 0, "%d of 10 children hung", hung);
    cr_assert_eq(served, 0, "%d of 10 children got a block of the parent's pool", served);
    cr_assert_eq(refused, 10);
    void *after;
    cr_assert_eq(gpool_alloc(pool, 3 * MiB, NULL, &after), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, after), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, held), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* ---------------- process start ---------------- */

/* The interposer loads only what it uses at start: no jemalloc (absent on many machines: every
 * process started under LD_PRELOAD would fail with 127) nor what it pulls in (libstdc++), no
 * hwloc (and its libudev) before gpool places host memory (preload/preload_hwloc.c). */
Test(fork, preload_starts_without_jemalloc_or_hwloc)
{
    NOT_SANITIZED();
    static struct run r;
    char cmd[4400];
    snprintf(cmd, sizeof cmd,
             "env LD_TRACE_LOADED_OBJECTS=1 LD_PRELOAD='%s/libgpool_preload.so' /bin/true 2>&1",
             build_dir());
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s", r.out);
    cr_assert(strstr(r.out, "libgpool_preload.so"), "%s", r.out);
    cr_assert_null(strstr(r.out, "jemalloc"), "%s", r.out);
    cr_assert_null(strstr(r.out, "libstdc++"), "%s", r.out);
    cr_assert_null(strstr(r.out, "hwloc"), "%s", r.out);
    cr_assert_null(strstr(r.out, "udev"), "%s", r.out);
    /* libgpool.so: hwloc (it places host memory with it), no jemalloc, no libstdc++ */
    snprintf(cmd, sizeof cmd,
             "env LD_TRACE_LOADED_OBJECTS=1 LD_PRELOAD='%s/libgpool.so' /bin/true 2>&1",
             build_dir());
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s", r.out);
    cr_assert(strstr(r.out, "libgpool.so"), "%s", r.out);
    cr_assert_null(strstr(r.out, "jemalloc"), "%s", r.out);
    cr_assert_null(strstr(r.out, "libstdc++"), "%s", r.out);
}

/* gpool-bench startup runs both kinds of start and states its goal (the figure itself is the
 * benchmark's, in make bench). */
Test(fork, startup_benchmark_reports_plain_preloaded_and_the_goal)
{
    NOT_SANITIZED();
    static struct run r;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "'%s/gpool-bench' startup --runs 5 2>&1", build_dir());
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s", r.out);
    cr_assert(strstr(r.out, "plain") && strstr(r.out, "preloaded"), "%s", r.out);
    cr_assert(strstr(r.out, "(goal <= 1 ms CPU): "), "%s", r.out);
}

/* ---------------- GPOOL_TRACE ---------------- */

static void temp_path(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/gpool-trace-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file holds one header, then exactly rows rows, each a complete 7-column line, none
 * twice; gpool-bench replay accepts it. */
static void expect_trace(const char *path, int rows)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cr_assert(n > 0 && buf[n - 1] == '\n', "the trace ends in a torn line");
    static char *line[1 << 14];
    int lines = 0, headers = 0, torn = 0;
    for (char *s = buf, *e; *s && lines < (int)(sizeof line / sizeof line[0]); s = e + 1) {
        e = strchr(s, '\n');
        *e = 0;
        if (!strncmp(s, "Thread,", 7)) {
            headers++;
            continue;
        }
        int commas = 0;
        for (char *c = s; *c; c++)
            commas += *c == ',';
        torn += commas != 6 || !(strstr(s, ",allocate,") || strstr(s, ",free,"));
        line[lines++] = s;
    }
    cr_assert_eq(headers, 1, "%d header lines", headers);
    cr_assert_eq(torn, 0, "%d torn rows", torn);
    cr_assert_eq(lines, rows, "%d rows, expected %d", lines, rows);
    qsort(line, (size_t)lines, sizeof line[0], cmp_str);
    int dups = 0;
    for (int i = 1; i < lines; i++)
        dups += !strcmp(line[i], line[i - 1]);
    cr_assert_eq(dups, 0, "%d rows written twice", dups);
    static struct run r;
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "'%s/gpool-bench' replay '%s' 2>&1", build_dir(), path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay refuses %s:\n%s", path, r.out);
}

Test(fork, trace_of_two_devices_keeps_every_row)
{
    char path[64], env[160];
    temp_path(path, sizeof path);
    snprintf(env, sizeof env, "GPOOL_SIM_DEVICES=2 GPOOL_TRACE=%s", path);
    static struct run r;
    run_expect(&r, "fork_prog", "trace_devices 100", 1, env, 0);
    expect_trace(path, 400);
    unlink(path);
}

Test(fork, trace_of_forked_children_writes_no_row_twice)
{
    char path[64], env[160];
    temp_path(path, sizeof path);
    snprintf(env, sizeof env, "GPOOL_SIM_FORK=driver GPOOL_TRACE=%s", path);
    static struct run r;
    run_expect(&r, "fork_prog", "trace_fork 100", 1, env, 0);
    cr_assert_eq(field(&r, "not_initialized"), 3, "%s", r.out);
    expect_trace(path, 400);
    unlink(path);
}

/* Two processes at once, one path: both processes' rows, one header, no torn line. */
Test(fork, trace_of_two_processes_on_one_path_keeps_every_row)
{
    char path[64], cmd[9000];
    temp_path(path, sizeof path);
    const char *b = build_dir();
    char one[4400];
    snprintf(one, sizeof one,
             "env -u GPOOL_CONF ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" "
             "GPOOL_TRACE=%s LD_PRELOAD='%s/libgpool_preload.so' "
             "'%s/tests/preload/fork_prog' trace_rows 100",
             path, b, b);
    snprintf(cmd, sizeof cmd, "(%s & %s; wait) >/dev/null", one, one);
    cr_assert_eq(system(cmd), 0);
    expect_trace(path, 400);
    unlink(path);
}

/* "%p" in the path: one file per process, each replayable alone. */
Test(fork, trace_path_with_pid_gives_each_process_its_file)
{
    char dir[] = "/tmp/gpool-trace-dir-XXXXXX", env[160];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(env, sizeof env, "GPOOL_TRACE=%s/t-%%p.csv", dir);
    static struct run r1, r2;
    run_expect(&r1, "fork_prog", "trace_rows 50", 1, env, 0);
    run_expect(&r2, "fork_prog", "trace_rows 70", 1, env, 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s", dir);
    FILE *p = popen(cmd, "r");
    char names[2][128];
    int files = 0;
    while (files < 2 && fscanf(p, "%127s", names[files]) == 1)
        files++;
    pclose(p);
    cr_assert_eq(files, 2, "expected one file per process in %s", dir);
    char path[2][300];
    for (int i = 0; i < 2; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", dir, names[i]);
    FILE *f = fopen(path[0], "r");
    int lines = 0;
    for (int c; (c = fgetc(f)) != EOF;)
        lines += c == '\n';
    fclose(f);
    expect_trace(path[0], lines - 1);
    expect_trace(path[1], lines == 101 ? 140 : 100);
    for (int i = 0; i < 2; i++)
        unlink(path[i]);
    rmdir(dir);
}

/* The C API: a child's exit() writes none of the parent's rows again. */
Test(fork, c_api_trace_child_exit_writes_no_parent_row)
{
    char path[64], conf[128];
    temp_path(path, sizeof path);
    snprintf(conf, sizeof conf, "trace=%s", path);
    gpool_t *pool = test_pool(conf);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 30; i++) {
            void *p;
            cr_assert_eq(gpool_alloc(pool, 4096 + (size_t)i, NULL, &p), GPOOL_OK);
            cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
        }
        fflush(stdout); /* not fflush(NULL): a trace buffered in the process is what this tests */
        fflush(stderr);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            alarm(5);
            exit(0); /* flushes the child's stdio buffers */
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    expect_trace(path, 180);
    unlink(path);
}
