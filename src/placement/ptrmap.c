/* The address -> block map (ptrmap.h): open addressing with linear probing and
 * backward-shift deletion, for the arena's large blocks and the host kind's block records. */
#include "ptrmap.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

void gp_ptrmap_init(gp_ptrmap *m)
{
    memset(m, 0, sizeof *m);
}

void gp_ptrmap_fini(gp_ptrmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int grow(gp_ptrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    uintptr_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t s = slot_of(m->keys[i], cap);
        while (keys[s])
            s = (s + 1) & (cap - 1);
        keys[s] = m->keys[i];
        vals[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int gp_ptrmap_put(gp_ptrmap *m, uintptr_t key, void *val)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0) return -1;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s])
        s = (s + 1) & (m->cap - 1);
    m->keys[s] = key;
    m->vals[s] = val;
    m->count++;
    return 0;
}

void *gp_ptrmap_get(const gp_ptrmap *m, uintptr_t key)
{
    if (!m->cap || !key) return NULL;
    for (size_t s = slot_of(key, m->cap); m->keys[s]; s = (s + 1) & (m->cap - 1))
        if (m->keys[s] == key) return m->vals[s];
    return NULL;
}

size_t gp_ptrmap_slot(const gp_ptrmap *m, uintptr_t key)
{
    if (!m->cap || !key) return m->cap;
    size_t mask = m->cap - 1, s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & mask;
    return m->keys[s] ? s : m->cap;
}

void *gp_ptrmap_del_at(gp_ptrmap *m, size_t s)
{
    size_t mask = m->cap - 1;
    void *val = m->vals[s];
    /* backward-shift: pull later members of the probe run into the hole */
    size_t hole = s;
    for (size_t j = (s + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->keys[hole] = 0;
    m->vals[hole] = NULL;
    m->count--;
    return val;
}

void *gp_ptrmap_del(gp_ptrmap *m, uintptr_t key)
{
    size_t s = gp_ptrmap_slot(m, key);
    return s < m->cap ? gp_ptrmap_del_at(m, s) : NULL;
}
