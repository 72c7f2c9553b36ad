/* Small host blocks: a jemalloc arena of its own (mallctl "arenas.create" with custom
 * extent_hooks) whose extents are mmap'ed, NUMA-bound and registered with the driver, used
 * only through mallocx/dallocx with MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE: pinned blocks
 * never mix with the process's ordinary malloc, and malloc never hands out pinned memory.
 * jemalloc retains extents (it never purges registered pages), so registered memory goes
 * back only when the arena is destroyed. */
#ifndef GPOOL_SYSMEM_SMALL_H
#define GPOOL_SYSMEM_SMALL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sysmem_backend.h"

typedef struct gp_small gp_small;

/* Create the jemalloc arena for kind (HOST_PINNED or HOST_MAPPED). *reserved follows the
 * bytes registered. Errors as the driver's registration (creating an arena registers its
 * first extent, for jemalloc's own metadata), GPOOL_ERR_UNSUPPORTED when jemalloc refuses. */
gpool_status gp_small_create(const gp_host_env *env, gpool_mem_kind kind, _Atomic size_t *reserved,
                             gp_small **out);

/* Allocate size bytes aligned to align; *usable receives the block's real size. */
gpool_status gp_small_alloc(gp_small *s, size_t size, size_t align, int zero, void **out,
                            size_t *usable);
void gp_small_free(gp_small *s, void *p);

/* 1 when p lies in one of the arena's registered extents (by host or device address). */
int gp_small_contains(gp_small *s, uintptr_t p);
/* Device address of host address `host` in an extent (cuMemHostGetDevicePointer's answer for
 * mapped memory, the host address for pinned), 0 if it is in none. */
uintptr_t gp_small_device_addr(gp_small *s, uintptr_t host);

/* The jemalloc arena index (for tests and dump_json). */
unsigned gp_small_arena_index(const gp_small *s);
/* Extents registered now, and ever. */
void gp_small_counts(gp_small *s, size_t *extents, uint64_t *registrations);

/* Destroy the jemalloc arena ("arena.<i>.destroy": every block in it is gone) and
 * unregister and unmap every extent. */
void gp_small_destroy(gp_small *s);

#endif
