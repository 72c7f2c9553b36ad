/* preload_fence.c — the legacy-stream fence: how a block freed on the legacy stream (a
 * cudaFree/cuMemFree given back at once, a cudaFreeHost, a cudaFreeAsync on stream 0) is
 * ordered after the work the program issued on it before the free, when it is handed out
 * again without a synchronize.
 *
 * The legacy stream orders the blocking streams of its context only through work actually
 * enqueued on it (CUDA Programming Guide, "Implicit Synchronization", and the driver API's
 * "Stream synchronization behavior", legacy default stream: an operation on the legacy
 * stream waits for all prior work of the context's blocking streams, and later work on a
 * blocking stream waits for it; per-thread default streams are blocking streams there). A
 * kernel on blocking stream A then one on blocking stream B are NOT ordered. gpool's free and
 * allocation enqueue nothing, so a block freed after a kernel on A and reused by a kernel on
 * B would be raced. The fence is one event record on the legacy stream of the block's device
 * (cuEventRecord(ev, 0): an operation on the legacy stream), made by the free before the
 * block goes back to its pool: the record waits for A's work, and B's work issued after the
 * block was handed out again waits for the record. It covers the legacy, blocking and
 * per-thread default streams of the device's primary context, not non-blocking streams (the
 * batch covers those: preload_batch.c) nor other contexts.
 *
 * Cost: one cuEventRecord per free (the event is made once per device). A record that fails
 * falls back to a device synchronize (exact). Host blocks are reachable from every device:
 * their fence records on the legacy stream of every device gpool serves. While a stream
 * capture runs the record would join or invalidate it (cuda.h, CU_STREAM_CAPTURE_MODE_*), so
 * the frees then go to the batch instead (preload.c). */
#include <pthread.h>

#include "preload.h"

static CUevent fence_event[GPP_MAX_DEVICES]; /* one per device, in its primary context */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;

/* dev's fence event (made once, in its primary context, which is pushed for the call). */
static CUevent fence_event_of(const gpp_real_driver *d, int dev, CUcontext ctx)
{
    CUevent e = __atomic_load_n(&fence_event[dev], __ATOMIC_ACQUIRE);
    if (e) return e;
    pthread_mutex_lock(&event_lock);
    e = fence_event[dev];
    CUcontext popped;
    if (!e && d->cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
        if (d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) e = NULL;
        d->cuCtxPopCurrent(&popped);
        __atomic_store_n(&fence_event[dev], e, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&event_lock);
    return e;
}

/* One operation on dev's legacy stream (see the top of this file); a synchronize if the
 * record cannot be made. */
static void fence_device(int dev)
{
    const gpp_real_driver *d = gpp_driver();
    CUcontext ctx = gpp_device_context(dev);
    CUevent e =
        d && ctx && d->cuEventCreate && d->cuEventRecord ? fence_event_of(d, dev, ctx) : NULL;
    int done = 0;
    if (e) {
        /* the calling thread's context is usually dev's primary one: no push. Otherwise the
         * record fails (cuda.h, cuEventRecord: event and stream of one context) and is made
         * again with that context pushed. */
        CUcontext popped;
        if (gpp_current_device() == dev) done = d->cuEventRecord(e, NULL) == CUDA_SUCCESS;
        if (!done && d->cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
            done = d->cuEventRecord(e, NULL) == CUDA_SUCCESS;
            d->cuCtxPopCurrent(&popped);
        }
    }
    if (!done) gpp_device_sync(dev);
}

void gpp_legacy_fence(int dev)
{
    if (dev >= 0 && dev < GPP_MAX_DEVICES) fence_device(dev);
}

void gpp_legacy_fence_all(void)
{
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++)
        if (gpp_pool_peek(dev)) fence_device(dev);
}

int gpp_fence_wait(CUstream s)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d) return -1;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        /* no event: no fence was made on dev, nothing to wait for */
        CUevent e = __atomic_load_n(&fence_event[dev], __ATOMIC_ACQUIRE);
        if (e && (!d->cuStreamWaitEvent || d->cuStreamWaitEvent(s, e, 0) != CUDA_SUCCESS))
            return -1;
    }
    return 0;
}

/* cuDevicePrimaryCtxReset of dev is about to destroy its events: dev's fence event goes (made
 * again on the next fence). */
void gpp_legacy_fence_forget(int dev)
{
    const gpp_real_driver *d = gpp_driver();
    if (dev < 0 || dev >= GPP_MAX_DEVICES) return;
    pthread_mutex_lock(&event_lock);
    CUevent e = fence_event[dev];
    __atomic_store_n(&fence_event[dev], NULL, __ATOMIC_RELEASE);
    if (e && d && d->cuEventDestroy) d->cuEventDestroy(e);
    pthread_mutex_unlock(&event_lock);
}
