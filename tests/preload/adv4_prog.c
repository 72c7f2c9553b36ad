/* adv4_prog.c — a fourth outside campaign against the drop-in's contract (a program correct on
 * CUDA's own allocator stays correct under LD_PRELOAD): stream-ordered frees of another
 * device's block on the caller's default streams, calls that are not "potentially unsafe"
 * during a stream capture (creating a stream, pinned allocations of the capturing thread in a
 * relaxed capture, a thread's exit, a stream-ordered allocation on a stream that is not
 * capturing), and the pointer attribute that says whether cudaIpcGetMemHandle takes a block.
 * Linked as adv3_prog is. Usage: adv4_prog MODE; prints key=value lines, among them
 * violations=N; exits 0 when the mode's checks hold, 1 when a CHECK fails, 4 when the
 * simulator saw a happens-before violation. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_adv.h"

cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);

/* ---- A device-1 block written by a kernel of device 0 (peer access), still running, then
 * freed stream-ordered on device 0's own stream while device 0 is current: cudaFreeAsync
 * "Inserts a free operation into hStream. The allocation must not be accessed after stream
 * execution reaches the free" (cuda_runtime_api.h), and stream 0 is the current context's
 * default stream. Device 1 then allocates and writes; the referee sees whether the new block
 * met the write still queued on device 0. how: 0 cudaFreeAsync(p, 0), 1 the write and free on
 * cudaStreamPerThread, 2 cudaFreeAsync_ptsz(p, 0). nb: an unrelated non-blocking stream exists.
 */
static int peer_free_async(int how, int nb)
{
    CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
    CUstream s1 = make_stream(0);
    CHECK(s1);
    CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
    CHECK(cuCtxEnablePeerAccess(prog_ctx[1], 0) == CUDA_SUCCESS);
    if (nb) CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    CUstream w = how ? CU_STREAM_PER_THREAD : NULL;
    int same = 0;
    for (int i = 0; i < 10; i++) {
        void *p, *q;
        CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
        CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
        CHECK(gpoolsim_stream_hold(w) == 0); /* the kernel below is still running */
        CHECK(kernel_write(w, p, MIB) == 0);
        CHECK((how == 2 ? cudaFreeAsync_ptsz(p, NULL) : cudaFreeAsync(p, w)) == cudaSuccess);
        CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(cudaMalloc(&q, MIB) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s1, q, MIB) == 0);
        CHECK(cudaFree(q) == cudaSuccess);
        CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
        CHECK(gpoolsim_stream_release(w) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- The process's first non-blocking stream made while a capture runs (mode: global,
 * thread-local or relaxed), by the capturing thread or (other) another one. cuStreamCreate is
 * neither a stream operation nor a potentially unsafe call: the capture ends valid. Before the
 * capture a block was written by a kernel on a blocking stream, still running, and freed
 * (cuMemFree: ordered by the legacy stream alone); after it, the same memory allocated again
 * and written on the new non-blocking stream must meet that kernel in order. */
static CUresult made;
static CUstream made_stream;
static void *make_nonblocking(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(prog_ctx[0]);
    made = cuStreamCreate(&made_stream, CU_STREAM_NON_BLOCKING);
    return NULL;
}

static int capture_first_nonblocking(int mode, int other)
{
    CUstream s = make_stream(0), a = make_stream(0);
    CHECK(s && a);
    CUdeviceptr p, q, fill[40];
    CHECK(cuMemAlloc(&p, MIB) == CUDA_SUCCESS);
    for (int i = 0; i < 40; i++)
        CHECK(cuMemAlloc(&fill[i], 4096) == CUDA_SUCCESS);
    CHECK(gpoolsim_stream_hold(a) == 0);
    CHECK(kernel_write(a, (void *)(uintptr_t)p, MIB) == 0);
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    for (int i = 0; i < 40; i++) /* the batch flushes: p goes back after a fence */
        CHECK(cuMemFree(fill[i]) == CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture(s, (CUstreamCaptureMode)mode) == CUDA_SUCCESS);
    if (other) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, make_nonblocking, NULL) == 0);
        CHECK(pthread_join(t, NULL) == 0);
    } else {
        make_nonblocking(NULL);
    }
    CUgraph g = NULL;
    CUresult r = cuStreamEndCapture(s, &g);
    printf("cuStreamCreate=%d end_capture=%d\n", (int)made, (int)r);
    if (g) cuGraphDestroy(g);
    CHECK(made == CUDA_SUCCESS && r == CUDA_SUCCESS);
    CHECK(cuMemAlloc(&q, MIB) == CUDA_SUCCESS);
    printf("same=%d\n", p == q);
    CHECK(kernel_write(made_stream, (void *)(uintptr_t)q, MIB) == 0);
    CHECK(gpoolsim_stream_release(a) == 0);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cuMemFree(q) == CUDA_SUCCESS);
    return 0;
}

/* ---- A relaxed capture of a blocking stream (relaxed: the thread may make any call); the
 * capturing thread makes 200 pinned pairs of 1 MiB (drv: cuMemAllocHost / cuMemFreeHost, else
 * cudaMallocHost / cudaFreeHost). Nothing of that is work on the legacy stream, so nothing
 * joins the capture to it (cuda.h, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
static int capture_blocking_pinned(int drv)
{
    CUstream s = make_stream(0);
    CHECK(s);
    void *h;
    CHECK(cudaMallocHost(&h, 4096) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    for (int i = 0; i < 200; i++) {
        CHECK(drv ? cuMemAllocHost(&h, MIB) == CUDA_SUCCESS
                  : cudaMallocHost(&h, MIB) == cudaSuccess);
        CHECK(drv ? cuMemFreeHost(h) == CUDA_SUCCESS : cudaFreeHost(h) == cudaSuccess);
    }
    CUgraph g = NULL;
    CUresult r = cuStreamEndCapture(s, &g);
    printf("end_capture=%d\n", (int)r);
    if (g) cuGraphDestroy(g);
    CHECK(r == CUDA_SUCCESS);
    return 0;
}

/* ---- A thread that freed a block before a global capture began exits during it (thread exit
 * is no CUDA call); nb: the capturing stream is non-blocking. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go, freed;
static void *free_then_wait(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(prog_ctx[0]);
    CUdeviceptr p;
    if (cuMemAlloc(&p, MIB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) return (void *)1;
    pthread_mutex_lock(&mu);
    freed = 1;
    pthread_cond_broadcast(&cv);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int capture_thread_exit(int nb)
{
    CUstream s = make_stream(nb ? CU_STREAM_NON_BLOCKING : 0);
    CHECK(s);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_then_wait, NULL) == 0);
    pthread_mutex_lock(&mu);
    while (!freed)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    void *r;
    CHECK(pthread_join(t, &r) == 0 && r == NULL);
    CUgraph g = NULL;
    CUresult e = cuStreamEndCapture(s, &g);
    printf("end_capture=%d\n", (int)e);
    if (g) cuGraphDestroy(g);
    CHECK(e == CUDA_SUCCESS);
    return 0;
}

/* ---- Under GPOOL_SIM_MEMORY=256M: 12 blocks of 20 MiB, 3 freed (cudaFree) before a global
 * capture begins on a non-blocking stream; during it another thread makes a stream-ordered
 * allocation of 40 MiB on its own stream, which is not capturing (a stream operation, not a
 * potentially unsafe call): it gets the memory, and the capture ends valid. */
static CUstream other_stream;
static cudaError_t other_err;
static void *alloc_on_other(void *arg)
{
    (void)arg;
    void *q;
    cuCtxSetCurrent(prog_ctx[0]);
    other_err = cudaMallocAsync(&q, 40 * MIB, other_stream);
    return NULL;
}

static int capture_pressure_other_stream(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    other_stream = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s && other_stream);
    void *blk[12];
    for (int i = 0; i < 12; i++)
        CHECK(cudaMalloc(&blk[i], 20 * MIB) == cudaSuccess);
    for (int i = 9; i < 12; i++)
        CHECK(cudaFree(blk[i]) == cudaSuccess);
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, alloc_on_other, NULL) == 0 && pthread_join(t, NULL) == 0);
    CUgraph g = NULL;
    CUresult r = cuStreamEndCapture(s, &g);
    printf("cudaMallocAsync=%d end_capture=%d\n", (int)other_err, (int)r);
    if (g) cuGraphDestroy(g);
    CHECK(r == CUDA_SUCCESS && other_err == cudaSuccess);
    return 0;
}

/* ---- CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE (cuda.h: "1 if this pointer maps to an
 * allocation that is suitable for ::cudaIpcGetMemHandle, 0 otherwise") agrees with what
 * cudaIpcGetMemHandle answers for a cudaMalloc block, through both pointer queries. */
static int ipc_capable(void)
{
    void *p;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
    int one = -1, many = -1;
    CHECK(cuPointerGetAttribute(&one, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, DP(p)) ==
          CUDA_SUCCESS);
    CUpointer_attribute a = CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE;
    void *data[1] = {&many};
    CHECK(cuPointerGetAttributes(1, &a, data, DP(p)) == CUDA_SUCCESS);
    cudaError_t (*get)(cudaIpcMemHandle_t *, void *);
    *(void **)&get = dlsym(RTLD_DEFAULT, "cudaIpcGetMemHandle"); /* the interposer's */
    CHECK(get);
    cudaIpcMemHandle_t h;
    cudaError_t e = get(&h, p);
    printf("capable=%d %d cudaIpcGetMemHandle=%d\n", one, many, (int)e);
    CHECK(one == (e == cudaSuccess) && many == one);
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
}

static const adv_mode modes[] = {
    {"dev_peer_free_async_legacy", NULL, NULL, 0, peer_free_async, 0},
    {"dev_peer_free_async_per_thread", NULL, NULL, 1, peer_free_async, 0},
    {"dev_peer_free_async_ptsz", NULL, NULL, 2, peer_free_async, 0},
    {"dev_peer_free_async_legacy_nb", NULL, NULL, 0, peer_free_async, 1},
    {"dev_peer_free_async_per_thread_nb", NULL, NULL, 1, peer_free_async, 1},
    {"capture_global_first_nonblocking", NULL, NULL, 0, capture_first_nonblocking, 0},
    {"capture_global_first_nonblocking_other", NULL, NULL, 0, capture_first_nonblocking, 1},
    {"capture_local_first_nonblocking", NULL, NULL, 1, capture_first_nonblocking, 0},
    {"capture_blocking_pinned_runtime", NULL, capture_blocking_pinned, 0, NULL, 0},
    {"capture_blocking_pinned_driver", NULL, capture_blocking_pinned, 1, NULL, 0},
    {"capture_thread_exit", NULL, capture_thread_exit, 0, NULL, 0},
    {"capture_thread_exit_nb", NULL, capture_thread_exit, 1, NULL, 0},
    {"capture_pressure_other_stream", capture_pressure_other_stream, NULL, 0, NULL, 0},
    {"ipc_capable", ipc_capable, NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
    return adv_main(modes, sizeof modes / sizeof modes[0],
                    argc > 1 && !strncmp(argv[1], "dev_", 4) ? 2 : 1, argc, argv);
}
