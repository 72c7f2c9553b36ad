/* gpool_stream_release: a stream the program destroys with frees still pending on it, through
 * the C API, refereed by the simulator (GPOOL_SIM_STRICT=1 in make test: the first ordering
 * violation aborts). The stream's work is held (gpoolsim_stream_hold) so that it is still
 * queued when the stream is destroyed, as cuStreamDestroy allows. Needs the simulator. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;
static gpool_t *pool;
static CUresult (*mk)(CUstream *, unsigned);
static CUresult (*destroy)(CUstream);
static CUresult (*ctx_sync)(void);
static unsigned long (*destroyed_calls)(void);

static void setup(void)
{
    NEED_SIM();
    /* read by the simulator at its first stream creation: a new stream may get the handle
     * value of a destroyed one, as a real driver's may */
    setenv("GPOOL_SIM_REUSE_STREAM_HANDLES", "1", 1);
    sim = sim_api();
    cr_assert_not_null(sim);
    pool = test_pool(NULL);
    cr_assert_not_null(pool, "%s", gpool_last_error());
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    mk = sim_driver_proc("cuStreamCreate");
    destroy = sim_driver_proc("cuStreamDestroy");
    *(void **)&ctx_sync = dlsym(sim->lib, "cuCtxSynchronize"); /* the 2000 ABI: no argument */
    *(void **)&destroyed_calls = dlsym(sim->lib, "gpoolsim_destroyed_stream_calls");
    cr_assert(retain && set && mk && destroy && ctx_sync && destroyed_calls);
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    release(0);
    teardown_expect(sim_live_total() == 0, "events, mappings and handles all returned");
    teardown_end();
}

TestSuite(streams_release, .init = setup, .fini = teardown);

static void *alloc_on(size_t size, CUstream s)
{
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, NULL, s, &p), GPOOL_OK, "%s", gpool_last_error());
    return p;
}

static int overlaps(void *a, size_t na, void *b, size_t nb)
{
    return (char *)a < (char *)b + nb && (char *)b < (char *)a + na;
}

/* The stream's work is still queued when it is destroyed; a new stream that gets its handle
 * value must not get the memory until that work completes (strict referee: a kernel on it
 * would race), and gets it back after. multi: the pool saw another stream before (marks), else
 * the stream was its only one (single-stream mode: its frees were clean at once). */
static void destroyed_with_work_queued(int multi, int events)
{
    const size_t sz = 4 * MiB;
    if (events) { /* no waits added by gpool: the old memory is out of reach until done */
        cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
        pool = test_pool("stream_reuse=events");
        cr_assert_not_null(pool);
    }
    if (multi) cr_assert_eq(gpool_free(pool, alloc_on(sz, NULL)), GPOOL_OK);
    CUstream s, s2;
    cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    void *p = alloc_on(sz, s);
    cr_assert_eq(sim_kernel(s, p, sz), CUDA_SUCCESS);
    sim->stream_hold(s); /* the kernel stays queued */
    cr_assert_eq(sim_kernel(s, p, sz), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK);
    cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(s), CUDA_SUCCESS);
    cr_assert_eq(mk(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(s2, s, "the simulator reuses the handle value");
    /* it may get p only by waiting for the old work (stream_reuse=wait: cuStreamWaitEvent on
     * the release's event); the kernel is a race, and aborts, otherwise */
    void *q = alloc_on(sz, s2);
    if (events)
        cr_assert(!overlaps(p, sz, q, sz), "the new stream with the old handle got the old "
                                           "one's memory while its work was still queued");
    cr_assert_eq(sim_kernel(s2, q, sz), CUDA_SUCCESS);
    cr_assert_eq(sim->violations(), 0);
    cr_assert_eq(destroyed_calls(), 0, "a call named the destroyed stream");
    /* once the old work completed, its memory is the shared pool's again */
    cr_assert_eq(ctx_sync(), CUDA_SUCCESS);
    size_t held = sim->bytes_in_use(0);
    void *r = alloc_on(sz, s2);
    cr_assert_eq(sim->bytes_in_use(0), held, "the released memory was reused, not mapped anew");
    cr_assert_eq(sim_kernel(s2, r, sz), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, q, s2), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, r, s2), GPOOL_OK);
    cr_assert_eq(gpool_stream_release(pool, s2), GPOOL_OK);
    cr_assert_eq(destroy(s2), CUDA_SUCCESS);
    cr_assert_eq(ctx_sync(), CUDA_SUCCESS);
    cr_assert_eq(destroyed_calls(), 0);
}

Test(streams_release, reused_handle_gets_nothing_of_the_destroyed_stream_single_stream)
{
    destroyed_with_work_queued(0, 0);
}

Test(streams_release, reused_handle_gets_nothing_of_the_destroyed_stream_multi_stream)
{
    destroyed_with_work_queued(1, 0);
}

Test(streams_release, reused_handle_gets_nothing_of_the_destroyed_stream_events_rule)
{
    destroyed_with_work_queued(0, 1);
    destroyed_with_work_queued(1, 1);
}

/* Another stream (a new handle value, the destroyed one's work still queued) needs memory the
 * released stream freed: gpool waits through the event recorded at the release, never naming
 * the destroyed stream. */
Test(streams_release, other_streams_reuse_through_the_release_event)
{
    const size_t sz = 4 * MiB;
    CUstream s, keep, t;
    cr_assert_eq(mk(&keep, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS); /* s's value is not reused */
    cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(gpool_free(pool, alloc_on(sz, NULL)), GPOOL_OK); /* multi-stream */
    void *p = alloc_on(sz, s);
    sim->stream_hold(s);
    cr_assert_eq(sim_kernel(s, p, sz), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK);
    cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(s), CUDA_SUCCESS);
    cr_assert_eq(destroy(keep), CUDA_SUCCESS);
    /* t may get s's value now: what matters is that nothing names the destroyed stream */
    cr_assert_eq(mk(&t, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    sim->set_capacity(0, sim->bytes_in_use(0)); /* no fresh pages: t must reuse or wait */
    void *q = NULL;
    gpool_status st = gpool_alloc_async(pool, sz, NULL, t, &q);
    cr_assert_eq(st, GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim_kernel(t, q, sz), CUDA_SUCCESS); /* ordered after s's work, or a violation */
    cr_assert_eq(sim->violations(), 0);
    cr_assert_eq(destroyed_calls(), 0, "a call named the destroyed stream");
    cr_assert_eq(gpool_free_async(pool, q, t), GPOOL_OK);
    cr_assert_eq(gpool_stream_release(pool, t), GPOOL_OK);
    cr_assert_eq(destroy(t), CUDA_SUCCESS);
    cr_assert_eq(ctx_sync(), CUDA_SUCCESS);
    sim->set_capacity(0, (size_t)8 << 30);
}

/* A block allocated on a stream, still live when the stream is released and destroyed, then
 * freed on another stream (cudaFree of a cudaMallocAsync block, say): its free waits for the
 * allocating stream's work through the release's event, never naming the destroyed stream. */
Test(streams_release, block_outliving_its_stream_is_freed_without_naming_it)
{
    const size_t sz = 4 * MiB;
    CUstream s, t;
    cr_assert_eq(mk(&t, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    void *p = alloc_on(sz, s), *keep = alloc_on(sz, s);
    cr_assert_eq(gpool_free_async(pool, keep, s), GPOOL_OK); /* s has a record */
    sim->stream_hold(s);
    cr_assert_eq(sim_kernel(s, p, sz), CUDA_SUCCESS);
    cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(destroy(s), CUDA_SUCCESS);
    void *u = alloc_on(sz, t);
    cr_assert_eq(sim_kernel(t, u, sz), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, t), GPOOL_OK, "%s", gpool_last_error());
    void *q = alloc_on(sz, t);
    cr_assert_eq(sim_kernel(t, q, sz), CUDA_SUCCESS); /* a race with s's kernel aborts */
    cr_assert_eq(gpool_free_async(pool, q, t), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, u, t), GPOOL_OK);
    cr_assert_eq(destroyed_calls(), 0, "a call named the destroyed stream");
    cr_assert_eq(sim->violations(), 0);
    cr_assert_eq(ctx_sync(), CUDA_SUCCESS);
    cr_assert_eq(gpool_stream_release(pool, t), GPOOL_OK);
    cr_assert_eq(destroy(t), CUDA_SUCCESS);
}

/* No event can be recorded on the stream (injected cuEventRecord failures): the release waits
 * for the stream instead; that failing too, it says so (GPOOL_ERR_DRIVER) and the frees stay
 * pending until the pool synchronizes the device, never reused early, never naming the stream. */
Test(streams_release, release_falls_back_when_no_event_can_be_recorded)
{
    const size_t sz = 4 * MiB;
    for (int both = 0; both < 2; both++) {
        CUstream s, keep, t;
        cr_assert_eq(mk(&keep, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS); /* no handle reuse */
        cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        cr_assert_eq(gpool_free(pool, alloc_on(sz, NULL)), GPOOL_OK); /* multi-stream */
        void *p = alloc_on(sz, s);
        sim->stream_hold(s);
        cr_assert_eq(sim_kernel(s, p, sz), CUDA_SUCCESS);
        cr_assert_eq(gpool_free_async(pool, p, s), GPOOL_OK);
        cr_assert_eq(sim->fail_nth("cuEventRecord", 1), 0);
        if (both) cr_assert_eq(sim->fail_nth("cuStreamSynchronize", 1), 0);
        gpool_status st = gpool_stream_release(pool, s);
        sim->fail_clear();
        cr_assert_eq(st, both ? GPOOL_ERR_DRIVER : GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(destroy(s), CUDA_SUCCESS);
        cr_assert_eq(destroy(keep), CUDA_SUCCESS);
        cr_assert_eq(mk(&t, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        void *q = alloc_on(sz, t);
        cr_assert_eq(sim_kernel(t, q, sz), CUDA_SUCCESS); /* a race aborts */
        cr_assert_eq(gpool_free_async(pool, q, t), GPOOL_OK);
        cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_stream_release(pool, t), GPOOL_OK);
        cr_assert_eq(destroy(t), CUDA_SUCCESS);
        cr_assert_eq(destroyed_calls(), 0, "a call named the destroyed stream");
        cr_assert_eq(sim->violations(), 0);
    }
}

/* 2,000 create/use/release/destroy cycles: reserved bytes, events and streams held stay flat. */
Test(streams_release, resources_stay_flat_over_cycles, .timeout = 120)
{
    static const size_t sizes[3] = {1 * MiB, 3 * MiB, 64 << 10};
    size_t reserved_200 = 0;
    struct gpoolsim_live live_200 = {0}, live;
    for (int c = 1; c <= 2000; c++) {
        CUstream s;
        cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        void *p[3];
        for (int i = 0; i < 3; i++) {
            p[i] = alloc_on(sizes[i], s);
            cr_assert_eq(sim_kernel(s, p[i], sizes[i]), CUDA_SUCCESS);
        }
        for (int i = 0; i < 3; i++)
            cr_assert_eq(gpool_free_async(pool, p[i], s), GPOOL_OK);
        cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(destroy(s), CUDA_SUCCESS);
        if (c == 200) {
            reserved_200 = sim->bytes_in_use(0);
            sim->get_live(&live_200);
        }
    }
    sim->get_live(&live);
    cr_assert_leq(sim->bytes_in_use(0), reserved_200);
    cr_assert_leq(live.events, live_200.events);
    cr_assert_eq(live.streams, 0);
    cr_assert_eq(destroyed_calls(), 0);
    cr_assert_eq(sim->violations(), 0);
}

Test(streams_release, streams_that_are_never_destroyed_are_refused)
{
    cr_assert_eq(gpool_stream_release(NULL, (gpool_stream_t)0x5100), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_stream_release(pool, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_stream_release(pool, CU_STREAM_LEGACY), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_stream_release(pool, CU_STREAM_PER_THREAD), GPOOL_ERR_INVALID_ARG);
    /* a stream the pool never saw: fine, no driver call */
    CUstream s;
    cr_assert_eq(mk(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    unsigned long calls = sim->call_total();
    cr_assert_eq(gpool_stream_release(pool, s), GPOOL_OK);
    cr_assert_eq(sim->call_total(), calls);
    cr_assert_eq(destroy(s), CUDA_SUCCESS);
}
