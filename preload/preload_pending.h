/* preload_pending.h — the pending set's table and its inline add and remove (the cudaFree fast
 * path); preload_pending.c says what the set is for, its overflow, and how a race of two frees
 * of one block ends. */
#ifndef GPOOL_PRELOAD_PENDING_H
#define GPOOL_PRELOAD_PENDING_H

#include <stdatomic.h>
#include <stdint.h>

#define GPP_PENDING_BITS     18         /* 262144 slots, 2 MiB of .bss */
#define GPP_PENDING_OVERFLOW UINT32_MAX /* a where of the overflow map */

#pragma GCC visibility push(hidden)

extern _Atomic uintptr_t gpp_pending_slots[1u << GPP_PENDING_BITS];
extern atomic_long gpp_pending_overflowed; /* pointers in the overflow map (or joining it) */

/* The slow halves (preload_pending.c). */
int gpp_pending_add_overflow(uintptr_t p, uint32_t *where);
int gpp_pending_overflow_has(uintptr_t p);
void gpp_pending_remove_overflow(uintptr_t p);

static inline uint32_t gpp_pending_slot_of(uintptr_t p)
{
    return (uint32_t)((p * 0x9E3779B97F4A7C15ull) >> (64 - GPP_PENDING_BITS));
}

/* Add p: 1 (*where: its place, for gpp_pending_remove), 0 when p is there already (a second
 * free), -1 when there is no room (no host memory for the overflow). */
static inline int gpp_pending_add(const void *ptr, uint32_t *where)
{
    uintptr_t p = (uintptr_t)ptr;
    uint32_t i = gpp_pending_slot_of(p);
    /* a load and a store, no read-modify-write: the cudaFree pair's cost (preload_pending.c) */
    uintptr_t v = atomic_load_explicit(&gpp_pending_slots[i], memory_order_acquire);
    if (__builtin_expect(v == 0, 1)) {
        atomic_store_explicit(&gpp_pending_slots[i], p, memory_order_release);
        /* p may wait in the overflow map already (added while its slot held another block) */
        if (__builtin_expect(
                atomic_load_explicit(&gpp_pending_overflowed, memory_order_relaxed) != 0, 0) &&
            gpp_pending_overflow_has(p)) {
            atomic_store_explicit(&gpp_pending_slots[i], 0, memory_order_release);
            return 0;
        }
        *where = i;
        return 1;
    }
    if (v == p) return 0; /* freed already, still waiting */
    return gpp_pending_add_overflow(p, where);
}

static inline void gpp_pending_remove(uint32_t where, const void *p)
{
    if (__builtin_expect(where != GPP_PENDING_OVERFLOW, 1))
        atomic_store_explicit(&gpp_pending_slots[where], 0, memory_order_release);
    else
        gpp_pending_remove_overflow((uintptr_t)p);
}

#pragma GCC visibility pop

#endif
