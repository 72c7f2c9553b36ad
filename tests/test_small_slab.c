/* Small host blocks (below 64 KiB) from gpool's own slab allocator (src/placement/host_small.c),
 * through the public API on the simulated driver: every size and alignment gets a block of its own,
 * aligned as asked, inside a registered extent, that no other live block overlaps; mapped
 * blocks' device addresses are their extent's plus the offset even when the driver's device
 * address differs from the host one; a slab emptied by frees serves another size class
 * without a new registration. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "kind_host.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)

static gpool_status alloc_small(gpool_t *pool, gpool_mem_kind kind, size_t size, size_t align,
                                void **out)
{
    gpool_alloc_params p = {.kind = kind, .alignment = align};
    return gpool_alloc(pool, size, &p, out);
}

/* the "registrations" count of kind's small-block allocator in gpool_dump_json */
static long small_registrations(gpool_t *pool, const char *kind_key)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(gpool_dump_json(pool, f), GPOOL_OK);
    fclose(f);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":{", kind_key);
    const char *k = strstr(buf, key);
    cr_assert_not_null(k, "%s", buf);
    const char *r = strstr(k, "\"registrations\":");
    cr_assert_not_null(r, "%s", buf);
    long n = strtol(r + strlen("\"registrations\":"), NULL, 10);
    free(buf);
    return n;
}

typedef struct {
    uintptr_t p;
    size_t n;
} span;

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const span *)a)->p, y = ((const span *)b)->p;
    return x < y ? -1 : x > y;
}

Test(small_slab, every_size_and_alignment_gets_its_own_aligned_registered_block)
{
    gpool_t *pool = test_pool(NULL);
    enum { N = 600 };
    void *blk[N];
    span sp[N];
    uint32_t seed = 11;
    const gpool_mem_kind kinds[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++) {
            size_t align = (size_t)256 << (rnd(&seed) % 5); /* 256 .. 4 KiB */
            size_t size = i < 64 ? (size_t)i + 1 : 1 + rnd(&seed) % (64 * KiB - 1);
            cr_assert_eq(alloc_small(pool, kinds[k], size, align, &blk[i]), GPOOL_OK, "%s",
                         gpool_last_error());
            cr_assert_eq((uintptr_t)blk[i] % align, 0, "%zu bytes aligned to %zu: %p", size, align,
                         blk[i]);
            cr_assert(gp_sysmem_in_small_extent(pool, kinds[k], blk[i]), "%zu bytes: %p", size,
                      blk[i]);
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, blk[i], &d), GPOOL_OK);
            cr_assert_geq(d.size, size);
            sp[i] = (span){(uintptr_t)blk[i], size};
        }
        qsort(sp, N, sizeof *sp, by_addr);
        for (int i = 1; i < N; i++)
            cr_assert_leq(sp[i - 1].p + sp[i - 1].n, sp[i].p, "blocks %#lx+%zu and %#lx overlap",
                          (unsigned long)sp[i - 1].p, sp[i - 1].n, (unsigned long)sp[i].p);
        for (int i = 0; i < N; i++)
            cr_assert_eq(gpool_free(pool, blk[i]), GPOOL_OK);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    NEED_SIM();
    cr_assert_eq(sim_live_total(), 0);
}

Test(small_slab, an_emptied_slab_serves_another_class_without_a_new_registration)
{
    gpool_t *pool = test_pool(NULL);
    /* one 256 KiB slab of 48-byte blocks, freed, then 60 KiB blocks: the extent registered for
     * the first is the only one (2 MiB: eight slabs), so the second class reuses slabs */
    enum { N = 4000 };
    void **blk = calloc(N, sizeof *blk);
    for (int i = 0; i < N; i++)
        cr_assert_eq(alloc_small(pool, GPOOL_MEM_HOST_PINNED, 48, 0, &blk[i]), GPOOL_OK, "%s",
                     gpool_last_error());
    long regs = small_registrations(pool, "host_pinned");
    cr_assert_eq(regs, 1);
    for (int i = 0; i < N; i++)
        cr_assert_eq(gpool_free(pool, blk[i]), GPOOL_OK);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 32; i++)
            cr_assert_eq(alloc_small(pool, GPOOL_MEM_HOST_PINNED, 60 * KiB, 0, &blk[i]), GPOOL_OK,
                         "%s", gpool_last_error());
        for (int i = 0; i < 32; i++)
            cr_assert_eq(gpool_free(pool, blk[i]), GPOOL_OK);
    }
    cr_assert_eq(small_registrations(pool, "host_pinned"), 1,
                 "the emptied slabs were not reused across classes");
    free(blk);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}
