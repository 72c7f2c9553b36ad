/* Unit tests of the pure parts: the address-space heap, size classes, page-size table,
 * configuration parsing and the pointer map. No driver involved. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "gpool.h"
#include "heap.h"
#include "pagesize.h"
#include "ptrmap.h"
#include "sizeclass.h"

#define MiB  ((size_t)1 << 20)
#define BASE ((uintptr_t)1 << 40)

/* ---------- heap ---------- */

static gp_heap heap;
static void heap_setup(void)
{
    cr_assert_eq(gp_heap_init(&heap), 0);
    cr_assert_eq(gp_heap_add_region(&heap, BASE, 64 * MiB, 2 * MiB), 0);
}
static void heap_teardown(void)
{
    gp_heap_fini(&heap);
}

static gp_range *take(size_t size, uintptr_t tag)
{
    int oom = 0;
    gp_range *r = gp_heap_take(&heap, size, GP_MIN_ALIGN, tag, &oom);
    cr_assert_not_null(r, "take %zu", size);
    return r;
}

TestSuite(heap, .init = heap_setup, .fini = heap_teardown);

Test(heap, best_fit_lowest_address_and_coalescing)
{
    gp_range *a = take(MiB, GP_TAG_CLEAN), *b = take(3 * MiB, GP_TAG_CLEAN);
    gp_range *c = take(MiB, GP_TAG_CLEAN), *d = take(2 * MiB, GP_TAG_CLEAN);
    gp_range *e = take(MiB, GP_TAG_CLEAN);
    cr_assert_eq(a->addr, BASE);
    cr_assert_eq(b->addr, BASE + MiB);
    uintptr_t baddr = b->addr, daddr = d->addr;
    gp_heap_give(&heap, b, GP_TAG_CLEAN, 0); /* 3 MiB hole */
    gp_heap_give(&heap, d, GP_TAG_CLEAN, 0); /* 2 MiB hole */
    gp_range *f = take(2 * MiB, GP_TAG_CLEAN);
    cr_assert_eq(f->addr, daddr, "best fit takes the exact 2 MiB hole, not the 3 MiB one");
    gp_range *g = take(MiB, GP_TAG_CLEAN);
    cr_assert_eq(g->addr, baddr, "then the smallest hole that fits, at its low end");
    gp_heap_give(&heap, g, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, c, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, a, GP_TAG_CLEAN, 0);
    /* a, b, c coalesced into one 5 MiB range at the base */
    gp_range *h = take(5 * MiB, GP_TAG_CLEAN);
    cr_assert_eq(h->addr, BASE);
    gp_heap_give(&heap, h, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, f, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, e, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
    int n = 0;
    GP_HEAP_FOREACH(&heap, 0, r) n++;
    cr_assert_eq(n, 1, "everything coalesced back into one range");
}

/* Slabs (take_top) gather at the top and refill the holes earlier slabs left there before
 * the zone grows down; other blocks keep out of that zone while anything below fits, so a
 * repeated workload finds the same places again (no drift, no fresh pages). */
Test(heap, slab_zone_stays_put)
{
    int oom = 0;
    const size_t slab = 64 << 10;
    gp_range *s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = gp_heap_take_top(&heap, slab, GP_GRANULE, GP_TAG_CLEAN, &oom);
        cr_assert_not_null(s[i]);
        cr_assert_eq(s[i]->addr, BASE + 64 * MiB - (size_t)(i + 1) * slab, "packed from the top");
    }
    uintptr_t hole = s[1]->addr;
    gp_heap_give(&heap, s[1], GP_TAG_CLEAN, 0); /* a 64 KiB hole in the slab zone */
    gp_range *small = take(40 << 10, GP_TAG_CLEAN);
    cr_assert_eq(small->addr, BASE, "a block that fits below the slab zone does not take its hole");
    gp_range *again = gp_heap_take_top(&heap, slab, GP_GRANULE, GP_TAG_CLEAN, &oom);
    cr_assert_not_null(again);
    cr_assert_eq(again->addr, hole, "the next slab refills the hole: the zone does not creep");
    /* with nothing below that fits, a block may still use the slab zone's holes */
    gp_heap_give(&heap, again, GP_TAG_CLEAN, 0);
    gp_range *rest = take(64 * MiB - 4 * slab - (40 << 10), GP_TAG_CLEAN);
    gp_range *last = take(40 << 10, GP_TAG_CLEAN);
    cr_assert_eq(last->addr, hole);
    gp_heap_give(&heap, last, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, rest, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, small, GP_TAG_CLEAN, 0);
    /* the zone shrinks back when its lowest slab goes: the floor moves up to the next one */
    cr_assert_eq(heap.slab_floor, s[3]->addr);
    gp_heap_give(&heap, s[3], GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.slab_floor, s[2]->addr);
    gp_heap_give(&heap, s[2], GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.slab_floor, s[0]->addr, "the free hole above merged: s[0] is the lowest");
    gp_heap_give(&heap, s[0], GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
    cr_assert_eq(heap.slab_floor, UINTPTR_MAX, "no slab left: no zone");
}

Test(heap, page_counts_follow_blocks)
{
    gp_region *g = &heap.regions[0];
    gp_range *a = take(3 * MiB, GP_TAG_CLEAN);   /* pages 0 (2 MiB) and 1 (1 MiB) */
    gp_range *b = take(512 << 10, GP_TAG_CLEAN); /* page 1 */
    cr_assert_eq(g->page_used[0], 2 * MiB);
    cr_assert_eq(g->page_used[1], MiB + (512 << 10));
    cr_assert_eq(g->page_used[2], 0);
    gp_heap_give(&heap, a, GP_TAG_CLEAN, 0);
    cr_assert_eq(g->page_used[0], 0);
    cr_assert_eq(g->page_used[1], 512 << 10, "the neighbour still holds the shared page");
    gp_heap_give(&heap, b, GP_TAG_CLEAN, 0);
    cr_assert_eq(g->page_used[1], 0);
}

Test(heap, alignment)
{
    take(256, GP_TAG_CLEAN);
    int oom;
    gp_range *r = gp_heap_take(&heap, 4096, 2 * MiB, GP_TAG_CLEAN, &oom);
    cr_assert_not_null(r);
    cr_assert_eq(r->addr % (2 * MiB), 0);
}

Test(heap, tags_keep_streams_apart_until_clean)
{
    const uintptr_t S = 0x1000, T = 0x2000;
    gp_range *a = take(4 * MiB, S);
    uintptr_t addr = a->addr;
    gp_range *rest = take(60 * MiB, GP_TAG_CLEAN); /* fill the region */
    gp_heap_give(&heap, a, S, 5);
    int oom;
    cr_assert_null(gp_heap_take(&heap, MiB, GP_MIN_ALIGN, T, &oom), "T cannot use S's range");
    gp_range *mine = take(MiB, S);
    cr_assert_eq(mine->addr, addr, "S reuses its own range at once");
    gp_heap_give(&heap, mine, S, 7);
    uintptr_t tags[4];
    cr_assert_eq(gp_heap_dirty_tags(&heap, tags, 4), 1);
    cr_assert_eq(tags[0], S);
    gp_heap_clean(&heap, S, 6);
    cr_assert_null(gp_heap_take(&heap, MiB, GP_MIN_ALIGN, T, &oom), "seq 7 > 6: still pending");
    gp_heap_clean(&heap, S, 7);
    gp_range *t = gp_heap_take(&heap, 4 * MiB, GP_MIN_ALIGN, T, &oom);
    cr_assert_not_null(t, "clean after the event covering seq 7");
    cr_assert_eq(t->addr, addr);
    cr_assert_eq(gp_heap_dirty_tags(&heap, tags, 4), 0);
    gp_heap_give(&heap, t, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, rest, GP_TAG_CLEAN, 0);
}

Test(heap, retag_clean_and_pin_dirty)
{
    gp_range *a = take(2 * MiB, GP_TAG_CLEAN);
    gp_range *b = take(2 * MiB, GP_TAG_CLEAN);
    gp_heap_give(&heap, a, GP_TAG_CLEAN, 0);
    gp_heap_retag_clean(&heap, 0x42, 0);
    uintptr_t tags[2];
    cr_assert_eq(gp_heap_dirty_tags(&heap, tags, 2), 1);
    int oom;
    cr_assert_null(gp_heap_take(&heap, MiB, GP_MIN_ALIGN, 0x43, &oom));
    gp_region *g = &heap.regions[0];
    gp_heap_pin_dirty(&heap, 1);
    cr_assert_eq(g->page_used[0], 2 * MiB, "pending ranges count as used while pinned");
    gp_heap_pin_dirty(&heap, 0);
    cr_assert_eq(g->page_used[0], 0);
    gp_heap_clean(&heap, 0x42, UINT64_MAX);
    gp_heap_give(&heap, b, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
}

Test(heap, random_against_a_model)
{
    enum { N = 300 };
    gp_range *live[N] = {0};
    uint32_t x = 99;
    for (int op = 0; op < 20000; op++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        int i = (int)(x % N);
        if (live[i]) {
            gp_heap_give(&heap, live[i], GP_TAG_CLEAN, 0);
            live[i] = NULL;
        } else {
            size_t sz = ((size_t)(x >> 9) % (256 << 10) + 1 + 255) & ~(size_t)255;
            int oom;
            live[i] = gp_heap_take(&heap, sz, GP_MIN_ALIGN, GP_TAG_CLEAN, &oom);
            if (!live[i]) continue;
            for (int j = 0; j < N; j++) /* no overlap with any other live block */
                if (j != i && live[j])
                    cr_assert(live[i]->addr + live[i]->size <= live[j]->addr ||
                                  live[j]->addr + live[j]->size <= live[i]->addr,
                              "overlap at op %d", op);
        }
        if (op % 1000 == 0) { /* the list tiles the region exactly */
            uintptr_t at = BASE;
            size_t fr = 0;
            GP_HEAP_FOREACH(&heap, 0, r)
            {
                cr_assert_eq(r->addr, at);
                at += r->size;
                if (r->is_free) {
                    fr += r->size;
                    cr_assert(!r->next || !r->next->is_free, "adjacent free ranges not merged");
                }
            }
            cr_assert_eq(at, BASE + 64 * MiB);
            cr_assert_eq(fr, heap.free_bytes);
        }
    }
    for (int i = 0; i < N; i++)
        if (live[i]) gp_heap_give(&heap, live[i], GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
}

/* ---------- size classes ---------- */

Test(sizeclass, every_size_gets_the_smallest_class_that_fits)
{
    for (size_t s = 1; s <= GP_SMALL_LIMIT; s++) {
        unsigned c = gp_size_class(s);
        cr_assert_lt(c, GP_NCLASS);
        cr_assert_geq(gp_class_size(c), s, "size %zu class %u", s, c);
        if (c) cr_assert_lt(gp_class_size(c - 1), s, "size %zu: class %u would do", s, c - 1);
        cr_assert_leq(gp_class_size(c), s + s / 4 + 256, "waste bounded: size %zu", s);
    }
    cr_assert_eq(gp_class_size(GP_NCLASS - 1), GP_SMALL_LIMIT);
}

Test(sizeclass, slot_index_by_multiplication_is_exact)
{
    for (unsigned c = 0; c < GP_NCLASS; c++) {
        gp_slab s = {.base = 1 << 20, .slot_size = (uint32_t)gp_class_size(c)};
        size_t bytes = gp_slab_bytes(c);
        s.nslots = (uint16_t)(bytes / s.slot_size > GP_SLAB_MAX_SLOTS ? GP_SLAB_MAX_SLOTS
                                                                      : bytes / s.slot_size);
        s.recip = (((uint64_t)1 << 40) + s.slot_size - 1) / s.slot_size;
        for (uintptr_t off = 0; off < bytes; off += 16) {
            long i = gp_slot_index(&s, s.base + off);
            int start = off % s.slot_size == 0 && off / s.slot_size < s.nslots;
            cr_assert_eq(i >= 0, start, "class %u offset %lu", c, (unsigned long)off);
            if (start) cr_assert_eq((uintptr_t)i, off / s.slot_size);
        }
    }
}

/* ---------- page sizes ---------- */

Test(pagesize, device_table)
{
    const size_t g = 2 * MiB;
    cr_assert_eq(gp_device_chunk_size(256, g), g);
    cr_assert_eq(gp_device_chunk_size(63 * MiB, g), g);
    cr_assert_eq(gp_device_chunk_size(64 * MiB, g), 8 * MiB);
    cr_assert_eq(gp_device_chunk_size(256 * MiB, g), 32 * MiB);
    cr_assert_eq(gp_device_chunk_size((size_t)4 << 30, g), 64 * MiB);
    cr_assert_eq(gp_device_chunk_size(256, 128 * MiB), 128 * MiB, "never below granularity");
    for (size_t s = 1; s < ((size_t)8 << 30); s = s * 3 + 1) {
        size_t c = gp_device_chunk_size(s, g);
        cr_assert_eq(c % g, 0);
        cr_assert_eq(c & (c - 1), 0);
    }
}

Test(pagesize, host_table_and_validation)
{
    cr_assert_eq(gp_host_page_size(100), 4096);
    cr_assert_eq(gp_host_page_size(2 * MiB - 1), 4096);
    cr_assert_eq(gp_host_page_size(2 * MiB), 2 * MiB);
    cr_assert(gp_page_size_valid(0, 2 * MiB));
    cr_assert(gp_page_size_valid(4 * MiB, 2 * MiB));
    cr_assert(!gp_page_size_valid(3 * MiB, 2 * MiB));
    cr_assert(!gp_page_size_valid(MiB, 2 * MiB));
    cr_assert(!gp_page_size_valid((size_t)2 << 30, 2 * MiB));
}

/* ---------- configuration ---------- */

Test(config, parses_sizes_and_keys)
{
    gpool_config c;
    cr_assert_eq(gpool_config_default(&c), GPOOL_OK);
    cr_assert_eq(c.tcache_bytes, MiB);
    cr_assert_eq(gpool_config_parse(&c, " tcache_bytes=64K, small_max=4096 ,budget_device=2G,"
                                        "budget_pinned=1MiB,budget_mapped=3m,verbose=1,device=0,"
                                        "release_threshold=0,va_reserve=1T,trace=/tmp/x.csv,"),
                 GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(c.tcache_bytes, 64 << 10);
    cr_assert_eq(c.small_max, 4096);
    cr_assert_eq(c.budget[GPOOL_MEM_DEVICE], (size_t)2 << 30);
    cr_assert_eq(c.budget[GPOOL_MEM_HOST_PINNED], MiB);
    cr_assert_eq(c.budget[GPOOL_MEM_HOST_MAPPED], 3 * MiB);
    cr_assert_eq(c.verbose, 1);
    cr_assert_eq(c.va_reserve, (size_t)1 << 40);
    cr_assert_str_eq(c.trace_path, "/tmp/x.csv");
    cr_assert_eq(gpool_config_parse(&c, ""), GPOOL_OK);
}

Test(config, errors_name_the_key_and_leave_cfg_unchanged)
{
    static const char *bad[] = {
        "bogus=1",
        "tcache_bytes",
        "tcache_bytes=",
        "tcache_bytes=12Q",
        "tcache_bytes=-1",
        "small_max=1M",
        "verbose=2",
        "device=-1",
        "va_reserve=1M",
        "tcache_bytes=99999999999999999999",
        "budget_device=1K1",
        "=3",
        "small_max=4096,nope=2",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpool_config c, before;
        gpool_config_default(&c);
        before = c;
        cr_assert_eq(gpool_config_parse(&c, bad[i]), GPOOL_ERR_CONFIG, "'%s' accepted", bad[i]);
        cr_assert_gt(strlen(gpool_last_error()), 0);
        cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "'%s' changed the config", bad[i]);
    }
    cr_assert_eq(gpool_config_parse(NULL, "a=1"), GPOOL_ERR_INVALID_ARG);
    gpool_config c;
    gpool_config_default(&c);
    cr_assert_eq(gpool_config_parse(&c, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_config_default(NULL), GPOOL_ERR_INVALID_ARG);
    char longpath[600];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "trace=", 6);
    longpath[sizeof longpath - 1] = 0;
    cr_assert_eq(gpool_config_parse(&c, longpath), GPOOL_ERR_CONFIG);
}

/* ---------- pointer map ---------- */

Test(ptrmap, random_against_a_model)
{
    gp_ptrmap m;
    gp_ptrmap_init(&m);
    enum { N = 5000 };
    static uintptr_t keys[N];
    static int in[N];
    for (int i = 0; i < N; i++)
        keys[i] = ((uintptr_t)i + 1) * 256;
    uint32_t x = 5;
    for (int op = 0; op < 100000; op++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        int i = (int)(x % N);
        if (in[i]) {
            cr_assert_eq(gp_ptrmap_del(&m, keys[i]), (void *)(keys[i] + 1));
            in[i] = 0;
        } else {
            cr_assert_null(gp_ptrmap_get(&m, keys[i]));
            cr_assert_eq(gp_ptrmap_put(&m, keys[i], (void *)(keys[i] + 1)), 0);
            in[i] = 1;
        }
    }
    size_t count = 0;
    for (int i = 0; i < N; i++) {
        count += (size_t)in[i];
        cr_assert_eq(gp_ptrmap_get(&m, keys[i]), in[i] ? (void *)(keys[i] + 1) : NULL);
    }
    cr_assert_eq(m.count, count);
    cr_assert_null(gp_ptrmap_del(&m, 12345));
    gp_ptrmap_fini(&m);
}

/* A stream's own pending range is preferred only when it fits no worse than the best clean
 * one: taking a larger pending range splits it while an exact clean hole stays empty (the
 * multi-stream traces' fragmentation, issue 15 section 3). */
Test(heap, own_pending_range_only_when_it_fits_no_worse_than_clean)
{
    const uintptr_t S = 0x1000;
    gp_range *big = take(8 * MiB, S);
    gp_range *sep1 = take(MiB, S);
    gp_range *hole = take(2 * MiB, S);
    gp_range *sep2 = take(MiB, S);
    uintptr_t hole_addr = hole->addr, big_addr = big->addr;
    gp_heap_give(&heap, big, S, 3);             /* pending on S: 8 MiB */
    gp_heap_give(&heap, hole, GP_TAG_CLEAN, 0); /* clean: 2 MiB, exact fit */
    gp_range *r = take(2 * MiB, S);
    cr_assert_eq(r->addr, hole_addr, "the exact clean hole, not a split of S's 8 MiB range");
    gp_range *r2 = take(4 * MiB, S);
    cr_assert_eq(r2->addr, big_addr, "S's pending range when no clean range fits better");
    (void)sep1;
    (void)sep2;
}
