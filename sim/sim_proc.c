/* sim_proc.c — cuGetProcAddress (both versions), cuGetErrorString and cuGetErrorName.
 *
 * The table lists, per base name, the CUDA version each ABI of the symbol appeared in. A
 * lookup returns the newest ABI not newer than the requested version, as the real driver does
 * ("cuMemAlloc" at >= 3020 gives cuMemAlloc_v2). Old ABIs with 32-bit sizes (cuMemAlloc before
 * 3020 and the like) are not simulated: such requests report VERSION_NOT_SUFFICIENT. The
 * per-thread-default-stream variants are the _ptsz/_ptds functions of sim_ptsz.c. */
#include <string.h>

#include "sim_internal.h"

struct sim_proc {
    const char *name;
    int version;
    void *fn;
};

#define P(name, version, fn)                                                                       \
    {                                                                                              \
        name, version, (void *)(fn)                                                                \
    }
static const struct sim_proc sim_procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetUuid", 9020, sim_cuDeviceGetUuid_v1),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, sim_cuDevicePrimaryCtxRelease_v1),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    P("cuDevicePrimaryCtxReset", 7000, sim_cuDevicePrimaryCtxReset_v1),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxPushCurrent", 2000, sim_cuCtxPushCurrent_v1),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 2000, sim_cuCtxPopCurrent_v1),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemGetAccess", 10020, cuMemGetAccess),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    P("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    P("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    P("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    P("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 4010, sim_cuIpcOpenMemHandle_v1),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemHostRegister", 4000, sim_cuMemHostRegister_v1),
    P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    P("cuMemHostUnregister", 4000, cuMemHostUnregister),
    P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    P("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 2000, sim_cuStreamDestroy_v1),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    P("cuStreamQuery", 2000, cuStreamQuery),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventRecord", 2000, cuEventRecord),
    P("cuEventQuery", 2000, cuEventQuery),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuEventDestroy", 2000, sim_cuEventDestroy_v1),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    P("cuEventElapsedTime", 2000, sim_cuEventElapsedTime_v1),
    P("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    P("cuMemcpy", 4000, cuMemcpy),
    P("cuMemcpyAsync", 4000, cuMemcpyAsync),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    P("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    P("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    P("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    P("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    P("cuMemsetD8", 3020, cuMemsetD8_v2),
    P("cuMemsetD8Async", 3020, cuMemsetD8Async),
    P("cuMemsetD32", 3020, cuMemsetD32_v2),
    P("cuMemsetD32Async", 3020, cuMemsetD32Async),
    P("cuGetProcAddress", 11030, sim_cuGetProcAddress_v1),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuStreamGetCtx", 9020, cuStreamGetCtx),
    P("cuStreamGetFlags", 5050, cuStreamGetFlags),
    P("cuStreamGetId", 12000, cuStreamGetId),
    P("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    P("cuStreamEndCapture", 10000, cuStreamEndCapture),
    P("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    P("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    P("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
    P("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
};
#undef P

/* Lock not needed: the table is constant. */
static CUresult sim_proc_resolve(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn || cuda_version <= 0 || cuda_version > SIM_DRIVER_VERSION ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_proc *best = NULL;
    for (size_t i = 0; i < sizeof sim_procs / sizeof sim_procs[0]; i++) {
        if (strcmp(sim_procs[i].name, symbol) != 0) continue;
        st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (sim_procs[i].version <= cuda_version && (!best || sim_procs[i].version > best->version))
            best = &sim_procs[i];
    }
    *pfn = best ? best->fn : NULL;
    /* cuda.h, cuGetProcAddress: CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM returns the
     * per-thread default stream version of the symbol where one exists. */
    if (best && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        void *pt = sim_proc_per_thread(best->fn);
        if (pt) *pfn = pt;
    }
    if (best) st = CU_GET_PROC_ADDRESS_SUCCESS;
    if (status) *status = st;
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc = sim_enter(SIM_cuGetProcAddress);
    if (rc == CUDA_SUCCESS) rc = sim_proc_resolve(symbol, pfn, cudaVersion, flags, symbolStatus);
    return sim_leave(rc);
}

SIM_EXPORT CUresult sim_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags)
{
    CUresult rc = sim_enter(SIM_cuGetProcAddress);
    if (rc == CUDA_SUCCESS) rc = sim_proc_resolve(symbol, pfn, cudaVersion, flags, NULL);
    return sim_leave(rc);
}

/* ---- error strings ---- */

#define SIM_ERROR_LIST(X)                                                                          \
    X(CUDA_SUCCESS, "no error")                                                                    \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                   \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                          \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                            \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                  \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                         \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                        \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                               \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                        \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                              \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                                    \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                      \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,                                                          \
      "peer access is not supported between these two devices")                                    \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled")                    \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled")                      \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,                                                   \
      "part or all of the requested memory range is already mapped")                               \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory " \
                                             "region")                                             \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                         \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                         \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")          \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")   \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,                                                       \
      "operation failed due to a previous error during capture")                                   \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,                                                      \
      "attempt to terminate a thread-local capture sequence from another thread")                  \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                                          \
      "operation would make the legacy stream depend on a capturing blocking stream")              \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    CUresult rc = sim_enter(SIM_cuGetErrorString);
    if (rc == CUDA_SUCCESS) {
        const char *s = NULL;
        switch (error) {
#define SIM_ERROR_STRING(code, text)                                                               \
    case code:                                                                                     \
        s = text;                                                                                  \
        break;
            SIM_ERROR_LIST(SIM_ERROR_STRING)
#undef SIM_ERROR_STRING
        default:
            break;
        }
        if (pStr) *pStr = s;
        if (!pStr || !s) rc = CUDA_ERROR_INVALID_VALUE;
    }
    return sim_leave(rc);
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    CUresult rc = sim_enter(SIM_cuGetErrorName);
    if (rc == CUDA_SUCCESS) {
        const char *s = NULL;
        switch (error) {
#define SIM_ERROR_NAME(code, text)                                                                 \
    case code:                                                                                     \
        s = #code;                                                                                 \
        break;
            SIM_ERROR_LIST(SIM_ERROR_NAME)
#undef SIM_ERROR_NAME
        default:
            break;
        }
        if (pStr) *pStr = s;
        if (!pStr || !s) rc = CUDA_ERROR_INVALID_VALUE;
    }
    return sim_leave(rc);
}
