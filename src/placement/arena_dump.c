/* The arena's JSON memory map (gpool_dump_json's "arenas"): every region with its ranges, free
 * ranges split where their state changes (pending, cached, reserved), blocks and slabs as they
 * are. Moved out of arena.c unchanged. */
#include "arena_internal.h"

#include <inttypes.h>
#include <stdio.h>

/* What free byte x of range r is: "pending" on a backed page inside a mark's span (queued work of
 * that stream may still touch it), "cached" elsewhere on a backed page (reusable at once),
 * "reserved" where the address space has no memory behind it (never backed, or given back). */
static const char *free_state(const gp_region *g, const gp_range *r, uintptr_t x)
{
    if (!g->page_phys[(x - g->base) >> g->page_shift]) return "reserved";
    for (unsigned m = 0; m < r->nmarks; m++)
        if (x >= r->marks[m].lo && x < r->marks[m].hi) return "pending";
    return "cached";
}

/* A free range of region g as JSON ranges, one per run of one free_state: split where pages
 * change from backed to unbacked and where a mark's span begins or ends. */
static void dump_free_range(FILE *f, const gp_region *g, const gp_range *r, int *first)
{
    uintptr_t a = r->addr, end = r->addr + r->size;
    while (a < end) {
        const char *state = free_state(g, r, a);
        uintptr_t b = a;
        while (b < end && free_state(g, r, b) == state) {
            /* the state can change only at a page boundary or a mark's edge */
            uintptr_t next = g->base + ((((b - g->base) >> g->page_shift) + 1) << g->page_shift);
            for (unsigned m = 0; m < r->nmarks; m++) {
                if (r->marks[m].lo > b && r->marks[m].lo < next) next = r->marks[m].lo;
                if (r->marks[m].hi > b && r->marks[m].hi < next) next = r->marks[m].hi;
            }
            b = next < end ? next : end;
        }
        fprintf(f, "%s{\"addr\":%" PRIuPTR ",\"size\":%zu,\"state\":\"%s\"}", *first ? "" : ",", a,
                (size_t)(b - a), state);
        *first = 0;
        a = b;
    }
}

void gp_arena_dump_json(gp_arena *a, FILE *f)
{
    pthread_mutex_lock(&a->lock);
    fprintf(f, "[");
    for (size_t i = 0; i < a->heap.nregions; i++) {
        gp_region *g = &a->heap.regions[i];
        size_t backed = 0;
        size_t index;
        for (size_t p = 0; p < g->npages; p++) /* an alias page is another page's memory */
            backed += g->page_phys[p] != 0 &&
                      (!a->ops->handle_pages || a->ops->handle_pages(a->bctx, g, p, &index));
        fprintf(f,
                "%s{\"base\":%" PRIuPTR ",\"size\":%zu,\"page\":%zu,\"backed_pages\":%zu,"
                "\"ranges\":[",
                i ? "," : "", g->base, g->size, g->page, backed);
        int first = 1;
        GP_HEAP_FOREACH(&a->heap, i, r)
        {
            if (r->is_free) {
                dump_free_range(f, g, r, &first);
                continue;
            }
            const char *state = gp_range_is_pad(r) ? "alias" : r->aux ? "slab" : "in_use";
            fprintf(f, "%s{\"addr\":%" PRIuPTR ",\"size\":%zu,\"state\":\"%s\"", first ? "" : ",",
                    r->addr, r->size, state);
            if (gp_range_is_pad(r)) {
                fprintf(f, "}");
                first = 0;
                continue;
            }
            if (!r->aux)
                fprintf(f, ",\"requested\":%zu,\"stream\":%" PRIuPTR, r->requested, r->tag);
            if (r->aux) {
                gp_slab *s = r->aux;
                unsigned live = 0;
                for (uint16_t k = 0; k < s->nslots; k++)
                    live += gp_slot_state(s, k) == GP_SLOT_LIVE;
                fprintf(f, ",\"slot_size\":%u,\"slots\":%u,\"live_slots\":%u", s->slot_size,
                        s->nslots, live);
            }
            fprintf(f, "}");
            first = 0;
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]");
    pthread_mutex_unlock(&a->lock);
}
