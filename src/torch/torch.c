/* torch.c — the PyTorch pluggable-allocator hooks (include/gpool_torch.h): one pool per device,
 * created on first use, every allocation ordered on the stream PyTorch passes; frees go through
 * the batch of torch_batch.c (PyTorch never passes record_stream's hint). */
#include "gpool_torch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../preload/preload_options.h"
#include "error.h"
#include "options.h"
#include "stream.h"
#include "torch_batch.h"
#include "torch_captures.h"
#include "torch_graph.h"
#include "torch_pools.h"

#define TORCH_MAX_DEVICES GP_TORCH_MAX_DEVICES

static _Atomic(gpool_t *) torch_pools[TORCH_MAX_DEVICES];
static pthread_mutex_t torch_lock = PTHREAD_MUTEX_INITIALIZER;

/* The defaults plus GPOOL_CONF, read as the LD_PRELOAD interposer reads it: its own keys
 * (declared in its table, preload/preload_options.h) are checked and ignored here, so one
 * setting serves both; `device` is overridden per pool. */
static gpool_status torch_config(int device, gpool_config *cfg, gpp_options *extra)
{
    gpool_config_default(cfg);
    const char *env = getenv("GPOOL_CONF");
    if (env && *env) {
        gpool_status st = gp_config_apply(cfg, env, &gpp_option_table, extra);
        if (st != GPOOL_OK) return gp_named(st, "GPOOL_CONF");
    }
    cfg->device = device;
    return GPOOL_OK;
}

static gpool_t *torch_pool(int device)
{
    if (device < 0 || device >= TORCH_MAX_DEVICES) {
        gp_fail(GPOOL_ERR_NO_DEVICE, "gpool_torch: device %d out of range", device);
        return NULL;
    }
    gpool_t *pool = atomic_load_explicit(&torch_pools[device], memory_order_acquire);
    if (pool) return pool;
    pthread_mutex_lock(&torch_lock);
    pool = atomic_load_explicit(&torch_pools[device], memory_order_relaxed);
    if (!pool) {
        gpool_config cfg = GPOOL_CONFIG_INIT;
        gpp_options extra;
        memset(&extra, 0, sizeof extra);
        if (torch_config(device, &cfg, &extra) == GPOOL_OK &&
            gpool_create(&cfg, &pool) == GPOOL_OK) {
            gp_torch_batch_init(device, pool, extra.batch_bytes);
            atomic_store_explicit(&torch_pools[device], pool, memory_order_release);
        } else {
            pool = NULL;
        }
    }
    pthread_mutex_unlock(&torch_lock);
    return pool;
}

/* What PyTorch holds through the hooks per device (blocks handed out and not freed through the
 * free hook: the batch and held graph memory are not counted), with peaks since the pool was
 * made or gpool_torch_reset_peaks: torch.cuda.max_memory_allocated()'s meaning. */
typedef struct held_bytes {
    _Atomic size_t live, peak, req, req_peak;
} held_bytes;
static held_bytes torch_held[TORCH_MAX_DEVICES];

static void raise_peak(_Atomic size_t *peak, size_t v)
{
    size_t old = atomic_load_explicit(peak, memory_order_relaxed);
    while (v > old && !atomic_compare_exchange_weak_explicit(peak, &old, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

static void held_add(int device, size_t real, size_t requested)
{
    held_bytes *h = &torch_held[device];
    raise_peak(&h->peak, atomic_fetch_add_explicit(&h->live, real, memory_order_relaxed) + real);
    raise_peak(&h->req_peak,
               atomic_fetch_add_explicit(&h->req, requested, memory_order_relaxed) + requested);
}

static void held_sub(_Atomic size_t *v, size_t n)
{
    size_t old = atomic_load_explicit(v, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(v, &old, old > n ? old - n : 0,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* p, allocated on stream: a capturing stream's block belongs to the graph (torch_graph.c) */
static void *torch_noted(int device, gpool_t *pool, void *p, size_t size, gpool_stream_t stream)
{
    size_t real;
    if (gpool_block_size(pool, p, &real) == GPOOL_OK) held_add(device, real, size);
    /* the block's free reaches the pool only at a batch flush, when its stream may be gone */
    gp_stream_learn_ctx(pool, gp_stream_tag(stream));
    if (!gp_stream_capturing(pool, gp_stream_tag(stream))) return p;
    gp_torch_capture_seen(device, gp_stream_tag(stream));
    uint32_t tag = gp_torch_pool_of_capture(device, gp_stream_tag(stream));
    gp_torch_graph_adopt(device, tag); /* the window's earlier frees were inside this capture */
    if (gp_torch_graph_note(device, p, tag) == 0) return p;
    held_sub(&torch_held[device].live, real);
    held_sub(&torch_held[device].req, size);
    gpool_free_async(pool, p, stream);
    gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "gpool_torch_alloc: no host memory to record a graph block");
    return NULL;
}

/* ptr, a live block of pool of real bytes (the caller's lookup): graph memory is held for the
 * release, the rest batched */
static gpool_status torch_free_in(int device, gpool_t *pool, void *ptr, size_t size, size_t real,
                                  gpool_stream_t stream)
{
    gpool_status st;
    /* the eager path: no pool window is open, no capture was seen, no graph block lives (three
     * relaxed loads). PyTorch opens a window (its begin-allocate hook) before every capture it
     * makes, so no capture can have read the block; an extension's own capture is seen once it
     * allocates (torch_noted) */
    if (!gp_torch_windows_open() && !gp_torch_captures_listed() && !gp_torch_graph_live()) {
        st = gp_torch_batch_free(device, pool, ptr, size, stream);
        goto freed;
    }
    /* freed inside a capture: its own stream captures, or one the hooks know runs, or a pool
     * window begun on a stream says its stream captures; a window begun without one (torch
     * 2.3+) may be a capture that has not allocated yet (the suspects, below) */
    uintptr_t own = gp_stream_tag(stream), on = own;
    int own_captures = gp_stream_capturing(pool, own);
    if (own_captures) gp_torch_capture_seen(device, own);
    uintptr_t ws[8];
    size_t nws = 0, graph_windows = 0,
           blind = gp_torch_windows(device, ws, 8, &nws, &graph_windows);
    for (size_t i = 0; i < nws; i++)
        if (ws[i] != own && gp_stream_capturing(pool, ws[i])) {
            gp_torch_capture_seen(device, ws[i]);
            if (!own_captures) on = ws[i];
        }
    size_t running = gp_torch_captures(device, pool);
    /* a window of a graph's own pool is a capture even before it allocates (or if it never does) */
    if (!running && blind) running = graph_windows;
    /* an eager block freed while several captures run may be read by any of them: it waits for
     * every release (tag 0); a block a capture allocated stays that capture's when its own
     * stream frees it (torch_graph.h) */
    uint32_t tag = running == 1 ? gp_torch_pool_of_capture(device, on) : 0;
    uint32_t own_tag = own_captures ? gp_torch_pool_of_capture(device, own) : 0;
    if (running) gp_torch_graph_adopt(device, tag);
    int held = gp_torch_graph_hold(device, ptr, real, stream, running > 0, tag, own_tag);
    if (!held && blind) {
        gpool_torch_batch_stats b;
        gp_torch_batch_stats(device, &b);
        held = gp_torch_graph_suspect(device, ptr, real, size, stream, b.limit);
    }
    st = held ? GPOOL_OK : gp_torch_batch_free(device, pool, ptr, size, stream);
freed:
    if (st == GPOOL_OK) {
        held_sub(&torch_held[device].live, real);
        held_sub(&torch_held[device].req, size);
    }
    return st;
}

/* One try of the allocation; on failure its message is kept in why (the flush and release steps
 * between tries clear the messages of their own recovered failures). */
static int torch_try(gpool_t *pool, size_t size, gpool_stream_t stream, void **p, char *why,
                     size_t n, gpool_status *st)
{
    /* on a capturing stream fresh pages may be mapped: the block is the graph's, held out of
     * eager reuse while a graph may replay (torch_noted, torch_graph.c), as PyTorch's own
     * allocator gives a capture a private pool it may grow */
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.flags = GPOOL_ALLOC_IN_CAPTURE;
    *st = gpool_alloc_async(pool, size, &prm, stream, p);
    if (*st == GPOOL_OK) return 1;
    snprintf(why, n, "%s", gpool_last_error());
    return 0;
}

void *gpool_torch_alloc(size_t size, int device, gpool_stream_t stream)
{
    gpool_t *pool = torch_pool(device);
    void *p = NULL;
    if (!pool || !size) return NULL;
    /* a full batch flushes here, not in the free (which may run inside another stream's capture);
     * not on a capturing stream (gp_torch_batch_flush refuses to synchronize there) */
    if (gp_torch_batch_due(device)) gp_torch_batch_flush(device, pool, stream, 0);
    char why[512];
    gpool_status st;
    if (torch_try(pool, size, stream, &p, why, sizeof why, &st))
        return torch_noted(device, pool, p, size, stream);
    /* no memory: the blocks waiting in the free batch first (with the frees of an open window
     * that no capture has claimed: this stream does not capture, and none was seen) */
    if (!gp_stream_capturing(pool, gp_stream_tag(stream)) && !gp_torch_captures(device, pool))
        (void)gp_torch_graph_unsuspect(device, pool);
    if (gp_torch_batch_flush(device, pool, stream, 1) &&
        torch_try(pool, size, stream, &p, why, sizeof why, &st))
        return torch_noted(device, pool, p, size, stream);
    /* a capturing stream cannot wait for the flush's synchronize: its own frees come back
     * unsynchronized, as before the batch (stream order covers them; record_stream'd
     * blocks of that stream are the gap, see include/gpool_torch.h) */
    if (gp_stream_capturing(pool, gp_stream_tag(stream)) &&
        gp_torch_batch_release_stream(device, pool, stream) &&
        torch_try(pool, size, stream, &p, why, sizeof why, &st))
        return torch_noted(device, pool, p, size, stream);
    gp_fail(st, "%s", why); /* the last try's reason, whatever the steps between cleared */
    return NULL;
}

void gpool_torch_free(void *ptr, size_t size, int device, gpool_stream_t stream)
{
    if (!ptr) return;
    gpool_t *pool = device >= 0 && device < TORCH_MAX_DEVICES
                        ? atomic_load_explicit(&torch_pools[device], memory_order_acquire)
                        : NULL;
    size_t real;
    if (pool && gpool_block_size(pool, ptr, &real) == GPOOL_OK) {
        (void)torch_free_in(device, pool, ptr, size, real, stream); /* a double free: says so */
        return;
    }
    /* not where PyTorch said: look in the other devices' pools */
    for (int d = 0; d < TORCH_MAX_DEVICES; d++) {
        gpool_t *other = atomic_load_explicit(&torch_pools[d], memory_order_acquire);
        if (other && other != pool && gpool_block_size(other, ptr, &real) == GPOOL_OK) {
            (void)torch_free_in(d, other, ptr, size, real, stream);
            return;
        }
    }
    if (pool) (void)gpool_block_size(pool, ptr, &real); /* the message names PyTorch's device */
}

void gpool_torch_empty_cache(void)
{
    for (int d = 0; d < TORCH_MAX_DEVICES; d++) {
        gpool_t *pool = atomic_load_explicit(&torch_pools[d], memory_order_acquire);
        if (!pool) continue;
        if (!gp_torch_captures(d, pool)) (void)gp_torch_graph_unsuspect(d, pool);
        gp_torch_batch_flush(d, pool, NULL, 0);
    }
    /* graph memory whose release a running capture put off */
    if (gp_torch_release_dead_graph_memory() != GPOOL_OK) gp_clear_error();
    for (int d = 0; d < TORCH_MAX_DEVICES; d++) {
        gpool_t *pool = atomic_load_explicit(&torch_pools[d], memory_order_acquire);
        if (pool) gpool_trim(pool, 0);
    }
}

void gp_torch_window_closed(int device)
{
    gpool_t *pool = gpool_torch_pool(device);
    uintptr_t ws[1];
    size_t nws;
    /* not while a window that may be an unseen capture stays open, nor while one runs */
    if (pool && !gp_torch_windows(device, ws, 0, &nws, NULL) && !gp_torch_captures(device, pool))
        (void)gp_torch_graph_unsuspect(device, pool);
}

gpool_status gpool_torch_get_peaks(int device, size_t *allocated, size_t *requested)
{
    if (!allocated || !requested)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_torch_get_peaks: %s is NULL",
                       allocated ? "requested" : "allocated");
    if (device < 0 || device >= TORCH_MAX_DEVICES)
        return gp_fail(GPOOL_ERR_NO_DEVICE, "gpool_torch_get_peaks: device %d out of range",
                       device);
    *allocated = atomic_load_explicit(&torch_held[device].peak, memory_order_relaxed);
    *requested = atomic_load_explicit(&torch_held[device].req_peak, memory_order_relaxed);
    return GPOOL_OK;
}

void gpool_torch_reset_peaks(int device)
{
    if (device < 0 || device >= TORCH_MAX_DEVICES) return;
    held_bytes *h = &torch_held[device];
    atomic_store_explicit(&h->peak, atomic_load_explicit(&h->live, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&h->req_peak, atomic_load_explicit(&h->req, memory_order_relaxed),
                          memory_order_relaxed);
}

gpool_t *gpool_torch_pool(int device)
{
    if (device < 0 || device >= TORCH_MAX_DEVICES) return NULL;
    return atomic_load_explicit(&torch_pools[device], memory_order_acquire);
}

gpool_status gpool_torch_get_batch_stats(int device, gpool_torch_batch_stats *out)
{
    if (!out) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_torch_get_batch_stats: out is NULL");
    if (device < 0 || device >= TORCH_MAX_DEVICES)
        return gp_fail(GPOOL_ERR_NO_DEVICE, "gpool_torch_get_batch_stats: device %d out of range",
                       device);
    gp_torch_batch_stats(device, out);
    gp_torch_graph_held(device, &out->graph_blocks, &out->graph_bytes);
    return GPOOL_OK;
}

/* every device's held graph memory back: all of it, or that of pools no longer live */
static gpool_status release_graph_memory(int all)
{
    gpool_status first = GPOOL_OK;
    for (int d = 0; d < TORCH_MAX_DEVICES; d++) {
        gpool_t *pool = atomic_load_explicit(&torch_pools[d], memory_order_acquire);
        if (pool && gp_torch_graph_release(d, pool, all) != 0 && first == GPOOL_OK)
            first = GPOOL_ERR_DRIVER;
    }
    return first;
}

gpool_status gpool_torch_release_graph_memory(void)
{
    return release_graph_memory(1);
}

gpool_status gp_torch_release_dead_graph_memory(void)
{
    return release_graph_memory(0);
}

void gpool_torch_record_stream(void *ptr, gpool_stream_t stream)
{
    if (!ptr) return;
    for (int d = 0; d < TORCH_MAX_DEVICES; d++) {
        gpool_t *pool = atomic_load_explicit(&torch_pools[d], memory_order_acquire);
        size_t size;
        if (!pool || gpool_block_size(pool, ptr, &size) != GPOOL_OK) continue;
        gp_clear_error();
        if (gpool_record_stream(pool, ptr, stream) != GPOOL_OK) gp_clear_error();
        return;
    }
    gp_fail(GPOOL_ERR_INVALID_POINTER, "gpool_torch_record_stream: %p is no block of the hooks",
            ptr);
}

gpool_status gpool_torch_get_freed(int device, void **ptrs, size_t cap, size_t *count)
{
    if (!count || (!ptrs && cap))
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_torch_get_freed: %s is NULL",
                       count ? "ptrs" : "count");
    if (device < 0 || device >= TORCH_MAX_DEVICES)
        return gp_fail(GPOOL_ERR_NO_DEVICE, "gpool_torch_get_freed: device %d out of range",
                       device);
    size_t n = gp_torch_batch_list(device, ptrs, cap);
    size_t m = gp_torch_graph_list(device, n < cap ? ptrs + n : NULL, n < cap ? cap - n : 0);
    *count = n + m;
    return GPOOL_OK;
}
