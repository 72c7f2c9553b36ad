/* preload_batch.c — the cudaFree batch (cudafree=batch, the default; see the top of preload.c
 * for why cudaFree cannot simply give a block back to the pool).
 *
 * Each thread has its own batch: a cudaFree appends the block to it under the batch's own
 * lock, which only that thread takes on its cached path (an allocation that finds no memory
 * takes every thread's lock in turn to flush them all), so threads never contend on a free.
 * A thread's batch is flushed when it holds the batch limit of one device (cudafree_batch=,
 * else 1/64 of the device's memory and at least 64 MiB, computed once per device): one
 * cuCtxSynchronize per device in it (all work issued so far on every stream of the context
 * is done, as the real cudaFree guarantees), then every block goes back to its pool. A thread
 * that exits flushes its batch. The limit is per thread: with T threads freeing at once, up to
 * T limits can be pending; cudaMemGetInfo counts them as free, and an allocation that finds no
 * memory flushes every batch and tries again before it reports an out-of-memory, so pending
 * blocks never make an allocation fail, and a flush never happens while the pool still has
 * memory it can hand out safely (gpool tries its cache and the driver first).
 *
 * While no non-blocking stream exists (and no stream capture runs), the flush is the
 * legacy-stream fence instead (preload_fence.c: one event record on the legacy stream per
 * device, no synchronize), made every 32 blocks or 8 MiB of a device, whichever comes first:
 * the fence orders every stream a block may meet then, and the batch holds back little. The
 * counters (gpool_preload_batch_stats) are the synchronizing batch's only.
 *
 * cudaFreeHost/cuMemFreeHost queue host blocks the same way (counted apart from the device
 * bytes: they are not device memory); a flush holding one covers every device gpool serves,
 * since pinned memory is reachable from all of them.
 *
 * Every queued block is in the pending set (preload_pending.c) until its batch drains: a second
 * cudaFree/cuMemFree/cudaFreeHost of it, from any thread, is refused there with the error CUDA
 * documents for a pointer already freed, and is queued nowhere. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload.h"
#include "preload_pending.h"

typedef struct pending_free {
    void *p;
    int dev;
    uint32_t where; /* its slot in the pending set */
} pending_free;

/* Give list[i] back to its pool: out of the pending set first (a later free of the address is
 * then gpool's to judge), then gpool_free. */
static void give_back(const pending_free *e)
{
    gpp_pending_remove(e->where, e->p);
    gpool_free(gpp_pool_peek(e->dev), e->p);
}

/* A batch's host blocks (cudaFreeHost/cuMemFreeHost): reachable from every device, so a
 * flush holding one covers every device gpool serves. */
static int covers(const size_t *bytes, int host, int dev)
{
    return bytes[dev] || (host && gpp_pool_peek(dev));
}

typedef struct gpp_batch {
    atomic_int lock; /* the owner on every free; a flush-all from another thread, rarely */
    pending_free *e;
    size_t n, cap;
    size_t bytes[GPP_MAX_DEVICES]; /* device blocks */
    size_t host_bytes;             /* host blocks (counted apart: not device memory) */
    uint64_t devs;                 /* bit d: bytes[d] != 0 (a flush visits only those) */
    unsigned long long frees, flushes, syncs, peak; /* owner-written, read under lock */
    struct gpp_batch *prev, *next;                  /* all_batches, under registry_lock */
} gpp_batch;

static _Thread_local __attribute__((tls_model("initial-exec"))) gpp_batch *tl_batch;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static gpp_batch *all_batches;
static pthread_key_t batch_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
/* counters of batches whose threads have exited */
static unsigned long long gone_frees, gone_flushes, gone_syncs, gone_peak;

/* cudafree_flush=event: flushed blocks waiting for their flush's events, oldest first */
#define GPP_MAX_FLUSH_EVENTS 64
typedef struct waiting_group {
    pending_free *e;
    size_t n;
    CUevent ev[GPP_MAX_FLUSH_EVENTS];
    size_t nev;
    size_t bytes[GPP_MAX_DEVICES];
    int host; /* holds host blocks (parked groups: see covers) */
    struct waiting_group *next;
} waiting_group;
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static waiting_group *waiting, **waiting_tail = &waiting;
/* Flushed blocks parked while a capture ran (a synchronize would have invalidated it), until
 * the last capture ends (gpp_batch_unpark); counted in waiting_bytes. */
static waiting_group *parked;
static size_t waiting_bytes[GPP_MAX_DEVICES], waiting_total, peak_waiting;
static unsigned long long events_recorded;

/* Give back the blocks of every group whose events completed (wait: wait for them). How many
 * blocks went back. */
static size_t reap(int wait)
{
    const gpp_real_driver *d = gpp_driver();
    size_t freed = 0;
    pthread_mutex_lock(&wait_lock);
    for (waiting_group **gp = &waiting; *gp;) {
        waiting_group *g = *gp;
        int done = 1;
        for (size_t i = 0; done && i < g->nev; i++)
            done = (wait ? d->cuEventSynchronize(g->ev[i]) : d->cuEventQuery(g->ev[i])) ==
                   CUDA_SUCCESS;
        if (!done) {
            gp = &g->next;
            continue;
        }
        for (size_t i = 0; i < g->nev; i++)
            d->cuEventDestroy(g->ev[i]);
        for (size_t i = 0; i < g->n; i++)
            give_back(&g->e[i]);
        for (int k = 0; k < GPP_MAX_DEVICES; k++) {
            waiting_bytes[k] -= g->bytes[k];
            waiting_total -= g->bytes[k];
        }
        freed += g->n;
        *gp = g->next;
        if (!*gp) waiting_tail = gp;
        free(g->e);
        free(g);
    }
    pthread_mutex_unlock(&wait_lock);
    return freed;
}

/* Event flush of list (see preload_streams.c): record the events, queue the blocks until they
 * complete. 0 when queued (list is copied); -1 when the caller must synchronize instead. */
static int flush_with_events(const pending_free *list, size_t n, const size_t *bytes, int host)
{
    const gpp_real_driver *d = gpp_driver();
    waiting_group *g = calloc(1, sizeof *g);
    pending_free *copy = g ? malloc(n * sizeof *copy) : NULL;
    int ok = d && d->cuEventQuery && d->cuEventSynchronize && copy;
    for (int k = 0; ok && k < GPP_MAX_DEVICES; k++) {
        if (!covers(bytes, host, k)) continue;
        size_t got = gpp_record_flush_events(k, g->ev + g->nev, GPP_MAX_FLUSH_EVENTS - g->nev);
        if (got == (size_t)-1)
            ok = 0;
        else
            g->nev += got;
    }
    if (!ok) {
        for (size_t i = 0; g && i < g->nev; i++)
            d->cuEventDestroy(g->ev[i]);
        free(copy);
        free(g);
        return -1;
    }
    memcpy(copy, list, n * sizeof *copy);
    g->e = copy;
    g->n = n;
    memcpy(g->bytes, bytes, sizeof g->bytes);
    pthread_mutex_lock(&wait_lock);
    *waiting_tail = g;
    waiting_tail = &g->next;
    for (int k = 0; k < GPP_MAX_DEVICES; k++) {
        waiting_bytes[k] += bytes[k];
        waiting_total += bytes[k];
    }
    if (waiting_total > peak_waiting) peak_waiting = waiting_total;
    events_recorded += g->nev;
    pthread_mutex_unlock(&wait_lock);
    return 0;
}

/* Park list (a flush during a capture): copied, its bytes counted as waiting. 0 when parked,
 * -1 when there is no host memory for it (the caller synchronizes instead). */
static int park(const pending_free *list, size_t n, const size_t *bytes, int host)
{
    waiting_group *g = calloc(1, sizeof *g);
    pending_free *copy = g ? malloc(n * sizeof *copy) : NULL;
    if (!copy) {
        free(g);
        return -1;
    }
    memcpy(copy, list, n * sizeof *copy);
    g->e = copy;
    g->n = n;
    g->host = host;
    memcpy(g->bytes, bytes, sizeof g->bytes);
    pthread_mutex_lock(&wait_lock);
    g->next = parked;
    parked = g;
    for (int k = 0; k < GPP_MAX_DEVICES; k++) {
        waiting_bytes[k] += bytes[k];
        waiting_total += bytes[k];
    }
    if (waiting_total > peak_waiting) peak_waiting = waiting_total;
    pthread_mutex_unlock(&wait_lock);
    return 0;
}

size_t gpp_batch_unpark(void)
{
    if (atomic_load_explicit(&gpp_captures, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&wait_lock);
    waiting_group *list = parked;
    parked = NULL;
    pthread_mutex_unlock(&wait_lock);
    if (!list) return 0;
    size_t bytes[GPP_MAX_DEVICES] = {0}, freed = 0;
    int host = 0;
    for (waiting_group *g = list; g; g = g->next) {
        host |= g->host;
        for (int k = 0; k < GPP_MAX_DEVICES; k++)
            bytes[k] += g->bytes[k];
    }
    for (int k = 0; k < GPP_MAX_DEVICES; k++)
        if (covers(bytes, host, k)) gpp_device_sync(k);
    while (list) {
        waiting_group *g = list;
        list = g->next;
        for (size_t i = 0; i < g->n; i++)
            give_back(&g->e[i]);
        freed += g->n;
        pthread_mutex_lock(&wait_lock);
        for (int k = 0; k < GPP_MAX_DEVICES; k++) {
            waiting_bytes[k] -= g->bytes[k];
            waiting_total -= g->bytes[k];
        }
        pthread_mutex_unlock(&wait_lock);
        free(g->e);
        free(g);
    }
    return freed;
}

static void batch_lock(gpp_batch *b)
{
    while (atomic_exchange_explicit(&b->lock, 1, memory_order_acquire))
        while (atomic_load_explicit(&b->lock, memory_order_relaxed))
            ;
}

static void batch_unlock(gpp_batch *b)
{
    atomic_store_explicit(&b->lock, 0, memory_order_release);
}

/* While no non-blocking stream exists and no capture runs, the legacy-stream fence
 * (preload_fence.c) orders every stream a freed block may meet: a batch is then flushed by one
 * event record per device every GPP_FENCE_BLOCKS blocks or GPP_FENCE_BYTES bytes of a device,
 * whichever comes first (memory held back: that much per thread).
 *
 * 32 blocks: half of gpool's thread cache of a small class (64 slots, src/kinds/tcache.h, for the
 * classes up to 4 KiB with the default tcache_bytes), which refills and spills half its slots
 * at a time. A program that frees each block it allocates then takes at most 32 blocks out
 * of the cache before the flush puts them back, so the cache settles where neither its refill
 * nor its spill runs: with 64 both ran every flush (about 150 instructions a pair, the most
 * of what the batch cost). Fewer blocks per flush only fence more often. */
#define GPP_FENCE_BLOCKS 32
#define GPP_FENCE_BYTES  ((size_t)8 << 20)
static int fence_flush_ok(void)
{
    return !gpp_nonblocking_streams() &&
           atomic_load_explicit(&gpp_captures, memory_order_relaxed) == 0;
}

int gpp_batch_fences(void)
{
    return fence_flush_ok();
}

/* Synchronize each device of list (or fence it: *fenced = 1), then give every block back to
 * its pool; the number of synchronizes. The caller owns list (taken out of a batch). */
static unsigned drain(pending_free *list, size_t n, const size_t *bytes, uint64_t devs, int host,
                      int *fenced)
{
    *fenced = fence_flush_ok();
    if (*fenced) {
        if (host) /* host blocks: every device gpool serves (see covers) */
            gpp_legacy_fence_all();
        for (uint64_t m = host ? 0 : devs; m; m &= m - 1)
            gpp_legacy_fence(__builtin_ctzll(m));
        for (size_t i = 0; i < n; i++)
            give_back(&list[i]);
        return 0;
    }
    /* no event on a capturing stream: it would join the capture, or invalidate it (the
     * synchronize below is what the batch makes during a capture too) */
    if (gpp_flush_with_events() && atomic_load_explicit(&gpp_captures, memory_order_relaxed) == 0 &&
        flush_with_events(list, n, bytes, host) == 0) {
        reap(0); /* earlier flushes whose work is done */
        return 0;
    }
    /* a synchronize now would invalidate a running capture (cuda.h,
     * cuThreadExchangeStreamCaptureMode: a potentially unsafe call): the blocks wait until the
     * last capture ends */
    if (gpp_capture_forbids_sync() && park(list, n, bytes, host) == 0) return 0;
    unsigned syncs = 0;
    for (int d = 0; d < GPP_MAX_DEVICES; d++)
        if (covers(bytes, host, d)) {
            gpp_device_sync(d);
            syncs++;
        }
    for (size_t i = 0; i < n; i++)
        give_back(&list[i]);
    return syncs;
}

/* Take b's entries out and drain them. Returns how many blocks went back. Not inlined: the
 * free's fast path (batch_add) stays small. */
static __attribute__((noinline)) size_t batch_flush(gpp_batch *b)
{
    size_t bytes[GPP_MAX_DEVICES];
    batch_lock(b);
    pending_free *list = b->e;
    size_t n = b->n, cap = b->cap;
    uint64_t devs = b->devs;
    memset(bytes, 0, sizeof bytes);
    for (uint64_t m = devs; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        bytes[d] = b->bytes[d];
        b->bytes[d] = 0;
    }
    b->devs = 0;
    int host = b->host_bytes != 0;
    b->host_bytes = 0;
    b->e = NULL;
    b->n = b->cap = 0;
    batch_unlock(b);
    if (!n) {
        batch_lock(b);
        if (!b->e) b->e = list, b->cap = cap, list = NULL;
        batch_unlock(b);
        free(list);
        return 0;
    }
    int fenced;
    unsigned syncs = drain(list, n, bytes, devs, host, &fenced);
    batch_lock(b);
    b->flushes += !fenced; /* the counters are the synchronizing batch's */
    b->syncs += syncs;
    if (!b->e) { /* give the array back for reuse */
        b->e = list;
        b->cap = cap;
        list = NULL;
    }
    batch_unlock(b);
    free(list);
    return n;
}

static void batch_thread_exit(void *arg)
{
    gpp_batch *b = arg;
    if (!gpp_exiting()) batch_flush(b);
    pthread_mutex_lock(&registry_lock);
    if (b->prev)
        b->prev->next = b->next;
    else
        all_batches = b->next;
    if (b->next) b->next->prev = b->prev;
    gone_frees += b->frees;
    gone_flushes += b->flushes;
    gone_syncs += b->syncs;
    if (b->peak > gone_peak) gone_peak = b->peak;
    pthread_mutex_unlock(&registry_lock);
    free(b->e);
    free(b);
    tl_batch = NULL;
}

/* exit(): blocks still waiting in a batch go back to their pools (so a GPOOL_TRACE file records
 * their frees) while the driver is still up. Registered with the first batch, from the
 * program's own code: it then runs before the dynamic linker's destructors (a handler
 * registered from the interposer's constructor would run after them: constructors of
 * LD_PRELOAD objects run before __libc_start_main registers the linker's fini). */
static void flush_at_exit(void)
{
    if (gpp_enabled() && !gpp_in_forked_child()) gpp_batch_flush_all();
}

static void make_key(void)
{
    pthread_key_create(&batch_key, batch_thread_exit);
    atexit(flush_at_exit);
}

static __attribute__((noinline, cold)) gpp_batch *batch_create(void)
{
    pthread_once(&key_once, make_key);
    gpp_batch *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_lock(&registry_lock);
    b->next = all_batches;
    if (all_batches) all_batches->prev = b;
    all_batches = b;
    pthread_mutex_unlock(&registry_lock);
    pthread_setspecific(batch_key, b);
    tl_batch = b;
    return b;
}

/* No room to queue p: an exact synchronize (of every device for a host block) instead. */
static __attribute__((noinline, cold)) gpp_free_result free_now(void *p, int dev, int host)
{
    for (int d = 0; host && d < GPP_MAX_DEVICES; d++)
        if (d != dev && gpp_pool_peek(d)) gpp_device_sync(d);
    return gpp_free_now(p, dev);
}

/* b's array is full (b locked): double it. 0 when there is no room (b unlocked then). */
static __attribute__((noinline, cold)) int batch_grow(gpp_batch *b)
{
    size_t cap = b->cap ? b->cap * 2 : 1024;
    pending_free *ne = realloc(b->e, cap * sizeof *ne);
    if (!ne) {
        batch_unlock(b);
        return 0;
    }
    b->e = ne;
    b->cap = cap;
    return 1;
}

/* No room in the pending set (no host memory for its overflow): this thread's batch drains
 * (taking its blocks out of the set), then p is tried once more. As gpp_pending_add. */
static __attribute__((noinline, cold)) int pending_full(void *p, uint32_t *where)
{
    if (tl_batch) batch_flush(tl_batch);
    return gpp_pending_add(p, where);
}

/* Queue p of dev's pool (host: a host block); flush once the batch holds the limit. A block
 * already waiting in a batch (of any thread) is a second free: GPP_FREE_INVALID, nothing
 * queued. */
static inline gpp_free_result batch_add(void *p, int dev, size_t size, int host)
{
    uint32_t where;
    int added = gpp_pending_add(p, &where);
    if (__builtin_expect(added != 1, 0) && added < 0) added = pending_full(p, &where);
    if (__builtin_expect(added != 1, 0))
        return added == 0 ? GPP_FREE_INVALID : free_now(p, dev, host); /* no room: synchronize */
    gpp_batch *b = tl_batch;
    if (__builtin_expect(!b, 0) && !(b = batch_create())) {
        gpp_pending_remove(where, p);
        return free_now(p, dev, host);
    }
    batch_lock(b);
    /* no room to queue it: an exact synchronize instead */
    if (__builtin_expect(b->n == b->cap, 0) && !batch_grow(b)) {
        gpp_pending_remove(where, p);
        return free_now(p, dev, host);
    }
    b->e[b->n++] = (pending_free){p, dev, where};
    size_t held = host ? (b->host_bytes += size) : (b->bytes[dev] += size);
    if (!host) b->devs |= (uint64_t)1 << dev;
    int fence = fence_flush_ok();
    b->frees += !fence; /* the counters are the synchronizing batch's */
    if (held > b->peak && !fence) b->peak = held;
    size_t n = b->n;
    batch_unlock(b);
    if (__builtin_expect(fence ? n >= GPP_FENCE_BLOCKS || held >= GPP_FENCE_BYTES
                               : held >= gpp_batch_limit(dev),
                         0))
        batch_flush(b);
    return GPP_FREED;
}

gpp_free_result gpp_batch_add(void *p, int dev, size_t size)
{
    return batch_add(p, dev, size, 0);
}

gpp_free_result gpp_batch_add_host(void *handle, int dev, size_t size)
{
    return batch_add(handle, dev, size, 1);
}

size_t gpp_batch_flush_all(void)
{
    size_t n = gpp_batch_unpark();
    pthread_mutex_lock(&registry_lock);
    for (gpp_batch *b = all_batches; b; b = b->next)
        n += batch_flush(b);
    pthread_mutex_unlock(&registry_lock);
    if (gpp_flush_with_events()) n += reap(1); /* memory is short: wait for the events */
    return n;
}

size_t gpp_pending_bytes(int dev)
{
    if (dev < 0 || dev >= GPP_MAX_DEVICES) return 0;
    size_t total = 0;
    pthread_mutex_lock(&registry_lock);
    for (gpp_batch *b = all_batches; b; b = b->next) {
        batch_lock(b);
        total += b->bytes[dev];
        batch_unlock(b);
    }
    pthread_mutex_unlock(&registry_lock);
    pthread_mutex_lock(&wait_lock);
    total += waiting_bytes[dev];
    pthread_mutex_unlock(&wait_lock);
    return total;
}

void gpool_preload_batch_stats_get(gpool_preload_batch_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&registry_lock);
    out->frees = gone_frees;
    out->flushes = gone_flushes;
    out->syncs = gone_syncs;
    out->peak_bytes = gone_peak;
    for (gpp_batch *b = all_batches; b; b = b->next) {
        batch_lock(b);
        out->frees += b->frees;
        out->flushes += b->flushes;
        out->syncs += b->syncs;
        if (b->peak > out->peak_bytes) out->peak_bytes = b->peak;
        batch_unlock(b);
    }
    pthread_mutex_unlock(&registry_lock);
    out->limit_bytes = gpp_batch_limit(0);
    pthread_mutex_lock(&wait_lock);
    out->events = events_recorded;
    out->peak_waiting_bytes = peak_waiting;
    pthread_mutex_unlock(&wait_lock);
}
