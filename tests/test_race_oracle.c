/* The stream-safety oracle: threads x streams x kinds of memory, with held completion, trims and
 * memory pressure in between, run under the simulator's happens-before referee. Every block is
 * "used by a kernel" (gpoolsim_touch) on the stream it was allocated on, sometimes also on a
 * second stream that the client orders correctly (event record + stream wait, then
 * gpool_record_stream), exactly as a well-behaved CUDA program would. If gpool ever hands out
 * memory whose earlier work is not ordered before the new owner's work, or unmaps or unregisters
 * memory with work still queued on it, the referee counts a violation: the test demands 0.
 *
 * The client is correct by construction, so every violation is gpool's. Needs the simulator
 * (held completion, its touch and violation entry points); skips on a real GPU. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define THREADS  3
#define SLOTS    24
#define NSTREAMS 4 /* created streams; NULL (legacy) and CU_STREAM_PER_THREAD come on top */

static const struct sim_api *sim;
static gpool_t *pool;
static CUcontext ctx;
static CUstream created[NSTREAMS];

static CUresult (*touch)(CUstream, CUdeviceptr, size_t, int);
static unsigned long (*violations)(void);
static CUresult (*ctx_set)(CUcontext);
static CUresult (*ev_create)(CUevent *, unsigned);
static CUresult (*ev_record)(CUevent, CUstream);
static CUresult (*ev_destroy)(CUevent);
static CUresult (*stream_wait)(CUstream, CUevent, unsigned);

static _Atomic unsigned long checks, failures;
static int nthreads = THREADS;   /* workers run_workers starts */
static uint32_t seed_add;        /* added to each worker's seed */
static gpool_mem_kind only_kind; /* GPOOL_MEM_AUTO (0): the mix of kinds */

typedef struct slot {
    void *p;
    size_t size;
    CUstream s;  /* allocated and used on */
    int crossed; /* also used on another stream (recorded): no more uses on s */
} slot;

/* One of the streams a thread may use: created (blocking or not), legacy, per-thread. */
static CUstream pick_stream(uint32_t *seed)
{
    uint32_t r = rnd(seed) % (NSTREAMS + 2);
    if (r < NSTREAMS) return created[r];
    return r == NSTREAMS ? NULL : CU_STREAM_PER_THREAD;
}

static size_t pick_size(uint32_t *seed)
{
    uint32_t r = rnd(seed);
    switch (r % 8) {
    case 0:
        return (size_t)(r >> 8) % (24 * MiB) + 1; /* large, several pages */
    case 1:
        return (size_t)2 * MiB; /* one page exactly */
    case 2:
        return (size_t)(r >> 8) % (1 * MiB) + 1; /* medium */
    default:
        return (size_t)(r >> 8) % (64 << 10) + 1; /* small: slabs, thread caches */
    }
}

static gpool_mem_kind pick_kind(uint32_t *seed)
{
    if (only_kind) return only_kind;
    uint32_t r = rnd(seed) % 6;
    return r < 4 ? GPOOL_MEM_DEVICE : r == 4 ? GPOOL_MEM_HOST_PINNED : GPOOL_MEM_HOST_MAPPED;
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        atomic_fetch_add(&checks, 1);                                                              \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(&failures, 1);                                                        \
            cr_log_error(__VA_ARGS__);                                                             \
        }                                                                                          \
    } while (0)

static void use_on(CUstream s, void *p, size_t n, int write)
{
    CUresult rc = touch(s, (CUdeviceptr)(uintptr_t)p, n, write);
    EXPECT(rc == CUDA_SUCCESS, "touch %p+%zu on stream %p: error %d", p, n, (void *)s, (int)rc);
}

/* Correct client protocol for using a block on a second stream t: t waits for s's work so far,
 * uses the block, and tells the pool (gpool_record_stream) so the free waits for t too. */
static void cross_use(slot *b, CUstream t)
{
    CUevent ev;
    EXPECT(ev_create(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "event");
    EXPECT(ev_record(ev, b->s) == CUDA_SUCCESS, "record");
    EXPECT(stream_wait(t, ev, 0) == CUDA_SUCCESS, "wait");
    ev_destroy(ev);
    use_on(t, b->p, b->size, 1);
    gpool_status st = gpool_record_stream(pool, b->p, t);
    EXPECT(st == GPOOL_OK, "record_stream: %s", gpool_last_error());
    b->crossed = 1;
}

static void release_block(slot *b)
{
    gpool_status st = gpool_free_async(pool, b->p, b->s);
    EXPECT(st == GPOOL_OK, "free_async: %s", gpool_last_error());
    b->p = NULL;
}

static void *worker(void *arg)
{
    uint32_t seed = 0x9e3779b9u * (uint32_t)(uintptr_t)arg + 17 + seed_add;
    slot slots[SLOTS] = {0};
    ctx_set(ctx);
    for (int op = 0; op < 2500; op++) {
        slot *b = &slots[rnd(&seed) % SLOTS];
        uint32_t what = rnd(&seed) % 100;
        if (!b->p) {
            gpool_alloc_params prm = {.kind = pick_kind(&seed)};
            if (rnd(&seed) % 8 == 0) prm.flags |= GPOOL_ALLOC_ZERO;
            CUstream s = pick_stream(&seed);
            size_t n = pick_size(&seed);
            void *p = NULL;
            gpool_status st = gpool_alloc_async(pool, n, &prm, s, &p);
            EXPECT(st == GPOOL_OK || st == GPOOL_ERR_OUT_OF_MEMORY, "alloc %zu: %s", n,
                   gpool_last_error());
            if (st != GPOOL_OK) continue;
            *b = (slot){.p = p, .size = n, .s = s};
            use_on(s, p, n, 1); /* a kernel writes the new block */
        } else if (what < 30 && !b->crossed) {
            use_on(b->s, b->p, b->size, what & 1); /* more kernels on the block's stream */
        } else if (what < 38 && !b->crossed) {
            CUstream t = pick_stream(&seed);
            if (t != b->s) cross_use(b, t);
        } else if (what < 90) {
            release_block(b);
        } else if (what < 95) {
            CUstream s = pick_stream(&seed);
            if (rnd(&seed) & 1)
                sim->stream_hold(s); /* its work stays queued: pending memory is real */
            else
                sim->stream_release(s);
        } else if (what < 97) {
            EXPECT(gpool_trim(pool, (size_t)(rnd(&seed) % 4) * 8 * MiB) == GPOOL_OK, "trim: %s",
                   gpool_last_error());
        } else {
            /* pressure: the device shrinks or grows under the pool */
            sim->set_capacity(0, (size_t)(96 + rnd(&seed) % 160) * MiB);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p) release_block(&slots[i]);
    sim->stream_release(CU_STREAM_PER_THREAD);
    return NULL;
}

static void setup(void)
{
    NEED_SIM();
    sim = sim_api();
    cr_assert_not_null(sim);
    touch = dlsym(sim->lib, "gpoolsim_touch");
    violations = dlsym(sim->lib, "gpoolsim_violations");
    if (!touch || !violations) cr_skip_test("the simulator has no happens-before referee");
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    ctx_set = sim_driver_proc("cuCtxSetCurrent");
    ev_create = sim_driver_proc("cuEventCreate");
    ev_record = sim_driver_proc("cuEventRecord");
    ev_destroy = sim_driver_proc("cuEventDestroy");
    stream_wait = sim_driver_proc("cuStreamWaitEvent");
    sim->set_capacity(0, 192 * MiB);
    pool = test_pool(NULL); /* first: it initializes the driver */
    cr_assert_not_null(pool, "%s", gpool_last_error());
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < NSTREAMS; i++)
        cr_assert_eq(mk(&created[i], i % 2 ? CU_STREAM_NON_BLOCKING : 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!pool) return;
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    for (int i = 0; i < NSTREAMS; i++)
        sim->stream_release(created[i]);
    sim->stream_release(NULL);
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < NSTREAMS; i++)
        destroy(created[i]);
    release(0);
    teardown_expect(sim_live_total() == 0, "every mapping, registration and event returned");
    teardown_end();
}

TestSuite(race_oracle, .init = setup, .fini = teardown, .timeout = 120);

static void run_workers(void)
{
    pthread_t th[THREADS];
    for (int i = 0; i < nthreads; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)), 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&failures), 0, "%lu of %lu client checks failed",
                 atomic_load(&failures), atomic_load(&checks));
    cr_expect_eq(violations(), 0,
                 "the happens-before referee saw %lu violations "
                 "(the client is correct by construction: each is gpool's)",
                 violations());
}

/* The default: a stream may wait for another's frees (stream_reuse=wait). */
Test(race_oracle, threads_streams_kinds_held_completion_trim_and_pressure_make_no_violation)
{
    run_workers();
}

/* The same program with stream_reuse=events: frees cross streams only once done. */
Test(race_oracle, the_same_with_events_only_reuse_makes_no_violation)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    pool = test_pool("stream_reuse=events");
    cr_assert_not_null(pool, "%s", gpool_last_error());
    run_workers();
}

/* One thread, device memory only, one fixed seed: a deterministic case of the flake above. A
 * large block spans two partly used pages through aliases (arena_span.c); its free gave the
 * pads beside it back clean and the block marked, which stream_reuse=events does not coalesce,
 * so the alias pages could not be held again: they stayed free for placement, a new block was
 * placed on them (sharing physical bytes with the original pages: unordered writes), and trim
 * unmapped them under it (its kernels then failed). */
Test(race_oracle, events_only_span_free_holds_its_alias_pages)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    pool = test_pool("stream_reuse=events");
    cr_assert_not_null(pool, "%s", gpool_last_error());
    nthreads = 1;
    seed_add = 1;
    only_kind = GPOOL_MEM_DEVICE;
    run_workers();
}

/* One stream only, the simplest program: a kernel writes a block, the block is freed on that
 * stream, and the pool is trimmed or destroyed while the kernel may still run. Giving the
 * memory back to the driver (unmap, unregister) must wait for that work. */
static void one_stream_then(int destroy, gpool_mem_kind kind, size_t size, CUstream s,
                            const char *conf)
{
    gpool_t *p2 = test_pool(conf);
    cr_assert_not_null(p2, "%s", gpool_last_error());
    gpool_alloc_params prm = {.kind = kind};
    void *b = NULL;
    cr_assert_eq(gpool_alloc_async(p2, size, &prm, s, &b), GPOOL_OK, "%s", gpool_last_error());
    use_on(s, b, size, 1);
    cr_assert_eq(gpool_free_async(p2, b, s), GPOOL_OK, "%s", gpool_last_error());
    if (!destroy) cr_assert_eq(gpool_trim(p2, 0), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(p2), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(violations(), 0, "%s of a %zu-byte kind-%d block freed on its only stream %s",
                 destroy ? "destroy" : "trim", size, (int)kind, conf ? conf : "");
}

Test(race_oracle, trim_and_destroy_wait_for_the_only_streams_work)
{
    static const size_t sizes[] = {256, 64 << 10, 4 << 20};
    static const gpool_mem_kind kinds[] = {GPOOL_MEM_DEVICE, GPOOL_MEM_HOST_PINNED,
                                           GPOOL_MEM_HOST_MAPPED};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++)
            for (int z = 0; z < 3; z++) {
                one_stream_then(d, kinds[k], sizes[z], NULL, NULL);
                one_stream_then(d, kinds[k], sizes[z], created[0], "tcache_bytes=0");
            }
}
