/* Device memory through VMM: address space from cuMemAddressReserve, physical pages from
 * cuMemCreate, mapped with cuMemMap + cuMemSetAccess. Unmapped pages are kept in a free list
 * and remapped wherever the arena needs them, so physical memory is never stranded. */
#ifndef GPOOL_VIDMEM_H
#define GPOOL_VIDMEM_H

#include "backend.h"
#include "driver.h"

extern const gp_backend_ops gp_vidmem_ops;

/* Growth (cold start): runs of single pages are backed by one handle of several pages while
 * such handles hold at most 1/GP_VIDMEM_GROW_SHARE of the device's pages; each has
 * GP_VIDMEM_GROW_MIN..GP_VIDMEM_GROW_MAX pages (the pages the pool holds, clamped), or the
 * run's length when that is more. */
#define GP_VIDMEM_GROW_SHARE 6
#define GP_VIDMEM_GROW_MIN   4
#define GP_VIDMEM_GROW_MAX   32

/* Create the backend's context for device ordinal `device` (granularity queried here).
 * peer_access (gpool_peer_access) decides which devices each mapping is made accessible to.
 * Errors: GPOOL_ERR_UNSUPPORTED (no VMM, or peer_access=all and a device cannot reach this
 * one), GPOOL_ERR_DRIVER, GPOOL_ERR_OUT_OF_MEMORY. */
gpool_status gp_vidmem_create(const gp_driver *drv, CUdevice dev, CUcontext ctx,
                              gp_drv_counters *cnt, int peer_access, void **out);
/* Change peer_access at run time: every mapping made so far gets the new access list (devices
 * left out are revoked), one cuMemSetAccess per mapped handle, and later mappings get it too.
 * Caller holds the device arena's lock. On failure the old access is put back. */
gpool_status gp_vidmem_set_peer_access(void *ctx, int peer_access);
/* Devices each mapping is made accessible to (the pool's own first). */
size_t gp_vidmem_access_devices(void *ctx, int *devs, size_t max);
size_t gp_vidmem_granularity(void *ctx);
uint64_t gp_vidmem_remaps(void *ctx);

#endif
