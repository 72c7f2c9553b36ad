/* Double and repeated faults (issue 13). A model run (tests/util_modelrun.c: random
 * operations on one or two pools, checked against the executable model) is replayed in a
 * forked child with faults injected:
 *   - pairs inside one operation: a clean run counts, per entry point, the driver calls each
 *     operation makes (its call sites); then for an operation, every pair of its call sites
 *     i < j fails together (gpoolsim_fail_nth on both);
 *   - pairs across operations: one site of operation a and one of a later operation b,
 *     sampled;
 *   - k faults: for a window of operations, random call sites of random entry points fail.
 * While faults are armed every status must be OK, OUT_OF_MEMORY or DRIVER with a message, and
 * nothing may crash. After the faults stop: the stats invariants hold (driver_calls equal the
 * simulator's counts), every live block keeps its content, every later allocation the model
 * says must succeed does and is writable, and gpool_destroy leaves nothing in the simulator.
 *
 * GPOOL_FAULT_PAIRS_RUNS (default 300) bounds the faulted runs of each test; pairs are
 * sampled evenly when there are more. GPOOL_FAULT_PAIRS_ALL=1 (CI) runs every pair inside
 * the operations swept, however many. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpool.h"
#include "util_modelrun.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define OPS_BEFORE 12 /* clean operations before the faulted ones */
#define OPS_AFTER  12 /* clean operations after the faults stop */
#define MAX_SITES  256

static const struct sim_api *sim;
static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);

static void setup(void)
{
    if (test_real_gpu()) return;
    sim = sim_api();
    cr_assert_not_null(sim, "needs GPOOL_LIBCUDA pointing at the simulated driver");
    *(void **)&p_cuInit = sim_driver_proc("cuInit");
    *(void **)&p_cuDevicePrimaryCtxRetain = sim_driver_proc("cuDevicePrimaryCtxRetain");
    *(void **)&p_cuCtxSetCurrent = sim_driver_proc("cuCtxSetCurrent");
    *(void **)&p_cuStreamCreate = sim_driver_proc("cuStreamCreate");
    cr_assert(p_cuInit && p_cuDevicePrimaryCtxRetain && p_cuCtxSetCurrent && p_cuStreamCreate);
}

TestSuite(fault_pairs, .init = setup);

typedef struct site {
    unsigned op;       /* operation index (from 1) */
    const char *entry; /* entry point */
    unsigned long nth; /* its nth call within the operation */
} site;

typedef struct plan {
    uint32_t seed;
    int npools;
    size_t nfault;
    site fault[8];   /* armed just before their operation */
    unsigned k_from; /* k-fault mode: random faults in ops [k_from, k_to) (0: off) */
    unsigned k_to;
    uint32_t k_seed;
} plan;

/* The child: run the plan; report "OK" or "FAIL why" on fd; when `counts` is set, print the
 * per-operation call counts of the clean run ("op entry n" lines). */
static void child(const plan *pl, int fd, int counts)
{
    CUcontext ctx;
    gpool_stream_t streams[MODELRUN_STREAMS] = {NULL};
    if (p_cuInit(0) || p_cuDevicePrimaryCtxRetain(&ctx, 0) || p_cuCtxSetCurrent(ctx)) _exit(3);
    for (int i = 1; i < MODELRUN_STREAMS; i++)
        if (p_cuStreamCreate((CUstream *)&streams[i], CU_STREAM_NON_BLOCKING)) _exit(3);
    size_t nnames = 0;
    const char *const *names = sim->entry_names(&nnames);
    static model_run run;
    static char out[1 << 16];
    size_t len = 0;
    uint32_t rng = pl->seed * 2654435761u + 1, krng = pl->k_seed | 1;
    int ok = model_run_start(&run, &rng, 96 * MiB, pl->npools, streams);
    unsigned last_fault = 0;
    for (size_t i = 0; i < pl->nfault; i++)
        if (pl->fault[i].op > last_fault) last_fault = pl->fault[i].op;
    if (pl->k_to > last_fault) last_fault = pl->k_to - 1;
    unsigned total =
        OPS_BEFORE + (last_fault > OPS_BEFORE ? last_fault - OPS_BEFORE : 0) + OPS_AFTER;
    static unsigned long before[128];
    for (unsigned op = 1; ok && op <= total; op++) {
        int armed = 0;
        for (size_t i = 0; i < pl->nfault; i++)
            if (pl->fault[i].op == op) {
                sim->fail_nth(pl->fault[i].entry, pl->fault[i].nth);
                armed = 1;
            }
        if (pl->k_from && op >= pl->k_from && op < pl->k_to) {
            for (int k = 0; k < 3; k++)
                sim->fail_nth(names[rnd(&krng) % nnames], 1 + rnd(&krng) % 6);
            armed = 1;
        }
        run.faults = armed;
        if (counts)
            for (size_t e = 0; e < nnames && e < 128; e++)
                before[e] = sim->call_count(names[e]);
        ok = model_run_op(&run, &rng);
        if (counts)
            for (size_t e = 0; e < nnames && e < 128 && len < sizeof out - 100; e++) {
                unsigned long d = sim->call_count(names[e]) - before[e];
                if (d)
                    len += (size_t)snprintf(out + len, sizeof out - len, "%u %s %lu\n", op,
                                            names[e], d);
            }
        if (armed) {
            sim->fail_clear(); /* the faults stop: from here the model's promises hold */
            run.faults = 0;
            model_baseline(&run.m);
            if (ok) ok = model_run_check(&run);
            if (ok) ok = model_check_content(&run.m, run.why, sizeof run.why);
        }
    }
    int fin = model_run_finish(&run);
    char head[1200];
    int k = ok && fin ? snprintf(head, sizeof head, "OK\n")
                      : snprintf(head, sizeof head, "FAIL %.1100s\n", run.why);
    if (write(fd, head, (size_t)k) != k) _exit(3);
    if (counts && write(fd, out, len) != (ssize_t)len) _exit(3);
    _exit(ok && fin ? 0 : 1);
}

static int run_forked(const plan *pl, int counts, char *buf, size_t cap)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        child(pl, fd[1], counts);
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

/* The call sites of every operation of a clean run of seed (op > OPS_BEFORE). */
static size_t clean_sites(const plan *clean, site *out, size_t cap)
{
    static char buf[1 << 16];
    cr_assert_eq(run_forked(clean, 1, buf, sizeof buf), 0, "clean run: %s", buf);
    size_t nnames = 0;
    const char *const *names = sim->entry_names(&nnames);
    size_t n = 0;
    char *save = NULL;
    strtok_r(buf, "\n", &save);
    for (char *line; (line = strtok_r(NULL, "\n", &save));) {
        unsigned op;
        char name[64];
        unsigned long calls;
        if (sscanf(line, "%u %63s %lu", &op, name, &calls) != 3 || op <= OPS_BEFORE) continue;
        const char *e = NULL;
        for (size_t i = 0; i < nnames; i++)
            if (strcmp(names[i], name) == 0) e = names[i];
        for (unsigned long k = 1; e && k <= calls && n < cap; k++)
            out[n++] = (site){op, e, k};
    }
    return n;
}

static unsigned long runs_cap(void)
{
    const char *v = getenv("GPOOL_FAULT_PAIRS_RUNS");
    const char *pre = getenv("LD_PRELOAD"); /* valgrind: 30-50x slower, a token sweep */
    int slow = pre && strstr(pre, "vgpreload") != NULL;
    return v && atol(v) > 0 ? (unsigned long)atol(v) : slow ? 24 : 300;
}

static unsigned long failures;

static void try_plan(const plan *pl, const char *what)
{
    char buf[4096];
    if (run_forked(pl, 0, buf, sizeof buf) == 0) return;
    failures++;
    char sites[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < pl->nfault && len < sizeof sites - 64; i++)
        len += (size_t)snprintf(sites + len, sizeof sites - len, "%s%s#%lu@op%u", i ? " + " : "",
                                pl->fault[i].entry, pl->fault[i].nth, pl->fault[i].op);
    fprintf(stderr, "fault_pairs: seed %u %s [%s] k=[%u,%u): %s\n", pl->seed, what, sites,
            pl->k_from, pl->k_to, buf);
}

/* Seeds whose operations after OPS_BEFORE make the most driver calls are the interesting
 * ones; these were picked by looking at clean runs and are fixed so results repeat. */
static const uint32_t seeds[] = {3, 7, 11, 20};

Test(fault_pairs, every_pair_inside_one_operation, .timeout = 900)
{
    NEED_SIM();
    unsigned long cap = runs_cap(), runs = 0, pairs_total = 0;
    failures = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        plan clean = {.seed = seeds[s], .npools = 1 + (int)(s % 2)};
        static site st[MAX_SITES];
        size_t n = clean_sites(&clean, st, MAX_SITES);
        /* operations with at least two call sites, within the first few after OPS_BEFORE */
        for (unsigned op = OPS_BEFORE + 1; op <= OPS_BEFORE + 6; op++) {
            size_t a = 0, b;
            while (a < n && st[a].op != op)
                a++;
            for (b = a; b < n && st[b].op == op; b++)
                ;
            size_t m = b - a, pairs = m * (m - 1) / 2;
            if (m < 2) continue;
            pairs_total += pairs;
            const char *all = getenv("GPOOL_FAULT_PAIRS_ALL"); /* 1: every pair (CI) */
            unsigned long budget = all && *all == '1' ? (unsigned long)pairs
                                                      : cap / (sizeof seeds / sizeof seeds[0]) / 6;
            unsigned long every = pairs > budget ? (pairs + budget - 1) / budget : 1, idx = 0;
            for (size_t i = a; i < b; i++)
                for (size_t j = i + 1; j < b; j++, idx++) {
                    if (idx % every) continue;
                    plan pl = clean;
                    pl.nfault = 2;
                    pl.fault[0] = st[i];
                    pl.fault[1] = st[j];
                    try_plan(&pl, "pair in one op");
                    runs++;
                }
        }
    }
    fprintf(stderr, "fault_pairs: %lu in-operation pairs of %lu run, %lu failures\n", runs,
            pairs_total, failures);
    cr_expect_eq(failures, 0, "%lu of %lu faulted runs failed (see the log)", failures, runs);
}

Test(fault_pairs, sampled_pairs_across_operations_and_k_faults, .timeout = 900)
{
    NEED_SIM();
    unsigned long cap = runs_cap(), runs = 0, kruns = 0;
    failures = 0;
    uint32_t r = 12345;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        plan clean = {.seed = seeds[s], .npools = 1 + (int)(s % 2)};
        static site st[MAX_SITES];
        size_t n = clean_sites(&clean, st, MAX_SITES);
        if (n < 2) continue;
        unsigned long each = cap / 2 / (sizeof seeds / sizeof seeds[0]);
        for (unsigned long t = 0; t < each; t++) {
            site x = st[rnd(&r) % n], y = st[rnd(&r) % n];
            if (x.op == y.op) continue;
            plan pl = clean;
            pl.nfault = 2;
            pl.fault[0] = x;
            pl.fault[1] = y;
            try_plan(&pl, "pair across ops");
            runs++;
        }
        for (unsigned long t = 0; t < each; t++) {
            plan pl = clean;
            pl.k_from = OPS_BEFORE + 1 + rnd(&r) % 8;
            pl.k_to = pl.k_from + 1 + rnd(&r) % 6;
            pl.k_seed = rnd(&r);
            try_plan(&pl, "k faults");
            kruns++;
        }
    }
    fprintf(stderr,
            "fault_pairs: %lu sampled cross-operation pairs, %lu k-fault runs, %lu "
            "failures\n",
            runs, kruns, failures);
    cr_expect_eq(failures, 0, "%lu of %lu faulted runs failed (see the log)", failures,
                 runs + kruns);
}
