/* Unit tests of the pure parts: the address-space heap, size classes, page-size table,
 * configuration parsing and the pointer map. No driver involved. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../preload/preload_options.h"
#include "arena.h"
#include "gpool.h"
#include "heap.h"
#include "options.h"
#include "pagesize.h"
#include "ptrmap.h"
#include "size_parse.h"
#include "sizeclass.h"
#include "util_sizes.h"
#include "util_heap.h"

#define MiB  ((size_t)1 << 20)
#define BASE HEAP_BASE

/* ---------- heap ---------- */

/* Pretend the backend backed pages [first, last] of region 0 (the heap only reads page_phys). */
static void back_pages(size_t first, size_t last)
{
    for (size_t p = first; p <= last; p++)
        heap.regions[0].page_phys[p] = 1;
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
        s[i] = gp_heap_take_top(&heap, slab, GP_GRANULE, GP_TAG_CLEAN, 1, &oom);
        cr_assert_not_null(s[i]);
        cr_assert_eq(s[i]->addr, BASE + 64 * MiB - (size_t)(i + 1) * slab, "packed from the top");
    }
    uintptr_t hole = s[1]->addr;
    gp_heap_give(&heap, s[1], GP_TAG_CLEAN, 0); /* a 64 KiB hole in the slab zone */
    gp_range *small = take(40 << 10, GP_TAG_CLEAN);
    cr_assert_eq(small->addr, BASE, "a block that fits below the slab zone does not take its hole");
    gp_range *again = gp_heap_take_top(&heap, slab, GP_GRANULE, GP_TAG_CLEAN, 1, &oom);
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

/* Under pressure (the arena's retry after giving back every unused page, issue 27) a request
 * goes where it needs the fewest fresh pages, either end of a free range: here the high end
 * of an 8 MiB hole, on the free head of a page a small block holds (1 fresh page), not its low
 * end after a block's 0.25 MiB tail (2 fresh pages), which plain best fit takes. */
Test(heap, under_pressure_a_request_needs_the_fewest_fresh_pages)
{
    size_t q = MiB / 4;
    gp_range *x = take(7 * q, GP_TAG_CLEAN);   /* [0, 1.75 MiB): page 0 */
    gp_range *f = take(8 * MiB, GP_TAG_CLEAN); /* [1.75, 9.75 MiB) */
    gp_range *z = take(q, GP_TAG_CLEAN);       /* [9.75, 10 MiB): page 4 */
    cr_assert_eq(z->addr, BASE + 39 * q);
    gp_heap_give(&heap, f, GP_TAG_CLEAN, 0);
    back_pages(0, 0);
    back_pages(4, 4);
    int oom;
    gp_range *plain = gp_heap_take(&heap, 14 * q, GP_MIN_ALIGN, GP_TAG_CLEAN, &oom);
    cr_assert_eq(plain->addr, BASE + 7 * q, "best fit: the low end, pages 1-2 fresh");
    gp_heap_give(&heap, plain, GP_TAG_CLEAN, 0);
    heap.fewest_pages = 1;
    gp_range *tight = gp_heap_take(&heap, 14 * q, GP_MIN_ALIGN, GP_TAG_CLEAN, &oom);
    heap.fewest_pages = 0;
    cr_assert_eq(tight->addr, BASE + 25 * q, "the high end: page 3 fresh, page 4's head used");
    cr_assert_eq(tight->addr + tight->size, z->addr);
    gp_heap_give(&heap, tight, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, x, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, z, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
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
    back_pages(0, 1); /* a freed block's pages are backed (unbacked ones hold nothing) */
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
    back_pages(0, 1);
    gp_heap_give(&heap, a, GP_TAG_CLEAN, 0);
    gp_heap_retag_clean(&heap, 0x42, 0);
    uintptr_t tags[2];
    cr_assert_eq(gp_heap_dirty_tags(&heap, tags, 2), 1);
    int oom;
    gp_range *x = gp_heap_take(&heap, MiB, GP_MIN_ALIGN, 0x43, &oom);
    cr_assert(x && x->addr >= BASE + 4 * MiB, "0x43 gets unbacked space, not 0x42's range");
    gp_heap_give(&heap, x, GP_TAG_CLEAN, 0);
    gp_region *g = &heap.regions[0];
    gp_heap_pin_dirty(&heap, 1);
    cr_assert_eq(g->page_used[0], 2 * MiB, "pending ranges count as used while pinned");
    gp_heap_pin_dirty(&heap, 0);
    cr_assert_eq(g->page_used[0], 0);
    gp_heap_clean(&heap, 0x42, UINT64_MAX);
    gp_heap_give(&heap, b, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
}

Test(heap, retag_clean_leaves_unbacked_space_clean)
{
    /* A second stream appears: clean ranges on backed pages may still be used by the first
     * stream's queued work and wait for it, but never-backed address space holds no data any
     * work touches and stays clean, or the second stream could not use the region at all and
     * reserved another one (issue 15: batch-decode@2s). */
    gp_range *a = take(3 * MiB, GP_TAG_CLEAN); /* pages 0-1 */
    back_pages(0, 1);
    back_pages(31, 31); /* the top page (where slabs live) */
    gp_heap_give(&heap, a, GP_TAG_CLEAN, 0);
    gp_heap_retag_clean(&heap, 0x42, 0);
    int oom;
    gp_range *t = gp_heap_take(&heap, 8 * MiB, GP_MIN_ALIGN, 0x43, &oom);
    cr_assert_not_null(t, "the unbacked middle stays clean for another stream");
    cr_assert_geq(t->addr, BASE + 4 * MiB, "not on the backed pages 0-1");
    cr_assert_leq(t->addr + t->size, BASE + 62 * MiB, "not on the backed top page");
    gp_range *u = gp_heap_take(&heap, 4 * MiB - GP_MIN_ALIGN, GP_MIN_ALIGN, 0x43, &oom);
    cr_assert(!u || u->addr >= BASE + 4 * MiB, "pages 0-1 wait for stream 0x42");
    gp_range *own = take(4 * MiB, 0x42);
    cr_assert_eq(own->addr, BASE, "the first stream reuses its own pending range");
}

/* A request whose place of its own is on the frontier (the last cached bytes before unbacked
 * pages) claims a cached hole another stream freed instead: a block there would push the
 * frontier out, and the next request that fits no hole maps a fresh page (batch-decode@2s).
 * A place of its own inside the cached memory is still taken without a wait. */
Test(heap, a_request_on_the_frontier_claims_another_streams_hole)
{
    const uintptr_t S = 0x1000, T = 0x2000;
    gp_range *h = take(2 * MiB, S);           /* [0, 2): S's block */
    gp_range *mid = take(MiB, GP_TAG_CLEAN);  /* [2, 3) */
    gp_range *live = take(MiB, GP_TAG_CLEAN); /* [3, 4): stays live */
    back_pages(0, 2);                         /* [0, 6) cached, the rest unbacked */
    gp_heap_give(&heap, h, S, 7);             /* a hole pending on S */
    uintptr_t from[GP_MARKS];
    cr_assert_eq(gp_heap_claim(&heap, 3 * MiB / 2, GP_MIN_ALIGN, T, from), 1,
                 "T's own place is [4, 5.5), on the frontier: it claims S's hole");
    cr_assert_eq(from[0], S);
    gp_heap_give(&heap, mid, GP_TAG_CLEAN, 0); /* a clean 1 MiB hole at [2, 3) */
    cr_assert_eq(gp_heap_claim(&heap, MiB / 2, GP_MIN_ALIGN, T, from), 0,
                 "a cached hole of T's own fits: no wait");
    gp_heap_clean(&heap, S, 7);
    cr_assert_eq(gp_heap_claim(&heap, 3 * MiB / 2, GP_MIN_ALIGN, T, from), 0, "nothing pending");
    gp_heap_give(&heap, live, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);
}

/* Under stream_reuse=wait (merge_any) neighbouring frees of two streams form one range with a
 * mark per stream; each stream may use its own span at once, the other's only after a claim
 * (waiting for it) or once it is clean. With merge_any off (stream_reuse=events) they stay
 * apart, as the old per-stream tags kept them. */
Test(heap, marks_coalesce_across_streams_and_claims_name_them)
{
    const uintptr_t S = 0x1000, T = 0x2000;
    gp_range *a = take(2 * MiB, S), *b = take(2 * MiB, T);
    gp_range *rest = take(60 * MiB, GP_TAG_CLEAN);
    back_pages(0, 1);
    gp_heap_give(&heap, a, S, 3);
    gp_heap_give(&heap, b, T, 4);
    gp_range *one = heap.root;
    cr_assert(one && one->addr == BASE && one->size == 4 * MiB && one->nmarks == 2,
              "one range, two marks");
    uintptr_t from[GP_MARKS];
    cr_assert_eq(gp_heap_claim(&heap, 4 * MiB, GP_MIN_ALIGN, T, from), 1);
    cr_assert_eq(from[0], S, "the whole range waits for S only");
    int oom;
    cr_assert_null(gp_heap_take(&heap, 4 * MiB, GP_MIN_ALIGN, T, &oom), "S's span is not T's");
    gp_range *t = take(2 * MiB, T);
    cr_assert_eq(t->addr, BASE + 2 * MiB, "T's own span, past S's");
    gp_heap_give(&heap, t, T, 5);
    gp_heap_retag(&heap, S, 3, T, 6); /* T waited for S: S's span is T's now */
    cr_assert_eq(gp_heap_claim(&heap, 4 * MiB, GP_MIN_ALIGN, T, from), 0);
    gp_range *all = take(4 * MiB, T);
    cr_assert_eq(all->addr, BASE);
    gp_heap_give(&heap, all, GP_TAG_CLEAN, 0);
    gp_heap_give(&heap, rest, GP_TAG_CLEAN, 0);
    cr_assert_eq(heap.free_bytes, 64 * MiB);

    heap.merge_any = 0; /* stream_reuse=events */
    a = take(2 * MiB, S);
    b = take(2 * MiB, T);
    rest = take(60 * MiB, GP_TAG_CLEAN);
    gp_heap_give(&heap, a, S, 3);
    gp_heap_give(&heap, b, T, 4);
    cr_assert_eq(heap.nfree, 2, "two streams' frees stay apart");
    gp_heap_clean(&heap, S, 3);
    gp_heap_clean(&heap, T, 4);
    cr_assert_eq(heap.nfree, 1, "clean, they coalesce");
    gp_heap_give(&heap, rest, GP_TAG_CLEAN, 0);
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
    gpool_config c = GPOOL_CONFIG_INIT;
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
        gpool_config c = GPOOL_CONFIG_INIT, before;
        before = c;
        cr_assert_eq(gpool_config_parse(&c, bad[i]), GPOOL_ERR_CONFIG, "'%s' accepted", bad[i]);
        cr_assert_gt(strlen(gpool_last_error()), 0);
        cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "'%s' changed the config", bad[i]);
    }
    cr_assert_eq(gpool_config_parse(NULL, "a=1"), GPOOL_ERR_INVALID_ARG);
    gpool_config c = GPOOL_CONFIG_INIT;
    gpool_config_default(&c);
    cr_assert_eq(gpool_config_parse(&c, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_config_default(NULL), GPOOL_ERR_INVALID_ARG);
    /* trace paths have no length limit: the library keeps its own copy */
    char longpath[600];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "trace=", 6);
    longpath[sizeof longpath - 1] = 0;
    cr_assert_eq(gpool_config_parse(&c, longpath), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_str_eq(c.trace_path, longpath + 6);
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

/* ---------- size spellings (tests/util_sizes.h): the same list for every reader ---------- */

Test(config, sizes_are_spelled_as_everywhere_else)
{
    static const char *const keys[] = {"budget_device", "release_threshold"};
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < SIZES_ACCEPTED_COUNT; i++) {
            char conf[128];
            snprintf(conf, sizeof conf, "%s=%s", keys[k], sizes_accepted[i].text);
            gpool_config c = GPOOL_CONFIG_INIT;
            cr_assert_eq(gpool_config_parse(&c, conf), GPOOL_OK, "'%s' refused: %s", conf,
                         gpool_last_error());
            size_t got = k == 0 ? c.budget[GPOOL_MEM_DEVICE] : c.release_threshold;
            cr_assert_eq(got, (size_t)sizes_accepted[i].value, "'%s' gave %zu", conf, got);
        }
        for (size_t i = 0; i < SIZES_REJECTED_COUNT; i++) {
            char conf[128];
            snprintf(conf, sizeof conf, "%s=%s", keys[k], sizes_rejected[i]);
            gpool_config c = GPOOL_CONFIG_INIT, before = c;
            cr_assert_eq(gpool_config_parse(&c, conf), GPOOL_ERR_CONFIG, "'%s' accepted", conf);
            cr_assert(strstr(gpool_last_error(), keys[k]), "'%s': the message names the key: %s",
                      conf, gpool_last_error());
            cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "'%s' changed the config", conf);
        }
    }
}

Test(size_parse, spellings_values_and_reasons)
{
    for (size_t i = 0; i < SIZES_ACCEPTED_COUNT; i++) {
        const char *t = sizes_accepted[i].text;
        uint64_t v = 12345;
        cr_assert_eq(gp_size_parse(t, strlen(t), &v, NULL), 0, "'%s' refused", t);
        cr_assert_eq(v, sizes_accepted[i].value, "'%s' gave %llu", t, (unsigned long long)v);
    }
    for (size_t i = 0; i < SIZES_REJECTED_COUNT; i++) {
        const char *t = sizes_rejected[i], *why = NULL;
        uint64_t v = 12345;
        cr_assert_eq(gp_size_parse(t, strlen(t), &v, &why), -1, "'%s' accepted", t);
        cr_assert_eq(v, 12345, "'%s' wrote the result", t);
        cr_assert(why && *why, "'%s': no reason", t);
    }
    static const struct {
        const char *text, *why;
    } reasons[] = {
        {"", "empty"},    {"-1", "negative"},     {"x", "not a number"},
        {"64Q", "unit"},  {"1.5G", "whole"},      {"64MiBx", "junk"},
        {"64Mi", "unit"}, {"16777216T", "large"}, {"99999999999999999999", "large"},
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        const char *why = NULL;
        uint64_t v;
        cr_assert_eq(gp_size_parse(reasons[i].text, strlen(reasons[i].text), &v, &why), -1);
        cr_assert(strstr(why, reasons[i].why), "'%s': \"%s\" lacks \"%s\"", reasons[i].text, why,
                  reasons[i].why);
    }
    /* only len bytes are read: a value inside a longer string */
    uint64_t v = 0;
    cr_assert_eq(gp_size_parse("64MiB,next", 5, &v, NULL), 0);
    cr_assert_eq(v, 64ull << 20);
    cr_assert_eq(gp_size_parse("64MiB,next", 6, &v, NULL), -1);
    cr_assert_eq(gp_size_parse(NULL, 0, &v, NULL), -1);
}

/* The key tables are the truth the docs follow: every key of gpool's table and of the
 * interposer's has help text and is named in README.md (and gpool's in gpool.h's
 * gpool_config_parse comment); no key is in both tables. Run from the repository root. */
static char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s (run from the repository root)", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

Test(config, every_key_is_documented_and_owned_once)
{
    char *readme = slurp_file("README.md"), *header = slurp_file("include/gpool.h");
    const gp_option_table *tables[] = {&gp_config_options, &gpp_option_table};
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < tables[t]->count; i++) {
            const gp_option *k = &tables[t]->keys[i];
            char quoted[64];
            snprintf(quoted, sizeof quoted, "`%s", k->name);
            cr_assert(k->help && *k->help, "%s has no help text", k->name);
            cr_assert(strstr(readme, quoted), "README.md does not name %s", k->name);
            if (t == 0) cr_assert(strstr(header, k->name), "gpool.h does not name %s", k->name);
            for (size_t j = 0; j < gp_config_options.count && t == 1; j++)
                cr_assert_str_neq(k->name, gp_config_options.keys[j].name, "%s is in both tables",
                                  k->name);
        }
    free(readme);
    free(header);
}
