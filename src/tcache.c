/* Thread caches: small blocks on the pool's default stream are allocated and freed without
 * a lock or an atomic read-modify-write. Each thread keeps, per pool and size class, a stack
 * of slots taken from the arena's slabs; a cache never holds more than tcache_bytes, gives
 * half back when a class overflows, everything back when the thread exits, and everything
 * at its next call after memory pressure somewhere else (flush_epoch). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pool.h"

#define TC_SLOTS 64 /* per class */
#define TC_TLS 4    /* pools a thread keeps caches for at once */

struct gp_tcache {
    gpool_t *pool;
    gp_tcache *prev, *next; /* pool->tcaches */
    uint64_t epoch;
    size_t cached; /* bytes in the stacks */
    size_t limit;
    uint32_t n[GP_NCLASS];
    uint32_t cap[GP_NCLASS];
    void *slot[GP_NCLASS][TC_SLOTS];
    /* read by gpool_get_stats from other threads: relaxed atomics, written by owner only */
    _Atomic uint64_t allocs, frees, hits, cached_bytes;
    _Atomic int64_t requested;
};

static _Thread_local struct tls_entry {
    gpool_t *pool;
    uint64_t id;
    gp_tcache *tc;
} tls[TC_TLS];

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

static inline void bump(_Atomic uint64_t *c, uint64_t d)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static void tc_return_all(gp_tcache *tc)
{
    gp_arena *a = tc->pool->arena[GPOOL_MEM_DEVICE];
    for (unsigned c = 0; c < GP_NCLASS; c++) {
        if (tc->n[c]) gp_arena_slots_give(a, tc->slot[c], tc->n[c]);
        tc->n[c] = 0;
    }
    tc->cached = 0;
    atomic_store_explicit(&tc->cached_bytes, 0, memory_order_relaxed);
}

/* Fold a cache's counters into the pool and free it (pool->lock held). */
static void tc_retire(gp_tcache *tc)
{
    gpool_t *pool = tc->pool;
    pool->tc_allocs += atomic_load_explicit(&tc->allocs, memory_order_relaxed);
    pool->tc_frees += atomic_load_explicit(&tc->frees, memory_order_relaxed);
    pool->tc_hits += atomic_load_explicit(&tc->hits, memory_order_relaxed);
    pool->tc_requested += atomic_load_explicit(&tc->requested, memory_order_relaxed);
    if (tc->prev)
        tc->prev->next = tc->next;
    else
        pool->tcaches = tc->next;
    if (tc->next) tc->next->prev = tc->prev;
    free(tc);
}

/* Live pools, so a thread's exit handler can tell whether its caches still have an owner.
 * Lock order: registry_lock, then pool->lock, then arena locks. */
typedef struct reg_entry {
    gpool_t *pool;
    uint64_t id;
} reg_entry;
static reg_entry *registry;
static size_t nregistry, cap_registry;

int gp_pool_register(gpool_t *pool)
{
    pthread_mutex_lock(&registry_lock);
    int ok = 1;
    if (nregistry == cap_registry) {
        size_t cap = cap_registry ? cap_registry * 2 : 8;
        reg_entry *nr = realloc(registry, cap * sizeof *nr);
        if (nr) {
            registry = nr;
            cap_registry = cap;
        } else {
            ok = 0;
        }
    }
    if (ok) registry[nregistry++] = (reg_entry){pool, pool->id};
    pthread_mutex_unlock(&registry_lock);
    return ok ? 0 : -1;
}

void gp_pool_unregister(gpool_t *pool)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nregistry; i++)
        if (registry[i].pool == pool && registry[i].id == pool->id) {
            registry[i] = registry[--nregistry];
            break;
        }
    if (!nregistry) {
        free(registry);
        registry = NULL;
        cap_registry = 0;
    }
    pthread_mutex_unlock(&registry_lock);
}

static void thread_exit(void *unused)
{
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < TC_TLS; i++) {
        struct tls_entry e = tls[i];
        tls[i] = (struct tls_entry){0};
        if (!e.tc) continue;
        int alive = 0;
        for (size_t k = 0; k < nregistry && !alive; k++)
            alive = registry[k].pool == e.pool && registry[k].id == e.id;
        if (!alive) continue; /* gpool_destroy already freed this cache */
        tc_return_all(e.tc);
        pthread_mutex_lock(&e.pool->lock);
        tc_retire(e.tc);
        pthread_mutex_unlock(&e.pool->lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0; }

static gp_tcache *tc_lookup(gpool_t *pool)
{
    for (int i = 0; i < TC_TLS; i++)
        if (tls[i].pool == pool && tls[i].id == pool->id) return tls[i].tc;
    return NULL;
}

static gp_tcache *tc_create(gpool_t *pool)
{
    if (!pool->cfg.tcache_bytes) return NULL;
    pthread_once(&exit_once, make_exit_key);
    if (!exit_key_ok) return NULL;
    int slot = -1;
    for (int i = 0; i < TC_TLS && slot < 0; i++)
        if (!tls[i].tc) slot = i;
    if (slot < 0) return NULL; /* this thread already caches for TC_TLS pools */
    gp_tcache *tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    tc->pool = pool;
    tc->limit = pool->cfg.tcache_bytes;
    for (unsigned c = 0; c < GP_NCLASS; c++) {
        size_t fit = tc->limit / 4 / gp_class_size(c);
        tc->cap[c] = fit > TC_SLOTS ? TC_SLOTS : (uint32_t)fit;
    }
    pthread_mutex_lock(&pool->lock);
    tc->epoch = atomic_load_explicit(&pool->flush_epoch, memory_order_relaxed);
    tc->next = pool->tcaches;
    if (tc->next) tc->next->prev = tc;
    pool->tcaches = tc;
    pthread_mutex_unlock(&pool->lock);
    tls[slot] = (struct tls_entry){.pool = pool, .id = pool->id, .tc = tc};
    pthread_setspecific(exit_key, (void *)1);
    return tc;
}

int gp_tcache_alloc(gpool_t *pool, size_t size, void **out)
{
    gp_tcache *tc = tc_lookup(pool);
    if (!tc && !(tc = tc_create(pool))) return 0;
    if (atomic_load_explicit(&pool->flush_epoch, memory_order_relaxed) != tc->epoch) {
        tc_return_all(tc);
        tc->epoch = atomic_load_explicit(&pool->flush_epoch, memory_order_relaxed);
    }
    unsigned c = gp_size_class(size);
    if (!tc->cap[c]) return 0;
    gp_arena *a = pool->arena[GPOOL_MEM_DEVICE];
    if (!tc->n[c]) {
        gpool_status st;
        size_t want = tc->cap[c] / 2 ? tc->cap[c] / 2 : 1;
        size_t got = gp_arena_slots_take(a, c, pool->default_tag, tc->slot[c], want, &st);
        if (!got) return 0; /* the slow path reports the error */
        tc->n[c] = (uint32_t)got;
        tc->cached += got * gp_class_size(c);
    } else {
        bump(&tc->hits, 1);
    }
    void *p = tc->slot[c][--tc->n[c]];
    gp_slab *s = gp_arena_slab_of(a, (uintptr_t)p);
    uint32_t i = (uint32_t)(((uintptr_t)p - s->base) / s->slot_size);
    s->state[i] = GP_SLOT_LIVE;
    s->req[i] = (uint32_t)size;
    tc->cached -= s->slot_size;
    atomic_store_explicit(&tc->cached_bytes, tc->cached, memory_order_relaxed);
    bump(&tc->allocs, 1);
    atomic_store_explicit(&tc->requested,
                          atomic_load_explicit(&tc->requested, memory_order_relaxed) + (int64_t)size,
                          memory_order_relaxed);
    *out = p;
    return 1;
}

int gp_tcache_free(gpool_t *pool, void *ptr, gpool_status *st)
{
    gp_arena *a = pool->arena[GPOOL_MEM_DEVICE];
    gp_slab *s = gp_arena_slab_of(a, (uintptr_t)ptr);
    if (!s) return 0;
    uintptr_t off = (uintptr_t)ptr - s->base;
    uint32_t i = (uint32_t)(off / s->slot_size);
    if (i * (uintptr_t)s->slot_size != off || i >= s->nslots || s->state[i] != GP_SLOT_LIVE ||
        a->streams[s->stream].tag != pool->default_tag)
        return 0; /* the slow path decides (and reports bad pointers) */
    gp_tcache *tc = tc_lookup(pool);
    if (!tc && !(tc = tc_create(pool))) return 0;
    unsigned c = s->cls;
    if (tc->n[c] == tc->cap[c] || !tc->cap[c]) {
        if (!tc->cap[c]) return 0;
        size_t half = tc->n[c] / 2;
        gp_arena_slots_give(a, tc->slot[c], half);
        memmove(tc->slot[c], tc->slot[c] + half, (tc->n[c] - half) * sizeof(void *));
        tc->n[c] -= (uint32_t)half;
        tc->cached -= half * s->slot_size;
    }
    uint32_t req = s->req[i];
    s->state[i] = GP_SLOT_CACHED;
    tc->slot[c][tc->n[c]++] = ptr;
    tc->cached += s->slot_size;
    atomic_store_explicit(&tc->cached_bytes, tc->cached, memory_order_relaxed);
    bump(&tc->frees, 1);
    atomic_store_explicit(&tc->requested,
                          atomic_load_explicit(&tc->requested, memory_order_relaxed) - (int64_t)req,
                          memory_order_relaxed);
    *st = GPOOL_OK;
    return 1;
}

void gp_tcache_flush_all(gpool_t *pool)
{
    atomic_fetch_add_explicit(&pool->flush_epoch, 1, memory_order_relaxed);
}

void gp_tcache_flush_mine(gpool_t *pool)
{
    gp_tcache *tc = tc_lookup(pool);
    if (tc) tc_return_all(tc);
}

void gp_tcache_totals(gpool_t *pool, uint64_t *allocs, uint64_t *frees, uint64_t *hits,
                      int64_t *requested, uint64_t *cached_bytes)
{
    *allocs = pool->tc_allocs;
    *frees = pool->tc_frees;
    *hits = pool->tc_hits;
    *requested = pool->tc_requested;
    *cached_bytes = 0;
    for (gp_tcache *tc = pool->tcaches; tc; tc = tc->next) {
        *allocs += atomic_load_explicit(&tc->allocs, memory_order_relaxed);
        *frees += atomic_load_explicit(&tc->frees, memory_order_relaxed);
        *hits += atomic_load_explicit(&tc->hits, memory_order_relaxed);
        *requested += atomic_load_explicit(&tc->requested, memory_order_relaxed);
        *cached_bytes += atomic_load_explicit(&tc->cached_bytes, memory_order_relaxed);
    }
}

void gp_tcache_pool_gone(gpool_t *pool)
{
    /* The calling thread's own entry can be cleared; other threads' entries stay and are
     * recognised as stale by the pool id check at their exit. */
    for (int i = 0; i < TC_TLS; i++)
        if (tls[i].pool == pool && tls[i].id == pool->id) tls[i] = (struct tls_entry){0};
    while (pool->tcaches) tc_retire(pool->tcaches);
}
