#include "sysmem_small.h"

#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"
#include "error.h"

typedef struct small_extent {
    uintptr_t addr;
    uintptr_t dev;      /* device address of addr: cuMemHostGetDevicePointer for mapped memory */
    size_t size, freed; /* freed: bytes jemalloc destroyed so far */
} small_extent;

struct gp_small {
    extent_hooks_t hooks; /* first: the hooks receive a pointer to it */
    gp_host_env env;
    gpool_mem_kind kind;
    unsigned reg_flags;
    _Atomic size_t *reserved;
    unsigned arena;
    int have_arena;
    pthread_mutex_t lock; /* guards ext */
    small_extent *ext;
    size_t next, cap;
    uint64_t registrations;
};

/* The failure of the last hook call on this thread (jemalloc only says NULL). */
static _Thread_local gpool_status hook_status;

static size_t os_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static gp_small *of(extent_hooks_t *h)
{
    return (gp_small *)(void *)h;
}

/* ---------- extent hooks (run inside jemalloc, possibly with its locks held) ---------- */

static void *sm_alloc(extent_hooks_t *eh, void *new_addr, size_t size, size_t alignment, bool *zero,
                      bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    gp_small *s = of(eh);
    size_t page = os_page();
    if (new_addr) return NULL; /* growing in place: we cannot promise an address */
    if (alignment < page) alignment = page;
    size_t span = size + alignment - page;
    void *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        hook_status = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "mmap of %zu bytes of host memory: %s", span,
                              strerror(errno));
        return NULL;
    }
    uintptr_t a = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t head = a - (uintptr_t)raw, tail = span - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap((void *)(a + size), tail);
    void *p = (void *)a;
    gp_numa_bind(s->env.numa, p, size);
    int pushed;
    gp_ctx_enter(s->env.drv, s->env.ctx, s->env.cnt, &pushed);
    CUresult r = GP_DRV(s->env.cnt, GPOOL_DRV_HOST_REGISTER,
                        s->env.drv->cuMemHostRegister(p, size, s->reg_flags));
    gpool_status st = GPOOL_OK;
    CUdeviceptr d = (CUdeviceptr)a;
    if (r != CUDA_SUCCESS) {
        st = gp_cu_fail(r, "cuMemHostRegister (small-block extent)");
    } else if (s->kind == GPOOL_MEM_HOST_MAPPED) {
        /* the device address may differ from the host one (CAN_USE_HOST_POINTER_FOR_
         * REGISTERED_MEM = 0): blocks never span extents, so each block's device address is
         * its extent's plus the offset (gp_small_device_addr) */
        r = GP_DRV(s->env.cnt, GPOOL_DRV_OTHER, s->env.drv->cuMemHostGetDevicePointer(&d, p, 0));
        if (r != CUDA_SUCCESS) st = gp_cu_fail(r, "cuMemHostGetDevicePointer");
        if (st != GPOOL_OK)
            GP_DRV(s->env.cnt, GPOOL_DRV_HOST_UNREGISTER, s->env.drv->cuMemHostUnregister(p));
    }
    gp_ctx_leave(s->env.drv, s->env.cnt, pushed);
    pthread_mutex_lock(&s->lock);
    if (st == GPOOL_OK && s->next == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        small_extent *ne = realloc(s->ext, c * sizeof *ne);
        if (ne) {
            s->ext = ne;
            s->cap = c;
        } else {
            st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for extent bookkeeping");
            gp_ctx_enter(s->env.drv, s->env.ctx, s->env.cnt, &pushed);
            GP_DRV(s->env.cnt, GPOOL_DRV_HOST_UNREGISTER, s->env.drv->cuMemHostUnregister(p));
            gp_ctx_leave(s->env.drv, s->env.cnt, pushed);
        }
    }
    if (st != GPOOL_OK) {
        pthread_mutex_unlock(&s->lock);
        munmap(p, size);
        hook_status = st;
        return NULL;
    }
    s->ext[s->next++] = (small_extent){.addr = a, .dev = (uintptr_t)d, .size = size};
    s->registrations++;
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add_explicit(s->reserved, size, memory_order_relaxed);
    *zero = true;
    *commit = true;
    return p;
}

/* Lock held: unregister and unmap extent i, and drop it from the list. A failed unregister
 * is retried (a transient driver error must not leak a registration, nor unmap registered
 * memory); after three failures the extent is dropped anyway and the failure reported. */
static void extent_release(gp_small *s, size_t i)
{
    small_extent e = s->ext[i];
    int pushed;
    gp_ctx_enter(s->env.drv, s->env.ctx, s->env.cnt, &pushed);
    CUresult r = CUDA_ERROR_UNKNOWN;
    for (int attempt = 0; attempt < 3 && r != CUDA_SUCCESS; attempt++)
        r = GP_DRV(s->env.cnt, GPOOL_DRV_HOST_UNREGISTER,
                   s->env.drv->cuMemHostUnregister((void *)e.addr));
    if (r != CUDA_SUCCESS) gp_giveback_status = gp_cu_fail(r, "cuMemHostUnregister");
    gp_ctx_leave(s->env.drv, s->env.cnt, pushed);
    munmap((void *)e.addr, e.size);
    atomic_fetch_sub_explicit(s->reserved, e.size, memory_order_relaxed);
    s->ext[i] = s->ext[--s->next];
}

/* Deallocation: keep the extent (jemalloc retains it for reuse); registered memory goes back
 * when the arena is destroyed. */
static bool sm_dalloc(extent_hooks_t *eh, void *addr, size_t size, bool committed,
                      unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)committed, (void)arena_ind;
    return true; /* opt out */
}

/* Arena destruction hands every extent (or piece of one) here: an extent whose bytes have
 * all been destroyed is unregistered and unmapped. */
static void sm_destroy(extent_hooks_t *eh, void *addr, size_t size, bool committed,
                       unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    gp_small *s = of(eh);
    uintptr_t a = (uintptr_t)addr;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->next;) {
        small_extent *e = &s->ext[i];
        uintptr_t lo = a > e->addr ? a : e->addr;
        uintptr_t hi = a + size < e->addr + e->size ? a + size : e->addr + e->size;
        if (lo < hi) e->freed += hi - lo;
        if (lo < hi && e->freed >= e->size) {
            extent_release(s, i);
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&s->lock);
}

static bool sm_split(extent_hooks_t *eh, void *addr, size_t size, size_t size_a, size_t size_b,
                     bool committed, unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
    return false; /* pieces of one registration stay registered */
}

/* Merge only pieces of the same registration: a block never spans two registrations. */
static bool sm_merge(extent_hooks_t *eh, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
                     bool committed, unsigned arena_ind)
{
    (void)size_b, (void)committed, (void)arena_ind;
    gp_small *s = of(eh);
    uintptr_t a = (uintptr_t)addr_a, b = (uintptr_t)addr_b;
    bool refuse = true;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->next; i++) {
        small_extent *e = &s->ext[i];
        if (a - e->addr < e->size) {
            refuse = !(b - e->addr < e->size && b + size_b <= e->addr + e->size);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    (void)size_a;
    return refuse;
}

/* ---------- the arena ---------- */

static void sweep(gp_small *s)
{
    pthread_mutex_lock(&s->lock);
    while (s->next)
        extent_release(s, s->next - 1);
    pthread_mutex_unlock(&s->lock);
}

gpool_status gp_small_create(const gp_host_env *env, gpool_mem_kind kind, _Atomic size_t *reserved,
                             gp_small **out)
{
    *out = NULL;
    gp_small *s = calloc(1, sizeof *s);
    if (!s) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a small-block arena");
    s->hooks.alloc = sm_alloc;
    s->hooks.dalloc = sm_dalloc;
    s->hooks.destroy = sm_destroy;
    s->hooks.split = sm_split;
    s->hooks.merge = sm_merge;
    s->env = *env;
    s->kind = kind;
    s->reserved = reserved;
    s->reg_flags = CU_MEMHOSTREGISTER_PORTABLE |
                   (kind == GPOOL_MEM_HOST_MAPPED ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    pthread_mutex_init(&s->lock, NULL);
    extent_hooks_t *hp = &s->hooks;
    unsigned ind = 0;
    size_t sz = sizeof ind;
    hook_status = GPOOL_OK;
    int e = mallctl("arenas.create", &ind, &sz, &hp, sizeof hp);
    if (e != 0) {
        gpool_status st =
            hook_status != GPOOL_OK
                ? hook_status
                : gp_fail(GPOOL_ERR_UNSUPPORTED, "jemalloc arenas.create: %s", strerror(e));
        sweep(s);
        pthread_mutex_destroy(&s->lock);
        free(s->ext);
        free(s);
        return st;
    }
    s->arena = ind;
    s->have_arena = 1;
    *out = s;
    return GPOOL_OK;
}

gpool_status gp_small_alloc(gp_small *s, size_t size, size_t align, int zero, void **out,
                            size_t *usable)
{
    int flags = MALLOCX_ARENA(s->arena) | MALLOCX_TCACHE_NONE;
    if (align > 16) flags |= MALLOCX_ALIGN(align);
    if (zero) flags |= MALLOCX_ZERO;
    hook_status = GPOOL_OK;
    void *p = mallocx(size, flags);
    if (!p) {
        *out = NULL;
        if (hook_status != GPOOL_OK) return hook_status;
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "jemalloc arena %u: cannot allocate %zu bytes",
                       s->arena, size);
    }
    *out = p;
    *usable = sallocx(p, MALLOCX_TCACHE_NONE);
    return GPOOL_OK;
}

void gp_small_free(gp_small *s, void *p)
{
    dallocx(p, MALLOCX_ARENA(s->arena) | MALLOCX_TCACHE_NONE);
}

int gp_small_contains(gp_small *s, uintptr_t p)
{
    int in = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->next && !in; i++)
        in = p - s->ext[i].addr < s->ext[i].size || p - s->ext[i].dev < s->ext[i].size;
    pthread_mutex_unlock(&s->lock);
    return in;
}

uintptr_t gp_small_device_addr(gp_small *s, uintptr_t host)
{
    uintptr_t dev = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->next && !dev; i++)
        if (host - s->ext[i].addr < s->ext[i].size) dev = s->ext[i].dev + (host - s->ext[i].addr);
    pthread_mutex_unlock(&s->lock);
    return dev;
}

unsigned gp_small_arena_index(const gp_small *s)
{
    return s->arena;
}

void gp_small_counts(gp_small *s, size_t *extents, uint64_t *registrations)
{
    pthread_mutex_lock(&s->lock);
    *extents = s->next;
    *registrations = s->registrations;
    pthread_mutex_unlock(&s->lock);
}

void gp_small_destroy(gp_small *s)
{
    if (!s) return;
    if (s->have_arena) {
        char name[48];
        snprintf(name, sizeof name, "arena.%u.destroy", s->arena);
        mallctl(name, NULL, NULL, NULL, 0);
    }
    sweep(s); /* jemalloc's metadata and anything it did not hand to destroy */
    pthread_mutex_destroy(&s->lock);
    free(s->ext);
    free(s);
}
