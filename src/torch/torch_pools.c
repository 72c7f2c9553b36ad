/* torch_pools.c — PyTorch's graph-pool hooks for a pluggable allocator (include/gpool_torch.h).
 *
 * From torch 2.1 the pluggable allocator's Python object takes begin-allocate-to-pool and
 * release-pool functions (torch/csrc/cuda/Module.cpp, _CUDAPluggableAllocator's setters;
 * torch/csrc/cuda/CUDAPluggableAllocator.h). CUDAGraph::capture_begin begins its pool,
 * CUDAGraph::reset releases it; torch.cuda.use_mem_pool begins and releases around its block.
 * gpool holds graph memory (torch_graph.c) for as long as any graph may replay: here each
 * begun pool is counted until it is released, and when none is live any more no graph is left
 * to replay, so the held memory goes back (gpool_torch_release_graph_memory). Graphs sharing a
 * pool (graph_pool_handle) each begin and release it once, so the count is per id. */
#include <pthread.h>
#include <stdlib.h>

#include "error.h"
#include "gpool_torch.h"
#include "torch_pools.h"

typedef struct live_pool {
    int device;
    gpool_torch_mempool_id id;
    size_t refs;
} live_pool;

static live_pool *live;
static size_t nlive, caplive;
static int begun;     /* a pool was begun and counted: the hooks are in use */
static int uncounted; /* a begin could not be counted: no automatic release any more */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static live_pool *find(int device, gpool_torch_mempool_id id)
{
    for (size_t i = 0; i < nlive; i++)
        if (live[i].device == device && live[i].id.first == id.first &&
            live[i].id.second == id.second)
            return &live[i];
    return NULL;
}

static void begin_pool(int device, gpool_torch_mempool_id id)
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
        *p = (live_pool){device, id, 0};
    }
    /* no host memory to count it: the held memory then waits for an explicit release
     * (gpool_torch_release_graph_memory), as without the hooks */
    if (p) {
        p->refs++;
        begun = 1;
    } else {
        uncounted = 1;
    }
    pthread_mutex_unlock(&pools_lock);
}

void gpool_torch_begin_allocate_to_pool(int device, gpool_torch_mempool_id id, void *filter)
{
    (void)filter;
    begin_pool(device, id);
}

void gpool_torch_begin_allocate_stream_to_pool(int device, gpool_stream_t stream,
                                               gpool_torch_mempool_id id)
{
    (void)stream;
    begin_pool(device, id);
}

void gpool_torch_release_pool(int device, gpool_torch_mempool_id id)
{
    pthread_mutex_lock(&pools_lock);
    live_pool *p = find(device, id);
    if (!p) {
        pthread_mutex_unlock(&pools_lock);
        return;
    }
    if (--p->refs == 0) *p = live[--nlive];
    int none = nlive == 0 && !uncounted;
    pthread_mutex_unlock(&pools_lock);
    /* a failure (a capture running elsewhere) leaves the memory held for the next release */
    if (none && gpool_torch_release_graph_memory() != GPOOL_OK) gp_clear_error();
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

int gp_torch_pools_idle(void)
{
    pthread_mutex_lock(&pools_lock);
    int idle = begun && !uncounted && nlive == 0;
    pthread_mutex_unlock(&pools_lock);
    return idle;
}
