/* The public API: pool lifetime, allocation routing (kind, stream, fast path), stats. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bad_pointer.h"
#include "budget.h"
#include "error.h"
#include "fork.h"
#include "ipc.h"
#include "kind.h"
#include "kind_host.h"
#include "policy.h"
#include "pool.h"
#include "stream.h"
#include "structs.h"
#include "tcache.h"

#define MAX_REQUEST ((size_t)1 << 47) /* 128 TiB: beyond any device */
#define KNOWN_FLAGS                                                                                \
    (GPOOL_ALLOC_ZERO | GPOOL_ALLOC_ALLOW_FALLBACK | GPOOL_ALLOC_STREAM_WAIT |                     \
     GPOOL_ALLOC_NO_STREAM_WAIT | GPOOL_ALLOC_IN_CAPTURE)

static _Atomic uint64_t next_pool_id = 1;

/* ---------- create / destroy ---------- */

/* The pool's copy of the configuration: the caller's first cfg->struct_size bytes over the
 * defaults, and its own copy of trace_path (freed by pool_free_struct). */
static gpool_status resolve_config(const gpool_config *cfg, gpool_config *out)
{
    gpool_status st = GPOOL_OK;
    gpool_config defaults = GPOOL_CONFIG_INIT;
    *out = defaults;
    if (cfg) {
        size_t size;
        st = gp_struct_size(&gp_type_config, cfg, "gpool_create", 1, &size);
        if (st == GPOOL_OK) gp_struct_read(&gp_type_config, out, cfg, size);
        if (st == GPOOL_OK) st = gp_config_check(out);
    } else {
        const char *env = getenv("GPOOL_CONF");
        if (env && *env) {
            st = gpool_config_parse(out, env);
            if (st != GPOOL_OK) st = gp_named(st, "GPOOL_CONF"); /* in place of the call's name */
        }
    }
    const char *path = st == GPOOL_OK ? out->trace_path : NULL;
    out->trace_path = NULL;
    if (path && *path && !(out->trace_path = strdup(path)))
        st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory creating a pool");
    return st;
}

static gpool_status open_device(gpool_t *pool)
{
    const gp_driver *d = pool->dc.drv;
    int count = 0;
    CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, d->cuDeviceGetCount(&count));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuDeviceGetCount");
    if (count == 0) return gp_fail(GPOOL_ERR_NO_DEVICE, "no CUDA device (driver %s)", d->path);
    if (pool->cfg.device >= count)
        return gp_fail(GPOOL_ERR_NO_DEVICE, "device %d requested, but only %d present",
                       pool->cfg.device, count);
    r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, d->cuDeviceGet(&pool->dc.dev, pool->cfg.device));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuDeviceGet");
    r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
               d->cuDevicePrimaryCtxRetain(&pool->dc.ctx, pool->dc.dev));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuDevicePrimaryCtxRetain");
    return GPOOL_OK;
}

static void pool_free_struct(gpool_t *pool)
{
    if (gp_drv_last == &pool->cnt) gp_drv_last = NULL;
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->trace_lock);
    gp_owners_fini(&pool->owners);
    free((char *)pool->cfg.trace_path);
    free(pool);
}

gpool_status gpool_create(const gpool_config *cfg, gpool_t **out)
{
    if (!out) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_create: out is NULL");
    *out = NULL;
    gpool_t *pool = calloc(1, sizeof *pool);
    if (!pool) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory creating a pool");
    pthread_mutex_init(&pool->lock, NULL);
    pthread_mutex_init(&pool->trace_lock, NULL);
    gp_owners_init(&pool->owners);
    gpool_status st = resolve_config(cfg, &pool->cfg);
    pool->dc.cnt = &pool->cnt;
    if (st == GPOOL_OK) st = gp_driver_get(&pool->dc.drv);
    if (st == GPOOL_OK) st = open_device(pool);
    if (st != GPOOL_OK) {
        pool_free_struct(pool);
        return st;
    }
    st = gp_streams_create(pool);
    if (st != GPOOL_OK) {
        GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuDevicePrimaryCtxRelease(pool->dc.dev));
        pool_free_struct(pool);
        return st;
    }
    st = gp_device_kind_create(pool);
    pool->id = atomic_fetch_add(&next_pool_id, 1);
    pool->default_tag = (uintptr_t)pool->cfg.default_stream;
    /* A per-thread default stream is a different stream on each thread: blocks flushed from
     * one thread's cache would reach another thread's stream early, so no thread caches (and
     * no tag ever equals default_tag: small blocks are heap ranges of each thread's tag). */
    if (pool->cfg.default_stream == CU_STREAM_PER_THREAD) pool->cfg.tcache_bytes = 0;
    if (st == GPOOL_OK) st = gp_trace_open(pool);
    if (st == GPOOL_OK && gp_pool_register(pool) != 0)
        st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory registering the pool");
    if (st != GPOOL_OK) {
        gp_device_kind_abandon(pool);
        gp_streams_destroy(pool);
        gp_trace_close(pool);
        GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuDevicePrimaryCtxRelease(pool->dc.dev));
        pool_free_struct(pool);
        return st;
    }
    gp_fork_note_pool(pool->id);
    *out = pool;
    return GPOOL_OK;
}

gpool_status gpool_destroy(gpool_t *pool)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_destroy: pool is NULL");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_destroy");
    gp_ipc_destroy(pool);
    gp_pool_unregister(pool);
    pthread_mutex_lock(&pool->lock);
    gp_tcache_pool_gone(pool);
    pthread_mutex_unlock(&pool->lock);
    uint64_t live = 0, bytes = 0;
    gpool_status failed = GPOOL_OK;
    char why[512] = "";
    for (int i = 0; i < GP_KIND_COUNT; i++) {
        gpool_status st = gp_kinds[i]->destroy(pool, &live, &bytes);
        if (st != GPOOL_OK && failed == GPOOL_OK) {
            failed = st;
            snprintf(why, sizeof why, "%s", gpool_last_error());
        }
    }
    gp_streams_destroy(pool);
    GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuDevicePrimaryCtxRelease(pool->dc.dev));
    gp_trace_close(pool);
    int verbose = pool->cfg.verbose;
    pool_free_struct(pool);
    if (failed != GPOOL_OK) {
        gpool_status st = gp_fail(failed,
                                  "gpool_destroy: %s; its memory was given back without knowing "
                                  "the work queued on it done (%" PRIu64 " block%s still allocated "
                                  "or waiting on streams)",
                                  why, live, GP_PLURAL(live));
        if (verbose) fprintf(stderr, "gpool: %s\n", gpool_last_error());
        return st;
    }
    if (!live) return GPOOL_OK;
    gpool_status st = gp_fail(
        GPOOL_ERR_LIVE_BLOCKS,
        "gpool_destroy: %" PRIu64 " live block%s (%" PRIu64 " bytes) %s still allocated; freed %s",
        live, GP_PLURAL(live), bytes, live == 1 ? "was" : "were", live == 1 ? "it" : "them");
    if (verbose) fprintf(stderr, "gpool: %s\n", gpool_last_error());
    return st;
}

/* ---------- allocation ---------- */

static gpool_status check_params(const gpool_alloc_params *p, size_t size)
{
    if (size > MAX_REQUEST)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "size %zu exceeds what any device can hold", size);
    if (!p) return GPOOL_OK;
    if ((unsigned)p->kind >= GPOOL_MEM_KIND_COUNT)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "unknown memory kind %d", (int)p->kind);
    if ((unsigned)p->usage >= GPOOL_USAGE_COUNT)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "unknown usage hint %d", (int)p->usage);
    if (p->flags & ~(unsigned)KNOWN_FLAGS)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "unknown flags 0x%x",
                       p->flags & ~(unsigned)KNOWN_FLAGS);
    if ((p->flags & GPOOL_ALLOC_STREAM_WAIT) && (p->flags & GPOOL_ALLOC_NO_STREAM_WAIT))
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "flags GPOOL_ALLOC_STREAM_WAIT and GPOOL_ALLOC_NO_STREAM_WAIT exclude "
                       "each other");
    if (p->alignment & (p->alignment - 1))
        return gp_fail(GPOOL_ERR_INVALID_ARG, "alignment %zu is not a power of two", p->alignment);
    return GPOOL_OK;
}

static gpool_status place_and_alloc(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                                    gpool_stream_t stream, void **out)
{
    gpool_status st = check_params(params, size);
    if (st != GPOOL_OK) return st;
    gp_placement pl;
    st = gp_policy_place(pool, params, size, &pl);
    if (st != GPOOL_OK) return st;
    /* the fallback, the ladder's last rung (ladder.h): the one loop that moves a request to
     * another kind, as the policy's table says */
    char why[300]; /* the first kind's failure, once it moves (not zeroed per request) */
    why[0] = 0;
    for (;;) {
        int refused = 0;
        st = gp_kind_of(pl.kind)->alloc(pool, &pl, params, stream, &refused, out);
        if (st == GPOOL_OK) break;
        if (pl.kind != pl.first) {
            char more[300];
            snprintf(more, sizeof more, "%s", gpool_last_error());
            st = gp_fail(st, "%s; fallback to mapped sysmem failed too: %s", why, more);
            break;
        }
        snprintf(why, sizeof why, "%s", gpool_last_error());
        if (!gp_policy_move(&pl, st, refused)) break;
    }
    if (st == GPOOL_OK && pl.kind != pl.first)
        atomic_fetch_add_explicit(&pool->fallbacks, 1, memory_order_relaxed);
    if (st != GPOOL_OK) {
        *out = NULL;
        if (st == GPOOL_ERR_OUT_OF_MEMORY && pool->cfg.verbose)
            fprintf(stderr, "gpool: %s\n", gpool_last_error());
        return st;
    }
    if (pool->trace) gp_trace_event(pool, 1, *out, size, stream);
    return GPOOL_OK;
}

/* The public allocation calls past their fast paths; call names them in messages. */
static gpool_status alloc_impl(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                               gpool_stream_t stream, void **out, const char *call)
{
    if (!pool || !out)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "%s: %s is NULL", call, pool ? "out" : "pool");
    *out = NULL;
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse(call);
    if (size == 0) return GPOOL_OK;
    return gp_named(place_and_alloc(pool, size, params, stream, out), call);
}

/* The caller's params in this library's layout: as they are when struct_size says so,
 * otherwise copied over the defaults into *copy. */
static gpool_status params_in(const gpool_alloc_params **params, gpool_alloc_params *copy,
                              const char *call)
{
    const gpool_alloc_params *p = *params;
    if (!p || p->struct_size == sizeof *p) return GPOOL_OK;
    size_t size;
    gpool_status st = gp_struct_size(&gp_type_alloc_params, p, call, 1, &size);
    if (st != GPOOL_OK) return st;
    *copy = (gpool_alloc_params)GPOOL_ALLOC_PARAMS_INIT;
    gp_struct_read(&gp_type_alloc_params, copy, p, size);
    *params = copy;
    return GPOOL_OK;
}

gpool_status gpool_alloc(gpool_t *pool, size_t size, const gpool_alloc_params *params, void **out)
{
    /* the hot path: a cached small block of the default stream (a miss refills on the slow
     * path: the device kind's cache rung) */
    if (__builtin_expect(pool && out && !params && size - 1 < pool->cfg.small_max && !pool->trace &&
                             !gp_fork_parents_pool(pool->id),
                         1) &&
        gp_tcache_alloc(pool, size, 0, NULL, out))
        return GPOOL_OK;
    gpool_alloc_params copy;
    gpool_status st = params_in(&params, &copy, "gpool_alloc");
    if (st != GPOOL_OK) {
        if (out) *out = NULL;
        return st;
    }
    gpool_stream_t s =
        params && params->stream ? params->stream : (pool ? pool->cfg.default_stream : NULL);
    return alloc_impl(pool, size, params, s, out, "gpool_alloc");
}

gpool_status gpool_alloc_async(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                               gpool_stream_t stream, void **out)
{
    gpool_alloc_params copy;
    gpool_status st = params_in(&params, &copy, "gpool_alloc_async");
    if (st != GPOOL_OK) {
        if (out) *out = NULL;
        return st;
    }
    return alloc_impl(pool, size, params, stream, out, "gpool_alloc_async");
}

/* ref: ptr resolved (gp_kind_resolve) when the fast path did it, else NULL. The pointer is
 * resolved once and handed to the one kind whose memory it lies in. */
static gpool_status free_tagged(gpool_t *pool, void *ptr, gpool_stream_t stream,
                                const gp_block_ref *ref)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_free: pool is NULL");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_free");
    if (!ptr) return GPOOL_OK;
    uintptr_t tag = gp_stream_tag(stream);
    gp_block_ref r; /* the kind fills it (not zeroed here: the host pair's cost) */
    const gp_kind *k;
    if (ref) {
        r = *ref;
        k = r.owned ? &gp_device_kind : &gp_host_kind;
    } else {
        k = gp_kind_resolve(pool, ptr, &r);
    }
    gpool_status st = k->free(pool, ptr, tag, &r);
    if (!r.owned) return gp_bad_pointer(ptr, GP_PTR_FOREIGN, GPOOL_MEM_AUTO, 0);
    if (st == GPOOL_OK && pool->trace) gp_trace_event(pool, 0, ptr, r.requested, stream);
    return st;
}

static gpool_status free_impl(gpool_t *pool, void *ptr, gpool_stream_t stream, const char *call,
                              const gp_block_ref *ref)
{
    gpool_status st = gp_named(free_tagged(pool, ptr, stream, ref), call);
    if (st == GPOOL_OK && ptr && stream == CU_STREAM_PER_THREAD)
        gp_stream_cover(pool, gp_stream_tag(stream));
    return st;
}

/* A block another process has open: freed when the last importer closes it (ipc.h). 1 when
 * the free is the IPC state's (*st: its status), else 0. */
static int ipc_free(gpool_t *pool, void *ptr, gpool_stream_t stream, const char *call,
                    gpool_status *st)
{
    if (!pool || !atomic_load_explicit(&pool->ipc, memory_order_relaxed) ||
        gp_fork_parents_pool(pool->id))
        return 0; /* the free itself refuses a parent's pool */
    int d = gp_ipc_owner_free(pool, ptr, stream);
    if (!d) return 0;
    *st = d != GP_IPC_FREED_AGAIN
              ? GPOOL_OK
              : gp_named(gp_fail(GPOOL_ERR_INVALID_POINTER,
                                 "%p is freed already (its free waits for another process to "
                                 "close it)",
                                 ptr),
                         call);
    return 1;
}

gpool_status gpool_free(gpool_t *pool, void *ptr)
{
    gpool_status st;
    if (ipc_free(pool, ptr, pool ? pool->cfg.default_stream : NULL, "gpool_free", &st)) return st;
    /* the hot path: the pointer resolved once; a small block back into this thread's cache */
    if (__builtin_expect(pool && ptr && !pool->trace &&
                             !atomic_load_explicit(&pool->stream_busy, memory_order_relaxed) &&
                             !gp_fork_parents_pool(pool->id),
                         1)) {
        gp_block_ref ref; /* resolved, owned and slab are all the kinds read of it */
        gp_kind_resolve(pool, ptr, &ref);
        if (gp_tcache_free_slab(pool, ref.slab, ptr)) return GPOOL_OK;
        return free_impl(pool, ptr, pool->cfg.default_stream, "gpool_free", &ref);
    }
    return free_impl(pool, ptr, pool ? pool->cfg.default_stream : NULL, "gpool_free", NULL);
}

gpool_status gpool_free_async(gpool_t *pool, void *ptr, gpool_stream_t stream)
{
    gpool_status st;
    if (ipc_free(pool, ptr, stream, "gpool_free_async", &st)) return st;
    return free_impl(pool, ptr, stream, "gpool_free_async", NULL);
}

static gpool_status block_info_tagged(gpool_t *pool, const void *ptr, gpool_block_desc *out);

static gpool_status record_stream(gpool_t *pool, void *ptr, gpool_stream_t stream)
{
    gpool_block_desc info = GPOOL_BLOCK_DESC_INIT;
    gpool_status st = block_info_tagged(pool, ptr, &info); /* info.stream: the block's tag */
    if (st != GPOOL_OK) return st;
    /* the address gpool_alloc returned: a mapped block's host address is not it */
    uintptr_t key =
        info.kind == GPOOL_MEM_HOST_PINNED ? (uintptr_t)info.host_ptr : (uintptr_t)info.device_ptr;
    if ((uintptr_t)ptr != key)
        return gp_bad_pointer(ptr, ptr == info.host_ptr ? GP_PTR_HOST_ALIAS : GP_PTR_INTERIOR,
                              info.kind, key);
    return gp_stream_record(pool, ptr, (uintptr_t)info.stream, gp_stream_tag(stream));
}

static gpool_status stream_release(gpool_t *pool, gpool_stream_t stream)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "pool is NULL");
    if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "the legacy and per-thread default streams are never destroyed");
    if ((uintptr_t)stream == pool->default_tag)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "stream %p is the pool's default stream (gpool_config.default_stream): "
                       "destroy the pool before the stream",
                       (void *)stream);
    /* host frees waiting on it, and host blocks allocated on it, first; then the device arena
     * moves what is pending on the stream, asking the reuse rule */
    gpool_status hst =
        gp_sysmem_stream_release(pool, (uintptr_t)stream, gp_stream_retired_tag(NULL));
    gpool_status st =
        pool->device ? gp_arena_release_stream(pool->device, (uintptr_t)stream) : GPOOL_OK;
    return st != GPOOL_OK ? st : hst;
}

gpool_status gpool_stream_release(gpool_t *pool, gpool_stream_t stream)
{
    gpool_status st = stream_release(pool, stream);
    return st == GPOOL_OK ? st : gp_named(st, "gpool_stream_release");
}

gpool_status gpool_record_stream(gpool_t *pool, void *ptr, gpool_stream_t stream)
{
    return gp_named(record_stream(pool, ptr, stream), "gpool_record_stream");
}

/* ---------- maintenance and introspection ---------- */

gpool_status gpool_trim(gpool_t *pool, size_t keep_bytes)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_trim: pool is NULL");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_trim");
    gpool_status st = GPOOL_OK;
    for (int i = 0; i < GP_KIND_COUNT; i++) {
        gpool_status s2 = gp_kinds[i]->trim(pool, keep_bytes);
        if (s2 != GPOOL_OK && st == GPOOL_OK) st = s2;
    }
    return st;
}

void gp_kind_stats_add(gpool_kind_stats *total, const gpool_kind_stats *k)
{
    total->requested_bytes += k->requested_bytes;
    total->in_use_bytes += k->in_use_bytes;
    total->reserved_bytes += k->reserved_bytes;
    total->cached_bytes += k->cached_bytes;
    total->peak_requested_bytes += k->peak_requested_bytes;
    total->peak_in_use_bytes += k->peak_in_use_bytes;
    total->peak_reserved_bytes += k->peak_reserved_bytes;
    total->peak_cached_bytes += k->peak_cached_bytes;
    total->allocs += k->allocs;
    total->frees += k->frees;
    total->live_blocks += k->live_blocks;
}

static void raise_to(uint64_t *peak, uint64_t cur, uint64_t *seen)
{
    if (*peak < cur) *peak = cur;
    if (*peak < *seen) *peak = *seen;
    *seen = *peak;
}

/* A high-water mark is at least the current value and never lower than one reported before
 * (cached bytes move both ways as blocks come and go, so a peak derived from other peaks can
 * fall; pending and thread-cached blocks move between in-use and cached without the arena
 * seeing it). Totals are re-summed from the kinds. */
static void keep_peaks_monotone(gpool_t *pool, gpool_stats *out)
{
    pthread_mutex_lock(&pool->lock);
    memset(&out->kind[GPOOL_MEM_AUTO], 0, sizeof out->kind[GPOOL_MEM_AUTO]);
    for (int k = 1; k < GPOOL_MEM_KIND_COUNT; k++) {
        gpool_kind_stats *ks = &out->kind[k], *seen = &pool->peaks_seen[k];
        raise_to(&ks->peak_requested_bytes, ks->requested_bytes, &seen->peak_requested_bytes);
        raise_to(&ks->peak_in_use_bytes, ks->in_use_bytes, &seen->peak_in_use_bytes);
        raise_to(&ks->peak_reserved_bytes, ks->reserved_bytes, &seen->peak_reserved_bytes);
        raise_to(&ks->peak_cached_bytes, ks->cached_bytes, &seen->peak_cached_bytes);
        gp_kind_stats_add(&out->kind[GPOOL_MEM_AUTO], ks);
    }
    gpool_kind_stats *t = &out->kind[GPOOL_MEM_AUTO], *seen = &pool->peaks_seen[GPOOL_MEM_AUTO];
    /* the total's peaks: the sum of the kinds' peaks bounds every past total from above */
    raise_to(&t->peak_requested_bytes, t->requested_bytes, &seen->peak_requested_bytes);
    raise_to(&t->peak_in_use_bytes, t->in_use_bytes, &seen->peak_in_use_bytes);
    raise_to(&t->peak_reserved_bytes, t->reserved_bytes, &seen->peak_reserved_bytes);
    raise_to(&t->peak_cached_bytes, t->cached_bytes, &seen->peak_cached_bytes);
    pthread_mutex_unlock(&pool->lock);
}

/* The statistics from running counters: O(threads + kinds), whatever the heap's size. exact:
 * sum the small blocks' requested bytes by walking every slab instead (gpool_calculate_stats). */
static gpool_status stats_impl(gpool_t *pool, gpool_stats *out, int exact)
{
    memset(out, 0, sizeof *out);
    gpool_kind_stats *total = &out->kind[GPOOL_MEM_AUTO];
    for (int i = 0; i < GP_KIND_COUNT; i++)
        gp_kinds[i]->stats(pool, out, exact);
    for (int i = 0; i < GPOOL_DRV_COUNT; i++) {
        out->driver_calls[i] = atomic_load_explicit(&pool->cnt.n[i], memory_order_relaxed);
        out->driver_calls_total += out->driver_calls[i];
    }
    /* Frees still waiting on streams' events are frees from the caller's point of view. */
    for (int k = 1; k < GPOOL_MEM_KIND_COUNT; k++) {
        uint64_t n, bytes, req;
        gp_stream_deferred(pool, (gpool_mem_kind)k, &n, &bytes, &req);
        if (!n) continue;
        gpool_kind_stats *ks = &out->kind[k];
        ks->frees += n;
        ks->live_blocks -= n;
        ks->in_use_bytes -= bytes;
        ks->requested_bytes -= req;
        ks->cached_bytes += bytes;
        total->frees += n;
        total->live_blocks -= n;
        total->in_use_bytes -= bytes;
        total->requested_bytes -= req;
        total->cached_bytes += bytes;
        out->pending_frees += n;
    }
    keep_peaks_monotone(pool, out);
    out->fallbacks = atomic_load_explicit(&pool->fallbacks, memory_order_relaxed);
    return GPOOL_OK;
}

/* gpool_get_stats and gpool_calculate_stats: the caller's struct filled up to its struct_size */
/* gpool_get_stats / gpool_calculate_stats; trusted: struct_size came from the caller's header */
static gpool_status stats_out(gpool_t *pool, gpool_stats *out, int exact, const char *call,
                              int trusted)
{
    if (!pool || !out)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "%s: %s is NULL", call, pool ? "out" : "pool");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse(call);
    size_t size;
    gpool_status st = gp_struct_size(&gp_type_stats, out, call, 0, &size);
    if (st != GPOOL_OK) return st;
    gpool_stats full = GPOOL_STATS_INIT;
    st = stats_impl(pool, &full, exact);
    if (st == GPOOL_OK) gp_struct_write(&gp_type_stats, out, &full, size, trusted);
    return st;
}

#undef gpool_get_stats
#undef gpool_calculate_stats
#undef gpool_get_block_desc

gpool_status gpool_get_stats(gpool_t *pool, gpool_stats *out)
{
    return stats_out(pool, out, 0, "gpool_get_stats", 0);
}

gpool_status gpool_calculate_stats(gpool_t *pool, gpool_stats *out)
{
    return stats_out(pool, out, 1, "gpool_calculate_stats", 0);
}

gpool_status gpool_get_stats_sized(gpool_t *pool, gpool_stats *out, size_t struct_size)
{
    if (pool && gp_struct_set_size(&gp_type_stats, out, struct_size, "gpool_get_stats") != GPOOL_OK)
        return GPOOL_ERR_INVALID_ARG;
    return stats_out(pool, out, 0, "gpool_get_stats", 1);
}

gpool_status gpool_calculate_stats_sized(gpool_t *pool, gpool_stats *out, size_t struct_size)
{
    if (pool &&
        gp_struct_set_size(&gp_type_stats, out, struct_size, "gpool_calculate_stats") != GPOOL_OK)
        return GPOOL_ERR_INVALID_ARG;
    return stats_out(pool, out, 1, "gpool_calculate_stats", 1);
}

/* gpool_get_block_desc; trusted: struct_size came from the caller's header */
static gpool_status block_desc_out(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                   int trusted)
{
    if (!pool || !out)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_get_block_desc: %s is NULL",
                       pool ? "out" : "pool");
    size_t size;
    gpool_status st = gp_struct_size(&gp_type_block_desc, out, "gpool_get_block_desc", 0, &size);
    if (st != GPOOL_OK) return st;
    gpool_block_desc full = GPOOL_BLOCK_DESC_INIT;
    st = block_info_tagged(pool, ptr, &full);
    if (st != GPOOL_OK) return gp_named(st, "gpool_get_block_desc");
    full.stream = gp_tag_stream((uintptr_t)full.stream);
    gp_struct_write(&gp_type_block_desc, out, &full, size, trusted);
    return GPOOL_OK;
}

gpool_status gpool_get_block_desc(gpool_t *pool, const void *ptr, gpool_block_desc *out)
{
    return block_desc_out(pool, ptr, out, 0);
}

gpool_status gpool_get_block_desc_sized(gpool_t *pool, const void *ptr, gpool_block_desc *out,
                                        size_t struct_size)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_get_block_desc: pool is NULL");
    if (gp_struct_set_size(&gp_type_block_desc, out, struct_size, "gpool_get_block_desc") !=
        GPOOL_OK)
        return GPOOL_ERR_INVALID_ARG;
    return block_desc_out(pool, ptr, out, 1);
}

/* gpool_get_block_desc with the block's stream tag in out->stream (per-thread default streams
 * are told apart there); out is the library's full struct. */
static gpool_status block_info_tagged(gpool_t *pool, const void *ptr, gpool_block_desc *out)
{
    if (!pool || !out)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_get_block_desc: %s is NULL",
                       pool ? "out" : "pool");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_get_block_desc");
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (ptr) {
        gp_block_ref ref;
        int owned = 0;
        gpool_status st = gp_kind_resolve(pool, ptr, &ref)->block_info(pool, ptr, out, &owned);
        if (owned) {
            /* a block used on other streams stays in place while its free waits for them */
            uintptr_t key = out->kind == GPOOL_MEM_HOST_PINNED ? (uintptr_t)out->host_ptr
                                                               : (uintptr_t)out->device_ptr;
            if (st == GPOOL_OK && gp_stream_free_pending(pool, key))
                return gp_fail(GPOOL_ERR_INVALID_POINTER,
                               "%p is in a block already freed (its free is pending on a stream)",
                               ptr);
            return st;
        }
    }
    return gp_bad_pointer(ptr, GP_PTR_FOREIGN, GPOOL_MEM_AUTO, 0);
}

gpool_status gpool_mem_get_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes)
{
    if (!pool || !free_bytes || !total_bytes)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_mem_get_info: NULL argument");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_mem_get_info");
    return gp_device_mem_info(pool, free_bytes, total_bytes);
}

const char *gpool_driver_call_name(gpool_driver_call call)
{
    static const char *const names[GPOOL_DRV_COUNT] = {
        "cuMemCreate",
        "cuMemRelease",
        "cuMemMap",
        "cuMemUnmap",
        "cuMemSetAccess",
        "cuMemAddressReserve",
        "cuMemAddressFree",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemHostRegister",
        "cuMemHostUnregister",
        "event",
        "stream",
        "other",
    };
    return (unsigned)call < GPOOL_DRV_COUNT ? names[call] : NULL;
}

static void dump_kind(FILE *f, const char *name, const gpool_kind_stats *k, int comma)
{
    fprintf(f,
            "%s\"%s\":{\"requested_bytes\":%" PRIu64 ",\"in_use_bytes\":%" PRIu64
            ",\"reserved_bytes\":%" PRIu64 ",\"cached_bytes\":%" PRIu64
            ",\"peak_requested_bytes\":%" PRIu64 ",\"peak_in_use_bytes\":%" PRIu64
            ",\"peak_reserved_bytes\":%" PRIu64 ",\"peak_cached_bytes\":%" PRIu64
            ",\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64 ",\"live_blocks\":%" PRIu64 "}",
            comma ? "," : "", name, k->requested_bytes, k->in_use_bytes, k->reserved_bytes,
            k->cached_bytes, k->peak_requested_bytes, k->peak_in_use_bytes, k->peak_reserved_bytes,
            k->peak_cached_bytes, k->allocs, k->frees, k->live_blocks);
}

gpool_status gpool_dump_json(gpool_t *pool, FILE *f)
{
    if (!pool || !f)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_dump_json: %s is NULL", pool ? "f" : "pool");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_dump_json");
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    fprintf(f, "{\"version\":\"%s\",\"device\":%d,\"granularity\":%zu,\"stats\":{", gpool_version(),
            pool->cfg.device, pool->granularity);
    for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++)
        dump_kind(f, k ? gp_kind_name((gpool_mem_kind)k) : "total", &s.kind[k], k > 0);
    fprintf(f, ",\"driver_calls\":{");
    for (int i = 0; i < GPOOL_DRV_COUNT; i++)
        fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", gpool_driver_call_name(i), s.driver_calls[i]);
    fprintf(f,
            "},\"oom_retries\":%" PRIu64 ",\"ooms\":%" PRIu64 ",\"pages_remapped\":%" PRIu64
            ",\"tcache_hits\":%" PRIu64 "},\"arenas\":{",
            s.oom_retries, s.ooms, s.pages_remapped, s.tcache_hits);
    int first = 1;
    for (int i = 0; i < GP_KIND_COUNT; i++)
        gp_kinds[i]->dump_json(pool, f, &first);
    fprintf(f, "}}\n");
    if (ferror(f)) return gp_fail(GPOOL_ERR_IO, "gpool_dump_json: write failed");
    return GPOOL_OK;
}

gpool_status gpool_page_size(gpool_t *pool, gpool_mem_kind kind, size_t size, size_t *out)
{
    if (!pool || !out || (unsigned)kind >= GPOOL_MEM_KIND_COUNT)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_page_size: NULL argument or bad kind");
    if (kind == GPOOL_MEM_AUTO) kind = gp_policy_kind(GPOOL_USAGE_DEFAULT, size);
    *out = gp_policy_page_size(pool, kind, size, 0);
    return GPOOL_OK;
}
