/* The drop-in's pointer queries and memory for others (issue 23), on the strict simulator:
 * tests/preload/query_prog run with and without LD_PRELOAD=libgpool_preload.so.
 *   - cuMemGetAddressRange, cuPointerGetAttribute(s) and cudaPointerGetAttributes on a gpool
 *     block answer as for cudaMalloc memory: the block's own base and requested size, device
 *     memory of device 0 in its primary context (before: a 512 B block reported the 2 MiB page
 *     under it, and the two ends of a 70 MiB block different bases).
 *   - after 800 MiB cuMemAlloc'd and freed on a 1 GiB device, an allocation gpool does not
 *     serve (cuMemCreate, cuMemAllocManaged, cuMemAllocPitch, cudaMallocManaged,
 *     cudaMallocPitch) of 512 MiB succeeds: gpool gives its cache back on out-of-memory
 *     (before: cuMemGetInfo said 1024 of 1024 MiB free and the allocation failed). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

static void setup(void)
{
    NEED_SIM(); /* the helper runs against build/sim */
    cr_assert_not_null(sim_api(), "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(preload_query, .init = setup, .timeout = 120);

/* The driver's own answer for cuMemAlloc memory, then gpool's blocks: the same answer. */
Test(preload_query, device_block_ranges_name_the_block)
{
    static struct run plain, pre;
    run_expect(&plain, "query_prog", "device", 0, NULL, 0);
    run_expect(&pre, "query_prog", "device", 1, NULL, 0);
    cr_assert_eq(count_lines_with(pre.out, "range("), 10, "%s", pre.out);
}

Test(preload_query, host_block_ranges_name_the_block)
{
    static struct run plain, pre;
    run_expect(&plain, "query_prog", "host", 0, NULL, 0);
    run_expect(&pre, "query_prog", "host", 1, NULL, 0);
    cr_assert_eq(field(&pre, "pool_host_allocs"), 4, "gpool served the blocks:\n%s", pre.out);
}

Test(preload_query, foreign_pointers_get_the_drivers_answer)
{
    static struct run plain, pre;
    run_expect(&plain, "query_prog", "foreign", 0, NULL, 0);
    run_expect(&pre, "query_prog", "foreign", 1, NULL, 0);
}

/* The simulator's own attributes for VMM, managed and pitched memory (no interposer). */
Test(preload_query, simulator_answers_vmm_managed_and_pitched_memory)
{
    static struct run plain;
    run_expect(&plain, "query_prog", "sim", 0, NULL, 0);
}

/* Nothing cached: the retry finds nothing to give back and the driver's error stands. */
Test(preload_query, live_memory_is_not_given_back)
{
    static struct run plain, pre;
    run_expect(&plain, "query_prog", "others_live", 0, "GPOOL_SIM_MEMORY=1G", 0);
    run_expect(&pre, "query_prog", "others_live", 1, "GPOOL_SIM_MEMORY=1G", 0);
}

/* During a stream capture nothing is given back: the capture stays valid. */
Test(preload_query, no_give_back_while_a_stream_captures)
{
    static struct run plain, pre;
    run_expect(&plain, "query_prog", "others_capture", 0, "GPOOL_SIM_MEMORY=1G", 0);
    run_expect(&pre, "query_prog", "others_capture", 1, "GPOOL_SIM_MEMORY=1G", 0);
    cr_assert_eq(field(&pre, "create_capturing"), 2, "out of memory stands:\n%s", pre.out);
}

/* A program linked with -lcuda calling the driver by name. */
Test(preload_query, linked_programs_get_the_blocks_range)
{
    static struct run plain, pre;
    run_expect(&plain, "query_direct", "", 0, NULL, 0);
    run_expect(&pre, "query_direct", "", 1, NULL, 0);
    cr_assert_eq(field(&pre, "size"), 512, "%s", pre.out);
    cr_assert_eq(field(&pre, "pool_allocs"), 4, "gpool served the blocks:\n%s", pre.out);
    cr_assert_eq(field(&plain, "pool_allocs"), 0, "%s", plain.out);
}

/* 800 MiB cached by gpool, then 512 MiB of `kind` on a 1 GiB device. */
static void others(const char *kind)
{
    static struct run plain, pre;
    char mode[64];
    snprintf(mode, sizeof mode, "others %s", kind);
    run_expect(&plain, "query_prog", mode, 0, "GPOOL_SIM_MEMORY=1G", 0);
    run_expect(&pre, "query_prog", mode, 1, "GPOOL_SIM_MEMORY=1G", 0);
    cr_assert_eq(field(&pre, "free_before"), 1024, "gpool's cache counts as free:\n%s", pre.out);
    cr_assert_leq(field(&pre, "free_after"), 512, "%s", pre.out);
}

Test(preload_query, cache_goes_back_for_cuMemCreate)
{
    others("create");
}
Test(preload_query, cache_goes_back_for_cuMemAllocManaged)
{
    others("managed");
}
Test(preload_query, cache_goes_back_for_cuMemAllocPitch)
{
    others("pitch");
}
Test(preload_query, cache_goes_back_for_cudaMallocManaged)
{
    others("rt_managed");
}
Test(preload_query, cache_goes_back_for_cudaMallocPitch)
{
    others("rt_pitch");
}
