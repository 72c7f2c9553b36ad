/* The address-space heap: best-fit placement with splitting and coalescing over large
 * reserved virtual ranges ("regions"), plus a per-page count of allocated bytes so the arena
 * knows which physical pages hold data. Pure bookkeeping: no locks, no CUDA.
 *
 * Free ranges coalesce regardless of stream (with merge_any; else only ranges whose marks name
 * the same streams, the stream_reuse=events layout). A free range carries marks: for each stream
 * whose queued work may still touch part of it, the span of its frees there and the latest
 * position (seq) of those frees. A range without marks is clean. An allocation on stream S may
 * use the addresses of a range that meet no other stream's span on a backed page (unbacked pages
 * hold nothing queued work touches); gp_heap_clean() drops a stream's marks once its work up to a
 * position is done, gp_heap_retag() hands them to a stream that waited for it (glossary: arena.h;
 * the reuse rule: reuse.c). */
#ifndef GPOOL_HEAP_H
#define GPOOL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define GP_TAG_CLEAN        UINTPTR_MAX
#define GP_MIN_ALIGN        256u
#define GP_HEAP_MAX_REGIONS 64 /* regions never move in memory */
#define GP_MARKS            4  /* marks per free range (ranges that would need more stay apart) */

/* Stream tag's frees in [lo, hi) may still be touched by its work up to position seq. */
typedef struct gp_mark {
    uintptr_t tag;
    uint64_t seq;
    uintptr_t lo, hi;
} gp_mark;

typedef struct gp_range gp_range;
struct gp_range {
    uintptr_t addr;
    size_t size;
    gp_range *prev, *next;   /* address-ordered neighbours in the region */
    gp_range *left, *right;  /* free index (treap) children */
    gp_range *dprev, *dnext; /* the dirty list (free ranges with marks) */
    uint32_t prio;           /* treap priority */
    uint16_t region;         /* index into gp_heap.regions */
    uint8_t is_free;
    uint8_t nmarks;          /* free: marks in use (0 = clean); block: 0 */
    uintptr_t tag;           /* block: stream allocated on; free: GP_TAG_CLEAN */
    size_t requested;        /* block: bytes the caller asked for */
    uint32_t usage;          /* block: usage hint */
    void *aux;               /* block: arena use (slab, extra streams) */
    gp_mark marks[GP_MARKS]; /* free: streams whose work may still touch parts of it */
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

typedef struct gp_heap {
    gp_region *regions;
    size_t nregions, cap_regions;
    gp_range *root;  /* every free range, by (size, addr) */
    gp_range *dirty; /* the free ranges with marks */
    size_t nfree;    /* free ranges */
    int merge_any;   /* 1: free ranges coalesce whatever their marks (up to GP_MARKS streams) */
    gp_range *spare; /* recycled range nodes */
    uint32_t rng;
    size_t free_bytes;    /* in free ranges */
    uintptr_t slab_floor; /* lowest address a slab ever got (gp_heap_take_top, zone 1) */
    int fewest_pages;     /* 1: gp_heap_take places where the fewest fresh pages are needed */
} gp_heap;

int gp_heap_init(gp_heap *h);
/* Frees the bookkeeping (not the memory it describes). */
void gp_heap_fini(gp_heap *h);

/* Add a region of [base, base+size), size a multiple of page. Returns its index or -1. */
int gp_heap_add_region(gp_heap *h, uintptr_t base, size_t size, size_t page);

/* Best fit for size bytes aligned to align (a power of two >= GP_MIN_ALIGN) for stream tag
 * (GP_TAG_CLEAN: a stream-less request) among the free ranges it may use: pages already backed
 * first, then the smallest range; inside a range the lowest address that meets no other stream's
 * mark on a backed page. Returns the new block (is_free 0) or NULL if none fits; with
 * *out_of_nodes set when host memory for bookkeeping ran out. Size must be a multiple of
 * GP_MIN_ALIGN. Page counts are updated. */
gp_range *gp_heap_take(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes);

/* The unbacked pages under the place gp_heap_take would choose now (SIZE_MAX: none fits). */
size_t gp_heap_fresh_pages(const gp_heap *h, size_t size, size_t align, uintptr_t tag);

/* As gp_heap_take, but from the high end of the highest free place that fits: the arena's
 * slabs gather at the top of the address space, away from large blocks, and fill the holes
 * earlier slabs left there before the zone grows downwards, so a repeated workload's slabs and
 * large blocks find their old, still-mapped places again instead of drifting. */
/* zone: 1 for a slab (the slab zone's floor follows it down), 0 for a block placed up there
 * without moving the zone (a small block of a stream other than the slab stream). A slab that
 * would need a fresh page there (the zone is full) takes the best fit in a hole under a page
 * between blocks instead (its pages hold data already), when there is one, and leaves the zone's
 * floor where it is: a page mapped for one slab of a few KiB is a page held for it. */
gp_range *gp_heap_take_top(gp_heap *h, size_t size, size_t align, uintptr_t tag, int zone,
                           int *out_of_nodes);

/* When the best place for a request of stream tag over every free range, marks ignored (pages
 * already backed first, then the smallest range), is on backed pages while the best place the
 * request may use now needs fresh pages, or is at most 1/16 the size of the cached run (both
 * on fresh pages: the range) the usable place would cut, or is on backed pages while the usable
 * place is on the frontier (the last backed pages of a range that goes on unbacked): the streams
 * whose marks it would wait for, their tags in from[] (up to GP_MARKS), their count returned; 0
 * otherwise. The request may claim that place by waiting for them (reuse.c, rule 5). */
size_t gp_heap_claim(gp_heap *h, size_t size, size_t align, uintptr_t tag, uintptr_t *from);

/* Take exactly [addr, addr + size) from the free range holding it, for stream tag: the block,
 * or NULL when no free range holds it all (or, *out_of_nodes set, no host memory). Walks the
 * region: for rare callers (arena_span.c). */
gp_range *gp_heap_take_at(gp_heap *h, uintptr_t addr, size_t size, uintptr_t tag,
                          int *out_of_nodes);

/* A run of npages whole pages, none backed, inside one free range (its marks do not matter:
 * no queued work touches an unbacked page): 1 with its region index and first page, else 0.
 * Walks every range. */
int gp_heap_unbacked_run(const gp_heap *h, size_t npages, size_t *region, size_t *first);

/* A spare range node (NULL: no host memory), for a caller that must later split ranges
 * without failing: gp_heap_node_put hands it back to the heap's spares just before. */
gp_range *gp_heap_node(gp_heap *h);
void gp_heap_node_put(gp_heap *h, gp_range *r);

/* Return a block to the free space, marked (tag, seq) over its addresses (no mark for
 * GP_TAG_CLEAN); coalesces with mergeable neighbours. Page counts are updated. */
void gp_heap_give(gp_heap *h, gp_range *r, uintptr_t tag, uint64_t seq);

/* Drop the marks of tag with seq <= upto (all of them for upto = UINT64_MAX). */
void gp_heap_clean(gp_heap *h, uintptr_t tag, uint64_t upto);

/* Count (pin = 1) or uncount (pin = 0) the bytes of every marked free range in the page
 * counters, so that reclaiming unused pages leaves pages pending GPU work alone. */
void gp_heap_pin_dirty(gp_heap *h, int pin);

/* Hand the marks of tag with seq <= upto to stream `to` at to_seq (to waits for tag's work
 * now, so only it may use them at once); `to` = GP_TAG_CLEAN is gp_heap_clean. */
void gp_heap_retag(gp_heap *h, uintptr_t tag, uint64_t upto, uintptr_t to, uint64_t to_seq);

/* Mark every clean free range's backed head and tail runs (or all of it, with backed
 * islands inside) as pending on tag at seq (when a second stream appears and the first
 * stream's frees, made clean, may still be in use). Never-backed space stays unmarked. */
void gp_heap_retag_clean(gp_heap *h, uintptr_t tag, uint64_t seq);

/* Streams with marks on free ranges (for cleaning them all). */
size_t gp_heap_dirty_tags(const gp_heap *h, uintptr_t *out, size_t max);

/* Largest span of tag's marks (0 when none). */
size_t gp_heap_largest_tagged(gp_heap *h, uintptr_t tag);

/* 1 when free ranges a and b, neighbours, would coalesce (the debug checker's rule). */
int gp_heap_mergeable(const gp_heap *h, const gp_range *a, const gp_range *b);

/* Largest free range (for OOM reports). */
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
