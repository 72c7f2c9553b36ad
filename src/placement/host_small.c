/* Small host blocks (host_small.h): size-class slabs over registered 2 MiB extents, for
 * host blocks below GP_SMALL_LIMIT. */
#include "host_small.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"
#include "error.h"

/* Extents of SM_EXT bytes, aligned to SM_EXT, each cut into SM_EXT / SM_SLAB slabs; a slab
 * holds blocks of one size class (16-byte steps to 128, then four classes per doubling up to
 * 64 KiB), handed out by bump first and then from the slab's free list. */
#define SM_SLAB    ((size_t)256 << 10)
#define SM_EXT     ((size_t)2 << 20)
#define SM_SLABS   (SM_EXT / SM_SLAB)
#define SM_CLASSES 44

typedef struct small_slab {
    struct small_slab *prev, *next; /* in the class's list of slabs with a free block, or in
                                       the list of unused slabs (next only) */
    void *free;                     /* freed blocks, linked through their first word */
    uintptr_t base;
    uint32_t size, cap, nfree, bumped; /* block size, blocks, free blocks, blocks ever cut */
    int cls;                           /* -1: unused */
} small_slab;

typedef struct small_extent {
    uintptr_t addr;
    uintptr_t dev; /* device address of addr: cuMemHostGetDevicePointer for mapped memory */
    size_t size;
    small_slab slab[SM_SLABS];
} small_extent;

struct gp_small {
    gp_host_env env;
    gpool_mem_kind kind;
    unsigned reg_flags;
    _Atomic size_t *reserved;
    unsigned id;
    pthread_mutex_t lock; /* guards everything below */
    small_extent **ext;   /* sorted by addr */
    size_t next, cap;
    uint64_t registrations;
    small_slab *partial[SM_CLASSES]; /* slabs of each class with a free block */
    small_slab *unused;              /* slabs of no class */
};

static atomic_uint next_id;

static size_t os_page(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t class_size(unsigned c)
{
    if (c < 8) return 16 * ((size_t)c + 1);
    size_t p = (size_t)128 << ((c - 8) / 4);
    return p + ((c - 8) % 4 + 1) * (p / 4);
}

/* The smallest class of at least size bytes (1..64 KiB) whose size is a multiple of align (a
 * power of two up to 4 KiB): blocks lie at multiples of their size from a 256 KiB-aligned
 * slab, so such a class's blocks are aligned. */
static unsigned class_of(size_t size, size_t align)
{
    unsigned c;
    if (size <= 128) {
        c = size ? (unsigned)((size + 15) / 16 - 1) : 0;
    } else {
        unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
        size_t p = (size_t)1 << lg;
        c = 8 + (lg - 7) * 4 + (unsigned)((size - 1 - p) / (p / 4));
    }
    while (c < SM_CLASSES - 1 && class_size(c) % align)
        c++;
    return c;
}

/* ---------- extents ---------- */

/* Lock held: map, bind, register (and for mapped memory look up the device address of) a
 * new extent, and give its slabs to the unused list. */
static gpool_status extent_add(gp_small *s)
{
    if (s->next == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        small_extent **ne = realloc(s->ext, c * sizeof *ne);
        if (!ne)
            return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for extent bookkeeping");
        s->ext = ne;
        s->cap = c;
    }
    small_extent *e = calloc(1, sizeof *e);
    if (!e) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for extent bookkeeping");
    size_t page = os_page(), size = SM_EXT, span = size + SM_EXT - page;
    void *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(e);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "mmap of %zu bytes of host memory: %s", span,
                       strerror(errno));
    }
    uintptr_t a = ((uintptr_t)raw + SM_EXT - 1) & ~(uintptr_t)(SM_EXT - 1);
    size_t head = a - (uintptr_t)raw, tail = span - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap((void *)(a + size), tail);
    void *p = (void *)a;
    gp_numa_bind(s->env.numa, p, size);
    int pushed;
    gp_dc_enter(&s->env.dc, &pushed);
    CUresult r = GP_DRV(s->env.dc.cnt, GPOOL_DRV_HOST_REGISTER,
                        s->env.dc.drv->cuMemHostRegister(p, size, s->reg_flags));
    gpool_status st = GPOOL_OK;
    CUdeviceptr d = (CUdeviceptr)a;
    if (r != CUDA_SUCCESS) {
        st = gp_cu_fail(r, "cuMemHostRegister (small-block extent)");
    } else if (s->kind == GPOOL_MEM_HOST_MAPPED) {
        /* the device address may differ from the host one (CAN_USE_HOST_POINTER_FOR_
         * REGISTERED_MEM = 0): blocks never span extents, so each block's device address is
         * its extent's plus the offset (gp_small_device_addr) */
        r = GP_DRV(s->env.dc.cnt, GPOOL_DRV_OTHER,
                   s->env.dc.drv->cuMemHostGetDevicePointer(&d, p, 0));
        if (r != CUDA_SUCCESS) {
            st = gp_cu_fail(r, "cuMemHostGetDevicePointer");
            GP_DRV(s->env.dc.cnt, GPOOL_DRV_HOST_UNREGISTER, s->env.dc.drv->cuMemHostUnregister(p));
        }
    }
    gp_dc_leave(&s->env.dc, pushed);
    if (st == GPOOL_OK && (gp_owners_add(s->env.owners, a, size, s->kind) != 0 ||
                           (d != a && gp_owners_add(s->env.owners, d, size, s->kind) != 0))) {
        gp_owners_remove(s->env.owners, a);
        gp_dc_enter(&s->env.dc, &pushed);
        GP_DRV(s->env.dc.cnt, GPOOL_DRV_HOST_UNREGISTER, s->env.dc.drv->cuMemHostUnregister(p));
        gp_dc_leave(&s->env.dc, pushed);
        st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the address registry");
    }
    if (st != GPOOL_OK) {
        munmap(p, size);
        free(e);
        return st;
    }
    e->addr = a;
    e->dev = (uintptr_t)d;
    e->size = size;
    for (size_t i = SM_SLABS; i-- > 0;) {
        e->slab[i] = (small_slab){.base = a + i * SM_SLAB, .cls = -1, .next = s->unused};
        s->unused = &e->slab[i];
    }
    size_t at = s->next;
    while (at && s->ext[at - 1]->addr > a)
        at--;
    memmove(&s->ext[at + 1], &s->ext[at], (s->next - at) * sizeof *s->ext);
    s->ext[at] = e;
    s->next++;
    s->registrations++;
    atomic_fetch_add_explicit(s->reserved, size, memory_order_relaxed);
    return GPOOL_OK;
}

/* Lock held: unregister and unmap extent i. A failed unregister is retried (a transient
 * driver error must not leak a registration, nor unmap registered memory); after three
 * failures the extent is dropped anyway and the failure returned (GPOOL_ERR_DRIVER, message
 * naming cuMemHostUnregister). */
static gpool_status extent_release(gp_small *s, size_t i)
{
    small_extent *e = s->ext[i];
    int pushed;
    gp_dc_enter(&s->env.dc, &pushed);
    CUresult r = CUDA_ERROR_UNKNOWN;
    for (int attempt = 0; attempt < 3 && r != CUDA_SUCCESS; attempt++)
        r = GP_DRV(s->env.dc.cnt, GPOOL_DRV_HOST_UNREGISTER,
                   s->env.dc.drv->cuMemHostUnregister((void *)e->addr));
    gpool_status st = r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuMemHostUnregister");
    gp_dc_leave(&s->env.dc, pushed);
    gp_owners_remove(s->env.owners, e->addr);
    if (e->dev != e->addr) gp_owners_remove(s->env.owners, e->dev);
    munmap((void *)e->addr, e->size);
    atomic_fetch_sub_explicit(s->reserved, e->size, memory_order_relaxed);
    memmove(&s->ext[i], &s->ext[i + 1], (s->next - i - 1) * sizeof *s->ext);
    s->next--;
    free(e);
    return st;
}

/* Lock held: the extent holding host address p, or NULL. */
static small_extent *extent_of(gp_small *s, uintptr_t p)
{
    size_t lo = 0, hi = s->next;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        small_extent *e = s->ext[mid];
        if (p < e->addr)
            hi = mid;
        else if (p - e->addr >= e->size)
            lo = mid + 1;
        else
            return e;
    }
    return NULL;
}

/* ---------- slabs ---------- */

static void partial_push(gp_small *s, small_slab *sl)
{
    small_slab **head = &s->partial[sl->cls];
    sl->prev = NULL;
    sl->next = *head;
    if (*head) (*head)->prev = sl;
    *head = sl;
}

static void partial_drop(gp_small *s, small_slab *sl)
{
    if (sl->prev)
        sl->prev->next = sl->next;
    else
        s->partial[sl->cls] = sl->next;
    if (sl->next) sl->next->prev = sl->prev;
    sl->prev = sl->next = NULL;
}

/* ---------- the allocator ---------- */

/* Release every extent; the first failure (later ones are released all the same). */
static gpool_status sweep(gp_small *s)
{
    gpool_status st = GPOOL_OK;
    pthread_mutex_lock(&s->lock);
    while (s->next) {
        gpool_status one = extent_release(s, s->next - 1);
        if (st == GPOOL_OK) st = one;
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

gpool_status gp_small_create(const gp_host_env *env, gpool_mem_kind kind, _Atomic size_t *reserved,
                             gp_small **out)
{
    *out = NULL;
    gp_small *s = calloc(1, sizeof *s);
    if (!s) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a small-block arena");
    s->env = *env;
    s->kind = kind;
    s->reserved = reserved;
    s->reg_flags = CU_MEMHOSTREGISTER_PORTABLE |
                   (kind == GPOOL_MEM_HOST_MAPPED ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    s->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return GPOOL_OK;
}

/* Lock held: a free block of class c from a partial slab or an unused one, or NULL. */
static void *take_locked(gp_small *s, unsigned c, size_t *got)
{
    small_slab *sl = s->partial[c];
    if (!sl) {
        if (!s->unused) return NULL;
        sl = s->unused;
        s->unused = sl->next;
        sl->cls = (int)c;
        sl->size = (uint32_t)class_size(c);
        sl->cap = sl->nfree = (uint32_t)(SM_SLAB / sl->size);
        sl->bumped = 0;
        sl->free = NULL;
        partial_push(s, sl);
    }
    void *p;
    if (sl->free) {
        p = sl->free;
        sl->free = *(void **)p;
    } else {
        p = (void *)(sl->base + (size_t)sl->bumped++ * sl->size);
    }
    if (--sl->nfree == 0) partial_drop(s, sl);
    *got = sl->size;
    return p;
}

int gp_small_alloc_warm(gp_small *s, size_t size, size_t align, void **out, size_t *usable)
{
    if (size > GP_SMALL_MAX || align > GP_SMALL_MAX_ALIGN || (align & (align - 1))) return 0;
    unsigned c = class_of(size, align ? align : 1);
    size_t got = 0;
    pthread_mutex_lock(&s->lock);
    void *p = take_locked(s, c, &got);
    pthread_mutex_unlock(&s->lock);
    if (!p) return 0;
    *out = p;
    *usable = got;
    return 1;
}

gpool_status gp_small_alloc(gp_small *s, size_t size, size_t align, int zero, void **out,
                            size_t *usable)
{
    *out = NULL;
    if (size > GP_SMALL_MAX || align > GP_SMALL_MAX_ALIGN || (align & (align - 1)))
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "small host block of %zu bytes aligned to %zu: beyond the slabs' reach",
                       size, align);
    unsigned c = class_of(size, align ? align : 1);
    pthread_mutex_lock(&s->lock);
    if (!s->partial[c] && !s->unused) {
        gpool_status st = extent_add(s);
        if (st != GPOOL_OK) {
            pthread_mutex_unlock(&s->lock);
            return st;
        }
    }
    size_t got = 0;
    void *p = take_locked(s, c, &got);
    pthread_mutex_unlock(&s->lock);
    if (zero) memset(p, 0, got);
    *out = p;
    *usable = got;
    return GPOOL_OK;
}

static void free_locked(gp_small *s, void *p)
{
    small_extent *e = p ? extent_of(s, (uintptr_t)p) : NULL;
    if (e) {
        small_slab *sl = &e->slab[((uintptr_t)p - e->addr) / SM_SLAB];
        *(void **)p = sl->free;
        sl->free = p;
        if (++sl->nfree == 1) partial_push(s, sl);
        if (sl->nfree == sl->cap) { /* empty: any class may have it */
            partial_drop(s, sl);
            sl->cls = -1;
            sl->free = NULL;
            sl->bumped = 0;
            sl->next = s->unused;
            s->unused = sl;
        }
    }
}

void gp_small_free(gp_small *s, void *p)
{
    if (!p) return;
    pthread_mutex_lock(&s->lock);
    free_locked(s, p);
    pthread_mutex_unlock(&s->lock);
}

void gp_small_free_many(gp_small *s, void *const *p, size_t n)
{
    if (!n) return;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++)
        free_locked(s, p[i]);
    pthread_mutex_unlock(&s->lock);
}

int gp_small_contains(gp_small *s, uintptr_t p)
{
    int in = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->next && !in; i++)
        in = p - s->ext[i]->addr < s->ext[i]->size || p - s->ext[i]->dev < s->ext[i]->size;
    pthread_mutex_unlock(&s->lock);
    return in;
}

uintptr_t gp_small_device_addr(gp_small *s, uintptr_t host)
{
    pthread_mutex_lock(&s->lock);
    small_extent *e = extent_of(s, host);
    uintptr_t dev = e ? e->dev + (host - e->addr) : 0;
    pthread_mutex_unlock(&s->lock);
    return dev;
}

unsigned gp_small_arena_index(const gp_small *s)
{
    return s->id;
}

void gp_small_counts(gp_small *s, size_t *extents, uint64_t *registrations)
{
    pthread_mutex_lock(&s->lock);
    *extents = s->next;
    *registrations = s->registrations;
    pthread_mutex_unlock(&s->lock);
}

gpool_status gp_small_destroy(gp_small *s)
{
    if (!s) return GPOOL_OK;
    gpool_status st = sweep(s); /* every block goes with its extent */
    pthread_mutex_destroy(&s->lock);
    free(s->ext);
    free(s);
    return st;
}
