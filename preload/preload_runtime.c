/* preload_runtime.c — the CUDA runtime API entry points libgpool_preload.so exports ahead of
 * libcudart. Device memory comes from the pool of the calling thread's current device (device 0
 * before the runtime made a context current, as the runtime itself would pick). Pointers gpool
 * did not hand out, and every call while the interposer is off, go to the real libcudart. */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "preload.h"

#define GPP_EXPORT __attribute__((visibility("default")))

/* The real function `name` of type `type`, looked up once. In a child forked after CUDA was
 * used, the runtime's answer for the parent's state: cudaErrorInitializationError. */
#define REAL(type, name)                                                                           \
    static void *real_ptr_##name;                                                                  \
    type real_##name;                                                                              \
    if (gpp_in_forked_child()) return cudaErrorInitializationError; /* preload.c "fork" */         \
    *(void **)&real_##name = __atomic_load_n(&real_ptr_##name, __ATOMIC_ACQUIRE);                  \
    if (!real_##name) {                                                                            \
        *(void **)&real_##name = gpp_real_runtime(#name);                                          \
        __atomic_store_n(&real_ptr_##name, *(void **)&real_##name, __ATOMIC_RELEASE);              \
    }                                                                                              \
    if (!real_##name) return cudaErrorInitializationError

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef cudaError_t (*malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*free_async_fn)(void *, cudaStream_t);
typedef cudaError_t (*malloc_pool_fn)(void **, size_t, cudaMemPool_t, cudaStream_t);
typedef cudaError_t (*host_alloc_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*host_devptr_fn)(void **, void *, unsigned int);
typedef cudaError_t (*mem_info_fn)(size_t *, size_t *);

static int current_device(void)
{
    int dev = gpp_current_device();
    return dev < 0 ? 0 : dev;
}

/* OK: served; OUT_OF_MEMORY: cudaErrorMemoryAllocation (the code frameworks retry on); any
 * other status: pass the call through. */
static int serve_alloc(void **out, size_t size, cudaStream_t stream, int per_thread,
                       cudaError_t *code)
{
    void *p = NULL;
    /* cuda_runtime_api.h, cudaMallocAsync: the allocation is on hStream's device */
    int dev = stream ? gpp_stream_device(stream) : -1;
    gpool_status st = gpp_alloc_device(dev >= 0 ? dev : current_device(), size,
                                       gpp_stream(stream, per_thread), &p);
    if (st == GPOOL_OK) {
        *out = p;
        *code = cudaSuccess;
        return 1;
    }
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        *code = cudaErrorMemoryAllocation;
        return 1;
    }
    return 0;
}

static cudaError_t free_code(gpp_free_result r)
{
    return r == GPP_FREED          ? cudaSuccess
           : r == GPP_FREE_INVALID ? cudaErrorInvalidValue /* cuda_runtime_api.h, cudaFree */
                                   : cudaErrorUnknown;
}

/* The runtime's code for a driver's refusal during stream capture (preload_capture.c). */
static cudaError_t capture_code(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
        return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        return cudaErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return cudaErrorStreamCaptureImplicit;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
        return cudaErrorStreamCaptureWrongThread;
    default:
        return cudaErrorUnknown;
    }
}

/* ---- the runtime's last error (cuda_runtime_api.h, cudaGetLastError: "Returns the last error
 * that has been produced by any of the runtime calls in the same instance of the CUDA Runtime
 * library in the host thread and resets it to cudaSuccess"; cudaPeekAtLastError: the same,
 * without the reset). An error gpool answers itself never passes through cudart, so the
 * interposer keeps it, per thread, and exports both functions. Recording one first consumes
 * cudart's pending error, which is older (CUDA keeps only the last); so when cudart has an
 * error at the next cudaGetLastError/cudaPeekAtLastError, it is the newer one (or sticky: those
 * stay, CUDA's own rule), and otherwise gpool's is. Cost: nothing on success. */
typedef cudaError_t (*last_error_fn)(void);
static _Thread_local __attribute__((tls_model("initial-exec"))) cudaError_t tl_last_error;

static last_error_fn real_last_error(int peek)
{
    static void *slot[2];
    void *f = __atomic_load_n(&slot[peek], __ATOMIC_ACQUIRE);
    if (!f) {
        f = gpp_real_runtime(peek ? "cudaPeekAtLastError" : "cudaGetLastError");
        __atomic_store_n(&slot[peek], f, __ATOMIC_RELEASE);
    }
    last_error_fn fn;
    *(void **)&fn = f;
    return fn;
}

/* e, recorded as the thread's last error when it is one */
static cudaError_t noted(cudaError_t e)
{
    if (__builtin_expect(e != cudaSuccess, 0)) {
        last_error_fn get = gpp_in_forked_child() ? NULL : real_last_error(0);
        if (get) (void)get(); /* cudart's older error: replaced */
        tl_last_error = e;
    }
    return e;
}

GPP_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t own = tl_last_error;
    tl_last_error = cudaSuccess;
    last_error_fn get = gpp_in_forked_child() ? NULL : real_last_error(0);
    cudaError_t r = get ? get() : cudaSuccess;
    return r != cudaSuccess ? r : own;
}

GPP_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    last_error_fn peek = gpp_in_forked_child() ? NULL : real_last_error(1);
    cudaError_t r = peek ? peek() : cudaSuccess;
    return r != cudaSuccess ? r : tl_last_error;
}

GPP_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (gpp_enabled()) {
        if (!devPtr) return noted(cudaErrorInvalidValue);
        *devPtr = NULL;
        if (!size) return cudaSuccess;
        CUresult c = gpp_capture_check(); /* during stream capture: what the driver says */
        if (__builtin_expect(c != CUDA_SUCCESS, 0)) return noted(capture_code(c));
        /* serve_alloc for the legacy stream, inline: the current device's pool */
        gpool_status st = gpp_alloc_device(current_device(), size, NULL, devPtr);
        if (__builtin_expect(st == GPOOL_OK, 1)) return cudaSuccess;
        *devPtr = NULL;
        if (st == GPOOL_ERR_OUT_OF_MEMORY) return noted(cudaErrorMemoryAllocation);
    }
    REAL(malloc_fn, cudaMalloc);
    return real_cudaMalloc(devPtr, size);
}

/* cudaFree(NULL) goes to cudart: NCCL and cuDF call it to bring the runtime up (its context
 * is made there), and cuda_runtime_api.h gives it no meaning of ours. */
GPP_EXPORT cudaError_t cudaFree(void *devPtr)
{
    if (devPtr && (gpp_enabled() || gpp_exiting())) {
        CUresult c = gpp_capture_check();
        if (__builtin_expect(c != CUDA_SUCCESS, 0)) return noted(capture_code(c));
        gpp_free_result r = gpp_free_device(devPtr, NULL, 1);
        if (r != GPP_NOT_OURS) return noted(free_code(r));
    }
    REAL(free_fn, cudaFree);
    return real_cudaFree(devPtr);
}

static int serve_alloc_async(void **devPtr, size_t size, cudaStream_t stream, int per_thread,
                             cudaError_t *code)
{
    if (!gpp_enabled()) return 0;
    if (!devPtr) {
        *code = cudaErrorInvalidValue;
        return 1;
    }
    *devPtr = NULL;
    if (!size) {
        *code = cudaSuccess;
        return 1;
    }
    if (__builtin_expect(gpp_capture_stream_ordered(stream, per_thread), 0)) {
        /* a graph memory node, as cudart's cudaMallocAsync makes it: through cuMemAllocAsync
         * (preload_capture.c); the CUresult codes it can return have the same values as their
         * cudaError_t counterparts (invalid value, out of memory, the capture errors) */
        const gpp_real_driver *d = gpp_driver();
        PFN_cuMemAllocAsync_v11020 real =
            d ? (per_thread ? d->cuMemAllocAsync_ptsz : d->cuMemAllocAsync) : NULL;
        if (!real) return 0;
        CUdeviceptr p = 0;
        CUresult r = real(&p, size, stream);
        *devPtr = r == CUDA_SUCCESS ? (void *)(uintptr_t)p : NULL;
        *code = (cudaError_t)r;
        return 1;
    }
    return serve_alloc(devPtr, size, stream, per_thread, code);
}

static int serve_free_async(void *devPtr, cudaStream_t stream, int per_thread, cudaError_t *code)
{
    if (!devPtr || !(gpp_enabled() || gpp_exiting())) return 0;
    if (__builtin_expect(gpp_capture_stream_ordered(stream, per_thread), 0)) {
        /* a free node, as cudart's cudaFreeAsync makes it: only a graph allocation may have
         * one (cuda.h, cuMemFreeAsync), so the driver answers for gpool's blocks too */
        const gpp_real_driver *d = gpp_driver();
        PFN_cuMemFreeAsync_v11020 real =
            d ? (per_thread ? d->cuMemFreeAsync_ptsz : d->cuMemFreeAsync) : NULL;
        if (!real) return 0;
        *code = (cudaError_t)real((CUdeviceptr)(uintptr_t)devPtr, stream);
        return 1;
    }
    gpp_free_result r = gpp_free_device(devPtr, gpp_stream(stream, per_thread), 0);
    *code = free_code(r);
    return r != GPP_NOT_OURS;
}

GPP_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    cudaError_t code;
    if (serve_alloc_async(devPtr, size, hStream, 0, &code)) return noted(code);
    REAL(malloc_async_fn, cudaMallocAsync);
    return real_cudaMallocAsync(devPtr, size, hStream);
}

GPP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
GPP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    cudaError_t code;
    if (serve_alloc_async(devPtr, size, hStream, 1, &code)) return noted(code);
    REAL(malloc_async_fn, cudaMallocAsync_ptsz);
    return real_cudaMallocAsync_ptsz(devPtr, size, hStream);
}

GPP_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    cudaError_t code;
    if (serve_free_async(devPtr, hStream, 0, &code)) return noted(code);
    REAL(free_async_fn, cudaFreeAsync);
    return real_cudaFreeAsync(devPtr, hStream);
}

GPP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
GPP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    cudaError_t code;
    if (serve_free_async(devPtr, hStream, 1, &code)) return noted(code);
    REAL(free_async_fn, cudaFreeAsync_ptsz);
    return real_cudaFreeAsync_ptsz(devPtr, hStream);
}

/* Allocation from an explicit CUDA memory pool stays with CUDA; its frees reach the real
 * cudaFreeAsync because gpool does not own those pointers. */
GPP_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                               cudaStream_t stream)
{
    REAL(malloc_pool_fn, cudaMallocFromPoolAsync);
    return real_cudaMallocFromPoolAsync(ptr, size, memPool, stream);
}

GPP_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                    cudaStream_t stream);
GPP_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                    cudaStream_t stream)
{
    REAL(malloc_pool_fn, cudaMallocFromPoolAsync_ptsz);
    return real_cudaMallocFromPoolAsync_ptsz(ptr, size, memPool, stream);
}

/* Pinned host memory through gpool when it has the host kinds; write-combined memory, and
 * everything while gpool answers UNSUPPORTED, through the runtime. */
static int serve_host_alloc(void **pHost, size_t size, unsigned flags, cudaError_t *code)
{
    if (!gpp_enabled()) return 0;
    /* cuda_runtime_api.h, cudaHostAlloc: Default, Portable, Mapped, WriteCombined; any
     * other bit is cudaErrorInvalidValue, write-combined or not */
    if (flags &
        ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)) {
        *code = cudaErrorInvalidValue;
        return 1;
    }
    if (flags & cudaHostAllocWriteCombined) return 0;
    if (!pHost) {
        *code = cudaErrorInvalidValue;
        return 1;
    }
    *pHost = NULL;
    if (!size) {
        *code = cudaSuccess;
        return 1;
    }
    gpool_mem_kind kind =
        flags & cudaHostAllocMapped ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED;
    gpool_status st =
        gpp_alloc_host(size, kind, flags, pHost); /* cudaHostAlloc* = CU_MEMHOSTALLOC_* */
    if (st == GPOOL_OK) {
        *code = cudaSuccess;
        return 1;
    }
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        *code = cudaErrorMemoryAllocation;
        return 1;
    }
    return 0;
}

GPP_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    cudaError_t code;
    if (serve_host_alloc(ptr, size, 0, &code)) return noted(code);
    REAL(malloc_fn, cudaMallocHost);
    return real_cudaMallocHost(ptr, size);
}

GPP_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    cudaError_t code;
    if (serve_host_alloc(pHost, size, flags, &code)) return noted(code);
    REAL(host_alloc_fn, cudaHostAlloc);
    return real_cudaHostAlloc(pHost, size, flags);
}

GPP_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    if (!ptr) return cudaSuccess;
    if (gpp_enabled() || gpp_exiting()) {
        gpp_free_result r = gpp_free_host(ptr);
        if (r != GPP_NOT_OURS) return noted(free_code(r));
    }
    REAL(free_fn, cudaFreeHost);
    return real_cudaFreeHost(ptr);
}

GPP_EXPORT cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    if (gpp_enabled() && pHost) {
        if (!pDevice || flags) return noted(cudaErrorInvalidValue);
        int r = gpp_host_device_pointer(pHost, pDevice);
        if (r > 0) return cudaSuccess;
        if (r < 0)
            return noted(cudaErrorInvalidValue); /* gpool's, but not mapped into the device */
    }
    REAL(host_devptr_fn, cudaHostGetDevicePointer);
    return real_cudaHostGetDevicePointer(pDevice, pHost, flags);
}

/* cuda_runtime_api.h, cudaHostGetFlags: the flags a block was allocated with, for any pointer
 * in its range; other pointers go to cudart. */
typedef cudaError_t (*host_flags_fn)(unsigned int *, void *);
GPP_EXPORT cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    unsigned flags;
    if (pFlags && pHost && gpp_enabled() && gpp_host_flags_get(pHost, &flags)) {
        *pFlags = flags;
        return cudaSuccess;
    }
    REAL(host_flags_fn, cudaHostGetFlags);
    return real_cudaHostGetFlags(pFlags, pHost);
}

GPP_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    if (gpp_enabled()) {
        if (!free || !total) return noted(cudaErrorInvalidValue);
        if (gpp_mem_get_info(free, total) == GPOOL_OK) return cudaSuccess;
    }
    REAL(mem_info_fn, cudaMemGetInfo);
    return real_cudaMemGetInfo(free, total);
}
