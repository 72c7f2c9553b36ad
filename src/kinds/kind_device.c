/* The device kind: vidmem blocks through the thread caches and the device arena, with the
 * stream-ordered reuse rules (stream.c) on the way in and out. The pool calls it through
 * gp_kind (kind.h); the arena and vidmem.c do the rest. */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "error.h"
#include "kind.h"
#include "ladder.h"
#include "policy.h"
#include "pool.h"
#include "stream.h"
#include "tcache.h"
#include "vidmem.h"

static gp_arena *device_arena(gpool_t *pool)
{
    return pool->device;
}

/* ---------- creation ---------- */

gpool_status gp_device_kind_create(gpool_t *pool)
{
    void *vctx = NULL;
    size_t total = 0;
    gpool_status st = gp_vidmem_create(&pool->dc, pool->cfg.peer_access, &vctx);
    if (st != GPOOL_OK) return st;
    CUresult r =
        GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuDeviceTotalMem(&total, pool->dc.dev));
    if (r != CUDA_SUCCESS) {
        st = gp_cu_fail(r, "cuDeviceTotalMem");
        gp_vidmem_ops.fini(vctx, NULL);
        return st;
    }
    if (pool->cfg.ipc && (st = gp_vidmem_set_ipc(vctx)) != GPOOL_OK) {
        gp_vidmem_ops.fini(vctx, NULL);
        return st;
    }
    /* memory above the threshold is to go back: growth would pin some (vidmem.h) */
    if (pool->cfg.release_threshold) gp_vidmem_set_growth(vctx, 0);
    pool->granularity = gp_vidmem_granularity(vctx);
    pool->device_total = total;
    /* Address space is plentiful: one reservation of 2x the device (at least 8 GiB) keeps
     * every block in one heap, so free space coalesces across the whole device. */
    size_t va = pool->cfg.va_reserve ? pool->cfg.va_reserve : 2 * total;
    if (!pool->cfg.va_reserve && va < ((size_t)8 << 30)) va = (size_t)8 << 30;
    gp_arena *a = pool->device = gp_arena_new();
    if (!a) {
        gp_vidmem_ops.fini(vctx, NULL);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory creating a pool");
    }
    st = gp_arena_init(a, GPOOL_MEM_DEVICE, &gp_vidmem_ops, vctx, pool->granularity, va,
                       pool->cfg.small_max, &gp_stream_reuse_ops, pool, &pool->owners);
    if (st != GPOOL_OK) {
        gp_vidmem_ops.fini(vctx, NULL);
        free(a);
        pool->device = NULL;
        return st;
    }
    gp_arena_set_device(a, (uintptr_t)pool->cfg.default_stream, total);
    gp_arena_set_stream_reuse(a, pool->cfg.stream_reuse == GPOOL_STREAM_REUSE_WAIT);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    st = gp_arena_reserve_first(a);
    gp_dc_leave(&pool->dc, pushed);
    if (st != GPOOL_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", gpool_last_error());
        st = gp_fail(st,
                     "gpool_create: cannot reserve %zu bytes of device address space "
                     "(va_reserve): %s",
                     va, why);
        gp_device_kind_abandon(pool);
    }
    return st;
}

void gp_device_kind_abandon(gpool_t *pool)
{
    gp_arena *a = device_arena(pool);
    if (!a) return;
    gp_arena_fini(a, NULL, NULL);
    free(a);
    pool->device = NULL;
}

/* ---------- allocation ---------- */

/* One device request climbing the ladder (ladder.h). */
typedef struct device_request {
    gpool_t *pool;
    gp_arena *a;
    const gp_placement *pl;
    uintptr_t tag;
    uint32_t usage;
    size_t charge; /* what the budget counts: a slab slot's class size, or the 256-byte size */
    int cached;    /* a small block of the default stream: the thread cache serves it */
    int refused;   /* the last attempt was refused by the policy (budget or device size) */
    int pressed;   /* an attempt ran out of the arena's memory (counts one oom retry) */
    int room_made; /* make room ran: later attempts place where the fewest fresh pages are needed */
    int capture;   /* the stream captures and the caller allows fresh pages (IN_CAPTURE) */
    char *why;     /* why make room could not give memory back ("" when it could), WHY_CAP bytes
                      (a buffer of the caller's, not zeroed on every request) */
} device_request;

#define WHY_CAP 300

/* The cache rung: admitted against the budget (blocks freed on streams that are done no
 * longer count), then the arena: cached blocks, other streams' completed frees, fresh pages. */
static gpool_status device_attempt(void *ctx, void **out)
{
    device_request *q = ctx;
    gpool_t *pool = q->pool;
    const gp_placement *pl = q->pl;
    gpool_status st = GPOOL_OK;
    if (q->cached && gp_tcache_alloc(pool, pl->size, 1, &st, out)) return GPOOL_OK;
    if (st != GPOOL_OK) { /* the cache's refill found no memory: the ladder's to climb */
        q->refused = 0;
        q->pressed = 1;
        return st;
    }
    uint64_t used = pool->cfg.budget[GPOOL_MEM_DEVICE] ? gp_arena_in_use(q->a) : 0;
    st = gp_budget_admit(pool, GPOOL_MEM_DEVICE, pl->size, used, q->charge);
    q->refused = st != GPOOL_OK;
    if (st != GPOOL_OK) return st;
    st = gp_arena_alloc_ex(q->a, pl->size, pl->align, q->tag, q->usage,
                           pl->flags | (q->room_made ? GP_ARENA_FEWEST_PAGES : 0) |
                               (q->capture ? GP_ARENA_CAPTURE_MAP : 0),
                           pl->page, out);
    if (st == GPOOL_ERR_OUT_OF_MEMORY) q->pressed = 1;
    return st;
}

/* A request no amount of giving back can help: larger than the device. */
static int device_hopeless(const device_request *q)
{
    return q->refused && !q->pool->cfg.budget[GPOOL_MEM_DEVICE];
}

/* Rung tcaches: blocks parked in thread caches count as in use and may be what is missing. */
static int device_tcaches(void *ctx)
{
    device_request *q = ctx;
    if (device_hopeless(q)) return 0;
    gp_tcache_flush_mine(q->pool);
    gp_tcache_reclaim_idle(q->pool);
    if (!q->refused) gp_tcache_flush_all(q->pool);
    return 1;
}

/* Rung make room: wait for pending work and give back unused pages (remapped where needed). */
static int device_make_room(void *ctx)
{
    device_request *q = ctx;
    if (q->refused) return 0; /* the budget counts blocks, not pages */
    size_t freed;
    gp_arena_make_room(q->a, &freed, q->why, WHY_CAP);
    q->room_made = 1;
    return 1;
}

/* Rungs other pools: the other pools of this device give back their cache. */
static int device_other_pools_cached(void *ctx)
{
    device_request *q = ctx;
    return !q->refused && gp_registry_relieve(q->pool, 1);
}
static int device_other_pools_idle(void *ctx)
{
    device_request *q = ctx;
    return !q->refused && gp_registry_relieve(q->pool, 2);
}

static gpool_status device_report(void *ctx, gpool_status st)
{
    device_request *q = ctx;
    if (q->refused) return st; /* the policy's message stands */
    return gp_arena_oom_report(q->a, q->pl->size, q->pl->align, q->tag, q->why);
}

/* The device kind's ladder; streams: none after the attempt (the arena polls other streams
 * inside it, and gp_kinds_finish_deferred runs before the climb). */
static const gp_ladder device_ladder = {
    .attempt = device_attempt,
    .relieve =
        {
            [GP_RUNG_TCACHES] = device_tcaches,
            [GP_RUNG_MAKE_ROOM] = device_make_room,
            [GP_RUNG_OTHER_POOLS_CACHED] = device_other_pools_cached,
            [GP_RUNG_OTHER_POOLS_IDLE] = device_other_pools_idle,
        },
    .report = device_report,
};

/* A request on a capturing stream that may map fresh pages (GPOOL_ALLOC_IN_CAPTURE): one
 * attempt, with the thread in relaxed capture mode around it, so that the mapping calls cannot
 * invalidate a global-mode capture (cuThreadExchangeStreamCaptureMode's doc: a relaxed thread
 * "is not prohibited from potentially unsafe API calls"; its push-pop use). No rung runs: they
 * wait for streams, which no capture allows. */
static gpool_status capture_alloc(device_request *q, void **out)
{
    const gp_driver *drv = q->pool->dc.drv;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    int swapped = drv->cuThreadExchangeStreamCaptureMode &&
                  GP_DRV(q->pool->dc.cnt, GPOOL_DRV_STREAM,
                         drv->cuThreadExchangeStreamCaptureMode(&mode)) == CUDA_SUCCESS;
    q->capture = swapped; /* without relaxed mode, only memory free for the stream */
    gpool_status st = device_attempt(q, out);
    if (swapped)
        GP_DRV(q->pool->dc.cnt, GPOOL_DRV_STREAM, drv->cuThreadExchangeStreamCaptureMode(&mode));
    if (st == GPOOL_ERR_OUT_OF_MEMORY) {
        st = device_report(q, st);
        char why[512];
        snprintf(why, sizeof why, "%s", gpool_last_error());
        gp_fail(st,
                "%s; the stream is capturing a CUDA graph, so gpool could not wait for other "
                "streams' frees or give cached pages back for it",
                why);
    }
    return st;
}

static gpool_status device_alloc(gpool_t *pool, const gp_placement *pl,
                                 const gpool_alloc_params *params, gpool_stream_t stream,
                                 int *refused, void **out)
{
    size_t size = pl->size;
    unsigned flags = pl->flags;
    uintptr_t tag = gp_stream_tag(stream);
    if (stream == CU_STREAM_PER_THREAD) gp_stream_cover(pool, tag);
    gp_arena *a = device_arena(pool);
    char why[WHY_CAP];
    why[0] = 0;
    device_request q = {
        .why = why,
        .pool = pool,
        .a = a,
        .pl = pl,
        .tag = tag,
        .usage = params ? (uint32_t)params->usage : 0,
        .cached = tag == pool->default_tag && pl->align == GP_MIN_ALIGN &&
                  !(flags & GPOOL_ALLOC_ZERO) && size <= pool->cfg.small_max,
        /* charged as the arena counts it: a slab slot's class size, or the range's 256-byte
           size */
        .charge =
            size <= pool->cfg.small_max && pl->align == GP_MIN_ALIGN && tag == pool->default_tag
                ? gp_class_size(gp_size_class(size))
                : (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1),
    };
    gp_kinds_finish_deferred(pool, 0); /* frees whose streams are done: reusable, not counted */
    int retried = 0;
    gpool_status st;
    if ((flags & GPOOL_ALLOC_IN_CAPTURE) && gp_stream_capturing(pool, tag))
        st = capture_alloc(&q, out);
    else
        st = gp_ladder_climb(&device_ladder, &q, out, &retried);
    *refused = q.refused && pool->cfg.budget[GPOOL_MEM_DEVICE];
    if (q.pressed) atomic_fetch_add(&pool->dev_oom_retries, 1);
    gp_placement moved = *pl; /* a request the policy moves on counts where it ends */
    if (st == GPOOL_ERR_OUT_OF_MEMORY && !gp_policy_move(&moved, st, *refused))
        atomic_fetch_add(&pool->dev_ooms, 1);
    if (st == GPOOL_OK && (flags & GPOOL_ALLOC_ZERO)) {
        st = gp_vidmem_zero_async(gp_arena_backend(a), *out, size, (CUstream)stream);
        /* queued work now touches the block: its pages are not unmapped before a synchronize
         * (even once it is freed through a thread cache, which counts no free) */
        gp_arena_note_queued_use(a);
        if (st != GPOOL_OK) gp_arena_free(a, *out, tag, 0);
    }
    if (st != GPOOL_OK) *out = NULL;
    return st;
}

/* ---------- free ---------- */

/* Memory above release_threshold goes back at once. */
static gpool_status release_above_threshold(gpool_t *pool, gp_arena *a)
{
    gp_arena_counters c;
    size_t held, idle;
    gp_arena_stats(a, &c, &held, &idle);
    if (held <= c.in_use + pool->cfg.release_threshold) return GPOOL_OK;
    gpool_status t = gp_arena_trim(a, pool->cfg.release_threshold);
    if (t == GPOOL_OK) return GPOOL_OK;
    /* the block is freed; what it met on the way is reported */
    char why[600];
    snprintf(why, sizeof why, "%s", gpool_last_error());
    return gp_fail(t,
                   "gpool_free: the block was freed, but giving memory back "
                   "(release_threshold) failed: %s",
                   why);
}

/* A small block: resolved from its slab without the lock; to the thread cache, or to the
 * arena (one lock), unless streams it was used on must finish first. */
static gpool_status small_free(gpool_t *pool, gp_arena *a, void *ptr, uintptr_t tag,
                               gp_block_ref *ref)
{
    gp_slab *s = ref->slab;
    long i = gp_slot_index(s, (uintptr_t)ptr);
    ref->live = i >= 0 && gp_slot_state(s, (uint32_t)i) == GP_SLOT_LIVE;
    if (ref->live) {
        ref->base = (uintptr_t)ptr;
        ref->size = s->slot_size;
        ref->requested = gp_slot_req(s, (uint32_t)i);
        ref->tag = s->tag;
    }
    gpool_status st = GPOOL_OK;
    if (gp_stream_defer_free(pool, ptr, tag, ref, &st)) return st; /* used on other streams */
    if (tag == pool->default_tag && gp_tcache_free_slab(pool, s, ptr)) return GPOOL_OK;
    return gp_arena_free(a, ptr, tag, gp_stream_free_seq(pool, tag));
}

/* A large block: taken off the block map under the arena lock (its one lookup), and freed in
 * the same hold when no other stream is involved (or reported when it is not a live block);
 * else it goes back on the map, the lock is let go for the stream bookkeeping and the free
 * comes after it. In single-stream mode on the default stream a free's position does not
 * matter: the streams lock is not taken. */
static gpool_status large_free(gpool_t *pool, gp_arena *a, void *ptr, uintptr_t tag,
                               gp_block_ref *ref)
{
    gpool_status st = GPOOL_OK;
    gp_arena_lock(a);
    gp_arena_take_locked(a, ptr, ref);
    int busy = atomic_load_explicit(&pool->stream_busy, memory_order_relaxed) != 0;
    if (!ref->live) {
        st = gp_arena_free_locked(a, ptr, tag, 0); /* says what ptr is instead */
        gp_arena_unlock(a);
        return st;
    }
    if (ref->tag == tag && !busy) {
        uint64_t seq = tag == pool->default_tag && gp_arena_single_stream_locked(a, tag)
                           ? 0
                           : gp_stream_free_seq(pool, tag);
        gp_arena_free_taken_locked(a, ref, tag, seq);
        gp_arena_unlock(a);
    } else {
        st = gp_arena_untake_locked(a, ref);
        gp_arena_unlock(a);
        if (st != GPOOL_OK) return st;
        if (gp_stream_defer_free(pool, ptr, tag, ref, &st)) return st; /* used on other streams */
        if (ref->tag != tag && gp_stream_cross_free(pool, ptr, tag, ref, &st)) return st;
        st = gp_arena_free(a, ptr, tag, gp_stream_free_seq(pool, tag));
    }
    if (st == GPOOL_OK && pool->cfg.release_threshold) st = release_above_threshold(pool, a);
    return st;
}

/* ref: resolved already when ref->resolved (the gpool_free fast path), else here, once. */
static gpool_status device_free(gpool_t *pool, void *ptr, uintptr_t tag, gp_block_ref *ref)
{
    gp_arena *a = device_arena(pool);
    gp_slab *slab = NULL;
    int owned;
    if (ref->resolved) {
        owned = ref->owned;
        slab = ref->slab;
    } else {
        owned = gp_arena_resolve(a, (uintptr_t)ptr, &slab);
    }
    if (!owned) {
        ref->owned = 0;
        return GPOOL_OK;
    }
    *ref = (gp_block_ref){.resolved = 1, .owned = 1, .slab = slab};
    return ref->slab ? small_free(pool, a, ptr, tag, ref) : large_free(pool, a, ptr, tag, ref);
}

/* ---------- lookup ---------- */

static gpool_status device_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                      int *owned)
{
    gp_arena *a = device_arena(pool);
    *owned = gp_arena_contains(a, (uintptr_t)ptr);
    if (!*owned) return GPOOL_OK;
    uintptr_t base, tag;
    size_t size, req;
    uint32_t usage;
    gpool_status st = gp_arena_block(a, ptr, &base, &size, &req, &tag, &usage);
    if (st != GPOOL_OK) return st;
    out->kind = GPOOL_MEM_DEVICE;
    out->usage = (gpool_usage)usage;
    out->requested_size = req;
    out->size = size;
    out->page_size = gp_policy_page_size(pool, GPOOL_MEM_DEVICE, size, 0);
    out->device_ptr = base;
    out->host_ptr = NULL;
    out->stream = (gpool_stream_t)tag;
    out->device = pool->cfg.device;
    return GPOOL_OK;
}

/* ---------- stats, trim, dump, destroy ---------- */

/* From running counters: O(threads), whatever the heap's size, each lock held for a copy of
 * counters. exact: sum the small blocks' requested bytes by walking every slab instead. */
static void device_stats(gpool_t *pool, gpool_stats *out, int exact)
{
    uint64_t tc_allocs, tc_frees, tc_hits, tc_cached, tc_req;
    pthread_mutex_lock(&pool->lock);
    gp_tcache_totals(pool, &tc_allocs, &tc_frees, &tc_hits, &tc_cached, &tc_req);
    pthread_mutex_unlock(&pool->lock);
    gp_arena *a = device_arena(pool);
    gp_arena_counters c;
    size_t held, idle;
    gp_arena_stats(a, &c, &held, &idle);
    gpool_kind_stats *ks = &out->kind[GPOOL_MEM_DEVICE];
    /* blocks parked in thread caches or freed but pending on a stream are not in use */
    ks->in_use_bytes = c.in_use - c.pending_bytes - tc_cached;
    /* small blocks: the arena's and the thread caches' balances (mod 2^64) */
    uint64_t small = exact ? gp_arena_small_requested(a) : c.small_requested + tc_req;
    ks->requested_bytes = c.requested + small;
    ks->reserved_bytes = held;
    ks->cached_bytes = held > ks->in_use_bytes ? held - ks->in_use_bytes : 0;
    ks->peak_in_use_bytes = c.peak_in_use;
    /* the thread caches do not track the small blocks' peak, so this peak is sampled */
    ks->peak_requested_bytes =
        c.peak_requested > ks->requested_bytes ? c.peak_requested : ks->requested_bytes;
    ks->peak_reserved_bytes = c.peak_held;
    ks->peak_cached_bytes = c.peak_held > ks->in_use_bytes ? c.peak_held - ks->in_use_bytes : 0;
    ks->allocs = c.allocs + tc_allocs;
    ks->frees = c.frees + tc_frees;
    ks->live_blocks = ks->allocs - ks->frees;
    out->pending_frees += c.pending_slots;
    gp_kind_stats_add(&out->kind[GPOOL_MEM_AUTO], ks);
    /* counted per gpool_alloc call (device_alloc), not per arena attempt */
    out->ooms += atomic_load_explicit(&pool->dev_ooms, memory_order_relaxed);
    out->oom_retries += atomic_load_explicit(&pool->dev_oom_retries, memory_order_relaxed);
    out->tcache_hits = tc_hits;
    gp_arena_lock(a);
    out->pages_remapped = gp_vidmem_remaps(gp_arena_backend(a));
    gp_arena_unlock(a);
}

/* The device memory the pool caches: gpool_mem_get_info counts it as free. */
static uint64_t device_cached(gpool_t *pool)
{
    uint64_t tc_allocs, tc_frees, tc_hits, tc_cached, tc_req, n, bytes, req;
    pthread_mutex_lock(&pool->lock);
    gp_tcache_totals(pool, &tc_allocs, &tc_frees, &tc_hits, &tc_cached, &tc_req);
    pthread_mutex_unlock(&pool->lock);
    gp_arena_counters c;
    size_t held, idle;
    gp_arena_stats(device_arena(pool), &c, &held, &idle);
    gp_stream_deferred(pool, GPOOL_MEM_DEVICE, &n, &bytes, &req);
    uint64_t in_use = c.in_use - c.pending_bytes - tc_cached - bytes;
    return held > in_use ? held - in_use : 0;
}

gpool_status gp_device_mem_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes)
{
    size_t fr = 0, total = 0;
    gpool_status st = gp_vidmem_mem_info(gp_arena_backend(device_arena(pool)), &fr, &total);
    if (st != GPOOL_OK) return st;
    fr += device_cached(pool);
    *free_bytes = fr < total ? fr : total;
    *total_bytes = total;
    return GPOOL_OK;
}

static gpool_status device_trim(gpool_t *pool, size_t keep)
{
    gp_tcache_flush_mine(pool);
    gp_tcache_reclaim_idle(pool); /* idle threads' caches too; busy ones at their next call */
    gp_tcache_flush_all(pool);
    return gp_arena_trim(device_arena(pool), keep);
}

static void device_dump_json(gpool_t *pool, FILE *f, int *first)
{
    fprintf(f, "%s\"device\":", *first ? "" : ",");
    gp_arena_dump_json(device_arena(pool), f);
    *first = 0;
}

static gpool_status device_destroy(gpool_t *pool, uint64_t *live, uint64_t *bytes)
{
    /* every page goes back to the driver: the work queued so far on any stream must be done
     * first (blocks freed on their only stream are reusable at once, so nothing is pending
     * for them, yet a kernel may still use them); frees still waiting on other streams are
     * done by the user: finish them too. If the synchronize keeps failing, the pool still goes
     * (its caller has nothing else to do) and says so. */
    gp_arena *a = device_arena(pool);
    gp_arena_lock(a);
    gpool_status st = gp_arena_sync_all_locked(a);
    gp_arena_unlock(a);
    uint64_t n = 0, b = 0;
    gp_arena_fini(a, &n, &b);
    free(a);
    pool->device = NULL;
    *live += n;
    *bytes += b;
    return st;
}

const gp_kind gp_device_kind = {
    .alloc = device_alloc,
    .free = device_free,
    .block_info = device_block_info,
    .stats = device_stats,
    .trim = device_trim,
    .dump_json = device_dump_json,
    .destroy = device_destroy,
};

const gp_kind *const gp_kinds[GP_KIND_COUNT] = {&gp_device_kind, &gp_host_kind};
