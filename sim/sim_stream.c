/* sim_stream.c — streams, events and held completion.
 *
 * Every unit of work submitted to a stream gets the next sequence number of that stream.
 * Position p of stream S is complete when S is not held and every cuStreamWaitEvent placed on
 * S before p has its awaited position complete; completion is computed when asked for.
 * gpoolsim_stream_hold stops a stream from completing new work; gpoolsim_stream_release, or a
 * synchronize call that has to wait for it (counted in forced_syncs), lets it go on.
 * An event records a (stream, position) pair; a never recorded event is complete.
 * NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD all name one default stream. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

struct sim_wait {
    uint64_t position;         /* where on the waiting stream the wait sits */
    struct CUstream_st *fence; /* awaited stream ... */
    uint64_t fence_position;   /* ... and position on it */
};

struct CUstream_st {
    struct CUstream_st *next;
    unsigned flags;
    int held;
    int destroyed;
    unsigned refs; /* 1 until destroyed, plus events and waits pointing at it */
    uint64_t submitted;
    uint64_t completed;
    struct sim_wait *waits; /* pending waits in position order */
    size_t nwaits, cap_waits;
};

struct CUevent_st {
    struct CUevent_st *next;
    unsigned flags;
    struct CUstream_st *stream; /* NULL until recorded */
    uint64_t position;
    struct timespec when;
};

static struct CUstream_st sim_default_stream = {.refs = 1};
static struct CUstream_st *sim_streams; /* created streams, including destroyed ones in use */
static struct CUevent_st *sim_events;

static void sim_stream_unref(struct CUstream_st *s)
{
    if (--s->refs > 0 || s == &sim_default_stream) return;
    for (struct CUstream_st **pp = &sim_streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    for (size_t i = 0; i < s->nwaits; i++)
        sim_stream_unref(s->waits[i].fence);
    free(s->waits);
    free(s);
}

static struct CUstream_st *sim_stream_find(CUstream h, int include_destroyed)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return &sim_default_stream;
    for (struct CUstream_st *s = sim_streams; s; s = s->next)
        if (s == h && (include_destroyed || !s->destroyed)) return s;
    return NULL;
}

CUresult sim_stream_lookup(CUstream hstream, struct CUstream_st **out)
{
    *out = sim_stream_find(hstream, 0);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_stream_submit(struct CUstream_st *s)
{
    s->submitted++;
}

/* Is position p of s complete? With force, release holds on the way (forced sync) and
 * report whether any hold was released through *forced. */
static int sim_complete(struct CUstream_st *s, uint64_t p, int force, int *forced)
{
    if (s->completed >= p) return 1;
    if (s->held) {
        if (!force) return 0;
        s->held = 0;
        *forced = 1;
    }
    while (s->nwaits && s->waits[0].position <= p) {
        struct sim_wait *w = &s->waits[0];
        if (!sim_complete(w->fence, w->fence_position, force, forced)) {
            if (w->position - 1 > s->completed) s->completed = w->position - 1;
            return 0;
        }
        if (w->position > s->completed) s->completed = w->position;
        sim_stream_unref(w->fence);
        memmove(s->waits, s->waits + 1, --s->nwaits * sizeof *s->waits);
    }
    if (p > s->completed) s->completed = p;
    return 1;
}

static int sim_stream_idle(struct CUstream_st *s)
{
    int forced = 0;
    return sim_complete(s, s->submitted, 0, &forced);
}

/* Finish all of s; returns nonzero if a hold had to be released. */
static int sim_stream_force(struct CUstream_st *s)
{
    int forced = 0;
    sim_complete(s, s->submitted, 1, &forced);
    return forced;
}

int sim_streams_force_all(void)
{
    int forced = sim_stream_force(&sim_default_stream);
    for (struct CUstream_st *s = sim_streams; s; s = s->next)
        forced |= sim_stream_force(s);
    return forced;
}

/* ---- streams ---- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    int dev;
    CUresult rc = sim_enter(SIM_cuStreamCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    s->flags = Flags;
    s->refs = 1;
    s->next = sim_streams;
    sim_streams = s;
    sim_live_add(SIM_LIVE_STREAMS, 1);
    *phStream = s;
    return sim_leave(CUDA_SUCCESS);
}

/* The stream goes away for the user at once; its pending work still completes later. */
static CUresult sim_stream_destroy(CUstream hStream)
{
    CUresult rc = sim_enter(SIM_cuStreamDestroy);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = hStream ? sim_stream_find(hStream, 0) : NULL;
    if (!s || s == &sim_default_stream) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    s->destroyed = 1;
    sim_live_add(SIM_LIVE_STREAMS, -1);
    sim_stream_unref(s);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamDestroy(CUstream hStream)
{
    return sim_stream_destroy(hStream);
}
SIM_EXPORT CUresult sim_cuStreamDestroy_v1(CUstream hStream)
{
    return sim_stream_destroy(hStream);
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    CUresult rc = sim_enter(SIM_cuStreamSynchronize);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = sim_stream_find(hStream, 0);
    if (!s) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if (sim_stream_force(s)) sim_count_forced_sync();
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamQuery(CUstream hStream)
{
    CUresult rc = sim_enter(SIM_cuStreamQuery);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = sim_stream_find(hStream, 0);
    if (!s) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    return sim_leave(sim_stream_idle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

static struct CUevent_st *sim_event_find(CUevent h)
{
    for (struct CUevent_st *e = sim_events; e; e = e->next)
        if (e == h) return e;
    return NULL;
}

static int sim_event_done(struct CUevent_st *e, int force, int *forced)
{
    return !e->stream || sim_complete(e->stream, e->position, force, forced);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuStreamWaitEvent);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = sim_stream_find(hStream, 0);
    struct CUevent_st *e = sim_event_find(hEvent);
    int forced = 0;
    if (!s || !e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (sim_event_done(e, 0, &forced)) return sim_leave(CUDA_SUCCESS); /* nothing to wait for */
    if (s->nwaits == s->cap_waits) {
        size_t cap = s->cap_waits ? 2 * s->cap_waits : 4;
        struct sim_wait *w = realloc(s->waits, cap * sizeof *w);
        if (!w) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
        s->waits = w;
        s->cap_waits = cap;
    }
    s->waits[s->nwaits++] = (struct sim_wait){++s->submitted, e->stream, e->position};
    e->stream->refs++;
    return sim_leave(CUDA_SUCCESS);
}

/* ---- events ---- */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    int dev;
    CUresult rc = sim_enter(SIM_cuEventCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    e->flags = Flags;
    e->next = sim_events;
    sim_events = e;
    sim_live_add(SIM_LIVE_EVENTS, 1);
    *phEvent = e;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult rc = sim_enter(SIM_cuEventRecord);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    struct CUstream_st *s = sim_stream_find(hStream, 0);
    if (!e || !s) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    s->refs++;
    if (e->stream) sim_stream_unref(e->stream);
    e->stream = s;
    e->position = ++s->submitted;
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuEventQuery(CUevent hEvent)
{
    CUresult rc = sim_enter(SIM_cuEventQuery);
    int forced = 0;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    return sim_leave(sim_event_done(e, 0, &forced) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult rc = sim_enter(SIM_cuEventSynchronize);
    int forced = 0;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    sim_event_done(e, 1, &forced);
    if (forced) sim_count_forced_sync();
    return sim_leave(CUDA_SUCCESS);
}

static CUresult sim_event_destroy(CUevent hEvent)
{
    CUresult rc = sim_enter(SIM_cuEventDestroy);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    for (struct CUevent_st **pp = &sim_events; *pp; pp = &(*pp)->next) {
        struct CUevent_st *e = *pp;
        if (e != hEvent) continue;
        *pp = e->next;
        if (e->stream) sim_stream_unref(e->stream);
        free(e);
        sim_live_add(SIM_LIVE_EVENTS, -1);
        return sim_leave(CUDA_SUCCESS);
    }
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
}

CUresult cuEventDestroy(CUevent hEvent)
{
    return sim_event_destroy(hEvent);
}
SIM_EXPORT CUresult sim_cuEventDestroy_v1(CUevent hEvent)
{
    return sim_event_destroy(hEvent);
}

static CUresult sim_elapsed(float *ms, CUevent hStart, CUevent hEnd)
{
    CUresult rc = sim_enter(SIM_cuEventElapsedTime);
    int forced = 0;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *a = sim_event_find(hStart), *b = sim_event_find(hEnd);
    if (!ms) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (!a || !b || (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING))
        return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if (!a->stream || !b->stream) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if (!sim_event_done(a, 0, &forced) || !sim_event_done(b, 0, &forced))
        return sim_leave(CUDA_ERROR_NOT_READY);
    double d = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
               (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
    *ms = (float)d;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return sim_elapsed(pMilliseconds, hStart, hEnd);
}
SIM_EXPORT CUresult sim_cuEventElapsedTime_v1(float *ms, CUevent a, CUevent b)
{
    return sim_elapsed(ms, a, b);
}

void sim_stream_teardown(void)
{
    while (sim_events) {
        struct CUevent_st *e = sim_events;
        sim_events = e->next;
        free(e);
    }
    while (sim_streams) {
        struct CUstream_st *s = sim_streams;
        sim_streams = s->next;
        free(s->waits);
        free(s);
    }
    free(sim_default_stream.waits);
    sim_default_stream.waits = NULL;
    sim_default_stream.nwaits = sim_default_stream.cap_waits = 0;
}

/* ---- control API ---- */

SIM_EXPORT int gpoolsim_stream_hold(CUstream h)
{
    sim_lock();
    struct CUstream_st *s = sim_stream_find(h, 1);
    if (s) {
        sim_stream_idle(s); /* work submitted before the hold completes as usual */
        s->held = 1;
    }
    sim_unlock();
    return s ? 0 : -1;
}

SIM_EXPORT int gpoolsim_stream_release(CUstream h)
{
    sim_lock();
    struct CUstream_st *s = sim_stream_find(h, 1);
    if (s) s->held = 0;
    sim_unlock();
    return s ? 0 : -1;
}
