/* drvcost.c — an estimated cost per driver entry point, used to turn first-pass driver call
 * counts into an estimated first-pass driver time (gpool-bench compare).
 *
 * Every number below is an ESTIMATE (no GPU was available where the table was written); the
 * source says what it rests on. When the file named by GPOOL_BENCH_DRV_COSTS exists, each of
 * its lines "NAME MICROSECONDS" (NAME as bench_drvcost_name gives it, e.g. "cuMemCreate")
 * replaces that entry's estimate with the measured number. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    const char *name;
    double us;
    const char *source;
} table[BENCH_DRV_N] = {
    [BENCH_DRV_MEM_ALLOC] = {"cuMemAlloc", 10.0,
                             "estimate: a fresh device allocation creates and maps physical "
                             "memory in one call (one create+map+access at driver level)"},
    [BENCH_DRV_MEM_FREE] = {"cuMemFree", 10.0,
                            "estimate: cuda.h's API synchronization behavior: cuMemFree may "
                            "synchronize; priced like cuMemAlloc"},
    [BENCH_DRV_MEM_ALLOC_ASYNC] = {"cuMemAllocAsync", 1.0,
                                   "estimate: served from the driver's pool without a new "
                                   "mapping in the steady state"},
    [BENCH_DRV_MEM_FREE_ASYNC] = {"cuMemFreeAsync", 1.0, "estimate: as cuMemAllocAsync"},
    [BENCH_DRV_MEM_CREATE] = {"cuMemCreate", 10.0,
                              "estimate: per handle, not per byte (pytorch/pytorch#96995: the "
                              "cost of mapping is proportional to the number of physical "
                              "chunks, not their size)"},
    [BENCH_DRV_MEM_RELEASE] = {"cuMemRelease", 5.0, "estimate: per handle, as cuMemCreate"},
    [BENCH_DRV_MEM_MAP] = {"cuMemMap", 5.0,
                           "estimate: per handle (pytorch/pytorch#96995: mapping 10 separate "
                           "2 MiB pages takes 10x the time of one 20 MiB allocation)"},
    [BENCH_DRV_MEM_UNMAP] = {"cuMemUnmap", 10.0,
                             "estimate: per handle; pytorch/pytorch#96995 notes map changes "
                             "involve synchronous actions with the GPU"},
    [BENCH_DRV_MEM_SET_ACCESS] = {"cuMemSetAccess", 15.0,
                                  "estimate: writes page-table entries for the range "
                                  "(pytorch/pytorch#96995: map changes involve synchronous "
                                  "actions with the GPU)"},
    [BENCH_DRV_ADDRESS_RESERVE] = {"cuMemAddressReserve", 5.0,
                                   "estimate: virtual address range only, no physical memory"},
    [BENCH_DRV_ADDRESS_FREE] = {"cuMemAddressFree", 5.0, "estimate: as cuMemAddressReserve"},
    [BENCH_DRV_HOST] = {"cuMemHostAlloc", 50.0,
                        "estimate: pins host pages (NVIDIA/gdrcopy#129 measured about 70 us "
                        "to pin 64 KiB of device memory for a third-party device)"},
    [BENCH_DRV_EVENT] = {"cuEventRecord", 1.0, "estimate: event calls queue or query only"},
    [BENCH_DRV_STREAM] = {"cuStreamWaitEvent", 1.0, "estimate: as cuEventRecord"},
    [BENCH_DRV_OTHER] = {"cuCtxPushCurrent", 0.1,
                         "estimate: context and attribute queries touch no device state"},
};

static int loaded, measured;

/* Read GPOOL_BENCH_DRV_COSTS once (measured numbers, see the file's comment). */
static void load(void)
{
    if (loaded) return;
    loaded = 1;
    const char *path = getenv("GPOOL_BENCH_DRV_COSTS");
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f) return;
    char name[64];
    double us;
    while (fscanf(f, "%63s %lf", name, &us) == 2) {
        for (int e = 0; e < BENCH_DRV_N; e++) {
            if (strcmp(table[e].name, name) != 0 || us < 0) continue;
            table[e].us = us;
            table[e].source =
                "measured: the GPOOL_BENCH_DRV_COSTS file (gpu-drvcost, make gpu-check)";
            measured = 1;
        }
    }
    fclose(f);
}

double bench_drvcost_us(bench_drv e)
{
    load();
    return e < BENCH_DRV_N ? table[e].us : 0;
}

const char *bench_drvcost_name(bench_drv e)
{
    return e < BENCH_DRV_N ? table[e].name : "?";
}

const char *bench_drvcost_source(bench_drv e)
{
    load();
    return e < BENCH_DRV_N ? table[e].source : "?";
}

int bench_drvcost_measured(void)
{
    load();
    return measured;
}

double bench_drvcost_total_us(const uint64_t calls[BENCH_DRV_N])
{
    double t = 0;
    for (int e = 0; e < BENCH_DRV_N; e++)
        t += (double)calls[e] * bench_drvcost_us((bench_drv)e);
    return t;
}
