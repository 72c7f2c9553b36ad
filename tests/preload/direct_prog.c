/* direct_prog.c — a program linked with -lcuda (the simulated libcuda.so.1) that calls the
 * driver's memory entry points by their linked names (cuda.h maps cuMemAlloc to cuMemAlloc_v2,
 * ...), as CUDA C programs do. Under LD_PRELOAD=libgpool_preload.so those calls must reach gpool.
 * Usage: direct_prog MODE; prints key=value lines, exits 0 when the mode's checks hold.
 *   serve    device, stream-ordered (legacy and per-thread), host allocations and cuMemGetInfo
 *   capture  cuMemAlloc/cuMemFree (and cudaMalloc/cudaFree under the interposer) during stream
 *            capture in each capture mode: the driver's answers, printed for comparison
 *   streams  300 live non-blocking streams */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "../../sim/gpool_sim.h"
#define PROG_DRIVER_LINKED
#include "prog_driver.h"

/* The per-thread-default-stream forms (declared by cuda.h only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

typedef gpool_status (*preload_stats_fn)(int, gpool_stats *);

/* The interposer's pool counters of device 0 ("pool=none" without the interposer). */
static void print_pool_stats(void)
{
    preload_stats_fn get;
    *(void **)&get = dlsym(RTLD_DEFAULT, "gpool_preload_stats_get");
    gpool_stats st = GPOOL_STATS_INIT;
    if (!get || get(0, &st) != GPOOL_OK) {
        printf("pool=none\n");
        return;
    }
    printf("pool_device_allocs=%llu pool_device_frees=%llu pool_host_allocs=%llu "
           "pool_host_frees=%llu\n",
           (unsigned long long)st.kind[GPOOL_MEM_DEVICE].allocs,
           (unsigned long long)st.kind[GPOOL_MEM_DEVICE].frees,
           (unsigned long long)(st.kind[GPOOL_MEM_HOST_PINNED].allocs +
                                st.kind[GPOOL_MEM_HOST_MAPPED].allocs),
           (unsigned long long)(st.kind[GPOOL_MEM_HOST_PINNED].frees +
                                st.kind[GPOOL_MEM_HOST_MAPPED].frees));
}

static int serve(void)
{
    enum { N = 2000, LIVE = 8 };
    CUdeviceptr live[LIVE] = {0};
    for (int i = 0; i < N; i++) {
        CUdeviceptr *slot = &live[i % LIVE];
        if (*slot) CHECK(cuMemFree(*slot) == CUDA_SUCCESS);
        size_t size = ((size_t)1 << 20) + (size_t)(i % 48) * (64 << 10); /* 1 MiB .. 4 MiB */
        CHECK(cuMemAlloc(slot, size) == CUDA_SUCCESS && *slot);
        *(volatile char *)(uintptr_t)*slot = 1; /* simulated device memory is host memory */
    }
    for (int i = 0; i < LIVE; i++)
        CHECK(cuMemFree(live[i]) == CUDA_SUCCESS);
    /* stream-ordered: the legacy stream, a created stream, the per-thread stream (NULL in the
     * _ptsz forms), each block written by "a kernel" on its stream before the free */
    CUstream s;
    CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
    for (int i = 0; i < 100; i++) {
        CUdeviceptr a, b, c;
        CHECK(cuMemAllocAsync(&a, 1 << 20, NULL) == CUDA_SUCCESS);
        CHECK(cuMemAllocAsync(&b, 8192, s) == CUDA_SUCCESS);
        CHECK(cuMemAllocAsync_ptsz(&c, 65536, NULL) == CUDA_SUCCESS);
        CHECK(gpoolsim_touch(NULL, a, 1 << 20, 1) == CUDA_SUCCESS);
        CHECK(gpoolsim_touch(s, b, 8192, 1) == CUDA_SUCCESS);
        CHECK(gpoolsim_touch(CU_STREAM_PER_THREAD, c, 65536, 1) == CUDA_SUCCESS);
        CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS);
        CHECK(cuMemFreeAsync(b, s) == CUDA_SUCCESS);
        CHECK(cuMemFreeAsync_ptsz(c, NULL) == CUDA_SUCCESS);
    }
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS);
    /* host memory: pinned, mapped, cuMemAllocHost */
    for (int i = 0; i < 50; i++) {
        void *h1, *h2, *h3;
        CHECK(cuMemHostAlloc(&h1, 1 << 20, 0) == CUDA_SUCCESS);
        CHECK(cuMemHostAlloc(&h2, 4096, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
        CHECK(cuMemAllocHost(&h3, 100000) == CUDA_SUCCESS);
        memset(h1, 1, 1 << 20);
        memset(h2, 2, 4096);
        memset(h3, 3, 100000);
        CHECK(cuMemFreeHost(h1) == CUDA_SUCCESS && cuMemFreeHost(h2) == CUDA_SUCCESS);
        CHECK(cuMemFreeHost(h3) == CUDA_SUCCESS);
    }
    /* free memory: the driver's (capacity - bytes in use), or gpool's (its cache counts as free) */
    size_t fr = 0, total = 0;
    CHECK(cuMemGetInfo(&fr, &total) == CUDA_SUCCESS && fr <= total && total > 0);
    size_t driver_free = total - gpoolsim_bytes_in_use(0);
    printf("allocs=%d cuMemAlloc=%lu cuMemFree=%lu cuMemAllocAsync=%lu cuMemFreeAsync=%lu "
           "cuMemHostAlloc=%lu cuMemAllocHost=%lu cuMemFreeHost=%lu cuMemCreate=%lu\n",
           N, gpoolsim_call_count("cuMemAlloc"), gpoolsim_call_count("cuMemFree"),
           gpoolsim_call_count("cuMemAllocAsync"), gpoolsim_call_count("cuMemFreeAsync"),
           gpoolsim_call_count("cuMemHostAlloc"), gpoolsim_call_count("cuMemAllocHost"),
           gpoolsim_call_count("cuMemFreeHost"), gpoolsim_call_count("cuMemCreate"));
    printf("info_free_above_driver=%d violations=%lu\n", fr > driver_free, gpoolsim_violations());
    print_pool_stats();
    return 0;
}

typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_free_fn)(void *);

/* One capture on a new stream in `mode`: what cuMemAlloc, cuMemFree (of a block allocated
 * before) and, under the interposer, cudaMalloc/cudaFree answer during it, then what
 * cuStreamEndCapture answers. */
static int capture_once(const char *name, CUstreamCaptureMode mode)
{
    cuda_malloc_fn rt_malloc;
    cuda_free_fn rt_free;
    *(void **)&rt_malloc = dlsym(RTLD_DEFAULT, "cudaMalloc");
    *(void **)&rt_free = dlsym(RTLD_DEFAULT, "cudaFree");
    CUstream s;
    CUdeviceptr before = 0, during = 0;
    CUgraph g = NULL;
    CHECK(cuMemAlloc(&before, 1 << 20) == CUDA_SUCCESS);
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture(s, mode) == CUDA_SUCCESS);
    CUresult alloc = cuMemAlloc(&during, 1 << 20);
    CUresult fr = cuMemFree(before);
    int rt_alloc = -1, rt_fr = -1;
    void *rt_p = NULL;
    if (rt_malloc && rt_free) { /* only the interposer exports them here */
        rt_alloc = rt_malloc(&rt_p, 4096);
        if (rt_alloc == 0) rt_fr = rt_free(rt_p);
    }
    CUresult end = cuStreamEndCapture(s, &g);
    printf("%s: cuMemAlloc=%d cuMemFree=%d cudaMalloc=%d cudaFree=%d cuStreamEndCapture=%d\n", name,
           (int)alloc, (int)fr, rt_alloc, rt_fr, (int)end);
    if (g) CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    if (alloc == CUDA_SUCCESS) CHECK(cuMemFree(during) == CUDA_SUCCESS);
    if (fr != CUDA_SUCCESS) CHECK(cuMemFree(before) == CUDA_SUCCESS); /* still allocated */
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
    return 0;
}

/* A capture on another thread: in thread-local mode the calling thread may allocate, in
 * global mode it may not (cuda.h, cuThreadExchangeStreamCaptureMode). */
struct other_capture {
    CUstreamCaptureMode mode;
    CUcontext ctx;
    pthread_barrier_t began, done;
    CUresult end;
};

static void *capture_thread(void *arg)
{
    struct other_capture *o = arg;
    CUstream s;
    CUgraph g = NULL;
    int ok = cuCtxSetCurrent(o->ctx) == CUDA_SUCCESS &&
             cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
             cuStreamBeginCapture(s, o->mode) == CUDA_SUCCESS;
    pthread_barrier_wait(&o->began);
    pthread_barrier_wait(&o->done);
    o->end = ok ? cuStreamEndCapture(s, &g) : CUDA_ERROR_UNKNOWN;
    if (g) cuGraphDestroy(g);
    if (ok) cuStreamDestroy(s);
    return NULL;
}

static int capture_other_thread(const char *name, CUstreamCaptureMode mode)
{
    struct other_capture o = {.mode = mode};
    pthread_t t;
    CHECK(cuCtxGetCurrent(&o.ctx) == CUDA_SUCCESS);
    pthread_barrier_init(&o.began, NULL, 2);
    pthread_barrier_init(&o.done, NULL, 2);
    CHECK(pthread_create(&t, NULL, capture_thread, &o) == 0);
    pthread_barrier_wait(&o.began);
    CUdeviceptr p = 0;
    CUresult alloc = cuMemAlloc(&p, 1 << 20);
    if (alloc == CUDA_SUCCESS) cuMemFree(p);
    pthread_barrier_wait(&o.done);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&o.began);
    pthread_barrier_destroy(&o.done);
    printf("%s: cuMemAlloc=%d cuStreamEndCapture=%d\n", name, (int)alloc, (int)o.end);
    return 0;
}

static int capture(void)
{
    CHECK(capture_other_thread("other_thread_local", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == 0);
    CHECK(capture_other_thread("other_global", CU_STREAM_CAPTURE_MODE_GLOBAL) == 0);
    CHECK(capture_once("global", CU_STREAM_CAPTURE_MODE_GLOBAL) == 0);
    CHECK(capture_once("thread_local", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == 0);
    CHECK(capture_once("relaxed", CU_STREAM_CAPTURE_MODE_RELAXED) == 0);
    /* once every capture ended, the cached pairs reach the driver no more */
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 4096) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS);
    gpoolsim_reset_counts();
    for (int i = 0; i < 100; i++)
        CHECK(cuMemAlloc(&p, 4096) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS);
    printf("after_cuMemAlloc=%lu\n", gpoolsim_call_count("cuMemAlloc"));
    print_pool_stats();
    return 0;
}

/* 300 live non-blocking streams: more than cudafree_flush=event tracks. */
static int streams(void)
{
    enum { N = 300 };
    static CUstream s[N];
    for (int i = 0; i < N; i++)
        CHECK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUdeviceptr p;
    for (int i = 0; i < 10; i++)
        CHECK(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS);
    for (int i = 0; i < N; i++)
        CHECK(cuStreamDestroy(s[i]) == CUDA_SUCCESS);
    printf("streams=%d\n", N);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "serve";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (prog_linked_setup(1) != 0) return 1;
    if (!strcmp(mode, "serve")) return serve();
    if (!strcmp(mode, "capture")) return capture();
    if (!strcmp(mode, "streams")) return streams();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
}
