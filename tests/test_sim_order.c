/* test_sim_order.c — the simulated driver as a happens-before referee: stream ordering,
 * per-thread default streams, contexts, graph capture and stream lifetime follow the real
 * driver's documented rules (sim/sim_stream.c, sim/sim_hb.c, sim/sim_capture.c name the
 * sources). Each test loads the simulator itself ($GPOOL_LIBCUDA) after setting the
 * environment it needs; every Criterion test is its own process, so tests that provoke
 * violations (or abort in strict mode) do not affect the others. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util_sim.h"
#include "util_skip.h"

#define XSTR(x) #x
#define STR(x)  XSTR(x)
/* a driver function pointer named p_<base name>, of the entry point cuda.h maps it to */
#define FN(name)  static __typeof__(name) *p_##name
#define GET(name) (*(void **)&p_##name = sym(STR(name)))

static void *lib;
static void *sym(const char *name)
{
    void *f = dlsym(lib, name);
    cr_assert_not_null(f, "%s not exported", name);
    return f;
}

FN(cuInit);
FN(cuDevicePrimaryCtxRetain);
FN(cuCtxSetCurrent);
FN(cuCtxSynchronize);
FN(cuStreamCreate);
FN(cuStreamDestroy);
FN(cuStreamSynchronize);
FN(cuStreamQuery);
FN(cuStreamWaitEvent);
FN(cuStreamGetCtx);
FN(cuStreamGetFlags);
FN(cuEventCreate);
FN(cuEventRecord);
FN(cuEventQuery);
FN(cuEventSynchronize);
FN(cuEventDestroy);
FN(cuMemAlloc);
FN(cuMemFree);
FN(cuMemAllocAsync);
FN(cuMemFreeAsync);
FN(cuMemsetD8);
FN(cuMemsetD8Async);
FN(cuMemcpyHtoDAsync);
FN(cuMemcpyDtoH);
FN(cuMemCreate);
FN(cuMemRelease);
FN(cuMemAddressReserve);
FN(cuMemAddressFree);
FN(cuMemMap);
FN(cuMemUnmap);
FN(cuMemSetAccess);
FN(cuGetProcAddress);
FN(cuStreamBeginCapture);
FN(cuStreamEndCapture);
FN(cuStreamIsCapturing);
FN(cuThreadExchangeStreamCaptureMode);
FN(cuGraphDestroy);
FN(gpoolsim_touch);
FN(gpoolsim_violations);
FN(gpoolsim_stream_hold);
FN(gpoolsim_stream_release);
FN(gpoolsim_forced_syncs);

static CUcontext ctx[2];

static void load(int devices)
{
    NEED_SIM();
    const char *path = getenv("GPOOL_LIBCUDA");
    cr_assert_not_null(path, "GPOOL_LIBCUDA must name the simulated driver");
    if (devices > 1) setenv("GPOOL_SIM_DEVICES", "2", 1);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    GET(cuInit);
    GET(cuDevicePrimaryCtxRetain);
    GET(cuCtxSetCurrent);
    GET(cuCtxSynchronize);
    GET(cuStreamCreate);
    GET(cuStreamDestroy);
    GET(cuStreamSynchronize);
    GET(cuStreamQuery);
    GET(cuStreamWaitEvent);
    GET(cuStreamGetCtx);
    GET(cuStreamGetFlags);
    GET(cuEventCreate);
    GET(cuEventRecord);
    GET(cuEventQuery);
    GET(cuEventSynchronize);
    GET(cuEventDestroy);
    GET(cuMemAlloc);
    GET(cuMemFree);
    GET(cuMemAllocAsync);
    GET(cuMemFreeAsync);
    GET(cuMemsetD8);
    GET(cuMemsetD8Async);
    GET(cuMemcpyHtoDAsync);
    GET(cuMemcpyDtoH);
    GET(cuMemCreate);
    GET(cuMemRelease);
    GET(cuMemAddressReserve);
    GET(cuMemAddressFree);
    GET(cuMemMap);
    GET(cuMemUnmap);
    GET(cuMemSetAccess);
    GET(cuGetProcAddress);
    GET(cuStreamBeginCapture);
    GET(cuStreamEndCapture);
    GET(cuStreamIsCapturing);
    GET(cuThreadExchangeStreamCaptureMode);
    GET(cuGraphDestroy);
    GET(gpoolsim_touch);
    GET(gpoolsim_violations);
    GET(gpoolsim_stream_hold);
    GET(gpoolsim_stream_release);
    GET(gpoolsim_forced_syncs);
    cr_assert_eq(p_cuInit(0), CUDA_SUCCESS);
    for (int d = 0; d < devices; d++)
        cr_assert_eq(p_cuDevicePrimaryCtxRetain(&ctx[d], d), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
}

/* These tests provoke violations on purpose and count them: the simulator is not strict for
 * them, and their violations stay out of a run-wide GPOOL_SIM_VIOLATION_LOG (CI runs the whole
 * suite strict, with a log). */
static void deliberate(void)
{
    setenv("GPOOL_SIM_STRICT", "0", 1);
    unsetenv("GPOOL_SIM_VIOLATION_LOG");
}
static void setup1(void)
{
    deliberate();
    load(1);
}
static void setup2(void)
{
    deliberate();
    load(2);
}

static CUstream stream(unsigned flags)
{
    CUstream s;
    cr_assert_eq(p_cuStreamCreate(&s, flags), CUDA_SUCCESS);
    return s;
}

static CUevent event(void)
{
    CUevent e;
    cr_assert_eq(p_cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    return e;
}

static CUdeviceptr dalloc(size_t n)
{
    CUdeviceptr p;
    cr_assert_eq(p_cuMemAlloc(&p, n), CUDA_SUCCESS);
    return p;
}

static void touch(CUstream s, CUdeviceptr p, size_t n, int w)
{
    cr_assert_eq(p_gpoolsim_touch(s, p, n, w), CUDA_SUCCESS);
}

/* ---- the checker: unordered conflicting accesses ---- */

Test(order, two_streams_writing_one_range_without_an_event_race, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(4096);
    touch(a, p, 4096, 1);
    touch(b, p + 1000, 10, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
    touch(b, p + 3000, 10, 0); /* b is ordered after its own write, not after a's */
    cr_assert_eq(p_gpoolsim_violations(), 2);
}

Test(order, record_and_wait_order_two_streams, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUdeviceptr p = dalloc(4096);
    touch(a, p, 4096, 1);
    cr_assert_eq(p_cuEventRecord(e, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamWaitEvent(b, e, 0), CUDA_SUCCESS);
    touch(b, p, 4096, 1);
    touch(a, p, 16, 0); /* a is not ordered after b's write */
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, reads_on_two_streams_do_not_conflict_but_a_later_write_does, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(256);
    touch(a, p, 256, 0);
    touch(b, p, 256, 0);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(a, p + 128, 1, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1, "write racing b's read");
    touch(a, p + 300 - 300, 1, 0);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, disjoint_ranges_never_conflict, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(4096);
    touch(a, p, 2048, 1);
    touch(b, p + 2048, 2048, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(b, p + 2047, 2, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, host_synchronization_orders_later_work, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUdeviceptr p = dalloc(64);
    touch(a, p, 64, 1);
    cr_assert_eq(p_cuStreamSynchronize(a), CUDA_SUCCESS);
    touch(b, p, 64, 1);
    cr_assert_eq(p_cuEventRecord(e, b), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventQuery(e), CUDA_SUCCESS); /* the host learns b's write completed */
    touch(a, p, 64, 1);
    cr_assert_eq(p_cuStreamQuery(a), CUDA_SUCCESS);
    touch(b, p, 64, 0);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

Test(order, held_work_the_host_has_not_seen_complete_still_races, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    cr_assert_eq(p_gpoolsim_stream_hold(a), 0);
    touch(a, p, 64, 1);
    cr_assert_eq(p_cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    cr_assert_eq(p_gpoolsim_stream_release(a), 0); /* completes, but nobody looked */
    touch(b, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, async_copies_and_memsets_are_accesses, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    char host[64] = {0};
    cr_assert_eq(p_cuMemsetD8Async(p, 1, 64, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemcpyHtoDAsync(p, host, 64, b), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, touch_rejects_unknown_streams_and_unallocated_memory, .init = setup1)
{
    CUdeviceptr p = dalloc(64);
    cr_assert_eq(p_gpoolsim_touch((CUstream)(uintptr_t)0x999, p, 8, 1), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(p_gpoolsim_touch(NULL, p, 65, 1), CUDA_ERROR_INVALID_VALUE, "past the end");
    char local[8];
    cr_assert_eq(p_gpoolsim_touch(NULL, (CUdeviceptr)(uintptr_t)local, 8, 1),
                 CUDA_ERROR_INVALID_VALUE, "pageable host memory is not device-visible");
    cr_assert_eq(p_gpoolsim_touch(NULL, p, 64, 1), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_touch(CU_STREAM_PER_THREAD, p, 64, 1), CUDA_ERROR_INVALID_CONTEXT,
                 "default streams need a current context");
}

/* ---- the legacy stream's implicit synchronization ---- */

Test(order, legacy_stream_is_ordered_with_blocking_streams, .init = setup1)
{
    CUstream s = stream(0);
    CUdeviceptr p = dalloc(64);
    touch(s, p, 64, 1);
    touch(NULL, p, 64, 1); /* legacy work waits for prior blocking-stream work */
    touch(s, p, 64, 1);    /* and later blocking-stream work for prior legacy work */
    cr_assert_eq(p_cuMemsetD8(p, 0, 64), CUDA_SUCCESS);
    touch(CU_STREAM_LEGACY, p, 64, 0);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

Test(order, non_blocking_streams_race_with_the_legacy_stream, .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    touch(s, p, 64, 1);
    cr_assert_eq(p_cuMemsetD8(p, 0, 64), CUDA_SUCCESS); /* synchronous memset: legacy stream */
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, held_blocking_stream_delays_later_legacy_work, .init = setup1)
{
    CUstream blocking = stream(0), nb = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event(), e2 = event();
    cr_assert_eq(p_gpoolsim_stream_hold(blocking), 0);
    cr_assert_eq(p_gpoolsim_stream_hold(nb), 0);
    cr_assert_eq(p_cuEventRecord(e2, nb), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e2, blocking), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e, NULL), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventQuery(e), CUDA_ERROR_NOT_READY, "waits for the held blocking stream");
    cr_assert_eq(p_gpoolsim_stream_release(blocking), 0);
    cr_assert_eq(p_cuEventQuery(e), CUDA_SUCCESS, "the held non-blocking stream does not count");
}

/* ---- per-thread default streams ---- */

struct pt_arg {
    CUdeviceptr p;
    int use_ptds;
};

static void *pt_writer(void *arg)
{
    struct pt_arg *a = arg;
    p_cuCtxSetCurrent(ctx[0]);
    if (a->use_ptds) {
        CUresult (*memset_ptds)(CUdeviceptr, unsigned char, size_t) =
            (CUresult(*)(CUdeviceptr, unsigned char, size_t))dlsym(lib, "cuMemsetD8_v2_ptds");
        return (void *)(uintptr_t)(memset_ptds(a->p, 7, 64) != CUDA_SUCCESS);
    }
    return (void *)(uintptr_t)(p_gpoolsim_touch(CU_STREAM_PER_THREAD, a->p, 64, 1) != CUDA_SUCCESS);
}

static void run_thread(struct pt_arg *a)
{
    pthread_t t;
    void *ret;
    cr_assert_eq(pthread_create(&t, NULL, pt_writer, a), 0);
    cr_assert_eq(pthread_join(t, &ret), 0);
    cr_assert_null(ret);
}

Test(order, per_thread_streams_of_two_threads_race, .init = setup1)
{
    struct pt_arg a = {dalloc(64), 0};
    run_thread(&a);
    touch(CU_STREAM_PER_THREAD, a.p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1, "two threads' per-thread streams are two streams");
    touch(CU_STREAM_PER_THREAD, a.p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1, "one thread's per-thread stream is in order");
}

Test(order, per_thread_stream_is_ordered_with_the_legacy_stream, .init = setup1)
{
    struct pt_arg a = {dalloc(64), 0};
    run_thread(&a);
    touch(NULL, a.p, 64, 1); /* legacy work waits for every blocking stream, per-thread too */
    touch(CU_STREAM_PER_THREAD, a.p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    CUstream s = stream(0);
    CUstream got;
    cr_assert_eq(p_cuStreamGetCtx(CU_STREAM_PER_THREAD, (CUcontext *)&got), CUDA_SUCCESS);
    cr_assert_eq((void *)got, (void *)ctx[0]);
    (void)s;
}

Test(order, ptds_entry_points_use_the_calling_threads_stream, .init = setup1)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    cr_assert_eq(p_cuGetProcAddress("cuMemsetD8", &fn, 13000,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                 CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(lib, "cuMemsetD8_v2_ptds"));
    cr_assert_eq(p_cuGetProcAddress("cuMemsetD8", &fn, 13000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(lib, "cuMemsetD8_v2"));
    cr_assert_eq(p_cuGetProcAddress("cuStreamSynchronize", &fn, 13000,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                 CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(lib, "cuStreamSynchronize_ptsz"));
    cr_assert_eq(p_cuGetProcAddress("cuMemcpyHtoDAsync", &fn, 13000,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                 CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(lib, "cuMemcpyHtoDAsync_v2_ptsz"));

    /* plain cuMemsetD8 on another thread: legacy stream, ordered before this thread's
     * per-thread stream; the _ptds form: that thread's own stream, unordered */
    struct pt_arg legacy = {dalloc(64), 0}, ptds = {dalloc(64), 1};
    cr_assert_eq(p_cuMemsetD8(legacy.p, 1, 64), CUDA_SUCCESS);
    touch(CU_STREAM_PER_THREAD, legacy.p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    run_thread(&ptds);
    touch(CU_STREAM_PER_THREAD, ptds.p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

/* ---- contexts ---- */

Test(order, events_record_only_on_streams_of_their_context, .init = setup2)
{
    CUevent e0 = event();
    CUstream s0 = stream(0);
    cr_assert_eq(p_cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
    CUstream s1 = stream(0);
    CUevent e1 = event();
    CUcontext c;
    cr_assert_eq(p_cuStreamGetCtx(s1, &c), CUDA_SUCCESS);
    cr_assert_eq(c, ctx[1]);
    cr_assert_eq(p_cuStreamGetCtx(s0, &c), CUDA_SUCCESS);
    cr_assert_eq(c, ctx[0]);
    cr_assert_neq(ctx[0], ctx[1], "each device has its own primary context");
    cr_assert_eq(p_cuEventRecord(e0, s1), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(p_cuEventRecord(e0, NULL), CUDA_ERROR_INVALID_HANDLE,
                 "NULL is the current (device 1) context's legacy stream");
    cr_assert_eq(p_cuEventRecord(e1, s1), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e0, s0), CUDA_SUCCESS, "any current context will do");
    cr_assert_eq(p_cuStreamWaitEvent(s1, e0, 0), CUDA_SUCCESS, "waits may cross contexts");
    cr_assert_eq(p_cuStreamWaitEvent(s0, e1, 0), CUDA_SUCCESS);
}

Test(order, ctx_synchronize_covers_the_current_context_only, .init = setup2)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    cr_assert_eq(p_gpoolsim_stream_hold(a), 0);
    touch(a, p, 64, 1);
    cr_assert_eq(p_cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 0, "device 1's context did not wait for device 0");
    cr_assert_eq(p_cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    touch(b, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
    cr_assert_eq(p_cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 1);
    touch(a, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

/* ---- graph capture ---- */

Test(order, prohibited_calls_during_global_capture_invalidate_it, .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64), q;
    CUgraph g = (CUgraph)(uintptr_t)1;
    CUstreamCaptureStatus st;
    cr_assert_eq(p_cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy stream cannot capture");
    cr_assert_eq(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                 CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(p_cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    memset((void *)(uintptr_t)p, 0, 64);
    cr_assert_eq(p_cuMemsetD8Async(p, 9, 64, s), CUDA_SUCCESS);
    cr_assert_eq(((unsigned char *)(uintptr_t)p)[0], 0, "captured work is not executed");
    cr_assert_eq(p_cuMemAlloc(&q, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(p_cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_null(g);
    cr_assert_eq(p_cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(p_cuMemAlloc(&q, 64), CUDA_SUCCESS, "allowed again after the capture");
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

Test(order, each_prohibited_call_fails_during_capture, .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    CUevent e = event();
    CUgraph g;
    struct {
        const char *what;
        int n;
    } calls[] = {{"cuStreamQuery", 0},     {"cuStreamSynchronize", 1}, {"cuCtxSynchronize", 2},
                 {"cuMemsetD8", 3},        {"cuMemFree", 4},           {"cuEventQuery", 5},
                 {"cuEventSynchronize", 6}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        cr_assert_eq(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        cr_assert_eq(p_cuEventRecord(e, s), CUDA_SUCCESS);
        CUresult rc = CUDA_SUCCESS;
        switch (calls[i].n) {
        case 0:
            rc = p_cuStreamQuery(s);
            break;
        case 1:
            rc = p_cuStreamSynchronize(s);
            break;
        case 2:
            rc = p_cuCtxSynchronize();
            break;
        case 3:
            rc = p_cuMemsetD8(p, 0, 64);
            break;
        case 4:
            rc = p_cuMemFree(p);
            break;
        case 5:
            rc = p_cuEventQuery(e);
            break;
        default:
            rc = p_cuEventSynchronize(e);
            break;
        }
        cr_assert_eq(rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s", calls[i].what);
        cr_assert_eq(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s",
                     calls[i].what);
    }
}

Test(order, relaxed_mode_allows_unsafe_calls_and_capture_succeeds, .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr q;
    CUgraph g = NULL;
    cr_assert_eq(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    cr_assert_eq(p_cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL, "the old mode comes back");
    cr_assert_eq(p_cuMemAlloc(&q, 64), CUDA_SUCCESS);
    cr_assert_eq(p_cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    cr_assert_not_null(g);
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemFree(q), CUDA_SUCCESS);
}

Test(order, legacy_work_while_a_blocking_stream_captures_is_refused, .init = setup1)
{
    CUstream blocking = stream(0);
    CUevent e = event();
    CUgraph g;
    cr_assert_eq(p_cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    cr_assert_eq(p_cuStreamEndCapture(blocking, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUstream nb = stream(CU_STREAM_NON_BLOCKING);
    cr_assert_eq(p_cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e, NULL), CUDA_SUCCESS, "non-blocking streams do not count");
    cr_assert_eq(p_cuStreamEndCapture(nb, &g), CUDA_SUCCESS);
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_SUCCESS);
}

/* cuda.h, cuStreamIsCapturing: on CU_STREAM_LEGACY "while a blocking stream in the same
 * context is capturing, it will return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ... The blocking
 * stream capture is not invalidated." */
Test(order, asking_the_legacy_stream_during_a_blocking_capture_invalidates_nothing, .init = setup1)
{
    CUstream blocking = stream(0), nb = stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureStatus st;
    CUgraph g;
    cr_assert_eq(p_cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(p_cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS, "non-blocking: no implicit tie");
    cr_assert_eq(p_cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    cr_assert_eq(p_cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    cr_assert_eq(p_cuStreamEndCapture(blocking, &g), CUDA_SUCCESS, "not invalidated");
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamEndCapture(nb, &g), CUDA_SUCCESS);
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_SUCCESS);
}

/* ---- releasing memory with accesses pending ---- */

Test(order, unmap_with_pending_accesses_is_a_violation, .init = setup1)
{
    size_t gran = GPOOL_SIM_GRANULARITY;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    cr_assert_eq(p_cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemAddressReserve(&va, gran, 0, 0, 0), CUDA_SUCCESS);
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(p_cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);
        cr_assert_eq(p_cuMemSetAccess(va, gran, &acc, 1), CUDA_SUCCESS);
        touch(s, va + 4096, 100, round == 0);
        if (round == 1) cr_assert_eq(p_cuStreamSynchronize(s), CUDA_SUCCESS);
        cr_assert_eq(p_cuMemUnmap(va, gran), CUDA_SUCCESS);
        cr_assert_eq(p_gpoolsim_violations(), 1, "round %d", round);
    }
    cr_assert_eq(p_cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemAddressFree(va, gran), CUDA_SUCCESS);
}

Test(order, cuMemFree_with_pending_accesses_is_a_violation, .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64), q = dalloc(64);
    touch(s, p, 64, 0);
    cr_assert_eq(p_cuMemFree(p), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 1);
    touch(s, q, 64, 1);
    CUevent e = event();
    cr_assert_eq(p_cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventSynchronize(e), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemFree(q), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, use_after_cuMemFreeAsync_is_a_violation, .init = setup1)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUdeviceptr p;
    cr_assert_eq(p_cuMemAllocAsync(&p, 4096, a), CUDA_SUCCESS);
    touch(a, p, 4096, 1);
    cr_assert_eq(p_cuMemFreeAsync(p, a), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 0, "freed after its own stream's work");
    cr_assert_eq(p_gpoolsim_touch(b, p, 16, 0), CUDA_SUCCESS, "b is not ordered after the free");
    cr_assert_eq(p_gpoolsim_violations(), 1);
    cr_assert_eq(p_cuEventRecord(e, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamWaitEvent(b, e, 0), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_touch(b, p + 64, 16, 0), CUDA_ERROR_INVALID_VALUE,
                 "after the free the memory is simply not allocated");

    /* a free racing another stream's access */
    CUdeviceptr q;
    cr_assert_eq(p_cuMemAllocAsync(&q, 4096, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamSynchronize(a), CUDA_SUCCESS);
    touch(b, q, 4096, 0);
    cr_assert_eq(p_cuMemFreeAsync(q, a), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 2);
}

/* ---- stream lifetime ---- */

Test(order, destroyed_streams_queued_work_still_completes, .init = setup1)
{
    CUstream s = stream(0);
    CUevent e = event();
    cr_assert_eq(p_gpoolsim_stream_hold(s), 0);
    cr_assert_eq(p_cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CUstream t = stream(0);
    cr_assert_neq(t, s, "handles are not reused unless GPOOL_SIM_REUSE_STREAM_HANDLES=1");
    cr_assert_eq(p_cuEventSynchronize(e), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 1);
}

/* A context synchronize covers the work of streams destroyed before it, done or still queued
 * (an outside tester's finding: the referee forgot a destroyed stream whose work the host had
 * not yet learned complete, and reported a false race on the next free). */
Test(order, context_synchronize_covers_destroyed_streams, .init = setup1)
{
    CUstream done = stream(0), queued = stream(0);
    CUdeviceptr p = dalloc(4096), q = dalloc(4096);
    touch(done, p, 4096, 1);
    cr_assert_eq(p_gpoolsim_stream_hold(done), 0); /* p's write completes, unknown to the host */
    cr_assert_eq(p_gpoolsim_stream_hold(queued), 0);
    touch(queued, q, 4096, 1); /* still queued */
    cr_assert_eq(p_cuStreamDestroy(done), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamDestroy(queued), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 1, "the queued write had to be let go");
    cr_assert_eq(p_cuMemFree(p), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemFree(q), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

static void setup_reuse(void)
{
    deliberate();
    setenv("GPOOL_SIM_REUSE_STREAM_HANDLES", "1", 1);
    load(1);
}

Test(order, reuse_mode_hands_a_destroyed_streams_handle_to_a_new_stream, .init = setup_reuse)
{
    CUstream s = stream(0);
    CUevent e = event();
    CUdeviceptr p = dalloc(64);
    cr_assert_eq(p_gpoolsim_stream_hold(s), 0);
    touch(s, p, 64, 1);
    cr_assert_eq(p_cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamDestroy(s), CUDA_SUCCESS);
    CUstream t = stream(CU_STREAM_NON_BLOCKING);
    cr_assert_eq(t, s, "the destroyed stream's handle value comes back");
    unsigned flags = 0;
    cr_assert_eq(p_cuStreamGetFlags(t, &flags), CUDA_SUCCESS);
    cr_assert_eq(flags, CU_STREAM_NON_BLOCKING, "a new stream behind the old value");
    cr_assert_eq(p_cuStreamQuery(t), CUDA_SUCCESS, "none of the old stream's work");
    cr_assert_eq(p_cuEventQuery(e), CUDA_ERROR_NOT_READY, "the old work is still queued");
    touch(t, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1, "same handle value, different stream: a race");
}

/* ---- reporting ---- */

static void setup_strict(void)
{
    unsetenv("GPOOL_SIM_VIOLATION_LOG");
    setenv("GPOOL_SIM_STRICT", "1", 1);
    load(1);
}

Test(order, strict_mode_aborts_at_the_first_violation, .init = setup_strict, .signal = SIGABRT)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    touch(a, p, 64, 1);
    touch(b, p, 64, 0); /* aborts */
}

Test(order, strict_mode_does_not_abort_without_violations, .init = setup_strict)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUdeviceptr p = dalloc(64);
    touch(a, p, 64, 1);
    cr_assert_eq(p_cuEventRecord(e, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamWaitEvent(b, e, 0), CUDA_SUCCESS);
    touch(b, p, 64, 0);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

static char log_path[64];
static void setup_log(void)
{
    snprintf(log_path, sizeof log_path, "/tmp/gpoolsim-vlog-XXXXXX");
    int fd = mkstemp(log_path);
    cr_assert_geq(fd, 0);
    close(fd);
    deliberate();
    setenv("GPOOL_SIM_VIOLATION_LOG", log_path, 1);
    load(1);
}

Test(order, violation_log_gets_one_line_per_violation, .init = setup_log)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    touch(a, p, 64, 1);
    touch(b, p, 64, 1);
    touch(a, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 2);
    FILE *f = fopen(log_path, "r");
    cr_assert_not_null(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        cr_assert_not_null(strstr(line, "no happens-before order"), "%s", line);
    }
    fclose(f);
    unlink(log_path);
    cr_assert_eq(lines, 2);
}

static char stats_path[64];
static void setup_stats(void)
{
    snprintf(stats_path, sizeof stats_path, "/tmp/gpoolsim-ostats-XXXXXX");
    int fd = mkstemp(stats_path);
    cr_assert_geq(fd, 0);
    close(fd);
    deliberate();
    setenv("GPOOL_SIM_STATS", stats_path, 1);
    load(1);
}

Test(order, statistics_json_counts_violations, .init = setup_stats)
{
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64);
    touch(a, p, 64, 1);
    touch(b, p, 64, 1);
    touch(NULL, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 2);
    cr_assert_eq(dlclose(lib), 0); /* last reference: the statistics are written */
    FILE *f = fopen(stats_path, "r");
    cr_assert_not_null(f);
    char json[8192];
    size_t n = fread(json, 1, sizeof json - 1, f);
    fclose(f);
    unlink(stats_path);
    json[n] = 0;
    cr_assert_not_null(strstr(json, "\"violations\":2}"), "%s", json);
}

Test(order, freeing_or_unregistering_host_memory_with_pending_accesses_is_a_violation,
     .init = setup1)
{
    CUresult (*host_alloc)(void **, size_t, unsigned) = sym("cuMemHostAlloc");
    CUresult (*free_host)(void *) = sym("cuMemFreeHost");
    CUresult (*reg)(void *, size_t, unsigned) = sym("cuMemHostRegister_v2");
    CUresult (*unreg)(void *) = sym("cuMemHostUnregister");
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    void *h;
    cr_assert_eq(host_alloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    touch(s, (CUdeviceptr)(uintptr_t)h, 4096, 1);
    cr_assert_eq(free_host(h), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 1);
    static char buf[8192] __attribute__((aligned(4096)));
    cr_assert_eq(reg(buf, sizeof buf, 0), CUDA_SUCCESS);
    touch(s, (CUdeviceptr)(uintptr_t)buf, 100, 0);
    cr_assert_eq(p_cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(unreg(buf), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 1, "synchronized first: no violation");
    cr_assert_eq(reg(buf, sizeof buf, 0), CUDA_SUCCESS);
    touch(s, (CUdeviceptr)(uintptr_t)buf, 100, 0);
    cr_assert_eq(unreg(buf), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 2);
}

Test(order, synchronous_device_to_host_copy_completes_the_legacy_stream_for_the_host,
     .init = setup1)
{
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = dalloc(64), q = dalloc(64);
    char host[64];
    cr_assert_eq(p_cuMemsetD8(p, 1, 64), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemcpyDtoH(host, p, 64), CUDA_SUCCESS); /* returns once complete */
    touch(s, p, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    cr_assert_eq(p_cuMemsetD8(q, 1, 64), CUDA_SUCCESS); /* asynchronous to the host */
    touch(s, q, 64, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

Test(order, ptsz_synchronize_of_null_is_the_calling_threads_stream, .init = setup1)
{
    CUresult (*sync_ptsz)(CUstream) = sym("cuStreamSynchronize_ptsz");
    CUresult (*query_ptsz)(CUstream) = sym("cuStreamQuery_ptsz");
    CUevent e = event();
    cr_assert_eq(p_gpoolsim_stream_hold(CU_STREAM_PER_THREAD), 0);
    cr_assert_eq(p_cuEventRecord(e, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamQuery(NULL), CUDA_SUCCESS, "the legacy stream has nothing queued");
    cr_assert_eq(query_ptsz(NULL), CUDA_ERROR_NOT_READY);
    cr_assert_eq(p_cuStreamSynchronize(NULL), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 0);
    cr_assert_eq(sync_ptsz(NULL), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_forced_syncs(), 1);
    cr_assert_eq(p_cuEventQuery(e), CUDA_SUCCESS);
}

Test(order, waiting_on_an_event_recorded_in_a_capture_joins_the_capture, .init = setup1)
{
    CUresult (*info)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                     const CUgraphNode **, const CUgraphEdgeData **, size_t *) =
        sym("cuStreamGetCaptureInfo_v3");
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING);
    CUevent e = event();
    CUgraph g;
    CUstreamCaptureStatus st;
    cuuint64_t id_a = 0, id_b = 0;
    cr_assert_eq(p_cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(p_cuEventRecord(e, a), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamWaitEvent(b, e, 0), CUDA_SUCCESS);
    cr_assert_eq(info(a, &st, &id_a, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(info(b, &st, &id_b, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(id_a, id_b);
    cr_assert_eq(p_cuStreamEndCapture(a, &g), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamIsCapturing(b, &st), CUDA_SUCCESS);
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE, "the capture ended for both");
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_SUCCESS);
    cr_assert_eq(p_cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
}

Test(order, a_recycled_stream_id_keeps_races_visible, .init = setup1)
{
    CUdeviceptr p = dalloc(64);
    CUstream c = stream(CU_STREAM_NON_BLOCKING);
    for (int round = 0; round < 3; round++) {
        CUstream a = stream(CU_STREAM_NON_BLOCKING);
        CUevent e = event();
        touch(a, p, 64, 1);
        cr_assert_eq(p_cuEventRecord(e, a), CUDA_SUCCESS);
        cr_assert_eq(p_cuStreamWaitEvent(c, e, 0), CUDA_SUCCESS); /* c knows a up to now */
        touch(c, p, 64, 0);
        cr_assert_eq(p_cuStreamSynchronize(c), CUDA_SUCCESS); /* the next round's write is safe */
        cr_assert_eq(p_cuStreamSynchronize(a), CUDA_SUCCESS);
        cr_assert_eq(p_cuEventDestroy(e), CUDA_SUCCESS);
        cr_assert_eq(p_cuStreamDestroy(a), CUDA_SUCCESS); /* its id may go to the next stream */
    }
    CUstream b = stream(CU_STREAM_NON_BLOCKING);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(b, p, 64, 1); /* after the host-known past: fine */
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(c, p, 64, 0); /* c knew the old streams, not b */
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

/* Under unified addressing each registration is mapped at its own host address, so a kernel
 * reaches a range that runs over adjacent registrations; a range past them is refused. */
Test(order, touch_may_span_adjacent_registrations, .init = setup1)
{
    CUresult (*reg)(void *, size_t, unsigned) = sym("cuMemHostRegister_v2");
    CUresult (*unreg)(void *) = sym("cuMemHostUnregister");
    static char buf[3 * 4096] __attribute__((aligned(4096)));
    cr_assert_eq(reg(buf, 4096, 0), CUDA_SUCCESS);
    cr_assert_eq(reg(buf + 4096, 4096, 0), CUDA_SUCCESS);
    CUstream s = stream(CU_STREAM_NON_BLOCKING);
    cr_assert_eq(p_gpoolsim_touch(s, (CUdeviceptr)(uintptr_t)(buf + 100), 8000, 1), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_touch(s, (CUdeviceptr)(uintptr_t)buf, 3 * 4096, 1),
                 CUDA_ERROR_INVALID_VALUE, "the third page is not registered");
    cr_assert_eq(p_cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(unreg(buf), CUDA_SUCCESS);
    cr_assert_eq(unreg(buf + 4096), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}
