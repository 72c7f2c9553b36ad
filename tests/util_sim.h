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
};

/* Loaded once (thread-safe); NULL when $GPOOL_LIBCUDA is unset or is not the simulator. */
const struct sim_api *sim_api(void);

/* A driver entry point by base name ("cuMemCreate") through the simulator's
 * cuGetProcAddress at CUDA_VERSION; NULL if unavailable. */
void *sim_driver_proc(const char *symbol);

/* Sum of all live counters: 0 after a clean shutdown. */
size_t sim_live_total(void);

#endif /* GPOOL_TESTS_UTIL_SIM_H */
