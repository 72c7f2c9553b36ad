/* fit_waste.c — where the bytes above a trace's peak go: one more replay at the fit's min
 * capacity writes a gpool_dump_json snapshot at the trace's peak live point; its device ranges
 * say which backed bytes are not live (docs/snapshot-json.md): the size-class step of live
 * blocks, the free slots of slabs, the free tails of blocks' last pages, other free holes on
 * backed pages, and pending frees. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int bad = 0;
    char *buf = bench_read_stream(f, len, &bad);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int is_state(const bench_json *x, const char *state)
{
    const bench_json *s = bench_json_get(x, "state");
    return s && s->type == BENCH_JSON_STRING && !strcmp(s->str, state);
}

/* A free cached range right after a block: the part of it inside that block's last page is the
 * block's tail, the rest a hole. */
static void add_cached(bench_fit_waste *w, const bench_json *prev, uint64_t addr, uint64_t size,
                       uint64_t page)
{
    uint64_t tail = 0;
    if (prev && page && (is_state(prev, "in_use") || is_state(prev, "slab"))) {
        uint64_t end = bench_json_u64(bench_json_get(prev, "addr"), 0) +
                       bench_json_u64(bench_json_get(prev, "size"), 0);
        uint64_t page_end = (end + page - 1) / page * page;
        if (page_end > addr) tail = page_end - addr < size ? page_end - addr : size;
    }
    w->tails += tail;
    w->holes += size - tail;
}

static void add_region(bench_fit_waste *w, const bench_json *g)
{
    uint64_t page = bench_json_u64(bench_json_get(g, "page"), 0);
    w->backed += bench_json_u64(bench_json_get(g, "backed_pages"), 0) * page;
    const bench_json *ranges = bench_json_get(g, "ranges");
    if (!ranges || ranges->type != BENCH_JSON_ARRAY) return;
    for (size_t i = 0; i < ranges->n; i++) {
        const bench_json *x = ranges->items[i];
        uint64_t addr = bench_json_u64(bench_json_get(x, "addr"), 0);
        uint64_t size = bench_json_u64(bench_json_get(x, "size"), 0);
        if (is_state(x, "in_use")) {
            uint64_t req = bench_json_u64(bench_json_get(x, "requested"), size);
            w->step += size > req ? size - req : 0;
        } else if (is_state(x, "slab")) {
            uint64_t live = bench_json_u64(bench_json_get(x, "live_slots"), 0) *
                            bench_json_u64(bench_json_get(x, "slot_size"), 0);
            w->slab_free += size > live ? size - live : 0;
        } else if (is_state(x, "pending")) {
            w->pending += size;
        } else if (is_state(x, "cached")) {
            add_cached(w, i ? ranges->items[i - 1] : NULL, addr, size, page);
        }
    }
}

void bench_fit_waste_measure(const bench_device *dev, const char *spec, const bench_trace *t,
                             bench_fit *f)
{
    memset(&f->waste, 0, sizeof f->waste);
    bench_strategy s;
    char err[256];
    if (!f->min_capacity || f->skipped || f->error ||
        bench_strategy_lookup(spec, &s, err, sizeof err) != 0 || !s.ops->snapshot)
        return;
    char path[] = "/tmp/gpool-bench-fit-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    bench_replay_opts o = {.capacity = f->min_capacity, .stop_on_failure = 1, .snapshot = path};
    bench_result r;
    bench_replay_isolated(dev, spec, t, &o, &r);
    bench_result_free(&r);
    bench_sim_set_capacity(dev->ordinal, dev->total_mem);
    size_t len = 0;
    char *text = r.error || r.skipped || r.failed_allocs ? NULL : read_all(path, &len);
    unlink(path);
    bench_json *root = text ? bench_json_parse(text, len, err, sizeof err) : NULL;
    free(text);
    const bench_json *arenas = bench_json_get(root, "arenas");
    const bench_json *device = bench_json_get(arenas, "device");
    if (device && device->type == BENCH_JSON_ARRAY) {
        for (size_t i = 0; i < device->n; i++)
            add_region(&f->waste, device->items[i]);
        f->waste.measured = 1;
    }
    bench_json_free(root);
}
