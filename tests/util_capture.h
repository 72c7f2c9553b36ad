/* util_capture.h — the driver calls the graph-capture and PyTorch-hook tests make (streams,
 * events, stream capture) through the simulator, and the few steps they all repeat: a stream,
 * "u waits for s", begin or end a capture, open or close a PyTorch pool window in either of the
 * hooks' forms. Criterion assertions on failure. */
#ifndef GPOOL_TESTS_UTIL_CAPTURE_H
#define GPOOL_TESTS_UTIL_CAPTURE_H

#include <stddef.h>

#include "gpool_torch.h"
#include "util_sim.h"

struct capture_driver {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*stream_wait_event)(CUstream, CUevent, unsigned);
    CUresult (*ctx_set_current)(CUcontext);
    /* NULL where the simulator has no graph capture */
    CUresult (*begin_capture)(CUstream, CUstreamCaptureMode);
    CUresult (*end_capture)(CUstream, CUgraph *);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*graph_destroy)(CUgraph);
    CUcontext ctx[2]; /* primary contexts of devices 0 and 1 (1 only when loaded with 2) */
};

/* Filled by capture_load(). */
extern struct capture_driver drv;

/* cuInit, the primary contexts of the first `devices` (1 or 2) retained, device 0's current.
 * Skips the test when the simulator is not the driver, and when need_capture and it has no
 * stream capture. Call it from a suite's .init. */
void capture_load(int devices, int need_capture);

/* A new non-blocking stream. */
CUstream capture_stream(void);
/* u waits for the work queued on s so far (torch.cuda.Stream.wait_stream). */
void capture_order_after(CUstream u, CUstream s);
/* cuStreamBeginCapture in global mode, asserting success. */
void capture_begin(CUstream s);
/* cuStreamEndCapture, asserting the capture was not invalidated; the graph. */
CUgraph capture_end(CUstream s);
/* cuGraphDestroy on a graph, nothing on NULL. */
void capture_destroy(CUgraph g);

/* A PyTorch pool window: torch 2.1/2.2's hooks name the capturing stream (stream_form 1:
 * begin/end_allocate_stream_to_pool), 2.3+'s do not (0: begin/end_allocate_to_pool with no
 * filter). */
void window_open(int stream_form, CUstream s, gpool_torch_mempool_id id);
void window_close(int stream_form, CUstream s, gpool_torch_mempool_id id);

/* Whether [a, a+na) and [b, b+nb) share a byte. */
int ranges_overlap(const void *a, size_t na, const void *b, size_t nb);

#endif /* GPOOL_TESTS_UTIL_CAPTURE_H */
