/* gpu-latency — device-memory allocation latency: one alloc + free pair of 4 KiB, 1 MiB and
 * 64 MiB with gpool (cached, the steady state), cuMemAlloc/cuMemFree, and
 * cuMemAllocAsync/cuMemFreeAsync + cuStreamSynchronize (the driver's stream-ordered pool).
 * Host clocks (CLOCK_MONOTONIC) around each pair; every pair is complete when the clock stops
 * (gpool and cuMemAlloc/cuMemFree are synchronous, the async pair is followed by a stream
 * synchronize). Prints a markdown table; on the simulated driver it says so.
 *   gpu-latency [--iters N] [--device N]
 * Exit status: 0, or 1 when a call fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cudrv.h"
#include "gpool.h"

typedef struct result {
    int ok; /* 1 measured, 0 unavailable, -1 failed */
    double p50_us, p99_us;
    char note[160];
} result;

static void summarize(uint64_t *t, int n, result *r)
{
    qsort(t, (size_t)n, sizeof *t, cmp_u64);
    r->ok = 1;
    r->p50_us = (double)t[n / 2] / 1e3;
    r->p99_us = (double)t[(size_t)n * 99 / 100] / 1e3;
}

static cudrv D;

static void bench_gpool(gpool_t *pool, size_t size, int iters, uint64_t *t, result *r)
{
    void *p;
    if (gpool_alloc(pool, size, NULL, &p) != GPOOL_OK || gpool_free(pool, p) != GPOOL_OK) {
        r->ok = -1;
        snprintf(r->note, sizeof r->note, "gpool: %s", gpool_last_error());
        return;
    }
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        gpool_status a = gpool_alloc(pool, size, NULL, &p);
        gpool_status f = a == GPOOL_OK ? gpool_free(pool, p) : a;
        t[i] = now_ns() - t0;
        if (a != GPOOL_OK || f != GPOOL_OK) {
            r->ok = -1;
            snprintf(r->note, sizeof r->note, "gpool: %s", gpool_last_error());
            return;
        }
    }
    summarize(t, iters, r);
}

static void bench_cuda(size_t size, int iters, uint64_t *t, result *r)
{
    if (!D.cuMemAlloc || !D.cuMemFree) {
        snprintf(r->note, sizeof r->note, "driver lacks cuMemAlloc");
        return;
    }
    for (int i = 0; i < iters; i++) {
        CUdeviceptr p;
        uint64_t t0 = now_ns();
        CUresult a = D.cuMemAlloc(&p, size);
        CUresult f = a == CUDA_SUCCESS ? D.cuMemFree(p) : a;
        t[i] = now_ns() - t0;
        if (a != CUDA_SUCCESS || f != CUDA_SUCCESS) {
            r->ok = -1;
            snprintf(r->note, sizeof r->note, "cuMemAlloc/cuMemFree: %s",
                     cudrv_err(&D, a != CUDA_SUCCESS ? a : f));
            return;
        }
    }
    summarize(t, iters, r);
}

static void bench_async(CUstream s, size_t size, int iters, uint64_t *t, result *r)
{
    if (!D.cuMemAllocAsync || !D.cuMemFreeAsync || !s) {
        snprintf(r->note, sizeof r->note, "driver lacks cuMemAllocAsync");
        return;
    }
    for (int i = -1; i < iters; i++) { /* i = -1: warm the driver's pool */
        CUdeviceptr p;
        uint64_t t0 = now_ns();
        CUresult a = D.cuMemAllocAsync(&p, size, s);
        CUresult f = a == CUDA_SUCCESS ? D.cuMemFreeAsync(p, s) : a;
        CUresult y = f == CUDA_SUCCESS ? D.cuStreamSynchronize(s) : f;
        if (i >= 0) t[i] = now_ns() - t0;
        if (y != CUDA_SUCCESS) {
            r->ok = -1;
            snprintf(r->note, sizeof r->note, "cuMemAllocAsync/cuMemFreeAsync: %s",
                     cudrv_err(&D, y));
            return;
        }
    }
    summarize(t, iters, r);
}

static void cell(const result *r)
{
    if (r->ok == 1)
        printf(" %.2f / %.2f |", r->p50_us, r->p99_us);
    else
        printf(" %s: %s |", r->ok < 0 ? "FAILED" : "n/a", r->note);
}

int main(int argc, char **argv)
{
    int iters = 1000, device = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: gpu-latency [--iters N] [--device N]\n");
            return 2;
        }
    }
    if (iters < 10) iters = 10;
    char err[512];
    if (cudrv_load(&D, err, sizeof err) != 0) {
        fprintf(stderr, "gpu-latency: %s\n", err);
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    char name[256] = "?";
    if (D.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        D.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "gpu-latency: cannot open device %d\n", device);
        return 1;
    }
    if (D.cuDeviceGetName) D.cuDeviceGetName(name, sizeof name, dev);
    CUstream s = NULL;
    if (D.cuStreamCreate) D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    /* The default pool's release threshold is 0: every synchronize would hand its memory back
     * to the OS and each timed pair would map fresh memory. Keep it, as PyTorch and RMM
     * configure the pool, so that the column measures the pool itself. */
    const char *pool_note = "";
    CUmemoryPool mempool;
    cuuint64_t keep = UINT64_MAX;
    if (s && D.cuDeviceGetDefaultMemPool && D.cuMemPoolSetAttribute &&
        D.cuDeviceGetDefaultMemPool(&mempool, dev) == CUDA_SUCCESS &&
        D.cuMemPoolSetAttribute(mempool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS)
        pool_note = " cuMemAllocAsync: the device's default pool, release threshold UINT64_MAX.";
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.device = device;
    gpool_t *pool;
    if (gpool_create(&cfg, &pool) != GPOOL_OK) {
        fprintf(stderr, "gpu-latency: gpool_create: %s\n", gpool_last_error());
        return 1;
    }
    int sim = cudrv_is_sim(&D);
    printf("### Device-memory allocation latency%s\n\n",
           sim ? " (SIMULATED driver, not a GPU)" : "");
    printf("Device %d: %s, driver %d.%d (%s). One alloc + free pair, host clock, microseconds "
           "p50 / p99 over %d pairs (64 MiB: %d).%s\n\n",
           device, sim ? "simulated" : name, D.version / 1000, D.version % 1000 / 10, D.path, iters,
           iters / 5 < 10 ? 10 : iters / 5, pool_note);
    printf("| size | gpool | cuMemAlloc + cuMemFree | cuMemAllocAsync + cuMemFreeAsync + sync |\n");
    printf("|---|---|---|---|\n");
    static const size_t sizes[] = {4 << 10, 1 << 20, 64 << 20};
    static const char *const labels[] = {"4 KiB", "1 MiB", "64 MiB"};
    uint64_t *t = malloc(sizeof *t * (size_t)iters);
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        int n = k == 2 ? (iters / 5 < 10 ? 10 : iters / 5) : iters;
        result g = {0}, c = {0}, a = {0};
        bench_gpool(pool, sizes[k], n, t, &g);
        bench_cuda(sizes[k], n, t, &c);
        bench_async(s, sizes[k], n, t, &a);
        printf("| %s |", labels[k]);
        cell(&g);
        cell(&c);
        cell(&a);
        printf("\n");
        failed |= g.ok < 0 || c.ok < 0 || a.ok < 0;
    }
    free(t);
    gpool_destroy(pool);
    if (s) D.cuStreamDestroy(s);
    D.cuCtxSetCurrent(NULL);
    D.cuDevicePrimaryCtxRelease(dev);
    return failed;
}
