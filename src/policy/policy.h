/* The placement policy: the whole decision about where a request goes, in one place.
 * Given the request (kind or usage hint, size, flags, alignment, page size) and the pool's
 * state (granularity, budgets, device size), policy.c says which kind serves it, with which
 * page or chunk size, and where an AUTO request moves when its kind cannot serve it (budgets:
 * kinds/budget.h). README, "Placement policy", shows the same tables. */
#ifndef GPOOL_POLICY_H
#define GPOOL_POLICY_H

#include <stdint.h>

#include "gpool.h"

/* Where a request is placed now. Made by gp_policy_place, moved by gp_policy_move. */
typedef struct gp_placement {
    gpool_mem_kind kind;  /* the kind to allocate from: never AUTO */
    gpool_mem_kind first; /* the kind it was placed on first (kind != first: it fell back) */
    int is_auto;          /* the request said AUTO: it may move to another kind */
    unsigned flags;       /* the request's GPOOL_ALLOC_* flags */
    size_t size;          /* bytes requested */
    size_t align;         /* alignment, at least GP_MIN_ALIGN */
    size_t want_page;     /* the page size the request asked for (0: automatic) */
    size_t page;          /* device: chunk size backing the block; host: page size */
} gp_placement;

/* Place a request (params may be NULL: device memory, default everything). Checks the
 * alignment and page size against the kind and the device's granularity;
 * GPOOL_ERR_INVALID_ARG or GPOOL_ERR_UNSUPPORTED (with a message) when they do not fit. */
gpool_status gp_policy_place(const gpool_t *pool, const gpool_alloc_params *params, size_t size,
                             gp_placement *out);

/* A request that failed with st (over_budget: its kind's budget refused it) moves on: 1 when
 * the table sends it to another kind (pl->kind and pl->page are then the new ones), 0 when it
 * fails as it is. An AUTO request moves at most once; explicit kinds never move. */
int gp_policy_move(gp_placement *pl, gpool_status st, int over_budget);

/* The page size (device: the chunk size) a block of kind (never AUTO) and size gets; want:
 * the size the request asked for, 0 for automatic. */
size_t gp_policy_page_size(const gpool_t *pool, gpool_mem_kind kind, size_t size, size_t want);

/* The kind an AUTO request gets: one table lookup by usage hint (and size). Never AUTO. */
gpool_mem_kind gp_policy_kind(gpool_usage usage, size_t size);

/* The kind an AUTO request moves to from kind; GPOOL_MEM_AUTO for none (the condition is in
 * the table too: gp_policy_move applies it). */
gpool_mem_kind gp_policy_spill(gpool_mem_kind kind);

/* One line on why the table maps usage to its kind (for docs and messages). */
const char *gp_policy_reason(gpool_usage usage);

#endif
