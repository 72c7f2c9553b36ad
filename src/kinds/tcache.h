/* Thread caches: the structure and the lock-free fast paths, inline so that gpool_alloc and
 * gpool_free of a cached small block cost a few dozen instructions. Each thread keeps, per
 * pool and size class, a stack of slab slots; only the owning thread touches its stacks, and
 * the counters other threads read (stats) are relaxed atomics written with plain stores.
 * Slow paths (refill, overflow, flush, creation) are in tcache.c. */
#ifndef GPOOL_TCACHE_H
#define GPOOL_TCACHE_H

#include "arena.h"
#include "pool.h"

#define GP_TC_SLOTS 64 /* per class */
#define GP_TC_TLS   4  /* pools a thread keeps caches for at once */

#define GP_TC_LOAD(x)     atomic_load_explicit(&(x), memory_order_relaxed)
#define GP_TC_STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

typedef struct gp_tc_entry {
    gp_slab *slab;
    uint32_t idx;
} gp_tc_entry;

struct gp_tcache {
    gpool_t *pool;
    gp_arena *arena;
    gp_tcache *prev, *next; /* pool->tcaches */
    uint64_t epoch;         /* pool->flush_epoch when last emptied */
    /* Reclaiming an idle thread's cache (gp_tcache_reclaim_idle): the owner raises busy around
     * every use and backs off while steal is raised; the reclaimer raises steal, issues a
     * process-wide membarrier (the owner's store-load fence, paid by the rare side) and takes
     * the cache only if busy is down. */
    _Atomic int busy, steal;
    _Atomic uint32_t n[GP_NCLASS];
    uint32_t cap[GP_NCLASS];
    _Atomic uint64_t allocs, frees, misses;
    /* Requested bytes of the small blocks this cache handed out minus those of the blocks
     * freed into it (modulo 2^64; the arena keeps the other part): the statistics sum it
     * over the threads instead of walking the slabs. */
    _Atomic uint64_t requested;
    gp_tc_entry slot[GP_NCLASS][GP_TC_SLOTS];
};

struct gp_tls_entry {
    gpool_t *pool;
    uint64_t id;
    gp_tcache *tc;
};
extern _Thread_local struct gp_tls_entry gp_tls[GP_TC_TLS];

gp_tcache *gp_tcache_get_slow(gpool_t *pool);
int gp_tcache_alloc_slow(gp_tcache *tc, size_t size, unsigned c, gpool_status *st, void **out);
int gp_tcache_push_slow(gp_tcache *tc, gp_slab *s, uint32_t i);

static inline gp_tcache *gp_tcache_get(gpool_t *pool)
{
    if (__builtin_expect(gp_tls[0].pool == pool && gp_tls[0].id == pool->id, 1))
        return gp_tls[0].tc;
    return gp_tcache_get_slow(pool);
}

/* Pop a slot of class c (the caller checked there is one). */
static inline int gp_tcache_pop(gp_tcache *tc, size_t size, unsigned c, void **out)
{
    uint32_t n = GP_TC_LOAD(tc->n[c]) - 1;
    gp_tc_entry e = tc->slot[c][n];
    GP_TC_STORE(tc->n[c], n);
    gp_slot_set(e.slab, e.idx, GP_SLOT_LIVE);
    gp_slot_set_req(e.slab, e.idx, (uint32_t)size);
    GP_TC_STORE(tc->allocs, GP_TC_LOAD(tc->allocs) + 1);
    GP_TC_STORE(tc->requested, GP_TC_LOAD(tc->requested) + size);
    *out = (void *)(e.slab->base + (uintptr_t)e.idx * e.slab->slot_size);
    return 1;
}

/* Push slot i of s (the caller checked there is room). */
static inline void gp_tcache_push(gp_tcache *tc, gp_slab *s, uint32_t i)
{
    unsigned c = s->cls;
    uint32_t n = GP_TC_LOAD(tc->n[c]);
    gp_slot_set(s, i, GP_SLOT_CACHED);
    tc->slot[c][n] = (gp_tc_entry){s, i};
    GP_TC_STORE(tc->n[c], n + 1);
    GP_TC_STORE(tc->frees, GP_TC_LOAD(tc->frees) + 1);
    GP_TC_STORE(tc->requested, GP_TC_LOAD(tc->requested) - gp_slot_req(s, i));
}

/* Enter / leave the owner's use of its cache; enter fails while a reclaimer holds it. */
static inline int gp_tcache_enter(gp_tcache *tc)
{
    atomic_store_explicit(&tc->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the reclaimer's membarrier orders the rest */
    if (__builtin_expect(atomic_load_explicit(&tc->steal, memory_order_acquire), 0)) {
        atomic_store_explicit(&tc->busy, 0, memory_order_release);
        return 0;
    }
    return 1;
}

static inline void gp_tcache_leave(gp_tcache *tc)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&tc->busy, 0, memory_order_release);
}

/* Allocate a small block (size <= small_max) of the default stream from the calling thread's
 * cache. 1 when served. A miss: with refill 0 (the gpool_alloc fast path), 0 at once; with
 * refill 1 (the device kind's cache rung), the cache takes slots from the arena as the budget
 * admits, and 0 with *st = GPOOL_OK sends the caller to the arena (no cache, or the budget
 * admits none: the arena reports why), with *st set the arena's failure (the ladder's to
 * climb). */
static inline int gp_tcache_alloc(gpool_t *pool, size_t size, int refill, gpool_status *st,
                                  void **out)
{
    if (refill) *st = GPOOL_OK;
    gp_tcache *tc = gp_tcache_get(pool);
    if (__builtin_expect(!tc || !gp_tcache_enter(tc), 0)) return 0;
    unsigned c = gp_size_class(size);
    int done;
    if (__builtin_expect(GP_TC_LOAD(tc->n[c]) == 0 || GP_TC_LOAD(pool->flush_epoch) != tc->epoch,
                         0))
        done = refill ? gp_tcache_alloc_slow(tc, size, c, st, out) : 0;
    else
        done = gp_tcache_pop(tc, size, c, out);
    gp_tcache_leave(tc);
    return done;
}

/* Free ptr, found in slab s (NULL: none), into the calling thread's cache when it is a live
 * slot of a default-stream slab. 1 when done; 0 sends the caller to the arena (which also
 * reports bad pointers). */
static inline int gp_tcache_free_slab(gpool_t *pool, gp_slab *s, void *ptr)
{
    if (!s) return 0;
    long i = gp_slot_index(s, (uintptr_t)ptr);
    if (i < 0 || gp_slot_state(s, (uint32_t)i) != GP_SLOT_LIVE || s->tag != pool->default_tag)
        return 0;
    gp_tcache *tc = gp_tcache_get(pool);
    if (__builtin_expect(!tc || !gp_tcache_enter(tc), 0)) return 0;
    int done = 1;
    if (__builtin_expect(GP_TC_LOAD(tc->n[s->cls]) >= tc->cap[s->cls], 0))
        done = gp_tcache_push_slow(tc, s, (uint32_t)i);
    else
        gp_tcache_push(tc, s, (uint32_t)i);
    gp_tcache_leave(tc);
    return done;
}

#endif
