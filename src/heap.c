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

/* ---- tags ---- */

static gp_tag_index *tag_find(gp_heap *h, uintptr_t tag)
{
    for (size_t i = 0; i < h->ntags; i++)
        if (h->tags[i].tag == tag) return &h->tags[i];
    return NULL;
}

static gp_tag_index *tag_get(gp_heap *h, uintptr_t tag)
{
    gp_tag_index *t = tag_find(h, tag);
    if (t) return t;
    for (size_t i = 1; i < h->ntags; i++) /* reuse an empty slot */
        if (h->tags[i].count == 0) {
            h->tags[i].tag = tag;
            return &h->tags[i];
        }
    if (h->ntags == h->cap_tags) {
        size_t cap = h->cap_tags ? h->cap_tags * 2 : 8;
        gp_tag_index *nt = realloc(h->tags, cap * sizeof *nt);
        if (!nt) return NULL;
        h->tags = nt;
        h->cap_tags = cap;
    }
    t = &h->tags[h->ntags++];
    memset(t, 0, sizeof *t);
    t->tag = tag;
    return t;
}

/* Index a free range under its tag (t must be tag_get(h, r->tag)). */
static void index_add(gp_heap *h, gp_tag_index *t, gp_range *r)
{
    r->left = r->right = NULL;
    t->root = treap_insert(t->root, r);
    t->count++;
    h->free_bytes += r->size;
    if (r->tag != GP_TAG_CLEAN) {
        r->dprev = NULL;
        r->dnext = t->dirty;
        if (t->dirty) t->dirty->dprev = r;
        t->dirty = r;
    }
}

static void index_del(gp_heap *h, gp_range *r)
{
    gp_tag_index *t = tag_find(h, r->tag);
    t->root = treap_remove(t->root, r);
    t->count--;
    h->free_bytes -= r->size;
    if (r->tag != GP_TAG_CLEAN) {
        if (r->dprev)
            r->dprev->dnext = r->dnext;
        else
            t->dirty = r->dnext;
        if (r->dnext) r->dnext->dprev = r->dprev;
    }
    r->dprev = r->dnext = r->left = r->right = NULL;
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
    if (tag_get(h, GP_TAG_CLEAN)) return 0;
    free(h->regions);
    return -1;
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
    free(h->tags);
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
    gp_tag_index *clean = tag_find(h, GP_TAG_CLEAN);
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
    index_add(h, clean, r);
    return (int)h->nregions++;
}

gp_range *gp_heap_first(gp_heap *h, size_t ri)
{
    return h->regions[ri].first;
}

/* Split r (not indexed) so that [addr, addr+size) becomes its own node; the pieces before
 * and after go back to the index with r's tag. Returns the middle node or NULL. */
static gp_range *carve(gp_heap *h, gp_range *r, uintptr_t addr, size_t size)
{
    gp_range *front = NULL, *back = NULL;
    uintptr_t end = addr + size, rend = r->addr + r->size;
    if (addr > r->addr && !(front = node_new(h))) return NULL;
    if (end < rend && !(back = node_new(h))) {
        if (front) node_put(h, front);
        return NULL;
    }
    gp_tag_index *t = tag_find(h, r->tag);
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
        index_add(h, t, front);
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
        index_add(h, t, back);
    }
    return r;
}

/* Collect, in (size, addr) order, up to max free ranges of at least want bytes that start
 * below below. */
static void collect_fits(gp_range *n, size_t want, uintptr_t below, gp_range **out, int *count,
                         int max)
{
    if (!n || *count >= max) return;
    if (n->size >= want) collect_fits(n->left, want, below, out, count, max);
    if (*count >= max) return;
    if (n->size >= want && n->addr < below) out[(*count)++] = n;
    collect_fits(n->right, want, below, out, count, max);
}

/* How many of the pages [addr, addr+size) would touch are not backed yet. */
static size_t unbacked(const gp_heap *h, const gp_range *r, size_t size, size_t align)
{
    const gp_region *g = &h->regions[r->region];
    uintptr_t addr = (r->addr + align - 1) & ~(uintptr_t)(align - 1);
    size_t first = (addr - g->base) >> g->page_shift;
    size_t last = (addr + size - 1 - g->base) >> g->page_shift, n = 0;
    for (size_t p = first; p <= last; p++)
        n += !g->page_phys[p];
    return n;
}

#define GP_FIT_CANDIDATES 16

/* Best fit in one index, preferring among the few smallest fits one whose pages are all
 * backed already (no fresh page needed): cached memory is reused before fresh pages are mapped, so
 * a repeated workload settles into its cache (no driver calls) instead of drifting. */
static gp_range *fit_in(const gp_heap *h, gp_range *root, size_t want, size_t size, size_t align,
                        uintptr_t below)
{
    gp_range *c[GP_FIT_CANDIDATES];
    int n = 0;
    collect_fits(root, want, below, c, &n, GP_FIT_CANDIDATES);
    for (int i = 0; i < n; i++)
        if (!unbacked(h, c[i], size, align)) return c[i];
    return n ? c[0] : NULL; /* plain best fit when every candidate needs fresh pages */
}

/* Take [addr, addr+size) out of free range best (unindexed by the caller's lookup) as a block
 * of stream tag. */
static gp_range *take_from(gp_heap *h, gp_range *best, uintptr_t addr, size_t size, uintptr_t tag,
                           int *out_of_nodes)
{
    index_del(h, best);
    gp_range *r = carve(h, best, addr, size);
    if (!r) {
        index_add(h, tag_find(h, best->tag), best);
        *out_of_nodes = 1;
        return NULL;
    }
    r->is_free = 0;
    r->tag = tag;
    r->seq = 0;
    r->aux = NULL;
    pages_account(&h->regions[r->region], r->addr, r->size, 1);
    return r;
}

/* 1 when range a is a better place than b (NULL) for the request: cached pages first, then the
 * smaller range. */
static int better_fit(const gp_heap *h, const gp_range *a, const gp_range *b, size_t size,
                      size_t align)
{
    if (!b) return 1;
    int af = unbacked(h, a, size, align) != 0, bf = unbacked(h, b, size, align) != 0;
    if (af != bf) return bf;
    return a->size < b->size;
}

/* Best fit over the stream's own pending ranges and the clean ones together (a range on cached
 * pages before one that needs fresh pages, then the smaller one). A tie goes to the
 * stream's own range (reusing it keeps the clean space open for the other streams), but a
 * larger pending range is not split while a clean one fits better: that left exact clean holes
 * empty and fragmented the multi-stream traces (issue 15, section 3). */
static gp_range *find_fit(gp_heap *h, size_t want, size_t size, size_t align, uintptr_t tag,
                          uintptr_t below)
{
    gp_range *own = NULL;
    if (tag != GP_TAG_CLEAN) {
        gp_tag_index *t = tag_find(h, tag);
        own = t ? fit_in(h, t->root, want, size, align, below) : NULL;
    }
    gp_range *clean = fit_in(h, tag_find(h, GP_TAG_CLEAN)->root, want, size, align, below);
    if (!own || !clean) return own ? own : clean;
    /* as fit_in: cached pages first, then the smaller range */
    int own_fresh = unbacked(h, own, size, align), clean_fresh = unbacked(h, clean, size, align);
    if (own_fresh != clean_fresh) return own_fresh ? clean : own;
    return clean->size < own->size ? clean : own;
}

/* 1 when a better fit for a request of stream tag (pages cached first, then the smaller range)
 * is a range pending on another stream than the best own-or-clean fit: *from gets that stream. */
int gp_heap_foreign_fit(gp_heap *h, size_t size, size_t align, uintptr_t tag, uintptr_t *from)
{
    size_t want = size + (align > GP_MIN_ALIGN ? align - GP_MIN_ALIGN : 0);
    if (want < size) return 0;
    uintptr_t below = h->slab_floor;
    gp_range *mine = find_fit(h, want, size, align, tag, below);
    if (!mine) mine = find_fit(h, want, size, align, tag, below = UINTPTR_MAX);
    gp_range *best = NULL;
    for (size_t i = 1; i < h->ntags; i++) {
        gp_tag_index *t = &h->tags[i];
        if (t->tag == tag || !t->count) continue;
        gp_range *c = fit_in(h, t->root, want, size, align, below);
        if (c && better_fit(h, c, best ? best : mine, size, align)) best = c;
    }
    if (!best) return 0;
    if (mine && !unbacked(h, mine, size, align)) return 0; /* only to spare fresh pages */
    if (unbacked(h, best, size, align)) return 0;
    *from = best->tag;
    return 1;
}

gp_range *gp_heap_take(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes)
{
    GP_ASSERT(size && size % GP_MIN_ALIGN == 0 && align >= GP_MIN_ALIGN && !(align & (align - 1)));
    size_t want = size + (align > GP_MIN_ALIGN ? align - GP_MIN_ALIGN : 0);
    *out_of_nodes = 0;
    if (want < size) return NULL;
    /* below the slab zone first: holes between slabs are for slabs, so that zone stays put */
    gp_range *best = find_fit(h, want, size, align, tag, h->slab_floor);
    if (!best) best = find_fit(h, want, size, align, tag, UINTPTR_MAX);
    if (!best) return NULL;
    uintptr_t addr = (best->addr + align - 1) & ~(uintptr_t)(align - 1);
    return take_from(h, best, addr, size, tag, out_of_nodes);
}

#define GP_TOP_VISITS 256 /* bounds the search for the highest hole (under the arena lock) */

/* Where size bytes aligned to align end at the top of range n, or 0 if they do not fit. */
static uintptr_t top_place(const gp_range *n, size_t size, size_t align)
{
    if (n->size < size) return 0;
    uintptr_t addr = (n->addr + n->size - size) & ~(uintptr_t)(align - 1);
    return addr >= n->addr ? addr : 0;
}

/* The free range in subtree n where size bytes (aligned) fit at the highest address; visits
 * at most *budget ranges that are large enough (then the best so far stands). */
static void top_fit(gp_range *n, size_t size, size_t align, gp_range **best, uintptr_t *at,
                    unsigned *budget)
{
    while (n && *budget) {
        if (n->size < size) { /* too small, and so is its left subtree */
            n = n->right;
            continue;
        }
        (*budget)--;
        uintptr_t addr = top_place(n, size, align);
        if (addr && addr > *at) {
            *best = n;
            *at = addr;
        }
        top_fit(n->right, size, align, best, at, budget); /* larger ranges, any address */
        n = n->left;                                      /* smaller ones that may still fit */
    }
}

gp_range *gp_heap_take_top(gp_heap *h, size_t size, size_t align, uintptr_t tag, int *out_of_nodes)
{
    *out_of_nodes = 0;
    gp_range *best = NULL;
    uintptr_t at = 0;
    unsigned budget = GP_TOP_VISITS;
    top_fit(tag_find(h, GP_TAG_CLEAN)->root, size, align, &best, &at, &budget);
    gp_tag_index *t = tag != GP_TAG_CLEAN ? tag_find(h, tag) : NULL;
    budget = GP_TOP_VISITS;
    if (t) top_fit(t->root, size, align, &best, &at, &budget);
    if (!best) return NULL;
    gp_range *r = take_from(h, best, at, size, tag, out_of_nodes);
    if (r && at < h->slab_floor) h->slab_floor = at;
    return r;
}

static int can_merge(const gp_range *n, uintptr_t tag)
{
    return n && n->is_free && n->tag == tag;
}

/* Merge free, unindexed r with mergeable free neighbours, then index it. */
static void coalesce_and_index(gp_heap *h, gp_range *r)
{
    gp_region *g = &h->regions[r->region];
    while (can_merge(r->prev, r->tag)) {
        gp_range *p = r->prev;
        index_del(h, p);
        if (p->seq > r->seq) r->seq = p->seq;
        r->addr = p->addr;
        r->size += p->size;
        r->prev = p->prev;
        if (p->prev)
            p->prev->next = r;
        else
            g->first = r;
        node_put(h, p);
    }
    while (can_merge(r->next, r->tag)) {
        gp_range *n = r->next;
        index_del(h, n);
        if (n->seq > r->seq) r->seq = n->seq;
        r->size += n->size;
        r->next = n->next;
        if (n->next) n->next->prev = r;
        node_put(h, n);
    }
    if (r->addr <= h->slab_floor && h->slab_floor - r->addr < r->size)
        /* the lowest slab-zone block is gone: the zone now starts at the next range up */
        h->slab_floor = r->next ? r->addr + r->size : UINTPTR_MAX;
    gp_tag_index *t = tag_get(h, r->tag);
    if (!t) { /* no memory for a new tag slot: fall back to the clean index, which is
                 only safe because gp_heap_give callers synchronise such tags first */
        r->tag = GP_TAG_CLEAN;
        t = tag_find(h, GP_TAG_CLEAN);
    }
    index_add(h, t, r);
}

void gp_heap_give(gp_heap *h, gp_range *r, uintptr_t tag, uint64_t seq)
{
    GP_ASSERT(!r->is_free);
    pages_account(&h->regions[r->region], r->addr, r->size, 0);
    r->is_free = 1;
    r->tag = tag;
    r->seq = seq;
    r->aux = NULL;
    coalesce_and_index(h, r);
}

void gp_heap_clean(gp_heap *h, uintptr_t tag, uint64_t upto)
{
    gp_heap_retag(h, tag, upto, GP_TAG_CLEAN, 0);
}

void gp_heap_retag(gp_heap *h, uintptr_t tag, uint64_t upto, uintptr_t to, uint64_t to_seq)
{
    /* make sure the target index exists first: creating it may move h->tags */
    if (tag == GP_TAG_CLEAN || tag == to || !tag_get(h, to)) return;
    gp_tag_index *t = tag_find(h, tag);
    if (!t) return;
    gp_range *r = t->dirty;
    while (r) {
        gp_range *next = r->dnext;
        if (r->seq <= upto) {
            index_del(h, r);
            r->tag = to;
            r->seq = to == GP_TAG_CLEAN ? 0 : to_seq;
            /* coalescing may absorb `next`; restart from the list head in that case */
            gp_range *nb_prev = r->prev, *nb_next = r->next;
            int absorbs = (next == nb_prev || next == nb_next);
            coalesce_and_index(h, r);
            if (absorbs) next = t->dirty;
        }
        r = next;
    }
}

size_t gp_heap_dirty_tags(const gp_heap *h, uintptr_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 1; i < h->ntags && n < max; i++)
        if (h->tags[i].count) out[n++] = h->tags[i].tag;
    return n;
}

size_t gp_heap_largest_free(const gp_heap *h)
{
    gp_range *r = h->ntags ? h->tags[0].root : NULL;
    while (r && r->right)
        r = r->right;
    return r ? r->size : 0;
}

size_t gp_heap_largest_tagged(gp_heap *h, uintptr_t tag)
{
    gp_tag_index *t = tag_find(h, tag);
    gp_range *r = t ? t->root : NULL;
    while (r && r->right)
        r = r->right;
    return r ? r->size : 0;
}

void gp_heap_pin_dirty(gp_heap *h, int pin)
{
    for (size_t i = 1; i < h->ntags; i++)
        for (gp_range *r = h->tags[i].dirty; r; r = r->dnext)
            pages_account(&h->regions[r->region], r->addr, r->size, pin);
}

/* Page index of address a in region g. */
static size_t page_of(const gp_region *g, uintptr_t a)
{
    return (a - g->base) >> g->page_shift;
}

/* Give clean free range r (unindexed) tag t at seq and index it there. */
static void tag_as(gp_heap *h, gp_tag_index *t, gp_range *r, uint64_t seq)
{
    r->tag = t->tag;
    r->seq = seq;
    index_add(h, t, r);
}

/* Free range r, clean until now, may be touched by work queued on t's stream. Only backed
 * pages can hold data that work touches: when r's pages between its first and its last backed
 * run are all unbacked (the region's unmapped top, between the blocks and the slab zone), that
 * middle stays clean, so the other streams keep the unmapped address space for fresh pages;
 * r's head and tail runs wait. */
static void retag_backed(gp_heap *h, gp_tag_index *t, gp_range *r, uint64_t seq)
{
    const gp_region *g = &h->regions[r->region];
    size_t first = page_of(g, r->addr), last = page_of(g, r->addr + r->size - 1), p;
    index_del(h, r);
    size_t lo = first, hi = last; /* the unbacked middle: pages (lo, hi) exclusive */
    while (lo <= last && g->page_phys[lo])
        lo++;
    while (hi >= lo && hi > first && g->page_phys[hi])
        hi--;
    if (lo > last) { /* every page backed */
        tag_as(h, t, r, seq);
        return;
    }
    for (p = lo; p <= hi && !g->page_phys[p]; p++)
        ;
    if (p <= hi) { /* backed islands in the middle: the whole range waits */
        tag_as(h, t, r, seq);
        return;
    }
    /* [mid_lo, mid_hi) is on unbacked pages only */
    uintptr_t mid_lo = lo == first ? r->addr : g->base + (lo << g->page_shift);
    uintptr_t mid_hi = hi == last && !g->page_phys[last] ? r->addr + r->size
                                                         : g->base + ((hi + 1) << g->page_shift);
    int has_head = mid_lo > r->addr, has_tail = mid_hi < r->addr + r->size;
    if (!carve(h, r, mid_lo, mid_hi - mid_lo)) { /* no node: the whole range waits (safe) */
        tag_as(h, t, r, seq);
        return;
    }
    index_add(h, tag_find(h, GP_TAG_CLEAN), r); /* the middle stays clean */
    /* carve indexed the head and tail as clean: they wait */
    if (has_head) {
        index_del(h, r->prev);
        tag_as(h, t, r->prev, seq);
    }
    if (has_tail) {
        index_del(h, r->next);
        tag_as(h, t, r->next, seq);
    }
}

void gp_heap_retag_clean(gp_heap *h, uintptr_t tag, uint64_t seq)
{
    gp_tag_index *t = tag_get(h, tag);
    if (!t) return; /* no memory: the ranges stay clean (the caller synchronizes instead) */
    for (size_t i = 0; i < h->nregions; i++)
        for (gp_range *r = h->regions[i].first; r; r = r->next)
            if (r->is_free && r->tag == GP_TAG_CLEAN) retag_backed(h, t, r, seq);
}
