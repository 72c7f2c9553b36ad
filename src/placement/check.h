/* Invariant checkers for debug builds (make test-debug: -DGPOOL_DEBUG=1).
 *
 * The checkers are compiled into every build (so they never rot) but called only through the
 * GP_CHECK_* macros, which are empty unless GPOOL_DEBUG is set: a normal build pays nothing.
 * Each checker returns how many violations it found and writes the first one to msg; the
 * macros abort() with that message. Aborting is for debug builds only: a normal build never
 * aborts (docs/api.md, "Errors": every failure comes back as a status).
 *
 * GP_ASSERT states a precondition. It is tied to GPOOL_DEBUG, not to NDEBUG: release builds
 * often leave NDEBUG unset, and a library must not abort in them. */
#ifndef GPOOL_CHECK_H
#define GPOOL_CHECK_H

#include <stddef.h>

#include "arena.h"
#include "heap.h"

/* The address-space heap (heap.h): per region, ranges cover it in address order with
 * consistent links; no two neighbouring free ranges that gp_heap_mergeable() would merge are
 * left apart; every free range is in the one free index (a treap: BST order by (size, addr),
 * heap order by priority) and, when it has marks, on the one dirty list; each free range's
 * marks (at most GP_MARKS, none of the clean tag, spans inside the range) are well formed;
 * allocated ranges keep no index links or marks; counts and free_bytes match; page_used is
 * the allocated bytes per page. */
size_t gp_heap_check(const gp_heap *h, char *msg, size_t cap);

/* The arena (lock held): its heap, plus slabs (free stacks, slot states, partial and empty
 * lists, granule table), large blocks in the block map, every page holding allocated bytes
 * backed, and the running counters (in_use, requested, pending slots and bytes) equal to a
 * recomputation. Records the walk's cost in a->check_cost (for the sampling). */
size_t gp_arena_check(gp_arena *a, char *msg, size_t cap);

/* Lock held: gp_arena_check, sampled so that large arenas do not make the debug suite
 * crawl (every operation while the walk is small, then about 4096 units of work per
 * operation on average: a page counts 1/2, a range 64, a slab also 64 and its granules);
 * aborts with the message on a violation. */
void gp_arena_check_or_abort(gp_arena *a, const char *where);

void gp_check_abort(const char *what, const char *file, int line) __attribute__((noreturn));

/* A checker's report: violations counted, the first written to msg (cap bytes). */
typedef struct check_ctx {
    char *msg;
    size_t cap;
    size_t n;
} check_ctx;

void gp_check_bad(check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef GPOOL_DEBUG
#define GP_CHECK_ARENA(a, where) gp_arena_check_or_abort((a), (where))
#define GP_ASSERT(cond)                                                                            \
    ((cond) ? (void)0 : gp_check_abort("assertion failed: " #cond, __FILE__, __LINE__))
#else
#define GP_CHECK_ARENA(a, where) ((void)0)
#define GP_ASSERT(cond)          ((void)0)
#endif

#endif
