/* Adversarial tests of the public C API (include/gpool.h, docs/concepts) from the
 * outside: host kinds freed on held streams, gpool_stream_release with host frees waiting,
 * AUTO fallbacks on explicit streams, stats while frees wait, bad pointers across kinds and
 * injected driver failures on host paths. Streams are non-blocking (no implicit legacy-stream
 * edges) and held where their work must stay queued; every block is written by a "kernel"
 * (gpoolsim_touch) on the stream it was allocated on, so the simulator's happens-before referee
 * sees memory handed out while another stream's work on it is still queued. The client is
 * correct: every violation is gpool's. Needs the simulator; skips on a real GPU. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define NS 4

static const struct sim_api *sim;
static unsigned long (*violations)(void);
static unsigned long (*destroyed_calls)(void);
static CUresult (*stream_create)(CUstream *, unsigned);
static CUresult (*stream_destroy)(CUstream);
static gpool_t *pool;
static CUcontext ctx;
static CUstream S[NS];

static void setup(void)
{
    NEED_SIM();
    /* a new stream may get a destroyed one's handle value, as a real driver's may (read by the
     * simulator at its first stream) */
    setenv("GPOOL_SIM_REUSE_STREAM_HANDLES", "1", 1);
    sim = sim_api();
    cr_assert_not_null(sim);
    violations = dlsym(sim->lib, "gpoolsim_violations");
    destroyed_calls = dlsym(sim->lib, "gpoolsim_destroyed_stream_calls");
    if (!violations || !destroyed_calls || !sim->touch)
        cr_skip_test("the simulator has no happens-before referee");
    stream_create = sim_driver_proc("cuStreamCreate");
    stream_destroy = sim_driver_proc("cuStreamDestroy");
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*ctx_set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*init)(unsigned) = sim_driver_proc("cuInit");
    cr_assert_eq(init(0), CUDA_SUCCESS);
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(ctx_set(ctx), CUDA_SUCCESS);
    for (int i = 0; i < NS; i++)
        cr_assert_eq(stream_create(&S[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
}

static void release_all(void)
{
    for (int i = 0; i < NS; i++)
        if (S[i]) sim->stream_release(S[i]);
    sim->stream_release(NULL);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    release_all();
    if (pool) gpool_destroy(pool);
    for (int i = 0; i < NS; i++)
        if (S[i]) stream_destroy(S[i]);
    release(0);
    teardown_expect(sim_live_total() == 0, "everything returned to the driver");
    teardown_end();
}

TestSuite(api_adv, .init = setup, .fini = teardown, .timeout = 60);

static gpool_t *make_pool(const char *conf)
{
    gpool_t *p = test_pool(conf);
    cr_assert_not_null(p, "%s", gpool_last_error());
    return p;
}

/* The end of every test, in its body: release the streams, destroy the pool, check the referee
 * and that nothing was left with the driver. */
static void finish(void)
{
    release_all();
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    pool = NULL;
    cr_assert_eq(violations(), 0, "happens-before violations (see stderr)");
    cr_assert_eq(destroyed_calls(), 0, "gpool named a destroyed stream to the driver");
    struct gpoolsim_live l;
    sim->get_live(&l);
    cr_assert_eq(l.events, 0, "gpool_destroy left %zu events", l.events);
    cr_assert_eq(l.host_registrations + l.host_allocs, 0, "gpool_destroy left host memory pinned");
}

static void *alloc_kind(gpool_mem_kind kind, size_t size, unsigned flags, CUstream s)
{
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = kind;
    prm.flags = flags;
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, &prm, s, &p), GPOOL_OK, "kind %d, %zu bytes: %s",
                 (int)kind, size, gpool_last_error());
    cr_assert_not_null(p);
    return p;
}

/* A kernel on s writes the whole block (mapped: the device address gpool returned; pinned:
 * the host address, a device address under unified addressing). */
static void kernel(CUstream s, void *p, size_t n)
{
    CUresult rc = sim->touch(s, (CUdeviceptr)(uintptr_t)p, n, 1);
    cr_assert_eq(rc, CUDA_SUCCESS, "gpoolsim_touch: %d", (int)rc);
}

static gpool_stats stats(void)
{
    gpool_stats st = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK, "%s", gpool_last_error());
    return st;
}

/* ---------- gpool_stream_release with host frees waiting ---------- */

/* streams.md, "Destroying a stream": after gpool_stream_release "the pool drops its record of
 * the stream, so no later driver call names it", and what was pending on it "moves onto an
 * event recorded on the stream now". A pinned block freed on a held stream, then the stream
 * released and destroyed, its work done: a request its budget refuses asks the streams
 * (budgets.md) and must neither name the destroyed stream nor fail. */
Test(api_adv, host_free_then_stream_release_names_no_destroyed_stream)
{
    pool = make_pool("budget_pinned=1M");
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 512 << 10, 0, S[0]);
    sim->stream_hold(S[0]);
    kernel(S[0], p, 512 << 10);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_stream_release(pool, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim->stream_release(S[0]), 0); /* its queued work may complete now */
    cr_assert_eq(stream_destroy(S[0]), CUDA_SUCCESS);
    S[0] = NULL;
    unsigned long before = destroyed_calls();
    void *q = alloc_kind(GPOOL_MEM_HOST_PINNED, 1 << 20, 0, S[1]);
    cr_assert_eq(destroyed_calls(), before, "a later host request named the destroyed stream");
    kernel(S[1], q, 1 << 20);
    cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK, "%s", gpool_last_error());
    finish();
}

/* The same with the destroyed stream's work still queued and its handle value given to a new
 * stream (as a real driver may): "a new stream that gets the same handle value starts with
 * nothing of the old one's". The old stream's write must be done before the pinned block is
 * handed out again. */
Test(api_adv, host_free_then_stream_release_new_stream_same_handle)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 512 << 10, 0, S[0]);
    sim->stream_hold(S[0]);
    kernel(S[0], p, 512 << 10);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_stream_release(pool, S[0]), GPOOL_OK, "%s", gpool_last_error());
    CUstream old = S[0];
    cr_assert_eq(stream_destroy(old), CUDA_SUCCESS);
    cr_assert_eq(stream_create(&S[0], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(S[0], old, "the simulator did not reuse the handle value");
    /* the old stream's work is still held; the pool asks its streams (trim would synchronize) */
    gpool_stats st = stats();
    cr_assert_eq(st.pending_frees, 1);
    void *again[64];
    int n = 0, same = 0;
    for (; n < 64; n++) { /* enough requests that the pool polls its waiting frees */
        again[n] = alloc_kind(GPOOL_MEM_HOST_PINNED, 512 << 10, 0, S[1]);
        same |= again[n] == p;
        kernel(S[1], again[n], 512 << 10);
        cr_assert_eq(gpool_free_async(pool, again[n], S[1]), GPOOL_OK, "%s", gpool_last_error());
    }
    cr_assert_eq(violations(), 0,
                 "the block freed on the destroyed stream was handed out before its work was "
                 "done (reused: %d)",
                 same);
    sim->stream_release(old);
    finish();
}

/* A pinned block allocated on a stream that is then released and destroyed, freed later on
 * another stream: "its free then waits for the event recorded here instead of the allocating
 * stream" -- no driver call may name the destroyed stream. */
Test(api_adv, host_block_of_released_stream_freed_later)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[0]);
    kernel(S[0], p, 256 << 10);
    cr_assert_eq(gpool_stream_release(pool, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(stream_destroy(S[0]), CUDA_SUCCESS);
    S[0] = NULL;
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    unsigned long before = destroyed_calls();
    for (int i = 0; i < 40; i++) { /* enough that the waiting frees are polled */
        void *q = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[1]);
        kernel(S[1], q, 256 << 10);
        cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
    }
    void *big = alloc_kind(GPOOL_MEM_HOST_PINNED, 9 << 20, 0, S[1]);
    cr_assert_eq(gpool_free_async(pool, big, S[1]), GPOOL_OK);
    cr_assert_eq(destroyed_calls(), before, "a poll named the destroyed allocating stream");
    finish();
}

/* ---------- AUTO fallback on an explicit stream ---------- */

/* gpool_alloc_async: "params: as for gpool_alloc(); its stream field is ignored"; the block is
 * ordered on the stream passed, and gpool_block_desc.stream is the "stream it was allocated
 * on". A device request over its budget that falls back to mapped memory is still on it. */
Test(api_adv, fallback_block_is_on_the_async_stream)
{
    pool = make_pool("budget_device=2M");
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = GPOOL_MEM_AUTO;
    prm.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 4 << 20, &prm, S[1], &p), GPOOL_OK, "%s",
                 gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(d.kind, GPOOL_MEM_HOST_MAPPED);
    cr_assert_eq(d.fell_back, 1);
    cr_assert_eq(d.stream, S[1], "the fallen-back block says stream %p, allocated on %p",
                 (void *)d.stream, (void *)S[1]);
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    finish();
}

/* The same through the referee: the allocating stream's kernel is still queued when the block
 * is freed on another stream; streams.md, "Frees": host blocks are reused "only once the work
 * queued on their streams (the freeing one and the allocating one) is done". */
Test(api_adv, fallback_block_waits_for_its_allocating_stream)
{
    pool = make_pool("budget_device=2M");
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = GPOOL_MEM_AUTO;
    prm.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 4 << 20, &prm, S[0], &p), GPOOL_OK, "%s",
                 gpool_last_error());
    sim->stream_hold(S[0]);
    kernel(S[0], p, 4 << 20);
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 4; i++) { /* 4 MiB waiting: the next request asks the streams */
        void *q = alloc_kind(GPOOL_MEM_HOST_MAPPED, 4 << 20, 0, S[2]);
        kernel(S[2], q, 4 << 20);
        cr_assert_eq(gpool_free_async(pool, q, S[2]), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0,
                 "the mapped block was reused while its allocating stream's "
                 "kernel was queued");
    finish();
}
