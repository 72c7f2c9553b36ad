/* gpu-drvcost — the cost of one call of each driver entry point the first pass makes, measured
 * on this machine's device: cuMemAddressReserve/Free, cuMemCreate/Map/SetAccess/Unmap/Release
 * of one granularity page (2 MiB), cuMemAlloc/cuMemFree of 2 MiB, cuMemHostAlloc/FreeHost of
 * 2 MiB, cuEventRecord, cuStreamWaitEvent and cuCtxGetCurrent (the "Other" class).
 * Median over --iters calls (host clock around each call). Writes "NAME MICROSECONDS" lines
 * to --out FILE (the format GPOOL_BENCH_DRV_COSTS reads, bench/drvcost.c) and a markdown
 * table to stdout. On the simulated driver the numbers are the simulator's, and it says so.
 *   gpu-drvcost [--iters N] [--device N] [--out FILE]
 * Exit status: 0, or 1 when a call fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "driver.h"

enum {
    RESERVE,
    ADDR_FREE,
    CREATE,
    MAP,
    ACCESS,
    UNMAP,
    RELEASE,
    ALLOC,
    FREE,
    HOST,
    EVENT,
    STREAM,
    OTHER,
    N
};
static const char *names[N] = {
    "cuMemAddressReserve", "cuMemAddressFree",  "cuMemCreate",     "cuMemMap",  "cuMemSetAccess",
    "cuMemUnmap",          "cuMemRelease",      "cuMemAlloc",      "cuMemFree", "cuMemHostAlloc",
    "cuEventRecord",       "cuStreamWaitEvent", "cuCtxPushCurrent"};
static uint64_t *t[N];

#define TIMED(e, i, call)                                                                          \
    do {                                                                                           \
        uint64_t t0_ = now_ns();                                                                   \
        CUresult r_ = (call);                                                                      \
        t[e][i] = now_ns() - t0_;                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "gpu-drvcost: %s failed: %s\n", #call, gp_cu_name(r_));                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int measure(const gp_driver *d, CUdevice dev, int iters, size_t gran)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUstream s = NULL;
    CUevent ev = NULL;
    if (d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        d->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        fprintf(stderr, "gpu-drvcost: cannot create a stream and an event\n");
        return 1;
    }
    for (int i = 0; i < iters; i++) {
        CUdeviceptr va = 0, p = 0;
        CUmemGenericAllocationHandle h = 0;
        void *host = NULL;
        CUcontext cur = NULL;
        TIMED(RESERVE, i, d->cuMemAddressReserve(&va, gran, gran, 0, 0));
        TIMED(CREATE, i, d->cuMemCreate(&h, gran, &prop, 0));
        TIMED(MAP, i, d->cuMemMap(va, gran, 0, h, 0));
        TIMED(ACCESS, i, d->cuMemSetAccess(va, gran, &acc, 1));
        TIMED(UNMAP, i, d->cuMemUnmap(va, gran));
        TIMED(RELEASE, i, d->cuMemRelease(h));
        TIMED(ADDR_FREE, i, d->cuMemAddressFree(va, gran));
        TIMED(ALLOC, i, d->cuMemAlloc(&p, gran));
        TIMED(FREE, i, d->cuMemFree(p));
        TIMED(HOST, i, d->cuMemHostAlloc(&host, gran, 0));
        d->cuMemFreeHost(host);
        TIMED(EVENT, i, d->cuEventRecord(ev, s));
        TIMED(STREAM, i, d->cuStreamWaitEvent(s, ev, 0));
        TIMED(OTHER, i, d->cuCtxGetCurrent(&cur));
    }
    d->cuStreamSynchronize(s);
    d->cuEventDestroy(ev);
    d->cuStreamDestroy(s);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = 200, ordinal = 0;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            ordinal = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "usage: gpu-drvcost [--iters N] [--device N] [--out FILE]\n");
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    const gp_driver *d;
    if (gp_driver_get(&d) != GPOOL_OK) {
        fprintf(stderr, "gpu-drvcost: %s\n", gpool_last_error());
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    if (d->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
        d->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        d->cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "gpu-drvcost: no device %d\n", ordinal);
        return 1;
    }
    char name[128] = "?";
    d->cuDeviceGetName(name, sizeof name, dev);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    size_t gran = 0;
    if (d->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
            CUDA_SUCCESS ||
        !gran) {
        fprintf(stderr, "gpu-drvcost: no VMM granularity on device %d\n", ordinal);
        return 1;
    }
    for (int e = 0; e < N; e++)
        if (!(t[e] = calloc((size_t)iters, sizeof *t[e]))) return 1;
    int rc = measure(d, dev, iters, gran);
    FILE *f = out && rc == 0 ? fopen(out, "w") : NULL;
    if (out && rc == 0 && !f) {
        fprintf(stderr, "gpu-drvcost: cannot write %s\n", out);
        rc = 1;
    }
    int sim = strstr(d->path, "sim") != NULL;
    printf("### Driver entry-point cost, device %d (%s)%s\n\n", ordinal, name,
           sim ? " — SIMULATED driver: not GPU numbers" : "");
    printf("| entry point | median us | p90 us | calls |\n|---|---|---|---|\n");
    for (int e = 0; e < N && rc == 0; e++) {
        qsort(t[e], (size_t)iters, sizeof *t[e], cmp_u64);
        double med = (double)t[e][iters / 2] / 1e3, p90 = (double)t[e][iters * 9 / 10] / 1e3;
        printf("| %s | %.2f | %.2f | %d |\n", names[e], med, p90, iters);
        if (f) fprintf(f, "%s %.3f\n", names[e], med);
    }
    if (f) fclose(f);
    for (int e = 0; e < N; e++)
        free(t[e]);
    d->cuDevicePrimaryCtxRelease(dev);
    return rc;
}
