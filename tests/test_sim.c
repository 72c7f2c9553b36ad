/* test_sim.c — the simulated driver follows the driver's documented rules. Every check goes
 * through the entry points a real program would use: dlopen($GPOOL_LIBCUDA) and
 * cuGetProcAddress. Tests that need a fresh driver instance (environment configuration,
 * statistics at unload) load a private copy of the library file. On a real GPU
 * (GPOOL_TEST_REAL_GPU=1) the whole suite skips. */
#include <criterion/criterion.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util_sim.h"
#include "util_skip.h"

#define MiB  ((size_t)1 << 20)
#define GRAN (2 * MiB)

struct drv {
    void *lib;
    PFN_cuGetProcAddress_v12000 cuGetProcAddress;
    PFN_cuInit_v2000 cuInit;
    PFN_cuDriverGetVersion_v2020 cuDriverGetVersion;
    PFN_cuDeviceGetCount_v2000 cuDeviceGetCount;
    PFN_cuDeviceGet_v2000 cuDeviceGet;
    PFN_cuDeviceGetName_v2000 cuDeviceGetName;
    PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem;
    PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
    PFN_cuDeviceGetPCIBusId_v4010 cuDeviceGetPCIBusId;
    PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease;
    PFN_cuDevicePrimaryCtxGetState_v7000 cuDevicePrimaryCtxGetState;
    PFN_cuDevicePrimaryCtxReset_v11000 cuDevicePrimaryCtxReset;
    PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent;
    PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent;
    PFN_cuCtxGetDevice_v2000 cuCtxGetDevice;
    PFN_cuCtxSynchronize_v2000 cuCtxSynchronize;
    PFN_cuMemGetInfo_v3020 cuMemGetInfo;
    PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
    PFN_cuMemAddressFree_v10020 cuMemAddressFree;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemRelease_v10020 cuMemRelease;
    PFN_cuMemMap_v10020 cuMemMap;
    PFN_cuMemUnmap_v10020 cuMemUnmap;
    PFN_cuMemSetAccess_v10020 cuMemSetAccess;
    PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 cuMemGetAllocationPropertiesFromHandle;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
    PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
    PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange;
    PFN_cuMemHostAlloc_v2020 cuMemHostAlloc;
    PFN_cuMemAllocHost_v3020 cuMemAllocHost;
    PFN_cuMemFreeHost_v2000 cuMemFreeHost;
    PFN_cuMemHostRegister_v6050 cuMemHostRegister;
    PFN_cuMemHostUnregister_v4000 cuMemHostUnregister;
    PFN_cuMemHostGetDevicePointer_v3020 cuMemHostGetDevicePointer;
    PFN_cuMemHostGetFlags_v2030 cuMemHostGetFlags;
    PFN_cuStreamCreate_v2000 cuStreamCreate;
    PFN_cuStreamDestroy_v4000 cuStreamDestroy;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
    PFN_cuStreamWaitEvent_v3020 cuStreamWaitEvent;
    PFN_cuStreamQuery_v2000 cuStreamQuery;
    PFN_cuEventCreate_v2000 cuEventCreate;
    PFN_cuEventRecord_v2000 cuEventRecord;
    PFN_cuEventQuery_v2000 cuEventQuery;
    PFN_cuEventSynchronize_v2000 cuEventSynchronize;
    PFN_cuEventDestroy_v4000 cuEventDestroy;
    PFN_cuMemcpy_v4000 cuMemcpy;
    PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH;
    PFN_cuMemcpyDtoD_v3020 cuMemcpyDtoD;
    PFN_cuMemcpyHtoDAsync_v3020 cuMemcpyHtoDAsync;
    PFN_cuMemsetD8_v3020 cuMemsetD8;
    PFN_cuMemsetD32_v3020 cuMemsetD32;
    PFN_cuGetErrorString_v6000 cuGetErrorString;
    PFN_cuGetErrorName_v6000 cuGetErrorName;
};

/* The driver of one library instance, every entry point through its cuGetProcAddress. */
static void drv_load(struct drv *d, void *lib)
{
    memset(d, 0, sizeof *d);
    d->lib = lib;
    *(void **)&d->cuGetProcAddress = dlsym(lib, "cuGetProcAddress_v2");
    cr_assert_not_null(d->cuGetProcAddress, "cuGetProcAddress_v2 not exported");
#define LOAD(name)                                                                                 \
    do {                                                                                           \
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                  \
        cr_assert_eq(d->cuGetProcAddress(#name, (void **)&d->name, CUDA_VERSION, 0, &st),          \
                     CUDA_SUCCESS, "cuGetProcAddress(%s)", #name);                                 \
        cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);                                             \
        cr_assert_not_null(d->name);                                                               \
    } while (0)
    LOAD(cuInit);
    LOAD(cuDriverGetVersion);
    LOAD(cuDeviceGetCount);
    LOAD(cuDeviceGet);
    LOAD(cuDeviceGetName);
    LOAD(cuDeviceTotalMem);
    LOAD(cuDeviceGetAttribute);
    LOAD(cuDeviceGetPCIBusId);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuDevicePrimaryCtxRelease);
    LOAD(cuDevicePrimaryCtxGetState);
    LOAD(cuDevicePrimaryCtxReset);
    LOAD(cuCtxGetCurrent);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxPushCurrent);
    LOAD(cuCtxPopCurrent);
    LOAD(cuMemGetInfo);
    LOAD(cuMemAddressReserve);
    LOAD(cuMemAddressFree);
    LOAD(cuMemCreate);
    LOAD(cuMemRelease);
    LOAD(cuMemMap);
    LOAD(cuMemUnmap);
    LOAD(cuMemSetAccess);
    LOAD(cuMemGetAllocationGranularity);
    LOAD(cuMemGetAllocationPropertiesFromHandle);
    LOAD(cuMemAlloc);
    LOAD(cuMemFree);
    LOAD(cuMemAllocAsync);
    LOAD(cuMemFreeAsync);
    LOAD(cuMemGetAddressRange);
    LOAD(cuMemHostAlloc);
    LOAD(cuMemAllocHost);
    LOAD(cuMemFreeHost);
    LOAD(cuMemHostRegister);
    LOAD(cuMemHostUnregister);
    LOAD(cuMemHostGetDevicePointer);
    LOAD(cuMemHostGetFlags);
    LOAD(cuStreamCreate);
    LOAD(cuStreamDestroy);
    LOAD(cuStreamSynchronize);
    LOAD(cuStreamWaitEvent);
    LOAD(cuStreamQuery);
    LOAD(cuEventCreate);
    LOAD(cuEventRecord);
    LOAD(cuEventQuery);
    LOAD(cuEventSynchronize);
    LOAD(cuEventDestroy);
    LOAD(cuMemcpy);
    LOAD(cuMemcpyHtoD);
    LOAD(cuMemcpyDtoH);
    LOAD(cuMemcpyDtoD);
    LOAD(cuMemcpyHtoDAsync);
    LOAD(cuMemsetD8);
    LOAD(cuMemsetD32);
    LOAD(cuGetErrorString);
    LOAD(cuGetErrorName);
#undef LOAD
    /* CUDA 13 resolves these two base names to their _v2 (context argument) forms */
    *(void **)&d->cuCtxGetDevice = dlsym(lib, "cuCtxGetDevice");
    *(void **)&d->cuCtxSynchronize = dlsym(lib, "cuCtxSynchronize");
    cr_assert(d->cuCtxGetDevice && d->cuCtxSynchronize);
}

static struct drv D;
static const struct sim_api *S;
static CUcontext ctx0;

/* The shared instance, initialized, with device 0's primary context current. */
static void setup(void)
{
    NEED_SIM(); /* skips every test of the suite on a real GPU */
    S = sim_api();
    cr_assert_not_null(S, "GPOOL_LIBCUDA must name the simulated driver");
    drv_load(&D, S->lib);
    cr_assert_eq(D.cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx0, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
    S->fail_clear();
}

static CUmemAllocationProp dev_prop(int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static CUmemAccessDesc rw_access(int dev)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return a;
}

static CUmemGenericAllocationHandle create(size_t size)
{
    CUmemAllocationProp p = dev_prop(0);
    CUmemGenericAllocationHandle h = 0;
    cr_assert_eq(D.cuMemCreate(&h, size, &p, 0), CUDA_SUCCESS);
    return h;
}

static CUdeviceptr reserve(size_t size)
{
    CUdeviceptr va = 0;
    cr_assert_eq(D.cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS);
    return va;
}

/* Access of the page holding p, from /proc/self/maps ("---p", "rw-s", ...): no signals, so it
 * works the same under sanitizers and valgrind. */
static const char *page_perms(CUdeviceptr p)
{
    static char perms[8];
    FILE *maps = fopen("/proc/self/maps", "r");
    cr_assert_not_null(maps);
    char line[512];
    strcpy(perms, "none");
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char pr[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pr) == 3 && p >= lo && p < hi) {
            strcpy(perms, pr);
            break;
        }
    }
    fclose(maps);
    return perms;
}

static int readable(CUdeviceptr p)
{
    return page_perms(p)[0] == 'r';
}
static int writable(CUdeviceptr p)
{
    return page_perms(p)[1] == 'w';
}

static void assert_no_live(void)
{
    struct gpoolsim_live l;
    S->get_live(&l);
    cr_assert_eq(l.handles, 0);
    cr_assert_eq(l.mappings, 0);
    cr_assert_eq(l.reservations, 0);
    cr_assert_eq(l.host_allocs, 0);
    cr_assert_eq(l.host_registrations, 0);
    cr_assert_eq(l.streams, 0);
    cr_assert_eq(l.events, 0);
    cr_assert_eq(l.legacy_allocs, 0);
    cr_assert_eq(sim_live_total(), 0);
}

/* A private copy of the simulator's library file at path (not loaded). */
static void copy_library(char *path, size_t len)
{
    const char *src = getenv("GPOOL_LIBCUDA");
    cr_assert_not_null(src);
    snprintf(path, len, "/tmp/gpoolsim-copy-XXXXXX");
    int out = mkstemp(path);
    int in = open(src, O_RDONLY);
    cr_assert(out >= 0 && in >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

/* A private instance of the simulator, configured by the environment at the time of the call. */
static void *load_fresh_copy(char *path, size_t len)
{
    copy_library(path, len);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    return lib;
}

static void *fresh_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    cr_assert_not_null(p, "%s", name);
    return p;
}

/* A fresh copy loaded with var=value in the environment it reads at load (unset again after),
 * its entry points in f and device 0's primary context current. */
static void *fresh_with_context(char *path, size_t len, const char *var, const char *value,
                                struct drv *f)
{
    setenv(var, value, 1);
    void *lib = load_fresh_copy(path, len);
    unsetenv(var);
    drv_load(f, lib);
    CUcontext c;
    cr_assert_eq(f->cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(f->cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    cr_assert_eq(f->cuCtxSetCurrent(c), CUDA_SUCCESS);
    return lib;
}

TestSuite(sim, .init = setup);

/* ---- devices and contexts ---- */

Test(sim, device_queries)
{
    int n = 0, v = 0;
    char name[64], bus[32];
    size_t total = 0;
    cr_assert_eq(D.cuDriverGetVersion(&v), CUDA_SUCCESS);
    cr_assert_eq(v, 13000);
    cr_assert_eq(D.cuDeviceGetCount(&n), CUDA_SUCCESS);
    cr_assert_eq(n, 1);
    CUdevice dev = -1;
    cr_assert_eq(D.cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    cr_assert_eq(dev, 0);
    cr_assert_eq(D.cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_eq(D.cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    cr_assert_str_eq(name, "gpool simulated device");
    cr_assert_eq(D.cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
    cr_assert_eq(total, (size_t)8 << 30);
    cr_assert_eq(D.cuDeviceGetPCIBusId(bus, sizeof bus, 0), CUDA_SUCCESS);
    cr_assert_eq(strlen(bus), 12);
    int a = -1;
    cr_assert_eq(
        D.cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        CUDA_SUCCESS);
    cr_assert_eq(a, 1);
    cr_assert_eq(D.cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(a, 1);
    cr_assert_eq(D.cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(a, 9);
    cr_assert_eq(D.cuDeviceGetAttribute(
                     &a, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(a, 1); /* exportable handles: sim_ipc.c */
    cr_assert_eq(D.cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(a, 0);
    cr_assert_eq(D.cuDeviceGetAttribute(&a, (CUdevice_attribute)9999, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7),
                 CUDA_ERROR_INVALID_DEVICE);
}

Test(sim, primary_context_is_refcounted_and_stacked)
{
    CUcontext c = NULL, cur = NULL;
    unsigned flags = 0;
    int active = 0;
    cr_assert_eq(D.cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    cr_assert_eq(c, ctx0);
    cr_assert_eq(D.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    cr_assert_eq(active, 1);
    cr_assert_eq(D.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    cr_assert_eq(cur, ctx0);
    CUdevice dev = -1;
    cr_assert_eq(D.cuCtxGetDevice(&dev), CUDA_SUCCESS);
    cr_assert_eq(dev, 0);
    cr_assert_eq(D.cuCtxPopCurrent(&cur), CUDA_SUCCESS);
    cr_assert_eq(cur, ctx0);
    cr_assert_eq(D.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    cr_assert_null(cur);
    CUdeviceptr p;
    cr_assert_eq(D.cuMemAlloc(&p, 256), CUDA_ERROR_INVALID_CONTEXT);
    size_t fr, tot;
    cr_assert_eq(D.cuMemGetInfo(&fr, &tot), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(D.cuCtxPopCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(D.cuCtxPushCurrent(ctx0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    cr_assert_eq(cur, ctx0);
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    cr_assert_eq(D.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    cr_assert_eq(active, 0);
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(D.cuMemAlloc(&p, 256), CUDA_ERROR_INVALID_CONTEXT, "released context is gone");
}

Test(sim, calls_before_cuInit_fail_and_zero_devices_is_no_device)
{
    char path[64];
    unsetenv("GPOOL_SIM_DEVICES");
    void *lib = load_fresh_copy(path, sizeof path);
    struct drv f;
    drv_load(&f, lib); /* cuGetProcAddress works before cuInit */
    int n;
    cr_assert_eq(f.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUmemAllocationProp p = dev_prop(0);
    CUmemGenericAllocationHandle h;
    cr_assert_eq(f.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_NOT_INITIALIZED);
    cr_assert_eq(f.cuDriverGetVersion(&n), CUDA_SUCCESS);
    cr_assert_eq(f.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(f.cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(f.cuDeviceGetCount(&n), CUDA_SUCCESS);
    dlclose(lib);
    unlink(path);

    setenv("GPOOL_SIM_DEVICES", "0", 1);
    lib = load_fresh_copy(path, sizeof path);
    unsetenv("GPOOL_SIM_DEVICES");
    drv_load(&f, lib);
    cr_assert_eq(f.cuInit(0), CUDA_ERROR_NO_DEVICE);
    cr_assert_eq(f.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    dlclose(lib);
    unlink(path);
}

Test(sim, environment_sets_devices_and_capacity)
{
    char path[64];
    setenv("GPOOL_SIM_DEVICES", "3", 1);
    setenv("GPOOL_SIM_MEMORY", "512M", 1);
    void *lib = load_fresh_copy(path, sizeof path);
    unsetenv("GPOOL_SIM_DEVICES");
    unsetenv("GPOOL_SIM_MEMORY");
    struct drv f;
    drv_load(&f, lib);
    int n = 0;
    size_t total = 0;
    cr_assert_eq(f.cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(f.cuDeviceGetCount(&n), CUDA_SUCCESS);
    cr_assert_eq(n, 3);
    cr_assert_eq(f.cuDeviceTotalMem(&total, 2), CUDA_SUCCESS);
    cr_assert_eq(total, 512 * MiB);
    /* device 2 has its own capacity */
    CUmemAllocationProp p = dev_prop(2);
    CUmemGenericAllocationHandle h;
    cr_assert_eq(f.cuMemCreate(&h, 512 * MiB, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(f.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
    p.location.id = 1;
    cr_assert_eq(f.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
    p.location.id = 3;
    cr_assert_eq(f.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_INVALID_DEVICE);
    dlclose(lib);
    unlink(path);
}

/* ---- VMM rules ---- */

Test(sim, granularity_and_alignment_rules)
{
    CUmemAllocationProp p = dev_prop(0);
    size_t g = 0;
    cr_assert_eq(D.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    cr_assert_eq(g, GRAN);
    cr_assert_eq(D.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                 CUDA_SUCCESS);
    cr_assert_eq(g, GRAN);
    cr_assert_eq(D.cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)5),
                 CUDA_ERROR_INVALID_VALUE);

    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemCreate(&h, GRAN + 4096, &p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 1), CUDA_ERROR_INVALID_VALUE);
    p.type = (CUmemAllocationType)0;
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(S->bytes_in_use(0), 0, "failed creates charge nothing");

    CUdeviceptr va;
    cr_assert_eq(D.cuMemAddressReserve(&va, GRAN + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemAddressReserve(&va, GRAN, 3 * GRAN, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemAddressReserve(&va, 4 * GRAN, 64 * MiB, 0, 0), CUDA_SUCCESS);
    cr_assert_eq(va % (64 * MiB), 0, "alignment honoured");
    cr_assert_eq(D.cuMemAddressFree(va, 4 * GRAN), CUDA_SUCCESS);

    va = reserve(8 * GRAN);
    cr_assert_eq(va % GRAN, 0);
    h = create(2 * GRAN);
    cr_assert_eq(D.cuMemMap(va + 4096, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "misaligned ptr");
    cr_assert_eq(D.cuMemMap(va, GRAN + 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "misaligned size");
    cr_assert_eq(D.cuMemMap(va, GRAN, GRAN, h, 0), CUDA_ERROR_INVALID_VALUE, "offset must be 0");
    cr_assert_eq(D.cuMemMap(va, 4 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "beyond the handle");
    cr_assert_eq(D.cuMemMap(va + 7 * GRAN, 2 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE,
                 "beyond the reservation");
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h + 12345, 0), CUDA_ERROR_INVALID_VALUE, "bad handle");
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 1), CUDA_ERROR_INVALID_VALUE, "flags must be 0");
    cr_assert_eq(D.cuMemMap(va + GRAN, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va, 2 * GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "overlaps a mapping");
    cr_assert_eq(D.cuMemMap(va + 3 * GRAN, GRAN, 0, h, 0), CUDA_SUCCESS, "a shorter alias is fine");

    CUmemAllocationProp got;
    cr_assert_eq(D.cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
    cr_assert_eq(got.location.id, 0);
    cr_assert_eq(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);

    CUdeviceptr base;
    size_t size;
    cr_assert_eq(D.cuMemGetAddressRange(&base, &size, va + GRAN + 100), CUDA_SUCCESS);
    cr_assert_eq(base, va + GRAN);
    cr_assert_eq(size, 2 * GRAN);

    cr_assert_eq(D.cuMemUnmap(va + GRAN, 3 * GRAN), CUDA_SUCCESS, "two whole mappings at once");
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 8 * GRAN), CUDA_SUCCESS);
    assert_no_live();
}

Test(sim, capacity_out_of_memory_and_recovery)
{
    S->set_capacity(0, 4 * GRAN);
    CUmemGenericAllocationHandle h[4], extra;
    CUmemAllocationProp p = dev_prop(0);
    for (int i = 0; i < 4; i++)
        h[i] = create(GRAN);
    cr_assert_eq(S->bytes_in_use(0), 4 * GRAN);
    cr_assert_eq(D.cuMemCreate(&extra, GRAN, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr dp;
    cr_assert_eq(D.cuMemAlloc(&dp, 256), CUDA_ERROR_OUT_OF_MEMORY, "legacy shares the capacity");
    size_t fr = 1, tot = 0;
    cr_assert_eq(D.cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    cr_assert_eq(fr, 0);
    cr_assert_eq(tot, 4 * GRAN);

    cr_assert_eq(D.cuMemRelease(h[1]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    cr_assert_eq(fr, GRAN);
    cr_assert_eq(D.cuMemAlloc(&dp, GRAN / 2), CUDA_SUCCESS);
    cr_assert_eq(dp % 256, 0);
    cr_assert_eq(D.cuMemCreate(&extra, GRAN, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(D.cuMemFree(dp), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemCreate(&extra, GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(S->peak_bytes(0), 4 * GRAN);

    /* capacity lowered below use: nothing new fits until enough is given back */
    S->set_capacity(0, GRAN);
    cr_assert_eq(D.cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    cr_assert_eq(fr, 0);
    cr_assert_eq(D.cuMemAlloc(&dp, 256), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(D.cuMemRelease(h[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h[2]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h[3]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&dp, 256), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(D.cuMemRelease(extra), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&dp, 256), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(dp), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0);

    /* host VMM memory does not count against the device */
    CUmemAllocationProp hp = dev_prop(0);
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    cr_assert_eq(D.cuMemCreate(&extra, 2 * GRAN, &hp, 0), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0);
    cr_assert_eq(D.cuMemRelease(extra), CUDA_SUCCESS);
    assert_no_live();
}

Test(sim, one_handle_mapped_twice_aliases_the_same_bytes)
{
    CUmemGenericAllocationHandle h = create(2 * GRAN);
    CUdeviceptr a = reserve(2 * GRAN), b = reserve(4 * GRAN);
    CUmemAccessDesc acc = rw_access(0);
    cr_assert_eq(D.cuMemMap(a, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(b + 2 * GRAN, 2 * GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemSetAccess(a, 2 * GRAN, &acc, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemSetAccess(b + 2 * GRAN, 2 * GRAN, &acc, 1), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 2 * GRAN, "aliases cost nothing extra");
    unsigned char *pa = (unsigned char *)(uintptr_t)a,
                  *pb = (unsigned char *)(uintptr_t)(b + 2 * GRAN);
    pa[0] = 0x11;
    pa[2 * GRAN - 1] = 0x22;
    cr_assert_eq(pb[0], 0x11);
    cr_assert_eq(pb[2 * GRAN - 1], 0x22);
    cr_assert_eq(D.cuMemsetD8(b + 2 * GRAN + 100, 0x5a, 10), CUDA_SUCCESS);
    cr_assert_eq(pa[105], 0x5a);
    /* the memset is legacy-stream work: unmapping before it is known complete is a
     * happens-before violation (sim/sim_hb.c), so synchronize first */
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemUnmap(a, 2 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(pb[0], 0x11, "the other alias keeps the bytes");
    cr_assert_eq(D.cuMemUnmap(b + 2 * GRAN, 2 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(a, 2 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(b, 4 * GRAN), CUDA_SUCCESS);
    assert_no_live();
}

Test(sim, mapped_memory_is_inaccessible_until_set_access)
{
    CUmemGenericAllocationHandle h1 = create(GRAN), h2 = create(GRAN);
    CUdeviceptr va = reserve(4 * GRAN);
    cr_assert_str_eq(page_perms(va), "---p", "a bare reservation is inaccessible");
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h1, 0), CUDA_SUCCESS);
    cr_assert_str_eq(page_perms(va), "---s", "mapped (shared) but no access yet");
    CUmemAccessDesc acc = rw_access(0);
    cr_assert_eq(D.cuMemSetAccess(va, 2 * GRAN, &acc, 1), CUDA_ERROR_INVALID_VALUE,
                 "range not fully mapped");
    cr_assert_eq(D.cuMemMap(va + GRAN, GRAN, 0, h2, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemSetAccess(va, GRAN / 2, &acc, 1), CUDA_ERROR_INVALID_VALUE,
                 "part of a mapping");
    acc.location.id = 5;
    cr_assert_eq(D.cuMemSetAccess(va, 2 * GRAN, &acc, 1), CUDA_ERROR_INVALID_DEVICE);
    acc = rw_access(0);
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    cr_assert_eq(D.cuMemSetAccess(va, 2 * GRAN, &acc, 1), CUDA_SUCCESS, "spans two mappings");
    cr_assert(readable(va) && readable(va + 2 * GRAN - 1));
    cr_assert(!writable(va + GRAN));
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    cr_assert_eq(D.cuMemSetAccess(va, 2 * GRAN, &acc, 1), CUDA_SUCCESS);
    cr_assert(writable(va) && writable(va + 2 * GRAN - 1));
    cr_assert_str_eq(page_perms(va), "rw-s");
    *(volatile char *)(uintptr_t)(va + 2 * GRAN - 1) = 1;
    cr_assert(!readable(va + 2 * GRAN), "past the mappings stays reserved only");
    cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    cr_assert_str_eq(page_perms(va), "---p", "unmapped means inaccessible");
    cr_assert(readable(va + GRAN));
    cr_assert_eq(D.cuMemUnmap(va + GRAN, GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h1), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h2), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 4 * GRAN), CUDA_SUCCESS);
}

/* The signal a forked child dies of while it runs fn(arg) (0 when fn returns). A child rather
 * than Criterion's .signal, so that the test can skip on a real GPU (Criterion counts a skipped
 * .signal test as failed). fn makes no Criterion assertion. */
static int child_signal(void (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        fn(arg);
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void write_one_byte(void *va)
{
    /* the default action, so that a sanitizer's SEGV report does not turn the signal into an
     * exit code */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, NULL);
    *(volatile char *)va = 1;
}

Test(sim, touching_memory_without_access_faults)
{
    CUmemGenericAllocationHandle h = create(GRAN);
    CUdeviceptr va = reserve(GRAN);
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 0), CUDA_SUCCESS);
    /* a copy by a device without access is an illegal address (cuMemSetAccess gives access
     * per location; none was given): the driver call fails, as the GPU's fault would make it */
    char byte = 1;
    cr_assert_eq(D.cuMemcpyHtoD(va, &byte, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* and the CPU touching it directly faults */
    int sig = child_signal(write_one_byte, (void *)(uintptr_t)va);
    cr_assert_eq(sig, SIGSEGV, "the write got signal %d", sig);
    cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
}

Test(sim, unmap_must_cover_whole_mappings)
{
    CUmemGenericAllocationHandle h = create(4 * GRAN);
    CUdeviceptr va = reserve(8 * GRAN);
    cr_assert_eq(D.cuMemMap(va, 4 * GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemUnmap(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE, "front part");
    cr_assert_eq(D.cuMemUnmap(va + 2 * GRAN, 2 * GRAN), CUDA_ERROR_INVALID_VALUE, "back part");
    cr_assert_eq(D.cuMemUnmap(va, 6 * GRAN), CUDA_ERROR_INVALID_VALUE, "includes unmapped space");
    cr_assert_eq(D.cuMemUnmap(va + 4 * GRAN, 2 * GRAN), CUDA_ERROR_INVALID_VALUE, "nothing mapped");
    cr_assert_eq(D.cuMemUnmap(va + 1, 4 * GRAN), CUDA_ERROR_INVALID_VALUE, "misaligned");
    cr_assert_eq(D.cuMemUnmap(va, 4 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemUnmap(va, 4 * GRAN), CUDA_ERROR_INVALID_VALUE, "already unmapped");
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 8 * GRAN), CUDA_SUCCESS);
}

Test(sim, release_with_live_mapping_keeps_memory_until_unmap)
{
    CUmemGenericAllocationHandle h = create(GRAN);
    CUdeviceptr va = reserve(2 * GRAN);
    CUmemAccessDesc acc = rw_access(0);
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemSetAccess(va, GRAN, &acc, 1), CUDA_SUCCESS);
    *(volatile int *)(uintptr_t)va = 42;
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), GRAN, "still mapped, still charged");
    cr_assert_eq(*(volatile int *)(uintptr_t)va, 42);
    cr_assert_eq(D.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE, "the handle is gone");
    cr_assert_eq(D.cuMemMap(va + GRAN, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    struct gpoolsim_live l;
    S->get_live(&l);
    cr_assert_eq(l.handles, 0);
    cr_assert_eq(l.mappings, 1);
    cr_assert_eq(D.cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE,
                 "reservation still has a mapping");
    cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_ERROR_INVALID_VALUE,
                 "not the whole reservation");
    cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0, "last mapping gone: memory returned");
    cr_assert_eq(D.cuMemAddressFree(va, 2 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE, "already freed");
    assert_no_live();
}

/* ---- legacy allocations and copies ---- */

Test(sim, legacy_alloc_free_and_copies)
{
    CUdeviceptr a, b;
    cr_assert_eq(D.cuMemAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemAlloc(&a, 1000), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&b, 1000), CUDA_SUCCESS);
    cr_assert_eq(a % 256, 0);
    cr_assert_eq(S->bytes_in_use(0), 2000);
    unsigned char host[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        host[i] = (unsigned char)i;
    cr_assert_eq(D.cuMemcpyHtoD(a, host, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoD(b, a, sizeof host), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(back, b, sizeof back), CUDA_SUCCESS);
    cr_assert_arr_eq(host, back, sizeof host);
    cr_assert_eq(D.cuMemsetD32(a, 0xdeadbeef, 4), CUDA_SUCCESS);
    cr_assert_eq(((uint32_t *)(uintptr_t)a)[3], 0xdeadbeef);
    cr_assert_eq(D.cuMemsetD32(a + 2, 0, 4), CUDA_ERROR_INVALID_VALUE,
                 "D32 needs 4-byte alignment");
    cr_assert_eq(D.cuMemcpy(b, a, 16), CUDA_SUCCESS);
    cr_assert_eq(((uint32_t *)(uintptr_t)b)[0], 0xdeadbeef);
    CUdeviceptr base;
    size_t size;
    cr_assert_eq(D.cuMemGetAddressRange(&base, &size, a + 999), CUDA_SUCCESS);
    cr_assert_eq(base, a);
    cr_assert_eq(size, 1000);
    /* cuMemFree only "may" synchronize (cuda.h): the memset/copy above are legacy-stream work
     * the host must see complete first, or the free is a happens-before violation */
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(a + 8), CUDA_ERROR_INVALID_VALUE, "not the start of an allocation");
    cr_assert_eq(D.cuMemFree(a), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(a), CUDA_ERROR_INVALID_VALUE, "double free");
    cr_assert_eq(D.cuMemFree(b), CUDA_SUCCESS);

    CUstream s;
    cr_assert_eq(D.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAllocAsync(&a, 4096, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyHtoDAsync(a, host, 100, s), CUDA_SUCCESS);
    cr_assert_eq(memcmp((void *)(uintptr_t)a, host, 100), 0);
    cr_assert_eq(D.cuMemFreeAsync(a, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemAllocAsync(&a, 4096, (CUstream)(uintptr_t)0x1234),
                 CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0);
    assert_no_live();
}

/* cuda.h, cuDevicePrimaryCtxReset: "Destroy all allocations and reset all state on the
 * primary context ... Resetting the primary context does not release it". The context's
 * cuMemAlloc, cuMemCreate/cuMemMap and pinned memory go, its streams and events too (their
 * handles invalid), its held work finishes; the context stays retained and current, usable at
 * once; an access through a freed address is refused; a bad ordinal is an invalid device. */
Test(sim, primary_context_reset_destroys_its_allocations_and_state)
{
    CUdeviceptr a;
    cr_assert_eq(D.cuMemAlloc(&a, 4096), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = create(GRAN);
    CUdeviceptr va = reserve(GRAN);
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc = rw_access(0);
    cr_assert_eq(D.cuMemSetAccess(va, GRAN, &acc, 1), CUDA_SUCCESS);
    void *host;
    cr_assert_eq(D.cuMemAllocHost(&host, 4096), CUDA_SUCCESS);
    CUstream s;
    CUevent e;
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&e, 0), CUDA_SUCCESS);
    cr_assert_eq(S->stream_hold(s), 0);
    cr_assert_eq(S->touch(s, a, 4096, 1), CUDA_SUCCESS);
    cr_assert_eq(S->touch(s, va, GRAN, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_gt(S->bytes_in_use(0), 0);

    cr_assert_eq(D.cuDevicePrimaryCtxReset(GPOOL_SIM_MAX_DEVICES + 1), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_eq(D.cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    cr_assert_eq(S->violations(), 0, "the held work finished before its memory went");
    cr_assert_eq(S->bytes_in_use(0), 0);
    struct gpoolsim_live l;
    S->get_live(&l);
    cr_assert_eq(l.legacy_allocs, 0);
    cr_assert_eq(l.handles, 0);
    cr_assert_eq(l.mappings, 0);
    cr_assert_eq(l.host_allocs, 0);
    cr_assert_eq(l.streams, 0);
    cr_assert_eq(l.events, 0);
    cr_assert_eq(l.reservations, 1, "the address range is the process's");
    cr_assert_eq(D.cuMemFree(a), CUDA_ERROR_INVALID_VALUE, "freed by the reset");
    cr_assert_eq(D.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE, "released by the reset");
    cr_assert_eq(D.cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE, "freed by the reset");
    cr_assert_eq(D.cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(D.cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_neq(S->touch(NULL, va, GRAN, 0), CUDA_SUCCESS, "unmapped by the reset");

    /* still retained and current: usable again at once */
    unsigned flags;
    int active;
    cr_assert_eq(D.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    cr_assert_eq(active, 1);
    CUdeviceptr b;
    cr_assert_eq(D.cuMemAlloc(&b, 4096), CUDA_SUCCESS);
    cr_assert_eq(S->touch(NULL, b, 4096, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(b), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
    cr_assert_eq(S->violations(), 0);
    assert_no_live();
}

/* ---- host memory ---- */

Test(sim, host_register_already_registered_and_not_registered)
{
    size_t len = 16 * 4096;
    char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(buf, MAP_FAILED);
    cr_assert_eq(D.cuMemHostRegister(buf, 8 * 4096, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostRegister(buf + 4096, 4096, 0),
                 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    cr_assert_eq(D.cuMemHostRegister(buf + 7 * 4096, 4 * 4096, 0),
                 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "overlapping the end");
    cr_assert_eq(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712);
    cr_assert_eq(D.cuMemHostRegister(buf + 8 * 4096, 8 * 4096, 0), CUDA_SUCCESS,
                 "adjacent is fine");
    cr_assert_eq(D.cuMemHostRegister(buf, 4096, 0x10), CUDA_ERROR_INVALID_VALUE, "unknown flag");
    cr_assert_eq(D.cuMemHostRegister(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemHostUnregister(buf + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                 "must be the registered base");
    cr_assert_eq(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713);
    cr_assert_eq(D.cuMemHostUnregister(buf), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    cr_assert_eq(D.cuMemHostUnregister(buf + 8 * 4096), CUDA_SUCCESS);
    munmap(buf, len);
    cr_assert_eq(D.cuMemHostRegister(buf, 4096, 0), CUDA_ERROR_INVALID_VALUE, "unmapped memory");

    void *pinned;
    cr_assert_eq(D.cuMemHostAlloc(&pinned, 8192, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostRegister(pinned, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                 "cuMemHostAlloc memory is already pinned");
    cr_assert_eq(D.cuMemFreeHost(pinned), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0, "host memory is not device memory");
    assert_no_live();
}

Test(sim, devicemap_host_memory_has_a_device_pointer)
{
    void *p, *q;
    CUdeviceptr dp = 0;
    unsigned flags = 99;
    cr_assert_eq(D.cuMemHostAlloc(&p, 10000, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
                 CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, p, 0), CUDA_SUCCESS);
    cr_assert_eq(dp, (CUdeviceptr)(uintptr_t)p);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, (char *)p + 5000, 0), CUDA_SUCCESS);
    cr_assert_eq(dp, (CUdeviceptr)(uintptr_t)p + 5000);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, p, 1), CUDA_ERROR_INVALID_VALUE,
                 "flags must be 0");
    cr_assert_eq(D.cuMemHostGetFlags(&flags, p), CUDA_SUCCESS);
    cr_assert_eq(flags, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);

    cr_assert_eq(D.cuMemAllocHost(&q, 4096), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, q, 0), CUDA_ERROR_INVALID_VALUE, "not DEVICEMAP");
    cr_assert_eq(D.cuMemHostGetFlags(&flags, q), CUDA_SUCCESS);
    cr_assert_eq(flags, 0);
    cr_assert_eq(D.cuMemHostAlloc(&q, 4096, 0x80), CUDA_ERROR_INVALID_VALUE, "unknown flag");

    static char reg[3 * 4096] __attribute__((aligned(4096)));
    cr_assert_eq(D.cuMemHostRegister(reg, sizeof reg, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, reg + 10, 0), CUDA_SUCCESS);
    cr_assert_eq(dp, (CUdeviceptr)(uintptr_t)(reg + 10));
    cr_assert_eq(D.cuMemHostGetFlags(&flags, reg), CUDA_ERROR_INVALID_VALUE,
                 "registrations are not cuMemHostAlloc memory");
    cr_assert_eq(D.cuMemHostUnregister(reg), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, reg, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemFreeHost(p), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFreeHost(q), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFreeHost(q), CUDA_ERROR_INVALID_VALUE);
    assert_no_live();
}

/* ---- streams, events, held completion ---- */

/* A stream and an event, both with flags 0, for a test to hold and record on. */
static void open_stream_event(CUstream *s, CUevent *e)
{
    cr_assert_eq(D.cuStreamCreate(s, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(e, 0), CUDA_SUCCESS);
}

/* Destroy them again; the test leaves nothing behind in the simulator. */
static void close_stream_event(CUstream s, CUevent e)
{
    cr_assert_eq(D.cuEventDestroy(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    assert_no_live();
}

Test(sim, unheld_streams_complete_at_once)
{
    CUstream s;
    CUevent e, never;
    cr_assert_eq(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&never, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(never), CUDA_SUCCESS, "never recorded counts as complete");
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamQuery(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e, CU_STREAM_LEGACY), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventSynchronize(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 0);
    cr_assert_eq(D.cuEventDestroy(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(D.cuEventDestroy(never), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    assert_no_live();
}

Test(sim, held_stream_keeps_events_pending_until_release)
{
    CUstream s;
    CUevent before, e;
    open_stream_event(&s, &before);
    cr_assert_eq(D.cuEventCreate(&e, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(before, s), CUDA_SUCCESS);
    cr_assert_eq(S->stream_hold(s), 0);
    cr_assert_eq(S->stream_hold((CUstream)(uintptr_t)0x999), -1);
    cr_assert_eq(D.cuEventQuery(before), CUDA_SUCCESS, "work from before the hold is done");
    cr_assert_eq(D.cuStreamQuery(s), CUDA_SUCCESS, "nothing pending yet");
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    cr_assert_eq(D.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    cr_assert_eq(D.cuEventQuery(e), CUDA_ERROR_NOT_READY, "querying does not complete it");
    cr_assert_eq(S->stream_release(s), 0);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamQuery(s), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 0);
    cr_assert_eq(D.cuEventDestroy(before), CUDA_SUCCESS);
    close_stream_event(s, e);
}

Test(sim, synchronizing_on_held_work_forces_it_and_is_counted)
{
    CUstream s;
    CUevent e;
    open_stream_event(&s, &e);

    cr_assert_eq(S->stream_hold(s), 0);
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventSynchronize(e), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 1);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS, "the hold is gone");

    cr_assert_eq(S->stream_hold(s), 0);
    cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamSynchronize(s), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 2);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS);

    cr_assert_eq(S->stream_hold(NULL), 0, "the default stream can be held too");
    cr_assert_eq(D.cuEventRecord(e, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 3);
    cr_assert_eq(D.cuEventQuery(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSynchronize(), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 3, "nothing held, nothing forced");

    close_stream_event(s, e);
}

Test(sim, stream_wait_event_chains_pending_work)
{
    CUstream s1, s2;
    CUevent e1, e2;
    cr_assert_eq(D.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&e1, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&e2, 0), CUDA_SUCCESS);
    cr_assert_eq(S->stream_hold(s1), 0);
    cr_assert_eq(D.cuEventRecord(e1, s1), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e2, s2), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e2), CUDA_SUCCESS, "before the wait");
    cr_assert_eq(D.cuStreamWaitEvent(s2, e1, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e2, s2), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e2), CUDA_ERROR_NOT_READY, "after the wait");
    cr_assert_eq(D.cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    /* re-recording e1 later does not change what s2 waits for */
    cr_assert_eq(D.cuEventRecord(e1, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    /* destroying the held stream does not complete its work */
    cr_assert_eq(D.cuStreamDestroy(s1), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    cr_assert_eq(S->stream_release(s1), 0, "the test can still release it");
    cr_assert_eq(D.cuEventQuery(e2), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamQuery(s2), CUDA_SUCCESS);

    /* a forced sync releases the streams it had to wait for */
    cr_assert_eq(D.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    cr_assert_eq(S->stream_hold(s1), 0);
    cr_assert_eq(D.cuEventRecord(e1, s1), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamWaitEvent(s2, e1, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventRecord(e2, s2), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventSynchronize(e2), CUDA_SUCCESS);
    cr_assert_eq(S->forced_syncs(), 1);
    cr_assert_eq(D.cuEventQuery(e1), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamWaitEvent(s2, e1, 0x8), CUDA_ERROR_INVALID_VALUE);

    cr_assert_eq(D.cuEventDestroy(e1), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventDestroy(e2), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s1), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s2), CUDA_SUCCESS);
    assert_no_live();
}

/* ---- fault injection and counters ---- */

Test(sim, control_api_injects_one_shot_failures_without_side_effects)
{
    CUmemAllocationProp p = dev_prop(0);
    CUmemGenericAllocationHandle h1, h2, h3;
    S->reset_counts();
    cr_assert_eq(S->fail_nth("cuMemCreate", 2), 0);
    cr_assert_eq(D.cuMemCreate(&h1, GRAN, &p, 0), CUDA_SUCCESS);
    h2 = 777;
    cr_assert_eq(D.cuMemCreate(&h2, GRAN, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(h2, 777, "no output written");
    cr_assert_eq(S->bytes_in_use(0), GRAN, "no bytes charged");
    struct gpoolsim_live l;
    S->get_live(&l);
    cr_assert_eq(l.handles, 1);
    cr_assert_eq(D.cuMemCreate(&h3, GRAN, &p, 0), CUDA_SUCCESS, "fails once only");
    cr_assert_eq(S->call_count("cuMemCreate"), 3, "failed calls count");

    cr_assert_eq(S->fail_nth("cuMemAlloc_v2", 1), 0, "the _v2 spelling is accepted");
    CUdeviceptr dp;
    cr_assert_eq(D.cuMemAlloc(&dp, 256), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(S->fail_nth("cuMemUnmap", 1), 0);
    CUdeviceptr va = reserve(GRAN);
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h1, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemUnmap(va, GRAN), S->injected_error("cuMemUnmap"));
    cr_assert_eq(S->injected_error("cuMemUnmap"), CUDA_ERROR_INVALID_VALUE);
    S->get_live(&l);
    cr_assert_eq(l.mappings, 1, "failed unmap left the mapping");
    cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);

    cr_assert_eq(S->fail_nth("cuNoSuchCall", 1), -1);
    cr_assert_eq(S->fail_nth("cuMemRelease", 1), 0);
    cr_assert_eq(S->fail_nth("cuMemRelease", 0), 0, "0 disarms");
    cr_assert_eq(D.cuMemRelease(h1), CUDA_SUCCESS);
    cr_assert_eq(S->fail_nth("cuMemRelease", 1), 0);
    S->fail_clear();
    cr_assert_eq(D.cuMemRelease(h3), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_SUCCESS);

    unsigned long total = S->call_total();
    cr_assert_geq(total, 10);
    S->reset_counts();
    cr_assert_eq(S->call_count("cuMemCreate"), 0);
    cr_assert_eq(S->call_count("cuMemCreate_v2"), 0);

    size_t n = 0;
    const char *const *names = S->entry_names(&n);
    int seen_create = 0, seen_proc = 0;
    for (size_t i = 0; i < n; i++) {
        seen_create |= strcmp(names[i], "cuMemCreate") == 0;
        seen_proc |= strcmp(names[i], "cuGetProcAddress") == 0;
        cr_assert_eq(S->fail_nth(names[i], 0), 0, "%s", names[i]);
    }
    cr_assert(seen_create && seen_proc && n > 40);
    assert_no_live();
}

Test(sim, every_allocating_entry_fails_with_out_of_memory)
{
    const char *alloc[] = {"cuMemCreate",        "cuMemAlloc",     "cuMemAllocAsync",
                           "cuMemHostAlloc",     "cuMemAllocHost", "cuMemHostRegister",
                           "cuMemAddressReserve"};
    for (size_t i = 0; i < sizeof alloc / sizeof alloc[0]; i++)
        cr_assert_eq(S->injected_error(alloc[i]), CUDA_ERROR_OUT_OF_MEMORY, "%s", alloc[i]);
    cr_assert_eq(S->fail_nth("cuMemHostRegister", 1), 0);
    static char buf[4096] __attribute__((aligned(4096)));
    cr_assert_eq(D.cuMemHostRegister(buf, sizeof buf, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(D.cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    cr_assert_eq(S->fail_nth("cuMemAddressReserve", 1), 0);
    CUdeviceptr va;
    cr_assert_eq(D.cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_no_live();
}

Test(sim, environment_arms_failures_by_call_number)
{
    char path[64];
    struct drv f;
    void *lib = fresh_with_context(path, sizeof path, "GPOOL_SIM_FAIL",
                                   "cuMemCreate:3,cuMemAlloc_v2:1,cuMemCreate:4", &f);
    CUmemAllocationProp p = dev_prop(0);
    CUmemGenericAllocationHandle h;
    /* the first call happens before cuInit would matter: counting is from process start */
    CUresult expect[] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY,
                         CUDA_ERROR_OUT_OF_MEMORY, CUDA_SUCCESS};
    for (int i = 0; i < 5; i++) {
        CUresult rc = f.cuMemCreate(&h, GRAN, &p, 0);
        cr_assert_eq(rc, expect[i], "call %d", i + 1);
        if (rc == CUDA_SUCCESS) cr_assert_eq(f.cuMemRelease(h), CUDA_SUCCESS);
    }
    CUdeviceptr dp;
    cr_assert_eq(f.cuMemAlloc(&dp, 64), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(f.cuMemAlloc(&dp, 64), CUDA_SUCCESS);
    cr_assert_eq(f.cuMemFree(dp), CUDA_SUCCESS);
    unsigned long (*count)(const char *) = fresh_sym(lib, "gpoolsim_call_count");
    cr_assert_eq(count("cuMemCreate"), 5);
    cr_assert_eq(count("cuMemAlloc"), 2);
    dlclose(lib);
    unlink(path);
}

/* A bad GPOOL_SIM_* value is said on stderr and makes every call that needs initialisation
 * answer CUDA_ERROR_NOT_INITIALIZED, cuInit included: a status, not an abort (it aborted, and
 * took a Python interpreter down with it) */
Test(sim, bad_environment_values_fail_every_call)
{
    static const char *const bad[][2] = {
        {"GPOOL_SIM_FAIL", "cuMemCreat:3"}, {"GPOOL_SIM_FAIL", "cuMemCreate:0"},
        {"GPOOL_SIM_MEMORY", "12GG"},       {"GPOOL_SIM_DEVICES", "17"},
        {"GPOOL_SIM_FORK", "sometimes"},    {"GPOOL_SIM_PEER", "1:1"},
        {"GPOOL_SIM_MIN_GRANULARITY", "3"}, {"GPOOL_SIM_HOST_ALIAS", "yes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        setenv(bad[i][0], bad[i][1], 1);
        void *lib = load_fresh_copy(path, sizeof path);
        unsetenv(bad[i][0]);
        struct drv f;
        drv_load(&f, lib);
        int version = 0;
        cr_assert_eq(f.cuDriverGetVersion(&version), CUDA_SUCCESS, "%s", bad[i][0]);
        cr_assert_eq(f.cuInit(0), CUDA_ERROR_NOT_INITIALIZED, "%s=%s", bad[i][0], bad[i][1]);
        int n = -1;
        cr_assert_eq(f.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED, "%s", bad[i][0]);
        dlclose(lib);
        unlink(path);
    }
}

Test(sim, statistics_json_written_at_unload)
{
    char path[64], stats[64];
    snprintf(stats, sizeof stats, "/tmp/gpoolsim-stats-XXXXXX");
    int fd = mkstemp(stats);
    cr_assert_geq(fd, 0);
    close(fd);
    struct drv f;
    void *lib = fresh_with_context(path, sizeof path, "GPOOL_SIM_STATS", stats, &f);
    CUmemAllocationProp p = dev_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va, dp;
    cr_assert_eq(f.cuMemCreate(&h, 2 * GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(f.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(f.cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_SUCCESS); /* left live */
    cr_assert_eq(f.cuMemAlloc(&dp, 1000), CUDA_SUCCESS);                   /* left live */
    int (*hold)(CUstream) = fresh_sym(lib, "gpoolsim_stream_hold");
    CUstream s;
    CUevent e;
    cr_assert_eq(f.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    cr_assert_eq(f.cuEventCreate(&e, 0), CUDA_SUCCESS);
    cr_assert_eq(hold(s), 0);
    cr_assert_eq(f.cuEventRecord(e, s), CUDA_SUCCESS);
    cr_assert_eq(f.cuStreamWaitEvent(NULL, e, 0), CUDA_SUCCESS); /* pending wait at unload */
    cr_assert_eq(f.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(f.cuEventDestroy(e), CUDA_SUCCESS);
    dlclose(lib);
    unlink(path);

    FILE *in = fopen(stats, "r");
    cr_assert_not_null(in);
    char json[8192];
    size_t n = fread(json, 1, sizeof json - 1, in);
    fclose(in);
    unlink(stats);
    json[n] = 0;
    cr_assert(json[0] == '{' && strstr(json, "},\"violations\":0}\n"), "%s", json);
    cr_assert_not_null(strstr(json, "{\"calls\":{\"cuInit\":1,"), "%s", json);
    cr_assert_not_null(strstr(json, "\"cuMemCreate\":1,"));
    cr_assert_not_null(strstr(json, "\"cuMemRelease\":1,"));
    cr_assert_not_null(strstr(json, "\"cuMemMap\":0,"));
    cr_assert_not_null(strstr(json, "\"cuStreamWaitEvent\":1,"));
    cr_assert_not_null(strstr(json, "\"bytes_in_use\":1000,"));
    cr_assert_not_null(strstr(json, "\"peak_bytes\":4194304,"), "%s", json);
    cr_assert_not_null(strstr(json, "\"live\":{\"handles\":0,\"mappings\":0,\"reservations\":1,"
                                    "\"host_allocs\":0,\"host_registrations\":0,\"streams\":0,"
                                    "\"events\":0,\"legacy_allocs\":1},\"violations\":0}"),
                       "%s", json);
}

/* ---- cuGetProcAddress and error strings ---- */

Test(sim, get_proc_address_resolves_versions_like_the_driver)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuMemAlloc_v2"));
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", &fn, 3020, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuMemAlloc_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    cr_assert_null(fn);
    cr_assert_eq(D.cuGetProcAddress("cuMemGetInfo", &fn, 12000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuMemGetInfo_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuGetProcAddress", &fn, 12000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuGetProcAddress_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuGetProcAddress", &fn, 11030, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuGetProcAddress"));
    cr_assert_neq(fn, dlsym(D.lib, "cuGetProcAddress_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuStreamDestroy", &fn, 12000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuStreamDestroy_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuStreamDestroy", &fn, 3020, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuStreamDestroy"));
    cr_assert_eq(D.cuGetProcAddress("cuCtxSynchronize", &fn, 12080, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuCtxSynchronize"));
    cr_assert_eq(D.cuGetProcAddress("cuCtxSynchronize", &fn, 13000, 0, &st), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuCtxSynchronize_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuMemHostRegister", &fn, 13000,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                 CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuMemHostRegister_v2"));
    cr_assert_eq(D.cuGetProcAddress("cuMemCreate", &fn, 10010, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

    fn = (void *)&st;
    cr_assert_eq(D.cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc_v2", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND,
                 "base names only");
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, NULL), CUDA_SUCCESS,
                 "symbolStatus is optional");
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", &fn, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE,
                 "newer than the driver");
    cr_assert_eq(D.cuGetProcAddress("cuMemAlloc", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);

    PFN_cuGetProcAddress_v11030 v1 = NULL;
    *(void **)&v1 = dlsym(D.lib, "cuGetProcAddress");
    cr_assert_not_null(v1);
    cr_assert_eq(v1("cuMemCreate", &fn, 11030, 0), CUDA_SUCCESS);
    cr_assert_eq(fn, dlsym(D.lib, "cuMemCreate"));
}

Test(sim, error_strings_and_names)
{
    const char *s = NULL;
    cr_assert_eq(D.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
    cr_assert_eq(D.cuGetErrorName(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
    cr_assert_eq(D.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    cr_assert_str_eq(s, "out of memory");
    cr_assert_eq(D.cuGetErrorString((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
}

/* ---- threads ---- */

static void *churn(void *arg)
{
    (void)arg;
    CUmemAllocationProp p = dev_prop(0);
    CUmemAccessDesc acc = rw_access(0);
    cr_assert_eq(D.cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
    for (int i = 0; i < 50; i++) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr va, dp;
        CUstream s;
        CUevent e;
        cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemSetAccess(va, GRAN, &acc, 1), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemAlloc(&dp, 512), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamCreate(&s, 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuEventCreate(&e, 0), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8(va, (unsigned char)i, 4096), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemcpy(dp, va, 512), CUDA_SUCCESS);
        cr_assert_eq(D.cuEventRecord(e, s), CUDA_SUCCESS);
        cr_assert_eq(D.cuEventSynchronize(e), CUDA_SUCCESS);
        cr_assert_eq(D.cuEventDestroy(e), CUDA_SUCCESS);
        cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemFree(dp), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    }
    return NULL;
}

Test(sim, concurrent_use_is_safe)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(S->bytes_in_use(0), 0);
    cr_assert_eq(S->peak_bytes(0) % 512, 0);
    assert_no_live();
}

Test(sim, live_counters_return_to_zero_after_cleanup)
{
    CUmemGenericAllocationHandle h = create(GRAN);
    CUdeviceptr va = reserve(GRAN), dp;
    void *hp;
    CUstream s;
    CUevent e;
    static char reg[4096] __attribute__((aligned(4096)));
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAlloc(&dp, 100), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostAlloc(&hp, 100, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostRegister(reg, sizeof reg, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuEventCreate(&e, 0), CUDA_SUCCESS);
    struct gpoolsim_live l;
    S->get_live(&l);
    cr_assert(l.handles == 1 && l.mappings == 1 && l.reservations == 1 && l.host_allocs == 1 &&
              l.host_registrations == 1 && l.streams == 1 && l.events == 1 && l.legacy_allocs == 1);
    cr_assert_eq(sim_live_total(), 8);
    cr_assert_eq(D.cuEventDestroy(e), CUDA_SUCCESS);
    cr_assert_eq(D.cuStreamDestroy(s), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostUnregister(reg), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFreeHost(hp), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(dp), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
    assert_no_live();
    cr_assert_eq(D.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}
