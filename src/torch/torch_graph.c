/* torch_graph.c — CUDA graph memory under the PyTorch hooks.
 *
 * A graph captured with torch.cuda.graph replays its kernels on the addresses it was captured
 * with. Memory allocated by a capturing stream (cuStreamIsCapturing, checked by the alloc
 * hook) therefore belongs to the graph for as long as it may replay, and so does memory freed
 * inside a capture (the captured kernels still use it at every replay). Both are held here,
 * out of the pool's eager reuse and out of the free batch, until
 * gpool_torch_release_graph_memory() (one device synchronize, then back to the pool), which
 * the program calls once its graphs are destroyed, or that PyTorch's release-pool hook makes
 * when the pool it was captured into is released (torch 2.1+, torch_pools.c) -- the private
 * pool per capture that PyTorch's own allocator keeps. Every block carries that pool's serial
 * (0: unknown, freed only when no pool is live). */
#include "torch_graph.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "pool.h"
#include "torch_batch.h"
#include "torch_captures.h"
#include "torch_pools.h"

typedef struct noted {
    void *p;      /* NULL: empty, GONE: removed */
    uint32_t tag; /* the pool it was captured into (torch_pools.c serial; 0: unknown) */
} noted;

typedef struct graph_mem {
    noted *set; /* open addressing: graph blocks still live */
    size_t cap, used;
    struct held {
        void *p;
        size_t size;
        gpool_stream_t s; /* the stream PyTorch freed it on (its allocation stream) */
        uint32_t tag;
        int suspect;      /* freed in an open pool window before a capture showed itself */
        size_t requested; /* a suspect's size as PyTorch passed it (for the free batch) */
    } * held;             /* freed graph blocks waiting for the release, and the suspects */
    size_t nheld, capheld, held_bytes, suspect_bytes;
} graph_mem;

#define GONE ((void *)1)

static graph_mem graphs[GP_TORCH_MAX_DEVICES];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_size_t live_blocks; /* noted on every device (changed under graph_lock) */

static size_t slot(const graph_mem *g, const void *p)
{
    uintptr_t h = (uintptr_t)p >> 12;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(h & (g->cap - 1));
}

static int set_add(graph_mem *g, void *p, uint32_t tag)
{
    if ((g->used + 1) * 2 > g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        noted *n = calloc(cap, sizeof *n);
        if (!n) return -1;
        graph_mem old = *g;
        g->set = n;
        g->cap = cap;
        g->used = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.set[i].p && old.set[i].p != GONE) {
                size_t j = slot(g, old.set[i].p);
                while (g->set[j].p)
                    j = (j + 1) & (cap - 1);
                g->set[j] = old.set[i];
                g->used++;
            }
        free(old.set);
    }
    size_t j = slot(g, p);
    while (g->set[j].p && g->set[j].p != GONE)
        j = (j + 1) & (g->cap - 1);
    g->set[j] = (noted){p, tag};
    g->used++;
    atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
    return 0;
}

/* 1 and *tag when p was noted (it is removed), else 0 */
static int set_remove(graph_mem *g, void *p, uint32_t *tag)
{
    if (!g->cap) return 0;
    for (size_t j = slot(g, p), k = 0; g->set[j].p && k < g->cap; j = (j + 1) & (g->cap - 1), k++)
        if (g->set[j].p == p) {
            *tag = g->set[j].tag;
            g->set[j].p = GONE; /* a tombstone keeps the probe chains; counted until a regrow */
            atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
            return 1;
        }
    return 0;
}

/* Append h to g's held blocks (lock held): 0, or -1 when out of host memory. */
static int held_add(graph_mem *g, struct held h)
{
    if (g->nheld == g->capheld) {
        size_t cap = g->capheld ? 2 * g->capheld : 64;
        struct held *n = realloc(g->held, cap * sizeof *n);
        if (!n) return -1;
        g->held = n;
        g->capheld = cap;
    }
    g->held[g->nheld++] = h;
    g->held_bytes += h.size;
    return 0;
}

int gp_torch_graph_note(int device, void *ptr, uint32_t tag)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return -1;
    pthread_mutex_lock(&graph_lock);
    int r = set_add(&graphs[device], ptr, tag);
    pthread_mutex_unlock(&graph_lock);
    return r;
}

int gp_torch_graph_live(void)
{
    return atomic_load_explicit(&live_blocks, memory_order_relaxed) != 0;
}

int gp_torch_graph_hold(int device, void *ptr, size_t size, gpool_stream_t stream, int capturing,
                        uint32_t capture_tag, uint32_t own_tag)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return 0;
    graph_mem *g = &graphs[device];
    pthread_mutex_lock(&graph_lock);
    uint32_t tag = 0;
    int mine = set_remove(g, ptr, &tag);
    if (capturing) /* the capture running now uses it too: with another graph's block, both
                    * may replay on it, so only the last release frees it (tag 0); a block of
                    * the capture its own stream runs stays that capture's */
        tag = !mine ? capture_tag : tag == capture_tag || (own_tag && tag == own_tag) ? tag : 0;
    else if (mine && !gp_torch_pool_live(tag)) /* its graphs are gone: nothing replays on it */
        mine = 0;
    if (!mine && !capturing) {
        pthread_mutex_unlock(&graph_lock);
        return 0;
    }
    /* cannot hold it: leak it rather than let a replay overwrite live data */
    (void)held_add(g, (struct held){ptr, size, stream, tag, 0, 0});
    pthread_mutex_unlock(&graph_lock);
    return 1;
}

int gp_torch_graph_suspect(int device, void *ptr, size_t size, size_t requested,
                           gpool_stream_t stream, size_t limit)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return 0;
    graph_mem *g = &graphs[device];
    pthread_mutex_lock(&graph_lock);
    int ok = g->suspect_bytes + size <= limit;
    for (size_t i = 0; i < g->nheld && ok; i++)
        ok = g->held[i].p != ptr; /* a second free of a held block: the batch will say so */
    ok = ok && held_add(g, (struct held){ptr, size, stream, 0, 1, requested}) == 0;
    if (ok) g->suspect_bytes += size;
    pthread_mutex_unlock(&graph_lock);
    return ok;
}

void gp_torch_graph_adopt(int device, uint32_t tag)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return;
    graph_mem *g = &graphs[device];
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < g->nheld && g->suspect_bytes; i++)
        if (g->held[i].suspect) {
            g->held[i].suspect = 0;
            g->held[i].tag = tag;
            g->suspect_bytes -= g->held[i].size;
        }
    pthread_mutex_unlock(&graph_lock);
}

size_t gp_torch_graph_unsuspect(int device, gpool_t *pool)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool) return 0;
    graph_mem *g = &graphs[device];
    size_t given = 0;
    for (;;) { /* one at a time: the batch takes its own lock */
        pthread_mutex_lock(&graph_lock);
        size_t i = 0;
        while (i < g->nheld && !g->held[i].suspect)
            i++;
        if (i == g->nheld) {
            pthread_mutex_unlock(&graph_lock);
            return given;
        }
        struct held h = g->held[i];
        g->held[i] = g->held[--g->nheld];
        g->held_bytes -= h.size;
        g->suspect_bytes -= h.size;
        pthread_mutex_unlock(&graph_lock);
        if (gp_torch_batch_free(device, pool, h.p, h.requested, h.s) != GPOOL_OK) gp_clear_error();
        given++;
    }
}

/* Is held block h to go back now: all of them, or its pool is no longer live? Suspects go
 * back through the free batch (gp_torch_graph_unsuspect), or with all. */
static int releasable(const struct held *h, int all)
{
    return all || (!h->suspect && !gp_torch_pool_live(h->tag));
}

int gp_torch_graph_release(int device, gpool_t *pool, int all)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool) return 0;
    graph_mem *g = &graphs[device];
    pthread_mutex_lock(&graph_lock);
    size_t n = g->nheld, due = 0;
    for (size_t i = 0; i < n; i++)
        due += releasable(&g->held[i], all);
    if (!all) /* blocks still live whose pool is gone are ordinary memory once freed */
        for (size_t j = 0; j < g->cap; j++)
            if (g->set[j].p && g->set[j].p != GONE && g->set[j].tag &&
                !gp_torch_pool_live(g->set[j].tag)) {
                g->set[j].p = GONE;
                atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
            }
    pthread_mutex_unlock(&graph_lock);
    if (!due) return 0;
    if (!gp_torch_may_sync(0)) { /* a synchronize would invalidate a capture */
        gp_fail(GPOOL_ERR_DRIVER,
                "gpool_torch_release_graph_memory: a graph capture may be running (one the hooks "
                "saw, or a pool window still open); device %d's graph memory stays held for the "
                "next release or gpool_torch_empty_cache()",
                device);
        return -1;
    }
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    gp_dc_leave(&pool->dc, pushed);
    if (r != CUDA_SUCCESS) { /* e.g. a capture is running: keep them */
        gp_cu_fail(r, "gpool_torch_release_graph_memory: cuCtxSynchronize");
        return -1;
    }
    pthread_mutex_lock(&graph_lock);
    /* of the first n, held before the synchronize, those due go back (a pool once gone stays
     * gone, so each is still due; only serial 0 may be live again, and then it stays); later
     * ones stay */
    size_t kept = 0;
    for (size_t i = 0; i < g->nheld; i++) {
        struct held h = g->held[i];
        if (i < n && releasable(&h, all)) {
            /* on its own stream: a free on another one (gpool_free: the pool's default stream)
             * is deferred behind an event on the allocation stream, and snapshots showed the
             * block allocated until that event was polled; the synchronize covered its work */
            if (gpool_free_async(pool, h.p, h.s) != GPOOL_OK) gp_clear_error();
            g->held_bytes -= h.size;
            if (h.suspect) g->suspect_bytes -= h.size;
        } else {
            g->held[kept++] = h;
        }
    }
    g->nheld = kept;
    pthread_mutex_unlock(&graph_lock);
    return 0;
}

void gp_torch_graph_held(int device, size_t *blocks, size_t *bytes)
{
    *blocks = *bytes = 0;
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return;
    pthread_mutex_lock(&graph_lock);
    *blocks = graphs[device].nheld;
    *bytes = graphs[device].held_bytes;
    pthread_mutex_unlock(&graph_lock);
}

size_t gp_torch_graph_list(int device, void **ptrs, size_t cap)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return 0;
    pthread_mutex_lock(&graph_lock);
    const graph_mem *g = &graphs[device];
    for (size_t i = 0; i < g->nheld && i < cap; i++)
        ptrs[i] = g->held[i].p;
    size_t n = g->nheld;
    pthread_mutex_unlock(&graph_lock);
    return n;
}
