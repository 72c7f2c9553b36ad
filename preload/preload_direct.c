/* preload_direct.c — the driver's own symbol names, exported so that a program linked with
 * -lcuda reaches gpool too. cuda.h maps cuMemAlloc to cuMemAlloc_v2, cuMemGetInfo to
 * cuMemGetInfo_v2, ... and such a program binds those names at load time; LD_PRELOAD puts this
 * library first, so the names below resolve here. Each one runs the same hook the dlsym and
 * cuGetProcAddress substitution hands out (preload.c), which passes what gpool does not serve
 * to the real driver. When the hooks cannot serve the program (the driver did not load, or the
 * program's libcuda is not the driver gpool loaded: gpp_direct_ok), the call goes to the next
 * definition of the same name, the program's own libcuda. */
#include <dlfcn.h>

#include "preload.h"

/* The per-thread-default-stream forms (cuda.h declares them only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);

/* The definition of `name` after this library (the linked libcuda), looked up once. */
static void *next_definition(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = gpp_real_dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* DIRECT(name, (params), (args)): the exported `name`, served by gpp_<name>. */
#define DIRECT(name, params, args)                                                                 \
    __attribute__((visibility("default"))) CUresult name params;                                   \
    CUresult name params                                                                           \
    {                                                                                              \
        if (__builtin_expect(gpp_direct_ok(), 1)) return gpp_##name args;                          \
        static void *next_;                                                                        \
        CUresult(*fn_) params;                                                                     \
        *(void **)&fn_ = next_definition(&next_, #name);                                           \
        return fn_ ? fn_ args : CUDA_ERROR_NOT_INITIALIZED;                                        \
    }

DIRECT(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))
DIRECT(cuMemFree_v2, (CUdeviceptr dptr), (dptr))
DIRECT(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream s), (dptr, bytesize, s))
DIRECT(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream s), (dptr, bytesize, s))
DIRECT(cuMemFreeAsync, (CUdeviceptr dptr, CUstream s), (dptr, s))
DIRECT(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream s), (dptr, s))
DIRECT(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int flags), (pp, bytesize, flags))
DIRECT(cuMemAllocHost_v2, (void **pp, size_t bytesize), (pp, bytesize))
DIRECT(cuMemFreeHost, (void *p), (p))
DIRECT(cuMemHostGetFlags, (unsigned int *pFlags, void *p), (pFlags, p))
DIRECT(cuMemHostUnregister, (void *p), (p))
DIRECT(cuMemHostGetDevicePointer_v2, (CUdeviceptr * pdptr, void *p, unsigned int flags),
       (pdptr, p, flags))
DIRECT(cuMemGetInfo_v2, (size_t * free_bytes, size_t *total_bytes), (free_bytes, total_bytes))
DIRECT(cuCtxSetCurrent, (CUcontext ctx), (ctx))
DIRECT(cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))
DIRECT(cuCtxPopCurrent_v2, (CUcontext * pctx), (pctx))
DIRECT(cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev))
DIRECT(cuStreamCreate, (CUstream * ph, unsigned int flags), (ph, flags))
DIRECT(cuStreamCreateWithPriority, (CUstream * ph, unsigned int flags, int priority),
       (ph, flags, priority))
DIRECT(cuStreamDestroy_v2, (CUstream s), (s))
DIRECT(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode mode), (s, mode))
DIRECT(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode mode), (s, mode))
DIRECT(cuStreamEndCapture, (CUstream s, CUgraph *g), (s, g))
DIRECT(cuStreamEndCapture_ptsz, (CUstream s, CUgraph *g), (s, g))
DIRECT(cuMemGetAddressRange_v2, (CUdeviceptr * pbase, size_t *psize, CUdeviceptr dptr),
       (pbase, psize, dptr))
DIRECT(cuPointerGetAttribute, (void *data, CUpointer_attribute attribute, CUdeviceptr ptr),
       (data, attribute, ptr))
DIRECT(cuPointerGetAttributes,
       (unsigned int n, CUpointer_attribute *attributes, void **data, CUdeviceptr ptr),
       (n, attributes, data, ptr))
DIRECT(cuMemCreate,
       (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,
        unsigned long long flags),
       (handle, size, prop, flags))
DIRECT(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
       (dptr, bytesize, flags))
DIRECT(cuMemAllocPitch_v2,
       (CUdeviceptr * dptr, size_t *pitch, size_t width, size_t height, unsigned int elem),
       (dptr, pitch, width, height, elem))
