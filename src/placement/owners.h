/* The pool's address registry: which kind's memory an address lies in, for every range either
 * kind holds -- the device arena's regions, the host arenas' regions, the host small-block
 * extents and the mapped blocks of their own. A free resolves its pointer here once (lock-free)
 * and hands the answer to the one kind that owns it; the kind then finds the block itself.
 * Writers (a region, an extent or a block coming or going) hold the registry's lock; a slot is
 * rewritten under a sequence count, so a reader never trusts a torn hit. */
#ifndef GPOOL_OWNERS_H
#define GPOOL_OWNERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpool.h"
#include "sizeclass.h"

struct gp_slab;

#define GP_OWNER_BLOCK  64  /* slots per block of the registry */
#define GP_OWNER_BLOCKS 512 /* blocks at most: 32,768 ranges */

typedef struct gp_owner_slot {
    _Atomic uint32_t seq; /* odd while the slot is rewritten */
    _Atomic uintptr_t base;
    _Atomic size_t size; /* 0: a free slot */
    _Atomic int kind;    /* gpool_mem_kind of the memory */
    /* a device arena region's slab of each granule (NULL for host ranges) */
    _Atomic(_Atomic(struct gp_slab *) *) granule;
} gp_owner_slot;

typedef struct gp_owners {
    gp_owner_slot first[GP_OWNER_BLOCK]; /* block 0, in place: the device's regions, no chase */
    _Atomic(gp_owner_slot *) blk[GP_OWNER_BLOCKS]; /* blk[0] is first */
    _Atomic size_t n;                              /* slots ever used: readers look at [0, n) */
    pthread_mutex_t lock;
} gp_owners;

void gp_owners_init(gp_owners *o);
void gp_owners_fini(gp_owners *o);

/* Register [base, base + size) as memory of kind (granule: a device arena region's slab table,
 * else NULL). 0, or -1 when out of host memory or slots (the caller fails what it was adding).
 * NULL o: nothing to do (0). */
int gp_owners_add(gp_owners *o, uintptr_t base, size_t size, gpool_mem_kind kind,
                  _Atomic(struct gp_slab *) *granule);
/* Forget the range registered at base (nothing when none is). NULL o: nothing. */
void gp_owners_remove(gp_owners *o, uintptr_t base);

/* Which kind's memory addr lies in: its gpool_mem_kind, or GPOOL_MEM_AUTO when none's; *slab:
 * the slab holding it in a device arena region, else NULL. One lock-free pass over the slots
 * (the device arena's first region is slot 0). */
static inline gpool_mem_kind gp_owners_find(gp_owners *o, uintptr_t addr, struct gp_slab **slab)
{
    size_t n = atomic_load_explicit(&o->n, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        gp_owner_slot *s = i < GP_OWNER_BLOCK ? &o->first[i]
                                              : atomic_load_explicit(&o->blk[i / GP_OWNER_BLOCK],
                                                                     memory_order_acquire) +
                                                    i % GP_OWNER_BLOCK;
        for (;;) {
            uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
            uintptr_t off = addr - atomic_load_explicit(&s->base, memory_order_relaxed);
            if (off >= atomic_load_explicit(&s->size, memory_order_relaxed)) break; /* a miss */
            int kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
            _Atomic(struct gp_slab *) *g = atomic_load_explicit(&s->granule, memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if ((q & 1) || atomic_load_explicit(&s->seq, memory_order_relaxed) != q)
                continue; /* torn: being rewritten, read it again */
            /* a hit holds: the range, and its granule table, stay while a block in it lives */
            *slab =
                g ? atomic_load_explicit(&g[off >> GP_GRANULE_SHIFT], memory_order_acquire) : NULL;
            return (gpool_mem_kind)kind;
        }
    }
    *slab = NULL;
    return GPOOL_MEM_AUTO;
}

#endif
