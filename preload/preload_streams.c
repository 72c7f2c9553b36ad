/* preload_streams.c — whether the process has a non-blocking stream, which decides what a
 * cudaFree/cuMemFree in the default (batch) mode must do.
 *
 * The real cudaFree synchronizes the device, so a freed block can be handed out again whatever
 * stream used it. Without a synchronize, a block given back to the pool at once on the legacy
 * default stream (gpool_free) is safe for work on the legacy stream and on every *blocking*
 * stream of its context: the legacy stream first waits for the work issued earlier to every
 * blocking stream, and those streams then wait for it (CUDA driver API docs, "Stream
 * synchronization behavior", Legacy default stream: it synchronizes with every other stream of
 * the same CUcontext except non-blocking ones; the per-thread default stream is not
 * non-blocking and synchronizes with it too). A stream created with CU_STREAM_NON_BLOCKING /
 * cudaStreamNonBlocking is the exception (cuStreamCreate's doc comment in cuda.h: its work may
 * run concurrently with stream 0). Work of another context (a second context on the device,
 * or peer access from another device) is not ordered either; the interposer does not track
 * it (nor did its per-batch synchronize, which covers the block's own device).
 *
 * So the batch is needed only once such a stream exists. The interposer hands out its own
 * cuStreamCreate and cuStreamCreateWithPriority (dlsym / cuGetProcAddress substitution, as for
 * the memory entry points; cudart's cudaStreamCreateWithFlags reaches them through its table)
 * and exports cudaStreamCreateWithFlags/WithPriority. The first non-blocking stream raises
 * nonblocking_streams, then synchronizes every device gpool serves once: blocks freed
 * before may still be used by queued legacy-stream work, and from now on a block may be
 * handed out to work on a stream that does not wait for it. From then on cudaFree queues into
 * the batch (preload_batch.c). The switch is one way: a destroyed stream may still have work.
 *
 * The cached path reads nonblocking_streams with one relaxed load (no lock, no write): a
 * cudaFree of a block that other work used on a non-blocking stream happens after that
 * stream's creation (the work was issued to it), so it sees the count raised. */
#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "preload.h"

static atomic_int nonblocking_streams;

int gpp_nonblocking_streams(void)
{
    return atomic_load_explicit(&nonblocking_streams, memory_order_relaxed);
}

/* A non-blocking stream now exists (its creation succeeded). */
static void saw_nonblocking_stream(void)
{
    if (atomic_fetch_add(&nonblocking_streams, 1) != 0) return;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++)
        if (gpp_pool_peek(dev)) gpp_device_sync(dev);
}

CUresult gpp_cuStreamCreate(CUstream *ph, unsigned int flags)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamCreate) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuStreamCreate(ph, flags);
    if (r == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING)) saw_nonblocking_stream();
    return r;
}

CUresult gpp_cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamCreateWithPriority) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuStreamCreateWithPriority(ph, flags, priority);
    if (r == CUDA_SUCCESS && (flags & CU_STREAM_NON_BLOCKING)) saw_nonblocking_stream();
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
    if (e == cudaSuccess && (flags & cudaStreamNonBlocking)) saw_nonblocking_stream();
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
    if (e == cudaSuccess && (flags & cudaStreamNonBlocking)) saw_nonblocking_stream();
    return e;
}
