/* hot_prog.c — the drop-in's cached pair (cudaMalloc + cudaFree of one size, as
 * `gpool-bench hotpath --dropin` times it) against the cudart stand-in, under
 * LD_PRELOAD=libgpool_preload.so, default configuration. Usage: hot_prog SIZE LIVE (blocks of
 * SIZE held while the pairs run, as the benchmark's heap sizes do). Prints
 * pairs=, allocs=, misses= (allocations gpool's thread cache did not serve from what it held:
 * it went to the arena to refill), cuEventRecord=, cuCtxSynchronize=; exits 0 when the pairs
 * stay in the thread cache (the batch's legacy-stream fence every 32 frees at most, no
 * synchronize, no refill). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpool.h"
#include "prog_driver.h"

static int pairs(size_t size, int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, size) == cudaSuccess && cudaFree(p) == cudaSuccess);
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(argc == 3);
    size_t size = strtoull(argv[1], NULL, 10), live = strtoull(argv[2], NULL, 10);
    void **held = calloc(live + 1, sizeof *held);
    CHECK(held);
    for (size_t i = 0; i < live; i++)
        CHECK(cudaMalloc(&held[i], size) == cudaSuccess);
    gpool_status (*stats)(int, gpool_stats *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "gpool_preload_stats_get");
    CHECK(stats);
    enum { WARM = 1000, N = 20000 };
    CHECK(pairs(size, WARM) == 0);
    gpool_stats s0 = GPOOL_STATS_INIT, s1 = GPOOL_STATS_INIT;
    CHECK(stats(0, &s0) == GPOOL_OK);
    unsigned long rec0 = prog_sim_count("cuEventRecord"),
                  sync0 = prog_sim_count("cuCtxSynchronize");
    CHECK(pairs(size, N) == 0);
    CHECK(stats(0, &s1) == GPOOL_OK);
    unsigned long records = prog_sim_count("cuEventRecord") - rec0;
    unsigned long syncs = prog_sim_count("cuCtxSynchronize") - sync0;
    unsigned long long allocs = s1.kind[GPOOL_MEM_AUTO].allocs - s0.kind[GPOOL_MEM_AUTO].allocs;
    unsigned long long misses = allocs - (s1.tcache_hits - s0.tcache_hits);
    printf("pairs=%d allocs=%llu misses=%llu cuEventRecord=%lu cuCtxSynchronize=%lu\n", N, allocs,
           misses, records, syncs);
    CHECK(allocs == N && syncs == 0);
    CHECK(misses <= N / 1000); /* the thread cache serves the pairs from what it holds */
    CHECK(records >= N / 32);  /* every freed block is fenced before it is handed out again */
    for (size_t i = 0; i < live; i++)
        CHECK(cudaFree(held[i]) == cudaSuccess);
    free(held);
    return 0;
}
