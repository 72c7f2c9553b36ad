/* The address-space heap: best-fit placement with splitting and coalescing over large
 * reserved virtual ranges ("regions"), plus a per-page count of allocated bytes so the arena
 * knows which physical pages hold data. Pure bookkeeping: no locks, no CUDA.
 *
 * Free ranges carry a tag: GP_TAG_CLEAN (no queued GPU work can touch them) or the stream
 * whose work may still use them, with the position (seq) of the free on it. An allocation on stream
 * S may take clean ranges and ranges tagged S; gp_heap_clean() turns S's ranges clean once the work
 * up to a position is known to be done (glossary: arena.h; the reuse rule: reuse.c). */
#ifndef GPOOL_HEAP_H
#define GPOOL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define GP_TAG_CLEAN        UINTPTR_MAX
#define GP_MIN_ALIGN        256u
#define GP_HEAP_MAX_REGIONS 64 /* regions never move in memory */

typedef struct gp_range gp_range;
struct gp_range {
    uintptr_t addr;
    size_t size;
    gp_range *prev, *next;   /* address-ordered neighbours in the region */
    gp_range *left, *right;  /* free index (treap) children */
    gp_range *dprev, *dnext; /* the tag's dirty list (free, pending) */
    uint32_t prio;           /* treap priority */
    uint16_t region;         /* index into gp_heap.regions */
    uint8_t is_free;
    uintptr_t tag;    /* free: GP_TAG_CLEAN or stream; block: stream allocated on */
    uint64_t seq;     /* free & pending: position of the free on that stream */
    size_t requested; /* block: bytes the caller asked for */
    uint32_t usage;   /* block: usage hint */
    void *aux;        /* block: arena use (slab, extra streams) */
};

typedef struct gp_region {
    uintptr_t base;
    size_t size;
    size_t page; /* physical page size (power of two) */
    unsigned page_shift;
    size_t npages;
    uint32_t *page_used; /* allocated bytes per page */
    uint64_t *page_phys; /* backend's handle per page, 0 = not backed */
    gp_range *first;     /* lowest range */
} gp_region;

typedef struct gp_tag_index {
    uintptr_t tag;
    gp_range *root;  /* free ranges with this tag, by (size, addr) */
    gp_range *dirty; /* list of them (not kept for the clean tag) */
    size_t count;
} gp_tag_index;

typedef struct gp_heap {
    gp_region *regions;
    size_t nregions, cap_regions;
    gp_tag_index *tags; /* tags[0] is GP_TAG_CLEAN */
    size_t ntags, cap_tags;
    gp_range *spare; /* recycled range nodes */
    uint32_t rng;
    size_t free_bytes;    /* in free ranges */
    uintptr_t slab_floor; /* lowest address gp_heap_take_top ever gave out (the slab zone) */
} gp_heap;

int gp_heap_init(gp_heap *h);
/* Frees the bookkeeping (not the memory it describes). */
void gp_heap_fini(gp_heap *h);

/* Add a region of [base, base+size), size a multiple of page. Returns its index or -1. */
int gp_heap_add_region(gp_heap *h, uintptr_t base, size_t size, size_t page);

/* Best fit for size bytes aligned to align (a power of two >= GP_MIN_ALIGN) among the free
 * ranges tagged tag, else among the clean ones. Returns the new block (is_free 0) or NULL if none
 * fits; with *out_of_nodes set when host memory for bookkeeping ran out. Size must be a multiple of
 * GP_MIN_ALIGN. Page counts are updated. */
gp_range *gp_heap_take(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes);

/* As gp_heap_take, but from the high end of the highest free range that fits (clean, or
 * tagged tag): the arena's slabs gather at the top of the address space, away from large
 * blocks, and fill the holes earlier slabs left there before the zone grows downwards, so a
 * repeated workload's slabs and large blocks find their old, still-mapped places again
 * instead of drifting. */
gp_range *gp_heap_take_top(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes);

/* 1 when the best place for a request of stream tag is a range pending on another stream (set in
 * *from): the request may claim it by waiting for that stream (reuse.c, rule 5). */
int gp_heap_foreign_fit(gp_heap *h, size_t size, size_t align, uintptr_t tag, uintptr_t *from);

/* Return a block to the free space, tagged (tag, seq); coalesces with neighbours of the same
 * tag. Page counts are updated. */
void gp_heap_give(gp_heap *h, gp_range *r, uintptr_t tag, uint64_t seq);

/* Mark the ranges of tag with seq <= upto clean (all of them for upto = UINT64_MAX) and
 * coalesce them with clean neighbours. */
void gp_heap_clean(gp_heap *h, uintptr_t tag, uint64_t upto);

/* Count (pin = 1) or uncount (pin = 0) the bytes of every dirty free range in the page
 * counters, so that reclaiming unused pages leaves pages pending GPU work alone. */
void gp_heap_pin_dirty(gp_heap *h, int pin);

/* Hand the ranges of tag with seq <= upto to stream `to` at to_seq (to waits for tag's work
 * now, so only it may use them at once); `to` = GP_TAG_CLEAN is gp_heap_clean. */
void gp_heap_retag(gp_heap *h, uintptr_t tag, uint64_t upto, uintptr_t to, uint64_t to_seq);

/* Turn every clean free range into a range pending on tag at seq (when a second stream
 * appears and the first stream's frees, made clean, may still be in use). */
void gp_heap_retag_clean(gp_heap *h, uintptr_t tag, uint64_t seq);

/* Tags other than clean that have free ranges (for cleaning them all). */
size_t gp_heap_dirty_tags(const gp_heap *h, uintptr_t *out, size_t max);

/* Largest free range tagged tag (0 when none). */
size_t gp_heap_largest_tagged(gp_heap *h, uintptr_t tag);

/* Largest clean free range (for OOM reports). */
size_t gp_heap_largest_free(const gp_heap *h);

static inline gp_region *gp_heap_region_of(gp_heap *h, uintptr_t addr)
{
    for (size_t i = 0; i < h->nregions; i++)
        if (addr - h->regions[i].base < h->regions[i].size) return &h->regions[i];
    return NULL;
}

/* Walk every range of region ri in address order. */
#define GP_HEAP_FOREACH(h, ri, r) for (gp_range *r = gp_heap_first((h), (ri)); r; r = r->next)
gp_range *gp_heap_first(gp_heap *h, size_t ri);

#endif
