/* gpool_set_peer_access: change which devices reach a pool's device memory at run time.
 * VMM memory is reachable only by the locations given to cuMemSetAccess (cuda.h,
 * cuMemSetAccess; peer access between contexts does not cover it), so the new list is applied
 * to every mapping the pool holds now, and to every later one. */
#include "error.h"
#include "pool.h"
#include "vidmem.h"

gpool_status gpool_set_peer_access(gpool_t *pool, gpool_peer_access peer_access)
{
    if (!pool) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_set_peer_access: pool is NULL");
    int v = (int)peer_access; /* a caller may pass any int: the ABI is an int's */
    if (v < (int)GPOOL_PEER_AUTO || v > (int)GPOOL_PEER_ALL)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "gpool_set_peer_access: %d is not a gpool_peer_access", v);
    gp_arena *a = pool->device;
    if (!a) return gp_fail(GPOOL_ERR_UNSUPPORTED, "the pool has no device memory");
    /* the arena lock keeps mappings from coming and going meanwhile */
    gp_arena_lock(a);
    gpool_status st = gp_vidmem_set_peer_access(gp_arena_backend(a), peer_access);
    if (st == GPOOL_OK) pool->cfg.peer_access = peer_access;
    gp_arena_unlock(a);
    return st;
}
