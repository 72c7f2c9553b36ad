/* preload_query.c — pointer queries on gpool's blocks: cuMemGetAddressRange,
 * cuPointerGetAttribute and cuPointerGetAttributes (and so the runtime's
 * cudaPointerGetAttributes, which reaches the driver through them).
 *
 * A gpool block is part of a larger driver allocation (a VMM range of pages, a pinned chunk), so
 * the driver's answer for it describes that allocation: other live blocks included, and for a
 * block spanning pages, a different base at each end. NCCL's buffer registration, UCX and MPI
 * build on these queries, and with cudaMalloc memory the answer is the allocation the program
 * got. So for an address inside a gpool block (its first requested_size bytes):
 *   cuMemGetAddressRange, RANGE_START_ADDR, RANGE_SIZE  the block's address and the size the
 *       program asked for, in the address space of the pointer asked about (the device or the
 *       host address of a mapped host block);
 *   MEMORY_TYPE, DEVICE_ORDINAL  the block's kind (device / host) and the pool's device;
 *   device blocks also: CONTEXT the device's primary context (where cudaMalloc memory lives),
 *       DEVICE_POINTER the address itself, HOST_POINTER none (CUDA_ERROR_INVALID_VALUE from
 *       cuPointerGetAttribute, NULL from cuPointerGetAttributes), IS_MANAGED 0,
 *       IS_LEGACY_CUDA_IPC_CAPABLE 1 when cudaIpcGetMemHandle takes the block (GPOOL_CONF
 *       ipc=1: the pools' pages are exportable), else 0.
 * An address in a block's rounding tail (past the requested size) belongs to no allocation the
 * program made: the driver's answer for such an address (CUDA_ERROR_NOT_FOUND /
 * CUDA_ERROR_INVALID_VALUE, zeros from cuPointerGetAttributes). Every other attribute, every
 * pointer gpool does not hold, and every call while the interposer is off get the real
 * driver's answer unchanged. Cost: one block lookup per pool (gpool_get_block_desc), no driver
 * call beyond the real query. */
#include <stdint.h>
#include <string.h>

#include "ipc.h"
#include "kind.h"
#include "kind_host.h"
#include "preload.h"

/* What gpool knows about the address asked about. */
struct block_view {
    int past_end;   /* in gpool's memory, but in no allocation of the program: past the bytes
                       it asked for, in a block it freed (waiting in a cudaFree batch or back in
                       the cache), or in memory gpool holds for no block */
    uintptr_t key;  /* the block's id key (preload_bufid.c): its device address, else host */
    int device_mem; /* a device block (else a host block) */
    int dev;        /* the pool's device */
    uintptr_t base; /* the block's start, in the address space of the pointer */
    size_t size;    /* the size the program asked for */
};

/* Whether a kind of pool holds p in its memory (*d: the live block there, if any): 1 with a
 * live block, 0 when p is in the kind's memory but in no live block (a freed block, cached
 * memory), -1 when no kind of the pool holds p. The kinds' own lookup (src/kinds/kind.h): the
 * public gpool_get_block_desc answers INVALID_POINTER for both of the last two. */
static int pool_lookup(gpool_t *pool, const void *p, gpool_block_desc *d)
{
    for (int i = 0; i < GP_KIND_COUNT; i++) {
        int owned = 0;
        gpool_status st = gp_kinds[i]->block_info(pool, p, d, &owned);
        if (owned) return st == GPOOL_OK;
    }
    return -1;
}

/* 1 when p lies inside gpool's memory (v filled; v->past_end: in no live allocation), else 0. */
static int block_at(CUdeviceptr dptr, struct block_view *v)
{
    if (!dptr || !gpp_enabled()) return 0;
    uintptr_t p = (uintptr_t)dptr;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        int live = pool ? pool_lookup(pool, (const void *)p, &d) : -1;
        uintptr_t ibase;
        size_t isize;
        if (live < 0 && pool && gp_ipc_imported_range(pool, p, &ibase, &isize)) {
            /* a block opened with cudaIpcOpenMemHandle: the exporter's allocation, as CUDA
             * answers for IPC memory (not the span of pages mapped to reach it) */
            memset(v, 0, sizeof *v);
            v->base = ibase;
            v->size = isize;
            v->key = ibase;
            v->device_mem = 1;
            v->dev = dev;
            return 1;
        }
        if (live < 0) continue;
        if (!live) { /* freed memory: what the driver answers for an address no one holds */
            memset(v, 0, sizeof *v);
            v->past_end = 1;
            return 1;
        }
        uintptr_t host = (uintptr_t)d.host_ptr, devp = (uintptr_t)d.device_ptr;
        /* a mapped host block has two addresses: the range is in the one asked about */
        v->base = host && p - host < d.size ? host : devp;
        v->size = d.requested_size;
        v->key = devp ? devp : host;
        /* freed by the program, still waiting in a cudaFree batch: no allocation either */
        v->past_end = p - v->base >= d.requested_size || gpp_pending_has((void *)devp) ||
                      (host && gpp_pending_has((void *)host));
        v->device_mem = d.kind == GPOOL_MEM_DEVICE;
        v->dev = d.device;
        return 1;
    }
    return 0;
}

/* The answer for attribute a of the gpool block v at p: CUDA_SUCCESS or an error with *data
 * written, or -1: the real driver's answer stands. */
static int block_attribute(void *data, CUpointer_attribute a, const struct block_view *v,
                           CUdeviceptr p)
{
    if (v->past_end) return -1; /* handled by the callers */
    switch (a) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)v->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = v->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = v->device_mem ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = v->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: /* the block's own, not its page's */
        return gpp_buffer_id(v->key, (unsigned long long *)data) == 0 ? CUDA_SUCCESS : -1;
    default:
        break;
    }
    if (!v->device_mem) return -1; /* the driver knows pinned memory's addresses and context */
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext ctx = gpp_device_context(v->dev);
        if (!ctx) return -1;
        *(CUcontext *)data = ctx;
        return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = p;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: /* device memory: the host cannot reach it */
        *(void **)data = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: /* "suitable for cudaIpcGetMemHandle" */
        *(int *)data = gpp_pools_exportable();
        return CUDA_SUCCESS;
    default:
        return -1;
    }
}

/* cuPointerGetAttributes' answer for an address no allocation holds: zeros (its reference:
 * "the attributes are assigned default NULL values"), for the attributes this file answers. */
static void zero_attribute(void *data, CUpointer_attribute a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = NULL;
        break;
    default:
        break;
    }
}

CUresult gpp_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemGetAddressRange) return CUDA_ERROR_NOT_INITIALIZED;
    struct block_view v;
    if (!block_at(dptr, &v)) return d->cuMemGetAddressRange(pbase, psize, dptr);
    if (v.past_end) return CUDA_ERROR_NOT_FOUND; /* no allocation of the program holds it */
    if (pbase) *pbase = (CUdeviceptr)v.base;
    if (psize) *psize = v.size;
    return CUDA_SUCCESS;
}

CUresult gpp_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuPointerGetAttribute) return CUDA_ERROR_NOT_INITIALIZED;
    struct block_view v;
    if (!data || !block_at(ptr, &v)) return d->cuPointerGetAttribute(data, attribute, ptr);
    if (v.past_end) return CUDA_ERROR_INVALID_VALUE; /* as for a pointer the driver does not know */
    int r = block_attribute(data, attribute, &v, ptr);
    return r >= 0 ? (CUresult)r : d->cuPointerGetAttribute(data, attribute, ptr);
}

CUresult gpp_cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes, void **data,
                                    CUdeviceptr ptr)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuPointerGetAttributes) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuPointerGetAttributes(n, attributes, data, ptr);
    struct block_view v;
    if (r != CUDA_SUCCESS || !block_at(ptr, &v)) return r;
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) continue;
        if (v.past_end)
            zero_attribute(data[i], attributes[i]);
        else
            block_attribute(data[i], attributes[i], &v, ptr); /* HOST_POINTER: NULL, no error */
    }
    return CUDA_SUCCESS;
}

/* cuda.h, cuMemHostGetDevicePointer: the device address of pinned memory mapped into the
 * device; Flags "must be set to 0". An address in gpool's memory that no live block holds (a
 * freed block, whose pages gpool still keeps mapped) gets the answer for memory no one holds,
 * CUDA_ERROR_INVALID_VALUE, and so does a block that is not mapped; other addresses go to the
 * driver. */
CUresult gpp_cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemHostGetDevicePointer) return CUDA_ERROR_NOT_INITIALIZED;
    struct block_view v;
    if (!p || !block_at((CUdeviceptr)(uintptr_t)p, &v))
        return d->cuMemHostGetDevicePointer(pdptr, p, flags);
    if (!pdptr || flags || v.past_end || v.device_mem) return CUDA_ERROR_INVALID_VALUE;
    void *dev = NULL;
    if (gpp_host_device_pointer(p, &dev) <= 0) return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)dev;
    return CUDA_SUCCESS;
}

/* cuda.h, cuMemHostUnregister: "Unmaps the memory range whose base address is specified by p,
 * and makes it pageable again"; a pointer cuMemHostRegister did not register answers
 * CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED. gpool's pinned pages are registered by gpool itself,
 * in extents whose base address may also be a block's: the program never registered them, and
 * passing the call on would unpin the whole extent under gpool's other blocks. Any address in
 * gpool's memory (a live block or a freed one) gets the driver's answer for memory the program
 * did not register; other addresses go to the driver. */
CUresult gpp_cuMemHostUnregister(void *p)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemHostUnregister) return CUDA_ERROR_NOT_INITIALIZED;
    for (int dev = 0; p && gpp_enabled() && dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        if (pool && gp_sysmem_holds(pool, p)) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    return d->cuMemHostUnregister(p);
}
