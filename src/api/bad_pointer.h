/* Invalid-pointer reports: the one place that words GPOOL_ERR_INVALID_POINTER for a pointer
 * gpool does not own, an interior pointer or a block already freed, whichever kind or path
 * (arena, slab, host kind, stream rule, queries) found it. */
#ifndef GPOOL_BAD_POINTER_H
#define GPOOL_BAD_POINTER_H

#include <stdint.h>

#include "gpool.h"

typedef enum gp_bad_ptr {
    GP_PTR_FOREIGN,        /* not in any of the pool's memory */
    GP_PTR_FOREIGN_LOCKED, /* page-locked host memory the pool did not allocate */
    GP_PTR_INTERIOR,       /* inside a live block (at base, when known), not its start */
    GP_PTR_FREED,          /* in the pool's memory of kind, but no live block there */
    GP_PTR_PENDING,        /* a block whose free is still pending on a stream: a double free */
    GP_PTR_HOST_ALIAS,     /* the host address of the mapped block at base (its device address
                              is the one gpool_alloc returned) */
} gp_bad_ptr;

/* For kind: host memory, pinned or mapped. */
#define GP_MEM_HOST_ANY ((gpool_mem_kind)GPOOL_MEM_KIND_COUNT)

/* Sets the thread's message for ptr and returns GPOOL_ERR_INVALID_POINTER. kind names the
 * memory (GPOOL_MEM_AUTO: not known); base is the block's start for GP_PTR_INTERIOR (0: not
 * known). Any thread; no lock; cost: one snprintf. */
gpool_status gp_bad_pointer(const void *ptr, gp_bad_ptr why, gpool_mem_kind kind, uintptr_t base);

#endif
