/* Blocks placed across pages under pressure (arena_internal.h, "spans"): when a large request
 * still finds no room after make room, it may begin in the free tail of one partly used page,
 * go on in fresh pages and end in the free head of another. The handles of those two pages are
 * mapped a second time (the backend's alias) at an unbacked place of the address space, with
 * the fresh pages mapped between them, and the block lives there: it needs one fresh page
 * fewer than a block that must begin and end on fresh pages. The bytes the aliases show that
 * are not the block's (other blocks' memory) are held by placeholder ranges (pads, aux =
 * &gp_span_mark), and so are the original tail and head, so that nothing else is placed on
 * them while the block lives.
 * At the free, the original tail and head go back with the free's (stream, position) mark, so
 * the reuse rule covers their physical bytes through either address; the alias parts stay held
 * (dead pads: queued work may still read through them) until make room or trim unmap them
 * after their synchronize. The fresh pages become ordinary free pages of that place. */
#include <stdlib.h>

#include "arena_internal.h"
#include "error.h"

char gp_span_mark;

/* One end of a span: a page's free bytes, and its handle. */
typedef struct span_end {
    gp_region *g;
    size_t page;   /* the page in g */
    size_t len;    /* its free bytes at the end (tail) or start (head) */
    size_t first;  /* its handle's first page in g */
    size_t npages; /* its handle's pages */
} span_end;

#define SPAN_ENDS 64 /* candidates of each kind looked at */

/* The held pieces of one live span, or the alias parts of a freed one (dead: block NULL). */
struct gp_span {
    gp_range *block, *lo, *hi; /* the block, the pads before and after it at the alias */
    gp_range *tail, *head;     /* the original bytes it uses (NULL: none) */
    gp_range *spare[4];        /* nodes the free's splits need, so that it cannot fail */
    uintptr_t base;            /* the first alias's first byte */
    size_t lo_pages, hi_pages; /* the aliases' pages (0: none) */
    size_t hi_at;              /* the second alias's first page, from base */
};

/* 1 when no other stream than tag's work may touch [lo, hi) of free range r (its marks). */
static int usable(const gp_range *r, uintptr_t tag, uintptr_t lo, uintptr_t hi)
{
    for (unsigned m = 0; m < r->nmarks; m++)
        if (r->marks[m].tag != tag && r->marks[m].lo < hi && lo < r->marks[m].hi) return 0;
    return 1;
}

/* Keep e among the (at most max) ends with the most free bytes. */
static void keep_end(span_end *ends, size_t *n, size_t max, span_end e)
{
    if (*n < max) {
        ends[(*n)++] = e;
        return;
    }
    size_t least = 0;
    for (size_t i = 1; i < *n; i++)
        if (ends[i].len < ends[least].len) least = i;
    if (ends[least].len < e.len) ends[least] = e;
}

/* Free bytes stream tag may use at once at the end (tail) or start (head) of backed pages that
 * end (start) their handle: the max of each kind with the most. */
static void find_ends(gp_arena *a, uintptr_t tag, span_end *tails, size_t *nt, span_end *heads,
                      size_t *nh, size_t max)
{
    *nt = *nh = 0;
    for (size_t i = 0; i < a->heap.nregions; i++) {
        gp_region *g = &a->heap.regions[i];
        GP_HEAP_FOREACH(&a->heap, i, r)
        {
            if (!r->is_free) continue;
            uintptr_t end = r->addr + r->size;
            size_t p0 = (r->addr - g->base) >> g->page_shift;
            size_t p1 = (end - 1 - g->base) >> g->page_shift;
            for (size_t p = p0; p <= p1; p++) {
                if (!g->page_phys[p]) continue;
                size_t index, np = a->ops->handle_pages(a->bctx, g, p, &index);
                if (!np) continue;
                uintptr_t ps = g->base + (p << g->page_shift), pe = ps + g->page;
                uintptr_t lo = r->addr > ps ? r->addr : ps, hi = end < pe ? end : pe;
                if (!usable(r, tag, lo, hi)) continue;
                if (hi == pe && index == np - 1)
                    keep_end(tails, nt, max, (span_end){g, p, pe - lo, p - index, np});
                if (lo == ps && index == 0)
                    keep_end(heads, nh, max, (span_end){g, p, hi - ps, p, np});
            }
        }
    }
}

/* Fresh pages a block of size bytes needs between ends of `have` free bytes. */
static size_t fresh_pages(size_t size, size_t have, size_t page)
{
    return have >= size ? 0 : (size - have + page - 1) / page;
}

/* The ends (a tail, and a head unless the tail alone does as well) that leave a block of size
 * bytes the fewest fresh pages to map, memory being short; among those, the fewest free bytes
 * left over. 1 when that is fewer fresh pages than the block needs on its own. */
static int best_pair(const span_end *tails, size_t nt, const span_end *heads, size_t nh,
                     size_t size, size_t page, size_t below, int *ti, int *hi)
{
    size_t alone = fresh_pages(size, 0, page);
    size_t best_m = below < alone ? below : alone, best_left = SIZE_MAX;
    *ti = *hi = -1;
    for (size_t i = 0; i < nt; i++) {
        for (size_t j = 0; j <= nh; j++) {
            const span_end *h = j < nh ? &heads[j] : NULL; /* nh: the tail alone */
            if (h && h->g == tails[i].g && h->page == tails[i].page) continue;
            size_t have = tails[i].len + (h ? h->len : 0);
            size_t m = fresh_pages(size, have, page);
            size_t left = m * page + have - size;
            /* a head that adds no saving is not worth its alias */
            int better = m < best_m || (m == best_m && *ti >= 0 &&
                                        (left < best_left || (!h && left == best_left)));
            if (better) {
                best_m = m;
                best_left = left;
                *ti = (int)i;
                *hi = h ? (int)j : -1;
            }
        }
    }
    return *ti >= 0;
}

static gpool_status span_record(struct gp_span **list, size_t *n, size_t *cap, struct gp_span sp)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        struct gp_span *m = realloc(*list, c * sizeof *m);
        if (!m) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a span");
        *list = m;
        *cap = c;
    }
    (*list)[(*n)++] = sp;
    return GPOOL_OK;
}

/* Take [addr, addr + size) as a placeholder (size 0: none; 1 when that is fine). */
static int hold(gp_arena *a, uintptr_t addr, size_t size, uintptr_t tag, gp_range **out)
{
    int no_nodes = 0;
    *out = size ? gp_heap_take_at(&a->heap, addr, size, tag, &no_nodes) : NULL;
    if (*out) (*out)->aux = &gp_span_mark;
    return !size || *out;
}

static void give(gp_arena *a, gp_range *r, uintptr_t tag, uint64_t seq)
{
    if (r) gp_heap_give(&a->heap, r, tag, seq);
}

/* The alias parts of sp as dead pads, held until gp_arena_spans_settle_locked. */
static void bury(gp_arena *a, const struct gp_span *sp)
{
    struct gp_span dead = {
        .base = sp->base, .lo_pages = sp->lo_pages, .hi_pages = sp->hi_pages, .hi_at = sp->hi_at};
    size_t page = a->page;
    (void)hold(a, sp->base, sp->lo_pages * page, GP_TAG_CLEAN, &dead.lo);
    (void)hold(a, sp->base + sp->hi_at * page, sp->hi_pages * page, GP_TAG_CLEAN, &dead.hi);
    if (span_record(&a->dead, &a->ndead, &a->cap_dead, dead) != GPOOL_OK)
        gp_clear_error(); /* held for good: never handed out, never unmapped */
}

int gp_arena_span_locked(gp_arena *a, size_t size, uintptr_t tag, size_t below, gp_range **out)
{
    size_t page = a->page;
    if (!a->ops->alias || !a->ops->handle_pages || !a->ops->unalias) return 0;
    span_end tails[SPAN_ENDS], heads[SPAN_ENDS];
    size_t nt, nh;
    find_ends(a, tag, tails, &nt, heads, &nh, SPAN_ENDS);
    int ti, hj;
    if (!best_pair(tails, nt, heads, nh, size, page, below, &ti, &hj)) return 0;
    const span_end *t = &tails[ti], *h = hj >= 0 ? &heads[hj] : NULL;
    size_t have = t->len + (h ? h->len : 0);
    size_t m = fresh_pages(size, have, page); /* fresh pages between */
    size_t lo_pages = t->npages, hi_pages = h ? h->npages : 0;
    size_t vi, vfirst;
    if (!gp_heap_unbacked_run(&a->heap, lo_pages + m + hi_pages, &vi, &vfirst)) return 0;
    if (gp_arena_may_drive(a, tag) != GPOOL_OK) {
        gp_clear_error();
        return 0;
    }
    gp_region *gv = &a->heap.regions[vi];
    struct gp_span sp = {.base = gv->base + (vfirst << gv->page_shift),
                         .lo_pages = lo_pages,
                         .hi_pages = hi_pages,
                         .hi_at = lo_pages + m};
    uintptr_t start = sp.base + lo_pages * page - t->len, end = start + size;
    uintptr_t hi_base = sp.base + sp.hi_at * page;
    size_t head_used = h && end > hi_base ? end - hi_base : 0;
    if (h && !head_used) hi_pages = sp.hi_pages = 0; /* the tail and fresh pages suffice */
    int ok = 1;
    for (int k = 0; k < 4 && ok; k++)
        ok = (sp.spare[k] = gp_heap_node(&a->heap)) != NULL;
    uintptr_t tail_at = t->g->base + ((t->page + 1) << t->g->page_shift) - t->len;
    ok = ok && hold(a, tail_at, t->len, tag, &sp.tail);
    ok =
        ok && hold(a, h ? h->g->base + (h->page << h->g->page_shift) : 0, head_used, tag, &sp.head);
    ok = ok && hold(a, sp.base, start - sp.base, tag, &sp.lo);
    ok = ok && hold(a, end, hi_pages ? hi_base + hi_pages * page - end : 0, tag, &sp.hi);
    int no_nodes = 0;
    if (ok) sp.block = gp_heap_take_at(&a->heap, start, size, tag, &no_nodes);
    gpool_status st = GPOOL_ERR_OUT_OF_MEMORY;
    int lo_mapped = 0, hi_mapped = 0;
    if (sp.block) {
        st = a->ops->alias(a->bctx, t->g, t->first, gv, vfirst);
        lo_mapped = st == GPOOL_OK;
        if (lo_mapped && hi_pages) {
            st = a->ops->alias(a->bctx, h->g, h->first, gv, vfirst + sp.hi_at);
            hi_mapped = st == GPOOL_OK;
        }
        if (st == GPOOL_OK && m) st = a->ops->back(a->bctx, gv, vfirst + lo_pages, m, page);
        if (st == GPOOL_OK) st = span_record(&a->spans, &a->nspans, &a->cap_spans, sp);
        if (st == GPOOL_OK) {
            *out = sp.block;
            return 1;
        }
        gp_clear_error(); /* the span was a try: the request's out-of-memory stands */
    }
    /* undo; an alias that will not unmap keeps its pages held (a dead pad) */
    give(a, sp.block, GP_TAG_CLEAN, 0);
    give(a, sp.lo, GP_TAG_CLEAN, 0);
    give(a, sp.hi, GP_TAG_CLEAN, 0);
    give(a, sp.tail, GP_TAG_CLEAN, 0);
    give(a, sp.head, GP_TAG_CLEAN, 0);
    for (int k = 0; k < 4; k++)
        if (sp.spare[k]) gp_heap_node_put(&a->heap, sp.spare[k]);
    struct gp_span dead = sp;
    dead.lo_pages = lo_mapped && a->ops->unalias(a->bctx, gv, vfirst) != GPOOL_OK ? lo_pages : 0;
    dead.hi_pages =
        hi_mapped && a->ops->unalias(a->bctx, gv, vfirst + sp.hi_at) != GPOOL_OK ? hi_pages : 0;
    if (dead.lo_pages || dead.hi_pages) {
        gp_clear_error();
        bury(a, &dead);
    }
    return 0;
}

int gp_arena_span_free_locked(gp_arena *a, gp_range *r, uintptr_t tag, uint64_t seq)
{
    size_t i = 0;
    while (i < a->nspans && a->spans[i].block != r)
        i++;
    if (i == a->nspans) return 0;
    struct gp_span sp = a->spans[i];
    a->spans[i] = a->spans[--a->nspans];
    give(a, sp.tail, tag, seq);
    give(a, sp.head, tag, seq);
    give(a, r, tag, seq);
    /* the pads carry the block's mark, not none: with stream_reuse = events only ranges marked
     * by the same streams coalesce, and bury must take each alias page back as one free range
     * (a clean pad beside the marked block is two: its hold failed, the alias addresses stayed
     * free for placement, and settle unmapped them under a live block) */
    give(a, sp.lo, tag, seq);
    give(a, sp.hi, tag, seq);
    /* the alias parts stay held until a synchronize: queued work may read through them */
    for (int k = 0; k < 4; k++)
        gp_heap_node_put(&a->heap, sp.spare[k]);
    bury(a, &sp);
    return 1;
}

void gp_arena_spans_settle_locked(gp_arena *a)
{
    for (size_t i = a->ndead; i-- > 0;) {
        struct gp_span *d = &a->dead[i];
        gp_region *g = gp_heap_region_of(&a->heap, d->base);
        size_t first = (d->base - g->base) >> g->page_shift;
        if (d->lo_pages && a->ops->unalias(a->bctx, g, first) == GPOOL_OK) {
            give(a, d->lo, GP_TAG_CLEAN, 0);
            d->lo = NULL;
            d->lo_pages = 0;
        }
        if (d->hi_pages && a->ops->unalias(a->bctx, g, first + d->hi_at) == GPOOL_OK) {
            give(a, d->hi, GP_TAG_CLEAN, 0);
            d->hi = NULL;
            d->hi_pages = 0;
        }
        if (d->lo_pages || d->hi_pages) { /* still mapped: held, tried again next time */
            gp_clear_error();
            continue;
        }
        *d = a->dead[--a->ndead];
    }
}

void gp_arena_spans_fini(gp_arena *a)
{
    for (size_t i = 0; i < a->nspans; i++)
        for (int k = 0; k < 4; k++)
            free(a->spans[i].spare[k]);
    free(a->spans);
    free(a->dead);
    a->spans = a->dead = NULL;
    a->nspans = a->ndead = 0;
}
