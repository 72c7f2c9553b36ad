/* The stream-reuse rule, stated here once (the rest of the library points here; stream.c is
 * the event clock the rule asks: "is this stream position done?", record, wait, synchronize;
 * arena.c keeps the ranges and slots pending on a stream, decides when to ask and about which
 * streams, and applies the answers). The flow is one way: the device arena calls down through
 * gp_stream_reuse_ops (arena.h gp_reuse_ops) under its lock -- poll, claim, sync, frees_done,
 * forget, and the queries position and may_drive -- and each call returns what it found
 * (gp_reuse_step: a stream's work done up to a position, or handed over to the requester;
 * gp_reuse_free: a deferred free that completed); nothing here calls the arena back from
 * inside those calls. Lock order: the arena's lock, then ss->lock (taken inside each call).
 * Which freed memory may go to which stream, and when:
 *  1. Own stream at once: a block freed on stream S is reusable at once by requests on S
 *     (stream order makes that safe). Its free range gets a mark: (S, the position (seq) of
 *     the free, the span of the block); a slot freed into its own slab's stream is free at once.
 *     Free ranges coalesce whatever streams' frees they hold (with stream_reuse = wait; up to
 *     GP_MARKS streams a range, their marks joined: a span and the latest position per
 *     stream), so placement sees the free space as one stream would; with stream_reuse = events
 *     only ranges marked by the same streams coalesce. A request on S may use the addresses of
 *     a range that meet no other stream's span on a backed page (heap.c place_low).
 *  2. Other streams after an event: S's marks up to a position drop (their addresses turn
 *     clean for every stream) once an event recorded on S at or after that position has
 *     completed (a clean step, applied by the arena). One event per stream covers every free
 *     up to its position, and events are recorded only when a request would otherwise split a
 *     free range or need fresh pages (the arena's poll, gp_stream_poll), so one stream records
 *     none. A small block freed on
 *     another stream than its slab's is a pending slot until then.
 *  3. Cross-stream frees wait on the allocating stream too: a large block freed on another
 *     stream than it was allocated on is noted as used on the allocating stream, so its free
 *     is deferred until events on both complete (gp_stream_cross_free).
 *  4. gpool_record_stream's extra streams: a block used on other streams is freed only once
 *     events recorded on each of them complete (the deferred frees below), then as in 1.
 *  5. GPOOL_ALLOC_STREAM_WAIT hand-over: a request may make its stream wait for another
 *     stream's pending event (cuStreamWaitEvent) instead of waiting for it to complete; that
 *     stream's marks up to the event become the requester's (a hand-over step, applied by the
 *     arena):
 *     reusable by it at once, by others after its own next event. Pending slots still wait.
 *     Without the flag, gpool_config.stream_reuse = wait (the default) makes the same
 *     hand-over for each stream T whose mark is on the best place for a large request over
 *     all free ranges, marks ignored (cached pages first, then the smallest range), when that
 *     place is on cached pages and the best place the request may use now needs fresh pages,
 *     or would cut a cached run (or, both on fresh pages, a range) at least 16 times the best
 *     place's size, or lies on the frontier of the backed memory (arena.c claim, heap.c
 *     gp_heap_claim; here gp_stream_claim): an event recorded on T now covers all of T's frees (T's
 * own event when none is live, else a spare one for this wait alone, so that T's live event is
 *     never moved later), queried first -- done, T's marks drop; not done, the requester waits
 *     on it and takes T's marks. As cuMemAllocAsync with
 *     CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, its default ("Allow cuMemAllocAsync
 *     to insert new stream dependencies in order to establish the stream ordering required to
 *     reuse a piece of memory released by cuMemFreeAsync"). Never on a capturing stream, nor
 *     with a stream of another context. stream_reuse = events: never.
 *  6. Single-stream mode: while one stream is all the arena has seen, its frees are clean at
 *     once (no mark) and no event is recorded. The first request on a second stream marks the
 *     clean ranges' backed pages as pending on the first stream at position 0 (any event
 *     recorded on it from then on covers them; never-backed space holds nothing work touches
 *     and stays unmarked: heap.c mark_backed); from then on every free is marked by its stream
 *     (arena.c free_tag).
 *  7. Memory short: a device-wide synchronize (gp_stream_sync; the arena then cleans
 *     everything) makes everything clean. Freed
 *     memory that queued work may still touch, even clean, is not unmapped before one
 *     (frees_since_sync, gp_arena_note_queued_use; pages under marked ranges are pinned:
 *     gp_heap_pin_dirty). */
#include <stdlib.h>
#include <string.h>

#include "bad_pointer.h"
#include "error.h"
#include "stream_internal.h"

/* ---------- frees used on several streams ---------- */

/* A device block freed on another stream than the one it was allocated on: the memory may
 * still be waiting for work queued on the allocating stream before the block was handed out
 * (stream-ordered reuse of that stream's own frees), which the freeing stream does not wait
 * for. So the free also waits for the allocating stream, as if the block had been recorded
 * on it. Returns 1 when the free went that way (status in *st). */
int gp_stream_cross_free(gpool_t *pool, void *ptr, uintptr_t tag, const gp_block_ref *ref,
                         gpool_status *st)
{
    /* an allocating stream released since (gpool_stream_release) is waited for through its
     * retired tag, never by its handle; done already, it needs no wait */
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    uintptr_t at = gp_ss_alias(ss, ref->tag);
    int done = gp_tag_retired(at) && gp_ss_retired_done(ss, at);
    gp_ss_unlock(ss);
    if (done) return gp_stream_defer_free(pool, ptr, tag, ref, st);
    if (gp_stream_record(pool, ptr, tag, at) != GPOOL_OK) {
        /* cannot track one more stream for it: wait for the allocating stream now */
        gp_clear_error();
        *st = gp_stream_wait(pool, at);
        return *st != GPOOL_OK;
    }
    return gp_stream_defer_free(pool, ptr, tag, ref, st);
}

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

gpool_status gp_stream_record(gpool_t *pool, void *ptr, uintptr_t alloc_tag, uintptr_t tag)
{
    if (tag == alloc_tag) return GPOOL_OK;
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    gp_ss_lock(ss);
    /* a stream named by the caller is alive: a released one's value now names a new stream */
    if (!gp_tag_retired(tag)) gp_ss_alias_forget(ss, tag);
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
        st = gp_bad_pointer(ptr, GP_PTR_PENDING, GPOOL_MEM_AUTO, 0);
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
    gp_ss_unlock(ss);
    return st;
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
    gp_ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr);
    if (!rc) {
        gp_ss_unlock(ss);
        return 0;
    }
    if (rc->deferred) {
        gp_ss_unlock(ss);
        *st = gp_bad_pointer(ptr, GP_PTR_PENDING, GPOOL_MEM_AUTO, 0);
        return 1;
    }
    if (ss->ndef == ss->cap_def) {
        size_t cap = ss->cap_def ? ss->cap_def * 2 : 16;
        deferred_free *nd = realloc(ss->def, cap * sizeof *nd);
        if (!nd) {
            gp_ss_unlock(ss);
            *st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory deferring a free");
            return 1;
        }
        ss->def = nd;
        ss->cap_def = cap;
    }
    stream_rec *r = gp_ss_rec(ss, tag);
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
    /* released streams are named by their retired tags; those whose work is done need no
     * event (and have no stream to record one on) */
    btag = gp_ss_alias(ss, btag);
    for (size_t i = 0; i < rc->n; i++)
        if (rc->tags[i] != tag &&
            !(gp_tag_retired(rc->tags[i]) && gp_ss_retired_done(ss, rc->tags[i])))
            streams[ns++] = rc->tags[i];
    int listed = btag == tag || (gp_tag_retired(btag) && gp_ss_retired_done(ss, btag));
    for (size_t i = 0; i < ns; i++)
        listed |= streams[i] == btag;
    if (!listed) streams[ns++] = btag;
    for (size_t i = 0; i < ns; i++) {
        CUevent ev;
        if (gp_ss_event_get(pool, &ev) != CUDA_SUCCESS) {
            /* cannot track it: wait for that stream now instead */
            if (gp_ss_sync_tag(pool, streams[i]) != CUDA_SUCCESS) d.need_sync = 1;
            continue;
        }
        if (gp_ss_record_on(pool, ev, streams[i])) {
            gp_ss_event_put(pool, ev);
            if (gp_ss_sync_tag(pool, streams[i]) != CUDA_SUCCESS) d.need_sync = 1;
            continue;
        }
        d.ev[d.nev++] = ev;
    }
    gp_dc_leave(&pool->dc, pushed);
    rc->deferred = 1; /* the entry stays until the free completes */
    def_push(ss, &d);
    gp_ss_unlock(ss);
    return 1;
}

/* Take the deferred blocks whose events completed (all of them with force, after a device
 * synchronize) out of the list (lock held); the caller frees them. Returns how many were put
 * in out[] (at most max). */
static size_t take_deferred(gpool_t *pool, int force, int device_only, deferred_free *out,
                            size_t max)
{
    gp_streams *ss = pool->streams;
    size_t k = 0, got = 0;
    for (size_t i = 0; i < ss->ndef; i++) {
        deferred_free *d = &ss->def[i];
        size_t done = 0;
        for (size_t e = 0; e < d->nev && got < max && !(device_only && d->host); e++)
            done += force || GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                                    pool->dc.drv->cuEventQuery(d->ev[e])) == CUDA_SUCCESS;
        if (got == max || (device_only && d->host) || done < d->nev || (d->need_sync && !force)) {
            ss->def[k++] = *d;
            continue;
        }
        for (size_t e = 0; e < d->nev; e++)
            gp_ss_event_put(pool, d->ev[e]);
        def_uncount(ss, d);
        out[got++] = *d;
        free(gp_ptrmap_del(&ss->recorded, (uintptr_t)d->ptr));
        atomic_fetch_sub(&pool->stream_busy, 1);
    }
    ss->ndef = k;
    return got;
}

/* A deferred device block whose events completed, as the arena frees it (gp_reuse_free). */
static gp_reuse_free free_of(const deferred_free *d)
{
    /* freed on a stream released since: its events include one recorded on that stream at the
     * release, so all the work that could touch it is done; the tag is the entry's own, so
     * cleaning it cleans this block only */
    int retired = gp_tag_retired(d->tag);
    return (gp_reuse_free){
        .ptr = d->ptr, .tag = d->tag, .seq = retired ? 0 : d->seq, .clean = retired};
}

/* The deferred device blocks whose events completed (all of them with synced) into ans->frees,
 * for the device arena to free (host blocks wait for the host kind's next
 * gp_stream_take_done). Lock held, context entered; the caller holds the device arena's lock
 * (lock order: an arena's lock, then ss->lock). */
static void take_done(gpool_t *pool, int synced, gp_reuse_answer *ans)
{
    deferred_free done[GP_REUSE_FREES];
    size_t n = take_deferred(pool, synced, 1, done, GP_REUSE_FREES);
    for (size_t i = 0; i < n; i++)
        ans->frees[ans->nfrees++] = free_of(&done[i]);
    ans->more = n == GP_REUSE_FREES;
}

size_t gp_stream_take_done(gpool_t *pool, int sync, gp_done_free *out, size_t max)
{
    gp_streams *ss = pool->streams;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return 0;
    deferred_free done[64];
    size_t n = 0;
    if (max > 64) max = 64;
    gp_ss_lock(ss);
    if (ss->ndef) {
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        int synced = sync && GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                                    pool->dc.drv->cuCtxSynchronize()) == CUDA_SUCCESS;
        n = take_deferred(pool, synced, 0, done, max);
        gp_dc_leave(&pool->dc, pushed);
    }
    gp_ss_unlock(ss);
    for (size_t i = 0; i < n; i++)
        out[i] = (gp_done_free){.host = done[i].host, .f = free_of(&done[i])};
    return n;
}

/* Records kept before forget is asked for (a program that creates and destroys streams must not
 * grow the table, or its events, but a few streams are cheaper kept). */
#define KEEP_RECS 16

/* Lock held: 1 when the arena should say which streams still have anything pending. */
static int wants_forget(gp_streams *ss)
{
    return ss->nrecs > KEEP_RECS;
}

void gp_stream_forget(void *ctx, const uintptr_t *pending, size_t n)
{
    gpool_t *pool = ctx;
    gp_streams *ss = pool->streams;
    if (n == GP_REUSE_STREAMS) return; /* too many to tell cheaply: try again later */
    int pushed = 0, entered = 0;
    gp_ss_lock(ss);
    size_t i = wants_forget(ss) ? 0 : ss->nrecs; /* checked once, as records go */
    while (i < ss->nrecs) {
        stream_rec *r = &ss->recs[i];
        int keep = r->ev_live || r->tag == pool->default_tag;
        for (size_t k = 0; k < n && !keep; k++)
            keep = pending[k] == r->tag;
        if (keep) {
            i++;
            continue;
        }
        if (r->ev) {
            if (!entered) gp_dc_enter(&pool->dc, &pushed); /* the event may be destroyed */
            entered = 1;
            gp_ss_event_put(pool, r->ev);
        }
        ss->recs[i] = ss->recs[--ss->nrecs];
    }
    if (entered) gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
}

/* A clean step: stream from's work is done up to position upto. */
static gp_reuse_step done_step(uintptr_t from, uint64_t upto)
{
    return (gp_reuse_step){.from = from, .upto = upto};
}

/* A hand-over step: stream to (the requester) waits for from's work up to upto; NULL record
 * (out of memory): no step, and the wait is harmless. Lock held. */
static size_t hand_over(gp_streams *ss, uintptr_t from, uint64_t upto, uintptr_t to,
                        gp_reuse_step *out)
{
    stream_rec *me = gp_ss_rec(ss, to); /* may move ss->recs: callers use no record after */
    if (!me) return 0;
    *out = (gp_reuse_step){.hand_over = 1, .from = from, .upto = upto, .to = to, .to_seq = me->seq};
    return 1;
}

/* When stream record r's live event has completed: it is no longer live, and its stream's frees
 * up to the event's position are done (a step into out). Returns the steps. Lock held, context
 * entered. */
static size_t live_event_done(gpool_t *pool, stream_rec *r, gp_reuse_step *out)
{
    if (r->ev_live &&
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(r->ev)) == CUDA_SUCCESS) {
        r->ev_live = 0;
        *out = done_step(r->tag, r->ev_seq);
        return 1;
    }
    return 0;
}

/* A request on stream tag whose best place carries a mark of stream from: from's marks are done
 * when an event covering them is, else tag waits for that work and they are handed over (the
 * arena's claim asks once per stream marked there). Lock held, context entered.
 * The wait is on an event recorded now, covering every free on from so far: from's own event,
 * when none is live; else (its live event may predate the frees on that place) a spare event
 * recorded for this wait alone, so from's live event, which the polls query, is never moved
 * later (an event re-recorded at every claim would complete only after the newest work, and
 * the marks it covers would turn clean ever later). Waiting on from's live event instead, as
 * before, handed over only the frees it covered: the place claimed often stayed out of reach. */
static size_t claim(gpool_t *pool, uintptr_t tag, uintptr_t from, gp_reuse_step *out)
{
    gp_streams *ss = pool->streams;
    if (pool->cfg.stream_reuse != GPOOL_STREAM_REUSE_WAIT) return 0;
    /* the checks first: gp_ss_other_ctx may add a record, which may move ss->recs */
    if (!gp_tag_mine(tag) || gp_ss_other_ctx(pool, tag) || gp_ss_other_ctx(pool, from)) return 0;
    stream_rec *r = gp_ss_rec(ss, from);
    if (!r) return 0;
    size_t n = live_event_done(pool, r, out);
    if (gp_tag_retired(from)) {    /* a released stream's frees: its event is the only one */
        if (!r->ev_live) return n; /* no event (only a synchronize cleans them), or done */
        if (GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                   pool->dc.drv->cuStreamWaitEvent((CUstream)gp_tag_stream(tag), r->ev, 0)) !=
            CUDA_SUCCESS)
            return n;
        return n + hand_over(ss, from, UINT64_MAX, tag, out + n);
    }
    CUevent ev;
    if (r->ev_live) { /* a spare event, for this wait alone */
        if (gp_ss_event_get(pool, &ev) != CUDA_SUCCESS) return n;
    } else {
        if (!r->ev && gp_ss_event_get(pool, &r->ev) != CUDA_SUCCESS) {
            r->ev = NULL;
            return n;
        }
        ev = r->ev;
    }
    if (gp_ss_record_on(pool, ev, from)) {
        if (ev != r->ev) gp_ss_event_put(pool, ev);
        return n;
    }
    /* ev covers every free on from so far, up to position upto; later frees get a later one */
    uint64_t upto = r->seq++;
    CUresult q = GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(ev)), w = q;
    if (ev == r->ev) {
        r->ev_seq = upto;
        r->ev_live = q != CUDA_SUCCESS;
    }
    if (q != CUDA_SUCCESS)
        w = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                   pool->dc.drv->cuStreamWaitEvent((CUstream)gp_tag_stream(tag), ev, 0));
    /* the wait took the event's record as it is now: a spare can go back at once */
    if (ev != r->ev) gp_ss_event_put(pool, ev);
    if (q == CUDA_SUCCESS) {
        out[n] = done_step(from, upto);
        return n + 1;
    }
    if (w != CUDA_SUCCESS) return n;
    return n + hand_over(ss, from, upto, tag, out + n);
}

size_t gp_stream_claim(void *ctx, const gp_reuse_req *req, uintptr_t from, gp_reuse_step *out)
{
    gpool_t *pool = ctx;
    gp_streams *ss = pool->streams;
    int pushed;
    gp_ss_lock(ss);
    gp_dc_enter(&pool->dc, &pushed);
    size_t n = claim(pool, req->tag, from, out);
    gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
    return n;
}

/* Stream r of a poll for the request req (p: what the arena holds pending on it): at most two
 * steps into out. Lock held, context entered. */
static size_t poll_one(gpool_t *pool, const gp_reuse_req *req, stream_rec *r,
                       const gp_reuse_pending *p, gp_reuse_step *out)
{
    gp_streams *ss = pool->streams;
    uintptr_t tag = req->tag;
    unsigned flags = req->flags;
    size_t n = live_event_done(pool, r, out);
    /* a mark that fits the request is left once the work found done is cleaned */
    int fits = p->fits && (!n || p->fit_seq > out[0].upto);
    if (!r->ev_live && gp_ss_other_ctx(pool, r->tag)) {
        /* another context's stream: no event of ours can be recorded there; ask the
         * stream itself (not while it captures: querying captured work is prohibited) */
        if (!gp_stream_capturing(pool, r->tag) &&
            GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuStreamQuery((CUstream)r->tag)) ==
                CUDA_SUCCESS)
            out[n++] = done_step(r->tag, r->seq++);
        return n;
    }
    if (r->ev_live && !(flags & GPOOL_ALLOC_STREAM_WAIT)) return n;
    if (!r->ev_live && (flags & GP_POLL_QUERY_ONLY) && !fits)
        return n;      /* nothing there the request fits: no new event for it */
    if (!r->ev_live) { /* cover every free on that stream so far with a fresh event */
        if (!r->ev && gp_ss_event_get(pool, &r->ev) != CUDA_SUCCESS) {
            r->ev = NULL;
            return n;
        }
        if (gp_ss_record_on(pool, r->ev, r->tag)) {        /* the OOM path will synchronize */
            if (!gp_tag_mine(r->tag)) r->foreign_want = 1; /* its owner records it */
            return n;
        }
        r->ev_seq = r->seq++;
        r->ev_live = 1;
    }
    CUresult q = GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(r->ev));
    if (q == CUDA_SUCCESS) {
        r->ev_live = 0;
        out[n++] = done_step(r->tag, r->ev_seq);
    } else if ((flags & GPOOL_ALLOC_STREAM_WAIT) && r->tag != tag &&
               GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM,
                      pool->dc.drv->cuStreamWaitEvent((CUstream)gp_tag_stream(tag), r->ev, 0)) ==
                   CUDA_SUCCESS) {
        /* The requesting stream now runs after that work: its ranges become the requester's
         * (reusable by it at once, by others after the requester's next event). Small blocks
         * pending on that stream still wait for the real event. */
        n += hand_over(ss, r->tag, r->ev_seq, tag, out + n);
    }
    return n;
}

void gp_stream_poll(void *ctx, const gp_reuse_req *req, const gp_reuse_pending *p, size_t n,
                    gp_reuse_answer *ans)
{
    gpool_t *pool = ctx;
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    for (size_t i = 0; i < n; i++) {
        stream_rec *r = gp_ss_rec(ss, p[i].tag);
        if (!r) break;
        ans->nsteps += poll_one(pool, req, r, &p[i], ans->steps + ans->nsteps);
    }
    if (ss->ndef) take_done(pool, 0, ans);
    ans->forget = wants_forget(ss);
    gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
}

void gp_stream_frees_done(void *ctx, int synced, gp_reuse_answer *ans)
{
    gpool_t *pool = ctx;
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    take_done(pool, synced, ans);
    gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
}

gpool_status gp_stream_sync(void *ctx, int pending, int others, int *synced, gp_reuse_answer *ans)
{
    gpool_t *pool = ctx;
    gp_streams *ss = pool->streams;
    gp_tcache_flush_all(pool);
    *synced = 0;
    if (!pending && !atomic_load_explicit(&pool->stream_busy, memory_order_relaxed))
        return GPOOL_OK;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
    gpool_status st = r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuCtxSynchronize");
    if (st == GPOOL_OK) {
        st = gp_ss_sync_other_contexts(pool);
        if (st != GPOOL_OK && !others) {
            gp_clear_error();
            st = GPOOL_OK;
        }
    }
    if (st == GPOOL_OK) {
        gp_ss_lock(ss);
        for (size_t i = 0; i < ss->nrecs; i++) {
            ss->recs[i].ev_live = 0;
            ss->recs[i].seq++; /* later frees are not covered by this synchronize */
        }
        take_done(pool, 1, ans);
        ans->forget = wants_forget(ss);
        gp_ss_unlock(ss);
        *synced = 1;
    }
    gp_dc_leave(&pool->dc, pushed);
    return st;
}

const gp_reuse_ops gp_stream_reuse_ops = {
    .may_drive = gp_stream_may_drive,
    .position = gp_stream_position,
    .poll = gp_stream_poll,
    .claim = gp_stream_claim,
    .sync = gp_stream_sync,
    .frees_done = gp_stream_frees_done,
    .forget = gp_stream_forget,
    .retired_tag = gp_stream_retired_tag,
    .release = gp_stream_release_rule,
};

int gp_stream_free_pending(gpool_t *pool, uintptr_t ptr)
{
    gp_streams *ss = pool->streams;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return 0;
    gp_ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, ptr);
    int pending = rc && rc->deferred;
    gp_ss_unlock(ss);
    return pending;
}

void gp_stream_deferred(gpool_t *pool, gpool_mem_kind kind, uint64_t *count, uint64_t *bytes,
                        uint64_t *requested)
{
    gp_streams *ss = pool->streams;
    *count = *bytes = *requested = 0;
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return;
    gp_ss_lock(ss);
    *count = ss->def_n[kind]; /* kept by def_push / def_uncount: no walk */
    *bytes = ss->def_bytes[kind];
    *requested = ss->def_req[kind];
    gp_ss_unlock(ss);
}

/* 1 when rtag is a released stream's retired tag whose release event is known complete, or
 * completes now (one query; its record is left for sweep_retired). Lock held, context
 * entered. */
static int retired_complete(gpool_t *pool, uintptr_t rtag)
{
    gp_streams *ss = pool->streams;
    if (!gp_tag_retired(rtag)) return 0;
    for (size_t i = 0; i < ss->nrecs; i++) {
        stream_rec *r = &ss->recs[i];
        if (r->tag != rtag) continue;
        return !r->ev_live || GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                                     pool->dc.drv->cuEventQuery(r->ev)) == CUDA_SUCCESS;
    }
    return gp_ss_retired_done(ss, rtag);
}

/* Host blocks: the CPU may write a block the moment it is handed out again, so even the
 * freeing stream cannot reuse it early. Each host free is queued behind an event on its
 * stream (and on streams recorded for it) and really freed once they completed. */
gpool_status gp_stream_defer_host_free(gpool_t *pool, void *ptr, uintptr_t tag,
                                       const gpool_block_desc *desc, int *free_now)
{
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    *free_now = 0;
    gp_ss_lock(ss);
    recorded *rc = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr);
    if (rc && rc->deferred) {
        gp_ss_unlock(ss);
        return gp_bad_pointer(ptr, GP_PTR_PENDING, GPOOL_MEM_AUTO, 0);
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
    /* recorded streams released since are named by retired tags: no stream to record on,
     * and none needed once the release's event completed */
    for (size_t i = 0; rc && i < rc->n; i++)
        if (rc->tags[i] != tag && !retired_complete(pool, rc->tags[i])) streams[ns++] = rc->tags[i];
    /* and the stream it was allocated on, as for device blocks: its queued copies may still
     * read or write the block when it is freed on another stream */
    uintptr_t atag = (uintptr_t)desc->stream;
    int listed = 0;
    for (size_t i = 0; i < ns; i++)
        listed |= streams[i] == atag;
    if (!listed) streams[ns++] = atag;
    for (size_t i = 0; ok && i < ns; i++) {
        CUevent ev;
        if (gp_ss_event_get(pool, &ev) != CUDA_SUCCESS) {
            ok = 0;
        } else if (gp_ss_record_on(pool, ev, streams[i])) {
            gp_ss_event_put(pool, ev);
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
            gp_ss_event_put(pool, d.ev[e]);
        free(gp_ptrmap_del(&ss->recorded, (uintptr_t)ptr));
        atomic_fetch_sub(&pool->stream_busy, 1);
    } else if (ok) {
        rc->deferred = 1;
        def_push(ss, &d);
    } else { /* could not track it: wait for the streams now, then free */
        for (size_t e = 0; e < d.nev; e++)
            gp_ss_event_put(pool, d.ev[e]);
        for (size_t i = 0; i < ns && st == GPOOL_OK; i++) {
            CUresult r = gp_ss_sync_tag(pool, streams[i]);
            if (r != CUDA_SUCCESS) st = gp_cu_fail(r, "cuStreamSynchronize (host free)");
        }
        /* not freed when the wait failed: the block stays live with its recorded streams */
        if (rc && (st == GPOOL_OK || !rc->n)) {
            free(gp_ptrmap_del(&ss->recorded, (uintptr_t)ptr));
            atomic_fetch_sub(&pool->stream_busy, 1);
        }
    }
    gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
    *free_now = (done || !ok) && st == GPOOL_OK;
    return st;
}
