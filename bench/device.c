/* device.c — choose the driver (a real GPU or the simulator), open a device, and talk to the
 * simulator's control API through dlopen(GPOOL_LIBCUDA) + dlsym. */
#include "bench.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/gpool_sim.h"

int bench_default_sim_path(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    int w = snprintf(buf, len, "%s/sim/libcuda.so.1", exe);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

/* 1 if the real driver loads and reports at least one device. */
static int real_gpu_present(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    int present = 0;
    if (dlsym(lib, "gpoolsim_set_capacity")) goto out; /* the simulator on the library path */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0;
    if (init && count && init(0) == CUDA_SUCCESS && count(&n) == CUDA_SUCCESS && n > 0) present = 1;
out:
    dlclose(lib);
    return present;
}

static int use_simulator(char *err, size_t errlen)
{
    const char *env = getenv("GPOOL_LIBCUDA");
    if (env && *env) {
        void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        int is_sim = lib && dlsym(lib, "gpoolsim_set_capacity");
        if (lib) dlclose(lib);
        if (is_sim) return 0;
    }
    char path[PATH_MAX];
    if (bench_default_sim_path(path, sizeof path) != 0 || access(path, R_OK) != 0) {
        snprintf(err, errlen,
                 "no GPU and no simulated driver: %s is missing (run `make sim`, or set "
                 "GPOOL_LIBCUDA to build/sim/libcuda.so.1)",
                 path);
        return -1;
    }
    setenv("GPOOL_LIBCUDA", path, 1);
    return 0;
}

/* The granularity of the device's VMM allocations (cuda.h, cuMemGetAllocationGranularity, the
 * recommended one, as vidmem.c asks for it): the page of "pages above the physical limit". */
static uint64_t device_page_bytes(const gp_driver *drv, int ordinal)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    size_t gran = 0;
    if (drv->cuMemGetAllocationGranularity &&
        drv->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) ==
            CUDA_SUCCESS &&
        gran && !(gran & (gran - 1)))
        return gran;
    return 2 * BENCH_MIB;
}

int bench_device_open(const char *mode, bench_device *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (!mode) mode = "auto";
    int ordinal = 0;
    if (!strcmp(mode, "sim")) {
        if (use_simulator(err, errlen) != 0) return -1;
    } else {
        if (strcmp(mode, "auto") != 0) {
            char *end;
            long v = strtol(mode, &end, 10);
            if (*mode == 0 || *end || v < 0 || v > 1024) {
                snprintf(err, errlen, "--device: expected auto, sim or a device number, got \"%s\"",
                         mode);
                return -1;
            }
            ordinal = (int)v;
        }
        const char *env = getenv("GPOOL_LIBCUDA");
        if (!(env && *env) && !real_gpu_present() && use_simulator(err, errlen) != 0) return -1;
    }
    const gp_driver *drv;
    if (gp_driver_get(&drv) != GPOOL_OK) {
        /* gpool's message names the driver and what failed: "cannot load the CUDA driver
         * PATH ...", "PATH has no cuGetProcAddress_v2 ...", "cuInit: ..." */
        snprintf(err, errlen, "%s", gpool_last_error());
        return -1;
    }
    d->drv = drv;
    d->ordinal = ordinal;
    snprintf(d->libcuda, sizeof d->libcuda, "%s", drv->path);
    d->simulated = dlsym(drv->lib, "gpoolsim_set_capacity") != NULL;
    int count = 0;
    if (drv->cuDeviceGetCount(&count) != CUDA_SUCCESS || ordinal >= count) {
        snprintf(err, errlen, "device %d not present (%d device%s)", ordinal, count,
                 count == 1 ? "" : "s");
        return -1;
    }
    CUresult r = drv->cuDeviceGet(&d->dev, ordinal);
    if (r == CUDA_SUCCESS) r = drv->cuDeviceGetName(d->gpu_name, sizeof d->gpu_name, d->dev);
    size_t total = 0;
    if (r == CUDA_SUCCESS) r = drv->cuDeviceTotalMem(&total, d->dev);
    if (r == CUDA_SUCCESS) r = drv->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    if (r == CUDA_SUCCESS) r = drv->cuCtxSetCurrent(d->ctx);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "opening device %d failed: %s", ordinal, gp_cu_name(r));
        if (d->ctx) drv->cuDevicePrimaryCtxRelease(d->dev);
        d->ctx = NULL;
        return -1;
    }
    d->total_mem = total;
    d->page_bytes = device_page_bytes(drv, ordinal);
    snprintf(d->name, sizeof d->name, "%s", d->simulated ? "simulated" : d->gpu_name);
    return 0;
}

void bench_device_close(bench_device *d)
{
    if (d->drv && d->ctx) {
        d->drv->cuCtxSetCurrent(NULL);
        d->drv->cuDevicePrimaryCtxRelease(d->dev);
    }
    d->ctx = NULL;
}

/* ---- simulator control -------------------------------------------------------------------- */

static struct {
    int resolved;
    void (*set_capacity)(int, size_t);
    size_t (*bytes_in_use)(int);
    unsigned long (*call_total)(void);
    void (*get_live)(struct gpoolsim_live *);
    int (*stream_hold)(CUstream);
    int (*stream_release)(CUstream);
} sim;

static void sim_resolve(void)
{
    if (sim.resolved) return;
    const char *env = getenv("GPOOL_LIBCUDA");
    if (!env || !*env) return; /* resolve later, once a device chose the simulator */
    sim.resolved = 1;
    void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL); /* same instance gpool loads; kept open */
    if (!lib) return;
    *(void **)&sim.set_capacity = dlsym(lib, "gpoolsim_set_capacity");
    *(void **)&sim.bytes_in_use = dlsym(lib, "gpoolsim_bytes_in_use");
    *(void **)&sim.call_total = dlsym(lib, "gpoolsim_call_total");
    *(void **)&sim.get_live = dlsym(lib, "gpoolsim_get_live");
    *(void **)&sim.stream_hold = dlsym(lib, "gpoolsim_stream_hold");
    *(void **)&sim.stream_release = dlsym(lib, "gpoolsim_stream_release");
}

int bench_sim_available(void)
{
    sim_resolve();
    return sim.set_capacity && sim.bytes_in_use && sim.call_total && sim.get_live;
}

int bench_sim_set_capacity(int device, uint64_t bytes)
{
    if (!bench_sim_available()) return -1;
    sim.set_capacity(device, (size_t)bytes);
    return 0;
}

uint64_t bench_sim_bytes_in_use(int device)
{
    return bench_sim_available() ? sim.bytes_in_use(device) : 0;
}

uint64_t bench_sim_call_total(void)
{
    return bench_sim_available() ? sim.call_total() : 0;
}

int bench_sim_stream_hold(CUstream s)
{
    return bench_sim_available() && sim.stream_hold ? sim.stream_hold(s) : -1;
}

int bench_sim_stream_release(CUstream s)
{
    return bench_sim_available() && sim.stream_release ? sim.stream_release(s) : -1;
}

uint64_t bench_sim_live_objects(void)
{
    if (!bench_sim_available()) return 0;
    struct gpoolsim_live l;
    memset(&l, 0, sizeof l);
    sim.get_live(&l);
    return l.handles + l.mappings + l.reservations + l.host_allocs + l.host_registrations +
           l.legacy_allocs;
}
