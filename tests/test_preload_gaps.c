/* test_preload_gaps.c — the drop-in's known gaps closed (docs/dropin.md), beyond the findings
 * of tests/test_preload_adversarial.c: tests/preload/adv_prog under LD_PRELOAD on the
 * simulated driver, in every cudaFree mode.
 *   - a second free of a block still waiting in a cudaFree batch is an error, also from
 *     another thread and for cudaFreeHost (before: success, the block queued twice);
 *   - cudaPointerGetAttributes of such a block describes no allocation (before: a live one);
 *   - CU_POINTER_ATTRIBUTE_BUFFER_ID through cuPointerGetAttributes: one id per block, the
 *     same at every address of it (before: the page's id, shared by its blocks);
 *   - a cuMemAlloc gpool cannot serve passes through, and when the driver is out of memory
 *     gpool's cache goes back and the call is tried once more (preload_others.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "util_preload.h"
#include "util_skip.h"

static const char *const modes[] = {
    "",
    "GPOOL_CONF=cudafree=stream",
    "GPOOL_CONF=cudafree=sync",
    "GPOOL_CONF=cudafree_flush=event",
};

/* adv_prog `mode` in every cudaFree mode (but sync, with no_sync): exit 0 and no ordering
 * violation. */
static void modes_of(const char *mode, const char *env, int no_sync)
{
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (no_sync && strstr(modes[i], "sync")) continue;
        char e[512];
        snprintf(e, sizeof e, "GPOOL_SIM_STRICT=0 %s %s", modes[i], env ? env : "");
        struct run r;
        run_expect(&r, "adv_prog", mode, 1, e, 0);
        cr_expect_eq(field(&r, "violations"), 0, "%s", r.out);
    }
}

static void each_mode(const char *mode, const char *env)
{
    modes_of(mode, env, 0);
}

TestSuite(preload_gaps, .timeout = 120);

/* cudaFree reference: "if cudaFree(devPtr) has already been called before, an error is
 * returned" (cudaErrorInvalidValue); the first free waits in another thread's batch */
Test(preload_gaps, double_free_from_another_thread_is_an_error)
{
    NEED_SIM();
    each_mode("double_free_thread", NULL);
}

/* 20000 blocks waiting at once (some in the pending set's overflow), each freed twice */
Test(preload_gaps, double_free_of_many_waiting_blocks_is_an_error)
{
    NEED_SIM();
    modes_of("double_free_many", NULL, 1);
}

/* cudaFreeHost twice, the first one waiting in the batch (a non-blocking stream exists). Not
 * in sync mode: there the second free is not gpool's and reaches the cudart stand-in, whose
 * host memory is malloc's and cannot tell a stranger pointer */
Test(preload_gaps, double_cudafreehost_is_an_error)
{
    NEED_SIM();
    modes_of("double_free_host", NULL, 1);
}

/* cudaPointerGetAttributes of a block freed, still in the batch: no allocation there */
Test(preload_gaps, freed_block_runtime_query_is_unregistered)
{
    NEED_SIM();
    each_mode("query_freed_runtime", NULL);
}

/* CU_POINTER_ATTRIBUTE_BUFFER_ID: "a process-wide unique ID for an allocated memory region" */
Test(preload_gaps, buffer_id_per_block_through_attributes)
{
    NEED_SIM();
    each_mode("query_buffer_id_attrs", NULL);
}

/* gpool's own cuMemSetAccess fails once (not out-of-memory): cuMemAlloc(900 MiB) passes
 * through, the driver is out of memory (gpool caches 800 of 1024 MiB), the cache goes back
 * and the second driver cuMemAlloc succeeds */
Test(preload_gaps, passthrough_cuMemAlloc_retries_after_giving_the_cache_back)
{
    NEED_SIM();
    struct run r;
    run_expect(&r, "adv_prog", "passthrough_oom", 1,
               "GPOOL_SIM_STRICT=1 GPOOL_SIM_MEMORY=1G ADV_FAIL_ENTRY=cuMemSetAccess", 0);
    cr_assert_eq(field(&r, "driver_cuMemAlloc"), 2, "%s", r.out);
}
