/* runtime_prog.c — exercises the CUDA runtime memory API against the stand-in libcudart
 * (tests/preload/cudart_standin.c). Under LD_PRELOAD=libgpool_preload.so gpool must serve the
 * device calls; without it they reach the stand-in and fail. Usage: runtime_prog MODE, modes
 * below; prints key=value lines, exits 0 when the mode's expectations hold. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_driver.h"

unsigned long standin_calls(void);

cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);

/* Create a non-blocking stream through the driver (dlsym finds the interposer's cuStreamCreate,
 * as cudart's cudaStreamCreateWithFlags would through cuGetProcAddress). */
static int create_nonblocking_stream(void)
{
    int (*create)(void **, unsigned);
    *(void **)&create = prog_sim_sym("cuStreamCreate");
    void *s = NULL;
    CHECK(create && create(&s, 0x1 /* CU_STREAM_NON_BLOCKING */) == 0 && s);
    return 0;
}

/* cudaFree: no synchronize while no non-blocking stream exists (the batch is flushed by the
 * legacy-stream fence, preload/preload_fence.c); once one does, the block waits in the batch
 * (a different block is handed out) until a flush synchronizes. */
static int reuse(void)
{
    void *p, *q, *r;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess);
    CHECK(cudaMalloc(&q, 4096) == cudaSuccess);
    unsigned long syncs0 = prog_sim_count("cuCtxSynchronize");
    printf("before: same_block=%d cuCtxSynchronize=%lu\n", p == q, syncs0);
    CHECK(syncs0 == 0);
    CHECK(create_nonblocking_stream() == 0);
    unsigned long syncs1 = prog_sim_count("cuCtxSynchronize");
    CHECK(cudaFree(q) == cudaSuccess && cudaMalloc(&r, 4096) == cudaSuccess);
    printf("after: same_block=%d cuCtxSynchronize=%lu\n", q == r, syncs1);
    CHECK(q != r && syncs1 == 1); /* one synchronize when the first such stream appears */
    CHECK(create_nonblocking_stream() == 0 && prog_sim_count("cuCtxSynchronize") == 1);
    CHECK(cudaFree(r) == cudaSuccess);
    return 0;
}

typedef struct batch_stats {
    unsigned long long frees, flushes, syncs, peak_bytes, limit_bytes, events, peak_waiting;
} batch_stats; /* gpool_preload_batch_stats (preload/preload.h) */

static void *thread_pairs(void *arg)
{
    long *failed = arg;
    for (int i = 0; i < 1000; i++) {
        void *p;
        if (cudaMalloc(&p, (size_t)512 << (i % 8)) != cudaSuccess || cudaFree(p) != cudaSuccess)
            (*failed)++;
    }
    return NULL;
}

/* Four threads free into their own batches and exit: each exit flushes its batch (one
 * synchronize), and the memory they held is reusable afterwards. */
static int threads(void)
{
    void (*stats)(batch_stats *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "gpool_preload_batch_stats_get");
    CHECK(stats);
    void *p;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess);
    CHECK(create_nonblocking_stream() == 0);
    pthread_t t[4];
    long failed[4] = {0};
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, thread_pairs, &failed[i]) == 0);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_join(t[i], NULL) == 0 && failed[i] == 0);
    batch_stats b;
    stats(&b);
    printf("frees=%llu flushes=%llu syncs=%llu cuCtxSynchronize=%lu\n", b.frees, b.flushes, b.syncs,
           prog_sim_count("cuCtxSynchronize"));
    CHECK(b.frees == 4000 && b.flushes == 4 && b.syncs == 4);
    size_t fr, total;
    CHECK(cudaMemGetInfo(&fr, &total) == cudaSuccess); /* nothing pending any more */
    return 0;
}

static int serve(int nonblocking)
{
    if (nonblocking) { /* the runtime's first call makes a context current */
        void *p;
        CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaFree(p) == cudaSuccess);
        CHECK(create_nonblocking_stream() == 0);
    }
    enum { N = 3000, LIVE = 16 };
    void *live[LIVE] = {0};
    for (int i = 0; i < N; i++) {
        size_t size = (size_t)256 << (i % 15); /* 256 B .. 4 MiB */
        void **slot = &live[i % LIVE];
        if (*slot) CHECK(cudaFree(*slot) == cudaSuccess);
        cudaError_t e = cudaMalloc(slot, size);
        if (e != cudaSuccess) {
            printf("cudaMalloc=%d\n", (int)e);
            return 3;
        }
        memset(*slot, i & 0xff,
               size < 4096 ? size : 4096); /* the simulator's memory is host memory */
    }
    for (int i = 0; i < LIVE; i++)
        CHECK(cudaFree(live[i]) == cudaSuccess);
    /* the cudaMalloc/cudaFree part ends here: what follows allocates on two streams, where
     * allocations may poll the other stream's frees with events */
    unsigned long ev_free_part = prog_sim_count("cuEventRecord");
    unsigned long sync_free_part = prog_sim_count("cuCtxSynchronize");
    for (int i = 0; i < 200; i++) {
        void *a, *b;
        CHECK(cudaMallocAsync(&a, 1 << 20, NULL) == cudaSuccess);
        CHECK(cudaMallocAsync_ptsz(&b, 4096, NULL) == cudaSuccess);
        CHECK(cudaFreeAsync(a, NULL) == cudaSuccess);
        CHECK(cudaFreeAsync_ptsz(b, NULL) == cudaSuccess);
    }
    size_t fr = 0, total = 0;
    CHECK(cudaMemGetInfo(&fr, &total) == cudaSuccess);
    CHECK(total > 0 && fr <= total);
    printf("allocs=%d cuMemCreate=%lu cuMemAlloc=%lu standin=%lu\n", N + 400,
           prog_sim_count("cuMemCreate"), prog_sim_count("cuMemAlloc"), standin_calls());
    printf("frees=%d cuEventRecord=%lu cuCtxSynchronize=%lu events_all=%lu syncs_free_part=%lu\n",
           N, ev_free_part, prog_sim_count("cuCtxSynchronize"), prog_sim_count("cuEventRecord"),
           sync_free_part);
    return standin_calls() == 0 ? 0 : 2;
}

static int host(void)
{
    void *p = NULL, *m = NULL, *dev = NULL;
    CHECK(cudaMallocHost(&p, 1 << 20) == cudaSuccess && p);
    memset(p, 1, 1 << 20);
    CHECK(cudaHostAlloc(&m, 3 << 20, cudaHostAllocMapped) == cudaSuccess && m);
    memset(m, 2, 3 << 20);
    CHECK(cudaHostGetDevicePointer(&dev, (char *)m + 100, 0) == cudaSuccess && dev);
    CHECK(cudaFreeHost(p) == cudaSuccess);
    CHECK(cudaFreeHost(m) == cudaSuccess);
    printf("host=ok standin=%lu\n", standin_calls());
    return 0;
}

static int foreign(void)
{
    void *p;
    CHECK(cudaFree((void *)(uintptr_t)0x12345000) == cudaErrorStubLibrary);
    CHECK(cudaFreeAsync((void *)(uintptr_t)0x12345000, NULL) == cudaErrorStubLibrary);
    CHECK(cudaMallocFromPoolAsync(&p, 4096, NULL, NULL) == cudaErrorStubLibrary);
    /* a gpool pointer next to them still goes to gpool */
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    printf("standin=%lu\n", standin_calls());
    return standin_calls() == 3 ? 0 : 2;
}

static int nullargs(void)
{
    void *p = (void *)1;
    size_t t;
    CHECK(cudaMalloc(NULL, 16) == cudaErrorInvalidValue);
    CHECK(cudaFree(NULL) == cudaSuccess);
    CHECK(cudaMalloc(&p, 0) == cudaSuccess && p == NULL);
    CHECK(cudaMemGetInfo(NULL, &t) == cudaErrorInvalidValue);
    CHECK(cudaMemGetInfo(&t, NULL) == cudaErrorInvalidValue);
    CHECK(cudaMallocAsync(NULL, 16, NULL) == cudaErrorInvalidValue);
    CHECK(cudaHostAlloc(NULL, 16, 0) == cudaErrorInvalidValue);
    CHECK(cudaFreeHost(NULL) == cudaSuccess);
    printf("standin=%lu\n", standin_calls());
    return standin_calls() == 0 ? 0 : 2;
}

static int oom(void)
{
    void *p = (void *)1;
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 40);
    printf("cudaMalloc=%d standin=%lu\n", (int)e, standin_calls());
    CHECK(p == NULL);
    /* the pool still works afterwards */
    CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    return e == cudaErrorMemoryAllocation && standin_calls() == 0 ? 0 : 2;
}

static int meminfo(void)
{
    size_t free0, free1, free2, total;
    void *p;
    CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    CHECK(cudaMalloc(&p, 64 << 20) == cudaSuccess);
    CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cudaMemGetInfo(&free2, &total) == cudaSuccess);
    printf("free0=%zu free1=%zu free2=%zu total=%zu\n", free0, free1, free2, total);
    CHECK(free1 + (64 << 20) <= free0 + (2 << 20));
    CHECK(free2 >= free0); /* the cached block counts as free */
    return 0;
}

static void *exit_blocks[8];
static void free_at_exit(void)
{
    for (int i = 0; i < 4; i++)
        if (cudaFree(exit_blocks[i]) != cudaSuccess) _Exit(5);
}
__attribute__((destructor)) static void free_in_destructor(void)
{
    for (int i = 4; i < 6; i++)
        if (exit_blocks[i] && cudaFree(exit_blocks[i]) != cudaSuccess) _Exit(6);
}

static int at_exit(void)
{
    for (int i = 0; i < 8; i++)
        CHECK(cudaMalloc(&exit_blocks[i], (size_t)(i + 1) << 20) == cudaSuccess);
    atexit(free_at_exit);
    printf("exit=armed\n");
    return 0; /* blocks 6 and 7 are left to the OS */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "serve";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "serve")) return serve(argc > 2 && !strcmp(argv[2], "nb"));
    if (!strcmp(mode, "reuse")) return reuse();
    if (!strcmp(mode, "threads")) return threads();
    if (!strcmp(mode, "host")) return host();
    if (!strcmp(mode, "foreign")) return foreign();
    if (!strcmp(mode, "nullargs")) return nullargs();
    if (!strcmp(mode, "oom")) return oom();
    if (!strcmp(mode, "meminfo")) return meminfo();
    if (!strcmp(mode, "exit")) return at_exit();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
}
