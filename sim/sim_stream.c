/* sim_stream.c — streams, events, held completion and the happens-before clocks.
 *
 * Completion. Every unit of work submitted to a stream gets the next position of that stream.
 * Position p of stream S is complete when S is not held and every wait placed on S at or
 * before p has its awaited position complete; completion is computed when asked for.
 * gpoolsim_stream_hold stops a stream from completing new work; gpoolsim_stream_release, or a
 * synchronize call that has to wait for it (counted in forced_syncs), lets it go on.
 *
 * Order (vector clocks). Every stream has an id (sid) and a clock: clock[T] is the last
 * position of stream T that the stream's next unit of work is ordered after. A unit of work
 * on S joins the host clock (work the host knows complete happened before the host issued it)
 * and the implicit legacy-stream edges, then takes clock[S] = its position. Edges:
 *  - cuStreamWaitEvent joins the event's recorded clock (cuda.h, cuStreamWaitEvent: later work
 *    on the stream waits for the event's captured work; the event may be of another context).
 *  - The legacy stream ("Stream synchronization behavior", legacy default stream; cuda.h
 *    cuStreamCreate, CU_STREAM_NON_BLOCKING): work on the legacy stream of a context waits for
 *    all prior work of the blocking streams of that context, and later work on a blocking
 *    stream waits for prior legacy work. Non-blocking streams have neither edge. Per-thread
 *    default streams are blocking streams toward the legacy stream (same page: the
 *    per-thread default stream synchronizes with the legacy default stream like any blocking
 *    stream, not with other streams). The edges are inserted as
 *    implicit waits too, so a held stream delays the legacy work after it.
 *  - The host learns completion through cuStreamSynchronize, cuEventSynchronize,
 *    cuCtxSynchronize (the current context's streams only: cuda.h, cuCtxSynchronize "blocks
 *    until the current context has completed all preceding requested tasks"), and
 *    cuStreamQuery/cuEventQuery returning CUDA_SUCCESS. One host clock serves every thread:
 *    gpool's own locks order its threads.
 *
 * Contexts. Streams and events belong to the context current when they were made (cuda.h,
 * cuStreamCreate / cuEventCreate: both return CUDA_ERROR_INVALID_CONTEXT without one); each
 * context has its own legacy stream; cuEventRecord with an event and a stream of different
 * contexts returns CUDA_ERROR_INVALID_HANDLE (cuda.h, cuEventRecord: the event and the stream
 * must be from the same context); cuStreamWaitEvent may cross contexts (its doc comment).
 *
 * Per-thread default streams (cuda.h, CU_STREAM_PER_THREAD; "Stream synchronization
 * behavior", per-thread default stream): CU_STREAM_PER_THREAD, and NULL in the _ptsz/_ptds
 * entry points, is one stream per thread and context, made on first use, blocking toward the
 * legacy stream.
 *
 * Lifetime. A destroyed stream's queued work still completes (cuda.h, cuStreamDestroy: the
 * call returns at once while the device still works on the stream, and its resources go when
 * that work is done). Stream handles
 * are slot numbers; with GPOOL_SIM_REUSE_STREAM_HANDLES=1 a destroyed stream's slot (so its
 * handle value) goes to the next stream created, as a real driver may do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

struct CUevent_st {
    struct CUevent_st *next;
    unsigned flags;
    int device;                 /* context current when it was made */
    struct CUstream_st *stream; /* NULL until recorded */
    uint64_t position;
    uint64_t *clock; /* clock of the recorded work */
    size_t nclock, cap_clock;
    int captured; /* recorded in a capture: a graph node, not work */
    struct timespec when;
};

static struct CUstream_st sim_legacy_streams[GPOOL_SIM_MAX_DEVICES];
static struct CUstream_st *sim_streams; /* created and per-thread streams, destroyed ones in use */
static struct CUevent_st *sim_events;

/* handle slots of created streams */
#define SIM_SLOT_BASE ((uintptr_t)0x5100)
#define SIM_SLOT_STEP ((uintptr_t)16)
static struct CUstream_st **sim_slots;
static size_t sim_nslots, sim_cap_slots;
static size_t *sim_free_slots;
static size_t sim_nfree_slots, sim_cap_free_slots;

/* happens-before ids: the stream of each sid (NULL once freed) and its description */
struct sim_sid_info {
    uintptr_t handle;
    int kind;
    int device;
    struct CUstream_st *stream;
};
static struct sim_sid_info *sim_sids;
static uint32_t sim_nsids, sim_cap_sids;

/* ids of freed streams, reusable once the host knows their work (up to base) complete */
struct sim_dead_sid {
    uint32_t sid;
    uint64_t base;
};
static struct sim_dead_sid *sim_dead;
static size_t sim_ndead, sim_cap_dead;

/* the host clock */
static uint64_t *sim_hclock;
static size_t sim_nhclock;
static uint64_t sim_hversion = 1;

static _Thread_local struct CUstream_st *sim_pt_streams[GPOOL_SIM_MAX_DEVICES];

static int sim_reuse_handles = -1;
int sim_reuse_stream_handles(void)
{
    if (sim_reuse_handles < 0) {
        const char *v = getenv("GPOOL_SIM_REUSE_STREAM_HANDLES");
        sim_reuse_handles = v && *v == '1';
    }
    return sim_reuse_handles;
}

/* ---- clocks ---- */

static int sim_clock_grow(uint64_t **c, size_t *n, size_t want)
{
    if (want <= *n) return 0;
    size_t cap = want < 8 ? 8 : want + want / 2;
    uint64_t *nc = realloc(*c, cap * sizeof *nc);
    if (!nc) return -1;
    memset(nc + *n, 0, (cap - *n) * sizeof *nc);
    *c = nc;
    *n = cap;
    return 0;
}

/* dst = join(dst, src); returns nonzero if dst changed */
static int sim_clock_join(uint64_t **dst, size_t *ndst, const uint64_t *src, size_t nsrc)
{
    int changed = 0;
    while (nsrc && src[nsrc - 1] == 0)
        nsrc--;
    if (sim_clock_grow(dst, ndst, nsrc) != 0) return 0; /* out of memory: fewer edges */
    for (size_t i = 0; i < nsrc; i++) {
        if (src[i] > (*dst)[i]) {
            (*dst)[i] = src[i];
            changed = 1;
        }
    }
    return changed;
}

static uint64_t sim_clock_at(const uint64_t *c, size_t n, uint32_t sid)
{
    return sid < n ? c[sid] : 0;
}

void sim_host_learn(const uint64_t *c, size_t n)
{
    if (sim_clock_join(&sim_hclock, &sim_nhclock, c, n)) sim_hversion++;
}

uint64_t sim_host_clock(uint32_t sid)
{
    return sim_clock_at(sim_hclock, sim_nhclock, sid);
}

static void sim_stream_init(struct CUstream_st *s, int kind, int device, unsigned flags)
{
    s->kind = kind;
    s->device = device;
    s->flags = flags;
    s->refs = 1;
    if (sim_nsids == sim_cap_sids) {
        uint32_t cap = sim_cap_sids ? 2 * sim_cap_sids : 16;
        struct sim_sid_info *n = realloc(sim_sids, cap * sizeof *n);
        if (!n) abort(); /* a few bytes per stream: treat as fatal like malloc in a test tool */
        sim_sids = n;
        sim_cap_sids = cap;
    }
    s->sid = sim_nsids;
    /* Reuse the id of a freed stream whose work the host knows complete: its positions go on
     * from where the old stream stopped, so old clock entries (all <= base) never order the
     * new stream's work, and every old access is ordered before any new work (the new stream
     * joins the host clock, which covers base). Keeps clocks as short as the number of
     * streams alive, not ever created (fuzzers create streams per input). */
    for (size_t i = 0; i < sim_ndead; i++) {
        if (sim_host_clock(sim_dead[i].sid) >= sim_dead[i].base) {
            s->sid = sim_dead[i].sid;
            s->submitted = s->completed = sim_dead[i].base;
            sim_dead[i] = sim_dead[--sim_ndead];
            break;
        }
    }
    if (s->sid == sim_nsids) sim_nsids++;
    sim_sids[s->sid] = (struct sim_sid_info){0, kind, device, s};
}

const char *sim_stream_name(uint32_t sid, char *buf, size_t n)
{
    if (sid >= sim_nsids) {
        snprintf(buf, n, "stream #%u", sid);
        return buf;
    }
    struct sim_sid_info *i = &sim_sids[sid];
    if (i->kind == SIM_STREAM_LEGACY_KIND)
        snprintf(buf, n, "legacy stream of device %d (#%u)", i->device, sid);
    else if (i->kind == SIM_STREAM_PER_THREAD_KIND)
        snprintf(buf, n, "per-thread stream of device %d (#%u)", i->device, sid);
    else
        snprintf(buf, n, "stream %#lx (#%u%s)", (unsigned long)i->handle, sid,
                 i->stream && !i->stream->destroyed ? "" : ", destroyed");
    return buf;
}

static struct CUstream_st *sim_legacy_of(int dev)
{
    struct CUstream_st *l = &sim_legacy_streams[dev];
    if (l->refs == 0) sim_stream_init(l, SIM_STREAM_LEGACY_KIND, dev, 0);
    return l;
}

static void sim_stream_reap(struct CUstream_st *s);

static void sim_stream_unref(struct CUstream_st *s)
{
    if (--s->refs > 0 || s->kind == SIM_STREAM_LEGACY_KIND) return;
    /* Destroyed before the host knew its work complete (queued, held, or done but never
     * synchronized): that work still completes and a context synchronize still covers it
     * (cuda.h, cuStreamDestroy; cuCtxSynchronize), so the stream stays listed until one
     * (sim_streams_force_ctx reaps it). */
    if (sim_host_clock(s->sid) < s->submitted) return;
    sim_stream_reap(s);
}

/* Free a stream nobody refers to any more. */
static void sim_stream_reap(struct CUstream_st *s)
{
    for (struct CUstream_st **pp = &sim_streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    if (s->kind == SIM_STREAM_CREATED && s->slot < sim_nslots && sim_slots[s->slot] == s)
        sim_slots[s->slot] = NULL;
    sim_sids[s->sid].stream = NULL;
    if (sim_ndead == sim_cap_dead) {
        size_t cap = sim_cap_dead ? 2 * sim_cap_dead : 16;
        struct sim_dead_sid *n = realloc(sim_dead, cap * sizeof *n);
        if (n) {
            sim_dead = n;
            sim_cap_dead = cap;
        }
    }
    if (sim_ndead < sim_cap_dead)
        sim_dead[sim_ndead++] = (struct sim_dead_sid){s->sid, s->submitted};
    for (size_t i = 0; i < s->nwaits; i++)
        sim_stream_unref(s->waits[i].fence);
    free(s->waits);
    free(s->clock);
    free(s);
}

/* Calls that named a stream already destroyed (gpoolsim_destroyed_stream_calls). cuda.h,
 * cuStreamDestroy: the handle is invalid once the call returns, whatever work is still queued;
 * a call naming it again is the caller's error (the driver may by then have given the value to
 * a new stream: GPOOL_SIM_REUSE_STREAM_HANDLES). */
static unsigned long sim_destroyed_calls;

/* 1 when h is the value of a stream slot handed out before (it is destroyed when its slot is
 * now empty or holds a destroyed stream). */
static int sim_handle_was_stream(CUstream h)
{
    uintptr_t v = (uintptr_t)h;
    return v >= SIM_SLOT_BASE && (v - SIM_SLOT_BASE) % SIM_SLOT_STEP == 0 &&
           (v - SIM_SLOT_BASE) / SIM_SLOT_STEP < sim_nslots;
}

SIM_EXPORT unsigned long gpoolsim_destroyed_stream_calls(void)
{
    sim_lock();
    unsigned long n = sim_destroyed_calls;
    sim_unlock();
    return n;
}

static struct CUstream_st *sim_slot_stream(CUstream h)
{
    uintptr_t v = (uintptr_t)h;
    if (v < SIM_SLOT_BASE || (v - SIM_SLOT_BASE) % SIM_SLOT_STEP) return NULL;
    size_t slot = (v - SIM_SLOT_BASE) / SIM_SLOT_STEP;
    return slot < sim_nslots ? sim_slots[slot] : NULL;
}

static struct CUstream_st *sim_per_thread(int dev)
{
    struct CUstream_st *s = sim_pt_streams[dev];
    if (s) return s;
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    sim_stream_init(s, SIM_STREAM_PER_THREAD_KIND, dev, 0);
    s->next = sim_streams;
    sim_streams = s;
    sim_pt_streams[dev] = s;
    return s;
}

/* include_destroyed: for the control API (a test may release a destroyed held stream). */
static CUresult sim_stream_resolve(CUstream h, int per_thread, int include_destroyed,
                                   struct CUstream_st **out)
{
    *out = NULL;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        int dev = sim_current_ctx_device();
        if (dev < 0) {
            if (!include_destroyed) return CUDA_ERROR_INVALID_CONTEXT;
            dev = 0; /* control API without a context: device 0 */
        }
        if (h == CU_STREAM_PER_THREAD || (h == NULL && per_thread))
            *out = sim_per_thread(dev);
        else
            *out = sim_legacy_of(dev);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUstream_st *s = sim_slot_stream(h);
    if (s && (include_destroyed || !s->destroyed)) *out = s;
    if (!*out && !include_destroyed && sim_handle_was_stream(h)) sim_destroyed_calls++;
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sim_stream_lookup_pt(CUstream hstream, int per_thread, struct CUstream_st **out)
{
    return sim_stream_resolve(hstream, per_thread, 0, out);
}

CUresult sim_stream_lookup(CUstream hstream, struct CUstream_st **out)
{
    return sim_stream_resolve(hstream, 0, 0, out);
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

void sim_stream_sync_host(struct CUstream_st *s)
{
    if (sim_stream_force(s)) sim_count_forced_sync();
    sim_host_learn(s->clock, s->nclock);
}

/* Finish every stream of a device's context (all of them with dev < 0); the host learns it.
 * Returns nonzero if a hold had to be released. */
static int sim_streams_force_ctx(int dev)
{
    int forced = 0;
    for (int d = 0; d < GPOOL_SIM_MAX_DEVICES; d++) {
        struct CUstream_st *l = &sim_legacy_streams[d];
        if (l->refs && (dev < 0 || d == dev)) {
            forced |= sim_stream_force(l);
            sim_host_learn(l->clock, l->nclock);
        }
    }
    for (struct CUstream_st *s = sim_streams; s;) {
        if (dev >= 0 && s->device != dev) {
            s = s->next;
            continue;
        }
        forced |= sim_stream_force(s);
        sim_host_learn(s->clock, s->nclock);
        if (s->refs == 0 && s->kind != SIM_STREAM_LEGACY_KIND) {
            sim_stream_reap(s); /* may reap the streams it waited for too: start again */
            s = sim_streams;
        } else {
            s = s->next;
        }
    }
    return forced;
}

int sim_streams_force_all(void)
{
    return sim_streams_force_ctx(-1);
}

static int sim_add_wait(struct CUstream_st *s, uint64_t position, struct CUstream_st *fence,
                        uint64_t fence_position)
{
    if (s->nwaits == s->cap_waits) {
        size_t cap = s->cap_waits ? 2 * s->cap_waits : 4;
        struct sim_wait *w = realloc(s->waits, cap * sizeof *w);
        if (!w) return -1;
        s->waits = w;
        s->cap_waits = cap;
    }
    s->waits[s->nwaits++] = (struct sim_wait){position, fence, fence_position};
    fence->refs++;
    return 0;
}

/* The implicit edge "s's next work comes after all prior work of t": clock join and, if t has
 * pending work, a wait at position pos of s. */
static void sim_implicit_edge(struct CUstream_st *s, uint64_t pos, struct CUstream_st *t)
{
    if (t == s || t->submitted == 0 || sim_clock_at(s->clock, s->nclock, t->sid) >= t->submitted)
        return;
    sim_clock_join(&s->clock, &s->nclock, t->clock, t->nclock);
    if (!sim_stream_idle(t)) sim_add_wait(s, pos, t, t->submitted);
}

static int sim_is_blocking(const struct CUstream_st *s)
{
    return s->kind != SIM_STREAM_LEGACY_KIND && !(s->flags & CU_STREAM_NON_BLOCKING);
}

int sim_stream_submit_work(struct CUstream_st *s)
{
    if (s->capture) return 1;
    uint64_t pos = s->submitted + 1;
    if (s->host_seen != sim_hversion) {
        sim_clock_join(&s->clock, &s->nclock, sim_hclock, sim_nhclock);
        s->host_seen = sim_hversion;
    }
    if (s->kind == SIM_STREAM_LEGACY_KIND) {
        for (struct CUstream_st *t = sim_streams; t; t = t->next)
            if (t->device == s->device && sim_is_blocking(t)) sim_implicit_edge(s, pos, t);
    } else if (sim_is_blocking(s)) {
        struct CUstream_st *l = &sim_legacy_streams[s->device];
        if (l->refs) sim_implicit_edge(s, pos, l);
    }
    if (sim_clock_grow(&s->clock, &s->nclock, (size_t)s->sid + 1) != 0) abort();
    s->submitted = pos;
    s->clock[s->sid] = pos;
    return 0;
}

void sim_stream_submit(struct CUstream_st *s)
{
    sim_stream_submit_work(s);
}

/* ---- streams ---- */

static CUresult sim_slot_take(struct CUstream_st *s)
{
    if (sim_reuse_stream_handles() && sim_nfree_slots) {
        s->slot = sim_free_slots[--sim_nfree_slots];
    } else {
        if (sim_nslots == sim_cap_slots) {
            size_t cap = sim_cap_slots ? 2 * sim_cap_slots : 16;
            struct CUstream_st **n = realloc(sim_slots, cap * sizeof *n);
            if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
            sim_slots = n;
            sim_cap_slots = cap;
        }
        s->slot = sim_nslots++;
    }
    sim_slots[s->slot] = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuStreamCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int dev = sim_current_ctx_device();
    if (dev < 0) return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
    if (sim_reuse_stream_handles() && !sim_free_slots) {
        sim_free_slots = malloc(16 * sizeof *sim_free_slots);
        if (!sim_free_slots) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
        sim_cap_free_slots = 16;
    }
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if ((rc = sim_slot_take(s)) != CUDA_SUCCESS) {
        free(s);
        return sim_leave(rc);
    }
    sim_stream_init(s, SIM_STREAM_CREATED, dev, Flags);
    CUstream h = (CUstream)(SIM_SLOT_BASE + s->slot * SIM_SLOT_STEP);
    sim_sids[s->sid].handle = (uintptr_t)h;
    s->next = sim_streams;
    sim_streams = s;
    sim_live_add(SIM_LIVE_STREAMS, 1);
    *phStream = h;
    return sim_leave(CUDA_SUCCESS);
}

/* The stream goes away for the user at once; its pending work still completes later. Lock
 * held. */
static void sim_stream_kill(struct CUstream_st *s)
{
    s->destroyed = 1;
    sim_capture_forget(s);
    sim_live_add(SIM_LIVE_STREAMS, -1);
    if (sim_reuse_stream_handles()) {
        /* the handle value is free at once; the object lives on while work refers to it */
        sim_slots[s->slot] = NULL;
        if (sim_nfree_slots == sim_cap_free_slots) {
            size_t cap = 2 * sim_cap_free_slots;
            size_t *n = realloc(sim_free_slots, cap * sizeof *n);
            if (n) {
                sim_free_slots = n;
                sim_cap_free_slots = cap;
            }
        }
        if (sim_nfree_slots < sim_cap_free_slots) sim_free_slots[sim_nfree_slots++] = s->slot;
        s->slot = (size_t)-1;
    }
    sim_stream_unref(s);
}

static CUresult sim_stream_destroy(CUstream hStream)
{
    CUresult rc = sim_enter(SIM_cuStreamDestroy);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s = sim_slot_stream(hStream);
    if (!s || s->destroyed) {
        if (sim_handle_was_stream(hStream)) sim_destroyed_calls++;
        return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    sim_stream_kill(s);
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

CUresult sim_stream_synchronize(CUstream hStream, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamSynchronize);
    struct CUstream_st *s;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if ((rc = sim_stream_lookup_pt(hStream, per_thread, &s)) != CUDA_SUCCESS) return sim_leave(rc);
    if ((rc = sim_capture_check_sync(s)) != CUDA_SUCCESS) return sim_leave(rc);
    sim_stream_sync_host(s);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    return sim_stream_synchronize(hStream, 0);
}

CUresult sim_stream_query(CUstream hStream, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamQuery);
    struct CUstream_st *s;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if ((rc = sim_stream_lookup_pt(hStream, per_thread, &s)) != CUDA_SUCCESS) return sim_leave(rc);
    if ((rc = sim_capture_check_sync(s)) != CUDA_SUCCESS) return sim_leave(rc);
    if (!sim_stream_idle(s)) return sim_leave(CUDA_ERROR_NOT_READY);
    sim_host_learn(s->clock, s->nclock);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamQuery(CUstream hStream)
{
    return sim_stream_query(hStream, 0);
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

/* cuda.h, cuStreamWaitEvent: work submitted to hStream after this call waits for the work
 * captured by the event's most recent cuEventRecord; "hEvent may be from a different context
 * or device than hStream". An event recorded in a capture makes the stream join it. */
CUresult sim_stream_wait_event(CUstream hStream, CUevent hEvent, unsigned int Flags, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamWaitEvent);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUstream_st *s;
    if ((rc = sim_stream_lookup_pt(hStream, per_thread, &s)) != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    int forced = 0;
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (e->captured) {
        if (e->stream) sim_capture_join(s, e->stream);
        return sim_leave(CUDA_SUCCESS);
    }
    if (s->capture) return sim_leave(CUDA_SUCCESS); /* a dependency of the graph */
    if (!e->stream) return sim_leave(CUDA_SUCCESS); /* never recorded: nothing to wait for */
    sim_clock_join(&s->clock, &s->nclock, e->clock, e->nclock);
    if (sim_event_done(e, 0, &forced)) return sim_leave(CUDA_SUCCESS);
    if (sim_add_wait(s, s->submitted + 1, e->stream, e->position) != 0)
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    sim_stream_submit_work(s);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return sim_stream_wait_event(hStream, hEvent, Flags, 0);
}

/* ---- events ---- */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuEventCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int dev = sim_current_ctx_device();
    if (dev < 0) return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    e->flags = Flags;
    e->device = dev;
    e->next = sim_events;
    sim_events = e;
    sim_live_add(SIM_LIVE_EVENTS, 1);
    *phEvent = e;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuEventRecord: event and stream must be from the same context, otherwise
 * CUDA_ERROR_INVALID_HANDLE. */
CUresult sim_event_record(CUevent hEvent, CUstream hStream, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuEventRecord);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    struct CUstream_st *s;
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if ((rc = sim_stream_lookup_pt(hStream, per_thread, &s)) != CUDA_SUCCESS) return sim_leave(rc);
    if (s->device != e->device) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if ((rc = sim_capture_check_legacy(s)) != CUDA_SUCCESS) return sim_leave(rc);
    s->refs++;
    if (e->stream) sim_stream_unref(e->stream);
    e->stream = s;
    if (sim_stream_submit_work(s)) {
        e->captured = 1;
        e->position = 0;
        return sim_leave(CUDA_SUCCESS);
    }
    e->captured = 0;
    e->position = s->submitted;
    if (sim_clock_grow(&e->clock, &e->cap_clock, s->nclock) == 0) {
        memcpy(e->clock, s->clock, s->nclock * sizeof *e->clock);
        memset(e->clock + s->nclock, 0, (e->cap_clock - s->nclock) * sizeof *e->clock);
        e->nclock = s->nclock;
    }
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return sim_event_record(hEvent, hStream, 0);
}

/* cuda.h, cuStreamBeginCapture: querying or synchronizing an event recorded in a capture is
 * illegal while the capture runs. */
static CUresult sim_event_capture_check(struct CUevent_st *e)
{
    if (e->captured && e->stream && e->stream->capture) return sim_capture_check_sync(e->stream);
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent)
{
    CUresult rc = sim_enter(SIM_cuEventQuery);
    int forced = 0;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if ((rc = sim_event_capture_check(e)) != CUDA_SUCCESS) return sim_leave(rc);
    if (!sim_event_done(e, 0, &forced)) return sim_leave(CUDA_ERROR_NOT_READY);
    if (e->stream && !e->captured) sim_host_learn(e->clock, e->nclock);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult rc = sim_enter(SIM_cuEventSynchronize);
    int forced = 0;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct CUevent_st *e = sim_event_find(hEvent);
    if (!e) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    if ((rc = sim_event_capture_check(e)) != CUDA_SUCCESS) return sim_leave(rc);
    sim_event_done(e, 1, &forced);
    if (forced) sim_count_forced_sync();
    if (e->stream && !e->captured) sim_host_learn(e->clock, e->nclock);
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
        free(e->clock);
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

/* ---- context synchronization (called from sim_device.c) ---- */

/* cuda.h, cuCtxSynchronize: blocks until the *current* context has completed all preceding
 * requested tasks; other contexts' streams are not covered. Lock held. */
int sim_ctx_streams_sync(int dev)
{
    return sim_streams_force_ctx(dev);
}

/* cuDevicePrimaryCtxReset of dev: the context's work finishes (its holds released, counted as
 * forced), then its events and created streams are destroyed, as cuEventDestroy and
 * cuStreamDestroy would (their handles are invalid from now on). Lock held. */
void sim_stream_reset(int dev)
{
    if (sim_streams_force_ctx(dev)) sim_count_forced_sync();
    for (struct CUevent_st **pp = &sim_events; *pp;) {
        struct CUevent_st *e = *pp;
        if (e->device != dev) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        if (e->stream) sim_stream_unref(e->stream);
        free(e->clock);
        free(e);
        sim_live_add(SIM_LIVE_EVENTS, -1);
    }
    for (size_t i = 0; i < sim_nslots; i++) {
        struct CUstream_st *s = sim_slots[i];
        if (s && !s->destroyed && s->device == dev && s->kind == SIM_STREAM_CREATED)
            sim_stream_kill(s);
    }
}

/* ---- stream properties ---- */

static CUresult sim_stream_get_ctx(CUstream hStream, CUcontext *pctx, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamGetCtx);
    struct CUstream_st *s;
    if (rc == CUDA_SUCCESS && !pctx) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (rc = sim_stream_lookup_pt(hStream, per_thread, &s)) == CUDA_SUCCESS)
        *pctx = sim_ctx_handle(s->device);
    return sim_leave(rc);
}

static CUresult sim_stream_get_flags(CUstream hStream, unsigned *flags, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamGetFlags);
    struct CUstream_st *s;
    if (rc == CUDA_SUCCESS && !flags) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (rc = sim_stream_lookup_pt(hStream, per_thread, &s)) == CUDA_SUCCESS)
        *flags = s->flags;
    return sim_leave(rc);
}

static CUresult sim_stream_get_id(CUstream hStream, unsigned long long *id, int per_thread)
{
    CUresult rc = sim_enter(SIM_cuStreamGetId);
    struct CUstream_st *s;
    if (rc == CUDA_SUCCESS && !id) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (rc = sim_stream_lookup_pt(hStream, per_thread, &s)) == CUDA_SUCCESS)
        *id = (unsigned long long)s->sid + 1;
    return sim_leave(rc);
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    return sim_stream_get_ctx(hStream, pctx, 0);
}
CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    return sim_stream_get_flags(hStream, flags, 0);
}
CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    return sim_stream_get_id(hStream, streamId, 0);
}
SIM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return sim_stream_get_ctx(hStream, pctx, 1);
}
SIM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return sim_stream_get_flags(hStream, flags, 1);
}
SIM_EXPORT CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
    return sim_stream_get_id(hStream, streamId, 1);
}

void sim_stream_teardown(void)
{
    while (sim_events) {
        struct CUevent_st *e = sim_events;
        sim_events = e->next;
        free(e->clock);
        free(e);
    }
    while (sim_streams) {
        struct CUstream_st *s = sim_streams;
        sim_streams = s->next;
        free(s->waits);
        free(s->clock);
        free(s);
    }
    for (int d = 0; d < GPOOL_SIM_MAX_DEVICES; d++) {
        struct CUstream_st *l = &sim_legacy_streams[d];
        free(l->waits);
        free(l->clock);
        memset(l, 0, sizeof *l);
    }
    free(sim_slots);
    free(sim_free_slots);
    free(sim_sids);
    free(sim_hclock);
    free(sim_dead);
    sim_dead = NULL;
    sim_ndead = sim_cap_dead = 0;
    sim_slots = NULL;
    sim_free_slots = NULL;
    sim_sids = NULL;
    sim_hclock = NULL;
    sim_nslots = sim_cap_slots = sim_nfree_slots = sim_cap_free_slots = sim_nhclock = 0;
    sim_nsids = sim_cap_sids = 0;
}

/* ---- control API ---- */

SIM_EXPORT int gpoolsim_stream_hold(CUstream h)
{
    struct CUstream_st *s;
    sim_lock();
    if (sim_stream_resolve(h, 0, 1, &s) == CUDA_SUCCESS) {
        sim_stream_idle(s); /* work submitted before the hold completes as usual */
        s->held = 1;
    }
    sim_unlock();
    return s ? 0 : -1;
}

SIM_EXPORT int gpoolsim_stream_release(CUstream h)
{
    struct CUstream_st *s;
    sim_lock();
    if (sim_stream_resolve(h, 0, 1, &s) == CUDA_SUCCESS) s->held = 0;
    sim_unlock();
    return s ? 0 : -1;
}
