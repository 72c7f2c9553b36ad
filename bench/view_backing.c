/* view_backing.c — which of a snapshot region's free ("cached") address space has memory behind
 * it. gpool reserves address space far beyond what it backs; a free range of the dump covers
 * both. The dump gives the number of backed pages per region, not which pages: every page that
 * a range in use, pending or slab touches is backed; the remaining backed pages are taken to be
 * the free pages nearest those (gpool maps pages where blocks are carved), lowest address first
 * among equals. Free pages beyond that count are drawn and counted as "reserved". */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

int bench_snap_split_reserved(bench_snap_region *r)
{
    if (!r->page || !r->size || !r->n_ranges) return 0;
    /* snapshots that label never-backed space "reserved" themselves (gpool_dump_json does now)
     * are exact: nothing to estimate */
    for (size_t i = 0; i < r->n_ranges; i++)
        if (r->ranges[i].state == BENCH_RANGE_RESERVED) return 0;
    uint64_t npages = (r->size + r->page - 1) / r->page;
    unsigned char *backed = calloc(npages, 1);        /* 1: backed, 2: free page, 0: untouched */
    uint64_t *queue = malloc(npages * sizeof *queue); /* breadth-first from backed pages */
    if (!backed || !queue) {
        free(backed);
        free(queue);
        return -1;
    }
    uint64_t known = 0, head = 0, tail = 0;
    for (size_t i = 0; i < r->n_ranges; i++) {
        const bench_snap_range *y = &r->ranges[i];
        if (y->addr < r->base || y->addr - r->base >= r->size || !y->size) continue;
        uint64_t first = (y->addr - r->base) / r->page;
        uint64_t last = (y->addr - r->base + y->size - 1) / r->page;
        if (last >= npages) last = npages - 1;
        for (uint64_t p = first; p <= last; p++) {
            if (y->state != BENCH_RANGE_CACHED) {
                if (backed[p] != 1) known++, queue[tail++] = p;
                backed[p] = 1;
            } else if (!backed[p]) {
                backed[p] = 2;
            }
        }
    }
    uint64_t left = r->backed_pages > known ? r->backed_pages - known : 0;
    if (!tail) /* nothing but free space: the backed pages from the start */
        for (uint64_t p = 0; p < npages && left; p++)
            if (backed[p] == 2) backed[p] = 1, left--;
    while (head < tail && left) {
        uint64_t p = queue[head++];
        uint64_t nb[2] = {p - 1, p + 1};
        for (int k = 0; k < 2 && left; k++) {
            if ((k == 0 && p == 0) || nb[k] >= npages || backed[nb[k]] != 2) continue;
            backed[nb[k]] = 1;
            left--;
            queue[tail++] = nb[k];
        }
    }
    free(queue);
    /* split every cached range at the boundaries between backed and free pages */
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        bench_snap_range *out = NULL;
        if (pass == 1) {
            out = malloc((n ? n : 1) * sizeof *out);
            if (!out) {
                free(backed);
                return -1;
            }
        }
        n = 0;
        for (size_t i = 0; i < r->n_ranges; i++) {
            const bench_snap_range *y = &r->ranges[i];
            if (y->state != BENCH_RANGE_CACHED || y->addr < r->base ||
                y->addr - r->base >= r->size) {
                if (out) out[n] = *y;
                n++;
                continue;
            }
            uint64_t a = y->addr, end = y->addr + y->size;
            while (a < end) {
                uint64_t p = (a - r->base) / r->page;
                int st = p < npages && backed[p] == 2 ? BENCH_RANGE_RESERVED : BENCH_RANGE_CACHED;
                uint64_t b = a;
                while (b < end) {
                    uint64_t q = (b - r->base) / r->page;
                    int sq =
                        q < npages && backed[q] == 2 ? BENCH_RANGE_RESERVED : BENCH_RANGE_CACHED;
                    if (sq != st) break;
                    uint64_t next = r->base + (q + 1) * r->page;
                    b = next < end ? next : end;
                }
                if (out) out[n] = (bench_snap_range){.addr = a, .size = b - a, .state = st};
                n++;
                a = b;
            }
        }
        if (out) {
            free(r->ranges);
            r->ranges = out;
            r->n_ranges = n;
        }
    }
    free(backed);
    return 0;
}
