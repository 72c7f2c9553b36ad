/* preload_others.c — memory for others: allocations gpool does not serve (cuMemCreate, as NCCL
 * and PyTorch's expandable segments use it; cuMemAllocManaged; cuMemAllocPitch; cuMemAlloc
 * passed through; and their runtime forms, cudaMallocManaged and cudaMallocPitch, which reach
 * the driver through cuGetProcAddress) compete with gpool's cache for the same device memory.
 * cudaMemGetInfo counts that cache as free (gpp_mem_get_info), so it has to be: when such an
 * allocation fails with CUDA_ERROR_OUT_OF_MEMORY, the cudaFree batches are flushed, gpool gives
 * the device's cached memory back to the driver (gpool_trim, nothing kept) and the call is
 * tried once more; only then does the error reach the program. Cost: nothing on success; on
 * out-of-memory one trim (a context synchronize, the unmaps and releases) and one more call. */
#include "preload.h"

/* Bytes of every kind the pool holds from the driver. */
static uint64_t reserved_bytes(gpool_t *pool)
{
    gpool_stats st = GPOOL_STATS_INIT;
    if (gpool_get_stats(pool, &st) != GPOOL_OK) return 0;
    return st.kind[GPOOL_MEM_AUTO].reserved_bytes;
}

int gpp_give_back(int dev)
{
    /* while a stream captures, the trim's context synchronize is not allowed (it would
     * invalidate the capture): the error stands */
    if (!gpp_enabled() || atomic_load_explicit(&gpp_captures, memory_order_relaxed)) return 0;
    gpool_t *pool = gpp_pool_peek(dev < 0 ? 0 : dev);
    if (!pool) return 0;
    gpp_batch_flush_all(); /* blocks waiting in a batch become cache first */
    uint64_t before = reserved_bytes(pool);
    (void)gpool_trim(pool, 0); /* a failed trim may still have released some pages */
    return reserved_bytes(pool) < before;
}

/* The device whose memory an allocation of prop takes: its location for device memory, the
 * current device otherwise (host-located VMM memory competes with gpool's host cache). */
static int prop_device(const CUmemAllocationProp *prop)
{
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) return prop->location.id;
    return gpp_current_device();
}

CUresult gpp_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemCreate) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuMemCreate(handle, size, prop, flags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && gpp_give_back(prop_device(prop)))
        r = d->cuMemCreate(handle, size, prop, flags);
    return r;
}

CUresult gpp_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemAllocManaged) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuMemAllocManaged(dptr, bytesize, flags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && gpp_give_back(gpp_current_device()))
        r = d->cuMemAllocManaged(dptr, bytesize, flags);
    return r;
}

CUresult gpp_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                unsigned int element_size)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuMemAllocPitch) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuMemAllocPitch(dptr, pitch, width, height, element_size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && gpp_give_back(gpp_current_device()))
        r = d->cuMemAllocPitch(dptr, pitch, width, height, element_size);
    return r;
}

CUresult gpp_real_mem_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuMemAlloc(dptr, bytesize);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && gpp_give_back(gpp_current_device()))
        r = d->cuMemAlloc(dptr, bytesize);
    return r;
}
