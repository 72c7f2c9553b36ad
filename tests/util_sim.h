/* util_sim.h — reach the simulated driver's control API (sim/gpool_sim.h) from tests.
 * The simulator is the file named by $GPOOL_LIBCUDA, the same one gpool dlopens, so both see
 * one instance. No Criterion dependency. */
#ifndef GPOOL_TESTS_UTIL_SIM_H
#define GPOOL_TESTS_UTIL_SIM_H

#include <stddef.h>

#include "../sim/gpool_sim.h"

struct sim_api {
    void *lib; /* dlopen handle of $GPOOL_LIBCUDA */
    int (*fail_nth)(const char *entry, unsigned long nth);
    void (*fail_clear)(void);
    CUresult (*injected_error)(const char *entry);
    unsigned long (*call_count)(const char *entry);
    unsigned long (*call_total)(void);
    void (*reset_counts)(void);
    size_t (*bytes_in_use)(int device);
    size_t (*peak_bytes)(int device);
    void (*set_capacity)(int device, size_t bytes);
    int (*stream_hold)(CUstream s);
    int (*stream_release)(CUstream s);
    unsigned long (*forced_syncs)(void);
    void (*get_live)(struct gpoolsim_live *out);
    const char *const *(*entry_names)(size_t *count);
    /* the happens-before referee: a kernel on stream s reads or writes [p, p+n); violations
     * counted so far (sim/gpool_sim.h) */
    CUresult (*touch)(CUstream s, CUdeviceptr p, size_t n, int is_write);
    unsigned long (*violations)(void);
};

/* 1 when GPOOL_TEST_REAL_GPU=1: the suite runs on a real driver (scripts/gpu-check.sh), and
 * tests that need the simulator skip themselves (tests/util_skip.h). */
int test_real_gpu(void);

/* Loaded once (thread-safe); NULL, without asserting, when $GPOOL_LIBCUDA is unset or is not
 * the simulator, and always when test_real_gpu(): a real driver has no control API, and the
 * simulator standing in for one (GPOOL_TEST_REAL_GPU=1 GPOOL_LIBCUDA=build/sim/libcuda.so.1,
 * to try the skip path without a GPU) must look the same to the tests. */
const struct sim_api *sim_api(void);

/* A driver entry point by base name ("cuMemCreate") through the simulator's
 * cuGetProcAddress at CUDA_VERSION; NULL if unavailable. */
void *sim_driver_proc(const char *symbol);

/* A kernel on stream s writes [p, p+n), seen by the referee: one touch per granule-sized
 * mapping (gpool maps a block page by page). CUDA_ERROR_NOT_SUPPORTED without the simulator's
 * touch; else the first failing touch's result. */
CUresult sim_kernel(CUstream s, void *p, size_t n);

/* Sum of all live counters: 0 after a clean shutdown. 0 when sim_api() is NULL, so a leak
 * check `cr_assert_eq(sim_live_total(), 0)` is a no-op on a real GPU and the test still runs. */
size_t sim_live_total(void);

/* The simulator's bytes in use on a device; 0 when sim_api() is NULL (a no-op leak check on a
 * real GPU, like sim_live_total()). Only for "nothing left" checks: a test that needs the real
 * number needs the simulator (NEED_SIM()). */
size_t sim_bytes_in_use(int device);

#endif /* GPOOL_TESTS_UTIL_SIM_H */
