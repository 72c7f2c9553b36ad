/* Thread caches: small blocks on the pool's default stream are allocated and freed without
 * a lock or an atomic read-modify-write. Each thread keeps, per pool and size class, a stack
 * of slots taken from the arena's slabs; a cache never holds more than tcache_bytes, gives
 * half back when a class overflows, everything back when the thread exits, and everything
 * at its next call after memory pressure somewhere else (flush_epoch). */
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "budget.h"
#include "error.h"
#include "pool.h"
#include "tcache.h"

/* The cache structure and the lock-free fast paths are in tcache.h. */
_Thread_local struct gp_tls_entry gp_tls[GP_TC_TLS];
#define tls      gp_tls
#define TC_TLS   GP_TC_TLS
#define TC_SLOTS GP_TC_SLOTS
typedef gp_tc_entry tc_entry;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

#define LOAD  GP_TC_LOAD
#define STORE GP_TC_STORE

/* Give up to count entries of class c (the oldest first) back to the arena. */
static void tc_give(gp_tcache *tc, unsigned c, uint32_t count)
{
    void *ptrs[TC_SLOTS];
    for (uint32_t k = 0; k < count; k++) {
        tc_entry e = tc->slot[c][k];
        ptrs[k] = (void *)(e.slab->base + (uintptr_t)e.idx * e.slab->slot_size);
    }
    gp_arena_slots_give(tc->arena, ptrs, count, tc);
    uint32_t n = LOAD(tc->n[c]);
    memmove(tc->slot[c], tc->slot[c] + count, (n - count) * sizeof(tc_entry));
    STORE(tc->n[c], n - count);
}

static void tc_return_all(gp_tcache *tc)
{
    for (unsigned c = 0; c < GP_NCLASS; c++)
        if (LOAD(tc->n[c])) tc_give(tc, c, LOAD(tc->n[c]));
}

/* Fold a cache's counters into the pool and free it (pool->lock held). */
static void tc_retire(gp_tcache *tc)
{
    gpool_t *pool = tc->pool;
    pool->tc_allocs += LOAD(tc->allocs);
    pool->tc_frees += LOAD(tc->frees);
    pool->tc_requested += LOAD(tc->requested);
    pool->tc_hits += LOAD(tc->allocs) - LOAD(tc->misses);
    if (tc->prev)
        tc->prev->next = tc->next;
    else
        pool->tcaches = tc->next;
    if (tc->next) tc->next->prev = tc->prev;
    free(tc);
}

static void thread_exit(void *unused)
{
    (void)unused; /* pthread_key_create's signature: the caches are found in tls[] */
    gp_registry_lock();
    for (int i = 0; i < TC_TLS; i++) {
        struct gp_tls_entry e = tls[i];
        tls[i] = (struct gp_tls_entry){0};
        if (!e.tc || !gp_registry_alive(e.pool, e.id))
            continue;                      /* gpool_destroy already freed this cache */
        pthread_mutex_lock(&e.pool->lock); /* no reclaimer runs while we hold it */
        tc_return_all(e.tc);
        tc_retire(e.tc);
        pthread_mutex_unlock(&e.pool->lock);
    }
    gp_registry_unlock();
}

static void make_exit_key(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

static gp_tcache *tc_create(gpool_t *pool)
{
    if (!pool->cfg.tcache_bytes) return NULL;
    pthread_once(&exit_once, make_exit_key);
    if (!exit_key_ok) return NULL;
    int slot = -1;
    for (int i = 0; i < TC_TLS && slot < 0; i++)
        if (!tls[i].tc) slot = i;
    if (slot < 0) {
        /* slots of pools another thread destroyed (which freed their caches) are free */
        gp_registry_lock();
        for (int i = 0; i < TC_TLS; i++)
            if (!gp_registry_alive(tls[i].pool, tls[i].id)) {
                tls[i] = (struct gp_tls_entry){0};
                if (slot < 0) slot = i;
            }
        gp_registry_unlock();
    }
    if (slot < 0) return NULL; /* this thread already caches for TC_TLS live pools */
    gp_tcache *tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    tc->pool = pool;
    tc->arena = pool->device;
    for (unsigned c = 0; c < GP_NCLASS; c++) {
        size_t fit = pool->cfg.tcache_bytes / 4 / gp_class_size(c);
        tc->cap[c] = fit > TC_SLOTS ? TC_SLOTS : (uint32_t)fit;
    }
    pthread_mutex_lock(&pool->lock);
    tc->epoch = LOAD(pool->flush_epoch);
    tc->next = pool->tcaches;
    if (tc->next) tc->next->prev = tc;
    pool->tcaches = tc;
    pthread_mutex_unlock(&pool->lock);
    tls[slot] = (struct gp_tls_entry){.pool = pool, .id = pool->id, .tc = tc};
    pthread_setspecific(exit_key, (void *)1);
    return tc;
}

gp_tcache *gp_tcache_get_slow(gpool_t *pool)
{
    for (int i = 0; i < TC_TLS; i++)
        if (tls[i].pool == pool && tls[i].id == pool->id) return tls[i].tc;
    return tc_create(pool);
}

/* Refill class c with what the device budget admits (the cached slots count as in use, so
 * the blocks handed out from the cache stay within it); 0 when the arena or the budget has
 * nothing (*st: the arena's failure, GPOOL_OK for the budget: the arena then reports it). */
static int tc_refill(gp_tcache *tc, unsigned c, gpool_status *st)
{
    void *ptrs[TC_SLOTS];
    size_t want = tc->cap[c] / 2 ? tc->cap[c] / 2 : 1;
    gpool_t *pool = tc->pool;
    if (pool->cfg.budget[GPOOL_MEM_DEVICE])
        want = gp_budget_admit_count(pool, GPOOL_MEM_DEVICE, gp_class_size(c), want,
                                     gp_arena_in_use(tc->arena));
    if (!want) return 0;
    size_t got = gp_arena_slots_take(tc->arena, c, tc->pool->default_tag, tc, ptrs, want, st);
    for (size_t k = 0; k < got; k++) {
        gp_slab *s = gp_arena_slab_of(tc->arena, (uintptr_t)ptrs[k]);
        tc->slot[c][k] = (tc_entry){s, (uint32_t)gp_slot_index(s, (uintptr_t)ptrs[k])};
    }
    STORE(tc->n[c], (uint32_t)got);
    return got > 0;
}

int gp_tcache_alloc_slow(gp_tcache *tc, size_t size, unsigned c, gpool_status *st, void **out)
{
    gpool_t *pool = tc->pool;
    if (LOAD(pool->flush_epoch) != tc->epoch) {
        tc_return_all(tc);
        tc->epoch = LOAD(pool->flush_epoch);
    }
    if (!LOAD(tc->n[c])) {
        STORE(tc->misses, LOAD(tc->misses) + 1);
        if (!tc->cap[c] || !tc_refill(tc, c, st)) return 0;
    }
    return gp_tcache_pop(tc, size, c, out);
}

int gp_tcache_push_slow(gp_tcache *tc, gp_slab *s, uint32_t i)
{
    unsigned c = s->cls;
    if (!tc->cap[c]) return 0;
    uint32_t n = LOAD(tc->n[c]);
    if (n == tc->cap[c]) tc_give(tc, c, n / 2);
    gp_tcache_push(tc, s, i);
    return 1;
}

void gp_tcache_flush_all(gpool_t *pool)
{
    atomic_fetch_add(&pool->flush_epoch, 1);
}

void gp_tcache_flush_mine(gpool_t *pool)
{
    for (int i = 0; i < TC_TLS; i++)
        if (tls[i].pool == pool && tls[i].id == pool->id && tls[i].tc &&
            gp_tcache_enter(tls[i].tc)) {
            tc_return_all(tls[i].tc);
            gp_tcache_leave(tls[i].tc);
        }
}

/* ---- reclaiming idle threads' caches ---- */

static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static int membarrier_ok;

static void membarrier_register(void)
{
    membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

size_t gp_tcache_reclaim_idle(gpool_t *pool)
{
    pthread_once(&membarrier_once, membarrier_register);
    if (!membarrier_ok) return 0; /* no cheap way to fence the owners: they flush themselves */
    size_t taken = 0;
    pthread_mutex_lock(&pool->lock);
    int any = 0;
    for (gp_tcache *tc = pool->tcaches; tc; tc = tc->next) {
        atomic_store_explicit(&tc->steal, 1, memory_order_relaxed);
        any = 1;
    }
    /* Every owner now either sees steal raised at its next entry, or has busy visible here. */
    if (any && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
        for (gp_tcache *tc = pool->tcaches; tc; tc = tc->next) {
            if (atomic_load_explicit(&tc->busy, memory_order_acquire)) continue;
            for (unsigned c = 0; c < GP_NCLASS; c++)
                taken += (size_t)LOAD(tc->n[c]) * gp_class_size(c);
            tc_return_all(tc);
        }
    }
    for (gp_tcache *tc = pool->tcaches; tc; tc = tc->next)
        atomic_store_explicit(&tc->steal, 0, memory_order_release);
    pthread_mutex_unlock(&pool->lock);
    return taken;
}

void gp_tcache_totals(gpool_t *pool, uint64_t *allocs, uint64_t *frees, uint64_t *hits,
                      uint64_t *cached_bytes, uint64_t *requested)
{
    *requested = pool->tc_requested;
    *allocs = pool->tc_allocs;
    *frees = pool->tc_frees;
    *hits = pool->tc_hits;
    *cached_bytes = 0;
    for (gp_tcache *tc = pool->tcaches; tc; tc = tc->next) {
        *allocs += LOAD(tc->allocs);
        *frees += LOAD(tc->frees);
        *requested += LOAD(tc->requested);
        *hits += LOAD(tc->allocs) - LOAD(tc->misses);
        for (unsigned c = 0; c < GP_NCLASS; c++)
            *cached_bytes += (uint64_t)LOAD(tc->n[c]) * gp_class_size(c);
    }
}

void gp_tcache_pool_gone(gpool_t *pool)
{
    /* The calling thread's own entry can be cleared; other threads' entries stay and are
     * recognised as stale by the pool id check at their exit. */
    for (int i = 0; i < TC_TLS; i++)
        if (tls[i].pool == pool && tls[i].id == pool->id) tls[i] = (struct gp_tls_entry){0};
    while (pool->tcaches)
        tc_retire(pool->tcaches);
}
