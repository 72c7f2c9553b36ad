/* workload.c — synthetic workloads, generated into the same op array a trace parses into.
 *   random  RMM-style random mix: each op allocates (size drawn from a distribution within
 *           [min, max]) or frees a random live block, live bytes kept <= max_live
 *   train   a training loop: persistent weights and optimizer state, then per step the
 *           forward pass allocates activations (with short-lived workspaces), the backward
 *           pass frees them in reverse while gradients come and go
 *   frame   a renderer: long-lived textures (a few replaced now and then) and per-frame
 *           transient buffers of mixed sizes, all freed at the end of their frame */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void bench_workload_defaults(bench_workload_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->ops = 100000;
    o->min_size = 256;
    o->max_size = 8 * BENCH_MIB;
    o->max_live = BENCH_GIB;
    o->dist = BENCH_DIST_GEOMETRIC;
    o->steps = 10;
    o->layers = 48;
    o->frames = 300;
}

int bench_is_workload(const char *name)
{
    return !strcmp(name, "random") || !strcmp(name, "train") || !strcmp(name, "frame");
}

int bench_parse_dist(const char *s, bench_dist *out)
{
    if (!strcmp(s, "uniform"))
        *out = BENCH_DIST_UNIFORM;
    else if (!strcmp(s, "normal"))
        *out = BENCH_DIST_NORMAL;
    else if (!strcmp(s, "geometric"))
        *out = BENCH_DIST_GEOMETRIC;
    else
        return -1;
    return 0;
}

static uint64_t between(bench_rng *r, uint64_t lo, uint64_t hi)
{
    return hi <= lo ? lo : lo + bench_rng_next(r) % (hi - lo + 1);
}

/* log-uniform in [lo, hi]: as many small as large blocks per size octave */
static uint64_t log_between(bench_rng *r, uint64_t lo, uint64_t hi)
{
    double l = log((double)lo), h = log((double)hi);
    uint64_t v = (uint64_t)exp(l + (h - l) * bench_rng_uniform(r));
    return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t draw_size(bench_rng *r, const bench_workload_opts *o)
{
    uint64_t lo = o->min_size, hi = o->max_size;
    double span = (double)(hi - lo);
    double v;
    switch (o->dist) {
    case BENCH_DIST_UNIFORM:
        return between(r, lo, hi);
    case BENCH_DIST_NORMAL: /* mean in the middle, 3 sd to either end */
        v = (double)lo + span / 2 + bench_rng_normal(r) * span / 6;
        break;
    default: /* geometric (discrete exponential): mean min + span/8, many small requests */
        v = (double)lo - log(1.0 - bench_rng_uniform(r)) * span / 8;
        break;
    }
    if (v < (double)lo) v = (double)lo;
    if (v > (double)hi) v = (double)hi;
    return (uint64_t)v;
}

static int make_random(const bench_workload_opts *o, bench_trace *t, char *err, size_t errlen)
{
    if (o->min_size == 0 || o->max_size < o->min_size || o->max_live < o->max_size) {
        snprintf(err, errlen, "random: need 0 < --min <= --max <= --max-live");
        return -1;
    }
    bench_rng r;
    bench_rng_seed(&r, o->seed);
    uint32_t *live = malloc((o->ops + 1) * sizeof *live);
    uint64_t *live_size = malloc((o->ops + 1) * sizeof *live_size);
    if (!live || !live_size) {
        free(live);
        free(live_size);
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    size_t n = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < o->ops; i++) {
        uint64_t size = draw_size(&r, o);
        int alloc = n == 0 || (bench_rng_uniform(&r) < 0.5 && bytes + size <= o->max_live);
        if (alloc && bytes + size > o->max_live) alloc = 0;
        if (alloc) {
            live[n] = bench_trace_add_alloc(t, size, 0);
            live_size[n++] = size;
            bytes += size;
        } else if (n) {
            size_t k = (size_t)(bench_rng_next(&r) % n);
            bench_trace_add_free(t, live[k]);
            bytes -= live_size[k];
            live[k] = live[--n];
            live_size[k] = live_size[n];
        }
    }
    while (n)
        bench_trace_add_free(t, live[--n]);
    free(live);
    free(live_size);
    return 0;
}

#define TRAIN_MAX_OPS 20000000ull

static int make_train(const bench_workload_opts *o, bench_trace *t, char *err, size_t errlen)
{
    unsigned L = o->layers;
    if (L == 0 || o->steps == 0) {
        snprintf(err, errlen, "train: need --layers and --steps > 0");
        return -1;
    }
    if ((uint64_t)o->steps * (9ull * L + 4) > TRAIN_MAX_OPS) {
        snprintf(err, errlen,
                 "train: --steps %u and --layers %u make more than %llu operations (each step "
                 "makes about 9 a layer)",
                 o->steps, L, TRAIN_MAX_OPS);
        return -1;
    }
    bench_rng r;
    bench_rng_seed(&r, o->seed);
    uint64_t *wsize = malloc(L * sizeof *wsize), *asize = malloc(L * sizeof *asize);
    uint32_t *act = malloc(L * sizeof *act), *wgrad = malloc(L * sizeof *wgrad);
    if (!wsize || !asize || !act || !wgrad) {
        free(wsize), free(asize), free(act), free(wgrad);
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    for (unsigned l = 0; l < L; l++) {
        wsize[l] = log_between(&r, 4 * BENCH_KIB, 16 * BENCH_MIB) & ~(uint64_t)3;
        asize[l] = log_between(&r, 256 * BENCH_KIB, 48 * BENCH_MIB) & ~(uint64_t)3;
    }
    uint32_t *weights = malloc(3 * L * sizeof *weights); /* weights + 2 optimizer moments */
    if (!weights) {
        free(wsize), free(asize), free(act), free(wgrad);
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    for (unsigned l = 0; l < L; l++)
        weights[l] = bench_trace_add_alloc(t, wsize[l], 0);
    for (unsigned step = 0; step < o->steps; step++) {
        for (unsigned l = 0; l < L; l++) { /* forward */
            act[l] = bench_trace_add_alloc(t, asize[l], 0);
            uint32_t ws = bench_trace_add_alloc(t, asize[l] / 2 + 512, 0); /* workspace */
            uint32_t meta = bench_trace_add_alloc(t, between(&r, 8, 2048), 0);
            bench_trace_add_free(t, ws);
            bench_trace_add_free(t, meta);
        }
        uint32_t loss = bench_trace_add_alloc(t, 4, 0);
        uint32_t grad_in = bench_trace_add_alloc(t, asize[L - 1], 0);
        for (unsigned l = L; l-- > 0;) { /* backward */
            wgrad[l] = bench_trace_add_alloc(t, wsize[l], 0);
            uint32_t grad_out = bench_trace_add_alloc(t, l ? asize[l - 1] : asize[0], 0);
            bench_trace_add_free(t, grad_in);
            bench_trace_add_free(t, act[l]);
            grad_in = grad_out;
        }
        bench_trace_add_free(t, grad_in);
        bench_trace_add_free(t, loss);
        if (step == 0) /* optimizer state appears at the first step, as in PyTorch's Adam */
            for (unsigned l = 0; l < L; l++) {
                weights[L + l] = bench_trace_add_alloc(t, wsize[l], 0);
                weights[2 * L + l] = bench_trace_add_alloc(t, wsize[l], 0);
            }
        for (unsigned l = 0; l < L; l++)
            bench_trace_add_free(t, wgrad[l]);
    }
    for (unsigned i = 0; i < 3 * L; i++)
        bench_trace_add_free(t, weights[i]);
    free(wsize), free(asize), free(act), free(wgrad), free(weights);
    return 0;
}

static int make_frame(const bench_workload_opts *o, bench_trace *t, char *err, size_t errlen)
{
    enum { TEXTURES = 24, TRANSIENTS = 64 };
    if (o->frames == 0) {
        snprintf(err, errlen, "frame: need --frames > 0");
        return -1;
    }
    bench_rng r;
    bench_rng_seed(&r, o->seed);
    uint32_t tex[TEXTURES], tr[TRANSIENTS];
    for (int i = 0; i < TEXTURES; i++)
        tex[i] = bench_trace_add_alloc(t, log_between(&r, BENCH_MIB, 16 * BENCH_MIB), 0);
    for (unsigned f = 0; f < o->frames; f++) {
        if (f && f % 50 == 0) /* streaming: a few textures replaced */
            for (int k = 0; k < 3; k++) {
                int i = (int)(bench_rng_next(&r) % TEXTURES);
                bench_trace_add_free(t, tex[i]);
                tex[i] = bench_trace_add_alloc(t, log_between(&r, BENCH_MIB, 16 * BENCH_MIB), 0);
            }
        for (int i = 0; i < TRANSIENTS; i++) {
            double u = bench_rng_uniform(&r);
            uint64_t size = u < 0.70   ? log_between(&r, 256, 64 * BENCH_KIB)
                            : u < 0.95 ? log_between(&r, 64 * BENCH_KIB, 2 * BENCH_MIB)
                                       : log_between(&r, 2 * BENCH_MIB, 12 * BENCH_MIB);
            tr[i] = bench_trace_add_alloc(t, size, 0);
        }
        for (int i = TRANSIENTS - 1; i > 0; i--) { /* end of frame: freed in any order */
            int j = (int)(bench_rng_next(&r) % (uint64_t)(i + 1));
            uint32_t x = tr[i];
            tr[i] = tr[j];
            tr[j] = x;
        }
        for (int i = 0; i < TRANSIENTS; i++)
            bench_trace_add_free(t, tr[i]);
    }
    for (int i = 0; i < TEXTURES; i++)
        bench_trace_add_free(t, tex[i]);
    return 0;
}

int bench_workload_make(const char *name, const bench_workload_opts *o, bench_trace *t, char *err,
                        size_t errlen)
{
    bench_trace_init(t, name);
    int rc;
    if (!strcmp(name, "random"))
        rc = make_random(o, t, err, errlen);
    else if (!strcmp(name, "train"))
        rc = make_train(o, t, err, errlen);
    else if (!strcmp(name, "frame"))
        rc = make_frame(o, t, err, errlen);
    else {
        snprintf(err, errlen, "unknown workload \"%s\" (random, train, frame)", name);
        rc = -1;
    }
    if (rc == 0 && t->gen_failed) {
        snprintf(err, errlen, "%s: out of host memory for the workload's %zu operations", name,
                 t->n_ops);
        rc = -1;
    }
    if (rc != 0) {
        bench_trace_free(t);
        return -1;
    }
    if (bench_trace_finish(t) != 0) {
        snprintf(err, errlen, "%s: out of host memory", name);
        bench_trace_free(t);
        return -1;
    }
    return 0;
}
