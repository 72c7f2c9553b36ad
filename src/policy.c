/* The placement policy: which memory kind an AUTO request gets, from its usage hint. One
 * table, so the whole decision is visible in one place (README shows it too). */
#include "sysmem.h"

static const gpool_mem_kind kind_for_usage[GPOOL_USAGE_COUNT] = {
    [GPOOL_USAGE_DEFAULT] = GPOOL_MEM_DEVICE,
    [GPOOL_USAGE_GPU_ONLY] = GPOOL_MEM_DEVICE,
    [GPOOL_USAGE_UPLOAD] = GPOOL_MEM_HOST_MAPPED,
    [GPOOL_USAGE_READBACK] = GPOOL_MEM_HOST_PINNED,
    [GPOOL_USAGE_STAGING] = GPOOL_MEM_HOST_PINNED,
    [GPOOL_USAGE_MULTI_GPU] = GPOOL_MEM_HOST_MAPPED,
    [GPOOL_USAGE_LARGE_DATASET] = GPOOL_MEM_HOST_MAPPED,
};

gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size)
{
    (void)size;
    return (unsigned)usage < GPOOL_USAGE_COUNT ? kind_for_usage[usage] : GPOOL_MEM_DEVICE;
}
