/* util_sim.c — see util_sim.h. */
#include "util_sim.h"

#include <stdint.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

static struct sim_api sim_api_table;
static const struct sim_api *sim_api_loaded;
static pthread_once_t sim_api_once = PTHREAD_ONCE_INIT;

#define SIM_API_LOAD(field, name)                                                                  \
    do {                                                                                           \
        *(void **)&t->field = dlsym(t->lib, name);                                                 \
        if (!t->field) return;                                                                     \
    } while (0)

int test_real_gpu(void)
{
    const char *v = getenv("GPOOL_TEST_REAL_GPU");
    return v && v[0] == '1'; /* as tests/test_faults.c reads it */
}

static void sim_api_load(void)
{
    struct sim_api *t = &sim_api_table;
    if (test_real_gpu()) return; /* no control API on a real driver */
    const char *path = getenv("GPOOL_LIBCUDA");
    if (!path || !*path) return;
    t->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!t->lib) return;
    SIM_API_LOAD(fail_nth, "gpoolsim_fail_nth");
    SIM_API_LOAD(fail_clear, "gpoolsim_fail_clear");
    SIM_API_LOAD(injected_error, "gpoolsim_injected_error");
    SIM_API_LOAD(call_count, "gpoolsim_call_count");
    SIM_API_LOAD(call_total, "gpoolsim_call_total");
    SIM_API_LOAD(reset_counts, "gpoolsim_reset_counts");
    SIM_API_LOAD(bytes_in_use, "gpoolsim_bytes_in_use");
    SIM_API_LOAD(peak_bytes, "gpoolsim_peak_bytes");
    SIM_API_LOAD(set_capacity, "gpoolsim_set_capacity");
    SIM_API_LOAD(stream_hold, "gpoolsim_stream_hold");
    SIM_API_LOAD(stream_release, "gpoolsim_stream_release");
    SIM_API_LOAD(forced_syncs, "gpoolsim_forced_syncs");
    SIM_API_LOAD(get_live, "gpoolsim_get_live");
    SIM_API_LOAD(entry_names, "gpoolsim_entry_names");
    SIM_API_LOAD(touch, "gpoolsim_touch");
    SIM_API_LOAD(violations, "gpoolsim_violations");
    sim_api_loaded = t;
}

const struct sim_api *sim_api(void)
{
    pthread_once(&sim_api_once, sim_api_load);
    return sim_api_loaded;
}

void *sim_driver_proc(const char *symbol)
{
    const struct sim_api *api = sim_api();
    if (!api) return NULL;
    CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    *(void **)&get_proc = dlsym(api->lib, "cuGetProcAddress_v2");
    void *fn = NULL;
    if (!get_proc || get_proc(symbol, &fn, CUDA_VERSION, 0, NULL) != CUDA_SUCCESS) return NULL;
    return fn;
}

/* Without the simulator (a real GPU) the leak checks built on these are no-ops. */
size_t sim_live_total(void)
{
    const struct sim_api *api = sim_api();
    struct gpoolsim_live l;
    if (!api) return 0;
    api->get_live(&l);
    return l.handles + l.mappings + l.reservations + l.host_allocs + l.host_registrations +
           l.streams + l.events + l.legacy_allocs;
}

size_t sim_bytes_in_use(int device)
{
    const struct sim_api *api = sim_api();
    return api ? api->bytes_in_use(device) : 0;
}

CUresult sim_kernel(CUstream s, void *p, size_t n)
{
    const struct sim_api *api = sim_api();
    if (!api || !api->touch) return CUDA_ERROR_NOT_SUPPORTED;
    uintptr_t a = (uintptr_t)p, end = a + n;
    while (a < end) {
        uintptr_t next = (a / GPOOL_SIM_GRANULARITY + 1) * GPOOL_SIM_GRANULARITY;
        if (next > end) next = end;
        CUresult rc = api->touch(s, (CUdeviceptr)a, next - a, 1);
        if (rc != CUDA_SUCCESS) return rc;
        a = next;
    }
    return CUDA_SUCCESS;
}
