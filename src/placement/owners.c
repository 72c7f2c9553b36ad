/* The pool's address registry (owners.h): arena regions in a table written once per entry, and
 * changing ranges in slots in blocks that never move, so a reader needs no lock; writers hold
 * o->lock and rewrite a slot under its sequence count. */
#include "owners.h"

#include <stdlib.h>

void gp_owners_init(gp_owners *o)
{
    for (size_t i = 0; i < GP_OWNER_REGIONS; i++) {
        o->region[i] = (gp_owner_region){.kind = GPOOL_MEM_AUTO};
        atomic_init(&o->region[i].size, 0);
    }
    atomic_init(&o->nregion, 0);
    for (size_t b = 0; b < GP_OWNER_BLOCKS; b++)
        atomic_init(&o->blk[b], NULL);
    atomic_init(&o->n, 0);
    pthread_mutex_init(&o->lock, NULL);
}

void gp_owners_fini(gp_owners *o)
{
    for (size_t b = 0; b < GP_OWNER_BLOCKS; b++) {
        free(atomic_load_explicit(&o->blk[b], memory_order_relaxed));
        atomic_store_explicit(&o->blk[b], NULL, memory_order_relaxed);
    }
    atomic_store_explicit(&o->n, 0, memory_order_relaxed);
    atomic_store_explicit(&o->nregion, 0, memory_order_relaxed);
    pthread_mutex_destroy(&o->lock);
}

int gp_owners_add_region(gp_owners *o, uintptr_t base, size_t size, gpool_mem_kind kind,
                         _Atomic(struct gp_slab *) *granule)
{
    if (!o || !size) return 0;
    pthread_mutex_lock(&o->lock);
    size_t n = atomic_load_explicit(&o->nregion, memory_order_relaxed);
    int ok = n < GP_OWNER_REGIONS;
    if (ok) {
        gp_owner_region *r = &o->region[n];
        r->base = base;
        r->kind = kind;
        r->granule = granule;
        atomic_store_explicit(&r->size, size, memory_order_relaxed);
        atomic_store_explicit(&o->nregion, n + 1, memory_order_release); /* published */
    }
    pthread_mutex_unlock(&o->lock);
    return ok ? 0 : -1;
}

/* 1 when addr lies in slot s (*kind set): a hit is read again while s is rewritten. Every access
 * to a slot is sequentially consistent (plain loads on x86; stores only in the writers): a
 * reader that saw a field of a rewrite in progress sees its odd count when it reads seq again,
 * with no fence (which ThreadSanitizer does not model). */
static int slot_hit(gp_owner_slot *s, uintptr_t addr, gpool_mem_kind *kind)
{
    for (;;) {
        uint32_t q = atomic_load(&s->seq);
        uintptr_t off = addr - atomic_load(&s->base);
        if (off >= atomic_load(&s->size)) return 0;
        int k = atomic_load(&s->kind);
        if ((q & 1) | (atomic_load(&s->seq) ^ q)) continue; /* torn: read it again */
        *kind = (gpool_mem_kind)k;
        return 1;
    }
}

gpool_mem_kind gp_owners_find_range(gp_owners *o, uintptr_t addr)
{
    size_t n = atomic_load_explicit(&o->n, memory_order_acquire);
    gpool_mem_kind kind;
    for (size_t i = 0; i < n; i++) {
        gp_owner_slot *blk =
            atomic_load_explicit(&o->blk[i / GP_OWNER_BLOCK], memory_order_acquire);
        if (slot_hit(&blk[i % GP_OWNER_BLOCK], addr, &kind)) return kind;
    }
    return GPOOL_MEM_AUTO;
}

static gp_owner_slot *slot_at(gp_owners *o, size_t i)
{
    return atomic_load_explicit(&o->blk[i / GP_OWNER_BLOCK], memory_order_relaxed) +
           i % GP_OWNER_BLOCK;
}

/* Lock held: rewrite slot s (readers seeing it meanwhile read it again). */
static void slot_write(gp_owner_slot *s, uintptr_t base, size_t size, int kind)
{
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store(&s->seq, q + 1);
    atomic_store(&s->base, base);
    atomic_store(&s->size, size);
    atomic_store(&s->kind, kind);
    atomic_store(&s->seq, q + 2);
}

int gp_owners_add(gp_owners *o, uintptr_t base, size_t size, gpool_mem_kind kind)
{
    if (!o || !size) return 0;
    pthread_mutex_lock(&o->lock);
    size_t n = atomic_load_explicit(&o->n, memory_order_relaxed), i = 0;
    while (i < n && atomic_load_explicit(&slot_at(o, i)->size, memory_order_relaxed))
        i++; /* the first free slot, else a new one */
    int ok = 1;
    if (i == n) {
        size_t b = n / GP_OWNER_BLOCK;
        if (b == GP_OWNER_BLOCKS) {
            ok = 0;
        } else if (!atomic_load_explicit(&o->blk[b], memory_order_relaxed)) {
            gp_owner_slot *blk = calloc(GP_OWNER_BLOCK, sizeof *blk);
            if (blk)
                atomic_store_explicit(&o->blk[b], blk, memory_order_release);
            else
                ok = 0;
        }
    }
    if (ok) {
        slot_write(slot_at(o, i), base, size, kind);
        if (i == n) atomic_store_explicit(&o->n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&o->lock);
    return ok ? 0 : -1;
}

void gp_owners_remove(gp_owners *o, uintptr_t base)
{
    if (!o) return;
    pthread_mutex_lock(&o->lock);
    size_t nr = atomic_load_explicit(&o->nregion, memory_order_relaxed);
    for (size_t i = 0; i < nr; i++)
        if (o->region[i].base == base &&
            atomic_load_explicit(&o->region[i].size, memory_order_relaxed)) {
            /* never reused: a reader that still sees the old size finds an arena gone,
             * which no valid pointer can name */
            atomic_store_explicit(&o->region[i].size, 0, memory_order_relaxed);
            pthread_mutex_unlock(&o->lock);
            return;
        }
    size_t n = atomic_load_explicit(&o->n, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        gp_owner_slot *s = slot_at(o, i);
        if (atomic_load_explicit(&s->size, memory_order_relaxed) &&
            atomic_load_explicit(&s->base, memory_order_relaxed) == base) {
            slot_write(s, 0, 0, GPOOL_MEM_AUTO);
            break;
        }
    }
    pthread_mutex_unlock(&o->lock);
}
