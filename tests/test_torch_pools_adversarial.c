/* Adversarial tests of the PyTorch graph-pool hooks (include/gpool_torch.h, src/torch),
 * driven as PyTorch's CUDAGraph / use_mem_pool code paths drive them. The promise under test:
 * memory allocated on a capturing stream, or freed while a capture is underway (from its first
 * allocation on), is never handed to eager work (nor to another capture) until the pool it
 * was captured into is released; each pool's memory goes back at its own last release; no
 * memory is lost; a correct CUDA program sees no ordering violation (strict simulator) and no
 * invalidated capture. A graph replay is modelled as simulator kernel accesses on the graph's
 * addresses on a replay stream (the simulator never launches graphs). Needs the simulator. */
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
#define N   (4 * MIB)

static const struct sim_api *sim;

static void load(int devices)
{
    capture_load(devices, 1);
    sim = sim_api();
}

static void setup(void)
{
    load(1);
}

TestSuite(torch_pools_adv, .init = setup);

static gpool_torch_mempool_id pid(unsigned long long a, unsigned long long b)
{
    return (gpool_torch_mempool_id){a, b};
}

static void *must_alloc(size_t n, int dev, CUstream s)
{
    void *p = gpool_torch_alloc(n, dev, s);
    cr_assert_not_null(p, "gpool_torch_alloc: %s", gpool_last_error());
    return p;
}

static size_t graph_blocks_of(int dev)
{
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(dev, &b), GPOOL_OK);
    return b.graph_blocks;
}

static size_t graph_blocks(void)
{
    return graph_blocks_of(0);
}

/* Is p among the device's held graph blocks (not the free batch)? */
static int held_in(int dev, const void *p)
{
    static void *list[4096];
    gpool_torch_batch_stats b;
    cr_assert_eq(gpool_torch_get_batch_stats(dev, &b), GPOOL_OK);
    size_t count = 0;
    cr_assert_eq(gpool_torch_get_freed(dev, list, 4096, &count), GPOOL_OK);
    cr_assert_leq(count, 4096);
    for (size_t i = b.blocks; i < count; i++)
        if (list[i] == p) return 1;
    return 0;
}

static int held(const void *p)
{
    return held_in(0, p);
}

/* A replay of a graph on stream r: its kernels write its addresses. */
static void replay(CUstream r, void *const *blocks, int n, size_t size)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(sim_kernel(r, blocks[i], size), CUDA_SUCCESS);
}

/* Eager work on stream e takes all the memory it can get (blocks of `size`, at most `max`):
 * none may overlap the `navoid` blocks of a graph that may still replay. Each block is then
 * written on e (the strict referee aborts on a race with a pending replay), freed, and the
 * batch flushed. Returns how many blocks eager work got. Not during a capture. */
static int probe_on(int dev, CUstream e, size_t size, int max, void *const *avoid, int navoid,
                    size_t avoid_size, const char *what)
{
    static void *got[512];
    cr_assert_leq(max, 512);
    int k = 0;
    while (k < max) {
        void *p = gpool_torch_alloc(size, dev, e);
        if (!p) break;
        got[k++] = p;
    }
    for (int i = 0; i < k; i++)
        for (int j = 0; j < navoid; j++)
            cr_assert(!ranges_overlap(got[i], size, avoid[j], avoid_size),
                      "%s: eager block %d (%p) got graph memory %p that may still replay", what, i,
                      got[i], avoid[j]);
    for (int i = 0; i < k; i++)
        cr_assert_eq(sim_kernel(e, got[i], size), CUDA_SUCCESS);
    for (int i = 0; i < k; i++)
        gpool_torch_free(got[i], size, dev, e);
    gpool_torch_empty_cache();
    return k;
}

static int probe(CUstream e, int max, void *const *avoid, int navoid, const char *what)
{
    return probe_on(0, e, N, max, avoid, navoid, N, what);
}

static void warm_up(CUstream s)
{
    void *w = must_alloc(N, 0, s);
    cr_assert_eq(sim_kernel(s, w, N), CUDA_SUCCESS);
    gpool_torch_free(w, N, 0, s);
}

/* One torch>=2.3 CUDAGraph capture into pool id on stream s: begin-allocate, BeginCapture, an
 * intermediate freed inside, an output, EndCapture, end-allocate (PyTorch's order); the output
 * is freed after the capture. blocks[0] = intermediate, blocks[1] = output. */
static CUgraph capture23(CUstream s, gpool_torch_mempool_id id, void **blocks)
{
    gpool_torch_begin_allocate_to_pool(0, id, NULL);
    capture_begin(s);
    blocks[0] = must_alloc(N, 0, s);
    blocks[1] = must_alloc(N, 0, s);
    gpool_torch_free(blocks[0], N, 0, s);
    CUgraph g = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, id);
    gpool_torch_free(blocks[1], N, 0, s);
    return g;
}

/* 1. Two graphs sharing one pool (graph_pool_handle): each begins and releases it once. The
 * first graph's release must keep all four blocks (the second may replay on the shared pool);
 * the second release gives all back. */
Test(torch_pools_adv, shared_pool_keeps_memory_until_both_graphs_release)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id P = pid(0, 11);
    void *b[4];
    CUgraph g1 = capture23(s, P, b);
    CUgraph g2 = capture23(s, P, b + 2);
    cr_assert_eq(gpool_torch_live_pools(), 2);
    cr_assert_eq(graph_blocks(), 4);
    capture_destroy(g1);
    gpool_torch_release_pool(0, P); /* g1 reset; g2 lives */
    cr_assert_eq(gpool_torch_live_pools(), 1);
    cr_assert_eq(graph_blocks(), 4, "a shared pool's memory went back at its first release");
    replay(r, b, 4, N);
    probe(e, 64, b, 4, "after g1's release");
    capture_destroy(g2);
    gpool_torch_release_pool(0, P);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(gpool_torch_live_pools(), 0);
    int after = probe(e, 64, NULL, 0, "after");
    cr_assert_eq(after, before, "memory not reusable after every pool went: %d vs %d blocks", after,
                 before);
    cr_assert_eq(sim->violations(), 0);
}

/* 2. Graphs released in reverse order, with replays in flight: B's release gives back only B's
 * blocks, A's stay out of eager reuse while A replays; reusing B's blocks is ordered after B's
 * replay (the release synchronizes). */
Test(torch_pools_adv, reverse_release_order_with_replays_in_flight)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id A = pid(1, 0), B = pid(2, 0);
    void *a[2], *b[2];
    CUgraph ga = capture23(s, A, a);
    CUgraph gb = capture23(s, B, b);
    cr_assert_eq(graph_blocks(), 4);
    replay(r, a, 2, N);
    replay(r, b, 2, N);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 2, "B's release: %zu held, expected A's 2", graph_blocks());
    cr_assert(held(a[0]) && held(a[1]) && !held(b[0]) && !held(b[1]));
    replay(r, a, 2, N); /* A still replays */
    int mid = probe(e, 64, a, 2, "A live, B released");
    cr_assert_eq(mid, before - 2, "eager work should get everything but A's 2 blocks: %d of %d",
                 mid, before);
    replay(r, a, 2, N);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 3. CUDAGraph::reset then a re-capture with the same id: the old capture's memory goes back at
 * the reset, the new capture's is held until its own release. */
Test(torch_pools_adv, reset_and_recapture_with_the_same_id)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id P = pid(5, 0);
    void *old[2], *cur[2];
    CUgraph g = capture23(s, P, old);
    capture_destroy(g);
    gpool_torch_release_pool(0, P);
    cr_assert_eq(graph_blocks(), 0);
    g = capture23(s, P, cur);
    cr_assert_eq(graph_blocks(), 2);
    cr_assert(held(cur[0]) && held(cur[1]));
    probe(e, 64, cur, 2, "re-captured graph live");
    cr_assert_eq(graph_blocks(), 2, "the re-captured graph's memory went back early");
    capture_destroy(g);
    gpool_torch_release_pool(0, P);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(gpool_torch_live_pools(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 4. A torch.cuda.use_mem_pool window (begin, end, release; no capture) opens and closes inside
 * a graph capture: its release must not give back the live capture's memory. */
Test(torch_pools_adv, use_mem_pool_window_inside_a_capture)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id A = pid(3, 0), U = pid(0, 42);
    void *g[3];
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    g[0] = must_alloc(N, 0, s);
    gpool_torch_begin_allocate_to_pool(0, U, NULL); /* use_mem_pool on the eager stream */
    void *u = must_alloc(N, 0, e);
    g[1] = must_alloc(N, 0, s);
    gpool_torch_free(g[0], N, 0, s);
    gpool_torch_end_allocate_to_pool(0, U);
    gpool_torch_release_pool(0, U);
    cr_assert(held(g[0]), "released with the use_mem_pool window while the capture runs");
    g[2] = must_alloc(N, 0, s);
    gpool_torch_free(g[2], N, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    gpool_torch_free(g[1], N, 0, s);
    gpool_torch_free(u, N, 0, e);
    cr_assert_eq(graph_blocks(), 3);
    probe(e, 64, g, 3, "capture's graph live after use_mem_pool release");
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0, "A's release left %zu blocks held", graph_blocks());
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 5, 6. Two captures at once on two streams, B's second block allocated after A's capture
 * ended. torch 2.1/2.2 forms (stream_form 1): the stream tells the pools apart, so each pool's
 * memory goes back at its own release. torch 2.3+ forms (no stream): whatever gpool tags, B's
 * memory must not be handed out after A's release while B lives, and all of it comes back
 * after both. */
static void concurrent_captures(int stream_form, gpool_torch_mempool_id A, gpool_torch_mempool_id B)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s1 = capture_stream(), s2 = capture_stream(), e = capture_stream(),
             r = capture_stream();
    warm_up(s1);
    warm_up(s2);
    int before = probe(e, 64, NULL, 0, "before");
    void *a[2], *b[2];
    window_open(stream_form, s1, A);
    capture_begin(s1);
    a[0] = must_alloc(N, 0, s1);
    window_open(stream_form, s2, B);
    capture_begin(s2);
    b[0] = must_alloc(N, 0, s2);
    a[1] = must_alloc(N, 0, s1);
    gpool_torch_free(a[0], N, 0, s1);
    CUgraph ga = capture_end(s1);
    window_close(stream_form, s1, A);
    b[1] = must_alloc(N, 0, s2);
    gpool_torch_free(b[0], N, 0, s2);
    CUgraph gb = capture_end(s2);
    window_close(stream_form, s2, B);
    gpool_torch_free(a[1], N, 0, s1);
    gpool_torch_free(b[1], N, 0, s2);
    cr_assert_eq(graph_blocks(), 4);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert(held(b[0]) && held(b[1]), "B's memory went back with A's release");
    size_t after_a = graph_blocks();
    if (stream_form) cr_assert_eq(after_a, 2, "A's release: %zu held, expected B's 2", after_a);
    replay(r, b, 2, N);
    int during = probe(e, 64, b, 2, "B live");
    if (stream_form) cr_assert_eq(during, before - 2);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
    cr_log_info("concurrent captures (%s forms): %zu blocks held after A's release (2 = A's came "
                "back)",
                stream_form ? "2.1/2.2" : "2.3+", after_a);
}

Test(torch_pools_adv, concurrent_captures_stream_forms_release_separately)
{
    concurrent_captures(1, pid(7, 0), pid(8, 0));
}

Test(torch_pools_adv, concurrent_captures_23_forms_keep_the_live_graph)
{
    concurrent_captures(0, pid(9, 0), pid(10, 0));
}

/* 7. Hook misuse PyTorch can produce: release of an id never begun, end without begin (both
 * forms), begin without end (a capture_begin that threw). None may free live graph memory or
 * lose any. */
Test(torch_pools_adv, unmatched_hooks_neither_free_live_memory_nor_lose_it)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_release_pool(0, pid(99, 99)); /* never begun */
    gpool_torch_end_allocate_to_pool(0, pid(98, 0));
    gpool_torch_end_allocate_stream_to_pool(0, s);
    cr_assert_eq(gpool_torch_live_pools(), 0);
    gpool_torch_mempool_id Z = pid(97, 0), A = pid(96, 0);
    gpool_torch_begin_allocate_to_pool(0, Z, NULL); /* begin without end */
    void *a[2];
    CUgraph ga = capture23(s, A, a);
    gpool_torch_release_pool(0, pid(99, 99));
    gpool_torch_end_allocate_to_pool(0, pid(98, 0));
    cr_assert_eq(gpool_torch_live_pools(), 2);
    cr_assert_eq(graph_blocks(), 2);
    probe(e, 64, a, 2, "A live");
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    size_t after_a = graph_blocks();
    gpool_torch_release_pool(0, Z);
    gpool_torch_release_pool(0, Z); /* a second release of a gone id: ignored */
    cr_assert_eq(gpool_torch_live_pools(), 0);
    cr_assert_eq(graph_blocks(), 0, "%zu graph blocks lost after every pool's release",
                 graph_blocks());
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
    cr_log_info("begin-without-end of Z: %zu of A's blocks still held after A's release", after_a);
}

/* 8. A block allocated in capture A and freed inside capture B is used by both graphs: A's
 * release (B alive) must keep it; B's release gives it back. */
Test(torch_pools_adv, block_of_capture_a_freed_in_capture_b_released_a_first)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    gpool_torch_mempool_id A = pid(12, 0), B = pid(13, 0);
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    void *x = must_alloc(N, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s);
    void *y = must_alloc(N, 0, s);
    gpool_torch_free(x, N, 0, s); /* B reads A's output, then drops it */
    gpool_torch_free(y, N, 0, s);
    CUgraph gb = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, B);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert(held(x), "graph B may still replay on x");
    cr_assert(held(y));
    void *bl[2] = {x, y};
    replay(r, bl, 2, N);
    probe(e, 64, bl, 2, "B live");
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 9. A block allocated eagerly on another stream and freed inside a capture (after its first
 * allocation) belongs to the graph; it goes back at the pool's release. */
Test(torch_pools_adv, eager_block_freed_inside_a_capture_is_the_graphs)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    void *x = must_alloc(N, 0, e);
    cr_assert_eq(sim_kernel(e, x, N), CUDA_SUCCESS);
    gpool_torch_mempool_id A = pid(14, 0);
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    void *y = must_alloc(N, 0, s);
    gpool_torch_free(x, N, 0, e); /* the capture's kernels read x, then it is dropped */
    gpool_torch_free(y, N, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    cr_assert(held(x), "x freed inside the capture is not held");
    void *bl[2] = {x, y};
    capture_order_after(r, e); /* the replay is launched after x's eager writer */
    replay(r, bl, 2, N);
    cr_assert_eq(probe(e, 64, bl, 2, "A live"), before - 2);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 10. A graph's output kept past the pool's release, then freed inside a later capture B: it is
 * B's memory now, held until B's release. */
Test(torch_pools_adv, output_outliving_its_pool_then_freed_in_another_capture)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    gpool_torch_mempool_id A = pid(15, 0), B = pid(16, 0);
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    void *out = must_alloc(N, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s);
    void *y = must_alloc(N, 0, s);
    gpool_torch_free(out, N, 0, s);
    CUgraph gb = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, B);
    gpool_torch_free(y, N, 0, s);
    cr_assert(held(out), "freed inside B's capture, yet not held");
    void *bl[2] = {out, y};
    probe(e, 64, bl, 2, "B live");
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 11. Tensor.record_stream(u) on a graph's output, used on u after a replay, freed while the
 * graph lives, then the pool released: no race with u's work when eager work reuses it. */
Test(torch_pools_adv, record_stream_on_a_graph_block)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), u = capture_stream(), r = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id A = pid(17, 0);
    void *a[2];
    CUgraph ga = capture23(s, A, a); /* a[1] freed already: recapture the pattern by hand */
    gpool_torch_begin_allocate_to_pool(0, pid(18, 0), NULL);
    capture_begin(s);
    void *out = must_alloc(N, 0, s);
    CUgraph gb = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, pid(18, 0));
    replay(r, &out, 1, N);
    gpool_torch_record_stream(out, u);
    capture_order_after(u, r);                         /* u uses the replay's output */
    cr_assert_eq(sim_kernel(u, out, N), CUDA_SUCCESS); /* u's work stays queued */
    gpool_torch_free(out, N, 0, s);
    cr_assert(held(out));
    void *bl[3] = {a[0], a[1], out};
    probe(e, 64, bl, 3, "both live");
    capture_destroy(gb);
    gpool_torch_release_pool(0, pid(18, 0));
    cr_assert(!held(out));
    probe(e, 64, a, 2, "A live");
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 12. empty_cache while a graph lives: its held memory stays held and mapped. */
Test(torch_pools_adv, empty_cache_during_a_live_graph)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    gpool_torch_mempool_id A = pid(19, 0);
    void *a[2];
    CUgraph ga = capture23(s, A, a);
    replay(r, a, 2, N);
    gpool_torch_empty_cache();
    cr_assert_eq(graph_blocks(), 2);
    cr_assert_geq(sim->bytes_in_use(0), 2 * N, "held graph memory given back to the driver");
    replay(r, a, 2, N); /* still mapped: the simulator refuses unmapped memory */
    probe(e, 64, a, 2, "after empty_cache");
    gpool_torch_empty_cache();
    replay(r, a, 2, N);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    gpool_torch_empty_cache();
    cr_assert_eq(sim->bytes_in_use(0), 0, "%zu bytes still in use after every release",
                 sim->bytes_in_use(0));
    cr_assert_eq(sim->violations(), 0);
}

/* 13. 150 pools begun and released in a scrambled order: each release gives back exactly its
 * own two blocks; nothing is left. */
Test(torch_pools_adv, many_pools_released_in_scrambled_order)
{
    enum { K = 150 };
    CUstream s = capture_stream();
    size_t n = 1 * MIB;
    static void *blk[K][2];
    static CUgraph g[K];
    for (int i = 0; i < K; i++) {
        gpool_torch_mempool_id id = pid(1000 + (unsigned long long)i, 0);
        gpool_torch_begin_allocate_to_pool(0, id, NULL);
        capture_begin(s);
        blk[i][0] = must_alloc(n, 0, s);
        blk[i][1] = must_alloc(n, 0, s);
        gpool_torch_free(blk[i][0], n, 0, s);
        g[i] = capture_end(s);
        gpool_torch_end_allocate_to_pool(0, id);
        gpool_torch_free(blk[i][1], n, 0, s);
    }
    cr_assert_eq(gpool_torch_live_pools(), K);
    cr_assert_eq(graph_blocks(), 2 * K);
    for (int k = 0; k < K; k++) {
        int i = (k * 67) % K; /* 67 is coprime to 150 */
        capture_destroy(g[i]);
        gpool_torch_release_pool(0, pid(1000 + (unsigned long long)i, 0));
        cr_assert_eq(graph_blocks(), (size_t)(2 * (K - k - 1)), "release %d (pool %d)", k, i);
        cr_assert(!held(blk[i][0]) && !held(blk[i][1]), "pool %d's blocks still held", i);
        if (k + 1 < K) {
            int j = ((k + 1) * 67) % K;
            cr_assert(held(blk[j][0]) && held(blk[j][1]), "pool %d's blocks went early", j);
        }
    }
    cr_assert_eq(gpool_torch_live_pools(), 0);
    gpool_torch_empty_cache();
    cr_assert_eq(sim->bytes_in_use(0), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 14. Out of memory inside a capture while another graph lives: the capture gets NULL, never the
 * live graph's memory, the capture stays valid, and after both releases all memory is back. */
Test(torch_pools_adv, out_of_memory_inside_a_capture)
{
    sim->set_capacity(0, 48 * MIB);
    CUstream s = capture_stream(), e = capture_stream(), s2 = capture_stream();
    warm_up(s);
    int before = probe(e, 64, NULL, 0, "before");
    cr_assert_geq(before, 8);
    gpool_torch_mempool_id A = pid(20, 0), B = pid(21, 0);
    void *a[2];
    CUgraph ga = capture23(s, A, a);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s2);
    void *b[64];
    int k = 0;
    while (k < 64) {
        void *p = gpool_torch_alloc(N, 0, s2);
        if (!p) break;
        b[k++] = p;
    }
    cr_assert_lt(k, 64, "no out of memory at 48 MiB");
    for (int i = 0; i < k; i++)
        cr_assert(!ranges_overlap(b[i], N, a[0], N) && !ranges_overlap(b[i], N, a[1], N),
                  "capture B got graph A's memory");
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s2, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the out of memory invalidated the capture");
    for (int i = 0; i < k; i++)
        gpool_torch_free(b[i], N, 0, s2);
    CUgraph gb = capture_end(s2);
    gpool_torch_end_allocate_to_pool(0, B);
    cr_assert_eq(graph_blocks(), (size_t)(2 + k));
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(probe(e, 64, NULL, 0, "after"), before);
    cr_assert_eq(sim->violations(), 0);
}

/* 15, 23. A graph destroyed (its pool released) while another graph is being captured, before
 * that capture's first allocation (Python may drop a graph anywhere; PyTorch's own releasePool
 * makes no CUDA call): the running capture must stay valid. same_stream: PyTorch's default,
 * every torch.cuda.graph captures on one side stream, so B captures on A's stream (global
 * capture mode). */
static void release_during_a_capture(int same_stream, gpool_torch_mempool_id A,
                                     gpool_torch_mempool_id B)
{
    CUstream s1 = capture_stream(), e = capture_stream();
    CUstream s2 = same_stream ? s1 : capture_stream();
    warm_up(s1);
    void *a[2];
    CUgraph ga = capture23(s1, A, a);
    cr_assert_eq(graph_blocks(), 2);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s2); /* its first kernels need no allocation yet */
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s2, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE,
                 "releasing pool A invalidated capture B%s (status %d)",
                 same_stream ? " on the same stream" : "", (int)cs);
    void *x = must_alloc(N, 0, s2);
    gpool_torch_free(x, N, 0, s2);
    CUgraph gb = capture_end(s2);
    gpool_torch_end_allocate_to_pool(0, B);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    probe(e, same_stream ? 16 : 64, NULL, 0, "after");
    cr_assert_eq(sim->violations(), 0);
}

Test(torch_pools_adv, release_during_another_capture_keeps_that_capture_valid)
{
    release_during_a_capture(0, pid(22, 0), pid(23, 0));
}

/* 16. The same with the free batch: a batch due, an eager allocation on another stream while a
 * capture (window begun, no allocation yet) runs must not synchronize into that capture. */
Test(torch_pools_adv, batch_flush_during_another_capture_keeps_that_capture_valid)
{
    setenv("GPOOL_CONF", "cudafree_batch=4M", 1);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(e); /* the batch holds its limit: due */
    gpool_torch_mempool_id B = pid(24, 0);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s);
    void *y = must_alloc(N, 0, e); /* eager work on the default stream meanwhile */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE,
                 "the batch flush invalidated the capture (status %d)", (int)cs);
    void *x = must_alloc(N, 0, s);
    gpool_torch_free(x, N, 0, s);
    CUgraph gb = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, B);
    gpool_torch_free(y, N, 0, e);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
    unsetenv("GPOOL_CONF");
}

/* 17. Two concurrent captures (torch 2.1/2.2 forms, streams s1 and s2) both read an eager input
 * x allocated on s1; x is dropped while both capture (PyTorch passes x's allocation stream,
 * s1, whichever capture dropped it). Graph B may replay on x, so A's release must not give x
 * to eager work. */
Test(torch_pools_adv, input_freed_during_two_captures_waits_for_both)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s1 = capture_stream(), s2 = capture_stream(), e = capture_stream(),
             r = capture_stream();
    warm_up(s1);
    void *x = must_alloc(N, 0, s1);
    cr_assert_eq(sim_kernel(s1, x, N), CUDA_SUCCESS);
    gpool_torch_mempool_id A = pid(25, 0), B = pid(26, 0);
    gpool_torch_begin_allocate_stream_to_pool(0, s1, A);
    capture_begin(s1);
    void *a = must_alloc(N, 0, s1);
    gpool_torch_begin_allocate_stream_to_pool(0, s2, B);
    capture_begin(s2);
    void *b = must_alloc(N, 0, s2);
    gpool_torch_free(x, N, 0, s1); /* dropped by B's thread after B's kernels read it */
    CUgraph ga = capture_end(s1);
    gpool_torch_end_allocate_stream_to_pool(0, s1);
    CUgraph gb = capture_end(s2);
    gpool_torch_end_allocate_stream_to_pool(0, s2);
    gpool_torch_free(a, N, 0, s1);
    gpool_torch_free(b, N, 0, s2);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    int x_held = held(x);
    void *bl[2] = {x, b};
    capture_order_after(r, s1); /* the replay is launched after x's eager writer */
    replay(r, bl, 2, N);
    probe(e, 64, bl, 2, "B live, A released");
    cr_assert(x_held, "x, freed while capture B ran, went back with A's release while B lives");
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 18. Two graphs sharing pool P captured at once on s1 and s2 (torch 2.1/2.2 forms), both
 * windows ended; a later capture Q on s3 drops an eager block: only Q's capture was underway,
 * so Q's release must give it back (P's windows are closed). */
Test(torch_pools_adv, shared_pool_concurrent_windows_close_on_their_streams)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s1 = capture_stream(), s2 = capture_stream(), s3 = capture_stream(),
             e = capture_stream();
    warm_up(s1);
    gpool_torch_mempool_id P = pid(0, 27), Q = pid(28, 0);
    gpool_torch_begin_allocate_stream_to_pool(0, s1, P);
    capture_begin(s1);
    void *p1 = must_alloc(N, 0, s1);
    gpool_torch_begin_allocate_stream_to_pool(0, s2, P);
    capture_begin(s2);
    void *p2 = must_alloc(N, 0, s2);
    CUgraph g1 = capture_end(s1);
    gpool_torch_end_allocate_stream_to_pool(0, s1);
    CUgraph g2 = capture_end(s2);
    gpool_torch_end_allocate_stream_to_pool(0, s2);
    void *x = must_alloc(N, 0, e);
    gpool_torch_begin_allocate_stream_to_pool(0, s3, Q);
    capture_begin(s3);
    void *q = must_alloc(N, 0, s3);
    gpool_torch_free(x, N, 0, e);
    gpool_torch_free(q, N, 0, s3);
    CUgraph gq = capture_end(s3);
    gpool_torch_end_allocate_stream_to_pool(0, s3);
    cr_assert(held(x) && held(q));
    capture_destroy(gq);
    gpool_torch_release_pool(0, Q);
    cr_assert(!held(q));
    cr_assert(!held(x), "x (freed only inside Q's capture) still held after Q's release: a "
                        "window of P was left open");
    gpool_torch_free(p1, N, 0, s1);
    gpool_torch_free(p2, N, 0, s2);
    capture_destroy(g1);
    capture_destroy(g2);
    gpool_torch_release_pool(0, P);
    gpool_torch_release_pool(0, P);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 19. More captures at once than the hooks track (9 streams): an eager block dropped during the
 * 9th capture, after the other 8 ended, belongs to the 9th graph. No pool hooks (torch 2.0). */
Test(torch_pools_adv, ninth_concurrent_capture_still_holds_its_frees)
{
    enum { C = 9 };
    CUstream s[C], e = capture_stream();
    CUgraph g[C];
    void *blk[C];
    for (int i = 0; i < C; i++)
        s[i] = capture_stream();
    void *x = must_alloc(N, 0, e);
    for (int i = 0; i < C; i++) {
        capture_begin(s[i]);
        blk[i] = must_alloc(N, 0, s[i]);
    }
    for (int i = 0; i < C - 1; i++)
        g[i] = capture_end(s[i]);
    gpool_torch_free(x, N, 0, e); /* inside the 9th capture */
    cr_assert(held(x), "x, dropped inside capture 9, is not held as graph memory");
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s[C - 1], &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    g[C - 1] = capture_end(s[C - 1]);
    for (int i = 0; i < C; i++) {
        gpool_torch_free(blk[i], N, 0, s[i]);
        capture_destroy(g[i]);
    }
    cr_assert_eq(gpool_torch_release_graph_memory(), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 20. The capture stream is destroyed before the graph's pool is released (an external stream):
 * the held memory must still go back to the pool, not leak, and no call may name the dead
 * stream. */
Test(torch_pools_adv, capture_stream_destroyed_before_the_release)
{
    CUstream s = capture_stream(), e = capture_stream();
    unsigned long (*dead_calls)(void) = dlsym(sim->lib, "gpoolsim_destroyed_stream_calls");
    cr_assert_not_null(dead_calls);
    warm_up(s);
    gpool_torch_mempool_id A = pid(29, 0);
    void *a[2];
    CUgraph ga = capture23(s, A, a);
    capture_destroy(ga);
    cr_assert_eq(drv.stream_destroy(s), CUDA_SUCCESS);
    unsigned long dead0 = dead_calls();
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    gpool_torch_empty_cache();
    gpool_stats st;
    st.struct_size = sizeof st;
    cr_assert_eq(gpool_get_stats(gpool_torch_pool(0), &st), GPOOL_OK);
    cr_assert_eq(st.kind[0].live_blocks, 0, "%llu blocks leaked",
                 (unsigned long long)st.kind[0].live_blocks);
    cr_assert_eq(dead_calls(), dead0, "the release named the destroyed stream");
    cr_assert_eq(sim->bytes_in_use(0), 0, "%zu bytes still in use", sim->bytes_in_use(0));
    probe(e, 8, NULL, 0, "after");
    cr_assert_eq(sim->violations(), 0);
}

/* 21. A pool's last release comes while another capture runs (so the synchronize is refused);
 * that capture ends and its graph lives on. The released pool's memory must come back without
 * waiting for the other graph's release (the program calls empty_cache, then allocates). */
Test(torch_pools_adv, memory_of_a_release_refused_during_a_capture_comes_back)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s1 = capture_stream(), s2 = capture_stream(), e = capture_stream();
    warm_up(s1);
    int before = probe(e, 64, NULL, 0, "before");
    gpool_torch_mempool_id A = pid(30, 0), B = pid(31, 0);
    void *a[2];
    CUgraph ga = capture23(s1, A, a);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s2);
    void *b = must_alloc(N, 0, s2); /* the hooks know this capture */
    capture_destroy(ga);
    gpool_torch_release_pool(0, A); /* refused: a capture runs */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s2, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUgraph gb = capture_end(s2);
    gpool_torch_end_allocate_to_pool(0, B);
    gpool_torch_free(b, N, 0, s2);
    gpool_torch_empty_cache();
    int mid = probe(e, 64, &b, 1, "B live");
    cr_assert_eq(mid, before - 1,
                 "A's 2 blocks never came back after its release (B lives): %d of %d blocks, "
                 "%zu graph blocks held",
                 mid, before, graph_blocks());
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 22. Two devices, one pool id on each: releasing device 1's pool gives back only device 1's
 * graph memory; device 0's graph stays out of eager reuse. */
static void setup2(void)
{
    setenv("GPOOL_SIM_DEVICES", "2", 1);
    load(2);
}

Test(torch_pools_adv2, same_id_on_two_devices_releases_per_device, .init = setup2)
{
    CUstream s0 = capture_stream(), e0 = capture_stream();
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    CUstream s1 = capture_stream(), e1 = capture_stream();
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    gpool_torch_mempool_id P = pid(1, 0);
    void *w = must_alloc(N, 0, s0);
    gpool_torch_free(w, N, 0, s0);
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    w = must_alloc(N, 1, s1);
    gpool_torch_free(w, N, 1, s1);
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    void *d0[2], *d1[2];
    gpool_torch_begin_allocate_to_pool(0, P, NULL);
    capture_begin(s0);
    d0[0] = must_alloc(N, 0, s0);
    d0[1] = must_alloc(N, 0, s0);
    gpool_torch_free(d0[0], N, 0, s0);
    CUgraph g0 = capture_end(s0);
    gpool_torch_end_allocate_to_pool(0, P);
    gpool_torch_free(d0[1], N, 0, s0);
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    gpool_torch_begin_allocate_to_pool(1, P, NULL);
    capture_begin(s1);
    d1[0] = must_alloc(N, 1, s1);
    d1[1] = must_alloc(N, 1, s1);
    gpool_torch_free(d1[0], N, 1, s1);
    CUgraph g1 = capture_end(s1);
    gpool_torch_end_allocate_to_pool(1, P);
    gpool_torch_free(d1[1], N, 1, s1);
    cr_assert_eq(gpool_torch_live_pools(), 2);
    cr_assert_eq(graph_blocks_of(0), 2);
    cr_assert_eq(graph_blocks_of(1), 2);
    capture_destroy(g1);
    gpool_torch_release_pool(1, P);
    cr_assert_eq(graph_blocks_of(1), 0, "device 1's release kept its memory");
    cr_assert_eq(graph_blocks_of(0), 2, "device 1's release gave back device 0's graph memory");
    cr_assert(held_in(0, d0[0]) && held_in(0, d0[1]));
    probe_on(1, e1, N, 16, NULL, 0, 0, "device 1");
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    probe_on(0, e0, N, 16, d0, 2, N, "device 0 live");
    capture_destroy(g0);
    gpool_torch_release_pool(0, P);
    cr_assert_eq(graph_blocks_of(0), 0);
    cr_assert_eq(gpool_torch_live_pools(), 0);
    cr_assert_eq(sim->violations(), 0);
}

Test(torch_pools_adv, release_during_a_capture_on_the_same_stream_keeps_it_valid)
{
    release_during_a_capture(1, pid(32, 0), pid(33, 0));
}

/* 24. The same in relaxed capture mode (torch.cuda.graph(capture_error_mode="relaxed")), where
 * a synchronize is allowed: the release's frees on the capturing stream must not put work into
 * the capture, nor make eager streams join it, and the capture must end valid. */
Test(torch_pools_adv, release_during_a_relaxed_capture_on_the_same_stream)
{
    sim->set_capacity(0, 64 * MIB);
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    gpool_torch_mempool_id A = pid(34, 0), B = pid(35, 0);
    void *a[2];
    CUgraph ga = capture23(s, A, a);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    cr_assert_eq(drv.begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    /* B's window is open and the hooks cannot tell a relaxed capture from a global one before
     * it allocates: A's memory may wait (no synchronize), never longer than B's window */
    cr_assert(graph_blocks() == 0 || graph_blocks() == 2, "%zu held", graph_blocks());
    void *b = must_alloc(N, 0, s);
    /* eager work meanwhile takes memory (A's blocks among it) */
    void *got[32];
    int k = 0;
    while (k < 32) {
        void *p = gpool_torch_alloc(N, 0, e);
        if (!p) break;
        cr_assert(!ranges_overlap(p, N, b, N), "eager work got capture B's block");
        got[k++] = p;
    }
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(e, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_NONE, "the eager stream joined capture B");
    cr_assert_eq(drv.is_capturing(s, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE, "capture B was invalidated");
    for (int i = 0; i < k; i++)
        cr_assert_eq(sim_kernel(e, got[i], N), CUDA_SUCCESS);
    gpool_torch_free(b, N, 0, s);
    CUgraph gb = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, B);
    for (int i = 0; i < k; i++)
        gpool_torch_free(got[i], N, 0, e);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 25. Small tensors (slab-sized blocks): 64 blocks of 4 KiB freed inside a capture share pages
 * with eager blocks; no eager allocation may land on them while the graph lives. */
Test(torch_pools_adv, small_graph_blocks_are_not_handed_to_eager_work)
{
    enum { G = 64 };
    size_t n = 4096;
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    void *w = must_alloc(n, 0, s);
    gpool_torch_free(w, n, 0, s);
    gpool_torch_mempool_id A = pid(36, 0);
    static void *g[G];
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    for (int i = 0; i < G; i++)
        g[i] = must_alloc(n, 0, s);
    for (int i = 0; i < G; i++)
        gpool_torch_free(g[i], n, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    cr_assert_eq(graph_blocks(), G);
    for (int i = 0; i < G; i++)
        cr_assert_eq(sim_kernel(r, g[i], n), CUDA_SUCCESS);
    probe_on(0, e, n, 512, g, G, n, "small blocks, A live");
    probe_on(0, s, n, 512, g, G, n, "small blocks on the capture stream, A live");
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    probe_on(0, e, n, 512, NULL, 0, 0, "after");
    cr_assert_eq(sim->violations(), 0);
}

/* 26. (Beyond the first-allocation promise: commit 544f537's claim that a free before a
 * capture's first allocation is held.) A use_mem_pool window opens and closes inside capture
 * A (torch 2.3+ forms) before A's first allocation, and an eager input x is dropped in between:
 * the end of the use_mem_pool window must not give x to the free batch while A's window is
 * still open; A's first allocation then claims it. */
Test(torch_pools_adv, use_mem_pool_end_inside_a_capture_keeps_its_suspects)
{
    CUstream s = capture_stream(), e = capture_stream();
    warm_up(s);
    void *x = must_alloc(N, 0, e);
    cr_assert_eq(sim_kernel(e, x, N), CUDA_SUCCESS);
    gpool_torch_mempool_id A = pid(37, 0), U = pid(0, 38);
    gpool_torch_begin_allocate_to_pool(0, A, NULL);
    capture_begin(s);
    gpool_torch_begin_allocate_to_pool(0, U, NULL);
    gpool_torch_free(x, N, 0, e); /* A's kernels read x, then it is dropped */
    cr_assert(held(x), "x not held while A's window is open");
    gpool_torch_end_allocate_to_pool(0, U);
    gpool_torch_release_pool(0, U);
    cr_assert(held(x), "x went to the free batch when the use_mem_pool window ended, though "
                       "capture A's window is still open and A captures");
    void *y = must_alloc(N, 0, s); /* A's first allocation */
    gpool_torch_free(y, N, 0, s);
    CUgraph ga = capture_end(s);
    gpool_torch_end_allocate_to_pool(0, A);
    cr_assert(held(x), "x not held after capture A");
    capture_destroy(ga);
    gpool_torch_release_pool(0, A);
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 27. Two devices: graph A on device 1 is destroyed (its pool released) while graph B is being
 * captured on device 0 (global mode, B has allocated: the hooks know it). The release's
 * synchronize on device 1 is still an unsafe call during device 0's global capture: B must
 * stay valid. */
Test(torch_pools_adv2, release_on_one_device_during_a_capture_on_another, .init = setup2)
{
    CUstream s0 = capture_stream();
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    CUstream s1 = capture_stream();
    gpool_torch_mempool_id A = pid(40, 0), B = pid(41, 0);
    void *w = must_alloc(N, 1, s1);
    gpool_torch_free(w, N, 1, s1);
    gpool_torch_begin_allocate_to_pool(1, A, NULL);
    capture_begin(s1);
    void *t = must_alloc(N, 1, s1);
    gpool_torch_free(t, N, 1, s1);
    CUgraph ga = capture_end(s1);
    gpool_torch_end_allocate_to_pool(1, A);
    cr_assert_eq(graph_blocks_of(1), 1);
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    w = must_alloc(N, 0, s0);
    gpool_torch_free(w, N, 0, s0);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s0);
    void *b = must_alloc(N, 0, s0);
    capture_destroy(ga);
    gpool_torch_release_pool(1, A);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s0, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE,
                 "device 1's release invalidated device 0's capture (status %d)", (int)cs);
    gpool_torch_free(b, N, 0, s0);
    CUgraph gb = capture_end(s0);
    gpool_torch_end_allocate_to_pool(0, B);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks_of(0), 0);
    cr_assert_eq(graph_blocks_of(1), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* 28. Two devices: device 1's free batch is due and eager work allocates on device 1 while
 * device 0 captures a graph (global mode, already allocated: known to the hooks). Its flush's
 * synchronize must not invalidate device 0's capture. */
Test(torch_pools_adv2, batch_flush_on_one_device_during_a_capture_on_another, .init = setup2)
{
    setenv("GPOOL_CONF", "cudafree_batch=4M", 1);
    CUstream s0 = capture_stream();
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    CUstream e1 = capture_stream();
    void *w = must_alloc(N, 1, e1);
    gpool_torch_free(w, N, 1, e1); /* device 1's batch holds its limit: due */
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    gpool_torch_mempool_id B = pid(42, 0);
    gpool_torch_begin_allocate_to_pool(0, B, NULL);
    capture_begin(s0);
    void *b = must_alloc(N, 0, s0);
    cr_assert_eq(drv.ctx_set_current(drv.ctx[1]), CUDA_SUCCESS);
    void *y = must_alloc(N, 1, e1); /* eager work on device 1 meanwhile */
    cr_assert_eq(drv.ctx_set_current(drv.ctx[0]), CUDA_SUCCESS);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_eq(drv.is_capturing(s0, &cs), CUDA_SUCCESS);
    cr_assert_eq(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE,
                 "device 1's batch flush invalidated device 0's capture (status %d)", (int)cs);
    gpool_torch_free(b, N, 0, s0);
    CUgraph gb = capture_end(s0);
    gpool_torch_end_allocate_to_pool(0, B);
    gpool_torch_free(y, N, 1, e1);
    capture_destroy(gb);
    gpool_torch_release_pool(0, B);
    cr_assert_eq(graph_blocks_of(0), 0);
    cr_assert_eq(sim->violations(), 0);
    unsetenv("GPOOL_CONF");
}

/* 29. A capture no pool window names (cuStreamBeginCapture by an extension on a PyTorch stream,
 * no begin-allocate hook): its memory is the graph's until gpool_torch_release_graph_memory().
 * An unrelated torch.cuda.use_mem_pool block (begin, end, release: the only pool ever begun)
 * must not give it back. */
Test(torch_pools_adv, capture_without_a_window_survives_an_unrelated_pool_release)
{
    CUstream s = capture_stream(), e = capture_stream(), r = capture_stream();
    warm_up(s);
    capture_begin(s);
    void *x = must_alloc(N, 0, s);
    void *y = must_alloc(N, 0, s);
    gpool_torch_free(x, N, 0, s);
    CUgraph g = capture_end(s);
    gpool_torch_free(y, N, 0, s);
    cr_assert(held(x) && held(y));
    gpool_torch_mempool_id U = pid(0, 43);
    gpool_torch_begin_allocate_to_pool(0, U, NULL);
    void *u = must_alloc(N, 0, e);
    gpool_torch_free(u, N, 0, e);
    gpool_torch_end_allocate_to_pool(0, U);
    gpool_torch_release_pool(0, U);
    size_t still = graph_blocks();
    void *bl[2] = {x, y};
    replay(r, bl, 2, N);
    probe(e, 16, bl, 2, "raw graph live, after the use_mem_pool release");
    cr_assert(held(x) && held(y),
              "the raw graph's memory went back with an unrelated "
              "use_mem_pool's release (%zu graph blocks held)",
              still);
    capture_destroy(g);
    cr_assert_eq(gpool_torch_release_graph_memory(), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(graph_blocks(), 0);
    cr_assert_eq(sim->violations(), 0);
}
