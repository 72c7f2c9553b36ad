/* preload_ipc.c — CUDA IPC on gpool's blocks: cudaIpcGetMemHandle / cudaIpcOpenMemHandle /
 * cudaIpcCloseMemHandle and the driver's cuIpcGetMemHandle / cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle (docs/ipc.md).
 *
 * Legacy CUDA IPC does not take VMM memory, so for a pointer inside a gpool device block the
 * 64-byte handle carries a gpool_ipc_handle instead (include/gpool.h: its magic tells it from
 * the driver's), made by gpool_export_block on the block's start: as with cudaMalloc memory,
 * the handle is the whole allocation's and opening it gives the allocation's base (the base
 * cuMemGetAddressRange answers, preload_query.c; PyTorch shares a storage's base and adds its
 * offset). Opening maps it with gpool_import_block into the current device's pool; closing
 * unmaps it. The exporting pool needs GPOOL_CONF ipc=1 (its pages are created exportable);
 * without it cudaIpcGetMemHandle on a gpool block answers cudaErrorNotSupported and says so
 * once on stderr. Pointers gpool did not hand out, handles that are not gpool's and every
 * call while the interposer is off go to the real runtime / driver unchanged. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "ipc.h"
#include "preload.h"

#define GPP_EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(gpool_ipc_handle) == CUDA_IPC_HANDLE_SIZE, "a gpool handle fills a CUDA one");

/* The pool holding device block p (its start in *base), or NULL. */
static gpool_t *owner_of(uintptr_t p, uintptr_t *base)
{
    if (!p || !gpp_enabled()) return NULL;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        if (!pool || gpool_get_block_desc(pool, (const void *)p, &d) != GPOOL_OK) continue;
        if (d.kind != GPOOL_MEM_DEVICE) return NULL;
        *base = (uintptr_t)d.device_ptr;
        return pool;
    }
    return NULL;
}

/* 1 when the 64 bytes are a gpool handle (its magic), copied into *h. */
static int gpool_handle(const void *bytes, gpool_ipc_handle *h)
{
    memcpy(h, bytes, sizeof *h);
    return h->magic == GPOOL_IPC_MAGIC;
}

/* Export the block holding p into out (64 bytes): GPOOL_OK, or GPOOL_ERR_INVALID_POINTER when
 * gpool does not hold p (pass through), or the export's error. */
static gpool_status get_handle(void *out, uintptr_t p)
{
    uintptr_t base = 0;
    gpool_t *pool = owner_of(p, &base);
    if (!pool) return GPOOL_ERR_INVALID_POINTER;
    gpool_ipc_handle h;
    gpool_status st = gpool_export_block(pool, (const void *)base, &h);
    if (st == GPOOL_ERR_INVALID_POINTER) st = GPOOL_ERR_INVALID_ARG; /* ours: do not pass */
    if (st == GPOOL_ERR_UNSUPPORTED)
        gpp_notice_once(GPP_NOTICE_IPC,
                        "IPC handle of a gpool block refused: the pool's pages are not "
                        "exportable; set GPOOL_CONF=ipc=1 in the exporting process");
    if (st == GPOOL_OK) memcpy(out, &h, sizeof h);
    return st;
}

static gpool_status open_handle(const gpool_ipc_handle *h, void **out)
{
    int dev = gpp_current_device();
    gpool_t *pool = gpp_pool(dev < 0 ? 0 : dev);
    if (!pool) return GPOOL_ERR_NO_DRIVER;
    return gpool_import_block(pool, h, out);
}

/* GPOOL_ERR_INVALID_POINTER: not a gpool import (pass through). */
static gpool_status close_handle(void *p)
{
    if (!p || !gpp_enabled()) return GPOOL_ERR_INVALID_POINTER;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        if (!pool) continue;
        uintptr_t base = 0;
        size_t size = 0;
        int was = gp_ipc_imported_range(pool, (uintptr_t)p, &base, &size);
        gpool_status st = gpool_close_imported(pool, p);
        /* the last close unmaps it: its BUFFER_ID dies with it (preload_bufid.c), so an import
         * that lands at the same address later gets a new one */
        uintptr_t b2;
        size_t s2;
        if (st == GPOOL_OK && was && !gp_ipc_imported_range(pool, (uintptr_t)p, &b2, &s2))
            gpp_buffer_id_drop(base);
        if (st != GPOOL_ERR_INVALID_POINTER) return st;
    }
    return GPOOL_ERR_INVALID_POINTER;
}

static cudaError_t runtime_code(gpool_status st)
{
    switch (st) {
    case GPOOL_OK:
        return cudaSuccess;
    case GPOOL_ERR_INVALID_ARG:
        return cudaErrorInvalidValue;
    case GPOOL_ERR_INVALID_POINTER: /* stale: the exporter or its block is gone */
        return cudaErrorInvalidResourceHandle;
    case GPOOL_ERR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case GPOOL_ERR_UNSUPPORTED:
        return cudaErrorNotSupported;
    default:
        return cudaErrorUnknown;
    }
}

static CUresult driver_code(gpool_status st)
{
    switch (st) {
    case GPOOL_OK:
        return CUDA_SUCCESS;
    case GPOOL_ERR_INVALID_ARG:
        return CUDA_ERROR_INVALID_VALUE;
    case GPOOL_ERR_INVALID_POINTER:
        return CUDA_ERROR_INVALID_HANDLE;
    case GPOOL_ERR_OUT_OF_MEMORY:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case GPOOL_ERR_UNSUPPORTED:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_UNKNOWN;
    }
}

/* ---------- runtime ---------- */

typedef cudaError_t (*rt_get_fn)(cudaIpcMemHandle_t *, void *);
typedef cudaError_t (*rt_open_fn)(void **, cudaIpcMemHandle_t, unsigned int);
typedef cudaError_t (*rt_close_fn)(void *);

static void *real_rt(const char *name, void **cache)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!f && (f = gpp_real_runtime(name))) __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    return f;
}

GPP_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    static void *real;
    if (!gpp_in_forked_child() && handle) {
        gpool_status st = get_handle(handle, (uintptr_t)devPtr);
        if (st != GPOOL_ERR_INVALID_POINTER) return runtime_code(st);
    }
    rt_get_fn f;
    *(void **)&f = real_rt("cudaIpcGetMemHandle", &real);
    return f ? f(handle, devPtr) : cudaErrorInitializationError;
}

GPP_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                            unsigned int flags)
{
    static void *real;
    gpool_ipc_handle h;
    if (!gpp_in_forked_child() && gpool_handle(&handle, &h)) {
        /* flags "must be specified as cudaIpcMemLazyEnablePeerAccess" (cuda_runtime_api.h,
         * cudaIpcOpenMemHandle); 0 is taken as well, as programs pass it */
        if (!devPtr || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess))
            return cudaErrorInvalidValue;
        return runtime_code(open_handle(&h, devPtr));
    }
    rt_open_fn f;
    *(void **)&f = real_rt("cudaIpcOpenMemHandle", &real);
    return f ? f(devPtr, handle, flags) : cudaErrorInitializationError;
}

GPP_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    static void *real;
    if (!gpp_in_forked_child()) {
        gpool_status st = close_handle(devPtr);
        if (st != GPOOL_ERR_INVALID_POINTER) return runtime_code(st);
    }
    rt_close_fn f;
    *(void **)&f = real_rt("cudaIpcCloseMemHandle", &real);
    return f ? f(devPtr) : cudaErrorInitializationError;
}

/* ---------- driver ---------- */

/* The real driver's entry point `name`, looked up once (NULL when it has none). */
static void *real_drv(const char *name, int version, void **cache)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f) return f;
    const gpp_real_driver *d = gpp_driver();
    CUdriverProcAddressQueryResult q;
    if (!d || d->cuGetProcAddress_v2(name, &f, version, 0, &q) != CUDA_SUCCESS) return NULL;
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    return f;
}

CUresult gpp_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    static void *real;
    if (!gpp_in_forked_child() && pHandle) {
        gpool_status st = get_handle(pHandle, (uintptr_t)dptr);
        if (st != GPOOL_ERR_INVALID_POINTER) return driver_code(st);
    }
    PFN_cuIpcGetMemHandle_v4010 f;
    *(void **)&f = real_drv("cuIpcGetMemHandle", 4010, &real);
    return f ? f(pHandle, dptr) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult gpp_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    static void *real;
    gpool_ipc_handle h;
    if (!gpp_in_forked_child() && gpool_handle(&handle, &h)) {
        /* Flags "must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS" (cuda.h) */
        if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
            return CUDA_ERROR_INVALID_VALUE;
        void *p = NULL;
        gpool_status st = open_handle(&h, &p);
        if (st == GPOOL_OK) *pdptr = (CUdeviceptr)(uintptr_t)p;
        return driver_code(st);
    }
    PFN_cuIpcOpenMemHandle_v11000 f;
    *(void **)&f = real_drv("cuIpcOpenMemHandle", 11000, &real);
    return f ? f(pdptr, handle, flags) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult gpp_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    static void *real;
    if (!gpp_in_forked_child()) {
        gpool_status st = close_handle((void *)(uintptr_t)dptr);
        if (st != GPOOL_ERR_INVALID_POINTER) return driver_code(st);
    }
    PFN_cuIpcCloseMemHandle_v4010 f;
    *(void **)&f = real_drv("cuIpcCloseMemHandle", 4010, &real);
    return f ? f(dptr) : CUDA_ERROR_NOT_INITIALIZED;
}

/* Programs linked with -lcuda call these names: served when the linked libcuda is the driver
 * gpool loaded (preload_direct.c's rule), else the next definition answers. */
#define NEXT(type, name)                                                                           \
    type next_;                                                                                    \
    *(void **)&next_ = gpp_real_dlsym(RTLD_NEXT, name);                                            \
    if (!next_) return CUDA_ERROR_NOT_INITIALIZED

GPP_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    if (gpp_direct_ok()) return gpp_cuIpcGetMemHandle(pHandle, dptr);
    NEXT(PFN_cuIpcGetMemHandle_v4010, "cuIpcGetMemHandle");
    return next_(pHandle, dptr);
}

GPP_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                          unsigned int flags)
{
    if (gpp_direct_ok()) return gpp_cuIpcOpenMemHandle_v2(pdptr, handle, flags);
    NEXT(PFN_cuIpcOpenMemHandle_v11000, "cuIpcOpenMemHandle_v2");
    return next_(pdptr, handle, flags);
}

GPP_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    if (gpp_direct_ok()) return gpp_cuIpcCloseMemHandle(dptr);
    NEXT(PFN_cuIpcCloseMemHandle_v4010, "cuIpcCloseMemHandle");
    return next_(dptr);
}
