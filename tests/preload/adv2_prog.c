/* adv2_prog.c — a second outside campaign against the drop-in's contract (issue 23's promise:
 * a program correct on CUDA's own allocator stays correct under LD_PRELOAD), patterns
 * tests/preload/adv_prog.c does not cover. Linked as adv_prog is (the simulator for driver
 * entry points by name, the cudart stand-in for the runtime's memory calls). Usage: adv2_prog
 * MODE; prints key=value lines, among them violations=N; exits 0 when the mode's checks hold, 1
 * when a CHECK fails, 4 when the simulator saw a happens-before violation. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prog_adv.h"

/* Three new non-blocking streams and a timing-free event, for the event-ordering modes. */
static int three_streams_and_an_event(CUstream *s1, CUstream *s2, CUstream *s3, CUevent *ev)
{
    *s1 = make_stream(CU_STREAM_NON_BLOCKING);
    *s2 = make_stream(CU_STREAM_NON_BLOCKING);
    *s3 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(*s1 && *s2 && *s3);
    CHECK(cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    return 0;
}

/* ---- cudaMalloc'd block written on held s2, s1 waits an event recorded after it, the block
 * cudaFreeAsync'd on s1; then cudaMalloc / cudaMallocAsync(s3) and a write on s3. The free is in
 * s1's order, which includes s2's write through the event (cudaFreeAsync: "the memory ... will
 * be freed once all preceding work in the stream has completed"). */
static int event_free_cudamalloc_block(void)
{
    CUstream s1, s2, s3;
    CUevent ev;
    CHECK(three_streams_and_an_event(&s1, &s2, &s3, &ev) == 0);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(s2) == 0);
        CHECK(kernel_write(s2, p, MIB) == 0);
        CHECK(cuEventRecord(ev, s2) == CUDA_SUCCESS);
        CHECK(cuStreamWaitEvent(s1, ev, 0) == CUDA_SUCCESS);
        CHECK(cudaFreeAsync(p, s1) == cudaSuccess);
        CHECK((i % 2 ? cudaMalloc(&q, MIB) : cudaMallocAsync(&q, MIB, s3)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s3, q, MIB) == 0);
        CHECK((i % 2 ? cudaFree(q) : cudaFreeAsync(q, s3)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(s2) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    CHECK(cuEventDestroy(ev) == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- two blocks cudaMallocAsync'd on s1 and written there (held); an event on s1, s2 waits
 * it; s1 destroyed with the work queued; one block cudaFreeAsync'd on s2, the other cudaFree'd;
 * a new stream (maybe s1's handle value again) allocates: nothing handed out before s1's
 * queued writes complete. */
static int destroyed_blocks_freed_elsewhere(void)
{
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    int same = 0, reused = 0;
    for (int i = 0; i < 30; i++) {
        CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s1);
        void *p, *q, *a, *b;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(cudaMallocAsync(&q, MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(kernel_write(s1, q, MIB) == 0);
        CHECK(cuEventRecord(ev, s1) == CUDA_SUCCESS);
        CHECK(cuStreamWaitEvent(s2, ev, 0) == CUDA_SUCCESS);
        CHECK(cuStreamDestroy(s1) == CUDA_SUCCESS);
        CHECK(cudaFreeAsync(p, s2) == cudaSuccess);
        CHECK(cudaFree(q) == cudaSuccess);
        CUstream s3 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s3);
        reused += s3 == s1;
        CHECK(cudaMallocAsync(&a, MIB, s3) == cudaSuccess);
        CHECK(cudaMalloc(&b, MIB) == cudaSuccess);
        same += (a == p || a == q) + (b == p || b == q);
        CHECK(kernel_write(s3, a, MIB) == 0);
        CHECK(kernel_write(s3, b, MIB) == 0);
        CHECK(cudaFreeAsync(a, s3) == cudaSuccess);
        CHECK(cudaFree(b) == cudaSuccess);
        CHECK(cuStreamSynchronize(s3) == CUDA_SUCCESS);
        CHECK(cuStreamDestroy(s3) == CUDA_SUCCESS);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    CHECK(cuEventDestroy(ev) == CUDA_SUCCESS);
    printf("same=%d reused=%d destroyed_calls=%lu\n", same, reused,
           gpoolsim_destroyed_stream_calls());
    CHECK(gpoolsim_destroyed_stream_calls() == 0);
    return 0;
}

/* ---- near capacity (GPOOL_SIM_MEMORY=256M): 200 MiB cudaMallocAsync'd on s1, written,
 * cudaFreeAsync'd, s1 destroyed, cudaDeviceSynchronize (cuCtxSynchronize): the memory is free
 * (all work complete, cudaFreeAsync's free done), so cudaMalloc / cudaMallocAsync on another
 * stream / cuMemAlloc of 200 MiB succeed, each time. */
static int ctxsync_then_full_reuse(void)
{
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    for (int i = 0; i < 6; i++) {
        CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s1);
        void *p, *q;
        CHECK(gpoolsim_stream_hold(s1) == 0);
        CHECK(cudaMallocAsync(&p, 200 * MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, 200 * MIB) == 0);
        CHECK(cudaFreeAsync(p, s1) == cudaSuccess);
        if (i % 2)
            CHECK(cuStreamDestroy(s1) == CUDA_SUCCESS); /* work still queued (held) */
        else
            CHECK(gpoolsim_stream_release(s1) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS); /* cudaDeviceSynchronize */
        cudaError_t e;
        int kind = i % 3;
        if (kind == 0)
            e = cudaMalloc(&q, 200 * MIB);
        else if (kind == 1)
            e = cudaMallocAsync(&q, 200 * MIB, s2);
        else {
            CUdeviceptr d = 0;
            e = cuMemAlloc(&d, 200 * MIB) == CUDA_SUCCESS ? cudaSuccess : cudaErrorMemoryAllocation;
            q = (void *)(uintptr_t)d;
        }
        printf("round=%d kind=%d alloc=%d\n", i, kind, (int)e);
        CHECK(e == cudaSuccess);
        CHECK(kernel_write(s2, q, 200 * MIB) == 0);
        if (kind == 1)
            CHECK(cudaFreeAsync(q, s2) == cudaSuccess);
        else if (kind == 2)
            CHECK(cuMemFree(DP(q)) == CUDA_SUCCESS);
        else
            CHECK(cudaFree(q) == cudaSuccess);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        if (!(i % 2)) CHECK(cuStreamDestroy(s1) == CUDA_SUCCESS);
    }
    return 0;
}

/* ---- huge sizes: cudaMalloc, cudaMallocAsync, cudaMallocHost, cudaHostAlloc, cuMemAlloc,
 * cuMemAllocAsync of sizes no device has answer cudaErrorMemoryAllocation /
 * CUDA_ERROR_OUT_OF_MEMORY, and the pool still serves ordinary requests after. */
static int huge_sizes(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, (size_t)1 << 50,
                            ((size_t)1 << 40) + 1};
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *p = (void *)1;
        cudaError_t e1 = cudaMalloc(&p, n);
        cudaError_t e2 = cudaMallocAsync(&p, n, s);
        cudaError_t e3 = cudaMallocHost(&p, n);
        cudaError_t e4 = cudaHostAlloc(&p, n, cudaHostAllocMapped);
        CUdeviceptr d = 0;
        CUresult r5 = cuMemAlloc(&d, n);
        CUresult r6 = cuMemAllocAsync(&d, n, s);
        printf("size=%#zx cudaMalloc=%d cudaMallocAsync=%d cudaMallocHost=%d cudaHostAlloc=%d "
               "cuMemAlloc=%d cuMemAllocAsync=%d\n",
               n, (int)e1, (int)e2, (int)e3, (int)e4, (int)r5, (int)r6);
        bad += e1 != cudaErrorMemoryAllocation;
        bad += e2 != cudaErrorMemoryAllocation;
        bad += e3 != cudaErrorMemoryAllocation;
        bad += e4 != cudaErrorMemoryAllocation;
        bad += r5 != CUDA_ERROR_OUT_OF_MEMORY;
        bad += r6 != CUDA_ERROR_OUT_OF_MEMORY;
    }
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    /* still usable */
    for (int i = 0; i < 64; i++) {
        void *p, *h;
        CHECK(cudaMalloc(&p, (size_t)(i + 1) * 4096) == cudaSuccess);
        CHECK(kernel_write(s, p, (size_t)(i + 1) * 4096) == 0);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK(cudaMallocAsync(&p, 3 * MIB, s) == cudaSuccess);
        CHECK(cudaFreeAsync(p, s) == cudaSuccess);
        CHECK(cudaMallocHost(&h, 8192) == cudaSuccess);
        CHECK(cudaFreeHost(h) == cudaSuccess);
    }
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    printf("bad_codes=%d\n", bad);
    CHECK(bad == 0);
    return 0;
}

/* ---- cuMemAlloc(&d, 0): "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE"
 * (driver API, cuMemAlloc); cuMemAllocHost / cuMemHostAlloc likewise. */
static int zero_sizes(void)
{
    CUdeviceptr d = 0;
    CUresult r1 = cuMemAlloc(&d, 0);
    void *h = NULL;
    CUresult r2 = cuMemAllocHost(&h, 0);
    CUresult r3 = cuMemHostAlloc(&h, 0, 0);
    printf("cuMemAlloc0=%d cuMemAllocHost0=%d cuMemHostAlloc0=%d\n", (int)r1, (int)r2, (int)r3);
    CHECK(r1 == CUDA_ERROR_INVALID_VALUE);
    /* cudaMalloc(0): success (the runtime's answer), and cudaFree of what it gave is legal */
    void *p = (void *)1;
    CHECK(cudaMalloc(&p, 0) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
}

/* ---- many threads on their own per-thread default streams: cudaMallocAsync(cudaStreamPerThread),
 * a memset of the thread's id on that stream, a stream synchronize, then the bytes still hold
 * the id (no other thread was given the block meanwhile), cudaFreeAsync(cudaStreamPerThread). */
enum { PT_THREADS = 6, PT_ITERS = 300 };
struct pt_arg {
    int id;
    int failed;
    int corrupt;
};
static void *pt_thread(void *arg)
{
    struct pt_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    unsigned seed = (unsigned)a->id * 7919u + 1;
    for (int i = 0; i < PT_ITERS; i++) {
        size_t n = 4096 * (1 + rand_r(&seed) % 96);
        void *p;
        if (cudaMallocAsync(&p, n, cudaStreamPerThread) != cudaSuccess) {
            a->failed++;
            continue;
        }
        if (cuMemsetD8Async(DP(p), (unsigned char)(a->id + 1), n, CU_STREAM_PER_THREAD) !=
                CUDA_SUCCESS ||
            cuStreamSynchronize(CU_STREAM_PER_THREAD) != CUDA_SUCCESS)
            a->failed++;
        if (i % 8 == 0) usleep(50);
        const unsigned char *b = p;
        for (size_t k = 0; k < n; k += 512)
            if (b[k] != (unsigned char)(a->id + 1)) {
                a->corrupt++;
                break;
            }
        if (i % 3 == 0) gpoolsim_stream_hold(CU_STREAM_PER_THREAD);
        if (gpoolsim_touch(CU_STREAM_PER_THREAD, DP(p), n, 1) != CUDA_SUCCESS) a->failed++;
        if (cudaFreeAsync(p, cudaStreamPerThread) != cudaSuccess) a->failed++;
        if (i % 3 == 0) gpoolsim_stream_release(CU_STREAM_PER_THREAD);
    }
    cuStreamSynchronize(CU_STREAM_PER_THREAD);
    return NULL;
}
static int ptds_many_threads(void)
{
    struct pt_arg a[PT_THREADS];
    pthread_t t[PT_THREADS];
    for (int i = 0; i < PT_THREADS; i++) {
        a[i] = (struct pt_arg){i, 0, 0};
        CHECK(pthread_create(&t[i], NULL, pt_thread, &a[i]) == 0);
    }
    int failed = 0, corrupt = 0;
    for (int i = 0; i < PT_THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        failed += a[i].failed;
        corrupt += a[i].corrupt;
    }
    printf("failed=%d corrupt=%d\n", failed, corrupt);
    CHECK(failed == 0 && corrupt == 0);
    return 0;
}

/* ---- pointer queries around cudaFreeAsync: cudaPointerGetAttributes on an interior pointer of
 * a live block: device memory, devicePointer the pointer itself; after cudaFreeAsync and a
 * stream synchronize: cuPointerGetAttribute(MEMORY_TYPE) is CUDA_ERROR_INVALID_VALUE (not an
 * allocation), cuPointerGetAttributes succeeds with the type left 0 ("Unlike
 * cuPointerGetAttribute, this function will not return an error when the ptr encountered is
 * not a valid CUDA pointer. Instead, the attributes are assigned default NULL values") and
 * cudaPointerGetAttributes answers cudaMemoryTypeUnregistered. */
static int query_freeasync(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *keep;
    CHECK(cudaMallocAsync(&keep, MIB, s) == cudaSuccess); /* the chunk stays mapped */
    void *p;
    CHECK(cudaMallocAsync(&p, 64 * 1024, s) == cudaSuccess);
    CHECK(kernel_write(s, p, 64 * 1024) == 0);
    char *mid = (char *)p + 1000;
    struct cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    CHECK(cudaPointerGetAttributes(&at, mid) == cudaSuccess);
    printf("live type=%d devptr_ok=%d\n", (int)at.type, at.devicePointer == mid);
    CHECK(at.type == cudaMemoryTypeDevice && at.devicePointer == (void *)mid && at.device == 0);
    CHECK(cudaFreeAsync(p, s) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    unsigned type = 77;
    CUresult r1 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, DP(p));
    unsigned type2 = 77;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &type2;
    CUresult r2 = cuPointerGetAttributes(1, &attr, &data, DP(mid));
    memset(&at, 0, sizeof at);
    cudaError_t e3 = cudaPointerGetAttributes(&at, mid);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r4 = cuMemGetAddressRange(&base, &size, DP(mid));
    printf("freed getattr=%d type=%u getattrs=%d type2=%u rt=%d rttype=%d range=%d\n", (int)r1,
           type, (int)r2, type2, (int)e3, (int)at.type, (int)r4);
    CHECK(r1 == CUDA_ERROR_INVALID_VALUE);
    CHECK(r2 == CUDA_SUCCESS && type2 == 0);
    CHECK(e3 == cudaSuccess && at.type == cudaMemoryTypeUnregistered);
    CHECK(r4 != CUDA_SUCCESS);
    CHECK(cudaFreeAsync(keep, s) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    return 0;
}

/* ---- cudaMemGetInfo around cudaFreeAsync and cuMemAlloc/cuMemFree: after the free and a
 * synchronize the bytes count as free again; total never changes and equals cuDeviceTotalMem;
 * cudaMemGetInfo and cuMemGetInfo agree. */
static int meminfo_async(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    size_t f0, t0, f1, t1, f2, t2, f3, t3, f4, t4;
    CHECK(cudaMemGetInfo(&f0, &t0) == cudaSuccess);
    void *p;
    CHECK(cudaMallocAsync(&p, 100 * MIB, s) == cudaSuccess);
    CHECK(kernel_write(s, p, 100 * MIB) == 0);
    CHECK(cudaMemGetInfo(&f1, &t1) == cudaSuccess);
    CHECK(cudaFreeAsync(p, s) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(cudaMemGetInfo(&f2, &t2) == cudaSuccess);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, 100 * MIB) == CUDA_SUCCESS);
    CHECK(cudaMemGetInfo(&f3, &t3) == cudaSuccess);
    CHECK(cuMemFree(d) == CUDA_SUCCESS);
    CHECK(cudaMemGetInfo(&f4, &t4) == cudaSuccess);
    size_t cf = 0, ct = 0, dt = 0;
    CHECK(cuMemGetInfo(&cf, &ct) == CUDA_SUCCESS);
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDeviceTotalMem(&dt, dev) == CUDA_SUCCESS);
    printf("free0=%zu free1=%zu free2=%zu free3=%zu free4=%zu cufree=%zu total=%zu devtotal=%zu\n",
           f0 / MIB, f1 / MIB, f2 / MIB, f3 / MIB, f4 / MIB, cf / MIB, t0 / MIB, dt / MIB);
    CHECK(t0 == t1 && t1 == t2 && t2 == t3 && t3 == t4 && ct == t0 && dt == t0);
    CHECK(f1 + 100 * MIB <= f0);
    CHECK(f2 + 4 * MIB >= f0);
    CHECK(f3 + 100 * MIB <= f2);
    CHECK(f4 + 4 * MIB >= f0 && cf == f4);
    return 0;
}

/* ---- cuMemFree of memory cudaMallocAsync gave ("cuMemFree ... must have been returned by ...
 * cuMemAllocAsync()"; no implicit synchronization for such memory: the caller made sure its
 * accesses completed), then reuse on other streams. */
static int cumemfree_of_async(void)
{
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING), s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1 && s2);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
        CHECK(cuMemFree(DP(p)) == CUDA_SUCCESS);
        CHECK(cudaMallocAsync(&q, MIB, s2) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK(cudaFreeAsync(q, s2) == cudaSuccess);
        /* the freed pointer is no longer an allocation: freeing it again is an error */
        if (i == 0) {
            CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
            CUresult r = cuMemFree(DP(p));
            printf("second_cuMemFree=%d\n", (int)r);
            CHECK(r != CUDA_SUCCESS || p == q);
        }
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- exit() while cudaFreeAsync'd blocks wait on a stream whose work has not completed yet
 * (it completes 200 ms later, as a GPU's would), and cudaFree'd blocks wait in a batch: the
 * process ends, exit code 0, no hang. */
static CUstream exit_stream;
static void *release_later(void *arg)
{
    (void)arg;
    usleep(200 * 1000);
    gpoolsim_stream_release(exit_stream);
    return NULL;
}
static int exit_pending(void)
{
    exit_stream = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(exit_stream);
    CHECK(gpoolsim_stream_hold(exit_stream) == 0);
    for (int i = 0; i < 20; i++) {
        void *p, *q;
        CHECK(cudaMallocAsync(&p, MIB, exit_stream) == cudaSuccess);
        CHECK(kernel_write(exit_stream, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, exit_stream) == cudaSuccess);
        CHECK(cudaMalloc(&q, 64 * 1024) == cudaSuccess);
        CHECK(kernel_write(exit_stream, q, 64 * 1024) == 0);
        CHECK(cudaFree(q) == cudaSuccess);
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, release_later, NULL) == 0);
    CHECK(pthread_detach(t) == 0);
    printf("violations=%lu\n", gpoolsim_violations());
    printf("exiting\n");
    exit(gpoolsim_violations() ? 4 : 0);
}

/* ---- in a relaxed-mode capture the capturing thread may call cudaMalloc ("the local thread is
 * not prohibited from potentially unsafe API calls", cudaStreamBeginCapture); the capture ends
 * valid, the block is ordinary memory. In a thread-local (or global) capture that thread's
 * cudaMalloc is prohibited: cudaErrorStreamCaptureUnsupported. */
static int capture_same_thread(int mode_value)
{
    CUstreamCaptureMode mode = (CUstreamCaptureMode)mode_value;
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1);
    void *warm;
    CHECK(cudaMalloc(&warm, MIB) == cudaSuccess); /* the runtime is up, a chunk cached */
    CHECK(cudaFree(warm) == cudaSuccess);
    CHECK(cuStreamBeginCapture(s1, mode) == CUDA_SUCCESS);
    void *g;
    CHECK(cudaMallocAsync(&g, MIB, s1) == cudaSuccess);
    CHECK(kernel_write(s1, g, MIB) == 0);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, MIB);
    CHECK(cudaFreeAsync(g, s1) == cudaSuccess);
    CUgraph graph = NULL;
    CUresult r = cuStreamEndCapture(s1, &graph);
    printf("capture_mode=%d cudaMalloc=%d end_capture=%d\n", mode_value, (int)e, (int)r);
    if (graph) CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) {
        CHECK(e == cudaSuccess && r == CUDA_SUCCESS);
        uintptr_t a = (uintptr_t)p, b = (uintptr_t)g;
        CHECK(!(a < b + MIB && b < a + MIB)); /* not the graph's memory */
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(cudaFree(p) == cudaSuccess);
    } else {
        CHECK(e == cudaErrorStreamCaptureUnsupported);
    }
    /* usable after */
    void *q;
    CHECK(cudaMalloc(&q, MIB) == cudaSuccess && cudaFree(q) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    return 0;
}

/* ---- cudaFreeHost of a pinned block whose async copy was queued on the legacy stream (NULL)
 * with a held non-blocking stream waiting on nothing: then the block is reallocated and written
 * by an async copy on a non-blocking stream. Pinned blocks freed with work pending on the
 * legacy stream. cudaFreeHost synchronizes ("cudaFreeHost ... implicitly synchronizes"). */
static int freehost_legacy_copy(void)
{
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    void *d;
    CHECK(cudaMalloc(&d, MIB) == cudaSuccess);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *h, *h2;
        CHECK(gpoolsim_stream_hold(NULL) == 0);
        CHECK((i % 2 ? cudaHostAlloc(&h, MIB, cudaHostAllocMapped) : cudaMallocHost(&h, MIB)) ==
              cudaSuccess);
        CHECK(cuMemcpyDtoHAsync(h, DP(d), MIB, NULL) == CUDA_SUCCESS); /* pending at free */
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK(gpoolsim_stream_release(NULL) == 0);
        CHECK(cudaMallocHost(&h2, MIB) == cudaSuccess);
        same += h == h2;
        CHECK(cuMemcpyDtoHAsync(h2, DP(d), MIB, s2) == CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(h2) == cudaSuccess);
    }
    CHECK(cudaFree(d) == cudaSuccess);
    printf("same=%d\n", same);
    return 0;
}

/* ---- cudaFreeAsync of a block, then cudaStreamSynchronize on a *different* stream that waited
 * on an event recorded after the free: the free has completed in host order, so cudaMalloc and
 * a write on a third non-blocking stream are ordered (cudaFreeAsync: the free is a stream
 * operation; event ordering carries it). */
static int freeasync_event_then_malloc(void)
{
    CUstream s1, s2, s3;
    CUevent ev;
    CHECK(three_streams_and_an_event(&s1, &s2, &s3, &ev) == 0);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(cudaMallocAsync(&p, MIB, s1) == cudaSuccess);
        CHECK(kernel_write(s1, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, s1) == cudaSuccess);
        CHECK(cuEventRecord(ev, s1) == CUDA_SUCCESS);
        CHECK(cuStreamWaitEvent(s2, ev, 0) == CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cudaMalloc(&q, MIB) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s3, q, MIB) == 0);
        CHECK(cudaFree(q) == cudaSuccess);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    CHECK(cuEventDestroy(ev) == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- a block another thread wrote on its per-thread default stream (still running) and
 * cudaFree'd, once a non-blocking stream exists (cudaFree batches): this thread floods
 * cudaMalloc/cudaFree pairs of the size (flushes), then cudaMalloc and a write on a non-blocking
 * (how 0) or blocking (how 1) stream. cudaFree synchronizes with the device's work ("cudaFree
 * ... implicitly synchronizes"), the per-thread stream's included. */
struct ptb_arg {
    pthread_barrier_t *bar;
    void *p;
    int failed;
};
static void *ptb_thread(void *arg)
{
    struct ptb_arg *a = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    for (int i = 0; i < 8; i++) {
        gpoolsim_stream_hold(CU_STREAM_PER_THREAD);
        if (cudaMalloc(&a->p, MIB) != cudaSuccess ||
            gpoolsim_touch(CU_STREAM_PER_THREAD, DP(a->p), MIB, 1) != CUDA_SUCCESS ||
            cudaFree(a->p) != cudaSuccess)
            a->failed++;
        pthread_barrier_wait(a->bar); /* freed */
        pthread_barrier_wait(a->bar); /* the other thread reused */
        gpoolsim_stream_release(CU_STREAM_PER_THREAD);
        cuStreamSynchronize(CU_STREAM_PER_THREAD);
        pthread_barrier_wait(a->bar);
    }
    return NULL;
}
static int ptds_batch(int how)
{
    CUstream nb = make_stream(CU_STREAM_NON_BLOCKING);
    CUstream s2 = how ? make_stream(0) : nb;
    CHECK(nb && s2);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct ptb_arg a = {&bar, NULL, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, ptb_thread, &a) == 0);
    int same = 0;
    for (int i = 0; i < 8; i++) {
        pthread_barrier_wait(&bar);
        for (int k = 0; k < 300; k++) {
            void *x;
            CHECK(cudaMalloc(&x, 64 * 1024) == cudaSuccess && cudaFree(x) == cudaSuccess);
        }
        void *q;
        CHECK(cudaMalloc(&q, MIB) == cudaSuccess);
        same += q == a.p;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK(cuStreamSynchronize(s2) == CUDA_SUCCESS);
        CHECK(cudaFree(q) == cudaSuccess);
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
    }
    CHECK(pthread_join(t, NULL) == 0);
    printf("same=%d failed=%d\n", same, a.failed);
    CHECK(a.failed == 0);
    return 0;
}

/* ---- the explicit handles cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2): a block
 * cudaMallocAsync'd and written on that stream (held), cudaFreeAsync'd on it, then
 * cudaMallocAsync on a non-blocking stream and a write there: the free is in that stream's
 * order (cuda_runtime_api.h: cudaStreamLegacy, cudaStreamPerThread). */
static int special_handles(int per_thread)
{
    cudaStream_t h = per_thread ? cudaStreamPerThread : cudaStreamLegacy;
    CUstream cu = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    CUstream s2 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s2);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(gpoolsim_stream_hold(cu) == 0);
        CHECK(cudaMallocAsync(&p, MIB, h) == cudaSuccess);
        CHECK(kernel_write(cu, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, h) == cudaSuccess);
        CHECK((i % 2 ? cudaMalloc(&q, MIB) : cudaMallocAsync(&q, MIB, s2)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s2, q, MIB) == 0);
        CHECK((i % 2 ? cudaFree(q) : cudaFreeAsync(q, s2)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(cu) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- exit() from a worker thread while two other threads allocate and free (cudaMalloc/
 * cudaFree, cudaMallocAsync/cudaFreeAsync on a non-blocking stream): the process ends with the
 * worker's code, no hang, no crash. */
static volatile int churn_stop; /* set just before exit(): calls in flight finish during it */
static void *churn_thread(void *arg)
{
    CUstream s = arg;
    cuCtxSetCurrent(prog_ctx[0]);
    while (!churn_stop) {
        void *p;
        if (s) {
            if (cudaMallocAsync(&p, 256 * 1024, s) == cudaSuccess) {
                gpoolsim_touch(s, DP(p), 256 * 1024, 1);
                cudaFreeAsync(p, s);
            }
        } else if (cudaMalloc(&p, 256 * 1024) == cudaSuccess)
            cudaFree(p);
    }
    return NULL;
}
static void *exiter_thread(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    printf("violations=%lu\nexiting\n", gpoolsim_violations());
    churn_stop = 1;
    exit(gpoolsim_violations() ? 4 : 0);
}
static int exit_from_thread(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    pthread_t t[3];
    CHECK(pthread_create(&t[0], NULL, churn_thread, NULL) == 0);
    CHECK(pthread_create(&t[1], NULL, churn_thread, s) == 0);
    CHECK(pthread_create(&t[2], NULL, exiter_thread, NULL) == 0);
    pthread_join(t[2], NULL); /* never returns: the process exits */
    return 1;
}

/* ---- frees of gpool's own blocks through the wrong call, or at an interior address: each an
 * error (cuMemFreeHost: the pointer must come from cuMemHostAlloc/cuMemAllocHost; cuMemFreeAsync,
 * cudaFreeAsync: CUDA_ERROR_INVALID_VALUE / cudaErrorInvalidValue for other pointers), and nothing
 * is freed: the blocks stay live and distinct, usable, and their own frees still succeed. */
static int wrong_kind_frees(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *d, *a, *h, *m;
    CHECK(cudaMalloc(&d, MIB) == cudaSuccess);
    CHECK(cudaMallocAsync(&a, MIB, s) == cudaSuccess);
    CHECK(cudaMallocHost(&h, 64 * 1024) == cudaSuccess);
    CHECK(cudaHostAlloc(&m, 64 * 1024, cudaHostAllocMapped) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    int e[8];
    /* the not-gpool's-kind cases through the driver's names: the cudart stand-in's host
     * functions are plain malloc/free, where cudart would reach cuMemFreeHost */
    e[0] = (int)cuMemFreeHost(d);                        /* device block */
    e[1] = (int)cuMemFreeHost((char *)d + 4096);         /* interior device block */
    e[2] = (int)cuMemFreeHost((char *)a + 4096);         /* interior async block */
    e[3] = (int)cuMemFreeAsync(DP(h), s);                /* pinned block */
    e[4] = (int)cuMemFreeAsync(DP((char *)a + 4096), s); /* interior async block */
    e[5] = (int)cuMemFreeAsync(DP((char *)d + 256), s);  /* interior cudaMalloc block */
    e[6] = (int)cuMemFreeAsync(DP(m), s);                /* mapped host block */
    e[7] = (int)cuMemFreeHost(a);                        /* async device block */
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    printf("codes=%d,%d,%d,%d,%d,%d,%d,%d\n", e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
    /* nothing was freed: new blocks of the sizes do not land on them */
    int hit = 0;
    void *x[64];
    for (int i = 0; i < 64; i++) {
        CHECK((i % 2 ? cudaMalloc(&x[i], MIB) : cudaMallocHost(&x[i], 64 * 1024)) == cudaSuccess);
        hit += x[i] == d || x[i] == a || x[i] == h || x[i] == m;
    }
    CHECK(kernel_write(s, d, MIB) == 0 && kernel_write(s, a, MIB) == 0);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        CHECK((i % 2 ? cudaFree(x[i]) : cudaFreeHost(x[i])) == cudaSuccess);
    printf("hit=%d\n", hit);
    for (int i = 0; i < 8; i++)
        CHECK(e[i] == (int)CUDA_ERROR_INVALID_VALUE);
    CHECK(hit == 0);
    CHECK(cudaFree(d) == cudaSuccess && cudaFreeAsync(a, s) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess && cudaFreeHost(m) == cudaSuccess);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    return 0;
}

/* ---- cudaFreeHost / cuMemFreeHost at an interior address of a pinned or mapped block: "ptr -
 * Pointer to memory to free" must be what cudaMallocHost/cudaHostAlloc returned (cudaFreeHost;
 * cuMemFreeHost: "p - Pointer to memory to free", from cuMemHostAlloc/cuMemAllocHost), so the
 * answer is cudaErrorInvalidValue / CUDA_ERROR_INVALID_VALUE and the block stays the
 * program's: later cudaMallocHost calls do not hand it out, and its own free succeeds. */
static int interior_host_free(int how)
{
    CHECK(make_stream(CU_STREAM_NON_BLOCKING));
    int bad = 0, hit = 0;
    for (int i = 0; i < 4; i++) {
        void *h;
        int mapped = i % 2;
        CHECK((mapped ? cudaHostAlloc(&h, 8192, cudaHostAllocMapped) : cudaMallocHost(&h, 8192)) ==
              cudaSuccess);
        memset(h, 0x5a, 8192);
        int e = how ? (int)cuMemFreeHost((char *)h + 64) : (int)cudaFreeHost((char *)h + 64);
        printf("interior_free mapped=%d code=%d\n", mapped, e);
        bad += e != (how ? (int)CUDA_ERROR_INVALID_VALUE : (int)cudaErrorInvalidValue);
        void *x[32];
        for (int k = 0; k < 32; k++) {
            CHECK(cudaMallocHost(&x[k], 8192) == cudaSuccess);
            hit += x[k] == h;
            memset(x[k], 0x11, 8192);
        }
        const unsigned char *b = h;
        int clobbered = b[0] != 0x5a || b[8191] != 0x5a;
        hit += clobbered;
        for (int k = 0; k < 32; k++)
            CHECK(cudaFreeHost(x[k]) == cudaSuccess);
        cudaError_t own = cudaFreeHost(h);
        printf("handed_out_again=%d clobbered=%d own_free=%d\n", hit, clobbered, (int)own);
        bad += own != cudaSuccess;
    }
    printf("bad_codes=%d hit=%d\n", bad, hit);
    CHECK(bad == 0 && hit == 0);
    return 0;
}

/* ---- pinned and mapped blocks: two live blocks have distinct CU_POINTER_ATTRIBUTE_BUFFER_ID
 * ("A process-wide unique id for an allocated memory region", cuPointerGetAttribute), and a
 * block at a freed block's address gets a new one; once freed (cudaFreeHost, then a device
 * synchronize) the address is no allocation: cuPointerGetAttribute(MEMORY_TYPE) and
 * cuMemGetAddressRange answer CUDA_ERROR_INVALID_VALUE / NOT_FOUND, cuMemHostGetFlags
 * CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer (what cudaHostGetDevicePointer reaches for
 * a pointer gpool does not hold) CUDA_ERROR_INVALID_VALUE. */
static int host_freed_queries(int mapped)
{
    void *keep, *h, *g;
    unsigned fl = mapped ? cudaHostAllocMapped : 0;
    CHECK(cudaHostAlloc(&keep, 4096, fl) == cudaSuccess); /* the slab stays */
    CHECK(cudaHostAlloc(&h, 4096, fl) == cudaSuccess);
    CHECK(cudaHostAlloc(&g, 4096, fl) == cudaSuccess);
    unsigned long long idh = 0, idg = 0, idr = 0;
    CHECK(cuPointerGetAttribute(&idh, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(h)) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&idg, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(g)) == CUDA_SUCCESS);
    printf("id_h=%llu id_g=%llu\n", idh, idg);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    unsigned type = 77, flags = 77;
    CUresult r1 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, DP(h));
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r2 = cuMemGetAddressRange(&base, &size, DP(h));
    CUresult r3 = cuMemHostGetFlags(&flags, h);
    /* cudaHostGetDevicePointer reaches cuMemHostGetDevicePointer for pointers gpool does not
     * hold (the stand-in would answer success for anything) */
    CUdeviceptr dp = 0;
    unsigned long sc = standin_calls();
    CUresult e4 = cuMemHostGetDevicePointer(&dp, h, 0);
    int reached_standin = standin_calls() != sc;
    printf("freed: attr=%d type=%u range=%d size=%zu flags=%d(%u) devptr=%d standin=%d\n", (int)r1,
           type, (int)r2, size, (int)r3, flags, (int)e4, reached_standin);
    void *r = NULL;
    for (int i = 0; i < 200 && r != h; i++) {
        if (r) CHECK(cudaFreeHost(r) == cudaSuccess);
        CHECK(cudaHostAlloc(&r, 4096, fl) == cudaSuccess);
    }
    int same_addr = r == h;
    if (same_addr)
        CHECK(cuPointerGetAttribute(&idr, CU_POINTER_ATTRIBUTE_BUFFER_ID, DP(r)) == CUDA_SUCCESS);
    printf("same_address=%d id_r=%llu\n", same_addr, idr);
    CHECK(idh != idg);
    CHECK(!same_addr || idr != idh);
    CHECK(r1 == CUDA_ERROR_INVALID_VALUE);
    CHECK(r2 != CUDA_SUCCESS);
    CHECK(r3 == CUDA_ERROR_INVALID_VALUE);
    CHECK(e4 == CUDA_ERROR_INVALID_VALUE);
    CHECK(cudaFreeHost(r) == cudaSuccess && cudaFreeHost(g) == cudaSuccess);
    CHECK(cudaFreeHost(keep) == cudaSuccess);
    return 0;
}

/* ---- implicit synchronization of the legacy stream with blocking streams (Programming Guide,
 * "Default Stream": the legacy stream waits for all blocking streams, and they wait for it):
 * how 0: a cudaMalloc'd block written on a blocking stream (held), cudaFreeAsync(p, NULL);
 * how 1: written on the legacy stream (held), cudaFreeAsync on a blocking stream. Either way the
 * free is ordered after the write without any event; then cudaMallocAsync / cudaMalloc on a
 * non-blocking stream and a write there. */
static int legacy_implicit_free(int how)
{
    CUstream b = make_stream(0), nb = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(b && nb);
    CUstream writer = how ? NULL : b;
    cudaStream_t freer = how ? (cudaStream_t)b : NULL;
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(writer) == 0);
        CHECK(kernel_write(writer, p, MIB) == 0);
        CHECK(cudaFreeAsync(p, freer) == cudaSuccess);
        CHECK((i % 2 ? cudaMalloc(&q, MIB) : cudaMallocAsync(&q, MIB, nb)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(nb, q, MIB) == 0);
        CHECK((i % 2 ? cudaFree(q) : cudaFreeAsync(q, nb)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(writer) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    }
    printf("same=%d\n", same);
    return 0;
}

/* ---- two devices (GPOOL_SIM_DEVICES=2), device 0 current: cudaMallocAsync on a device-1
 * stream allocates on device 1 (cudaMallocAsync: "from the memory pool current to the stream's
 * device"), written there; cudaFreeAsync on that stream; the same with the context switched by
 * cuCtxPushCurrent; each block's CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL is its device, and
 * cudaMemGetInfo answers for the current device (device 1's use does not lower device 0's
 * free bytes). */
static int dev_stream_alloc(void)
{
    CHECK(cuCtxSetCurrent(prog_ctx[1]) == CUDA_SUCCESS);
    CUstream s1 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s1);
    CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
    CUstream s0 = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s0);
    size_t f0, t0, f1, t1;
    CHECK(cudaMemGetInfo(&f0, &t0) == cudaSuccess);
    int wrong = 0;
    void *p[8];
    for (int i = 0; i < 8; i++) {
        CHECK(cudaMallocAsync(&p[i], 64 * MIB, s1) == cudaSuccess);
        int ord = -1;
        CHECK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, DP(p[i])) ==
              CUDA_SUCCESS);
        wrong += ord != 1;
        CHECK(cuCtxPushCurrent(prog_ctx[1]) == CUDA_SUCCESS);
        CHECK(kernel_write(s1, p[i], 64 * MIB) == 0);
        CUcontext c;
        CHECK(cuCtxPopCurrent(&c) == CUDA_SUCCESS);
    }
    CHECK(cudaMemGetInfo(&f1, &t1) == cudaSuccess);
    void *q;
    CHECK(cudaMallocAsync(&q, MIB, s0) == cudaSuccess);
    int ordq = -1;
    CHECK(cuPointerGetAttribute(&ordq, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, DP(q)) == CUDA_SUCCESS);
    CHECK(kernel_write(s0, q, MIB) == 0);
    for (int i = 0; i < 8; i++)
        CHECK(cudaFreeAsync(p[i], s1) == cudaSuccess);
    CHECK(cudaFreeAsync(q, s0) == cudaSuccess);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent(prog_ctx[1]) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CUcontext c;
    CHECK(cuCtxPopCurrent(&c) == CUDA_SUCCESS);
    printf("wrong_device=%d q_device=%d free0=%zu free1=%zu\n", wrong, ordq, f0 / MIB, f1 / MIB);
    CHECK(wrong == 0 && ordq == 0);
    CHECK(f1 + 64 * MIB > f0); /* device 1's 512 MiB are not device 0's */
    return 0;
}

/* ---- a thread that never made a context current calls the runtime: cudaMalloc,
 * cudaMallocAsync(cudaStreamPerThread), cudaMallocHost, cudaMemGetInfo (the runtime makes the
 * current device's primary context current on a thread's first call: Programming Guide,
 * "Initialization" / "Primary contexts"); each succeeds, the device blocks are device 0's, and
 * the frees succeed. */
struct fresh_res {
    int e[7];
    int ord;
};
static void *fresh_thread(void *arg)
{
    struct fresh_res *r = arg;
    void *p = NULL, *a = NULL, *h = NULL;
    size_t f = 0, t = 0;
    r->e[0] = (int)cudaMalloc(&p, MIB);
    r->e[1] = (int)cudaMallocAsync(&a, MIB, cudaStreamPerThread);
    r->e[2] = (int)cudaMallocHost(&h, 4096);
    r->e[3] = (int)cudaMemGetInfo(&f, &t);
    r->ord = -1;
    if (p) cuPointerGetAttribute(&r->ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, DP(p));
    r->e[4] = p ? (int)cudaFree(p) : -1;
    r->e[5] = a ? (int)cudaFreeAsync(a, cudaStreamPerThread) : -1;
    r->e[6] = h ? (int)cudaFreeHost(h) : -1;
    return NULL;
}
static int fresh_thread_runtime(void)
{
    void *warm;
    CHECK(cudaMalloc(&warm, MIB) == cudaSuccess); /* the main thread has the runtime up */
    struct fresh_res r;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fresh_thread, &r) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    printf("fresh_thread codes=%d,%d,%d,%d,%d,%d,%d ordinal=%d\n", r.e[0], r.e[1], r.e[2], r.e[3],
           r.e[4], r.e[5], r.e[6], r.ord);
    for (int i = 0; i < 7; i++)
        CHECK(r.e[i] == cudaSuccess);
    CHECK(r.ord == 0);
    CHECK(cudaFree(warm) == cudaSuccess);
    return 0;
}

static const adv_mode modes[] = {
    {"event_free_cudamalloc_block", event_free_cudamalloc_block, NULL, 0, NULL, 0},
    {"destroyed_blocks_freed_elsewhere", destroyed_blocks_freed_elsewhere, NULL, 0, NULL, 0},
    {"ctxsync_then_full_reuse", ctxsync_then_full_reuse, NULL, 0, NULL, 0},
    {"huge_sizes", huge_sizes, NULL, 0, NULL, 0},
    {"zero_sizes", zero_sizes, NULL, 0, NULL, 0},
    {"ptds_many_threads", ptds_many_threads, NULL, 0, NULL, 0},
    {"query_freeasync", query_freeasync, NULL, 0, NULL, 0},
    {"meminfo_async", meminfo_async, NULL, 0, NULL, 0},
    {"cumemfree_of_async", cumemfree_of_async, NULL, 0, NULL, 0},
    {"exit_pending", exit_pending, NULL, 0, NULL, 0},
    {"capture_same_relaxed", NULL, capture_same_thread, CU_STREAM_CAPTURE_MODE_RELAXED, NULL, 0},
    {"capture_same_thread", NULL, capture_same_thread, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL,
     0},
    {"capture_same_global", NULL, capture_same_thread, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, 0},
    {"freehost_legacy_copy", freehost_legacy_copy, NULL, 0, NULL, 0},
    {"freeasync_event_then_malloc", freeasync_event_then_malloc, NULL, 0, NULL, 0},
    {"ptds_batch_nb", NULL, ptds_batch, 0, NULL, 0},
    {"ptds_batch_blocking", NULL, ptds_batch, 1, NULL, 0},
    {"legacy_handle", NULL, special_handles, 0, NULL, 0},
    {"per_thread_handle", NULL, special_handles, 1, NULL, 0},
    {"exit_from_thread", exit_from_thread, NULL, 0, NULL, 0},
    {"wrong_kind_frees", wrong_kind_frees, NULL, 0, NULL, 0},
    {"fresh_thread_runtime", fresh_thread_runtime, NULL, 0, NULL, 0},
    {"dev_stream_alloc", dev_stream_alloc, NULL, 0, NULL, 0},
    {"blocking_write_legacy_freeasync", NULL, legacy_implicit_free, 0, NULL, 0},
    {"legacy_write_blocking_freeasync", NULL, legacy_implicit_free, 1, NULL, 0},
    {"host_freed_queries", NULL, host_freed_queries, 0, NULL, 0},
    {"mapped_freed_queries", NULL, host_freed_queries, 1, NULL, 0},
    {"interior_host_free_rt", NULL, interior_host_free, 0, NULL, 0},
    {"interior_host_free_drv", NULL, interior_host_free, 1, NULL, 0},
};

int main(int argc, char **argv)
{
    return adv_main(modes, sizeof modes / sizeof modes[0],
                    argc > 1 && !strncmp(argv[1], "dev_", 4) ? 2 : 1, argc, argv);
}
