/* fit_fail.c — what the hardest request of a trace found: one more replay one page below the
 * fit's min capacity stops at the first failed allocation and writes a gpool_dump_json
 * snapshot there (the strategy has given back every page it could by then). Its device ranges
 * say, page by page, which backed pages were partly used (the free bytes in them are what a
 * tail-spanning block could still use, issue 27) and which held nothing at all (pages of a
 * multi-page handle that goes back to the driver only whole). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_state(const bench_json *x, const char *state)
{
    const bench_json *s = bench_json_get(x, "state");
    return s && s->type == BENCH_JSON_STRING && !strcmp(s->str, state);
}

/* The page being summed up: ranges come in address order, so pages do too. */
typedef struct page_acc {
    uint64_t index, used;
    int open;
} page_acc;

static void page_close(bench_fit_fail *x, page_acc *p, uint64_t page)
{
    if (!p->open) return;
    x->backed_pages++;
    if (p->used == 0)
        x->idle_pages++;
    else if (p->used < page) {
        x->partial_pages++;
        x->partial_free += page - p->used;
    }
    p->open = 0;
}

/* Bytes [addr, addr+size) on backed pages, `used` of them held. */
static void add_backed(bench_fit_fail *x, page_acc *p, uint64_t page, uint64_t base, uint64_t addr,
                       uint64_t size, int used)
{
    uint64_t end = addr + size;
    for (uint64_t a = addr; a < end;) {
        uint64_t idx = (a - base) / page, stop = base + (idx + 1) * page;
        if (stop > end) stop = end;
        if (!p->open || p->index != idx) {
            page_close(x, p, page);
            *p = (page_acc){idx, 0, 1};
        }
        if (used) p->used += stop - a;
        a = stop;
    }
}

static void add_region(bench_fit_fail *x, const bench_json *g)
{
    uint64_t page = bench_json_u64(bench_json_get(g, "page"), 0);
    uint64_t base = bench_json_u64(bench_json_get(g, "base"), 0);
    const bench_json *ranges = bench_json_get(g, "ranges");
    if (!page || !ranges || ranges->type != BENCH_JSON_ARRAY) return;
    page_acc p = {0, 0, 0};
    for (size_t i = 0; i < ranges->n; i++) {
        const bench_json *r = ranges->items[i];
        /* never backed, or given back; or another page's memory mapped again (a span) */
        if (is_state(r, "reserved") || is_state(r, "alias")) continue;
        uint64_t addr = bench_json_u64(bench_json_get(r, "addr"), 0);
        uint64_t size = bench_json_u64(bench_json_get(r, "size"), 0);
        if (addr < base || !size) continue;
        add_backed(x, &p, page, base, addr, size, !is_state(r, "cached"));
    }
    page_close(x, &p, page);
}

void bench_fit_fail_measure(const bench_device *dev, const char *spec, const bench_trace *t,
                            bench_fit *f)
{
    memset(&f->fail, 0, sizeof f->fail);
    bench_strategy s;
    char err[256];
    if (!f->min_capacity || f->skipped || f->error || !f->page_bytes ||
        f->min_capacity <= f->page_bytes || bench_strategy_lookup(spec, &s, err, sizeof err) != 0 ||
        !s.ops->snapshot)
        return;
    char path[] = "/tmp/gpool-bench-fail-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    bench_replay_opts o = {
        .capacity = f->min_capacity - f->page_bytes, .stop_on_failure = 1, .snapshot = path};
    bench_result r;
    bench_replay_isolated(dev, spec, t, &o, &r);
    bench_sim_set_capacity(dev->ordinal, dev->total_mem);
    int ok = !r.error && !r.skipped && r.snapshot > 0 && r.snapshot_failed_op &&
             r.snapshot_op >= 1 && r.snapshot_op <= t->n_ops;
    uint64_t request = ok ? t->ops[r.snapshot_op - 1].size : 0;
    bench_result_free(&r);
    size_t len = 0;
    int bad = 0;
    FILE *in = ok ? fopen(path, "rb") : NULL;
    char *text = in ? bench_read_stream(in, &len, &bad) : NULL;
    if (in) fclose(in);
    unlink(path);
    bench_json *root = text && !bad ? bench_json_parse(text, len, err, sizeof err) : NULL;
    free(text);
    const bench_json *device = bench_json_get(bench_json_get(root, "arenas"), "device");
    if (device && device->type == BENCH_JSON_ARRAY) {
        for (size_t i = 0; i < device->n; i++)
            add_region(&f->fail, device->items[i]);
        f->fail.capacity = o.capacity;
        f->fail.request = request;
        f->fail.measured = 1;
    }
    bench_json_free(root);
}
