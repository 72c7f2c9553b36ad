/* gpool_stream_release: the program is about to destroy a stream. What is pending on it moves
 * onto an event recorded on it now -- legal before the destroy, and enough: cuda.h,
 * cuStreamDestroy, "in case the device is still doing work in the stream when
 * cuStreamDestroy() is called, the function will return immediately and the resources
 * associated with the stream will be released automatically once the device has completed all
 * work", so the event completes once that work has -- under a retired tag (stream.c) that no
 * stream handle has, so no later driver call names the destroyed stream and a new stream that
 * gets the old handle value starts with none of its marks. The stream's record goes; its
 * cached memory is the shared pool's again, reusable by every stream once the event completed
 * (the reuse rule's polls and claims, reuse.c, see the retired tag like any stream's). */
#include <string.h>

#include "error.h"
#include "kind_host.h"
#include "stream_internal.h"

/* Drop tag's record (lock held): its event goes back to the spares. 1 when it had one. */
static int drop_rec(gpool_t *pool, uintptr_t tag)
{
    gp_streams *ss = pool->streams;
    for (size_t i = 0; i < ss->nrecs; i++) {
        if (ss->recs[i].tag != tag) continue;
        if (ss->recs[i].ev) gp_ss_event_put(pool, ss->recs[i].ev);
        ss->recs[i] = ss->recs[--ss->nrecs];
        return 1;
    }
    return 0;
}

/* Blocks recorded as used on tag (gpool_record_stream) and not freed yet: their free waits
 * for rtag instead (lock held). How many. */
static size_t retag_recorded(gp_streams *ss, uintptr_t tag, uintptr_t rtag)
{
    size_t n = 0;
    for (size_t i = 0; i < ss->recorded.cap; i++) {
        recorded *rc = ss->recorded.keys[i] ? ss->recorded.vals[i] : NULL;
        for (size_t k = 0; rc && k < rc->n; k++)
            if (rc->tags[k] == tag) {
                rc->tags[k] = rtag;
                n++;
            }
    }
    return n;
}

/* Deferred device frees made on tag (reusable on tag at once when they complete): each also
 * waits for an event recorded on tag now, and gets a retired tag of its own, cleaned when it
 * completes (reuse.c free_done). Lock held, context entered. */
static void retag_deferred(gpool_t *pool, uintptr_t tag, int synced)
{
    gp_streams *ss = pool->streams;
    for (size_t i = 0; i < ss->ndef; i++) {
        deferred_free *d = &ss->def[i];
        if (d->host || d->tag != tag) continue;
        d->tag = gp_ss_retired_tag();
        d->seq = 0;
        if (synced) continue;
        CUevent ev;
        if (d->nev == DEFER_EVENTS + 2 || gp_ss_event_get(pool, &ev) != CUDA_SUCCESS) {
            d->need_sync = 1;
            continue;
        }
        if (gp_ss_record_on(pool, ev, tag)) {
            gp_ss_event_put(pool, ev);
            d->need_sync = 1;
            continue;
        }
        d->ev[d->nev++] = ev;
    }
}

/* Retired tags whose event completed need no record any more: their marks turn clean and the
 * record goes, its event back to the spares (lock held, context entered, the arena's lock
 * held). Queries stop after a few events not done yet, so that many streams still working
 * cost little, while a backlog that completed goes in one call. */
#define SWEEP_MISSES 4
static void sweep_retired(gpool_t *pool, gp_arena *a)
{
    gp_streams *ss = pool->streams;
    int misses = 0;
    for (size_t i = 0; i < ss->nrecs;) {
        stream_rec *r = &ss->recs[i];
        if (!gp_tag_retired(r->tag)) {
            i++;
            continue;
        }
        if (r->ev_live && misses < SWEEP_MISSES) {
            if (GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(r->ev)) ==
                CUDA_SUCCESS) {
                r->ev_live = 0;
                if (a) gp_arena_clean_locked(a, r->tag, UINT64_MAX);
            } else {
                misses++;
            }
        }
        if (r->ev_live) {
            i++;
            continue;
        }
        if (r->ev) gp_ss_event_put(pool, r->ev);
        ss->recs[i] = ss->recs[--ss->nrecs];
    }
}

GPOOL_API gpool_status gpool_stream_release(gpool_t *pool, gpool_stream_t stream)
{
    if (!pool)
        return gp_named(gp_fail(GPOOL_ERR_INVALID_ARG, "pool is NULL"), "gpool_stream_release");
    uintptr_t tag = (uintptr_t)stream;
    if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return gp_named(gp_fail(GPOOL_ERR_INVALID_ARG,
                                "the legacy and per-thread default streams are never destroyed"),
                        "gpool_stream_release");
    if (tag == pool->default_tag)
        return gp_named(gp_fail(GPOOL_ERR_INVALID_ARG,
                                "stream %p is the pool's default stream (gpool_config."
                                "default_stream): destroy the pool before the stream",
                                (void *)stream),
                        "gpool_stream_release");
    /* host frees waiting on it, and host blocks allocated on it, first (the host kinds' lock
     * is taken after ss->lock elsewhere, so not inside it) */
    gpool_status hst = gp_sysmem_stream_release(pool, tag, gp_ss_retired_tag());
    if (hst != GPOOL_OK) hst = gp_named(hst, "gpool_stream_release");
    gp_arena *a = pool->device;
    gp_streams *ss = pool->streams;
    gpool_status st = GPOOL_OK;
    if (a) gp_arena_lock(a); /* lock order: the arena's, then ss->lock */
    gp_ss_lock(ss);
    /* everything pending on the stream moves to a retired tag of its own */
    uintptr_t rtag = gp_ss_retired_tag();
    int known = 0;
    for (size_t i = 0; i < ss->nrecs && !known; i++)
        known = ss->recs[i].tag == tag;
    int moved = a && gp_arena_retire_stream_locked(a, tag, rtag, 0);
    moved |= retag_recorded(ss, tag, rtag) > 0;
    for (size_t i = 0; i < ss->ndef && !moved; i++)
        moved = !ss->def[i].host && ss->def[i].tag == tag;
    if (!known && !moved) { /* the pool never saw it, or has forgotten it: no driver call */
        gp_ss_unlock(ss);
        if (a) gp_arena_unlock(a);
        return hst;
    }
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    int other = known && gp_ss_other_ctx(pool, tag); /* asked while it was alive: cached */
    /* an event on the stream now covers all its work so far; another context's stream (no
     * event of the pool's context can be recorded there) or one that cannot take one is
     * waited for instead */
    CUevent ev = NULL;
    int synced = 0;
    if (moved) {
        if (!other && gp_ss_event_get(pool, &ev) == CUDA_SUCCESS &&
            gp_ss_record_on(pool, ev, tag)) {
            gp_ss_event_put(pool, ev);
            ev = NULL;
        }
        if (!ev) {
            CUresult q = gp_ss_sync_tag(pool, tag);
            synced = q == CUDA_SUCCESS;
            if (!synced) /* its frees stay pending until a device-wide synchronize */
                st = gp_cu_fail(q, "cuStreamSynchronize (gpool_stream_release)");
        }
        retag_deferred(pool, tag, synced);
    }
    drop_rec(pool, tag);
    sweep_retired(pool, a);
    if (synced && a) gp_arena_clean_locked(a, rtag, UINT64_MAX);
    if (ev) {
        stream_rec *r = gp_ss_rec(ss, rtag);
        if (r) {
            r->ev = ev;
            r->ev_seq = 0;
            r->seq = 1;
            r->ev_live = 1;
            r->ctx_known = 1;
        } else { /* no room to track it: wait for it now */
            CUresult q =
                GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventSynchronize(ev));
            gp_ss_event_put(pool, ev);
            if (q == CUDA_SUCCESS && a)
                gp_arena_clean_locked(a, rtag, UINT64_MAX);
            else if (q != CUDA_SUCCESS)
                st = gp_cu_fail(q, "cuEventSynchronize (gpool_stream_release)");
        }
    }
    /* blocks still allocated on it, freed later on another stream, wait for rtag instead */
    if (st == GPOOL_OK) gp_ss_alias_add(ss, tag, rtag);
    gp_dc_leave(&pool->dc, pushed);
    gp_ss_unlock(ss);
    if (a) gp_arena_unlock(a);
    return st == GPOOL_OK ? hst : gp_named(st, "gpool_stream_release");
}
