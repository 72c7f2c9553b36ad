/* What the arena needs from a memory backend (vidmem, sysmem): address space, and physical
 * pages mapped into it and out again. The arena keeps the page table (gp_region.page_used /
 * page_phys); a backend owns the meaning of page_phys values. All calls run under the
 * owning arena's lock. Every failure sets the thread's error message. */
#ifndef GPOOL_BACKEND_H
#define GPOOL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"
#include "heap.h"

typedef struct gp_backend_ops {
    const char *name;
    /* Reserve at least `size` bytes of address space; *base, *got receive the range. */
    gpool_status (*reserve)(void *ctx, size_t size, uintptr_t *base, size_t *got);
    /* Give a whole reservation back (nothing mapped in it any more). */
    gpool_status (*unreserve)(void *ctx, uintptr_t base, size_t size);
    /* Back pages [first, first+n) of g, all unbacked now, in physical allocations of chunk
     * bytes (the placement's choice for the block, pl->page: the backend does not decide
     * again; a multiple of the page). A
     * backend may back unbacked pages right after the run too (vidmem's cold-start growth:
     * those pages are free, as live blocks are always backed). All-or-nothing: on failure
     * no page of the run (or beyond it) stays backed. */
    gpool_status (*back)(void *ctx, gp_region *g, size_t first, size_t n, size_t chunk);
    /* Drop the backing of the pages in [first, first+n) whose physical memory holds no
     * allocated byte (page_used == 0 for every page it covers), keeping that memory cached
     * for reuse by `back`; *freed: bytes unbacked. Returns GPOOL_OK, or the first failure of a
     * call that gives memory back (cuMemUnmap, cuMemRelease, cuMemHostUnregister; its message
     * set): those pages stay backed and cached. */
    gpool_status (*unback_unused)(void *ctx, gp_region *g, size_t first, size_t n, size_t *freed);
    /* Return cached (unmapped) physical memory to the driver until at most keep bytes stay. */
    gpool_status (*release)(void *ctx, size_t keep);
    /* Physical bytes held by the backend: mapped and cached. */
    size_t (*held_bytes)(void *ctx);
    /* Physical bytes held but not mapped anywhere. */
    size_t (*idle_bytes)(void *ctx);
    /* Physical bytes the driver could still give (for OOM reports); SIZE_MAX if unknown. */
    size_t (*driver_free)(void *ctx);
    /* Tear down: unmap and release everything, unreserve regions. */
    void (*fini)(void *ctx, gp_heap *heap);
    /* Optional (NULL: the backend makes no aliases). The pages of the handle backing page p of
     * g (0 when p is unbacked or itself an alias); *index: p's place in it (0: its first). */
    size_t (*handle_pages)(void *ctx, const gp_region *g, size_t p, size_t *index);
    /* Map the handle whose first page is page src of gs again, at pages [dst, dst + its pages)
     * of gd (unbacked now): those pages read the same physical memory. unback_unused leaves
     * alias pages, and handles an alias maps, alone: unalias undoes it.
     * GPOOL_OK, or the failure (nothing mapped). */
    gpool_status (*alias)(void *ctx, const gp_region *gs, size_t src, gp_region *gd, size_t dst);
    /* Unmap the alias made at page first of g (its pages read as unbacked again); the caller
     * knows no queued work reads through it. GPOOL_OK, or the failure (it stays mapped). */
    gpool_status (*unalias)(void *ctx, gp_region *g, size_t first);
} gp_backend_ops;

#endif
