/* The event clock of stream-ordered reuse: per-stream free positions (seq), one event per
 * stream covering every free up to the position it was recorded at, "is this position done?"
 * (event or stream queries), record, wait and synchronize, and the frees deferred behind
 * events on several streams (gpool_record_stream). The rule that decides which freed memory
 * may go to which stream, and when, is stated once at the top of arena.c. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pool.h"
#include "stream.h"
#include "sysmem.h"

typedef struct stream_rec {
    uintptr_t tag;
    uint64_t seq;    /* sequence number a free on this stream gets now */
    CUevent ev;      /* created on first need */
    uint64_t ev_seq; /* frees with seq <= ev_seq are covered by ev */
    int ev_live;     /* ev recorded, not yet seen complete */
    /* Another thread's per-thread default stream: another thread wanted its frees but cannot
     * record an event on it, so its owner covers its frees with one from now on. */
    int foreign_want;
    /* The stream's context (cuStreamGetCtx), once asked: events of the pool's context cannot
     * be recorded on streams of another one (cuEventRecord's doc comment), so such a stream is
     * polled with cuStreamQuery and waited for with cuStreamSynchronize instead. */
    int ctx_known, other_ctx;
    CUcontext ctx;
} stream_rec;

#define DEFER_EVENTS 8

typedef struct deferred_free {
    void *ptr;
    int host; /* a host block (sysmem), else a device block */
    gpool_mem_kind kind;
    size_t size, requested; /* for the stats: the caller already freed it */
    uintptr_t tag;          /* the stream it was freed on */
    uint64_t seq;
    size_t nev;
    CUevent ev[DEFER_EVENTS + 2]; /* the recorded streams, the freeing and allocating ones */
    int need_sync; /* a stream could be neither tracked nor waited for (capturing): only a
                      device-wide synchronize completes this free */
} deferred_free;

typedef struct recorded {
    size_t n;
    int deferred; /* freed, waiting on events: a second free or record is an error */
    uintptr_t tags[DEFER_EVENTS];
} recorded;

struct gp_streams {
    pthread_mutex_t lock;
    stream_rec *recs;
    size_t nrecs, cap_recs;
    gp_ptrmap recorded; /* block -> extra streams (gpool_record_stream) */
    deferred_free *def;
    size_t ndef, cap_def;
    /* per kind: the deferred list's count, bytes and requested bytes (gp_stream_deferred) */
    uint64_t def_n[GPOOL_MEM_KIND_COUNT], def_bytes[GPOOL_MEM_KIND_COUNT],
        def_req[GPOOL_MEM_KIND_COUNT];
    CUevent *spare; /* idle events */
    size_t nspare, cap_spare;
};

/* Append d to the deferred list (lock held, room made by the caller) and count it. */
static void def_push(gp_streams *ss, const deferred_free *d)
{
    ss->def[ss->ndef++] = *d;
    ss->def_n[d->kind]++;
    ss->def_bytes[d->kind] += d->size;
    ss->def_req[d->kind] += d->requested;
}

/* Take d's counts out of the totals (lock held) once it leaves the list. */
static void def_uncount(gp_streams *ss, const deferred_free *d)
{
    ss->def_n[d->kind]--;
    ss->def_bytes[d->kind] -= d->size;
    ss->def_req[d->kind] -= d->requested;
}

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

/* ss->lock, with a note of whether this thread holds it: the arena's seq hook runs under
 * the arena lock, sometimes from code that holds ss->lock already (a deferred free that
 * empties a slab), and must not take it again. */
static _Thread_local int ss_held;

static void ss_lock(gp_streams *ss)
{
    pthread_mutex_lock(&ss->lock);
    ss_held++;
}

static void ss_unlock(gp_streams *ss)
{
    ss_held--;
    pthread_mutex_unlock(&ss->lock);
}

/* ---------- helpers (lock held) ---------- */

static stream_rec *rec_get(gp_streams *ss, uintptr_t tag)
{
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].tag == tag) return &ss->recs[i];
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

static CUresult event_get(gpool_t *pool, CUevent *ev)
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

static void event_put(gpool_t *pool, CUevent ev)
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
static int other_ctx(gpool_t *pool, uintptr_t tag)
{
    if (!pool->dc.drv->cuStreamGetCtx || tag == 0 || tag == (uintptr_t)CU_STREAM_LEGACY ||
        tag == (uintptr_t)CU_STREAM_PER_THREAD || tag_is_ptds(tag))
        return 0;
    /* cached in the stream's record (made here if need be: callers hold no record pointer of
     * another tag across this call), asked while the stream is alive: a destroyed stream's
     * handle says nothing any more */
    stream_rec *r = rec_get(pool->streams, tag);
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
    if (tag == 0 || tag == (uintptr_t)CU_STREAM_LEGACY) return 0;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                        pool->dc.drv->cuStreamIsCapturing((CUstream)gp_tag_stream(tag), &cs));
    return r == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

gpool_status gp_stream_may_drive(void *owner, uintptr_t tag)
{
    gpool_t *pool = owner;
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
static int record_on(gpool_t *pool, CUevent ev, uintptr_t tag)
{
    if (!gp_tag_mine(tag) || other_ctx(pool, tag) || gp_stream_capturing(pool, tag)) return 1;
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                  pool->dc.drv->cuEventRecord(ev, (CUstream)gp_tag_stream(tag))) != CUDA_SUCCESS;
}

/* Wait for the work queued on stream tag: cuStreamSynchronize, or for another thread's
 * per-thread default stream (which cannot be named here) the whole context. */
static CUresult sync_tag(gpool_t *pool, uintptr_t tag)
{
    if (gp_stream_capturing(pool, tag)) /* synchronizing captured work is prohibited */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!gp_tag_mine(tag))
        return GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    return GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                  pool->dc.drv->cuStreamSynchronize((CUstream)gp_tag_stream(tag)));
}

void gp_stream_cover(gpool_t *pool, uintptr_t tag)
{
    if (!tag_is_ptds(tag) || tag != ptds_mine) return;
    gp_streams *ss = pool->streams;
    ss_lock(ss);
    stream_rec *r = NULL;
    for (size_t i = 0; i < ss->nrecs && !r; i++)
        if (ss->recs[i].tag == tag) r = &ss->recs[i];
    if (r && r->foreign_want) {
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        if (!r->ev && event_get(pool, &r->ev) != CUDA_SUCCESS) r->ev = NULL;
        /* Recording it again while live is fine: its completion then covers the earlier
         * frees as well (stream order). */
        if (r->ev && !record_on(pool, r->ev, tag)) {
            r->ev_seq = r->seq++;
            r->ev_live = 1;
        }
        gp_dc_leave(&pool->dc, pushed);
    }
    ss_unlock(ss);
}

/* ---------- lifetime ---------- */

gpool_status gp_streams_create(gpool_t *pool)
{
    gp_streams *ss = calloc(1, sizeof *ss);
    if (!ss) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for stream state");
    pthread_mutex_init(&ss->lock, NULL);
    gp_ptrmap_init(&ss->recorded);
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
    ss_lock(ss);
    stream_rec *r = rec_get(ss, tag);
    uint64_t seq = r ? r->seq : UINT64_MAX;       /* no record: stays pending until a full sync */
    if (r && !r->ctx_known) other_ctx(pool, tag); /* learn its context while it is alive */
    ss_unlock(ss);
    return seq;
}

uint64_t gp_stream_seq_hook(void *owner, uintptr_t tag)
{
    gpool_t *pool = owner;
    if (!ss_held) return gp_stream_free_seq(pool, tag);
    /* ss->lock is ours already, and a caller up the stack may hold a record pointer: look,
     * do not add (a stream without a record is at position 0, where its record starts) */
    gp_streams *ss = pool->streams;
    for (size_t i = 0; i < ss->nrecs; i++)
        if (ss->recs[i].tag == tag) return ss->recs[i].seq;
    return 0;
}

gpool_status gp_stream_record(gpool_t *pool, void *ptr, uintptr_t alloc_tag, uintptr_t tag)
{
    if (tag == alloc_tag) return GPOOL_OK;
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr);
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc || gp_ptrmap_put(&ss->recorded, (uintptr_t)ptr, rc) != 0) {
            free(rc);
            st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory recording a stream");
            rc = NULL;
        } else {
            atomic_fetch_add(&pool->stream_busy, 1);
        }
    }
    if (rc && rc->deferred) {
        st = gp_fail(GPOOL_ERR_INVALID_POINTER, "%p was already freed", ptr);
    } else if (rc) {
        size_t i = 0;
        while (i < rc->n && rc->tags[i] != tag)
            i++;
        if (i == rc->n && rc->n == DEFER_EVENTS)
            st = gp_fail(GPOOL_ERR_INVALID_ARG, "block %p already used on %d other streams", ptr,
                         DEFER_EVENTS);
        else if (i == rc->n)
            rc->tags[rc->n++] = tag;
    }
    ss_unlock(ss);
    return st;
}

gpool_status gp_stream_wait(gpool_t *pool, uintptr_t tag)
{
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = sync_tag(pool, tag);
    gp_dc_leave(&pool->dc, pushed);
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuStreamSynchronize");
}

int gp_stream_defer_free(gpool_t *pool, void *ptr, uintptr_t tag, const gp_block_ref *ref,
                         gpool_status *st)
{
    gp_streams *ss = pool->streams;
    *st = GPOOL_OK;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return 0;
    if (!ref->live) return 0; /* not a live block: the plain path reports it */
    uintptr_t btag = ref->tag;
    size_t bsize = ref->size, breq = ref->requested;
    ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr);
    if (!rc) {
        ss_unlock(ss);
        return 0;
    }
    if (rc->deferred) {
        ss_unlock(ss);
        *st = gp_fail(GPOOL_ERR_INVALID_POINTER, "%p: double free (its free is pending)", ptr);
        return 1;
    }
    if (ss->ndef == ss->cap_def) {
        size_t cap = ss->cap_def ? ss->cap_def * 2 : 16;
        deferred_free *nd = realloc(ss->def, cap * sizeof *nd);
        if (!nd) {
            ss_unlock(ss);
            *st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory deferring a free");
            return 1;
        }
        ss->def = nd;
        ss->cap_def = cap;
    }
    stream_rec *r = rec_get(ss, tag);
    deferred_free d = {.ptr = ptr,
                       .kind = GPOOL_MEM_DEVICE,
                       .size = bsize,
                       .requested = breq,
                       .tag = tag,
                       .seq = r ? r->seq : UINT64_MAX};
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    /* the streams it was used on, and the one it was allocated on (the memory may have been
     * handed out while that stream's earlier work on it was still queued) */
    uintptr_t streams[DEFER_EVENTS + 1];
    size_t ns = 0;
    for (size_t i = 0; i < rc->n; i++)
        if (rc->tags[i] != tag) streams[ns++] = rc->tags[i];
    int listed = btag == tag;
    for (size_t i = 0; i < ns; i++)
        listed |= streams[i] == btag;
    if (!listed) streams[ns++] = btag;
    for (size_t i = 0; i < ns; i++) {
        CUevent ev;
        if (event_get(pool, &ev) != CUDA_SUCCESS) {
            /* cannot track it: wait for that stream now instead */
            if (sync_tag(pool, streams[i]) != CUDA_SUCCESS) d.need_sync = 1;
            continue;
        }
        if (record_on(pool, ev, streams[i])) {
            event_put(pool, ev);
            if (sync_tag(pool, streams[i]) != CUDA_SUCCESS) d.need_sync = 1;
            continue;
        }
        d.ev[d.nev++] = ev;
    }
    gp_dc_leave(&pool->dc, pushed);
    rc->deferred = 1; /* the entry stays until the free completes */
    def_push(ss, &d);
    ss_unlock(ss);
    return 1;
}

/* Take the deferred blocks whose events completed (all of them with force, after a device
 * synchronize) out of the list (lock held); the caller frees them. Returns how many were put
 * in out[] (at most max). */
static size_t take_deferred(gpool_t *pool, int force, deferred_free *out, size_t max)
{
    gp_streams *ss = pool->streams;
    size_t k = 0, got = 0;
    for (size_t i = 0; i < ss->ndef; i++) {
        deferred_free *d = &ss->def[i];
        size_t done = 0;
        for (size_t e = 0; e < d->nev && got < max; e++)
            done += force || GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                                    pool->dc.drv->cuEventQuery(d->ev[e])) == CUDA_SUCCESS;
        if (got == max || done < d->nev || (d->need_sync && !force)) {
            ss->def[k++] = *d;
            continue;
        }
        for (size_t e = 0; e < d->nev; e++)
            event_put(pool, d->ev[e]);
        def_uncount(ss, d);
        out[got++] = *d;
        free(gp_ptrmap_del(&ss->recorded, (uintptr_t)d->ptr));
        atomic_fetch_sub(&pool->stream_busy, 1);
    }
    ss->ndef = k;
    return got;
}

/* The real free of a deferred block whose events completed. dev_locked: the caller holds the
 * device arena's lock. */
static void free_done(gpool_t *pool, const deferred_free *d, int dev_locked)
{
    if (d->host) {
        int owned;
        gp_sysmem_free(pool, d->ptr, &owned);
    } else if (dev_locked) {
        gp_arena_free_locked(pool->arena[GPOOL_MEM_DEVICE], d->ptr, d->tag, d->seq);
    } else {
        gp_arena_free(pool->arena[GPOOL_MEM_DEVICE], d->ptr, d->tag, d->seq);
    }
}

/* Lock order: an arena's lock, then ss->lock. Here the caller holds the device arena's. */
static void free_deferred_locked(gpool_t *pool, int force)
{
    deferred_free done[64];
    size_t n;
    do {
        n = take_deferred(pool, force, done, 64);
        for (size_t i = 0; i < n; i++)
            free_done(pool, &done[i], 1);
    } while (n == 64);
}

void gp_stream_process(gpool_t *pool)
{
    gp_streams *ss = pool->streams;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return;
    deferred_free done[64];
    size_t n = 0;
    ss_lock(ss);
    if (ss->ndef) {
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        n = take_deferred(pool, 0, done, 64);
        gp_dc_leave(&pool->dc, pushed);
    }
    ss_unlock(ss);
    for (size_t i = 0; i < n; i++) /* without ss->lock: gp_arena_free takes the arena lock */
        free_done(pool, &done[i], 0);
}

/* Forget the streams that have nothing pending in arena a (lock held, ss->lock held), so a
 * program that creates and destroys streams does not grow the table (or its events). */
static void prune_streams(gpool_t *pool, gp_arena *a)
{
    gp_streams *ss = pool->streams;
    if (ss->nrecs <= 16 || a != pool->arena[GPOOL_MEM_DEVICE]) return;
    uintptr_t tags[64];
    size_t n = gp_arena_dirty_tags(a, tags, 64);
    if (n == 64) return; /* too many to tell cheaply: try again later */
    for (size_t i = 0; i < ss->nrecs;) {
        stream_rec *r = &ss->recs[i];
        int keep = r->ev_live || r->tag == pool->default_tag;
        for (size_t k = 0; k < n && !keep; k++)
            keep = tags[k] == r->tag;
        if (!keep) keep = gp_arena_slots_pending_on(a, r->tag);
        if (keep) {
            i++;
            continue;
        }
        if (r->ev) event_put(pool, r->ev);
        ss->recs[i] = ss->recs[--ss->nrecs];
    }
}

/* ---------- arena hooks ---------- */

void gp_stream_poll(void *owner, gp_arena *a, uintptr_t tag, unsigned flags)
{
    gpool_t *pool = owner;
    gp_streams *ss = pool->streams;
    uintptr_t tags[64];
    size_t n = gp_arena_pending_tags(a, tags, 64);
    ss_lock(ss);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    for (size_t i = 0; i < n; i++) {
        stream_rec *r = rec_get(ss, tags[i]);
        if (!r) break;
        if (r->ev_live && GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                                 pool->dc.drv->cuEventQuery(r->ev)) == CUDA_SUCCESS) {
            r->ev_live = 0;
            gp_arena_clean_locked(a, r->tag, r->ev_seq);
        }
        if (!r->ev_live && other_ctx(pool, r->tag)) {
            /* another context's stream: no event of ours can be recorded there; ask the
             * stream itself (not while it captures: querying captured work is prohibited) */
            if (!gp_stream_capturing(pool, r->tag) &&
                GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                       pool->dc.drv->cuStreamQuery((CUstream)r->tag)) == CUDA_SUCCESS)
                gp_arena_clean_locked(a, r->tag, r->seq++);
            continue;
        }
        if (r->ev_live && !(flags & GPOOL_ALLOC_STREAM_WAIT)) continue;
        if (!r->ev_live && (flags & GP_POLL_QUERY_ONLY) && !gp_arena_poll_fits(a, r->tag))
            continue;      /* nothing there the request fits: no new event for it */
        if (!r->ev_live) { /* cover every free on that stream so far with a fresh event */
            if (!r->ev && event_get(pool, &r->ev) != CUDA_SUCCESS) {
                r->ev = NULL;
                continue;
            }
            if (record_on(pool, r->ev, r->tag)) {              /* the OOM path will synchronize */
                if (!gp_tag_mine(r->tag)) r->foreign_want = 1; /* its owner records it */
                continue;
            }
            r->ev_seq = r->seq++;
            r->ev_live = 1;
        }
        CUresult q = GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(r->ev));
        if (q == CUDA_SUCCESS) {
            r->ev_live = 0;
            gp_arena_clean_locked(a, r->tag, r->ev_seq);
        } else if ((flags & GPOOL_ALLOC_STREAM_WAIT) && r->tag != tag &&
                   GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                          pool->dc.drv->cuStreamWaitEvent((CUstream)gp_tag_stream(tag), r->ev,
                                                          0)) == CUDA_SUCCESS) {
            /* The requesting stream now runs after that work: its ranges become the
             * requester's (reusable by it at once, by others after the requester's next
             * event). Small blocks pending on that stream still wait for the real event. */
            uintptr_t from = r->tag;
            uint64_t upto = r->ev_seq;
            stream_rec *me = rec_get(ss, tag); /* may move ss->recs: r is not used after */
            if (me) gp_arena_hand_over_locked(a, from, upto, tag, me->seq);
        }
    }
    if (ss->ndef && a == pool->arena[GPOOL_MEM_DEVICE]) free_deferred_locked(pool, 0);
    prune_streams(pool, a);
    gp_dc_leave(&pool->dc, pushed);
    ss_unlock(ss);
}

/* cuCtxSynchronize covers the pool's context only ("blocks until the device has completed
 * all preceding requested tasks" of the current context): streams of other contexts that
 * frees were tagged with are synchronized one by one. */
static gpool_status sync_other_contexts(gpool_t *pool)
{
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    ss_lock(ss);
    for (size_t i = 0; i < ss->nrecs && st == GPOOL_OK; i++) {
        stream_rec *r = &ss->recs[i];
        if (!other_ctx(pool, r->tag)) continue;
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
    ss_unlock(ss);
    return st;
}

static gpool_status stream_sync(gpool_t *pool, gp_arena *a, int force)
{
    gp_streams *ss = pool->streams;
    gp_tcache_flush_all(pool);
    int pending = force || gp_arena_needs_sync(a) ||
                  atomic_load_explicit(&pool->stream_busy, memory_order_relaxed);
    if (!pending) return GPOOL_OK;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    gpool_status st = r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuCtxSynchronize");
    if (st == GPOOL_OK) st = sync_other_contexts(pool);
    if (st == GPOOL_OK) {
        ss_lock(ss);
        for (size_t i = 0; i < ss->nrecs; i++) {
            ss->recs[i].ev_live = 0;
            ss->recs[i].seq++; /* later frees are not covered by this synchronize */
        }
        if (a == pool->arena[GPOOL_MEM_DEVICE]) free_deferred_locked(pool, 1);
        gp_arena_synced_locked(a);
        prune_streams(pool, a);
        ss_unlock(ss);
    }
    gp_dc_leave(&pool->dc, pushed);
    return st;
}

gpool_status gp_stream_sync(void *owner, gp_arena *a)
{
    return stream_sync(owner, a, 0);
}

gpool_status gp_stream_sync_all(gpool_t *pool, gp_arena *a)
{
    return stream_sync(pool, a, 1);
}

void gp_stream_deferred(gpool_t *pool, gpool_mem_kind kind, uint64_t *count, uint64_t *bytes,
                        uint64_t *requested)
{
    gp_streams *ss = pool->streams;
    *count = *bytes = *requested = 0;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return;
    ss_lock(ss);
    *count = ss->def_n[kind]; /* kept by def_push / def_uncount: no walk */
    *bytes = ss->def_bytes[kind];
    *requested = ss->def_req[kind];
    ss_unlock(ss);
}

/* Host blocks: the CPU may write a block the moment it is handed out again, so even the
 * freeing stream cannot reuse it early. Each host free is queued behind an event on its
 * stream (and on streams recorded for it) and really freed once they completed. */
gpool_status gp_stream_defer_host_free(gpool_t *pool, void *ptr, uintptr_t tag,
                                       const gpool_block_desc *desc)
{
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr);
    if (rc && rc->deferred) {
        ss_unlock(ss);
        return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p: double free (its free is pending)", ptr);
    }
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc || gp_ptrmap_put(&ss->recorded, (uintptr_t)ptr, rc) != 0) {
            free(rc);
            rc = NULL;
        } else {
            atomic_fetch_add(&pool->stream_busy, 1);
        }
    }
    if (rc && ss->ndef == ss->cap_def) {
        size_t cap = ss->cap_def ? ss->cap_def * 2 : 16;
        deferred_free *nd = realloc(ss->def, cap * sizeof *nd);
        if (nd) {
            ss->def = nd;
            ss->cap_def = cap;
        }
    }
    deferred_free d = {.ptr = ptr,
                       .host = 1,
                       .kind = desc->kind,
                       .size = desc->size,
                       .requested = desc->requested_size,
                       .tag = tag};
    int ok = rc && ss->ndef < ss->cap_def;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    uintptr_t streams[DEFER_EVENTS + 2];
    size_t ns = 0;
    streams[ns++] = tag;
    for (size_t i = 0; rc && i < rc->n; i++)
        if (rc->tags[i] != tag) streams[ns++] = rc->tags[i];
    /* and the stream it was allocated on, as for device blocks: its queued copies may still
     * read or write the block when it is freed on another stream */
    uintptr_t atag = (uintptr_t)desc->stream;
    int listed = 0;
    for (size_t i = 0; i < ns; i++)
        listed |= streams[i] == atag;
    if (!listed) streams[ns++] = atag;
    for (size_t i = 0; ok && i < ns; i++) {
        CUevent ev;
        if (event_get(pool, &ev) != CUDA_SUCCESS) {
            ok = 0;
        } else if (record_on(pool, ev, streams[i])) {
            event_put(pool, ev);
            ok = 0;
        } else {
            d.ev[d.nev++] = ev;
        }
    }
    int done = ok;
    for (size_t e = 0; ok && e < d.nev; e++) /* idle streams: free at once */
        done &= GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(d.ev[e])) ==
                CUDA_SUCCESS;
    if (done) {
        for (size_t e = 0; e < d.nev; e++)
            event_put(pool, d.ev[e]);
        free(gp_ptrmap_del(&ss->recorded, (uintptr_t)ptr));
        atomic_fetch_sub(&pool->stream_busy, 1);
    } else if (ok) {
        rc->deferred = 1;
        def_push(ss, &d);
    } else { /* could not track it: wait for the streams now, then free */
        for (size_t e = 0; e < d.nev; e++)
            event_put(pool, d.ev[e]);
        for (size_t i = 0; i < ns && st == GPOOL_OK; i++) {
            CUresult r = sync_tag(pool, streams[i]);
            if (r != CUDA_SUCCESS) st = gp_cu_fail(r, "cuStreamSynchronize (host free)");
        }
        if (rc) {
            free(gp_ptrmap_del(&ss->recorded, (uintptr_t)ptr));
            atomic_fetch_sub(&pool->stream_busy, 1);
        }
    }
    gp_dc_leave(&pool->dc, pushed);
    ss_unlock(ss);
    if ((done || !ok) && st == GPOOL_OK) {
        int owned;
        st = gp_sysmem_free(pool, ptr, &owned);
    }
    return st;
}

size_t gp_stream_drain(gpool_t *pool)
{
    gp_streams *ss = pool->streams;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return 0;
    deferred_free done[64];
    size_t n, total = 0;
    do {
        ss_lock(ss);
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        int synced = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize()) ==
                     CUDA_SUCCESS;
        n = take_deferred(pool, synced, done, 64);
        gp_dc_leave(&pool->dc, pushed);
        ss_unlock(ss);
        for (size_t i = 0; i < n; i++)
            free_done(pool, &done[i], 0);
        total += n;
    } while (n == 64);
    return total;
}
