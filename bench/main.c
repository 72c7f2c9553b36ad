/* gpool-bench — compare allocation strategies on traces and synthetic workloads.
 * See bench/README.md for the commands and output formats. */
#include "bench.h"
#include "cli_help.h"
#include "size_parse.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRATEGIES 16

typedef struct cli {
    const char *command;
    const char *args[256];
    int n_args;
    const char *strategies[MAX_STRATEGIES];
    int n_strategies;
    uint64_t capacity;
    int json;
    int stop_at_failure;
    int require_goal;
    long require_pages; /* compare: exit 3 when gpool is more pages above the limit (-1: off) */
    unsigned scale;     /* every request size times this (1: as recorded) */
    unsigned passes;
    const char *csv, *plot, *device, *save_trace, *snapshot, *png;
    bench_workload_opts wl;
    uint64_t pairs;
    unsigned rounds;
    unsigned streams;          /* 1 (as recorded), 2, 4 or BENCH_STREAMS_SIDE */
    unsigned lag;              /* lagged completion in operations (0: at once) */
    uint64_t max_blocks;       /* scale: largest heap, in live large blocks */
    int dropin;                /* hotpath --dropin */
    int pairs_set, rounds_set; /* given on the command line */
    int help, version;         /* --help, --version */
    const char *given[64];     /* the options given, by long name (checked against the command) */
    int n_given;
} cli;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: gpool-bench COMMAND [options]\n"
           "  replay TRACE [--strategy S]... [--capacity SIZE] [--json] [--csv FILE] "
           "[--plot FILE.png]\n"
           "         [--stop-at-failure] (stop at the first failed allocation, as fit does)\n"
           "         [--passes N] (replay N times in one instance; a 'drv last pass' column "
           "counts the last)\n"
           "         [--snapshot FILE.json] (gpool_dump_json of the first gpool strategy at the "
           "peak;\n"
           "          with --stop-at-failure, at the failed allocation instead)\n"
           "  fit TRACE --strategy S [--json] (exactly one S)\n"
           "  compare TRACE... [--strategy S]... [--json]\n"
           "         [--require-goal] (exit status 3 when a strategy misses the fit goal on a "
           "trace)\n"
           "         [--require-pages N] (exit status 3 when gpool is more than N pages above the "
           "physical limit on a trace)\n"
           "  hotpath [--pairs N] [--rounds N] [--json]\n"
           "         [--dropin] (the pair through libgpool_preload.so, cudaMalloc and cuMemAlloc,\n"
           "          at 10..100,000 live blocks of 512 B, 4 KiB, 1 MiB, next to gpool's own;\n"
           "          defaults --pairs 50000 --rounds 20)\n"
           "  scale [--max-blocks N] [--json] (cost per operation at 10^2..N live blocks in a "
           "fragmented heap,\n"
           "         against jemalloc in the same run; default N 10^5 large, 10x that small)\n"
           "  info [--json]\n"
           "  view SNAPSHOT.json [--png FILE.png] (memory map of a gpool_dump_json snapshot)\n"
           "  import SNAPSHOT.pickle -o TRACE.csv [--device N] (a PyTorch memory snapshot "
           "to replay CSV)\n"
           "  startup [--runs N] [--program PATH] [--require-goal] [--json] (the cost of "
           "LD_PRELOAD at\n"
           "         process start)\n"
           "TRACE is an RMM replay log (CSV) or a workload: random, train, frame\n"
           "  random: --seed N --ops N --dist uniform|normal|geometric --min SIZE --max SIZE "
           "--max-live SIZE\n"
           "  train: --seed N --steps N --layers N      frame: --seed N --frames N\n"
           "  --save-trace FILE writes the (generated) trace as CSV\n"
           "  --streams 1|2|4|side  replay a multi-stream variant of each trace (bursts on 2 or 4 "
           "streams,\n"
           "         or inputs on a side stream freed on the main one); --lag N: work on each "
           "stream\n"
           "         completes only every N operations (simulated held completion)\n"
           "common: --device auto|sim|N (default auto: a real GPU if present, else the "
           "simulated driver)\n"
           "sizes (and counts): " GP_SIZE_SYNTAX "\n"
           "--version; 'gpool-bench COMMAND --help' shows a command's options\n");
}

/* Sizes and counts alike go through gpool's one size parser (src/api/size_parse.h): a count may
 * say 1M too. */
static int parse_count(const char *opt, const char *s, uint64_t *out)
{
    const char *why;
    if (gp_size_parse(s, strlen(s), out, &why) != 0) {
        fprintf(stderr, "gpool-bench: %s: bad value \"%s\": %s\n", opt, s, why);
        return -1;
    }
    return 0;
}

/* A count within [lo, hi] (unit: what it counts, or ""), else a message naming the range. */
static int parse_in(const char *opt, const char *s, uint64_t lo, uint64_t hi, const char *unit,
                    uint64_t *out)
{
    if (parse_count(opt, s, out)) return -1;
    if (*out >= lo && *out <= hi) return 0;
    fprintf(stderr, "gpool-bench: %s: %llu to %llu%s%s\n", opt, (unsigned long long)lo,
            (unsigned long long)hi, *unit ? " " : "", unit);
    return -1;
}

/* Generated workloads stay below about 10 million operations (a few hundred MiB of trace). */
#define WL_MAX_OPS    10000000ull
#define WL_MAX_STEPS  1000000ull
#define WL_MAX_LAYERS 10000ull
#define WL_MAX_FRAMES 100000ull

static int parse_cli(int argc, char **argv, cli *c)
{
    memset(c, 0, sizeof *c);
    bench_workload_defaults(&c->wl);
    c->device = "auto";
    c->pairs = 1000000;
    c->rounds = 5;
    c->passes = 1;
    c->streams = 1;
    c->require_pages = -1;
    c->scale = 1;
    enum {
        O_CAP = 256,
        O_CSV,
        O_PLOT,
        O_DEVICE,
        O_SEED,
        O_OPS,
        O_DIST,
        O_MIN,
        O_MAX,
        O_MAXLIVE,
        O_STEPS,
        O_LAYERS,
        O_FRAMES,
        O_PAIRS,
        O_ROUNDS,
        O_SAVE,
        O_STOP,
        O_PASSES,
        O_SNAPSHOT,
        O_PNG,
        O_REQUIRE_GOAL,
        O_REQ_PAGES,
        O_SCALE,
        O_STREAMS,
        O_LAG,
        O_MAX_BLOCKS,
        O_DROPIN,
        O_VERSION
    };
    static const struct option opts[] = {{"strategy", required_argument, NULL, 's'},
                                         {"capacity", required_argument, NULL, O_CAP},
                                         {"json", no_argument, NULL, 'j'},
                                         {"csv", required_argument, NULL, O_CSV},
                                         {"plot", required_argument, NULL, O_PLOT},
                                         {"device", required_argument, NULL, O_DEVICE},
                                         {"seed", required_argument, NULL, O_SEED},
                                         {"ops", required_argument, NULL, O_OPS},
                                         {"dist", required_argument, NULL, O_DIST},
                                         {"min", required_argument, NULL, O_MIN},
                                         {"max", required_argument, NULL, O_MAX},
                                         {"max-live", required_argument, NULL, O_MAXLIVE},
                                         {"steps", required_argument, NULL, O_STEPS},
                                         {"layers", required_argument, NULL, O_LAYERS},
                                         {"frames", required_argument, NULL, O_FRAMES},
                                         {"pairs", required_argument, NULL, O_PAIRS},
                                         {"rounds", required_argument, NULL, O_ROUNDS},
                                         {"save-trace", required_argument, NULL, O_SAVE},
                                         {"stop-at-failure", no_argument, NULL, O_STOP},
                                         {"passes", required_argument, NULL, O_PASSES},
                                         {"snapshot", required_argument, NULL, O_SNAPSHOT},
                                         {"png", required_argument, NULL, O_PNG},
                                         {"require-goal", no_argument, NULL, O_REQUIRE_GOAL},
                                         {"require-pages", required_argument, NULL, O_REQ_PAGES},
                                         {"scale", required_argument, NULL, O_SCALE},
                                         {"streams", required_argument, NULL, O_STREAMS},
                                         {"lag", required_argument, NULL, O_LAG},
                                         {"max-blocks", required_argument, NULL, O_MAX_BLOCKS},
                                         {"dropin", no_argument, NULL, O_DROPIN},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, O_VERSION},
                                         {NULL, 0, NULL, 0}};
    int ch, at;
    uint64_t v;
    opterr = 0;
    while ((at = -1, ch = getopt_long(argc, argv, "s:jh", opts, &at)) != -1) {
        const char *name = at >= 0     ? opts[at].name
                           : ch == 's' ? "strategy"
                           : ch == 'j' ? "json"
                           : ch == 'h' ? "help"
                                       : NULL;
        if (name && c->n_given < (int)(sizeof c->given / sizeof c->given[0]))
            c->given[c->n_given++] = name;
        switch (ch) {
        case 's':
            if (c->n_strategies == MAX_STRATEGIES) {
                fprintf(stderr, "gpool-bench: at most %d strategies\n", MAX_STRATEGIES);
                return -1;
            }
            c->strategies[c->n_strategies++] = optarg;
            break;
        case 'j':
            c->json = 1;
            break;
        case 'h':
            c->help = 1;
            break;
        case O_VERSION:
            c->version = 1;
            break;
        case O_CAP:
            if (parse_count("--capacity", optarg, &c->capacity)) return -1;
            if (c->capacity < 4096) { /* not even one page: nothing could be allocated */
                fprintf(stderr, "gpool-bench: --capacity: at least one page (4K), not \"%s\"\n",
                        optarg);
                return -1;
            }
            break;
        case O_CSV:
            c->csv = optarg;
            break;
        case O_PLOT:
            c->plot = optarg;
            break;
        case O_DEVICE:
            c->device = optarg;
            break;
        case O_SAVE:
            c->save_trace = optarg;
            break;
        case O_STOP:
            c->stop_at_failure = 1;
            break;
        case O_PASSES:
            if (parse_in("--passes", optarg, 1, 1000, "", &v)) return -1;
            c->passes = (unsigned)v;
            break;
        case O_SNAPSHOT:
            c->snapshot = optarg;
            break;
        case O_PNG:
            c->png = optarg;
            break;
        case O_REQUIRE_GOAL:
            c->require_goal = 1;
            break;
        case O_REQ_PAGES:
            if (parse_in("--require-pages", optarg, 0, 1000000, "pages", &v)) return -1;
            c->require_pages = (long)v;
            break;
        case O_SCALE:
            if (parse_in("--scale", optarg, 1, 1024, "", &v)) return -1;
            c->scale = (unsigned)v;
            break;
        case O_STREAMS:
            if (bench_parse_streams(optarg, &c->streams) != 0) {
                fprintf(stderr, "gpool-bench: --streams: 1, 2, 4 or side\n");
                return -1;
            }
            break;
        case O_LAG:
            if (parse_in("--lag", optarg, 0, 1000000, "operations", &v)) return -1;
            c->lag = (unsigned)v;
            break;
        case O_MAX_BLOCKS:
            if (parse_in("--max-blocks", optarg, 100, 1000000, "", &v)) return -1;
            c->max_blocks = v;
            break;
        case O_SEED:
            if (parse_count("--seed", optarg, &c->wl.seed)) return -1;
            break;
        case O_OPS:
            if (parse_in("--ops", optarg, 1, WL_MAX_OPS, "operations", &v)) return -1;
            c->wl.ops = (size_t)v;
            break;
        case O_DIST:
            if (bench_parse_dist(optarg, &c->wl.dist) != 0) {
                fprintf(stderr, "gpool-bench: --dist: uniform, normal or geometric\n");
                return -1;
            }
            break;
        case O_MIN:
            if (parse_count("--min", optarg, &c->wl.min_size)) return -1;
            break;
        case O_MAX:
            if (parse_count("--max", optarg, &c->wl.max_size)) return -1;
            break;
        case O_MAXLIVE:
            if (parse_count("--max-live", optarg, &c->wl.max_live)) return -1;
            break;
        case O_STEPS:
            if (parse_in("--steps", optarg, 1, WL_MAX_STEPS, "", &v)) return -1;
            c->wl.steps = (unsigned)v;
            break;
        case O_LAYERS:
            if (parse_in("--layers", optarg, 1, WL_MAX_LAYERS, "", &v)) return -1;
            c->wl.layers = (unsigned)v;
            break;
        case O_FRAMES:
            if (parse_in("--frames", optarg, 1, WL_MAX_FRAMES, "", &v)) return -1;
            c->wl.frames = (unsigned)v;
            break;
        case O_PAIRS:
            if (parse_count("--pairs", optarg, &c->pairs)) return -1;
            if (c->pairs == 0) {
                fprintf(stderr, "gpool-bench: --pairs: at least 1\n");
                return -1;
            }
            c->pairs_set = 1;
            break;
        case O_ROUNDS:
            if (parse_in("--rounds", optarg, 1, 1000000, "", &v)) return -1;
            c->rounds = (unsigned)v;
            c->rounds_set = 1;
            break;
        case O_DROPIN:
            c->dropin = 1;
            break;
        default:
            fprintf(stderr, "gpool-bench: unknown or incomplete option \"%s\"\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind >= argc) {
        if (c->help || c->version) return 0; /* gpool-bench --help / --version */
        fprintf(stderr, "gpool-bench: missing command\n");
        return -1;
    }
    c->command = argv[optind++];
    while (optind < argc) {
        if (c->n_args == (int)(sizeof c->args / sizeof c->args[0])) {
            fprintf(stderr, "gpool-bench: too many arguments\n");
            return -1;
        }
        c->args[c->n_args++] = argv[optind++];
    }
    return 0;
}

static int load_trace(const cli *c, const char *name, bench_trace *t)
{
    char err[600];
    int rc = bench_is_workload(name) ? bench_workload_make(name, &c->wl, t, err, sizeof err)
                                     : bench_trace_load(name, t, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "gpool-bench: %s\n", err);
        return -1;
    }
    if (c->scale > 1 && bench_trace_scale(t, c->scale, err, sizeof err) != 0) {
        fprintf(stderr, "gpool-bench: %s\n", err);
        bench_trace_free(t);
        return -1;
    }
    if (c->streams > 1) {
        bench_trace v;
        rc = bench_trace_multistream(t, c->streams, c->lag, &v, err, sizeof err);
        bench_trace_free(t);
        if (rc != 0) {
            fprintf(stderr, "gpool-bench: %s\n", err);
            return -1;
        }
        *t = v;
    } else {
        t->lag_ops = c->lag;
    }
    if (c->save_trace && bench_trace_write_csv(t, c->save_trace) != 0) {
        fprintf(stderr, "gpool-bench: cannot write %s\n", c->save_trace);
        bench_trace_free(t);
        return -1;
    }
    return 0;
}

/* Every strategy spec must exist before anything runs. */
static int check_strategies(const cli *c)
{
    for (int i = 0; i < c->n_strategies; i++) {
        bench_strategy s;
        char err[300];
        if (bench_strategy_lookup(c->strategies[i], &s, err, sizeof err) != 0) {
            fprintf(stderr, "gpool-bench: %s\n", err);
            return -1;
        }
    }
    return 0;
}

static int check_capacity(const cli *c, const bench_device *dev)
{
    if (!c->capacity || dev->simulated) return 0;
    if (c->capacity < dev->total_mem) {
        fprintf(stderr,
                "gpool-bench: --capacity %llu is below the %llu bytes of %s: a real GPU's memory "
                "cannot be limited; use --device sim\n",
                (unsigned long long)c->capacity, (unsigned long long)dev->total_mem, dev->gpu_name);
        return -1;
    }
    return 0;
}

static int cmd_replay(cli *c, const bench_device *dev)
{
    if (c->n_args != 1) {
        fprintf(stderr, "gpool-bench: replay takes one TRACE\n");
        return 2;
    }
    if (!c->n_strategies) {
        c->strategies[c->n_strategies++] = "cuda";
        c->strategies[c->n_strategies++] = "bfc";
        c->strategies[c->n_strategies++] = "gpool";
    }
    bench_trace t;
    if (load_trace(c, c->args[0], &t) != 0) return 1;
    bench_result r[MAX_STRATEGIES];
    bench_replay_opts o = {.capacity = c->capacity,
                           .time_ops = 1,
                           .progress = 1,
                           .samples = c->plot ? 2000 : 0,
                           .stop_on_failure = c->stop_at_failure,
                           .passes = c->passes};
    /* the snapshot comes from the first strategy that can write one */
    int snap_by = -1;
    for (int i = 0; c->snapshot && i < c->n_strategies && snap_by < 0; i++) {
        bench_strategy s;
        char err[300];
        if (bench_strategy_lookup(c->strategies[i], &s, err, sizeof err) == 0 && s.ops->snapshot)
            snap_by = i;
    }
    if (c->snapshot && snap_by < 0) {
        fprintf(stderr, "gpool-bench: --snapshot needs a gpool strategy (gpool_dump_json)\n");
        bench_trace_free(&t);
        return 2;
    }
    int failed = 0;
    for (int i = 0; i < c->n_strategies; i++) {
        bench_replay_opts oi = o;
        oi.snapshot = i == snap_by ? c->snapshot : NULL;
        bench_replay(dev, c->strategies[i], &t, &oi, &r[i]);
        if (r[i].snapshot < 0) {
            fprintf(stderr, "gpool-bench: snapshot not written: %s\n", r[i].snapshot_err);
            failed = 1;
        }
        if (r[i].skipped)
            fprintf(stderr, "gpool-bench: %s skipped: %s\n", r[i].strategy, r[i].note);
        if (r[i].error) {
            fprintf(stderr, "gpool-bench: %s failed: %s\n", r[i].strategy, r[i].note);
            failed = 1;
        }
        if (r[i].sim_leaked)
            fprintf(stderr,
                    "gpool-bench: WARNING: %s left %llu bytes of simulated device memory in use "
                    "after fini\n",
                    r[i].strategy, (unsigned long long)r[i].sim_leaked);
    }
    if (c->capacity && dev->simulated) bench_sim_set_capacity(dev->ordinal, dev->total_mem);
    if (c->json)
        bench_print_replay_json(stdout, dev, &t, r, (size_t)c->n_strategies);
    else
        bench_print_replay_table(stdout, dev, &t, r, (size_t)c->n_strategies);
    if (c->csv && bench_write_replay_csv(c->csv, dev, &t, r, (size_t)c->n_strategies) != 0) {
        fprintf(stderr, "gpool-bench: cannot write %s\n", c->csv);
        failed = 1;
    }
    if (c->plot) {
        char err[300];
        if (bench_plot(c->plot, dev, &t, r, (size_t)c->n_strategies, err, sizeof err) != 0) {
            fprintf(stderr, "gpool-bench: %s\n", err);
            failed = 1;
        } else if (!c->json) {
            printf("plot: %s\n", c->plot);
        }
    }
    if (snap_by >= 0 && r[snap_by].snapshot > 0 && !c->json)
        printf("snapshot: %s (%s after op %" PRIu64 " of %zu, %s; draw it with "
               "gpool-bench view %s --png FILE.png)\n",
               c->snapshot, r[snap_by].strategy, r[snap_by].snapshot_op, t.n_ops,
               r[snap_by].snapshot_failed_op ? "a failed allocation" : "the trace's peak live",
               c->snapshot);
    for (int i = 0; i < c->n_strategies; i++)
        bench_result_free(&r[i]);
    bench_trace_free(&t);
    return failed;
}

static int cmd_fit(cli *c, const bench_device *dev)
{
    if (c->n_args != 1 || c->n_strategies < 1) {
        fprintf(stderr, "gpool-bench: usage: fit TRACE --strategy S [--json]\n");
        return 2;
    }
    if (c->n_strategies > 1) { /* one fit, one answer (one JSON object) */
        fprintf(stderr,
                "gpool-bench: fit takes exactly one --strategy (got %d); compare fits "
                "several\n",
                c->n_strategies);
        return 2;
    }
    bench_trace t;
    if (load_trace(c, c->args[0], &t) != 0) return 1;
    bench_fit f;
    bench_fit_run(dev, c->strategies[0], &t, 1, &f);
    bench_fit_waste_measure(dev, c->strategies[0], &t, &f);
    bench_fit_fail_measure(dev, c->strategies[0], &t, &f);
    bench_print_fit(stdout, dev, &t, &f, c->json);
    bench_trace_free(&t);
    return f.error ? 1 : 0;
}

/* The steady-state replay of compare: STEADY_PASSES passes in one instance at the device's
 * full (default) capacity. */
#define STEADY_PASSES 2

typedef struct steady {
    int ran; /* 1: replayed (see the fields), 0: not run (the fit was skipped or failed) */
    int ok;  /* replayed with no error and no failed allocation */
    uint64_t first, last;
    uint64_t first_by_entry[BENCH_DRV_N]; /* first-pass calls per entry point */
    uint64_t last_by_entry[BENCH_DRV_N];  /* last-pass calls per entry point */
    double first_est_us;                  /* their estimated time (bench/drvcost.c) */
    char note[200];
} steady;

static void steady_run(const bench_device *dev, const char *spec, const bench_trace *t, steady *out)
{
    bench_replay_opts o = {.passes = STEADY_PASSES};
    bench_result r;
    bench_replay_isolated(dev, spec, t, &o, &r);
    out->ran = 1;
    out->first = r.driver_calls_first_pass;
    out->last = r.driver_calls_last_pass;
    memcpy(out->first_by_entry, r.first_pass_by_entry, sizeof out->first_by_entry);
    memcpy(out->last_by_entry, r.last_pass_by_entry, sizeof out->last_by_entry);
    out->first_est_us = bench_drvcost_total_us(out->first_by_entry);
    out->ok = !r.error && !r.skipped && !r.failed_allocs && r.passes == STEADY_PASSES;
    if (r.error || r.skipped)
        snprintf(out->note, sizeof out->note, "%.190s", r.note);
    else if (r.failed_allocs)
        snprintf(out->note, sizeof out->note, "%llu failed allocation%s at full capacity",
                 (unsigned long long)r.failed_allocs, BENCH_PLURAL(r.failed_allocs));
    bench_result_free(&r);
}

static void steady_json(const steady *st)
{
    if (st->ran && st->ok) {
        printf(",\"driver_calls_first_pass\":%llu,\"driver_calls_last_pass\":%llu",
               (unsigned long long)st->first, (unsigned long long)st->last);
        printf(",\"first_pass_driver_us_est\":%.1f,\"first_pass_by_entry\":{", st->first_est_us);
        for (int e = 0, n = 0; e < BENCH_DRV_N; e++)
            if (st->first_by_entry[e])
                printf("%s\"%s\":%llu", n++ ? "," : "", bench_drvcost_name((bench_drv)e),
                       (unsigned long long)st->first_by_entry[e]);
        printf("},\"last_pass_by_entry\":{");
        for (int e = 0, n = 0; e < BENCH_DRV_N; e++)
            if (st->last_by_entry[e])
                printf("%s\"%s\":%llu", n++ ? "," : "", bench_drvcost_name((bench_drv)e),
                       (unsigned long long)st->last_by_entry[e]);
        printf("}");
    } else
        printf(",\"driver_calls_first_pass\":null,\"driver_calls_last_pass\":null");
}

/* The first-pass driver calls per entry point of every trace and strategy, and the cost
 * table that prices them (its numbers and sources). */
static void compare_first_pass(const cli *c, char (*names)[128], const steady *steadies, int ns,
                               int tw, int sw)
{
    printf("\nfirst-pass driver calls by entry point, and estimated first-pass driver time "
           "(ms; %s cost per call below)\n",
           bench_drvcost_measured() ? "measured" : "estimated");
    static const char *col[BENCH_DRV_N] = {"Alloc",    "Free", "AllocAs", "FreeAs", "Create",
                                           "Release",  "Map",  "Unmap",   "SetAcc", "AddrRes",
                                           "AddrFree", "Host", "Event",   "Stream", "Other"};
    printf("%-*s %-*s", tw, "trace", sw, "strategy");
    for (int e = 0; e < BENCH_DRV_N; e++)
        printf(" %8s", col[e]);
    printf(" %9s\n", "est. ms");
    for (int k = 0; k < c->n_args; k++)
        for (int i = 0; i < ns; i++) {
            const steady *st = &steadies[k * ns + i];
            if (!st->ran || !st->ok) continue;
            printf("%-*s %-*s", tw, names[k], sw, c->strategies[i]);
            for (int e = 0; e < BENCH_DRV_N; e++)
                printf(" %8llu", (unsigned long long)st->first_by_entry[e]);
            printf(" %9.2f\n", st->first_est_us / 1000);
        }
    printf("columns: cuMem* entry points (Alloc = cuMemAlloc, AllocAs = cuMemAllocAsync, SetAcc = "
           "cuMemSetAccess, AddrRes = cuMemAddressReserve, Host = pinned host calls, Other = "
           "context and device queries); cost per call (us) and its source:\n");
    for (int e = 0; e < BENCH_DRV_N; e++)
        printf("  %-20s %7.2f  %s\n", bench_drvcost_name((bench_drv)e),
               bench_drvcost_us((bench_drv)e), bench_drvcost_source((bench_drv)e));
}

/* Index of the first strategy named `name` or starting with "name:", else -1. */
static int find_strategy(const cli *c, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < c->n_strategies; i++)
        if (!strncmp(c->strategies[i], name, n) &&
            (c->strategies[i][n] == 0 || c->strategies[i][n] == ':'))
            return i;
    return -1;
}

static void summary_calls(const char *name, const steady *st)
{
    if (st->ran && st->ok)
        printf("%s %llu / %llu", name, (unsigned long long)st->first, (unsigned long long)st->last);
    else
        printf("%s n/a", name);
}

/* One line: how far gpool is from the goal of at most N pages (--require-pages, else 2) above
 * the physical limit on one stream (issue 27), with every trace that misses it. */
#define BENCH_PAGES_GOAL 2
static void pages_goal_line(const cli *c, const bench_fit *fits, const char (*names)[128], int ns,
                            int ig)
{
    long goal = c->require_pages >= 0 ? c->require_pages : BENCH_PAGES_GOAL;
    int met = 0, fitted = 0;
    for (int k = 0; k < c->n_args; k++) {
        const bench_fit *g = &fits[k * ns + ig];
        if (!g->min_capacity) continue;
        fitted++;
        met += g->pages_above <= goal;
    }
    printf("pages-goal (gpool at most %ld page%s above the physical limit, one stream): %d of "
           "%d traces",
           goal, BENCH_PLURAL(goal), met, fitted);
    const char *sep = "; above it: ";
    for (int k = 0; k < c->n_args; k++) {
        const bench_fit *g = &fits[k * ns + ig];
        if (!g->min_capacity || g->pages_above <= goal) continue;
        printf("%s%s %+lld", sep, names[k], (long long)g->pages_above);
        sep = ", ";
    }
    printf("\n");
}

static int cmd_compare(cli *c, const bench_device *dev)
{
    if (c->n_args < 1) {
        fprintf(stderr, "gpool-bench: compare takes one or more TRACEs\n");
        return 2;
    }
    if (!dev->simulated) {
        fprintf(stderr, "gpool-bench: compare finds minimum capacities, which needs the "
                        "simulated driver (--device sim)\n");
        return 1;
    }
    if (!c->n_strategies) {
        c->strategies[c->n_strategies++] = "bfc";
        c->strategies[c->n_strategies++] = "gpool";
    }
    int ns = c->n_strategies;
    bench_fit *fits = calloc((size_t)(c->n_args * ns), sizeof *fits);
    steady *steadies = calloc((size_t)(c->n_args * ns), sizeof *steadies);
    char(*names)[128] = calloc((size_t)c->n_args, sizeof *names);
    uint64_t *peaks = calloc((size_t)c->n_args, sizeof *peaks);
    if (!fits || !steadies || !names || !peaks) {
        free(fits), free(steadies), free(names), free(peaks);
        fprintf(stderr, "gpool-bench: out of host memory\n");
        return 1;
    }
    int failed = 0;
    for (int k = 0; k < c->n_args; k++) {
        bench_trace t;
        if (load_trace(c, c->args[k], &t) != 0) {
            failed = 1;
            snprintf(names[k], sizeof names[k], "%s", c->args[k]);
            for (int i = 0; i < ns; i++) {
                fits[k * ns + i].error = 1;
                snprintf(fits[k * ns + i].note, sizeof fits[k * ns + i].note, "trace not loaded");
                snprintf(fits[k * ns + i].strategy, sizeof fits[k * ns + i].strategy, "%s",
                         c->strategies[i]);
            }
            continue;
        }
        snprintf(names[k], sizeof names[k], "%s", t.name);
        peaks[k] = t.peak_device; /* what fit measures: device memory */
        for (int i = 0; i < ns; i++) {
            bench_fit *f = &fits[k * ns + i];
            bench_fit_run(dev, c->strategies[i], &t, 1, f);
            if (f->error) failed = 1;
            if (!f->skipped && !f->error)
                steady_run(dev, c->strategies[i], &t, &steadies[k * ns + i]);
            if (!c->json)
                fprintf(stderr, "compare: %s %s: %s\n", t.name, c->strategies[i],
                        f->skipped        ? "skipped"
                        : f->error        ? "error"
                        : f->min_capacity ? "done"
                                          : "no fit");
        }
        bench_trace_free(&t);
    }
    int ig = find_strategy(c, "gpool"), ib = find_strategy(c, "bfc");
    int tw = 20, sw = 20; /* the trace and strategy columns: as wide as their longest name */
    for (int k = 0; k < c->n_args; k++)
        if ((int)strlen(names[k]) > tw) tw = (int)strlen(names[k]);
    for (int i = 0; i < ns; i++)
        if ((int)strlen(c->strategies[i]) > sw) sw = (int)strlen(c->strategies[i]);
    if (c->json) {
        printf("{\"command\":\"compare\",\"device\":");
        bench_json_string(stdout, dev->name);
        printf(",\"steady_passes\":%d,\"results\":[", STEADY_PASSES);
        for (int k = 0; k < c->n_args; k++)
            for (int i = 0; i < ns; i++) {
                const bench_fit *f = &fits[k * ns + i];
                printf("%s{\"trace\":", k || i ? "," : "");
                bench_json_string(stdout, names[k]);
                printf(",\"strategy\":");
                bench_json_string(stdout, f->strategy);
                printf(",\"status\":\"%s\",\"note\":", f->skipped        ? "skipped"
                                                       : f->error        ? "error"
                                                       : f->min_capacity ? "ok"
                                                                         : "no_fit");
                bench_json_string(stdout, f->note);
                printf(",\"peak_live_bytes\":%llu,\"min_capacity_bytes\":%llu,\"ratio\":%.4f,"
                       "\"goal_met\":%s,\"driver_calls\":%llu,\"peak_reserved_bytes\":%llu",
                       (unsigned long long)peaks[k], (unsigned long long)f->min_capacity, f->ratio,
                       f->goal_met ? "true" : "false", (unsigned long long)f->driver_calls,
                       (unsigned long long)f->peak_reserved);
                printf(",\"page_bytes\":%llu,\"physical_limit_bytes\":%llu,\"pages_above_limit\":",
                       (unsigned long long)f->page_bytes, (unsigned long long)f->physical_limit);
                if (f->min_capacity)
                    printf("%lld", (long long)f->pages_above);
                else
                    printf("null");
                steady_json(&steadies[k * ns + i]);
                printf("}");
            }
        printf("]}\n");
        goto out;
    }
    printf("compare (device: %s): smallest capacity, in 2 MiB steps, that replays each trace "
           "with no failed allocation\n",
           dev->name);
    printf("goal: min capacity <= 1.05 x peak live + 4 MiB; driver calls counted in the replay at "
           "the min capacity;\n"
           "first / last pass: driver calls in each of %d passes over the trace in one instance "
           "at the full simulated capacity (goal for gpool: 0 in the last pass)\n\n",
           STEADY_PASSES);
    printf("%-*s %-*s %13s %12s %9s %11s %5s %12s %10s %21s %15s\n", tw, "trace", sw, "strategy",
           "peak live MiB", "min cap MiB", "fit ratio", "pages>limit", "goal", "driver calls",
           "first pass", "drv calls (last pass)", "1st pass drv ms");
    for (int k = 0; k < c->n_args; k++)
        for (int i = 0; i < ns; i++) {
            const bench_fit *f = &fits[k * ns + i];
            const steady *st = &steadies[k * ns + i];
            if (f->skipped || f->error || !f->min_capacity) {
                printf("%-*s %-*s %13.1f  %s: %s\n", tw, names[k], sw, f->strategy,
                       (double)peaks[k] / BENCH_MIB,
                       f->skipped ? "skipped"
                       : f->error ? "error"
                                  : "no fit",
                       f->note);
                continue;
            }
            printf("%-*s %-*s %13.1f %12.0f %9.3f %11lld %5s %12llu", tw, names[k], sw, f->strategy,
                   (double)peaks[k] / BENCH_MIB, (double)f->min_capacity / BENCH_MIB, f->ratio,
                   (long long)f->pages_above, f->goal_met ? "met" : "no",
                   (unsigned long long)f->driver_calls);
            if (st->ran && st->ok)
                printf(" %10llu %21llu %15.2f\n", (unsigned long long)st->first,
                       (unsigned long long)st->last, st->first_est_us / 1000);
            else
                printf("  steady-state replay: %s\n", st->note);
        }
    compare_first_pass(c, names, steadies, ns, tw, sw);
    printf("\nfit ratio (min capacity / peak live) +pages above the physical limit (peak live "
           "in whole pages of the device's granularity), device: %s\n%-*s",
           dev->name, tw, "trace");
    for (int i = 0; i < ns; i++) /* each column as wide as its strategy's name, at least 14 */
        printf(" %14s", c->strategies[i]);
    printf("\n");
    for (int k = 0; k < c->n_args; k++) {
        printf("%-*s", tw, names[k]);
        for (int i = 0; i < ns; i++) {
            const bench_fit *f = &fits[k * ns + i];
            int w = (int)strlen(c->strategies[i]) > 14 ? (int)strlen(c->strategies[i]) : 14;
            if (f->min_capacity) {
                char cell[64];
                snprintf(cell, sizeof cell, "%.3f %+lld", f->ratio, (long long)f->pages_above);
                printf(" %*s", w, cell);
            } else
                printf(" %*s", w, f->skipped ? "skipped" : f->error ? "error" : "no fit");
        }
        printf("\n");
    }
    if (ig >= 0) {
        printf("\nsummary per trace (device: %s): %s's fit ratio vs %s's, %s's goal (min capacity "
               "<= 1.05 x peak + 4 MiB), driver calls (first pass / last pass)\n",
               dev->name, c->strategies[ig], ib >= 0 ? c->strategies[ib] : "bfc",
               c->strategies[ig]);
        for (int k = 0; k < c->n_args; k++) {
            const bench_fit *g = &fits[k * ns + ig];
            printf("summary %-*s fit ratio %s ", tw, names[k], c->strategies[ig]);
            if (g->min_capacity)
                printf("%.3f", g->ratio);
            else
                printf("n/a");
            if (ib >= 0) {
                const bench_fit *b = &fits[k * ns + ib];
                printf(" vs %s ", c->strategies[ib]);
                if (b->min_capacity)
                    printf("%.3f", b->ratio);
                else
                    printf("n/a");
            }
            printf("; pages above the physical limit %s ", c->strategies[ig]);
            if (g->min_capacity)
                printf("%lld", (long long)g->pages_above);
            else
                printf("n/a");
            if (ib >= 0) {
                const bench_fit *b = &fits[k * ns + ib];
                printf(" vs %s ", c->strategies[ib]);
                if (b->min_capacity)
                    printf("%lld", (long long)b->pages_above);
                else
                    printf("n/a");
            }
            printf("; goal met: %s; driver calls ", g->goal_met ? "yes" : "no");
            summary_calls(c->strategies[ig], &steadies[k * ns + ig]);
            if (ib >= 0) {
                printf(", ");
                summary_calls(c->strategies[ib], &steadies[k * ns + ib]);
            }
            const steady *gs = &steadies[k * ns + ig];
            printf("; steady state (0 in the last pass): %s",
                   gs->ran && gs->ok && gs->last == 0 ? "yes" : "no");
            const char *sep = " (last pass: "; /* what gpool's last pass called */
            for (int e = 0; gs->ran && gs->ok && e < BENCH_DRV_N; e++)
                if (gs->last_by_entry[e]) {
                    printf("%s%llu %s", sep, (unsigned long long)gs->last_by_entry[e],
                           bench_drv_class((bench_drv)e));
                    sep = ", ";
                }
            printf("%s\n", *sep == ',' ? "; replay --passes 2 says why)" : "");
        }
    }
    if (ig >= 0 && c->streams <= 1) pages_goal_line(c, fits, names, ns, ig);
out:
    if (c->require_pages >= 0 && !failed && ig >= 0) {
        for (int k = 0; k < c->n_args; k++) {
            const bench_fit *g = &fits[k * ns + ig];
            if (!g->skipped && (!g->min_capacity || g->pages_above > c->require_pages)) {
                if (!c->json)
                    fprintf(stderr,
                            "gpool-bench: gpool is more than %ld page%s above the physical "
                            "limit on %s\n",
                            c->require_pages, BENCH_PLURAL(c->require_pages), names[k]);
                failed = 3;
            }
        }
    }
    if (c->require_goal && !failed) {
        for (int k = 0; k < c->n_args * ns; k++)
            if (!fits[k].skipped && !fits[k].goal_met) {
                if (!c->json)
                    fprintf(stderr, "gpool-bench: %s misses the fit goal on %s\n", fits[k].strategy,
                            names[k / ns]);
                failed = 3;
            }
    }
    free(fits);
    free(steadies);
    free(names);
    free(peaks);
    return failed;
}

/* hotpath --dropin: one row per (heap, block size), printed as it is measured. */
static int cmd_hotpath_dropin(cli *c, const bench_device *dev)
{
    const uint64_t *sizes, *heaps;
    size_t n_sizes, n_heaps;
    bench_dropin_default_rows(&sizes, &n_sizes, &heaps, &n_heaps);
    const double goal = 4.0;
    int all_met = 1;
    /* many short rounds, best of each: on a shared machine the minimum is the stable figure */
    uint64_t pairs = c->pairs_set && c->pairs ? c->pairs : 50000;
    unsigned rounds = c->rounds_set ? c->rounds : 20;
    if (c->json) {
        printf("{\"command\":\"hotpath\",\"dropin\":true,\"device\":");
        bench_json_string(stdout, dev->name);
        printf(",\"simulated\":%s,\"pairs\":%llu,\"rounds\":%u,\"goal\":%.1f,\"rows\":[",
               dev->simulated ? "true" : "false", (unsigned long long)pairs, rounds, goal);
    } else {
        printf("hotpath --dropin (device: %s%s): alloc+free pair of a cached block, best of %u "
               "rounds of %llu pairs (1/8 of them for 1 MiB)\n",
               dev->name, dev->simulated ? ", figures on the simulated driver" : "", rounds,
               (unsigned long long)pairs);
        printf("interposed pairs run in a client under LD_PRELOAD=libgpool_preload.so, default "
               "configuration; 'batch' = cudaFree once a non-blocking stream exists\n");
        printf("%8s %8s %12s %12s %12s %12s %8s\n", "live", "size", "gpool ns", "cudaMalloc",
               "cuMemAlloc", "batch", "ratio");
    }
    int first = 1;
    for (size_t h = 0; h < n_heaps; h++)
        for (size_t z = 0; z < n_sizes; z++) {
            bench_dropin_row r;
            char err[512];
            int rc = bench_dropin_run(dev, sizes[z], heaps[h], pairs, rounds, &r, err, sizeof err);
            if (rc < 0) {
                fprintf(stderr, "gpool-bench: hotpath --dropin: %s\n", err);
                if (c->json) printf("]}\n");
                return 1;
            }
            if (rc > 0) { /* the heap does not fit on this device */
                if (c->json) {
                    printf("%s{\"live\":%llu,\"size\":%llu,\"skipped\":", first ? "" : ",",
                           (unsigned long long)heaps[h], (unsigned long long)sizes[z]);
                    bench_json_string(stdout, err);
                    printf("}");
                } else {
                    printf("%8llu %8s skipped: %s\n", (unsigned long long)heaps[h],
                           sizes[z] >= BENCH_MIB ? "1 MiB"
                           : sizes[z] >= 4096    ? "4 KiB"
                                                 : "512 B",
                           err);
                }
                first = 0;
                continue;
            }
            int met = r.ratio <= goal;
            all_met &= met;
            char sz[32];
            bench_size_text(sz, sizeof sz, r.size);
            if (c->json) {
                printf("%s{\"live\":%llu,\"size\":%llu,\"library_ns\":%.2f,\"cudaMalloc_ns\":%.2f,"
                       "\"cuMemAlloc_ns\":%.2f,\"batch_ns\":%.2f,\"ratio\":%.3f,\"goal_met\":%s}",
                       first ? "" : ",", (unsigned long long)r.live, (unsigned long long)r.size,
                       r.library_ns, r.runtime_ns, r.driver_ns, r.batch_ns, r.ratio,
                       met ? "true" : "false");
            } else {
                printf("%8llu %8s %12.2f %12.2f %12.2f %12.2f %7.2fx\n", (unsigned long long)r.live,
                       sz, r.library_ns, r.runtime_ns, r.driver_ns, r.batch_ns, r.ratio);
            }
            fflush(stdout);
            first = 0;
        }
    if (c->json)
        printf("],\"goal_met\":%s}\n", all_met ? "true" : "false");
    else
        printf("max(cudaMalloc, cuMemAlloc) / gpool pair (goal <= %.0fx at every row): %s\n", goal,
               all_met ? "met" : "NOT met");
    return 0;
}

static int cmd_hotpath(cli *c, const bench_device *dev)
{
    if (c->dropin) return cmd_hotpath_dropin(c, dev);
    bench_hotpath h;
    char err[300];
    if (bench_hotpath_run(dev, c->pairs, c->rounds, &h, err, sizeof err) != 0) {
        fprintf(stderr, "gpool-bench: hotpath: %s\n", err);
        return 1;
    }
    if (c->json) {
        printf("{\"command\":\"hotpath\",\"device\":");
        bench_json_string(stdout, dev->name);
        printf(",\"pairs\":%llu,\"rounds\":%u", (unsigned long long)h.pairs, h.rounds);
        bench_json_number(stdout, "gpool_ns_per_pair", 2, h.gpool_ns);
        bench_json_number(stdout, "jemalloc_ns_per_pair", 2, h.jemalloc_ns);
        bench_json_number(stdout, "ratio", 3, h.ratio);
        printf(",\"goal\":1.5,\"goal_met\":%s", h.ratio <= 1.5 ? "true" : "false");
        bench_json_number(stdout, "gpool_ns_per_pair_2t", 2, h.gpool_ns_2t);
        bench_json_number(stdout, "jemalloc_ns_per_pair_2t", 2, h.jemalloc_ns_2t);
        bench_json_number(stdout, "gpool_scaling_2t", 3, h.gpool_scaling);
        bench_json_number(stdout, "jemalloc_scaling_2t", 3, h.jemalloc_scaling);
        bench_json_number(stdout, "pinned_ns_per_pair", 2, h.pinned_ns);
        bench_json_number(stdout, "mapped_ns_per_pair", 2, h.mapped_ns);
        bench_json_number(stdout, "device_driver_calls_per_100k_pairs", 1, h.device_calls);
        bench_json_number(stdout, "pinned_driver_calls_per_100k_pairs", 1, h.pinned_calls);
        bench_json_number(stdout, "mapped_driver_calls_per_100k_pairs", 1, h.mapped_calls);
        printf("}\n");
        return 0;
    }
    printf("hotpath (device: %s): alloc+free pair of a cached small block, %s, %llu pairs per "
           "thread\n",
           dev->name, h.note, (unsigned long long)h.pairs);
    printf("%-10s %14s %18s %22s\n", "", "ns/pair 1 thr", "ns/pair/thr 2 thr", "2-thread scaling");
    printf("%-10s %14.2f %18.2f %21.2fx\n", "gpool", h.gpool_ns, h.gpool_ns_2t, h.gpool_scaling);
    printf("%-10s %14.2f %18.2f %21.2fx\n", "jemalloc", h.jemalloc_ns, h.jemalloc_ns_2t,
           h.jemalloc_scaling);
    printf("gpool / jemalloc: %.2f (goal <= 1.5: %s)\n", h.ratio,
           h.ratio <= 1.5 ? "met" : "NOT met");
    printf("%-10s %14s %26s\n", "", "ns/pair 1 thr", "driver calls / 100k pairs");
    printf("%-10s %14.2f %26.1f\n", "device", h.gpool_ns, h.device_calls);
    printf("%-10s %14.2f %26.1f\n", "pinned", h.pinned_ns, h.pinned_calls);
    printf("%-10s %14.2f %26.1f\n", "mapped", h.mapped_ns, h.mapped_calls);
    return 0;
}

/* Goals of the scale table: statistics in at most 1 us, a large-block pair within 2x jemalloc. */
#define SCALE_STATS_GOAL_NS 1000.0
#define SCALE_PAIR_GOAL     2.0

static int cmd_scale(cli *c, const bench_device *dev)
{
    uint64_t max = c->max_blocks ? c->max_blocks : 100000;
    bench_scale_row rows[16];
    size_t n = 0;
    for (uint64_t live = 100; live <= max && n < 15; live *= 10)
        rows[n++] = (bench_scale_row){.live = live};
    rows[n++] = (bench_scale_row){.live = max * 10, .small = 1};
    char err[300];
    if (bench_scale_run(dev, rows, n, err, sizeof err) != 0) {
        fprintf(stderr, "gpool-bench: scale: %s\n", err);
        return 1;
    }
    int met = 1;
    for (size_t i = 0; i < n; i++) {
        const bench_scale_row *r = &rows[i];
        met &= r->gpool_stats_ns <= SCALE_STATS_GOAL_NS;
        if (!r->small) met &= r->gpool_pair_ns <= SCALE_PAIR_GOAL * r->jem_pair_ns;
    }
    if (c->json) {
        printf("{\"command\":\"scale\",\"device\":");
        bench_json_string(stdout, dev->name);
        printf(",\"stats_goal_ns\":%.0f,\"pair_goal_ratio\":%.1f,\"goal_met\":%s,\"rows\":[",
               SCALE_STATS_GOAL_NS, SCALE_PAIR_GOAL, met ? "true" : "false");
        for (size_t i = 0; i < n; i++) {
            const bench_scale_row *r = &rows[i];
            printf("%s{\"live_blocks\":%llu,\"blocks\":\"%s\",\"pair_ns\":%.1f,"
                   "\"jemalloc_pair_ns\":%.1f,\"stats_ns\":%.1f,\"jemalloc_stats_ns\":%.1f,"
                   "\"lookup_ns\":%.1f,\"jemalloc_lookup_ns\":%.1f,\"trim_ns\":%.0f,"
                   "\"jemalloc_trim_ns\":%.0f}",
                   i ? "," : "", (unsigned long long)r->live, r->small ? "small" : "large",
                   r->gpool_pair_ns, r->jem_pair_ns, r->gpool_stats_ns, r->jem_stats_ns,
                   r->gpool_lookup_ns, r->jem_lookup_ns, r->gpool_trim_ns, r->jem_trim_ns);
        }
        printf("]}\n");
        return 0;
    }
    printf("scale (device: %s): ns per operation in a fragmented heap (2N blocks allocated, half "
           "freed at random),\ngpool against jemalloc in the same run; goals: stats <= 1 us, "
           "large pair <= 2x jemalloc\n",
           dev->name);
    printf("%9s %6s %9s %9s %6s %9s %9s %9s %9s %11s %11s\n", "live", "blocks", "pair", "jem pair",
           "ratio", "stats", "jem stats", "lookup", "jem look", "trim us", "jem trim us");
    for (size_t i = 0; i < n; i++) {
        const bench_scale_row *r = &rows[i];
        printf("%9llu %6s %9.1f %9.1f %6.2f %9.1f %9.1f %9.1f %9.1f %11.1f %11.1f\n",
               (unsigned long long)r->live, r->small ? "small" : "large", r->gpool_pair_ns,
               r->jem_pair_ns, r->jem_pair_ns > 0 ? r->gpool_pair_ns / r->jem_pair_ns : 0,
               r->gpool_stats_ns, r->jem_stats_ns, r->gpool_lookup_ns, r->jem_lookup_ns,
               r->gpool_trim_ns / 1e3, r->jem_trim_ns / 1e3);
    }
    printf("goals: %s\n", met ? "met" : "NOT met");
    return 0;
}

/* The page size gpool_page_size answers for a few request sizes, per kind, on a pool of
 * device `ordinal`: a table (json = 0) or a JSON object {"sizes":[...], KIND:{SIZE:bytes or
 * null, "error":text when one failed}, ...} (or {"error":text} when no pool could be made). */
static void print_page_sizes(int ordinal, int json)
{
    static const size_t sizes[] = {256, 64u << 10, 2u << 20, 100u << 20, (size_t)2 << 30};
    static const struct {
        gpool_mem_kind kind;
        const char *name;
    } kinds[] = {{GPOOL_MEM_AUTO, "auto"},
                 {GPOOL_MEM_DEVICE, "device"},
                 {GPOOL_MEM_HOST_PINNED, "host_pinned"},
                 {GPOOL_MEM_HOST_MAPPED, "host_mapped"}};
    enum { NS = sizeof sizes / sizeof sizes[0], NK = sizeof kinds / sizeof kinds[0] };
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.device = ordinal;
    gpool_t *pool = NULL;
    gpool_status st = gpool_create(&cfg, &pool);
    if (st != GPOOL_OK) {
        char why[400];
        bench_gpool_msg(why, sizeof why, "gpool_create", st);
        if (json) {
            printf("{\"error\":");
            bench_json_string(stdout, why);
            printf("}");
        } else {
            printf("  page size gpool would choose: n/a (%s)\n", why);
        }
        return;
    }
    if (json) {
        printf("{\"sizes\":[");
        for (int j = 0; j < NS; j++)
            printf("%s%zu", j ? "," : "", sizes[j]);
        printf("]");
    } else {
        printf("  page size gpool would choose (gpool_page_size), by request size:\n");
        printf("    %-12s", "kind");
        for (int j = 0; j < NS; j++) {
            char t[32];
            bench_size_text(t, sizeof t, sizes[j]);
            printf(" %9s", t);
        }
        printf("\n");
    }
    for (int k = 0; k < NK; k++) {
        size_t page[NS];
        int ok[NS];
        char why[400] = "";
        for (int j = 0; j < NS; j++) {
            st = gpool_page_size(pool, kinds[k].kind, sizes[j], &page[j]);
            ok[j] = st == GPOOL_OK;
            if (!ok[j] && !*why) bench_gpool_msg(why, sizeof why, "gpool_page_size", st);
        }
        if (json) {
            printf(",\"%s\":{", kinds[k].name);
            for (int j = 0; j < NS; j++) {
                if (ok[j])
                    printf("%s\"%zu\":%zu", j ? "," : "", sizes[j], page[j]);
                else
                    printf("%s\"%zu\":null", j ? "," : "", sizes[j]);
            }
            if (*why) {
                printf(",\"error\":");
                bench_json_string(stdout, why);
            }
            printf("}");
            continue;
        }
        printf("    %-12s", kinds[k].name);
        for (int j = 0; j < NS; j++) {
            char t[32] = "error";
            if (ok[j]) bench_size_text(t, sizeof t, page[j]);
            printf(" %9s", t);
        }
        printf("%s%s\n", *why ? "  " : "", why);
    }
    if (json) printf("}");
    gpool_destroy(pool);
}

static int cmd_view(cli *c)
{
    if (c->n_args != 1) {
        fprintf(stderr, "gpool-bench: usage: view SNAPSHOT.json [--png FILE.png]\n");
        return 2;
    }
    bench_snapshot s;
    char err[600];
    if (bench_snapshot_load(c->args[0], &s, err, sizeof err) != 0) {
        fprintf(stderr, "gpool-bench: %s\n", err);
        return 1;
    }
    printf("snapshot %s (gpool %s): %zu region%s, %.1f MiB of address space (%.1f MiB unbacked "
           "tail), %.1f MiB backed\n",
           c->args[0], *s.version ? s.version : "?", s.n_regions, s.n_regions == 1 ? "" : "s",
           (double)s.reserved / BENCH_MIB, (double)s.undrawn / BENCH_MIB,
           (double)s.backed / BENCH_MIB);
    for (int k = 0; k < BENCH_RANGE_STATES; k++)
        if (s.state_bytes[k] || k < BENCH_RANGE_OTHER)
            printf("  %-8s %12.2f MiB\n", bench_range_state_name(k),
                   (double)s.state_bytes[k] / BENCH_MIB);
    printf("  stats: requested %.2f MiB, in use %.2f MiB, reserved %.2f MiB, cached %.2f MiB, "
           "%llu driver calls\n",
           (double)s.stats_requested / BENCH_MIB, (double)s.stats_in_use / BENCH_MIB,
           (double)s.stats_reserved / BENCH_MIB, (double)s.stats_cached / BENCH_MIB,
           (unsigned long long)s.driver_calls);
    int rc = 0;
    if (c->png) {
        const char *base = strrchr(c->args[0], '/');
        if (bench_view(&s, base ? base + 1 : c->args[0], c->png, err, sizeof err) != 0) {
            fprintf(stderr, "gpool-bench: %s\n", err);
            rc = 1;
        } else {
            printf("map: %s\n", c->png);
        }
    }
    bench_snapshot_free(&s);
    return rc;
}

static int cmd_info(cli *c, const bench_device *dev)
{
    const gp_driver *drv = dev->drv;
    int count = 0;
    drv->cuDeviceGetCount(&count);
    if (c->json) {
        printf("{\"command\":\"info\",\"device\":");
        bench_json_string(stdout, dev->name);
        printf(",\"driver\":");
        bench_json_string(stdout, dev->libcuda);
        printf(",\"driver_version\":%d,\"simulated\":%s,\"gpool_version\":\"%s\",\"devices\":[",
               drv->version, dev->simulated ? "true" : "false", gpool_version());
    } else {
        printf("gpool-bench info (device: %s)\n", dev->name);
        printf("driver: %s, version %d.%d%s\n", dev->libcuda, drv->version / 1000,
               drv->version % 1000 / 10, dev->simulated ? " (simulated)" : "");
        printf("gpool %s; %d device%s\n", gpool_version(), count, count == 1 ? "" : "s");
    }
    for (int i = 0; i < count; i++) {
        CUdevice d;
        char name[256] = "?";
        size_t total = 0;
        int vmm = 0, numa = -1, have_numa;
        size_t gmin = 0, grec = 0;
        if (drv->cuDeviceGet(&d, i) != CUDA_SUCCESS) continue;
        drv->cuDeviceGetName(name, sizeof name, d);
        drv->cuDeviceTotalMem(&total, d);
        drv->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
        have_numa =
            drv->cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, d) == CUDA_SUCCESS;
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = i;
        drv->cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        drv->cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        if (c->json) {
            printf("%s{\"ordinal\":%d,\"name\":", i ? "," : "", i);
            bench_json_string(stdout, name);
            printf(",\"total_bytes\":%zu,\"vmm\":%s,\"granularity_min\":%zu,"
                   "\"granularity_recommended\":%zu,\"host_numa_id\":",
                   total, vmm ? "true" : "false", gmin, grec);
            if (have_numa)
                printf("%d", numa);
            else
                printf("null");
            printf(",\"page_size\":");
            print_page_sizes(i, 1);
            printf("}");
        } else {
            char numa_text[32] = "n/a";
            if (have_numa && numa >= 0) snprintf(numa_text, sizeof numa_text, "%d", numa);
            printf("device %d: %s%s, %.1f GiB, VMM %s, granularity %zu KiB (recommended %zu "
                   "KiB), host NUMA node %s\n",
                   i, name, dev->simulated ? " [simulated]" : "", (double)total / BENCH_GIB,
                   vmm ? "yes" : "no", gmin >> 10, grec >> 10, numa_text);
            print_page_sizes(i, 0);
        }
    }
    if (c->json) printf("]}\n");
    return 0;
}

static int cmd_view_file(cli *c, const bench_device *dev)
{
    (void)dev; /* a file: no device needed */
    return cmd_view(c);
}

/* The commands: the one table dispatch, the unknown-command list and usage errors read. A new
 * command is one line here. */
typedef struct bench_command {
    const char *name;
    int (*run)(cli *c, const bench_device *dev); /* 2: a usage error, already one line */
    int needs_device;                            /* 0: run gets NULL (no driver is loaded) */
    int (*own_main)(int argc, char **argv);      /* reads its own arguments (after its name) */
} bench_command;

static const bench_command commands[] = {
    {"replay", cmd_replay, 1, NULL},
    {"fit", cmd_fit, 1, NULL},
    {"compare", cmd_compare, 1, NULL},
    {"hotpath", cmd_hotpath, 1, NULL},
    {"scale", cmd_scale, 1, NULL},
    {"info", cmd_info, 1, NULL},
    {"view", cmd_view_file, 0, NULL},
    {"import", NULL, 0, bench_import_main},
    {"startup", NULL, 0, bench_startup_main},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static const bench_command *find_command(const char *s)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(s, commands[i].name)) return &commands[i];
    return NULL;
}

static int is_command(const char *s)
{
    return find_command(s) != NULL;
}

/* After a usage error: one line pointing at the help of the command being run (the first
 * argument that names one), not the whole usage. */
static int usage_error(int argc, char **argv)
{
    const char *cmd = NULL;
    for (int i = 1; i < argc && !cmd; i++)
        if (is_command(argv[i])) cmd = argv[i];
    if (cmd)
        fprintf(stderr, "see 'gpool-bench %s --help'\n", cmd);
    else
        fprintf(stderr, "see 'gpool-bench --help'\n");
    return 2;
}

/* Every output file is checked before the run: a run never ends in an unwritable path. */
static int check_outputs(const cli *c)
{
    const struct {
        const char *opt, *path;
    } outs[] = {{"--csv", c->csv},
                {"--plot", c->plot},
                {"--png", c->png},
                {"--snapshot", c->snapshot},
                {"--save-trace", c->save_trace}};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        char err[600];
        if (outs[i].path && bench_check_output(outs[i].opt, outs[i].path, err, sizeof err)) {
            fprintf(stderr, "gpool-bench: %s\n", err);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    cli c;
    const bench_command *own = argc > 1 ? find_command(argv[1]) : NULL;
    if (own && own->own_main) return own->own_main(argc - 2, argv + 2);
    if (parse_cli(argc, argv, &c) != 0) return usage_error(argc, argv);
    if (c.version) {
        printf("gpool-bench (gpool %s)\n", gpool_version());
        return 0;
    }
    if (c.help) {
        if (!c.command || bench_cli_help(stdout, c.command) != 0) {
            usage(stdout);
            bench_cli_strategies(stdout);
        }
        return 0;
    }
    const bench_command *cmd = find_command(c.command);
    if (!cmd) {
        fprintf(stderr, "gpool-bench: unknown command \"%s\" (", c.command);
        for (size_t i = 0; i < N_COMMANDS; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", commands[i].name);
        fprintf(stderr, ")\n");
        return usage_error(argc, argv);
    }
    for (int i = 0; i < c.n_given; i++)
        if (!bench_cli_takes(c.command, c.given[i])) {
            fprintf(stderr, "gpool-bench: %s does not take --%s\n", c.command, c.given[i]);
            return usage_error(argc, argv);
        }
    if (c.n_args > bench_cli_max_args(c.command)) {
        fprintf(stderr, "gpool-bench: %s takes %s, not \"%s\"\n", c.command,
                bench_cli_max_args(c.command) ? "one file" : "no argument",
                c.args[bench_cli_max_args(c.command)]);
        return usage_error(argc, argv);
    }
    if (check_strategies(&c) != 0) return usage_error(argc, argv);
    if (check_outputs(&c) != 0) return 2;
    if (!cmd->needs_device) {
        int vrc = cmd->run ? cmd->run(&c, NULL) : 2;
        return vrc == 2 ? usage_error(argc, argv) : vrc;
    }
    bench_device dev;
    char err[600];
    if (bench_device_open(c.device, &dev, err, sizeof err) != 0) {
        fprintf(stderr, "gpool-bench: %s\n", err);
        return 1;
    }
    if (check_capacity(&c, &dev) != 0) {
        bench_device_close(&dev);
        return 2;
    }
    int rc = cmd->run(&c, &dev);
    bench_device_close(&dev);
    return rc == 2 ? usage_error(argc, argv) : rc; /* 2: a usage error, already one line */
}
