/* The event clock of stream-ordered reuse: stream tags, per-stream free positions (seq), one
 * event per stream covering every free up to the position it was recorded at, "is this
 * position done?" (event or stream queries), record, wait and synchronize. What the clock's
 * answers allow — which freed memory may go to which stream, and when — is reuse.c's (the
 * rule is stated at its top). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pool.h"
#include "stream_internal.h"

/* ---------- stream tags ---------- */

#define PTDS_LOW                                                                                   \
    0xBu /* low bits of a per-thread tag: no aligned handle or CU_STREAM_* has them                \
          */

static _Atomic uintptr_t ptds_serial = 1;
static _Thread_local uintptr_t ptds_mine; /* this thread's per-thread tag, 0 until needed */

static int tag_is_ptds(uintptr_t tag)
{
    return (tag & 0xF) == PTDS_LOW && tag > 0xF;
}

/* Retired tags (gpool_stream_release): what was pending on a stream the program destroys
 * moves to a tag of its own, waited for through an event, never named to the driver as a
 * stream. Low bits no aligned handle, CU_STREAM_* or per-thread tag has. */
#define RETIRED_LOW 0x7u
static _Atomic uintptr_t retired_serial = 1;

uintptr_t gp_ss_retired_tag(void)
{
    return (atomic_fetch_add(&retired_serial, 1) << 4) | RETIRED_LOW;
}

int gp_tag_retired(uintptr_t tag)
{
    return (tag & 0xF) == RETIRED_LOW && tag > 0xF;
}

uintptr_t gp_stream_tag(gpool_stream_t s)
{
    if (s != CU_STREAM_PER_THREAD) return (uintptr_t)s;
    if (!ptds_mine) /* serial numbers are never reused: a new thread is a new stream */
        ptds_mine = (atomic_fetch_add(&ptds_serial, 1) << 4) | PTDS_LOW;
    return ptds_mine;
}

gpool_stream_t gp_tag_stream(uintptr_t tag)
{
    return tag_is_ptds(tag) ? CU_STREAM_PER_THREAD : (gpool_stream_t)tag;
}

int gp_tag_mine(uintptr_t tag)
{
    return !tag_is_ptds(tag) || tag == ptds_mine;
}

/* ss->lock, with a note of whether this thread holds it: the arena asks a stream's position
 * (gp_stream_position) under its lock, sometimes from code that holds ss->lock already
 * (gpool_stream_release's cleans, which may empty a slab), and must not take it again. */
static _Thread_local int ss_held;

void gp_ss_lock(gp_streams *ss)
{
    pthread_mutex_lock(&ss->lock);
    ss_held++;
}

void gp_ss_unlock(gp_streams *ss)
{
    ss_held--;
    pthread_mutex_unlock(&ss->lock);
}

/* ---------- helpers (lock held) ---------- */

uintptr_t gp_ss_alias(gp_streams *ss, uintptr_t tag)
{
    if (!ss->aliases.count) return tag;
    void *v = gp_ptrmap_get(&ss->aliases, tag);
    return v ? (uintptr_t)v : tag;
}

#define GP_ALIASES (sizeof((gp_streams *)0)->alias_ring / sizeof(uintptr_t))

void gp_ss_alias_add(gp_streams *ss, uintptr_t handle, uintptr_t rtag)
{
    size_t k = ss->alias_next++ % GP_ALIASES;
    /* the oldest goes, unless its handle was released again since (a newer entry) */
    if (ss->alias_ring[k] &&
        (uintptr_t)gp_ptrmap_get(&ss->aliases, ss->alias_ring[k]) == ss->alias_rtag[k])
        gp_ptrmap_del(&ss->aliases, ss->alias_ring[k]);
    ss->alias_ring[k] = 0;
    gp_ptrmap_del(&ss->aliases, handle);
    if (gp_ptrmap_put(&ss->aliases, handle, (void *)rtag) == 0) {
        ss->alias_ring[k] = handle;
        ss->alias_rtag[k] = rtag;
    }
}

void gp_ss_alias_forget(gp_streams *ss, uintptr_t handle)
{
    if (ss->aliases.count) gp_ptrmap_del(&ss->aliases, handle);
}

int gp_ss_retired_done(gp_streams *ss, uintptr_t rtag)
{
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].tag == rtag) return !ss->recs[i].ev_live;
    return 1;
}

stream_rec *gp_ss_rec(gp_streams *ss, uintptr_t tag)
{
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].tag == tag) return &ss->recs[i];
    gp_ss_alias_forget(ss, tag); /* a record for a released stream's value: a new stream */
    if (ss->nrecs == ss->cap_recs) {
        size_t cap = ss->cap_recs ? ss->cap_recs * 2 : 8;
        stream_rec *nr = realloc(ss->recs, cap * sizeof *nr);
        if (!nr) return NULL;
        ss->recs = nr;
        ss->cap_recs = cap;
    }
    stream_rec *r = &ss->recs[ss->nrecs++];
    memset(r, 0, sizeof *r);
    r->tag = tag;
    return r;
}

CUresult gp_ss_event_get(gpool_t *pool, CUevent *ev)
{
    gp_streams *ss = pool->streams;
    if (ss->nspare) {
        *ev = ss->spare[--ss->nspare];
        return CUDA_SUCCESS;
    }
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                  pool->dc.drv->cuEventCreate(ev, CU_EVENT_DISABLE_TIMING));
}

#define SPARE_EVENTS 64 /* idle events kept for reuse; more are destroyed */

void gp_ss_event_put(gpool_t *pool, CUevent ev)
{
    gp_streams *ss = pool->streams;
    if (ss->nspare == SPARE_EVENTS) {
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ev));
        return;
    }
    if (ss->nspare == ss->cap_spare) {
        size_t cap = ss->cap_spare ? ss->cap_spare * 2 : 16;
        CUevent *ns = realloc(ss->spare, cap * sizeof *ns);
        if (!ns) {
            GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ev));
            return;
        }
        ss->spare = ns;
        ss->cap_spare = cap;
    }
    ss->spare[ss->nspare++] = ev;
}

/* 1 when stream tag belongs to another context than the pool's, or its context cannot be
 * told (completion is never assumed); lock held. The NULL, legacy and per-thread streams are
 * named with the pool's context current, so they are its own. */
int gp_ss_other_ctx(gpool_t *pool, uintptr_t tag)
{
    if (!pool->dc.drv->cuStreamGetCtx || tag == 0 || tag == (uintptr_t)CU_STREAM_LEGACY ||
        tag == (uintptr_t)CU_STREAM_PER_THREAD || tag_is_ptds(tag) || gp_tag_retired(tag))
        return 0;
    /* cached in the stream's record (made here if need be: callers hold no record pointer of
     * another tag across this call), asked while the stream is alive: a destroyed stream's
     * handle says nothing any more */
    stream_rec *r = gp_ss_rec(pool->streams, tag);
    if (r && r->ctx_known) return r->other_ctx;
    CUcontext c = NULL;
    CUresult q =
        GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuStreamGetCtx((CUstream)tag, &c));
    int other = q != CUDA_SUCCESS || c != pool->dc.ctx;
    if (r) {
        r->ctx_known = 1;
        r->other_ctx = other;
        r->ctx = q == CUDA_SUCCESS ? c : NULL;
    }
    return other;
}

int gp_stream_capturing(gpool_t *pool, uintptr_t tag)
{
    /* cuStreamIsCapturing is legal during capture (its doc comment); a driver without it has no
     * graph capture to worry about. Another thread's per-thread stream cannot be asked. */
    if (!pool->dc.drv->cuStreamIsCapturing || !gp_tag_mine(tag)) return 0;
    /* cuStreamBeginCapture's doc: "Capture may not be initiated if stream is CU_STREAM_LEGACY"
     * (NULL names the legacy stream in gpool's API): no call needed for it */
    if (tag == 0 || tag == (uintptr_t)CU_STREAM_LEGACY || gp_tag_retired(tag)) return 0;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                        pool->dc.drv->cuStreamIsCapturing((CUstream)gp_tag_stream(tag), &cs));
    return r == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

gpool_status gp_stream_may_drive(void *ctx, uintptr_t tag)
{
    gpool_t *pool = ctx;
    if (!gp_stream_capturing(pool, tag)) return GPOOL_OK;
    return gp_fail(GPOOL_ERR_UNSUPPORTED,
                   "stream %p is capturing a CUDA graph: gpool serves allocations there only "
                   "from memory already free for that stream, and this one would need driver "
                   "calls the capture forbids (allocate before the capture begins)",
                   (void *)gp_tag_stream(tag));
}

/* Record ev on stream tag; 0 on success. Another thread's per-thread default stream cannot
 * be named from here, and an event recorded on a capturing stream becomes a node of the graph
 * that may not be queried (cuStreamBeginCapture's doc comment): those fail too. */
/* 1 when tag is the legacy stream and work on it would join a capture: cuda.h,
 * cuStreamIsCapturing on CU_STREAM_LEGACY "while a blocking stream in the same context is
 * capturing ... will return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT" (and invalidates nothing),
 * while a record or a synchronize there would invalidate that capture. One query, made only
 * before such a record or synchronize (not on the allocation path: gp_stream_may_drive). */
static int legacy_joins_capture(gpool_t *pool, uintptr_t tag)
{
    if ((tag != 0 && tag != (uintptr_t)CU_STREAM_LEGACY) || !pool->dc.drv->cuStreamIsCapturing)
        return 0;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                  pool->dc.drv->cuStreamIsCapturing(CU_STREAM_LEGACY, &cs)) ==
           CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

int gp_ss_record_on(gpool_t *pool, CUevent ev, uintptr_t tag)
{
    if (gp_tag_retired(tag)) return 1; /* its stream is gone: its event is recorded already */
    if (!gp_tag_mine(tag) || gp_ss_other_ctx(pool, tag) || gp_stream_capturing(pool, tag) ||
        legacy_joins_capture(pool, tag))
        return 1;
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                  pool->dc.drv->cuEventRecord(ev, (CUstream)gp_tag_stream(tag))) != CUDA_SUCCESS;
}

/* Wait for the work queued on stream tag: cuStreamSynchronize, or for another thread's
 * per-thread default stream (which cannot be named here) the whole context. */
CUresult gp_ss_sync_tag(gpool_t *pool, uintptr_t tag)
{
    if (gp_stream_capturing(pool, tag)) /* synchronizing captured work is prohibited */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (legacy_joins_capture(pool, tag)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (!gp_tag_mine(tag) || gp_tag_retired(tag)) /* no stream to name: the whole context */
        return GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                  pool->dc.drv->cuStreamSynchronize((CUstream)gp_tag_stream(tag)));
}

void gp_stream_cover(gpool_t *pool, uintptr_t tag)
{
    if (!tag_is_ptds(tag) || tag != ptds_mine) return;
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    stream_rec *r = NULL;
    for (size_t i = 0; i < ss->nrecs && !r; i++)
        if (ss->recs[i].tag == tag) r = &ss->recs[i];
    if (r && r->foreign_want) {
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        if (!r->ev && gp_ss_event_get(pool, &r->ev) != CUDA_SUCCESS) r->ev = NULL;
        /* Recording it again while live is fine: its completion then covers the earlier
         * frees as well (stream order). */
        if (r->ev && !gp_ss_record_on(pool, r->ev, tag)) {
            r->ev_seq = r->seq++;
            r->ev_live = 1;
        }
        gp_dc_leave(&pool->dc, pushed);
    }
    gp_ss_unlock(ss);
}

/* ---------- lifetime ---------- */

gpool_status gp_streams_create(gpool_t *pool)
{
    gp_streams *ss = calloc(1, sizeof *ss);
    if (!ss) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for stream state");
    pthread_mutex_init(&ss->lock, NULL);
    gp_ptrmap_init(&ss->recorded);
    gp_ptrmap_init(&ss->aliases);
    pool->streams = ss;
    return GPOOL_OK;
}

void gp_streams_destroy(gpool_t *pool)
{
    gp_streams *ss = pool->streams;
    if (!ss) return;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].ev)
            GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ss->recs[i].ev));
    for (size_t i = 0; i < ss->ndef; i++)
        for (size_t k = 0; k < ss->def[i].nev; k++)
            GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ss->def[i].ev[k]));
    for (size_t i = 0; i < ss->nspare; i++)
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ss->spare[i]));
    gp_dc_leave(&pool->dc, pushed);
    for (size_t i = 0; i < ss->recorded.cap; i++)
        if (ss->recorded.keys[i]) free(ss->recorded.vals[i]);
    gp_ptrmap_fini(&ss->recorded);
    gp_ptrmap_fini(&ss->aliases);
    free(ss->recs);
    free(ss->def);
    free(ss->spare);
    pthread_mutex_destroy(&ss->lock);
    free(ss);
    pool->streams = NULL;
}

/* ---------- frees ---------- */

uint64_t gp_stream_free_seq(gpool_t *pool, uintptr_t tag)
{
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    stream_rec *r = gp_ss_rec(ss, tag);
    uint64_t seq = r ? r->seq : UINT64_MAX; /* no record: stays pending until a full sync */
    if (r && !r->ctx_known) gp_ss_other_ctx(pool, tag); /* learn its context while it is alive */
    gp_ss_unlock(ss);
    return seq;
}

void gp_stream_learn_ctx(gpool_t *pool, uintptr_t tag)
{
    if (tag == 0 || tag == (uintptr_t)CU_STREAM_LEGACY || tag == (uintptr_t)CU_STREAM_PER_THREAD ||
        tag_is_ptds(tag) || !pool->dc.drv->cuStreamGetCtx)
        return;
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    stream_rec *r = gp_ss_rec(ss, tag);
    if (r && !r->ctx_known) gp_ss_other_ctx(pool, tag);
    gp_ss_unlock(ss);
}

uint64_t gp_stream_position(void *ctx, uintptr_t tag)
{
    gpool_t *pool = ctx;
    if (!ss_held) return gp_stream_free_seq(pool, tag);
    /* ss->lock is ours already, and a caller up the stack may hold a record pointer: look,
     * do not add (a stream without a record is at position 0, where its record starts) */
    gp_streams *ss = pool->streams;
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].tag == tag) return ss->recs[i].seq;
    return 0;
}

gpool_status gp_stream_wait(gpool_t *pool, uintptr_t tag)
{
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = gp_ss_sync_tag(pool, tag);
    gp_dc_leave(&pool->dc, pushed);
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuStreamSynchronize");
}

/* ---------- synchronize ---------- */

/* cuCtxSynchronize covers the pool's context only ("blocks until the device has completed
 * all preceding requested tasks" of the current context): streams of other contexts that
 * frees were tagged with are synchronized one by one. */
gpool_status gp_ss_sync_other_contexts(gpool_t *pool)
{
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    gp_ss_lock(ss);
    for (size_t i = 0; i < ss->nrecs && st == GPOOL_OK; i++) {
        stream_rec *r = &ss->recs[i];
        if (!gp_ss_other_ctx(pool, r->tag)) continue;
        CUresult q = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                            pool->dc.drv->cuStreamSynchronize((CUstream)r->tag));
        if (q != CUDA_SUCCESS && r->ctx) { /* e.g. destroyed: wait for its whole context */
            int pushed = GP_DRV(pool->dc.cnt, GPOOL_DRV_OTHER,
                                pool->dc.drv->cuCtxPushCurrent(r->ctx)) == CUDA_SUCCESS;
            if (pushed) {
                q = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
                CUcontext dummy;
                GP_DRV(pool->dc.cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuCtxPopCurrent(&dummy));
            }
        }
        if (q != CUDA_SUCCESS)
            st = gp_cu_fail(q, "cuStreamSynchronize (a stream of another context)");
    }
    gp_ss_unlock(ss);
    return st;
}
