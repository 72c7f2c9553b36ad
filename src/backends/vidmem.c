/* Device memory through VMM as an arena backend (vidmem.h): address space reserved with
 * cuMemAddressReserve, physical chunks made with cuMemCreate in the chunk size the placement
 * chose, mapped and made accessible page by page, and given back on trim or pressure. */
#include "vidmem.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "arena.h"
#include "pagesize.h"

typedef struct vm_handle {
    CUmemGenericAllocationHandle h;
    size_t npages;     /* handle size in pages */
    int grown;         /* a multi-page handle made by growth (counted in grow_pages) */
    uintptr_t addr;    /* where it is mapped, 0 when not */
    gp_region *region; /* region it is mapped in */
} vm_handle;

/* A handle mapped a second time (gp_backend_ops.alias): the pages [addr, addr + npages pages)
 * of region read the handle's memory; their page_phys carry VM_ALIAS. The handle stays until
 * its alias is unmapped (gp_backend_ops.unalias). */
typedef struct vm_alias {
    uintptr_t addr;
    size_t npages;
    gp_region *region;
    uint32_t id;
} vm_alias;

#define VM_ALIAS ((uint64_t)1 << 63) /* page_phys of an alias page: VM_ALIAS | (id + 1) */

typedef struct gp_vidmem {
    gp_devctx dc;
    size_t gran;
    CUmemAllocationProp prop;
    CUmemAccessDesc *access; /* the pool's device, then its peers (gpool_config.peer_access) */
    size_t naccess;
    vm_handle *handles; /* by id; a slot with h == 0 and npages == 0 is unused */
    size_t nhandles, cap;
    uint32_t *idle; /* ids of unmapped single-page handles */
    size_t nidle, cap_idle;
    uint32_t *slots; /* unused ids */
    size_t nslots, cap_slots;
    /* ids of handles left mapped without access (their rollback unmap failed): their pages
     * read as unbacked to the arena, and the unmap is retried before anything maps there */
    uint32_t *limbo;
    size_t nlimbo, cap_limbo;
    size_t held_pages, idle_pages;
    /* Growth (cold start, see grow_pages_for): pages held in handles made by growth, and
     * their limit, 1/GP_VIDMEM_GROW_SHARE of the device's pages (0 on a device smaller than
     * GP_VIDMEM_GROW_MIN_DEVICE or of unknown size).
     * A handle goes back to the driver only whole (cuda.h, cuMemUnmap: no sub-range of a
     * mapping; cuMemMap: offset must be zero), so the limit bounds what growth can pin
     * (include/gpool.h, "When it must succeed"). */
    size_t grow_pages, grow_budget;
    /* headroom(): the driver's free bytes at the last query, and the pool's pages then */
    size_t room_free, room_held;
    int room_known;
    int pressed;   /* memory was wanted back (unback_unused): no more growth */
    int no_growth; /* gp_vidmem_set_growth(ctx, 0) */
    uint64_t remaps;
    vm_alias *aliases;
    size_t naliases, cap_aliases;
} gp_vidmem;

/* Access list of every mapping: the pool's device read-write, and each device that
 * peer_access names. VMM memory is reachable only by the locations given to cuMemSetAccess
 * (cuda.h, cuMemSetAccess); enabling peer access between contexts does not cover it. */
static gpool_status access_list(gp_vidmem *v, int peer_access, CUmemAccessDesc **out, size_t *n)
{
    int ndev = 1;
    if (peer_access != GPOOL_PEER_NONE) {
        CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER, v->dc.drv->cuDeviceGetCount(&ndev));
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuDeviceGetCount");
        if (ndev < 1) ndev = 1;
    }
    CUmemAccessDesc *a = calloc((size_t)ndev + 1, sizeof *a);
    if (!a) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the access list");
    a[0].location = v->prop.location;
    a[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t k = 1;
    for (int d = 0; d < ndev && peer_access != GPOOL_PEER_NONE; d++) {
        if (d == (int)v->dc.dev) continue;
        int can = 0;
        if (v->dc.drv->cuDeviceCanAccessPeer) {
            CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER,
                                v->dc.drv->cuDeviceCanAccessPeer(&can, d, v->dc.dev));
            if (r != CUDA_SUCCESS) {
                free(a);
                return gp_cu_fail(r, "cuDeviceCanAccessPeer");
            }
        }
        if (!can && peer_access == GPOOL_PEER_ALL) {
            free(a);
            return gp_fail(
                GPOOL_ERR_UNSUPPORTED,
                "peer_access=all: device %d cannot access device %d's memory%s", d, (int)v->dc.dev,
                v->dc.drv->cuDeviceCanAccessPeer ? ""
                                                 : " (the driver has no cuDeviceCanAccessPeer)");
        }
        if (!can) continue;
        a[k].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a[k].location.id = d;
        a[k].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        k++;
    }
    *out = a;
    *n = k;
    return GPOOL_OK;
}

/* Give every mapped handle the access list `want`, revoking (PROT_NONE) the devices of
 * `old` that `want` lacks. Returns how many handles were changed before a failure. */
static size_t apply_access(gp_vidmem *v, const CUmemAccessDesc *want, size_t nwant,
                           const CUmemAccessDesc *old, size_t nold, gpool_status *st)
{
    CUmemAccessDesc *all = calloc(nwant + nold, sizeof *all);
    if (!all) {
        *st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the access list");
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < nwant; i++)
        all[n++] = want[i];
    for (size_t i = 0; i < nold; i++) {
        int kept = 0;
        for (size_t j = 0; j < nwant; j++)
            kept |= want[j].location.id == old[i].location.id;
        if (kept) continue;
        all[n] = old[i];
        all[n++].flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    }
    size_t done = 0;
    *st = GPOOL_OK;
    int pushed;
    gp_dc_enter(&v->dc, &pushed);
    for (size_t i = 0; i < v->nhandles && *st == GPOOL_OK; i++) {
        if (!v->handles[i].addr) continue;
        CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_SET_ACCESS,
                            v->dc.drv->cuMemSetAccess((CUdeviceptr)v->handles[i].addr,
                                                      v->handles[i].npages * v->gran, all, n));
        if (r != CUDA_SUCCESS)
            *st = gp_cu_fail(r, "cuMemSetAccess");
        else
            done++;
    }
    for (size_t i = 0; i < v->naliases && *st == GPOOL_OK; i++) {
        CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_SET_ACCESS,
                            v->dc.drv->cuMemSetAccess((CUdeviceptr)v->aliases[i].addr,
                                                      v->aliases[i].npages * v->gran, all, n));
        if (r != CUDA_SUCCESS) *st = gp_cu_fail(r, "cuMemSetAccess");
    }
    gp_dc_leave(&v->dc, pushed);
    free(all);
    return done;
}

gpool_status gp_vidmem_set_peer_access(void *ctx, int peer_access)
{
    gp_vidmem *v = ctx;
    CUmemAccessDesc *want = NULL;
    size_t nwant = 0;
    gpool_status st = access_list(v, peer_access, &want, &nwant);
    if (st != GPOOL_OK) return st;
    apply_access(v, want, nwant, v->access, v->naccess, &st);
    if (st != GPOOL_OK) {
        /* put the old access back everywhere (best effort) and keep the old list */
        char msg[300];
        snprintf(msg, sizeof msg, "%s", gpool_last_error());
        gpool_status ignored;
        apply_access(v, v->access, v->naccess, want, nwant, &ignored);
        free(want);
        return gp_fail(st, "changing peer access: %s (the previous access was restored)", msg);
    }
    free(v->access);
    v->access = want;
    v->naccess = nwant;
    return GPOOL_OK;
}

gpool_status gp_vidmem_create(const gp_devctx *dc, int peer_access, void **out)
{
    const gp_driver *drv = dc->drv;
    CUdevice dev = dc->dev;
    gp_drv_counters *cnt = dc->cnt;
    int vmm = 0;
    CUresult r = GP_DRV(cnt, GPOOL_DRV_OTHER,
                        drv->cuDeviceGetAttribute(
                            &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuDeviceGetAttribute(VMM)");
    if (!vmm)
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "device %d does not support virtual memory management (VMM)", (int)dev);
    gp_vidmem *v = calloc(1, sizeof *v);
    if (!v) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory creating the pool");
    v->dc = *dc;
    v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    v->prop.location.id = (int)dev;
    gpool_status st = access_list(v, peer_access, &v->access, &v->naccess);
    if (st != GPOOL_OK) {
        free(v);
        return st;
    }
    r = GP_DRV(cnt, GPOOL_DRV_OTHER,
               drv->cuMemGetAllocationGranularity(&v->gran, &v->prop,
                                                  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (r != CUDA_SUCCESS || !v->gran || (v->gran & (v->gran - 1))) {
        free(v->access);
        free(v);
        return r != CUDA_SUCCESS
                   ? gp_cu_fail(r, "cuMemGetAllocationGranularity")
                   : gp_fail(GPOOL_ERR_UNSUPPORTED, "device granularity is not a power of two");
    }
    /* the device's memory, for the growth budget (cuda.h, cuDeviceTotalMem: needs no
     * context); unknown: no growth */
    size_t total = 0;
    if (drv->cuDeviceTotalMem &&
        GP_DRV(cnt, GPOOL_DRV_OTHER, drv->cuDeviceTotalMem(&total, dev)) == CUDA_SUCCESS &&
        total >= GP_VIDMEM_GROW_MIN_DEVICE)
        v->grow_budget = total / v->gran / GP_VIDMEM_GROW_SHARE;
    *out = v;
    return GPOOL_OK;
}

gpool_status gp_vidmem_set_ipc(void *ctx)
{
    gp_vidmem *v = ctx;
    int ok = 1; /* a driver that cannot answer: cuMemCreate says it then */
    if (GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER,
               v->dc.drv->cuDeviceGetAttribute(
                   &ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                   v->dc.dev)) != CUDA_SUCCESS)
        ok = 1;
    if (!ok || !v->dc.drv->cuMemExportToShareableHandle)
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "ipc=1: device %d cannot export memory as POSIX file descriptors%s",
                       (int)v->dc.dev,
                       ok ? " (the driver has no cuMemExportToShareableHandle)" : "");
    v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return GPOOL_OK;
}

size_t gp_vidmem_pieces(void *ctx, uintptr_t addr, size_t size, gp_vidmem_piece *out, size_t max)
{
    gp_vidmem *v = ctx;
    size_t n = 0;
    for (size_t i = 0; i < v->nhandles; i++) {
        const vm_handle *hd = &v->handles[i];
        if (!hd->addr || hd->addr >= addr + size || hd->addr + hd->npages * v->gran <= addr)
            continue;
        if (n < max)
            out[n] = (gp_vidmem_piece){.h = hd->h, .addr = hd->addr, .size = hd->npages * v->gran};
        n++;
    }
    return n;
}

int gp_vidmem_aliased(void *ctx, uintptr_t addr, size_t size)
{
    gp_vidmem *v = ctx;
    for (size_t i = 0; i < v->naliases; i++) {
        const vm_alias *al = &v->aliases[i];
        if (al->addr < addr + size && addr < al->addr + al->npages * v->gran) return 1;
    }
    return 0;
}

size_t gp_vidmem_granularity(void *ctx)
{
    return ((gp_vidmem *)ctx)->gran;
}
void gp_vidmem_set_growth(void *ctx, int on)
{
    ((gp_vidmem *)ctx)->no_growth = !on;
}

gpool_status gp_vidmem_zero_async(void *ctx, void *p, size_t size, CUstream stream)
{
    gp_vidmem *v = ctx;
    CUresult r;
    GP_DC_RUN(&v->dc, r,
              GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER,
                     v->dc.drv->cuMemsetD8Async((CUdeviceptr)p, 0, size, stream)));
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuMemsetD8Async (zero fill)");
}

gpool_status gp_vidmem_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    gp_vidmem *v = ctx;
    CUresult r;
    GP_DC_RUN(&v->dc, r,
              GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER, v->dc.drv->cuMemGetInfo(free_bytes, total_bytes)));
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuMemGetInfo");
}

uint64_t gp_vidmem_remaps(void *ctx)
{
    return ((gp_vidmem *)ctx)->remaps;
}

static gpool_status vm_reserve(void *ctx, size_t size, uintptr_t *base, size_t *got)
{
    gp_vidmem *v = ctx;
    size = (size + v->gran - 1) & ~(v->gran - 1);
    CUdeviceptr p = 0;
    CUresult r;
    GP_DC_RUN(&v->dc, r,
              GP_DRV(v->dc.cnt, GPOOL_DRV_ADDRESS_RESERVE,
                     v->dc.drv->cuMemAddressReserve(&p, size, v->gran, 0, 0)));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemAddressReserve");
    *base = (uintptr_t)p;
    *got = size;
    return GPOOL_OK;
}

static gpool_status vm_unreserve(void *ctx, uintptr_t base, size_t size)
{
    gp_vidmem *v = ctx;
    CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_ADDRESS_FREE,
                        v->dc.drv->cuMemAddressFree((CUdeviceptr)base, size));
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuMemAddressFree");
}

/* Make room for `need` ids in an id array (to `cap` entries); -1 when out of host memory. */
static int ids_reserve(uint32_t **ids, size_t *have, size_t need, size_t cap)
{
    if (*have >= need) return 0;
    uint32_t *n = realloc(*ids, cap * sizeof *n);
    if (!n) return -1;
    *ids = n;
    *have = cap;
    return 0;
}

/* A handle id for a new handle of npages; -1 when out of host memory. */
static long slot_new(gp_vidmem *v)
{
    if (v->nslots) return v->slots[--v->nslots];
    if (v->nhandles == v->cap) {
        size_t c = v->cap ? v->cap * 2 : 256;
        vm_handle *nh = realloc(v->handles, c * sizeof *nh);
        if (!nh) return -1;
        v->handles = nh;
        v->cap = c;
    }
    /* make sure the id can be recycled (or parked idle) later without failing */
    if (ids_reserve(&v->slots, &v->cap_slots, v->nhandles + 1, v->cap * 2) ||
        ids_reserve(&v->idle, &v->cap_idle, v->nhandles + 1, v->cap * 2) ||
        ids_reserve(&v->limbo, &v->cap_limbo, v->nhandles + 1, v->cap * 2))
        return -1;
    memset(&v->handles[v->nhandles], 0, sizeof v->handles[0]);
    return (long)v->nhandles++;
}

/* Create a handle of npages; its id, or -1 with the error set. */
static long handle_create(gp_vidmem *v, size_t npages, gpool_status *st)
{
    long id = slot_new(v);
    if (id < 0) {
        *st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for page bookkeeping");
        return -1;
    }
    CUmemGenericAllocationHandle h = 0;
    CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_CREATE,
                        v->dc.drv->cuMemCreate(&h, npages * v->gran, &v->prop, 0));
    if (r != CUDA_SUCCESS) {
        memset(&v->handles[id], 0, sizeof v->handles[id]);
        v->slots[v->nslots++] = (uint32_t)id;
        *st = gp_cu_fail(r, "cuMemCreate");
        return -1;
    }
    v->handles[id] = (vm_handle){.h = h, .npages = npages};
    v->held_pages += npages;
    return id;
}

/* Release an unmapped handle; on failure it stays held (retried by release or fini) and the
 * failure is returned (GPOOL_OK: 0). */
static gpool_status handle_destroy(gp_vidmem *v, uint32_t id)
{
    vm_handle *hd = &v->handles[id];
    CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_RELEASE, v->dc.drv->cuMemRelease(hd->h));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemRelease");
    v->held_pages -= hd->npages;
    if (hd->grown) v->grow_pages -= hd->npages;
    memset(hd, 0, sizeof *hd);
    v->slots[v->nslots++] = id;
    return GPOOL_OK;
}

/* Unmap a handle; on failure it stays mapped (and its pages backed) and the failure is
 * returned (GPOOL_OK: 0). */
static gpool_status handle_unmap(gp_vidmem *v, uint32_t id)
{
    vm_handle *hd = &v->handles[id];
    gp_region *g = hd->region;
    size_t first = (hd->addr - g->base) >> g->page_shift;
    CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_UNMAP,
                        v->dc.drv->cuMemUnmap((CUdeviceptr)hd->addr, hd->npages * v->gran));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemUnmap");
    for (size_t i = 0; i < hd->npages; i++)
        g->page_phys[first + i] = 0;
    hd->addr = 0;
    hd->region = NULL;
    return GPOOL_OK;
}

/* Put an unmapped handle back: single pages stay cached, chunks go back to the driver (a
 * chunk whose release fails stays held and is released at fini; the failure is returned). */
static gpool_status handle_retire(gp_vidmem *v, uint32_t id)
{
    if (v->handles[id].npages > 1) return handle_destroy(v, id);
    v->idle[v->nidle++] = id;
    v->idle_pages++;
    return GPOOL_OK;
}

/* A handle this call mapped (so without access) whose unmap failed: its pages must not be
 * handed out as backed. They read as unbacked; the handle stays mapped until an unmap works. */
static void limbo_add(gp_vidmem *v, uint32_t id)
{
    vm_handle *hd = &v->handles[id];
    size_t first = (hd->addr - hd->region->base) >> hd->region->page_shift;
    for (size_t i = 0; i < hd->npages; i++)
        hd->region->page_phys[first + i] = 0;
    v->limbo[v->nlimbo++] = id;
}

/* Retry the unmap of every handle in limbo; returns 1 when one still overlaps pages
 * [first, first + n) of g (g NULL: none asked about). */
static int limbo_retry(gp_vidmem *v, gp_region *g, size_t first, size_t n)
{
    int blocked = 0;
    for (size_t i = v->nlimbo; i-- > 0;) {
        uint32_t id = v->limbo[i];
        if (handle_unmap(v, id) == 0) {
            v->limbo[i] = v->limbo[--v->nlimbo];
            handle_retire(v, id);
            continue;
        }
        vm_handle *hd = &v->handles[id];
        size_t hfirst = (hd->addr - hd->region->base) >> hd->region->page_shift;
        if (hd->region == g && hfirst < first + n && first < hfirst + hd->npages) blocked = 1;
    }
    return blocked;
}

/* Cold start: the handle size (in pages) for growth when backing the run of n pages at
 * first, or 1 for none. The step is the pages the pool holds, clamped to
 * GP_VIDMEM_GROW_MIN..GP_VIDMEM_GROW_MAX (larger steps while the pool is young); a run shorter
 * than the step is extended over the unbacked pages after it (they are free: live blocks are
 * always backed), a longer one is backed by handles of the step. No growth while cached
 * single pages can serve the run, after the pool was asked to give memory back (pressure),
 * or when the handle would take the growth budget past its limit. */
static size_t grow_pages_for(gp_vidmem *v, gp_region *g, size_t first, size_t n)
{
    if (v->nidle || v->nlimbo || v->pressed || v->no_growth) return 1;
    size_t step = v->held_pages;
    if (step < GP_VIDMEM_GROW_MIN) step = GP_VIDMEM_GROW_MIN;
    if (step > GP_VIDMEM_GROW_MAX) step = GP_VIDMEM_GROW_MAX;
    size_t k = n < step ? n : step;
    while (k < step && first + k < g->npages && !g->page_phys[first + k])
        k++;
    if (k < 2 || v->grow_pages + k > v->grow_budget) return 1;
    return k;
}

/* Multi-page handles (chunks, growth) go back to the driver only whole, so a later block that
 * reuses part of one pins all of it (x32 traces: 100+ pages above the physical limit). They
 * pay only while the driver has room to spare: after the run of n pages, still twice what the
 * pool holds free (docs/history/placement-experiments.md). The driver is asked again only when
 * the last answer, less what the pool mapped since, no longer shows the room; a failed query
 * keeps the handles. */
static int headroom(gp_vidmem *v, size_t n)
{
    size_t run = n * v->gran, held = v->held_pages * v->gran;
    if (v->room_known) {
        size_t since = held > v->room_held ? held - v->room_held : 0;
        if (v->room_free >= run + since && (v->room_free - run - since) / 2 >= held) return 1;
    }
    size_t fr = 0, total = 0;
    if (GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER, v->dc.drv->cuMemGetInfo(&fr, &total)) != CUDA_SUCCESS)
        return 1;
    v->room_free = fr;
    v->room_held = held;
    v->room_known = 1;
    return fr >= run && (fr - run) / 2 >= held;
}

static gpool_status vm_back_in_ctx(gp_vidmem *v, gp_region *g, size_t first, size_t n, size_t chunk)
{
    if (v->nlimbo && limbo_retry(v, g, first, n))
        return gp_fail(GPOOL_ERR_DRIVER, "cuMemUnmap keeps failing for pages that were mapped "
                                         "without access; they cannot be mapped again yet");
    size_t chunk_pages = chunk > v->gran ? chunk / v->gran : 1; /* as the placement chose */
    size_t grow = grow_pages_for(v, g, first, n), orig_n = n;
    if ((chunk_pages > 1 || grow > 1) && !headroom(v, n)) chunk_pages = grow = 1;
    if (grow < 2)
        grow = 0;
    else if (grow > n)
        n = grow; /* one handle, extended over the unbacked pages after the run */
    gpool_status st = GPOOL_OK;
    size_t done = 0;
    while (done < n) {
        size_t want = n - done >= chunk_pages ? chunk_pages : 1;
        int grown = 0;
        if (grow) {
            size_t w = n - done < grow ? n - done : grow;
            if (w > 1 && v->grow_pages + w <= v->grow_budget) {
                want = w;
                grown = 1;
            }
        }
        long id = -1;
        if (want == 1 && v->nidle) {
            id = v->idle[--v->nidle];
            v->idle_pages--;
            v->remaps++;
        } else {
            id = handle_create(v, want, &st);
            if (id < 0 && want > 1 && st == GPOOL_ERR_OUT_OF_MEMORY) {
                /* under pressure: cached single pages or the driver's last ones may do */
                chunk_pages = 1;
                grow = 0;
                n = done < orig_n ? orig_n : done; /* pages after the run: never asked for */
                st = GPOOL_OK;                     /* the chunk's failure is not this call's */
                continue;
            }
            if (id < 0) break;
            if (grown) {
                v->handles[id].grown = 1;
                v->grow_pages += want;
            }
        }
        uintptr_t addr = g->base + ((first + done) << g->page_shift);
        CUresult r =
            GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_MAP,
                   v->dc.drv->cuMemMap((CUdeviceptr)addr, want * v->gran, 0, v->handles[id].h, 0));
        if (r != CUDA_SUCCESS) {
            st = gp_cu_fail(r, "cuMemMap");
            handle_retire(v, (uint32_t)id);
            break;
        }
        v->handles[id].addr = addr;
        v->handles[id].region = g;
        for (size_t i = 0; i < want; i++)
            g->page_phys[first + done + i] = (uint64_t)id + 1;
        done += want;
    }
    if (st == GPOOL_OK) {
        uintptr_t addr = g->base + (first << g->page_shift);
        CUresult r = GP_DRV(
            v->dc.cnt, GPOOL_DRV_MEM_SET_ACCESS,
            v->dc.drv->cuMemSetAccess((CUdeviceptr)addr, n * v->gran, v->access, v->naccess));
        if (r == CUDA_SUCCESS) return GPOOL_OK;
        st = gp_cu_fail(r, "cuMemSetAccess");
    }
    /* roll back what this call mapped: no access was granted to it, so a handle whose unmap
     * fails goes to limbo, never to the cache. The caller hears of the first failure. */
    char why[512];
    snprintf(why, sizeof why, "%s", gpool_last_error());
    for (size_t p = first; p < first + n; p++) {
        if (!g->page_phys[p]) continue;
        uint32_t id = (uint32_t)(g->page_phys[p] - 1);
        if (handle_unmap(v, id) == 0)
            handle_retire(v, id);
        else
            limbo_add(v, id);
    }
    return gp_fail(st, "%s", why);
}

static gpool_status vm_back(void *ctx, gp_region *g, size_t first, size_t n, size_t chunk)
{
    gp_vidmem *v = ctx;
    gpool_status st;
    GP_DC_RUN(&v->dc, st, vm_back_in_ctx(v, g, first, n, chunk));
    return st;
}

static gpool_status vm_unback_unused(void *ctx, gp_region *g, size_t first, size_t n, size_t *freed)
{
    gp_vidmem *v = ctx;
    gpool_status st = GPOOL_OK;
    *freed = 0;
    int pushed = 0, entered = 0;
    v->pressed = 1;
    if (v->nlimbo) {
        gp_dc_enter(&v->dc, &pushed);
        entered = 1;
        limbo_retry(v, NULL, 0, 0);
    }
    for (size_t p = first; p < first + n && p < g->npages; p++) {
        if (!g->page_phys[p] || g->page_used[p] || (g->page_phys[p] & VM_ALIAS)) continue;
        uint32_t id = (uint32_t)(g->page_phys[p] - 1);
        vm_handle *hd = &v->handles[id];
        size_t hfirst = (hd->addr - g->base) >> g->page_shift, busy = 0;
        for (size_t i = 0; i < hd->npages; i++)
            busy |= g->page_used[hfirst + i];
        for (size_t i = 0; i < v->naliases && !busy; i++)
            busy = v->aliases[i].id == id; /* an alias maps it: it goes after the alias */
        if (busy) continue;
        if (!entered) gp_dc_enter(&v->dc, &pushed);
        entered = 1;
        gpool_status s2 = handle_unmap(v, id);
        if (s2 == GPOOL_OK) {
            *freed += hd->npages * v->gran;
            s2 = handle_retire(v, id);
        } /* else it stays backed: cached */
        if (st == GPOOL_OK) st = s2;
    }
    if (entered) gp_dc_leave(&v->dc, pushed);
    return st;
}

static gpool_status vm_release(void *ctx, size_t keep)
{
    gp_vidmem *v = ctx;
    if (!v->nidle || v->idle_pages * v->gran <= keep) return GPOOL_OK;
    int pushed;
    gp_dc_enter(&v->dc, &pushed);
    gpool_status st = GPOOL_OK;
    while (v->nidle && v->idle_pages * v->gran > keep) {
        uint32_t id = v->idle[v->nidle - 1];
        if (handle_destroy(v, id) != 0) { /* stays cached; the caller hears of it */
            st = gp_fail(GPOOL_ERR_DRIVER, "cuMemRelease failed while giving memory back");
            break;
        }
        v->nidle--;
        v->idle_pages--;
    }
    gp_dc_leave(&v->dc, pushed);
    return st;
}

static size_t vm_held(void *ctx)
{
    gp_vidmem *v = ctx;
    return v->held_pages * v->gran;
}

static size_t vm_idle(void *ctx)
{
    gp_vidmem *v = ctx;
    return v->idle_pages * v->gran;
}

static size_t vm_driver_free(void *ctx)
{
    gp_vidmem *v = ctx;
    size_t fr = 0, total = 0;
    if (GP_DRV(v->dc.cnt, GPOOL_DRV_OTHER, v->dc.drv->cuMemGetInfo(&fr, &total)) != CUDA_SUCCESS)
        return SIZE_MAX;
    return fr;
}

static void vm_fini(void *ctx, gp_heap *heap)
{
    gp_vidmem *v = ctx;
    if (!v) return;
    int pushed;
    gp_dc_enter(&v->dc, &pushed);
    /* a call that fails once (a transient driver error) is tried once more */
    for (int attempt = 0; attempt < 2; attempt++) {
        for (size_t i = v->naliases; i-- > 0;)
            if (GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_UNMAP,
                       v->dc.drv->cuMemUnmap((CUdeviceptr)v->aliases[i].addr,
                                             v->aliases[i].npages * v->gran)) == CUDA_SUCCESS)
                v->aliases[i] = v->aliases[--v->naliases];
        for (size_t i = 0; i < v->nhandles; i++)
            if (v->handles[i].addr) handle_unmap(v, (uint32_t)i);
        for (size_t i = 0; i < v->nhandles; i++)
            if (v->handles[i].npages && !v->handles[i].addr) handle_destroy(v, (uint32_t)i);
    }
    for (size_t i = 0; heap && i < heap->nregions; i++)
        if (vm_unreserve(v, heap->regions[i].base, heap->regions[i].size) != GPOOL_OK)
            vm_unreserve(v, heap->regions[i].base, heap->regions[i].size);
    gp_dc_leave(&v->dc, pushed);
    free(v->handles);
    free(v->aliases);
    free(v->limbo);
    free(v->idle);
    free(v->slots);
    free(v->access);
    free(v);
}

static size_t vm_handle_pages(void *ctx, const gp_region *g, size_t p, size_t *index)
{
    gp_vidmem *v = ctx;
    *index = 0;
    if (!g->page_phys[p] || (g->page_phys[p] & VM_ALIAS)) return 0;
    const vm_handle *hd = &v->handles[(uint32_t)(g->page_phys[p] - 1)];
    *index = p - ((hd->addr - g->base) >> g->page_shift);
    return hd->npages;
}

static gpool_status vm_alias_in_ctx(gp_vidmem *v, const gp_region *gs, size_t src, gp_region *gd,
                                    size_t dst)
{
    size_t index;
    size_t np = vm_handle_pages(v, gs, src, &index);
    if (!np || index)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "vidmem: page %zu starts no handle", src);
    if (v->naliases == v->cap_aliases) {
        size_t cap = v->cap_aliases ? 2 * v->cap_aliases : 16;
        vm_alias *m = realloc(v->aliases, cap * sizeof *m);
        if (!m) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for an alias");
        v->aliases = m;
        v->cap_aliases = cap;
    }
    uint32_t id = (uint32_t)(gs->page_phys[src] - 1);
    uintptr_t addr = gd->base + (dst << gd->page_shift);
    CUresult r =
        GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_MAP,
               v->dc.drv->cuMemMap((CUdeviceptr)addr, np * v->gran, 0, v->handles[id].h, 0));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemMap (alias)");
    r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_SET_ACCESS,
               v->dc.drv->cuMemSetAccess((CUdeviceptr)addr, np * v->gran, v->access, v->naccess));
    if (r != CUDA_SUCCESS) {
        gpool_status st = gp_cu_fail(r, "cuMemSetAccess (alias)");
        if (GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_UNMAP,
                   v->dc.drv->cuMemUnmap((CUdeviceptr)addr, np * v->gran)) != CUDA_SUCCESS) {
            /* mapped without access: recorded, so that it is unmapped before its handle goes,
             * and its pages read as backed (the caller keeps them out of use) */
            v->aliases[v->naliases++] = (vm_alias){addr, np, gd, id};
            for (size_t k = 0; k < np; k++)
                gd->page_phys[dst + k] = VM_ALIAS | ((uint64_t)id + 1);
        }
        return st;
    }
    v->aliases[v->naliases++] = (vm_alias){addr, np, gd, id};
    for (size_t k = 0; k < np; k++)
        gd->page_phys[dst + k] = VM_ALIAS | ((uint64_t)id + 1);
    return GPOOL_OK;
}

static gpool_status vm_map_alias(void *ctx, const gp_region *gs, size_t src, gp_region *gd,
                                 size_t dst)
{
    gp_vidmem *v = ctx;
    gpool_status st;
    GP_DC_RUN(&v->dc, st, vm_alias_in_ctx(v, gs, src, gd, dst));
    return st;
}

static gpool_status vm_unalias(void *ctx, gp_region *g, size_t first)
{
    gp_vidmem *v = ctx;
    uintptr_t addr = g->base + (first << g->page_shift);
    for (size_t i = 0; i < v->naliases; i++) {
        vm_alias *al = &v->aliases[i];
        if (al->region != g || al->addr != addr) continue;
        int pushed;
        gp_dc_enter(&v->dc, &pushed);
        CUresult r = GP_DRV(v->dc.cnt, GPOOL_DRV_MEM_UNMAP,
                            v->dc.drv->cuMemUnmap((CUdeviceptr)addr, al->npages * v->gran));
        gp_dc_leave(&v->dc, pushed);
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemUnmap (alias)");
        for (size_t k = 0; k < al->npages; k++)
            g->page_phys[first + k] = 0;
        *al = v->aliases[--v->naliases];
        return GPOOL_OK;
    }
    return GPOOL_OK; /* none there (its map failed and was undone) */
}

const gp_backend_ops gp_vidmem_ops = {
    .name = "vidmem",
    .reserve = vm_reserve,
    .unreserve = vm_unreserve,
    .back = vm_back,
    .unback_unused = vm_unback_unused,
    .release = vm_release,
    .held_bytes = vm_held,
    .idle_bytes = vm_idle,
    .driver_free = vm_driver_free,
    .fini = vm_fini,
    .handle_pages = vm_handle_pages,
    .alias = vm_map_alias,
    .unalias = vm_unalias,
};
