/* Device memory through VMM: address space from cuMemAddressReserve, physical pages from
 * cuMemCreate, mapped with cuMemMap + cuMemSetAccess. Unmapped pages are kept in a free list
 * and remapped wherever the arena needs them, so physical memory is never stranded. */
#ifndef GPOOL_VIDMEM_H
#define GPOOL_VIDMEM_H

#include "backend.h"
#include "driver.h"

extern const gp_backend_ops gp_vidmem_ops;

/* Growth (cold start): while the pool holds no cached single pages and was never asked to
 * give memory back, a run of pages is backed by handles of several pages (the pages the pool
 * holds, clamped to GP_VIDMEM_GROW_MIN..GP_VIDMEM_GROW_MAX), a short run extended over the
 * unbacked pages after it, as long as such handles hold at most 1/GP_VIDMEM_GROW_SHARE of
 * the device's pages. A handle goes back only whole, so growth can pin up to that many
 * pages; on a device smaller than GP_VIDMEM_GROW_MIN_DEVICE there is no growth (a small
 * device is where pinned pages would cost the most). Growth handles and the placement's
 * chunks are both made only while the driver has headroom: after the run, twice what the
 * pool holds still free; else single pages. */
#define GP_VIDMEM_GROW_SHARE      4
#define GP_VIDMEM_GROW_MIN        4
#define GP_VIDMEM_GROW_MAX        32
#define GP_VIDMEM_GROW_MIN_DEVICE ((size_t)4 << 30)

/* Create the backend's context for device ordinal `device` (granularity queried here).
 * peer_access (gpool_peer_access) decides which devices each mapping is made accessible to.
 * Errors: GPOOL_ERR_UNSUPPORTED (no VMM, or peer_access=all and a device cannot reach this
 * one), GPOOL_ERR_DRIVER, GPOOL_ERR_OUT_OF_MEMORY. */
gpool_status gp_vidmem_create(const gp_devctx *dc, int peer_access, void **out);
/* Change peer_access at run time: every mapping made so far gets the new access list (devices
 * left out are revoked), one cuMemSetAccess per mapped handle, and later mappings get it too.
 * Caller holds the device arena's lock. On failure the old access is put back. */
gpool_status gp_vidmem_set_peer_access(void *ctx, int peer_access);
size_t gp_vidmem_granularity(void *ctx);
/* gpool_config.ipc: pages created from now on are exportable as POSIX file descriptors
 * (requestedHandleTypes). GPOOL_ERR_UNSUPPORTED when the device or driver cannot. */
gpool_status gp_vidmem_set_ipc(void *ctx);
/* One physical handle and where it is mapped (src/ipc/ipc_export.c). */
typedef struct gp_vidmem_piece {
    CUmemGenericAllocationHandle h;
    uintptr_t addr;
    size_t size;
} gp_vidmem_piece;
/* The mapped handles that overlap [addr, addr + size), in no order: up to max into out; returns
 * how many there are. Caller holds the device arena's lock. O(handles). */
size_t gp_vidmem_pieces(void *ctx, uintptr_t addr, size_t size, gp_vidmem_piece *out, size_t max);
/* 1 when [addr, addr + size) overlaps an alias (a handle mapped a second time for a block
 * placed across pages under pressure: arena_span.c); such a block cannot be exported. Caller
 * holds the device arena's lock. */
int gp_vidmem_aliased(void *ctx, uintptr_t addr, size_t size);
/* Turn growth (above) off (on = 0) or back on; a pool with a release threshold turns it off,
 * since memory it pins could not go back. */
void gp_vidmem_set_growth(void *ctx, int on);
uint64_t gp_vidmem_remaps(void *ctx);
/* Zero size bytes at p, queued on stream (synchronous cuMemsetD8 would run on the legacy
 * stream, which a non-blocking stream is not ordered after). */
gpool_status gp_vidmem_zero_async(void *ctx, void *p, size_t size, CUstream stream);
/* cuMemGetInfo in the device's context. */
gpool_status gp_vidmem_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes);

#endif
