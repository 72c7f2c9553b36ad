/* Host memory kinds (pinned, mapped) and the placement policy, as the pool sees them.
 * sysmem.c owns host arenas (and the small-block slab allocator); policy.c owns the table
 * that turns a usage hint into a kind. All functions are thread-safe. */
#ifndef GPOOL_SYSMEM_H
#define GPOOL_SYSMEM_H

#include "gpool.h"

typedef struct gp_sysmem gp_sysmem; /* per-pool host state (gpool_t.sys), made on first use */

/* Internal flag in gpool_alloc_params.flags: AUTO fell back from vidmem to this kind. */
#define GP_ALLOC_FELL_BACK (1u << 31)

/* The kind an AUTO request gets: one table lookup by usage hint (and size). Never AUTO. */
gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size);

/* The kind an AUTO request moves to when kind's budget is spent; GPOOL_MEM_AUTO for none.
 * (DEVICE -> HOST_MAPPED applies only with GPOOL_ALLOC_ALLOW_FALLBACK, in pool.c.) */
gpool_mem_kind gp_policy_spill(gpool_mem_kind kind);

/* One line on why the table maps usage to its kind (for docs and messages). */
const char *gp_policy_reason(gpool_usage usage);

/* Host blocks below this size come from the slab allocator (sysmem_small.c); larger ones from the
 * page arena. */
#define GP_SYS_SMALL_MAX ((size_t)64 << 10)

/* Allocate size bytes of host kind (GPOOL_MEM_HOST_PINNED or GPOOL_MEM_HOST_MAPPED).
 * *out is the host address for pinned and the device address for mapped memory. */
gpool_status gp_sysmem_alloc(gpool_t *pool, gpool_mem_kind kind, size_t size,
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
