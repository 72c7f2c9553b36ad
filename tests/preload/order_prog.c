/* order_prog.c — CUDA programs that are correct on CUDA's own allocator and must stay correct
 * under LD_PRELOAD=libgpool_preload.so (tests/test_preload_order.c). Linked against the
 * stand-in libcudart (tests/preload/cudart_standin.c) like runtime_prog; the driver is the
 * simulator ($GPOOL_LIBCUDA), reached through dlsym as cudart reaches it, so stream creation
 * and the memory entry points go through the interposer. Kernels are gpoolsim_touch. Usage:
 * order_prog MODE; prints key=value lines, exits 0 when the mode's checks hold. Ordering
 * violations are the simulator's (GPOOL_SIM_STRICT=1 aborts at the first). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_check.h"

unsigned long standin_calls(void);
unsigned long standin_null_frees(void);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);

static void *lib;
static CUresult (*touch)(CUstream, CUdeviceptr, size_t, int);
static unsigned long (*violations)(void);
static unsigned long (*sim_count)(const char *);
static size_t (*bytes_in_use)(int);
static CUresult (*device_access)(int, const void *, size_t, int);
static CUresult (*stream_create)(CUstream *, unsigned);
static CUresult (*ctx_set)(CUcontext);
static CUresult (*ctx_push)(CUcontext);
static CUresult (*ctx_pop)(CUcontext *);
static CUresult (*retain)(CUcontext *, CUdevice);
static CUresult (*dev_get)(CUdevice *, int);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*host_alloc)(void **, size_t, unsigned);
static CUresult (*host_get_flags)(unsigned *, void *);
static CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
static CUresult (*free_async)(CUdeviceptr, CUstream);
static CUresult (*ctx_sync)(void);
static CUcontext ctx0;

#define SYM(var, name) *(void **)&(var) = dlsym(lib, name)

/* Load the driver as cudart does and make device 0's primary context current. */
static int setup(void)
{
    const char *path = getenv("GPOOL_LIBCUDA");
    lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(lib);
    CUresult (*init)(unsigned);
    SYM(init, "cuInit");
    SYM(touch, "gpoolsim_touch");
    SYM(violations, "gpoolsim_violations");
    SYM(sim_count, "gpoolsim_call_count");
    SYM(bytes_in_use, "gpoolsim_bytes_in_use");
    SYM(device_access, "gpoolsim_device_access");
    SYM(stream_create, "cuStreamCreate");
    SYM(ctx_set, "cuCtxSetCurrent");
    SYM(ctx_push, "cuCtxPushCurrent_v2");
    SYM(ctx_pop, "cuCtxPopCurrent_v2");
    SYM(retain, "cuDevicePrimaryCtxRetain");
    SYM(dev_get, "cuDeviceGet");
    SYM(mem_free, "cuMemFree_v2");
    SYM(host_alloc, "cuMemHostAlloc");
    SYM(host_get_flags, "cuMemHostGetFlags");
    SYM(alloc_async, "cuMemAllocAsync");
    SYM(free_async, "cuMemFreeAsync");
    SYM(ctx_sync, "cuCtxSynchronize");
    CHECK(init && touch && violations && sim_count && stream_create && ctx_set && retain &&
          dev_get && mem_free && host_alloc && host_get_flags && alloc_async && free_async);
    CUdevice dev;
    CHECK(init(0) == CUDA_SUCCESS && dev_get(&dev, 0) == CUDA_SUCCESS);
    CHECK(retain(&ctx0, dev) == CUDA_SUCCESS && ctx_set(ctx0) == CUDA_SUCCESS);
    return 0;
}

enum { ROUNDS = 8, BLOCK = 1 << 20 };

/* A kernel on blocking stream A writes a block, cudaFree; the next cudaMalloc's block is
 * written on blocking stream B (flags = 0: cudaStreamCreate's), or on a non-blocking one.
 * The streams are ordered only through the free. */
static int two_streams(unsigned flags)
{
    CUstream a, b;
    CHECK(stream_create(&a, flags) == CUDA_SUCCESS && stream_create(&b, flags) == CUDA_SUCCESS);
    int same = 0;
    void *keep = NULL;
    CHECK(cudaMalloc(&keep, BLOCK) == cudaSuccess); /* the pool exists before the streams */
    for (int i = 0; i < ROUNDS; i++) {
        void *p, *q;
        CHECK(cudaMalloc(&p, BLOCK) == cudaSuccess);
        CHECK(touch(a, (CUdeviceptr)(uintptr_t)p, BLOCK, 1) == CUDA_SUCCESS);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK(cudaMalloc(&q, BLOCK) == cudaSuccess);
        same += p == q;
        CHECK(touch(b, (CUdeviceptr)(uintptr_t)q, BLOCK, 1) == CUDA_SUCCESS);
        CHECK(cudaFree(q) == cudaSuccess);
    }
    CHECK(cudaFree(keep) == cudaSuccess);
    printf("same_block=%d violations=%lu cuEventRecord=%lu cuCtxSynchronize=%lu\n", same,
           violations(), sim_count("cuEventRecord"), sim_count("cuCtxSynchronize"));
    return violations() == 0 ? 0 : 2;
}

/* Per-thread default streams: one thread writes a block on its own default stream and frees
 * it, another allocates and writes on its own. */
struct ptds_arg {
    void *p;
    int async, same;
    int failed;
};

static void *ptds_thread(void *arg)
{
    struct ptds_arg *t = arg;
    void *q = NULL;
    if (t->async) { /* the _ptsz entry points, NULL = the thread's own default stream */
        if (ctx_set(ctx0) != CUDA_SUCCESS || cudaMallocAsync_ptsz(&q, BLOCK, NULL) != cudaSuccess ||
            touch(CU_STREAM_PER_THREAD, (CUdeviceptr)(uintptr_t)q, BLOCK, 1) != CUDA_SUCCESS ||
            cudaFreeAsync_ptsz(q, NULL) != cudaSuccess)
            t->failed = 1;
    } else if (ctx_set(ctx0) != CUDA_SUCCESS || cudaMalloc(&q, BLOCK) != cudaSuccess ||
               touch(CU_STREAM_PER_THREAD, (CUdeviceptr)(uintptr_t)q, BLOCK, 1) != CUDA_SUCCESS ||
               cudaFree(q) != cudaSuccess)
        t->failed = 1;
    t->same += q == t->p;
    t->p = q;
    return NULL;
}

static int ptds(int async)
{
    struct ptds_arg t = {.async = async};
    void *keep;
    CHECK(cudaMalloc(&keep, BLOCK) == cudaSuccess);
    for (int i = 0; i < 2 * ROUNDS; i++) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, ptds_thread, &t) == 0 && pthread_join(th, NULL) == 0);
        CHECK(!t.failed);
    }
    CHECK(cudaFree(keep) == cudaSuccess);
    printf("same_block=%d violations=%lu\n", t.same, violations());
    return violations() == 0 ? 0 : 2;
}

/* A pinned block in an async copy (a kernel read) on a non-blocking stream (or a blocking
 * one), cudaFreeHost, cudaMallocHost; the new block is written on another such stream. */
static int host(unsigned flags)
{
    CUstream a, b;
    CHECK(stream_create(&a, flags) == CUDA_SUCCESS && stream_create(&b, flags) == CUDA_SUCCESS);
    int same = 0;
    for (int i = 0; i < ROUNDS; i++) {
        void *h, *g;
        CHECK(cudaMallocHost(&h, 64 << 10) == cudaSuccess);
        CHECK(touch(a, (CUdeviceptr)(uintptr_t)h, 64 << 10, 0) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK(cudaMallocHost(&g, 64 << 10) == cudaSuccess);
        same += g == h;
        CHECK(touch(b, (CUdeviceptr)(uintptr_t)g, 64 << 10, 1) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(g) == cudaSuccess);
    }
    printf("same_block=%d violations=%lu standin=%lu cuCtxSynchronize=%lu\n", same, violations(),
           standin_calls(), sim_count("cuCtxSynchronize"));
    return violations() == 0 && standin_calls() == 0 ? 0 : 2;
}

/* cudaFree(NULL) reaches cudart (it brings the runtime up). */
static int null_free(void)
{
    CHECK(cudaFree(NULL) == cudaSuccess);
    printf("null_frees=%lu\n", standin_null_frees());
    return standin_null_frees() == 1 ? 0 : 2;
}

/* cudaFree/cuMemFree of a pinned host pointer: CUDA's invalid value, nothing freed. */
static int host_to_free(void)
{
    void *h = NULL;
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess && h);
    memset(h, 7, 4096);
    cudaError_t e = cudaFree(h);
    CUresult r = mem_free((CUdeviceptr)(uintptr_t)h);
    printf("cudaFree=%d cuMemFree=%d\n", (int)e, (int)r);
    CHECK(e == cudaErrorInvalidValue && r == CUDA_ERROR_INVALID_VALUE);
    /* still ours and live: a second block is a different one, the first frees once */
    void *g = NULL;
    CHECK(cudaMallocHost(&g, 4096) == cudaSuccess && g != h);
    CHECK(((unsigned char *)h)[4095] == 7);
    CHECK(cudaFreeHost(h) == cudaSuccess && cudaFreeHost(g) == cudaSuccess);
    return 0;
}

/* Undefined flag bits: invalid value, whatever else is asked. */
static int host_flags_bad(void)
{
    void *h = (void *)1;
    CUresult r1 = host_alloc(&h, 4096, 0x100);
    CUresult r2 = host_alloc(&h, 4096, CU_MEMHOSTALLOC_WRITECOMBINED | 0x100);
    cudaError_t e1 = cudaHostAlloc(&h, 4096, 0x100);
    cudaError_t e2 = cudaHostAlloc(&h, 4096, cudaHostAllocWriteCombined | 0x100);
    printf("cuMemHostAlloc=%d,%d cudaHostAlloc=%d,%d standin=%lu\n", (int)r1, (int)r2, (int)e1,
           (int)e2, standin_calls());
    CHECK(r1 == CUDA_ERROR_INVALID_VALUE && r2 == CUDA_ERROR_INVALID_VALUE);
    CHECK(e1 == cudaErrorInvalidValue && e2 == cudaErrorInvalidValue);
    return 0;
}

/* cuMemHostGetFlags/cudaHostGetFlags: the flags a block was allocated with. */
static int host_get_flags_mode(void)
{
    static const unsigned flags[] = {0, CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_DEVICEMAP,
                                     CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP};
    cudaError_t (*rt_get_flags)(unsigned *, void *);
    *(void **)&rt_get_flags = dlsym(RTLD_DEFAULT, "cudaHostGetFlags");
    CHECK(rt_get_flags);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        void *h = NULL, *g = NULL;
        unsigned got = 99, rt = 99;
        CHECK(host_alloc(&h, 8192, flags[i]) == CUDA_SUCCESS && h);
        CUresult r = host_get_flags(&got, (char *)h + 100);
        CHECK(cudaHostAlloc(&g, 8192, flags[i]) == cudaSuccess && g);
        cudaError_t e = rt_get_flags(&rt, g);
        printf("asked=%u cuMemHostGetFlags=%d,%u cudaHostGetFlags=%d,%u\n", flags[i], (int)r, got,
               (int)e, rt);
        CHECK(r == CUDA_SUCCESS && got == flags[i] && e == cudaSuccess && rt == flags[i]);
        CHECK(cudaFreeHost(h) == cudaSuccess && cudaFreeHost(g) == cudaSuccess);
    }
    void *h = NULL;
    unsigned got = 99;
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess);
    CHECK(host_get_flags(&got, h) == CUDA_SUCCESS && got == 0);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    return standin_calls() == 0 ? 0 : 2;
}

/* cudaMallocAsync/cuMemAllocAsync on a stream of device 1 while device 0 is current: the
 * memory is device 1's (GPOOL_SIM_DEVICES=2, GPOOL_SIM_PEER=none). */
static int other_device(void)
{
    CUdevice d1;
    CUcontext ctx1, popped;
    CUstream s1;
    CHECK(dev_get(&d1, 1) == CUDA_SUCCESS && retain(&ctx1, d1) == CUDA_SUCCESS);
    CHECK(ctx_push(ctx1) == CUDA_SUCCESS);
    CHECK(stream_create(&s1, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHECK(ctx_pop(&popped) == CUDA_SUCCESS && popped == ctx1);
    void *p = NULL;
    CUdeviceptr q = 0;
    size_t before = bytes_in_use(1);
    CHECK(cudaMallocAsync(&p, BLOCK, s1) == cudaSuccess && p);
    CHECK(alloc_async(&q, BLOCK, s1) == CUDA_SUCCESS && q);
    CUresult a1 = device_access(1, p, BLOCK, 1), a2 = device_access(1, (void *)q, BLOCK, 1);
    printf("device1_bytes=%zu->%zu access_p=%d access_q=%d\n", before, bytes_in_use(1), (int)a1,
           (int)a2);
    CHECK(a1 == CUDA_SUCCESS && a2 == CUDA_SUCCESS && bytes_in_use(1) > before);
    CHECK(touch(s1, (CUdeviceptr)(uintptr_t)p, BLOCK, 1) == CUDA_SUCCESS);
    CHECK(cudaFreeAsync(p, s1) == cudaSuccess && free_async(q, s1) == CUDA_SUCCESS);
    return violations() == 0 ? 0 : 2;
}

typedef struct batch_stats {
    unsigned long long frees, flushes, syncs, peak_bytes, limit_bytes, events, peak_waiting;
} batch_stats; /* gpool_preload_batch_stats (preload/preload.h) */

/* What a free costs in the mode GPOOL_CONF names: N pairs of `size` bytes, device (cudaFree)
 * or host (cudaFreeHost), after a non-blocking stream was made when nb; driver calls per free
 * and the batch's counters (for docs/dropin.md). */
static int cost(int nb, int host_mem)
{
    enum { N = 4000 };
    void (*stats)(batch_stats *);
    unsigned long (*total)(void);
    void (*reset)(void);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "gpool_preload_batch_stats_get");
    SYM(total, "gpoolsim_call_total");
    SYM(reset, "gpoolsim_reset_counts");
    CHECK(stats && total && reset);
    void *p;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess);
    if (nb) {
        CUstream s;
        CHECK(stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    }
    for (int size = 4096; size <= (1 << 20); size <<= 8) {
        batch_stats b0, b1;
        stats(&b0);
        reset();
        for (int i = 0; i < N; i++) {
            if (host_mem)
                CHECK(cudaMallocHost(&p, size) == cudaSuccess && cudaFreeHost(p) == cudaSuccess);
            else
                CHECK(cudaMalloc(&p, size) == cudaSuccess && cudaFree(p) == cudaSuccess);
        }
        stats(&b1);
        printf("size=%d frees=%d driver_calls_per_free=%.3f cuEventRecord=%lu cuCtxSynchronize=%lu "
               "flushes=%llu syncs=%llu flush_events=%llu cuMemCreate=%lu\n",
               size, N, (double)total() / N, sim_count("cuEventRecord"),
               sim_count("cuCtxSynchronize"), b1.flushes - b0.flushes, b1.syncs - b0.syncs,
               b1.events - b0.events, sim_count("cuMemCreate"));
        if (getenv("ORDER_PROG_CALLS")) {
            const char *const *names;
            size_t n;
            const char *const *(*entry_names)(size_t *);
            SYM(entry_names, "gpoolsim_entry_names");
            names = entry_names(&n);
            for (size_t k = 0; k < n; k++)
                if (sim_count(names[k])) printf("  %s=%lu", names[k], sim_count(names[k]));
            printf("\n");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (setup()) return 1;
    if (!strcmp(mode, "blocking")) return two_streams(0);
    if (!strcmp(mode, "nonblocking")) return two_streams(CU_STREAM_NON_BLOCKING);
    if (!strcmp(mode, "ptds")) return ptds(0);
    if (!strcmp(mode, "ptds_async")) return ptds(1);
    if (!strcmp(mode, "host")) return host(CU_STREAM_NON_BLOCKING);
    if (!strcmp(mode, "null_free")) return null_free();
    if (!strcmp(mode, "host_to_free")) return host_to_free();
    if (!strcmp(mode, "host_flags_bad")) return host_flags_bad();
    if (!strcmp(mode, "host_get_flags")) return host_get_flags_mode();
    if (!strcmp(mode, "other_device")) return other_device();
    if (!strcmp(mode, "cost")) return cost(0, 0);
    if (!strcmp(mode, "cost_nb")) return cost(1, 0);
    if (!strcmp(mode, "cost_host_nb")) return cost(1, 1);
    if (!strcmp(mode, "cost_host")) return cost(0, 1);
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
}
