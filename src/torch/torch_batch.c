/* torch_batch.c — the PyTorch hooks' free batch.
 *
 * PyTorch hands a pluggable allocator alloc(size, device, stream) and free(ptr, size, device,
 * stream) only: Tensor.record_stream(u) never reaches it. A block freed on s may therefore
 * still be in use by work queued on any other stream (DDP/NCCL, prefetchers, pin_memory +
 * non_blocking copies), and reusing it at once on s -- or on another stream after an event
 * on s -- races that work. The hooks so do what the drop-in does with cudaFree (the batch
 * rule, preload/preload_batch.c): freed blocks are queued per device, and once the queue holds
 * its limit (cudafree_batch=, else 1/64 of the device's memory, at least 64 MiB) one
 * cuCtxSynchronize -- "blocks until the device has completed all preceding requested tasks"
 * (CUDA Driver API, cuCtxSynchronize) on every stream of the context -- makes all of them
 * safe for any stream, and they go back to the pool. An allocation that finds no memory
 * flushes first and retries (torch.c). Cost: one synchronize per `limit` bytes freed.
 *
 * While the caller's stream is capturing a CUDA graph the flush is skipped (synchronizing
 * during a capture is prohibited, CUDA Programming Guide, "Prohibited and Unhandled
 * Operations"); the blocks wait for the next flush. */
#include "torch_batch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "pool.h"
#include "stream.h"
#include "torch_captures.h"

typedef struct entry {
    void *p;
    gpool_stream_t s;
    size_t size, requested;
    unsigned long long seq; /* queued before a flush's synchronize began: seq < its mark */
} entry;

/* A FIFO: entries [head, n) are queued, in seq order. */
typedef struct batch {
    entry *e;
    size_t head, n, cap;
    size_t bytes, requested, limit;
    unsigned long long seq, flushes, frees;
    atomic_int full; /* bytes >= limit: the next allocation flushes (gp_torch_batch_due) */
    void **set;      /* the queued addresses (open addressing; NULL empty, GONE removed), so a
                        second free of a queued block is told apart from a first one */
    size_t set_cap, set_used, set_live;
} batch;

#define GONE ((void *)1)

static size_t slot(size_t cap, const void *p)
{
    uintptr_t h = (uintptr_t)p >> 6;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 7) & (cap - 1);
}

static size_t set_find(const batch *b, const void *p)
{
    if (!b->set_cap) return SIZE_MAX;
    for (size_t j = slot(b->set_cap, p), k = 0; b->set[j] && k < b->set_cap;
         j = (j + 1) & (b->set_cap - 1), k++)
        if (b->set[j] == p) return j;
    return SIZE_MAX;
}

/* 0, or -1 without host memory (then the block is queued unlisted: no double-free check) */
static int set_add(batch *b, void *p)
{
    if ((b->set_used + 1) * 2 > b->set_cap) { /* regrow for the live entries, dropping GONE */
        size_t cap = 256;
        while (cap < 4 * (b->set_live + 1))
            cap *= 2;
        void **n = calloc(cap, sizeof *n);
        if (!n) return -1;
        for (size_t i = 0; i < b->set_cap; i++)
            if (b->set[i] && b->set[i] != GONE) {
                size_t j = slot(cap, b->set[i]);
                while (n[j])
                    j = (j + 1) & (cap - 1);
                n[j] = b->set[i];
            }
        free(b->set);
        b->set = n;
        b->set_cap = cap;
        b->set_used = b->set_live;
    }
    size_t j = slot(b->set_cap, p);
    while (b->set[j] && b->set[j] != GONE)
        j = (j + 1) & (b->set_cap - 1);
    if (!b->set[j]) b->set_used++;
    b->set[j] = p;
    b->set_live++;
    return 0;
}

static void set_remove(batch *b, const void *p)
{
    size_t j = set_find(b, p);
    if (j == SIZE_MAX) return;
    b->set[j] = GONE;
    b->set_live--;
}

static batch batches[GP_TORCH_MAX_DEVICES];
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t default_limit(gpool_t *pool)
{
    size_t free_b = 0, total = 0;
    size_t min = (size_t)64 << 20;
    if (gpool_mem_get_info(pool, &free_b, &total) != GPOOL_OK) {
        gp_clear_error();
        return min;
    }
    return total / 64 > min ? total / 64 : min;
}

void gp_torch_batch_init(int device, gpool_t *pool, size_t limit)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return;
    size_t l = limit ? limit : default_limit(pool);
    pthread_mutex_lock(&batch_lock);
    batches[device].limit = l;
    pthread_mutex_unlock(&batch_lock);
}

/* Wait for all work on the pool's device; 0 on success. Not during the caller's capture, nor
 * while another may run (torch_captures.h: a synchronize would invalidate it). */
static int device_sync(gpool_t *pool, gpool_stream_t stream, int oom)
{
    if (gp_stream_capturing(pool, gp_stream_tag(stream)) || !gp_torch_may_sync(oom)) return -1;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    gp_dc_leave(&pool->dc, pushed);
    return r == CUDA_SUCCESS ? 0 : -1;
}

size_t gp_torch_batch_flush(int device, gpool_t *pool, gpool_stream_t stream, int oom)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool) return 0;
    batch *b = &batches[device];
    pthread_mutex_lock(&batch_lock);
    unsigned long long mark = b->seq; /* what the synchronize below covers */
    int empty = b->head == b->n;
    pthread_mutex_unlock(&batch_lock);
    if (empty) return 0;
    if (device_sync(pool, stream, oom) != 0) { /* capturing, or a failed synchronize: later */
        gp_clear_error();
        return 0;
    }
    /* gpool_free_async under the batch lock: gpool never calls back into the hooks */
    size_t done = 0;
    pthread_mutex_lock(&batch_lock);
    while (b->head < b->n && b->e[b->head].seq < mark) {
        entry *x = &b->e[b->head++];
        set_remove(b, x->p);
        if (gpool_free_async(pool, x->p, x->s) != GPOOL_OK) gp_clear_error();
        b->bytes -= x->size;
        b->requested -= x->requested;
        done++;
    }
    if (b->head == b->n) b->head = b->n = 0;
    if (done) b->flushes++;
    atomic_store_explicit(&b->full, b->bytes >= b->limit, memory_order_relaxed);
    pthread_mutex_unlock(&batch_lock);
    return done;
}

size_t gp_torch_batch_release_stream(int device, gpool_t *pool, gpool_stream_t stream)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool) return 0;
    batch *b = &batches[device];
    size_t done = 0;
    pthread_mutex_lock(&batch_lock);
    size_t keep = b->head;
    for (size_t i = b->head; i < b->n; i++) {
        entry *x = &b->e[i];
        if (x->s != stream) {
            b->e[keep++] = *x;
            continue;
        }
        set_remove(b, x->p);
        if (gpool_free_async(pool, x->p, x->s) != GPOOL_OK) gp_clear_error();
        b->bytes -= x->size;
        b->requested -= x->requested;
        done++;
    }
    b->n = keep;
    if (b->head == b->n) b->head = b->n = 0;
    atomic_store_explicit(&b->full, b->bytes >= b->limit, memory_order_relaxed);
    pthread_mutex_unlock(&batch_lock);
    return done;
}

gpool_status gp_torch_batch_free(int device, gpool_t *pool, void *ptr, size_t requested,
                                 gpool_stream_t stream)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_torch_free: device %d", device);
    size_t size;
    gpool_status st = gpool_block_size(pool, ptr, &size);
    if (st != GPOOL_OK) return st;
    batch *b = &batches[device];
    pthread_mutex_lock(&batch_lock);
    if (set_find(b, ptr) != SIZE_MAX) {
        pthread_mutex_unlock(&batch_lock);
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "gpool_torch_free: %p was freed already (it waits in the free batch)", ptr);
    }
    if (b->n == b->cap && b->head) { /* slide the queue to the front */
        memmove(b->e, b->e + b->head, (b->n - b->head) * sizeof *b->e);
        b->n -= b->head;
        b->head = 0;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        entry *m = realloc(b->e, cap * sizeof *m);
        if (!m) { /* no room to queue it: wait for the device here instead */
            pthread_mutex_unlock(&batch_lock);
            if (device_sync(pool, stream, 1) == 0) return gpool_free_async(pool, ptr, stream);
            return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "gpool_torch_free: no memory to queue %p", ptr);
        }
        b->e = m;
        b->cap = cap;
    }
    b->e[b->n++] = (entry){ptr, stream, size, requested, b->seq++};
    (void)set_add(b, ptr); /* no room to list it: only the double-free check is lost */
    b->bytes += size;
    b->requested += requested;
    b->frees++;
    /* no synchronize here: a free runs wherever the program drops a tensor, also while another
     * stream captures a graph, and a cuCtxSynchronize then invalidates that capture; the next
     * allocation on a stream that is not capturing flushes (gp_torch_batch_due) */
    if (b->bytes >= b->limit) atomic_store_explicit(&b->full, 1, memory_order_relaxed);
    pthread_mutex_unlock(&batch_lock);
    return GPOOL_OK;
}

int gp_torch_batch_due(int device)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return 0;
    return atomic_load_explicit(&batches[device].full, memory_order_relaxed);
}

void gp_torch_batch_stats(int device, gpool_torch_batch_stats *out)
{
    memset(out, 0, sizeof *out);
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return;
    pthread_mutex_lock(&batch_lock);
    const batch *b = &batches[device];
    out->blocks = b->n - b->head;
    out->bytes = b->bytes;
    out->requested_bytes = b->requested;
    out->limit = b->limit;
    out->frees = b->frees;
    out->flushes = b->flushes;
    pthread_mutex_unlock(&batch_lock);
}

size_t gp_torch_batch_list(int device, void **ptrs, size_t cap)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return 0;
    pthread_mutex_lock(&batch_lock);
    const batch *b = &batches[device];
    size_t n = b->n - b->head;
    for (size_t i = 0; i < n && i < cap; i++)
        ptrs[i] = b->e[b->head + i].p;
    pthread_mutex_unlock(&batch_lock);
    return n;
}
