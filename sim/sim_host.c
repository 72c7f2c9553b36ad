/* sim_host.c — pinned host memory: cuMemHostAlloc/cuMemAllocHost/cuMemFreeHost, host
 * registration and device pointers of mapped host memory. Host memory does not count against
 * device capacity; with unified addressing a device pointer equals the host pointer, except in
 * the host-alias mode (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 0): cuda.h,
 * cuMemHostGetDevicePointer: "If any device visible to the application has a zero value for
 * the device attribute, the device pointer returned by cuMemHostGetDevicePointer() will not
 * match the original host pointer"; cuMemHostAlloc: its memory keeps "device pointer ... always
 * equal to the returned host pointer" unless WRITECOMBINED. Such memory then gets an alias: a
 * PROT_NONE range of its own size, which copies and memsets translate back to the host bytes;
 * the host pointer is no device address then. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

struct sim_host_range {
    struct sim_host_range *next;
    uintptr_t ptr;
    size_t size;
    size_t mapped; /* allocations only: page rounded length of the mapping */
    unsigned flags;
    uintptr_t alias; /* device address when it differs from ptr, else 0 */
    int device;      /* the context's device when it was allocated or registered */
    unsigned long long buffer_id;
};

static struct sim_host_range *sim_host_allocs;
static struct sim_host_range *sim_host_regs;

static struct sim_host_range *sim_host_containing(struct sim_host_range *list, uintptr_t p)
{
    for (struct sim_host_range *r = list; r; r = r->next)
        if (p >= r->ptr && p - r->ptr < r->size) return r;
    return NULL;
}

/* In the host-alias mode, give r a device address of its own. Returns 0 or -1. */
static int sim_host_make_alias(struct sim_host_range *r)
{
    r->alias = 0;
    if (!sim_mode_host_alias()) return 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (r->size + page - 1) & ~(page - 1);
    void *a = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED) return -1;
    r->alias = (uintptr_t)a + (r->ptr & (page - 1));
    return 0;
}

static void sim_host_drop_alias(struct sim_host_range *r)
{
    if (!r->alias) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = r->alias & ~(uintptr_t)(page - 1);
    munmap((void *)a, (r->alias + r->size - a + page - 1) & ~(page - 1));
    r->alias = 0;
}

static struct sim_host_range *sim_alias_containing(struct sim_host_range *list, uintptr_t p)
{
    for (struct sim_host_range *r = list; r; r = r->next)
        if (r->alias && p >= r->alias && p - r->alias < r->size) return r;
    return NULL;
}

static int sim_host_overlaps(struct sim_host_range *list, uintptr_t p, size_t size)
{
    for (struct sim_host_range *r = list; r; r = r->next)
        if (p < r->ptr + r->size && r->ptr < p + size) return 1;
    return 0;
}

static CUresult sim_host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    int dev;
    CUresult rc;
    if (!pp || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return rc;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytesize > SIZE_MAX - page) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_host_range *r = malloc(sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    r->mapped = (bytesize + page - 1) & ~(page - 1);
    void *p = mmap(NULL, r->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->ptr = (uintptr_t)p;
    r->size = bytesize;
    r->flags = flags;
    r->alias = 0;
    r->device = dev;
    r->buffer_id = sim_next_buffer_id();
    if ((flags & CU_MEMHOSTALLOC_WRITECOMBINED) && sim_host_make_alias(r) != 0) {
        munmap(p, r->mapped);
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->next = sim_host_allocs;
    sim_host_allocs = r;
    sim_live_add(SIM_LIVE_HOST_ALLOCS, 1);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuMemHostAlloc);
    if (rc == CUDA_SUCCESS) rc = sim_host_alloc(pp, bytesize, Flags);
    return sim_leave(rc);
}

CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
    CUresult rc = sim_enter(SIM_cuMemAllocHost);
    if (rc == CUDA_SUCCESS) rc = sim_host_alloc(pp, bytesize, 0);
    return sim_leave(rc);
}

CUresult cuMemFreeHost(void *p)
{
    CUresult rc = sim_enter(SIM_cuMemFreeHost);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    for (struct sim_host_range **pp = &sim_host_allocs; *pp; pp = &(*pp)->next) {
        struct sim_host_range *r = *pp;
        if (r->ptr != (uintptr_t)p) continue;
        *pp = r->next;
        sim_hb_release(r->ptr, r->size, "cuMemFreeHost"); /* cuda.h: frees at once */
        munmap(p, r->mapped);
        sim_host_drop_alias(r);
        free(r);
        sim_live_add(SIM_LIVE_HOST_ALLOCS, -1);
        return sim_leave(CUDA_SUCCESS);
    }
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
}

/* cuDevicePrimaryCtxReset of dev: the pinned allocations made in its context go, as
 * cuMemFreeHost would free them (cuda.h: the reset "destroys and cleans up all resources
 * associated with the current device in the current process"). Lock held. */
void sim_host_reset(int dev)
{
    for (struct sim_host_range **pp = &sim_host_allocs; *pp;) {
        struct sim_host_range *r = *pp;
        if (r->device != dev) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        sim_hb_release(r->ptr, r->size, "cuDevicePrimaryCtxReset");
        munmap((void *)r->ptr, r->mapped);
        sim_host_drop_alias(r);
        free(r);
        sim_live_add(SIM_LIVE_HOST_ALLOCS, -1);
    }
}

/* Every page of [p, p+size) is mapped in this process (mincore fails with ENOMEM if not). */
static int sim_host_range_mapped(uintptr_t p, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = p & ~(uintptr_t)(page - 1);
    uintptr_t end = p + size;
    unsigned char vec[256];
    while (start < end) {
        size_t len = end - start;
        if (len > page * sizeof vec) len = page * sizeof vec;
        if (mincore((void *)start, len, vec) != 0 && errno == ENOMEM) return 0;
        start += len;
    }
    return 1;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    int dev;
    CUresult rc = sim_enter(SIM_cuMemHostRegister);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t ptr = (uintptr_t)p;
    if (!p || bytesize == 0 || ptr + bytesize < ptr ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return sim_leave(rc);
    if (sim_host_overlaps(sim_host_regs, ptr, bytesize) ||
        sim_host_overlaps(sim_host_allocs, ptr, bytesize))
        return sim_leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    if (!sim_host_range_mapped(ptr, bytesize)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_host_range *r = malloc(sizeof *r);
    if (!r) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    r->ptr = ptr;
    r->size = bytesize;
    r->mapped = 0;
    r->flags = Flags;
    r->device = dev;
    r->buffer_id = sim_next_buffer_id();
    if (sim_host_make_alias(r) != 0) {
        free(r);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    r->next = sim_host_regs;
    sim_host_regs = r;
    sim_live_add(SIM_LIVE_HOST_REGS, 1);
    return sim_leave(CUDA_SUCCESS);
}

static CUresult sim_host_unregister(void *p)
{
    CUresult rc = sim_enter(SIM_cuMemHostUnregister);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    for (struct sim_host_range **pp = &sim_host_regs; *pp; pp = &(*pp)->next) {
        struct sim_host_range *r = *pp;
        if (r->ptr != (uintptr_t)p) continue;
        *pp = r->next;
        sim_hb_release(r->ptr, r->size, "cuMemHostUnregister");
        sim_host_drop_alias(r);
        free(r);
        sim_live_add(SIM_LIVE_HOST_REGS, -1);
        return sim_leave(CUDA_SUCCESS);
    }
    return sim_leave(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

CUresult cuMemHostUnregister(void *p)
{
    return sim_host_unregister(p);
}

/* cuMemHostRegister before CUDA 6.5 had the same signature. */
SIM_EXPORT CUresult sim_cuMemHostRegister_v1(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister(p, bytesize, Flags);
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuMemHostGetDevicePointer);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!pdptr || Flags != 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_host_range *r = sim_host_containing(sim_host_allocs, (uintptr_t)p);
    int mapped = r && (r->flags & CU_MEMHOSTALLOC_DEVICEMAP);
    if (!r) {
        r = sim_host_containing(sim_host_regs, (uintptr_t)p);
        mapped = r && (r->flags & CU_MEMHOSTREGISTER_DEVICEMAP);
    }
    if (!mapped) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    *pdptr = (CUdeviceptr)(r->alias ? r->alias + ((uintptr_t)p - r->ptr) : (uintptr_t)p);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult rc = sim_enter(SIM_cuMemHostGetFlags);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_host_range *r = sim_host_containing(sim_host_allocs, (uintptr_t)p);
    if (!pFlags || !r) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    *pFlags = r->flags;
    return sim_leave(CUDA_SUCCESS);
}

enum sim_host_addr sim_host_classify(uintptr_t p, uintptr_t *host, size_t *contig)
{
    struct sim_host_range *r = sim_alias_containing(sim_host_regs, p);
    if (!r) r = sim_alias_containing(sim_host_allocs, p);
    if (r) {
        *host = r->ptr + (p - r->alias);
        *contig = r->size - (p - r->alias);
        return SIM_HOST_ALIAS;
    }
    r = sim_host_containing(sim_host_regs, p);
    if (!r) r = sim_host_containing(sim_host_allocs, p);
    if (!r) return SIM_HOST_NONE;
    *host = p;
    *contig = r->size - (p - r->ptr);
    return r->alias ? SIM_HOST_NOT_ON_DEV : SIM_HOST_PINNED;
}

static void sim_host_free_list(struct sim_host_range **list)
{
    while (*list) {
        struct sim_host_range *r = *list;
        *list = r->next;
        free(r);
    }
}

void sim_host_teardown(void)
{
    sim_host_free_list(&sim_host_allocs);
    sim_host_free_list(&sim_host_regs);
}

/* For the happens-before checker (sim_copy.c, sim_hb.c): [p, p+n) lies in one pinned
 * allocation or registration. Lock held. */
size_t sim_host_extent(uintptr_t p)
{
    struct sim_host_range *r = sim_host_containing(sim_host_allocs, p);
    if (!r) r = sim_host_containing(sim_host_regs, p);
    return r ? r->size - (p - r->ptr) : 0;
}

int sim_host_contains(uintptr_t p, size_t n)
{
    struct sim_host_range *r = sim_host_containing(sim_host_allocs, p);
    if (!r) r = sim_host_containing(sim_host_regs, p);
    return r && n <= r->size - (p - r->ptr);
}

/* Pointer attributes of pinned or registered host memory, asked by its host pointer or its
 * device alias: the range is the allocation (registration) in that address space; the device
 * pointer is the host pointer under unified addressing, the alias where one exists (cuda.h,
 * cuMemHostGetDevicePointer, as for sim_host_classify). Lock held. */
int sim_host_describe(uintptr_t p, struct sim_ptr_info *out)
{
    struct sim_host_range *r = sim_alias_containing(sim_host_regs, p);
    if (!r) r = sim_alias_containing(sim_host_allocs, p);
    int by_alias = r != NULL;
    if (!r) r = sim_host_containing(sim_host_allocs, p);
    if (!r) r = sim_host_containing(sim_host_regs, p);
    if (!r) return 0;
    size_t off = p - (by_alias ? r->alias : r->ptr);
    out->memtype = CU_MEMORYTYPE_HOST;
    out->device = r->device;
    out->managed = 0;
    out->vmm = 0;
    out->base = by_alias ? r->alias : r->ptr;
    out->size = r->size;
    out->map_base = out->base;
    out->map_size = r->size;
    out->buffer_id = r->buffer_id;
    out->devp = (r->alias ? r->alias : r->ptr) + off;
    out->host = r->ptr + off;
    return 1;
}
