/* Fault-injection sweep: a fixed workload (create, mixed small/large blocks with patterns,
 * frees, zero-filled and stream-ordered blocks, host kinds, OOM at a 64 MiB device, trim,
 * stats, destroy) runs once clean to count the driver calls per entry point; then for every
 * (entry, n) up to that count — sampled evenly when the total is large — the nth call of that
 * entry is made to fail (gpoolsim_fail_nth) and the workload runs again in a forked child,
 * which checks:
 *   - the failing step returns GPOOL_OK (handled, e.g. retried) or the right status:
 *     GPOOL_ERR_OUT_OF_MEMORY where the driver said out of memory, GPOOL_ERR_DRIVER for other
 *     driver errors, and from gpool_create one of its documented statuses; with a message;
 *   - no step fails without an injected fault (except the workload's own OOM);
 *   - the pool keeps working right after: a new small and large block allocate, hold their
 *     contents and free, every live block still holds its pattern, stats match the model;
 *   - after destroy nothing leaks: simulator live objects 0, device bytes in use 0.
 * A crash of the child is reported with its signal. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"

#define CAPACITY     (64 * MiB)
#define MAX_BLOCKS   64
#define MAX_ENTRIES  128
#define RUN_CAP      1200 /* faulted runs per sweep test (about 25 ms each) */
#define RUN_CAP_SLOW 24   /* under valgrind */

static const struct sim_api *sim;

/* ---- driver calls the harness itself makes (before counting starts) ------------------- */

static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamDestroy)(CUstream);

static void setup(void)
{
    const char *real = getenv("GPOOL_TEST_REAL_GPU");
    if (real && real[0] == '1') return; /* each test skips itself, with the reason */
    sim = sim_api();
    cr_assert_not_null(sim, "tests need GPOOL_LIBCUDA pointing at the simulated driver");
    *(void **)&p_cuInit = sim_driver_proc("cuInit");
    *(void **)&p_cuDevicePrimaryCtxRetain = sim_driver_proc("cuDevicePrimaryCtxRetain");
    *(void **)&p_cuDevicePrimaryCtxRelease = sim_driver_proc("cuDevicePrimaryCtxRelease");
    *(void **)&p_cuCtxSetCurrent = sim_driver_proc("cuCtxSetCurrent");
    *(void **)&p_cuStreamCreate = sim_driver_proc("cuStreamCreate");
    *(void **)&p_cuStreamDestroy = sim_driver_proc("cuStreamDestroy");
    cr_assert(p_cuInit && p_cuDevicePrimaryCtxRetain && p_cuDevicePrimaryCtxRelease &&
              p_cuCtxSetCurrent && p_cuStreamCreate && p_cuStreamDestroy);
}

TestSuite(faults, .init = setup);

/* On a real GPU (scripts/gpu-check.sh sets GPOOL_TEST_REAL_GPU=1) there is no fault injection. */
#define SKIP_ON_REAL_GPU()                                                                         \
    do {                                                                                           \
        const char *real_ = getenv("GPOOL_TEST_REAL_GPU");                                         \
        if (real_ && real_[0] == '1')                                                              \
            cr_skip_test("needs the simulated driver's fault injection (GPOOL_TEST_REAL_GPU=1)");  \
    } while (0)

static int under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload") != NULL;
}

/* ---- one run, in a child process ------------------------------------------------------ */

typedef struct run {
    const char *entry;    /* armed entry point, NULL for the clean run */
    unsigned long target; /* its call count at which the fault fires */
    int fired;            /* the fault fired (in step `fired_in`) */
    const char *fired_in;
    unsigned long before; /* entry's call count at the start of the current step */
    int out_fd;           /* report pipe */
} run;

static run R;

typedef struct blk {
    void *p;
    size_t n;
    uint32_t seed;
} blk;

static blk live[MAX_BLOCKS];
static int nlive;
static uint32_t next_seed;

static void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void child_fail(const char *fmt, ...)
{
    char msg[1024];
    int k = snprintf(msg, sizeof msg, "FAIL ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg);
    if (write(R.out_fd, msg, len) != (ssize_t)len) _exit(3);
    _exit(1);
}

static void step_begin(void)
{
    if (R.entry) R.before = sim->call_count(R.entry);
}

/* Did the armed fault fire during the step that began at step_begin()? */
static int step_fired(const char *step)
{
    if (!R.entry || R.fired) return 0;
    unsigned long now = sim->call_count(R.entry);
    if (R.before < R.target && now >= R.target) {
        R.fired = 1;
        R.fired_in = step;
        return 1;
    }
    return 0;
}

static int injected_oom(void)
{
    return sim->injected_error(R.entry) == CUDA_ERROR_OUT_OF_MEMORY;
}

/* Check the status of a step. `oom_expected`: the workload itself may run out of memory. */
static void check_step(const char *step, gpool_status st, int fired, int oom_expected, int creating)
{
    if (st == GPOOL_OK) return;
    if (oom_expected && st == GPOOL_ERR_OUT_OF_MEMORY) return;
    if (!fired)
        child_fail("%s: status %s without an injected fault: %s", step, gpool_strerror(st),
                   gpool_last_error());
    const char *msg = gpool_last_error();
    if (!msg || !*msg) child_fail("%s: status %s with no message", step, gpool_strerror(st));
    int ok;
    if (injected_oom())
        ok = st == GPOOL_ERR_OUT_OF_MEMORY;
    else if (creating)
        ok = st == GPOOL_ERR_DRIVER || st == GPOOL_ERR_NO_DRIVER || st == GPOOL_ERR_NO_DEVICE;
    else
        ok = st == GPOOL_ERR_DRIVER;
    if (!ok)
        child_fail("%s: %s failure (%s) reached the caller as %s: %s", step, R.entry,
                   injected_oom() ? "out of memory" : "driver error", gpool_strerror(st), msg);
}

static void check_live_blocks(const char *when)
{
    for (int i = 0; i < nlive; i++)
        if (!check_pattern(live[i].p, live[i].n, live[i].seed))
            child_fail("%s: block %p (%zu bytes) lost its contents", when, live[i].p, live[i].n);
}

static void check_stats(gpool_t *pool, const char *when)
{
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_status st = gpool_get_stats(pool, &s);
    if (st != GPOOL_OK) child_fail("%s: gpool_get_stats: %s", when, gpool_last_error());
    if (s.kind[GPOOL_MEM_AUTO].live_blocks != (uint64_t)nlive)
        child_fail("%s: stats say %llu live blocks, the workload holds %d", when,
                   (unsigned long long)s.kind[GPOOL_MEM_AUTO].live_blocks, nlive);
}

static void track(void *p, size_t n)
{
    if (nlive == MAX_BLOCKS) child_fail("harness: too many blocks");
    live[nlive] = (blk){p, n, ++next_seed};
    fill_pattern(p, n, live[nlive].seed);
    nlive++;
}

static void untrack(int i)
{
    live[i] = live[--nlive];
}

/* After a step in which the fault fired: the pool must keep working. */
static void probe(gpool_t *pool, const char *step)
{
    check_live_blocks(step);
    check_stats(pool, step);
    static const size_t sizes[] = {300, 1 * MiB};
    for (int i = 0; i < 2; i++) {
        void *p = NULL;
        gpool_status st = gpool_alloc(pool, sizes[i], NULL, &p);
        if (st != GPOOL_OK)
            child_fail("after %s failed in %s: the next alloc of %zu bytes gave %s: %s", R.entry,
                       step, sizes[i], gpool_strerror(st), gpool_last_error());
        fill_pattern(p, sizes[i], 77);
        if (!check_pattern(p, sizes[i], 77)) child_fail("probe block lost its contents");
        st = gpool_free(pool, p);
        if (st != GPOOL_OK)
            child_fail("after %s failed in %s: free gave %s: %s", R.entry, step, gpool_strerror(st),
                       gpool_last_error());
    }
}

/* The end of a step: check its status; probe the pool if the fault fired in it. */
static gpool_status step_end(gpool_t *pool, const char *name, int oom_expected, gpool_status st)
{
    int fired = step_fired(name);
    check_step(name, st, fired, oom_expected, 0);
    if (fired) probe(pool, name);
    return st;
}

/* Run one step: `call` is an expression giving a gpool_status, evaluated after step_begin. */
#define STEP(name, oom_expected, call) (step_begin(), step_end(pool, name, oom_expected, (call)))

static gpool_status alloc_step(gpool_t *pool, const char *name, size_t n,
                               const gpool_alloc_params *prm, int oom_expected)
{
    void *p = NULL;
    step_begin();
    gpool_status st = gpool_alloc(pool, n, prm, &p);
    int fired = step_fired(name);
    check_step(name, st, fired, oom_expected, 0);
    if (st == GPOOL_OK) {
        if (!p) child_fail("%s: OK but NULL", name);
        if (prm && (prm->flags & GPOOL_ALLOC_ZERO)) {
            const unsigned char *b = p;
            for (size_t i = 0; i < n; i += 4093)
                if (b[i]) child_fail("%s: zero-filled block has byte %zu = %u", name, i, b[i]);
        }
        track(p, n);
    } else if (p) {
        child_fail("%s: failed but *out is not NULL", name);
    }
    if (fired) probe(pool, name);
    return st;
}

static void free_step(gpool_t *pool, const char *name, int i)
{
    if (i >= nlive) return;
    if (!check_pattern(live[i].p, live[i].n, live[i].seed))
        child_fail("%s: block lost its contents before free", name);
    step_begin();
    gpool_status st = gpool_free(pool, live[i].p);
    int fired = step_fired(name);
    check_step(name, st, fired, 0, 0);
    if (st == GPOOL_OK) untrack(i);
    if (fired) probe(pool, name);
}

/* Unique step names, so a failure report says where. */
static char names[64][48];
static const char *nm(int k, const char *fmt, int i)
{
    snprintf(names[k], sizeof names[k], fmt, i);
    return names[k];
}

static void workload(CUstream stream)
{
    nlive = 0;
    next_seed = 0;
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    gpool_t *pool = NULL;

    /* create: a failure must be one of gpool_create's statuses, leave nothing behind, and a
     * second create must work */
    step_begin();
    gpool_status st = gpool_create(&cfg, &pool);
    int fired = step_fired("gpool_create");
    check_step("gpool_create", st, fired, 0, 1);
    if (st != GPOOL_OK) {
        if (pool) child_fail("gpool_create failed but *out is not NULL");
        if (sim_live_total() != 1 || sim->bytes_in_use(0) != 0) /* 1: the harness's stream */
            child_fail("failed gpool_create left %zu driver objects, %zu bytes",
                       sim_live_total() - 1, sim->bytes_in_use(0));
        st = gpool_create(&cfg, &pool);
        if (st != GPOOL_OK) child_fail("gpool_create after a failed one: %s", gpool_last_error());
    } else if (fired) {
        probe(pool, "gpool_create");
    }

    static const size_t sizes[] = {100, 3000,     16 << 10, (64 << 10) + 1, 1 << 20, 5 << 20,
                                   200, 12 << 20, 8 << 10,  2 << 20,        700,     33 << 10};
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
        alloc_step(pool, nm(i, "alloc #%d", i), sizes[i], NULL, 0);
    for (int i = 0; i < nlive; i += 2)
        free_step(pool, nm(20 + i, "free #%d", i), i);

    gpool_alloc_params zero = {.flags = GPOOL_ALLOC_ZERO};
    alloc_step(pool, "alloc zeroed 1 MiB", 1 << 20, &zero, 0);
    alloc_step(pool, "alloc zeroed 500 B", 500, &zero, 0);
    gpool_alloc_params aligned = {.alignment = 64 << 10};
    alloc_step(pool, "alloc 64K-aligned", 100 << 10, &aligned, 0);

    /* stream-ordered blocks: tracked while ours, so a probe sees a consistent model */
    void *sp = NULL;
    step_begin();
    st = gpool_alloc_async(pool, 4 << 20, NULL, stream, &sp);
    fired = step_fired("alloc_async 4 MiB");
    check_step("alloc_async 4 MiB", st, fired, 0, 0);
    if (st == GPOOL_OK) track(sp, 4 << 20);
    if (fired) probe(pool, "alloc_async 4 MiB");
    if (st == GPOOL_OK) {
        STEP("record_stream", 0, gpool_record_stream(pool, sp, NULL));
        step_begin();
        st = gpool_free_async(pool, sp, stream);
        fired = step_fired("free_async 4 MiB");
        check_step("free_async 4 MiB", st, fired, 0, 0);
        if (st == GPOOL_OK) untrack(nlive - 1);
        if (fired) probe(pool, "free_async 4 MiB");
    }
    step_begin();
    st = gpool_alloc_async(pool, 1024, NULL, stream, &sp);
    fired = step_fired("alloc_async 1 KiB");
    check_step("alloc_async 1 KiB", st, fired, 0, 0);
    if (st == GPOOL_OK) track(sp, 1024);
    if (fired) probe(pool, "alloc_async 1 KiB");
    if (st == GPOOL_OK) {
        STEP("record_stream small", 0, gpool_record_stream(pool, sp, stream));
        free_step(pool, "free 1 KiB on the default stream", nlive - 1);
    }

    /* host kinds: UNSUPPORTED is accepted while they are being built */
    static const gpool_mem_kind hk[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    for (int i = 0; i < 2; i++) {
        gpool_alloc_params hp = {.kind = hk[i]};
        void *h = NULL;
        step_begin();
        st = gpool_alloc(pool, i ? 3 << 20 : 64 << 10, &hp, &h);
        fired = step_fired("host alloc");
        if (st != GPOOL_ERR_UNSUPPORTED) {
            check_step(nm(40 + i, "host alloc kind %d", (int)hk[i]), st, fired, 0, 0);
            if (st == GPOOL_OK) track(h, i ? 3 << 20 : 64 << 10);
        } else if (h) {
            child_fail("host alloc: UNSUPPORTED but *out is not NULL");
        }
        if (fired) probe(pool, "host alloc");
    }

    /* run out of memory at the 64 MiB capacity, then free it all */
    int first = nlive;
    for (int i = 0; i < 16 && nlive < MAX_BLOCKS; i++)
        if (alloc_step(pool, nm(44, "OOM loop alloc #%d", i), 6 << 20, NULL, 1) != GPOOL_OK) break;
    while (nlive > first)
        free_step(pool, "free after OOM", nlive - 1);
    alloc_step(pool, "alloc 24 MiB after OOM", 24 << 20, NULL, 0);

    STEP("trim(0)", 0, gpool_trim(pool, 0));
    gpool_stats s = GPOOL_STATS_INIT;
    STEP("get_stats", 0, gpool_get_stats(pool, &s));
    size_t fr = 0, tot = 0;
    STEP("mem_get_info", 0, gpool_mem_get_info(pool, &fr, &tot));
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        STEP("dump_json", 0, gpool_dump_json(pool, devnull));
        fclose(devnull);
    }
    check_live_blocks("end of workload");
    check_stats(pool, "end of workload");
    while (nlive)
        free_step(pool, "final free", nlive - 1);
    STEP("trim(1M)", 0, gpool_trim(pool, 1 << 20));

    step_begin();
    st = gpool_destroy(pool);
    fired = step_fired("gpool_destroy");
    if (st != GPOOL_OK && !(fired && st == GPOOL_ERR_DRIVER))
        child_fail("gpool_destroy gave %s: %s", gpool_strerror(st), gpool_last_error());
}

/* Child body: set up the stream (not counted), arm, run, check leaks, report counts. */
static void child(const char *entry, unsigned long nth, size_t nnames, const char *const *ent)
{
    sim->set_capacity(0, CAPACITY);
    CUcontext ctx;
    CUstream stream;
    if (p_cuInit(0) || p_cuDevicePrimaryCtxRetain(&ctx, 0) || p_cuCtxSetCurrent(ctx) ||
        p_cuStreamCreate(&stream, 0))
        child_fail("harness driver setup failed");
    sim->reset_counts();
    R.entry = entry;
    R.fired = 0;
    if (entry) {
        if (sim->fail_nth(entry, nth) != 0) child_fail("gpoolsim_fail_nth(%s) refused", entry);
        R.target = nth;
    }
    workload(stream);
    /* counts of the clean run, before the harness's own teardown calls */
    char counts[8192];
    size_t len = 0;
    for (size_t i = 0; i < nnames && len < sizeof counts - 80; i++)
        len += (size_t)snprintf(counts + len, sizeof counts - len, "%s %lu\n", ent[i],
                                sim->call_count(ent[i]));
    sim->fail_clear();
    /* A failed release inside gpool_destroy cannot be reported or retried by the caller: a
     * leak is tolerated there (and counted); anywhere else it is a failure. */
    int teardown = R.fired && strcmp(R.fired_in, "gpool_destroy") == 0;
    if (teardown && (sim_live_total() != 1 || sim->bytes_in_use(0) != 0)) {
        char note[160];
        int k2 = snprintf(note, sizeof note, "OK fired gpool_destroy leak %zu objects\n",
                          sim_live_total() - 1);
        if (write(R.out_fd, note, (size_t)k2) != k2) _exit(3);
        _exit(0);
    }
    if (sim_live_total() != 1 || sim->bytes_in_use(0) != 0) /* 1: the harness's stream */
        child_fail("after destroy (fault %s in %s): %zu driver objects and %zu device bytes "
                   "leaked",
                   R.fired ? "fired" : "did not fire", R.fired ? R.fired_in : "-",
                   sim_live_total() - 1, sim->bytes_in_use(0));
    p_cuStreamDestroy(stream);
    p_cuCtxSetCurrent(NULL);
    p_cuDevicePrimaryCtxRelease(0);
    char head[128];
    int k = snprintf(head, sizeof head, "OK %s %s\n", R.fired ? "fired" : "quiet",
                     R.fired ? R.fired_in : "-");
    if (write(R.out_fd, head, (size_t)k) != k) _exit(3);
    if (!entry && write(R.out_fd, counts, len) != (ssize_t)len) _exit(3);
    _exit(0);
}

/* Fork, run, collect the child's report into buf. Returns 0 for OK. */
static int run_forked(const char *entry, unsigned long nth, char *buf, size_t cap)
{
    size_t nnames = 0;
    const char *const *ent = sim->entry_names(&nnames);
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        close(fd[0]);
        R.out_fd = fd[1];
        child(entry, nth, nnames, ent);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    while (len < cap - 1 && (got = read(fd[0], buf + len, cap - 1 - len)) > 0)
        len += (size_t)got;
    buf[len] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        snprintf(buf, cap, "CRASH signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return -1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && strncmp(buf, "OK", 2) == 0 ? 0 : -1;
}

/* ---- the tests -------------------------------------------------------------------------- */

typedef struct entry_count {
    char name[64];
    unsigned long calls;
} entry_count;

static size_t clean_counts(entry_count *out, size_t cap)
{
    static char buf[16384];
    int rc = run_forked(NULL, 0, buf, sizeof buf);
    cr_assert_eq(rc, 0, "the clean workload failed: %s", buf);
    size_t n = 0;
    char *save = NULL;
    strtok_r(buf, "\n", &save); /* "OK quiet -" */
    for (char *line; (line = strtok_r(NULL, "\n", &save)) && n < cap;) {
        unsigned long c;
        char name[64];
        if (sscanf(line, "%63s %lu", name, &c) == 2 && c > 0) {
            snprintf(out[n].name, sizeof out[n].name, "%s", name);
            out[n++].calls = c;
        }
    }
    return n;
}

Test(faults, clean_workload_passes_and_leaks_nothing)
{
    SKIP_ON_REAL_GPU();
    entry_count e[MAX_ENTRIES];
    size_t n = clean_counts(e, MAX_ENTRIES);
    unsigned long total = 0;
    for (size_t i = 0; i < n; i++)
        total += e[i].calls;
    cr_assert_gt(n, 10, "the workload reaches only %zu entry points", n);
    fprintf(stderr, "faults: clean workload: %lu driver calls over %zu entry points\n", total, n);
}

/* Sweep half of the entry points (part 0 or 1, so Criterion runs the halves in parallel). */
static void sweep(int part)
{
    SKIP_ON_REAL_GPU();
    entry_count e[MAX_ENTRIES];
    size_t n = clean_counts(e, MAX_ENTRIES);
    size_t mine[MAX_ENTRIES], nm_ = 0;
    unsigned long total = 0;
    for (size_t i = 0; i < n; i++)
        if ((int)(i % 2) == part) {
            mine[nm_++] = i;
            total += e[i].calls;
        }
    unsigned long cap = under_valgrind() ? RUN_CAP_SLOW : RUN_CAP;
    const char *env = getenv("GPOOL_FAULTS_RUNS");
    if (env && atol(env) > 0) cap = (unsigned long)atol(env);
    /* Every entry gets at least min(calls, floor) runs; the rest is spread by call count. */
    unsigned long floor_ = cap / (nm_ ? nm_ : 1) / 2;
    if (floor_ < 2) floor_ = 2;
    unsigned long runs = 0, sites = 0, fired = 0, failures = 0, teardown_leaks = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < nm_; k++) {
        entry_count *ec = &e[mine[k]];
        unsigned long q =
            total <= cap ? ec->calls
                         : floor_ + (unsigned long)((double)(cap / 2) * ec->calls / (double)total);
        if (q > ec->calls) q = ec->calls;
        if (q < 1) q = 1;
        unsigned long prev = 0;
        for (unsigned long j = 0; j < q; j++) {
            unsigned long nth = q == 1 ? 1 : 1 + j * (ec->calls - 1) / (q - 1);
            if (nth == prev) continue;
            prev = nth;
            char buf[2048];
            int rc = run_forked(ec->name, nth, buf, sizeof buf);
            runs++;
            if (strstr(buf, "OK fired")) fired++;
            if (strstr(buf, "gpool_destroy leak")) teardown_leaks++;
            if (rc != 0) {
                failures++;
                cr_log_error("fault %s call %lu/%lu: %s", ec->name, nth, ec->calls, buf);
                fprintf(stderr, "faults: %s call %lu/%lu: %s\n", ec->name, nth, ec->calls, buf);
            }
        }
        sites += q;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr,
            "faults (part %d/2): %zu entry points, %lu of %lu call sites failed in turn (%lu runs, "
            "%lu fired, %lu failures; %lu tolerated leaks from failures inside gpool_destroy) in "
            "%.1f s\n",
            part + 1, nm_, sites, total, runs, fired, failures, teardown_leaks, secs);
    cr_expect_eq(failures, 0, "%lu of %lu faulted runs failed (see the log)", failures, runs);
}

Test(faults, sweep_part1)
{
    sweep(0);
}
Test(faults, sweep_part2)
{
    sweep(1);
}
