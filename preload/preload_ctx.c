/* preload_ctx.c — the calling thread's current device, cached so that the cached path of
 * cudaMalloc/cuMemAlloc/cudaFree makes no driver call to learn it.
 *
 * The current context is per thread, and it changes only through the driver's context calls
 * (cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent; cudart's cudaSetDevice makes the
 * device's primary context current through the table it gets from cuGetProcAddress). The
 * interposer hands out its own versions of those three (the dlsym and cuGetProcAddress
 * substitution of preload.c, and the exported names of preload_direct.c for programs linked
 * with -lcuda): each calls the real entry point and then drops the thread's
 * cached device, which the next allocation reads again (cuCtxGetCurrent + cuCtxGetDevice).
 * cudaSetDevice is exported too and does the same, for runtimes that switch contexts without
 * those entry points. A thread with no current context is not cached (gpool makes the primary
 * context current in such a thread itself, with calls we do not see), so it asks each time.
 *
 * Not seen: context switches through the 2.0-ABI cuCtxPushCurrent/PopCurrent, and
 * cuCtxCreate/cuCtxDestroy (absent from the simulated driver; a program that creates contexts
 * itself should call cuCtxSetCurrent after, as the driver API guide's samples do). */
#include <cuda_runtime_api.h>

#include "preload.h"

#define GPP_TLS __attribute__((tls_model("initial-exec")))

/* -1: not known; otherwise the device of the thread's current context (read inline by
 * gpp_current_device, preload.h). */
_Thread_local GPP_TLS int gpp_tl_device = -1;

void gpp_current_device_changed(void)
{
    gpp_tl_device = -1;
}

static int query_device(void)
{
    const gpp_real_driver *d = gpp_driver();
    CUcontext ctx = NULL;
    CUdevice dev;
    if (!d || d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return -1;
    if (d->cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
    return (int)dev;
}

int gpp_current_device_slow(void)
{
    int dev = query_device();
    gpp_tl_device = dev;
    return dev;
}

CUresult gpp_cuCtxSetCurrent(CUcontext ctx)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuCtxSetCurrent) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuCtxSetCurrent(ctx);
    gpp_current_device_changed();
    return r;
}

CUresult gpp_cuCtxPushCurrent_v2(CUcontext ctx)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuCtxPushCurrent(ctx);
    gpp_current_device_changed();
    return r;
}

CUresult gpp_cuCtxPopCurrent_v2(CUcontext *pctx)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuCtxPopCurrent(pctx);
    gpp_current_device_changed();
    return r;
}

/* cuDevicePrimaryCtxReset: dev's pool goes first (gpp_device_reset: its memory dies with the
 * reset), then the real call, whose answer is returned as it is. */
CUresult gpp_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuDevicePrimaryCtxReset) return CUDA_ERROR_NOT_INITIALIZED;
    if (gpp_enabled()) gpp_device_reset((int)dev);
    return d->cuDevicePrimaryCtxReset(dev);
}

typedef cudaError_t (*set_device_fn)(int);

__attribute__((visibility("default"))) cudaError_t cudaSetDevice(int device)
{
    static void *real_ptr;
    set_device_fn real;
    *(void **)&real = __atomic_load_n(&real_ptr, __ATOMIC_ACQUIRE);
    if (!real) {
        *(void **)&real = gpp_real_runtime("cudaSetDevice");
        __atomic_store_n(&real_ptr, *(void **)&real, __ATOMIC_RELEASE);
    }
    cudaError_t e = real ? real(device) : cudaErrorInitializationError;
    gpp_current_device_changed();
    return e;
}

/* cudaDeviceReset, by name too (cudart reaches cuDevicePrimaryCtxReset through the driver's
 * table, which the hooks above serve; a runtime that called it another way still drops the
 * current device's pool first). */
typedef cudaError_t (*device_reset_fn)(void);

__attribute__((visibility("default"))) cudaError_t cudaDeviceReset(void)
{
    static void *real_ptr;
    device_reset_fn real;
    *(void **)&real = __atomic_load_n(&real_ptr, __ATOMIC_ACQUIRE);
    if (!real) {
        *(void **)&real = gpp_real_runtime("cudaDeviceReset");
        __atomic_store_n(&real_ptr, *(void **)&real, __ATOMIC_RELEASE);
    }
    if (!real) return cudaErrorInitializationError;
    if (gpp_enabled()) {
        int dev = gpp_current_device();
        gpp_device_reset(dev < 0 ? 0 : dev); /* no current context: cudart resets device 0 */
    }
    return real();
}
