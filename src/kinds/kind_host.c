/* Host memory kinds (pinned, mapped): routing, budgets, the record of live blocks, stats.
 *
 * Each kind has three sources:
 *   - small blocks (below GP_SMALL_LIMIT, sizeclass.h): a slab allocator over registered extents
 *     (host_small.c);
 *   - larger blocks: two gp_arena instances over registered host pages (host_pages.c),
 *     one with 4 KiB pages and one with 2 MiB transparent huge pages, chosen by
 *     the placement policy — the same best-fit, page-sharing machinery as vidmem;
 *   - without unified addressing (mapped only): one cuMemHostAlloc per block, the device
 *     address kept apart from the host address.
 * Every live block has a record keyed by the address the caller got (the device address for
 * mapped memory), so double, interior and foreign frees are told apart, and block_info works
 * for every source. Host memory is bound to the NUMA node nearest the GPU where one is known
 * (host_numa.c); dump_json says what placement was achieved. A free waits on the event clock
 * (host_clock.h) for the streams it was freed and allocated on, without a driver call; the
 * waiting frees are settled in batches (host_settle). Blocks recorded on other streams
 * (gpool_record_stream) take reuse.c's deferred path instead. The state's types are in
 * kind_host_internal.h, the statistics and JSON in kind_host_report.c. */
#include <stdlib.h>
#include <string.h>

#include "bad_pointer.h"
#include "budget.h"
#include "error.h"
#include "kind.h"
#include "kind_host_internal.h"
#include "ladder.h"
#include "stream.h"

/* Address space per region of the 4 KiB and 2 MiB page arenas (page tables are 12 bytes
 * per page, so the 4 KiB arena takes 3 MiB of tables per GiB). */
static const size_t region_bytes[2] = {1 * GiB, 16 * GiB};

/* ---------- creation ---------- */

/* cuda.h, cuMemHostGetDevicePointer: "If any device visible to the application has a zero
 * value for the device attribute [CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM], the device
 * pointer returned by cuMemHostGetDevicePointer() will not match the original host pointer".
 * Then mapped blocks come from cuMemHostAlloc one by one (direct_alloc), each with the device
 * address the driver gives. An attribute that cannot be read counts as 0. */
static int registered_pointers_match(gpool_t *pool)
{
    int n = 0;
    if (GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuDeviceGetCount(&n)) != CUDA_SUCCESS)
        return 0;
    for (int d = 0; d < n; d++) {
        int v = 0;
        if (GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
                   pool->dc.drv->cuDeviceGetAttribute(
                       &v, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, d)) !=
                CUDA_SUCCESS ||
            !v)
            return 0;
    }
    return n > 0;
}

static gpool_status sys_create(gpool_t *pool, gp_sysmem **out)
{
    const gp_driver *d = pool->dc.drv;
    if (!d->cuMemHostRegister || !d->cuMemHostUnregister || !d->cuMemHostGetDevicePointer)
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "host memory kinds need cuMemHostRegister, cuMemHostUnregister and "
                       "cuMemHostGetDevicePointer, which driver %s does not provide",
                       d->path);
    gp_sysmem *s = calloc(1, sizeof *s);
    if (!s) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for host-memory state");
    pthread_mutex_init(&s->lock, NULL);
    gp_ptrmap_init(&s->blocks);
    s->env = (gp_host_env){.dc = pool->dc, .numa = &s->numa, .owners = &pool->owners};
    int v = 0, m = 0;
    CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
                        pool->dc.drv->cuDeviceGetAttribute(
                            &v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, pool->dc.dev));
    if (r == CUDA_SUCCESS)
        r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
                   pool->dc.drv->cuDeviceGetAttribute(&m, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
                                                      pool->dc.dev));
    if (r != CUDA_SUCCESS) { /* a failed query is not "unsupported": say what failed */
        gp_ptrmap_fini(&s->blocks);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return gp_cu_fail(r, "cuDeviceGetAttribute (host memory support)");
    }
    s->uva = v;
    s->can_map = m;
    s->reg_same_ptr = registered_pointers_match(pool);
    gp_numa_init(&s->numa, pool->dc.drv, pool->dc.dev, &pool->cnt);
    *out = s;
    return GPOOL_OK;
}

static gpool_status sys_get(gpool_t *pool, gp_sysmem **out)
{
    gp_sysmem *s = sys_of(pool);
    if (s) {
        *out = s;
        return GPOOL_OK;
    }
    gpool_status st = GPOOL_OK;
    pthread_mutex_lock(&pool->lock);
    s = pool->sys;
    if (!s) {
        st = sys_create(pool, &s);
        if (st == GPOOL_OK) __atomic_store_n(&pool->sys, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&pool->lock);
    *out = s;
    return st;
}

/* Lock held: kind's page arena for pages of class pg, made on first use. */
static gpool_status large_get_locked(gp_sysmem *s, gpool_mem_kind kind, int pg, gp_arena **out)
{
    host_kind *k = hk(s, kind);
    if (k->large[pg]) {
        *out = k->large[pg];
        return GPOOL_OK;
    }
    size_t page = pg == PG_2M ? HOST_HUGE_PAGE : 4 * KiB;
    void *b = NULL;
    gpool_status st = gp_hostmem_create(&s->env, kind, page, &k->reserved, &b);
    if (st != GPOOL_OK) return st;
    gp_arena *a = gp_arena_new();
    if (!a) {
        gp_hostmem_ops.fini(b, NULL);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a host arena");
    }
    /* small_max 0: no slabs (small host blocks come from host_small.c); no stream sync: host
     * frees are immediate. */
    st = gp_arena_init(a, kind, &gp_hostmem_ops, b, page, region_bytes[pg], 0, NULL, NULL,
                       s->env.owners);
    if (st != GPOOL_OK) {
        gp_hostmem_ops.fini(b, NULL);
        free(a);
        return st;
    }
    k->large[pg] = a;
    *out = a;
    return GPOOL_OK;
}

/* How host_settle settles: when due (thresholds), asking the clock now, or synchronizing. */
enum { SETTLE_IF_DUE = 0, SETTLE_SYNC = 1, SETTLE_ASK = 2 };

/* Lock held: whether host_settle(kind, want, how) would ask the clock (see there). */
static int settle_due_locked(gp_sysmem *s, gpool_mem_kind kind, size_t want, int how)
{
    if (!s->npend) return 0;
    if (how != SETTLE_IF_DUE || s->npend >= HOST_POLL_FREES || s->pend_bytes >= HOST_POLL_BYTES)
        return 1;
    if (kind != GPOOL_MEM_HOST_PINNED && kind != GPOOL_MEM_HOST_MAPPED) return 0;
    host_kind *k = &s->k[kind - GPOOL_MEM_HOST_PINNED];
    return atomic_load_explicit(&k->reserved, memory_order_relaxed) < k->in_use + want &&
           (k->pend_n >= HOST_NEED_POLL_FREES || k->pend_bytes >= HOST_NEED_POLL_BYTES);
}
static size_t host_settle(gpool_t *pool, gp_sysmem *s, gpool_mem_kind kind, size_t want, int how,
                          gpool_status *st);

/* ---------- allocation ---------- */

static gpool_status direct_alloc(gp_sysmem *s, host_kind *k, size_t size, size_t align,
                                 uintptr_t *host, uintptr_t *key, size_t *got)
{
    gpool_status st = gp_hostmem_direct_alloc(&s->env, size, align, host, key, got);
    if (st != GPOOL_OK) return st;
    gpool_mem_kind kind = k == &s->k[0] ? GPOOL_MEM_HOST_PINNED : GPOOL_MEM_HOST_MAPPED;
    if (gp_owners_add(s->env.owners, *host, *got, kind) != 0 ||
        (*key != *host && gp_owners_add(s->env.owners, *key, *got, kind) != 0)) {
        gp_owners_remove(s->env.owners, *host);
        gp_hostmem_direct_free(&s->env, *host);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the address registry");
    }
    atomic_fetch_add_explicit(&k->reserved, *got, memory_order_relaxed);
    return GPOOL_OK;
}

static void direct_free(gp_sysmem *s, host_kind *k, host_block *b)
{
    gp_owners_remove(s->env.owners, b->host);
    if (b->dev && b->dev != b->host) gp_owners_remove(s->env.owners, b->dev);
    gp_hostmem_direct_free(&s->env, b->host);
    atomic_fetch_sub_explicit(&k->reserved, b->size, memory_order_relaxed);
}

/* Give a block's memory back to its source (no record involved). */
static void release_memory(gp_sysmem *s, host_kind *k, gp_small *sm, host_block *b)
{
    if (b->src == SRC_SMALL)
        gp_small_free(sm, (void *)b->host);
    else if (b->src == SRC_LARGE)
        gp_arena_free(k->large[b->pg], (void *)b->host, 0, 0);
    else
        direct_free(s, k, b);
}

/* Lock held: keep a record no longer needed for the warm path (or free it: enough kept). */
static void spare_put_locked(gp_sysmem *s, host_block *b)
{
    if (s->nspare >= HOST_SPARE_RECORDS) {
        free(b);
        return;
    }
    b->next_spare = s->spare;
    s->spare = b;
    s->nspare++;
}

/* Lock held: free the kept records. */
static void spare_drop_locked(gp_sysmem *s)
{
    while (s->spare) {
        host_block *b = s->spare;
        s->spare = b->next_spare;
        free(b);
    }
    s->nspare = 0;
}

static void note_peaks(host_kind *k)
{
    size_t res = atomic_load_explicit(&k->reserved, memory_order_relaxed);
    uint64_t used = k->in_use - k->pend_bytes; /* waiting frees are frees (host_stats) */
    if (used > k->peak_in_use) k->peak_in_use = used;
    if (k->requested > k->peak_requested) k->peak_requested = k->requested;
    if (res > k->peak_reserved) k->peak_reserved = res;
    if (res > used && res - used > k->peak_cached) k->peak_cached = res - used;
}

/* Lock held, the budget charged (est) and the source chosen (a small-arena reference taken,
 * or the page arena la): a warm block (from a registered extent or from cached backed pages:
 * no driver call) and its record in this one hold of the lock, the small or page arena's lock
 * nested inside (the order inside_locked takes them in too). 1: served, *out set, the lock
 * released; 0: nothing changed, the lock still held (the caller's path, which may call the
 * driver outside the lock, serves it). Its key is its host address (pinned, or mapped where
 * the device address is the host one). */
static int warm_locked(gp_sysmem *s, host_kind *k, gp_arena *la, gpool_t *pool,
                       const gpool_alloc_params *params, const gp_placement *pl, void **out)
{
    size_t size = pl->size, est = (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
    host_block *b = s->spare;
    if (b) {
        s->spare = b->next_spare;
        s->nspare--;
    } else {
        b = malloc(sizeof *b);
    }
    void *p = NULL;
    size_t got = est;
    if (!b) return 0;
    int served =
        la ? gp_arena_alloc_cached(la, size, pl->align, 0, params ? (uint32_t)params->usage : 0, &p)
           : gp_small_alloc_warm(k->small, size, pl->align, &p, &got);
    if (!served) {
        spare_put_locked(s, b);
        return 0;
    }
    *b = (host_block){
        .host = (uintptr_t)p,
        .requested = size,
        .size = got,
        .page = la ? pl->page : 4 * KiB,
        .stream = params && params->stream ? params->stream : pool->cfg.default_stream,
        .kind = pl->kind,
        .usage = params ? params->usage : GPOOL_USAGE_DEFAULT,
        .src = (uint8_t)(la ? SRC_LARGE : SRC_SMALL),
        .pg = (uint8_t)(pl->page >= HOST_HUGE_PAGE ? PG_2M : PG_4K),
        .fell_back = (uint8_t)(pl->kind != pl->first),
    };
    if (gp_ptrmap_put(&s->blocks, (uintptr_t)p, b) != 0) {
        if (la)
            gp_arena_free(la, p, 0, 0);
        else
            gp_small_free(k->small, p);
        spare_put_locked(s, b);
        return 0;
    }
    k->in_use += got - est;
    k->requested += size;
    k->allocs++;
    k->live++;
    note_peaks(k);
    pthread_mutex_unlock(&s->lock);
    if (pl->flags & GPOOL_ALLOC_ZERO) memset(p, 0, la ? size : got);
    *out = p;
    return 1;
}

/* Allocate in one kind, once. *over_budget = 1 when the kind's budget refused the request;
 * *oom_arena: the page arena that ran out of memory, if that was why it failed. */
static gpool_status alloc_kind(gpool_t *pool, gp_sysmem *s, const gp_placement *pl,
                               const gpool_alloc_params *params, int *over_budget,
                               gp_arena **oom_arena, void **out)
{
    gpool_mem_kind kind = pl->kind;
    size_t size = pl->size;
    host_kind *k = hk(s, kind);
    *over_budget = 0;
    if (kind == GPOOL_MEM_HOST_MAPPED && !s->can_map)
        return gp_fail(GPOOL_ERR_UNSUPPORTED, "device %d cannot map host memory", pool->cfg.device);
    size_t align = pl->align;
    size_t want_page = pl->want_page;
    unsigned flags = pl->flags;
    size_t est = (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);

    /* mapped memory whose device address is not its host address: small blocks from
     * registered extents (never spanning two, so device address = extent's + offset), larger
     * ones from cuMemHostAlloc one by one (a large block may span registrations) */
    int small_ok = size < GP_SMALL_LIMIT && !want_page && align <= 4 * KiB;
    int src = kind == GPOOL_MEM_HOST_MAPPED && !s->uva            ? SRC_DIRECT
              : small_ok                                          ? SRC_SMALL
              : kind == GPOOL_MEM_HOST_MAPPED && !s->reg_same_ptr ? SRC_DIRECT
                                                                  : SRC_LARGE;
    size_t page = pl->page; /* as asked (checked) or as the policy chose */
    int pg = page >= HOST_HUGE_PAGE ? PG_2M : PG_4K;

    gp_small *sm = NULL;
    gp_arena *la = NULL;
    gpool_status st = GPOOL_OK;
    pthread_mutex_lock(&s->lock);
    if (settle_due_locked(s, kind, est, SETTLE_IF_DUE)) { /* waiting frees first */
        pthread_mutex_unlock(&s->lock);
        host_settle(pool, s, kind, est, SETTLE_IF_DUE, NULL);
        pthread_mutex_lock(&s->lock);
    }
    st = gp_budget_admit(pool, kind, size, k->in_use, est);
    if (st != GPOOL_OK) {
        pthread_mutex_unlock(&s->lock);
        *over_budget = 1;
        return st;
    }
    if (src == SRC_SMALL) {
        if (!k->small) st = gp_small_create(&s->env, kind, &k->reserved, &k->small);
        if (st == GPOOL_OK) {
            sm = k->small;
            k->small_refs++;
        }
    } else if (src == SRC_LARGE) {
        st = large_get_locked(s, kind, pg, &la);
    }
    int charged = st == GPOOL_OK;
    if (charged) k->in_use += est; /* charge the budget now; settled below */
    if (charged && (src == SRC_SMALL || src == SRC_LARGE) &&
        (kind != GPOOL_MEM_HOST_MAPPED || s->reg_same_ptr) &&
        warm_locked(s, k, src == SRC_LARGE ? la : NULL, pool, params, pl, out))
        return GPOOL_OK; /* unlocked there */
    pthread_mutex_unlock(&s->lock);

    uintptr_t host = 0, key = 0;
    size_t got = 0;
    if (st == GPOOL_OK) {
        if (src == SRC_SMALL) {
            void *p = NULL;
            st = gp_small_alloc(sm, size, align, (flags & GPOOL_ALLOC_ZERO) != 0, &p, &got);
            host = key = (uintptr_t)p;
            if (st == GPOOL_OK && kind == GPOOL_MEM_HOST_MAPPED && !s->reg_same_ptr) {
                key = gp_small_device_addr(sm, host); /* the driver's device address */
                if (!key) key = host;
            }
            page = 4 * KiB;
        } else if (src == SRC_LARGE) {
            void *p = NULL;
            st = gp_arena_alloc(la, size, align, 0, params ? (uint32_t)params->usage : 0, &p);
            if (st == GPOOL_ERR_OUT_OF_MEMORY) *oom_arena = la;
            host = key = (uintptr_t)p;
            got = est;
        } else {
            st = direct_alloc(s, k, size, align, &host, &key, &got);
            page = 4 * KiB; /* cuMemHostAlloc: the OS page */
        }
    }
    host_block *b = NULL;
    if (st == GPOOL_OK) {
        b = malloc(sizeof *b);
        if (!b) st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a block record");
        if (!b) {
            host_block tmp = {
                .host = host, .dev = key, .size = got, .src = (uint8_t)src, .pg = (uint8_t)pg};
            release_memory(s, k, sm, &tmp);
        }
    }
    if (b) {
        *b = (host_block){
            .host = host,
            .dev = key,
            .requested = size,
            .size = got,
            .page = page,
            .stream = params && params->stream ? params->stream : pool->cfg.default_stream,
            .kind = kind,
            .usage = params ? params->usage : GPOOL_USAGE_DEFAULT,
            .src = (uint8_t)src,
            .pg = (uint8_t)pg,
            .fell_back = (uint8_t)(pl->kind != pl->first),
        };
        if ((flags & GPOOL_ALLOC_ZERO) && src != SRC_SMALL) memset((void *)host, 0, size);
    }
    pthread_mutex_lock(&s->lock);
    if (b && gp_ptrmap_put(&s->blocks, key, b) != 0) {
        pthread_mutex_unlock(&s->lock);
        release_memory(s, k, sm, b);
        free(b);
        b = NULL;
        st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the block record map");
        pthread_mutex_lock(&s->lock);
    }
    if (b) {
        k->in_use += got - est;
        k->requested += size;
        k->allocs++;
        k->live++;
        note_peaks(k);
    } else {
        if (charged) k->in_use -= est; /* undo the charge (none when the arena failed) */
        if (sm) k->small_refs--;       /* a failed small alloc drops its reference */
    }
    pthread_mutex_unlock(&s->lock);
    if (b) *out = (void *)key;
    return st;
}

/* One host request climbing the ladder (ladder.h). */
typedef struct host_request {
    gpool_t *pool;
    gp_sysmem *s;
    const gp_placement *pl;
    const gpool_alloc_params *params; /* usage, and the block's tag in stream */
    int refused;                      /* the last attempt was refused by the kind's budget */
    gp_arena *oom_arena;              /* the page arena the last attempt ran out of, or NULL */
    char *why; /* why make room could not give memory back: HOST_WHY_CAP bytes of the caller's */
} host_request;

#define HOST_WHY_CAP 300

/* The cache rung: the kind's small-block arena, page arena or cuMemHostAlloc. */
static gpool_status host_attempt(void *ctx, void **out)
{
    host_request *q = ctx;
    *out = NULL;
    q->oom_arena = NULL;
    return alloc_kind(q->pool, q->s, q->pl, q->params, &q->refused, &q->oom_arena, out);
}

/* Rung streams: the budget counts frees waiting on the clock: ask it before refusing. */
static int host_streams(void *ctx)
{
    host_request *q = ctx;
    if (!q->refused) return 0;
    pthread_mutex_lock(&q->s->lock);
    int waiting = hk(q->s, q->pl->kind)->pend_n != 0;
    pthread_mutex_unlock(&q->s->lock);
    return waiting && host_settle(q->pool, q->s, q->pl->kind, 0, SETTLE_ASK, NULL);
}

/* Rung make room: finish the frees waiting on streams (a synchronize) and give back the page
 * arena's unused pages. A budget refusal the policy moves to another kind moves first. */
static int host_make_room(void *ctx)
{
    host_request *q = ctx;
    gp_placement probe = *q->pl;
    if (q->refused && gp_policy_move(&probe, GPOOL_ERR_OUT_OF_MEMORY, 1)) return 0;
    size_t est = (q->pl->size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
    size_t freed = 0;
    if (q->oom_arena) gp_arena_make_room(q->oom_arena, &freed, q->why, HOST_WHY_CAP);
    size_t drained = gp_kinds_finish_deferred(q->pool, 1);
    /* a retry only when what went back could be the room missing: for a budget refusal, any
     * settled bytes of the kind (they counted against the budget) */
    size_t settled = host_settle(q->pool, q->s, q->pl->kind, 0, SETTLE_SYNC, NULL);
    return freed || drained || settled >= est || (q->refused && settled);
}

static gpool_status host_report(void *ctx, gpool_status st)
{
    host_request *q = ctx;
    if (!q->oom_arena) return st;
    return gp_arena_oom_report(q->oom_arena, q->pl->size, q->pl->align, 0, q->why);
}

/* The host kind's ladder: no thread caches; the other pools' host memory is their own. */
static const gp_ladder host_ladder = {
    .attempt = host_attempt,
    .relieve =
        {
            [GP_RUNG_STREAMS] = host_streams,
            [GP_RUNG_MAKE_ROOM] = host_make_room,
        },
    .report = host_report,
};

/* The host kind's gp_kind.alloc: host blocks are not made during graph capture (their paths
 * may call the driver), a request moved here off device memory included, and frees waiting
 * on streams are finished before one fails. A request moved here off device memory went
 * through the device kind's stream handling and is ordered on the request's stream as well.
 * *out is the host address for pinned and the device address for mapped memory. One request
 * that ends out of memory counts once (gpool_stats.ooms), on the kind it was tried on,
 * whatever rungs it climbed. */
static gpool_status host_alloc(gpool_t *pool, const gp_placement *pl,
                               const gpool_alloc_params *params, gpool_stream_t stream,
                               int *refused, void **out)
{
    *out = NULL;
    if (!is_host_kind(pl->kind))
        return gp_fail(GPOOL_ERR_INVALID_ARG, "memory kind %d is not a host kind", (int)pl->kind);
    gpool_alloc_params hp = params ? *params : (gpool_alloc_params){0};
    /* never on a capturing stream, a request moved here off device memory included */
    gpool_status cst = gp_stream_may_drive(pool, gp_stream_tag(stream));
    if (cst != GPOOL_OK) return cst;
    if (pl->first != GPOOL_MEM_DEVICE) gp_kinds_finish_deferred(pool, 0);
    /* the block's tag: the request's stream, also for a request moved here off device memory
     * (gpool_alloc_async ignores params->stream) */
    hp.stream = (gpool_stream_t)gp_stream_tag(stream);
    char why[HOST_WHY_CAP];
    why[0] = 0;
    host_request q = {.pool = pool, .pl = pl, .params = &hp, .why = why};
    gpool_status st = sys_get(pool, &q.s);
    if (st != GPOOL_OK) return st;
    int retried;
    st = gp_ladder_climb(&host_ladder, &q, out, &retried);
    *refused = q.refused;
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        gp_placement probe = *pl;
        int spills = q.refused && gp_policy_move(&probe, st, 1);
        pthread_mutex_lock(&q.s->lock);
        if (spills)
            hk(q.s, pl->kind)->spills++; /* pool.c moves it on */
        else
            hk(q.s, pl->kind)->ooms++;
        pthread_mutex_unlock(&q.s->lock);
    }
    return st;
}

/* ---------- free and lookup ---------- */

/* Lock held: 1 when p lies inside memory this state manages (any source). */
static int inside_locked(gp_sysmem *s, uintptr_t p)
{
    for (int i = 0; i < 2; i++) {
        for (int pg = 0; pg < PG_COUNT; pg++) {
            gp_arena *a = s->k[i].large[pg];
            if (!a) continue;
            gp_arena_lock(a);
            int in = gp_arena_contains(a, p);
            gp_arena_unlock(a);
            if (in) return 1;
        }
        if (s->k[i].small && gp_small_contains(s->k[i].small, p)) return 1;
    }
    return 0;
}

/* Lock held: the live block containing p (interior addresses too), or NULL. */
static host_block *containing_locked(gp_sysmem *s, uintptr_t p, uintptr_t *key)
{
    host_block *b = gp_ptrmap_get(&s->blocks, p);
    if (b) {
        *key = p;
        return b;
    }
    for (size_t i = 0; i < s->blocks.cap; i++) {
        uintptr_t k = s->blocks.keys[i];
        if (!k) continue;
        host_block *x = s->blocks.vals[i];
        if (p - k < x->size || p - x->host < x->size) {
            *key = k;
            return x;
        }
    }
    return NULL;
}

/* Not a live block: say whether ptr is ours (stale or interior) or foreign pinned memory. */
static gpool_status not_live(gp_sysmem *s, const void *ptr, int interior_ok, int *owned)
{
    uintptr_t p = (uintptr_t)ptr, key = 0;
    pthread_mutex_lock(&s->lock);
    int inside = inside_locked(s, p);
    host_block *b = interior_ok ? NULL : containing_locked(s, p, &key);
    pthread_mutex_unlock(&s->lock);
    if (b) {
        *owned = 1;
        return gp_bad_pointer(ptr,
                              p == b->host && key != b->host ? GP_PTR_HOST_ALIAS : GP_PTR_INTERIOR,
                              b->kind, key);
    }
    if (inside) {
        *owned = 1;
        return gp_bad_pointer(ptr, GP_PTR_FREED, GP_MEM_HOST_ANY, 0);
    }
    if (gp_hostmem_page_locked(&s->env, ptr)) { /* someone else's pinned memory */
        *owned = 1;
        return gp_bad_pointer(ptr, GP_PTR_FOREIGN_LOCKED, GPOOL_MEM_AUTO, 0);
    }
    *owned = 0;
    return GPOOL_OK;
}

gpool_status gp_sysmem_free(gpool_t *pool, void *ptr, int *owned)
{
    *owned = 0;
    gp_sysmem *s = sys_of(pool);
    if (!s || !ptr) return GPOOL_OK;
    pthread_mutex_lock(&s->lock);
    host_block *b = gp_ptrmap_del(&s->blocks, (uintptr_t)ptr);
    gp_small *sm = NULL;
    host_kind *k = NULL;
    if (b) {
        if (b->wait) gp_host_clock_unref(&s->clock, b->wait);
        k = hk(s, b->kind);
        sm = k->small; /* stays while small_refs > 0 */
        k->in_use -= b->size;
        k->requested -= b->requested;
        k->frees++;
        k->live--;
    }
    pthread_mutex_unlock(&s->lock);
    if (!b) return not_live(s, ptr, 0, owned);
    *owned = 1;
    release_memory(s, k, sm, b);
    if (b->src == SRC_SMALL) {
        pthread_mutex_lock(&s->lock);
        k->small_refs--;
        pthread_mutex_unlock(&s->lock);
    }
    free(b);
    return GPOOL_OK;
}

/* ---------- frees on the event clock ---------- */

/* Lock held: room for one more waiting free. 0, or -1 out of host memory. */
static int pend_room(gp_sysmem *s)
{
    if (s->npend < s->cap_pend) return 0;
    size_t cap = s->cap_pend ? 2 * s->cap_pend : 64;
    host_pending *np = realloc(s->pend, cap * sizeof *np);
    if (!np) return -1;
    s->pend = np;
    s->cap_pend = cap;
    return 0;
}

/* A free with no recorded streams: the block leaves the caller's view at once and waits,
 * marked on the freeing stream (and the allocating one when another), for the clock; no
 * driver call, one lock. *taken = 0 when it could not be marked (the caller takes the
 * deferred path). */
static gpool_status free_on_clock(gp_sysmem *s, void *ptr, uintptr_t tag, gp_block_ref *ref,
                                  int *taken)
{
    *taken = 1;
    pthread_mutex_lock(&s->lock);
    size_t slot = gp_ptrmap_slot(&s->blocks, (uintptr_t)ptr); /* the one lookup of the free */
    if (slot == s->blocks.cap) {
        pthread_mutex_unlock(&s->lock);
        return not_live(s, ptr, 0, &ref->owned);
    }
    host_block *b = s->blocks.vals[slot];
    host_pending pe = {.b = b};
    uintptr_t btag = b->wait ? b->wait : (uintptr_t)b->stream;
    if (pend_room(s) != 0 || gp_host_clock_mark(&s->clock, tag, &pe.mark[pe.nmark++]) != 0 ||
        (btag != tag && gp_host_clock_mark(&s->clock, btag, &pe.mark[pe.nmark++]) != 0)) {
        pthread_mutex_unlock(&s->lock);
        *taken = 0;
        return GPOOL_OK;
    }
    gp_ptrmap_del_at(&s->blocks, slot);
    if (b->wait) gp_host_clock_unref(&s->clock, b->wait); /* marked on it instead */
    host_kind *k = hk(s, b->kind);
    k->requested -= b->requested;
    k->frees++;
    k->live--;
    k->pend_n++;
    k->pend_bytes += b->size;
    s->pend_bytes += b->size;
    s->pend[s->npend++] = pe;
    size_t requested = b->requested; /* b is another thread's to settle once unlocked */
    pthread_mutex_unlock(&s->lock);
    ref->owned = 1;
    ref->requested = requested;
    return GPOOL_OK;
}

/* gpool_config.release_threshold: a page arena that got large blocks back gives its free pages
 * back when it holds more than that beyond its blocks (as the device kind after a large free).
 * Their streams' work is done, so no synchronize; a failure leaves them cached (a later trim
 * tries again). No lock held. */
static void release_above_threshold(gpool_t *pool, gp_sysmem *s, int large_back[2][PG_COUNT])
{
    for (int ki = 0; ki < 2; ki++)
        for (int pg = 0; pg < PG_COUNT; pg++) {
            gp_arena *a = large_back[ki][pg] ? s->k[ki].large[pg] : NULL; /* never moves */
            if (!a) continue;
            gp_arena_counters c;
            size_t held, idle;
            gp_arena_stats(a, &c, &held, &idle);
            if (held > c.in_use + pool->cfg.release_threshold)
                (void)gp_arena_trim(a, pool->cfg.release_threshold);
        }
}

/* Give the waiting frees whose streams are done back to their sources: ask the clock first
 * when enough wait, when a request of want bytes of kind would otherwise need fresh memory,
 * or always (how: SETTLE_ASK, or SETTLE_SYNC: a context synchronize; *st, when st is not
 * NULL, says whether that failed). Returns the bytes of kind that went back. No lock held. */
static size_t host_settle(gpool_t *pool, gp_sysmem *s, gpool_mem_kind kind, size_t want, int how,
                          gpool_status *st)
{
    pthread_mutex_lock(&s->lock);
    if (!settle_due_locked(s, kind, want, how)) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    int large_back[2][PG_COUNT] = {{0}}; /* page arenas that got blocks back */
    gp_host_clock_recount(&s->clock);
    for (size_t i = 0; i < s->npend; i++)
        for (unsigned m = 0; m < s->pend[i].nmark; m++)
            gp_host_clock_waits(&s->clock, &s->pend[i].mark[m]);
    gpool_status polled = /* lets the lock go meanwhile */
        gp_host_clock_poll(&s->clock, pool, &s->lock, how == SETTLE_SYNC);
    if (st) *st = polled;
    size_t total = 0, n;
    do {
        /* (the blocks are released outside the lock, 64 at a time) */
        struct {
            host_block *b;
            gp_small *sm;
        } out[64];
        n = 0;
        for (size_t i = 0; i < s->npend && n < 64;) {
            host_pending *pe = &s->pend[i];
            int done = 1;
            for (unsigned m = 0; m < pe->nmark; m++)
                done &= gp_host_clock_done(&s->clock, &pe->mark[m]);
            if (!done) {
                i++;
                continue;
            }
            host_block *b = pe->b;
            host_kind *k = hk(s, b->kind);
            k->in_use -= b->size;
            k->pend_n--;
            k->pend_bytes -= b->size;
            s->pend_bytes -= b->size;
            out[n].b = b;
            out[n++].sm = k->small; /* stays while small_refs > 0 */
            *pe = s->pend[--s->npend];
        }
        pthread_mutex_unlock(&s->lock);
        void *small[2][64]; /* small blocks go back per kind in one hold of its lock */
        size_t nsmall[2] = {0, 0};
        gp_small *sms[2] = {NULL, NULL};
        for (size_t i = 0; i < n; i++) {
            host_block *b = out[i].b;
            int ki = b->kind - GPOOL_MEM_HOST_PINNED;
            if (b->src != SRC_SMALL) {
                release_memory(s, hk(s, b->kind), out[i].sm, b);
                if (b->src == SRC_LARGE) large_back[ki][b->pg] = 1;
                continue;
            }
            sms[ki] = out[i].sm;
            small[ki][nsmall[ki]++] = (void *)b->host;
        }
        for (int ki = 0; ki < 2; ki++)
            if (nsmall[ki]) gp_small_free_many(sms[ki], small[ki], nsmall[ki]);
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < n; i++) {
            if (out[i].b->src == SRC_SMALL) hk(s, out[i].b->kind)->small_refs--;
            if (out[i].b->kind == kind || kind == GPOOL_MEM_AUTO) total += out[i].b->size;
            spare_put_locked(s, out[i].b);
        }
    } while (n == 64);
    pthread_mutex_unlock(&s->lock);
    if (pool->cfg.release_threshold) release_above_threshold(pool, s, large_back);
    return total;
}

/* The host kind's gp_kind.free: a block's free waits for the work queued on its streams -- on
 * the event clock, or (recorded on other streams) behind events of its own (reuse.c). */
static gpool_status host_free(gpool_t *pool, void *ptr, uintptr_t tag, gp_block_ref *ref)
{
    *ref = (gp_block_ref){0};
    gp_sysmem *s = sys_of(pool);
    if (!s || !ptr) return GPOOL_OK;
    if (!gp_host_recorded(pool, ptr)) {
        int taken;
        gpool_status st = free_on_clock(s, ptr, tag, ref, &taken);
        if (taken) return st;
    }
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    gpool_status st = gp_sysmem_block_info(pool, ptr, &d, &ref->owned);
    if (!ref->owned || st != GPOOL_OK) return st;
    ref->requested = d.requested_size;
    /* the address gpool_alloc returned: a mapped block's host address is not it */
    uintptr_t key =
        d.kind == GPOOL_MEM_HOST_PINNED ? (uintptr_t)d.host_ptr : (uintptr_t)d.device_ptr;
    if ((uintptr_t)ptr != key)
        return gp_bad_pointer(ptr, ptr == d.host_ptr ? GP_PTR_HOST_ALIAS : GP_PTR_INTERIOR, d.kind,
                              key);
    pthread_mutex_lock(&s->lock); /* its allocating stream released: wait for that instead */
    host_block *b = gp_ptrmap_get(&s->blocks, (uintptr_t)ptr);
    if (b && b->wait) /* once its release's event completed, nothing more to wait for */
        d.stream = gp_host_clock_retired_done(&s->clock, pool, b->wait) ? (gpool_stream_t)tag
                                                                        : (gpool_stream_t)b->wait;
    pthread_mutex_unlock(&s->lock);
    int free_now;
    st = gp_stream_defer_host_free(pool, ptr, tag, &d, &free_now);
    if (free_now) st = gp_sysmem_free(pool, ptr, &ref->owned);
    return st;
}

gpool_status gp_sysmem_stream_release(gpool_t *pool, uintptr_t tag, uintptr_t rtag)
{
    gp_sysmem *s = sys_of(pool);
    if (!s) return GPOOL_OK;
    pthread_mutex_lock(&s->lock);
    uint64_t live = 0;
    for (size_t i = 0; i < s->blocks.cap; i++) {
        host_block *b = s->blocks.keys[i] ? s->blocks.vals[i] : NULL;
        if (b && !b->wait && (uintptr_t)b->stream == tag) {
            b->wait = rtag;
            live++;
        }
    }
    gpool_status st = gp_host_clock_retire(&s->clock, pool, tag, rtag, live, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return st;
}

int gp_sysmem_holds(gpool_t *pool, const void *ptr)
{
    gp_sysmem *s = sys_of(pool);
    if (!s || !ptr) return 0;
    uintptr_t key = 0;
    pthread_mutex_lock(&s->lock);
    int held = containing_locked(s, (uintptr_t)ptr, &key) || inside_locked(s, (uintptr_t)ptr);
    pthread_mutex_unlock(&s->lock);
    return held;
}

gpool_status gp_sysmem_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out, int *owned)
{
    *owned = 0;
    gp_sysmem *s = sys_of(pool);
    if (!s || !ptr) return GPOOL_OK;
    uintptr_t key = 0;
    pthread_mutex_lock(&s->lock);
    host_block *b = containing_locked(s, (uintptr_t)ptr, &key);
    host_block copy = b ? *b : (host_block){0};
    pthread_mutex_unlock(&s->lock);
    if (!b) return not_live(s, ptr, 1, owned);
    *owned = 1;
    memset(out, 0, sizeof *out);
    out->kind = copy.kind;
    out->usage = copy.usage;
    out->requested_size = copy.requested;
    out->size = copy.size;
    out->page_size = copy.page;
    out->host_ptr = (void *)copy.host;
    out->device_ptr = copy.kind == GPOOL_MEM_HOST_MAPPED ? (uint64_t)key
                      : s->uva && s->reg_same_ptr        ? (uint64_t)copy.host
                                                         : 0;
    out->stream = copy.stream;
    out->device = pool->cfg.device;
    out->fell_back = copy.fell_back;
    return GPOOL_OK;
}

/* ---------- trim (stats and JSON: kind_host_report.c) ---------- */

static gpool_status host_trim(gpool_t *pool, size_t keep)
{
    gp_sysmem *s = sys_of(pool);
    if (!s) return GPOOL_OK;
    gpool_status st = GPOOL_OK; /* waiting frees first (a synchronize); they stay if it fails */
    gp_kinds_finish_deferred(pool, 1); /* and those gpool_record_stream made wait */
    host_settle(pool, s, GPOOL_MEM_AUTO, 0, SETTLE_SYNC, &st);
    if (st != GPOOL_OK) {
        char why[300];
        snprintf(why, sizeof why, "%s", gpool_last_error());
        st = gp_fail(st, "gpool_trim: %s (the host frees waiting on it stay cached)", why);
    }
    pthread_mutex_lock(&s->lock);
    spare_drop_locked(s);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < 2; i++) {
        host_kind *k = &s->k[i];
        gp_small *drop = NULL;
        gp_arena *large[PG_COUNT];
        pthread_mutex_lock(&s->lock);
        for (int pg = 0; pg < PG_COUNT; pg++)
            large[pg] = k->large[pg];
        /* the small-block allocator keeps its registered extents: with no small block live, the
         * whole small-block arena goes (and is made again on the next small block) */
        if (k->small && !k->small_refs) {
            drop = k->small;
            k->small = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        gpool_status s1 = gp_small_destroy(drop); /* a failed unregister is reported */
        if (s1 != GPOOL_OK && st == GPOOL_OK) st = s1;
        for (int pg = 0; pg < PG_COUNT; pg++) {
            if (!large[pg]) continue;
            gpool_status s2 = gp_arena_trim(large[pg], keep);
            if (s2 != GPOOL_OK && st == GPOOL_OK) st = s2;
        }
    }
    return st;
}

/* ---------- teardown and diagnostics ---------- */

static gpool_status host_destroy(gpool_t *pool, uint64_t *live, uint64_t *bytes)
{
    gp_sysmem *s = sys_of(pool);
    if (!s) return GPOOL_OK;
    gp_kinds_finish_deferred(pool, 1); /* frees gpool_record_stream made wait: done by the user */
    host_settle(pool, s, GPOOL_MEM_AUTO, 0, SETTLE_SYNC, NULL);
    for (size_t i = 0; i < s->npend; i++) { /* the synchronize failed: they go all the same */
        host_block *b = s->pend[i].b;
        if (b->src == SRC_DIRECT) direct_free(s, hk(s, b->kind), b);
        free(b);
    }
    free(s->pend);
    spare_drop_locked(s);
    gp_host_clock_fini(&s->clock, pool);
    for (size_t i = 0; i < s->blocks.cap; i++) {
        if (!s->blocks.keys[i]) continue;
        host_block *b = s->blocks.vals[i];
        *live += 1;
        *bytes += b->size;
        if (b->src == SRC_DIRECT) direct_free(s, hk(s, b->kind), b);
        free(b); /* small and page-arena memory goes with its arena */
    }
    for (int i = 0; i < 2; i++) {
        for (int pg = 0; pg < PG_COUNT; pg++) {
            if (!s->k[i].large[pg]) continue;
            gp_arena_fini(s->k[i].large[pg], NULL, NULL);
            free(s->k[i].large[pg]);
        }
        (void)gp_small_destroy(s->k[i].small); /* the pool goes whatever the driver says */
    }
    gp_numa_fini(&s->numa);
    gp_ptrmap_fini(&s->blocks);
    pthread_mutex_destroy(&s->lock);
    free(s);
    __atomic_store_n(&pool->sys, NULL, __ATOMIC_RELEASE);
    return GPOOL_OK;
}

const gp_kind gp_host_kind = {
    .alloc = host_alloc,
    .free = host_free,
    .block_info = gp_sysmem_block_info,
    .stats = gp_host_stats,
    .trim = host_trim,
    .dump_json = gp_host_dump_json,
    .destroy = host_destroy,
};

gpool_status gp_sysmem_placement(gpool_t *pool, int *node, char *why, size_t n)
{
    gp_sysmem *s = NULL;
    gpool_status st = sys_get(pool, &s);
    if (st != GPOOL_OK) return st;
    *node = s->numa.node;
    if (why && n) snprintf(why, n, "%s: %s", s->numa.source, s->numa.why);
    return GPOOL_OK;
}

int gp_sysmem_in_small_extent(gpool_t *pool, gpool_mem_kind kind, const void *ptr)
{
    gp_sysmem *s = sys_of(pool);
    if (!s || !is_host_kind(kind)) return 0;
    pthread_mutex_lock(&s->lock);
    gp_small *sm = hk(s, kind)->small;
    int in = sm && gp_small_contains(sm, (uintptr_t)ptr);
    pthread_mutex_unlock(&s->lock);
    return in;
}

int gp_sysmem_small_arena(gpool_t *pool, gpool_mem_kind kind)
{
    gp_sysmem *s = sys_of(pool);
    if (!s || !is_host_kind(kind)) return -1;
    pthread_mutex_lock(&s->lock);
    gp_small *sm = hk(s, kind)->small;
    int ind = sm ? (int)gp_small_arena_index(sm) : -1;
    pthread_mutex_unlock(&s->lock);
    return ind;
}

gpool_status gp_sysmem_force_no_uva(gpool_t *pool)
{
    gp_sysmem *s = NULL;
    gpool_status st = sys_get(pool, &s);
    if (st != GPOOL_OK) return st;
    pthread_mutex_lock(&s->lock);
    s->uva = 0;
    pthread_mutex_unlock(&s->lock);
    return GPOOL_OK;
}
