/* preload_streams.c — whether the process has a non-blocking stream, which decides what a
 * cudaFree/cuMemFree/cudaFreeHost in the default (batch) and stream modes must do, and the
 * device of a stream (stream-ordered allocations are served on it).
 *
 * The real cudaFree may synchronize, so a freed block can be handed out again whatever stream
 * used it. Without a synchronize, a block given back to the pool after the legacy-stream
 * fence (preload_fence.c: one event record on the legacy stream) is safe for work on the
 * legacy stream, on every *blocking* stream and on the per-thread default streams of its
 * context: the record waits for the work issued earlier to every blocking stream, and those
 * streams' later work waits for it (CUDA driver API docs, "Stream synchronization behavior",
 * Legacy default stream: it synchronizes with every other stream of the same CUcontext
 * except non-blocking ones, through the work enqueued on it; the per-thread default stream is
 * not non-blocking and synchronizes with it too). A stream created with
 * CU_STREAM_NON_BLOCKING / cudaStreamNonBlocking is the exception (cuStreamCreate's doc
 * comment in cuda.h: its work may run concurrently with stream 0). Work of another context (a
 * second context on the device, or peer access from another device) is not ordered either;
 * the interposer does not track it (nor did its per-batch synchronize, which covers the
 * block's own device).
 *
 * So the batch is needed only once such a stream exists. The interposer hands out its own
 * cuStreamCreate and cuStreamCreateWithPriority (dlsym / cuGetProcAddress substitution, as for
 * the memory entry points; cudart's cudaStreamCreateWithFlags reaches them through its table)
 * and exports cudaStreamCreateWithFlags/WithPriority. The first non-blocking stream raises
 * gpp_nonblocking_count, then synchronizes every device gpool serves once: blocks freed
 * before may still be used by queued work, and from now on a block may be handed out to work
 * on a stream that does not wait for the fence. From then on cudaFree queues into the batch
 * (preload_batch.c); cudafree=stream, which assumes no such stream, says so once. The switch
 * is one way: a destroyed stream may still have work.
 *
 * The cached path reads gpp_nonblocking_count with one relaxed load (no lock, no write): a
 * cudaFree of a block that other work used on a non-blocking stream happens after that
 * stream's creation (the work was issued to it), so it sees the count raised. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "preload.h"
#include "preload_options.h"

atomic_int gpp_nonblocking_count;

/* ---- cudafree_flush=event: the live non-blocking streams, for the event flush ----
 * A flush then records one event on the legacy stream and one on each live non-blocking
 * stream of the device instead of synchronizing, and the batch's blocks go back to the pool
 * once all those events completed (preload_batch.c). A stream destroyed meanwhile gets an
 * event recorded first (cuStreamDestroy returns before its work is done), which the next
 * flush of its device takes over. Anything that cannot be tracked (too many streams, an event
 * that cannot be made) sends the flush back to the synchronize. */
#define GPP_MAX_NB_STREAMS 256
typedef struct nb_stream {
    CUstream s;
    CUcontext ctx;
    int dev;
} nb_stream;
static pthread_mutex_t nb_lock = PTHREAD_MUTEX_INITIALIZER;
static nb_stream nb[GPP_MAX_NB_STREAMS];
static size_t n_nb;
static struct {
    CUevent e;
    int dev;
} retired[GPP_MAX_NB_STREAMS];
static size_t n_retired;
static atomic_int untracked; /* a stream or an event was lost: flushes synchronize from now on */

/* An event recorded on stream s of context ctx (made current for the call); 0 or -1. */
static int record_in(const gpp_real_driver *d, CUcontext ctx, CUstream s, CUevent *e)
{
    CUcontext cur = NULL, popped;
    int pushed = 0;
    if (!ctx || !d->cuEventCreate || !d->cuEventRecord || !d->cuEventDestroy) return -1;
    if (d->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) {
        if (d->cuCtxPushCurrent(ctx) != CUDA_SUCCESS) return -1;
        pushed = 1;
    }
    int rc = -1;
    if (d->cuEventCreate(e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        if (d->cuEventRecord(*e, s) == CUDA_SUCCESS)
            rc = 0;
        else
            d->cuEventDestroy(*e);
    }
    if (pushed) d->cuCtxPopCurrent(&popped);
    return rc;
}

/* A stream or an event cannot be tracked: flushes synchronize from now on (said once when
 * cudafree_flush=event asked for events). */
static void lose_track(const char *why)
{
    untracked = 1;
    if (gpp_flush_with_events())
        gpp_notice_once(GPP_NOTICE_FLUSH_EVENT,
                        "cudafree_flush=event: %s; cudaFree batches synchronize the device instead",
                        why);
}

static void track(CUstream s)
{
    const gpp_real_driver *d = gpp_driver();
    CUcontext ctx = NULL;
    if (!d || d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        lose_track("a non-blocking stream was created with no current context");
        return;
    }
    pthread_mutex_lock(&nb_lock);
    size_t i = 0;
    while (i < n_nb && nb[i].s != s) /* cudart's stream came through cuStreamCreate already */
        i++;
    int lost = i == n_nb && n_nb == GPP_MAX_NB_STREAMS;
    if (i == n_nb && !lost) nb[n_nb++] = (nb_stream){s, ctx, gpp_current_device()};
    pthread_mutex_unlock(&nb_lock);
    if (lost) lose_track("more than 256 live non-blocking streams");
}

/* Retired events that completed are no longer needed by any flush: destroy them (nb_lock
 * held), so that destroyed streams do not pile up events. */
static void reap_retired(const gpp_real_driver *d)
{
    for (size_t i = 0; i < n_retired;) {
        if (d->cuEventQuery(retired[i].e) == CUDA_SUCCESS) {
            d->cuEventDestroy(retired[i].e);
            retired[i] = retired[--n_retired];
        } else {
            i++;
        }
    }
}

/* cuStreamDestroy: every pool of every device first moves what is pending on the stream onto
 * an event recorded on it now (gpool_stream_release; legal while the stream still has work:
 * cuda.h, cuStreamDestroy returns at once and the stream's resources go once its work has
 * completed), so that no later call names the destroyed stream and a new stream with the same
 * handle value starts clean. With cudafree_flush=event the stream's own flush event is
 * recorded too (the next flush of its device takes it over); otherwise nothing keeps one. */
CUresult gpp_cuStreamDestroy_v2(CUstream s)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamDestroy) return CUDA_ERROR_NOT_INITIALIZED;
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD)
        for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
            gpool_t *pool = gpp_pool_peek(dev);
            if (pool) gpool_stream_release(pool, s); /* a failure leaves its frees pending */
        }
    int events = gpp_flush_with_events();
    pthread_mutex_lock(&nb_lock);
    for (size_t i = 0; s && i < n_nb; i++) {
        if (nb[i].s != s) continue;
        CUevent e;
        if (events && n_retired == GPP_MAX_NB_STREAMS) reap_retired(d);
        if (!events)
            ; /* flushes synchronize: no flush needs the stream's work */
        else if (n_retired < GPP_MAX_NB_STREAMS && record_in(d, nb[i].ctx, s, &e) == 0)
            retired[n_retired].e = e, retired[n_retired++].dev = nb[i].dev;
        else
            untracked = 1;
        nb[i] = nb[--n_nb];
        break;
    }
    pthread_mutex_unlock(&nb_lock);
    CUresult r = d->cuStreamDestroy(s);
    if (r == CUDA_SUCCESS) gpp_capture_forget(s); /* its capture ended with it */
    return r;
}

size_t gpp_record_flush_events(int dev, CUevent *out, size_t max)
{
    const gpp_real_driver *d = gpp_driver();
    size_t n = 0;
    int ok = d != NULL;
    pthread_mutex_lock(&nb_lock);
    ok = ok && !untracked && max > 0 && record_in(d, gpp_device_context(dev), NULL, &out[n]) == 0 &&
         ++n;
    for (size_t i = 0; ok && i < n_nb; i++)
        if (nb[i].dev == dev) ok = n < max && record_in(d, nb[i].ctx, nb[i].s, &out[n]) == 0 && ++n;
    for (size_t i = 0; ok && i < n_retired;) {
        if (retired[i].dev != dev) {
            i++;
        } else if (n == max) {
            ok = 0;
        } else {
            out[n++] = retired[i].e;
            retired[i] = retired[--n_retired];
        }
    }
    pthread_mutex_unlock(&nb_lock);
    if (ok) return n;
    for (size_t i = 0; i < n; i++) /* the caller synchronizes instead */
        d->cuEventDestroy(out[i]);
    return (size_t)-1;
}

/* cuDevicePrimaryCtxReset of dev is about to destroy its streams and events (its work is
 * done): its non-blocking streams are no longer tracked, its retired events go now. */
void gpp_streams_reset(int dev)
{
    const gpp_real_driver *d = gpp_driver();
    pthread_mutex_lock(&nb_lock);
    for (size_t i = 0; i < n_nb;)
        if (nb[i].dev == dev)
            nb[i] = nb[--n_nb];
        else
            i++;
    for (size_t i = 0; i < n_retired;) {
        if (retired[i].dev == dev) {
            if (d) d->cuEventDestroy(retired[i].e);
            retired[i] = retired[--n_retired];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&nb_lock);
}

/* 1 while the synchronize the first non-blocking stream owes is not made yet (a capture ran). */
static atomic_int sync_owed;

/* A non-blocking stream s now exists (its creation succeeded). Until now blocks went back
 * after a legacy-stream fence alone (preload_fence.c), which a non-blocking stream does not
 * wait for: the first one synchronizes every device gpool serves, so that the work of every
 * block freed so far is done. While a capture runs that synchronize would invalidate it
 * (cuda.h, cuThreadExchangeStreamCaptureMode: a potentially unsafe call; creating a stream is
 * not one): s waits for the devices' last fences instead, and so does every non-blocking
 * stream made until one is made with no capture running, which synchronizes. cudafree=stream
 * assumes no non-blocking stream exists: it says so once and from now on frees into the
 * batch, as the default mode does. */
static void saw_nonblocking_stream(CUstream s)
{
    int first = atomic_fetch_add(&gpp_nonblocking_count, 1) == 0;
    if (!first && !atomic_load(&sync_owed)) return;
    if (first && gpp_free_mode() == GPP_CUDAFREE_STREAM)
        gpp_notice_once(GPP_NOTICE_STREAM_MODE,
                        "cudafree=stream assumes no non-blocking stream, and the program made "
                        "one: cudaFree/cudaFreeHost batch from now on (cudafree=batch)");
    if (atomic_load_explicit(&gpp_captures, memory_order_relaxed) && gpp_fence_wait(s) == 0) {
        atomic_store(&sync_owed, 1);
        return;
    }
    atomic_store(&sync_owed, 0);
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++)
        if (gpp_pool_peek(dev)) gpp_device_sync(dev);
}

CUresult gpp_cuStreamCreate(CUstream *ph, unsigned int flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamCreate) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuStreamCreate(ph, flags);
    if (r == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING)) {
        track(*ph);
        saw_nonblocking_stream(*ph);
    }
    return r;
}

CUresult gpp_cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamCreateWithPriority) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuStreamCreateWithPriority(ph, flags, priority);
    if (r == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING)) {
        track(*ph);
        saw_nonblocking_stream(*ph);
    }
    return r;
}

typedef cudaError_t (*stream_flags_fn)(cudaStream_t *, unsigned int);
typedef cudaError_t (*stream_prio_fn)(cudaStream_t *, unsigned int, int);

static void *real_runtime_once(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = gpp_real_runtime(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

__attribute__((visibility("default"))) cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
                                                                             unsigned int flags)
{
    static void *slot;
    stream_flags_fn real;
    *(void **)&real = real_runtime_once(&slot, "cudaStreamCreateWithFlags");
    if (!real) return cudaErrorInitializationError;
    cudaError_t e = real(pStream, flags);
    if (e == cudaSuccess && (flags & cudaStreamNonBlocking)) {
        track(*pStream); /* unless cudart's cuStreamCreate call was seen already */
        saw_nonblocking_stream((CUstream)*pStream);
    }
    return e;
}

__attribute__((visibility("default"))) cudaError_t
cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    static void *slot;
    stream_prio_fn real;
    *(void **)&real = real_runtime_once(&slot, "cudaStreamCreateWithPriority");
    if (!real) return cudaErrorInitializationError;
    cudaError_t e = real(pStream, flags, priority);
    if (e == cudaSuccess && (flags & cudaStreamNonBlocking)) {
        track(*pStream);
        saw_nonblocking_stream((CUstream)*pStream);
    }
    return e;
}

/* cuda.h, cuMemAllocAsync: the allocation is made on the device of hStream's context
 * (cuStreamGetCtx), not the current one. The primary contexts the pools retained are matched
 * without a call; any other context is asked (pushed, cuCtxGetDevice, popped). */
int gpp_stream_device(CUstream s)
{
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return -1;
    const gpp_real_driver *d = gpp_driver();
    CUcontext ctx = NULL, popped;
    if (!d || !d->cuStreamGetCtx || d->cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS || !ctx) return -1;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++)
        if (gpp_device_context(dev) == ctx) return dev;
    CUdevice cudev = -1;
    if (d->cuCtxPushCurrent(ctx) != CUDA_SUCCESS) return -1;
    if (d->cuCtxGetDevice(&cudev) != CUDA_SUCCESS) cudev = -1;
    d->cuCtxPopCurrent(&popped);
    return cudev;
}
