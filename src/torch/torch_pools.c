/* torch_pools.c — PyTorch's graph-pool hooks for a pluggable allocator (include/gpool_torch.h).
 *
 * From torch 2.1 the pluggable allocator's Python object takes begin-allocate-to-pool and
 * release-pool functions (torch/csrc/cuda/Module.cpp, _CUDAPluggableAllocator's setters;
 * torch/csrc/cuda/CUDAPluggableAllocator.h). CUDAGraph::capture_begin begins its pool,
 * CUDAGraph::reset releases it; torch.cuda.use_mem_pool begins and releases around its block.
 * gpool holds graph memory (torch_graph.c) for as long as any graph may replay: here each
 * begun pool is counted until it is released, and when none is live any more no graph is left
 * to replay, so the held memory goes back (gpool_torch_release_graph_memory). Graphs sharing a
 * pool (graph_pool_handle) each begin and release it once, so the count is per id.
 *
 * Pool by pool: each live pool has a serial, and the end-allocate hooks (torch 2.1+) close the
 * window its begin opened. A capture's blocks (allocated on the capturing stream, or freed
 * while it captures) are tagged with the pool whose window the capture is in: the open window
 * begun on that stream (torch 2.1/2.2 pass it), else the device's only open window. With two
 * windows open and no stream to tell them apart the tag is 0, which only the last release
 * frees. When a pool's last reference goes, the blocks tagged with it go back. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "gpool_torch.h"
#include "torch_pools.h"

#define POOL_STREAMS 8 /* open windows of one pool told apart by their stream (more: unnamed) */

typedef struct live_pool {
    int device;
    gpool_torch_mempool_id id;
    size_t refs;
    uint32_t serial;  /* this pool's tag on graph blocks (torch_graph.c); never 0 */
    uint32_t open;    /* begins not yet ended: windows in which captures allocate to it */
    uint32_t nstream; /* of those, begun on a stream (torch 2.1, 2.2) and listed here */
    uintptr_t stream[POOL_STREAMS];
} live_pool;

static live_pool *live;
static size_t nlive, caplive;
static int begun;        /* a pool was begun and counted: the hooks are in use */
static int uncounted;    /* a begin could not be counted: no automatic release any more */
static uint32_t serials; /* the last serial given */
static atomic_size_t
    windows_open; /* open windows on every device: 0 spares the free hook the lock */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static live_pool *find(int device, gpool_torch_mempool_id id)
{
    for (size_t i = 0; i < nlive; i++)
        if (live[i].device == device && live[i].id.first == id.first &&
            live[i].id.second == id.second)
            return &live[i];
    return NULL;
}

static void begin_pool(int device, gpool_torch_mempool_id id, uintptr_t stream)
{
    pthread_mutex_lock(&pools_lock);
    live_pool *p = find(device, id);
    if (!p && nlive == caplive) {
        size_t cap = caplive ? 2 * caplive : 16;
        live_pool *n = realloc(live, cap * sizeof *n);
        if (n) {
            live = n;
            caplive = cap;
        }
    }
    if (!p && nlive < caplive) {
        p = &live[nlive++];
        if (++serials == 0 || serials == GP_TORCH_NO_WINDOW) serials = 1;
        *p = (live_pool){.device = device, .id = id, .serial = serials};
    }
    /* no host memory to count it: the held memory then waits for an explicit release
     * (gpool_torch_release_graph_memory), as without the hooks */
    if (p) {
        p->refs++;
        p->open++;
        atomic_fetch_add(&windows_open, 1);
        if (stream && p->nstream < POOL_STREAMS) p->stream[p->nstream++] = stream;
        begun = 1;
    } else {
        uncounted = 1;
    }
    pthread_mutex_unlock(&pools_lock);
}

void gpool_torch_begin_allocate_to_pool(int device, gpool_torch_mempool_id id, void *filter)
{
    (void)filter;
    begin_pool(device, id, 0);
}

void gpool_torch_begin_allocate_stream_to_pool(int device, gpool_stream_t stream,
                                               gpool_torch_mempool_id id)
{
    begin_pool(device, id, (uintptr_t)stream);
}

void gpool_torch_end_allocate_to_pool(int device, gpool_torch_mempool_id id)
{
    pthread_mutex_lock(&pools_lock);
    live_pool *p = find(device, id);
    if (p && p->open) { /* a window begun without a stream, if it has one */
        p->open--;
        if (p->nstream > p->open) p->nstream--;
        atomic_fetch_sub(&windows_open, 1);
    }
    pthread_mutex_unlock(&pools_lock);
    gp_torch_window_closed(device);
}

void gpool_torch_end_allocate_stream_to_pool(int device, gpool_stream_t stream)
{
    pthread_mutex_lock(&pools_lock);
    live_pool *last = NULL; /* the latest window begun on the stream: a stream captures once */
    uint32_t at = 0;
    for (size_t i = 0; i < nlive; i++)
        for (uint32_t k = 0; k < live[i].nstream; k++)
            if (live[i].device == device && live[i].stream[k] == (uintptr_t)stream &&
                (!last || live[i].serial > last->serial)) {
                last = &live[i];
                at = k;
            }
    if (last) {
        last->stream[at] = last->stream[--last->nstream];
        last->open--;
        atomic_fetch_sub(&windows_open, 1);
    }
    pthread_mutex_unlock(&pools_lock);
    gp_torch_window_closed(device);
}

void gpool_torch_release_pool(int device, gpool_torch_mempool_id id)
{
    pthread_mutex_lock(&pools_lock);
    live_pool *p = find(device, id);
    if (!p) {
        pthread_mutex_unlock(&pools_lock);
        return;
    }
    int gone = --p->refs == 0;
    if (gone) {
        atomic_fetch_sub(&windows_open, p->open); /* windows never ended end with their pool */
        *p = live[--nlive];
    }
    pthread_mutex_unlock(&pools_lock);
    if (gone) gp_torch_window_closed(device);
    /* the blocks of pools no longer live go back (all of them once none is); a failure (a
     * capture running elsewhere) leaves them held for the next release */
    if (gone && gp_torch_release_dead_graph_memory() != GPOOL_OK) gp_clear_error();
}

size_t gpool_torch_live_pools(void)
{
    pthread_mutex_lock(&pools_lock);
    size_t n = 0;
    for (size_t i = 0; i < nlive; i++)
        n += live[i].refs;
    pthread_mutex_unlock(&pools_lock);
    return n;
}

uint32_t gp_torch_pool_of_capture(int device, uintptr_t stream)
{
    pthread_mutex_lock(&pools_lock);
    const live_pool *on_stream = NULL, *only = NULL;
    size_t nopen = 0;
    for (size_t i = 0; i < nlive; i++) {
        const live_pool *p = &live[i];
        if (p->device != device || !p->open) continue;
        nopen += p->open;
        only = p;
        for (uint32_t k = 0; stream && k < p->nstream; k++)
            if (p->stream[k] == stream && (!on_stream || p->serial > on_stream->serial))
                on_stream = p;
    }
    uint32_t serial = on_stream    ? on_stream->serial
                      : nopen == 1 ? only->serial
                      : nopen == 0 ? GP_TORCH_NO_WINDOW
                                   : 0;
    pthread_mutex_unlock(&pools_lock);
    return serial;
}

int gp_torch_pool_live(uint32_t serial)
{
    pthread_mutex_lock(&pools_lock);
    int live_now = serial == GP_TORCH_NO_WINDOW; /* no release names it: only an explicit one */
    if (!serial) live_now = !(begun && !uncounted && nlive == 0);
    for (size_t i = 0; serial && !live_now && i < nlive; i++)
        live_now = live[i].serial == serial;
    pthread_mutex_unlock(&pools_lock);
    return live_now;
}

int gp_torch_windows_open(void)
{
    return atomic_load_explicit(&windows_open, memory_order_relaxed) != 0;
}

size_t gp_torch_windows(int device, uintptr_t *streams, size_t max, size_t *nstreams,
                        size_t *graphs)
{
    *nstreams = 0;
    if (graphs) *graphs = 0;
    if (!gp_torch_windows_open()) return 0;
    size_t blind = 0;
    pthread_mutex_lock(&pools_lock);
    for (size_t i = 0; i < nlive; i++) {
        const live_pool *p = &live[i];
        if (p->device != device || !p->open) continue;
        blind += p->open - p->nstream;
        if (graphs && p->id.first) *graphs += p->open - p->nstream;
        for (uint32_t k = 0; k < p->nstream; k++)
            if (*nstreams < max)
                streams[(*nstreams)++] = p->stream[k];
            else
                blind++; /* not listed: as if begun without one */
    }
    pthread_mutex_unlock(&pools_lock);
    return blind;
}
