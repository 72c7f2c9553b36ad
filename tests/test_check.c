/* The debug build's invariant checkers (src/placement/check.h) can fail: each test corrupts one
 * thing in a heap or a live pool's device arena, sees the checker report it by name, and repairs
 * it. The checkers are compiled into every build, so these run in `make test` and `make test-debug`
 * alike (they call the checkers directly, which count violations, instead of the GP_CHECK_* macros,
 * which abort). */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "arena_internal.h"
#include "check.h"
#include "pool.h"
#include "util_pool.h"
#include "util_heap.h"

#define BASE HEAP_BASE

static char msg[512];

/* A heap with blocks, clean holes and a pending (dirty) range of stream 7. */
static gp_range *blocks[8];
static void populate(void)
{
    for (int i = 0; i < 8; i++)
        blocks[i] = take((size_t)(i + 1) * MiB / 2, GP_TAG_CLEAN);
    gp_heap_give(&heap, blocks[1], GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, blocks[3], 7, 5);
    gp_heap_give(&heap, blocks[5], GP_TAG_CLEAN, 0);
    cr_assert_eq(gp_heap_check(&heap, msg, sizeof msg), 0, "%s", msg);
}

static void expect_violation(const char *what)
{
    size_t n = gp_heap_check(&heap, msg, sizeof msg);
    cr_assert_gt(n, 0, "the checker missed: %s", what);
    cr_assert_not_null(strstr(msg, what), "expected \"%s\", got \"%s\"", what, msg);
}

TestSuite(heap_check, .init = heap_setup, .fini = heap_teardown);

Test(heap_check, a_sound_heap_passes_through_many_operations)
{
    uint32_t s = 1;
    gp_range *live[64] = {0};
    for (int op = 0; op < 3000; op++) {
        int k = (int)(rnd(&s) % 64);
        if (live[k]) {
            uintptr_t tag = rnd(&s) % 3 ? GP_TAG_CLEAN : 1 + rnd(&s) % 3;
            gp_heap_give(&heap, live[k], tag, op);
            live[k] = NULL;
        } else {
            int oom = 0;
            live[k] =
                gp_heap_take(&heap, (1 + rnd(&s) % 64) * 4096, GP_MIN_ALIGN, 1 + rnd(&s) % 3, &oom);
        }
        if (op % 97 == 0) gp_heap_clean(&heap, 1 + rnd(&s) % 3, UINT64_MAX);
        cr_assert_eq(gp_heap_check(&heap, msg, sizeof msg), 0, "op %d: %s", op, msg);
    }
}

Test(heap_check, treap_priority)
{
    populate();
    gp_range *root = heap.root;
    gp_range *child = root->left ? root->left : root->right;
    cr_assert_not_null(child);
    uint32_t saved = child->prio;
    child->prio = root->prio + 1;
    expect_violation("treap priority");
    child->prio = saved;
    cr_assert_eq(gp_heap_check(&heap, msg, sizeof msg), 0, "%s", msg);
}

Test(heap_check, treap_order)
{
    populate();
    gp_range *root = heap.root;
    cr_assert(root->left || root->right);
    gp_range *l = root->left, *r = root->right;
    root->left = r; /* mirror the root's children: both now sit on the wrong side */
    root->right = l;
    expect_violation("treap order");
    root->left = l;
    root->right = r;
}

Test(heap_check, free_bytes_total)
{
    populate();
    heap.free_bytes += 4096;
    expect_violation("free_bytes");
    heap.free_bytes -= 4096;
}

Test(heap_check, page_counts)
{
    populate();
    heap.regions[0].page_used[0] += 1;
    expect_violation("page_used");
    heap.regions[0].page_used[0] -= 1;
}

Test(heap_check, ranges_tile_the_region)
{
    populate();
    blocks[0]->size -= GP_MIN_ALIGN; /* a gap after it */
    expect_violation("gap or overlap");
    blocks[0]->size += GP_MIN_ALIGN;
}

Test(heap_check, mergeable_free_ranges_coalesce)
{
    populate();
    /* blocks[2] lies between the clean hole of blocks[1] and the pending range of blocks[3]:
     * marking it free without coalescing leaves adjacent free ranges that would merge */
    gp_range *r = blocks[2];
    r->is_free = 1;
    expect_violation("not coalesced");
    r->is_free = 0;
}

Test(heap_check, dirty_list)
{
    populate();
    gp_range *d = heap.dirty;
    cr_assert_not_null(d);
    heap.dirty = NULL;
    expect_violation("dirty list");
    heap.dirty = d;
}

Test(heap_check, marks_inside_their_range)
{
    populate();
    gp_range *d = heap.dirty;
    cr_assert_not_null(d);
    cr_assert_gt(d->nmarks, 0);
    uintptr_t hi = d->marks[0].hi;
    d->marks[0].hi = d->addr + d->size + GP_MIN_ALIGN;
    expect_violation("outside it");
    d->marks[0].hi = hi;
}

/* ---------- arena (a pool's device arena on the simulated driver) ---------- */

static gpool_t *pool;
static void *p_large, *p_small; /* p_small: 200 B, a 256 B slot of a slab a thread-cache refill
                                 * leaves free slots in (32 KiB slabs: 128 slots) */
static gp_arena *arena(void)
{
    return pool->device;
}

static void pool_setup(void)
{
    pool = test_pool(NULL);
    cr_assert_not_null(pool);
    cr_assert_eq(gpool_alloc(pool, 3 * MiB, NULL, &p_large), GPOOL_OK);
    cr_assert_eq(gpool_alloc(pool, 200, NULL, &p_small), GPOOL_OK);
    cr_assert_not_null(arena());
}
static void pool_teardown(void)
{
    gpool_free(pool, p_small);
    gpool_free(pool, p_large);
    gpool_destroy(pool);
}

static void expect_arena_violation(const char *what)
{
    pthread_mutex_lock(&arena()->lock);
    size_t n = gp_arena_check(arena(), msg, sizeof msg);
    pthread_mutex_unlock(&arena()->lock);
    cr_assert_gt(n, 0, "the checker missed: %s", what);
    cr_assert_not_null(strstr(msg, what), "expected \"%s\", got \"%s\"", what, msg);
}

static void expect_arena_sound(void)
{
    pthread_mutex_lock(&arena()->lock);
    size_t n = gp_arena_check(arena(), msg, sizeof msg);
    pthread_mutex_unlock(&arena()->lock);
    cr_assert_eq(n, 0, "%s", msg);
}

TestSuite(arena_check, .init = pool_setup, .fini = pool_teardown);

Test(arena_check, counters_equal_a_recomputation)
{
    expect_arena_sound();
    arena()->c.in_use += 256;
    expect_arena_violation("counter in_use");
    arena()->c.in_use -= 256;
    arena()->c.requested -= 1;
    expect_arena_violation("counter requested");
    arena()->c.requested += 1;
    expect_arena_sound();
}

Test(arena_check, pages_under_blocks_are_backed)
{
    gp_region *g = gp_heap_region_of(&arena()->heap, (uintptr_t)p_large);
    cr_assert_not_null(g);
    size_t p = ((uintptr_t)p_large - g->base) >> g->page_shift;
    uint64_t saved = g->page_phys[p];
    g->page_phys[p] = 0;
    expect_arena_violation("not backed");
    g->page_phys[p] = saved;
    expect_arena_sound();
}

Test(arena_check, large_blocks_are_in_the_block_map)
{
    gp_range *r = gp_ptrmap_del(&arena()->blocks, (uintptr_t)p_large);
    cr_assert_not_null(r);
    expect_arena_violation("missing from the block map");
    cr_assert_eq(gp_ptrmap_put(&arena()->blocks, (uintptr_t)p_large, r), 0);
    expect_arena_sound();
}

Test(arena_check, slab_free_stack_matches_slot_states)
{
    gp_slab *s = gp_arena_slab_of(arena(), (uintptr_t)p_small);
    if (!s) cr_skip_test("small blocks are not served from arena slabs here");
    cr_assert_gt(s->nfree, 0);
    uint16_t i = s->free_stack[s->nfree - 1];
    gp_slot_set(s, i, GP_SLOT_LIVE);
    expect_arena_violation("nfree");
    gp_slot_set(s, i, GP_SLOT_FREE);
    expect_arena_sound();
}

/* What a debug build runs at each operation boundary: on a violation, a message and abort(). */
Test(arena_check, a_violation_aborts_with_its_message, .signal = SIGABRT)
{
    pthread_mutex_lock(&arena()->lock);
    arena()->c.in_use += 256;
    arena()->check_ops = 0; /* not skipped by the sampling */
    gp_arena_check_or_abort(arena(), "a test");
    pthread_mutex_unlock(&arena()->lock);
}
