/* training_step.c — an ML training loop on gpool: the activations of every layer are allocated
 * on the way forward and freed in reverse on the way back, step after step, on one stream.
 *
 * The point to see: the first step gets memory from the driver (cuMemCreate, cuMemMap, ...);
 * every later step is served from gpool's cache, so steady state makes no driver calls at all.
 * The program prints the pool's driver-call counter before and after the steady-state steps.
 *
 * Build and run:  make examples && make run-examples   (on the simulated driver without a GPU)
 */
#include <cuda.h>
#include <gpool.h>
#include <stdio.h>
#include <stdlib.h>

/* CHECK_GPOOL and CHECK_CU: exit with a message naming the failed call. */
#define EXAMPLE_NAME "training_step"
#include "example_check.h"

enum { LAYERS = 16, STEPS = 50, WARMUP_STEPS = 1 };

/* Activation size of each layer for a batch: big feature maps early, small vectors late, plus
 * a few small tensors (normalisation statistics) that gpool serves from its small-block
 * caches. */
static size_t activation_bytes(int layer)
{
    static const size_t mib = (size_t)1 << 20;
    if (layer % 4 == 3) return 4096 + 512 * (size_t)layer; /* batch-norm statistics */
    return (64 * mib) >> (layer / 4);                      /* 64, 32, 16, 8 MiB */
}

static uint64_t driver_calls(gpool_t *pool)
{
    gpool_stats s = GPOOL_STATS_INIT;
    CHECK_GPOOL(gpool_get_stats(pool, &s));
    return s.driver_calls_total;
}

int main(void)
{
    /* A pool on device 0 with the default configuration (and GPOOL_CONF, if set). gpool loads
     * the driver itself and retains the device's primary context; we make that context current
     * to create our own stream, as a framework would. */
    gpool_t *pool;
    CHECK_GPOOL(gpool_create(NULL, &pool));
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    void *act[LAYERS];
    uint64_t calls_before = 0;
    for (int step = 0; step < STEPS; step++) {
        if (step == WARMUP_STEPS) calls_before = driver_calls(pool);
        /* forward: each layer's output is allocated on the training stream. Ordered
         * allocation: the block may be one freed on this stream whose kernels are still
         * queued -- stream order makes that safe, and no synchronisation is needed. */
        for (int l = 0; l < LAYERS; l++) {
            CHECK_GPOOL(gpool_alloc_async(pool, activation_bytes(l), NULL, stream, &act[l]));
            /* (a real framework launches the layer's kernel here, writing act[l]) */
            CHECK_CU(cuMemsetD8Async((CUdeviceptr)act[l], (unsigned char)l, 256, stream));
        }
        /* backward: activations die in reverse order, again ordered on the stream: the
         * memory is reusable by the next allocation on this stream at once. */
        for (int l = LAYERS - 1; l >= 0; l--)
            CHECK_GPOOL(gpool_free_async(pool, act[l], stream));
        if (step == 0)
            printf("after step 1 (warm-up): %llu driver calls (creating the pool, mapping "
                   "the working set)\n",
                   (unsigned long long)driver_calls(pool));
    }
    uint64_t calls_after = driver_calls(pool);
    CHECK_CU(cuStreamSynchronize(stream));

    gpool_stats s = GPOOL_STATS_INIT;
    CHECK_GPOOL(gpool_get_stats(pool, &s));
    const gpool_kind_stats *dev_stats = &s.kind[GPOOL_MEM_DEVICE];
    printf("%d steps x %d layers: %llu allocations, peak in use %.1f MiB, reserved %.1f MiB\n",
           STEPS, LAYERS, (unsigned long long)dev_stats->allocs,
           dev_stats->peak_in_use_bytes / 1048576.0, dev_stats->peak_reserved_bytes / 1048576.0);
    printf("driver_calls_total before steady state: %llu, after: %llu\n",
           (unsigned long long)calls_before, (unsigned long long)calls_after);
    printf("steady state (steps %d..%d): %llu driver calls\n", WARMUP_STEPS + 1, STEPS,
           (unsigned long long)(calls_after - calls_before));

    /* Tear down: our stream, then the pool (which gives every page back to the driver). */
    CHECK_CU(cuStreamDestroy(stream));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev));
    CHECK_GPOOL(gpool_destroy(pool));
    return calls_after == calls_before ? 0 : 1;
}
