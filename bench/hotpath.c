/* hotpath.c — the cost of an alloc+free pair of a cached small block: gpool against
 * jemalloc's mallocx/dallocx in the same process, on one thread and on two; and the pair of a
 * pinned and of a mapped host block next to it, with the driver calls each pair makes. */
#include "bench.h"

#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const size_t hot_sizes[] = {256, 512, 1024, 2048, 4096};
#define N_HOT_SIZES (sizeof hot_sizes / sizeof hot_sizes[0])

typedef struct hot_ctx {
    int use_gpool;
    const gpool_alloc_params *params; /* NULL: device; else a host kind */
    gpool_t *pool;
    const bench_device *dev;
    uint64_t pairs;
    pthread_barrier_t *barrier;
    uint64_t ns; /* this thread's loop time */
    int failed;
    char err[256];
} hot_ctx;

static volatile uintptr_t hot_sink;

static int hot_loop(hot_ctx *c, uint64_t pairs)
{
    uintptr_t acc = 0;
    if (c->use_gpool) {
        for (uint64_t i = 0; i < pairs; i++) {
            void *p;
            gpool_status st = gpool_alloc(c->pool, hot_sizes[i % N_HOT_SIZES], c->params, &p);
            if (st != GPOOL_OK) {
                bench_gpool_msg(c->err, sizeof c->err, "gpool_alloc", st);
                return -1;
            }
            acc += (uintptr_t)p;
            gpool_free(c->pool, p);
        }
    } else {
        for (uint64_t i = 0; i < pairs; i++) {
            void *p = mallocx(hot_sizes[i % N_HOT_SIZES], 0);
            if (!p) {
                snprintf(c->err, sizeof c->err, "mallocx failed");
                return -1;
            }
            acc += (uintptr_t)p;
            dallocx(p, 0);
        }
    }
    hot_sink = acc;
    return 0;
}

static void *hot_thread(void *arg)
{
    hot_ctx *c = arg;
    if (c->dev && c->dev->drv) c->dev->drv->cuCtxSetCurrent(c->dev->ctx);
    if (hot_loop(c, c->pairs / 10 + 1000) != 0) c->failed = 1; /* warm this thread's caches */
    pthread_barrier_wait(c->barrier);
    uint64_t t0 = bench_now_ns();
    if (!c->failed && hot_loop(c, c->pairs) != 0) c->failed = 1;
    c->ns = bench_now_ns() - t0;
    return NULL;
}

/* Best of `rounds`: ns per pair on one thread, and (max_threads 2) the 2-thread throughput
 * scaling. */
static int hot_measure_threads(hot_ctx *proto, unsigned rounds, int max_threads, double *ns1,
                               double *ns2, double *scaling, char *err, size_t errlen)
{
    double best1 = 0, best2 = 0;
    for (int threads = 1; threads <= max_threads; threads++) {
        for (unsigned round = 0; round < rounds; round++) {
            pthread_barrier_t barrier;
            pthread_barrier_init(&barrier, NULL, (unsigned)threads);
            hot_ctx c[2] = {*proto, *proto};
            pthread_t tid[2];
            for (int i = 0; i < threads; i++) {
                c[i].barrier = &barrier;
                pthread_create(&tid[i], NULL, hot_thread, &c[i]);
            }
            uint64_t wall = 0;
            for (int i = 0; i < threads; i++) {
                pthread_join(tid[i], NULL);
                if (c[i].failed) {
                    snprintf(err, errlen, "%s", c[i].err);
                    pthread_barrier_destroy(&barrier);
                    return -1;
                }
                if (c[i].ns > wall) wall = c[i].ns;
            }
            pthread_barrier_destroy(&barrier);
            double per_pair = (double)wall / (double)proto->pairs; /* per thread */
            double *best = threads == 1 ? &best1 : &best2;
            if (*best == 0 || per_pair < *best) *best = per_pair;
        }
    }
    *ns1 = best1;
    *ns2 = best2;
    /* throughput: 1 thread does 1/best1 pairs per ns, 2 threads 2/best2 */
    *scaling = best2 > 0 ? (2.0 / best2) / (1.0 / best1) : 0;
    return 0;
}

static int hot_measure(hot_ctx *proto, unsigned rounds, double *ns1, double *ns2, double *scaling,
                       char *err, size_t errlen)
{
    return hot_measure_threads(proto, rounds, 2, ns1, ns2, scaling, err, errlen);
}

/* Driver calls per 100,000 pairs of proto's kind, on this thread, caches warm. */
static int hot_calls(hot_ctx *proto, double *per_100k)
{
    hot_ctx c = *proto;
    if (hot_loop(&c, c.pairs / 10 + 1000) != 0) return -1;
    gpool_stats a = GPOOL_STATS_INIT, b = GPOOL_STATS_INIT;
    gpool_get_stats(c.pool, &a);
    if (hot_loop(&c, c.pairs) != 0) return -1;
    gpool_get_stats(c.pool, &b);
    *per_100k = (double)(b.driver_calls_total - a.driver_calls_total) * 1e5 / (double)c.pairs;
    return 0;
}

int bench_hotpath_run(const bench_device *dev, uint64_t pairs, unsigned rounds, bench_hotpath *h,
                      char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->pairs = pairs;
    h->rounds = rounds;
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.device = dev->ordinal;
    gpool_t *pool = NULL;
    gpool_status st = dev->ordinal == 0 ? gpool_create(NULL, &pool) : gpool_create(&cfg, &pool);
    if (st != GPOOL_OK) {
        bench_gpool_msg(err, errlen, "gpool_create", st);
        return -1;
    }
    hot_ctx proto = {.use_gpool = 1, .pool = pool, .dev = dev, .pairs = pairs};
    int rc =
        hot_measure(&proto, rounds, &h->gpool_ns, &h->gpool_ns_2t, &h->gpool_scaling, err, errlen);
    if (rc == 0) rc = hot_calls(&proto, &h->device_calls);
    /* the host kinds' pairs (their small-block arena), one thread */
    static const gpool_mem_kind host[2] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    double *ns[2] = {&h->pinned_ns, &h->mapped_ns},
           *calls[2] = {&h->pinned_calls, &h->mapped_calls};
    for (int k = 0; k < 2 && rc == 0; k++) {
        gpool_alloc_params hp = GPOOL_ALLOC_PARAMS_INIT;
        hp.kind = host[k];
        hot_ctx hc = proto;
        hc.params = &hp;
        double ns2, scaling;
        rc = hot_measure_threads(&hc, rounds, 1, ns[k], &ns2, &scaling, err, errlen);
        if (rc == 0) rc = hot_calls(&hc, calls[k]);
        if (rc != 0 && !err[0]) snprintf(err, errlen, "%s", hc.err);
    }
    gpool_destroy(pool);
    if (rc != 0) return -1;
    proto.use_gpool = 0;
    proto.pool = NULL;
    if (hot_measure(&proto, rounds, &h->jemalloc_ns, &h->jemalloc_ns_2t, &h->jemalloc_scaling, err,
                    errlen) != 0)
        return -1;
    h->ratio = h->jemalloc_ns > 0 ? h->gpool_ns / h->jemalloc_ns : 0;
    snprintf(h->note, sizeof h->note, "sizes 256 B..4 KiB in turn, best of %u rounds", rounds);
    return 0;
}
