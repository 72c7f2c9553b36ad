/* sim_vmm.c — the virtual memory management API on host memory.
 *
 * Reservations are real PROT_NONE address ranges. Physical memory lives in one sparse memfd
 * ("store") per device plus one for host-located handles: a handle from cuMemCreate is a range
 * of offsets in its store, found by next-fit in a bitmap of 64 KiB units, and its pages are
 * punched out of the file when the handle goes. cuMemMap maps the handle's offsets MAP_SHARED
 * over part of a reservation, still PROT_NONE, so every mapping of one handle aliases the same
 * bytes, and handles created one after another and mapped side by side are consecutive in
 * the file: the kernel merges their mappings into one VMA. So an H200-sized device (141 GiB in
 * 2 MiB handles, 72,192 of them) costs a handful of descriptors and VMAs, not one per handle
 * (a process has ~1024 descriptors and 65,530 VMAs by default). Handles are found by id in a
 * hash table, mappings by address in a two-level table of 64 KiB units.
 *
 * Access is per mapping and per location, as cuMemSetAccess sets it (cuda.h, cuMemSetAccess:
 * "set the access flags for the target locations"; the others keep theirs). cuMemGetAccess
 * answers for the location asked. The host process stands in for every device: a mapping is
 * readable/writable by the CPU with the widest access any location has, unless the
 * device-memory-not-CPU-accessible mode is on; then the device address stays PROT_NONE and the
 * simulator reaches the bytes through a window on the store (sim_vmm_translate).
 * A handle's bytes count against its device until it is released and its last mapping is gone.
 * Shareable handles (requestedHandleTypes POSIX_FILE_DESCRIPTOR) and imported ones are the
 * exception to the stores: each has its own memfd (sim_ipc.c), which another process can map,
 * at the cost of one descriptor per handle; cuMemExportToShareableHandle and
 * cuMemImportFromShareableHandle are at the end of this file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sim_ipc.h"

#define SIM_UNIT_SHIFT   16 /* 64 KiB: no mode has a smaller granularity */
#define SIM_UNIT         ((size_t)1 << SIM_UNIT_SHIFT)
#define SIM_STORE_SPAN   ((size_t)1 << 42) /* 4 TiB of sparse file offsets per store */
#define SIM_STORE_UNITS  (SIM_STORE_SPAN >> SIM_UNIT_SHIFT)
#define SIM_NSTORES      (GPOOL_SIM_MAX_DEVICES + 1) /* last: host-located handles */
#define SIM_LOC_HOST     GPOOL_SIM_MAX_DEVICES       /* access slot of the host */
#define SIM_HASH_BUCKETS 65536
_Static_assert(SIM_STORE_SPAN <= (size_t)1 << SIM_PHYS_STORE_SHIFT, "stores' keys overlap");

struct sim_store {
    int fd;         /* -1 until first used */
    uint64_t *bits; /* one bit per unit, set = taken */
    size_t hint;    /* next-fit start */
    char *window;   /* whole-file mapping, made when the no-CPU mode first needs it */
};

struct sim_handle {
    struct sim_handle *prev, *next; /* every handle, for teardown */
    struct sim_handle *hash_next;
    CUmemGenericAllocationHandle id;
    int store;
    size_t offset; /* in the store's file */
    size_t size;
    int device; /* -1 for host memory */
    CUmemAllocationProp prop;
    unsigned user_refs; /* cuMemCreate / cuMemRetainAllocationHandle minus cuMemRelease */
    unsigned maps;      /* live mappings */
    /* shareable (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and imported handles: their own
     * memfd (sim_ipc.c), bytes at offset 0; else -1 and the bytes are in the store */
    int fd;
    int imported;
    char *window; /* own file's mapping for the no-CPU mode */
};

struct sim_reservation {
    struct sim_reservation *next;
    uintptr_t base;
    size_t size;
    size_t nmaps; /* live mappings inside */
};

struct sim_mapping {
    struct sim_mapping *prev, *next;
    uintptr_t addr;
    size_t size;
    struct sim_handle *handle;
    struct sim_reservation *res;
    unsigned long long buffer_id;           /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    unsigned char access[SIM_LOC_HOST + 1]; /* per device, then host: 0, PROT_READ, PROT_RW */
    int cpu_prot;
};

static struct sim_store sim_stores[SIM_NSTORES];
static int sim_stores_ready;
static struct sim_handle *sim_handles;
static struct sim_handle *sim_handle_hash[SIM_HASH_BUCKETS];
static struct sim_reservation *sim_reservations;
static struct sim_mapping *sim_mappings;
static CUmemGenericAllocationHandle sim_next_handle_id = 0x51d0000001ull;

/* ---- address -> mapping: two levels of 64 KiB units (4 GiB per leaf) ---- */

#define SIM_LEAF_SHIFT 16
#define SIM_TOP_SIZE   ((size_t)1 << 16) /* addresses below 2^48 */
static struct sim_mapping **sim_top[SIM_TOP_SIZE];

static struct sim_mapping **sim_slot(uintptr_t a, int create)
{
    uintptr_t unit = a >> SIM_UNIT_SHIFT;
    uintptr_t top = unit >> SIM_LEAF_SHIFT;
    if (top >= SIM_TOP_SIZE) return NULL;
    if (!sim_top[top]) {
        if (!create) return NULL;
        sim_top[top] = calloc((size_t)1 << SIM_LEAF_SHIFT, sizeof(struct sim_mapping *));
        if (!sim_top[top]) return NULL;
    }
    return &sim_top[top][unit & (((uintptr_t)1 << SIM_LEAF_SHIFT) - 1)];
}

static struct sim_mapping *sim_mapping_at(uintptr_t a)
{
    struct sim_mapping **s = sim_slot(a, 0);
    return s ? *s : NULL;
}

/* Point every unit of [a, a+n) at m. Returns -1 (nothing changed) when a leaf is missing. */
static int sim_slots_set(uintptr_t a, size_t n, struct sim_mapping *m)
{
    for (uintptr_t u = a; u < a + n; u += SIM_UNIT)
        if (!sim_slot(u, 1)) return -1;
    for (uintptr_t u = a; u < a + n; u += SIM_UNIT)
        *sim_slot(u, 0) = m;
    return 0;
}

/* ---- stores ---- */

static void sim_stores_init(void)
{
    if (sim_stores_ready) return;
    for (int i = 0; i < SIM_NSTORES; i++)
        sim_stores[i].fd = -1;
    sim_stores_ready = 1;
}

static int sim_store_open(struct sim_store *s)
{
    if (s->fd >= 0) return 0;
    int fd = memfd_create("gpoolsim-store", MFD_CLOEXEC);
    if (fd < 0 && errno == EMFILE) {
        struct rlimit rl; /* descriptors used up by the program: lift the soft limit once */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            fd = memfd_create("gpoolsim-store", MFD_CLOEXEC);
        }
    }
    if (fd < 0) return -1;
    s->bits = calloc(SIM_STORE_UNITS / 64, sizeof(uint64_t));
    if (!s->bits || ftruncate(fd, (off_t)SIM_STORE_SPAN) != 0) {
        free(s->bits);
        s->bits = NULL;
        close(fd);
        return -1;
    }
    s->fd = fd;
    return 0;
}

static int sim_bit(const struct sim_store *s, size_t i)
{
    return (int)((s->bits[i / 64] >> (i % 64)) & 1);
}

static void sim_bits_set(struct sim_store *s, size_t first, size_t k, int v)
{
    for (size_t i = first; i < first + k; i++) {
        if (v)
            s->bits[i / 64] |= (uint64_t)1 << (i % 64);
        else
            s->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
    }
}

/* First run of k free units at or after `from` and before `to`, or SIZE_MAX. */
static size_t sim_store_scan(const struct sim_store *s, size_t from, size_t to, size_t k)
{
    size_t run = 0, start = from;
    for (size_t i = from; i < to;) {
        if (i % 64 == 0 && i + 64 <= to) {
            uint64_t w = s->bits[i / 64];
            if (w == ~(uint64_t)0) {
                run = 0;
                i += 64;
                continue;
            }
            if (w == 0) {
                if (run == 0) start = i;
                run += 64;
                i += 64;
                if (run >= k) return start;
                continue;
            }
        }
        if (sim_bit(s, i)) {
            run = 0;
        } else {
            if (run == 0) start = i;
            if (++run >= k) return start;
        }
        i++;
    }
    return SIZE_MAX;
}

static int sim_store_take(int store, size_t size, size_t *offset)
{
    struct sim_store *s = &sim_stores[store];
    if (sim_store_open(s) != 0) return -1;
    size_t k = size >> SIM_UNIT_SHIFT;
    if (k == 0 || k > SIM_STORE_UNITS) return -1;
    size_t at = sim_store_scan(s, s->hint, SIM_STORE_UNITS, k);
    if (at == SIZE_MAX) at = sim_store_scan(s, 0, SIM_STORE_UNITS, k);
    if (at == SIZE_MAX) return -1;
    sim_bits_set(s, at, k, 1);
    s->hint = at + k;
    *offset = at << SIM_UNIT_SHIFT;
    return 0;
}

static void sim_store_give(int store, size_t offset, size_t size)
{
    struct sim_store *s = &sim_stores[store];
    /* the pages go back to the kernel; a later handle at these offsets reads zeros */
    fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)size);
    sim_bits_set(s, offset >> SIM_UNIT_SHIFT, size >> SIM_UNIT_SHIFT, 0);
}

/* ---- handles ---- */

static size_t sim_hash(CUmemGenericAllocationHandle id)
{
    return (size_t)(id * 0x9E3779B97F4A7C15ull >> 48) % SIM_HASH_BUCKETS;
}

static struct sim_handle *sim_handle_find(CUmemGenericAllocationHandle id)
{
    for (struct sim_handle *h = sim_handle_hash[sim_hash(id)]; h; h = h->hash_next)
        if (h->id == id && h->user_refs > 0) return h;
    return NULL;
}

static void sim_handle_unref(struct sim_handle *h)
{
    if (h->user_refs > 0 || h->maps > 0) return;
    for (struct sim_handle **pp = &sim_handle_hash[sim_hash(h->id)]; *pp; pp = &(*pp)->hash_next) {
        if (*pp == h) {
            *pp = h->hash_next;
            break;
        }
    }
    if (h->prev)
        h->prev->next = h->next;
    else
        sim_handles = h->next;
    if (h->next) h->next->prev = h->prev;
    if (h->device >= 0) sim_uncharge(h->device, h->size);
    if (h->fd >= 0) {
        /* the owner's last reference goes while another process has it imported: the bytes
         * stay (the importer's descriptor keeps the file), the referee counts it (sim_ipc.c) */
        if (!h->imported && sim_ipc_held_elsewhere(h->fd, h->size)) sim_ipc_count_freed_open();
        if (h->window) munmap(h->window, h->size);
        close(h->fd);
    } else {
        sim_store_give(h->store, h->offset, h->size);
    }
    free(h);
}

static size_t sim_min_gran(void)
{
    size_t g = sim_mode_min_granularity();
    return g ? g : GPOOL_SIM_GRANULARITY;
}

/* cuMemCreate, cuMemMap, cuMemAddressReserve: sizes and addresses are multiples of the
 * MINIMUM granularity (cuda.h, cuMemGetAllocationGranularity / cuMemCreate). */
static int sim_range_ok(uintptr_t p, size_t size)
{
    size_t g = sim_min_gran();
    return size > 0 && p + size > p && sim_is_aligned(p, g) && sim_is_aligned(size, g);
}

static struct sim_reservation *sim_reservation_containing(uintptr_t p, size_t size)
{
    for (struct sim_reservation *r = sim_reservations; r; r = r->next)
        if (p >= r->base && p - r->base <= r->size && size <= r->size - (p - r->base)) return r;
    return NULL;
}

/* Every byte of [p, p+size) is mapped and every mapping touching it lies wholly inside. */
static int sim_range_exactly_mapped(uintptr_t p, size_t size)
{
    uintptr_t q = p;
    while (q < p + size) {
        struct sim_mapping *m = sim_mapping_at(q);
        if (!m || m->addr != q || m->size > p + size - q) return 0;
        q += m->size;
    }
    return 1;
}

static void *sim_map_none(void *addr, size_t size)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (addr ? MAP_FIXED : 0);
    return mmap(addr, size, PROT_NONE, flags, -1, 0);
}

/* ---- reservations ---- */

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    (void)addr; /* a placement hint the driver may ignore; the simulator always does */
    CUresult rc = sim_enter(SIM_cuMemAddressReserve);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    size_t gran = sim_min_gran();
    if (!ptr || flags != 0 || !sim_range_ok(0, size) || (alignment & (alignment - 1)) ||
        size > SIZE_MAX / 2)
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    size_t align = alignment > gran ? alignment : gran;
    struct sim_reservation *r = calloc(1, sizeof *r);
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

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = sim_enter(SIM_cuMemAddressFree);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_reservation **pp = &sim_reservations;
    while (*pp && !((*pp)->base == (uintptr_t)ptr && (*pp)->size == size))
        pp = &(*pp)->next;
    if (!*pp) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_reservation *r = *pp;
    if (r->nmaps) return sim_leave(CUDA_ERROR_INVALID_VALUE); /* still mapped */
    *pp = r->next;
    munmap((void *)r->base, r->size);
    free(r);
    sim_live_add(SIM_LIVE_RESERVATIONS, -1);
    return sim_leave(CUDA_SUCCESS);
}

/* ---- physical allocations ---- */

static CUresult sim_check_prop(const CUmemAllocationProp *prop, int *device)
{
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
    /* cuda.h, CUmemAllocationHandleType: POSIX_FILE_DESCRIPTOR is "Permitted only on POSIX
     * systems"; WIN32, WIN32_KMT and FABRIC are not simulated: NOT_SUPPORTED, as a driver
     * without them answers */
    if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

/* A new handle's id, first reference and place in the tables. */
static void sim_handle_link(struct sim_handle *h)
{
    h->id = sim_next_handle_id++;
    h->user_refs = 1;
    h->next = sim_handles;
    if (sim_handles) sim_handles->prev = h;
    sim_handles = h;
    size_t b = sim_hash(h->id);
    h->hash_next = sim_handle_hash[b];
    sim_handle_hash[b] = h;
    sim_live_add(SIM_LIVE_HANDLES, 1);
}

/* The own memfd of a shareable handle, its metadata saying what an importer maps. */
static int sim_vmm_shareable_file(size_t size, int device, const CUmemAllocationProp *prop)
{
    struct sim_ipc_meta m;
    memset(&m, 0, sizeof m);
    m.kind = SIM_IPC_VMM;
    m.device = device;
    m.size = size;
    m.nonce = sim_ipc_nonce();
    m.pid = (int32_t)getpid();
    m.prop_type = (uint32_t)prop->type;
    m.loc_type = (uint32_t)prop->location.type;
    m.loc_id = prop->location.id;
    m.handle_types = (uint32_t)prop->requestedHandleTypes;
    memcpy(m.alloc_flags, &prop->allocFlags, sizeof m.alloc_flags);
    return sim_ipc_create(&m);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc = sim_enter(SIM_cuMemCreate);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int device = -1;
    if (!handle || flags != 0 || !sim_range_ok(0, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_check_prop(prop, &device)) != CUDA_SUCCESS) return sim_leave(rc);
    sim_stores_init();
    struct sim_handle *h = calloc(1, sizeof *h);
    if (!h) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if (device >= 0 && (rc = sim_charge(device, size)) != CUDA_SUCCESS) {
        free(h);
        return sim_leave(rc);
    }
    h->store = device >= 0 ? device : SIM_NSTORES - 1;
    h->fd = -1;
    if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        h->fd = sim_vmm_shareable_file(size, device, prop);
        if (h->fd < 0) {
            if (device >= 0) sim_uncharge(device, size);
            free(h);
            return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
        }
    } else if (sim_store_take(h->store, size, &h->offset) != 0) {
        if (device >= 0) sim_uncharge(device, size);
        free(h);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    h->size = size;
    h->device = device;
    h->prop = *prop;
    sim_handle_link(h);
    *handle = h->id;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = sim_enter(SIM_cuMemRelease);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = sim_handle_find(handle);
    if (!h) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (--h->user_refs == 0) sim_live_add(SIM_LIVE_HANDLES, -1);
    sim_handle_unref(h);
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    CUresult rc = sim_enter(SIM_cuMemGetAllocationPropertiesFromHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = sim_handle_find(handle);
    if (!h || !prop) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    *prop = h->prop;
    return sim_leave(CUDA_SUCCESS);
}

/* MINIMUM is what cuMemCreate/cuMemMap require, RECOMMENDED what performs best (cuda.h,
 * CUmemAllocationGranularity_flags); they differ in the min-granularity mode. */
CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult rc = sim_enter(SIM_cuMemGetAllocationGranularity);
    int device;
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_check_prop(prop, &device)) != CUDA_SUCCESS) return sim_leave(rc);
    *granularity =
        option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ? sim_min_gran() : GPOOL_SIM_GRANULARITY;
    return sim_leave(CUDA_SUCCESS);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult rc = sim_enter(SIM_cuMemRetainAllocationHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!handle) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_mapping *m = sim_mapping_at((uintptr_t)addr);
    if (!m) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (m->handle->user_refs++ == 0) sim_live_add(SIM_LIVE_HANDLES, 1);
    *handle = m->handle->id;
    return sim_leave(CUDA_SUCCESS);
}

/* ---- mappings ---- */

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult rc = sim_enter(SIM_cuMemMap);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    struct sim_handle *h = sim_handle_find(handle);
    struct sim_reservation *r = NULL;
    if (!h || flags != 0 || offset != 0 || !sim_range_ok(p, size) || size > h->size ||
        !(r = sim_reservation_containing(p, size)))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (uintptr_t u = p; u < p + size; u += SIM_UNIT)
        if (sim_mapping_at(u)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_mapping *m = calloc(1, sizeof *m);
    if (!m) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if (sim_slots_set(p, size, m) != 0) {
        free(m);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
             h->fd >= 0 ? h->fd : sim_stores[h->store].fd, (off_t)h->offset) == MAP_FAILED) {
        /* MAP_FIXED failed: the range may be gone; put the reservation back */
        sim_map_none((void *)p, size);
        sim_slots_set(p, size, NULL);
        free(m);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    m->addr = p;
    m->size = size;
    m->handle = h;
    m->buffer_id = sim_next_buffer_id();
    m->res = r;
    m->cpu_prot = PROT_NONE;
    m->next = sim_mappings;
    if (sim_mappings) sim_mappings->prev = m;
    sim_mappings = m;
    r->nmaps++;
    h->maps++;
    sim_live_add(SIM_LIVE_MAPPINGS, 1);
    return sim_leave(CUDA_SUCCESS);
}

/* One mapping goes (cuMemUnmap; cuDevicePrimaryCtxReset). Lock held. */
static void sim_unmap_one(struct sim_mapping *m, const char *what)
{
    sim_slots_set(m->addr, m->size, NULL);
    if (m->prev)
        m->prev->next = m->next;
    else
        sim_mappings = m->next;
    if (m->next) m->next->prev = m->prev;
    /* cuda.h: unmapped at once; the referee keys VMM bytes physically (sim_phys.c) */
    sim_phys_unmap(sim_phys_key(m->handle->store, m->handle->offset), m->addr, m->size,
                   m->handle->maps == 1, what);
    sim_map_none((void *)m->addr, m->size);
    m->res->nmaps--;
    m->handle->maps--;
    sim_handle_unref(m->handle);
    free(m);
    sim_live_add(SIM_LIVE_MAPPINGS, -1);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = sim_enter(SIM_cuMemUnmap);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    if (!sim_range_ok(p, size) || !sim_range_exactly_mapped(p, size))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    uintptr_t q = p;
    while (q < p + size) {
        struct sim_mapping *m = sim_mapping_at(q);
        q += m->size;
        sim_unmap_one(m, "cuMemUnmap");
    }
    return sim_leave(CUDA_SUCCESS);
}

/* cuDevicePrimaryCtxReset of dev: the memory made for dev goes, as cuMemUnmap and cuMemRelease
 * would give it back (its mappings unmapped, its handles invalid); reserved address ranges stay,
 * for the process (not a context) reserved them. Lock held. */
void sim_vmm_reset(int dev)
{
    for (struct sim_mapping *m = sim_mappings, *next; m; m = next) {
        next = m->next;
        if (m->handle->device == dev) sim_unmap_one(m, "cuDevicePrimaryCtxReset");
    }
    for (struct sim_handle *h = sim_handles, *next; h; h = next) {
        next = h->next;
        if (h->device != dev) continue;
        if (h->user_refs > 0) sim_live_add(SIM_LIVE_HANDLES, -1);
        h->user_refs = 0;
        sim_handle_unref(h);
    }
}

/* Access slot of a location: a device ordinal, SIM_LOC_HOST, or -1 if not valid. */
static int sim_location_slot(const CUmemLocation *loc)
{
    switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return sim_valid_device(loc->id) ? loc->id : -1;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return SIM_LOC_HOST;
    default:
        return -1;
    }
}

static int sim_prot_of(CUmemAccess_flags flags)
{
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

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult rc = sim_enter(SIM_cuMemSetAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)ptr;
    if (!desc || count == 0 || !sim_range_ok(p, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++) {
        if (sim_prot_of(desc[i].flags) < 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
        if (sim_location_slot(&desc[i].location) < 0) return sim_leave(CUDA_ERROR_INVALID_DEVICE);
    }
    if (!sim_range_exactly_mapped(p, size)) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int cpu = !sim_mode_device_no_cpu();
    for (uintptr_t q = p; q < p + size;) {
        struct sim_mapping *m = sim_mapping_at(q);
        q += m->size;
        /* cuda.h, cuMemSetAccess: the flags are set for the locations in desc; the mapping's
         * other locations keep what they had */
        for (size_t i = 0; i < count; i++)
            m->access[sim_location_slot(&desc[i].location)] =
                (unsigned char)sim_prot_of(desc[i].flags);
        int prot = PROT_NONE;
        for (int l = 0; l <= SIM_LOC_HOST && cpu; l++)
            prot |= m->access[l];
        if (prot != m->cpu_prot) {
            if (mprotect((void *)m->addr, m->size, prot) != 0)
                return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
            m->cpu_prot = prot;
        }
    }
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuMemGetAccess: "Get the access flags set for the given location and ptr". */
CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    CUresult rc = sim_enter(SIM_cuMemGetAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int slot = location ? sim_location_slot(location) : -1;
    if (!flags || slot < 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    struct sim_mapping *m = sim_mapping_at((uintptr_t)ptr);
    if (!m) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int prot = m->access[slot];
    *flags = prot == PROT_NONE   ? CU_MEM_ACCESS_FLAGS_PROT_NONE
             : prot == PROT_READ ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                 : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return sim_leave(CUDA_SUCCESS);
}

/* For cuMemGetAddressRange: the mapping containing p. Lock held. */
int sim_vmm_range(uintptr_t p, uintptr_t *base, size_t *size)
{
    struct sim_mapping *m = sim_mapping_at(p);
    if (!m) return 0;
    *base = m->addr;
    *size = m->size;
    return 1;
}

int sim_vmm_reserved(uintptr_t p)
{
    return sim_reservation_containing(p, 1) != NULL;
}

CUresult sim_vmm_access(int dev, uintptr_t p, size_t n, int write)
{
    int need = write ? PROT_READ | PROT_WRITE : PROT_READ;
    uintptr_t q = p;
    do {
        struct sim_mapping *m = sim_mapping_at(q);
        if (!m || dev < 0 || dev > SIM_LOC_HOST || (m->access[dev] & need) != need)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        q = m->addr + m->size;
    } while (q < p + n);
    return CUDA_SUCCESS;
}

int sim_vmm_phys(uintptr_t p, uintptr_t *key, size_t *contig, uintptr_t *map_base)
{
    struct sim_mapping *m = sim_mapping_at(p);
    if (!m) return 0;
    *key = sim_phys_key(m->handle->store, m->handle->offset) + (p - m->addr);
    *contig = m->addr + m->size - p;
    *map_base = m->addr;
    return 1;
}

int sim_vmm_translate(uintptr_t p, uintptr_t *host, size_t *contig)
{
    struct sim_mapping *m = sim_mapping_at(p);
    if (!m) return 0;
    *contig = m->addr + m->size - p;
    if (!sim_mode_device_no_cpu() || m->cpu_prot != PROT_NONE) {
        *host = p;
        return 1;
    }
    if (m->handle->fd >= 0) {
        struct sim_handle *h = m->handle;
        if (!h->window) {
            void *w = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
            if (w == MAP_FAILED) return -1;
            h->window = w;
        }
        *host = (uintptr_t)h->window + (p - m->addr);
        return 1;
    }
    struct sim_store *s = &sim_stores[m->handle->store];
    if (!s->window) {
        void *w = mmap(NULL, SIM_STORE_SPAN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                       s->fd, 0);
        if (w == MAP_FAILED) return -1;
        s->window = w;
    }
    *host = (uintptr_t)s->window + m->handle->offset + (p - m->addr);
    return 1;
}

void sim_vmm_teardown(void)
{
    while (sim_mappings) {
        struct sim_mapping *m = sim_mappings;
        sim_mappings = m->next;
        free(m);
    }
    for (size_t t = 0; t < SIM_TOP_SIZE; t++) {
        free(sim_top[t]);
        sim_top[t] = NULL;
    }
    while (sim_handles) {
        struct sim_handle *h = sim_handles;
        sim_handles = h->next;
        if (h->fd >= 0) close(h->fd); /* mappings keep the file alive */
        free(h);
    }
    memset(sim_handle_hash, 0, sizeof sim_handle_hash);
    for (int i = 0; i < SIM_NSTORES && sim_stores_ready; i++) {
        free(sim_stores[i].bits);
        sim_stores[i].bits = NULL;
        if (sim_stores[i].fd >= 0) close(sim_stores[i].fd); /* mappings keep the file alive */
        sim_stores[i].fd = -1;
    }
    while (sim_reservations) {
        struct sim_reservation *r = sim_reservations;
        sim_reservations = r->next;
        free(r);
    }
}

/* Pointer attributes of a cuMemMap mapping (sim_pointer.c): the range is the reserved range
 * that holds it (cuda.h, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: "the mappable address range
 * ptr references (e.g. from cuMemAddressReserve)"), the mapping what cuMemGetAddressRange
 * answers; device memory is not reachable by the host (cuda.h,
 * CU_POINTER_ATTRIBUTE_HOST_POINTER), host-located memory (CU_MEM_LOCATION_TYPE_HOST*) is, at
 * the same address. Lock held. */
int sim_vmm_describe(uintptr_t p, struct sim_ptr_info *out)
{
    struct sim_mapping *m = sim_mapping_at(p);
    if (!m) return 0;
    int on_host = m->handle->device < 0;
    out->memtype = on_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    out->device = on_host ? sim_current_ctx_device() : m->handle->device;
    out->managed = 0;
    out->vmm = 1;
    out->base = m->res ? m->res->base : m->addr;
    out->size = m->res ? m->res->size : m->size;
    out->map_base = m->addr;
    out->map_size = m->size;
    out->buffer_id = m->buffer_id;
    out->devp = p;
    out->host = on_host ? p : 0;
    return 1;
}

/* ---- shareable handles (sim_ipc.c holds the file format and the referee) ---- */

static int sim_other_handle_type(CUmemAllocationHandleType t)
{
    return t == CU_MEM_HANDLE_TYPE_WIN32 || t == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
           t == CU_MEM_HANDLE_TYPE_FABRIC;
}

/* cuda.h, cuMemExportToShareableHandle: shareableHandle receives the type's handle (an int
 * for POSIX_FILE_DESCRIPTOR: cuda.h, CUmemAllocationHandleType), flags "Reserved, must be
 * zero". A handle not created with that type in requestedHandleTypes cannot be exported:
 * CUDA_ERROR_INVALID_VALUE; a type the simulator has not: CUDA_ERROR_NOT_SUPPORTED. Each call
 * gives a new descriptor the caller owns (not close-on-exec, so a child may inherit it). */
CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    CUresult rc = sim_enter(SIM_cuMemExportToShareableHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_handle *h = sim_handle_find(handle);
    if (!shareableHandle || flags != 0 || !h) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return sim_leave(sim_other_handle_type(handleType) ? CUDA_ERROR_NOT_SUPPORTED
                                                           : CUDA_ERROR_INVALID_VALUE);
    if (!(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || h->fd < 0)
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int fd = fcntl(h->fd, F_DUPFD, 0);
    if (fd < 0) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY); /* descriptors used up */
    *(int *)shareableHandle = fd;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuMemImportFromShareableHandle: osHandle is the descriptor itself (cast to void *,
 * as the driver takes it); the caller keeps it and closes it. What it maps (size, location,
 * properties) comes from the file's metadata. Not a descriptor of shareable memory (closed,
 * forged, a pipe): CUDA_ERROR_INVALID_VALUE; memory of a device this process does not have:
 * CUDA_ERROR_NOT_SUPPORTED ("If the current process cannot support the memory described by
 * this shareable handle"). The new handle counts in this process's device and live handles;
 * its release here frees nothing of the exporter's. */
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    CUresult rc = sim_enter(SIM_cuMemImportFromShareableHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!handle) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return sim_leave(sim_other_handle_type(shHandleType) ? CUDA_ERROR_NOT_SUPPORTED
                                                             : CUDA_ERROR_INVALID_VALUE);
    intptr_t ufd = (intptr_t)osHandle;
    struct sim_ipc_meta m;
    if (ufd < 0 || ufd > INT32_MAX || sim_ipc_read_meta((int)ufd, &m) != 0 ||
        m.kind != SIM_IPC_VMM || !sim_is_aligned(m.size, SIM_UNIT))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (m.device >= 0 && !sim_valid_device(m.device)) return sim_leave(CUDA_ERROR_NOT_SUPPORTED);
    int fd = sim_ipc_reopen(0, (int)ufd); /* our own description: its lock is our open count */
    if (fd < 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (sim_ipc_hold(fd, m.size) != 0) {
        close(fd);
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    }
    sim_stores_init();
    struct sim_handle *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (m.device >= 0 && (rc = sim_charge(m.device, m.size)) != CUDA_SUCCESS) {
        close(fd);
        free(h);
        return sim_leave(rc);
    }
    h->store = m.device >= 0 ? m.device : SIM_NSTORES - 1;
    h->fd = fd;
    h->imported = 1;
    h->size = m.size;
    h->device = m.device;
    h->prop.type = (CUmemAllocationType)m.prop_type;
    h->prop.requestedHandleTypes = (CUmemAllocationHandleType)m.handle_types;
    h->prop.location.type = (CUmemLocationType)m.loc_type;
    h->prop.location.id = m.loc_id;
    memcpy(&h->prop.allocFlags, m.alloc_flags, sizeof m.alloc_flags);
    sim_handle_link(h);
    *handle = h->id;
    return sim_leave(CUDA_SUCCESS);
}
