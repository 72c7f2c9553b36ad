/* The driver table: libcuda is loaded at run time and every entry point gpool uses is
 * resolved once through cuGetProcAddress with an explicit CUDA version. Nothing else in
 * gpool names a driver symbol directly. */
#ifndef GPOOL_DRIVER_H
#define GPOOL_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gpool.h"

/* X(field, PFN typedef suffix, required) — the ABI version of each typedef is the one the
 * driver hands out when asked for GP_DRIVER_ABI (12.0). */
#define GP_DRIVER_ENTRIES(X)                                                                       \
    X(cuInit, v2000, 1)                                                                            \
    X(cuDriverGetVersion, v2020, 1)                                                                \
    X(cuDeviceGet, v2000, 1)                                                                       \
    X(cuDeviceGetCount, v2000, 1)                                                                  \
    X(cuDeviceGetAttribute, v2000, 1)                                                              \
    X(cuDeviceGetName, v2000, 1)                                                                   \
    X(cuDeviceTotalMem, v3020, 1)                                                                  \
    X(cuDeviceGetPCIBusId, v4010, 0)                                                               \
    X(cuDeviceCanAccessPeer, v4000, 0)                                                             \
    X(cuDevicePrimaryCtxRetain, v7000, 1)                                                          \
    X(cuDevicePrimaryCtxRelease, v11000, 1)                                                        \
    X(cuCtxGetCurrent, v4000, 1)                                                                   \
    X(cuCtxSetCurrent, v4000, 1)                                                                   \
    X(cuCtxPushCurrent, v4000, 1)                                                                  \
    X(cuCtxPopCurrent, v4000, 1)                                                                   \
    X(cuCtxSynchronize, v2000, 1)                                                                  \
    X(cuMemGetInfo, v3020, 1)                                                                      \
    X(cuMemAddressReserve, v10020, 1)                                                              \
    X(cuMemAddressFree, v10020, 1)                                                                 \
    X(cuMemCreate, v10020, 1)                                                                      \
    X(cuMemRelease, v10020, 1)                                                                     \
    X(cuMemMap, v10020, 1)                                                                         \
    X(cuMemUnmap, v10020, 1)                                                                       \
    X(cuMemSetAccess, v10020, 1)                                                                   \
    X(cuMemGetAllocationGranularity, v10020, 1)                                                    \
    X(cuMemExportToShareableHandle, v10020, 0)                                                     \
    X(cuMemImportFromShareableHandle, v10020, 0)                                                   \
    X(cuMemAlloc, v3020, 0)                                                                        \
    X(cuMemFree, v3020, 0)                                                                         \
    X(cuMemAllocAsync, v11020, 0)                                                                  \
    X(cuMemFreeAsync, v11020, 0)                                                                   \
    X(cuMemHostAlloc, v2020, 0)                                                                    \
    X(cuMemFreeHost, v2000, 0)                                                                     \
    X(cuMemHostRegister, v6050, 0)                                                                 \
    X(cuMemHostUnregister, v4000, 0)                                                               \
    X(cuMemHostGetDevicePointer, v3020, 0)                                                         \
    X(cuStreamCreate, v2000, 1)                                                                    \
    X(cuStreamDestroy, v4000, 1)                                                                   \
    X(cuStreamSynchronize, v2000, 1)                                                               \
    X(cuStreamWaitEvent, v3020, 1)                                                                 \
    X(cuStreamQuery, v2000, 1)                                                                     \
    X(cuStreamIsCapturing, v10000, 0)                                                              \
    X(cuThreadExchangeStreamCaptureMode, v10010, 0)                                                \
    X(cuStreamGetCtx, v9020, 0)                                                                    \
    X(cuEventCreate, v2000, 1)                                                                     \
    X(cuEventRecord, v2000, 1)                                                                     \
    X(cuEventQuery, v2000, 1)                                                                      \
    X(cuEventSynchronize, v2000, 1)                                                                \
    X(cuEventDestroy, v4000, 1)                                                                    \
    X(cuMemsetD8, v3020, 1)                                                                        \
    X(cuMemsetD8Async, v3020, 1)                                                                   \
    X(cuMemcpy, v4000, 0)                                                                          \
    X(cuMemcpyAsync, v4000, 0)                                                                     \
    X(cuGetErrorString, v6000, 1)                                                                  \
    X(cuGetErrorName, v6000, 1)

#define GP_DRIVER_ABI 12000

typedef struct gp_driver {
    void *lib;      /* dlopen handle, kept for the life of the process */
    char path[256]; /* what was loaded */
    int version;    /* cuDriverGetVersion */
#define GP_DRIVER_FIELD(name, ver, req) PFN_##name##_##ver name;
    GP_DRIVER_ENTRIES(GP_DRIVER_FIELD)
#undef GP_DRIVER_FIELD
} gp_driver;

/* Per-pool counts of driver calls, by gpool_driver_call. */
typedef struct gp_drv_counters {
    _Atomic uint64_t n[GPOOL_DRV_COUNT];
} gp_drv_counters;

/* The counters of this thread's last counted driver call: gp_cu_fail counts the
 * cuGetErrorName/cuGetErrorString calls that describe its failure there. */
extern _Thread_local gp_drv_counters *gp_drv_last;

/* Count one driver call of `kind` in counters c, then evaluate the call. */
#define GP_DRV(c, kind, call)                                                                      \
    (gp_drv_last = (c), atomic_fetch_add_explicit(&(c)->n[kind], 1, memory_order_relaxed), (call))

/* The process-wide driver table, loaded and cuInit-ed on first success. Thread-safe. On
 * failure returns GPOOL_ERR_NO_DRIVER (message names the file and missing symbol) or
 * GPOOL_ERR_DRIVER, and a later call tries again. */
gpool_status gp_driver_get(const gp_driver **out);

/* Name and description of a CUresult, never NULL, even with no driver loaded. */
const char *gp_cu_name(CUresult r);

/* Set the thread's error from a failed driver call: "<what>: CUDA_ERROR_X (n): text".
 * Returns GPOOL_ERR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, GPOOL_ERR_DRIVER otherwise. */
gpool_status gp_cu_fail(CUresult r, const char *what);

/* Make ctx current on this thread for a batch of driver calls (pushing it only when another
 * context is current); *pushed says whether gp_ctx_leave must pop it. */
void gp_ctx_enter(const gp_driver *d, CUcontext ctx, gp_drv_counters *c, int *pushed);
void gp_ctx_leave(const gp_driver *d, gp_drv_counters *c, int pushed);

/* The device a pool works on, as its backends see it: the driver table, the device, its
 * primary context and the pool's driver-call counters. One per pool (gpool_t.dc), made when
 * the pool opens its device; backends (vidmem.c, sysmem_*.c) get it and nothing else. */
typedef struct gp_devctx {
    const gp_driver *drv;
    CUdevice dev;
    CUcontext ctx;
    gp_drv_counters *cnt;
} gp_devctx;

/* gp_ctx_enter / gp_ctx_leave on dc's context, at a backend's entry points. */
static inline void gp_dc_enter(const gp_devctx *dc, int *pushed)
{
    gp_ctx_enter(dc->drv, dc->ctx, dc->cnt, pushed);
}
static inline void gp_dc_leave(const gp_devctx *dc, int pushed)
{
    gp_ctx_leave(dc->drv, dc->cnt, pushed);
}

/* lhs = expr, evaluated with dc's context current (entered and left around it). */
#define GP_DC_RUN(dc, lhs, expr)                                                                   \
    do {                                                                                           \
        int gp_dc_pushed_;                                                                         \
        gp_dc_enter((dc), &gp_dc_pushed_);                                                         \
        lhs = (expr);                                                                              \
        gp_dc_leave((dc), gp_dc_pushed_);                                                          \
    } while (0)

#endif
