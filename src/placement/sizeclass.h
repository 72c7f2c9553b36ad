/* Small size classes: 256-byte steps up to 2 KiB, then four classes per doubling up to
 * 64 KiB (at most 20% rounding waste; small blocks are a few percent of bytes on real
 * traces). Slabs of 32 KiB-aligned memory (GP_GRANULE) hold the blocks of one class. */
#ifndef GPOOL_SIZECLASS_H
#define GPOOL_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

/* Slabs are 32 KiB (GP_GRANULE) aligned and sized (why: docs/history/placement-experiments.md). */
/* The one small-block limit: the largest device small_max allowed, and the size below which
 * host blocks come from the host small-block arena (host_small.c). */
#define GP_SMALL_LIMIT    ((size_t)64 << 10)
#define GP_NCLASS         28 /* classes up to GP_SMALL_LIMIT */
#define GP_GRANULE_SHIFT  15 /* slabs are 32 KiB aligned and sized */
#define GP_GRANULE        ((size_t)1 << GP_GRANULE_SHIFT)
#define GP_SLAB_MAX_SLOTS 256

/* Class index of size (1 <= size <= GP_SMALL_LIMIT). */
static inline unsigned gp_size_class(size_t size)
{
    if (size <= 2048) return (unsigned)((size + 255) >> 8) - (size ? 1 : 0);
    unsigned g = 63u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    return 8 + (g - 11) * 4 + (unsigned)((size - 1) >> (g - 2)) - 4;
}

/* Bytes of class c. */
static inline size_t gp_class_size(unsigned c)
{
    if (c < 8) return (size_t)(c + 1) << 8;
    unsigned g = 11 + (c - 8) / 4;
    return (size_t)(4 + (c - 8) % 4 + 1) << (g - 2);
}

/* Bytes of a slab for class c: at least four slots, a whole number of granules. */
static inline size_t gp_slab_bytes(unsigned c)
{
    size_t s = gp_class_size(c) * 4;
    if (s < GP_GRANULE) s = GP_GRANULE;
    return (s + GP_GRANULE - 1) & ~(GP_GRANULE - 1);
}

#endif
