/* Host memory kinds (pinned, mapped) and the placement policy, as the pool sees them.
 * sysmem.c owns host arenas (and the small-block jemalloc arena); policy.c owns the table
 * that turns a usage hint into a kind. All functions are thread-safe. */
#ifndef GPOOL_SYSMEM_H
#define GPOOL_SYSMEM_H

#include "gpool.h"

typedef struct gp_sysmem gp_sysmem; /* per-pool host state (gpool_t.sys), made on first use */

/* Internal flag in gpool_alloc_params.flags: AUTO fell back from vidmem to this kind. */
#define GP_ALLOC_FELL_BACK (1u << 31)

/* The kind an AUTO request gets: one table lookup by usage hint (and size). Never AUTO. */
gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size);

/* Allocate size bytes of host kind (GPOOL_MEM_HOST_PINNED or GPOOL_MEM_HOST_MAPPED).
 * *out is the host address for pinned and the device address for mapped memory. */
gpool_status gp_sysmem_alloc(gpool_t *pool, gpool_mem_kind kind, size_t size,
                             const gpool_alloc_params *params, void **out);

/* Free ptr if it is a host block of this pool: *owned = 1 then, and the status says how it
 * went; *owned = 0 (GPOOL_OK) when ptr is not host memory of this pool. */
gpool_status gp_sysmem_free(gpool_t *pool, void *ptr, int *owned);

/* Describe the live host block containing ptr: *owned as above. */
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

#endif
