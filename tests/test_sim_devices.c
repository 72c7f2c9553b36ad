/* test_sim_devices.c — the simulator's device rules: who may touch which memory (VMM access per
 * mapping and device, peer access for cuMemAlloc memory, pinned host memory from every device),
 * the host-alias, min-granularity and device-not-CPU-accessible modes, and H200 scale (141 GiB
 * of 2 MiB handles without a descriptor per handle). Each test names the documented rule it
 * checks (sim/sim_access.c, sim/sim_vmm.c, sim/sim_host.c cite the cuda.h doc comments).
 * Every test process starts with GPOOL_SIM_DEVICES=2 (set before the simulator is loaded). */
#include <criterion/criterion.h>
#include <cudaTypedefs.h>
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util_sim.h"
#include "util_skip.h"

#define MiB  ((size_t)1 << 20)
#define GRAN (2 * MiB)

static struct {
    PFN_cuInit_v2000 cuInit;
    PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    CUresult (*cuCtxSynchronize)(CUcontext); /* what cuGetProcAddress gives at CUDA 13: _v2 */
    PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
    PFN_cuDeviceCanAccessPeer_v4000 cuDeviceCanAccessPeer;
    PFN_cuCtxEnablePeerAccess_v4000 cuCtxEnablePeerAccess;
    PFN_cuCtxDisablePeerAccess_v4000 cuCtxDisablePeerAccess;
    PFN_cuMemGetInfo_v3020 cuMemGetInfo;
    PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
    PFN_cuMemAddressFree_v10020 cuMemAddressFree;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemRelease_v10020 cuMemRelease;
    PFN_cuMemMap_v10020 cuMemMap;
    PFN_cuMemUnmap_v10020 cuMemUnmap;
    PFN_cuMemSetAccess_v10020 cuMemSetAccess;
    PFN_cuMemGetAccess_v10020 cuMemGetAccess;
    PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemHostAlloc_v2020 cuMemHostAlloc;
    PFN_cuMemFreeHost_v2000 cuMemFreeHost;
    PFN_cuMemHostRegister_v6050 cuMemHostRegister;
    PFN_cuMemHostUnregister_v4000 cuMemHostUnregister;
    PFN_cuMemHostGetDevicePointer_v3020 cuMemHostGetDevicePointer;
    PFN_cuMemcpy_v4000 cuMemcpy;
    PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH;
    PFN_cuMemcpyDtoD_v3020 cuMemcpyDtoD;
    PFN_cuMemsetD8_v3020 cuMemsetD8;
    PFN_cuMemsetD32_v3020 cuMemsetD32;
    int (*set_peer_capable)(int, int, int);
    void (*set_host_alias)(int);
    int (*set_min_granularity)(size_t);
    void (*set_device_no_cpu)(int);
    CUresult (*device_access)(int, const void *, size_t, int);
} D;
static const struct sim_api *S;
static CUcontext ctx[2];

static void load(void)
{
#define LOAD(name)                                                                                 \
    do {                                                                                           \
        *(void **)&D.name = sim_driver_proc(#name);                                                \
        cr_assert_not_null(D.name, "%s", #name);                                                   \
    } while (0)
#define CTL(field, sym)                                                                            \
    do {                                                                                           \
        *(void **)&D.field = dlsym(S->lib, sym);                                                   \
        cr_assert_not_null(D.field, "%s", sym);                                                    \
    } while (0)
    LOAD(cuInit);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxSynchronize);
    LOAD(cuDeviceGetAttribute);
    LOAD(cuDeviceCanAccessPeer);
    LOAD(cuCtxEnablePeerAccess);
    LOAD(cuCtxDisablePeerAccess);
    LOAD(cuMemGetInfo);
    LOAD(cuMemAddressReserve);
    LOAD(cuMemAddressFree);
    LOAD(cuMemCreate);
    LOAD(cuMemRelease);
    LOAD(cuMemMap);
    LOAD(cuMemUnmap);
    LOAD(cuMemSetAccess);
    LOAD(cuMemGetAccess);
    LOAD(cuMemGetAllocationGranularity);
    LOAD(cuMemAlloc);
    LOAD(cuMemFree);
    LOAD(cuMemHostAlloc);
    LOAD(cuMemFreeHost);
    LOAD(cuMemHostRegister);
    LOAD(cuMemHostUnregister);
    LOAD(cuMemHostGetDevicePointer);
    LOAD(cuMemcpy);
    LOAD(cuMemcpyHtoD);
    LOAD(cuMemcpyDtoH);
    LOAD(cuMemcpyDtoD);
    LOAD(cuMemsetD8);
    LOAD(cuMemsetD32);
    CTL(set_peer_capable, "gpoolsim_set_peer_capable");
    CTL(set_host_alias, "gpoolsim_set_host_alias");
    CTL(set_min_granularity, "gpoolsim_set_min_granularity");
    CTL(set_device_no_cpu, "gpoolsim_set_device_no_cpu");
    CTL(device_access, "gpoolsim_device_access");
#undef LOAD
#undef CTL
}

static void setup_with(const char *memory)
{
    NEED_SIM();
    setenv("GPOOL_SIM_DEVICES", "2", 1); /* read when the simulator loads: in this process */
    if (memory) setenv("GPOOL_SIM_MEMORY", memory, 1);
    S = sim_api();
    cr_assert_not_null(S, "GPOOL_LIBCUDA must name the simulated driver");
    load();
    cr_assert_eq(D.cuInit(0), CUDA_SUCCESS);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(D.cuDevicePrimaryCtxRetain(&ctx[d], d), CUDA_SUCCESS,
                     "two devices: was the simulator loaded before GPOOL_SIM_DEVICES was set?");
    cr_assert_eq(D.cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
}

static void setup(void)
{
    setup_with(NULL);
}

static void setup_h200(void)
{
    setup_with("141G");
}

/* no suite-wide .init: a suite's init runs before a test's own, and the H200 test must set
 * GPOOL_SIM_MEMORY before the simulator loads */

static CUmemAllocationProp dev_prop(int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static CUmemAccessDesc access_for(int dev, CUmemAccess_flags flags)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = dev;
    a.flags = flags;
    return a;
}

static unsigned long long get_access(int dev, CUdeviceptr p)
{
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    unsigned long long f = 99;
    cr_assert_eq(D.cuMemGetAccess(&f, &loc, p), CUDA_SUCCESS);
    return f;
}

/* One handle of `size` on device `dev`, mapped in a reservation of its own, with access for
 * `dev` only. */
static CUdeviceptr map_on(int dev, size_t size, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop = dev_prop(dev);
    CUdeviceptr va;
    cr_assert_eq(D.cuMemCreate(h, size, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va, size, 0, *h, 0), CUDA_SUCCESS);
    CUmemAccessDesc a = access_for(dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemSetAccess(va, size, &a, 1), CUDA_SUCCESS);
    return va;
}

static void unmap_free(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    cr_assert_eq(D.cuMemUnmap(va, size), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, size), CUDA_SUCCESS);
}

/* cuMemSetAccess sets access per location; cuMemGetAccess answers for the location asked;
 * a device without access gets CUDA_ERROR_ILLEGAL_ADDRESS, read-only access allows reads. */
Test(sim_devices, vmm_access_is_per_mapping_and_per_device, .init = setup)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = map_on(0, GRAN, &h);
    cr_assert_eq(get_access(0, va), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(get_access(1, va), CU_MEM_ACCESS_FLAGS_PROT_NONE, "device 1 was given nothing");
    char buf[64] = "written by device 0", back[64] = {0};
    cr_assert_eq(D.cuMemcpyHtoD(va, buf, sizeof buf), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSynchronize(NULL),
                 CUDA_SUCCESS); /* the work is done before device 1 uses the memory */

    cr_assert_eq(D.cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(back, va, sizeof back), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.cuMemsetD8(va, 7, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.cuMemcpy((CUdeviceptr)(uintptr_t)back, va, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.device_access(1, (void *)(uintptr_t)va, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);

    /* read-only for device 1: device 0 keeps read-write (only the named location changes) */
    CUmemAccessDesc ro = access_for(1, CU_MEM_ACCESS_FLAGS_PROT_READ);
    cr_assert_eq(D.cuMemSetAccess(va, GRAN, &ro, 1), CUDA_SUCCESS);
    cr_assert_eq(get_access(1, va), CU_MEM_ACCESS_FLAGS_PROT_READ);
    cr_assert_eq(get_access(0, va), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemcpyDtoH(back, va, sizeof back), CUDA_SUCCESS);
    cr_assert_str_eq(back, buf);
    cr_assert_eq(D.cuMemsetD8(va, 7, 16), CUDA_ERROR_ILLEGAL_ADDRESS, "read-only: no writes");
    CUmemAccessDesc rw = access_for(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemSetAccess(va, GRAN, &rw, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD8(va, 7, 16), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxSynchronize(NULL), CUDA_SUCCESS); /* the work is done before the unmap */
    cr_assert_eq(D.cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
    unmap_free(va, GRAN, h);
}

/* cuCtxEnablePeerAccess enables access to cuMemAlloc allocations of the peer context; VMM
 * access is only what cuMemSetAccess gives (it grants nothing on VMM mappings). */
Test(sim_devices, peer_access_covers_cumemalloc_memory_not_vmm_mappings, .init = setup)
{
    CUdeviceptr legacy;
    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemAlloc(&legacy, 4096), CUDA_SUCCESS); /* on device 0 */
    CUdeviceptr va = map_on(0, GRAN, &h);
    char byte = 1;
    cr_assert_eq(D.cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyHtoD(legacy, &byte, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.cuCtxEnablePeerAccess(ctx[0], 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxEnablePeerAccess(ctx[0], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    cr_assert_eq(D.cuCtxEnablePeerAccess(ctx[1], 0), CUDA_ERROR_INVALID_CONTEXT, "itself");
    cr_assert_eq(D.cuMemcpyHtoD(legacy, &byte, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyHtoD(va, &byte, 1), CUDA_ERROR_ILLEGAL_ADDRESS,
                 "peer access does not open VMM mappings");
    cr_assert_eq(D.cuCtxDisablePeerAccess(ctx[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuCtxDisablePeerAccess(ctx[0]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    cr_assert_eq(D.cuMemcpyHtoD(legacy, &byte, 1), CUDA_ERROR_ILLEGAL_ADDRESS);

    /* cuDeviceCanAccessPeer decides whether peer access can be enabled */
    int can = -1;
    cr_assert_eq(D.cuDeviceCanAccessPeer(&can, 1, 0), CUDA_SUCCESS);
    cr_assert_eq(can, 1);
    cr_assert_eq(D.set_peer_capable(1, 0, 0), 0);
    cr_assert_eq(D.cuDeviceCanAccessPeer(&can, 1, 0), CUDA_SUCCESS);
    cr_assert_eq(can, 0);
    cr_assert_eq(D.cuDeviceCanAccessPeer(&can, 0, 1), CUDA_SUCCESS);
    cr_assert_eq(can, 1, "capability is per direction");
    cr_assert_eq(D.cuCtxEnablePeerAccess(ctx[0], 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    cr_assert_eq(D.cuDeviceCanAccessPeer(&can, 0, 7), CUDA_ERROR_INVALID_DEVICE);

    cr_assert_eq(D.cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(legacy), CUDA_SUCCESS);
    unmap_free(va, GRAN, h);
}

/* cuMemHostAlloc: host memory is "immediately accessible to all contexts on all devices
 * which support unified addressing". */
Test(sim_devices, pinned_host_memory_is_reachable_from_every_device, .init = setup)
{
    void *host;
    cr_assert_eq(D.cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(D.cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
        cr_assert_eq(D.cuMemsetD8((CUdeviceptr)(uintptr_t)host, (unsigned char)(d + 1), 4096),
                     CUDA_SUCCESS);
        cr_assert_eq(((unsigned char *)host)[4095], d + 1);
        cr_assert_eq(D.device_access(d, host, 4096, 1), CUDA_SUCCESS);
    }
    cr_assert_eq(D.cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFreeHost(host), CUDA_SUCCESS);
}

/* Host-alias mode, cuMemHostGetDevicePointer: with CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
 * = 0 the device pointer of registered memory differs from the host pointer; cuMemHostAlloc
 * memory (not write-combined) keeps device pointer == host pointer. */
Test(sim_devices, host_alias_mode_gives_registered_memory_its_own_device_pointer, .init = setup)
{
    int attr = -1;
    cr_assert_eq(D.cuDeviceGetAttribute(
                     &attr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(attr, 1, "default: host pointers work on the device");
    D.set_host_alias(1);
    cr_assert_eq(D.cuDeviceGetAttribute(
                     &attr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0),
                 CUDA_SUCCESS);
    cr_assert_eq(attr, 0);

    size_t len = 3 * 4096;
    char *buf = aligned_alloc(4096, len);
    cr_assert_not_null(buf);
    memset(buf, 'h', len);
    cr_assert_eq(D.cuMemHostRegister(buf, len, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    CUdeviceptr dp = 0, dp_mid = 0;
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, buf, 0), CUDA_SUCCESS);
    cr_assert_neq(dp, (CUdeviceptr)(uintptr_t)buf, "alias mode: a device pointer of its own");
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp_mid, buf + 5000, 0), CUDA_SUCCESS);
    cr_assert_eq(dp_mid, dp + 5000);
    /* the device address reaches the host bytes, both ways */
    cr_assert_eq(D.cuMemsetD8(dp + 4096, 'd', 10), CUDA_SUCCESS);
    cr_assert_eq(buf[4096], 'd');
    cr_assert_eq(buf[4106], 'h');
    char back[4] = {0};
    cr_assert_eq(D.cuMemcpyDtoH(back, dp + 4095, 3), CUDA_SUCCESS);
    cr_assert_eq(memcmp(back, "hdd", 3), 0);
    /* the host pointer is no device address now; as a host argument it still works */
    cr_assert_eq(D.cuMemsetD8((CUdeviceptr)(uintptr_t)buf, 'x', 1), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.device_access(0, buf, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(D.cuMemcpy((CUdeviceptr)(uintptr_t)back, (CUdeviceptr)(uintptr_t)buf, 1),
                 CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostUnregister(buf), CUDA_SUCCESS);
    free(buf);

    void *h;
    cr_assert_eq(D.cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, h, 0), CUDA_SUCCESS);
    cr_assert_eq(dp, (CUdeviceptr)(uintptr_t)h, "cuMemHostAlloc: device pointer == host pointer");
    cr_assert_eq(D.cuMemFreeHost(h), CUDA_SUCCESS);
    cr_assert_eq(
        D.cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED),
        CUDA_SUCCESS);
    cr_assert_eq(D.cuMemHostGetDevicePointer(&dp, h, 0), CUDA_SUCCESS);
    cr_assert_neq(dp, (CUdeviceptr)(uintptr_t)h, "write-combined: ask for the device pointer");
    cr_assert_eq(D.cuMemFreeHost(h), CUDA_SUCCESS);
    D.set_host_alias(0);
}

/* CUmemAllocationGranularity_flags: MINIMUM is what cuMemCreate/cuMemMap need, RECOMMENDED
 * what performs best; the min-granularity mode makes them differ. */
Test(sim_devices, minimum_granularity_can_be_smaller_than_recommended, .init = setup)
{
    CUmemAllocationProp prop = dev_prop(0);
    size_t minimum = 0, recommended = 0;
    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemCreate(&h, 64 << 10, &prop, 0), CUDA_ERROR_INVALID_VALUE,
                 "default: 2 MiB granularity");
    cr_assert_eq(D.set_min_granularity(64 << 10), 0);
    cr_assert_eq(D.set_min_granularity(3 << 10), -1);
    cr_assert_eq(D.cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    cr_assert_eq(
        D.cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        CUDA_SUCCESS);
    cr_assert_eq(minimum, (size_t)64 << 10);
    cr_assert_eq(recommended, GRAN);
    /* two 64 KiB handles side by side, one access call over both */
    CUmemGenericAllocationHandle a, b;
    CUdeviceptr va;
    cr_assert_eq(D.cuMemCreate(&a, 64 << 10, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemCreate(&b, 64 << 10, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressReserve(&va, 128 << 10, 0, 0, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va, 64 << 10, 0, a, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va + (64 << 10), 64 << 10, 0, b, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va + (32 << 10), 64 << 10, 0, b, 0), CUDA_ERROR_INVALID_VALUE,
                 "still aligned to the minimum");
    CUmemAccessDesc rw = access_for(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemSetAccess(va, 128 << 10, &rw, 1), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemsetD32(va + (64 << 10) - 8, 0xabcdef01u, 4), CUDA_SUCCESS);
    cr_assert_eq(((uint32_t *)(uintptr_t)(va + (64 << 10)))[1], 0xabcdef01u);
    cr_assert_eq(D.cuCtxSynchronize(NULL), CUDA_SUCCESS); /* the work is done before the unmap */
    cr_assert_eq(D.cuMemUnmap(va, 128 << 10), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(a), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(b), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 128 << 10), CUDA_SUCCESS);
    cr_assert_eq(D.set_min_granularity(0), 0);
}

static void cpu_write(void *p)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, NULL);
    *(volatile char *)p = 1;
}

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

/* Device memory not accessible from the CPU (the rule of a discrete GPU without HMM): the
 * contents are reached through copies only; copies span mappings of different handles. */
Test(sim_devices, device_memory_without_cpu_access_is_reached_by_copies, .init = setup)
{
    NOT_UNDER_VALGRIND("the CPU-fault check on PROT_NONE device memory");
    D.set_device_no_cpu(1);
    CUmemAllocationProp prop = dev_prop(0);
    CUmemGenericAllocationHandle a, b;
    CUdeviceptr va;
    cr_assert_eq(D.cuMemCreate(&a, GRAN, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemCreate(&b, GRAN, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0), CUDA_SUCCESS);
    /* b first: its bytes are not next to a's in the store */
    cr_assert_eq(D.cuMemMap(va + GRAN, GRAN, 0, a, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemMap(va, GRAN, 0, b, 0), CUDA_SUCCESS);
    CUmemAccessDesc rw = access_for(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemSetAccess(va, 2 * GRAN, &rw, 1), CUDA_SUCCESS);
    cr_assert_eq(child_signal(cpu_write, (void *)(uintptr_t)va), SIGSEGV,
                 "the CPU cannot touch device memory");
    size_t n = 256 << 10;
    unsigned char *src = malloc(n), *dst = malloc(n);
    cr_assert(src && dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr at = va + GRAN - n / 2; /* straddles the two handles */
    cr_assert_eq(D.cuMemcpyHtoD(at, src, n), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoD(va + 4096, at, n), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(dst, va + 4096, n), CUDA_SUCCESS);
    cr_assert_eq(memcmp(src, dst, n), 0);
    cr_assert_eq(D.cuMemsetD32(at, 0x01020304u, n / 4), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(dst, at + n - 8, 8), CUDA_SUCCESS);
    cr_assert_eq(((uint32_t *)dst)[1], 0x01020304u);
    free(src);
    free(dst);
    cr_assert_eq(D.cuMemUnmap(va, 2 * GRAN), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(a), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(b), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, 2 * GRAN), CUDA_SUCCESS);
    D.set_device_no_cpu(0);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static int count_vmas(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* H200 scale: 141 GiB of 2 MiB handles (72,192), created, mapped side by side, written and
 * released, with a fixed number of descriptors and a few VMAs (the per-process limits are
 * ~1024 descriptors and 65,530 VMAs). */
Test(sim_devices, h200_capacity_in_2mib_handles_without_a_descriptor_each, .init = setup_h200,
     .timeout = 120)
{
    NOT_UNDER_VALGRIND("a 141 GiB reservation is beyond what valgrind lets a process reserve");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t cap = (size_t)141 << 30, n = cap / GRAN;
    size_t free_b = 0, total = 0;
    cr_assert_eq(D.cuMemGetInfo(&free_b, &total), CUDA_SUCCESS);
    cr_assert_eq(total, cap);
    int fds0 = count_fds(), vmas0 = count_vmas();
    CUmemGenericAllocationHandle *h = malloc(n * sizeof *h);
    cr_assert_not_null(h);
    CUmemAllocationProp prop = dev_prop(0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(D.cuMemCreate(&h[i], GRAN, &prop, 0), CUDA_SUCCESS, "handle %zu", i);
    CUmemGenericAllocationHandle extra;
    cr_assert_eq(D.cuMemCreate(&extra, GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr va;
    cr_assert_eq(D.cuMemAddressReserve(&va, cap, 0, 0, 0), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(D.cuMemMap(va + i * GRAN, GRAN, 0, h[i], 0), CUDA_SUCCESS, "map %zu", i);
    CUmemAccessDesc rw = access_for(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cr_assert_eq(D.cuMemSetAccess(va, cap, &rw, 1), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i += 997)
        cr_assert_eq(D.cuMemsetD32(va + i * GRAN + GRAN - 4, (unsigned)i, 1), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i += 997) {
        unsigned v = 0;
        cr_assert_eq(D.cuMemcpyDtoH(&v, va + i * GRAN + GRAN - 4, 4), CUDA_SUCCESS);
        cr_assert_eq(v, (unsigned)i);
    }
    int fds1 = count_fds(), vmas1 = count_vmas();
    cr_assert_leq(fds1, fds0 + 1, "descriptors: %d -> %d", fds0, fds1);
    cr_assert_leq(vmas1, vmas0 + 16, "VMAs: %d -> %d for %zu mappings", vmas0, vmas1, n);
    cr_assert_eq(D.cuMemUnmap(va, cap), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(D.cuMemRelease(h[i]), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemAddressFree(va, cap), CUDA_SUCCESS);
    cr_assert_eq(S->bytes_in_use(0), 0);
    free(h);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cr_log_info("h200: %zu handles of 2 MiB, fds %d -> %d, VMAs %d -> %d, %.2f s", n, fds0, fds1,
                vmas0, vmas1, s);
    fprintf(stderr, "h200: %zu handles of 2 MiB, fds %d -> %d, VMAs %d -> %d, %.2f s\n", n, fds0,
            fds1, vmas0, vmas1, s);
}
