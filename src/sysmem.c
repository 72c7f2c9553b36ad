/* Host memory kinds: not built yet — every host request is GPOOL_ERR_UNSUPPORTED. */
#include "sysmem.h"

#include "error.h"

gpool_status gp_sysmem_alloc(gpool_t *pool, gpool_mem_kind kind, size_t size,
                             const gpool_alloc_params *params, void **out)
{
    *out = NULL;
    return gp_fail(GPOOL_ERR_UNSUPPORTED, "host memory kind %d is not available yet", (int)kind);
}

gpool_status gp_sysmem_free(gpool_t *pool, void *ptr, int *owned)
{
    *owned = 0;
    return GPOOL_OK;
}

gpool_status gp_sysmem_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                  int *owned)
{
    *owned = 0;
    return GPOOL_OK;
}

void gp_sysmem_stats(gpool_t *pool, gpool_stats *s) {}
gpool_status gp_sysmem_trim(gpool_t *pool, size_t keep) { return GPOOL_OK; }
void gp_sysmem_dump_json(gpool_t *pool, FILE *f) {}
void gp_sysmem_destroy(gpool_t *pool, uint64_t *live, uint64_t *bytes) {}
