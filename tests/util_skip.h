/* util_skip.h — Criterion-side skips for the real-GPU run of the suite.
 * `make gpu-check` (scripts/gpu-check.sh) runs every test binary on the real libcuda.so.1 with
 * GPOOL_TEST_REAL_GPU=1. A test that needs the simulated driver starts with one of these and is
 * reported as skipped, with the reason, instead of failing; everything else runs on the GPU.
 * To try the skip path without a GPU, run a binary with GPOOL_TEST_REAL_GPU=1 and
 * GPOOL_LIBCUDA=build/sim/libcuda.so.1 (sim_api() is NULL then, as on a GPU).
 *
 * NEED_SIM()         the test uses the simulator: its control API (sim->..., gpoolsim_*:
 *                    capacity, held streams, fault injection, call or live counters), driver
 *                    entry points through sim_driver_proc(), GPOOL_SIM_* or GPOOL_LIBCUDA, or
 *                    programs run against build/sim. As the first statement of a suite's .init
 *                    it skips every test of the suite (suite_needs_sim()).
 * NEED_HOST_VIDMEM() the test reads or writes device (vidmem) blocks from the host: only the
 *                    simulator's device pointers are host addresses; on a GPU that is SIGSEGV.
 * Leak checks with sim_live_total() / sim_bytes_in_use() need neither: they are 0 on a GPU. */
#ifndef GPOOL_TESTS_UTIL_SKIP_H
#define GPOOL_TESTS_UTIL_SKIP_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util_sim.h"

#define NEED_SIM()                                                                                 \
    do {                                                                                           \
        if (test_real_gpu()) cr_skip_test("needs the simulated driver (GPOOL_TEST_REAL_GPU=1)");   \
    } while (0)

#define NEED_HOST_VIDMEM()                                                                         \
    do {                                                                                           \
        if (test_real_gpu())                                                                       \
            cr_skip_test("touches device memory from the host, which only the simulated "          \
                         "driver allows (GPOOL_TEST_REAL_GPU=1)");                                 \
    } while (0)

/* NOT_UNDER_VALGRIND(why): valgrind (make test-valgrind, which preloads vgpreload_*.so) caps
 * the address space a process may reserve far below an H200's 141 GiB, and runs faulting
 * accesses to PROT_NONE mappings its own way: the tests that need either skip there. */
#define NOT_UNDER_VALGRIND(why)                                                                    \
    do {                                                                                           \
        const char *pre_ = getenv("LD_PRELOAD");                                                   \
        if (pre_ && strstr(pre_, "vgpreload")) cr_skip_test("under valgrind: %s", why);            \
    } while (0)

/* .init of a suite that only makes sense on the simulator: every test skips on a real GPU. */
static inline void suite_needs_sim(void)
{
    NEED_SIM();
}

#endif /* GPOOL_TESTS_UTIL_SKIP_H */
