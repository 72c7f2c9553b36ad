/* Deferred frees, finished: blocks whose free gpool_record_stream made wait on other streams'
 * events (reuse.c keeps them) go back into their kind once those events completed. The streams
 * layer only says which; the kinds free them here, each into its own placement. */
#include "arena.h"
#include "kind.h"
#include "kind_host.h"
#include "pool.h"
#include "stream.h"

size_t gp_kinds_finish_deferred(gpool_t *pool, int sync)
{
    gp_done_free done[64];
    size_t n, total = 0;
    do {
        n = gp_stream_take_done(pool, sync, done, 64);
        for (size_t i = 0; i < n; i++) {
            const gp_reuse_free *f = &done[i].f;
            if (done[i].host) {
                int owned;
                gp_sysmem_free(pool, f->ptr, &owned);
                continue;
            }
            gp_arena *a = pool->device;
            if (!a) continue; /* the device kind is gone (gpool_destroy): its memory with it */
            gp_arena_lock(a);
            gp_arena_free_locked(a, f->ptr, f->tag, f->seq);
            if (f->clean) gp_arena_clean_locked(a, f->tag, UINT64_MAX);
            gp_arena_unlock(a);
        }
        total += n;
    } while (n == 64);
    return total;
}
