/* Host frees on the event clock (host_clock.h): per-stream positions and one event per
 * stream, asked only when the host kind polls. Uses the stream clock's primitives
 * (stream_internal.h) to record on a stream: they know which streams cannot take an event of
 * the pool's context (another context's, another thread's per-thread stream, a capturing one),
 * and those are synchronized instead. */
#include "host_clock.h"

#include <pthread.h>

#include "error.h"
#include "stream_internal.h"

/* The slot of stream tag, made (or taken over) if it has none; -1 when the table is full. */
static int slot_of(gp_host_clock *c, uintptr_t tag)
{
    size_t i = 0;
    while (i < c->n && c->s[i].tag != tag)
        i++;
    if (i == c->n) {
        if (c->n == GP_HOST_CLOCKS) {
            /* reuse a stream with nothing waiting and no live event (its events are kept) */
            for (i = 0; i < c->n; i++)
                if (!c->s[i].waiting && !c->s[i].live && !c->s[i].busy && !c->s[i].refs) break;
            if (i == c->n) return -1;
            c->s[i].tag = tag;
            c->s[i].done = c->s[i].next++; /* the old stream's positions mean nothing here */
            c->s[i].sealed = 0;
        } else {
            c->s[c->n] = (gp_host_stream){.tag = tag, .next = 1};
            i = c->n++;
        }
    }
    return (int)i;
}

int gp_host_clock_mark(gp_host_clock *c, uintptr_t tag, gp_host_mark *out)
{
    int k = slot_of(c, tag);
    if (k < 0) return -1;
    size_t i = (size_t)k;
    *out = (gp_host_mark){.clock = (uint16_t)i, .pos = c->s[i].next};
    c->s[i].waiting++; /* until the next recount: a slot with marks is never handed over */
    return 0;
}

void gp_host_clock_recount(gp_host_clock *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->s[i].waiting = 0;
}

/* What one poll learns about one stream, asked without the lock (the stream is busy: no other
 * poll touches its event, and marks only read next). */
typedef struct probe {
    size_t i;
    uintptr_t tag;
    uint64_t reserve; /* a record from now on covers every mark made before: positions < next */
    uint64_t done, ev_pos;
    CUevent ev;
    int live, sealed;
} probe;

static void probe_stream(gpool_t *pool, probe *p)
{
    const gp_driver *d = pool->dc.drv;
    if (p->live) {
        if (GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, d->cuEventQuery(p->ev)) != CUDA_SUCCESS) return;
        p->live = 0;
        if (p->ev_pos > p->done) p->done = p->ev_pos;
        if (p->sealed) p->done = UINT64_MAX; /* a released stream: nothing comes after */
    }
    if (p->done >= p->reserve) return;
    if (!p->ev && GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                         d->cuEventCreate(&p->ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
        p->ev = NULL;
    int failed = 1;
    if (p->ev) {
        gp_streams *ss = pool->streams;
        gp_ss_lock(ss); /* gp_ss_record_on may learn the stream's context into ss */
        failed = gp_ss_record_on(pool, p->ev, p->tag);
        gp_ss_unlock(ss);
    }
    if (failed) {
        /* no event of ours on that stream: wait for it (capturing: it stays pending) */
        if (gp_ss_sync_tag(pool, p->tag) == CUDA_SUCCESS) p->done = p->reserve;
        return;
    }
    if (GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, d->cuEventQuery(p->ev)) == CUDA_SUCCESS) {
        p->done = p->reserve;
    } else {
        p->live = 1;
        p->ev_pos = p->reserve;
    }
}

gpool_status gp_host_clock_poll(gp_host_clock *c, gpool_t *pool, pthread_mutex_t *lock, int force)
{
    gpool_status st = GPOOL_OK;
    probe pr[GP_HOST_CLOCKS];
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        gp_host_stream *h = &c->s[i];
        if (!h->waiting || h->busy) continue;
        h->busy = 1;
        pr[n++] = (probe){.i = i,
                          .tag = h->tag,
                          .reserve = h->next++,
                          .done = h->done,
                          .ev_pos = h->ev_pos,
                          .ev = h->ev,
                          .live = h->live,
                          .sealed = h->sealed};
    }
    if (!n) return GPOOL_OK;
    pthread_mutex_unlock(lock);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    if (force) {
        CUresult r = GP_DRV(pool->dc.cnt, GPOOL_DRV_STREAM, pool->dc.drv->cuCtxSynchronize());
        if (r != CUDA_SUCCESS)
            st = gp_cu_fail(r, "cuCtxSynchronize (host frees waiting on streams)");
        for (size_t k = 0; k < n && r == CUDA_SUCCESS; k++) {
            /* the live event was recorded before: done too (a released stream: for good) */
            pr[k].done = pr[k].sealed ? UINT64_MAX : pr[k].reserve;
            pr[k].live = 0;
        }
    } else {
        for (size_t k = 0; k < n; k++)
            probe_stream(pool, &pr[k]);
    }
    gp_dc_leave(&pool->dc, pushed);
    pthread_mutex_lock(lock);
    for (size_t k = 0; k < n; k++) {
        gp_host_stream *h = &c->s[pr[k].i];
        h->ev = pr[k].ev;
        h->live = pr[k].live;
        h->ev_pos = pr[k].ev_pos;
        if (pr[k].done > h->done) h->done = pr[k].done;
        h->busy = 0;
    }
    return st;
}

gpool_status gp_host_clock_retire(gp_host_clock *c, gpool_t *pool, uintptr_t tag, uintptr_t rtag,
                                  uint64_t need, pthread_mutex_t *lock)
{
    size_t i = 0;
    while (i < c->n && c->s[i].tag != tag)
        i++;
    if (i == c->n && !need) return GPOOL_OK; /* nothing of it here: no driver call */
    int k = i < c->n ? (int)i : slot_of(c, tag);
    gp_host_stream *h = k >= 0 ? &c->s[k] : NULL;
    if (h) {
        h->refs += need;
        h->tag = rtag;
        if (!need && !(h->waiting && h->done < h->next)) return GPOOL_OK;
    }
    /* a poll asking about it now (lock let go) owns its event: wait for the stream instead */
    int own = h && !h->busy;
    uint64_t reserve = 0;
    CUevent ev = NULL;
    if (own) {
        h->busy = 1;
        reserve = h->next++;
        ev = h->ev;
    }
    pthread_mutex_unlock(lock);
    const gp_driver *d = pool->dc.drv;
    int pushed, on_ev = 0;
    gp_dc_enter(&pool->dc, &pushed);
    if (own && !ev &&
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, d->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) !=
            CUDA_SUCCESS)
        ev = NULL;
    if (ev) {
        gp_streams *ss = pool->streams;
        gp_ss_lock(ss);
        on_ev = !gp_ss_record_on(pool, ev, tag);
        gp_ss_unlock(ss);
    }
    CUresult r = on_ev ? CUDA_SUCCESS : gp_ss_sync_tag(pool, tag);
    gp_dc_leave(&pool->dc, pushed);
    pthread_mutex_lock(lock);
    if (own) {
        h->ev = ev;
        h->busy = 0;
        if (on_ev) {
            h->live = 1;
            h->ev_pos = reserve;
            h->sealed = 1;
        }
    }
    if (h && !on_ev && r == CUDA_SUCCESS) { /* synchronized: all its work is done */
        if (own) h->live = 0;
        h->done = UINT64_MAX;
        h->sealed = 1;
    }
    if (r != CUDA_SUCCESS)
        return gp_cu_fail(r, "cuStreamSynchronize (host frees waiting on a released stream)");
    return GPOOL_OK;
}

static gp_host_stream *slot_find(gp_host_clock *c, uintptr_t tag)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->s[i].tag == tag) return &c->s[i];
    return NULL;
}

void gp_host_clock_unref(gp_host_clock *c, uintptr_t rtag)
{
    gp_host_stream *h = slot_find(c, rtag);
    if (h && h->refs) h->refs--;
}

int gp_host_clock_retired_done(gp_host_clock *c, gpool_t *pool, uintptr_t rtag)
{
    gp_host_stream *h = slot_find(c, rtag);
    if (!h || !h->sealed || h->busy) return 0;
    if (h->done == UINT64_MAX) return 1;
    if (!h->live) return 0;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    int done =
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventQuery(h->ev)) == CUDA_SUCCESS;
    gp_dc_leave(&pool->dc, pushed);
    if (done) {
        h->live = 0;
        h->done = UINT64_MAX;
    }
    return done;
}

int gp_host_recorded(gpool_t *pool, const void *ptr)
{
    if (!atomic_load_explicit(&pool->stream_busy, memory_order_relaxed)) return 0;
    gp_streams *ss = pool->streams;
    gp_ss_lock(ss);
    int rec = gp_ptrmap_get(&ss->recorded, (uintptr_t)ptr) != NULL;
    gp_ss_unlock(ss);
    return rec;
}

void gp_host_clock_fini(gp_host_clock *c, gpool_t *pool)
{
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    for (size_t i = 0; i < c->n; i++)
        if (c->s[i].ev)
            GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(c->s[i].ev));
    gp_dc_leave(&pool->dc, pushed);
    c->n = 0;
}
