/* scale.c — `gpool-bench scale`: what each operation costs as the heap grows.
 *
 * For each heap size N the pool gets 2N blocks, then half of them, chosen at random, are freed:
 * a fragmented heap of N live blocks with holes of every size between them. In that state it
 * times, per operation:
 *   pair     alloc+free of a block of a random size of the same distribution (the heap search)
 *   stats    gpool_get_stats
 *   lookup   gpool_block_info of a random live block (the pointer lookup every free makes)
 *   trim     one gpool_trim(pool, 0) (every cached page given back)
 * and the same operations of jemalloc in the same process on the same sizes and the same
 * fragmentation (mallocx/dallocx; mallctl "epoch" + "stats.allocated"; sallocx; an arena purge),
 * so that the ratios hold on a shared, noisy machine. Large rows use blocks above the small
 * limit (the heap); the small row uses slab blocks (thread caches off, so each pair reaches the
 * slab). On the simulated driver, device memory is host memory that is never touched. */
#include "bench.h"

#include <jemalloc/jemalloc.h>
#include <stdlib.h>
#include <string.h>

#define SCALE_PAIRS   20000
#define SCALE_LOOKUPS 20000
#define SCALE_STATS   2000

static uint64_t scale_size(bench_rng *r, int small)
{
    /* large: 20 KiB..128 KiB (above the default small_max of 16 KiB); small: 64 B..2 KiB */
    return small ? 64 + bench_rng_next(r) % 1985 : (20 << 10) + bench_rng_next(r) % (108 << 10);
}

typedef struct scale_heap {
    void **ptrs;
    size_t n; /* live */
} scale_heap;

/* 2n blocks, then half of them freed at random (Fisher-Yates order). */
static int build_heap(gpool_t *pool, size_t n, int small, bench_rng *r, scale_heap *h, char *err,
                      size_t errlen)
{
    size_t total = 2 * n;
    h->ptrs = calloc(total, sizeof *h->ptrs);
    h->n = 0;
    if (!h->ptrs) return snprintf(err, errlen, "out of host memory"), -1;
    for (size_t i = 0; i < total; i++) {
        uint64_t sz = scale_size(r, small);
        void *p = NULL;
        if (pool) {
            gpool_status st = gpool_alloc(pool, sz, NULL, &p);
            if (st != GPOOL_OK) {
                char why[600];
                snprintf(err, errlen, "block %zu of %zu: %s", i + 1, total,
                         bench_gpool_msg(why, sizeof why, "gpool_alloc", st));
                h->n = i;
                return -1;
            }
        } else if (!(p = mallocx(sz, 0))) {
            h->n = i;
            return snprintf(err, errlen, "mallocx failed"), -1;
        }
        h->ptrs[i] = p;
    }
    for (size_t i = total - 1; i > 0; i--) {
        size_t j = bench_rng_next(r) % (i + 1);
        void *t = h->ptrs[i];
        h->ptrs[i] = h->ptrs[j];
        h->ptrs[j] = t;
    }
    for (size_t i = n; i < total; i++) {
        if (pool)
            gpool_free(pool, h->ptrs[i]);
        else
            dallocx(h->ptrs[i], 0);
    }
    h->n = n;
    return 0;
}

static void free_heap(gpool_t *pool, scale_heap *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (pool)
            gpool_free(pool, h->ptrs[i]);
        else
            dallocx(h->ptrs[i], 0);
    }
    free(h->ptrs);
    h->ptrs = NULL;
}

static volatile uintptr_t scale_sink;

static int time_pairs(gpool_t *pool, int small, bench_rng *r, double *ns, char *err, size_t errlen)
{
    uint64_t sizes[256];
    for (int i = 0; i < 256; i++)
        sizes[i] = scale_size(r, small);
    uintptr_t acc = 0;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < SCALE_PAIRS; i++) {
        void *p;
        if (pool) {
            gpool_status st = gpool_alloc(pool, sizes[i & 255], NULL, &p);
            if (st != GPOOL_OK) return bench_gpool_msg(err, errlen, "gpool_alloc", st), -1;
            acc += (uintptr_t)p;
            gpool_free(pool, p);
        } else {
            p = mallocx(sizes[i & 255], 0);
            acc += (uintptr_t)p;
            dallocx(p, 0);
        }
    }
    *ns = (double)(bench_now_ns() - t0) / SCALE_PAIRS;
    scale_sink = acc;
    return 0;
}

/* At most SCALE_STATS calls or a fifth of a second, whichever comes first: a statistics call
 * that walks the heap takes milliseconds at the largest sizes. */
static double time_stats(gpool_t *pool)
{
    uint64_t t0 = bench_now_ns();
    size_t acc = 0;
    int i;
    for (i = 0; i < SCALE_STATS && (i < 8 || bench_now_ns() - t0 < 200000000ull); i++) {
        if (pool) {
            gpool_stats s = GPOOL_STATS_INIT;
            gpool_get_stats(pool, &s);
            acc += s.driver_calls_total;
        } else {
            uint64_t epoch = 1;
            size_t sz = sizeof epoch, allocated = 0, asz = sizeof allocated;
            mallctl("epoch", &epoch, &sz, &epoch, sz);
            mallctl("stats.allocated", &allocated, &asz, NULL, 0);
            acc += allocated;
        }
    }
    scale_sink = acc;
    return (double)(bench_now_ns() - t0) / i;
}

static double time_lookups(gpool_t *pool, const scale_heap *h, bench_rng *r)
{
    size_t acc = 0;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < SCALE_LOOKUPS; i++) {
        void *p = h->ptrs[bench_rng_next(r) % h->n];
        if (pool) {
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            gpool_get_block_desc(pool, p, &d);
            acc += d.size;
        } else {
            acc += sallocx(p, 0);
        }
    }
    scale_sink = acc;
    return (double)(bench_now_ns() - t0) / SCALE_LOOKUPS;
}

static double time_trim(gpool_t *pool)
{
    uint64_t t0 = bench_now_ns();
    if (pool) {
        gpool_trim(pool, 0);
    } else {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "arena.%u.purge", (unsigned)MALLCTL_ARENAS_ALL);
        mallctl(cmd, NULL, NULL, NULL, 0);
    }
    return (double)(bench_now_ns() - t0);
}

/* One side (gpool or jemalloc) of one row. */
static int measure(const bench_device *dev, gpool_t *pool, bench_scale_row *row, int gp, char *err,
                   size_t errlen)
{
    bench_rng r;
    bench_rng_seed(&r, 42 + row->live + (uint64_t)row->small);
    scale_heap h;
    if (build_heap(pool, row->live, row->small, &r, &h, err, errlen) != 0) {
        free_heap(pool, &h);
        return -1;
    }
    double pair, stats, lookup, trim;
    if (time_pairs(pool, row->small, &r, &pair, err, errlen) != 0) {
        free_heap(pool, &h);
        return -1;
    }
    stats = time_stats(pool);
    lookup = time_lookups(pool, &h, &r);
    trim = time_trim(pool);
    free_heap(pool, &h);
    (void)dev;
    if (gp) {
        row->gpool_pair_ns = pair, row->gpool_stats_ns = stats;
        row->gpool_lookup_ns = lookup, row->gpool_trim_ns = trim;
    } else {
        row->jem_pair_ns = pair, row->jem_stats_ns = stats;
        row->jem_lookup_ns = lookup, row->jem_trim_ns = trim;
    }
    return 0;
}

int bench_scale_run(const bench_device *dev, bench_scale_row *rows, size_t n, char *err,
                    size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        bench_scale_row *row = &rows[i];
        gpool_config cfg = GPOOL_CONFIG_INIT;
        gpool_config_default(&cfg);
        cfg.device = dev->ordinal;
        if (row->small) cfg.tcache_bytes = 0; /* every pair reaches the slabs */
        if (dev->simulated) bench_sim_set_capacity(dev->ordinal, (uint64_t)64 << 30);
        gpool_t *pool = NULL;
        gpool_status st = gpool_create(&cfg, &pool);
        if (st != GPOOL_OK) {
            bench_gpool_msg(err, errlen, "gpool_create", st);
            return -1;
        }
        int rc = measure(dev, pool, row, 1, err, errlen);
        gpool_destroy(pool);
        if (rc != 0 || measure(dev, NULL, row, 0, err, errlen) != 0) return -1;
    }
    if (dev->simulated) bench_sim_set_capacity(dev->ordinal, dev->total_mem);
    return 0;
}
