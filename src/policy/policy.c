/* The placement policy: which memory kind a request gets, with which page size, and where an
 * AUTO request goes when its kind cannot serve it (the kind's budget, which may refuse it, is
 * applied where the kind takes memory: kinds/budget.c).
 * Tables, so the whole decision is visible in one place (README, "Placement policy", shows
 * them too); pagesize.c holds the page and chunk size tables this file applies. */
#include "policy.h"

#include "error.h"
#include "pagesize.h"
#include "pool.h"

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

/* When an AUTO request's kind cannot serve it: the next kind to try (AUTO = none: it fails),
 * and on which failures. Only to a kind that serves the same use: mapped memory is pinned
 * memory with a device address, so pinned moves to mapped when its budget is spent; mapped
 * has no substitute. Device memory moves to mapped only when the request says
 * GPOOL_ALLOC_ALLOW_FALLBACK, over budget or out of memory alike. A request moves once. */
enum {
    MOVE_OVER_BUDGET = 1u << 0,   /* the kind's budget refused the request */
    MOVE_OUT_OF_MEMORY = 1u << 1, /* the kind's memory ran out */
    MOVE_IF_ALLOWED = 1u << 2,    /* only with GPOOL_ALLOC_ALLOW_FALLBACK */
};
static const struct {
    gpool_mem_kind next;
    unsigned when;
} spill[GPOOL_MEM_KIND_COUNT] = {
    [GPOOL_MEM_AUTO] = {GPOOL_MEM_AUTO, 0},
    [GPOOL_MEM_DEVICE] = {GPOOL_MEM_HOST_MAPPED,
                          MOVE_OVER_BUDGET | MOVE_OUT_OF_MEMORY | MOVE_IF_ALLOWED},
    [GPOOL_MEM_HOST_PINNED] = {GPOOL_MEM_HOST_MAPPED, MOVE_OVER_BUDGET},
    [GPOOL_MEM_HOST_MAPPED] = {GPOOL_MEM_AUTO, 0},
};

gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size)
{
    (void)size;
    return (unsigned)usage < GPOOL_USAGE_COUNT ? policy[usage].kind : GPOOL_MEM_DEVICE;
}

gpool_mem_kind gp_policy_spill(gpool_mem_kind kind)
{
    return (unsigned)kind < GPOOL_MEM_KIND_COUNT ? spill[kind].next : GPOOL_MEM_AUTO;
}

const char *gp_policy_reason(gpool_usage usage)
{
    return (unsigned)usage < GPOOL_USAGE_COUNT ? policy[usage].why : "unknown usage hint";
}

/* Device blocks are mapped in granularity pages from chunks whose size follows from the block
 * size -- the size the arena places, rounded up to GP_MIN_ALIGN, so that gpool_page_size, the
 * page_size check and vidmem.c agree; host blocks get the page size they asked for, else the
 * one their size calls for. */
size_t gp_policy_page_size(const gpool_t *pool, gpool_mem_kind kind, size_t size, size_t want)
{
    if (kind == GPOOL_MEM_DEVICE) {
        size_t placed = size > SIZE_MAX - GP_MIN_ALIGN
                            ? size
                            : (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
        return gp_device_chunk_size(placed, pool->granularity);
    }
    return want ? want : gp_host_page_size(size);
}

gpool_status gp_policy_place(const gpool_t *pool, const gpool_alloc_params *p, size_t size,
                             gp_placement *out)
{
    size_t gran = pool->granularity;
    *out = (gp_placement){.kind = p ? p->kind : GPOOL_MEM_DEVICE,
                          .flags = p ? p->flags : 0,
                          .size = size,
                          .align = p && p->alignment > GP_MIN_ALIGN ? p->alignment : GP_MIN_ALIGN,
                          .want_page = p ? p->page_size : 0};
    if (p && p->alignment > gran)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "alignment %zu exceeds the page size %zu",
                       p->alignment, gran);
    size_t want = out->want_page;
    int host_page = out->kind != GPOOL_MEM_DEVICE && (want == 4096 || want == ((size_t)2 << 20));
    if (!host_page && !gp_page_size_valid(want, gran))
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "page size %zu is not 0 or a power-of-two multiple of the granularity %zu",
                       want, gran);
    out->is_auto = out->kind == GPOOL_MEM_AUTO;
    if (out->is_auto) out->kind = gp_policy_kind(p->usage, size);
    out->first = out->kind;
    out->page = gp_policy_page_size(pool, out->kind, size, want);
    if (out->kind == GPOOL_MEM_DEVICE && want && want != gran && want != out->page)
        /* another page size would be silently ignored: say which ones a device block has */
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "page_size %zu for a %zu-byte device block: device blocks use %zu-byte "
                       "pages, and blocks of this size %zu-byte chunks; pass 0 or one of those",
                       want, size, gran, out->page);
    return GPOOL_OK;
}

int gp_policy_move(gp_placement *pl, gpool_status st, int over_budget)
{
    if (!pl->is_auto || pl->kind != pl->first || st != GPOOL_ERR_OUT_OF_MEMORY) return 0;
    unsigned when = spill[pl->kind].when;
    if (!(when & (over_budget ? MOVE_OVER_BUDGET : MOVE_OUT_OF_MEMORY))) return 0;
    if ((when & MOVE_IF_ALLOWED) && !(pl->flags & GPOOL_ALLOC_ALLOW_FALLBACK)) return 0;
    pl->kind = spill[pl->kind].next;
    pl->page = gp_policy_page_size(NULL, pl->kind, pl->size, pl->want_page);
    return 1;
}
