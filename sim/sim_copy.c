/* sim_copy.c — memcpy and memset entry points: plain host copies, done at once. The async
 * forms are a unit of work on their stream; the synchronous forms are a unit of work on the
 * legacy stream (the calling thread's per-thread stream for the _ptds forms), as documented in
 * cuda.h ("\note_sync", "\note_null_stream") and the "API synchronization behavior" page.
 * Every copy reads its source and writes its destination: both are accesses for the
 * happens-before checker (sim_hb.c) when they lie in device-visible memory. Work submitted to
 * a capturing stream is recorded, not executed (cuda.h, cuStreamBeginCapture). */
#include <string.h>

#include "sim_internal.h"

static int sim_host_range_is_pinned(uintptr_t p, size_t n)
{
    return sim_host_contains(p, n);
}

static int sim_device_visible(uintptr_t p, size_t n)
{
    return sim_hb_visible(p, n);
}

/* Which side of a copy is a device address (1), a host address (0), or either (-1: cuMemcpy
 * infers it from the address under unified addressing). */
static void sim_copy_sides(enum sim_entry entry, int *dst_dev, int *src_dev)
{
    switch (entry) {
    case SIM_cuMemcpyHtoD:
    case SIM_cuMemcpyHtoDAsync:
        *dst_dev = 1, *src_dev = 0;
        break;
    case SIM_cuMemcpyDtoH:
    case SIM_cuMemcpyDtoHAsync:
        *dst_dev = 0, *src_dev = 1;
        break;
    case SIM_cuMemcpyDtoD:
    case SIM_cuMemcpyDtoDAsync:
        *dst_dev = 1, *src_dev = 1;
        break;
    default:
        *dst_dev = -1, *src_dev = -1;
        break;
    }
}

/* Enter the driver and find the stream a copy or memset runs on: its own stream for the async
 * forms, the legacy (or, for _ptds forms, the per-thread) stream for the synchronous ones, which
 * are prohibited during a global capture; legacy-stream work while a blocking stream of the
 * context captures is refused (cuStreamBeginCapture). The lock is held on return, whatever rc. */
static CUresult sim_transfer_begin(enum sim_entry entry, CUstream hstream, int async,
                                   int per_thread, struct CUstream_st **s)
{
    CUresult rc = sim_enter(entry);
    if (rc != CUDA_SUCCESS) return rc;
    if (async)
        rc = sim_stream_lookup_pt(hstream, per_thread, s);
    else if ((rc = sim_capture_unsafe_call()) == CUDA_SUCCESS)
        rc = sim_stream_lookup_pt(NULL, per_thread, s);
    if (rc == CUDA_SUCCESS) rc = sim_capture_check_legacy(*s);
    return rc;
}

/* "API synchronization behavior", memcpy: a synchronous copy from pageable host memory first
 * synchronizes the stream; one to pageable host memory (and any device-to-host copy) returns
 * only once the copy has completed; device-to-device copies do not synchronize the host. */
CUresult sim_copy_entry(enum sim_entry entry, uintptr_t dst, uintptr_t src, size_t n,
                        CUstream hstream, int async, int per_thread)
{
    struct CUstream_st *s = NULL;
    CUresult rc = sim_transfer_begin(entry, hstream, async, per_thread, &s);
    if (rc == CUDA_SUCCESS && n > 0 && (!dst || !src)) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int dst_dev = sim_device_visible(dst, n), src_dev = sim_device_visible(src, n);
    int dst_side, src_side, dev;
    sim_copy_sides(entry, &dst_side, &src_side);
    if ((rc = sim_copy_device(s, &dev)) != CUDA_SUCCESS) return sim_leave(rc);
    if (!async && !src_dev) sim_stream_sync_host(s);
    if (sim_stream_submit_work(s)) return sim_leave(CUDA_SUCCESS); /* captured */
    if (n > 0) {
        /* the device-access rule and the storage behind device addresses: sim_access.c */
        rc = sim_mem_move(dev, dst, dst_side, src, src_side, n);
        if (rc != CUDA_SUCCESS) return sim_leave(rc);
        if (src_dev) sim_hb_access(s, src, n, SIM_READ, "copy source");
        if (dst_dev) sim_hb_access(s, dst, n, SIM_WRITE, "copy destination");
    }
    if (!async && (!dst_dev || sim_host_range_is_pinned(dst, n))) sim_stream_sync_host(s);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return sim_copy_entry(SIM_cuMemcpy, (uintptr_t)dst, (uintptr_t)src, ByteCount, NULL, 0, 0);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return sim_copy_entry(SIM_cuMemcpyAsync, (uintptr_t)dst, (uintptr_t)src, ByteCount, hStream, 1,
                          0);
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return sim_copy_entry(SIM_cuMemcpyHtoD, (uintptr_t)dstDevice, (uintptr_t)srcHost, ByteCount,
                          NULL, 0, 0);
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy_entry(SIM_cuMemcpyDtoH, (uintptr_t)dstHost, (uintptr_t)srcDevice, ByteCount,
                          NULL, 0, 0);
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy_entry(SIM_cuMemcpyDtoD, (uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount,
                          NULL, 0, 0);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                           CUstream hStream)
{
    return sim_copy_entry(SIM_cuMemcpyHtoDAsync, (uintptr_t)dstDevice, (uintptr_t)srcHost,
                          ByteCount, hStream, 1, 0);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return sim_copy_entry(SIM_cuMemcpyDtoHAsync, (uintptr_t)dstHost, (uintptr_t)srcDevice,
                          ByteCount, hStream, 1, 0);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream)
{
    return sim_copy_entry(SIM_cuMemcpyDtoDAsync, (uintptr_t)dstDevice, (uintptr_t)srcDevice,
                          ByteCount, hStream, 1, 0);
}

/* "API synchronization behavior", memset: synchronous memsets are asynchronous with respect
 * to the host except when the target is pinned host memory. They are legacy-stream work. */
CUresult sim_set_entry(enum sim_entry entry, uintptr_t dst, unsigned value, size_t width,
                       size_t count, CUstream hstream, int async, int per_thread)
{
    struct CUstream_st *s = NULL;
    CUresult rc = sim_transfer_begin(entry, hstream, async, per_thread, &s);
    if (rc == CUDA_SUCCESS && count > 0 && (!dst || !sim_is_aligned(dst, width)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int dev;
    if ((rc = sim_copy_device(s, &dev)) != CUDA_SUCCESS) return sim_leave(rc);
    if (sim_stream_submit_work(s)) return sim_leave(CUDA_SUCCESS); /* captured */
    if (count > 0) {
        unsigned char u8 = (unsigned char)(value & 0xff);
        uint32_t v32 = value;
        /* the device-access rule and the storage behind device addresses: sim_access.c */
        rc = sim_mem_fill(dev, dst, width == 1 ? (const void *)&u8 : (const void *)&v32, width,
                          count);
        if (rc != CUDA_SUCCESS) return sim_leave(rc);
        if (sim_device_visible(dst, width * count))
            sim_hb_access(s, dst, width * count, SIM_WRITE, "memset");
        if (!async && sim_host_range_is_pinned(dst, width * count)) sim_stream_sync_host(s);
    }
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return sim_set_entry(SIM_cuMemsetD8, (uintptr_t)dstDevice, uc, 1, N, NULL, 0, 0);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return sim_set_entry(SIM_cuMemsetD8Async, (uintptr_t)dstDevice, uc, 1, N, hStream, 1, 0);
}

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return sim_set_entry(SIM_cuMemsetD32, (uintptr_t)dstDevice, ui, 4, N, NULL, 0, 0);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    return sim_set_entry(SIM_cuMemsetD32Async, (uintptr_t)dstDevice, ui, 4, N, hStream, 1, 0);
}
