/* adv3_prog.c — a third outside campaign against the drop-in's contract (a program correct on
 * CUDA's own allocator stays correct under LD_PRELOAD), on ground adv_prog.c and adv2_prog.c do
 * not cover: the runtime's per-thread last error after gpool-served failures, cudaSetDevice
 * switching devices, synchronous copies and memsets (asynchronous to the host for device
 * memory) before an immediate free and reuse, streams another thread made, very many live
 * blocks, pitched and managed memory, and host registration around gpool's pinned blocks.
 * Linked as adv2_prog is. Usage: adv3_prog MODE; prints key=value lines, among them
 * violations=N; exits 0 when the mode's checks hold, 1 when a CHECK fails, 4 when the
 * simulator saw a happens-before violation. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_adv.h"

static int ordinal(const void *p)
{
    int ord = -1;
    if (cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, DP(p)) != CUDA_SUCCESS)
        return -1;
    return ord;
}

/* ---- cudaGetLastError / cudaPeekAtLastError after gpool-served failures. cuda_runtime_api.h,
 * cudaGetLastError: "Returns the last error that has been produced by any of the runtime calls
 * in the same instance of the CUDA Runtime library in the host thread and resets it to
 * cudaSuccess"; cudaPeekAtLastError: "Note that this call does not reset the error to
 * cudaSuccess like cudaGetLastError()". how: 0 out of memory (cudaMalloc, cudaMallocAsync,
 * cudaMallocHost of sizes no device has), 1 invalid values (NULL result pointers, a double
 * cudaFree), 2 per thread
 * (another thread's failure is not this thread's last error). */
static void *peek_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)cudaPeekAtLastError();
}
static int last_error(int how)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    CHECK(cudaGetLastError() == cudaSuccess); /* nothing failed yet */
    void *p = NULL, *ok = NULL;
    cudaError_t want = how == 1 ? cudaErrorInvalidValue : cudaErrorMemoryAllocation;
    int bad = 0;
    for (int call = 0; call < (how == 1 ? 4 : 3); call++) {
        cudaError_t e;
        if (how == 1) {
            if (call == 0)
                e = cudaMalloc(NULL, MIB);
            else if (call == 1)
                e = cudaMallocAsync(NULL, MIB, s);
            else if (call == 2)
                e = cudaMallocHost(NULL, 4096);
            else { /* cudaFree of a block already freed: cudaErrorInvalidValue (adv_prog's
                    * double_free), gpool's answer too */
                CHECK(cudaMalloc(&ok, MIB) == cudaSuccess);
                CHECK(cudaFree(ok) == cudaSuccess);
                e = cudaFree(ok);
            }
        } else if (call == 0)
            e = cudaMalloc(&p, SIZE_MAX / 2);
        else if (call == 1)
            e = cudaMallocAsync(&p, SIZE_MAX / 2, s);
        else
            e = cudaMallocHost(&p, SIZE_MAX / 2);
        if (how == 2) {
            /* the failure happened here; another thread's last error stays clean */
            pthread_t t;
            void *ret = NULL;
            CHECK(pthread_create(&t, NULL, peek_thread, NULL) == 0);
            CHECK(pthread_join(t, &ret) == 0);
            printf("call=%d other_thread_last=%d\n", call, (int)(intptr_t)ret);
            bad += ret != NULL;
        }
        /* a success after the failure does not clear it */
        CHECK(cudaMalloc(&ok, MIB) == cudaSuccess);
        CHECK(cudaFree(ok) == cudaSuccess);
        cudaError_t peek1 = cudaPeekAtLastError(), peek2 = cudaPeekAtLastError();
        cudaError_t get1 = cudaGetLastError(), get2 = cudaGetLastError();
        printf("call=%d code=%d peek=%d,%d get=%d,%d\n", call, (int)e, (int)peek1, (int)peek2,
               (int)get1, (int)get2);
        bad += e != want;
        bad += peek1 != want || peek2 != want || get1 != want || get2 != cudaSuccess;
    }
    printf("bad=%d\n", bad);
    CHECK(bad == 0);
    return 0;
}

/* cudaSetDevice (the interposer's, which reaches the stand-in's) */
static cudaError_t set_device(int dev)
{
    return cudaSetDevice(dev);
}

/* ---- cudaSetDevice switching among two devices in one thread. cuda_runtime_api.h,
 * cudaSetDevice: "Sets device as the current device for the calling host thread ... Any device
 * memory subsequently allocated from this host thread using cudaMalloc(), cudaMallocPitch() or
 * cudaMallocArray() will be physically resident on device"; an ordinal no device has:
 * cudaErrorInvalidDevice (the current device unchanged). cudaMemGetInfo answers for the
 * current device, as cuMemGetInfo does in its context. */
static int dev_setdevice_ordinals(void)
{
    int wrong = 0;
    for (int i = 0; i < 20; i++) {
        int dev = i % 2;
        CHECK(set_device(dev) == cudaSuccess);
        void *p, *a;
        CUdeviceptr d;
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(cudaMallocAsync(&a, MIB, NULL) == cudaSuccess); /* legacy stream of dev */
        CHECK(cuMemAlloc(&d, MIB) == CUDA_SUCCESS);
        wrong += ordinal(p) != dev;
        wrong += ordinal(a) != dev;
        wrong += ordinal((void *)(uintptr_t)d) != dev;
        size_t rf = 0, rt = 0, cf = 0, ct = 0;
        CHECK(cudaMemGetInfo(&rf, &rt) == cudaSuccess);
        CHECK(cuMemGetInfo(&cf, &ct) == CUDA_SUCCESS);
        wrong += rt != ct || rf != cf;
        if (i == 0 || i == 1)
            printf("dev=%d runtime_free=%zu driver_free=%zu total=%zu,%zu\n", dev, rf / MIB,
                   cf / MIB, rt / MIB, ct / MIB);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK(cudaFreeAsync(a, NULL) == cudaSuccess);
        CHECK(cuMemFree(d) == CUDA_SUCCESS);
        /* a bad ordinal leaves the device as it was */
        cudaError_t bad = set_device(GPOOL_SIM_MAX_DEVICES + 3);
        wrong += bad != cudaErrorInvalidDevice;
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        wrong += ordinal(p) != dev;
        CHECK(cudaFree(p) == cudaSuccess);
        (void)cudaGetLastError(); /* the bad ordinal's error */
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("wrong=%d\n", wrong);
    CHECK(wrong == 0);
    return 0;
}

/* ---- a device-1 block written by a held device-1 stream, cudaFree'd after cudaSetDevice(0)
 * (cudaFree takes any device's pointer under unified addressing), then cudaSetDevice(1) and
 * cudaMalloc / cudaMallocAsync on another device-1 stream: the block is not handed to that
 * work before the held write completes. */
static int dev_setdevice_free_across(void)
{
    CHECK(set_device(1) == cudaSuccess);
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(a && b);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(set_device(1) == cudaSuccess);
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(ordinal(p) == 1);
        CHECK(gpoolsim_stream_hold(a) == 0);
        CHECK(kernel_write(a, p, MIB) == 0);
        CHECK(set_device(0) == cudaSuccess);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK(set_device(1) == cudaSuccess);
        CHECK((i % 2 ? cudaMallocAsync(&q, MIB, b) : cudaMalloc(&q, MIB)) == cudaSuccess);
        CHECK(ordinal(q) == 1);
        same += p == q;
        CHECK(kernel_write(b, q, MIB) == 0);
        CHECK((i % 2 ? cudaFreeAsync(q, b) : cudaFree(q)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(a) == 0);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- four threads, each switching devices with cudaSetDevice between allocations (the
 * current device is per host thread): every block lands on the thread's current device. */
static void *switch_thread(void *arg)
{
    int seed = (int)(intptr_t)arg, wrong = 0;
    for (int i = 0; i < 300; i++) {
        int dev = (i / (1 + seed) + seed) % 2;
        if (set_device(dev) != cudaSuccess) return (void *)(intptr_t)1000;
        void *p = NULL;
        if (cudaMalloc(&p, (size_t)(1 + i % 7) * 65536) != cudaSuccess) return (void *)1001;
        wrong += ordinal(p) != dev;
        if (cudaFree(p) != cudaSuccess) return (void *)(intptr_t)1002;
    }
    return (void *)(intptr_t)wrong;
}
static int dev_setdevice_threads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, switch_thread, (void *)(intptr_t)i) == 0);
    int wrong = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        wrong += (int)(intptr_t)r;
    }
    printf("wrong=%d\n", wrong);
    CHECK(wrong == 0);
    return 0;
}

/* ---- synchronous copies and memsets before an immediate free and reuse. "API synchronization
 * behavior" (CUDA Runtime API): "For transfers from device memory to device memory, no
 * host-side synchronization is performed"; "The synchronous memset functions are asynchronous
 * with respect to the host except when the target is pinned host memory or a Unified Memory
 * region"; "For transfers from pageable host memory to device memory ... the DMA to final
 * destination may not have completed". So each call below returns with its work still queued
 * on the legacy stream (held here); cudaFree(p) and cudaMalloc then a write on a non-blocking
 * stream must not touch p before that work completes.
 * how: 0 cuMemsetD8 into p, 1 cuMemsetD32 into p, 2 cuMemcpyDtoD from p (p is read),
 * 3 cuMemcpyDtoD into p, 4 cuMemcpyHtoD from pageable memory into p */
static int sync_then_reuse(int how)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *other;
    CHECK(cudaMalloc(&other, MIB) == cudaSuccess);
    char *pageable = malloc(MIB);
    CHECK(pageable);
    memset(pageable, 7, MIB);
    int same = 0;
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(CU_STREAM_LEGACY) == 0);
        CUresult r;
        switch (how) {
        case 0:
            r = cuMemsetD8(DP(p), 0x5a, MIB);
            break;
        case 1:
            r = cuMemsetD32(DP(p), 0xdeadbeef, MIB / 4);
            break;
        case 2:
            r = cuMemcpyDtoD(DP(other), DP(p), MIB);
            break;
        case 3:
            r = cuMemcpyDtoD(DP(p), DP(other), MIB);
            break;
        default:
            r = cuMemcpyHtoD(DP(p), pageable, MIB);
            break;
        }
        CHECK(r == CUDA_SUCCESS);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK((i % 2 ? cudaMallocAsync(&q, MIB, s) : cudaMalloc(&q, MIB)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(s, q, MIB) == 0);
        CHECK((i % 2 ? cudaFreeAsync(q, s) : cudaFree(q)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(CU_STREAM_LEGACY) == 0);
        CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cudaFree(other) == cudaSuccess);
    free(pageable);
    printf("same=%d\n", same);
    return 0;
}

/* ---- streams another thread created with cudaStreamCreateWithFlags(cudaStreamNonBlocking)
 * and cudaStreamCreateWithPriority (the stream handle is valid in every thread of the process:
 * Programming Guide, "Streams"); the main thread's block written on one of them (held),
 * cudaFree'd, reused by cudaMalloc and written on the other. */
static void *make_streams(void *arg)
{
    cudaStream_t *s = arg;
    if (set_device(0) != cudaSuccess) return (void *)1;
    if (cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking) != cudaSuccess) return (void *)1;
    if (cudaStreamCreateWithPriority(&s[1], cudaStreamNonBlocking, -1) != cudaSuccess)
        return (void *)1;
    return NULL;
}
static int other_thread_streams(void)
{
    /* a block freed before the non-blocking streams exist, while legacy work on it is queued */
    void *early;
    CHECK(cudaMalloc(&early, MIB) == cudaSuccess);
    CHECK(gpoolsim_stream_hold(CU_STREAM_LEGACY) == 0);
    CHECK(gpoolsim_touch(CU_STREAM_LEGACY, DP(early), MIB, 1) == CUDA_SUCCESS);
    CHECK(cudaFree(early) == cudaSuccess);
    cudaStream_t s[2] = {NULL, NULL};
    pthread_t t;
    void *ret;
    CHECK(pthread_create(&t, NULL, make_streams, s) == 0);
    CHECK(pthread_join(t, &ret) == 0 && ret == NULL);
    int same = 0;
    void *first;
    CHECK(cudaMalloc(&first, MIB) == cudaSuccess);
    same += first == early;
    CHECK(kernel_write(s[1], first, MIB) == 0);
    CHECK(cudaFree(first) == cudaSuccess);
    CHECK(gpoolsim_stream_release(CU_STREAM_LEGACY) == 0);
    for (int i = 0; i < 40; i++) {
        void *p, *q;
        CUstream w = s[i % 2], o = s[1 - i % 2];
        CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(w) == 0);
        CHECK(kernel_write(w, p, MIB) == 0);
        CHECK(cudaFree(p) == cudaSuccess);
        CHECK((i % 3 ? cudaMalloc(&q, MIB) : cudaMallocAsync(&q, MIB, o)) == cudaSuccess);
        same += p == q;
        CHECK(kernel_write(o, q, MIB) == 0);
        CHECK((i % 3 ? cudaFree(q) : cudaFreeAsync(q, o)) == cudaSuccess);
        CHECK(gpoolsim_stream_release(w) == 0);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("same=%d\n", same);
    return 0;
}

/* ---- very many live blocks: 30000 cudaMallocs of mixed sizes, all live at once; no two
 * overlap (cudaMalloc: "Allocates size bytes of linear memory on the device"), each tagged by
 * a memset and read back intact, every one freed in a shuffled order; then cudaMemGetInfo is
 * back where it was (cudaMemGetInfo counts gpool's cache as free, docs/dropin.md). */
struct blk {
    uintptr_t p;
    size_t n;
};
static int cmp_blk(const void *a, const void *b)
{
    const struct blk *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}
static int many_live_blocks(void)
{
    enum { N = 30000 };
    size_t f0 = 0, t0 = 0, f1 = 0, t1 = 0;
    CHECK(cudaMemGetInfo(&f0, &t0) == cudaSuccess);
    struct blk *b = calloc(N, sizeof *b);
    CHECK(b);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = (i % 100 == 0) ? (size_t)(x % (4 * MIB)) + 1 : (size_t)(x % 6000) + 1;
        void *p;
        CHECK(cudaMalloc(&p, n) == cudaSuccess);
        b[i].p = (uintptr_t)p, b[i].n = n;
        CHECK(cuMemsetD32(DP(p), (unsigned)i, 1) == CUDA_SUCCESS || n < 4);
        if (n < 4) CHECK(cuMemsetD8(DP(p), (unsigned char)i, 1) == CUDA_SUCCESS);
    }
    int corrupt = 0;
    for (int i = 0; i < N; i++) {
        unsigned v = 0;
        size_t k = b[i].n < 4 ? 1 : 4;
        CHECK(cuMemcpyDtoH(&v, (CUdeviceptr)b[i].p, k) == CUDA_SUCCESS);
        corrupt += k == 4 ? v != (unsigned)i : (unsigned char)v != (unsigned char)i;
    }
    struct blk *sorted = malloc(N * sizeof *sorted);
    CHECK(sorted);
    memcpy(sorted, b, N * sizeof *b);
    qsort(sorted, N, sizeof *sorted, cmp_blk);
    int overlap = 0;
    for (int i = 1; i < N; i++)
        overlap += sorted[i - 1].p + sorted[i - 1].n > sorted[i].p;
    free(sorted);
    for (int i = N - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1));
        struct blk tmp = b[i];
        b[i] = b[j], b[j] = tmp;
    }
    for (int i = 0; i < N; i++)
        CHECK(cudaFree((void *)b[i].p) == cudaSuccess);
    free(b);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cudaMemGetInfo(&f1, &t1) == cudaSuccess);
    printf("overlap=%d corrupt=%d free_before=%zu free_after=%zu\n", overlap, corrupt, f0 / MIB,
           f1 / MIB);
    CHECK(overlap == 0 && corrupt == 0);
    CHECK(t1 == t0 && f1 + 8 * MIB >= f0);
    return 0;
}

/* ---- pitched and managed memory (passed to the driver): the answers CUDA documents.
 * cudaMallocPitch / cuMemAllocPitch: "The pitch returned in *pitch ... is the width in bytes of
 * the allocation", at least WidthInBytes, the allocation pitch * height bytes;
 * cudaMallocManaged: CU_POINTER_ATTRIBUTE_IS_MANAGED is 1, "If size is 0, cudaMallocManaged
 * returns cudaErrorInvalidValue"; both freed with cuMemFree (the driver API reference allows it
 * for cuMemAllocPitch and cuMemAllocManaged memory); a gpool block between them stays intact. */
static int pitch_and_managed(void)
{
    void *g;
    CHECK(cudaMalloc(&g, MIB) == cudaSuccess);
    CHECK(cuMemsetD8(DP(g), 0x33, MIB) == CUDA_SUCCESS);
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        size_t w = 1 + (size_t)i * 397, h = 1 + (size_t)i * 3, pitch = 0, pitch2 = 0;
        void *p = NULL, *m = NULL;
        CUdeviceptr d = 0, base = 0;
        size_t size = 0;
        CHECK(cudaMallocPitch(&p, &pitch, w, h) == cudaSuccess);
        bad += pitch < w;
        CHECK(cuMemGetAddressRange(&base, &size, DP(p)) == CUDA_SUCCESS);
        bad += base != DP(p) || size < pitch * h;
        CHECK(cuMemsetD8(DP(p), 1, pitch * h) == CUDA_SUCCESS);
        CHECK(cuMemAllocPitch(&d, &pitch2, w, h, 4) == CUDA_SUCCESS);
        bad += pitch2 < w;
        CHECK(cuMemsetD8(d, 2, pitch2 * h) == CUDA_SUCCESS);
        CHECK(cudaMallocManaged(&m, w, cudaMemAttachGlobal) == cudaSuccess);
        int managed = 0;
        CHECK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, DP(m)) ==
              CUDA_SUCCESS);
        bad += managed != 1;
        struct cudaPointerAttributes at;
        CHECK(cudaPointerGetAttributes(&at, m) == cudaSuccess);
        bad += at.type != cudaMemoryTypeManaged;
        memset(m, 3, w);                           /* managed memory is host-accessible */
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS); /* the memsets, before the frees */
        CHECK(cuMemFree(DP(p)) == CUDA_SUCCESS);
        CHECK(cuMemFree(d) == CUDA_SUCCESS);
        CHECK(cuMemFree(DP(m)) == CUDA_SUCCESS);
    }
    void *z = (void *)1;
    cudaError_t ez = cudaMallocManaged(&z, 0, cudaMemAttachGlobal);
    unsigned char probe[16];
    CHECK(cuMemcpyDtoH(probe, DP(g) + MIB - 16, 16) == CUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        bad += probe[i] != 0x33;
    CHECK(cudaFree(g) == cudaSuccess);
    printf("managed_zero=%d bad=%d\n", (int)ez, bad);
    CHECK(ez == cudaErrorInvalidValue);
    CHECK(bad == 0);
    return 0;
}

/* ---- cuMemHostRegister / cuMemHostUnregister near gpool's pinned blocks. The driver API
 * reference: cuMemHostUnregister of memory that was not registered with cuMemHostRegister
 * answers CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED ("pointer does not correspond to a registered
 * memory region"); the program's
 * own registration of its memory works beside gpool's, cudaHostGetDevicePointer answers for
 * it, and gpool's pinned blocks keep working for async copies after each refused call.
 * cudaHostGetDevicePointer / cuMemHostGetDevicePointer flags "must be 0". */
static int host_register_near(void)
{
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(s);
    void *dev;
    CHECK(cudaMalloc(&dev, MIB) == cudaSuccess);
    long pg = sysconf(_SC_PAGESIZE);
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        void *h, *m;
        unsigned long before = standin_calls();
        CHECK(cudaMallocHost(&h, 4096 * (size_t)(i + 1)) == cudaSuccess);
        CHECK(cudaHostAlloc(&m, 8192, cudaHostAllocMapped) == cudaSuccess);
        CHECK(standin_calls() == before); /* gpool served both */
        /* the program's own registration, beside gpool's */
        void *own =
            mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(own != MAP_FAILED);
        CHECK(cuMemHostRegister(own, (size_t)pg * 4, CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS);
        void *od = NULL;
        CHECK(cudaHostGetDevicePointer(&od, own, 0) == cudaSuccess && od);
        CHECK(cuMemHostUnregister(own) == CUDA_SUCCESS);
        munmap(own, (size_t)pg * 4);
        /* gpool's blocks are page-locked already / were not cuMemHostRegister'ed */
        CUresult r1 = cuMemHostRegister(h, 4096, 0);
        CUresult r2 = cuMemHostUnregister(h);
        CUresult r3 = cuMemHostUnregister(m);
        void *md = NULL;
        cudaError_t e4 = cudaHostGetDevicePointer(&md, m, 1);
        CUdeviceptr cd = 0;
        CUresult r5 = cuMemHostGetDevicePointer(&cd, m, 1);
        printf("round=%d register=%d unregister=%d,%d getdevptr_flags=%d,%d\n", i, (int)r1, (int)r2,
               (int)r3, (int)e4, (int)r5);
        /* r1: CUDA documents no answer for registering page-locked memory that came from
         * cudaMallocHost; printed, not judged (gpool's pages are registered: the driver says
         * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED). r2, r3: the program registered neither */
        bad += r1 == CUDA_SUCCESS && cuMemHostUnregister(h) != CUDA_SUCCESS;
        bad += r2 != CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        bad += r3 != CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        bad += e4 != cudaErrorInvalidValue;
        bad += r5 != CUDA_ERROR_INVALID_VALUE;
        /* the blocks still work: async copies from / to them */
        memset(h, 9, 4096);
        CHECK(cuMemcpyHtoDAsync(DP(dev), h, 4096, s) == CUDA_SUCCESS);
        CHECK(cuMemcpyDtoHAsync(m, DP(dev), 4096, s) == CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
        bad += ((unsigned char *)m)[4095] != 9;
        CHECK(cudaHostGetDevicePointer(&md, m, 0) == cudaSuccess && md);
        CHECK(cudaFreeHost(h) == cudaSuccess);
        CHECK(cudaFreeHost(m) == cudaSuccess);
    }
    CHECK(cudaFree(dev) == cudaSuccess);
    struct gpoolsim_live live;
    gpoolsim_get_live(&live);
    printf("bad=%d host_registrations=%zu\n", bad, live.host_registrations);
    CHECK(bad == 0);
    return 0;
}

/* ---- the last error when cudart's own failures and gpool's alternate: the newer one is the
 * last error (cudaGetLastError: "the last error that has been produced by any of the runtime
 * calls"), and one cudaGetLastError clears both. cudart's failure here: a stream created
 * with a NULL result pointer (cudaErrorInvalidValue). */
static int last_error_mixed(void)
{
    void *p = NULL;
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        cudaError_t want;
        if (i % 2) {
            CHECK(cudaMalloc(&p, SIZE_MAX / 2) == cudaErrorMemoryAllocation);
            CHECK(cudaStreamCreateWithFlags(NULL, cudaStreamNonBlocking) != cudaSuccess);
            want = cudaErrorInvalidValue;
        } else {
            CHECK(cudaStreamCreateWithFlags(NULL, cudaStreamNonBlocking) != cudaSuccess);
            CHECK(cudaMalloc(&p, SIZE_MAX / 2) == cudaErrorMemoryAllocation);
            want = cudaErrorMemoryAllocation;
        }
        cudaError_t peek = cudaPeekAtLastError(), get1 = cudaGetLastError(),
                    get2 = cudaGetLastError();
        printf("round=%d peek=%d get=%d,%d want=%d\n", i, (int)peek, (int)get1, (int)get2,
               (int)want);
        bad += peek != want || get1 != want || get2 != cudaSuccess;
    }
    printf("bad=%d\n", bad);
    CHECK(bad == 0);
    return 0;
}

/* ---- cudaDeviceReset. cuda_runtime_api.h, cudaDeviceReset: "Explicitly destroys and cleans
 * up all resources associated with the current device in the current process. ... Any
 * subsequent API call to this device will reinitialize the device"; cuda.h,
 * cuDevicePrimaryCtxReset: "Destroy all allocations and reset all state on the primary
 * context". Blocks live at the reset, cached ones, one freed with its work held on a stream and
 * pinned host blocks all die with it (the program never names them again); what cudaMalloc and
 * cudaMallocHost hand out afterwards is memory the device has (written through the simulator,
 * no error, no violation); cudaMemGetInfo sees the device empty after each reset, and the
 * driver's live objects stay flat over the cycles. how 0: cudaDeviceReset, 1: the driver's
 * cuDevicePrimaryCtxReset by name. */
static int reset_cycles(int how)
{
    static const size_t sizes[] = {256, 4096, 64 << 10, MIB, 3 * MIB, 40 * MIB};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    struct gpoolsim_live first = {0};
    for (int cycle = 0; cycle < 6; cycle++) {
        CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(s);
        void *live[NS], *cached[NS], *held, *pin_live, *pin_freed;
        for (int i = 0; i < NS; i++) {
            CHECK(cudaMalloc(&live[i], sizes[i]) == cudaSuccess);
            CHECK(cudaMalloc(&cached[i], sizes[i]) == cudaSuccess);
            CHECK(kernel_write(NULL, live[i], sizes[i]) == 0);
            CHECK(kernel_write(s, cached[i], sizes[i]) == 0);
        }
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        for (int i = 0; i < NS; i++)
            CHECK(cudaFree(cached[i]) == cudaSuccess);
        CHECK(cudaMalloc(&held, 2 * MIB) == cudaSuccess);
        CHECK(gpoolsim_stream_hold(s) == 0);
        CHECK(kernel_write(s, held, 2 * MIB) == 0);
        CHECK(cudaFree(held) == cudaSuccess); /* its write still queued */
        CHECK(cudaMallocHost(&pin_live, 8192) == cudaSuccess);
        CHECK(cudaMallocHost(&pin_freed, 8192) == cudaSuccess);
        memset(pin_live, 1, 8192);
        CHECK(cudaFreeHost(pin_freed) == cudaSuccess);

        if (how == 0)
            CHECK(cudaDeviceReset() == cudaSuccess);
        else
            CHECK(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS);

        size_t fr = 0, total = 0;
        CHECK(cudaMemGetInfo(&fr, &total) == cudaSuccess);
        struct gpoolsim_live l;
        gpoolsim_get_live(&l);
        if (cycle == 0) first = l;
        printf("cycle=%d free=%zu total=%zu handles=%zu mappings=%zu reservations=%zu "
               "host=%zu streams=%zu events=%zu legacy=%zu\n",
               cycle, fr / MIB, total / MIB, l.handles, l.mappings, l.reservations, l.host_allocs,
               l.streams, l.events, l.legacy_allocs);
        CHECK(fr == total); /* nothing of the device's survives the reset */
        CHECK(l.handles == first.handles && l.mappings == first.mappings &&
              l.reservations == first.reservations && l.host_allocs == first.host_allocs &&
              l.streams == first.streams && l.events == first.events &&
              l.legacy_allocs == first.legacy_allocs);

        /* the device again: fresh memory, on the legacy stream and on a new stream */
        CUstream t = make_stream(CU_STREAM_NON_BLOCKING);
        CHECK(t);
        void *again[NS];
        for (int i = 0; i < NS; i++) {
            CHECK(cudaMalloc(&again[i], sizes[i]) == cudaSuccess);
            CHECK(kernel_write(i % 2 ? t : NULL, again[i], sizes[i]) == 0);
        }
        void *a = NULL;
        CHECK(cudaMallocAsync(&a, MIB, t) == cudaSuccess);
        CHECK(kernel_write(t, a, MIB) == 0);
        CHECK(cudaFreeAsync(a, t) == cudaSuccess);
        CUdeviceptr d;
        CHECK(cuMemAlloc(&d, MIB) == CUDA_SUCCESS);
        CHECK(gpoolsim_touch(NULL, d, MIB, 1) == CUDA_SUCCESS);
        void *pin = NULL;
        CHECK(cudaMallocHost(&pin, 8192) == cudaSuccess);
        memset(pin, 2, 8192);
        CHECK(cuMemcpyHtoD(DP(again[1]), pin, 4096) == CUDA_SUCCESS);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        CHECK(cudaMemGetInfo(&fr, &total) == cudaSuccess && fr <= total);
        for (int i = 0; i < NS; i++)
            CHECK(cudaFree(again[i]) == cudaSuccess);
        CHECK(cuMemFree(d) == CUDA_SUCCESS);
        CHECK(cudaFreeHost(pin) == cudaSuccess);
        CHECK(cuStreamDestroy(t) == CUDA_SUCCESS);
        (void)live;
        (void)pin_live;
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cudaGetLastError() == cudaSuccess);
    return 0;
}

/* ---- cudaDeviceReset of device 1 leaves device 0 as it was: its live blocks keep their
 * contents and stay usable and freeable, its cached blocks are served again; device 1 serves
 * fresh memory after its reset. */
static int dev_reset_other_device(void)
{
    unsigned char pattern[4096], back[4096];
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (unsigned char)(i * 7 + 3);
    CHECK(set_device(0) == cudaSuccess);
    void *keep[4], *cached;
    for (int i = 0; i < 4; i++) {
        CHECK(cudaMalloc(&keep[i], MIB << i) == cudaSuccess);
        CHECK(cuMemcpyHtoD(DP(keep[i]), pattern, sizeof pattern) == CUDA_SUCCESS);
    }
    CHECK(cudaMalloc(&cached, MIB) == cudaSuccess);
    CHECK(cudaFree(cached) == cudaSuccess);
    void *pin0 = NULL;
    CHECK(cudaMallocHost(&pin0, 8192) == cudaSuccess);
    memset(pin0, 5, 8192);
    for (int cycle = 0; cycle < 4; cycle++) {
        CHECK(set_device(1) == cudaSuccess);
        void *p1, *q1;
        CHECK(cudaMalloc(&p1, 2 * MIB) == cudaSuccess);
        CHECK(cudaMalloc(&q1, MIB) == cudaSuccess);
        CHECK(ordinal(p1) == 1);
        CHECK(kernel_write(NULL, p1, 2 * MIB) == 0);
        CHECK(cudaFree(q1) == cudaSuccess);
        CHECK(cudaDeviceReset() == cudaSuccess); /* device 1 */
        CHECK(cudaMalloc(&p1, 2 * MIB) == cudaSuccess);
        CHECK(ordinal(p1) == 1);
        CHECK(kernel_write(NULL, p1, 2 * MIB) == 0);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        CHECK(cudaFree(p1) == cudaSuccess);
        CHECK(set_device(0) == cudaSuccess);
        for (int i = 0; i < 4; i++) {
            CHECK(cuMemcpyDtoH(back, DP(keep[i]), sizeof back) == CUDA_SUCCESS);
            CHECK(memcmp(back, pattern, sizeof back) == 0);
            CHECK(kernel_write(NULL, keep[i], MIB) == 0);
            CHECK(cuMemcpyHtoD(DP(keep[i]), pattern, sizeof pattern) == CUDA_SUCCESS);
        }
        CHECK(((unsigned char *)pin0)[8191] == 5);
        CHECK(cudaMalloc(&cached, MIB) == cudaSuccess);
        CHECK(ordinal(cached) == 0);
        CHECK(kernel_write(NULL, cached, MIB) == 0);
        CHECK(cudaFree(cached) == cudaSuccess);
    }
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        CHECK(cudaFree(keep[i]) == cudaSuccess);
    CHECK(cudaFreeHost(pin0) == cudaSuccess);
    return 0;
}

static const adv_mode modes[] = {
    {"last_error_oom", NULL, last_error, 0, NULL, 0},
    {"last_error_invalid", NULL, last_error, 1, NULL, 0},
    {"last_error_thread", NULL, last_error, 2, NULL, 0},
    {"last_error_mixed", last_error_mixed, NULL, 0, NULL, 0},
    {"dev_setdevice_ordinals", dev_setdevice_ordinals, NULL, 0, NULL, 0},
    {"dev_setdevice_free_across", dev_setdevice_free_across, NULL, 0, NULL, 0},
    {"dev_setdevice_threads", dev_setdevice_threads, NULL, 0, NULL, 0},
    {"sync_memset8_reuse", NULL, sync_then_reuse, 0, NULL, 0},
    {"sync_memset32_reuse", NULL, sync_then_reuse, 1, NULL, 0},
    {"sync_d2d_from_reuse", NULL, sync_then_reuse, 2, NULL, 0},
    {"sync_d2d_into_reuse", NULL, sync_then_reuse, 3, NULL, 0},
    {"sync_h2d_pageable_reuse", NULL, sync_then_reuse, 4, NULL, 0},
    {"other_thread_streams", other_thread_streams, NULL, 0, NULL, 0},
    {"many_live_blocks", many_live_blocks, NULL, 0, NULL, 0},
    {"pitch_and_managed", pitch_and_managed, NULL, 0, NULL, 0},
    {"host_register_near", host_register_near, NULL, 0, NULL, 0},
    {"device_reset_runtime", NULL, reset_cycles, 0, NULL, 0},
    {"device_reset_driver", NULL, reset_cycles, 1, NULL, 0},
    {"dev_reset_other_device", dev_reset_other_device, NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
    return adv_main(modes, sizeof modes / sizeof modes[0],
                    argc > 1 && !strncmp(argv[1], "dev_", 4) ? 2 : 1, argc, argv);
}
