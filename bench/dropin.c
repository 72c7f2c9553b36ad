/* dropin.c — `gpool-bench hotpath --dropin`: the alloc+free pair of a cached block reached
 * through libgpool_preload.so (cudaMalloc/cudaFree and cuMemAlloc_v2/cuMemFree_v2, by a client
 * program run under LD_PRELOAD, bench/dropin/client.c), next to gpool_alloc/gpool_free in this
 * process, at several heap sizes (live blocks held) and block sizes, in one run.
 *
 * Each row: the library's pair (a default pool holding `live` blocks of the size), then the
 * client for each API (a fresh process holding the same blocks through the interposer, default
 * configuration), then the same client after it created a non-blocking stream (cudaFree then
 * goes through the batch: see preload/preload_streams.c). The ratio the goal applies to is the
 * default configuration's (the larger of the two APIs) over the library's pair. */
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const uint64_t dropin_sizes[] = {512, 4096, 1 << 20};
static const uint64_t dropin_heaps[] = {10, 1000, 20000, 100000};

size_t bench_dropin_default_rows(const uint64_t **sizes, size_t *n_sizes, const uint64_t **heaps,
                                 size_t *n_heaps)
{
    *sizes = dropin_sizes;
    *n_sizes = sizeof dropin_sizes / sizeof dropin_sizes[0];
    *heaps = dropin_heaps;
    *n_heaps = sizeof dropin_heaps / sizeof dropin_heaps[0];
    return *n_sizes * *n_heaps;
}

/* Device memory the row needs: the live blocks, with room for gpool's rounding. */
static uint64_t row_capacity(uint64_t size, uint64_t live)
{
    uint64_t need = (size + size / 4) * (live + 64) + BENCH_GIB;
    return need < 8 * BENCH_GIB ? 8 * BENCH_GIB : need;
}

static int library_pair(const bench_device *dev, uint64_t size, uint64_t live, uint64_t pairs,
                        unsigned rounds, double *ns, char *err, size_t errlen)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.device = dev->ordinal;
    gpool_t *pool = NULL;
    gpool_status st = gpool_create(&cfg, &pool);
    if (st != GPOOL_OK) {
        bench_gpool_msg(err, errlen, "gpool_create", st);
        return -1;
    }
    void **held = calloc(live ? live : 1, sizeof *held);
    int rc = held ? 0 : -1;
    if (!held) snprintf(err, errlen, "out of host memory");
    for (uint64_t i = 0; rc == 0 && i < live; i++)
        if (gpool_alloc(pool, size, NULL, &held[i]) != GPOOL_OK) {
            snprintf(err, errlen, "%llu live blocks of %llu bytes do not fit (%llu held)",
                     (unsigned long long)live, (unsigned long long)size, (unsigned long long)i);
            rc = 1;
        }
    double best = 0;
    for (unsigned r = 0; rc == 0 && r <= rounds; r++) { /* round 0 warms up */
        uint64_t t0 = bench_now_ns();
        for (uint64_t i = 0; i < pairs; i++) {
            void *p;
            gpool_status pst = gpool_alloc(pool, size, NULL, &p);
            const char *call = "gpool_alloc";
            if (pst == GPOOL_OK) pst = gpool_free(pool, p), call = "gpool_free";
            if (pst != GPOOL_OK) {
                bench_gpool_msg(err, errlen, call, pst);
                rc = -1;
                break;
            }
        }
        double per = (double)(bench_now_ns() - t0) / (double)pairs;
        if (r && (best == 0 || per < best)) best = per;
    }
    free(held);
    gpool_destroy(pool);
    *ns = best;
    return rc;
}

/* Run the client; its ns_per_pair, or -1 with err. */
static int client_pair(const char *dir, const bench_device *dev, const char *api, uint64_t size,
                       uint64_t live, uint64_t pairs, unsigned rounds, double *ns, char *err,
                       size_t errlen)
{
    char cmd[PATH_MAX * 3 + 256], mem[64] = "";
    if (dev->simulated)
        snprintf(mem, sizeof mem, "GPOOL_SIM_MEMORY=%llu",
                 (unsigned long long)row_capacity(size, live));
    snprintf(cmd, sizeof cmd,
             "env -u GPOOL_CONF %s LD_PRELOAD='%s/libgpool_preload.so' '%s/bench/dropin_client' "
             "%s %llu %llu %llu %u 2>&1",
             mem, dir, dir, api, (unsigned long long)size, (unsigned long long)live,
             (unsigned long long)pairs, rounds);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(err, errlen, "cannot run %s: %s", cmd, strerror(errno));
        return -1;
    }
    char out[1024] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    const char *v = strstr(out, "ns_per_pair=");
    if (st != 0 || !v) {
        out[strcspn(out, "\n")] = 0;
        snprintf(err, errlen, "client %s %llu %llu: %s", api, (unsigned long long)size,
                 (unsigned long long)live, out[0] ? out : "no output");
        return -1;
    }
    *ns = strtod(v + strlen("ns_per_pair="), NULL);
    return 0;
}

int bench_dropin_run(const bench_device *dev, uint64_t size, uint64_t live, uint64_t pairs,
                     unsigned rounds, bench_dropin_row *row, char *err, size_t errlen)
{
    memset(row, 0, sizeof *row);
    row->size = size;
    row->live = live;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(err, errlen, "cannot find gpool-bench's directory");
        return -1;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    uint64_t cap = row_capacity(size, live);
    if (dev->simulated && cap > dev->total_mem) bench_sim_set_capacity(dev->ordinal, cap);
    /* the 1 MiB rows go through gpool's arena: fewer pairs keep them short */
    uint64_t p = size > 64 * BENCH_KIB ? pairs / 8 + 1 : pairs;
    int rc = library_pair(dev, size, live, p, rounds, &row->library_ns, err, errlen);
    if (rc != 0) return rc;
    if (client_pair(exe, dev, "runtime", size, live, p, rounds, &row->runtime_ns, err, errlen) ||
        client_pair(exe, dev, "driver", size, live, p, rounds, &row->driver_ns, err, errlen) ||
        client_pair(exe, dev, "runtime-nb", size, live, p, rounds, &row->batch_ns, err, errlen))
        return -1;
    double worst = row->runtime_ns > row->driver_ns ? row->runtime_ns : row->driver_ns;
    row->ratio = row->library_ns > 0 ? worst / row->library_ns : 0;
    return 0;
}
