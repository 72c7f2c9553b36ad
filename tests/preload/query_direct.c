/* query_direct.c — a program linked with -lcuda (the simulated libcuda.so.1) asking the driver
 * about its memory by the linked names (cuMemGetAddressRange_v2, cuPointerGetAttribute(s)) and
 * allocating what gpool does not serve (cuMemCreate, cuMemAllocManaged, cuMemAllocPitch_v2).
 * Under LD_PRELOAD=libgpool_preload.so the queries must name gpool's block. Prints key=value
 * lines, exits 0 when the checks hold. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpool.h"
#define PROG_DRIVER_LINKED
#include "prog_driver.h"

/* Device allocations the interposer's pool of device 0 served (0 without the interposer). */
static unsigned long long pool_allocs(void)
{
    gpool_status (*get)(int, gpool_stats *);
    *(void **)&get = dlsym(RTLD_DEFAULT, "gpool_preload_stats_get");
    gpool_stats st = GPOOL_STATS_INIT;
    return get && get(0, &st) == GPOOL_OK ? (unsigned long long)st.kind[GPOOL_MEM_DEVICE].allocs
                                          : 0;
}

static int run_checks(void)
{
    CHECK(prog_linked_setup(1) == 0);
    CUdeviceptr p[4], base = 0, start = 0;
    size_t len = 0, rsize = 0;
    for (int i = 0; i < 4; i++)
        CHECK(cuMemAlloc(&p[i], 512) == CUDA_SUCCESS);
    CHECK(cuMemGetAddressRange(&base, &len, p[2] + 100) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p[2] + 100) ==
          CUDA_SUCCESS);
    unsigned type = 0;
    CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *data[] = {&rsize, &type};
    CHECK(cuPointerGetAttributes(2, a, data, p[2] + 100) == CUDA_SUCCESS);
    printf("base_off=%lld size=%zu start_off=%lld range_size=%zu type=%u\n",
           (long long)(base - p[2]), len, (long long)(start - p[2]), rsize, type);
    CHECK(base == p[2] && len == 512 && start == p[2] && rsize == 512);
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    printf("pool_allocs=%llu\n", pool_allocs());
    for (int i = 0; i < 4; i++)
        CHECK(cuMemFree(p[i]) == CUDA_SUCCESS);
    /* the others, by their linked names */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr m, pp;
    size_t pitch;
    CHECK(cuMemCreate(&h, (size_t)2 << 20, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CHECK(cuMemFree(m) == CUDA_SUCCESS);
    CHECK(cuMemAllocPitch(&pp, &pitch, 100, 4, 4) == CUDA_SUCCESS && pitch >= 100);
    CHECK(cuMemFree(pp) == CUDA_SUCCESS);
    return 0;
}

int main(void)
{
    return run_checks();
}
