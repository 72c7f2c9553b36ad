/* strat_bfc.c — "bfc": a model of PyTorch's caching allocator (CUDACachingAllocator), written
 * from its published design, not from its code:
 *   - requests are rounded up to 512 B (minimum 512 B);
 *   - rounded sizes up to 1 MiB come from the small pool, whose segments are 2 MiB; larger ones
 *     from the large pool, whose segments are 20 MiB, or the rounded size rounded up to 2 MiB
 *     when it is 10 MiB or more;
 *   - a request takes the best-fitting cached free block of its pool and stream (smallest size,
 *     then lowest address); a block is split when the remainder is at least 512 B (small pool)
 *     or more than 1 MiB (large pool);
 *   - a freed block coalesces with free neighbours in its segment; segments are never given
 *     back, except when a segment allocation fails: then every fully free cached segment is
 *     released (cuMemFree) and the allocation retried once.
 * Free blocks live in one treap per pool ordered by (stream, size, address). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define BFC_MIN_BLOCK    512u
#define BFC_SMALL_SIZE   (1u << 20)  /* largest request of the small pool */
#define BFC_SMALL_BUFFER (2u << 20)  /* small-pool segment */
#define BFC_LARGE_BUFFER (20u << 20) /* large-pool segment for requests < 10 MiB */
#define BFC_MIN_LARGE    (10u << 20) /* from here, segments are the request itself */
#define BFC_ROUND_LARGE  (2u << 20)  /* ... rounded up to 2 MiB */

uint64_t bench_bfc_round_size(uint64_t size)
{
    if (size < BFC_MIN_BLOCK) return BFC_MIN_BLOCK;
    return (size + BFC_MIN_BLOCK - 1) / BFC_MIN_BLOCK * BFC_MIN_BLOCK;
}

uint64_t bench_bfc_segment_size(uint64_t rounded)
{
    if (rounded <= BFC_SMALL_SIZE) return BFC_SMALL_BUFFER;
    if (rounded < BFC_MIN_LARGE) return BFC_LARGE_BUFFER;
    return (rounded + BFC_ROUND_LARGE - 1) / BFC_ROUND_LARGE * BFC_ROUND_LARGE;
}

typedef struct bfc_segment bfc_segment;

typedef struct bfc_block {
    uint64_t addr, size;
    uint64_t order; /* tie-break among equal sizes: segment creation number, then offset */
    uintptr_t stream;
    bfc_segment *seg;
    struct bfc_block *prev, *next;  /* address neighbours in the segment */
    struct bfc_block *left, *right; /* treap links while free */
    uint32_t prio;
    int allocated;
} bfc_block;

struct bfc_segment {
    uint64_t base, size;
    uint64_t seq; /* creation number */
    int small;
    bfc_segment *prev, *next;
    bfc_block *first;
};

typedef struct bfc_state {
    bfc_block *free_tree[2]; /* [0] large pool, [1] small pool */
    bfc_segment *segments;
    bench_map live; /* address -> block */
    bench_strategy_stats st;
    uint32_t rng;
    uint64_t next_seq;
} bfc_state;

/* ---- treap keyed by (stream, size, order) ------------------------------------------------
 * Equal sizes are taken in address order as a real driver would lay segments out: segments in
 * the order they were created (a driver hands out rising addresses), then offset in the
 * segment. The simulator's own addresses (mmap, falling) are not used, so the model does not
 * depend on where the driver places memory. */

static int key_less(uintptr_t s1, uint64_t z1, uint64_t a1, const bfc_block *b)
{
    if (s1 != b->stream) return s1 < b->stream;
    if (z1 != b->size) return z1 < b->size;
    return a1 < b->order;
}

/* Split t into keys < (s, z, a) and keys >= it. */
static void treap_split(bfc_block *t, uintptr_t s, uint64_t z, uint64_t a, bfc_block **lo,
                        bfc_block **hi)
{
    if (!t) {
        *lo = *hi = NULL;
    } else if (key_less(s, z, a, t) || (s == t->stream && z == t->size && a == t->order)) {
        treap_split(t->left, s, z, a, lo, &t->left);
        *hi = t;
    } else {
        treap_split(t->right, s, z, a, &t->right, hi);
        *lo = t;
    }
}

static bfc_block *treap_merge(bfc_block *a, bfc_block *b)
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

static void tree_insert(bfc_state *st, bfc_block *b)
{
    bfc_block **root = &st->free_tree[b->seg->small];
    st->rng ^= st->rng << 13;
    st->rng ^= st->rng >> 17;
    st->rng ^= st->rng << 5;
    b->prio = st->rng;
    b->left = b->right = NULL;
    bfc_block *lo, *hi;
    treap_split(*root, b->stream, b->size, b->order, &lo, &hi);
    *root = treap_merge(treap_merge(lo, b), hi);
}

static void tree_erase(bfc_state *st, bfc_block *b)
{
    bfc_block **link = &st->free_tree[b->seg->small];
    while (*link != b) {
        bfc_block *t = *link;
        link = key_less(b->stream, b->size, b->order, t) ? &t->left : &t->right;
    }
    *link = treap_merge(b->left, b->right);
    b->left = b->right = NULL;
}

/* Smallest free block of `stream` with size >= size, or NULL. */
static bfc_block *tree_best_fit(bfc_block *t, uintptr_t stream, uint64_t size)
{
    bfc_block *best = NULL;
    while (t) {
        if (key_less(stream, size, 0, t)) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best && best->stream == stream ? best : NULL;
}

/* ---- segments ----------------------------------------------------------------------------- */

static int segment_alloc(bench_strategy *s, bfc_state *st, uint64_t size, CUdeviceptr *p)
{
    st->st.driver_calls++;
    st->st.by_entry[BENCH_DRV_MEM_ALLOC]++;
    CUresult r = s->dev->drv->cuMemAlloc(p, size);
    if (r == CUDA_SUCCESS) return BENCH_OK;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return BENCH_OOM;
    return bench_strategy_fail(s, BENCH_ERR, "cuMemAlloc(%llu) failed: %s",
                               (unsigned long long)size, gp_cu_name(r));
}

static void segment_release(bench_strategy *s, bfc_state *st, bfc_segment *seg)
{
    st->st.driver_calls++;
    st->st.by_entry[BENCH_DRV_MEM_FREE]++;
    s->dev->drv->cuMemFree((CUdeviceptr)seg->base);
    st->st.reserved -= seg->size;
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        st->segments = seg->next;
    if (seg->next) seg->next->prev = seg->prev;
    free(seg->first);
    free(seg);
}

/* Give back every segment that is one free block. */
static void release_cached(bench_strategy *s, bfc_state *st)
{
    bfc_segment *seg = st->segments;
    while (seg) {
        bfc_segment *next = seg->next;
        bfc_block *b = seg->first;
        if (!b->allocated && !b->next && !b->prev) {
            tree_erase(st, b);
            segment_release(s, st, seg);
        }
        seg = next;
    }
}

/* ---- strategy ----------------------------------------------------------------------------- */

static int bfc_init(bench_strategy *s, const bench_device *dev)
{
    s->dev = dev;
    if (!dev->drv->cuMemAlloc || !dev->drv->cuMemFree)
        return bench_strategy_fail(s, BENCH_SKIP, "the driver has no cuMemAlloc");
    bfc_state *st = calloc(1, sizeof *st);
    if (!st) return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
    s->state = st;
    st->rng = 2463534242u;
    if (bench_map_init(&st->live, 1024) != 0)
        return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
    return BENCH_OK;
}

static int bfc_alloc(bench_strategy *s, uint64_t size, CUstream stream, void **out)
{
    bfc_state *st = s->state;
    uint64_t rsize = bench_bfc_round_size(size);
    int small = rsize <= BFC_SMALL_SIZE;
    uintptr_t skey = (uintptr_t)stream;
    bfc_block *b = tree_best_fit(st->free_tree[small], skey, rsize);
    if (b) {
        tree_erase(st, b);
    } else {
        uint64_t seg_size = bench_bfc_segment_size(rsize);
        CUdeviceptr p = 0;
        int rc = segment_alloc(s, st, seg_size, &p);
        if (rc == BENCH_OOM) {
            release_cached(s, st);
            rc = segment_alloc(s, st, seg_size, &p);
        }
        if (rc != BENCH_OK) return rc;
        bfc_segment *seg = calloc(1, sizeof *seg);
        b = calloc(1, sizeof *b);
        if (!seg || !b) {
            free(seg);
            free(b);
            s->dev->drv->cuMemFree(p);
            return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
        }
        seg->base = p;
        seg->size = seg_size;
        seg->small = small;
        seg->seq = st->next_seq++;
        seg->first = b;
        seg->next = st->segments;
        if (seg->next) seg->next->prev = seg;
        st->segments = seg;
        b->addr = p;
        b->order = seg->seq << 40;
        b->size = seg_size;
        b->stream = skey;
        b->seg = seg;
        st->st.reserved += seg_size;
        if (st->st.reserved > st->st.peak_reserved) st->st.peak_reserved = st->st.reserved;
    }
    uint64_t remaining = b->size - rsize;
    if (small ? remaining >= BFC_MIN_BLOCK : remaining > BFC_SMALL_SIZE) {
        bfc_block *r = calloc(1, sizeof *r);
        if (r) { /* without host memory the block simply stays whole */
            r->addr = b->addr + rsize;
            r->order = b->order + rsize;
            r->size = remaining;
            r->stream = b->stream;
            r->seg = b->seg;
            r->prev = b;
            r->next = b->next;
            if (b->next) b->next->prev = r;
            b->next = r;
            b->size = rsize;
            tree_insert(st, r);
        }
    }
    b->allocated = 1;
    if (bench_map_put(&st->live, b->addr, (uint64_t)(uintptr_t)b) != 0) {
        b->allocated = 0;
        tree_insert(st, b);
        return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
    }
    *out = (void *)(uintptr_t)b->addr;
    return BENCH_OK;
}

static bfc_block *merge_into(bfc_block *left, bfc_block *right)
{
    /* left and right are neighbours; right's memory joins left; right is freed */
    left->size += right->size;
    left->next = right->next;
    if (right->next) right->next->prev = left;
    free(right);
    return left;
}

static int bfc_free(bench_strategy *s, void *ptr, uint64_t size, CUstream stream)
{
    /* the block knows its size, and goes back to the stream it was allocated on (PyTorch's
     * rule: a free's stream does not move the block) */
    (void)size, (void)stream;
    bfc_state *st = s->state;
    uint64_t v;
    if (!bench_map_take(&st->live, (uint64_t)(uintptr_t)ptr, &v))
        return bench_strategy_fail(s, BENCH_ERR, "bfc: free of unknown pointer %p", ptr);
    bfc_block *b = (bfc_block *)(uintptr_t)v;
    b->allocated = 0;
    if (b->prev && !b->prev->allocated) {
        bfc_block *p = b->prev;
        tree_erase(st, p);
        b = merge_into(p, b);
    }
    if (b->next && !b->next->allocated) {
        tree_erase(st, b->next);
        merge_into(b, b->next);
    }
    tree_insert(st, b);
    return BENCH_OK;
}

static void bfc_stats(bench_strategy *s, bench_strategy_stats *out)
{
    *out = ((bfc_state *)s->state)->st;
}

static void bfc_fini(bench_strategy *s)
{
    bfc_state *st = s->state;
    if (!st) return;
    while (st->segments) {
        bfc_segment *seg = st->segments;
        bfc_block *b = seg->first->next;
        while (b) {
            bfc_block *n = b->next;
            free(b);
            b = n;
        }
        seg->first->next = NULL;
        segment_release(s, st, seg);
    }
    bench_map_destroy(&st->live);
    free(st);
    s->state = NULL;
}

const bench_strategy_ops bench_strategy_bfc = {
    .name = "bfc",
    .label = "model of PyTorch's caching allocator (best fit with coalescing)",
    .init = bfc_init,
    .alloc = bfc_alloc,
    .free = bfc_free,
    .stats = bfc_stats,
    .fini = bfc_fini,
};
