/* Device memory through VMM: address space from cuMemAddressReserve, physical pages from
 * cuMemCreate, mapped with cuMemMap + cuMemSetAccess. Unmapped pages are kept in a free list
 * and remapped wherever the arena needs them, so physical memory is never stranded. */
#ifndef GPOOL_VIDMEM_H
#define GPOOL_VIDMEM_H

#include "backend.h"
#include "driver.h"

extern const gp_backend_ops gp_vidmem_ops;

/* Create the backend's context for device ordinal `device` (granularity queried here).
 * Errors: GPOOL_ERR_UNSUPPORTED (no VMM), GPOOL_ERR_DRIVER, GPOOL_ERR_OUT_OF_MEMORY. */
gpool_status gp_vidmem_create(const gp_driver *drv, CUdevice dev, CUcontext ctx,
                              gp_drv_counters *cnt, void **out);
size_t gp_vidmem_granularity(void *ctx);
uint64_t gp_vidmem_remaps(void *ctx);

#endif
