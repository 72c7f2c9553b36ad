/* gpool under the real driver's stream rules (issue 12): zero fill on the block's stream, an
 * emptied slab's stream position, host blocks and their allocating stream, per-thread default
 * streams, events in their stream's context, graph capture. Each test failed before its fix.
 * All of them use the simulator's held completion (work on a held stream does not complete),
 * so on a real GPU the suite skips. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;
static CUresult (*touch)(CUstream, CUdeviceptr, size_t, int); /* gpoolsim_touch: a kernel */
static unsigned long (*violations)(void);                     /* gpoolsim_violations */
static gpool_t *pool;
static CUstream A, B;
static CUcontext ctx;

static gpool_t *make_pool(const char *conf)
{
    gpool_t *p = test_pool(conf);
    cr_assert_not_null(p);
    return p;
}

static void setup(void)
{
    NEED_SIM();
    sim = sim_api();
    cr_assert_not_null(sim);
    touch = (CUresult(*)(CUstream, CUdeviceptr, size_t, int))dlsym(sim->lib, "gpoolsim_touch");
    violations = (unsigned long (*)(void))dlsym(sim->lib, "gpoolsim_violations");
    pool = make_pool(NULL);
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(mk(&A, 0), CUDA_SUCCESS);
    cr_assert_eq(mk(&B, 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    if (!sim) return;
    teardown_begin();
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    sim->stream_release(A);
    sim->stream_release(B);
    sim->stream_release(NULL);
    sim->stream_release(CU_STREAM_PER_THREAD);
    teardown_expect(gpool_destroy(pool) == GPOOL_OK, "%s", gpool_last_error());
    destroy(A);
    destroy(B);
    release(0);
    teardown_expect(sim_live_total() == 0, "events, mappings and handles all returned");
    if (violations) teardown_expect(violations() == 0, "happens-before violations (see stderr)");
    teardown_end();
}

/* A kernel on stream s writes [p, p+n) (the simulator's happens-before checker sees it). */
static void kernel(CUstream s, void *p, size_t n)
{
    if (!touch) cr_skip_test("the simulator has no happens-before checker (gpoolsim_touch)");
    CUresult rc = sim_kernel(s, p, n);
    cr_assert_eq(rc, CUDA_SUCCESS, "gpoolsim_touch: %d", (int)rc);
}

TestSuite(stream_rules, .init = setup, .fini = teardown);

static void *alloc_kind(size_t size, gpool_mem_kind kind, CUstream s, unsigned flags)
{
    gpool_alloc_params prm = {.kind = kind, .flags = flags};
    void *p = NULL;
    cr_assert_eq(gpool_alloc_async(pool, size, &prm, s, &p), GPOOL_OK, "%s", gpool_last_error());
    return p;
}

static void *alloc_on(size_t size, CUstream s, unsigned flags)
{
    return alloc_kind(size, GPOOL_MEM_DEVICE, s, flags);
}

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    return (const char *)a < (const char *)b + nb && (const char *)b < (const char *)a + na;
}

/* ---------- zero fill ---------- */

/* cuMemsetD8 is synchronous and runs on the legacy stream ("API synchronization behavior":
 * memset to device memory is asynchronous w.r.t. the host but ordered on the NULL stream), so
 * a non-blocking stream using the block is not ordered after it: the fill must be queued on
 * the block's own stream. */
Test(stream_rules, zero_fill_runs_on_the_blocks_stream)
{
    sim->reset_counts();
    void *p = alloc_on(3 * MiB, A, GPOOL_ALLOC_ZERO);
    void *q = alloc_on(1000, B, GPOOL_ALLOC_ZERO);
    cr_assert_eq(sim->call_count("cuMemsetD8"), 0, "zero fill used the legacy stream");
    cr_assert_eq(sim->call_count("cuMemsetD8Async"), 2);
    const unsigned char *b = p;
    for (size_t i = 0; i < 3 * MiB; i += 4093)
        cr_assert_eq(b[i], 0);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
}

/* A small zero-filled block of the default stream, freed into the thread cache: the queued
 * memset still counts, so destroying the pool waits before unmapping its page (the teardown checks
 * the simulator saw no unmap racing the memset). */
Test(stream_rules, zero_fill_is_waited_for_before_its_pages_are_unmapped)
{
    gpool_alloc_params zero = {.flags = GPOOL_ALLOC_ZERO};
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 5000, &zero, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    unsigned long syncs = sim->call_count("cuCtxSynchronize");
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_gt(sim->call_count("cuCtxSynchronize"), syncs, "unmapped without waiting");
    pool = make_pool(NULL); /* for the teardown */
}

/* ---------- emptied slabs ---------- */

/* A slab whose last block was freed while the slab's stream still has work queued goes back
 * to the free space pending on that stream at the position of that free; an event the pool
 * recorded on the stream before those frees must not make it look finished. Under
 * stream_reuse=events, where B never waits for the default stream, so B must not get it at all
 * (under wait, B may take it after waiting on an event recorded after those frees: the claim
 * tests below). */
Test(stream_rules, emptied_slab_keeps_the_stream_position_of_its_last_free)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    pool = make_pool("tcache_bytes=0,va_reserve=64M,stream_reuse=events");
    enum { N = 12 };
    const size_t small = 16 * 1024, slab = 64 * 1024; /* four to a slab: three slabs */
    void *s[N];
    for (int i = 0; i < N; i++)
        s[i] = alloc_on(small, NULL, 0); /* slabs at the top of the first 64 MiB region */
    void *filler = alloc_on(64 * MiB - 3 * slab, NULL, 0); /* the rest of that region */
    void *b0 = alloc_on(MiB, B, 0); /* a second stream: per-stream tags from now on */
    /* an event on the default stream, recorded while it is held, then left to complete */
    sim->stream_hold(NULL);
    cr_assert_eq(gpool_free_async(pool, filler, NULL), GPOOL_OK);
    void *b1 = alloc_on(2 * MiB, B, 0); /* B needs fresh pages: the pool polls NULL */
    sim->stream_release(NULL);
    sim->stream_hold(NULL);
    /* queued work on the default stream uses the small blocks, which are freed: the first
     * slab emptied stays as the spare, the other two go back to the free space */
    for (int i = 0; i < N; i++)
        cr_assert_eq(gpool_free_async(pool, s[i], NULL), GPOOL_OK);
    /* only the whole first region (less the spare slab) fits this */
    unsigned long forced = sim->forced_syncs();
    void *big = alloc_on(64 * MiB - slab, B, 0);
    for (int i = 0; i < N; i++)
        cr_assert(!overlaps(big, 64 * MiB - slab, s[i], small),
                  "stream B got slab memory the default stream's held work may use");
    cr_assert_eq(sim->forced_syncs(), forced);
    cr_assert_eq(gpool_free_async(pool, big, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, b0, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, b1, B), GPOOL_OK);
}

/* ---------- host blocks ---------- */

/* A host block allocated on A and freed on the default stream (gpool_free) while A's copies
 * may still read it: not reused until A is done too. */
static void host_free_waits_for_allocating_stream(gpool_mem_kind kind)
{
    void *p = alloc_kind(3 * MiB, kind, A, 0);
    sim->stream_hold(A);
    if (touch) kernel(A, p, 3 * MiB);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    for (int i = 0; i < 3; i++) {
        void *q = alloc_kind(3 * MiB, kind, B, 0);
        cr_assert(!overlaps(p, 3 * MiB, q, 3 * MiB),
                  "host block reused while its allocating stream's work may use it");
        cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    }
    sim->stream_release(A);
}

Test(stream_rules, pinned_block_freed_elsewhere_waits_for_its_allocating_stream)
{
    host_free_waits_for_allocating_stream(GPOOL_MEM_HOST_PINNED);
}

Test(stream_rules, mapped_block_freed_elsewhere_waits_for_its_allocating_stream)
{
    host_free_waits_for_allocating_stream(GPOOL_MEM_HOST_MAPPED);
}

/* gpool_record_stream on a host block, then a free on the recorded stream: the allocating
 * stream's work is waited for as well. */
Test(stream_rules, recorded_host_block_waits_for_every_stream)
{
    void *p = alloc_kind(3 * MiB, GPOOL_MEM_HOST_PINNED, A, 0);
    cr_assert_eq(gpool_record_stream(pool, p, B), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, B), GPOOL_OK);
    void *q = alloc_kind(3 * MiB, GPOOL_MEM_HOST_PINNED, B, 0);
    cr_assert(!overlaps(p, 3 * MiB, q, 3 * MiB), "reused while A's work may use it");
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    sim->stream_release(A);
    /* and a block recorded on a held stream, freed on its allocating stream */
    void *r = alloc_kind(3 * MiB, GPOOL_MEM_HOST_MAPPED, A, 0);
    cr_assert_eq(gpool_record_stream(pool, r, B), GPOOL_OK, "%s", gpool_last_error());
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, r, A), GPOOL_OK);
    void *t = alloc_kind(3 * MiB, GPOOL_MEM_HOST_MAPPED, A, 0);
    cr_assert(!overlaps(r, 3 * MiB, t, 3 * MiB), "reused while B's work may use it");
    cr_assert_eq(gpool_free_async(pool, t, A), GPOOL_OK);
    sim->stream_release(B);
}

/* ---------- per-thread default streams ---------- */

/* CU_STREAM_PER_THREAD names a different stream on each thread ("Stream synchronization
 * behavior": the per-thread default stream is local to both the thread and the context), so a
 * block thread A freed on it is not thread B's to reuse while A's work on it may be pending. */
struct ptds_job {
    size_t size;
    void *freed; /* A: the block it freed */
    void *got;   /* B: what it got */
};

static void *ptds_thread_b(void *arg)
{
    struct ptds_job *j = arg;
    /* a thread that launches kernels has a current context (gpool need not make it current:
     * an allocation served from mapped memory makes no driver call) */
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    j->got = alloc_on(j->size, CU_STREAM_PER_THREAD, 0);
    if (touch) kernel(CU_STREAM_PER_THREAD, j->got, j->size); /* B's kernel uses its block */
    return NULL;
}

static void run_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fn, arg), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
}

/* Thread A is the test's thread, B a new thread each time. check_back: once A's work
 * completed and A made another call, B gets the block back without a forced synchronize (for
 * blocks that need fresh pages; small ones fit backed free space and need no poll). */
static void ptds_case(size_t size, int check_back)
{
    struct ptds_job j = {.size = size};
    void *p = alloc_on(size, CU_STREAM_PER_THREAD, 0);
    sim->stream_hold(CU_STREAM_PER_THREAD);
    if (touch) kernel(CU_STREAM_PER_THREAD, p, size); /* A's held kernel uses the block */
    cr_assert_eq(gpool_free_async(pool, p, CU_STREAM_PER_THREAD), GPOOL_OK);
    void *again = alloc_on(size, CU_STREAM_PER_THREAD, 0);
    cr_assert_eq(again, p, "thread A reuses its own per-thread stream's free at once");
    cr_assert_eq(gpool_free_async(pool, again, CU_STREAM_PER_THREAD), GPOOL_OK);
    j.freed = p;
    run_thread(ptds_thread_b, &j);
    cr_assert(!overlaps(j.freed, size, j.got, size),
              "thread B's per-thread stream got a block thread A's pending work may use");
    void *first = j.got;
    sim->stream_release(CU_STREAM_PER_THREAD);
    /* A goes on using its stream: its frees are now covered by events B can query */
    void *x = alloc_on(256, CU_STREAM_PER_THREAD, 0);
    cr_assert_eq(gpool_free_async(pool, x, CU_STREAM_PER_THREAD), GPOOL_OK);
    unsigned long forced = sim->forced_syncs();
    void *keep[16];
    int n = 0, back = 0;
    for (; n < 16 && !back && check_back; n++) {
        run_thread(ptds_thread_b, &j);
        keep[n] = j.got;
        back = overlaps(j.freed, size, j.got, size);
    }
    cr_assert(back || !check_back,
              "thread A's block is reusable by others once its work completed");
    cr_assert_eq(sim->forced_syncs(), forced);
    cr_assert_eq(gpool_free_async(pool, first, CU_STREAM_PER_THREAD), GPOOL_OK);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free_async(pool, keep[i], CU_STREAM_PER_THREAD), GPOOL_OK);
}

Test(stream_rules, per_thread_stream_blocks_stay_with_their_thread_until_done)
{
    ptds_case(4 * MiB, 1);
}

Test(stream_rules, per_thread_stream_small_blocks_stay_with_their_thread_until_done)
{
    ptds_case(4000, 0);
}

/* A pool whose default stream is CU_STREAM_PER_THREAD: gpool_alloc / gpool_free of small
 * blocks (the thread-cache path) keep the threads' streams apart too. */
static void *ptds_default_a(void *arg)
{
    struct ptds_job *j = arg;
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, j->size, NULL, &p), GPOOL_OK);
    sim->stream_hold(CU_STREAM_PER_THREAD);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    j->freed = p;
    return NULL;
}

static void *ptds_default_b(void *arg)
{
    struct ptds_job *j = arg;
    cr_assert_eq(gpool_alloc(pool, j->size, NULL, &j->got), GPOOL_OK);
    return NULL;
}

Test(stream_rules, per_thread_default_stream_pool_keeps_threads_apart)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.default_stream = CU_STREAM_PER_THREAD;
    cr_assert_eq(gpool_create(&cfg, &pool), GPOOL_OK, "%s", gpool_last_error());
    const size_t sizes[] = {300, 8000, 3 * MiB};
    for (int k = 0; k < 3; k++) {
        struct ptds_job j = {.size = sizes[k]};
        run_thread(ptds_default_a, &j);
        run_thread(ptds_default_b, &j);
        cr_assert(!overlaps(j.freed, j.size, j.got, j.size),
                  "%zu bytes: thread B got a block thread A's pending work may use", j.size);
        sim->stream_release(CU_STREAM_PER_THREAD);
        cr_assert_eq(gpool_free(pool, j.got), GPOOL_OK);
    }
}

/* ---------- graph capture ---------- */

/* The simulator's capture calls; the test skips where it has none. */
typedef struct capture_calls {
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*is)(CUstream, CUstreamCaptureStatus *);
    CUresult (*graph_destroy)(CUgraph);
} capture_calls;

static capture_calls need_capture(void)
{
    capture_calls c = {sim_driver_proc("cuStreamBeginCapture"),
                       sim_driver_proc("cuStreamEndCapture"),
                       sim_driver_proc("cuStreamIsCapturing"), sim_driver_proc("cuGraphDestroy")};
    if (!c.begin || !c.end || !c.is)
        cr_skip_test("the simulator has no graph capture (cuStreamBeginCapture, "
                     "cuStreamEndCapture, cuStreamIsCapturing)");
    return c;
}

/* While a stream captures a graph in global mode, querying or synchronizing captured work,
 * stream/context synchronize and legacy allocation calls are prohibited and invalidate the
 * capture (cuStreamBeginCapture's doc comment; CUDA Programming Guide, "Prohibited and
 * Unhandled Operations"). An allocation on the capturing stream is served from memory already
 * free for it, else refused with GPOOL_ERR_UNSUPPORTED naming capture; the capture survives. */
Test(stream_rules, capturing_stream_gets_free_memory_or_unsupported_and_capture_survives)
{
    const capture_calls C = need_capture();
    void *p = alloc_on(4 * MiB, A, 0);
    void *other = alloc_on(MiB, B, 0);                    /* a second stream in play */
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK); /* free for A */
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, other, B), GPOOL_OK); /* pending on B */
    cr_assert_eq(C.begin(A, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    sim->reset_counts();
    void *q = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 4 * MiB, NULL, A, &q), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(q, p, "the block free for A is served during the capture");
    void *r = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 64 * MiB, NULL, A, &r), GPOOL_ERR_UNSUPPORTED);
    cr_assert_null(r);
    cr_assert(strstr(gpool_last_error(), "captur"), "%s", gpool_last_error());
    gpool_alloc_params pin = {.kind = GPOOL_MEM_HOST_PINNED};
    cr_assert_eq(gpool_alloc_async(pool, 4096, &pin, A, &r), GPOOL_ERR_UNSUPPORTED);
    static const char *const prohibited[] = {
        "cuMemCreate",         "cuMemMap",          "cuMemSetAccess", "cuMemAlloc",
        "cuMemHostAlloc",      "cuMemHostRegister", "cuEventQuery",   "cuEventSynchronize",
        "cuStreamSynchronize", "cuCtxSynchronize",  "cuStreamQuery",  "cuMemsetD8",
    };
    for (size_t i = 0; i < sizeof prohibited / sizeof *prohibited; i++)
        cr_assert_eq(sim->call_count(prohibited[i]), 0, "%s during capture", prohibited[i]);
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(C.is(A, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture was invalidated");
    CUgraph g = NULL;
    cr_assert_eq(C.end(A, &g), CUDA_SUCCESS);
    if (C.graph_destroy && g) C.graph_destroy(g);
    sim->stream_release(B);
}

/* GPOOL_ALLOC_IN_CAPTURE: an allocation on a capturing stream may map fresh pages. The pool
 * makes its mapping calls with the thread in relaxed capture mode
 * (cuThreadExchangeStreamCaptureMode: a relaxed thread "is not prohibited from potentially
 * unsafe API calls", push-pop), never waits for a stream, and the capture survives; without
 * memory left it fails out of memory, saying the stream captures. */
Test(stream_rules, in_capture_flag_maps_fresh_pages_and_the_capture_survives)
{
    const capture_calls C = need_capture();
    void *other = alloc_on(MiB, B, 0);
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, other, B), GPOOL_OK); /* pending on B */
    cr_assert_eq(C.begin(A, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    sim->reset_counts();
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.flags = GPOOL_ALLOC_IN_CAPTURE;
    void *q = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 64 * MiB, &prm, A, &q), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_gt(sim->call_count("cuMemMap"), 0, "fresh pages were mapped");
    cr_assert_eq(sim->call_count("cuThreadExchangeStreamCaptureMode"), 2, "relaxed, then back");
    static const char *const prohibited[] = {
        "cuMemAlloc",    "cuMemHostAlloc",     "cuMemHostRegister",
        "cuEventQuery",  "cuEventSynchronize", "cuCtxSynchronize",
        "cuStreamQuery", "cuMemsetD8",         "cuStreamSynchronize",
    };
    for (size_t i = 0; i < sizeof prohibited / sizeof *prohibited; i++)
        cr_assert_eq(sim->call_count(prohibited[i]), 0, "%s during capture", prohibited[i]);
    /* more than the device has: out of memory, naming the capture */
    void *r = NULL;
    cr_assert_eq(gpool_alloc_async(pool, (size_t)1 << 44, &prm, A, &r), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_null(r);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(C.is(A, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture was invalidated");
    CUgraph g = NULL;
    cr_assert_eq(C.end(A, &g), CUDA_SUCCESS);
    if (C.graph_destroy && g) C.graph_destroy(g);
    sim->stream_release(B);
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
}

/* ---------- contexts ---------- */

/* A stream of another context: cuEventRecord needs the event and the stream in one context
 * (its doc comment: CUDA_ERROR_INVALID_HANDLE otherwise), and cuCtxSynchronize waits for the
 * current context's work only. gpool polls such a stream with cuStreamQuery and waits with
 * cuStreamSynchronize; completion is never assumed. */
/* Two simulated devices, each with its own primary context (read when the simulator loads,
 * so before the setup loads it). */
static void setup_two_devices(void)
{
    setenv("GPOOL_SIM_DEVICES", "2", 1);
    setup();
}

TestSuite(stream_ctx, .init = setup_two_devices, .fini = teardown);

Test(stream_ctx, streams_of_another_context_are_queried_and_synchronized_never_assumed)
{
    CUresult (*getctx)(CUstream, CUcontext *) = sim_driver_proc("cuStreamGetCtx");
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    if (!getctx) cr_skip_test("the simulator has no stream contexts yet (cuStreamGetCtx)");
    CUcontext other = NULL, sctx = NULL;
    cr_assert_eq(retain(&other, 1), CUDA_SUCCESS); /* device 1's primary context */
    if (other == ctx) cr_skip_test("the simulator's devices share one context");
    CUstream S;
    cr_assert_eq(set(other), CUDA_SUCCESS);
    cr_assert_eq(mk(&S, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(getctx(S, &sctx), CUDA_SUCCESS);
    cr_assert_eq(sctx, other);
    const size_t sz = 4 * MiB;
    void *p = alloc_on(sz, S, 0);
    void *b0 = alloc_on(MiB, B, 0);
    sim->stream_hold(S);
    kernel(S, p, sz);
    cr_assert_eq(gpool_free_async(pool, p, S), GPOOL_OK);
    unsigned long forced = sim->forced_syncs();
    void *q = alloc_on(sz, B, 0);
    cr_assert(!overlaps(p, sz, q, sz), "B got memory the other context's held work may use");
    cr_assert_eq(sim->forced_syncs(), forced);
    sim->stream_release(S);
    /* S completed: B gets the block back by querying S, without a synchronize */
    void *keep[16];
    int n = 0, back = 0;
    for (; n < 16 && !back; n++) {
        keep[n] = alloc_on(sz, B, 0);
        back = overlaps(p, sz, keep[n], sz);
    }
    cr_assert(back, "the block is reusable once the other context's stream completed");
    cr_assert_eq(sim->forced_syncs(), forced);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free_async(pool, keep[i], B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, b0, B), GPOOL_OK);
    /* memory pressure: the pool's context synchronize does not cover S, S itself is waited */
    sim->set_capacity(0, 16 * MiB);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    void *r = alloc_on(10 * MiB, S, 0);
    sim->stream_hold(S);
    kernel(S, r, 10 * MiB);
    cr_assert_eq(gpool_free_async(pool, r, S), GPOOL_OK);
    forced = sim->forced_syncs();
    void *t = alloc_on(12 * MiB, B, 0);
    cr_assert_gt(sim->forced_syncs(), forced, "the allocator waited for S's work");
    cr_assert_eq(gpool_free_async(pool, t, B), GPOOL_OK);
    sim->stream_release(S);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    destroy(S);
    release(1);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
}

/* A block recorded on a capturing stream and freed elsewhere: no event can be recorded on the
 * capture (nor may it be synchronized), and the graph's work on the block runs whenever the
 * graph is launched, so the block waits for a full synchronize instead of being freed as if
 * that stream had nothing queued. */
Test(stream_rules, block_recorded_on_a_capturing_stream_waits_for_a_synchronize)
{
    const capture_calls C = need_capture();
    const size_t sz = 4 * MiB;
    void *p = alloc_on(sz, B, 0);
    void *other = alloc_on(MiB, A, 0); /* two streams in play */
    cr_assert_eq(gpool_record_stream(pool, p, A), GPOOL_OK);
    cr_assert_eq(C.begin(A, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(pool, p, B), GPOOL_OK);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(C.is(A, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the free invalidated the capture");
    CUgraph g = NULL;
    cr_assert_eq(C.end(A, &g), CUDA_SUCCESS);
    void *q = alloc_on(sz, B, 0);
    cr_assert(!overlaps(p, sz, q, sz), "the block was reused while the graph may still use it");
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, other, A), GPOOL_OK);
    if (C.graph_destroy && g) C.graph_destroy(g);
}

/* A request on a capturing stream that fits memory already free for it is served even when
 * it would split a free range while other streams have frees pending: the poll such a split
 * makes now and then is optional, and the capture forbids it, so it is skipped instead of
 * failing the request. (Before: GPOOL_ERR_UNSUPPORTED whenever the split poll came due.) */
Test(stream_rules, capturing_stream_skips_the_optional_split_poll)
{
    const capture_calls C = need_capture();
    void *x = alloc_on(MiB, B, 0);
    sim->stream_hold(B);
    cr_assert_eq(gpool_free_async(pool, x, B), GPOOL_OK); /* pending on B from now on */
    void *p = alloc_on(16 * MiB, A, 0);                   /* fresh pages: this request polls */
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *keep[4];
    for (int i = 0; i < 4; i++) /* split fits of A's free range, until the split poll is due */
        keep[i] = alloc_on(MiB, A, 0);
    cr_assert_eq(C.begin(A, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    sim->reset_counts();
    void *q = NULL;
    cr_assert_eq(gpool_alloc_async(pool, 4 * MiB, NULL, A, &q), GPOOL_OK, "%s", gpool_last_error());
    /* from memory free for A: its own frees, or B's that A waited for before the capture */
    cr_assert(!overlaps(x, MiB, q, 4 * MiB), "served from B's pending block");
    cr_assert_eq(sim->call_count("cuEventQuery"), 0, "no query during the capture");
    cr_assert_eq(sim->call_count("cuEventRecord"), 0, "no event recorded on a capture");
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
    CUgraph g = NULL;
    cr_assert_eq(C.end(A, &g), CUDA_SUCCESS);
    if (C.graph_destroy && g) C.graph_destroy(g);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gpool_free_async(pool, keep[i], A), GPOOL_OK);
}

/* ---------- destroy ---------- */

/* gpool_destroy gives every page back, so the work queued on any stream must be done first: a
 * failed cuCtxSynchronize is tried once more rather than unmapping memory a kernel still
 * writes (an outsider's fault-pair run found destroy returning OK after such an unmap). */
Test(stream_rules, destroy_retries_a_failed_synchronize_before_unmapping)
{
    void *p = alloc_on(4 * MiB, A, 0);
    kernel(A, p, 4 * MiB);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    cr_assert_eq(sim->fail_nth("cuCtxSynchronize", 1), 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    pool = make_pool(NULL);
    cr_assert_eq(violations(), 0, "no page unmapped under queued work");
}

/* When the synchronize fails again, gpool_destroy still frees everything (the pool is gone
 * either way) and says so: the driver error, naming the call, not OK. */
Test(stream_rules, destroy_reports_a_synchronize_that_keeps_failing)
{
    void *p = alloc_on(4 * MiB, A, 0);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    cr_assert_eq(sim->fail_nth("cuCtxSynchronize", 1), 0);
    cr_assert_eq(sim->fail_nth("cuCtxSynchronize", 2), 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_ERR_DRIVER);
    cr_assert(strstr(gpool_last_error(), "gpool_destroy") &&
                  strstr(gpool_last_error(), "cuCtxSynchronize"),
              "%s", gpool_last_error());
    struct gpoolsim_live l;
    sim->get_live(&l);
    cr_assert(!l.handles && !l.mappings && !l.reservations && !l.events,
              "every handle, mapping, reservation and event of the old pool returned");
    pool = make_pool(NULL);
}

/* ---------- stream_reuse: waiting for another stream's frees ---------- */

/* Take every cached byte of the device kind with a block on stream s (NULL when none), so
 * that the next request finds no cached memory of its own or clean. */
static void *take_cached(CUstream s)
{
    gpool_stats st = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK);
    size_t cached = st.kind[GPOOL_MEM_DEVICE].cached_bytes;
    return cached >= MiB ? alloc_on(cached, s, 0) : NULL;
}

/* The scenario: A's kernel writes p, A frees it (A's work still queued), and B asks for as
 * much with nothing else cached: the best place is p, pending on A. Returns B's block. */
static void *reuse_across(void **p_out, size_t sz, void **filler)
{
    void *p = alloc_on(sz, A, 0);
    *filler = take_cached(A);
    kernel(A, p, sz);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    *p_out = p;
    return alloc_on(sz, B, 0);
}

/* stream_reuse=wait (the default): B waits for A's work (cuStreamWaitEvent on an event
 * recorded after the free) and reuses p instead of mapping fresh memory, and B's kernel on it
 * is ordered after A's (the referee counts no violation at teardown). */
Test(stream_rules, default_reuse_waits_for_another_streams_free_instead_of_fresh_memory)
{
    const size_t sz = 6 * MiB;
    void *p, *filler, *ab = alloc_on(MiB, B, 0); /* B is a second stream from the start */
    cr_assert_eq(gpool_free_async(pool, ab, B), GPOOL_OK);
    unsigned long waits = sim->call_count("cuStreamWaitEvent");
    unsigned long creates = sim->call_count("cuMemCreate");
    void *q = reuse_across(&p, sz, &filler);
    cr_assert_eq(q, p, "B reuses A's freed block");
    cr_assert_gt(sim->call_count("cuStreamWaitEvent"), waits, "after waiting for A's work");
    cr_assert_eq(sim->call_count("cuMemCreate"), creates, "no fresh memory mapped for it");
    kernel(B, q, sz); /* ordered after A's kernel: the referee checks it */
    cr_assert_eq(violations(), 0);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    if (filler) cr_assert_eq(gpool_free_async(pool, filler, A), GPOOL_OK);
}

/* A claim covers every free of the other stream so far, not only those its live event covers:
 * A frees p1, B claims it (an event on A is recorded, B waits on it; A is held, so the event
 * stays live), then A frees p2 and B asks again. Waiting on A's live event would hand over
 * nothing new and B would map fresh memory; a spare event recorded now covers p2. */
Test(stream_rules, a_claim_covers_frees_made_after_the_streams_live_event)
{
    const size_t sz = 6 * MiB;
    void *ab = alloc_on(MiB, B, 0); /* B is a second stream from the start */
    cr_assert_eq(gpool_free_async(pool, ab, B), GPOOL_OK);
    void *p1 = alloc_on(sz, A, 0), *sep = alloc_on(MiB, A, 0), *p2 = alloc_on(sz, A, 0);
    void *filler = take_cached(A);
    kernel(A, p1, sz);
    kernel(A, p2, sz);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p1, A), GPOOL_OK);
    void *q1 = alloc_on(sz, B, 0);
    cr_assert_eq(q1, p1, "B claims p1");
    cr_assert_eq(gpool_free_async(pool, p2, A), GPOOL_OK);
    unsigned long creates = sim->call_count("cuMemCreate");
    void *q2 = alloc_on(sz, B, 0);
    cr_assert_eq(q2, p2, "B claims p2, freed after A's event was recorded");
    cr_assert_eq(sim->call_count("cuMemCreate"), creates, "no fresh memory mapped for it");
    kernel(B, q1, sz);
    kernel(B, q2, sz); /* ordered after A's kernels: the referee checks it */
    cr_assert_eq(violations(), 0);
    cr_assert_eq(gpool_free_async(pool, q1, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q2, B), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, sep, A), GPOOL_OK);
    if (filler) cr_assert_eq(gpool_free_async(pool, filler, A), GPOOL_OK);
}

/* stream_reuse=events: no dependency between streams on gpool's own; B gets other memory
 * while A's work on p is queued. */
Test(stream_rules, events_reuse_never_makes_a_stream_wait)
{
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    pool = make_pool("stream_reuse=events");
    const size_t sz = 6 * MiB;
    void *p, *filler, *ab = alloc_on(MiB, B, 0);
    cr_assert_eq(gpool_free_async(pool, ab, B), GPOOL_OK);
    unsigned long waits = sim->call_count("cuStreamWaitEvent");
    void *q = reuse_across(&p, sz, &filler);
    cr_assert(!overlaps(p, sz, q, sz), "B got memory A's queued work may use");
    cr_assert_eq(sim->call_count("cuStreamWaitEvent"), waits, "a wait was added");
    kernel(B, q, sz);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    if (filler) cr_assert_eq(gpool_free_async(pool, filler, A), GPOOL_OK);
}

/* GPOOL_ALLOC_NO_STREAM_WAIT under stream_reuse=wait: the same scenario as the default's
 * wait, but B's request makes no hand-over (the drop-in's cudaMalloc once a non-blocking
 * stream exists: its block may go to any stream at once); with STREAM_WAIT: invalid. */
Test(stream_rules, no_stream_wait_flag_skips_the_hand_over)
{
    const size_t sz = 6 * MiB;
    void *ab = alloc_on(MiB, B, 0);
    cr_assert_eq(gpool_free_async(pool, ab, B), GPOOL_OK);
    void *p = alloc_on(sz, A, 0), *filler = take_cached(A);
    kernel(A, p, sz);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    unsigned long waits = sim->call_count("cuStreamWaitEvent");
    void *q = alloc_on(sz, B, GPOOL_ALLOC_NO_STREAM_WAIT);
    cr_assert(!overlaps(p, sz, q, sz), "B got memory A's queued work may use");
    cr_assert_eq(sim->call_count("cuStreamWaitEvent"), waits, "a wait was added");
    gpool_alloc_params both = GPOOL_ALLOC_PARAMS_INIT;
    both.flags = GPOOL_ALLOC_STREAM_WAIT | GPOOL_ALLOC_NO_STREAM_WAIT;
    void *r = (void *)1;
    cr_assert_eq(gpool_alloc_async(pool, MiB, &both, B, &r), GPOOL_ERR_INVALID_ARG);
    cr_assert_null(r);
    cr_assert(strstr(gpool_last_error(), "exclude each other"), "%s", gpool_last_error());
    kernel(B, q, sz);
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    if (filler) cr_assert_eq(gpool_free_async(pool, filler, A), GPOOL_OK);
}

/* B has 8 MiB of its own cached (a hole under a live 1 MiB block of B's when `hole`, else the
 * frontier: the free range at the top, running on into unbacked pages), and A frees p (sz
 * bytes, A's kernel on it still queued); then B asks for sz bytes. Returns B's block, with
 * the cuStreamWaitEvent calls that request made in *waits. */
typedef struct own_cache_case {
    void *p, *filler, *mine, *above;
} own_cache_case;

static void *b_asks_with_own_cache(own_cache_case *c, size_t sz, int hole, unsigned long *waits)
{
    c->p = alloc_on(sz, A, 0);
    c->filler = take_cached(A);
    c->mine = alloc_on(8 * MiB, B, 0);
    c->above = hole ? alloc_on(MiB, B, 0) : NULL;
    cr_assert_eq(gpool_free_async(pool, c->mine, B), GPOOL_OK); /* B's own, cached */
    kernel(A, c->p, sz);
    sim->stream_hold(A);
    cr_assert_eq(gpool_free_async(pool, c->p, A), GPOOL_OK);
    unsigned long before = sim->call_count("cuStreamWaitEvent");
    void *q = alloc_on(sz, B, 0);
    *waits = sim->call_count("cuStreamWaitEvent") - before;
    return q;
}

static void own_cache_case_end(own_cache_case *c, void *q)
{
    cr_assert_eq(gpool_free_async(pool, q, B), GPOOL_OK);
    if (c->above) cr_assert_eq(gpool_free_async(pool, c->above, B), GPOOL_OK);
    if (c->filler) cr_assert_eq(gpool_free_async(pool, c->filler, A), GPOOL_OK);
}

/* No wait where none is needed: a cached hole of B's own that fits comes first, even when A's
 * pending block would fit better. */
Test(stream_rules, no_wait_when_a_cached_hole_of_the_stream_fits)
{
    own_cache_case c;
    unsigned long waits;
    void *q = b_asks_with_own_cache(&c, 6 * MiB, 1, &waits);
    cr_assert(overlaps(c.mine, 8 * MiB, q, 6 * MiB), "B's own cached hole serves it");
    cr_assert_eq(waits, 0, "a needless wait");
    own_cache_case_end(&c, q);
}

/* B's own cached memory is the frontier: taking it would push the frontier out, so B waits for
 * A's work and takes A's hole instead, ordered after A's kernel (the referee checks it). */
Test(stream_rules, the_frontier_is_kept_when_another_streams_hole_can_be_waited_for)
{
    own_cache_case c;
    unsigned long waits;
    void *q = b_asks_with_own_cache(&c, 6 * MiB, 0, &waits);
    cr_assert_eq(q, c.p, "B takes A's hole");
    cr_assert_gt(waits, 0, "after waiting for A's work");
    kernel(B, q, 6 * MiB);
    cr_assert_eq(violations(), 0);
    own_cache_case_end(&c, q);
}

/* The configuration key: both names, and nothing else. */
Test(stream_rules, stream_reuse_key_takes_wait_or_events)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_assert_eq(cfg.stream_reuse, GPOOL_STREAM_REUSE_WAIT, "the default");
    cr_assert_eq(gpool_config_parse(&cfg, "stream_reuse=events"), GPOOL_OK);
    cr_assert_eq(cfg.stream_reuse, GPOOL_STREAM_REUSE_EVENTS);
    cr_assert_eq(gpool_config_parse(&cfg, "stream_reuse=wait"), GPOOL_OK);
    cr_assert_eq(cfg.stream_reuse, GPOOL_STREAM_REUSE_WAIT);
    cr_assert_eq(gpool_config_parse(&cfg, "stream_reuse=sometimes"), GPOOL_ERR_CONFIG);
    cr_assert(strstr(gpool_last_error(), "stream_reuse"), "%s", gpool_last_error());
    cfg.stream_reuse = 7;
    gpool_t *bad = NULL;
    cr_assert_eq(gpool_create(&cfg, &bad), GPOOL_ERR_CONFIG);
    cr_assert_null(bad);
    cr_assert(strstr(gpool_last_error(), "stream_reuse 7"), "%s", gpool_last_error());
}

/* Several streams: a small block of a stream other than the pool's default one (a heap range,
 * not a slab slot) is placed up with the slabs, not in the middle of a hole a large block left
 * (where it would split the hole: a 32-byte block in a 3 MiB hole was batch-decode@2s's
 * out-of-memory at 48 MiB). */
Test(stream_rules, small_blocks_of_other_streams_keep_out_of_large_holes)
{
    void *b = alloc_on(MiB, B, 0); /* a second stream in play */
    void *p = alloc_on(8 * MiB, A, 0);
    void *keep = alloc_on(MiB, A, 0); /* p's hole stays a hole */
    cr_assert_eq(gpool_free_async(pool, p, A), GPOOL_OK);
    void *small[8];
    for (int i = 0; i < 8; i++) {
        small[i] = alloc_on(32 + 700 * (size_t)i, A, 0);
        cr_assert(!overlaps(p, 8 * MiB, small[i], 256), "small block %d split the hole", i);
    }
    void *q = alloc_on(8 * MiB, A, 0);
    cr_assert_eq(q, p, "the hole is whole for the next large block");
    for (int i = 0; i < 8; i++)
        cr_assert_eq(gpool_free_async(pool, small[i], A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, q, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, keep, A), GPOOL_OK);
    cr_assert_eq(gpool_free_async(pool, b, B), GPOOL_OK);
}
