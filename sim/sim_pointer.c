/* sim_pointer.c — cuPointerGetAttribute and cuPointerGetAttributes for the simulator's own
 * memory: VMM mappings (sim_vmm.c), cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged allocations
 * (sim_legacy.c) and pinned or registered host memory (sim_host.c). Each attribute as the
 * driver API reference (cuda.h, cuPointerGetAttribute) documents it:
 *   CONTEXT          the CUcontext it was allocated or registered in (CUcontext). cuMemCreate
 *                    memory belongs to no context: the simulator answers NULL for it.
 *   MEMORY_TYPE      CU_MEMORYTYPE_DEVICE or _HOST (unsigned int); managed memory: DEVICE.
 *   DEVICE_POINTER   the address kernels use (CUdeviceptr).
 *   HOST_POINTER     the address the host uses (void *); CUDA_ERROR_INVALID_VALUE when the
 *                    host cannot reach it (device memory).
 *   IS_MANAGED       boolean (a 32-bit int, as callers pass it).
 *   DEVICE_ORDINAL   int.
 *   RANGE_START_ADDR / RANGE_SIZE  the allocation; for VMM memory the reserved range
 *                    ("the mappable address range ptr references (e.g. from
 *                    cuMemAddressReserve)"), not the mapping (that is cuMemGetAddressRange).
 *   MAPPING_BASE_ADDR / MAPPING_SIZE  the mapping holding ptr.
 *   MAPPED           boolean: ptr lies in a range mapped to a backing allocation.
 *   IS_LEGACY_CUDA_IPC_CAPABLE  boolean: "suitable for cudaIpcGetMemHandle": cuMemAlloc and
 *                    cuMemAllocPitch memory; not VMM, managed, pool (cuMemAllocAsync), host or
 *                    cuIpcOpenMemHandle memory (sim_legacy.c).
 *   BUFFER_ID        unsigned long long, "unique within the process ... Subsequent
 *                    allocations do not reuse IDs": one per allocation, registration and
 *                    cuMemMap mapping.
 * Other attributes are not simulated: CUDA_ERROR_NOT_SUPPORTED. A pointer the driver does not
 * know: cuPointerGetAttribute answers CUDA_ERROR_INVALID_VALUE; cuPointerGetAttributes
 * succeeds with every attribute zero (its reference: "Unlike cuPointerGetAttribute, this
 * function will not return an error when the ptr encountered is not a valid CUDA pointer.
 * Instead, the attributes are assigned default NULL values"). */
#include <string.h>

#include "sim_internal.h"

static unsigned long long sim_buffer_ids;

unsigned long long sim_next_buffer_id(void)
{
    return ++sim_buffer_ids;
}

static int sim_describe(uintptr_t p, struct sim_ptr_info *info)
{
    memset(info, 0, sizeof *info);
    return sim_vmm_describe(p, info) || sim_legacy_describe(p, info) || sim_host_describe(p, info);
}

/* Write attribute a of *info (known: the driver knows the pointer) to data. Lock held. */
static CUresult sim_attribute(void *data, CUpointer_attribute a, const struct sim_ptr_info *info,
                              int known)
{
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = known && !info->vmm ? sim_ctx_handle(info->device) : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = known ? (unsigned)info->memtype : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = (CUdeviceptr)info->devp;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = (void *)info->host;
        return info->host || !known ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = info->managed;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = known ? info->device : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)info->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = info->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)info->map_base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = info->map_size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = info->buffer_id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = known;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = known && info->ipc_capable;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult rc = sim_enter(SIM_cuPointerGetAttribute);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_ptr_info info;
    if (!data || !sim_describe((uintptr_t)ptr, &info)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    return sim_leave(sim_attribute(data, attribute, &info, 1));
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                void **data, CUdeviceptr ptr)
{
    CUresult rc = sim_enter(SIM_cuPointerGetAttributes);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!numAttributes || !attributes || !data) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_ptr_info info;
    int known = sim_describe((uintptr_t)ptr, &info);
    for (unsigned i = 0; i < numAttributes && rc == CUDA_SUCCESS; i++) {
        rc = sim_attribute(data[i], attributes[i], &info, known);
        /* this form answers NULL where cuPointerGetAttribute reports no host address */
        if (rc == CUDA_ERROR_INVALID_VALUE && data[i] &&
            attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
            rc = CUDA_SUCCESS;
    }
    return sim_leave(rc);
}
