/* A 64 MiB heap region (2 MiB pages) at a fixed address for the heap's unit tests
 * (test_units, test_check): one per test file, set up and torn down around each test. */
#ifndef GPOOL_TEST_UTIL_HEAP_H
#define GPOOL_TEST_UTIL_HEAP_H

#include <criterion/criterion.h>

#include "heap.h"

#ifndef MiB
#define MiB ((size_t)1 << 20)
#endif
#define HEAP_BASE ((uintptr_t)1 << 40)

static gp_heap heap;

static inline void heap_setup(void)
{
    cr_assert_eq(gp_heap_init(&heap), 0);
    cr_assert_eq(gp_heap_add_region(&heap, HEAP_BASE, 64 * MiB, 2 * MiB), 0);
}

static inline void heap_teardown(void)
{
    gp_heap_fini(&heap);
}

/* A block of size bytes for stream tag; the test fails when none fits. */
static inline gp_range *take(size_t size, uintptr_t tag)
{
    int oom = 0;
    gp_range *r = gp_heap_take(&heap, size, GP_MIN_ALIGN, tag, &oom);
    cr_assert_not_null(r, "take %zu", size);
    return r;
}

#endif
