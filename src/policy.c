/* The placement policy: which memory kind an AUTO request gets, from its usage hint, and
 * where it goes when that kind's budget is spent. One table, so the whole decision is visible
 * in one place (README, "Placement policy", shows it too). */
#include "sysmem.h"

static const struct {
    gpool_mem_kind kind; /* what AUTO picks for the hint */
    const char *why;
} policy[GPOOL_USAGE_COUNT] = {
    [GPOOL_USAGE_DEFAULT] = {GPOOL_MEM_DEVICE, "no hint: device memory"},
    [GPOOL_USAGE_GPU_ONLY] = {GPOOL_MEM_DEVICE, "hot data only kernels touch"},
    [GPOOL_USAGE_UPLOAD] = {GPOOL_MEM_HOST_MAPPED, "CPU writes, GPU reads once: zero-copy"},
    [GPOOL_USAGE_READBACK] = {GPOOL_MEM_HOST_PINNED, "GPU copies out, CPU reads: cached host"},
    [GPOOL_USAGE_STAGING] = {GPOOL_MEM_HOST_PINNED, "async copy source/target"},
    [GPOOL_USAGE_MULTI_GPU] = {GPOOL_MEM_HOST_MAPPED, "every GPU can reach portable mapped host"},
    [GPOOL_USAGE_LARGE_DATASET] = {GPOOL_MEM_HOST_MAPPED, "bigger than the device: zero-copy"},
};

/* When an AUTO request's kind is over its budget: the next kind to try (AUTO = none: OOM).
 * Only to a kind that serves the same use: mapped memory is pinned memory with a device
 * address, so pinned spills to mapped; mapped has no substitute. Device memory moves to
 * mapped only when the request says GPOOL_ALLOC_ALLOW_FALLBACK (pool.c), over budget or out
 * of memory alike. */
static const gpool_mem_kind spill[GPOOL_MEM_KIND_COUNT] = {
    [GPOOL_MEM_AUTO] = GPOOL_MEM_AUTO,
    [GPOOL_MEM_DEVICE] = GPOOL_MEM_HOST_MAPPED,
    [GPOOL_MEM_HOST_PINNED] = GPOOL_MEM_HOST_MAPPED,
    [GPOOL_MEM_HOST_MAPPED] = GPOOL_MEM_AUTO,
};

gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size)
{
    (void)size;
    return (unsigned)usage < GPOOL_USAGE_COUNT ? policy[usage].kind : GPOOL_MEM_DEVICE;
}

gpool_mem_kind gp_policy_spill(gpool_mem_kind kind)
{
    return (unsigned)kind < GPOOL_MEM_KIND_COUNT ? spill[kind] : GPOOL_MEM_AUTO;
}

const char *gp_policy_reason(gpool_usage usage)
{
    return (unsigned)usage < GPOOL_USAGE_COUNT ? policy[usage].why : "unknown usage hint";
}
