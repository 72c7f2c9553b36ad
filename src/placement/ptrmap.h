/* Address → block map for the blocks that are not in slabs: open addressing, linear probing,
 * backward-shift deletion. Not thread-safe (the arena's lock guards it). */
#ifndef GPOOL_PTRMAP_H
#define GPOOL_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gp_ptrmap {
    uintptr_t *keys; /* 0 = empty */
    void **vals;
    size_t cap, count; /* cap is a power of two */
} gp_ptrmap;

void gp_ptrmap_init(gp_ptrmap *m);
void gp_ptrmap_fini(gp_ptrmap *m);
/* 0 on success, -1 when out of host memory. key must be non-zero and not present. */
int gp_ptrmap_put(gp_ptrmap *m, uintptr_t key, void *val);
void *gp_ptrmap_get(const gp_ptrmap *m, uintptr_t key);
/* Removes key and returns its value, or NULL if absent. */
void *gp_ptrmap_del(gp_ptrmap *m, uintptr_t key);
/* One probe for a caller that may remove what it finds: key's slot, or m->cap when absent (its
 * value: m->vals[slot]); valid until the map next changes. */
size_t gp_ptrmap_slot(const gp_ptrmap *m, uintptr_t key);
/* Removes the entry at a slot gp_ptrmap_slot found, returning its value. */
void *gp_ptrmap_del_at(gp_ptrmap *m, size_t slot);

#endif
