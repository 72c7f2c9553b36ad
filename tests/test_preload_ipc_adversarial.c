/* test_preload_ipc_adversarial.c — an outsider's checks of CUDA IPC through the drop-in
 * (preload/preload_ipc.c) against the CUDA runtime reference and docs/ipc.md: the same handle
 * opened twice by one process, a handle asked for a pointer inside a block, bad flags, the
 * exporter opening its own handle, a handle sent after a batched cudaFree, and descriptors
 * over many rounds (tests/preload/ipc_adv_prog.c; two real processes on the simulator). */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "util_preload.h"
#include "util_sim.h"
#include "util_skip.h"

static struct run r;

#define IPC_ENV "GPOOL_CONF=ipc=1 GPOOL_SIM_STRICT=1"

static void init(void)
{
    NEED_SIM();
    if (!sim_driver_proc("cuMemExportToShareableHandle"))
        cr_skip_test("the simulator cannot export memory as POSIX file descriptors");
}

/* cudaIpcOpenMemHandle: "If the memory handle has already been opened by the current context,
 * the reference count on the handle is incremented by 1 and the existing device pointer is
 * returned"; cudaIpcCloseMemHandle decrements it and unmaps at 0; flags "must be specified as
 * cudaIpcMemLazyEnablePeerAccess" (cuda_runtime_api.h). */
Test(preload_ipc_adversarial, same_handle_twice_is_one_counted_mapping, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "twice", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "twice_bits"), 63, "%s", r.out);
    cr_assert_eq(field(&r, "twice_same_pointer"), 1, "%s", r.out);
    cr_assert_eq(field(&r, "bad_flags_code"), cudaErrorInvalidValue, "%s", r.out);
    cr_assert_eq(field(&r, "driver_bits"), 31, "%s", r.out);
    cr_assert_eq(field(&r, "read_after"), 1, "%s", r.out);
}

/* cudaIpcOpenMemHandle maps memory "exported from another process": the exporter's own
 * handle is an error, and nothing is mapped. */
Test(preload_ipc_adversarial, exporter_opening_its_own_handle_is_refused, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "self", 1, IPC_ENV, 0);
    cr_assert_neq(field(&r, "self_code"), cudaSuccess, "%s", r.out);
    cr_assert_eq(field(&r, "self_mapped"), 0, "%s", r.out);
}

/* docs/ipc.md: with cudafree=batch a block's handle stays openable until its batch is
 * flushed, and its bytes are the block's. */
Test(preload_ipc_adversarial, handle_after_a_batched_cudafree_still_reads, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "batch", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "batch_read"), 1, "%s", r.out);
}

/* docs/ipc.md: with the default cudafree=batch the freed block's memory is not reused while
 * another process has it open, even when the batch is flushed by the allocations after it. */
Test(preload_ipc_adversarial, batched_free_of_an_open_block_is_not_reused, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "batch_reuse", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "reused_while_open"), 0, "%s", r.out);
    cr_assert_eq(field(&r, "importer_intact"), 1, "%s", r.out);
}

/* Six rounds of share, open, read, close, free: no round leaves a descriptor in either. */
Test(preload_ipc_adversarial, rounds_leave_no_descriptor_behind, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "fds", 1, "GPOOL_CONF=ipc=1,cudafree=sync GPOOL_SIM_STRICT=1",
               0);
    cr_assert_eq(field(&r, "reads"), 6, "%s", r.out);
    cr_assert_eq(field(&r, "producer_fd_growth"), 0, "%s", r.out);
    cr_assert_eq(field(&r, "consumer_fd_growth"), 0, "%s", r.out);
}

/* DESIGN.md: pointer queries describe the allocation the program got, its base and size
 * (NCCL, UCX build on them); on an opened IPC pointer CUDA answers the exported allocation. */
/* The range of an opened pointer is the exporter's allocation, not the span of pages mapped to
 * reach it (preload_query.c asks the pool's imports). */
Test(preload_ipc_adversarial, address_range_of_an_opened_pointer_is_the_allocation, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "range", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "range_bits_0"), 7, "%s", r.out);
    cr_assert_eq(field(&r, "range_bits_1"), 7, "%s", r.out);
}

/* CU_POINTER_ATTRIBUTE_BUFFER_ID (cuda.h: "A process-wide unique id ... for an allocated memory
 * region") on opened IPC blocks: each open has one, and opens in turn get new ones. The
 * simulator's reservations rarely land where a closed one was (it over-reserves to align), so
 * the stale-id case -- a close that kept its id for the next import at that address -- is
 * exercised only where that happens (bufid_same_address counts it). */
Test(preload_ipc_adversarial, buffer_ids_of_opened_blocks_are_new_each_open, .init = init)
{
    run_expect(&r, "ipc_adv_prog", "bufid", 1, IPC_ENV, 0);
    cr_assert_eq(field(&r, "bufid_bits"), 7, "%s", r.out);
}
