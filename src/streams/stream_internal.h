/* The state the event clock (stream.c) and the reuse rule (reuse.c) share: the per-stream
 * records, the recorded blocks and the deferred frees. Included by those two only. */
#ifndef GPOOL_STREAM_INTERNAL_H
#define GPOOL_STREAM_INTERNAL_H

#include "pool.h"
#include "stream.h"

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
    /* Released streams (gpool_stream_release): handle value -> the retired tag its pending work
     * went to, for blocks allocated on the stream and freed on another one later (their free
     * waits for the allocating stream: reuse.c rule 3). A retired tag without a record is done.
     * An entry goes when a new stream with that value is seen (a record made for it, or a
     * gpool_record_stream naming it), or when GP_ALIASES newer ones push it out. */
    gp_ptrmap aliases;
    uintptr_t alias_ring[256], alias_rtag[256]; /* the entries in the order they came */
    size_t alias_next;
};

/* ---- the clock's primitives (stream.c), for reuse.c ---- */
/* ss->lock, with a note of whether this thread holds it (gp_stream_position). */
void gp_ss_lock(gp_streams *ss);
void gp_ss_unlock(gp_streams *ss);
/* Lock held: tag's record, added when new; NULL when out of memory. May move ss->recs. */
stream_rec *gp_ss_rec(gp_streams *ss, uintptr_t tag);
/* A (spare or new) event; back to the spares when done with it. Context entered. */
CUresult gp_ss_event_get(gpool_t *pool, CUevent *ev);
void gp_ss_event_put(gpool_t *pool, CUevent ev);
/* 1 when stream tag belongs to another context than the pool's (asked once, then known). */
int gp_ss_other_ctx(gpool_t *pool, uintptr_t tag);
/* Record ev on stream tag; nonzero when that failed. Context entered. */
int gp_ss_record_on(gpool_t *pool, CUevent ev, uintptr_t tag);
/* Wait for stream tag's queued work (the device's, for tags that cannot be waited for alone).
 * Context entered. */
CUresult gp_ss_sync_tag(gpool_t *pool, uintptr_t tag);
/* A new retired tag (gpool_stream_release), and whether tag is one: a released stream's
 * pending work, covered by an event recorded before its destroy; never a stream handle. */
uintptr_t gp_ss_retired_tag(void);
int gp_tag_retired(uintptr_t tag);
/* Lock held: handle of a released stream -> its retired tag (else tag itself); note one;
 * forget one (a new stream has that value). */
uintptr_t gp_ss_alias(gp_streams *ss, uintptr_t tag);
void gp_ss_alias_add(gp_streams *ss, uintptr_t handle, uintptr_t rtag);
void gp_ss_alias_forget(gp_streams *ss, uintptr_t handle);
/* Lock held: 1 when retired tag rtag's work is done (its record is gone or its event seen
 * complete). */
int gp_ss_retired_done(gp_streams *ss, uintptr_t rtag);
/* After cuCtxSynchronize: synchronize the streams of other contexts one by one. */
gpool_status gp_ss_sync_other_contexts(gpool_t *pool);

#endif
