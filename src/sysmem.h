/* Host memory kinds (pinned, mapped), as the pool sees them. sysmem.c owns host arenas (and
 * the small-block slab allocator). All functions are thread-safe. */
#ifndef GPOOL_SYSMEM_H
#define GPOOL_SYSMEM_H

#include <stdio.h>

#include "gpool.h"
#include "policy.h"

typedef struct gp_sysmem gp_sysmem; /* per-pool host state (gpool_t.sys), made on first use */

/* Host blocks below this size come from the slab allocator (sysmem_small.c); larger ones from the
 * page arena. */
#define GP_SYS_SMALL_MAX ((size_t)64 << 10)

/* Allocate a block placed on a host kind (GPOOL_MEM_HOST_PINNED or GPOOL_MEM_HOST_MAPPED),
 * moving to the next kind as the policy says when this one cannot serve it. params: the
 * request's usage and stream (the block's tag; NULL: the pool's default stream). *out is the
 * host address for pinned and the device address for mapped memory. */
gpool_status gp_sysmem_alloc(gpool_t *pool, const gp_placement *pl,
                             const gpool_alloc_params *params, void **out);

/* Free ptr if it is a host block of this pool: *owned = 1 then, and the status says how it
 * went. Also *owned = 1 with GPOOL_ERR_INVALID_POINTER (and a message saying which) for a
 * pointer inside this pool's host memory that is not a live block's start (double free,
 * interior pointer) and for page-locked memory the driver knows but this pool did not hand
 * out (another pool's block, cuMemHostAlloc/cuMemHostRegister memory). *owned = 0
 * (GPOOL_OK) for anything else. Host frees are immediate. */
gpool_status gp_sysmem_free(gpool_t *pool, void *ptr, int *owned);

/* Describe the live host block containing ptr (interior pointers too): *owned as above. */
gpool_status gp_sysmem_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                  int *owned);

/* Add host kinds' counters into *s (kind[HOST_PINNED], kind[HOST_MAPPED], totals). */
void gp_sysmem_stats(gpool_t *pool, gpool_stats *s);

/* Give cached host memory back until keep bytes stay cached per kind. */
gpool_status gp_sysmem_trim(gpool_t *pool, size_t keep);

/* JSON members for host kinds (",\"host_pinned\":[...]" ...) for gpool_dump_json. */
void gp_sysmem_dump_json(gpool_t *pool, FILE *f);

/* Free everything at gpool_destroy; adds live host blocks to *live / *bytes. */
void gp_sysmem_destroy(gpool_t *pool, uint64_t *live, uint64_t *bytes);

/* What placement host memory gets: the NUMA node it is bound to (-1: none) and why, in
 * why[0..n). Creates the host state if needed. GPOOL_OK or GPOOL_ERR_OUT_OF_MEMORY. */
gpool_status gp_sysmem_placement(gpool_t *pool, int *node, char *why, size_t n);

/* Tests and diagnostics: 1 when ptr lies in a registered extent of kind's small-block allocator. */
int gp_sysmem_in_small_extent(gpool_t *pool, gpool_mem_kind kind, const void *ptr);
/* The number of kind's small-block allocator, or -1 when there is none yet. */
int gp_sysmem_small_arena(gpool_t *pool, gpool_mem_kind kind);
/* Tests: behave as without unified addressing (mapped blocks get one cuMemHostAlloc each
 * and a device address kept apart from the host address). Before the first host block. */
gpool_status gp_sysmem_force_no_uva(gpool_t *pool);

#endif
