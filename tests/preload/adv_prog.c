/* adv_prog.c — an adversarial campaign against the drop-in's contract (issue 23's promise):
 * small programs a correct CUDA program could be, run under LD_PRELOAD=libgpool_preload.so on
 * the simulated driver (the referee). Linked with the simulator (driver entry points by name,
 * as a -lcuda program) and the cudart stand-in (the runtime's memory calls, which the
 * interposer serves). Usage: adv_prog MODE; prints key=value lines, among them violations=N
 * (happens-before violations the simulator found); exits 0 when the mode's checks hold, 1 when
 * a CHECK fails, 4 when the simulator saw a violation. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog_adv.h"

/* cudaSetDevice: the stand-in has none; the interposer exports one (dlsym finds it). */
static cudaError_t set_device(int dev)
{
    cudaError_t (*fn)(int);
    *(void **)&fn = dlsym(RTLD_DEFAULT, "cudaSetDevice");
    return fn ? fn(dev) : cudaErrorNotSupported;
}

/* How reuse_rounds allocates and frees p (on s1) and q (on s2): cudaMalloc/cudaFree, or with
 * the flag cudaMallocAsync/cudaFreeAsync on the block's stream. */
enum { P_ORDERED_ALLOC = 1, P_ORDERED_FREE = 2, Q_ORDERED_ALLOC = 4, Q_ORDERED_FREE = 8 };

static cudaError_t rt_alloc(void **p, CUstream s, int ordered)
{
    return ordered ? cudaMallocAsync(p, MIB, s) : cudaMalloc(p, MIB);
}

static cudaError_t rt_free(void *p, CUstream s, int ordered)
{
    return ordered ? cudaFreeAsync(p, s) : cudaFree(p);
}

/* n rounds of the reuse pattern: s1 held, p allocated, written on s1 and freed; q allocated,
 * written on s2 and freed; s1 released (the simulator judges whether q's writes are ordered
 * after p's). Prints same=N: how often q was p's block. */
static int reuse_rounds(int n, CUstream s1, CUstream s2, unsigned how)
{
    int same = 0;
    for (int i = 0; i < n; i++) {
        void *p, *q;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(rt_alloc(&p, s1, how & P_ORDERED_ALLOC) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(rt_free(p, s1, how & P_ORDERED_FREE) == cudaSuccess);
        CHECK(rt_alloc(&q, s2, how & Q_ORDERED_ALLOC) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK(rt_free(q, s2, how & Q_ORDERED_FREE) == cudaSuccess);
        CHECK(gpoolsim_stream_release(s1) == 0);
    }
    printf("same=%d\n", same);
    return 0;
}

/* n live blocks of 4 KiB (with s: every other one cudaMallocAsync'd on s), then freed: none
 * handed out twice. Prints duplicates=N. */
static int distinct_blocks(CUstream s)
{
    enum { LIVE = 256 };
    static void *live[LIVE];
    int dup = 0;
    for (int i = 0; i < LIVE; i++) {
        CHECK((s && i % 2 == 0 ? cudaMallocAsync(&live[i], 4096, s) : cudaMalloc(&live[i], 4096)) ==
              cudaSuccess);
        for (int j = 0; j < i; j++)
            dup += live[j] == live[i];
    }
    printf("duplicates=%d\n", dup);
    for (int i = 0; i < LIVE; i++)
        CHECK(cudaFree(live[i]) == cudaSuccess);
    CHECK(dup == 0);
    return 0;
}

/* ---- per-thread default streams, held completion, free on one thread, malloc on another */
struct ptds_arg {
    pthread_barrier_t *bar;
    void **slot;
    int role;
    int failed;
};

static void *ptds_thread(void *arg)
{
    struct ptds_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    for (int i = 0; i < 16; i++) {
        if (a->role == 0) { /* writer: allocate, write on its per-thread stream (held), free */
            void *p;
            gpoolsim_stream_hold(CU_STREAM_PER_THREAD);
            if (cudaMalloc(&p, MIB) != cudaSuccess || kernel_write(CU_STREAM_PER_THREAD, p, MIB))
                a->failed++;
            if (cudaFree(p) != cudaSuccess) a->failed++;
            *a->slot = p;
        }
        pthread_barrier_wait(a->bar);
        if (a->role == 1) { /* the other thread allocates and writes on its own stream */
            void *q;
            if (cudaMalloc(&q, MIB) != cudaSuccess || kernel_write(CU_STREAM_PER_THREAD, q, MIB))
                a->failed++;
            if (q == *a->slot) a->failed += 0; /* allowed, if ordered */
            if (cudaFree(q) != cudaSuccess) a->failed++;
        }
        pthread_barrier_wait(a->bar);
        if (a->role == 0) gpoolsim_stream_release(CU_STREAM_PER_THREAD);
    }
    return NULL;
}

static int ptds(void)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    void *slot = NULL;
    struct ptds_arg a[2] = {{&bar, &slot, 0, 0}, {&bar, &slot, 1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, ptds_thread, &a[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(a[0].failed == 0 && a[1].failed == 0);
    return 0;
}

/* ---- cudaFree of a block a held stream writes, reallocated and written by another stream.
 * kind 0: two non-blocking streams; 1: two blocking streams; 2: blocking then legacy */
static int free_realloc(int kind)
{
    CUstream s1 = make_stream(kind == 0 ? CU_STREAM_NON_BLOCKING : 0);
    CUstream s2 = kind == 2 ? NULL : make_stream(kind == 0 ? CU_STREAM_NON_BLOCKING : 0);
    CHECK(s1 && (s2 || kind == 2));
    CHECK(reuse_rounds(100, s1, s2, 0) == 0);
    return 0;
}

/* ---- cudaFreeAsync on s1 (held), then the blocking cudaMalloc; its block written on s2 */
static int async_then_malloc(int consumer)
{
    /* consumer 0: non-blocking s2; 1: the legacy stream; 2: s1, s2 blocking streams */
    unsigned fl = consumer == 2 ? 0 : CU_STREAM_NON_BLOCKING;
    CUstream s1 = make_stream(fl), s2 = consumer == 1 ? NULL : make_stream(fl);
    CHECK(s1 && (s2 || consumer == 1));
    CHECK(reuse_rounds(50, s1, s2, P_ORDERED_ALLOC | P_ORDERED_FREE) == 0);
    return 0;
}

/* ---- cudaMallocAsync on s1, written (held), then the blocking cudaFree; cudaMallocAsync on s2 */
static int async_then_free(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    CHECK(reuse_rounds(50, s1, s2, P_ORDERED_ALLOC | Q_ORDERED_ALLOC | Q_ORDERED_FREE) == 0);
    return 0;
}

/* ---- pinned host blocks used by async copies, cudaFreeHost, reallocated, copied into on s2.
 * flags: 0 cudaMallocHost, 1 cudaHostAlloc(Mapped); nb: non-blocking streams */
static int host_async(int mapped, int nb)
{
    CUstream s1 = make_stream(nb ? CU_STREAM_NON_BLOCKING : 0);
    CUstream s2 = make_stream(nb ? CU_STREAM_NON_BLOCKING : 0);
    CHECK(s1 && s2);
    void *d;
    CHECK(cudaMalloc(&d, MIB) == cudaSuccess);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *h, *h2;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK((mapped ? cudaHostAlloc(&h, MIB, cudaHostAllocMapped) : cudaMallocHost(&h, MIB)) ==
              cudaSuccess);
        CHECK(cuMemcpyDtoHAsync(h, DP(d), MIB, s1) == CUDA_SUCCESS); /* writes h, held */
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK((mapped ? cudaHostAlloc(&h2, MIB, cudaHostAllocMapped) : cudaMallocHost(&h2, MIB)) ==
              cudaSuccess);
        same += h == h2;
        CHECK(cuMemcpyDtoHAsync(h2, DP(d), MIB, s2) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h2) == cudaSuccess);
        CHECK(gpoolsim_stream_release(s1) == 0);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cudaFree(d) == cudaSuccess);
    printf("same=%d\n", same);
    return 0;
}

/* ---- a stream destroyed with work queued; its handle value reused by the next stream.
 * free_kind 0: cudaFreeAsync on it before destroy; 1: cudaFree after destroy */
static int destroy_reuse(int free_kind)
{
    int same = 0, reused = 0;
    for (int i = 0; i < 40; i++) {
        CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s1);
        void *p, *q;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        if (free_kind == 0) CHECK(cudaFreeAsync(p, s1) == cudaSuccess);
        CHECK(cuStreamDestroy(s1) == CUDA_SUCCESS); /* work still queued (held) */
        if (free_kind == 1) CHECK(cudaFree(p) == cudaSuccess);
        CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s2);
        reused += s2 == s1;
        CHECK(cudaMallocAsync(&q, MIB, s2) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK(cudaFreeAsync(q, s2) == cudaSuccess);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cuStreamDestroy(s2) == CUDA_SUCCESS);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS); /* the destroyed stream's work completes */
    }
    printf("same=%d reused=%d destroyed_calls=%lu\n", same, reused,
           gpoolsim_destroyed_stream_calls());
    CHECK(gpoolsim_destroyed_stream_calls() == 0);
    return 0;
}

/* ---- graph capture with cudaMallocAsync inside, eager work after */
static int capture(int mode_value)
{
    CUstreamCaptureMode mode = (CUstreamCaptureMode)mode_value;
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    void *warm;
    CHECK(cudaMallocAsync(&warm, MIB, s1) == cudaSuccess); /* a cached block on s1 */
    CHECK(cudaFreeAsync(warm, s1) == cudaSuccess);
    CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture(s1, mode) == CUDA_SUCCESS);
    void *g;
    CHECK(cudaMallocAsync(&g, MIB, s1) == cudaSuccess);
    CHECK(kernel_write(s1, g, MIB) == 0);
    CUgraph graph;
    CHECK(cuStreamEndCapture(s1, &graph) == CUDA_SUCCESS);
    /* eager allocations may not get the graph's memory */
    int overlap = 0;
    void *e[4];
    for (int i = 0; i < 4; i++) {
        CHECK((i % 2 ? cudaMalloc(&e[i], MIB) : cudaMallocAsync(&e[i], MIB, i < 2 ? s1 : s2)) ==
              cudaSuccess);
        uintptr_t a = (uintptr_t)e[i], b = (uintptr_t)g;
        overlap += a < b + MIB && b < a + MIB;
    }
    for (int i = 0; i < 4; i++)
        CHECK((i % 2 ? cudaFree(e[i]) : cudaFreeAsync(e[i], s1)) == cudaSuccess);
    CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("overlap=%d\n", overlap);
    CHECK(overlap == 0);
    return 0;
}

/* ---- another thread's cudaMalloc/cudaFree while a capture in relaxed / thread-local mode runs:
 * CUDA allows both (cuStreamBeginCapture: relaxed and thread-local captures do not forbid
 * other threads' potentially unsafe calls); the capture must end valid */
struct side_arg {
    int failed;
    int big; /* 1: three pairs of 200 MiB (GPOOL_SIM_MEMORY=256M: each needs the last freed) */
};
static void *side_thread(void *arg)
{
    struct side_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    for (int i = 0; i < (a->big ? 3 : 200); i++) { /* enough frees to flush a batch */
        void *p;
        if (cudaMalloc(&p, a->big ? 200 * MIB : 4 * MIB) != cudaSuccess)
            a->failed++;
        else if (cudaFree(p) != cudaSuccess)
            a->failed++;
    }
    return NULL;
}

static int capture_side(int mode_value, int big)
{
    CUstreamCaptureMode mode = (CUstreamCaptureMode)mode_value;
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1);
    CHECK(cuStreamBeginCapture(s1, mode) == CUDA_SUCCESS);
    void *g;
    CHECK(cudaMallocAsync(&g, MIB, s1) == cudaSuccess);
    CHECK(kernel_write(s1, g, MIB) == 0);
    struct side_arg a = {0, big};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, side_thread, &a) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(cudaFreeAsync(g, s1) == cudaSuccess);
    CUgraph graph = NULL;
    CUresult r = cuStreamEndCapture(s1, &graph);
    printf("side_failed=%d end_capture=%d\n", a.failed, (int)r);
    CHECK(a.failed == 0);
    CHECK(r == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    return 0;
}

/* ---- fork() while another thread allocates; the child gets NOT_INITIALIZED, never hangs */
static volatile int spin_stop;
static void *spin_thread(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(prog_ctx[0]);
    while (!spin_stop) {
        void *p;
        if (cudaMalloc(&p, 4096) == cudaSuccess) cudaFree(p);
        void *h;
        if (cudaMallocHost(&h, 4096) == cudaSuccess) cudaFreeHost(h);
    }
    return NULL;
}

static int fork_threads(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, spin_thread, NULL) == 0);
    int hung = 0, bad = 0;
    for (int i = 0; i < 20; i++) {
        usleep(1000);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(5);
            void *p = NULL, *h = NULL;
            cudaError_t e = cudaMalloc(&p, 4096);
            cudaError_t f = cudaFree(NULL);
            cudaError_t g = cudaMallocHost(&h, 4096);
            /* CUDA_ERROR_NOT_INITIALIZED is cudaErrorInitializationError (3) in the runtime;
             * cudaFree(NULL) may succeed. The host allocation may fail the same way. */
            _exit(e == cudaErrorInitializationError && (f == cudaSuccess || f == e) &&
                          (g == cudaErrorInitializationError || g == cudaSuccess)
                      ? 0
                      : 10 + (int)e);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (WIFSIGNALED(st))
            hung++;
        else if (WEXITSTATUS(st) != 0) {
            bad++;
            printf("child_exit=%d\n", WEXITSTATUS(st));
        }
    }
    spin_stop = 1;
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("hung=%d bad=%d\n", hung, bad);
    CHECK(hung == 0 && bad == 0);
    return 0;
}

/* ---- two devices: a device-1 block written by a held device-1 stream, freed while device 0
 * is current (legal: cuMemFree takes any context's pointer), reallocated on device 1.
 * how: 0 cuCtxSetCurrent, 1 cuCtxPushCurrent/Pop, 2 cudaSetDevice */
static int devices(int how)
{
    CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
    CUstream a = make_stream(0), b = make_stream(0);
    CHECK(a && b);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        CUdeviceptr p, q;
        if (how == 2)
            CHECK(set_device(1) == cudaSuccess);
        else
            CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(cuMemAlloc(&p, MIB) == CUDA_SUCCESS);
        int ord = -1;
        CHECK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS);
        CHECK(ord == 1);
        CHECK(gpoolsim_stream_hold(a) == 0);
        CHECK(kernel_write(a, (void *)(uintptr_t)p, MIB) == 0);
        if (how == 1) {
            CHECK(cuCtxPushCurrent(prog_ctx[0]) == CUDA_SUCCESS);
            CHECK(cuMemFree(p) == CUDA_SUCCESS);
            CUcontext popped;
            CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == prog_ctx[0]);
        } else {
            if (how == 2)
                CHECK(set_device(0) == cudaSuccess);
            else
                CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
            CHECK(cudaFree((void *)(uintptr_t)p) == cudaSuccess);
            if (how == 2)
                CHECK(set_device(1) == cudaSuccess);
            else
                CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        }
        CHECK(cuMemAlloc(&q, MIB) == CUDA_SUCCESS);
        same += p == q;
        CHECK(kernel_write(b, (void *)(uintptr_t)q, MIB) == 0);
        CHECK(cuMemFree(q) == CUDA_SUCCESS);
        CHECK(gpoolsim_stream_release(a) == 0);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- pointer queries on interior pointers, freed blocks, buffer ids */
static int query_range(void)
{
    void *p, *q;
    CHECK(cudaMalloc(&p, 1000) == cudaSuccess && cudaMalloc(&q, 1000) == cudaSuccess);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange(&base, &size, DP(p) + 500) == CUDA_SUCCESS);
    printf("base_ok=%d size=%zu\n", base == DP(p), size);
    CHECK(base == DP(p) && size >= 1000);
    CHECK(!(DP(q) >= base && DP(q) < base + size));
    CUdeviceptr start = 0;
    size_t rsize = 0;
    CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, DP(p) + 999) ==
          CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, DP(p) + 999) ==
          CUDA_SUCCESS);
    CHECK(start == DP(p) && rsize == size);
    CHECK(cudaFree(p) == cudaSuccess && cudaFree(q) == cudaSuccess);
    return 0;
}

/* CU_POINTER_ATTRIBUTE_BUFFER_ID: a process-wide unique id for an allocated memory region
 * (cuda.h, CUpointer_attribute; cuPointerGetAttribute): two live allocations never share one, and a
 * new allocation at a freed one's address gets a new one (UCX's and NCCL's registration caches key
 * on it). */
static int query_buffer_id(void)
{
    void *p, *q;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaMalloc(&q, 4096) == cudaSuccess);
    unsigned long long idp = 0, idq = 0, idr = 0;
    CHECK(cuPointerGetAttribute(&idp, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(p)) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&idq, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(q)) == CUDA_SUCCESS);
    printf("id_p=%llu id_q=%llu\n", idp, idq);
    CHECK(idp != idq);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    void *r = NULL;
    for (int i = 0; i < 200 && r != p; i++) { /* until the address comes back */
        if (r) CHECK(cudaFree(r) == cudaSuccess);
        CHECK(cudaMalloc(&r, 4096) == cudaSuccess);
    }
    if (r == p) {
        CHECK(cuPointerGetAttribute(&idr, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(r)) == CUDA_SUCCESS);
        printf("same_address=1 id_r=%llu\n", idr);
        CHECK(idr != idp);
    }
    return 0;
}

/* A freed allocation is no allocation: cuPointerGetAttribute / cuMemGetAddressRange on it answer
 * CUDA_ERROR_INVALID_VALUE / CUDA_ERROR_NOT_FOUND as for any address no allocation holds. */
static int query_freed(void)
{
    void *p, *keep;
    CHECK(cudaMalloc(&keep, 4096) == cudaSuccess);
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CUdeviceptr start = 0;
    CUresult a = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, DP(p));
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult b = cuMemGetAddressRange(&base, &size, DP(p));
    printf("attr=%d start_is_p=%d range=%d base_is_p=%d size=%zu\n", (int)a, start == DP(p), (int)b,
           base == DP(p), size);
    CHECK(a != CUDA_SUCCESS && b != CUDA_SUCCESS);
    CHECK(cudaFree(keep) == cudaSuccess);
    return 0;
}

/* ---- out of memory, then retry; cudaMemGetInfo (GPOOL_SIM_MEMORY=256M) */
struct holder_arg {
    pthread_barrier_t *bar;
    int failed;
};
static void *holder_thread(void *arg)
{
    struct holder_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    void *p[4];
    for (int i = 0; i < 4; i++)
        if (cudaMalloc(&p[i], 48 * MIB) != cudaSuccess) a->failed++;
    for (int i = 0; i < 4; i++)
        if (cudaFree(p[i]) != cudaSuccess) a->failed++;
    pthread_barrier_wait(a->bar); /* freed, thread still alive */
    pthread_barrier_wait(a->bar);
    return NULL;
}

static int oom(int nb)
{
    if (nb) CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    void *p = (void *)1;
    CHECK(cudaMalloc(&p, (size_t)1 << 40) == cudaErrorMemoryAllocation);
    CHECK(p == NULL);
    /* blocks freed by another (live) thread are found again before out-of-memory */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct holder_arg a = {&bar, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, holder_thread, &a) == 0);
    pthread_barrier_wait(&bar);
    void *big = NULL;
    cudaError_t e = cudaMalloc(&big, 200 * MIB);
    pthread_barrier_wait(&bar);
    CHECK(pthread_join(t, NULL) == 0);
    printf("holder_failed=%d big=%d\n", a.failed, (int)e);
    CHECK(a.failed == 0 && e == cudaSuccess);
    CHECK(cudaFree(big) == cudaSuccess);
    /* this thread's own frees, then an async allocation of nearly everything */
    void *q[4];
    for (int i = 0; i < 4; i++)
        CHECK(cudaMalloc(&q[i], 48 * MIB) == cudaSuccess);
    for (int i = 0; i < 4; i++)
        CHECK(cudaFree(q[i]) == cudaSuccess);
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    e = cudaMallocAsync(&big, 200 * MIB, s);
    printf("async_big=%d\n", (int)e);
    CHECK(e == cudaSuccess);
    CHECK(cudaFreeAsync(big, s) == cudaSuccess && cuStreamSynchronize(s) == CUDA_SUCCESS);
    /* pinned host memory after a failed huge request */
    void *h = NULL;
    e = cudaMallocHost(&h, (size_t)1 << 50);
    printf("host_huge=%d\n", (int)e);
    CHECK(e == cudaErrorMemoryAllocation);
    CHECK(cudaMallocHost(&h, MIB) == cudaSuccess && cudaFreeHost(h) == cudaSuccess);
    return 0;
}

static int meminfo(void)
{
    size_t f0, t0, f1, t1, f2, t2;
    CHECK(cudaMemGetInfo(&f0, &t0) == cudaSuccess);
    void *p;
    CHECK(cudaMalloc(&p, 100 * MIB) == cudaSuccess);
    CHECK(cudaMemGetInfo(&f1, &t1) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cudaMemGetInfo(&f2, &t2) == cudaSuccess);
    size_t cf = 0, ct = 0;
    CHECK(cuMemGetInfo(&cf, &ct) == CUDA_SUCCESS);
    printf("free0=%zu free1=%zu free2=%zu cufree=%zu total=%zu\n", f0 / MIB, f1 / MIB, f2 / MIB,
           cf / MIB, t0 / MIB);
    CHECK(t0 == t1 && t1 == t2 && ct == t0);
    CHECK(f1 + 100 * MIB <= f0);
    CHECK(f2 + 4 * MIB >= f0 && cf == f2);
    return 0;
}

/* ---- double frees and bad pointers: CUDA answers an error and changes nothing */
static int double_free(void)
{
    void *p, *a, *b;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    cudaError_t e = cudaFree(p);
    CHECK(cudaMalloc(&a, 4096) == cudaSuccess && cudaMalloc(&b, 4096) == cudaSuccess);
    printf("second_cudaFree=%d distinct=%d\n", (int)e, a != b);
    CHECK(a != b);
    CHECK(cudaFree(a) == cudaSuccess && cudaFree(b) == cudaSuccess);
    /* past the batch's flush: 256 live blocks of that size must all differ */
    for (int i = 0; i < 200; i++) {
        void *x;
        CHECK(cudaMalloc(&x, 4096) == cudaSuccess && cudaFree(x) == cudaSuccess);
    }
    CHECK(distinct_blocks(NULL) == 0);
    CHECK(e != cudaSuccess);
    return 0;
}

static int double_free_driver(void)
{
    CUdeviceptr p, a, b;
    CHECK(cuMemAlloc(&p, 4096) == CUDA_SUCCESS);
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    CUresult r = cuMemFree(p);
    CHECK(cuMemAlloc(&a, 4096) == CUDA_SUCCESS && cuMemAlloc(&b, 4096) == CUDA_SUCCESS);
    printf("second_cuMemFree=%d distinct=%d\n", (int)r, a != b);
    CHECK(a != b);
    CHECK(r != CUDA_SUCCESS);
    CHECK(cuMemFree(a) == CUDA_SUCCESS && cuMemFree(b) == CUDA_SUCCESS);
    return 0;
}

static int double_free_async(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *p, *a, *b;
    CHECK(cudaMallocAsync(&p, 4096, s) == cudaSuccess);
    CHECK(cudaFreeAsync(p, s) == cudaSuccess);
    cudaError_t e = cudaFreeAsync(p, s);
    printf("second_cudaFreeAsync=%d\n", (int)e);
    CHECK(e != cudaSuccess);
    CHECK(cudaMallocAsync(&a, 4096, s) == cudaSuccess);
    CHECK(cudaMallocAsync(&b, 4096, s) == cudaSuccess);
    CHECK(a != b);
    CHECK(cudaFreeAsync(a, s) == cudaSuccess && cudaFreeAsync(b, s) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    return 0;
}

/* ---- a second free from another thread, of a block still waiting in the first thread's
 * batch: an error (cudaFree reference: "if cudaFree(devPtr) has already been called before,
 * an error is returned") */
static void *free_in_thread(void *p)
{
    cuCtxSetCurrent(prog_ctx[0]);
    return (void *)(intptr_t)cudaFree(p);
}

static void *cufree_in_thread(void *p)
{
    cuCtxSetCurrent(prog_ctx[0]);
    return (void *)(intptr_t)cuMemFree(DP(p));
}

static int double_free_thread(void)
{
    void *p, *q, *rv;
    pthread_t t;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess && cudaMalloc(&q, 4096) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess); /* waits in this thread's batch */
    CHECK(pthread_create(&t, NULL, free_in_thread, p) == 0 && pthread_join(t, &rv) == 0);
    cudaError_t e = (cudaError_t)(intptr_t)rv;
    CHECK(pthread_create(&t, NULL, free_in_thread, q) == 0 && pthread_join(t, &rv) == 0);
    cudaError_t eq = (cudaError_t)(intptr_t)rv; /* the other thread's first free of q */
    CHECK(pthread_create(&t, NULL, cufree_in_thread, q) == 0 && pthread_join(t, &rv) == 0);
    CUresult rq = (CUresult)(intptr_t)rv; /* q's thread has exited: its batch drained */
    CHECK(cudaFree(q) != cudaSuccess);    /* freed and given back: gpool's (driver's) error */
    printf("other_thread_cudaFree=%d first_free_elsewhere=%d second_cuMemFree=%d\n", (int)e,
           (int)eq, (int)rq);
    CHECK(eq == cudaSuccess);
    CHECK(distinct_blocks(NULL) == 0);
    CHECK(e != cudaSuccess && rq != CUDA_SUCCESS);
    return 0;
}

/* ---- 20000 blocks waiting in the batch at once (a non-blocking stream exists: the batch
 * holds up to cudafree_batch bytes), so some share a slot of the pending set and wait in its
 * overflow; each freed again: every second free an error */
static int double_free_many(void)
{
    enum { N = 20000 };
    static void *blk[N];
    CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N; i++)
        CHECK(cudaMalloc(&blk[i], 512) == cudaSuccess);
    for (int i = 0; i < N; i++)
        CHECK(cudaFree(blk[i]) == cudaSuccess);
    int refused = 0;
    for (int i = 0; i < N; i++)
        refused += cudaFree(blk[i]) != cudaSuccess;
    printf("second_frees_refused=%d of %d\n", refused, N);
    CHECK(refused == N);
    return distinct_blocks(NULL);
}

/* ---- cudaFreeHost twice once host blocks wait in the batch (a non-blocking stream exists) */
static int double_free_host(void)
{
    CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    void *h;
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    cudaError_t e = cudaFreeHost(h);
    printf("second_cudaFreeHost=%d\n", (int)e);
    CHECK(e != cudaSuccess);
    void *a, *b;
    CHECK(cudaMallocHost(&a, 4096) == cudaSuccess && cudaMallocHost(&b, 4096) == cudaSuccess);
    CHECK(a != b);
    CHECK(cudaFreeHost(a) == cudaSuccess && cudaFreeHost(b) == cudaSuccess);
    return 0;
}

/* ---- cudaPointerGetAttributes (one cuPointerGetAttributes) of a block freed and still
 * waiting in the batch: what CUDA says of memory no allocation holds (an error, or
 * cudaMemoryTypeUnregistered with no device pointer) */
static int query_freed_runtime(void)
{
    void *p, *keep;
    CHECK(cudaMalloc(&keep, 4096) == cudaSuccess && cudaMalloc(&p, 4096) == cudaSuccess);
    struct cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice);
    CHECK(cudaFree(p) == cudaSuccess);
    memset(&a, 0xff, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    printf("freed_attrs=%d type=%d devptr_null=%d\n", (int)e, (int)a.type, a.devicePointer == NULL);
    CHECK(e != cudaSuccess || (a.type == cudaMemoryTypeUnregistered && !a.devicePointer));
    CHECK(cudaFree(keep) == cudaSuccess);
    return 0;
}

/* ---- BUFFER_ID through cuPointerGetAttributes: each block its own, stable per block */
static int query_buffer_id_attrs(void)
{
    void *p, *q;
    CHECK(cudaMalloc(&p, 512) == cudaSuccess && cudaMalloc(&q, 512) == cudaSuccess);
    unsigned long long idp = 0, idq = 0, idp2 = 0, idp_interior = 0;
    CUpointer_attribute at[] = {CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *dp[] = {&idp}, *dq[] = {&idq}, *di[] = {&idp_interior};
    CHECK(cuPointerGetAttributes(1, at, dp, DP(p)) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttributes(1, at, dq, DP(q)) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttributes(1, at, di, DP(p) + 100) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&idp2, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(p)) == CUDA_SUCCESS);
    printf("id_p=%llu id_q=%llu id_p_again=%llu id_p_interior=%llu\n", idp, idq, idp2,
           idp_interior);
    CHECK(idp && idq && idp != idq && idp == idp2 && idp == idp_interior);
    CHECK(cudaFree(p) == cudaSuccess && cudaFree(q) == cudaSuccess);
    return 0;
}

/* ---- a cuMemAlloc gpool cannot serve (an injected driver failure that is not out-of-memory)
 * passes through to the driver; the driver is short of memory because gpool caches 800 MiB
 * of the 1 GiB device: the cache goes back and the call is tried once more (GPOOL_SIM_MEMORY=1G,
 * GPOOL_SIM_FAIL arms the failure) */
static int passthrough_oom(void)
{
    CUdeviceptr big[8];
    for (int i = 0; i < 8; i++)
        CHECK(cuMemAlloc(&big[i], 100 * MIB) == CUDA_SUCCESS);
    for (int i = 0; i < 8; i++)
        CHECK(cuMemFree(big[i]) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    const char *entry = getenv("ADV_FAIL_ENTRY");
    CHECK(entry && gpoolsim_fail_nth(entry, 1) == 0);
    unsigned long before = gpoolsim_call_count("cuMemAlloc");
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, 900 * MIB);
    unsigned long calls = gpoolsim_call_count("cuMemAlloc") - before;
    printf("passthrough=%d driver_cuMemAlloc=%lu in_use_mib=%zu\n", (int)r, calls,
           gpoolsim_bytes_in_use(0) / MIB);
    CHECK(r == CUDA_SUCCESS && calls == 2); /* out of memory, then the retry */
    *(volatile char *)(uintptr_t)p = 1;
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    return 0;
}

/* cudaFree of an interior pointer: an error, and the block stays live */
static int bad_interior(void)
{
    void *p, *x;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess);
    cudaError_t e = cudaFree((char *)p + 16);
    printf("interior=%d\n", (int)e);
    CHECK(e != cudaSuccess);
    CHECK(cudaMalloc(&x, 4096) == cudaSuccess);
    CHECK(x != p);
    CHECK(cudaFree(x) == cudaSuccess && cudaFree(p) == cudaSuccess);
    return 0;
}

/* cudaFree of a cudaMallocHost block: cudaErrorInvalidValue, and the host block stays live:
 * cudaFreeHost frees it afterwards (and gpool, which served it, still knows it). */
static int host_to_cudafree(int mapped)
{
    void *h, *h2;
    CHECK((mapped ? cudaHostAlloc(&h, 4096, cudaHostAllocMapped) : cudaMallocHost(&h, 4096)) ==
          cudaSuccess);
    memset(h, 7, 4096);
    cudaError_t e = cudaFree(h);
    unsigned long before = standin_calls();
    CHECK((mapped ? cudaHostAlloc(&h2, 4096, cudaHostAllocMapped) : cudaMallocHost(&h2, 4096)) ==
          cudaSuccess);
    printf("host_to_cudaFree=%d distinct=%d\n", (int)e, h != h2);
    CHECK(e != cudaSuccess);
    CHECK(h != h2); /* h is still live */
    CHECK(cudaFreeHost(h2) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    printf("standin_calls=%lu\n", standin_calls() - before);
    CHECK(standin_calls() == before); /* gpool's host blocks never reach the runtime */
    return 0;
}

/* the campaign's first sequence: an interior cudaFree, cudaFree of a host block, then
 * cudaFreeHost of that block */
static int bad_sequence(int interior)
{
    void *p, *h;
    CHECK(cudaMalloc(&p, 4096) == cudaSuccess);
    if (interior) CHECK(cudaFree((char *)p + 16) != cudaSuccess);
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess);
    printf("h=%p\n", h);
    CHECK(cudaFree(h) != cudaSuccess);
    unsigned long before = standin_calls();
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    CHECK(standin_calls() == before);
    return 0;
}

/* ---- stream-ordered free on s1 (held), stream-ordered allocation on s2: CUDA's pool reuses
 * across streams only when the free is known complete or ordered (cudaMallocAsync) */
static int async_cross(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    CHECK(reuse_rounds(50, s1, s2,
                       P_ORDERED_ALLOC | P_ORDERED_FREE | Q_ORDERED_ALLOC | Q_ORDERED_FREE) == 0);
    return 0;
}

/* ---- two threads' per-thread default streams share one handle value (cudaStreamPerThread,
 * or NULL in the _ptsz forms) but are different streams */
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
struct ptas_arg {
    pthread_barrier_t *bar;
    void **slot;
    int role, ptsz, failed, same;
};
static void *ptds_async_thread(void *arg)
{
    struct ptas_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    cudaStream_t h = a->ptsz ? NULL : (cudaStream_t)CU_STREAM_PER_THREAD;
    for (int i = 0; i < 16; i++) {
        if (a->role == 0) {
            void *p = NULL;
            gpoolsim_stream_hold(CU_STREAM_PER_THREAD);
            cudaError_t e =
                a->ptsz ? cudaMallocAsync_ptsz(&p, MIB, h) : cudaMallocAsync(&p, MIB, h);
            if (e != cudaSuccess || kernel_write(CU_STREAM_PER_THREAD, p, MIB)) a->failed++;
            e = a->ptsz ? cudaFreeAsync_ptsz(p, h) : cudaFreeAsync(p, h);
            if (e != cudaSuccess) a->failed++;
            *a->slot = p;
        }
        pthread_barrier_wait(a->bar);
        if (a->role == 1) {
            void *q = NULL;
            cudaError_t e =
                a->ptsz ? cudaMallocAsync_ptsz(&q, MIB, h) : cudaMallocAsync(&q, MIB, h);
            if (e != cudaSuccess || kernel_write(CU_STREAM_PER_THREAD, q, MIB)) a->failed++;
            a->same += q == *a->slot;
            e = a->ptsz ? cudaFreeAsync_ptsz(q, h) : cudaFreeAsync(q, h);
            if (e != cudaSuccess) a->failed++;
            cuStreamSynchronize(CU_STREAM_PER_THREAD);
        }
        pthread_barrier_wait(a->bar);
        if (a->role == 0) gpoolsim_stream_release(CU_STREAM_PER_THREAD);
    }
    return NULL;
}

static int ptds_async(int ptsz)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    void *slot = NULL;
    struct ptas_arg a[2] = {{&bar, &slot, 0, ptsz, 0, 0}, {&bar, &slot, 1, ptsz, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, ptds_async_thread, &a[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("same=%d\n", a[1].same);
    CHECK(a[0].failed == 0 && a[1].failed == 0);
    return 0;
}

/* ---- a block freed twice through both free kinds: the second free is an error, no block is
 * handed out twice */
static int mixed_double_free(int async_first)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *p;
    CHECK(cudaMallocAsync(&p, 4096, s) == cudaSuccess);
    cudaError_t e;
    if (async_first) {
        CHECK(cudaFreeAsync(p, s) == cudaSuccess);
        e = cudaFree(p);
    } else {
        CHECK(cudaFree(p) == cudaSuccess);
        e = cudaFreeAsync(p, s);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("second_free=%d\n", (int)e);
    CHECK(distinct_blocks(s) == 0);
    CHECK(e != cudaSuccess);
    return 0;
}

/* ---- pinned host blocks: interior pointer queries, flags, device pointers */
static int host_query(void)
{
    void *h, *m, *dm = NULL;
    CHECK(cudaMallocHost(&h, 1000) == cudaSuccess);
    CHECK(cudaHostAlloc(&m, 5000, cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = cuMemGetAddressRange(&base, &size, DP(h) + 10);
    printf("host_range=%d base_ok=%d size=%zu\n", (int)r, base == DP(h), size);
    CHECK(r == CUDA_SUCCESS && base == DP(h) && size >= 1000 && size < 2 * MIB);
    unsigned type = 0;
    CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, DP(m) + 4000) ==
          CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_HOST);
    unsigned flags = 0;
    CHECK(cuMemHostGetFlags(&flags, m) == CUDA_SUCCESS);
    printf("flags=%u\n", flags);
    CHECK(flags & CU_MEMHOSTALLOC_DEVICEMAP);
    CHECK(flags & CU_MEMHOSTALLOC_PORTABLE);
    CHECK(cudaHostGetDevicePointer(&dm, (char *)m + 100, 0) == cudaSuccess && dm);
    r = cuMemGetAddressRange(&base, &size, DP(dm));
    printf("mapped_range=%d size=%zu\n", (int)r, size);
    CHECK(r == CUDA_SUCCESS && size >= 5000 && size < 2 * MIB);
    CHECK(base + 100 == DP(dm));
    CHECK(cudaFreeHost(h) == cudaSuccess && cudaFreeHost(m) == cudaSuccess);
    return 0;
}

/* ---- kernel on the legacy stream (held), cudaFree, cudaMalloc while no non-blocking stream
 * exists; then the program makes one and uses the block there */
static int legacy_then_new_nb(void)
{
    void *p, *q;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
    CHECK(gpoolsim_stream_hold(NULL) == 0);
    CHECK(kernel_write(NULL, p, MIB) == 0);
    CHECK(cudaFree(p) == cudaSuccess);
    int same = 0;
    for (int i = 0; i < 100; i++) { /* enough for a fence flush */
        CHECK(cudaMalloc(&q, MIB) == cudaSuccess);
        same += p == q;
        if (p == q) break;
        CHECK(cudaFree(q) == cudaSuccess);
    }
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    CHECK(kernel_write(s, q, MIB) == 0);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(cudaFree(q) == cudaSuccess);
    gpoolsim_stream_release(NULL);
    printf("same=%d\n", same);
    return 0;
}

/* ---- two devices: a pinned block a device-1 copy (held) writes, freed with device 0 current,
 * reallocated and written by another device-1 stream */
static int host_devices(void)
{
    CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
    CUstream a = make_stream(0), b = make_stream(0);
    CHECK(a && b);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, MIB) == CUDA_SUCCESS);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *h, *h2;
        CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(cudaMallocHost(&h, MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(a) == 0);
        CHECK(cuMemcpyDtoHAsync(h, d, MIB, a) == CUDA_SUCCESS);
        CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK(cudaMallocHost(&h2, MIB) == cudaSuccess);
        same += h == h2;
        CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(cuMemcpyDtoHAsync(h2, d, MIB, b) == CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(b) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h2) == cudaSuccess);
        CHECK(gpoolsim_stream_release(a) == 0);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cuMemFree(d) == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

static int meminfo_nb(void)
{
    CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    return meminfo();
}

/* ---- allocated on s1, last used and freed on s2 (ordered after s1 by an event, as CUDA
 * requires), then a stream-ordered allocation on s1: the block's free is in s2's order */
static int free_on_other_stream(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    int same = 0;
    for (int i = 0; i < 50; i++) {
        void *p, *q;
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(cuEventRecord(ev, s1) == CUDA_SUCCESS);
        CHECK(cuStreamWaitEvent(s2, ev, 0) == CUDA_SUCCESS);
        CHECK(gpoolsim_stream_hold(s2) == 0);
        CHECK(kernel_write(s2, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, s2) == cudaSuccess);
        CHECK(cudaMallocAsync(&q, MIB, s1) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s1, q, MIB) == 0);
        CHECK(cudaFreeAsync(q, s1) == cudaSuccess);
        CHECK(gpoolsim_stream_release(s2) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    CHECK(cuEventDestroy(ev) == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- capture on the per-thread default stream, cudaMallocAsync(cudaStreamPerThread) and
 * cudaMallocAsync_ptsz(NULL) inside: graph memory nodes, not eager blocks */
static int capture_ptds(void)
{
    CHECK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) ==
          CUDA_SUCCESS);
    void *g1, *g2;
    CHECK(cudaMallocAsync(&g1, MIB, (cudaStream_t)CU_STREAM_PER_THREAD) == cudaSuccess);
    CHECK(cudaMallocAsync_ptsz(&g2, MIB, NULL) == cudaSuccess);
    CUgraph graph = NULL;
    CUresult r = cuStreamEndCapture(CU_STREAM_PER_THREAD, &graph);
    printf("end_capture=%d\n", (int)r);
    CHECK(r == CUDA_SUCCESS);
    int overlap = 0;
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    void *e[6];
    for (int i = 0; i < 6; i++) {
        CHECK((i % 2 ? cudaMalloc(&e[i], MIB) : cudaMallocAsync(&e[i], MIB, s2)) == cudaSuccess);
        for (int k = 0; k < 2; k++) {
            uintptr_t a = (uintptr_t)e[i], b = (uintptr_t)(k ? g2 : g1);
            overlap += a < b + MIB && b < a + MIB;
        }
    }
    for (int i = 0; i < 6; i++)
        CHECK((i % 2 ? cudaFree(e[i]) : cudaFreeAsync(e[i], s2)) == cudaSuccess);
    CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("overlap=%d\n", overlap);
    CHECK(overlap == 0);
    return 0;
}

/* ---- cudaFree of a block a held non-blocking stream writes, then cudaMallocAsync on s2 */
static int free_then_mallocasync(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    CHECK(reuse_rounds(100, s1, s2, Q_ORDERED_ALLOC | Q_ORDERED_FREE) == 0);
    return 0;
}

/* ---- near capacity (GPOOL_SIM_MEMORY=256M): 200 MiB cudaMallocAsync'd and written on held s1,
 * cudaFreeAsync'd, then cudaMalloc(200 MiB) written on s2: success only if ordered, else OOM */
static int oom_async_then_malloc(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    void *p, *q = NULL;
    CHECK(cudaMallocAsync(&p, 200 * MIB, s1) == cudaSuccess);
    CHECK(gpoolsim_stream_hold(s1) == 0);
    CHECK(kernel_write(s1, p, 200 * MIB) == 0);
    CHECK(cudaFreeAsync(p, s1) == cudaSuccess);
    cudaError_t e = cudaMalloc(&q, 200 * MIB);
    printf("malloc=%d same=%d\n", (int)e, p == q);
    if (e == cudaSuccess) {
        CHECK(kernel_write(s2, q, 200 * MIB) == 0);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cudaFree(q) == cudaSuccess);
    }
    CHECK(gpoolsim_stream_release(s1) == 0);
    CHECK(e == cudaSuccess || e == cudaErrorMemoryAllocation);
    return 0;
}

/* ---- a child forked after CUDA initialised frees and allocates what the parent had: every
 * call answers CUDA_ERROR_NOT_INITIALIZED (cudaErrorInitializationError), none hangs */
static int fork_child_calls(void)
{
    void *p, *h, *q;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess && cudaMalloc(&q, MIB) == cudaSuccess);
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess);
    CHECK(cudaFree(q) == cudaSuccess); /* pending in the batch at fork */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(5);
        void *x = NULL, *y = NULL;
        cudaError_t e[6];
        size_t f, t;
        e[0] = cudaFree(p);
        e[1] = cudaFreeHost(h);
        e[2] = cudaMalloc(&x, MIB);
        e[3] = cudaMallocHost(&y, 4096);
        e[4] = cudaMemGetInfo(&f, &t);
        CUdeviceptr d;
        e[5] = (cudaError_t)cuMemAlloc(&d, MIB);
        printf("child: free=%d freehost=%d malloc=%d mallochost=%d meminfo=%d cuMemAlloc=%d\n",
               e[0], e[1], e[2], e[3], e[4], e[5]);
        int bad = 0;
        for (int i = 0; i < 6; i++)
            bad += e[i] != cudaErrorInitializationError;
        _exit(bad ? 20 + bad : 0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child_signaled=%d child_exit=%d\n", WIFSIGNALED(st), WEXITSTATUS(st));
    CHECK(!WIFSIGNALED(st) && WEXITSTATUS(st) == 0);
    CHECK(cudaFree(p) == cudaSuccess && cudaFreeHost(h) == cudaSuccess);
    return 0;
}

/* ---- cudaFreeAsync on the legacy stream (held), then cudaMalloc used on a non-blocking stream */
static int legacy_freeasync_then_malloc(int async)
{
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    int same = 0;
    for (int i = 0; i < 50; i++) {
        void *p, *q;
        CHECK(gpoolsim_stream_hold(NULL) == 0);
        CHECK(cudaMallocAsync(&p, MIB, NULL) == cudaSuccess);
        CHECK(kernel_write(NULL, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, NULL) == cudaSuccess);
        CHECK((async ? cudaMallocAsync(&q, MIB, s2) : cudaMalloc(&q, MIB)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK((async ? cudaFreeAsync(q, s2) : cudaFree(q)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(NULL) == 0);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- a block larger than a page: queries inside its second and last pages */
static int query_large(void)
{
    size_t n = 3 * MIB + 5;
    void *p, *q;
    CHECK(cudaMalloc(&p, n) == cudaSuccess && cudaMalloc(&q, 100) == cudaSuccess);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange(&base, &size, DP(p) + 3 * MIB + 4) == CUDA_SUCCESS);
    printf("base_ok=%d size=%zu\n", base == DP(p), size);
    CHECK(base == DP(p) && size == n);
    CHECK(cuMemGetAddressRange(&base, &size, DP(q) + 99) == CUDA_SUCCESS);
    CHECK(base == DP(q) && size == 100);
    CHECK(cudaFree(p) == cudaSuccess && cudaFree(q) == cudaSuccess);
    return 0;
}

/* ---- cudaFree of a block a held non-blocking stream writes, that stream destroyed with the
 * work still queued (legal: cuStreamDestroy), then enough frees for a flush, and the block's
 * size allocated again and written on another non-blocking stream */
static int destroyed_nb_then_flush(void)
{
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    int same = 0;
    for (int r = 0; r < 4; r++) {
        CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s1);
        void *p;
        CHECK(cudaMalloc(&p, 4 * MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(kernel_write(s1, p, 4 * MIB) == 0);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK(cuStreamDestroy(s1) == CUDA_SUCCESS); /* its kernel still queued */
        for (int i = 0; i < 300; i++) {             /* past every batch limit */
            void *x;
            CHECK(cudaMalloc(&x, 1 * MIB) == cudaSuccess && cudaFree(x) == cudaSuccess);
        }
        void *q[8];
        for (int i = 0; i < 8; i++) {
            CHECK(cudaMalloc(&q[i], 4 * MIB) == cudaSuccess);
            same += q[i] == p;
            CHECK(kernel_write(s2, q[i], 4 * MIB) == 0);
        }
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        for (int i = 0; i < 8; i++)
            CHECK(cudaFree(q[i]) == cudaSuccess);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- a kernel writes a mapped host block through its device pointer (held, non-blocking),
 * cudaFreeHost, the block comes back and another stream's kernel writes it */
static int mapped_kernel(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *h, *h2, *d, *d2;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(cudaHostAlloc(&h, MIB, cudaHostAllocMapped) == cudaSuccess);
        CHECK(cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess);
        CHECK(kernel_write(s1, d, MIB) == 0);
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK(cudaHostAlloc(&h2, MIB, cudaHostAllocMapped) == cudaSuccess);
        CHECK(cudaHostGetDevicePointer(&d2, h2, 0) == cudaSuccess);
        same += h == h2;
        CHECK(kernel_write(s2, d2, MIB) == 0);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h2) == cudaSuccess);
        CHECK(gpoolsim_stream_release(s1) == 0);
    }
    printf("same=%d\n", same);
    return 0;
}

static const adv_mode modes[] = {
    {"host_blocking", NULL, NULL, 0, host_async, 0},
    {"host_nb", NULL, NULL, 0, host_async, 1},
    {"host_mapped_nb", NULL, NULL, 1, host_async, 1},
    {"capture_side_relaxed", NULL, NULL, CU_STREAM_CAPTURE_MODE_RELAXED, capture_side, 0},
    {"capture_side_thread", NULL, NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, capture_side, 0},
    {"capture_side_oom", NULL, NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, capture_side, 1},
    {"ptds", ptds, NULL, 0, NULL, 0},
    {"free_nb", NULL, free_realloc, 0, NULL, 0},
    {"free_blocking", NULL, free_realloc, 1, NULL, 0},
    {"free_legacy", NULL, free_realloc, 2, NULL, 0},
    {"async_then_malloc", NULL, async_then_malloc, 0, NULL, 0},
    {"async_then_malloc_legacy", NULL, async_then_malloc, 1, NULL, 0},
    {"async_then_malloc_blocking", NULL, async_then_malloc, 2, NULL, 0},
    {"async_cross", async_cross, NULL, 0, NULL, 0},
    {"ptds_async", NULL, ptds_async, 0, NULL, 0},
    {"ptds_async_ptsz", NULL, ptds_async, 1, NULL, 0},
    {"freeasync_then_free", NULL, mixed_double_free, 1, NULL, 0},
    {"free_then_freeasync", NULL, mixed_double_free, 0, NULL, 0},
    {"async_then_free", async_then_free, NULL, 0, NULL, 0},
    {"destroy_freeasync", NULL, destroy_reuse, 0, NULL, 0},
    {"destroy_free", NULL, destroy_reuse, 1, NULL, 0},
    {"capture_global", NULL, capture, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, 0},
    {"capture_thread", NULL, capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL, 0},
    {"capture_relaxed", NULL, capture, CU_STREAM_CAPTURE_MODE_RELAXED, NULL, 0},
    {"fork_threads", fork_threads, NULL, 0, NULL, 0},
    {"devices", NULL, devices, 0, NULL, 0},
    {"devices_push", NULL, devices, 1, NULL, 0},
    {"query_range", query_range, NULL, 0, NULL, 0},
    {"query_buffer_id", query_buffer_id, NULL, 0, NULL, 0},
    {"query_freed", query_freed, NULL, 0, NULL, 0},
    {"oom", NULL, oom, 0, NULL, 0},
    {"oom_nb", NULL, oom, 1, NULL, 0},
    {"meminfo_nb", meminfo_nb, NULL, 0, NULL, 0},
    {"host_query", host_query, NULL, 0, NULL, 0},
    {"legacy_then_new_nb", legacy_then_new_nb, NULL, 0, NULL, 0},
    {"host_devices", host_devices, NULL, 0, NULL, 0},
    {"free_on_other_stream", free_on_other_stream, NULL, 0, NULL, 0},
    {"capture_ptds", capture_ptds, NULL, 0, NULL, 0},
    {"free_then_mallocasync", free_then_mallocasync, NULL, 0, NULL, 0},
    {"oom_async_then_malloc", oom_async_then_malloc, NULL, 0, NULL, 0},
    {"fork_child_calls", fork_child_calls, NULL, 0, NULL, 0},
    {"legacy_freeasync_then_malloc", NULL, legacy_freeasync_then_malloc, 0, NULL, 0},
    {"legacy_freeasync_then_mallocasync", NULL, legacy_freeasync_then_malloc, 1, NULL, 0},
    {"query_large", query_large, NULL, 0, NULL, 0},
    {"destroyed_nb_then_flush", destroyed_nb_then_flush, NULL, 0, NULL, 0},
    {"mapped_kernel", mapped_kernel, NULL, 0, NULL, 0},
    {"meminfo", meminfo, NULL, 0, NULL, 0},
    {"double_free", double_free, NULL, 0, NULL, 0},
    {"double_free_driver", double_free_driver, NULL, 0, NULL, 0},
    {"double_free_thread", double_free_thread, NULL, 0, NULL, 0},
    {"double_free_host", double_free_host, NULL, 0, NULL, 0},
    {"double_free_many", double_free_many, NULL, 0, NULL, 0},
    {"query_freed_runtime", query_freed_runtime, NULL, 0, NULL, 0},
    {"query_buffer_id_attrs", query_buffer_id_attrs, NULL, 0, NULL, 0},
    {"passthrough_oom", passthrough_oom, NULL, 0, NULL, 0},
    {"double_free_async", double_free_async, NULL, 0, NULL, 0},
    {"bad_interior", bad_interior, NULL, 0, NULL, 0},
    {"bad_sequence", NULL, bad_sequence, 1, NULL, 0},
    {"bad_sequence0", NULL, bad_sequence, 0, NULL, 0},
    {"host_to_cudafree", NULL, host_to_cudafree, 0, NULL, 0},
    {"mapped_to_cudafree", NULL, host_to_cudafree, 1, NULL, 0},
};

int main(int argc, char **argv)
{
    return adv_main(modes, sizeof modes / sizeof modes[0],
                    argc > 1 && strstr(argv[1], "devices") ? 2 : 1, argc, argv);
}
