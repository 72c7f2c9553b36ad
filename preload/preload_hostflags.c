/* preload_hostflags.c — the CU_MEMHOSTALLOC_* flags of the pinned host blocks gpool serves,
 * for cuMemHostGetFlags/cudaHostGetFlags (cuda.h, cuMemHostGetFlags: "Passes back the flags
 * pFlags that were specified when allocating the pinned host buffer"; cuda_runtime_api.h,
 * cudaHostGetFlags: for any pointer that resides in the allocation's range), and the
 * question a device free asks first: is this pointer a gpool host block (cudaFree of one is
 * cudaErrorInvalidValue, nothing freed)?
 *
 * An open-addressing table keyed by the pointer the program got, under one mutex; it grows
 * by doubling. The device free path reads live (an atomic) before anything else: while the
 * program holds no gpool host block it costs one relaxed load. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "preload.h"

typedef struct host_entry {
    void *p; /* NULL: empty; TOMB: deleted */
    unsigned flags;
} host_entry;

#define TOMB ((void *)(uintptr_t)1)

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static host_entry *table;
static size_t cap, used; /* used: live + tombstones */
static atomic_long live;

static size_t slot_of(const void *p, size_t n)
{
    uintptr_t h = (uintptr_t)p >> 4;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15u;
    return (size_t)(h ^ (h >> 29)) & (n - 1);
}

/* Index of p's entry, or of the empty slot where it would go (table_lock held, cap > 0). */
static size_t find(const void *p)
{
    size_t i = slot_of(p, cap), tomb = SIZE_MAX;
    for (;; i = (i + 1) & (cap - 1)) {
        if (table[i].p == p) return i;
        if (table[i].p == TOMB && tomb == SIZE_MAX) tomb = i;
        if (!table[i].p) return tomb != SIZE_MAX ? tomb : i;
    }
}

/* Make room for one more entry; 0 when memory is short. */
static int reserve(void)
{
    if (cap && (used + 1) * 4 < cap * 3) return 1;
    size_t ncap = 256; /* from the live entries: tombstones are dropped, not kept */
    while (((size_t)atomic_load(&live) + 1) * 2 >= ncap)
        ncap *= 2;
    host_entry *n = calloc(ncap, sizeof *n), *old = table;
    if (!n) return 0;
    size_t ocap = cap;
    table = n;
    cap = ncap;
    used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].p && old[i].p != TOMB) {
            table[find(old[i].p)] = old[i];
            used++;
        }
    free(old);
    return 1;
}

int gpp_host_flags_put(void *p, unsigned flags)
{
    pthread_mutex_lock(&table_lock);
    int ok = reserve();
    if (ok) {
        size_t i = find(p);
        if (table[i].p != p) {
            if (!table[i].p) used++;
            atomic_fetch_add(&live, 1);
        }
        table[i] = (host_entry){p, flags};
    }
    pthread_mutex_unlock(&table_lock);
    return ok;
}

void gpp_host_flags_drop(void *p)
{
    pthread_mutex_lock(&table_lock);
    if (cap) {
        size_t i = find(p);
        if (table[i].p == p) {
            table[i].p = TOMB;
            atomic_fetch_sub(&live, 1);
        }
    }
    pthread_mutex_unlock(&table_lock);
}

/* The flags of the block starting at p: 1 and *flags, or 0. */
static int lookup(void *p, unsigned *flags)
{
    int found = 0;
    pthread_mutex_lock(&table_lock);
    if (cap && p && p != TOMB) {
        size_t i = find(p);
        if (table[i].p == p) {
            found = 1;
            if (flags) *flags = table[i].flags;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

int gpp_host_block(void *p)
{
    return atomic_load_explicit(&live, memory_order_relaxed) && lookup(p, NULL);
}

long gpp_host_blocks(void)
{
    return atomic_load_explicit(&live, memory_order_relaxed);
}

int gpp_host_flags_get(void *p, unsigned *flags)
{
    if (!atomic_load_explicit(&live, memory_order_relaxed)) return 0;
    if (lookup(p, flags)) return 1;
    /* an address inside a block: the block's start through gpool */
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
        if (!pool || gpool_get_block_desc(pool, p, &desc) != GPOOL_OK) continue;
        return desc.kind != GPOOL_MEM_DEVICE && desc.host_ptr && lookup(desc.host_ptr, flags);
    }
    return 0;
}

/* The pool of a device being reset goes with its host blocks: their entries go first (an
 * address the driver hands out again must not read as a gpool host block). */
void gpp_host_flags_drop_pool(gpool_t *pool)
{
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < cap; i++) {
        gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
        if (!table[i].p || table[i].p == TOMB ||
            gpool_get_block_desc(pool, table[i].p, &desc) != GPOOL_OK)
            continue;
        table[i].p = TOMB;
        atomic_fetch_sub(&live, 1);
    }
    pthread_mutex_unlock(&table_lock);
}
