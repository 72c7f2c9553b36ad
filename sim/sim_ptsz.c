/* sim_ptsz.c — the per-thread-default-stream forms of the stream-taking and synchronous-copy
 * entry points (the _ptsz/_ptds names cuda.h maps to under CUDA_API_PER_THREAD_DEFAULT_STREAM,
 * also what cuGetProcAddress returns with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). In
 * them a NULL stream is the calling thread's per-thread default stream, and the synchronous
 * copies and memsets run on that stream instead of the legacy stream (cuda.h, "\note_null_stream"
 * and CU_STREAM_PER_THREAD; "Stream synchronization behavior", per-thread default stream). */
#include "sim_internal.h"

#define PT SIM_EXPORT
PT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
PT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
PT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
PT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
PT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
PT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s);
PT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s);
PT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
PT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n);
PT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int ui, size_t n);
PT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s);
PT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s);
PT CUresult cuStreamSynchronize_ptsz(CUstream s);
PT CUresult cuStreamQuery_ptsz(CUstream s);
PT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags);
PT CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
PT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s);
PT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return sim_copy_entry(SIM_cuMemcpy, (uintptr_t)dst, (uintptr_t)src, n, NULL, 0, 1);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return sim_copy_entry(SIM_cuMemcpyAsync, (uintptr_t)dst, (uintptr_t)src, n, s, 1, 1);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return sim_copy_entry(SIM_cuMemcpyHtoD, (uintptr_t)dst, (uintptr_t)src, n, NULL, 0, 1);
}
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    return sim_copy_entry(SIM_cuMemcpyDtoH, (uintptr_t)dst, (uintptr_t)src, n, NULL, 0, 1);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return sim_copy_entry(SIM_cuMemcpyDtoD, (uintptr_t)dst, (uintptr_t)src, n, NULL, 0, 1);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return sim_copy_entry(SIM_cuMemcpyHtoDAsync, (uintptr_t)dst, (uintptr_t)src, n, s, 1, 1);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return sim_copy_entry(SIM_cuMemcpyDtoHAsync, (uintptr_t)dst, (uintptr_t)src, n, s, 1, 1);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return sim_copy_entry(SIM_cuMemcpyDtoDAsync, (uintptr_t)dst, (uintptr_t)src, n, s, 1, 1);
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n)
{
    return sim_set_entry(SIM_cuMemsetD8, (uintptr_t)dst, uc, 1, n, NULL, 0, 1);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int ui, size_t n)
{
    return sim_set_entry(SIM_cuMemsetD32, (uintptr_t)dst, ui, 4, n, NULL, 0, 1);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
    return sim_set_entry(SIM_cuMemsetD8Async, (uintptr_t)dst, uc, 1, n, s, 1, 1);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    return sim_set_entry(SIM_cuMemsetD32Async, (uintptr_t)dst, ui, 4, n, s, 1, 1);
}
CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return sim_stream_synchronize(s, 1);
}
CUresult cuStreamQuery_ptsz(CUstream s)
{
    return sim_stream_query(s, 1);
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    return sim_stream_wait_event(s, e, flags, 1);
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
    return sim_event_record(e, s, 1);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    return sim_mem_alloc_async(dptr, n, s, 1);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    return sim_mem_free_async(dptr, s, 1);
}

/* For cuGetProcAddress: the per-thread form of a plain entry point, or NULL. */
void *sim_proc_per_thread(void *fn)
{
    static const struct {
        void *plain, *pt;
    } map[] = {
        {(void *)cuMemcpy, (void *)cuMemcpy_ptds},
        {(void *)cuMemcpyAsync, (void *)cuMemcpyAsync_ptsz},
        {(void *)cuMemcpyHtoD_v2, (void *)cuMemcpyHtoD_v2_ptds},
        {(void *)cuMemcpyDtoH_v2, (void *)cuMemcpyDtoH_v2_ptds},
        {(void *)cuMemcpyDtoD_v2, (void *)cuMemcpyDtoD_v2_ptds},
        {(void *)cuMemcpyHtoDAsync_v2, (void *)cuMemcpyHtoDAsync_v2_ptsz},
        {(void *)cuMemcpyDtoHAsync_v2, (void *)cuMemcpyDtoHAsync_v2_ptsz},
        {(void *)cuMemcpyDtoDAsync_v2, (void *)cuMemcpyDtoDAsync_v2_ptsz},
        {(void *)cuMemsetD8_v2, (void *)cuMemsetD8_v2_ptds},
        {(void *)cuMemsetD32_v2, (void *)cuMemsetD32_v2_ptds},
        {(void *)cuMemsetD8Async, (void *)cuMemsetD8Async_ptsz},
        {(void *)cuMemsetD32Async, (void *)cuMemsetD32Async_ptsz},
        {(void *)cuStreamSynchronize, (void *)cuStreamSynchronize_ptsz},
        {(void *)cuStreamQuery, (void *)cuStreamQuery_ptsz},
        {(void *)cuStreamWaitEvent, (void *)cuStreamWaitEvent_ptsz},
        {(void *)cuEventRecord, (void *)cuEventRecord_ptsz},
        {(void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
        {(void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
        {(void *)cuStreamGetCtx, (void *)cuStreamGetCtx_ptsz},
        {(void *)cuStreamGetFlags, (void *)cuStreamGetFlags_ptsz},
        {(void *)cuStreamGetId, (void *)cuStreamGetId_ptsz},
        {(void *)cuStreamBeginCapture_v2, (void *)cuStreamBeginCapture_v2_ptsz},
        {(void *)cuStreamEndCapture, (void *)cuStreamEndCapture_ptsz},
        {(void *)cuStreamIsCapturing, (void *)cuStreamIsCapturing_ptsz},
        {(void *)cuStreamGetCaptureInfo_v3, (void *)cuStreamGetCaptureInfo_v3_ptsz},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].plain == fn) return map[i].pt;
    return NULL;
}
