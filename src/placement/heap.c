/* The address-space heap (heap.h): free ranges in a treap by (size, address) for best fit
 * (lowest address among equal fits), split on allocation and coalesced on free; each free range
 * carries its streams' marks; a per-page byte count tells the arena which pages hold data.
 * Sections: range nodes, the treap, the free index and the dirty list, marks, pages, the public
 * calls. */
#include "heap.h"

#include "check.h"

#include <stdlib.h>
#include <string.h>

/* ---- range nodes ---- */

static uint32_t next_prio(gp_heap *h)
{
    h->rng = h->rng * 1664525u + 1013904223u;
    return h->rng;
}

static gp_range *node_new(gp_heap *h)
{
    gp_range *r = h->spare;
    if (r)
        h->spare = r->next;
    else if (!(r = malloc(sizeof *r)))
        return NULL;
    memset(r, 0, sizeof *r);
    r->prio = next_prio(h);
    return r;
}

static void node_put(gp_heap *h, gp_range *r)
{
    r->next = h->spare;
    h->spare = r;
}

/* ---- treap by (size, addr) ---- */

static int key_less(const gp_range *a, const gp_range *b)
{
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

static gp_range *treap_insert(gp_range *root, gp_range *n)
{
    if (!root) return n;
    if (key_less(n, root)) {
        root->left = treap_insert(root->left, n);
        if (root->left->prio > root->prio) {
            gp_range *l = root->left;
            root->left = l->right;
            l->right = root;
            return l;
        }
    } else {
        root->right = treap_insert(root->right, n);
        if (root->right->prio > root->prio) {
            gp_range *r = root->right;
            root->right = r->left;
            r->left = root;
            return r;
        }
    }
    return root;
}

static gp_range *treap_merge(gp_range *a, gp_range *b)
{
    if (!a) return b;
    if (!b) return a;
    if (a->prio > b->prio) {
        a->right = treap_merge(a->right, b);
        return a;
    }
    b->left = treap_merge(a, b->left);
    return b;
}

static gp_range *treap_remove(gp_range *root, gp_range *n)
{
    if (root == n) return treap_merge(n->left, n->right);
    if (key_less(n, root))
        root->left = treap_remove(root->left, n);
    else
        root->right = treap_remove(root->right, n);
    return root;
}

/* ---- the free index and the dirty list ---- */

static void index_add(gp_heap *h, gp_range *r)
{
    r->left = r->right = NULL;
    h->root = treap_insert(h->root, r);
    h->nfree++;
    h->free_bytes += r->size;
    if (r->nmarks) {
        r->dprev = NULL;
        r->dnext = h->dirty;
        if (h->dirty) h->dirty->dprev = r;
        h->dirty = r;
    }
}

static void index_del(gp_heap *h, gp_range *r)
{
    h->root = treap_remove(h->root, r);
    h->nfree--;
    h->free_bytes -= r->size;
    if (r->nmarks) {
        if (r->dprev)
            r->dprev->dnext = r->dnext;
        else
            h->dirty = r->dnext;
        if (r->dnext) r->dnext->dprev = r->dprev;
    }
    r->dprev = r->dnext = r->left = r->right = NULL;
}

/* ---- marks ---- */

static uintptr_t align_up(uintptr_t a, size_t align)
{
    return (a + align - 1) & ~(uintptr_t)(align - 1);
}

/* Distinct streams among the marks of a and b (a == b: of a). */
static size_t union_tags(const gp_range *a, const gp_range *b)
{
    uintptr_t t[2 * GP_MARKS];
    size_t n = 0;
    const gp_range *rs[2] = {a, b};
    for (int k = 0; k < (a == b ? 1 : 2); k++)
        for (size_t i = 0; i < rs[k]->nmarks; i++) {
            size_t j = 0;
            while (j < n && t[j] != rs[k]->marks[i].tag)
                j++;
            if (j == n) t[n++] = rs[k]->marks[i].tag;
        }
    return n;
}

int gp_heap_mergeable(const gp_heap *h, const gp_range *a, const gp_range *b)
{
    if (!a || !b || !a->is_free || !b->is_free) return 0;
    size_t u = union_tags(a, b);
    if (h->merge_any) return u <= GP_MARKS;
    return u == union_tags(a, a) && u == union_tags(b, b); /* the same streams */
}

/* Gap between the spans of two marks (0 when they meet or overlap). */
static uintptr_t span_gap(const gp_mark *x, const gp_mark *y)
{
    uintptr_t lo = x->lo > y->lo ? x->lo : y->lo, hi = x->hi < y->hi ? x->hi : y->hi;
    return lo > hi ? lo - hi : 0;
}

static void mark_absorb(gp_mark *into, const gp_mark *m)
{
    if (m->lo < into->lo) into->lo = m->lo;
    if (m->hi > into->hi) into->hi = m->hi;
    if (m->seq > into->seq) into->seq = m->seq;
}

/* Add mark m to r: spans of one stream that meet become one (the later position); with every
 * slot taken, the two nearest spans of one stream do. The caller keeps the streams of r's
 * marks and m to GP_MARKS at most. */
static void mark_add(gp_range *r, gp_mark m)
{
    for (size_t i = 0; i < r->nmarks;) {
        if (r->marks[i].tag == m.tag && span_gap(&r->marks[i], &m) == 0) {
            mark_absorb(&m, &r->marks[i]);
            r->marks[i] = r->marks[--r->nmarks];
            i = 0; /* the grown span may meet another */
            continue;
        }
        i++;
    }
    while (r->nmarks == GP_MARKS) {
        /* the nearest pair of one stream, m included (index GP_MARKS) */
        size_t bi = GP_MARKS, bj = GP_MARKS;
        uintptr_t best = UINTPTR_MAX;
        for (size_t i = 0; i <= GP_MARKS; i++)
            for (size_t j = i + 1; j <= GP_MARKS; j++) {
                const gp_mark *x = i < GP_MARKS ? &r->marks[i] : &m;
                const gp_mark *y = j < GP_MARKS ? &r->marks[j] : &m;
                if (x->tag == y->tag && span_gap(x, y) < best) {
                    best = span_gap(x, y);
                    bi = i;
                    bj = j;
                }
            }
        GP_ASSERT(bi < GP_MARKS);
        if (bj == GP_MARKS) { /* m joins one of its stream's spans */
            mark_absorb(&m, &r->marks[bi]);
            r->marks[bi] = r->marks[--r->nmarks];
        } else {
            mark_absorb(&r->marks[bi], &r->marks[bj]);
            r->marks[bj] = r->marks[--r->nmarks];
        }
    }
    r->marks[r->nmarks++] = m;
}

/* Keep r's marks to its own addresses (after it was cut). */
static void marks_clip(gp_range *r)
{
    uintptr_t lo = r->addr, hi = r->addr + r->size;
    size_t k = 0;
    for (size_t i = 0; i < r->nmarks; i++) {
        gp_mark m = r->marks[i];
        if (m.hi <= lo || m.lo >= hi) continue;
        if (m.lo < lo) m.lo = lo;
        if (m.hi > hi) m.hi = hi;
        r->marks[k++] = m;
    }
    r->nmarks = (uint8_t)k;
}

/* 1 when a page of [lo, hi) (inside r's region) is backed. */
static int backed_in(const gp_heap *h, const gp_range *r, uintptr_t lo, uintptr_t hi)
{
    const gp_region *g = &h->regions[r->region];
    size_t first = (lo - g->base) >> g->page_shift, last = (hi - 1 - g->base) >> g->page_shift;
    for (size_t p = first; p <= last; p++)
        if (g->page_phys[p]) return 1;
    return 0;
}

/* The marks of free range r that a block at [addr, addr+size) for stream tag must wait for:
 * another stream's span meeting the block on a backed page. Returns how many streams; their
 * tags in out[] (when not NULL), the lowest start in *lo and the highest end in *hi. */
static size_t blockers(const gp_heap *h, const gp_range *r, uintptr_t addr, size_t size,
                       uintptr_t tag, uintptr_t *out, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t t[GP_MARKS], end = addr + size;
    size_t n = 0;
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (size_t i = 0; i < r->nmarks; i++) {
        const gp_mark *m = &r->marks[i];
        if (m->tag == tag || m->hi <= addr || m->lo >= end) continue;
        uintptr_t a = m->lo > addr ? m->lo : addr, b = m->hi < end ? m->hi : end;
        if (!backed_in(h, r, a, b)) continue;
        if (m->lo < *lo) *lo = m->lo;
        if (m->hi > *hi) *hi = m->hi;
        size_t j = 0;
        while (j < n && t[j] != m->tag)
            j++;
        if (j == n) t[n++] = m->tag;
    }
    if (out)
        for (size_t i = 0; i < n; i++)
            out[i] = t[i];
    return n;
}

/* ---- pages ---- */

static void pages_account(gp_region *g, uintptr_t addr, size_t size, int add)
{
    uintptr_t end = addr + size;
    size_t first = (addr - g->base) >> g->page_shift;
    size_t last = (end - 1 - g->base) >> g->page_shift;
    for (size_t p = first; p <= last; p++) {
        uintptr_t lo = g->base + (p << g->page_shift), hi = lo + g->page;
        uint32_t n = (uint32_t)((hi < end ? hi : end) - (lo > addr ? lo : addr));
        if (add)
            g->page_used[p] += n;
        else
            g->page_used[p] -= n;
    }
}

/* ---- public ---- */

int gp_heap_init(gp_heap *h)
{
    memset(h, 0, sizeof *h);
    h->rng = 0x9e3779b9u;
    h->slab_floor = UINTPTR_MAX;
    h->regions = calloc(GP_HEAP_MAX_REGIONS, sizeof *h->regions);
    if (!h->regions) return -1;
    h->cap_regions = GP_HEAP_MAX_REGIONS;
    h->merge_any = 1;
    return 0;
}

void gp_heap_fini(gp_heap *h)
{
    for (size_t i = 0; i < h->nregions; i++) {
        gp_range *r = h->regions[i].first;
        while (r) {
            gp_range *n = r->next;
            free(r);
            r = n;
        }
        free(h->regions[i].page_used);
        free(h->regions[i].page_phys);
    }
    while (h->spare) {
        gp_range *n = h->spare->next;
        free(h->spare);
        h->spare = n;
    }
    free(h->regions);
    memset(h, 0, sizeof *h);
}

int gp_heap_add_region(gp_heap *h, uintptr_t base, size_t size, size_t page)
{
    if (h->nregions == h->cap_regions)
        return -1; /* the array never moves: backends keep
                        pointers to its regions */
    GP_ASSERT(page && !(page & (page - 1)) && size && size % page == 0);
    gp_region *g = &h->regions[h->nregions];
    memset(g, 0, sizeof *g);
    g->base = base;
    g->size = size;
    g->page = page;
    g->page_shift = (unsigned)__builtin_ctzll(page);
    g->npages = size / page;
    g->page_used = calloc(g->npages, sizeof *g->page_used);
    g->page_phys = calloc(g->npages, sizeof *g->page_phys);
    gp_range *r = node_new(h);
    if (!g->page_used || !g->page_phys || !r) {
        free(g->page_used);
        free(g->page_phys);
        if (r) node_put(h, r);
        return -1;
    }
    r->addr = base;
    r->size = size;
    r->is_free = 1;
    r->tag = GP_TAG_CLEAN;
    r->region = (uint16_t)h->nregions;
    g->first = r;
    index_add(h, r);
    return (int)h->nregions++;
}

gp_range *gp_heap_first(gp_heap *h, size_t ri)
{
    return h->regions[ri].first;
}

/* Cut [addr, addr+size) out of free range r (not indexed) as its own node; the pieces before
 * and after (their marks kept to their addresses) come back in *front and *back, not indexed.
 * Returns the middle node or NULL. */
static gp_range *carve(gp_heap *h, gp_range *r, uintptr_t addr, size_t size, gp_range **pfront,
                       gp_range **pback)
{
    gp_range *front = NULL, *back = NULL;
    uintptr_t end = addr + size, rend = r->addr + r->size;
    *pfront = *pback = NULL;
    if (addr > r->addr && !(front = node_new(h))) return NULL;
    if (end < rend && !(back = node_new(h))) {
        if (front) node_put(h, front);
        return NULL;
    }
    gp_region *g = &h->regions[r->region];
    if (front) {
        *front = *r;
        front->prio = next_prio(h); /* a copied priority would unbalance the treap */
        front->size = addr - r->addr;
        front->next = r;
        if (r->prev)
            r->prev->next = front;
        else
            g->first = front;
        r->prev = front;
        r->addr = addr;
        r->size -= front->size;
        marks_clip(front);
    }
    if (back) {
        *back = *r;
        back->prio = next_prio(h);
        back->addr = end;
        back->size = rend - end;
        back->prev = r;
        if (r->next) r->next->prev = back;
        r->next = back;
        r->size = size;
        marks_clip(back);
    }
    *pfront = front;
    *pback = back;
    return r;
}

/* How many of the pages [at, at+size) touches are not backed yet. */
static size_t unbacked_at(const gp_heap *h, const gp_range *r, uintptr_t at, size_t size)
{
    const gp_region *g = &h->regions[r->region];
    size_t first = (at - g->base) >> g->page_shift;
    size_t last = (at + size - 1 - g->base) >> g->page_shift, n = 0;
    for (size_t p = first; p <= last; p++)
        n += !g->page_phys[p];
    return n;
}

/* The lowest aligned place for size bytes in free range r that stream tag may use (any: marks
 * ignored): past the other streams' spans it would meet on backed pages. 1 when one fits. */
static int place_low(const gp_heap *h, const gp_range *r, size_t size, size_t align, uintptr_t tag,
                     int any, uintptr_t *at)
{
    uintptr_t end = r->addr + r->size, a = align_up(r->addr, align), lo, hi;
    for (int i = 0; i <= GP_MARKS; i++) { /* each step passes a span for good */
        if (a < r->addr || a > end || end - a < size) return 0;
        if (any || !r->nmarks || !blockers(h, r, a, size, tag, NULL, &lo, &hi)) {
            *at = a;
            return 1;
        }
        a = align_up(hi, align);
    }
    return 0;
}

/* Bytes a free range needs to hold size bytes at align (its worst-case padding included). */
static size_t padded(size_t size, size_t align)
{
    return size + (align > GP_MIN_ALIGN ? align - GP_MIN_ALIGN : 0);
}

#define GP_FIT_CANDIDATES 16
#define GP_FIT_VISITS     256 /* bounds the search past ranges the request may not use */

typedef struct fit_search {
    const gp_heap *h;
    size_t want, size, align;
    uintptr_t tag, below;
    int any;
    unsigned visits;
    int n;
    int cached; /* index of the first candidate on backed pages only, or -1 */
    gp_range *c[GP_FIT_CANDIDATES];
    uintptr_t at[GP_FIT_CANDIDATES];
    int on_data; /* 1: the answer is a small hole in pages that hold data (small_hole) */
} fit_search;

/* 1 when free range r is a hole smaller than a page and every page [at, at+size) touches
 * holds allocated bytes already: a slab placed there keeps no page (nor any multi-page
 * handle) mapped that is not kept already, and splits no free range a large block could use
 * (with larger holes allowed, x32 unet-train went from 35 to 72 pages above the limit). */
static int small_hole(const gp_heap *h, const gp_range *r, uintptr_t at, size_t size)
{
    const gp_region *g = &h->regions[r->region];
    if (r->size >= g->page) return 0;
    size_t first = (at - g->base) >> g->page_shift;
    size_t last = (at + size - 1 - g->base) >> g->page_shift;
    for (size_t p = first; p <= last; p++)
        if (!g->page_used[p]) return 0;
    return 1;
}

/* Collect, in (size, addr) order, up to GP_FIT_CANDIDATES free ranges of at least want bytes
 * that start below f->below and have a place the request may use, stopping at the first whose
 * place needs no fresh page (the search's answer: walking on to more candidates only touched
 * more tree nodes, a cache miss each in a heap of 10^5 free ranges). */
static void collect_fits(fit_search *f, gp_range *n)
{
    if (!n || f->n >= GP_FIT_CANDIDATES || !f->visits || f->cached >= 0) return;
    if (n->size >= f->want) collect_fits(f, n->left);
    if (f->n >= GP_FIT_CANDIDATES || !f->visits || f->cached >= 0) return;
    if (n->size >= f->want && n->addr < f->below) {
        f->visits--;
        if (place_low(f->h, n, f->size, f->align, f->tag, f->any, &f->at[f->n])) {
            uintptr_t at = f->at[f->n];
            if (f->on_data ? small_hole(f->h, n, at, f->size) : !unbacked_at(f->h, n, at, f->size))
                f->cached = f->n;
            f->c[f->n++] = n;
            if (f->cached >= 0) return;
        }
    }
    collect_fits(f, n->right);
}

/* Best fit below `below`, preferring among the few smallest fits one whose pages are all
 * backed already (no fresh page needed): cached memory is reused before fresh pages are mapped,
 * so a repeated workload settles into its cache (no driver calls) instead of drifting. */
static gp_range *fit_below(const gp_heap *h, size_t want, size_t size, size_t align, uintptr_t tag,
                           int any, uintptr_t below, uintptr_t *at)
{
    fit_search f = {h, want, size, align, tag, below, any, GP_FIT_VISITS, 0, -1, {0}, {0}, 0};
    collect_fits(&f, h->root);
    if (!f.n) return NULL;
    int i =
        f.cached >= 0 ? f.cached : 0; /* else plain best fit: every candidate needs fresh pages */
    *at = f.at[i];
    return f.c[i];
}

/* The best fit in a small hole of pages that hold data (NULL: none among the smallest fits). */
static gp_range *hole_fit(const gp_heap *h, size_t size, size_t align, uintptr_t tag, uintptr_t *at)
{
    fit_search f = {h, padded(size, align), size, align, tag, UINTPTR_MAX,
                    0, GP_FIT_VISITS,       0,    -1,    {0}, {0},
                    1};
    collect_fits(&f, h->root);
    if (f.cached < 0) return NULL;
    *at = f.at[f.cached];
    return f.c[f.cached];
}

/* Below the slab zone first: holes between slabs are for slabs, so that zone stays put. */
static gp_range *find_fit(const gp_heap *h, size_t want, size_t size, size_t align, uintptr_t tag,
                          int any, uintptr_t *at)
{
    gp_range *r = fit_below(h, want, size, align, tag, any, h->slab_floor, at);
    return r ? r : fit_below(h, want, size, align, tag, any, UINTPTR_MAX, at);
}

static void coalesce_and_index(gp_heap *h, gp_range *r);

/* Take [addr, addr+size) out of free range best (indexed) as a block of stream tag. */
static gp_range *take_from(gp_heap *h, gp_range *best, uintptr_t addr, size_t size, uintptr_t tag,
                           int *out_of_nodes)
{
    gp_range *front, *back;
    index_del(h, best);
    gp_range *r = carve(h, best, addr, size, &front, &back);
    if (!r) {
        index_add(h, best);
        *out_of_nodes = 1;
        return NULL;
    }
    r->is_free = 0;
    r->nmarks = 0;
    r->tag = tag;
    r->aux = NULL;
    pages_account(&h->regions[r->region], r->addr, r->size, 1);
    /* a piece whose marks shrank may now coalesce with its outer neighbour */
    if (front) coalesce_and_index(h, front);
    if (back) coalesce_and_index(h, back);
    return r;
}

/* A claim's wait pays when it spares fresh pages; when the place the request may use now
 * cuts a cached run (both places on fresh pages: a range) this many times larger than the best
 * place: that cuts into the large free space one stream's layout keeps whole (multi-stream
 * traces, issue 15); or when the place it may use now is on the frontier, the last backed pages
 * before unbacked ones, and the best place is on backed pages too (at_frontier). A stream's own
 * cached memory of about the request's size is still used without a wait. */
#define GP_CLAIM_SPLIT 16

/* Bytes of free range r on the run of backed pages around address at (its cached part there). */
/* The last page of free range r's run of backed pages around address at. */
static size_t run_last_page(const gp_region *g, const gp_range *r, uintptr_t at)
{
    size_t last = (r->addr + r->size - 1 - g->base) >> g->page_shift;
    size_t hi = (at - g->base) >> g->page_shift;
    while (hi < last && g->page_phys[hi + 1])
        hi++;
    return hi;
}

static size_t cached_run(const gp_heap *h, const gp_range *r, uintptr_t at)
{
    const gp_region *g = &h->regions[r->region];
    size_t first = (r->addr - g->base) >> g->page_shift;
    size_t lo = (at - g->base) >> g->page_shift, hi = run_last_page(g, r, at);
    while (lo > first && g->page_phys[lo - 1])
        lo--;
    uintptr_t a = g->base + (lo << g->page_shift), b = g->base + ((hi + 1) << g->page_shift);
    if (a < r->addr) a = r->addr;
    if (b > r->addr + r->size) b = r->addr + r->size;
    return b - a;
}

/* 1 when address at of free range r is on the frontier of the backed memory: r goes on, past
 * the run of backed pages around at, into pages that are not backed (r is the wilderness that
 * grows when nothing else fits). A block placed there uses the frontier's cached bytes, so a
 * later request that fits no hole maps a fresh page sooner; where the best place is a cached
 * hole other streams' frees left, waiting for them keeps the frontier whole, as dlmalloc keeps
 * its top chunk for last (batch-decode@2s: a KV cache placed at the frontier while a hole of
 * 7.5 MiB waited for a stream whose work was long done; the layout never recovered). Only the
 * whole-range test pays: asking instead that the block reach the last backed page(s) of the
 * run met the goal on fewer multi-stream variants (44-48 of 48 against 48 at every lag). */
static int at_frontier(const gp_heap *h, const gp_range *r, uintptr_t at)
{
    const gp_region *g = &h->regions[r->region];
    return run_last_page(g, r, at) < (r->addr + r->size - 1 - g->base) >> g->page_shift;
}

size_t gp_heap_claim(gp_heap *h, size_t size, size_t align, uintptr_t tag, uintptr_t *from)
{
    size_t want = padded(size, align);
    if (want < size || !h->dirty) return 0;
    uintptr_t at_m = 0, at_b = 0, lo, hi;
    gp_range *mine = find_fit(h, want, size, align, tag, 0, &at_m);
    gp_range *best = find_fit(h, want, size, align, tag, 1, &at_b);
    if (!best || (best == mine && at_b == at_m)) return 0;
    int fresh_m = !mine || unbacked_at(h, mine, at_m, size) != 0;
    int fresh_b = unbacked_at(h, best, at_b, size) != 0;
    int spares = fresh_m && !fresh_b;
    int tighter = mine && fresh_m == fresh_b &&
                  best->size <= (fresh_m ? mine->size : cached_run(h, mine, at_m)) / GP_CLAIM_SPLIT;
    int frontier = mine && !fresh_m && !fresh_b && at_frontier(h, mine, at_m);
    if (!spares && !tighter && !frontier) return 0;
    return blockers(h, best, at_b, size, tag, from, &lo, &hi);
}

static uintptr_t top_place(const gp_heap *h, const gp_range *n, size_t size, size_t align,
                           uintptr_t tag);

#define GP_FEWEST_VISITS 4096 /* bounds the pressure search (under the arena lock) */

typedef struct fewest_search {
    const gp_heap *h;
    size_t want, size, align;
    uintptr_t tag;
    unsigned visits;
    gp_range *best;
    uintptr_t at;
    size_t fresh;
} fewest_search;

/* Consider the place at in free range n: fewer fresh pages win, then the smaller range. */
static void fewest_consider(fewest_search *f, gp_range *n, uintptr_t at)
{
    size_t u = unbacked_at(f->h, n, at, f->size);
    if (!f->best || u < f->fresh || (u == f->fresh && n->size < f->best->size)) {
        f->best = n;
        f->at = at;
        f->fresh = u;
    }
}

static void collect_fewest(fewest_search *f, gp_range *n)
{
    while (n && f->visits && f->fresh) {
        if (n->size < f->want) { /* too small, and so is its left subtree */
            n = n->right;
            continue;
        }
        f->visits--;
        uintptr_t lo;
        if (place_low(f->h, n, f->size, f->align, f->tag, 0, &lo)) fewest_consider(f, n, lo);
        uintptr_t hi = top_place(f->h, n, f->size, f->align, f->tag);
        if (hi) fewest_consider(f, n, hi);
        collect_fewest(f, n->left);
        n = n->right;
    }
}

/* Where gp_heap_take would place size bytes (aligned) for stream tag: the range and the place
 * in it (NULL: nowhere); *fresh its unbacked pages. */
static gp_range *choose(const gp_heap *h, size_t want, size_t size, size_t align, uintptr_t tag,
                        uintptr_t *at, size_t *fresh)
{
    gp_range *best = find_fit(h, want, size, align, tag, 0, at);
    *fresh = best ? unbacked_at(h, best, *at, size) : 0;
    if (best && h->fewest_pages && *fresh) {
        fewest_search f = {h, want, size, align, tag, GP_FEWEST_VISITS, best, *at, *fresh};
        collect_fewest(&f, h->root);
        best = f.best;
        *at = f.at;
        *fresh = f.fresh;
    }
    return best;
}

gp_range *gp_heap_take(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes)
{
    GP_ASSERT(size && size % GP_MIN_ALIGN == 0 && align >= GP_MIN_ALIGN && !(align & (align - 1)));
    size_t want = padded(size, align);
    *out_of_nodes = 0;
    if (want < size) return NULL;
    uintptr_t at = 0;
    size_t fresh;
    gp_range *best = choose(h, want, size, align, tag, &at, &fresh);
    if (!best) return NULL;
    return take_from(h, best, at, size, tag, out_of_nodes);
}

size_t gp_heap_fresh_pages(const gp_heap *h, size_t size, size_t align, uintptr_t tag)
{
    size_t want = padded(size, align), fresh;
    uintptr_t at = 0;
    if (want < size || !choose(h, want, size, align, tag, &at, &fresh)) return SIZE_MAX;
    return fresh;
}

#define GP_TOP_VISITS 256 /* bounds the search for the highest hole (under the arena lock) */

/* Where size bytes aligned to align end highest in free range n for stream tag (below the
 * other streams' spans they would meet on backed pages), or 0 if they do not fit. */
static uintptr_t top_place(const gp_heap *h, const gp_range *n, size_t size, size_t align,
                           uintptr_t tag)
{
    if (n->size < size) return 0;
    uintptr_t addr = (n->addr + n->size - size) & ~(uintptr_t)(align - 1), lo, hi;
    for (int i = 0; i <= GP_MARKS; i++) {
        if (addr < n->addr) return 0;
        if (!n->nmarks || !blockers(h, n, addr, size, tag, NULL, &lo, &hi)) return addr;
        if (lo < n->addr || lo - n->addr < size) return 0;
        addr = (lo - size) & ~(uintptr_t)(align - 1);
    }
    return 0;
}

/* The free range in subtree n where size bytes (aligned) fit at the highest address; visits
 * at most *budget ranges that are large enough (then the best so far stands). */
static void top_fit(const gp_heap *h, gp_range *n, size_t size, size_t align, uintptr_t tag,
                    gp_range **best, uintptr_t *at, unsigned *budget)
{
    while (n && *budget) {
        if (n->size < size) { /* too small, and so is its left subtree */
            n = n->right;
            continue;
        }
        (*budget)--;
        uintptr_t addr = top_place(h, n, size, align, tag);
        if (addr && addr > *at) {
            *best = n;
            *at = addr;
        }
        top_fit(h, n->right, size, align, tag, best, at, budget); /* larger ones, any address */
        n = n->left;                                              /* smaller ones that may fit */
    }
}

gp_range *gp_heap_take_top(gp_heap *h, size_t size, size_t align, uintptr_t tag, int zone,
                           int *out_of_nodes)
{
    *out_of_nodes = 0;
    gp_range *best = NULL;
    uintptr_t at = 0;
    unsigned budget = GP_TOP_VISITS;
    top_fit(h, h->root, size, align, tag, &best, &at, &budget);
    if (!best) return NULL;
    if (zone && unbacked_at(h, best, at, size)) {
        /* no room left in the slab zone: a small hole between blocks before a fresh page */
        uintptr_t in_hole = 0;
        gp_range *hole = hole_fit(h, size, align, tag, &in_hole);
        if (hole) return take_from(h, hole, in_hole, size, tag, out_of_nodes);
    }
    gp_range *r = take_from(h, best, at, size, tag, out_of_nodes);
    if (r && zone && at < h->slab_floor) h->slab_floor = at;
    return r;
}

/* Merge free, unindexed r with mergeable free neighbours (their marks joined), then index it. */
static void coalesce_and_index(gp_heap *h, gp_range *r)
{
    gp_region *g = &h->regions[r->region];
    while (gp_heap_mergeable(h, r->prev, r)) {
        gp_range *p = r->prev;
        index_del(h, p);
        for (size_t i = 0; i < p->nmarks; i++)
            mark_add(r, p->marks[i]);
        r->addr = p->addr;
        r->size += p->size;
        r->prev = p->prev;
        if (p->prev)
            p->prev->next = r;
        else
            g->first = r;
        node_put(h, p);
    }
    while (gp_heap_mergeable(h, r, r->next)) {
        gp_range *n = r->next;
        index_del(h, n);
        for (size_t i = 0; i < n->nmarks; i++)
            mark_add(r, n->marks[i]);
        r->size += n->size;
        r->next = n->next;
        if (n->next) n->next->prev = r;
        node_put(h, n);
    }
    if (r->addr <= h->slab_floor && h->slab_floor - r->addr < r->size)
        /* the lowest slab-zone block is gone: the zone now starts at the next range up */
        h->slab_floor = r->next ? r->addr + r->size : UINTPTR_MAX;
    index_add(h, r);
}

void gp_heap_give(gp_heap *h, gp_range *r, uintptr_t tag, uint64_t seq)
{
    GP_ASSERT(!r->is_free);
    pages_account(&h->regions[r->region], r->addr, r->size, 0);
    r->is_free = 1;
    r->tag = GP_TAG_CLEAN;
    r->aux = NULL;
    r->nmarks = 0;
    if (tag != GP_TAG_CLEAN) {
        r->marks[0] = (gp_mark){tag, seq, r->addr, r->addr + r->size};
        r->nmarks = 1;
    }
    coalesce_and_index(h, r);
}

void gp_heap_clean(gp_heap *h, uintptr_t tag, uint64_t upto)
{
    gp_heap_retag(h, tag, upto, GP_TAG_CLEAN, 0);
}

void gp_heap_retag(gp_heap *h, uintptr_t tag, uint64_t upto, uintptr_t to, uint64_t to_seq)
{
    if (tag == GP_TAG_CLEAN || tag == to) return;
    gp_range *r = h->dirty;
    while (r) {
        gp_range *next = r->dnext;
        size_t hit = 0;
        for (size_t i = 0; i < r->nmarks; i++)
            hit += r->marks[i].tag == tag && r->marks[i].seq <= upto;
        if (hit) {
            index_del(h, r);
            gp_mark moved[GP_MARKS];
            size_t nm = 0, k = 0;
            for (size_t i = 0; i < r->nmarks; i++) {
                if (r->marks[i].tag == tag && r->marks[i].seq <= upto)
                    moved[nm++] = r->marks[i];
                else
                    r->marks[k++] = r->marks[i];
            }
            r->nmarks = (uint8_t)k;
            for (size_t i = 0; to != GP_TAG_CLEAN && i < nm; i++) {
                moved[i].tag = to;
                moved[i].seq = to_seq;
                mark_add(r, moved[i]);
            }
            /* coalescing may absorb `next`; restart from the list head in that case */
            int absorbs = next == r->prev || next == r->next;
            coalesce_and_index(h, r);
            if (absorbs) next = h->dirty;
        }
        r = next;
    }
}

size_t gp_heap_dirty_tags(const gp_heap *h, uintptr_t *out, size_t max)
{
    size_t n = 0;
    for (const gp_range *r = h->dirty; r && n < max; r = r->dnext)
        for (size_t i = 0; i < r->nmarks && n < max; i++) {
            size_t j = 0;
            while (j < n && out[j] != r->marks[i].tag)
                j++;
            if (j == n) out[n++] = r->marks[i].tag;
        }
    return n;
}

size_t gp_heap_largest_free(const gp_heap *h)
{
    gp_range *r = h->root;
    while (r && r->right)
        r = r->right;
    return r ? r->size : 0;
}

size_t gp_heap_largest_tagged(gp_heap *h, uintptr_t tag)
{
    size_t best = 0;
    for (const gp_range *r = h->dirty; r; r = r->dnext)
        for (size_t i = 0; i < r->nmarks; i++)
            if (r->marks[i].tag == tag && r->marks[i].hi - r->marks[i].lo > best)
                best = r->marks[i].hi - r->marks[i].lo;
    return best;
}

void gp_heap_pin_dirty(gp_heap *h, int pin)
{
    for (gp_range *r = h->dirty; r; r = r->dnext)
        pages_account(&h->regions[r->region], r->addr, r->size, pin);
}

/* Page index of address a in region g. */
static size_t page_of(const gp_region *g, uintptr_t a)
{
    return (a - g->base) >> g->page_shift;
}

/* Clean free range r (indexed) may be touched by work queued on stream tag. Only backed
 * pages can hold data that work touches: when r's pages between its first and its last backed
 * run are all unbacked (the region's unmapped top, between the blocks and the slab zone), that
 * middle stays unmarked, so the other streams keep the unmapped address space for fresh pages;
 * r's head and tail runs wait. */
static void mark_backed(gp_heap *h, gp_range *r, uintptr_t tag, uint64_t seq)
{
    const gp_region *g = &h->regions[r->region];
    size_t first = page_of(g, r->addr), last = page_of(g, r->addr + r->size - 1), p;
    uintptr_t end = r->addr + r->size;
    size_t lo = first, hi = last; /* the unbacked middle: pages (lo, hi) exclusive */
    while (lo <= last && g->page_phys[lo])
        lo++;
    while (hi >= lo && hi > first && g->page_phys[hi])
        hi--;
    gp_mark m[2];
    size_t n = 0;
    if (lo > last) { /* every page backed */
        m[n++] = (gp_mark){tag, seq, r->addr, end};
    } else {
        for (p = lo; p <= hi && !g->page_phys[p]; p++)
            ;
        if (p <= hi) { /* backed islands in the middle: the whole range waits */
            m[n++] = (gp_mark){tag, seq, r->addr, end};
        } else { /* [mid_lo, mid_hi) is on unbacked pages only */
            uintptr_t mid_lo = lo == first ? r->addr : g->base + (lo << g->page_shift);
            uintptr_t mid_hi =
                hi == last && !g->page_phys[last] ? end : g->base + ((hi + 1) << g->page_shift);
            if (mid_lo > r->addr) m[n++] = (gp_mark){tag, seq, r->addr, mid_lo};
            if (mid_hi < end) m[n++] = (gp_mark){tag, seq, mid_hi, end};
        }
    }
    if (!n) return;
    index_del(h, r);
    for (size_t i = 0; i < n; i++)
        mark_add(r, m[i]);
    index_add(h, r);
}

void gp_heap_retag_clean(gp_heap *h, uintptr_t tag, uint64_t seq)
{
    for (size_t i = 0; i < h->nregions; i++)
        for (gp_range *r = h->regions[i].first; r; r = r->next)
            if (r->is_free && !r->nmarks) mark_backed(h, r, tag, seq);
}

gp_range *gp_heap_take_at(gp_heap *h, uintptr_t addr, size_t size, uintptr_t tag, int *out_of_nodes)
{
    gp_region *g = gp_heap_region_of(h, addr);
    if (!g) return NULL;
    GP_HEAP_FOREACH(h, (size_t)(g - h->regions), r)
    {
        if (addr - r->addr >= r->size) continue;
        if (!r->is_free || addr + size > r->addr + r->size) return NULL;
        return take_from(h, r, addr, size, tag, out_of_nodes);
    }
    return NULL;
}

int gp_heap_unbacked_run(const gp_heap *h, size_t npages, size_t *region, size_t *first)
{
    for (size_t i = 0; i < h->nregions; i++) {
        const gp_region *g = &h->regions[i];
        for (const gp_range *r = g->first; r; r = r->next) {
            /* marks do not matter: queued work touches no unbacked page */
            if (!r->is_free || r->size < npages * g->page) continue;
            size_t p = (r->addr - g->base + g->page - 1) >> g->page_shift;
            size_t end = (r->addr + r->size - g->base) >> g->page_shift, run = 0;
            for (; p < end; p++) {
                run = g->page_phys[p] ? 0 : run + 1;
                if (run == npages) {
                    *region = i;
                    *first = p + 1 - npages;
                    return 1;
                }
            }
        }
    }
    return 0;
}

gp_range *gp_heap_node(gp_heap *h)
{
    return node_new(h);
}

void gp_heap_node_put(gp_heap *h, gp_range *r)
{
    node_put(h, r);
}
