/* streams_prog.c — streams the program destroys and graphs it captures, under the drop-in.
 * Linked with -lcuda (the simulated libcuda.so.1), as direct_prog is.
 * Usage: streams_prog MODE [ARGS]; prints key=value words, exits 0 when the mode's checks hold.
 *   lifetime CYCLES SYNC [HELD]  CYCLES times: a non-blocking stream, cuMemAllocAsync x3, a
 * "kernel" writing each block (gpoolsim_touch), cuMemFreeAsync x3, with SYNC=1 cuStreamSynchronize,
 * then cuStreamDestroy (legal with work still queued). Prints the simulator's reserved bytes, live
 * events and streams at cycle 1000 and at the end, violations, and the calls that named a destroyed
 * stream. HELD=1: each stream's kernels are held (gpoolsim_stream_hold) until a cuCtxSynchronize at
 * the end, so every stream is destroyed with its work still queued. capture MODE          MODE =
 * global | relaxed: cuMemAllocAsync (and cudaMallocAsync when the interposer exports it) on a
 * capturing stream, their frees there, the capture ended; then an eager cuMemAllocAsync on another
 * stream. Prints the graph nodes the driver saw (cuMemAllocAsync calls during the capture) and
 * whether the eager block overlaps a graph's. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../sim/gpool_sim.h"
#define PROG_DRIVER_LINKED
#include "prog_driver.h"

static void report(const char *at)
{
    struct gpoolsim_live live;
    gpoolsim_get_live(&live);
    printf("%s_reserved=%zu %s_events=%zu %s_streams=%zu\n", at, gpoolsim_bytes_in_use(0), at,
           live.events, at, live.streams);
}

static int lifetime(int cycles, int sync, int held)
{
    static const size_t sizes[3] = {(size_t)1 << 20, (size_t)3 << 20, (size_t)64 << 10};
    for (int c = 1; c <= cycles; c++) {
        CUstream s;
        CUdeviceptr p[3];
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        for (int i = 0; i < 3; i++)
            CHECK(cuMemAllocAsync(&p[i], sizes[i], s) == CUDA_SUCCESS);
        if (held) CHECK(gpoolsim_stream_hold(s) == 0);
        for (int i = 0; i < 3; i++)
            CHECK(gpoolsim_touch(s, p[i], sizes[i], 1) == CUDA_SUCCESS);
        for (int i = 0; i < 3; i++)
            CHECK(cuMemFreeAsync(p[i], s) == CUDA_SUCCESS);
        if (sync && !held) CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
        CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
        if (c == 1000) report("c1000");
    }
    if (held) { /* the work completes; one more cycle lets gpool see it */
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        CUstream s;
        CUdeviceptr p;
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        CHECK(cuMemAllocAsync(&p, sizes[0], s) == CUDA_SUCCESS);
        CHECK(gpoolsim_touch(s, p, sizes[0], 1) == CUDA_SUCCESS);
        CHECK(cuMemFreeAsync(p, s) == CUDA_SUCCESS);
        CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
    }
    report("end");
    printf("violations=%lu destroyed_stream_calls=%lu event_records=%lu\n", gpoolsim_violations(),
           gpoolsim_destroyed_stream_calls(), gpoolsim_call_count("cuEventRecord"));
    return 0;
}

typedef int (*malloc_async_fn)(void **, size_t, CUstream);
typedef int (*free_async_fn)(void *, CUstream);

static int overlaps(CUdeviceptr a, size_t na, CUdeviceptr b, size_t nb)
{
    return a < b + nb && b < a + na;
}

static int capture(const char *how)
{
    enum { SZ = 1 << 20 };
    CUstreamCaptureMode mode =
        !strcmp(how, "relaxed") ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_GLOBAL;
    malloc_async_fn rt_malloc;
    free_async_fn rt_free;
    *(void **)&rt_malloc = dlsym(RTLD_DEFAULT, "cudaMallocAsync");
    *(void **)&rt_free = dlsym(RTLD_DEFAULT, "cudaFreeAsync");
    CUstream s, other;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    /* warm the cache: a block freed on s is what a cached path would hand the capture */
    CUdeviceptr warm;
    CHECK(cuMemAllocAsync(&warm, SZ, s) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(warm, s) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CUdeviceptr warm2; /* an eager block, still live during the capture */
    CHECK(cuMemAllocAsync(&warm2, SZ, s) == CUDA_SUCCESS);
    unsigned long before = gpoolsim_call_count("cuMemAllocAsync");
    CHECK(cuStreamBeginCapture(s, mode) == CUDA_SUCCESS);
    CUdeviceptr g = 0, gr = 0;
    CHECK(cuMemAllocAsync(&g, SZ, s) == CUDA_SUCCESS);
    CHECK(gpoolsim_touch(s, g, SZ, 1) == CUDA_SUCCESS);
    if (rt_malloc) {
        void *q = NULL;
        CHECK(rt_malloc(&q, SZ, s) == 0);
        gr = (CUdeviceptr)(uintptr_t)q;
        CHECK(gpoolsim_touch(s, gr, SZ, 1) == CUDA_SUCCESS);
        CHECK(rt_free(q, s) == 0);
    }
    CHECK(cuMemFreeAsync(g, s) == CUDA_SUCCESS);
    /* an eager block freed in the capture: only graph allocations may get a free node */
    CUresult eager_free = cuMemFreeAsync(warm2, s);
    int rt_eager_free = rt_free ? rt_free((void *)(uintptr_t)warm2, s) : 1;
    CUgraph graph;
    CUresult end = cuStreamEndCapture(s, &graph);
    unsigned long nodes = gpoolsim_call_count("cuMemAllocAsync") - before;
    CHECK(end == CUDA_SUCCESS);
    /* eager work on another stream, while the graph exists */
    CUdeviceptr e;
    CHECK(cuMemAllocAsync(&e, SZ, other) == CUDA_SUCCESS);
    CHECK(gpoolsim_touch(other, e, SZ, 1) == CUDA_SUCCESS);
    int overlap = overlaps(e, SZ, g, SZ) || (gr && overlaps(e, SZ, gr, SZ));
    CHECK(cuMemFreeAsync(e, other) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(other) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(warm2, s) == CUDA_SUCCESS); /* still live: freed eagerly now */
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS && cuStreamDestroy(other) == CUDA_SUCCESS);
    struct gpoolsim_live live;
    gpoolsim_get_live(&live);
    printf("capture=%s runtime=%d graph_alloc_nodes=%lu eager_overlaps_graph=%d "
           "graph_allocs_live=%zu eager_free_in_capture=%d rt_eager_free_in_capture=%d "
           "violations=%lu\n",
           how, rt_malloc != NULL, nodes, overlap, live.legacy_allocs, (int)eager_free,
           rt_eager_free, gpoolsim_violations());
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "lifetime";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (prog_linked_setup(1) != 0) return 1;
    if (!strcmp(mode, "lifetime"))
        return lifetime(argc > 2 ? atoi(argv[2]) : 1000, argc > 3 ? atoi(argv[3]) : 0,
                        argc > 4 ? atoi(argv[4]) : 0);
    if (!strcmp(mode, "capture")) return capture(argc > 2 ? argv[2] : "global");
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
}
