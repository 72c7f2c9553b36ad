/* The pool's address registry (src/placement/owners.h, issue 24 "one lookup per free"): both
 * kinds' ranges in one place, read lock-free by every free. Checked as a unit (add, find,
 * remove, slot reuse, readers racing a writer) and through a pool: every kind of block lies in
 * a range of its own kind, a foreign pointer in none, and ranges go when their memory does. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kind_host.h"
#include "owners.h"
#include "pool.h"
#include "util_pool.h"

#define MiB ((size_t)1 << 20)

TestSuite(owners);

Test(owners, add_find_remove_and_reuse_a_slot)
{
    gp_owners o;
    gp_owners_init(&o);
    struct gp_slab *slab = (struct gp_slab *)1;
    cr_assert_eq(gp_owners_find(&o, 0x1000, &slab), GPOOL_MEM_AUTO);
    cr_assert_null(slab);
    cr_assert_eq(gp_owners_add(&o, 0x100000, 0x10000, GPOOL_MEM_HOST_PINNED), 0);
    cr_assert_eq(gp_owners_add(&o, 0x200000, 0x10000, GPOOL_MEM_HOST_MAPPED), 0);
    cr_assert_eq(gp_owners_find(&o, 0x100000, &slab), GPOOL_MEM_HOST_PINNED);
    cr_assert_eq(gp_owners_find(&o, 0x10ffff, &slab), GPOOL_MEM_HOST_PINNED);
    cr_assert_eq(gp_owners_find(&o, 0x110000, &slab), GPOOL_MEM_AUTO, "one past the end");
    cr_assert_eq(gp_owners_find(&o, 0x0fffff, &slab), GPOOL_MEM_AUTO, "one before");
    cr_assert_eq(gp_owners_find(&o, 0x208000, &slab), GPOOL_MEM_HOST_MAPPED);
    gp_owners_remove(&o, 0x100000);
    cr_assert_eq(gp_owners_find(&o, 0x100000, &slab), GPOOL_MEM_AUTO);
    size_t n = atomic_load(&o.n);
    cr_assert_eq(gp_owners_add(&o, 0x300000, 0x10000, GPOOL_MEM_DEVICE), 0);
    cr_assert_eq(atomic_load(&o.n), n, "the freed slot is reused");
    cr_assert_eq(gp_owners_find(&o, 0x30ffff, &slab), GPOOL_MEM_DEVICE);
    gp_owners_remove(&o, 0x12345); /* not registered: nothing happens */
    cr_assert_eq(gp_owners_find(&o, 0x208000, &slab), GPOOL_MEM_HOST_MAPPED);
    gp_owners_fini(&o);
}

Test(owners, a_device_region_gives_the_slab_of_its_granule)
{
    gp_owners o;
    gp_owners_init(&o);
    _Atomic(struct gp_slab *) gran[4] = {NULL, NULL, NULL, NULL};
    atomic_store(&gran[2], (struct gp_slab *)0x5000);
    uintptr_t base = (uintptr_t)1 << 40;
    cr_assert_eq(gp_owners_add_region(&o, base, 4 * GP_GRANULE, GPOOL_MEM_DEVICE, gran), 0);
    struct gp_slab *slab;
    cr_assert_eq(gp_owners_find(&o, base + 2 * GP_GRANULE + 100, &slab), GPOOL_MEM_DEVICE);
    cr_assert_eq((uintptr_t)slab, 0x5000);
    cr_assert_eq(gp_owners_find(&o, base + GP_GRANULE, &slab), GPOOL_MEM_DEVICE);
    cr_assert_null(slab);
    gp_owners_fini(&o);
}

Test(owners, a_region_removed_is_no_ones_and_a_range_reuses_no_region)
{
    gp_owners o;
    gp_owners_init(&o);
    struct gp_slab *slab;
    cr_assert_eq(gp_owners_add_region(&o, 0x4000000, 0x200000, GPOOL_MEM_HOST_PINNED, NULL), 0);
    cr_assert_eq(gp_owners_add(&o, 0x8000000, 0x1000, GPOOL_MEM_HOST_MAPPED), 0);
    cr_assert_eq(gp_owners_find(&o, 0x4100000, &slab), GPOOL_MEM_HOST_PINNED);
    gp_owners_remove(&o, 0x4000000);
    cr_assert_eq(gp_owners_find(&o, 0x4100000, &slab), GPOOL_MEM_AUTO);
    cr_assert_eq(gp_owners_find(&o, 0x8000fff, &slab), GPOOL_MEM_HOST_MAPPED);
    for (int i = 0; i < GP_OWNER_REGIONS - 1; i++)
        cr_assert_eq(
            gp_owners_add_region(&o, ((uintptr_t)i + 100) << 24, 4096, GPOOL_MEM_DEVICE, NULL), 0);
    cr_assert_eq(gp_owners_add_region(&o, (uintptr_t)1 << 40, 4096, GPOOL_MEM_DEVICE, NULL), -1,
                 "the region table is full: the arena's region fails, it is not dropped");
    gp_owners_fini(&o);
}

Test(owners, many_ranges_grow_the_registry)
{
    gp_owners o;
    gp_owners_init(&o);
    for (uintptr_t i = 0; i < 3 * GP_OWNER_BLOCK + 5; i++)
        cr_assert_eq(gp_owners_add(&o, (i + 1) << 20, 4096, GPOOL_MEM_HOST_PINNED), 0);
    struct gp_slab *slab;
    for (uintptr_t i = 0; i < 3 * GP_OWNER_BLOCK + 5; i++)
        cr_assert_eq(gp_owners_find(&o, ((i + 1) << 20) + 4095, &slab), GPOOL_MEM_HOST_PINNED);
    gp_owners_fini(&o);
}

/* A writer adds and removes ranges over and over while readers look up a range that stays:
 * the stable range is always found with its kind, and an address in no range never is. */
struct race {
    gp_owners *o;
    atomic_int stop;
    atomic_long bad;
};

static void *writer(void *arg)
{
    struct race *r = arg;
    for (int i = 0; !atomic_load(&r->stop); i++) {
        uintptr_t base = ((uintptr_t)(i % 50) + 100) << 20;
        gp_owners_add(r->o, base, MiB, i & 1 ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED);
        gp_owners_remove(r->o, base);
    }
    return NULL;
}

static void *reader(void *arg)
{
    struct race *r = arg;
    struct gp_slab *slab;
    for (int i = 0; i < 200000; i++) {
        if (gp_owners_find(r->o, (uintptr_t)(10 << 20) + 77, &slab) != GPOOL_MEM_DEVICE)
            atomic_fetch_add(&r->bad, 1);
        if (gp_owners_find(r->o, (uintptr_t)(5000) << 20, &slab) != GPOOL_MEM_AUTO)
            atomic_fetch_add(&r->bad, 1);
    }
    return NULL;
}

Test(owners, readers_racing_a_writer_see_whole_ranges)
{
    gp_owners o;
    gp_owners_init(&o);
    for (uintptr_t i = 0; i < 5; i++) /* slots before it that the writer rewrites */
        gp_owners_add(&o, (i + 200) << 20, MiB, GPOOL_MEM_HOST_PINNED);
    cr_assert_eq(gp_owners_add(&o, (uintptr_t)10 << 20, MiB, GPOOL_MEM_DEVICE), 0);
    for (uintptr_t i = 0; i < 5; i++)
        gp_owners_remove(&o, (i + 200) << 20);
    struct race r = {.o = &o};
    pthread_t w, rd[2];
    pthread_create(&w, NULL, writer, &r);
    for (int i = 0; i < 2; i++)
        pthread_create(&rd[i], NULL, reader, &r);
    for (int i = 0; i < 2; i++)
        pthread_join(rd[i], NULL);
    atomic_store(&r.stop, 1);
    pthread_join(w, NULL);
    cr_assert_eq(atomic_load(&r.bad), 0, "%ld wrong answers", atomic_load(&r.bad));
    gp_owners_fini(&o);
}

static void *alloc_kind(gpool_t *pool, gpool_mem_kind kind, size_t size)
{
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = kind;
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, size, &prm, &p), GPOOL_OK, "%s", gpool_last_error());
    return p;
}

static gpool_mem_kind owner(gpool_t *pool, const void *p)
{
    struct gp_slab *slab;
    return gp_owners_find(&pool->owners, (uintptr_t)p, &slab);
}

/* Every kind of block, from every source, lies in a range of its kind; a free hands it to that
 * kind alone; the ranges go with their memory. */
static void blocks_of_every_kind(int no_uva)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    if (no_uva) cr_assert_eq(gp_sysmem_force_no_uva(pool), GPOOL_OK);
    struct {
        gpool_mem_kind kind;
        size_t size;
    } cases[] = {
        {GPOOL_MEM_DEVICE, 512},         {GPOOL_MEM_DEVICE, 3 * MiB},
        {GPOOL_MEM_HOST_PINNED, 512},    {GPOOL_MEM_HOST_PINNED, 3 * MiB},
        {GPOOL_MEM_HOST_MAPPED, 512},    {GPOOL_MEM_HOST_MAPPED, 3 * MiB},
        {GPOOL_MEM_HOST_PINNED, 100000},
    };
    enum { N = sizeof cases / sizeof *cases };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = alloc_kind(pool, cases[i].kind, cases[i].size);
        cr_assert_eq(owner(pool, p[i]), cases[i].kind, "case %d", i);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, p[i], &d), GPOOL_OK);
        if (d.host_ptr) cr_assert_eq(owner(pool, d.host_ptr), cases[i].kind, "case %d host", i);
    }
    void *foreign = malloc(64);
    cr_assert_eq(owner(pool, foreign), GPOOL_MEM_AUTO);
    cr_assert_eq(gpool_free(pool, foreign), GPOOL_ERR_INVALID_POINTER);
    free(foreign);
    for (int i = 0; i < N; i++)
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK, "case %d: %s", i, gpool_last_error());
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    /* small host blocks' extents and mapped blocks of their own went back: their ranges are
     * gone; a host arena keeps its address range (reserved, no pages) until the pool goes */
    for (int i = 2; i < N; i++) {
        int own_range = cases[i].size < 65536 || (no_uva && cases[i].kind == GPOOL_MEM_HOST_MAPPED);
        cr_assert_eq(owner(pool, p[i]), own_range ? GPOOL_MEM_AUTO : cases[i].kind,
                     "case %d after trim", i);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(owners, every_kind_of_block_lies_in_a_range_of_its_kind)
{
    blocks_of_every_kind(0);
}

Test(owners, without_unified_addressing_too)
{
    blocks_of_every_kind(1);
}
