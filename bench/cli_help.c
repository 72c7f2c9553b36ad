/* cli_help.c — `gpool-bench CMD --help` (that command's options) and the output-path check
 * every command makes before it runs. */
#include "cli_help.h"

#include "size_parse.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct cmd_help {
    const char *name;
    const char *text;
} cmd_help;

#define TRACE_HELP                                                                                 \
    "TRACE is an RMM replay log (CSV: Thread,Time,Action,Pointer,Size,Stream) or a workload:\n"    \
    "  random  --seed N --ops N --dist uniform|normal|geometric --min SIZE --max SIZE "            \
    "--max-live SIZE\n"                                                                            \
    "  train   --seed N --steps N --layers N\n"                                                    \
    "  frame   --seed N --frames N\n"                                                              \
    "  --save-trace FILE      write the (generated) trace as CSV\n"                                \
    "  --scale N              every request size times N (1 to 1024; e.g. 32 on a 141 GiB "        \
    "device:\n"                                                                                    \
    "                         GPOOL_SIM_MEMORY=141G)\n"                                            \
    "  --streams 1|2|4|side   replay a multi-stream variant (bursts on 2 or 4 streams, or "        \
    "inputs\n"                                                                                     \
    "                         on a side stream freed on the main one)\n"                           \
    "  --lag N                work on each stream completes only every N operations\n"

#define COMMON_HELP                                                                                \
    "  --device auto|sim|N    auto (default): a real GPU if present, else the simulated driver\n"  \
    "sizes (and counts): " GP_SIZE_SYNTAX "\n"

static const cmd_help helps[] = {
    {"replay",
     "usage: gpool-bench replay TRACE [options]\n"
     "Replay a trace with each strategy; print allocations, memory reserved, driver "
     "calls, latency.\n"
     "  --strategy S           a strategy (repeatable; default cuda, bfc, gpool)\n"
     "  --capacity SIZE        device memory limit (simulated driver; at least 4K)\n"
     "  --stop-at-failure      stop at the first failed allocation, as fit does\n"
     "  --passes N             replay N times in one instance (1 to 1000); a 'drv last pass'\n"
     "                         column counts the driver calls of the last one\n"
     "  --json                 JSON on stdout instead of the table\n"
     "  --csv FILE             per-strategy results as CSV\n"
     "  --plot FILE.png        reserved and live memory over the trace (needs gnuplot)\n"
     "  --snapshot FILE.json   gpool_dump_json of the first gpool strategy at the peak\n"
     "                         (with --stop-at-failure, at the failed allocation)\n" TRACE_HELP
         COMMON_HELP},
    {"fit", "usage: gpool-bench fit TRACE --strategy S [options]\n"
            "Find the smallest capacity at which the strategy replays the whole trace.\n"
            "  --strategy S           the strategy (exactly one; compare fits several)\n"
            "  --json                 JSON on stdout\n" TRACE_HELP COMMON_HELP},
    {"compare", "usage: gpool-bench compare TRACE... [options]\n"
                "fit every trace with each strategy (default bfc and gpool) and tabulate the "
                "ratios.\n"
                "  --strategy S           a strategy (repeatable)\n"
                "  --require-goal         exit status 3 when a strategy misses the fit goal\n"
                "  --require-pages N      exit status 3 when gpool is more than N pages above the\n"
                "                         physical limit on a trace (a pages-goal line says how "
                "far)\n"
                "  --json                 JSON on stdout\n" TRACE_HELP COMMON_HELP},
    {"hotpath", "usage: gpool-bench hotpath [options]\n"
                "Cost of a small alloc+free pair, gpool against jemalloc; then the pinned and\n"
                "mapped host pairs, with driver calls per 100,000 pairs of each kind.\n"
                "  --pairs N              pairs per round (at least 1; default 1000000)\n"
                "  --rounds N             rounds, best kept (at least 1; default 5)\n"
                "  --dropin               the pair through libgpool_preload.so (cudaMalloc and\n"
                "                         cuMemAlloc) at 10..100,000 live blocks of 512 B, 4 KiB,\n"
                "                         1 MiB, next to gpool's own (defaults --pairs 50000\n"
                "                         --rounds 20)\n"
                "  --json                 JSON on stdout\n" COMMON_HELP},
    {"scale", "usage: gpool-bench scale [options]\n"
              "Cost per operation in a fragmented heap at 10^2..N live blocks, against "
              "jemalloc.\n"
              "  --max-blocks N         largest heap in live large blocks (100 to 1000000; "
              "default 10^5)\n"
              "  --json                 JSON on stdout\n" COMMON_HELP},
    {"info", "usage: gpool-bench info [options]\n"
             "The driver and devices gpool-bench sees.\n"
             "  --json                 JSON on stdout\n" COMMON_HELP},
    {"view", "usage: gpool-bench view SNAPSHOT.json [--png FILE.png]\n"
             "Memory map of a gpool_dump_json snapshot (gpool-bench replay --snapshot writes "
             "one).\n"
             "  --png FILE.png         draw the map (needs gnuplot)\n"},
    {"import", "usage: gpool-bench import SNAPSHOT.pickle -o TRACE.csv [--device N]\n"
               "Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into replay\n"
               "CSV, one file per device; frees at free_completed, streams kept.\n"},
    {"startup", "usage: gpool-bench startup [--runs N] [--program PATH] [--require-goal] [--json]\n"
                "Median CPU and wall time of starting PATH (default /bin/true) plain and under\n"
                "LD_PRELOAD=libgpool_preload.so (next to gpool-bench, or $GPOOL_PRELOAD_LIB),\n"
                "interleaved, N starts each (default 200). Goal: preloaded at most 1 ms CPU above\n"
                "plain; --require-goal exits 1 when missed.\n"},
};

void bench_cli_strategies(FILE *f)
{
    fprintf(f,
            "strategies:\n"
            "  cuda          cuMemAlloc/cuMemFree per request, no caching\n"
            "  cuda-async    cuMemAllocAsync from the driver's default memory pool (needs a "
            "GPU:\n"
            "                the simulated driver has no memory pools)\n"
            "  bfc           a model of PyTorch's caching allocator, built from its published "
            "design\n"
            "                (best fit with coalescing, block splitting, 2 MiB/20 MiB segments)\n"
            "  gpool[:KEY=VAL,...]         this library (KEY=VAL: the GPOOL_* settings)\n"
            "  cuda-host     cuMemHostAlloc/cuMemFreeHost per request\n"
            "  gpool-pinned[:KEY=VAL,...]  this library's pinned host memory\n");
}

int bench_cli_help(FILE *f, const char *cmd)
{
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++) {
        if (strcmp(cmd, helps[i].name) != 0) continue;
        fputs(helps[i].text, f);
        if (strcmp(cmd, "view") && strcmp(cmd, "info") && strcmp(cmd, "hotpath") &&
            strcmp(cmd, "scale") && strcmp(cmd, "import") && strcmp(cmd, "startup"))
            bench_cli_strategies(f);
        return 0;
    }
    return -1;
}

int bench_cli_takes(const char *cmd, const char *opt)
{
    if (!strcmp(opt, "help") || !strcmp(opt, "version")) return 1;
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++) {
        if (strcmp(cmd, helps[i].name) != 0) continue;
        size_t n = strlen(opt);
        /* "--OPT" as a whole option of the help text ("--max" is not "--max-live") */
        for (const char *p = helps[i].text; (p = strstr(p, "--")); p += 2)
            if (!strncmp(p + 2, opt, n) && !(p[2 + n] == '-' || isalnum((unsigned char)p[2 + n])))
                return 1;
        return 0;
    }
    return 1; /* not a command: the caller says so */
}

int bench_cli_max_args(const char *cmd)
{
    static const char *const none[] = {"hotpath", "scale", "info"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        if (!strcmp(cmd, none[i])) return 0;
    if (!strcmp(cmd, "replay") || !strcmp(cmd, "fit") || !strcmp(cmd, "view")) return 1;
    return 256; /* compare: traces */
}

int bench_check_output(const char *opt, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!path || !*path) {
        snprintf(err, errlen, "%s: empty file name", opt);
        return -1;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: %s is a folder, not a file", opt, path);
            return -1;
        }
        if (access(path, W_OK) != 0) {
            snprintf(err, errlen, "%s: cannot write %s: %s", opt, path, strerror(errno));
            return -1;
        }
        return 0;
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot write %s: folder %s does not exist", opt, path, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "%s: cannot write %s: folder %s is not writable", opt, path, dir);
        return -1;
    }
    return 0;
}
