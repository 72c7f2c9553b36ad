/* The retry ladder: what an allocation does when memory is short, written once, in order
 * (gp_ladder_climb, below).
 * A kind describes one attempt and, for each rung, the relief it can give; gp_ladder_climb
 * makes the attempt and, while it fails out of memory, runs the rungs in this order, trying
 * again after each one that may have made room:
 *   cache          the attempt itself: the kind's cached blocks, then fresh memory (the
 *                  device arena polls other streams' completed frees inside it, arena.c
 *                  place_once, before it maps fresh pages)
 *   streams        other streams' completed work (deferred frees, the host event clock)
 *   make room      wait for pending work, give back unused pages so they can be remapped
 *   tcaches        the thread caches give their blocks back
 *   other pools    the process's other pools on the device give their cache back (unmapped
 *                  pages first, then idle mapped ones)
 *   fallback       another kind, as the policy says: pool.c (gp_policy_move), after the
 *                  ladder of the first kind; the new kind climbs its own ladder.
 * After each rung past make room whose relief did not serve the request, make room runs once
 * more (what that rung gave back may be pages to remap). Make room comes before the thread
 * caches: flushing them first costs driver calls at the fit edge, as the flushed slots' slabs
 * are then rebuilt (docs/history/placement-experiments.md).
 * No other code retries an allocation. */
#ifndef GPOOL_LADDER_H
#define GPOOL_LADDER_H

#include "gpool.h"

typedef enum gp_rung {
    GP_RUNG_STREAMS,
    GP_RUNG_MAKE_ROOM,
    GP_RUNG_TCACHES,
    GP_RUNG_OTHER_POOLS_CACHED,
    GP_RUNG_OTHER_POOLS_IDLE,
    GP_RUNG_COUNT
} gp_rung;

typedef struct gp_ladder {
    /* One attempt (the cache rung): GPOOL_OK with *out, or the failure. */
    gpool_status (*attempt)(void *ctx, void **out);
    /* Relief of each rung: 1 when it may have made room (the ladder tries again), 0 when it
     * could not help this request. NULL: the kind has no such rung. */
    int (*relieve[GP_RUNG_COUNT])(void *ctx);
    /* The kind's report when memory stays short after every rung (st: the last failure);
     * NULL: the last attempt's message stands. */
    gpool_status (*report)(void *ctx, gpool_status st);
} gp_ladder;

/* Climb l for one request (ctx: the kind's). Returns the status of the last attempt (or the
 * report's); *retried: 1 when a rung made room and the attempt ran again. Inline, so that a
 * kind's first attempt is a direct call (the host pair pays no indirection). */
static inline gpool_status gp_ladder_climb(const gp_ladder *l, void *ctx, void **out, int *retried)
{
    *retried = 0;
    gpool_status st = l->attempt(ctx, out);
    for (int r = 0; st == GPOOL_ERR_OUT_OF_MEMORY && r < GP_RUNG_COUNT; r++) {
        if (!l->relieve[r] || !l->relieve[r](ctx)) continue;
        *retried = 1;
        st = l->attempt(ctx, out);
        /* what a later rung gave back may be pages to remap: make room again before the next */
        if (st == GPOOL_ERR_OUT_OF_MEMORY && r > GP_RUNG_MAKE_ROOM &&
            l->relieve[GP_RUNG_MAKE_ROOM] && l->relieve[GP_RUNG_MAKE_ROOM](ctx))
            st = l->attempt(ctx, out);
    }
    if (st == GPOOL_ERR_OUT_OF_MEMORY && l->report) st = l->report(ctx, st);
    return st;
}

#endif
