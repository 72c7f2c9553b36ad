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
 * The set: a fixed table of GPP_PENDING_BUCKETS buckets of 8 addresses (one cache line each),
 * in .bss (pages are touched only where pointers hash). A pointer lives only in its bucket:
 * no probe chains, so removing one is a plain store to the slot its adder remembers. Adding
 * is one compare-and-swap into a free slot of the bucket, then a look at the bucket's other
 * slots: if another thread added the same pointer at the same moment (two frees racing),
 * each sees the other's copy or the first comes first in the CAS order, so at most one of
 * them wins; at worst both report the double free and the block stays allocated (a leak, never
 * a block handed out twice). A full bucket (8 pending pointers hashing alike): the caller
 * frees the block another way (its batch's flush, or an exact synchronize).
 *
 * Cost: one hash, one cache line, one CAS per cudaFree; one store per block when its batch
 * drains; lookups (queries, stream-ordered frees) read one cache line. */
#include <stdatomic.h>
#include <stdint.h>

#include "preload.h"

#define GPP_PENDING_BUCKETS (1u << 15) /* 8 slots each: 262144 pointers, 2 MiB of .bss */
#define GPP_PENDING_WAYS    8

typedef struct {
    _Alignas(64) _Atomic uintptr_t slot[GPP_PENDING_WAYS];
} pending_bucket;

static pending_bucket table[GPP_PENDING_BUCKETS];

static inline uint32_t bucket_of(uintptr_t p)
{
    return (uint32_t)((p * 0x9E3779B97F4A7C15ull) >> (64 - 15));
}

int gpp_pending_add(const void *ptr, uint32_t *where)
{
    uintptr_t p = (uintptr_t)ptr;
    uint32_t b = bucket_of(p);
    _Atomic uintptr_t *s = table[b].slot;
    int free_way = -1;
    for (int i = 0; i < GPP_PENDING_WAYS; i++) {
        uintptr_t v = atomic_load_explicit(&s[i], memory_order_relaxed);
        if (v == p) return 0; /* freed already, still waiting */
        if (!v && free_way < 0) free_way = i;
    }
    for (int i = free_way; i >= 0 && i < GPP_PENDING_WAYS; i++) {
        uintptr_t expected = 0;
        if (!atomic_compare_exchange_strong(&s[i], &expected, p)) continue;
        /* a racing free of the same pointer: whoever sees the other's copy loses */
        for (int j = 0; j < GPP_PENDING_WAYS; j++)
            if (j != i && atomic_load(&s[j]) == p) {
                atomic_store_explicit(&s[i], 0, memory_order_release);
                return 0;
            }
        *where = b * GPP_PENDING_WAYS + (uint32_t)i;
        return 1;
    }
    return -1;
}

void gpp_pending_remove(uint32_t where)
{
    atomic_store_explicit(&table[where / GPP_PENDING_WAYS].slot[where % GPP_PENDING_WAYS], 0,
                          memory_order_release);
}

int gpp_pending_has(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (!p) return 0;
    _Atomic uintptr_t *s = table[bucket_of(p)].slot;
    for (int i = 0; i < GPP_PENDING_WAYS; i++)
        if (atomic_load_explicit(&s[i], memory_order_acquire) == p) return 1;
    return 0;
}
