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
#include <pthread.h>
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

/* A pool with a 2 MiB device budget, and a 4 MiB AUTO request on stream s that may fall back:
 * it ends in mapped memory. */
static void *fallback_block(CUstream s)
{
    pool = make_pool("budget_device=2M");
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = GPOOL_MEM_AUTO;
    prm.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 4 << 20, &prm, s, &p), GPOOL_OK, "%s", gpool_last_error());
    return p;
}

/* gpool_alloc_async: "params: as for gpool_alloc(); its stream field is ignored"; the block is
 * ordered on the stream passed, and gpool_block_desc.stream is the "stream it was allocated
 * on". A device request over its budget that falls back to mapped memory is still on it. */
Test(api_adv, fallback_block_is_on_the_async_stream)
{
    void *p = fallback_block(S[1]);
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
    void *p = fallback_block(S[0]);
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

/* ---------- stats and lookups while host frees wait ---------- */

static void kinds_equal(const gpool_stats *a, const gpool_stats *b, const char *what)
{
    for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++) {
        const gpool_kind_stats *x = &a->kind[k], *y = &b->kind[k];
        cr_assert_eq(x->requested_bytes, y->requested_bytes, "%s: kind %d requested", what, k);
        cr_assert_eq(x->in_use_bytes, y->in_use_bytes, "%s: kind %d in_use", what, k);
        cr_assert_eq(x->reserved_bytes, y->reserved_bytes, "%s: kind %d reserved", what, k);
        cr_assert_eq(x->cached_bytes, y->cached_bytes, "%s: kind %d cached", what, k);
        cr_assert_eq(x->live_blocks, y->live_blocks, "%s: kind %d live", what, k);
        cr_assert_eq(x->frees, y->frees, "%s: kind %d frees", what, k);
    }
    cr_assert_eq(a->pending_frees, b->pending_frees, "%s: pending_frees", what);
}

/* stats.md: "frees still waiting on a stream's work count as freed (cached), not in use";
 * pending_frees counts them; gpool_calculate_stats equals gpool_get_stats. Both ways a host
 * free waits: on the event clock, and behind events (recorded on another stream). */
static void host_pending_stats(gpool_mem_kind kind, size_t size)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    sim->stream_hold(S[1]);
    void *a = alloc_kind(kind, size, 0, S[0]);
    void *b = alloc_kind(kind, size, 0, S[0]);
    kernel(S[0], a, size);
    kernel(S[1], b, size);
    cr_assert_eq(gpool_record_stream(pool, b, S[1]), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats st = stats();
    cr_assert_eq(st.kind[kind].live_blocks, 2);
    cr_assert_eq(st.kind[kind].requested_bytes, 2 * size);
    cr_assert_eq(gpool_free_async(pool, a, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free_async(pool, b, S[0]), GPOOL_OK, "%s", gpool_last_error());
    st = stats();
    const gpool_kind_stats *k = &st.kind[kind];
    cr_assert_eq(st.pending_frees, 2, "pending_frees %llu", (unsigned long long)st.pending_frees);
    cr_assert_eq(k->live_blocks, 0, "live_blocks %llu", (unsigned long long)k->live_blocks);
    cr_assert_eq(k->frees, 2);
    cr_assert_eq(k->in_use_bytes, 0, "in_use %llu", (unsigned long long)k->in_use_bytes);
    cr_assert_eq(k->requested_bytes, 0);
    cr_assert_eq(k->cached_bytes, k->reserved_bytes);
    cr_assert_eq(st.kind[GPOOL_MEM_AUTO].in_use_bytes, st.kind[GPOOL_MEM_DEVICE].in_use_bytes);
    gpool_stats walk = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_calculate_stats(pool, &walk), GPOOL_OK);
    kinds_equal(&st, &walk, "calculate_stats while frees wait");
    /* a freed block, its free pending either way, is no live block */
    void *blk[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, blk[i], &d), GPOOL_ERR_INVALID_POINTER,
                     "block %d: a freed block described as live", i);
        cr_assert_eq(gpool_record_stream(pool, blk[i], S[2]), GPOOL_ERR_INVALID_POINTER, "block %d",
                     i);
        cr_assert_eq(gpool_free_async(pool, blk[i], S[0]), GPOOL_ERR_INVALID_POINTER,
                     "block %d: freed twice", i);
    }
    st = stats();
    cr_assert_eq(st.kind[kind].frees, 2, "a refused free counted");
    sim->stream_release(S[0]);
    sim->stream_release(S[1]);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    st = stats();
    cr_assert_eq(st.pending_frees, 0);
    cr_assert_eq(st.kind[kind].reserved_bytes, 0, "trim kept %llu bytes",
                 (unsigned long long)st.kind[kind].reserved_bytes);
    finish();
}

Test(api_adv, pinned_pending_frees_stats_and_lookups)
{
    host_pending_stats(GPOOL_MEM_HOST_PINNED, 256 << 10);
}
Test(api_adv, mapped_pending_frees_stats_and_lookups)
{
    host_pending_stats(GPOOL_MEM_HOST_MAPPED, 256 << 10);
}
Test(api_adv, small_pinned_pending_frees_stats_and_lookups)
{
    host_pending_stats(GPOOL_MEM_HOST_PINNED, 1000);
}

/* The same for a device block recorded on another stream, its free pending behind events:
 * gpool_get_block_desc answers INVALID_POINTER for "not inside a live block", and
 * gpool_block_size for "not the start of a live device block". */
static void device_recorded_pending(size_t size)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[1]);
    void *p = alloc_kind(GPOOL_MEM_DEVICE, size, 0, S[0]);
    kernel(S[0], p, size);
    cr_assert_eq(gpool_record_stream(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats st = stats();
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].live_blocks, 0);
    cr_assert_eq(st.pending_frees, 1);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_ERR_INVALID_POINTER,
                 "a freed device block described as live");
    size_t bs = 0;
    cr_assert_eq(gpool_block_size(pool, p, &bs), GPOOL_ERR_INVALID_POINTER,
                 "gpool_block_size of a freed block: %zu", bs);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_ERR_INVALID_POINTER);
    finish();
}

Test(api_adv, device_recorded_pending_free_is_no_live_block)
{
    device_recorded_pending(1 << 20);
}
Test(api_adv, small_device_recorded_pending_free_is_no_live_block)
{
    device_recorded_pending(4096); /* a slab slot: gpool_block_size's lock-free path */
}

/* The client orders stream t after stream s's work so far (event record + stream wait). */
static void order_after(CUstream t, CUstream s)
{
    CUresult (*ev_create)(CUevent *, unsigned) = sim_driver_proc("cuEventCreate");
    CUresult (*ev_record)(CUevent, CUstream) = sim_driver_proc("cuEventRecord");
    CUresult (*ev_destroy)(CUevent) = sim_driver_proc("cuEventDestroy");
    CUresult (*stream_wait)(CUstream, CUevent, unsigned) = sim_driver_proc("cuStreamWaitEvent");
    CUevent ev;
    /* each call tried twice: an injected failure fires once (faults_on_host_stream_paths) */
    cr_assert(ev_create(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ||
              ev_create(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    cr_assert(ev_record(ev, s) == CUDA_SUCCESS || ev_record(ev, s) == CUDA_SUCCESS);
    cr_assert(stream_wait(t, ev, 0) == CUDA_SUCCESS || stream_wait(t, ev, 0) == CUDA_SUCCESS);
    cr_assert_eq(ev_destroy(ev), CUDA_SUCCESS);
}

/* gpool_record_stream on a host block: its free waits for the recorded stream's work too. */
static void host_record_reuse(gpool_mem_kind kind, size_t size)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(kind, size, 0, S[0]);
    kernel(S[0], p, size);
    cr_assert_eq(gpool_record_stream(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(S[1]);
    order_after(S[1], S[0]);
    kernel(S[1], p, size);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 40; i++) {
        void *q = alloc_kind(kind, size, 0, S[2]);
        kernel(S[2], q, size);
        cr_assert_eq(gpool_free_async(pool, q, S[2]), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0, "reused before the recorded stream's work was done");
    finish();
}

Test(api_adv, pinned_recorded_stream_holds_reuse)
{
    host_record_reuse(GPOOL_MEM_HOST_PINNED, 256 << 10);
}
Test(api_adv, small_mapped_recorded_stream_holds_reuse)
{
    host_record_reuse(GPOOL_MEM_HOST_MAPPED, 2000);
}

/* gpool_destroy with host frees waiting on a held stream: it synchronizes, gives every host
 * page back and leaves no event (finish checks). */
Test(api_adv, destroy_with_host_frees_waiting)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    for (int i = 0; i < 8; i++) {
        gpool_mem_kind kind = i % 2 ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED;
        size_t size = (size_t)1000 << (2 * i);
        void *p = alloc_kind(kind, size, 0, S[i % 3]);
        kernel(S[0], p, size);
        if (i % 3) cr_assert_eq(gpool_record_stream(pool, p, S[0]), GPOOL_OK);
        cr_assert_eq(gpool_free_async(pool, p, S[i % 3]), GPOOL_OK, "%s", gpool_last_error());
    }
    finish();
}

/* ---------- bad input on host kinds ---------- */

static void host_bad_pointers(gpool_mem_kind kind, size_t size)
{
    pool = make_pool(NULL);
    gpool_t *other = make_pool(NULL);
    void *p = alloc_kind(kind, size, 0, S[0]);
    void *o = NULL;
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = kind;
    cr_assert_eq(gpool_alloc(other, size, &prm, &o), GPOOL_OK);
    char *mid = (char *)p + 256;
    cr_assert_eq(gpool_free(pool, mid), GPOOL_ERR_INVALID_POINTER, "interior pointer freed");
    cr_assert_eq(gpool_free_async(pool, mid, S[0]), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_record_stream(pool, mid, S[1]), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_free(other, p), GPOOL_ERR_INVALID_POINTER, "freed into another pool");
    cr_assert_eq(gpool_free(pool, o), GPOOL_ERR_INVALID_POINTER, "another pool's block freed");
    size_t bs = 0;
    cr_assert_eq(gpool_block_size(pool, p, &bs), GPOOL_ERR_INVALID_POINTER,
                 "gpool_block_size of a host block: %d (size %zu)", 0, bs);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, mid, &d), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(d.kind, kind);
    cr_assert_eq(d.requested_size, size);
    cr_assert_eq(gpool_get_block_desc(other, p, &d), GPOOL_ERR_INVALID_POINTER);
    gpool_stats st = stats();
    cr_assert_eq(st.kind[kind].live_blocks, 1, "a refused free changed the block");
    cr_assert_eq(st.kind[kind].frees, 0);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER, "double free");
    cr_assert_eq(gpool_free(other, o), GPOOL_OK, "%s", gpool_last_error());
    void *z = (void *)1;
    cr_assert_eq(gpool_alloc_async(pool, 0, &prm, S[0], &z), GPOOL_OK);
    cr_assert_null(z);
    cr_assert_eq(gpool_destroy(other), GPOOL_OK, "%s", gpool_last_error());
    finish();
}

Test(api_adv, pinned_bad_pointers)
{
    host_bad_pointers(GPOOL_MEM_HOST_PINNED, 256 << 10);
}
Test(api_adv, small_mapped_bad_pointers)
{
    host_bad_pointers(GPOOL_MEM_HOST_MAPPED, 3000);
}
Test(api_adv, small_pinned_bad_pointers)
{
    host_bad_pointers(GPOOL_MEM_HOST_PINNED, 3000);
}

/* ---------- injected driver failures on the host stream paths ---------- */

/* docs/api.md: every failure is a status with a message, out-pointers NULL; afterwards the
 * pool is usable, its counters true, and gpool_destroy leaves nothing behind. */
static void status_ok(gpool_status st, const char *what, const char *entry, unsigned long nth)
{
    cr_assert(st == GPOOL_OK || st == GPOOL_ERR_OUT_OF_MEMORY || st == GPOOL_ERR_DRIVER,
              "%s with %s #%lu failing: status %d (%s)", what, entry, nth, (int)st,
              gpool_last_error());
    if (st != GPOOL_OK)
        cr_assert(gpool_last_error()[0] != 0, "%s: status %d without a message", what, (int)st);
}

static void *fault_alloc(gpool_mem_kind kind, size_t size, CUstream s, const char *entry,
                         unsigned long nth)
{
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = kind;
    void *p = (void *)1;
    gpool_status st = gpool_alloc_async(pool, size, &prm, s, &p);
    status_ok(st, "gpool_alloc_async", entry, nth);
    if (st != GPOOL_OK) {
        cr_assert_null(p, "failed allocation left *out set");
        return NULL;
    }
    kernel(s, p, size);
    return p;
}

Test(api_adv, faults_on_host_stream_paths, .timeout = 120)
{
    static const char *const entries[] = {
        "cuEventCreate",       "cuEventRecord",
        "cuEventQuery",        "cuStreamSynchronize",
        "cuCtxSynchronize",    "cuMemHostRegister",
        "cuMemHostUnregister", "cuMemHostGetDevicePointer",
        "cuStreamWaitEvent",
    };
    for (size_t e = 0; e < sizeof entries / sizeof *entries; e++) {
        for (unsigned long nth = 1; nth <= 4; nth++) {
            const char *entry = entries[e];
            pool = make_pool(NULL);
            cr_assert_eq(sim->fail_nth(entry, nth), 0, "%s", entry);
            sim->stream_hold(S[0]);
            void *p = fault_alloc(GPOOL_MEM_HOST_PINNED, 256 << 10, S[0], entry, nth);
            void *q = fault_alloc(GPOOL_MEM_HOST_MAPPED, 3000, S[0], entry, nth);
            void *r = fault_alloc(GPOOL_MEM_HOST_PINNED, 1000, S[0], entry, nth);
            if (q) {
                order_after(S[1], S[0]);
                status_ok(gpool_record_stream(pool, q, S[1]), "gpool_record_stream", entry, nth);
            }
            if (p) status_ok(gpool_free_async(pool, p, S[0]), "free pinned", entry, nth);
            if (q) status_ok(gpool_free_async(pool, q, S[0]), "free mapped", entry, nth);
            status_ok(gpool_stream_release(pool, S[0]), "gpool_stream_release", entry, nth);
            cr_assert_eq(sim->stream_release(S[0]), 0);
            cr_assert_eq(stream_destroy(S[0]), CUDA_SUCCESS);
            S[0] = NULL;
            for (int i = 0; i < 20; i++) {
                void *x = fault_alloc(GPOOL_MEM_HOST_PINNED, 256 << 10, S[1], entry, nth);
                if (x) status_ok(gpool_free_async(pool, x, S[1]), "free", entry, nth);
            }
            status_ok(gpool_trim(pool, 0), "gpool_trim", entry, nth);
            sim->fail_clear();
            /* the faults stop: the block still live frees, the pool serves and settles */
            if (r)
                cr_assert_eq(gpool_free_async(pool, r, S[1]), GPOOL_OK, "%s", gpool_last_error());
            void *y = fault_alloc(GPOOL_MEM_HOST_MAPPED, 1 << 20, S[1], entry, nth);
            cr_assert_not_null(y, "%s #%lu: no allocation after the faults", entry, nth);
            cr_assert_eq(gpool_free_async(pool, y, S[1]), GPOOL_OK, "%s", gpool_last_error());
            cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s #%lu: %s", entry, nth,
                         gpool_last_error());
            gpool_stats st = stats();
            for (int k = GPOOL_MEM_HOST_PINNED; k <= GPOOL_MEM_HOST_MAPPED; k++) {
                cr_assert_eq(st.kind[k].live_blocks, 0, "%s #%lu: kind %d live %llu", entry, nth, k,
                             (unsigned long long)st.kind[k].live_blocks);
                cr_assert_eq(st.kind[k].in_use_bytes, 0, "%s #%lu: kind %d in use", entry, nth, k);
                cr_assert_eq(st.kind[k].reserved_bytes, 0, "%s #%lu: kind %d reserved %llu", entry,
                             nth, k, (unsigned long long)st.kind[k].reserved_bytes);
            }
            cr_assert_eq(st.pending_frees, 0, "%s #%lu: pending %llu", entry, nth,
                         (unsigned long long)st.pending_frees);
            cr_assert_eq(stream_create(&S[0], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
            release_all();
            cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s #%lu: %s", entry, nth,
                         gpool_last_error());
            pool = NULL;
            cr_assert_eq(violations(), 0, "%s #%lu: happens-before violations", entry, nth);
            cr_assert_eq(destroyed_calls(), 0, "%s #%lu: a destroyed stream named", entry, nth);
            struct gpoolsim_live l;
            sim->get_live(&l);
            cr_assert_eq(l.events + l.host_registrations + l.host_allocs, 0,
                         "%s #%lu: left events %zu registrations %zu host allocs %zu", entry, nth,
                         l.events, l.host_registrations, l.host_allocs);
        }
    }
}

/* ---------- budgets and trim ---------- */

/* budgets.md: host frees waiting on their streams count against the budget until they settle;
 * a request the budget refuses asks whether they have. gpool_alloc: OUT_OF_MEMORY "at once for
 * a request ... refused by its kind's budget". Either the refusal comes at once (the stream is
 * still working), or the pool waited for the device and the frees settled: then the request
 * fits and must be served. */
Test(api_adv, host_budget_refusal_after_waiting_is_served)
{
    pool = make_pool("budget_pinned=1M");
    sim->stream_hold(S[0]);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 512 << 10, 0, S[0]);
    kernel(S[0], p, 512 << 10);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    unsigned long syncs = sim->forced_syncs();
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = GPOOL_MEM_HOST_PINNED;
    void *q = NULL;
    gpool_status st = gpool_alloc_async(pool, 1 << 20, &prm, S[1], &q);
    int waited = sim->forced_syncs() != syncs;
    cr_assert(st == GPOOL_OK || (st == GPOOL_ERR_OUT_OF_MEMORY && !waited),
              "status %d after %s: %s", (int)st,
              waited ? "synchronizing the held stream" : "no wait", gpool_last_error());
    if (q) {
        kernel(S[1], q, 1 << 20);
        cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
    }
    finish();
}

/* gpool_trim: "Give cached physical memory back to the driver until at most keep_bytes stay
 * cached" -- the pool's cached bytes, all kinds together (gpool_stats.kind[GPOOL_MEM_AUTO]). */
Test(api_adv, trim_keeps_at_most_keep_bytes_across_kinds)
{
    pool = make_pool(NULL);
    static const struct {
        gpool_mem_kind kind;
        size_t size;
    } b[] = {
        {GPOOL_MEM_DEVICE, 8 << 20},      {GPOOL_MEM_HOST_PINNED, 1 << 20},
        {GPOOL_MEM_HOST_PINNED, 6 << 20}, {GPOOL_MEM_HOST_MAPPED, 1 << 20},
        {GPOOL_MEM_HOST_MAPPED, 6 << 20},
    };
    void *p[5];
    for (int i = 0; i < 5; i++) {
        gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
        prm.kind = b[i].kind;
        cr_assert_eq(gpool_alloc(pool, b[i].size, &prm, &p[i]), GPOOL_OK, "%s", gpool_last_error());
    }
    for (int i = 0; i < 5; i++)
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK, "%s", gpool_last_error());
    size_t keep = 5 << 20;
    cr_assert_eq(gpool_trim(pool, keep), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats st = stats();
    cr_assert_leq(st.kind[GPOOL_MEM_AUTO].cached_bytes, keep,
                  "trim(%zu) kept %llu bytes cached (device %llu, pinned %llu, mapped %llu)", keep,
                  (unsigned long long)st.kind[GPOOL_MEM_AUTO].cached_bytes,
                  (unsigned long long)st.kind[GPOOL_MEM_DEVICE].cached_bytes,
                  (unsigned long long)st.kind[GPOOL_MEM_HOST_PINNED].cached_bytes,
                  (unsigned long long)st.kind[GPOOL_MEM_HOST_MAPPED].cached_bytes);
    finish();
}

/* ---------- mapped memory whose host address is not its device address ---------- */

/* Registered memory with CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 0: a mapped block's host
 * address differs from the address gpool_alloc returned. gpool_record_stream and gpool_free
 * take "the block's address, as gpool_alloc() returned it"; the host address is not the start
 * of a block handed out (GPOOL_ERR_INVALID_POINTER), and a call that accepted it must act on
 * the block. */
static void mapped_host_alias(size_t size) /* small: from registered extents */
{
    void (*set_alias)(int) = dlsym(sim->lib, "gpoolsim_set_host_alias");
    if (!set_alias) cr_skip_test("the simulator has no host alias mode");
    set_alias(1);
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_MAPPED, size, 0, S[0]);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(d.device_ptr, (uint64_t)(uintptr_t)p);
    void *h = d.host_ptr;
    cr_assert_neq(h, p, "host alias mode gave the same address");
    gpool_status st = gpool_record_stream(pool, h, S[1]);
    cr_assert_eq(st, GPOOL_ERR_INVALID_POINTER,
                 "gpool_record_stream took the mapped block's host address: %d", (int)st);
    cr_assert(strstr(gpool_last_error(), "host address"), "%s", gpool_last_error());
    st = gpool_free_async(pool, h, S[0]);
    cr_assert_eq(st, GPOOL_ERR_INVALID_POINTER,
                 "gpool_free_async took the mapped block's host address: %d", (int)st);
    cr_assert(strstr(gpool_last_error(), "host address"), "%s", gpool_last_error());
    gpool_stats s = stats();
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_MAPPED].live_blocks, 1);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    s = stats();
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_MAPPED].live_blocks, 0, "the block was not freed");
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    s = stats();
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_MAPPED].reserved_bytes, 0);
    finish();
}

Test(api_adv, small_mapped_host_alias_is_no_block_address)
{
    mapped_host_alias(3000);
}

/* ---------- peaks ---------- */

/* stats.md: "peaks: high-water marks of the four"; frees waiting on a stream "count as freed
 * (cached), not in use". One block live at a time, each freed on a held stream before the next
 * is allocated: in_use never exceeded one block, so neither may its high-water mark. */
static void peak_with_pending(gpool_mem_kind kind, size_t size)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    uint64_t one = 0;
    for (int i = 0; i < 4; i++) {
        void *p = alloc_kind(kind, size, 0, S[0]);
        kernel(S[0], p, size);
        gpool_stats st = stats();
        if (!one) one = st.kind[kind].in_use_bytes;
        cr_assert_eq(st.kind[kind].in_use_bytes, one);
        cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    }
    gpool_stats st = stats();
    cr_assert_eq(st.kind[kind].in_use_bytes, 0);
    cr_assert_eq(st.kind[kind].peak_in_use_bytes, one,
                 "kind %d: peak_in_use %llu, but in_use never exceeded %llu", (int)kind,
                 (unsigned long long)st.kind[kind].peak_in_use_bytes, (unsigned long long)one);
    cr_assert_eq(st.kind[kind].peak_requested_bytes, size, "peak_requested %llu",
                 (unsigned long long)st.kind[kind].peak_requested_bytes);
    finish();
}

Test(api_adv, pinned_peak_in_use_counts_no_pending_frees)
{
    peak_with_pending(GPOOL_MEM_HOST_PINNED, 1 << 20);
}
Test(api_adv, small_mapped_peak_in_use_counts_no_pending_frees)
{
    peak_with_pending(GPOOL_MEM_HOST_MAPPED, 4000);
}
Test(api_adv, device_peak_in_use_counts_no_pending_frees)
{
    peak_with_pending(GPOOL_MEM_DEVICE, 1 << 20);
}

/* ---------- zero fill on reuse, AUTO moves, NULL arguments ---------- */

/* GPOOL_ALLOC_ZERO: "fill the block with zero bytes", a block served warm from the cache too. */
static void zero_on_reuse(gpool_mem_kind kind, size_t size)
{
    pool = make_pool(NULL);
    for (int round = 0; round < 3; round++) {
        void *p[4];
        for (int i = 0; i < 4; i++) {
            p[i] = alloc_kind(kind, size, GPOOL_ALLOC_ZERO, S[1]);
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, p[i], &d), GPOOL_OK);
            const unsigned char *h = d.host_ptr;
            for (size_t k = 0; k < d.requested_size; k++)
                cr_assert_eq(h[k], 0, "round %d block %d byte %zu not zero", round, i, k);
            memset(d.host_ptr, 0xA5, d.size);
        }
        for (int i = 0; i < 4; i++)
            cr_assert_eq(gpool_free_async(pool, p[i], S[1]), GPOOL_OK);
        /* the frees settle (a synchronize), the memory stays cached */
        cr_assert_eq(gpool_trim(pool, (size_t)1 << 40), GPOOL_OK, "%s", gpool_last_error());
    }
    finish();
}

Test(api_adv, zero_fill_small_pinned_reused)
{
    zero_on_reuse(GPOOL_MEM_HOST_PINNED, 1000);
}
Test(api_adv, zero_fill_pinned_reused)
{
    zero_on_reuse(GPOOL_MEM_HOST_PINNED, 300 << 10);
}
Test(api_adv, zero_fill_mapped_reused)
{
    zero_on_reuse(GPOOL_MEM_HOST_MAPPED, 3 << 20);
}

/* budgets.md: pinned over budget moves to mapped; the move counts in fallbacks, fell_back is
 * 1, the request is no OOM; a request that names its kind never moves. */
Test(api_adv, pinned_budget_moves_auto_to_mapped)
{
    pool = make_pool("budget_pinned=1M");
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.usage = GPOOL_USAGE_STAGING;
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 2 << 20, &prm, S[1], &p), GPOOL_OK, "%s",
                 gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
    cr_assert_eq(d.kind, GPOOL_MEM_HOST_MAPPED);
    cr_assert_eq(d.fell_back, 1);
    cr_assert_eq(d.usage, GPOOL_USAGE_STAGING);
    cr_assert_eq(d.stream, S[1]);
    prm.kind = GPOOL_MEM_HOST_PINNED;
    void *q = (void *)1;
    cr_assert_eq(gpool_alloc_async(pool, 2 << 20, &prm, S[1], &q), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    gpool_stats st = stats();
    cr_assert_eq(st.fallbacks, 1);
    cr_assert_eq(st.ooms, 1, "ooms %llu", (unsigned long long)st.ooms);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_MAPPED].live_blocks, 1);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 0);
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK);
    finish();
}

/* NULL arguments: each call's listed error, nothing changed. */
Test(api_adv, null_arguments)
{
    pool = make_pool(NULL);
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    size_t n = 0;
    void *o = (void *)1;
    cr_assert_eq(gpool_free(NULL, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_free_async(pool, NULL, S[0]), GPOOL_OK);
    cr_assert_eq(gpool_record_stream(NULL, NULL, S[0]), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_record_stream(pool, NULL, S[0]), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_get_block_desc(pool, NULL, &d), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_block_size(pool, NULL, &n), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_block_size(pool, NULL, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_stream_release(pool, S[3]), GPOOL_OK, "a stream the pool never saw");
    cr_assert_eq(gpool_stream_release(pool, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_trim(NULL, 0), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_alloc_async(NULL, 1, NULL, S[0], &o), GPOOL_ERR_INVALID_ARG);
    for (int k = GPOOL_MEM_DEVICE; k < GPOOL_MEM_KIND_COUNT; k++) {
        gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
        prm.kind = (gpool_mem_kind)k;
        o = (void *)1;
        cr_assert_eq(gpool_alloc_async(pool, 0, &prm, S[0], &o), GPOOL_OK);
        cr_assert_null(o, "kind %d size 0", k);
        prm.alignment = 3;
        o = (void *)1;
        cr_assert_eq(gpool_alloc_async(pool, 64, &prm, S[0], &o), GPOOL_ERR_INVALID_ARG);
        cr_assert_null(o);
        prm.alignment = (size_t)1 << 30;
        o = (void *)1;
        cr_assert_eq(gpool_alloc_async(pool, 64, &prm, S[0], &o), GPOOL_ERR_INVALID_ARG,
                     "kind %d: alignment beyond the page size", k);
        cr_assert_null(o);
        prm.alignment = 0;
        prm.page_size = 12345;
        o = (void *)1;
        cr_assert_eq(gpool_alloc_async(pool, 64, &prm, S[0], &o), GPOOL_ERR_INVALID_ARG,
                     "kind %d: page size 12345", k);
        cr_assert_null(o);
    }
    gpool_stats st = stats();
    cr_assert_eq(st.kind[GPOOL_MEM_AUTO].allocs, 0);
    finish();
}

/* ---------- more streams than the host clock tracks ---------- */

/* 72 held streams each free a pinned block (the host clock tracks 64 streams; the rest take
 * the deferred path), some are released and destroyed meanwhile; then another stream reuses
 * the memory: nothing may be handed out while a held stream's kernel on it is queued, no call
 * may name a destroyed stream. */
Test(api_adv, host_frees_on_more_streams_than_clocks, .timeout = 120)
{
    enum { M = 72 };
    CUstream m[M];
    pool = make_pool(NULL);
    for (int i = 0; i < M; i++) {
        cr_assert_eq(stream_create(&m[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        sim->stream_hold(m[i]);
        size_t size = i % 2 ? 2000 : 64 << 10;
        void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, size, 0, m[i]);
        kernel(m[i], p, size);
        cr_assert_eq(gpool_free_async(pool, p, m[i]), GPOOL_OK, "%s", gpool_last_error());
    }
    for (int i = 0; i < M; i += 5) {
        status_ok(gpool_stream_release(pool, m[i]), "gpool_stream_release", "none", 0);
        cr_assert_eq(stream_destroy(m[i]), CUDA_SUCCESS);
        m[i] = NULL;
    }
    for (int i = 0; i < 200; i++) {
        size_t size = i % 2 ? 2000 : 64 << 10;
        void *q = alloc_kind(GPOOL_MEM_HOST_PINNED, size, 0, S[1]);
        kernel(S[1], q, size);
        cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0, "memory handed out under a held stream's kernel");
    cr_assert_eq(destroyed_calls(), 0, "a destroyed stream named");
    for (int i = 0; i < M; i++)
        if (m[i]) sim->stream_release(m[i]);
    finish();
    for (int i = 0; i < M; i++)
        if (m[i]) stream_destroy(m[i]);
}

/* gpool_free: GPOOL_ERR_DRIVER when "a host block used on other streams could not be tracked
 * and waiting for those streams failed (it was not freed)". The block stays live, recorded
 * streams included: its next free still waits for the recorded stream's work. */
Test(api_adv, failed_host_free_keeps_recorded_streams)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[0]);
    kernel(S[0], p, 256 << 10);
    cr_assert_eq(gpool_record_stream(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(S[1]);
    order_after(S[1], S[0]);
    kernel(S[1], p, 256 << 10);
    cr_assert_eq(sim->fail_nth("cuEventRecord", 1), 0);
    cr_assert_eq(sim->fail_nth("cuStreamSynchronize", 1), 0);
    gpool_status st = gpool_free_async(pool, p, S[0]);
    sim->fail_clear();
    if (st == GPOOL_OK) cr_skip_test("the free did not take the failing path");
    cr_assert_eq(st, GPOOL_ERR_DRIVER, "%s", gpool_last_error());
    gpool_stats s = stats();
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 1, "the block is live");
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 40; i++) {
        void *q = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[2]);
        kernel(S[2], q, 256 << 10);
        cr_assert_eq(gpool_free_async(pool, q, S[2]), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0, "reused before the recorded stream's work was done");
    finish();
}

/* A host block recorded on a stream that was released and destroyed since, its work done,
 * then freed on a held stream: streams.md, gpool_record_stream: the free "waits for the work
 * queued on that stream too, behind events of its own" -- a stream-ordered free does not
 * block the caller until the held freeing stream's work is done. */
Test(api_adv, host_free_recorded_on_released_stream_does_not_block)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[0]);
    kernel(S[0], p, 256 << 10);
    cr_assert_eq(gpool_record_stream(pool, p, S[1]), GPOOL_OK, "%s", gpool_last_error());
    order_after(S[1], S[0]);
    kernel(S[1], p, 256 << 10);
    order_after(S[0], S[1]);
    cr_assert_eq(gpool_stream_release(pool, S[1]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(stream_destroy(S[1]), CUDA_SUCCESS);
    S[1] = NULL;
    sim->stream_hold(S[0]);
    kernel(S[0], p, 256 << 10);
    unsigned long syncs = sim->forced_syncs();
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim->forced_syncs(), syncs,
                 "the free waited for the held freeing stream (a synchronize)");
    cr_assert_eq(destroyed_calls(), 0);
    finish();
}

/* The same for the stream the block was allocated on: allocated on a stream that is released
 * and destroyed while the block lives, recorded on another stream, freed on a held stream. */
Test(api_adv, host_free_of_block_from_released_stream_does_not_block)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_HOST_PINNED, 256 << 10, 0, S[1]);
    kernel(S[1], p, 256 << 10);
    order_after(S[0], S[1]);
    order_after(S[2], S[1]);
    cr_assert_eq(gpool_stream_release(pool, S[1]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(stream_destroy(S[1]), CUDA_SUCCESS);
    S[1] = NULL;
    cr_assert_eq(gpool_record_stream(pool, p, S[2]), GPOOL_OK, "%s", gpool_last_error());
    kernel(S[2], p, 256 << 10);
    order_after(S[0], S[2]);
    sim->stream_hold(S[0]);
    kernel(S[0], p, 256 << 10);
    unsigned long syncs = sim->forced_syncs();
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim->forced_syncs(), syncs,
                 "the free waited for the held freeing stream (a synchronize)");
    cr_assert_eq(destroyed_calls(), 0);
    finish();
}

/* ---------- thread caches, budgets, exact stats ---------- */

/* budgets.md: blocks parked in thread caches count against the budget, and a cache "gives its
 * blocks back before a request is refused"; stats.md: they count as freed, not in use. */
Test(api_adv, tcache_blocks_yield_to_the_device_budget)
{
    pool = make_pool("budget_device=256K");
    void *p[32];
    for (int i = 0; i < 32; i++)
        cr_assert_eq(gpool_alloc(pool, 4096, NULL, &p[i]), GPOOL_OK, "%d: %s", i,
                     gpool_last_error());
    for (int i = 0; i < 32; i++)
        cr_assert_eq(gpool_free(pool, p[i]), GPOOL_OK);
    gpool_stats st = stats();
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].in_use_bytes, 0, "in_use %llu",
                 (unsigned long long)st.kind[GPOOL_MEM_DEVICE].in_use_bytes);
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].live_blocks, 0);
    gpool_stats walk = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_calculate_stats(pool, &walk), GPOOL_OK);
    kinds_equal(&st, &walk, "after frees into the thread cache");
    void *big = alloc_kind(GPOOL_MEM_DEVICE, 256 << 10, 0, S[1]);
    cr_assert_eq(gpool_free_async(pool, big, S[1]), GPOOL_OK);
    finish();
}

/* gpool_calculate_stats equals gpool_get_stats after a mixed sequence (no other thread). */
Test(api_adv, calculate_stats_equals_get_stats_mixed)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[2]);
    void *keep[16];
    int n = 0;
    for (int i = 0; i < 48; i++) {
        gpool_mem_kind kind = (gpool_mem_kind)(1 + i % 3);
        size_t size = (size_t)100 + ((size_t)i * 7919) % (3 << 20);
        CUstream s = S[i % 3];
        void *p = alloc_kind(kind, size, i % 5 == 0 ? GPOOL_ALLOC_ZERO : 0, s);
        if (i % 7 == 3) cr_assert_eq(gpool_record_stream(pool, p, S[(i + 1) % 3]), GPOOL_OK);
        if (i % 3 == 1 && n < 16)
            keep[n++] = p;
        else
            cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK, "%s", gpool_last_error());
        if (i % 16 == 15) {
            gpool_stats a = stats(), b = GPOOL_STATS_INIT;
            cr_assert_eq(gpool_calculate_stats(pool, &b), GPOOL_OK);
            kinds_equal(&a, &b, "mixed");
        }
    }
    gpool_stats a = stats();
    cr_assert_eq(a.kind[GPOOL_MEM_AUTO].live_blocks, (uint64_t)n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free_async(pool, keep[i], S[0]), GPOOL_OK);
    a = stats();
    cr_assert_eq(a.kind[GPOOL_MEM_AUTO].live_blocks, 0);
    cr_assert_eq(a.kind[GPOOL_MEM_AUTO].in_use_bytes, 0);
    cr_assert_eq(a.kind[GPOOL_MEM_AUTO].requested_bytes, 0);
    finish();
}

/* ---------- graph capture ---------- */

/* streams.md, "Graph capture": "Host kinds on a capturing stream always fail" with
 * GPOOL_ERR_UNSUPPORTED, "and the capture stays valid" -- a device request that falls back to
 * mapped memory included. */
Test(api_adv, capture_fallback_to_mapped_is_unsupported)
{
    CUresult (*begin)(CUstream, CUstreamCaptureMode) = sim_driver_proc("cuStreamBeginCapture");
    CUresult (*end)(CUstream, CUgraph *) = sim_driver_proc("cuStreamEndCapture");
    CUresult (*graph_destroy)(CUgraph) = sim_driver_proc("cuGraphDestroy");
    if (!begin || !end || !graph_destroy) cr_skip_test("the simulator has no stream capture");
    pool = make_pool("budget_device=2M");
    cr_assert_eq(begin(S[0], CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    void *p = (void *)1;
    gpool_status st = gpool_alloc_async(pool, 4 << 20, &prm, S[0], &p);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", gpool_last_error());
    prm.flags = 0;
    prm.usage = GPOOL_USAGE_STAGING;
    void *q = (void *)1;
    gpool_status st2 = gpool_alloc_async(pool, 4096, &prm, S[0], &q);
    CUgraph g = NULL;
    CUresult e = end(S[0], &g);
    if (g) graph_destroy(g);
    cr_assert_eq(st2, GPOOL_ERR_UNSUPPORTED, "pinned on a capturing stream: %d", (int)st2);
    cr_assert_null(q);
    cr_assert_neq(st, GPOOL_OK, "a mapped block was made on a capturing stream: %p", p);
    cr_assert_null(p);
    cr_assert_eq(e, CUDA_SUCCESS, "the capture was invalidated (%d); the request said: %s", (int)e,
                 msg);
    finish();
}

/* stats.md: ooms counts "allocations that failed with GPOOL_ERR_OUT_OF_MEMORY (once per
 * request, whatever retries and moves it made)"; fallbacks only requests placed elsewhere. */
Test(api_adv, failed_moves_count_one_oom_each)
{
    pool = make_pool("budget_device=1M,budget_pinned=1M,budget_mapped=2M");
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    void *p = (void *)1;
    /* a move that succeeds is no OOM */
    cr_assert_eq(gpool_alloc_async(pool, 3 << 20, &prm, S[0], &p), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_eq(gpool_alloc_async(pool, 3 << 19, &prm, S[0], &p), GPOOL_OK, "%s",
                 gpool_last_error());
    gpool_stats st0 = stats();
    cr_assert_eq(st0.fallbacks, 1);
    cr_assert_eq(st0.ooms, 1, "one failed request, one moved: ooms %llu",
                 (unsigned long long)st0.ooms);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK);
    p = (void *)1;
    cr_assert_eq(gpool_alloc_async(pool, 4 << 20, &prm, S[0], &p), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    gpool_stats st = stats();
    cr_assert_eq(st.ooms, 2, "device then mapped: ooms %llu", (unsigned long long)st.ooms);
    prm.flags = 0;
    prm.usage = GPOOL_USAGE_STAGING;
    cr_assert_eq(gpool_alloc_async(pool, 3 << 20, &prm, S[0], &p), GPOOL_ERR_OUT_OF_MEMORY);
    st = stats();
    cr_assert_eq(st.ooms, 3, "pinned then mapped: ooms %llu", (unsigned long long)st.ooms);
    prm.usage = GPOOL_USAGE_DEFAULT;
    prm.kind = GPOOL_MEM_HOST_MAPPED;
    cr_assert_eq(gpool_alloc_async(pool, 3 << 20, &prm, S[0], &p), GPOOL_ERR_OUT_OF_MEMORY);
    prm.kind = GPOOL_MEM_DEVICE;
    cr_assert_eq(gpool_alloc_async(pool, 4 << 20, &prm, S[0], &p), GPOOL_ERR_OUT_OF_MEMORY);
    st = stats();
    cr_assert_eq(st.ooms, 5, "ooms %llu", (unsigned long long)st.ooms);
    cr_assert_eq(st.fallbacks, 1);
    finish();
}

/* gpool_page_size: "The physical page (chunk) size gpool would back a block of this size
 * with; gpool_alloc() accepts it as params->page_size". Each kind, small to large. */
Test(api_adv, page_size_is_what_backs_the_block)
{
    pool = make_pool(NULL);
    static const size_t sizes[] = {1000, 20000, 100 << 10, 1 << 20, 3 << 20, 9 << 20};
    for (int k = GPOOL_MEM_DEVICE; k < GPOOL_MEM_KIND_COUNT; k++) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t pg = 0;
            cr_assert_eq(gpool_page_size(pool, (gpool_mem_kind)k, sizes[i], &pg), GPOOL_OK);
            void *p = alloc_kind((gpool_mem_kind)k, sizes[i], 0, S[1]);
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
            cr_assert_eq(d.page_size, pg,
                         "kind %d size %zu: gpool_page_size %zu, block backed by %zu", k, sizes[i],
                         pg, d.page_size);
            cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK);
            gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
            prm.kind = (gpool_mem_kind)k;
            prm.page_size = pg;
            void *q = NULL;
            cr_assert_eq(gpool_alloc_async(pool, sizes[i], &prm, S[1], &q), GPOOL_OK,
                         "kind %d size %zu page %zu: %s", k, sizes[i], pg, gpool_last_error());
            cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
        }
    }
    finish();
}

/* gpool_mem_get_info: free = the driver's free memory plus this pool's cached device bytes
 * (pending frees are cached: stats.md). */
Test(api_adv, mem_get_info_counts_pending_frees_as_cached)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    void *p = alloc_kind(GPOOL_MEM_DEVICE, 8 << 20, 0, S[0]);
    kernel(S[0], p, 8 << 20);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK);
    size_t fr = 0, tot = 0, dfree = 0, dtot = 0;
    cr_assert_eq(gpool_mem_get_info(pool, &fr, &tot), GPOOL_OK);
    CUresult (*info)(size_t *, size_t *) = sim_driver_proc("cuMemGetInfo");
    cr_assert_eq(info(&dfree, &dtot), CUDA_SUCCESS);
    gpool_stats st = stats();
    cr_assert_eq(tot, dtot);
    cr_assert_eq(fr, dfree + st.kind[GPOOL_MEM_DEVICE].cached_bytes,
                 "free %zu, driver %zu + cached %llu", fr, dfree,
                 (unsigned long long)st.kind[GPOOL_MEM_DEVICE].cached_bytes);
    cr_assert_geq(st.kind[GPOOL_MEM_DEVICE].cached_bytes, 8 << 20);
    finish();
}

/* gpool_destroy: "Blocks still live are freed too and reported (count and bytes in the
 * message)"; frees pending on a held stream are no live blocks. */
Test(api_adv, destroy_reports_live_blocks_of_every_kind)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    uint64_t bytes = 0;
    static const struct {
        gpool_mem_kind kind;
        size_t size;
    } b[] = {{GPOOL_MEM_DEVICE, 3 << 20},
             {GPOOL_MEM_DEVICE, 5000},
             {GPOOL_MEM_HOST_PINNED, 300 << 10},
             {GPOOL_MEM_HOST_MAPPED, 7000}};
    for (int i = 0; i < 4; i++) {
        void *p = alloc_kind(b[i].kind, b[i].size, 0, S[1]);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
        bytes += d.size;
        void *q = alloc_kind(b[i].kind, b[i].size, 0, S[0]);
        kernel(S[0], q, b[i].size);
        cr_assert_eq(gpool_free_async(pool, q, S[0]), GPOOL_OK);
    }
    release_all();
    gpool_status st = gpool_destroy(pool);
    pool = NULL;
    cr_assert_eq(st, GPOOL_ERR_LIVE_BLOCKS, "%s", gpool_last_error());
    char want[64];
    snprintf(want, sizeof want, "4 live blocks (%llu bytes)", (unsigned long long)bytes);
    cr_assert(strstr(gpool_last_error(), want), "want \"%s\" in: %s", want, gpool_last_error());
    struct gpoolsim_live l;
    sim->get_live(&l);
    cr_assert_eq(l.events + l.host_registrations + l.host_allocs + l.mappings, 0);
    cr_assert_eq(violations(), 0);
}

/* gpool_record_stream: "Recording the block's own stream, or a stream twice, changes
 * nothing"; "up to 8 streams besides the one it was allocated on" (the 9th:
 * GPOOL_ERR_INVALID_ARG); the free then waits for all of them. */
static void record_eight(gpool_mem_kind kind, size_t size)
{
    enum { R = 9 };
    CUstream r[R];
    pool = make_pool(NULL);
    for (int i = 0; i < R; i++)
        cr_assert_eq(stream_create(&r[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    void *p = alloc_kind(kind, size, 0, S[0]);
    kernel(S[0], p, size);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(gpool_record_stream(pool, p, r[i]), GPOOL_OK, "%d: %s", i, gpool_last_error());
        cr_assert_eq(gpool_record_stream(pool, p, r[i]), GPOOL_OK, "%d again", i);
        cr_assert_eq(gpool_record_stream(pool, p, S[0]), GPOOL_OK, "its own stream");
    }
    cr_assert_eq(gpool_record_stream(pool, p, r[8]), GPOOL_ERR_INVALID_ARG, "a 9th stream");
    sim->stream_hold(r[7]);
    order_after(r[7], S[0]);
    kernel(r[7], p, size);
    cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 40; i++) {
        void *q = alloc_kind(kind, size, 0, S[2]);
        kernel(S[2], q, size);
        cr_assert_eq(gpool_free_async(pool, q, S[2]), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0, "reused before the 8th recorded stream's work was done");
    sim->stream_release(r[7]);
    finish();
    for (int i = 0; i < R; i++)
        stream_destroy(r[i]);
}

Test(api_adv, pinned_recorded_on_eight_streams)
{
    record_eight(GPOOL_MEM_HOST_PINNED, 128 << 10);
}
Test(api_adv, device_recorded_on_eight_streams)
{
    record_eight(GPOOL_MEM_DEVICE, 128 << 10);
}

/* ---------- the per-thread default stream ---------- */

/* streams.md: a block freed on CU_STREAM_PER_THREAD by one thread is reused "by other threads
 * once its work completed"; host blocks on any stream only then. The freeing thread's
 * per-thread stream is held and its kernel still queued when the thread exits. */
static void *ptds_thread(void *arg)
{
    CUresult (*ctx_set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    gpool_mem_kind kind = *(gpool_mem_kind *)arg;
    if (ctx_set(ctx) != CUDA_SUCCESS) return "cuCtxSetCurrent";
    sim->stream_hold(CU_STREAM_PER_THREAD);
    for (int i = 0; i < 8; i++) {
        gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
        prm.kind = kind;
        void *p = NULL;
        if (gpool_alloc_async(pool, 64 << 10, &prm, CU_STREAM_PER_THREAD, &p) != GPOOL_OK)
            return "alloc";
        if (sim->touch(CU_STREAM_PER_THREAD, (CUdeviceptr)(uintptr_t)p, 64 << 10, 1) !=
            CUDA_SUCCESS)
            return "touch";
        if (gpool_free_async(pool, p, CU_STREAM_PER_THREAD) != GPOOL_OK) return "free";
    }
    return NULL;
}

static void ptds_host(gpool_mem_kind kind)
{
    pool = make_pool(NULL);
    pthread_t t;
    void *res = NULL;
    cr_assert_eq(pthread_create(&t, NULL, ptds_thread, &kind), 0);
    cr_assert_eq(pthread_join(t, &res), 0);
    cr_assert_null(res, "thread: %s failed: %s", (const char *)res, gpool_last_error());
    for (int i = 0; i < 40; i++) {
        void *q = alloc_kind(kind, 64 << 10, 0, S[1]);
        kernel(S[1], q, 64 << 10);
        cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
        q = alloc_kind(kind, 64 << 10, 0, CU_STREAM_PER_THREAD);
        kernel(CU_STREAM_PER_THREAD, q, 64 << 10);
        cr_assert_eq(gpool_free_async(pool, q, CU_STREAM_PER_THREAD), GPOOL_OK);
    }
    cr_assert_eq(violations(), 0, "another thread's per-thread stream's block reused early");
    finish();
}

Test(api_adv, pinned_freed_on_another_threads_per_thread_stream)
{
    ptds_host(GPOOL_MEM_HOST_PINNED);
}
Test(api_adv, device_freed_on_another_threads_per_thread_stream)
{
    ptds_host(GPOOL_MEM_DEVICE);
}

/* placement.md, "Giving memory back": "If the synchronize fails nothing mapped is unmapped
 * (queued work may still use any cached page)". Blocks of every kind freed on a held stream
 * whose kernel still runs; every synchronize of the trim fails. */
Test(api_adv, trim_with_failed_synchronize_unmaps_nothing_in_use)
{
    pool = make_pool(NULL);
    sim->stream_hold(S[0]);
    static const struct {
        gpool_mem_kind kind;
        size_t size;
    } b[] = {{GPOOL_MEM_DEVICE, 3 << 20},        {GPOOL_MEM_DEVICE, 5000},
             {GPOOL_MEM_HOST_PINNED, 300 << 10}, {GPOOL_MEM_HOST_PINNED, 3000},
             {GPOOL_MEM_HOST_MAPPED, 3 << 20},   {GPOOL_MEM_HOST_MAPPED, 7000}};
    for (int i = 0; i < 6; i++) {
        void *p = alloc_kind(b[i].kind, b[i].size, 0, S[0]);
        kernel(S[0], p, b[i].size);
        cr_assert_eq(gpool_free_async(pool, p, S[0]), GPOOL_OK);
    }
    for (unsigned long n = 1; n <= 8; n++) {
        sim->fail_nth("cuCtxSynchronize", n);
        sim->fail_nth("cuStreamSynchronize", n);
        sim->fail_nth("cuEventSynchronize", n);
    }
    gpool_status st = gpool_trim(pool, 0);
    sim->fail_clear();
    cr_assert_eq(st, GPOOL_ERR_DRIVER, "trim: %d %s", (int)st, gpool_last_error());
    cr_assert_eq(violations(), 0, "memory a held kernel uses was unmapped or unregistered");
    finish();
}

/* gpool_trim(keep): "until at most keep_bytes stay cached" -- and gpool_stats.reserved_bytes is
 * the "physical memory held from the driver": what trim keeps is still reported. */
Test(api_adv, trim_keep_is_reported_as_reserved)
{
    pool = make_pool(NULL);
    void *p = alloc_kind(GPOOL_MEM_DEVICE, 16 << 20, 0, S[1]);
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK);
    cr_assert_eq(gpool_trim(pool, 8 << 20), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats st = stats();
    size_t held = sim->bytes_in_use(0);
    cr_assert_eq(st.kind[GPOOL_MEM_DEVICE].reserved_bytes, held,
                 "reserved_bytes %llu, the driver holds %zu bytes for the pool",
                 (unsigned long long)st.kind[GPOOL_MEM_DEVICE].reserved_bytes, held);
    cr_assert_leq(st.kind[GPOOL_MEM_DEVICE].cached_bytes, 8 << 20);
    finish();
}

/* gpool_config.release_threshold: "give back what the pool caches beyond this many bytes after
 * a large free" (placement.md: "if the pool caches more than this many bytes of physical memory
 * beyond what live blocks use, it gives the excess back"). */
static void release_threshold(gpool_mem_kind kind)
{
    pool = make_pool("release_threshold=1M");
    void *p = alloc_kind(kind, 8 << 20, 0, S[1]);
    cr_assert_eq(gpool_free_async(pool, p, S[1]), GPOOL_OK);
    /* a host free settles once its stream's work is known done: 8 MiB waiting, the next
     * request asks (streams.md, "Frees") */
    void *q = alloc_kind(kind, 64 << 10, 0, S[1]);
    gpool_stats st = stats();
    /* beyond the threshold: at most the rest of the page the live block is on */
    size_t pg = 0;
    cr_assert_eq(gpool_page_size(pool, kind, 64 << 10, &pg), GPOOL_OK);
    cr_assert_leq(st.kind[kind].cached_bytes, (1 << 20) + pg, "kind %d caches %llu bytes",
                  (int)kind, (unsigned long long)st.kind[kind].cached_bytes);
    cr_assert_eq(gpool_free_async(pool, q, S[1]), GPOOL_OK);
    finish();
}

Test(api_adv, release_threshold_device)
{
    release_threshold(GPOOL_MEM_DEVICE);
}
Test(api_adv, release_threshold_pinned)
{
    release_threshold(GPOOL_MEM_HOST_PINNED);
}
Test(api_adv, release_threshold_mapped)
{
    release_threshold(GPOOL_MEM_HOST_MAPPED);
}

/* streams.md, "Frees": a host block's free "makes no driver call"; a block of a released
 * stream (its free marks the release's event) included. */
Test(api_adv, host_free_makes_no_driver_call)
{
    pool = make_pool(NULL);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_kind(i % 2 ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED,
                          i < 2 ? 3000 : 3 << 20, 0, S[i % 2]);
    cr_assert_eq(gpool_stream_release(pool, S[1]), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 4; i++) {
        unsigned long before = sim->call_total();
        cr_assert_eq(gpool_free_async(pool, p[i], S[2]), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(sim->call_total(), before, "block %d: the free made %lu driver calls", i,
                     sim->call_total() - before);
    }
    finish();
}

/* Huge host requests: a status with a message (128 TiB and up: INVALID_ARG; below it the
 * memory is not there: OUT_OF_MEMORY), *out NULL, the pool usable, nothing left behind. */
Test(api_adv, huge_host_requests_fail_cleanly)
{
    pool = make_pool(NULL);
    static const size_t sizes[] = {(size_t)1 << 47, ((size_t)1 << 47) - 4096, (size_t)1 << 44,
                                   (size_t)1 << 40, SIZE_MAX};
    for (int k = GPOOL_MEM_HOST_PINNED; k <= GPOOL_MEM_HOST_MAPPED; k++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
            prm.kind = (gpool_mem_kind)k;
            void *p = (void *)1;
            gpool_status st = gpool_alloc_async(pool, sizes[i], &prm, S[0], &p);
            cr_assert(st == GPOOL_ERR_INVALID_ARG || st == GPOOL_ERR_OUT_OF_MEMORY,
                      "kind %d size %zu: %d %s", k, sizes[i], (int)st, gpool_last_error());
            cr_assert(gpool_last_error()[0], "no message");
            cr_assert_null(p);
        }
    gpool_stats st = stats();
    cr_assert_eq(st.kind[GPOOL_MEM_AUTO].live_blocks, 0);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_PINNED].in_use_bytes, 0);
    cr_assert_eq(st.kind[GPOOL_MEM_HOST_MAPPED].in_use_bytes, 0);
    void *q = alloc_kind(GPOOL_MEM_HOST_PINNED, 1 << 20, 0, S[0]);
    cr_assert_eq(gpool_free_async(pool, q, S[0]), GPOOL_OK);
    finish();
}
