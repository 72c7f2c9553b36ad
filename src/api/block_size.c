/* block_size.c — gpool_block_size(): the size of a live device block, found without a lock for
 * small blocks (the lookup gpool_free's thread-cache path makes), so that a caller that must
 * know a block's size before freeing it (the LD_PRELOAD interposer's cudaFree batch) pays no
 * more than gpool_free does. */
#include "arena.h"
#include "bad_pointer.h"
#include "budget.h"
#include "error.h"
#include "policy.h"
#include "pool.h"
#include "stream.h"

gpool_status gpool_block_size(gpool_t *pool, const void *ptr, size_t *size)
{
    if (!pool || !size)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_block_size: %s is NULL",
                       pool ? "size" : "pool");
    gp_arena *a = pool->device;
    gp_slab *s = a && ptr ? gp_arena_slab_of(a, (uintptr_t)ptr) : NULL;
    if (s) { /* a slab slot: its state is an atomic the owner of the block alone changes */
        long i = gp_slot_index(s, (uintptr_t)ptr);
        if (i < 0 || gp_slot_state(s, (uint32_t)i) != GP_SLOT_LIVE) {
            uint32_t k = (uint32_t)(((uintptr_t)ptr - s->base) / s->slot_size);
            if (k < s->nslots && gp_slot_state(s, k) == GP_SLOT_LIVE)
                return gp_bad_pointer(ptr, GP_PTR_INTERIOR, GPOOL_MEM_DEVICE,
                                      s->base + (uintptr_t)k * s->slot_size);
            return gp_bad_pointer(ptr, GP_PTR_FREED, GPOOL_MEM_DEVICE, 0);
        }
        if (gp_stream_free_pending(pool, (uintptr_t)ptr)) /* freed, used on other streams */
            return gp_bad_pointer(ptr, GP_PTR_FREED, GPOOL_MEM_DEVICE, 0);
        *size = s->slot_size;
        return GPOOL_OK;
    }
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    gpool_status st = gpool_get_block_desc(pool, ptr, &d);
    if (st != GPOOL_OK) return st;
    if (d.kind != GPOOL_MEM_DEVICE)
        return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p is a %s block, not a device block", ptr,
                       gp_kind_name(d.kind));
    if (d.device_ptr != (uint64_t)(uintptr_t)ptr)
        return gp_bad_pointer(ptr, GP_PTR_INTERIOR, GPOOL_MEM_DEVICE, (uintptr_t)d.device_ptr);
    *size = d.size;
    return GPOOL_OK;
}
