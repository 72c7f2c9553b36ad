/* preload_capture.c — cudaMalloc/cudaFree/cuMemAlloc/cuMemFree during stream capture answer what
 * CUDA answers.
 *
 * cuda.h, cuThreadExchangeStreamCaptureMode: while a thread has an ongoing capture that is not
 * relaxed, or (in CU_STREAM_CAPTURE_MODE_GLOBAL) any thread has a global-mode capture, it is
 * prohibited from "potentially unsafe API calls" — cuMemAlloc and cuMemFree among them (cudaMalloc
 * "may not be called" during global capture; cudaErrorStreamCaptureUnsupported) — and such a call
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture
 * (cuStreamEndCapture then answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). gpool's cache would
 * serve those calls without the driver noticing, so while a capture may be running the
 * interposer asks the driver first: one real cuMemAlloc of one byte (and its cuMemFree). The
 * driver applies its own rule to that call — refusing it, and invalidating the capture, exactly
 * when it would refuse the caller's — and the interposer returns the driver's refusal, or frees
 * the probe and serves the call from the pool. A probe that fails otherwise (out of memory, no
 * context) decides nothing: the call goes on as usual.
 *
 * "A capture may be running" is the count of captures begun through the interposer's
 * cuStreamBeginCapture (dlsym, cuGetProcAddress, or the exported symbol) and not yet ended by
 * its cuStreamEndCapture or cuStreamDestroy; the cached path reads it with one relaxed load. A
 * capture begun with the 10.0 ABI cuStreamBeginCapture (no mode argument) is not seen. */
#include <pthread.h>
#include <stdint.h>

#include "preload.h"

atomic_int gpp_captures;

#define GPP_MAX_CAPTURES 256
typedef struct capture_entry {
    CUstream s;      /* CU_STREAM_PER_THREAD for a per-thread stream */
    pthread_t owner; /* the thread whose per-thread stream it is */
    pthread_t by;    /* the thread that began the capture */
    CUstreamCaptureMode mode;
} capture_entry;
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static capture_entry caps[GPP_MAX_CAPTURES];
static size_t n_caps;

/* The registry's key of stream s as passed to a (per_thread: _ptsz) entry point. */
static capture_entry key_of(CUstream s, int per_thread)
{
    capture_entry k = {s, (pthread_t)0, (pthread_t)0, CU_STREAM_CAPTURE_MODE_GLOBAL};
    if ((per_thread && !s) || s == CU_STREAM_PER_THREAD) {
        k.s = CU_STREAM_PER_THREAD;
        k.owner = pthread_self();
    }
    return k;
}

static int same(const capture_entry *a, const capture_entry *b)
{
    return a->s == b->s && (a->s != CU_STREAM_PER_THREAD || pthread_equal(a->owner, b->owner));
}

static void remember(CUstream s, int per_thread, CUstreamCaptureMode mode)
{
    capture_entry k = key_of(s, per_thread);
    k.by = pthread_self();
    k.mode = mode;
    pthread_mutex_lock(&cap_lock);
    if (n_caps < GPP_MAX_CAPTURES) caps[n_caps++] = k;
    /* past the registry's size the count stays raised for good: more probes, never fewer */
    atomic_fetch_add(&gpp_captures, 1);
    pthread_mutex_unlock(&cap_lock);
}

static void forget(CUstream s, int per_thread)
{
    capture_entry k = key_of(s, per_thread);
    pthread_mutex_lock(&cap_lock);
    for (size_t i = 0; i < n_caps; i++) {
        if (!same(&caps[i], &k)) continue;
        caps[i] = caps[--n_caps];
        atomic_fetch_sub(&gpp_captures, 1);
        break;
    }
    pthread_mutex_unlock(&cap_lock);
}

int gpp_capture_forbids_sync(void)
{
    if (!atomic_load_explicit(&gpp_captures, memory_order_relaxed)) return 0;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&cap_lock);
    /* past the registry's size: not known, so forbidden */
    int no = (size_t)atomic_load(&gpp_captures) > n_caps;
    for (size_t i = 0; i < n_caps && !no; i++)
        no = caps[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
             (caps[i].mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
              pthread_equal(caps[i].by, self));
    pthread_mutex_unlock(&cap_lock);
    return no;
}

void gpp_capture_forget(CUstream s)
{
    if (atomic_load_explicit(&gpp_captures, memory_order_relaxed)) forget(s, 0);
}

/* Stream-ordered allocations on a capturing stream become what CUDA makes of them: graph
 * memory nodes (cuda.h, cuMemAllocAsync / cuMemFreeAsync during stream capture: an allocation
 * or free node; cuGraphAddMemAllocNode: the graph owns the memory for its whole life). gpool's
 * cache cannot serve them -- a cached block would be handed to the graph and, freed eagerly, to
 * the next eager allocation while the graph still uses it -- so they go to the driver, whose
 * graph pool keeps that memory from eager allocations while the graph exists. */
int gpp_capture_stream_ordered(CUstream stream, int per_thread)
{
    if (__builtin_expect(atomic_load_explicit(&gpp_captures, memory_order_relaxed) == 0, 1))
        return 0;
    const gpp_real_driver *d = gpp_driver();
    PFN_cuStreamIsCapturing_v10000 is =
        d ? (per_thread ? d->cuStreamIsCapturing_ptsz : d->cuStreamIsCapturing) : NULL;
    /* the legacy stream cannot capture (cuStreamBeginCapture) */
    if (!is || (!stream && !per_thread) || stream == CU_STREAM_LEGACY) return 0;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    return is(stream, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult gpp_capture_probe(void)
{
    const gpp_real_driver *d = gpp_driver();
    CUdeviceptr p = 0;
    if (!d) return CUDA_SUCCESS;
    CUresult r = d->cuMemAlloc(&p, 1);
    if (r == CUDA_SUCCESS) {
        d->cuMemFree(p); /* allowed too: the same rule decides it */
        return CUDA_SUCCESS;
    }
    return r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
                   r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
                   r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
               ? r
               : CUDA_SUCCESS;
}

static CUresult begin(CUstream s, CUstreamCaptureMode mode, int per_thread)
{
    const gpp_real_driver *d = gpp_driver();
    PFN_cuStreamBeginCapture_v10010 real =
        d ? (per_thread ? d->cuStreamBeginCapture_ptsz : d->cuStreamBeginCapture) : NULL;
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    /* Blocks freed before the capture go back now, while a synchronize is allowed: during it a
     * flush could only park them (preload_batch.c), and an allocation on a stream that is not
     * capturing would find them missing. */
    if (!atomic_load_explicit(&gpp_captures, memory_order_relaxed)) gpp_batch_flush_all();
    CUresult r = real(s, mode);
    if (r == CUDA_SUCCESS) remember(s, per_thread, mode);
    return r;
}

static CUresult end(CUstream s, CUgraph *g, int per_thread)
{
    const gpp_real_driver *d = gpp_driver();
    PFN_cuStreamEndCapture_v10000 real =
        d ? (per_thread ? d->cuStreamEndCapture_ptsz : d->cuStreamEndCapture) : NULL;
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(s, g);
    /* ended, with a graph or invalidated (cuda.h, cuStreamEndCapture) */
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
        forget(s, per_thread);
        gpp_batch_unpark(); /* the last capture ended: blocks parked during it go back */
    }
    return r;
}

CUresult gpp_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return begin(s, mode, 0);
}

CUresult gpp_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return begin(s, mode, 1);
}

CUresult gpp_cuStreamEndCapture(CUstream s, CUgraph *g)
{
    return end(s, g, 0);
}

CUresult gpp_cuStreamEndCapture_ptsz(CUstream s, CUgraph *g)
{
    return end(s, g, 1);
}
