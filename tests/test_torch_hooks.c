/* The PyTorch pluggable-allocator hooks (include/gpool_torch.h) driven as PyTorch drives them:
 * alloc(size, device, stream) and free(ptr, size, device, stream) only, with no record_stream
 * hint. A tensor used on a side stream (x.record_stream(u), then freed: DDP/NCCL, prefetchers,
 * pin_memory + non_blocking copies) must not be handed out again while u's work may still use
 * it. Refereed by the strict simulator (GPOOL_SIM_STRICT=1 in make test); needs it. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "gpool_torch.h"
#include "util_capture.h"
#include "util_sim.h"
#include "util_skip.h"

#define MIB ((size_t)1 << 20)

static const struct sim_api *sim;

static void setup(void)
{
    capture_load(1, 0);
    sim = sim_api();
}

TestSuite(torch_hooks, .init = setup);

/* x = alloc on s; written on s; u waits for s and uses x (record_stream(u) in PyTorch, which
 * the hooks never hear of); x freed on s; the next allocation on s is written at once. Before
 * the batch rule the block came back 5 times in 5 and each write raced u's. */
Test(torch_hooks, record_stream_case_is_not_reused_while_the_side_stream_may_use_it)
{
    CUstream s = capture_stream(), u = capture_stream();
    size_t n = 4 * MIB;
    int reused = 0;
    for (int i = 0; i < 5; i++) {
        void *x = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(x, "%s", gpool_last_error());
        cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
        capture_order_after(u, s);
        cr_assert_eq(sim_kernel(u, x, n), CUDA_SUCCESS); /* u's work stays queued */
        gpool_torch_free(x, n, 0, s);
        void *y = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(y, "%s", gpool_last_error());
        reused += ranges_overlap(x, n, y, n);
        cr_assert_eq(sim_kernel(s, y, n), CUDA_SUCCESS); /* strict: aborts on a race */
        gpool_torch_free(y, n, 0, s);
    }
    cr_assert_eq(reused, 0, "handed out again %d times in 5 while u's work was pending", reused);
    cr_assert_eq(sim->violations(), 0);
}

/* The same with the tensor freed on u's side and reused by a third stream. */
Test(torch_hooks, another_stream_does_not_get_it_either)
{
    CUstream s = capture_stream(), u = capture_stream(), w = capture_stream();
    size_t n = 4 * MIB;
    for (int i = 0; i < 5; i++) {
        void *x = gpool_torch_alloc(n, 0, s);
        cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
        capture_order_after(u, s);
        cr_assert_eq(sim_kernel(u, x, n), CUDA_SUCCESS);
        gpool_torch_free(x, n, 0, s);
        void *y = gpool_torch_alloc(n, 0, w);
        cr_assert_eq(sim_kernel(w, y, n), CUDA_SUCCESS);
        gpool_torch_free(y, n, 0, w);
    }
    cr_assert_eq(sim->violations(), 0);
}

/* Freed blocks come back once a batch holds cudafree_batch bytes: one device synchronize per
 * batch; memory stays bounded by the batch; the cost is measured (synchronizes per 1,000
 * frees). */
Test(torch_hooks, batch_flush_bounds_memory_and_counts_synchronizes)
{
    setenv("GPOOL_CONF", "cudafree_batch=64M", 1);
    CUstream s = capture_stream(), u = capture_stream();
    size_t n = 4 * MIB;
    sim->reset_counts();
    int frees = 0;
    for (int i = 0; i < 1000; i++) {
        void *x = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(x, "%s", gpool_last_error());
        cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
        capture_order_after(u, s);
        cr_assert_eq(sim_kernel(u, x, n), CUDA_SUCCESS);
        gpool_torch_free(x, n, 0, s);
        frees++;
    }
    unsigned long syncs = sim->call_count("cuCtxSynchronize");
    fprintf(stderr,
            "torch hooks: %d frees of 4 MiB, batch 64 MiB: %lu synchronizes (%.1f per "
            "1,000 frees), peak %zu MiB\n",
            frees, syncs, 1000.0 * (double)syncs / frees, sim->peak_bytes(0) / MIB);
    cr_assert_geq(syncs, 1000 / 17, "a synchronize per 64 MiB batch");
    cr_assert_leq(syncs, 1000 / 16 + 2);
    cr_assert_leq(sim->peak_bytes(0), 64 * MIB + 32 * MIB, "the batch bounds the memory held");
    cr_assert_eq(sim->violations(), 0);
    unsetenv("GPOOL_CONF");
}

/* An allocation that finds no memory flushes the batch and retries before it reports NULL. */
Test(torch_hooks, out_of_memory_flushes_the_batch_first)
{
    setenv("GPOOL_CONF", "cudafree_batch=4G", 1);
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), u = capture_stream();
    size_t n = 8 * MIB;
    for (int i = 0; i < 40; i++) {
        void *x = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(x, "iteration %d: %s", i, gpool_last_error());
        cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
        capture_order_after(u, s);
        cr_assert_eq(sim_kernel(u, x, n), CUDA_SUCCESS);
        gpool_torch_free(x, n, 0, s);
    }
    cr_assert_eq(sim->violations(), 0);
    unsetenv("GPOOL_CONF");
}

/* empty_cache flushes the batch, then gives the cached memory back. */
Test(torch_hooks, empty_cache_flushes_the_batch)
{
    CUstream s = capture_stream();
    void *x = gpool_torch_alloc(4 * MIB, 0, s);
    cr_assert_eq(sim_kernel(s, x, 4 * MIB), CUDA_SUCCESS);
    gpool_torch_free(x, 4 * MIB, 0, s);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.blocks, 1);
    cr_assert_eq(b.requested_bytes, 4 * MIB);
    cr_assert_geq(b.bytes, 4 * MIB);
    cr_assert_eq(b.frees, 1);
    cr_assert_geq(b.limit, 64 * MIB);
    cr_assert_eq(gpool_torch_get_batch_stats(99, &b), GPOOL_ERR_NO_DEVICE);
    cr_assert_eq(gpool_torch_get_batch_stats(0, NULL), GPOOL_ERR_INVALID_ARG);
    gpool_torch_empty_cache();
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.blocks, 0);
    cr_assert_eq(b.bytes, 0);
    cr_assert_eq(b.flushes, 1);
    cr_assert_eq(sim->bytes_in_use(0), 0, "the batch's block went back, then to the driver");
    gpool_stats st;
    st.struct_size = sizeof st;
    cr_assert_eq(gpool_get_stats(gpool_torch_pool(0), &st), GPOOL_OK);
    cr_assert_eq(st.kind[0].live_blocks, 0);
}

/* torch.cuda.graph after warm-up: the warm-up's frees wait in the batch, and the capture
 * (where no synchronize is allowed) must still find memory on its stream, as it did before
 * the batch, and leave the capture valid. */
Test(torch_hooks, capture_after_warm_up_still_finds_its_streams_memory)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture in the simulator");
    CUstream s = capture_stream();
    size_t n = 8 * MIB;
    void *x = gpool_torch_alloc(n, 0, s); /* warm-up */
    cr_assert_not_null(x);
    cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
    gpool_torch_free(x, n, 0, s);
    capture_begin(s);
    void *y = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(y, "capture allocation failed: %s", gpool_last_error());
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture was invalidated");
    CUgraph g = capture_end(s);
    capture_destroy(g);
    gpool_torch_free(y, n, 0, s);
    cr_assert_eq(sim->violations(), 0);
}

/* torch.cuda.graph: an intermediate freed inside the capture and the graph's output freed after
 * it must not be handed to eager work while the graph may replay (a replay would overwrite
 * live eager tensors), however many batches flush meanwhile; the release gives them back. */
Test(torch_hooks, graph_memory_is_kept_from_eager_reuse_until_released)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture in the simulator");
    setenv("GPOOL_CONF", "cudafree_batch=16M", 1);
    CUstream s = capture_stream();
    size_t n = 8 * MIB;
    void *w1 = gpool_torch_alloc(n, 0, s), *w2 = gpool_torch_alloc(n, 0, s); /* warm-up */
    cr_assert(w1 && w2);
    gpool_torch_free(w1, n, 0, s);
    gpool_torch_free(w2, n, 0, s);
    capture_begin(s);
    void *tmp = gpool_torch_alloc(n, 0, s); /* an intermediate */
    void *out = gpool_torch_alloc(n, 0, s); /* the graph's output */
    cr_assert(tmp && out, "%s", gpool_last_error());
    gpool_torch_free(tmp, n, 0, s); /* freed inside the capture */
    CUgraph g = capture_end(s);
    gpool_torch_free(out, n, 0, s); /* the graph lives on */
    for (int i = 0; i < 20; i++) {  /* eager work: batches flush */
        void *a = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(a, "%s", gpool_last_error());
        cr_assert(!ranges_overlap(a, n, tmp, n), "eager block %d got the graph's intermediate", i);
        cr_assert(!ranges_overlap(a, n, out, n), "eager block %d got the graph's output", i);
        cr_assert_eq(sim_kernel(s, a, n), CUDA_SUCCESS);
        gpool_torch_free(a, n, 0, s);
    }
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_geq(b.flushes, 2);
    cr_assert_eq(b.graph_blocks, 2);
    cr_assert_geq(b.graph_bytes, 2 * n);
    capture_destroy(g);
    cr_assert_eq(gpool_torch_release_graph_memory(), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0);
    cr_assert_eq(b.graph_bytes, 0);
    cr_assert_eq(sim->violations(), 0);
    unsetenv("GPOOL_CONF");
}

/* torch 2.1+ hands a pluggable allocator graph-pool hooks: CUDAGraph::capture_begin begins its
 * pool, CUDAGraph::reset releases it, torch.cuda.use_mem_pool begins and releases around its
 * block. The graph memory goes back when the last live pool is released, not before. */
Test(torch_hooks, graph_memory_goes_back_when_torch_releases_the_last_pool)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture in the simulator");
    CUstream s = capture_stream();
    size_t n = 4 * MIB;
    gpool_torch_mempool_id graph_pool = {1, 0}, user_pool = {0, 7};
    void *w1 = gpool_torch_alloc(n, 0, s), *w2 = gpool_torch_alloc(n, 0, s); /* warm-up */
    cr_assert(w1 && w2);
    gpool_torch_free(w1, n, 0, s);
    gpool_torch_free(w2, n, 0, s);
    gpool_torch_begin_allocate_to_pool(0, graph_pool, NULL);
    capture_begin(s);
    void *tmp = gpool_torch_alloc(n, 0, s), *out = gpool_torch_alloc(n, 0, s);
    cr_assert(tmp && out, "%s", gpool_last_error());
    gpool_torch_free(tmp, n, 0, s);
    CUgraph g = capture_end(s);
    gpool_torch_free(out, n, 0, s);
    /* a use_mem_pool block elsewhere: its release must not free the live graph's memory */
    gpool_torch_begin_allocate_stream_to_pool(0, s, user_pool);
    cr_assert_eq(gpool_torch_live_pools(), 2);
    gpool_torch_release_pool(0, user_pool);
    gpool_torch_release_pool(0, (gpool_torch_mempool_id){9, 9}); /* never begun: ignored */
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 2, "released while a graph may replay");
    void *freed[4];
    size_t count = 0;
    cr_assert_eq(gpool_torch_get_freed(0, freed, 4, &count), GPOOL_OK);
    cr_assert_geq(count, 2);
    int seen = 0;
    for (size_t i = 0; i < count && i < 4; i++)
        seen += freed[i] == tmp || freed[i] == out;
    cr_assert_eq(seen, 2);
    capture_destroy(g);
    gpool_torch_release_pool(0, graph_pool); /* the graph is reset: nothing may replay */
    cr_assert_eq(gpool_torch_live_pools(), 0);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0, "the last release did not give the graph memory back");
    /* a graph block still live at the release (the graph's output, kept by the program) is
     * ordinary memory once freed: no graph is left to replay on it */
    void *w3 = gpool_torch_alloc(n, 0, s); /* warm-up for the second capture */
    cr_assert_not_null(w3);
    gpool_torch_free(w3, n, 0, s);
    gpool_torch_begin_allocate_to_pool(0, graph_pool, NULL);
    capture_begin(s);
    void *kept = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(kept, "%s", gpool_last_error());
    CUgraph g2 = capture_end(s);
    capture_destroy(g2);
    gpool_torch_release_pool(0, graph_pool);
    gpool_torch_free(kept, n, 0, s);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0, "freed after its graph went, yet held as graph memory");
    cr_assert_geq(b.blocks, 1);
    cr_assert_eq(sim->violations(), 0);
}

/* One capture into a graph pool, as CUDAGraph::capture_begin/capture_end drive the hooks of
 * torch 2.3+ (begin, capture, end-allocate, end capture): an intermediate freed inside it and its
 * output freed after it. Returns the graph; *tmp and *out the two blocks. */
static CUgraph capture_into(CUstream s, gpool_torch_mempool_id id, size_t n, void **tmp, void **out)
{
    gpool_torch_begin_allocate_to_pool(0, id, NULL);
    capture_begin(s);
    *tmp = gpool_torch_alloc(n, 0, s);
    *out = gpool_torch_alloc(n, 0, s);
    cr_assert(*tmp && *out, "%s", gpool_last_error());
    gpool_torch_free(*tmp, n, 0, s);
    gpool_torch_end_allocate_to_pool(0, id);
    CUgraph g = capture_end(s);
    gpool_torch_free(*out, n, 0, s);
    return g;
}

/* Two graphs in two pools (vLLM's batch sizes, recaptures after a reset): resetting one gives
 * its memory back while the other lives, and only its memory; the live graph's stays held. */
Test(torch_hooks, each_pool_gives_its_graph_memory_back_at_its_own_release)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture");
    CUstream s = capture_stream();
    size_t n = 4 * MIB;
    gpool_torch_mempool_id pa = {1, 0}, pb = {2, 0};
    void *w = gpool_torch_alloc(n, 0, s); /* warm-up */
    cr_assert_not_null(w);
    gpool_torch_free(w, n, 0, s);
    void *a_tmp, *a_out, *b_tmp, *b_out;
    CUgraph ga = capture_into(s, pa, n, &a_tmp, &a_out);
    CUgraph gb = capture_into(s, pb, n, &b_tmp, &b_out);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 4);
    capture_destroy(ga);
    gpool_torch_release_pool(0, pa); /* graph A is reset; B may still replay */
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 2, "A's 2 blocks should be back, B's 2 held: %zu held",
                 b.graph_blocks);
    void *held[4];
    size_t count = 0;
    cr_assert_eq(gpool_torch_get_freed(0, held, 4, &count), GPOOL_OK);
    for (size_t i = 0; i < count && i < 4; i++)
        cr_assert(held[i] != a_tmp && held[i] != a_out, "A's block %p still held", held[i]);
    /* eager work never gets B's memory while B lives */
    for (int i = 0; i < 4; i++) {
        void *e = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(e);
        cr_assert(!ranges_overlap(e, n, b_tmp, n) && !ranges_overlap(e, n, b_out, n),
                  "eager block %d got graph B's memory", i);
        gpool_torch_free(e, n, 0, s);
    }
    capture_destroy(gb);
    gpool_torch_release_pool(0, pb);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0);
    cr_assert_eq(gpool_torch_live_pools(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* Graph A's output, freed inside graph B's capture, is used by both graphs: releasing B alone
 * must not give it back while A may still replay on it. */
Test(torch_hooks, a_block_two_graphs_use_waits_for_both_releases)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture");
    CUstream s = capture_stream();
    size_t n = 4 * MIB;
    gpool_torch_mempool_id pa = {4, 0}, pb = {5, 0};
    CUgraph ga = NULL, gb = NULL;
    gpool_torch_begin_allocate_to_pool(0, pa, NULL);
    capture_begin(s);
    void *a_out = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(a_out, "%s", gpool_last_error());
    gpool_torch_end_allocate_to_pool(0, pa);
    ga = capture_end(s);
    gpool_torch_begin_allocate_to_pool(0, pb, NULL);
    capture_begin(s);
    gpool_torch_free(a_out, n, 0, s); /* B's kernels read it, then it is dropped */
    gpool_torch_end_allocate_to_pool(0, pb);
    gb = capture_end(s);
    gpool_torch_release_pool(0, pb);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 1, "graph A may still replay on its output");
    gpool_torch_release_pool(0, pa);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0);
    capture_destroy(ga);
    capture_destroy(gb);
}

/* torch 2.1/2.2 pass the capturing stream to begin and end: a capture's blocks belong to the
 * window begun on its stream even while a use_mem_pool window is open on another. */
Test(torch_hooks, the_stream_tells_a_captures_pool_apart_from_another_open_window)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture");
    CUstream s = capture_stream(), other = capture_stream();
    size_t n = 4 * MIB;
    gpool_torch_mempool_id graph = {3, 0}, user = {0, 9};
    gpool_torch_begin_allocate_stream_to_pool(0, other, user); /* stays open */
    gpool_torch_begin_allocate_stream_to_pool(0, s, graph);
    capture_begin(s);
    void *x = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(x, "%s", gpool_last_error());
    gpool_torch_free(x, n, 0, s);
    CUgraph g = capture_end(s);
    gpool_torch_end_allocate_stream_to_pool(0, s);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 1);
    capture_destroy(g);
    gpool_torch_release_pool(0, graph);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0, "the graph's pool was released, the user pool lives on");
    gpool_torch_end_allocate_stream_to_pool(0, other);
    gpool_torch_release_pool(0, user);
    cr_assert_eq(gpool_torch_live_pools(), 0);
}

/* A tensor made before torch.cuda.graph and dropped inside the capture before the capture's
 * first allocation (the graph's kernels read it at every replay): graph memory all the same. The
 * capture runs on its own stream, which the hooks have never seen. stream_form: torch 2.1/2.2's
 * hooks, which name the capturing stream; else 2.3+'s, which do not. allocates 0: the capture
 * allocates nothing, and 2.3+ closes the window right before the capture ends. */
static void dropped_in_a_capture(int stream_form, int allocates, gpool_torch_mempool_id id)
{
    if (!drv.begin_capture) cr_skip_test("no graph capture");
    CUstream s = capture_stream(), c = capture_stream();
    size_t n = 4 * MIB;
    void *x = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(x, "%s", gpool_last_error());
    cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
    capture_order_after(c, s); /* the capture stream waits for x's producer */
    window_open(stream_form, c, id);
    capture_begin(c);
    gpool_torch_free(x, n, 0, s); /* the captured kernels read x; then it is dropped */
    if (allocates) {
        void *y = gpool_torch_alloc(n, 0, c);
        cr_assert_not_null(y, "%s", gpool_last_error());
        gpool_torch_free(y, n, 0, c);
    } else {
        window_close(stream_form, c, id);
    }
    CUgraph g = capture_end(c);
    if (allocates) window_close(stream_form, c, id);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, allocates ? 2u : 1u, "x (and y) are the graph's: %zu held",
                 b.graph_blocks);
    gpool_torch_empty_cache();
    for (int i = 0; i < 4; i++) { /* eager work never gets x while the graph may replay */
        void *e = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(e);
        cr_assert(!ranges_overlap(e, n, x, n), "eager block %d got the graph's input x", i);
        gpool_torch_free(e, n, 0, s);
    }
    capture_destroy(g);
    gpool_torch_release_pool(0, id);
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0);
    cr_assert_eq(sim->violations(), 0);
}

Test(torch_hooks, a_tensor_dropped_before_the_captures_first_allocation_is_held)
{
    dropped_in_a_capture(0, 1, (gpool_torch_mempool_id){6, 0});
}

Test(torch_hooks, so_it_is_with_the_hooks_that_name_the_stream)
{
    dropped_in_a_capture(1, 1, (gpool_torch_mempool_id){6, 0});
}

/* A capture into a graph's own pool (torch.cuda.graph without pool=: id {uid, 0}) that never
 * allocates still replays on what it read: a tensor dropped inside it is the graph's. */
Test(torch_hooks, a_capture_that_never_allocates_keeps_what_it_dropped)
{
    dropped_in_a_capture(0, 0, (gpool_torch_mempool_id){8, 0});
}

/* A torch.cuda.use_mem_pool block is a window with no capture: what it frees goes back to the
 * pool as any free does, at the latest when the window ends. */
Test(torch_hooks, frees_in_a_window_without_a_capture_are_not_kept)
{
    CUstream s = capture_stream();
    size_t n = 4 * MIB;
    gpool_torch_mempool_id user = {0, 12};
    gpool_torch_begin_allocate_to_pool(0, user, NULL);
    void *x = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(x, "%s", gpool_last_error());
    gpool_torch_free(x, n, 0, s);
    gpool_torch_end_allocate_to_pool(0, user);
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(0, &b), GPOOL_OK);
    cr_assert_eq(b.graph_blocks, 0, "no capture ran: nothing is graph memory");
    cr_assert_eq(b.blocks, 1, "x waits in the free batch as any free");
    gpool_torch_release_pool(0, user);
    gpool_torch_empty_cache();
    void *again = gpool_torch_alloc(n, 0, s);
    cr_assert_eq(again, x, "x should be reusable after the flush");
    gpool_torch_free(again, n, 0, s);
}

/* Tensor.record_stream through torch's record-stream hook: the block's free also waits for the
 * side stream; an unknown pointer is refused with a message, not a crash. */
Test(torch_hooks, record_stream_hook_orders_the_free_after_the_side_stream)
{
    CUstream s = capture_stream(), u = capture_stream();
    size_t n = 2 * MIB;
    void *x = gpool_torch_alloc(n, 0, s);
    cr_assert_not_null(x, "%s", gpool_last_error());
    cr_assert_eq(sim_kernel(s, x, n), CUDA_SUCCESS);
    capture_order_after(u, s);
    cr_assert_eq(sim_kernel(u, x, n), CUDA_SUCCESS);
    gpool_torch_record_stream(x, u);
    gpool_torch_free(x, n, 0, s);
    size_t count = 0;
    cr_assert_eq(gpool_torch_get_freed(0, NULL, 0, &count), GPOOL_OK);
    cr_assert_geq(count, 1);
    gpool_torch_empty_cache();
    for (int i = 0; i < 5; i++) {
        void *y = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(y);
        cr_assert_eq(sim_kernel(s, y, n), CUDA_SUCCESS);
        gpool_torch_free(y, n, 0, s);
    }
    int local = 0;
    gpool_torch_record_stream(&local, u);
    cr_assert(strstr(gpool_last_error(), "no block of the hooks"), "%s", gpool_last_error());
    cr_assert_eq(gpool_torch_get_freed(0, NULL, 1, &count), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_torch_get_freed(64, NULL, 0, &count), GPOOL_ERR_NO_DEVICE);
    cr_assert_eq(sim->violations(), 0);
}

/* The free hook's eager path: with no pool window open, no capture seen and no graph block
 * live, a free on a side stream costs no driver call (no cuStreamIsCapturing per free, which
 * PyTorch's own allocator does not make either: it learns of captures from the pool hooks). */
Test(torch_hooks, an_eager_free_makes_no_driver_call)
{
    CUstream s = capture_stream();
    size_t n = 1 * MIB;
    enum { K = 32 };
    void *p[K];
    for (int i = 0; i < K; i++) {
        p[i] = gpool_torch_alloc(n, 0, s);
        cr_assert_not_null(p[i], "%s", gpool_last_error());
    }
    sim->reset_counts();
    for (int i = 0; i < K; i++)
        gpool_torch_free(p[i], n, 0, s);
    unsigned long calls = sim->call_total();
    cr_assert_eq(calls, 0, "%lu driver calls in %d eager frees (%lu cuStreamIsCapturing)", calls, K,
                 sim->call_count("cuStreamIsCapturing"));
    gpool_torch_empty_cache();
    cr_assert_eq(sim->violations(), 0);
}
