/* arena_check.c — the arena's invariants: slabs, block map, backing and counters (check.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "arena_internal.h"
#include "check.h"

/* One slab: its range, slot states against the free stack. Returns the bytes of its slots
 * that are not free; counts pending slots. */
static uint64_t check_slab(check_ctx *c, const gp_range *r, gp_slab *s, uint64_t *pending,
                           uint64_t *pending_bytes)
{
    if (s->range != r || s->base != r->addr)
        gp_check_bad(c, "slab at %#" PRIxPTR ": range link broken", r->addr);
    if (!s->nslots || (size_t)s->nslots * s->slot_size > r->size || s->nfree > s->nslots)
        gp_check_bad(c, "slab at %#" PRIxPTR ": %u slots of %u bytes, %u free, in %zu bytes",
                     r->addr, s->nslots, s->slot_size, s->nfree, r->size);
    if (s->nfree > s->nslots) return 0;
    size_t nfree = 0;
    for (uint32_t i = 0; i < GP_SLAB_MAX_SLOTS; i++) {
        uint8_t st = gp_slot_state(s, i);
        if (i >= s->nslots) {
            if (st != GP_SLOT_FREE)
                gp_check_bad(c, "slab at %#" PRIxPTR ": slot %u past the end in use", r->addr, i);
            continue;
        }
        if (st == GP_SLOT_FREE) nfree++;
        if (st == GP_SLOT_PENDING) {
            (*pending)++;
            *pending_bytes += s->slot_size;
        }
        if (st > GP_SLOT_PENDING)
            gp_check_bad(c, "slab at %#" PRIxPTR ": slot %u state %u", r->addr, i, st);
    }
    if (nfree != s->nfree)
        gp_check_bad(c, "slab at %#" PRIxPTR ": nfree %u, %zu slots free", r->addr, s->nfree,
                     nfree);
    uint8_t seen[GP_SLAB_MAX_SLOTS] = {0};
    for (uint32_t k = 0; k < s->nfree; k++) {
        uint16_t i = s->free_stack[k];
        if (i >= s->nslots || seen[i]++ || gp_slot_state(s, i) != GP_SLOT_FREE) {
            gp_check_bad(c,
                         "slab at %#" PRIxPTR ": free stack entry %u (slot %u) is not a free slot",
                         r->addr, k, i);
            break;
        }
    }
    return (uint64_t)(s->nslots - s->nfree) * s->slot_size;
}

size_t gp_arena_check(gp_arena *a, char *msg, size_t cap)
{
    check_ctx c = {msg, cap, 0};
    c.n = gp_heap_check(&a->heap, msg, cap);
    if (c.n) return c.n; /* the walks below trust the heap's shape */
    uint64_t in_use = 0, requested = 0, large = 0, pending = 0, pending_bytes = 0;
    uint64_t work = 0; /* what this walk visited: sets the sampling rate (check_cost) */
    size_t slabs_with_room = 0;
    size_t nregs = atomic_load_explicit(&a->map.nregs, memory_order_relaxed);
    if (nregs != a->heap.nregions)
        gp_check_bad(&c, "%zu arena regions, %zu heap regions", nregs, a->heap.nregions);
    for (size_t i = 0; i < a->heap.nregions && i < nregs; i++) {
        const gp_region *g = &a->heap.regions[i];
        if (a->map.regs[i].base != g->base || a->map.regs[i].size != g->size)
            gp_check_bad(&c, "region %zu: arena and heap disagree on its place", i);
        work += g->npages / 2; /* page arrays: sequential, cheap */
        GP_HEAP_FOREACH(&a->heap, i, r)
        {
            work += 64; /* a range: region walk, treap, dirty list, block map (cache misses) */
            if (!gp_range_slab(r)) { /* no slab: the granules at both ends point to none */
                uintptr_t off = r->addr - g->base, last = off + r->size - 1;
                if (atomic_load_explicit(&a->map.regs[i].granule[off >> GP_GRANULE_SHIFT],
                                         memory_order_relaxed) ||
                    atomic_load_explicit(&a->map.regs[i].granule[last >> GP_GRANULE_SHIFT],
                                         memory_order_relaxed))
                    gp_check_bad(&c,
                                 "range %#" PRIxPTR " (no slab) has a granule pointing to a slab",
                                 r->addr);
            }
            if (r->is_free) {
                if (r->aux) gp_check_bad(&c, "free range %#" PRIxPTR " keeps a slab", r->addr);
                continue;
            }
            if (gp_range_is_pad(r)) { /* a span's placeholder: no block, no slab */
                if (gp_ptrmap_get(&a->blocks, r->addr) == r)
                    gp_check_bad(&c, "placeholder %#" PRIxPTR " in the block map", r->addr);
                continue;
            }
            /* every page holding allocated bytes is backed */
            size_t p0 = (r->addr - g->base) >> g->page_shift;
            size_t p1 = (r->addr + r->size - 1 - g->base) >> g->page_shift;
            for (size_t p = p0; p <= p1; p++)
                if (!g->page_phys[p]) {
                    gp_check_bad(&c, "block %#" PRIxPTR ": page %zu of region %zu not backed",
                                 r->addr, p, i);
                    break;
                }
            gp_slab *s = r->aux;
            if (!s) {
                large++;
                in_use += r->size;
                requested += r->requested;
                if (gp_ptrmap_get(&a->blocks, r->addr) != r)
                    gp_check_bad(&c, "block %#" PRIxPTR " missing from the block map", r->addr);
                if (r->requested > r->size)
                    gp_check_bad(&c, "block %#" PRIxPTR ": %zu bytes requested of %zu", r->addr,
                                 r->requested, r->size);
                continue;
            }
            in_use += check_slab(&c, r, s, &pending, &pending_bytes);
            work += GP_SLAB_MAX_SLOTS / 4 + (r->size >> GP_GRANULE_SHIFT);
            slabs_with_room += s->nfree > 0;
            uintptr_t off = r->addr - a->map.regs[i].base;
            for (size_t k = 0; k < r->size >> GP_GRANULE_SHIFT; k++)
                if (atomic_load_explicit(&a->map.regs[i].granule[(off >> GP_GRANULE_SHIFT) + k],
                                         memory_order_relaxed) != s) {
                    gp_check_bad(&c, "slab at %#" PRIxPTR ": granule %zu does not point to it",
                                 r->addr, k);
                    break;
                }
        }
    }
    if (large != a->blocks.count)
        gp_check_bad(&c, "%" PRIu64 " large blocks, the block map holds %zu", large,
                     a->blocks.count);
    if (in_use != a->c.in_use)
        gp_check_bad(&c, "counter in_use %" PRIu64 ", blocks and slab slots hold %" PRIu64,
                     a->c.in_use, in_use);
    if (requested != a->c.requested)
        gp_check_bad(&c, "counter requested %" PRIu64 ", large blocks asked for %" PRIu64,
                     a->c.requested, requested);
    if (pending != a->c.pending_slots || pending != a->npending)
        gp_check_bad(&c, "pending slots: counter %" PRIu64 ", list %zu, slots %" PRIu64,
                     a->c.pending_slots, a->npending, pending);
    if (pending_bytes != a->c.pending_bytes)
        gp_check_bad(&c, "counter pending_bytes %" PRIu64 ", pending slots hold %" PRIu64,
                     a->c.pending_bytes, pending_bytes);
    if (a->c.in_use > a->c.peak_in_use || a->c.requested > a->c.peak_requested)
        gp_check_bad(&c, "a peak below its current value");
    /* slabs with room are on their stream's partial list, or the stream's spare empty slab */
    size_t listed = 0;
    for (size_t si = 0; si < a->nstreams; si++)
        for (unsigned cls = 0; cls < GP_NCLASS; cls++) {
            const gp_slab *prev = NULL;
            size_t n = 0;
            for (const gp_slab *s = a->streams[si].partial[cls]; s; prev = s, s = s->next) {
                if (n++ > slabs_with_room) {
                    gp_check_bad(
                        &c, "stream %zu class %u: partial list longer than the slabs (a cycle?)",
                        si, cls);
                    break;
                }
                if (s->prev != prev || s->cls != cls || s->stream != si || !s->nfree)
                    gp_check_bad(&c,
                                 "stream %zu class %u: partial list holds slab %#" PRIxPTR
                                 " (class %u, stream %u, %u free)",
                                 si, cls, s->base, s->cls, s->stream, s->nfree);
            }
            listed += n;
            const gp_slab *e = a->streams[si].empty[cls];
            if (e) {
                listed++;
                if (e->nfree != e->nslots || e->cls != cls || e->prev || e->next)
                    gp_check_bad(&c,
                                 "stream %zu class %u: the spare slab is not empty and unlinked",
                                 si, cls);
            }
        }
    a->check_cost = work;
    if (listed != slabs_with_room)
        gp_check_bad(&c, "%zu slabs have free slots, %zu are listed", slabs_with_room, listed);
    return c.n;
}

void gp_arena_check_or_abort(gp_arena *a, const char *where)
{
    /* about 4096 units of work per operation on average: every operation while the arena
     * is small, every Nth above (check_cost: what the last check visited) */
    uint64_t every = 1 + a->check_cost / 4096;
    if (a->check_ops++ % every) return;
    char msg[512];
    if (gp_arena_check(a, msg, sizeof msg)) {
        char what[640];
        snprintf(what, sizeof what, "%s arena after %s: %s", a->ops ? a->ops->name : "?", where,
                 msg);
        gp_check_abort(what, __FILE__, __LINE__);
    }
}
