/* strat_cuda.c — the baselines without caching: one driver call per request.
 *   cuda        cuMemAlloc / cuMemFree
 *   cuda-async  cuMemAllocAsync / cuMemFreeAsync on the device's default pool (real GPU only)
 *   cuda-host   cuMemHostAlloc / cuMemFreeHost
 * "reserved" counts the bytes asked of the driver (what it rounds to is its own business). */
#include "bench.h"

#include <stdlib.h>

typedef struct cuda_state {
    bench_strategy_stats st;
} cuda_state;

static int cuda_init_common(bench_strategy *s, const bench_device *dev)
{
    s->dev = dev;
    s->state = calloc(1, sizeof(cuda_state));
    if (!s->state) return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
    return BENCH_OK;
}

static void count_alloc(bench_strategy *s, uint64_t size)
{
    cuda_state *c = s->state;
    c->st.reserved += size;
    if (c->st.reserved > c->st.peak_reserved) c->st.peak_reserved = c->st.reserved;
}

static int cu_result(bench_strategy *s, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return BENCH_OK;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return BENCH_OOM;
    return bench_strategy_fail(s, BENCH_ERR, "%s failed: %s", what, gp_cu_name(r));
}

static void cuda_stats(bench_strategy *s, bench_strategy_stats *out)
{
    *out = ((cuda_state *)s->state)->st;
}

static void cuda_fini(bench_strategy *s)
{
    free(s->state);
    s->state = NULL;
}

/* ---- cuda ---------------------------------------------------------------------------------- */

static int cuda_init(bench_strategy *s, const bench_device *dev)
{
    if (!dev->drv->cuMemAlloc || !dev->drv->cuMemFree)
        return bench_strategy_fail(s, BENCH_SKIP, "the driver has no cuMemAlloc");
    return cuda_init_common(s, dev);
}

static int cuda_alloc(bench_strategy *s, uint64_t size, CUstream stream, void **out)
{
    (void)stream; /* not stream-ordered: the driver call serves the request at once */
    cuda_state *c = s->state;
    CUdeviceptr p = 0;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_MEM_ALLOC]++;
    int rc = cu_result(s, s->dev->drv->cuMemAlloc(&p, size), "cuMemAlloc");
    if (rc != BENCH_OK) return rc;
    count_alloc(s, size);
    *out = (void *)(uintptr_t)p;
    return BENCH_OK;
}

static int cuda_free(bench_strategy *s, void *ptr, uint64_t size, CUstream stream)
{
    (void)stream; /* not stream-ordered (the driver synchronizes) */
    cuda_state *c = s->state;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_MEM_FREE]++;
    int rc = cu_result(s, s->dev->drv->cuMemFree((CUdeviceptr)(uintptr_t)ptr), "cuMemFree");
    if (rc == BENCH_OK) c->st.reserved -= size;
    return rc;
}

const bench_strategy_ops bench_strategy_cuda = {
    .name = "cuda",
    .label = "cuMemAlloc/cuMemFree per request, no caching",
    .init = cuda_init,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stats = cuda_stats,
    .fini = cuda_fini,
};

/* ---- cuda-async ---------------------------------------------------------------------------- */

static int cuda_async_init(bench_strategy *s, const bench_device *dev)
{
    if (dev->simulated)
        return bench_strategy_fail(s, BENCH_SKIP,
                                   "cuda-async measures the driver's own stream-ordered pool: "
                                   "real GPU only, skipped on the simulated driver");
    int pools = 0;
    if (!dev->drv->cuMemAllocAsync || !dev->drv->cuMemFreeAsync ||
        dev->drv->cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                       dev->dev) != CUDA_SUCCESS ||
        !pools)
        return bench_strategy_fail(s, BENCH_SKIP, "the device has no stream-ordered memory pools");
    return cuda_init_common(s, dev);
}

static int cuda_async_alloc(bench_strategy *s, uint64_t size, CUstream stream, void **out)
{
    cuda_state *c = s->state;
    CUdeviceptr p = 0;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_MEM_ALLOC_ASYNC]++;
    int rc = cu_result(s, s->dev->drv->cuMemAllocAsync(&p, size, stream), "cuMemAllocAsync");
    if (rc != BENCH_OK) return rc;
    count_alloc(s, size);
    *out = (void *)(uintptr_t)p;
    return BENCH_OK;
}

static int cuda_async_free(bench_strategy *s, void *ptr, uint64_t size, CUstream stream)
{
    cuda_state *c = s->state;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_MEM_FREE_ASYNC]++;
    int rc = cu_result(s, s->dev->drv->cuMemFreeAsync((CUdeviceptr)(uintptr_t)ptr, stream),
                       "cuMemFreeAsync");
    if (rc == BENCH_OK) c->st.reserved -= size;
    return rc;
}

static void cuda_async_fini(bench_strategy *s)
{
    if (s->dev && s->dev->drv) s->dev->drv->cuCtxSynchronize();
    cuda_fini(s);
}

const bench_strategy_ops bench_strategy_cuda_async = {
    .name = "cuda-async",
    .label = "cuMemAllocAsync/cuMemFreeAsync on the device's default pool",
    .init = cuda_async_init,
    .alloc = cuda_async_alloc,
    .free = cuda_async_free,
    .stats = cuda_stats,
    .fini = cuda_async_fini,
};

/* ---- cuda-host ----------------------------------------------------------------------------- */

static int cuda_host_init(bench_strategy *s, const bench_device *dev)
{
    if (!dev->drv->cuMemHostAlloc || !dev->drv->cuMemFreeHost)
        return bench_strategy_fail(s, BENCH_SKIP, "the driver has no cuMemHostAlloc");
    return cuda_init_common(s, dev);
}

static int cuda_host_alloc(bench_strategy *s, uint64_t size, CUstream stream, void **out)
{
    (void)stream; /* not stream-ordered: the driver call serves the request at once */
    cuda_state *c = s->state;
    void *p = NULL;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_HOST]++;
    int rc = cu_result(s, s->dev->drv->cuMemHostAlloc(&p, size, 0), "cuMemHostAlloc");
    if (rc != BENCH_OK) return rc;
    count_alloc(s, size);
    *out = p;
    return BENCH_OK;
}

static int cuda_host_free(bench_strategy *s, void *ptr, uint64_t size, CUstream stream)
{
    (void)stream; /* not stream-ordered (the driver synchronizes) */
    cuda_state *c = s->state;
    c->st.driver_calls++;
    c->st.by_entry[BENCH_DRV_HOST]++;
    int rc = cu_result(s, s->dev->drv->cuMemFreeHost(ptr), "cuMemFreeHost");
    if (rc == BENCH_OK) c->st.reserved -= size;
    return rc;
}

const bench_strategy_ops bench_strategy_cuda_host = {
    .name = "cuda-host",
    .label = "cuMemHostAlloc/cuMemFreeHost per request (pinned host memory)",
    .host = 1,
    .init = cuda_host_init,
    .alloc = cuda_host_alloc,
    .free = cuda_host_free,
    .stats = cuda_stats,
    .fini = cuda_fini,
};
