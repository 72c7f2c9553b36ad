/* Host memory kinds (pinned, mapped): kind_host.c owns host arenas (and the small-block slab
 * allocator) and implements gp_host_kind (kind.h). All functions are thread-safe. */
#ifndef GPOOL_KIND_HOST_H
#define GPOOL_KIND_HOST_H

#include <stdio.h>

#include "gpool.h"
#include "policy.h"

typedef struct gp_sysmem gp_sysmem; /* per-pool host state (gpool_t.sys), made on first use */

/* Free ptr if it is a host block of this pool: *owned = 1 then, and the status says how it
 * went. Also *owned = 1 with GPOOL_ERR_INVALID_POINTER (and a message saying which) for a
 * pointer inside this pool's host memory that is not a live block's start (double free,
 * interior pointer) and for page-locked memory the driver knows but this pool did not hand
 * out (another pool's block, cuMemHostAlloc/cuMemHostRegister memory). *owned = 0
 * (GPOOL_OK) for anything else. The block is reused once the work queued before the free on
 * its streams is done (the event clock, host_clock.h); waiting frees are settled in batches,
 * so a free makes no driver call of its own. */
gpool_status gp_sysmem_free(gpool_t *pool, void *ptr, int *owned);

/* gpool_stream_release's part for host blocks: frees waiting on the stream, and those of
 * blocks allocated on it and still live, wait from now on for an event recorded on it now,
 * under the retired tag rtag (host_clock.h, gp_host_clock_retire). No driver call when the
 * host kinds never saw the stream. GPOOL_ERR_DRIVER: neither an event nor a synchronize. */
gpool_status gp_sysmem_stream_release(gpool_t *pool, uintptr_t tag, uintptr_t rtag);

/* Describe the live host block containing ptr (interior pointers too): *owned as above. */
gpool_status gp_sysmem_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                  int *owned);

/* What placement host memory gets: the NUMA node it is bound to (-1: none) and why, in
 * why[0..n). Creates the host state if needed. GPOOL_OK or GPOOL_ERR_OUT_OF_MEMORY. */
gpool_status gp_sysmem_placement(gpool_t *pool, int *node, char *why, size_t n);

/* 1 when ptr lies in this pool's host memory: a live block (interior addresses too), or pages
 * the pool registered and keeps (freed blocks, cache); 0 for anything else, the pinned memory
 * of others included. */
int gp_sysmem_holds(gpool_t *pool, const void *ptr);

/* Tests and diagnostics: 1 when ptr lies in a registered extent of kind's small-block allocator. */
int gp_sysmem_in_small_extent(gpool_t *pool, gpool_mem_kind kind, const void *ptr);
/* The number of kind's small-block allocator, or -1 when there is none yet. */
int gp_sysmem_small_arena(gpool_t *pool, gpool_mem_kind kind);
/* Tests: behave as without unified addressing (mapped blocks get one cuMemHostAlloc each
 * and a device address kept apart from the host address). Before the first host block. */
gpool_status gp_sysmem_force_no_uva(gpool_t *pool);

#endif
