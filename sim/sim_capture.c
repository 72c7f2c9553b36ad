/* sim_capture.c — stream capture (cuStreamBeginCapture and friends).
 *
 * Work submitted to a capturing stream is recorded into a graph, not executed (cuda.h,
 * cuStreamBeginCapture: "work launched into the stream is not enqueued for execution"): no
 * position, no memory access, no completion. The graph is opaque: cuStreamEndCapture hands
 * one out, cuGraphDestroy frees it. Rules, from the doc comments in cuda.h:
 *  - cuStreamBeginCapture: the legacy stream cannot be captured
 *    (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); a stream already capturing: ILLEGAL_STATE.
 *  - cuThreadExchangeStreamCaptureMode: in CU_STREAM_CAPTURE_MODE_GLOBAL a thread is
 *    prohibited from potentially unsafe API calls while it has an ongoing non-relaxed capture
 *    or any thread has a global-mode capture; THREAD_LOCAL only looks at the thread's own
 *    captures; RELAXED never prohibits. A prohibited call returns
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures concerned
 *    ("the capture sequence is invalidated"). The simulator counts as potentially unsafe:
 *    cuCtxSynchronize, cuMemAlloc, cuMemFree and the synchronous memcpy/memset forms.
 *  - Querying or synchronizing a capturing stream, or an event recorded in a capture, is not
 *    allowed (cuStreamQuery/cuStreamSynchronize/cuEventQuery/cuEventSynchronize during capture:
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture invalidated).
 *  - Work on the legacy stream while a blocking stream of its context captures would make the
 *    legacy stream depend on the capture: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (cuda.h, the
 *    error's description), capture invalidated. Asking cuStreamIsCapturing about the legacy
 *    stream then answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates nothing (its doc
 *    comment).
 *  - Graph memory nodes: cuMemAllocAsync on a capturing stream adds an allocation node
 *    (cuda.h, cuMemAllocAsync: during stream capture "this function results in the creation of
 *    an allocation node"; cuGraphAddMemAllocNode: the address is fixed for the graph's life and
 *    its memory is the graph's, not usable outside it before the graph runs), cuMemFreeAsync a
 *    free node. The simulator hands out the address at once (its own allocation, charged to the
 *    device) and never launches graphs, so the memory goes back when the graph is destroyed
 *    (cuGraphDestroy; cuDeviceGraphMemTrim then returns it to the OS on a real driver) or when
 *    the capture ends invalidated (no graph owns it).
 *  - cuStreamEndCapture of an invalidated capture returns
 *    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph; from another thread than the one that
 *    began a non-relaxed capture: CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD. */
#include <stdlib.h>

#include "sim_internal.h"

struct CUgraph_st {
    struct CUgraph_st *next;
    uint64_t capture_id;
};

static struct CUstream_st **sim_cap; /* streams taking part in a capture */
static size_t sim_ncap, sim_cap_cap;
static uint64_t sim_capture_ids;
static struct CUgraph_st *sim_graphs;
static _Thread_local CUstreamCaptureMode sim_thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static void sim_invalidate(uint64_t id);

/* cuStreamDestroy of a capturing stream: it leaves the registry (it may be freed later). */
void sim_capture_forget(struct CUstream_st *s)
{
    if (s->capture) sim_invalidate(s->capture_id);
    s->capture = 0;
    size_t k = 0;
    for (size_t i = 0; i < sim_ncap; i++)
        if (sim_cap[i] != s) sim_cap[k++] = sim_cap[i];
    sim_ncap = k;
}

static int sim_cap_add(struct CUstream_st *s)
{
    if (sim_ncap == sim_cap_cap) {
        size_t cap = sim_cap_cap ? 2 * sim_cap_cap : 8;
        struct CUstream_st **n = realloc(sim_cap, cap * sizeof *n);
        if (!n) return -1;
        sim_cap = n;
        sim_cap_cap = cap;
    }
    sim_cap[sim_ncap++] = s;
    return 0;
}

static void sim_invalidate(uint64_t id)
{
    for (size_t i = 0; i < sim_ncap; i++)
        if (sim_cap[i]->capture_id == id && sim_cap[i]->capture)
            sim_cap[i]->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* drop registry entries whose stream no longer captures (ended or destroyed) */
static void sim_cap_compact(void)
{
    size_t k = 0;
    for (size_t i = 0; i < sim_ncap; i++) {
        struct CUstream_st *s = sim_cap[i];
        if (s->capture && !s->destroyed) sim_cap[k++] = s;
    }
    sim_ncap = k;
}

CUresult sim_capture_unsafe_call(void)
{
    sim_cap_compact();
    if (sim_ncap == 0 || sim_thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    pthread_t self = pthread_self();
    int prohibited = 0;
    for (size_t i = 0; i < sim_ncap; i++) {
        struct CUstream_st *s = sim_cap[i];
        int mine = pthread_equal(s->capture_thread, self) &&
                   s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
        int global = s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (mine || (sim_thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && global)) {
            sim_invalidate(s->capture_id);
            prohibited = 1;
        }
    }
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult sim_capture_check_legacy(struct CUstream_st *s)
{
    if (sim_ncap == 0 || s->kind != SIM_STREAM_LEGACY_KIND) return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < sim_ncap; i++) {
        struct CUstream_st *t = sim_cap[i];
        if (t->capture && !t->destroyed && t->device == s->device &&
            !(t->flags & CU_STREAM_NON_BLOCKING)) {
            sim_invalidate(t->capture_id);
            rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    return rc;
}

CUresult sim_capture_check_sync(struct CUstream_st *s)
{
    if (s->capture) {
        sim_invalidate(s->capture_id);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return sim_capture_check_legacy(s);
}

/* cuda.h, cuStreamWaitEvent on an event recorded in a capture: the stream joins the capture. */
void sim_capture_join(struct CUstream_st *s, const struct CUstream_st *from)
{
    if (s->capture || !from->capture || sim_cap_add(s) != 0) return;
    s->capture = from->capture;
    s->capture_mode = from->capture_mode;
    s->capture_id = from->capture_id;
    s->capture_thread = from->capture_thread;
}

static CUresult sim_begin(CUstream hStream, CUstreamCaptureMode mode, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuStreamBeginCapture);
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup_pt(hStream, per_thread, &s);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (s->kind == SIM_STREAM_LEGACY_KIND) return sim_leave(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (s->capture) return sim_leave(CUDA_ERROR_ILLEGAL_STATE);
    if (sim_cap_add(s) != 0) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->capture_mode = mode;
    s->capture_id = ++sim_capture_ids;
    s->capture_thread = pthread_self();
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
    return sim_begin(hStream, mode, 0);
}
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return sim_begin(hStream, mode, 1);
}

static CUresult sim_end(CUstream hStream, CUgraph *phGraph, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuStreamEndCapture);
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup_pt(hStream, per_thread, &s);
    if (rc == CUDA_SUCCESS && !phGraph) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    *phGraph = NULL;
    if (!s->capture) return sim_leave(CUDA_ERROR_ILLEGAL_STATE);
    if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->capture_thread, pthread_self()))
        return sim_leave(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    int invalid = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    uint64_t id = s->capture_id;
    struct CUgraph_st *g = NULL;
    if (!invalid) {
        g = calloc(1, sizeof *g);
        if (!g) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
        g->capture_id = id;
        g->next = sim_graphs;
        sim_graphs = g;
    }
    for (size_t i = 0; i < sim_ncap; i++)
        if (sim_cap[i]->capture_id == id) sim_cap[i]->capture = 0;
    sim_cap_compact();
    if (invalid) {
        sim_legacy_graph_release(id); /* its allocation nodes went with it */
        return sim_leave(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    *phGraph = g;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return sim_end(hStream, phGraph, 0);
}
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return sim_end(hStream, phGraph, 1);
}

/* 1 when a blocking stream of s's device is capturing (s the legacy stream). */
static int sim_legacy_implicit(const struct CUstream_st *s)
{
    if (s->kind != SIM_STREAM_LEGACY_KIND) return 0;
    for (size_t i = 0; i < sim_ncap; i++) {
        const struct CUstream_st *t = sim_cap[i];
        if (t->capture && !t->destroyed && t->device == s->device &&
            !(t->flags & CU_STREAM_NON_BLOCKING))
            return 1;
    }
    return 0;
}

/* cuda.h, cuStreamIsCapturing: "if this is called on CU_STREAM_LEGACY (the "null stream")
 * while a blocking stream in the same context is capturing, it will return
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ... The blocking stream capture is not invalidated." */
static CUresult sim_is_capturing(CUstream hStream, CUstreamCaptureStatus *status, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuStreamIsCapturing);
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup_pt(hStream, per_thread, &s);
    if (rc == CUDA_SUCCESS && !status) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && sim_legacy_implicit(s)) rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (rc == CUDA_SUCCESS) *status = (CUstreamCaptureStatus)s->capture;
    return sim_leave(rc);
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return sim_is_capturing(hStream, captureStatus, 0);
}
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *status)
{
    return sim_is_capturing(hStream, status, 1);
}

static CUresult sim_capture_info(CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id,
                                 CUgraph *graph, const CUgraphNode **deps,
                                 const CUgraphEdgeData **edges, size_t *ndeps, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuStreamGetCaptureInfo);
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup_pt(hStream, per_thread, &s);
    if (rc == CUDA_SUCCESS && !status) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    *status = (CUstreamCaptureStatus)s->capture;
    if (id && s->capture) *id = s->capture_id;
    if (graph) *graph = NULL; /* the graph being built is not exposed */
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h 13 maps cuStreamGetCaptureInfo to cuStreamGetCaptureInfo_v3. */
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out, CUgraph *graph_out,
                                const CUgraphNode **dependencies_out,
                                const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return sim_capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                            edgeData_out, numDependencies_out, 0);
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *st,
                                                   cuuint64_t *id, CUgraph *graph,
                                                   const CUgraphNode **deps,
                                                   const CUgraphEdgeData **edges, size_t *ndeps)
{
    return sim_capture_info(hStream, st, id, graph, deps, edges, ndeps, 1);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUresult rc = sim_enter(SIM_cuThreadExchangeStreamCaptureMode);
    if (rc == CUDA_SUCCESS && (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                         *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                                         *mode != CU_STREAM_CAPTURE_MODE_RELAXED)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        CUstreamCaptureMode old = sim_thread_mode;
        sim_thread_mode = *mode;
        *mode = old;
    }
    return sim_leave(rc);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult rc = sim_enter(SIM_cuGraphDestroy);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    for (struct CUgraph_st **pp = &sim_graphs; *pp; pp = &(*pp)->next) {
        if (*pp == hGraph) {
            *pp = hGraph->next;
            sim_legacy_graph_release(hGraph->capture_id); /* never launched: nothing escaped */
            free(hGraph);
            return sim_leave(CUDA_SUCCESS);
        }
    }
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
}

void sim_capture_teardown(void)
{
    free(sim_cap);
    sim_cap = NULL;
    sim_ncap = sim_cap_cap = 0;
    while (sim_graphs) {
        struct CUgraph_st *g = sim_graphs;
        sim_graphs = g->next;
        free(g);
    }
}
