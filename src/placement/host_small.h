/* Small host blocks: gpool's own size-class slab allocator over extents of 2 MiB that are
 * mmap'ed, NUMA-bound and registered with the driver (no jemalloc: libgpool.so must load into
 * a running process, and Debian's libjemalloc needs static TLS). Each extent is cut into
 * 256 KiB slabs; a slab serves one size class (16-byte steps to 128 bytes, then four classes
 * per doubling up to 64 KiB) and goes back to the unused slabs when its last block is freed.
 * Pinned blocks never mix with the process's ordinary malloc, and malloc never hands out
 * pinned memory. Extents are kept until the allocator is destroyed. */
#ifndef GPOOL_HOST_SMALL_H
#define GPOOL_HOST_SMALL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sizeclass.h"
#include "host_pages.h"

typedef struct gp_small gp_small;

/* The largest block and alignment served. */
#define GP_SMALL_MAX       GP_SMALL_LIMIT
#define GP_SMALL_MAX_ALIGN ((size_t)4 << 10)

/* Create the small-block allocator for kind (HOST_PINNED or HOST_MAPPED). *reserved follows
 * the bytes registered. Registers nothing yet (the first block registers the first extent);
 * GPOOL_ERR_OUT_OF_MEMORY when out of host memory. */
gpool_status gp_small_create(const gp_host_env *env, gpool_mem_kind kind, _Atomic size_t *reserved,
                             gp_small **out);

/* Allocate size bytes (at most GP_SMALL_MAX) aligned to align (a power of two, at most
 * GP_SMALL_MAX_ALIGN); *usable receives the block's real size (its class). Errors as the
 * driver's registration of a new extent, GPOOL_ERR_OUT_OF_MEMORY when mmap fails. */
gpool_status gp_small_alloc(gp_small *s, size_t size, size_t align, int zero, void **out,
                            size_t *usable);
/* As gp_small_alloc without zeroing, but only from an extent already registered: 1 and the
 * block, or 0 (nothing set, no error) when serving it would register a new extent or the
 * request is beyond the slabs' reach. No driver call; one lock. For a caller that holds its
 * own lock around it (the host kind's warm path): nothing here waits on the driver. */
int gp_small_alloc_warm(gp_small *s, size_t size, size_t align, void **out, size_t *usable);
/* Give back a block from gp_small_alloc (p NULL or not from s: nothing happens). */
void gp_small_free(gp_small *s, void *p);
/* As gp_small_free for n blocks, in one hold of the lock (the host kind's settle). */
void gp_small_free_many(gp_small *s, void *const *p, size_t n);

/* 1 when p lies in one of the registered extents (by host or device address). */
int gp_small_contains(gp_small *s, uintptr_t p);
/* Device address of host address `host` in an extent (cuMemHostGetDevicePointer's answer for
 * mapped memory, the host address for pinned), 0 if it is in none. */
uintptr_t gp_small_device_addr(gp_small *s, uintptr_t host);

/* A number naming this allocator, unique in the process (for tests and dump_json). */
unsigned gp_small_arena_index(const gp_small *s);
/* Extents registered now, and ever. */
void gp_small_counts(gp_small *s, size_t *extents, uint64_t *registrations);

/* Unregister and unmap every extent (every block in them is gone), even those whose
 * unregister keeps failing. GPOOL_OK, or GPOOL_ERR_DRIVER naming cuMemHostUnregister (the
 * first failure) with the message set. */
gpool_status gp_small_destroy(gp_small *s);

#endif
