/* Host pages as an arena backend (host_pages.h): mmap(PROT_NONE) address space, runs of
 * pages made pinned (cuMemHostRegister) or mapped when the arena backs them, given back on
 * trim. */
#include "host_pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"
#include "error.h"

#define HUGE_PAGE ((size_t)2 << 20)

typedef struct host_run {
    uintptr_t addr; /* 0 = unused slot */
    size_t npages;
} host_run;

typedef struct gp_hostmem {
    gp_host_env env;
    gpool_mem_kind kind;
    unsigned reg_flags;
    size_t page;
    _Atomic size_t *reserved;
    host_run *runs; /* by id; page_phys holds id + 1 */
    size_t nruns, cap;
    uint32_t *free_ids;
    size_t nfree;
    size_t held;
    uint64_t registrations, bound_runs;
} gp_hostmem;

int gp_host_map_none(void *addr, size_t len)
{
    void *p =
        mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

gpool_status gp_hostmem_create(const gp_host_env *env, gpool_mem_kind kind, size_t page,
                               _Atomic size_t *reserved, void **out)
{
    gp_hostmem *h = calloc(1, sizeof *h);
    if (!h) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a host arena");
    h->env = *env;
    h->kind = kind;
    h->page = page;
    h->reserved = reserved;
    h->reg_flags = CU_MEMHOSTREGISTER_PORTABLE |
                   (kind == GPOOL_MEM_HOST_MAPPED ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    *out = h;
    return GPOOL_OK;
}

void gp_hostmem_counts(void *ctx, uint64_t *registrations, uint64_t *bound_runs)
{
    gp_hostmem *h = ctx;
    *registrations = h->registrations;
    *bound_runs = h->bound_runs;
}

static gpool_status hm_reserve(void *ctx, size_t size, uintptr_t *base, size_t *got)
{
    gp_hostmem *h = ctx;
    size = (size + h->page - 1) & ~(h->page - 1);
    /* over-reserve by a page to align the base (2 MiB pages need 2 MiB-aligned bases) */
    size_t span = size + h->page;
    void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "mmap of %zu bytes of host address space: %s", span,
                       strerror(errno));
    uintptr_t a = ((uintptr_t)p + h->page - 1) & ~(uintptr_t)(h->page - 1);
    size_t head = a - (uintptr_t)p, tail = span - head - size;
    if (head) munmap(p, head);
    if (tail) munmap((void *)(a + size), tail);
    *base = a;
    *got = size;
    return GPOOL_OK;
}

static gpool_status hm_unreserve(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx;
    if (munmap((void *)base, size) != 0)
        return gp_fail(GPOOL_ERR_DRIVER, "munmap of host address space: %s", strerror(errno));
    return GPOOL_OK;
}

static long run_slot(gp_hostmem *h)
{
    if (h->nfree) return h->free_ids[--h->nfree];
    if (h->nruns == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 64;
        host_run *nr = realloc(h->runs, c * sizeof *nr);
        if (!nr) return -1;
        h->runs = nr;
        uint32_t *nf = realloc(h->free_ids, c * sizeof *nf);
        if (!nf) return -1; /* runs grew; cap stays, so the next call retries both */
        h->free_ids = nf;
        h->cap = c;
    }
    h->runs[h->nruns] = (host_run){0};
    return (long)h->nruns++;
}

/* Unregister a run and give its pages back to the OS. GPOOL_OK (0) on success; on a driver
 * error the run stays registered and backed (the arena keeps it) and the failure is returned. */
static gpool_status run_drop(gp_hostmem *h, gp_region *g, uint32_t id)
{
    host_run *r = &h->runs[id];
    size_t len = r->npages * h->page;
    CUresult cr = GP_DRV(h->env.dc.cnt, GPOOL_DRV_HOST_UNREGISTER,
                         h->env.dc.drv->cuMemHostUnregister((void *)r->addr));
    if (cr != CUDA_SUCCESS) return gp_cu_fail(cr, "cuMemHostUnregister");
    gp_host_map_none((void *)r->addr, len);
    if (g) {
        size_t first = (r->addr - g->base) >> g->page_shift;
        for (size_t i = 0; i < r->npages; i++)
            g->page_phys[first + i] = 0;
    }
    h->held -= len;
    atomic_fetch_sub_explicit(h->reserved, len, memory_order_relaxed);
    *r = (host_run){0};
    h->free_ids[h->nfree++] = id;
    return 0;
}

static gpool_status hm_back_in_ctx(gp_hostmem *h, gp_region *g, size_t first, size_t n)
{
    uintptr_t addr = g->base + (first << g->page_shift);
    size_t len = n * h->page;
    long id = run_slot(h);
    if (id < 0) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for page bookkeeping");
    void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        h->free_ids[h->nfree++] = (uint32_t)id;
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "mmap of %zu bytes of host memory: %s", len,
                       strerror(errno));
    }
    if (h->page >= HUGE_PAGE) madvise(p, len, MADV_HUGEPAGE); /* a hint: THP may be off */
    if (gp_numa_bind(h->env.numa, p, len)) h->bound_runs++;
    CUresult cr = GP_DRV(h->env.dc.cnt, GPOOL_DRV_HOST_REGISTER,
                         h->env.dc.drv->cuMemHostRegister(p, len, h->reg_flags));
    gpool_status st = GPOOL_OK;
    if (cr != CUDA_SUCCESS) {
        st = gp_cu_fail(cr, "cuMemHostRegister");
    } else if (h->kind == GPOOL_MEM_HOST_MAPPED) {
        /* mapped blocks hand out the device address; the arena needs it to equal the host
         * address (unified addressing), which kind_host.c checked before choosing this path */
        CUdeviceptr d = 0;
        cr = GP_DRV(h->env.dc.cnt, GPOOL_DRV_OTHER,
                    h->env.dc.drv->cuMemHostGetDevicePointer(&d, p, 0));
        if (cr != CUDA_SUCCESS)
            st = gp_cu_fail(cr, "cuMemHostGetDevicePointer");
        else if ((uintptr_t)d != (uintptr_t)p)
            st = gp_fail(GPOOL_ERR_UNSUPPORTED,
                         "mapped host memory at %p has device address 0x%llx: no unified "
                         "addressing",
                         p, (unsigned long long)d);
        if (st != GPOOL_OK)
            GP_DRV(h->env.dc.cnt, GPOOL_DRV_HOST_UNREGISTER, h->env.dc.drv->cuMemHostUnregister(p));
    }
    if (st != GPOOL_OK) {
        gp_host_map_none(p, len);
        h->free_ids[h->nfree++] = (uint32_t)id;
        return st;
    }
    h->runs[id] = (host_run){.addr = addr, .npages = n};
    for (size_t i = 0; i < n; i++)
        g->page_phys[first + i] = (uint64_t)id + 1;
    h->held += len;
    h->registrations++;
    atomic_fetch_add_explicit(h->reserved, len, memory_order_relaxed);
    return GPOOL_OK;
}

static gpool_status hm_back(void *ctx, gp_region *g, size_t first, size_t n, size_t chunk)
{
    (void)chunk; /* host pages are registered run by run */
    gp_hostmem *h = ctx;
    gpool_status st;
    GP_DC_RUN(&h->env.dc, st, hm_back_in_ctx(h, g, first, n));
    return st;
}

static gpool_status hm_unback_unused(void *ctx, gp_region *g, size_t first, size_t n, size_t *freed)
{
    gp_hostmem *h = ctx;
    gpool_status st = GPOOL_OK;
    *freed = 0;
    int pushed = 0, entered = 0;
    for (size_t p = first; p < first + n && p < g->npages; p++) {
        if (!g->page_phys[p] || g->page_used[p]) continue;
        uint32_t id = (uint32_t)(g->page_phys[p] - 1);
        host_run *r = &h->runs[id];
        size_t rfirst = (r->addr - g->base) >> g->page_shift, busy = 0;
        for (size_t i = 0; i < r->npages; i++)
            busy |= g->page_used[rfirst + i];
        if (busy) continue;
        if (!entered) gp_dc_enter(&h->env.dc, &pushed);
        entered = 1;
        size_t len = r->npages * h->page;
        gpool_status s2 = run_drop(h, g, id);
        if (s2 == GPOOL_OK) *freed += len;
        if (st == GPOOL_OK) st = s2;
    }
    if (entered) gp_dc_leave(&h->env.dc, pushed);
    return st;
}

static gpool_status hm_release(void *ctx, size_t keep)
{
    (void)ctx;
    (void)keep;
    return GPOOL_OK;
}

static size_t hm_held(void *ctx)
{
    return ((gp_hostmem *)ctx)->held;
}
static size_t hm_idle(void *ctx)
{
    (void)ctx;
    return 0;
}

static size_t hm_driver_free(void *ctx)
{
    (void)ctx;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : SIZE_MAX;
}

static void hm_fini(void *ctx, gp_heap *heap)
{
    gp_hostmem *h = ctx;
    if (!h) return;
    int pushed;
    gp_dc_enter(&h->env.dc, &pushed);
    for (size_t i = 0; i < h->nruns; i++) {
        if (!h->runs[i].addr) continue;
        gp_region *g = heap ? gp_heap_region_of(heap, h->runs[i].addr) : NULL;
        gpool_status dropped = GPOOL_ERR_DRIVER; /* a transient failure is retried: never leak */
        for (int attempt = 0; attempt < 3 && dropped != GPOOL_OK; attempt++)
            dropped = run_drop(h, g, (uint32_t)i);
        if (dropped != GPOOL_OK) {
            /* the driver refused: forget the run; its pages go with the reservation */
            atomic_fetch_sub_explicit(h->reserved, h->runs[i].npages * h->page,
                                      memory_order_relaxed);
        }
    }
    gp_dc_leave(&h->env.dc, pushed);
    for (size_t i = 0; heap && i < heap->nregions; i++)
        hm_unreserve(h, heap->regions[i].base, heap->regions[i].size);
    free(h->runs);
    free(h->free_ids);
    free(h);
}

const gp_backend_ops gp_hostmem_ops = {
    .name = "host",
    .reserve = hm_reserve,
    .unreserve = hm_unreserve,
    .back = hm_back,
    .unback_unused = hm_unback_unused,
    .release = hm_release,
    .held_bytes = hm_held,
    .idle_bytes = hm_idle,
    .driver_free = hm_driver_free,
    .fini = hm_fini,
};

gpool_status gp_hostmem_direct_alloc(const gp_host_env *env, size_t size, size_t align,
                                     uintptr_t *host, uintptr_t *dev, size_t *got)
{
    const gp_driver *d = env->dc.drv;
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    if (align > page)
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "alignment %zu above the %zu-byte page for mapped memory whose device "
                       "address is not its host address",
                       align, page);
    if (!d->cuMemHostAlloc || !d->cuMemFreeHost || !d->cuMemHostGetDevicePointer)
        return gp_fail(GPOOL_ERR_NO_DRIVER, "the driver lacks cuMemHostAlloc/cuMemFreeHost/"
                                            "cuMemHostGetDevicePointer");
    int pushed;
    gp_dc_enter(&env->dc, &pushed);
    void *h = NULL;
    CUdeviceptr dp = 0;
    gpool_status st = GPOOL_OK;
    CUresult r =
        GP_DRV(env->dc.cnt, GPOOL_DRV_HOST_ALLOC,
               d->cuMemHostAlloc(&h, size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    if (r != CUDA_SUCCESS) {
        st = gp_cu_fail(r, "cuMemHostAlloc");
    } else {
        r = GP_DRV(env->dc.cnt, GPOOL_DRV_OTHER, d->cuMemHostGetDevicePointer(&dp, h, 0));
        if (r != CUDA_SUCCESS) {
            st = gp_cu_fail(r, "cuMemHostGetDevicePointer");
            GP_DRV(env->dc.cnt, GPOOL_DRV_HOST_FREE, d->cuMemFreeHost(h));
        }
    }
    gp_dc_leave(&env->dc, pushed);
    if (st != GPOOL_OK) return st;
    *host = (uintptr_t)h;
    *dev = (uintptr_t)dp;
    *got = (size + page - 1) & ~(page - 1);
    return GPOOL_OK;
}

void gp_hostmem_direct_free(const gp_host_env *env, uintptr_t host)
{
    int pushed;
    gp_dc_enter(&env->dc, &pushed);
    GP_DRV(env->dc.cnt, GPOOL_DRV_HOST_FREE, env->dc.drv->cuMemFreeHost((void *)host));
    gp_dc_leave(&env->dc, pushed);
}

int gp_hostmem_page_locked(const gp_host_env *env, const void *p)
{
    if (!env->dc.drv->cuMemHostGetDevicePointer) return 0;
    CUdeviceptr d = 0;
    CUresult r;
    GP_DC_RUN(&env->dc, r,
              GP_DRV(env->dc.cnt, GPOOL_DRV_OTHER,
                     env->dc.drv->cuMemHostGetDevicePointer(&d, (void *)p, 0)));
    return r == CUDA_SUCCESS;
}
