/* test_preload_ipc.c — CUDA IPC through the drop-in (preload/preload_ipc.c, docs/ipc.md): a
 * producer allocates with cudaMalloc, writes and shares with cudaIpcGetMemHandle; its forked
 * consumers open with cudaIpcOpenMemHandle, read and close (tests/preload/ipc_prog.c), on the
 * simulator, two (or four) real processes under LD_PRELOAD. */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

static struct run r;

#define IPC_ENV "GPOOL_CONF=ipc=1 GPOOL_SIM_STRICT=1"
/* cudaFree straight to the pool (no batch): the owner's free reaches gpool while the block is
 * open, and a freed block's handle is stale at once (in the default batch mode it stays
 * openable until its batch is flushed; its memory is not reused while open either way) */
#define IPC_SYNC_ENV "GPOOL_CONF=ipc=1,cudafree=sync GPOOL_SIM_STRICT=1"

static void init(void)
{
    NEED_SIM();
}

/* The simulator's half of issue 28 (shareable handles, branch ipcsim): without it no pool can
 * be made exportable, and the two-process tests have nothing to run on. */
static void init_shareable(void)
{
    NEED_SIM();
    if (!sim_driver_proc("cuMemExportToShareableHandle"))
        cr_skip_test("the simulator cannot export memory as POSIX file descriptors yet");
}

Test(preload_ipc, without_ipc_the_handle_is_refused_and_said_why, .init = init)
{
    run_expect(&r, "ipc_prog", "noipc", 1, "GPOOL_SIM_STRICT=1", 0);
    cr_assert_eq(field(&r, "code"), cudaErrorNotSupported, "%s", r.out);
    cr_assert_eq(count_lines_with(r.out, "GPOOL_CONF=ipc=1"), 1, "%s", r.out);
}

Test(preload_ipc, consumer_reads_what_the_producer_wrote, .init = init_shareable)
{
    run_expect(&r, "ipc_prog", "basic", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "read"), 4, "%s", r.out);
    cr_assert_eq(field(&r, "consumer_mappings"), 0, "%s", r.out);
}

Test(preload_ipc, producer_free_while_open_is_not_reused_until_close, .init = init_shareable)
{
    run_expect(&r, "ipc_prog", "free_open", 1, IPC_SYNC_ENV, 0);
    cr_assert_eq(field(&r, "reused_before_close"), 0, "%s", r.out);
    cr_assert_eq(field(&r, "consumer_read_ok"), 1, "%s", r.out);
}

Test(preload_ipc, consumer_crash_leaks_nothing_in_the_producer, .init = init_shareable)
{
    run_expect(&r, "ipc_prog", "crash", 1, IPC_SYNC_ENV, 0);
    cr_assert_eq(field(&r, "freed_after_crash"), 1, "%s", r.out);
}

Test(preload_ipc, many_blocks_many_consumers, .init = init_shareable)
{
    run_expect(&r, "ipc_prog", "many", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "reads_ok"), 24, "%s", r.out);
}

Test(preload_ipc, damaged_stale_and_foreign_handles, .init = init_shareable)
{
    run_expect(&r, "ipc_prog", "errors", 1, IPC_SYNC_ENV, 0);
    cr_assert_eq(field(&r, "damaged"), cudaErrorInvalidValue, "%s", r.out);
    cr_assert_eq(field(&r, "stale"), cudaErrorInvalidResourceHandle, "%s", r.out);
    cr_assert_eq(field(&r, "foreign_ok"), 0, "%s", r.out);
}
