/* startup.c — `gpool-bench startup`: what LD_PRELOAD=libgpool_preload.so costs a process that
 * never calls CUDA (frameworks start shells, compilers, nvidia-smi under the drop-in). Starts a
 * program (default /bin/true) N times plain and N times preloaded, interleaved in one run so
 * that both see the same machine, and prints the medians of the child's CPU time (user + system,
 * from wait4) and of the wall time from spawn to reaped. Goal: the preloaded median at most
 * 1 ms CPU above the plain one. */
#include "bench.h"
#include "cli_help.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const double startup_goal_ms = 1.0;

/* The interposer next to the executable (build/), or $GPOOL_PRELOAD_LIB. */
static int find_preload(char *out, size_t len)
{
    const char *env = getenv("GPOOL_PRELOAD_LIB");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    snprintf(out, len, "%s/libgpool_preload.so", dirname(exe));
    return access(out, R_OK);
}

/* The environment without LD_PRELOAD, plus `extra` (NULL: none). Returns a malloc'd array. */
static char **child_env(const char *extra)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) env[k++] = environ[i];
    if (extra) env[k++] = (char *)extra;
    env[k] = NULL;
    return env;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One start of prog: its CPU and wall milliseconds; -1 when it could not run or failed. */
static int start_once(const char *prog, char **env, double *cpu_ms, double *wall_ms)
{
    char *argv[] = {(char *)prog, NULL};
    pid_t pid;
    double t0 = now_ms();
    if (posix_spawn(&pid, prog, NULL, NULL, argv, env) != 0) return -1;
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid) return -1;
    *wall_ms = now_ms() - t0;
    *cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
              (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_startup_main(int argc, char **argv)
{
    unsigned runs = 200;
    const char *prog = "/bin/true";
    int json = 0, require = 0;
    static const struct option opts[] = {
        {"runs", required_argument, NULL, 'n'}, {"program", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},       {"require-goal", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    optind = 0; /* argv[0] is the first option: parse from it */
    for (int o; (o = getopt_long(argc + 1, argv - 1, "", opts, NULL)) != -1;) {
        char *end;
        switch (o) {
        case 'n':
            errno = 0;
            runs = (unsigned)strtoul(optarg, &end, 10);
            if (errno || *end || runs < 1 || runs > 100000) {
                fprintf(stderr, "gpool-bench startup: --runs expects 1..100000\n");
                return 2;
            }
            break;
        case 'p':
            prog = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'r':
            require = 1;
            break;
        case 'h':
            bench_cli_help(stdout, "startup");
            return 0;
        default:
            bench_cli_help(stderr, "startup");
            return 2;
        }
    }
    char lib[PATH_MAX + 32], pre[PATH_MAX + 64];
    if (find_preload(lib, sizeof lib) != 0) {
        fprintf(stderr, "gpool-bench startup: cannot read %s\n", lib);
        return 1;
    }
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib);
    char **plain_env = child_env(NULL), **pre_env = child_env(pre);
    double *v = calloc(4 * (size_t)runs, sizeof *v);
    if (!plain_env || !pre_env || !v) {
        fprintf(stderr, "gpool-bench startup: out of host memory\n");
        free(plain_env), free(pre_env), free(v);
        return 1;
    }
    double *plain_cpu = v, *plain_wall = v + runs, *pre_cpu = v + 2 * runs,
           *pre_wall = v + 3 * runs;
    int rc = 0;
    for (unsigned i = 0; i < runs && !rc; i++) /* interleaved: both see the same machine */
        if (start_once(prog, plain_env, &plain_cpu[i], &plain_wall[i]) != 0 ||
            start_once(prog, pre_env, &pre_cpu[i], &pre_wall[i]) != 0) {
            fprintf(stderr, "gpool-bench startup: %s did not run and exit 0%s\n", prog,
                    i ? "" : " (plain or preloaded)");
            rc = 1;
        }
    if (!rc) {
        double pc = median(plain_cpu, runs), pw = median(plain_wall, runs);
        double qc = median(pre_cpu, runs), qw = median(pre_wall, runs);
        int met = qc - pc <= startup_goal_ms;
        if (json) {
            printf("{\"command\":\"startup\",\"program\":");
            bench_json_string(stdout, prog);
            printf(",\"runs\":%u,\"plain_cpu_ms\":%.3f,\"preload_cpu_ms\":%.3f,"
                   "\"plain_wall_ms\":%.3f,\"preload_wall_ms\":%.3f,\"goal_ms\":%.1f,"
                   "\"goal_met\":%s}\n",
                   runs, pc, qc, pw, qw, startup_goal_ms, met ? "true" : "false");
        } else {
            printf("startup: %s started %u times plain and %u under LD_PRELOAD=%s, interleaved "
                   "(medians; host figures, no CUDA call)\n",
                   prog, runs, runs, lib);
            printf("%10s %10s %10s\n", "", "cpu ms", "wall ms");
            printf("%10s %10.3f %10.3f\n", "plain", pc, pw);
            printf("%10s %10.3f %10.3f\n", "preloaded", qc, qw);
            printf("preloaded - plain: %+.3f ms CPU, %+.3f ms wall (goal <= %.0f ms CPU): %s\n",
                   qc - pc, qw - pw, startup_goal_ms, met ? "met" : "NOT met");
        }
        if (require && !met) rc = 1;
    }
    free(plain_env);
    free(pre_env);
    free(v);
    return rc;
}
