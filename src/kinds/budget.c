/* A kind's budget and name (budget.h): the admission rule every allocation path passes, and
 * the one table of kind names. */
#include "budget.h"

#include <inttypes.h>

#include "error.h"
#include "pool.h"

/* The one table of kind names: in messages, stats and dumps, and in trace files. */
static const struct {
    const char *name, *trace;
} kind_names[GPOOL_MEM_KIND_COUNT] = {
    [GPOOL_MEM_AUTO] = {"auto", ""},
    [GPOOL_MEM_DEVICE] = {"device", "device"},
    [GPOOL_MEM_HOST_PINNED] = {"host_pinned", "pinned"},
    [GPOOL_MEM_HOST_MAPPED] = {"host_mapped", "mapped"},
};

const char *gp_kind_name(gpool_mem_kind kind)
{
    return (unsigned)kind < GPOOL_MEM_KIND_COUNT ? kind_names[kind].name : "unknown";
}

const char *gp_kind_trace_name(gpool_mem_kind kind)
{
    return (unsigned)kind < GPOOL_MEM_KIND_COUNT ? kind_names[kind].trace : "";
}

gpool_status gp_budget_admit(const gpool_t *pool, gpool_mem_kind kind, size_t size, uint64_t in_use,
                             uint64_t charge)
{
    size_t gran = pool->granularity, total = pool->device_total;
    if (kind == GPOOL_MEM_DEVICE && total && size / gran + (size % gran != 0) > total / gran)
        /* no amount of releasing or remapping can help: say so without touching the cache */
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY,
                       "vidmem: cannot allocate %zu bytes: the device has %zu bytes in all (%zu "
                       "pages of %zu bytes); cause: the request can never fit on this device",
                       size, total, total / gran, gran);
    if (gp_budget_admit_count(pool, kind, charge, 1, in_use) == 0)
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY,
                       "%s budget: %zu bytes requested, %" PRIu64 " of the %zu-byte budget in use",
                       gp_kind_name(kind), size, in_use, pool->cfg.budget[kind]);
    return GPOOL_OK;
}

/* The budget rule, for one block (gp_budget_admit) and for a thread cache's refill alike:
 * in_use plus what is charged stays within the kind's budget. */
size_t gp_budget_admit_count(const gpool_t *pool, gpool_mem_kind kind, size_t unit, size_t want,
                             uint64_t in_use)
{
    size_t budget = pool->cfg.budget[kind];
    if (!budget || !unit) return want;
    if (in_use >= budget) return 0;
    uint64_t fit = (budget - in_use) / unit;
    return fit < want ? (size_t)fit : want;
}
