/* preload_driver.c — gpool's versions of the driver's memory entry points, handed out by the
 * dlsym and cuGetProcAddress interposition (preload.c). Each one passes the call to the real
 * entry point when the interposer is off, when the arguments are ones the real driver rejects
 * (so the caller gets the driver's own error code), when the pointer is not gpool's, and when
 * gpool cannot serve the device. gpool's out-of-memory is CUDA_ERROR_OUT_OF_MEMORY. */
#include <stdint.h>

#include "preload.h"

/* Driver-level calls need a current context, as the real ones do (the real entry point then
 * reports CUDA_ERROR_INVALID_CONTEXT). */
static CUresult alloc_device(CUdeviceptr *dptr, size_t size, CUstream stream, int *served)
{
    *served = 0;
    int dev = stream ? gpp_stream_device(stream) : -1; /* an explicit stream: its device */
    if (dev < 0) dev = gpp_current_device();
    if (dev < 0) return CUDA_SUCCESS;
    void *p = NULL;
    gpool_status st = gpp_alloc_device(dev, size, stream, &p);
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        *served = 1;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (st != GPOOL_OK) return CUDA_SUCCESS;
    *served = 1;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult free_code(gpp_free_result r)
{
    return r == GPP_FREED          ? CUDA_SUCCESS
           : r == GPP_FREE_INVALID ? CUDA_ERROR_INVALID_VALUE /* cuda.h, cuMemFree */
                                   : CUDA_ERROR_UNKNOWN;
}

CUresult gpp_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    if (dptr && bytesize && gpp_enabled()) {
        CUresult r = gpp_capture_check(); /* what the driver says during a stream capture */
        if (__builtin_expect(r != CUDA_SUCCESS, 0)) return r;
        int dev = gpp_current_device(); /* alloc_device for the legacy stream, inline */
        void *p;
        gpool_status st = dev < 0 ? GPOOL_ERR_NO_DEVICE : gpp_alloc_device(dev, bytesize, NULL, &p);
        if (__builtin_expect(st == GPOOL_OK, 1)) {
            *dptr = (CUdeviceptr)(uintptr_t)p;
            return CUDA_SUCCESS;
        }
        if (st == GPOOL_ERR_OUT_OF_MEMORY) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return gpp_real_mem_alloc(dptr, bytesize); /* out of memory: gpool's cache back, once more */
}

CUresult gpp_cuMemFree_v2(CUdeviceptr dptr)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    if (dptr && (gpp_enabled() || gpp_exiting())) {
        CUresult c = gpp_capture_check(); /* the driver's cuMemFree would refuse too */
        if (__builtin_expect(c != CUDA_SUCCESS, 0)) return c;
        gpp_free_result r = gpp_free_device((void *)(uintptr_t)dptr, NULL, 1);
        if (r != GPP_NOT_OURS) return free_code(r);
    }
    return d->cuMemFree(dptr);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream stream, int ptsz)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    PFN_cuMemAllocAsync_v11020 real = ptsz ? d->cuMemAllocAsync_ptsz : d->cuMemAllocAsync;
    /* on a capturing stream: the driver's graph memory node (preload_capture.c) */
    if (dptr && bytesize && gpp_enabled() && !gpp_capture_stream_ordered(stream, ptsz)) {
        int served;
        CUresult r = alloc_device(dptr, bytesize, gpp_stream(stream, ptsz), &served);
        if (served || !real) return r;
    }
    return real ? real(dptr, bytesize, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream, int ptsz)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    PFN_cuMemFreeAsync_v11020 real = ptsz ? d->cuMemFreeAsync_ptsz : d->cuMemFreeAsync;
    /* on a capturing stream a free node, which only a graph allocation may have (cuda.h,
     * cuMemFreeAsync): the driver answers, for gpool's blocks too (they stay live) */
    if (dptr && gpp_capture_stream_ordered(stream, ptsz) && real) return real(dptr, stream);
    if (dptr && (gpp_enabled() || gpp_exiting())) {
        gpp_free_result r = gpp_free_device((void *)(uintptr_t)dptr, gpp_stream(stream, ptsz), 0);
        if (r != GPP_NOT_OURS) return free_code(r);
    }
    return real ? real(dptr, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult gpp_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    return alloc_async(dptr, bytesize, stream, 0);
}

CUresult gpp_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    return alloc_async(dptr, bytesize, stream, 1);
}

CUresult gpp_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, 0);
}

CUresult gpp_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, 1);
}

/* cuda.h, cuMemHostAlloc: the flags are CU_MEMHOSTALLOC_PORTABLE, _DEVICEMAP and
 * _WRITECOMBINED; any other bit is CUDA_ERROR_INVALID_VALUE. */
#define GPP_HOST_ALLOC_FLAGS                                                                       \
    (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)

/* Host memory: gpool serves it when it has the host kinds (UNSUPPORTED until then: the real
 * entry point serves it). Write-combined memory always goes to the driver. */
static CUresult host_alloc(void **pp, size_t size, unsigned flags, int *served)
{
    *served = 0;
    if (gpp_enabled() && (flags & ~(unsigned)GPP_HOST_ALLOC_FLAGS)) {
        *served = 1;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!pp || !size || (flags & CU_MEMHOSTALLOC_WRITECOMBINED) || !gpp_enabled() ||
        gpp_current_device() < 0)
        return CUDA_SUCCESS;
    gpool_mem_kind kind =
        flags & CU_MEMHOSTALLOC_DEVICEMAP ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED;
    gpool_status st = gpp_alloc_host(size, kind, flags, pp);
    if (st == GPOOL_OK || st == GPOOL_ERR_OUT_OF_MEMORY) *served = 1;
    return st == GPOOL_OK ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult gpp_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemHostAlloc) return CUDA_ERROR_NOT_INITIALIZED;
    int served;
    CUresult r = host_alloc(pp, bytesize, flags, &served);
    return served ? r : d->cuMemHostAlloc(pp, bytesize, flags);
}

CUresult gpp_cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemAllocHost) return CUDA_ERROR_NOT_INITIALIZED;
    int served;
    CUresult r = host_alloc(pp, bytesize, 0, &served);
    return served ? r : d->cuMemAllocHost(pp, bytesize);
}

CUresult gpp_cuMemFreeHost(void *p)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemFreeHost) return CUDA_ERROR_NOT_INITIALIZED;
    if (p && (gpp_enabled() || gpp_exiting())) {
        gpp_free_result r = gpp_free_host(p);
        if (r != GPP_NOT_OURS) return free_code(r);
    }
    return d->cuMemFreeHost(p);
}

/* cuda.h, cuMemHostGetFlags: the flags the block was allocated with (any address in it). */
CUresult gpp_cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemHostGetFlags) return CUDA_ERROR_NOT_INITIALIZED;
    unsigned flags;
    if (pFlags && p && gpp_enabled() && gpp_host_flags_get(p, &flags)) {
        *pFlags = flags;
        return CUDA_SUCCESS;
    }
    return d->cuMemHostGetFlags(pFlags, p);
}

CUresult gpp_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemGetInfo) return CUDA_ERROR_NOT_INITIALIZED;
    if (free_bytes && total_bytes && gpp_enabled() && gpp_current_device() >= 0 &&
        gpp_mem_get_info(free_bytes, total_bytes) == GPOOL_OK)
        return CUDA_SUCCESS;
    return d->cuMemGetInfo(free_bytes, total_bytes);
}
