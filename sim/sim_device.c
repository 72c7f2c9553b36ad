/* sim_device.c — cuInit, devices and their attributes, primary contexts, the per-thread
 * context stack and cuMemGetInfo. */
#include <stdio.h>
#include <string.h>

#include "sim_internal.h"

/* Primary context of one device. CUcontext values point at these. */
struct CUctx_st {
    int device;
    unsigned refs;
    unsigned flags;
};

static struct CUctx_st sim_primary[GPOOL_SIM_MAX_DEVICES];

#define SIM_CTX_STACK_MAX 32
static _Thread_local CUcontext sim_ctx_stack[SIM_CTX_STACK_MAX];
static _Thread_local int sim_ctx_depth;

static CUresult sim_check_device(CUdevice dev)
{
    return sim_valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static int sim_is_context(CUcontext ctx)
{
    for (int d = 0; d < sim_device_count(); d++)
        if (ctx == &sim_primary[d]) return 1;
    return 0;
}

static CUcontext sim_current(void)
{
    return sim_ctx_depth ? sim_ctx_stack[sim_ctx_depth - 1] : NULL;
}

CUcontext sim_current_context(void)
{
    return sim_current();
}

CUresult sim_context_device(CUcontext ctx, int *dev)
{
    if (!ctx || !sim_is_context(ctx) || ctx->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = ctx->device;
    return CUDA_SUCCESS;
}

CUresult sim_current_device(int *dev)
{
    CUcontext ctx = sim_current();
    if (!ctx || ctx->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = ctx->device;
    return CUDA_SUCCESS;
}

int sim_current_ctx_device(void)
{
    CUcontext ctx = sim_current();
    return ctx && ctx->refs ? ctx->device : -1;
}

CUcontext sim_ctx_handle(int dev)
{
    return &sim_primary[dev];
}

CUresult cuInit(unsigned int flags)
{
    CUresult rc = sim_enter(SIM_cuInit);
    if (rc == CUDA_SUCCESS) {
        if (flags != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (sim_device_count() == 0)
            rc = CUDA_ERROR_NO_DEVICE;
        else {
            if (!sim_is_initialized()) {
                for (int d = 0; d < sim_device_count(); d++)
                    sim_primary[d].device = d;
            }
            sim_set_initialized();
        }
    }
    return sim_leave(rc);
}

CUresult cuDriverGetVersion(int *version)
{
    CUresult rc = sim_enter(SIM_cuDriverGetVersion);
    if (rc == CUDA_SUCCESS) {
        if (!version)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *version = SIM_DRIVER_VERSION;
    }
    return sim_leave(rc);
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult rc = sim_enter(SIM_cuDeviceGetCount);
    if (rc == CUDA_SUCCESS) {
        if (!count)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *count = sim_device_count();
    }
    return sim_leave(rc);
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = sim_enter(SIM_cuDeviceGet);
    if (rc == CUDA_SUCCESS) {
        if (!device)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(ordinal)) == CUDA_SUCCESS)
            *device = ordinal;
    }
    return sim_leave(rc);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDeviceGetName);
    if (rc == CUDA_SUCCESS) {
        if (!name || len <= 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS)
            snprintf(name, (size_t)len, "gpool simulated device");
    }
    return sim_leave(rc);
}

static CUresult sim_device_uuid(enum sim_entry entry, CUuuid *uuid, CUdevice dev)
{
    CUresult rc = sim_enter(entry);
    if (rc == CUDA_SUCCESS) {
        if (!uuid)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS) {
            memcpy(uuid->bytes, "gpoolsim-device", 15);
            uuid->bytes[15] = (char)dev;
        }
    }
    return sim_leave(rc);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return sim_device_uuid(SIM_cuDeviceGetUuid, uuid, dev);
}
SIM_EXPORT CUresult sim_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev)
{
    return sim_device_uuid(SIM_cuDeviceGetUuid, uuid, dev);
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDeviceTotalMem);
    if (rc == CUDA_SUCCESS) {
        if (!bytes)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS)
            *bytes = sim_capacity(dev);
    }
    return sim_leave(rc);
}

static int sim_attribute(CUdevice_attribute attr, int dev, int *value)
{
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
        *value = 1;
        return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
        /* 0 in the host-alias mode: registered memory then has a device pointer of its own
         * (cuda.h, cuMemHostGetDevicePointer) */
        *value = !sim_mode_host_alias();
        return 0;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        /* cuMemCreate takes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (sim_ipc.c) */
        *value = 1;
        return 0;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        *value = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
        *value = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
        *value = -1;
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *value = 0x10 + dev;
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        *value = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = 9;
        return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = 0;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = 132;
        return 0;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        *value = 32;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = 1024;
        return 0;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        *value = 2;
        return 0;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        *value = 50 << 20;
        return 0;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        *value = 5120;
        return 0;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        *value = 1980000;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        *value = 2619000;
        return 0;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        *value = 65536;
        return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        *value = 49152;
        return 0;
    default:
        return -1;
    }
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDeviceGetAttribute);
    if (rc == CUDA_SUCCESS) {
        if (!pi)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS && sim_attribute(attrib, dev, pi))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    return sim_leave(rc);
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDeviceGetPCIBusId);
    if (rc == CUDA_SUCCESS) {
        if (!pciBusId || len <= 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS)
            snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    }
    return sim_leave(rc);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDevicePrimaryCtxRetain);
    if (rc == CUDA_SUCCESS) {
        if (!pctx)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS) {
            sim_primary[dev].refs++;
            *pctx = &sim_primary[dev];
        }
    }
    return sim_leave(rc);
}

static CUresult sim_primary_release(CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDevicePrimaryCtxRelease);
    if (rc == CUDA_SUCCESS && (rc = sim_check_device(dev)) == CUDA_SUCCESS) {
        if (sim_primary[dev].refs == 0)
            rc = CUDA_ERROR_INVALID_CONTEXT;
        else
            sim_primary[dev].refs--;
    }
    return sim_leave(rc);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return sim_primary_release(dev);
}
SIM_EXPORT CUresult sim_cuDevicePrimaryCtxRelease_v1(CUdevice dev)
{
    return sim_primary_release(dev);
}

/* cuda.h, cuDevicePrimaryCtxReset: "Destroy all allocations and reset all state on the
 * primary context ... Explicitly destroys and cleans up all resources associated with the
 * current device in the current process ... Resetting the primary context does not release it,
 * an application that has retained the primary context should explicitly release its usage."
 * Here: the context's queued work completes (held work is forced, as a synchronize would), its
 * events and streams are destroyed, its cuMemAlloc/cuMemAllocManaged/cuMemCreate memory and the
 * pinned host memory allocated in it are freed (an access through such an address afterwards
 * is what an access to freed memory is: CUDA_ERROR_ILLEGAL_ADDRESS or a referee violation). The
 * context handle and its retain count stay: it is usable again at once. Reserved address
 * ranges stay (the process reserved them, not the context). */
static CUresult sim_primary_reset(CUdevice dev)
{
    CUresult rc = sim_enter(SIM_cuDevicePrimaryCtxReset);
    if (rc == CUDA_SUCCESS && (rc = sim_check_device(dev)) == CUDA_SUCCESS) {
        sim_stream_reset(dev);
        sim_legacy_reset(dev);
        sim_vmm_reset(dev);
        sim_host_reset(dev);
    }
    return sim_leave(rc);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return sim_primary_reset(dev);
}
SIM_EXPORT CUresult sim_cuDevicePrimaryCtxReset_v1(CUdevice dev)
{
    return sim_primary_reset(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = sim_enter(SIM_cuDevicePrimaryCtxGetState);
    if (rc == CUDA_SUCCESS) {
        if (!flags || !active)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_check_device(dev)) == CUDA_SUCCESS) {
            *flags = sim_primary[dev].flags;
            *active = sim_primary[dev].refs > 0;
        }
    }
    return sim_leave(rc);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult rc = sim_enter(SIM_cuCtxGetCurrent);
    if (rc == CUDA_SUCCESS) {
        if (!pctx)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *pctx = sim_current();
    }
    return sim_leave(rc);
}

static CUresult sim_check_context(CUcontext ctx)
{
    if (!sim_is_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    return ctx->refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = sim_enter(SIM_cuCtxSetCurrent);
    if (rc == CUDA_SUCCESS) {
        if (!ctx) {
            if (sim_ctx_depth) sim_ctx_depth--;
        } else if ((rc = sim_check_context(ctx)) == CUDA_SUCCESS) {
            if (sim_ctx_depth == 0) sim_ctx_depth = 1;
            sim_ctx_stack[sim_ctx_depth - 1] = ctx;
        }
    }
    return sim_leave(rc);
}

static CUresult sim_ctx_push(CUcontext ctx)
{
    CUresult rc = sim_enter(SIM_cuCtxPushCurrent);
    if (rc == CUDA_SUCCESS && (rc = sim_check_context(ctx)) == CUDA_SUCCESS) {
        if (sim_ctx_depth == SIM_CTX_STACK_MAX)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            sim_ctx_stack[sim_ctx_depth++] = ctx;
    }
    return sim_leave(rc);
}

static CUresult sim_ctx_pop(CUcontext *pctx)
{
    CUresult rc = sim_enter(SIM_cuCtxPopCurrent);
    if (rc == CUDA_SUCCESS) {
        if (sim_ctx_depth == 0)
            rc = CUDA_ERROR_INVALID_CONTEXT;
        else {
            CUcontext ctx = sim_ctx_stack[--sim_ctx_depth];
            if (pctx) *pctx = ctx;
        }
    }
    return sim_leave(rc);
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return sim_ctx_push(ctx);
}
CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return sim_ctx_pop(pctx);
}
SIM_EXPORT CUresult sim_cuCtxPushCurrent_v1(CUcontext ctx)
{
    return sim_ctx_push(ctx);
}
SIM_EXPORT CUresult sim_cuCtxPopCurrent_v1(CUcontext *pctx)
{
    return sim_ctx_pop(pctx);
}

static CUresult sim_ctx_get_device(CUdevice *device, CUcontext ctx)
{
    CUresult rc = sim_enter(SIM_cuCtxGetDevice);
    if (rc == CUDA_SUCCESS) {
        if (!device)
            rc = CUDA_ERROR_INVALID_VALUE;
        else {
            if (!ctx) ctx = sim_current();
            if (!ctx)
                rc = CUDA_ERROR_INVALID_CONTEXT;
            else if ((rc = sim_check_context(ctx)) == CUDA_SUCCESS)
                *device = ctx->device;
        }
    }
    return sim_leave(rc);
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    return sim_ctx_get_device(device, NULL);
}
CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    return sim_ctx_get_device(device, ctx);
}

static CUresult sim_ctx_sync(CUcontext ctx)
{
    CUresult rc = sim_enter(SIM_cuCtxSynchronize);
    if (rc == CUDA_SUCCESS) {
        if (!ctx) ctx = sim_current();
        if (!ctx)
            rc = CUDA_ERROR_INVALID_CONTEXT;
        else if ((rc = sim_check_context(ctx)) == CUDA_SUCCESS &&
                 (rc = sim_capture_unsafe_call()) == CUDA_SUCCESS &&
                 sim_ctx_streams_sync(ctx->device))
            sim_count_forced_sync(); /* only this context's streams (see sim_stream.c) */
    }
    return sim_leave(rc);
}

CUresult cuCtxSynchronize(void)
{
    return sim_ctx_sync(NULL);
}
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    return sim_ctx_sync(ctx);
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    CUresult rc = sim_enter(SIM_cuMemGetInfo);
    int dev = 0;
    if (rc == CUDA_SUCCESS) {
        if (!free_bytes || !total_bytes)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((rc = sim_current_device(&dev)) == CUDA_SUCCESS) {
            size_t cap = sim_capacity(dev), used = sim_device_used(dev);
            *total_bytes = cap;
            *free_bytes = used < cap ? cap - used : 0;
        }
    }
    return sim_leave(rc);
}
