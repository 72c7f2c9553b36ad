/* The retry ladder (ladder.h): one loop over the rungs, in order, for every kind. */
#include "ladder.h"

gpool_status gp_ladder_climb(const gp_ladder *l, void *ctx, void **out, int *retried)
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
