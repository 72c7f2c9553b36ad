/* query_prog.c — pointer queries and memory for others, as NCCL, UCX, MPI and PyTorch use them:
 * reaches the driver as cudart does (dlopen $GPOOL_LIBCUDA, dlsym(cuGetProcAddress_v2), then
 * cuGetProcAddress), and the runtime through the stand-in libcudart (whose cudaMallocManaged,
 * cudaMallocPitch and cudaPointerGetAttributes reach the driver the same way). Without
 * LD_PRELOAD the driver's own memory (cuMemAlloc) answers; under it, gpool's blocks must answer
 * the same. Usage: query_prog MODE [KIND]; prints key=value lines, exits 0 when the mode's
 * checks hold. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "prog_driver.h"

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*mem_info)(size_t *, size_t *);
static CUresult (*addr_range)(CUdeviceptr *, size_t *, CUdeviceptr);
static CUresult (*ptr_attr)(void *, CUpointer_attribute, CUdeviceptr);
static CUresult (*ptr_attrs)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
static CUresult (*host_alloc)(void **, size_t, unsigned);
static CUresult (*host_free)(void *);
static CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
static CUresult (*mem_release)(CUmemGenericAllocationHandle);
static CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);

static int setup(void)
{
    CHECK(prog_driver_setup() == 0);
    *(void **)&mem_alloc = prog_proc("cuMemAlloc");
    *(void **)&mem_free = prog_proc("cuMemFree");
    *(void **)&mem_info = prog_proc("cuMemGetInfo");
    *(void **)&addr_range = prog_proc("cuMemGetAddressRange");
    *(void **)&ptr_attr = prog_proc("cuPointerGetAttribute");
    *(void **)&ptr_attrs = prog_proc("cuPointerGetAttributes");
    *(void **)&host_alloc = prog_proc("cuMemHostAlloc");
    *(void **)&host_free = prog_proc("cuMemFreeHost");
    *(void **)&mem_create = prog_proc("cuMemCreate");
    *(void **)&mem_release = prog_proc("cuMemRelease");
    *(void **)&alloc_managed = prog_proc("cuMemAllocManaged");
    *(void **)&alloc_pitch = prog_proc("cuMemAllocPitch");
    CHECK(mem_alloc && mem_free && mem_info && addr_range && host_alloc && host_free);
    CHECK(mem_create && mem_release); /* the others are checked where a mode needs them */
    return 0;
}

/* Every query on p + off (p a device allocation of size bytes) names p and size. */
static int device_queries(CUdeviceptr p, size_t size, size_t off, CUcontext ctx)
{
    CUdeviceptr q = p + off, base = 0, start = 0, devp = 0;
    size_t len = 0, rsize = 0;
    CUresult rr = addr_range(&base, &len, q);
    printf("range(+%zu): rc=%d base_off=%lld size=%zu asked=%zu\n", off, (int)rr,
           (long long)(base - p), len, size);
    CHECK(rr == CUDA_SUCCESS && base == p && len == size);
    CHECK(ptr_attr && ptr_attrs);
    CHECK(ptr_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q) == CUDA_SUCCESS);
    CHECK(ptr_attr(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q) == CUDA_SUCCESS);
    printf("attr(+%zu): start_off=%lld size=%zu\n", off, (long long)(start - p), rsize);
    CHECK(start == p && rsize == size);
    unsigned type = 0;
    int ordinal = -1, managed = -1;
    void *host = (void *)1;
    CUcontext c = NULL;
    CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q) == CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    CHECK(ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, q) == CUDA_SUCCESS && !ordinal);
    CHECK(ptr_attr(&devp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, q) == CUDA_SUCCESS && devp == q);
    CHECK(ptr_attr(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, q) == CUDA_ERROR_INVALID_VALUE);
    CHECK(ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, q) == CUDA_SUCCESS && !managed);
    CHECK(ptr_attr(&c, CU_POINTER_ATTRIBUTE_CONTEXT, q) == CUDA_SUCCESS && c == ctx);
    /* the batched form, as UCX and NCCL ask */
    CUpointer_attribute a[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_HOST_POINTER,
        CU_POINTER_ATTRIBUTE_CONTEXT};
    type = 0, managed = -1, ordinal = -1, start = 0, rsize = 0, host = (void *)1, c = NULL;
    void *data[] = {&type, &managed, &ordinal, &start, &rsize, &host, &c};
    CHECK(ptr_attrs(7, a, data, q) == CUDA_SUCCESS);
    printf("attrs(+%zu): type=%u managed=%d ordinal=%d start_off=%lld size=%zu host=%p\n", off,
           type, managed, ordinal, (long long)(start - p), rsize, host);
    CHECK(type == CU_MEMORYTYPE_DEVICE && !managed && !ordinal && start == p && rsize == size &&
          !host && c == ctx);
    /* the runtime's form (cudart calls cuPointerGetAttributes) */
    struct cudaPointerAttributes ra;
    memset(&ra, 0, sizeof ra);
    CHECK(cudaPointerGetAttributes(&ra, (void *)(uintptr_t)q) == cudaSuccess);
    CHECK(ra.type == cudaMemoryTypeDevice && ra.device == 0);
    CHECK(ra.devicePointer == (void *)(uintptr_t)q && !ra.hostPointer);
    return 0;
}

/* Device blocks: a 512 B one among others, and both ends and the middle of a 70 MiB one. */
static int device_range(void)
{
    CUcontext ctx = NULL;
    CUresult (*get_current)(CUcontext *);
    *(void **)&get_current = prog_proc("cuCtxGetCurrent");
    CHECK(get_current && get_current(&ctx) == CUDA_SUCCESS && ctx);
    CUdeviceptr small[8], big;
    for (int i = 0; i < 8; i++)
        CHECK(mem_alloc(&small[i], 512) == CUDA_SUCCESS);
    size_t big_size = (size_t)70 << 20;
    CHECK(mem_alloc(&big, big_size) == CUDA_SUCCESS);
    for (int i = 0; i < 8; i += 3) {
        CHECK(device_queries(small[i], 512, 0, ctx) == 0);
        CHECK(device_queries(small[i], 512, 511, ctx) == 0);
    }
    CHECK(device_queries(big, big_size, 0, ctx) == 0);
    CHECK(device_queries(big, big_size, big_size / 2 + 100, ctx) == 0);
    CHECK(device_queries(big, big_size, big_size - 1, ctx) == 0);
    /* past the bytes asked for (gpool's rounding tail): no allocation holds it */
    CUdeviceptr odd, base;
    size_t len;
    unsigned type = 7;
    CHECK(mem_alloc(&odd, 1000) == CUDA_SUCCESS);
    CHECK(device_queries(odd, 1000, 999, ctx) == 0);
    CHECK(addr_range(&base, &len, odd + 1010) == CUDA_ERROR_NOT_FOUND);
    CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, odd + 1010) ==
          CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute ta[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *td[] = {&type};
    CHECK(ptr_attrs(1, ta, td, odd + 1010) == CUDA_SUCCESS && type == 0);
    CHECK(mem_free(odd) == CUDA_SUCCESS);
    for (int i = 0; i < 8; i++)
        CHECK(mem_free(small[i]) == CUDA_SUCCESS);
    CHECK(mem_free(big) == CUDA_SUCCESS);
    return 0;
}

/* Host allocations the interposer's pool of device 0 served (0 without the interposer). */
static unsigned long long pool_host_allocs(void)
{
    gpool_status (*get)(int, gpool_stats *);
    *(void **)&get = dlsym(RTLD_DEFAULT, "gpool_preload_stats_get");
    gpool_stats st = GPOOL_STATS_INIT;
    if (!get || get(0, &st) != GPOOL_OK) return 0;
    return (unsigned long long)(st.kind[GPOOL_MEM_HOST_PINNED].allocs +
                                st.kind[GPOOL_MEM_HOST_MAPPED].allocs);
}

/* Pinned host blocks (mapped: the device address too) name their own base and size. */
static int host_range(void)
{
    CHECK(ptr_attr && ptr_attrs);
    void *h[4];
    for (int i = 0; i < 4; i++)
        CHECK(host_alloc(&h[i], 1000, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
    for (int i = 0; i < 4; i++) {
        CUdeviceptr q = (CUdeviceptr)(uintptr_t)h[i] + 999, start = 0, devp = 0;
        size_t rsize = 0;
        unsigned type = 0;
        void *host = NULL;
        CHECK(ptr_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q) == CUDA_SUCCESS);
        CHECK(ptr_attr(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q) == CUDA_SUCCESS);
        CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q) == CUDA_SUCCESS);
        CHECK(ptr_attr(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, q) == CUDA_SUCCESS);
        CHECK(ptr_attr(&devp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, q) == CUDA_SUCCESS);
        printf("host[%d]: start_off=%lld size=%zu type=%u host_off=%lld dev=%d\n", i,
               (long long)(start - (CUdeviceptr)(uintptr_t)h[i]), rsize, type,
               (long long)((char *)host - (char *)h[i]), devp != 0);
        CHECK(start == (CUdeviceptr)(uintptr_t)h[i] && rsize == 1000);
        CUdeviceptr base = 0;
        size_t len = 0;
        /* cuda.h documents cuMemGetAddressRange for cuMemAlloc(Pitch) memory: the simulator
         * does not answer for host memory; where an answer comes, it is the block's */
        CUresult rr = addr_range(&base, &len, q);
        printf("host_range=%d\n", (int)rr);
        CHECK(rr != CUDA_SUCCESS || (base == (CUdeviceptr)(uintptr_t)h[i] && len == 1000));
        CHECK(type == CU_MEMORYTYPE_HOST && host == (char *)h[i] + 999 && devp);
        struct cudaPointerAttributes ra;
        memset(&ra, 0, sizeof ra);
        CHECK(cudaPointerGetAttributes(&ra, (void *)(uintptr_t)q) == cudaSuccess);
        CHECK(ra.type == cudaMemoryTypeHost && ra.hostPointer == (char *)h[i] + 999);
    }
    printf("pool_host_allocs=%llu\n", pool_host_allocs());
    for (int i = 0; i < 4; i++)
        CHECK(host_free(h[i]) == CUDA_SUCCESS);
    return 0;
}

/* Memory the driver does not know keeps the driver's answers. */
static int foreign(void)
{
    static char stack_bytes[4096];
    CUdeviceptr q = (CUdeviceptr)(uintptr_t)stack_bytes, base;
    size_t len;
    unsigned type = 7;
    CHECK(addr_range(&base, &len, q) != CUDA_SUCCESS && ptr_attr && ptr_attrs);
    CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q) == CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *data[] = {&type};
    CHECK(ptr_attrs(1, a, data, q) == CUDA_SUCCESS && type == 0);
    return 0;
}

/* The simulator's own answers (run without the interposer): a VMM mapping reports the reserved
 * range as RANGE_* and the mapping as cuMemGetAddressRange; managed memory is host-reachable;
 * pitched rows are padded. */
static int sim_answers(void)
{
    CHECK(ptr_attr && alloc_managed && alloc_pitch);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*addr_free)(CUdeviceptr, size_t);
    *(void **)&reserve = prog_proc("cuMemAddressReserve");
    *(void **)&map = prog_proc("cuMemMap");
    *(void **)&unmap = prog_proc("cuMemUnmap");
    *(void **)&addr_free = prog_proc("cuMemAddressFree");
    CHECK(reserve && map && unmap && addr_free);
    size_t page = (size_t)2 << 20;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va, base, start;
    size_t len, rsize;
    CHECK(mem_create(&h, page, &prop, 0) == CUDA_SUCCESS);
    CHECK(reserve(&va, 4 * page, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(map(va + page, page, 0, h, 0) == CUDA_SUCCESS);
    CHECK(addr_range(&base, &len, va + page + 5) == CUDA_SUCCESS);
    CHECK(ptr_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + page + 5) == CUDA_SUCCESS);
    CHECK(ptr_attr(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + page + 5) == CUDA_SUCCESS);
    printf("vmm: map_off=%lld map_size=%zu range_off=%lld range_size=%zu\n", (long long)(base - va),
           len, (long long)(start - va), rsize);
    CHECK(base == va + page && len == page && start == va && rsize == 4 * page);
    unsigned type = 0;
    void *host = NULL;
    CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + page) == CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    CHECK(ptr_attr(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, va + page) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va) == CUDA_ERROR_INVALID_VALUE);
    CHECK(unmap(va + page, page) == CUDA_SUCCESS && addr_free(va, 4 * page) == CUDA_SUCCESS);
    CHECK(mem_release(h) == CUDA_SUCCESS);
    unsigned long long id1 = 0, id2 = 0, id3 = 0;
    CUdeviceptr a1, a2;
    CHECK(mem_alloc(&a1, 4096) == CUDA_SUCCESS && mem_alloc(&a2, 4096) == CUDA_SUCCESS);
    CHECK(ptr_attr(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a1) == CUDA_SUCCESS);
    CHECK(ptr_attr(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, a2 + 4095) == CUDA_SUCCESS);
    CHECK(mem_free(a1) == CUDA_SUCCESS && mem_alloc(&a1, 4096) == CUDA_SUCCESS);
    CHECK(ptr_attr(&id3, CU_POINTER_ATTRIBUTE_BUFFER_ID, a1) == CUDA_SUCCESS);
    printf("buffer_ids=%llu,%llu,%llu\n", id1, id2, id3);
    CHECK(id1 && id2 && id3 && id1 != id2 && id3 != id1 && id3 != id2); /* never reused */
    CHECK(mem_free(a1) == CUDA_SUCCESS && mem_free(a2) == CUDA_SUCCESS);
    CUdeviceptr m, pp;
    int managed = 0;
    CHECK(alloc_managed(&m, 4096, 0x7) == CUDA_ERROR_INVALID_VALUE); /* not a documented flag */
    CHECK(alloc_managed(&m, 4096, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CHECK(ptr_attr(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 10) == CUDA_SUCCESS && managed);
    CHECK(ptr_attr(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, m + 10) == CUDA_SUCCESS);
    CHECK(host == (void *)(uintptr_t)(m + 10));
    CHECK(mem_free(m) == CUDA_SUCCESS);
    size_t pitch = 0;
    CHECK(alloc_pitch(&pp, &pitch, 1000, 10, 3) == CUDA_ERROR_INVALID_VALUE);
    CHECK(alloc_pitch(&pp, &pitch, 1000, 10, 8) == CUDA_SUCCESS);
    CHECK(addr_range(&base, &len, pp + 5000) == CUDA_SUCCESS);
    printf("pitch=%zu size=%zu\n", pitch, len);
    CHECK(pitch >= 1000 && pitch % 512 == 0 && base == pp && len == pitch * 10);
    CHECK(mem_free(pp) == CUDA_SUCCESS);
    return 0;
}

/* gpool holds 800 MiB live (nothing cached): a 512 MiB cuMemCreate fails with the driver's
 * out-of-memory, after one give-back that finds nothing to release. */
static int others_live(void)
{
    CUdeviceptr big;
    CHECK(mem_alloc(&big, (size_t)800 << 20) == CUDA_SUCCESS);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUresult r = mem_create(&h, (size_t)512 << 20, &prop, 0);
    printf("create_live=%d\n", (int)r);
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
    *(volatile char *)(uintptr_t)big = 1; /* the live block is intact */
    CHECK(mem_free(big) == CUDA_SUCCESS);
    return 0;
}

/* 800 MiB cached by gpool, then cuMemCreate(512 MiB) while a stream captures (global mode):
 * no give-back (its synchronize would invalidate the capture), the driver's out-of-memory
 * stands and the capture stays active. */
static int others_capture(void)
{
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*graph_destroy)(CUgraph);
    *(void **)&stream_create = prog_proc("cuStreamCreate");
    *(void **)&begin = prog_proc("cuStreamBeginCapture");
    *(void **)&end = prog_proc("cuStreamEndCapture");
    *(void **)&is_capturing = prog_proc("cuStreamIsCapturing");
    *(void **)&graph_destroy = prog_proc("cuGraphDestroy");
    CHECK(stream_create && begin && end && is_capturing && graph_destroy);
    CUdeviceptr big;
    CHECK(mem_alloc(&big, (size_t)800 << 20) == CUDA_SUCCESS && mem_free(big) == CUDA_SUCCESS);
    CUstream s;
    CHECK(stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHECK(begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = mem_create(&h, (size_t)512 << 20, &prop, 0);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK(is_capturing(s, &st) == CUDA_SUCCESS);
    printf("create_capturing=%d capture_status=%d\n", (int)r, (int)st);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUgraph g = NULL;
    CHECK(end(s, &g) == CUDA_SUCCESS && g && graph_destroy(g) == CUDA_SUCCESS);
    if (r == CUDA_SUCCESS) CHECK(mem_release(h) == CUDA_SUCCESS);
    return 0;
}

static size_t mib(size_t b)
{
    return b >> 20;
}

/* 800 MiB through cuMemAlloc and freed, then 512 MiB of a kind gpool does not serve: the
 * driver must have it, since cuMemGetInfo counts what gpool caches as free. */
static int others(const char *kind)
{
    CUdeviceptr big;
    CHECK(mem_alloc(&big, (size_t)800 << 20) == CUDA_SUCCESS);
    *(volatile char *)(uintptr_t)big = 1; /* simulated device memory is host memory */
    CHECK(mem_free(big) == CUDA_SUCCESS);
    size_t fr = 0, total = 0;
    CHECK(mem_info(&fr, &total) == CUDA_SUCCESS);
    printf("free_before=%zu total=%zu\n", mib(fr), mib(total));
    size_t want = (size_t)512 << 20;
    CUresult r;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr p = 0;
    size_t pitch = 0;
    if (!strcmp(kind, "create")) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        r = mem_create(&h, want, &prop, 0);
    } else if (!strcmp(kind, "managed")) {
        CHECK(alloc_managed);
        r = alloc_managed(&p, want, CU_MEM_ATTACH_GLOBAL);
    } else if (!strcmp(kind, "pitch")) {
        CHECK(alloc_pitch);
        r = alloc_pitch(&p, &pitch, (size_t)1 << 20, 512, 4);
    } else if (!strcmp(kind, "rt_managed")) {
        void *v = NULL;
        r = cudaMallocManaged(&v, want, cudaMemAttachGlobal) == cudaSuccess ? CUDA_SUCCESS
                                                                            : CUDA_ERROR_UNKNOWN;
        p = (CUdeviceptr)(uintptr_t)v;
    } else if (!strcmp(kind, "rt_pitch")) {
        void *v = NULL;
        r = cudaMallocPitch(&v, &pitch, (size_t)1 << 20, 512) == cudaSuccess ? CUDA_SUCCESS
                                                                             : CUDA_ERROR_UNKNOWN;
        p = (CUdeviceptr)(uintptr_t)v;
    } else {
        printf("unknown kind %s\n", kind);
        return 2;
    }
    CHECK(mem_info(&fr, &total) == CUDA_SUCCESS);
    printf("%s=%d free_after=%zu\n", kind, (int)r, mib(fr));
    CHECK(r == CUDA_SUCCESS);
    CHECK(fr <= total - want);
    if (h) CHECK(mem_release(h) == CUDA_SUCCESS);
    if (p) CHECK(mem_free(p) == CUDA_SUCCESS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    if (setup() != 0) return 1;
    if (!strcmp(argv[1], "device")) return device_range();
    if (!strcmp(argv[1], "host")) return host_range();
    if (!strcmp(argv[1], "foreign")) return foreign();
    if (!strcmp(argv[1], "sim")) return sim_answers();
    if (!strcmp(argv[1], "others_live")) return others_live();
    if (!strcmp(argv[1], "others_capture")) return others_capture();
    if (!strcmp(argv[1], "others") && argc > 2) return others(argv[2]);
    printf("unknown mode %s\n", argv[1]);
    return 2;
}
