/* sim_copy.c — memcpy and memset entry points: plain host copies, done at once. The async
 * forms add a unit of work to their stream. Touching memory that is not accessible faults,
 * as a GPU would. */
#include <string.h>

#include "sim_internal.h"

/* dst_dev/src_dev: 1 device pointer, 0 host pointer, -1 either (unified cuMemcpy). */
static CUresult sim_copy(enum sim_entry entry, uintptr_t dst, int dst_dev, uintptr_t src,
                         int src_dev, size_t n, CUstream hstream, int async)
{
    struct CUstream_st *s = NULL;
    int dev = -1;
    CUresult rc = sim_enter(entry);
    if (rc == CUDA_SUCCESS && async) rc = sim_stream_lookup(hstream, &s);
    if (rc == CUDA_SUCCESS) rc = sim_copy_device(s, &dev);
    if (rc == CUDA_SUCCESS && n > 0) {
        if (!dst || !src)
            rc = CUDA_ERROR_INVALID_VALUE;
        else /* device-access rule and storage: sim_access.c */
            rc = sim_mem_move(dev, dst, dst_dev, src, src_dev, n);
    }
    if (rc == CUDA_SUCCESS && s) sim_stream_submit(s);
    return sim_leave(rc);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return sim_copy(SIM_cuMemcpy, (uintptr_t)dst, -1, (uintptr_t)src, -1, ByteCount, NULL, 0);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return sim_copy(SIM_cuMemcpyAsync, (uintptr_t)dst, -1, (uintptr_t)src, -1, ByteCount, hStream,
                    1);
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return sim_copy(SIM_cuMemcpyHtoD, (uintptr_t)dstDevice, 1, (uintptr_t)srcHost, 0, ByteCount,
                    NULL, 0);
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy(SIM_cuMemcpyDtoH, (uintptr_t)dstHost, 0, (uintptr_t)srcDevice, 1, ByteCount,
                    NULL, 0);
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy(SIM_cuMemcpyDtoD, (uintptr_t)dstDevice, 1, (uintptr_t)srcDevice, 1, ByteCount,
                    NULL, 0);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                           CUstream hStream)
{
    return sim_copy(SIM_cuMemcpyHtoDAsync, (uintptr_t)dstDevice, 1, (uintptr_t)srcHost, 0,
                    ByteCount, hStream, 1);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return sim_copy(SIM_cuMemcpyDtoHAsync, (uintptr_t)dstHost, 0, (uintptr_t)srcDevice, 1,
                    ByteCount, hStream, 1);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream)
{
    return sim_copy(SIM_cuMemcpyDtoDAsync, (uintptr_t)dstDevice, 1, (uintptr_t)srcDevice, 1,
                    ByteCount, hStream, 1);
}

static CUresult sim_set(enum sim_entry entry, uintptr_t dst, unsigned value, size_t width,
                        size_t count, CUstream hstream, int async)
{
    struct CUstream_st *s = NULL;
    int dev = -1;
    CUresult rc = sim_enter(entry);
    if (rc == CUDA_SUCCESS && async) rc = sim_stream_lookup(hstream, &s);
    if (rc == CUDA_SUCCESS) rc = sim_copy_device(s, &dev);
    if (rc == CUDA_SUCCESS && count > 0) {
        unsigned char u8 = (unsigned char)(value & 0xff);
        uint32_t v32 = value;
        if (!dst || !sim_is_aligned(dst, width))
            rc = CUDA_ERROR_INVALID_VALUE;
        else /* device-access rule and storage: sim_access.c */
            rc = sim_mem_fill(dev, dst, width == 1 ? (const void *)&u8 : (const void *)&v32, width,
                              count);
    }
    if (rc == CUDA_SUCCESS && s) sim_stream_submit(s);
    return sim_leave(rc);
}

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return sim_set(SIM_cuMemsetD8, (uintptr_t)dstDevice, uc, 1, N, NULL, 0);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return sim_set(SIM_cuMemsetD8Async, (uintptr_t)dstDevice, uc, 1, N, hStream, 1);
}

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return sim_set(SIM_cuMemsetD32, (uintptr_t)dstDevice, ui, 4, N, NULL, 0);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    return sim_set(SIM_cuMemsetD32Async, (uintptr_t)dstDevice, ui, 4, N, hStream, 1);
}
