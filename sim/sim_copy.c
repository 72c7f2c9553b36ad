/* sim_copy.c — memcpy and memset entry points: plain host copies, done at once. The async
 * forms add a unit of work to their stream. Touching memory that is not accessible faults,
 * as a GPU would. */
#include <string.h>

#include "sim_internal.h"

static CUresult sim_copy(enum sim_entry entry, uintptr_t dst, uintptr_t src, size_t n,
                         CUstream hstream, int async) {
    struct CUstream_st *s = NULL;
    CUresult rc = sim_enter(entry);
    if (rc == CUDA_SUCCESS && async) rc = sim_stream_lookup(hstream, &s);
    if (rc == CUDA_SUCCESS && n > 0) {
        if (!dst || !src)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            memmove((void *)dst, (const void *)src, n);
    }
    if (rc == CUDA_SUCCESS && s) sim_stream_submit(s);
    return sim_leave(rc);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    return sim_copy(SIM_cuMemcpy, (uintptr_t)dst, (uintptr_t)src, ByteCount, NULL, 0);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
    return sim_copy(SIM_cuMemcpyAsync, (uintptr_t)dst, (uintptr_t)src, ByteCount, hStream, 1);
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    return sim_copy(SIM_cuMemcpyHtoD, (uintptr_t)dstDevice, (uintptr_t)srcHost, ByteCount, NULL, 0);
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    return sim_copy(SIM_cuMemcpyDtoH, (uintptr_t)dstHost, (uintptr_t)srcDevice, ByteCount, NULL, 0);
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    return sim_copy(SIM_cuMemcpyDtoD, (uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount, NULL,
                    0);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                           CUstream hStream) {
    return sim_copy(SIM_cuMemcpyHtoDAsync, (uintptr_t)dstDevice, (uintptr_t)srcHost, ByteCount,
                    hStream, 1);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream) {
    return sim_copy(SIM_cuMemcpyDtoHAsync, (uintptr_t)dstHost, (uintptr_t)srcDevice, ByteCount,
                    hStream, 1);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream) {
    return sim_copy(SIM_cuMemcpyDtoDAsync, (uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount,
                    hStream, 1);
}

static CUresult sim_set(enum sim_entry entry, uintptr_t dst, unsigned value, size_t width,
                        size_t count, CUstream hstream, int async) {
    struct CUstream_st *s = NULL;
    CUresult rc = sim_enter(entry);
    if (rc == CUDA_SUCCESS && async) rc = sim_stream_lookup(hstream, &s);
    if (rc == CUDA_SUCCESS && count > 0) {
        if (!dst || !sim_is_aligned(dst, width))
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (width == 1)
            memset((void *)dst, (int)(value & 0xff), count);
        else {
            uint32_t v32 = value;
            for (size_t i = 0; i < count; i++)
                memcpy((char *)dst + 4 * i, &v32, 4);
        }
    }
    if (rc == CUDA_SUCCESS && s) sim_stream_submit(s);
    return sim_leave(rc);
}

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    return sim_set(SIM_cuMemsetD8, (uintptr_t)dstDevice, uc, 1, N, NULL, 0);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
    return sim_set(SIM_cuMemsetD8Async, (uintptr_t)dstDevice, uc, 1, N, hStream, 1);
}

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    return sim_set(SIM_cuMemsetD32, (uintptr_t)dstDevice, ui, 4, N, NULL, 0);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
    return sim_set(SIM_cuMemsetD32Async, (uintptr_t)dstDevice, ui, 4, N, hStream, 1);
}
