/* util_modelrun.c — see util_modelrun.h. */
#include "util_modelrun.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util_pool.h"
#include "util_sim.h"

#define KiB          ((size_t)1 << 10)
#define GiB          ((size_t)1 << 30)
#define MAX_LIVE_OPS 160

static int violation(model_run *r, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->why, sizeof r->why, "op %lu: %s", r->op, msg);
    return 0;
}

/* A size from one of the bands around every threshold. */
static size_t pick_size(uint32_t *rng, gpool_mem_kind kind, size_t capacity)
{
    unsigned band = rnd(rng) % 100;
    size_t lo, hi;
    if (band < 30)
        lo = 1, hi = 16 * KiB; /* small classes */
    else if (band < 40)
        lo = 16 * KiB, hi = 64 * KiB;
    else if (band < 52)
        lo = 64 * KiB, hi = 2 * MiB - 1;
    else if (band < 58)
        lo = 2 * MiB, hi = 2 * MiB; /* the granularity, exactly */
    else if (band < 72)
        lo = 2 * MiB + 1, hi = 12 * MiB;
    else if (band < 84)
        lo = 12 * MiB, hi = 64 * MiB - 1;
    else if (band < 92)
        lo = 64 * MiB, hi = 96 * MiB; /* 8 MiB chunks */
    else if (band < 96)
        lo = 256 * MiB, hi = 300 * MiB; /* 32 MiB chunks */
    else if (band < 98)
        lo = 1 * GiB, hi = 1 * GiB + 64 * MiB; /* 64 MiB chunks */
    else
        lo = capacity + 1, hi = capacity + 64 * MiB; /* can never fit */
    if (kind != GPOOL_MEM_DEVICE && hi > 8 * MiB) {  /* host memory here is shared: stay small */
        lo = 1 + lo % (8 * MiB);
        hi = 8 * MiB;
    }
    return lo + (hi > lo ? rnd(rng) % (hi - lo + 1) : 0);
}

static size_t reserved_elsewhere(model_run *r, int pool)
{
    size_t b = 0;
    if (r->m.shared) return 0;
    for (int p = 0; p < r->npools; p++)
        if (p != pool) {
            gpool_stats s = GPOOL_STATS_INIT;
            gpool_get_stats(r->pools[p], &s);
            b += s.kind[GPOOL_MEM_DEVICE].reserved_bytes;
        }
    return b;
}

int model_run_start(model_run *r, uint32_t *rng, size_t capacity, int npools,
                    const gpool_stream_t *streams)
{
    const struct sim_api *sim = sim_api();
    memset(r, 0, sizeof *r);
    if (!sim) return violation(r, "needs the simulated driver");
    r->capacity = capacity;
    r->npools = npools;
    memcpy(r->streams, streams, sizeof r->streams);
    sim->set_capacity(0, capacity);
    sim->reset_counts();
    r->violations = sim->violations();
    for (int p = 0; p < npools; p++) {
        r->pools[p] = test_pool(rnd(rng) % 2 ? "tcache_bytes=0" : NULL);
        if (!r->pools[p]) {
            while (p-- > 0)
                gpool_destroy(r->pools[p]);
            return violation(r, "gpool_create failed");
        }
    }
    model_init(&r->m, capacity, GPOOL_SIM_GRANULARITY, npools, r->pools);
    r->m.shared = 0;
    return 1;
}

/* A status gpool may return while faults fire: out of memory or a driver error, with a
 * message; without faults only out of memory (and only when the model allows it). */
static int status_ok(model_run *r, gpool_status st, const char *what)
{
    if (st == GPOOL_OK) return 1;
    if (!*gpool_last_error()) return violation(r, "%s: status %d without a message", what, st);
    if (st == GPOOL_ERR_OUT_OF_MEMORY || (r->faults && st == GPOOL_ERR_DRIVER)) return 1;
    return violation(r, "%s: status %d: %s", what, (int)st, gpool_last_error());
}

static int op_alloc(model_run *r, uint32_t *rng, int p)
{
    const struct sim_api *sim = sim_api();
    model *m = &r->m;
    unsigned kr = rnd(rng) % 100;
    gpool_mem_kind kind = kr < 70   ? GPOOL_MEM_DEVICE
                          : kr < 85 ? GPOOL_MEM_HOST_PINNED
                                    : GPOOL_MEM_HOST_MAPPED;
    size_t size = pick_size(rng, kind, r->capacity);
    gpool_stream_t s = r->streams[rnd(rng) % MODELRUN_STREAMS];
    size_t other = kind == GPOOL_MEM_DEVICE ? reserved_elsewhere(r, p) : 0;
    int must = !r->faults && model_must_fit(m, p, kind, size, other);
    int never = model_never_fits(m, kind, size);
    model_baseline(m);
    unsigned long before = sim->call_total();
    void *ptr = NULL;
    gpool_status st;
    if (kind == GPOOL_MEM_DEVICE && !s && rnd(rng) % 2) {
        st = gpool_alloc(r->pools[p], size, NULL, &ptr);
    } else {
        gpool_alloc_params prm = {.kind = kind};
        st = gpool_alloc_async(r->pools[p], size, &prm, s, &ptr);
    }
    unsigned long made = sim->call_total() - before;
    if (st == GPOOL_OK) {
        if (!ptr) return violation(r, "alloc of %zu: OK but NULL", size);
        uint32_t bseed = rnd(rng);
        model_add(m, p, ptr, size, kind, s, bseed);
        model_fill(m->live[m->nlive - 1].host, size, bseed); /* every sampled byte written */
        /* and a kernel on the allocating stream writes the whole block: the simulator's
         * happens-before referee sees any reuse not ordered after earlier work */
        CUresult tr = sim->touch(s, (CUdeviceptr)(uintptr_t)ptr, size, 1);
        if (tr != CUDA_SUCCESS)
            return violation(r, "gpoolsim_touch of a new %zu-byte block: error %d", size, (int)tr);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        if (kind == GPOOL_MEM_DEVICE && gpool_get_block_desc(r->pools[p], ptr, &d) == GPOOL_OK)
            model_note_chunk(m, d.page_size);
    } else {
        if (ptr) return violation(r, "alloc failed but *out is not NULL");
        if (st == GPOOL_ERR_OUT_OF_MEMORY) m->oom_fails[p]++;
    }
    if (never && (st == GPOOL_OK || made > 8))
        return violation(r,
                         "%zu bytes on a %zu-byte device: status %d after %lu driver calls "
                         "(want a refusal in at most 8)",
                         size, r->capacity, (int)st, made);
    if (must && st != GPOOL_OK)
        return violation(r, "pool %d kind %d size %zu must succeed (model), got %d: %s", p,
                         (int)kind, size, (int)st, gpool_last_error());
    return status_ok(r, st, "alloc");
}

/* Free one live block (index i); a failed free leaves it live when gpool still knows it. */
static int free_one(model_run *r, size_t i, gpool_stream_t on, int how)
{
    model *m = &r->m;
    model_block b = m->live[i];
    if (!model_check(b.host, b.size, b.seed))
        return violation(r, "block %p (%zu bytes) lost its content", b.ptr, b.size);
    gpool_status st;
    if (how == 0 && b.stream == NULL)
        st = gpool_free(r->pools[b.pool], b.ptr);
    else
        st = gpool_free_async(r->pools[b.pool], b.ptr, on);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    if (st == GPOOL_OK || gpool_get_block_desc(r->pools[b.pool], b.ptr, &d) != GPOOL_OK)
        model_remove(m, b.ptr, NULL);
    if (st == GPOOL_OK) return 1;
    if (!r->faults) return violation(r, "free: %s", gpool_last_error());
    return status_ok(r, st, "free");
}

int model_run_op(model_run *r, uint32_t *rng)
{
    model *m = &r->m;
    unsigned what = rnd(rng) % 100;
    int p = (int)(rnd(rng) % (unsigned)r->npools);
    int ok = 1;
    r->op++;
    if (what < 55 && m->nlive < MAX_LIVE_OPS) {
        ok = op_alloc(r, rng, p);
    } else if (what < 88 && m->nlive) {
        size_t i = rnd(rng) % m->nlive;
        unsigned how = rnd(rng) % 3;
        gpool_stream_t on = how == 1 ? m->live[i].stream : r->streams[rnd(rng) % MODELRUN_STREAMS];
        ok = free_one(r, i, on, (int)how);
    } else if (what < 94) {
        size_t keep = rnd(rng) % 2 ? 0 : (rnd(rng) % 64) * MiB;
        gpool_status st = gpool_trim(r->pools[p], keep);
        if (st != GPOOL_OK && !r->faults)
            ok = violation(r, "trim: %s", gpool_last_error());
        else
            ok = status_ok(r, st, "trim");
    } else {
        for (size_t i = m->nlive; ok && i-- > 0;) /* free everything of pool p */
            if (m->live[i].pool == p) ok = free_one(r, i, m->live[i].stream, 1);
    }
    if (ok && sim_api()->violations() != r->violations)
        ok = violation(r, "the happens-before referee saw %lu stream-ordering violations",
                       sim_api()->violations() - r->violations);
    if (ok && !r->faults) ok = model_run_check(r);
    if (ok && r->op % 16 == 0 && !model_check_content(m, r->why, sizeof r->why)) ok = 0;
    return ok;
}

int model_run_check(model_run *r)
{
    if (model_check_stats(&r->m, 1, r->why, sizeof r->why)) return 1;
    size_t len = strlen(r->why);
    snprintf(r->why + len, sizeof r->why - len, " (op %lu)", r->op);
    return 0;
}

int model_run_finish(model_run *r)
{
    const struct sim_api *sim = sim_api();
    int ok = model_check_content(&r->m, r->why, sizeof r->why);
    for (size_t i = r->m.nlive; i-- > 0;) {
        model_block b = r->m.live[i];
        if (gpool_free(r->pools[b.pool], b.ptr) != GPOOL_OK && ok)
            ok = violation(r, "final free: %s", gpool_last_error());
    }
    r->m.nlive = 0;
    for (int p = 0; p < r->npools; p++) {
        gpool_status st = gpool_destroy(r->pools[p]);
        if (st != GPOOL_OK && ok) ok = violation(r, "gpool_destroy: %s", gpool_last_error());
    }
    if (ok && sim->violations() != r->violations)
        ok = violation(r,
                       "the happens-before referee saw %lu stream-ordering violations by the end "
                       "(final frees and gpool_destroy)",
                       sim->violations() - r->violations);
    struct gpoolsim_live live;
    sim->get_live(&live);
    if (ok &&
        (live.handles || live.mappings || live.reservations || live.host_allocs ||
         live.host_registrations || live.events || live.legacy_allocs || sim->bytes_in_use(0)))
        ok = violation(r,
                       "left in the simulator after destroy: %zu handles, %zu mappings, %zu "
                       "reservations, %zu host allocs, %zu registrations, %zu events, %zu bytes",
                       live.handles, live.mappings, live.reservations, live.host_allocs,
                       live.host_registrations, live.events, sim->bytes_in_use(0));
    return ok;
}
