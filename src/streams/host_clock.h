/* Host frees on the event clock: a host block freed on a stream is marked with (stream,
 * position) and costs no driver call; it is handed out again only once an event recorded on
 * that stream at or after the position has completed (the CPU may write a block the moment it
 * is handed out, so not even the freeing stream reuses it earlier). One event per stream covers
 * every free on it so far, and the host kind asks the clock only now and then (kind_host.c:
 * when enough frees wait, or a request would otherwise need fresh memory), so a steady state of
 * allocations and frees records and queries one event per many frees.
 * The caller serializes calls on one clock (gp_sysmem's lock) except where noted. */
#ifndef GPOOL_HOST_CLOCK_H
#define GPOOL_HOST_CLOCK_H

#include <stdint.h>

#include "pool.h"

#define GP_HOST_CLOCKS 64 /* streams one pool's host frees can wait on at once */

typedef struct gp_host_mark {
    uint16_t clock; /* index into gp_host_clock.s */
    uint64_t pos;   /* the free is complete once clock's done >= pos */
} gp_host_mark;

typedef struct gp_host_stream {
    uintptr_t tag;
    uint64_t next;    /* the position a free on this stream gets now (>= 1) */
    uint64_t done;    /* frees at positions <= done are known complete */
    uint64_t ev_pos;  /* live: ev covers positions <= ev_pos */
    CUevent ev;       /* made on first need */
    int live;         /* ev recorded, not yet seen complete */
    int busy;         /* a poll is asking the driver about this stream (lock let go) */
    uint64_t waiting; /* marks on this stream not yet known complete (counted at each mark,
                         recounted before each poll) */
    int sealed;       /* a released stream's (gp_host_clock_retire): once ev completes (or done
                         is set), every mark on it is complete, later ones included */
    uint64_t refs;    /* a released stream's live blocks, which will mark it when freed: the
                         slot is not handed to another stream while they live */
} gp_host_stream;

typedef struct gp_host_clock {
    gp_host_stream s[GP_HOST_CLOCKS];
    size_t n;
} gp_host_clock;

/* Mark a free on stream tag now. 0, or -1 when the table is full (the caller waits instead). */
int gp_host_clock_mark(gp_host_clock *c, uintptr_t tag, gp_host_mark *out);
/* 1 when the free behind m is known complete. */
static inline int gp_host_clock_done(const gp_host_clock *c, const gp_host_mark *m)
{
    return c->s[m->clock].done >= m->pos;
}
/* Before a poll, the caller counts the marks not known complete: gp_host_clock_recount, then
 * gp_host_clock_waits for each mark of each waiting free. */
void gp_host_clock_recount(gp_host_clock *c);
static inline void gp_host_clock_waits(gp_host_clock *c, const gp_host_mark *m)
{
    if (!gp_host_clock_done(c, m)) c->s[m->clock].waiting++;
}

/* Ask the driver about every stream with marks not yet known complete: query its live event;
 * when none covers them, record one and query it. Called with *lock held; lets it go around
 * the driver calls and takes it again. force: synchronize the context instead, after which
 * every mark made before the call is complete; GPOOL_ERR_DRIVER (message naming
 * cuCtxSynchronize) when that failed, GPOOL_OK otherwise (a stream that cannot be asked now
 * simply stays waiting). */
gpool_status gp_host_clock_poll(gp_host_clock *c, gpool_t *pool, pthread_mutex_t *lock, int force);

/* gpool_stream_release of stream tag (lock held; let go around the driver calls): its slot
 * moves to the retired tag rtag, so no later poll names the stream and a new stream with the
 * same handle value gets a slot of its own; when marks on it wait, or need > 0 (that many
 * live blocks allocated on it will mark rtag when freed), an event recorded on the stream now
 * covers them all (another context's stream, or one that takes no event: it is synchronized
 * instead). GPOOL_ERR_DRIVER when neither worked: its marks then wait for a device-wide
 * synchronize. */
gpool_status gp_host_clock_retire(gp_host_clock *c, gpool_t *pool, uintptr_t tag, uintptr_t rtag,
                                  uint64_t need, pthread_mutex_t *lock);
/* One live block of the released stream rtag went (its free marked rtag, or it was freed). */
void gp_host_clock_unref(gp_host_clock *c, uintptr_t rtag);
/* 1 when the work of released stream rtag is known done, asking its event (one query, the
 * caller's lock held) if needed; 0 when not, or not known. */
int gp_host_clock_retired_done(gp_host_clock *c, gpool_t *pool, uintptr_t rtag);

/* 1 when gpool_record_stream named other streams for block ptr: its free takes the deferred
 * path of reuse.c (gp_stream_defer_host_free). Takes the streams lock only while some block is
 * recorded or deferred. */
int gp_host_recorded(gpool_t *pool, const void *ptr);

/* Destroy the events (no lock needed: the pool is going). */
void gp_host_clock_fini(gp_host_clock *c, gpool_t *pool);

#endif
