/* Property test (issue 13): random sequences of allocations (all three kinds, sizes across
 * every threshold: small classes, 2 MiB, each chunk rule of pagesize.c, >= 1 GiB, beyond the
 * device), frees on the allocating or another stream, trims, over several pools, run against
 * gpool and the executable model (tests/util_model.c) side by side. After every operation:
 * every allocation the model says must succeed did, requests that can never fit were refused
 * at once, the stats invariants hold and driver_calls equal the simulator's counts; live
 * blocks keep their contents; after gpool_destroy nothing is left in the simulator.
 *
 * GPOOL_MODEL_SEEDS (default 200) seeds x GPOOL_MODEL_OPS (default 200) operations; CI runs
 * more (GPOOL_MODEL_SEEDS=3000). GPOOL_MODEL_SEED=N runs that one seed (a failure names it). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "util_model.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define MAX_LIVE_OPS 160
#define NSTREAMS     3
/* pools of one device share pressure (gpool.h); 0: other pools' reserved bytes count as
 * other users' */
#define MODEL_SHARED_PRESSURE 0

static const struct sim_api *sim;
static gpool_stream_t streams[NSTREAMS]; /* [0] = NULL, the legacy stream */
static CUcontext primary;

static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamDestroy)(CUstream);

static void setup(void)
{
    if (test_real_gpu()) return;
    sim = sim_api();
    cr_assert_not_null(sim, "needs GPOOL_LIBCUDA pointing at the simulated driver");
    *(void **)&p_cuInit = sim_driver_proc("cuInit");
    *(void **)&p_cuDevicePrimaryCtxRetain = sim_driver_proc("cuDevicePrimaryCtxRetain");
    *(void **)&p_cuDevicePrimaryCtxRelease = sim_driver_proc("cuDevicePrimaryCtxRelease");
    *(void **)&p_cuCtxSetCurrent = sim_driver_proc("cuCtxSetCurrent");
    *(void **)&p_cuStreamCreate = sim_driver_proc("cuStreamCreate");
    *(void **)&p_cuStreamDestroy = sim_driver_proc("cuStreamDestroy");
    cr_assert(p_cuInit && p_cuDevicePrimaryCtxRetain && p_cuDevicePrimaryCtxRelease &&
              p_cuCtxSetCurrent && p_cuStreamCreate && p_cuStreamDestroy);
    cr_assert_eq(p_cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(p_cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSetCurrent(primary), CUDA_SUCCESS);
    streams[0] = NULL;
    for (int i = 1; i < NSTREAMS; i++)
        cr_assert_eq(p_cuStreamCreate((CUstream *)&streams[i], CU_STREAM_NON_BLOCKING),
                     CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return;
    for (int i = 1; i < NSTREAMS; i++)
        p_cuStreamDestroy((CUstream)streams[i]);
    p_cuDevicePrimaryCtxRelease(0);
}

TestSuite(model, .init = setup, .fini = teardown);

static unsigned long env_count(const char *name, unsigned long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoul(v, NULL, 10) : dflt;
}

#define KiB ((size_t)1 << 10)
#define GiB ((size_t)1 << 30)

/* A size from one of the bands around every threshold. */
static size_t pick_size(uint32_t *r, gpool_mem_kind kind, size_t capacity)
{
    unsigned band = rnd(r) % 100;
    size_t lo, hi;
    if (band < 30) lo = 1, hi = 16 * KiB; /* small classes */
    else if (band < 40) lo = 16 * KiB, hi = 64 * KiB;
    else if (band < 52) lo = 64 * KiB, hi = 2 * MiB - 1;
    else if (band < 58) lo = 2 * MiB, hi = 2 * MiB; /* the granularity, exactly */
    else if (band < 72) lo = 2 * MiB + 1, hi = 12 * MiB;
    else if (band < 84) lo = 12 * MiB, hi = 64 * MiB - 1;
    else if (band < 92) lo = 64 * MiB, hi = 96 * MiB; /* 8 MiB chunks */
    else if (band < 96) lo = 256 * MiB, hi = 300 * MiB; /* 32 MiB chunks */
    else if (band < 98) lo = 1 * GiB, hi = 1 * GiB + 64 * MiB; /* 64 MiB chunks */
    else lo = capacity + 1, hi = capacity + 64 * MiB; /* can never fit */
    if (kind != GPOOL_MEM_DEVICE && hi > 8 * MiB) { /* host memory here is shared: stay small */
        lo = 1 + lo % (8 * MiB);
        hi = 8 * MiB;
    }
    return lo + (hi > lo ? rnd(r) % (hi - lo + 1) : 0);
}

static size_t reserved_elsewhere(model *m, int pool)
{
    size_t b = 0;
    if (m->shared) return 0;
    for (int p = 0; p < m->npools; p++)
        if (p != pool) {
            gpool_stats s;
            gpool_get_stats(m->pools[p], &s);
            b += s.kind[GPOOL_MEM_DEVICE].reserved_bytes;
        }
    return b;
}

/* One seed: returns 1, or 0 with why filled. */
static int run_seed(uint32_t seed, unsigned long nops, char *why, size_t cap)
{
    uint32_t r = seed * 2654435761u + 1;
    static const size_t caps[] = {96 * MiB, 160 * MiB, 288 * MiB, 1280 * MiB};
    size_t capacity = caps[seed % 8 == 7 ? 3 : rnd(&r) % 3];
    int npools = 1 + (int)(rnd(&r) % 3 == 0) + (int)(rnd(&r) % 4 == 0);
    sim->set_capacity(0, capacity);
    sim->reset_counts();
    gpool_t *pools[MODEL_MAX_POOLS];
    for (int p = 0; p < npools; p++) {
        pools[p] = test_pool(rnd(&r) % 2 ? "tcache_bytes=0" : NULL);
        if (!pools[p]) return snprintf(why, cap, "seed %u: gpool_create failed", seed), 0;
    }
    static model m;
    model_init(&m, capacity, GPOOL_SIM_GRANULARITY, npools, pools);
    m.shared = MODEL_SHARED_PRESSURE;
    int ok = 1;
    for (unsigned long op = 0; op < nops && ok; op++) {
        unsigned what = rnd(&r) % 100;
        int p = (int)(rnd(&r) % (unsigned)npools);
        if (what < 55 && m.nlive < MAX_LIVE_OPS) {
            unsigned kr = rnd(&r) % 100;
            gpool_mem_kind kind = kr < 70   ? GPOOL_MEM_DEVICE
                                  : kr < 85 ? GPOOL_MEM_HOST_PINNED
                                            : GPOOL_MEM_HOST_MAPPED;
            size_t size = pick_size(&r, kind, capacity);
            gpool_stream_t s = streams[rnd(&r) % NSTREAMS];
            size_t other = kind == GPOOL_MEM_DEVICE ? reserved_elsewhere(&m, p) : 0;
            int must = model_must_fit(&m, p, kind, size, other);
            int never = model_never_fits(&m, kind, size);
            model_baseline(&m);
            unsigned long before = sim->call_total();
            void *ptr = NULL;
            gpool_status st;
            if (kind == GPOOL_MEM_DEVICE && !s && rnd(&r) % 2) {
                st = gpool_alloc(pools[p], size, NULL, &ptr);
            } else {
                gpool_alloc_params prm = {.kind = kind};
                st = gpool_alloc_async(pools[p], size, &prm, s, &ptr);
            }
            unsigned long made = sim->call_total() - before;
            if (st == GPOOL_OK) {
                uint32_t bseed = rnd(&r);
                model_add(&m, p, ptr, size, kind, s, bseed);
                model_fill(m.live[m.nlive - 1].host, size, bseed);
                gpool_block_desc d;
                if (kind == GPOOL_MEM_DEVICE && gpool_block_info(pools[p], ptr, &d) == GPOOL_OK)
                    model_note_chunk(&m, d.page_size);
            } else if (st == GPOOL_ERR_OUT_OF_MEMORY) {
                m.oom_fails[p]++;
            }
            if (never && (st == GPOOL_OK || made > 8)) {
                snprintf(why, cap,
                         "seed %u op %lu: %zu bytes on a %zu-byte device: status %d after %lu "
                         "driver calls (want a refusal in at most 8)",
                         seed, op, size, capacity, (int)st, made);
                ok = 0;
            } else if (must && st != GPOOL_OK) {
                snprintf(why, cap,
                         "seed %u op %lu: pool %d kind %d size %zu must succeed (model), got "
                         "%d: %s",
                         seed, op, p, (int)kind, size, (int)st, gpool_last_error());
                ok = 0;
            } else if (st != GPOOL_OK && st != GPOOL_ERR_OUT_OF_MEMORY) {
                snprintf(why, cap, "seed %u op %lu: status %d: %s", seed, op, (int)st,
                         gpool_last_error());
                ok = 0;
            } else if (st != GPOOL_OK && !*gpool_last_error()) {
                snprintf(why, cap, "seed %u op %lu: failure without a message", seed, op);
                ok = 0;
            }
        } else if (what < 88 && m.nlive) {
            model_block b = m.live[rnd(&r) % m.nlive];
            if (!model_check(b.host, b.size, b.seed)) {
                snprintf(why, cap, "seed %u op %lu: block %p (%zu bytes) lost its content", seed,
                         op, b.ptr, b.size);
                ok = 0;
                break;
            }
            model_remove(&m, b.ptr, NULL);
            gpool_status st;
            unsigned how = rnd(&r) % 3;
            if (how == 0 && b.stream == NULL) st = gpool_free(pools[b.pool], b.ptr);
            else if (how == 1) st = gpool_free_async(pools[b.pool], b.ptr, b.stream);
            else st = gpool_free_async(pools[b.pool], b.ptr, streams[rnd(&r) % NSTREAMS]);
            if (st != GPOOL_OK) {
                snprintf(why, cap, "seed %u op %lu: free: %s", seed, op, gpool_last_error());
                ok = 0;
            }
        } else if (what < 94) {
            size_t keep = rnd(&r) % 2 ? 0 : (rnd(&r) % 64) * MiB;
            if (gpool_trim(pools[p], keep) != GPOOL_OK) {
                snprintf(why, cap, "seed %u op %lu: trim: %s", seed, op, gpool_last_error());
                ok = 0;
            }
        } else {
            for (size_t i = m.nlive; i-- > 0;) /* free everything of pool p */
                if (m.live[i].pool == p) {
                    model_block b = m.live[i];
                    model_remove(&m, b.ptr, NULL);
                    if (gpool_free_async(pools[p], b.ptr, b.stream) != GPOOL_OK) {
                        snprintf(why, cap, "seed %u op %lu: free: %s", seed, op,
                                 gpool_last_error());
                        ok = 0;
                    }
                }
        }
        if (ok && !model_check_stats(&m, 1, why, cap)) {
            size_t len = strlen(why);
            snprintf(why + len, cap - len, " (seed %u op %lu)", seed, op);
            ok = 0;
        }
        if (ok && op % 16 == 15 && !model_check_content(&m, why, cap)) ok = 0;
    }
    if (ok) ok = model_check_content(&m, why, cap);
    for (int p = 0; p < npools; p++)
        gpool_destroy(pools[p]);
    struct gpoolsim_live live;
    sim->get_live(&live);
    if (ok && (live.handles || live.mappings || live.reservations || live.host_allocs ||
               live.host_registrations || live.events || sim->bytes_in_use(0))) {
        snprintf(why, cap, "seed %u: left in the simulator after destroy: %zu handles, %zu maps",
                 seed, live.handles, live.mappings);
        ok = 0;
    }
    return ok;
}

Test(model, random_sequences_match_the_model, .timeout = 600)
{
    NEED_SIM();
    unsigned long seeds = env_count("GPOOL_MODEL_SEEDS", 200);
    unsigned long ops = env_count("GPOOL_MODEL_OPS", 200);
    unsigned long one = env_count("GPOOL_MODEL_SEED", 0);
    char why[1024];
    unsigned long first = one ? one : 1, last = one ? one : seeds;
    for (unsigned long s = first; s <= last; s++)
        cr_assert(run_seed((uint32_t)s, ops, why, sizeof why), "%s", why);
    cr_log_info("model: %lu seeds x %lu operations", last - first + 1, ops);
}
