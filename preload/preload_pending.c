/* preload_pending.c — the set of blocks freed by the program but still waiting in a cudaFree
 * batch (preload_batch.c), process-wide: every thread's batch, and the event flush's groups.
 *
 * gpool still counts such a block live until its batch drains, so without this set a second
 * cudaFree/cuMemFree of it (from any thread) would succeed and queue it again, a cudaFreeAsync
 * would free it at once, and the pointer queries would describe it as an allocation. CUDA
 * answers an error for a pointer already freed (runtime API reference, cudaFree: "if
 * cudaFree(devPtr) has already been called before, an error is returned", cudaErrorInvalidValue;
 * driver API reference, cuMemFree: CUDA_ERROR_INVALID_VALUE), and describes no allocation at a
 * freed address.
 *
 * The set: a direct-mapped table of 2^18 addresses in .bss (pages touched only where pointers
 * hash), each pointer in the one slot its hash names, plus an overflow map under a mutex for a
 * pointer whose slot holds another block. Adding is a load and a store of the slot (and a load
 * of the overflow count), removing a store to the slot the adder remembered: no
 * read-modify-write, which on the cudaFree pair cost about 8 ns (a compare-and-swap's barrier;
 * gpool-bench hotpath --dropin). What that leaves: two threads freeing one block at the same
 * instant may both succeed and queue it twice, as every double free did before the set (a
 * bug of the program's either way; CUDA's answer to it is the error). Two different blocks
 * freed at once into one slot: one entry may be overwritten, so a later double free of that
 * block goes unseen; a free the program makes once is never refused (a slot holds p only
 * between p's free and its drain).
 *
 * Cost: a hash, two loads and a store per cudaFree; a store per block when its batch drains; while
 * pointers sit in the overflow, a mutex per add that finds the count non-zero. The overflow is
 * for batches holding many blocks (once a non-blocking stream exists: up to cudafree_batch
 * bytes a thread); with the fence's 32 blocks a thread, slots rarely collide. */
#include "preload.h"
#include "preload_pending.h"

#include <pthread.h>

#include "ptrmap.h"

_Atomic uintptr_t gpp_pending_slots[1u << GPP_PENDING_BITS];
atomic_long gpp_pending_overflowed;
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;
static gp_ptrmap overflow; /* under overflow_lock; the value is unused (non-NULL) */

int gpp_pending_overflow_has(uintptr_t p)
{
    pthread_mutex_lock(&overflow_lock);
    int has = gp_ptrmap_get(&overflow, p) != NULL;
    pthread_mutex_unlock(&overflow_lock);
    return has;
}

int gpp_pending_add_overflow(uintptr_t p, uint32_t *where)
{
    pthread_mutex_lock(&overflow_lock);
    atomic_fetch_add(&gpp_pending_overflowed, 1); /* counted before it looks at the slot */
    int r = 1;
    if (atomic_load(&gpp_pending_slots[gpp_pending_slot_of(p)]) == p || gp_ptrmap_get(&overflow, p))
        r = 0; /* freed already */
    else if (gp_ptrmap_put(&overflow, p, (void *)1) != 0)
        r = -1; /* no host memory */
    if (r != 1) atomic_fetch_sub(&gpp_pending_overflowed, 1);
    pthread_mutex_unlock(&overflow_lock);
    *where = GPP_PENDING_OVERFLOW;
    return r;
}

void gpp_pending_remove_overflow(uintptr_t p)
{
    pthread_mutex_lock(&overflow_lock);
    if (gp_ptrmap_del(&overflow, p)) atomic_fetch_sub(&gpp_pending_overflowed, 1);
    pthread_mutex_unlock(&overflow_lock);
}

int gpp_pending_has(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (!p) return 0;
    if (atomic_load_explicit(&gpp_pending_slots[gpp_pending_slot_of(p)], memory_order_acquire) == p)
        return 1;
    return atomic_load(&gpp_pending_overflowed) != 0 && gpp_pending_overflow_has(p);
}
