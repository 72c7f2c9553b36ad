/* The pool's address registry: which kind's memory an address lies in, for every range either
 * kind holds -- the device arena's regions, the host arenas' regions, the host small-block
 * extents and the mapped blocks of their own. A free resolves its pointer here once (lock-free)
 * and hands the answer to the one kind that owns it; the kind then finds the block itself.
 * Two tables: arena regions, which stay until the pool goes (written once, read with no more
 * than a load per field, the device's first region first), and ranges that come and go (host
 * extents and blocks), in slots rewritten under a sequence count so that a reader never trusts
 * a torn hit. Writers hold the registry's lock. */
#ifndef GPOOL_OWNERS_H
#define GPOOL_OWNERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpool.h"
#include "sizeclass.h"

struct gp_slab;

#define GP_OWNER_REGIONS (5 * 64) /* the device arena and 4 host arenas, GP_MAX_REGIONS each */
#define GP_OWNER_BLOCK   64       /* slots per block of the changing table */
#define GP_OWNER_BLOCKS  512      /* blocks at most: 32,768 changing ranges */

/* An arena region: written once before it is published, never rewritten. */
typedef struct gp_owner_region {
    uintptr_t base;
    _Atomic size_t size; /* 0 once the arena has gone */
    gpool_mem_kind kind;
    _Atomic(struct gp_slab *) *granule; /* the slab of each granule (device arena), or NULL */
} gp_owner_region;

/* A range that comes and goes. */
typedef struct gp_owner_slot {
    _Atomic uint32_t seq; /* odd while the slot is rewritten */
    _Atomic uintptr_t base;
    _Atomic size_t size; /* 0: a free slot */
    _Atomic int kind;    /* gpool_mem_kind of the memory */
} gp_owner_slot;

typedef struct gp_owners {
    _Atomic size_t nregion; /* first, in the cache line of region[0] */
    gp_owner_region region[GP_OWNER_REGIONS];
    _Atomic(gp_owner_slot *) blk[GP_OWNER_BLOCKS];
    _Atomic size_t n; /* changing slots ever used: readers look at [0, n) */
    pthread_mutex_t lock;
} gp_owners;

void gp_owners_init(gp_owners *o);
void gp_owners_fini(gp_owners *o);

/* Register an arena's region [base, base + size) of kind, with its slab table (NULL: none): it
 * stays registered until gp_owners_remove at the arena's end. 0, or -1 when the table is full.
 * NULL o: nothing to do (0). */
int gp_owners_add_region(gp_owners *o, uintptr_t base, size_t size, gpool_mem_kind kind,
                         _Atomic(struct gp_slab *) *granule);
/* Register [base, base + size) as memory of kind that may go again. 0, or -1 when out of host
 * memory or slots (the caller fails what it was adding). NULL o: nothing to do (0). */
int gp_owners_add(gp_owners *o, uintptr_t base, size_t size, gpool_mem_kind kind);
/* Forget the region or range registered at base (nothing when none is). NULL o: nothing. */
void gp_owners_remove(gp_owners *o, uintptr_t base);

/* The changing ranges' part of gp_owners_find (owners.c): the kind of the range addr lies in,
 * or GPOOL_MEM_AUTO. */
gpool_mem_kind gp_owners_find_range(gp_owners *o, uintptr_t addr);

/* Which kind's memory addr lies in: its gpool_mem_kind, or GPOOL_MEM_AUTO when none's; *slab:
 * the slab holding it in a device arena region, else NULL. One lock-free pass: the regions
 * (the device arena's first region is the first), then the changing ranges. */
static inline gpool_mem_kind gp_owners_find(gp_owners *o, uintptr_t addr, struct gp_slab **slab)
{
    size_t nr = atomic_load_explicit(&o->nregion, memory_order_acquire);
    for (size_t i = 0; i < nr; i++) {
        gp_owner_region *r = &o->region[i];
        uintptr_t off = addr - r->base;
        if (off < atomic_load_explicit(&r->size, memory_order_relaxed)) {
            *slab = r->granule ? atomic_load_explicit(&r->granule[off >> GP_GRANULE_SHIFT],
                                                      memory_order_acquire)
                               : NULL;
            return r->kind;
        }
    }
    *slab = NULL;
    return gp_owners_find_range(o, addr);
}

#endif
