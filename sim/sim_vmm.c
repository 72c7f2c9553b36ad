/* sim_vmm.c — the virtual memory management API on host memory.
 *
 * Reservations are real PROT_NONE address ranges. A handle from cuMemCreate is a memfd of the
 * handle's size; cuMemMap maps it MAP_SHARED over part of a reservation, still PROT_NONE, so
 * every mapping of one handle aliases the same bytes. cuMemSetAccess makes a fully mapped range
 * readable/writable. cuMemUnmap puts the PROT_NONE reservation back. A handle's bytes count
 * against its device until it is released and its last mapping is gone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sim_internal.h"

#define GRAN GPOOL_SIM_GRANULARITY

struct sim_handle {
    struct sim_handle *next;
    CUmemGenericAllocationHandle id;
    int fd;
    size_t size;
    int device; /* -1 for host memory */
    CUmemAllocationProp prop;
    unsigned user_refs; /* cuMemCreate / cuMemRetainAllocationHandle minus cuMemRelease */
    unsigned maps;      /* live mappings */
};

struct sim_reservation {
    struct sim_reservation *next;
    uintptr_t base;
    size_t size;
};

struct sim_mapping {
    struct sim_mapping *next;
    uintptr_t addr;
    size_t size;
    struct sim_handle *handle;
    int prot;
};

static struct sim_handle *sim_handles;
static struct sim_reservation *sim_reservations;
static struct sim_mapping *sim_mappings;
static CUmemGenericAllocationHandle sim_next_handle_id = 0x51d0000001ull;

static int sim_range_ok(uintptr_t p, size_t size) {
    return size > 0 && p + size > p && sim_is_aligned(p, GRAN) && sim_is_aligned(size, GRAN);
}

static struct sim_handle *sim_handle_find(CUmemGenericAllocationHandle id) {
    for (struct sim_handle *h = sim_handles; h; h = h->next)
        if (h->id == id && h->user_refs > 0) return h;
    return NULL;
}

static void sim_handle_unref(struct sim_handle *h) {
    if (h->user_refs > 0 || h->maps > 0) return;
    for (struct sim_handle **pp = &sim_handles; *pp; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    if (h->device >= 0) sim_uncharge(h->device, h->size);
    close(h->fd);
    free(h);
}

static struct sim_reservation *sim_reservation_containing(uintptr_t p, size_t size) {
    for (struct sim_reservation *r = sim_reservations; r; r = r->next)
        if (p >= r->base && p - r->base <= r->size && size <= r->size - (p - r->base)) return r;
    return NULL;
}

static int sim_overlaps(uintptr_t a, size_t asz, uintptr_t b, size_t bsz) {
    return a < b + bsz && b < a + asz;
}

/* Every byte of [p, p+size) is mapped and every mapping touching it lies wholly inside. */
static int sim_range_exactly_mapped(uintptr_t p, size_t size) {
    size_t covered = 0;
    for (struct sim_mapping *m = sim_mappings; m; m = m->next) {
        if (!sim_overlaps(p, size, m->addr, m->size)) continue;
        if (m->addr < p || m->addr + m->size > p + size) return 0;
        covered += m->size;
    }
    return covered == size;
}

static void *sim_map_none(void *addr, size_t size) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (addr ? MAP_FIXED : 0);
    return mmap(addr, size, PROT_NONE, flags, -1, 0);
}

/* ---- reservations ---- */

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    CUresult rc = sim_enter(SIM_cuMemAddressReserve);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!ptr || flags != 0 || !sim_range_ok(0, size) || (alignment & (alignment - 1)) ||
        size > SIZE_MAX / 2)
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    size_t align = alignment > GRAN ? alignment : GRAN;
    struct sim_reservation *r = malloc(sizeof *r);
    if (!r) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    size_t span = size + align;
    if (span < size) {
        free(r);
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    }
    /* the addr hint is ignored, as the driver may */
    char *raw = sim_map_none(NULL, span);
    if (raw == MAP_FAILED) {
        free(r);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    uintptr_t base = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (base > (uintptr_t)raw) munmap(raw, base - (uintptr_t)raw);
    size_t tail = (uintptr_t)raw + span - (base + size);
    if (tail) munmap((void *)(base + size), tail);
    r->base = base;
    r->size = size;
    r->next = sim_reservations;
    sim_reservations = r;
    sim_live_add(SIM_LIVE_RESERVATIONS, 1);
    *ptr = (CUdeviceptr)base;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    CUresult rc = sim_enter(SIM_cuMemAddressFree);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_reservation **pp = &sim_reservations;
    while (*pp && !((*pp)->base == (uintptr_t)ptr && (*pp)->size == size))
        pp = &(*pp)->next;
    if (!*pp) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_reservation *r = *pp;
    for (struct sim_mapping *m = sim_mappings; m; m = m->next)
        if (sim_overlaps(r->base, r->size, m->addr, m->size))
            return sim_leave(CUDA_ERROR_INVALID_VALUE); /* still mapped */
    *pp = r->next;
    munmap((void *)r->base, r->size);
    free(r);
    sim_live_add(SIM_LIVE_RESERVATIONS, -1);
    return sim_leave(CUDA_SUCCESS);
}

/* ---- physical allocations ---- */

static CUresult sim_check_prop(const CUmemAllocationProp *prop, int *device) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!sim_valid_device(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
        *device = prop->location.id;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        *device = -1;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

static int sim_memfd(size_t size) {
    int fd = memfd_create("gpoolsim-handle", MFD_CLOEXEC);
    if (fd < 0 && errno == EMFILE) {
        /* thousands of live handles: lift the soft descriptor limit to the hard one */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            fd = memfd_create("gpoolsim-handle", MFD_CLOEXEC);
        }
    }
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
    CUresult rc = sim_enter(SIM_cuMemCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int device = -1;
    if (!handle || flags != 0 || !sim_range_ok(0, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_check_prop(prop, &device)) != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = calloc(1, sizeof *h);
    if (!h) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if (device >= 0 && (rc = sim_charge(device, size)) != CUDA_SUCCESS) {
        free(h);
        return sim_leave(rc);
    }
    h->fd = sim_memfd(size);
    if (h->fd < 0) {
        if (device >= 0) sim_uncharge(device, size);
        free(h);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    h->id = sim_next_handle_id++;
    h->size = size;
    h->device = device;
    h->prop = *prop;
    h->user_refs = 1;
    h->next = sim_handles;
    sim_handles = h;
    sim_live_add(SIM_LIVE_HANDLES, 1);
    *handle = h->id;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    CUresult rc = sim_enter(SIM_cuMemRelease);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = sim_handle_find(handle);
    if (!h) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (--h->user_refs == 0) sim_live_add(SIM_LIVE_HANDLES, -1);
    sim_handle_unref(h);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle) {
    CUresult rc = sim_enter(SIM_cuMemGetAllocationPropertiesFromHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = sim_handle_find(handle);
    if (!h || !prop) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    *prop = h->prop;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
    CUresult rc = sim_enter(SIM_cuMemGetAllocationGranularity);
    int device;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_check_prop(prop, &device)) != CUDA_SUCCESS) return sim_leave(rc);
    *granularity = GRAN;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    CUresult rc = sim_enter(SIM_cuMemRetainAllocationHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!handle) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_mapping *m = sim_mappings; m; m = m->next) {
        if ((uintptr_t)addr >= m->addr && (uintptr_t)addr - m->addr < m->size) {
            if (m->handle->user_refs++ == 0) sim_live_add(SIM_LIVE_HANDLES, 1);
            *handle = m->handle->id;
            return sim_leave(CUDA_SUCCESS);
        }
    }
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
}

/* ---- mappings ---- */

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    CUresult rc = sim_enter(SIM_cuMemMap);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    struct sim_handle *h = sim_handle_find(handle);
    if (!h || flags != 0 || offset != 0 || !sim_range_ok(p, size) || size > h->size ||
        !sim_reservation_containing(p, size))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_mapping *m = sim_mappings; m; m = m->next)
        if (sim_overlaps(p, size, m->addr, m->size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_mapping *m = malloc(sizeof *m);
    if (!m) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if (mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) == MAP_FAILED) {
        /* MAP_FIXED failed: the range may be gone; put the reservation back */
        sim_map_none((void *)p, size);
        free(m);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    m->addr = p;
    m->size = size;
    m->handle = h;
    m->prot = PROT_NONE;
    m->next = sim_mappings;
    sim_mappings = m;
    h->maps++;
    sim_live_add(SIM_LIVE_MAPPINGS, 1);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    CUresult rc = sim_enter(SIM_cuMemUnmap);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    if (!sim_range_ok(p, size) || !sim_range_exactly_mapped(p, size))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_mapping **pp = &sim_mappings;
    while (*pp) {
        struct sim_mapping *m = *pp;
        if (!sim_overlaps(p, size, m->addr, m->size)) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        sim_hb_release(m->addr, m->size, "cuMemUnmap"); /* cuda.h: unmapped at once */
        sim_map_none((void *)m->addr, m->size);
        m->handle->maps--;
        sim_handle_unref(m->handle);
        free(m);
        sim_live_add(SIM_LIVE_MAPPINGS, -1);
    }
    return sim_leave(CUDA_SUCCESS);
}

static int sim_location_ok(const CUmemLocation *loc) {
    switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return sim_valid_device(loc->id);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return 1;
    default:
        return 0;
    }
}

static int sim_prot_of(CUmemAccess_flags flags) {
    switch (flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_NONE:
        return PROT_NONE;
    case CU_MEM_ACCESS_FLAGS_PROT_READ:
        return PROT_READ;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        return PROT_READ | PROT_WRITE;
    default:
        return -1;
    }
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    CUresult rc = sim_enter(SIM_cuMemSetAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    if (!desc || count == 0 || !sim_range_ok(p, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    /* the host stands in for every device: the range gets the widest access granted */
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        int one = sim_prot_of(desc[i].flags);
        if (one < 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
        if (!sim_location_ok(&desc[i].location)) return sim_leave(CUDA_ERROR_INVALID_DEVICE);
        prot |= one;
    }
    if (!sim_range_exactly_mapped(p, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (mprotect((void *)p, size, prot) != 0) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    for (struct sim_mapping *m = sim_mappings; m; m = m->next)
        if (sim_overlaps(p, size, m->addr, m->size)) m->prot = prot;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
    CUresult rc = sim_enter(SIM_cuMemGetAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!flags || !location || !sim_location_ok(location))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_mapping *m = sim_mappings; m; m = m->next) {
        if ((uintptr_t)ptr >= m->addr && (uintptr_t)ptr - m->addr < m->size) {
            *flags = m->prot == PROT_NONE   ? CU_MEM_ACCESS_FLAGS_PROT_NONE
                     : m->prot == PROT_READ ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                            : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            return sim_leave(CUDA_SUCCESS);
        }
    }
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
}

/* For cuMemGetAddressRange: the mapping containing p. Lock held. */
int sim_vmm_range(uintptr_t p, uintptr_t *base, size_t *size) {
    for (struct sim_mapping *m = sim_mappings; m; m = m->next) {
        if (p >= m->addr && p - m->addr < m->size) {
            *base = m->addr;
            *size = m->size;
            return 1;
        }
    }
    return 0;
}

void sim_vmm_teardown(void) {
    while (sim_mappings) {
        struct sim_mapping *m = sim_mappings;
        sim_mappings = m->next;
        free(m);
    }
    while (sim_handles) {
        struct sim_handle *h = sim_handles;
        sim_handles = h->next;
        close(h->fd);
        free(h);
    }
    while (sim_reservations) {
        struct sim_reservation *r = sim_reservations;
        sim_reservations = r->next;
        free(r);
    }
}
