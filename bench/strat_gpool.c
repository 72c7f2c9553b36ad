/* strat_gpool.c — the library under test.
 *   gpool[:KEY=VAL,...]         device memory; no options: gpool_create(NULL, ...) (defaults
 *                               plus GPOOL_CONF); options go through gpool_config_parse
 *   gpool-pinned[:KEY=VAL,...]  the same with params.kind = GPOOL_MEM_HOST_PINNED */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct gpool_state {
    gpool_t *pool;
    gpool_alloc_params params;
    const gpool_alloc_params *pp; /* NULL for plain device allocations */
    gpool_mem_kind kind;
} gpool_state;

static int gp_init(bench_strategy *s, const bench_device *dev, gpool_mem_kind kind)
{
    s->dev = dev;
    gpool_state *g = calloc(1, sizeof *g);
    if (!g) return bench_strategy_fail(s, BENCH_ERR, "out of host memory");
    s->state = g;
    g->kind = kind;
    if (kind != GPOOL_MEM_DEVICE) {
        g->params.kind = kind;
        g->pp = &g->params;
    }
    gpool_status st;
    if (!*s->args && dev->ordinal == 0) {
        st = gpool_create(NULL, &g->pool);
    } else {
        gpool_config cfg = GPOOL_CONFIG_INIT;
        gpool_config_default(&cfg);
        cfg.device = dev->ordinal;
        char why[600];
        if (*s->args && (st = gpool_config_parse(&cfg, s->args)) != GPOOL_OK)
            return bench_strategy_fail(s, BENCH_ERR, "%s: %s", s->spec,
                                       bench_gpool_msg(why, sizeof why, "gpool_config_parse", st));
        st = gpool_create(&cfg, &g->pool);
    }
    if (st == GPOOL_ERR_UNSUPPORTED)
        return bench_strategy_fail(s, BENCH_SKIP, "unsupported here: %s", gpool_last_error());
    char why[600];
    if (st != GPOOL_OK)
        return bench_strategy_fail(s, BENCH_ERR, "%s",
                                   bench_gpool_msg(why, sizeof why, "gpool_create", st));
    return BENCH_OK;
}

static int gpool_init_device(bench_strategy *s, const bench_device *dev)
{
    return gp_init(s, dev, GPOOL_MEM_DEVICE);
}

static int gpool_init_pinned(bench_strategy *s, const bench_device *dev)
{
    return gp_init(s, dev, GPOOL_MEM_HOST_PINNED);
}

static int gp_status(bench_strategy *s, gpool_status st, const char *what)
{
    switch (st) {
    case GPOOL_OK:
        return BENCH_OK;
    case GPOOL_ERR_OUT_OF_MEMORY:
        return BENCH_OOM;
    case GPOOL_ERR_UNSUPPORTED:
        return bench_strategy_fail(s, BENCH_SKIP, "%s: unsupported: %s", what, gpool_last_error());
    default: {
        char why[600];
        return bench_strategy_fail(s, BENCH_ERR, "%s", bench_gpool_msg(why, sizeof why, what, st));
    }
    }
}

static int gp_alloc(bench_strategy *s, uint64_t size, CUstream stream, void **out)
{
    gpool_state *g = s->state;
    gpool_status st = stream ? gpool_alloc_async(g->pool, size, g->pp, stream, out)
                             : gpool_alloc(g->pool, size, g->pp, out);
    return gp_status(s, st, stream ? "gpool_alloc_async" : "gpool_alloc");
}

/* A host allocation of a trace's Kind column (BENCH_MEM_PINNED / BENCH_MEM_MAPPED). */
static int gp_alloc_mem(bench_strategy *s, uint64_t size, int mem, CUstream stream, void **out)
{
    gpool_state *g = s->state;
    gpool_alloc_params p = g->params;
    p.kind = mem == BENCH_MEM_MAPPED ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED;
    gpool_status st = stream ? gpool_alloc_async(g->pool, size, &p, stream, out)
                             : gpool_alloc(g->pool, size, &p, out);
    return gp_status(s, st, stream ? "gpool_alloc_async" : "gpool_alloc");
}

static int gp_free(bench_strategy *s, void *ptr, uint64_t size, CUstream stream)
{
    (void)size; /* the pool knows the block's size */
    gpool_state *g = s->state;
    gpool_status st = stream ? gpool_free_async(g->pool, ptr, stream) : gpool_free(g->pool, ptr);
    return gp_status(s, st, stream ? "gpool_free_async" : "gpool_free");
}

static void gp_stats(bench_strategy *s, bench_strategy_stats *out)
{
    gpool_state *g = s->state;
    gpool_stats st = GPOOL_STATS_INIT;
    memset(out, 0, sizeof *out);
    if (gpool_get_stats(g->pool, &st) != GPOOL_OK) return;
    out->reserved = st.kind[GPOOL_MEM_AUTO].reserved_bytes;
    out->peak_reserved = st.kind[GPOOL_MEM_AUTO].peak_reserved_bytes;
    out->driver_calls = st.driver_calls_total;
    static const struct {
        gpool_driver_call from;
        bench_drv to;
    } map[] = {
        {GPOOL_DRV_MEM_CREATE, BENCH_DRV_MEM_CREATE},
        {GPOOL_DRV_MEM_RELEASE, BENCH_DRV_MEM_RELEASE},
        {GPOOL_DRV_MEM_MAP, BENCH_DRV_MEM_MAP},
        {GPOOL_DRV_MEM_UNMAP, BENCH_DRV_MEM_UNMAP},
        {GPOOL_DRV_MEM_SET_ACCESS, BENCH_DRV_MEM_SET_ACCESS},
        {GPOOL_DRV_ADDRESS_RESERVE, BENCH_DRV_ADDRESS_RESERVE},
        {GPOOL_DRV_ADDRESS_FREE, BENCH_DRV_ADDRESS_FREE},
        {GPOOL_DRV_HOST_ALLOC, BENCH_DRV_HOST},
        {GPOOL_DRV_HOST_FREE, BENCH_DRV_HOST},
        {GPOOL_DRV_HOST_REGISTER, BENCH_DRV_HOST},
        {GPOOL_DRV_HOST_UNREGISTER, BENCH_DRV_HOST},
        {GPOOL_DRV_EVENT, BENCH_DRV_EVENT},
        {GPOOL_DRV_STREAM, BENCH_DRV_STREAM},
        {GPOOL_DRV_OTHER, BENCH_DRV_OTHER},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        out->by_entry[map[i].to] += st.driver_calls[map[i].from];
}

static int gp_snapshot(bench_strategy *s, FILE *f)
{
    gpool_state *g = s->state;
    gpool_status st = gpool_dump_json(g->pool, f);
    if (st == GPOOL_OK) return 0;
    char why[600];
    bench_strategy_fail(s, BENCH_ERR, "%s",
                        bench_gpool_msg(why, sizeof why, "gpool_dump_json", st));
    return -1;
}

static void gp_fini(bench_strategy *s)
{
    gpool_state *g = s->state;
    if (!g) return;
    if (g->pool) gpool_destroy(g->pool);
    free(g);
    s->state = NULL;
}

const bench_strategy_ops bench_strategy_gpool = {
    .name = "gpool",
    .label = "gpool (this library)",
    .init = gpool_init_device,
    .alloc = gp_alloc,
    .alloc_mem = gp_alloc_mem,
    .free = gp_free,
    .stats = gp_stats,
    .fini = gp_fini,
    .snapshot = gp_snapshot,
};

const bench_strategy_ops bench_strategy_gpool_pinned = {
    .name = "gpool-pinned",
    .label = "gpool, pinned host memory (GPOOL_MEM_HOST_PINNED)",
    .host = 1,
    .init = gpool_init_pinned,
    .alloc = gp_alloc,
    .alloc_mem = gp_alloc_mem,
    .free = gp_free,
    .stats = gp_stats,
    .fini = gp_fini,
    .snapshot = gp_snapshot,
};
