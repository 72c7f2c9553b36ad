/* util_capture.c — the graph-capture tests' driver calls and repeated steps (util_capture.h). */
#include <criterion/criterion.h>

#include "util_capture.h"
#include "util_skip.h"

struct capture_driver drv;

void capture_load(int devices, int need_capture)
{
    NEED_SIM();
    cr_assert_not_null(sim_api());
    CUresult (*init)(unsigned) = sim_driver_proc("cuInit");
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    cr_assert(init && retain && init(0) == CUDA_SUCCESS);
    drv.stream_create = sim_driver_proc("cuStreamCreate");
    drv.stream_destroy = sim_driver_proc("cuStreamDestroy");
    drv.event_create = sim_driver_proc("cuEventCreate");
    drv.event_record = sim_driver_proc("cuEventRecord");
    drv.stream_wait_event = sim_driver_proc("cuStreamWaitEvent");
    drv.ctx_set_current = sim_driver_proc("cuCtxSetCurrent");
    drv.begin_capture = sim_driver_proc("cuStreamBeginCapture");
    drv.end_capture = sim_driver_proc("cuStreamEndCapture");
    drv.is_capturing = sim_driver_proc("cuStreamIsCapturing");
    drv.graph_destroy = sim_driver_proc("cuGraphDestroy");
    cr_assert(drv.stream_create && drv.stream_destroy && drv.event_create && drv.event_record &&
              drv.stream_wait_event && drv.ctx_set_current);
    int capture = drv.begin_capture && drv.end_capture && drv.is_capturing && drv.graph_destroy;
    if (need_capture && !capture) cr_skip_test("no graph capture in the simulator");
    cr_assert_eq(retain(&drv.ctx[0], 0), CUDA_SUCCESS);
    if (devices > 1)
        cr_assert_eq(retain(&drv.ctx[1], 1), CUDA_SUCCESS,
                     "two devices: was the simulator loaded before GPOOL_SIM_DEVICES was set?");
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
}

CUstream capture_stream(void)
{
    CUstream s;
    cr_assert_eq(drv.stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

void capture_order_after(CUstream u, CUstream s)
{
    CUevent ev;
    cr_assert_eq(drv.event_create(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(drv.event_record(ev, s), CUDA_SUCCESS);
    cr_assert_eq(drv.stream_wait_event(u, ev, 0), CUDA_SUCCESS);
}

void capture_begin(CUstream s)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture in the simulator");
    cr_assert_eq(drv.begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
}

CUgraph capture_end(CUstream s)
{
    CUgraph g = NULL;
    CUresult r = drv.end_capture(s, &g);
    cr_assert_eq(r, CUDA_SUCCESS, "cuStreamEndCapture: %d (the capture was invalidated)", (int)r);
    return g;
}

void capture_destroy(CUgraph g)
{
    if (g && drv.graph_destroy) drv.graph_destroy(g);
}

void window_open(int stream_form, CUstream s, gpool_torch_mempool_id id)
{
    if (stream_form)
        gpool_torch_begin_allocate_stream_to_pool(0, s, id);
    else
        gpool_torch_begin_allocate_to_pool(0, id, NULL);
}

void window_close(int stream_form, CUstream s, gpool_torch_mempool_id id)
{
    if (stream_form)
        gpool_torch_end_allocate_stream_to_pool(0, s);
    else
        gpool_torch_end_allocate_to_pool(0, id);
}

int ranges_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    return (const char *)a < (const char *)b + nb && (const char *)b < (const char *)a + na;
}
