/* The arena's slabs (arena.h, arena_internal.h): small blocks (up to small_max) of the arena's
 * slab stream are slots of slabs, one-page ranges of the heap cut into equal slots of one size
 * class, kept per stream and class on partial lists with one spare empty slab; a slot freed on
 * another stream waits pending until that stream's work is done. Thread caches take and give
 * slots in batches here. The ranges under the slabs are arena.c's. */
#include "arena_internal.h"

#include <stdlib.h>
#include <string.h>

#include "bad_pointer.h"
#include "check.h"
#include "error.h"

static void granules_set(gp_arena *a, uintptr_t base, size_t bytes, gp_slab *s)
{
    size_t n = atomic_load_explicit(&a->map.nregs, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        uintptr_t off = base - a->map.regs[i].base;
        if (off >= a->map.regs[i].size) continue;
        for (size_t g = 0; g < bytes >> GP_GRANULE_SHIFT; g++)
            atomic_store_explicit(&a->map.regs[i].granule[(off >> GP_GRANULE_SHIFT) + g], s,
                                  memory_order_release);
        return;
    }
}

static gp_arena_stream *stream_get(gp_arena *a, uintptr_t tag, uint16_t *idx)
{
    for (size_t i = 0; i < a->nstreams; i++)
        if (a->streams[i].tag == tag) {
            if (idx) *idx = (uint16_t)i;
            return &a->streams[i];
        }
    if (a->nstreams == UINT16_MAX) return NULL;
    if (a->nstreams == a->cap_streams) {
        size_t cap = a->cap_streams ? a->cap_streams * 2 : 4;
        gp_arena_stream *ns = realloc(a->streams, cap * sizeof *ns);
        if (!ns) return NULL;
        a->streams = ns;
        a->cap_streams = cap;
    }
    gp_arena_stream *s = &a->streams[a->nstreams];
    memset(s, 0, sizeof *s);
    s->tag = tag;
    if (idx) *idx = (uint16_t)a->nstreams;
    a->nstreams++;
    return s;
}

static void partial_push(gp_arena_stream *ss, gp_slab *s)
{
    s->prev = NULL;
    s->next = ss->partial[s->cls];
    if (s->next) s->next->prev = s;
    ss->partial[s->cls] = s;
}

static void partial_del(gp_arena_stream *ss, gp_slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        ss->partial[s->cls] = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static gpool_status slab_new(gp_arena *a, unsigned cls, uintptr_t tag, uint16_t sidx, gp_slab **out)
{
    gp_slab *s = malloc(sizeof *s);
    if (!s) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a slab");
    size_t bytes = gp_slab_bytes(cls);
    gp_range *r = NULL;
    gpool_status st =
        gp_arena_place(a, bytes, GP_GRANULE, tag, GP_ARENA_SLAB, a->page, &r); /* one page */
    if (st != GPOOL_OK) {
        free(s);
        return st;
    }
    memset(s, 0, offsetof(gp_slab, state));
    s->base = r->addr;
    s->slot_size = (uint32_t)gp_class_size(cls);
    s->nslots = (uint16_t)(bytes / s->slot_size);
    if (s->nslots > GP_SLAB_MAX_SLOTS) s->nslots = GP_SLAB_MAX_SLOTS;
    s->nfree = s->nslots;
    s->recip = (((uint64_t)1 << 40) + s->slot_size - 1) / s->slot_size;
    s->cls = (uint8_t)cls;
    s->tag = tag;
    s->stream = sidx;
    s->range = r;
    r->aux = s;
    for (uint16_t i = 0; i < GP_SLAB_MAX_SLOTS; i++) {
        gp_slot_set(s, i, GP_SLOT_FREE);
        gp_slot_set_req(s, i, 0);
    }
    for (uint16_t i = 0; i < s->nslots; i++)
        s->free_stack[i] = (uint16_t)(s->nslots - 1 - i);
    granules_set(a, s->base, bytes, s);
    *out = s;
    return GPOOL_OK;
}

static void slab_destroy(gp_arena *a, gp_slab *s)
{
    granules_set(a, s->base, s->range->size, NULL);
    /* Its slots may still be used by work queued on the slab's stream before their frees:
     * the range is pending on that stream at the position a free gets now. */
    gp_heap_give(&a->heap, s->range, gp_arena_free_tag(a, s->tag), gp_arena_position(a, s->tag));
    free(s);
}

/* A slab of class cls on stream tag with a free slot. With an owner (a thread cache), prefer
 * a slab that owner already uses or nobody does, so threads do not share cache lines. */
static gpool_status slab_with_room(gp_arena *a, unsigned cls, uintptr_t tag, const void *owner,
                                   gp_slab **out)
{
    uint16_t sidx = 0;
    gp_arena_stream *ss = stream_get(a, tag, &sidx);
    if (!ss) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for stream state");
    gp_slab *s = ss->partial[cls];
    if (owner && s) {
        int k = 0;
        while (s && s->owner && s->owner != owner && k++ < 8)
            s = s->next;
        if (s && s->owner && s->owner != owner) s = NULL;
        if (!s && !ss->empty[cls] && k < 8) s = ss->partial[cls]; /* short list: share */
    }
    if (!s && (s = ss->empty[cls])) {
        ss->empty[cls] = NULL;
        partial_push(ss, s);
    }
    if (!s) {
        gpool_status st = slab_new(a, cls, tag, sidx, &s);
        if (st != GPOOL_OK) return st;
        ss = &a->streams[sidx]; /* place() may not move streams, but be safe */
        partial_push(ss, s);
    }
    if (owner) s->owner = owner;
    *out = s;
    return GPOOL_OK;
}

static uintptr_t slot_pop(gp_arena *a, gp_slab *s, uint8_t state)
{
    uint16_t i = s->free_stack[--s->nfree];
    gp_slot_set(s, i, state);
    gp_arena_use_bytes(a, s->slot_size);
    if (s->nfree == 0) partial_del(&a->streams[s->stream], s);
    return s->base + (uintptr_t)i * s->slot_size;
}

/* Return slot i of s to its free list; the slab may go away. */
static void slot_push(gp_arena *a, gp_slab *s, uint16_t i)
{
    gp_arena_stream *ss = &a->streams[s->stream];
    gp_slot_set(s, i, GP_SLOT_FREE);
    gp_arena_use_bytes(a, -(int64_t)s->slot_size);
    s->free_stack[s->nfree++] = i;
    if (s->nfree == 1) partial_push(ss, s);
    if (s->nfree < s->nslots) return;
    partial_del(ss, s);
    s->owner = NULL;
    if (!ss->empty[s->cls])
        ss->empty[s->cls] = s;
    else
        slab_destroy(a, s);
}

static gpool_status pending_add(gp_arena *a, uintptr_t ptr, uintptr_t tag, uint64_t seq)
{
    if (a->npending == a->cap_pending) {
        size_t cap = a->cap_pending ? a->cap_pending * 2 : 64;
        gp_pending_slot *np = realloc(a->pending, cap * sizeof *np);
        if (!np) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a pending free");
        a->pending = np;
        a->cap_pending = cap;
    }
    a->pending[a->npending++] = (gp_pending_slot){ptr, tag, seq};
    return GPOOL_OK;
}
/* ---------- for arena.c: the slab halves of its calls ---------- */

gpool_status gp_arena_slab_bad(gp_arena *a, gp_slab *s, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    uint32_t i = (uint32_t)((p - s->base) / s->slot_size);
    if (i < s->nslots && gp_slot_state(s, i) == GP_SLOT_LIVE)
        return gp_bad_pointer(ptr, GP_PTR_INTERIOR, a->kind, s->base + (uintptr_t)i * s->slot_size);
    return gp_bad_pointer(ptr, GP_PTR_FREED, a->kind, 0);
}

gpool_status gp_arena_slab_alloc_locked(gp_arena *a, size_t size, uintptr_t tag, void **out)
{
    unsigned cls = gp_size_class(size);
    gp_slab *s = NULL;
    gpool_status st = slab_with_room(a, cls, tag, NULL, &s);
    if (st == GPOOL_OK) {
        uintptr_t p = slot_pop(a, s, GP_SLOT_LIVE);
        gp_slot_set_req(s, (uint32_t)gp_slot_index(s, p), (uint32_t)size);
        a->c.small_requested += size;
        gp_arena_count_alloc(a, 0);
        *out = (void *)p;
    }
    return st;
}

gpool_status gp_arena_slab_free_locked(gp_arena *a, gp_slab *s, void *ptr, uintptr_t tag,
                                       uint64_t seq)
{
    uintptr_t p = (uintptr_t)ptr;
    long i = gp_slot_index(s, p);
    if (i < 0 || gp_slot_state(s, (uint32_t)i) != GP_SLOT_LIVE) return gp_arena_slab_bad(a, s, ptr);
    uint32_t req = gp_slot_req(s, (uint32_t)i);
    if (s->tag != tag) {
        /* Freed on another stream than its slab serves: park it until that stream's
         * work is done, so the slab's stream cannot reuse it early. */
        gpool_status st = pending_add(a, p, tag, seq);
        if (st != GPOOL_OK) return st;
        gp_slot_set(s, (uint32_t)i, GP_SLOT_PENDING);
        a->c.pending_slots++;
        a->c.pending_bytes += s->slot_size;
    } else {
        slot_push(a, s, (uint16_t)i);
    }
    a->c.small_requested -= req;
    gp_arena_count_free(a, 0);
    return GPOOL_OK;
}

void gp_arena_pending_clean_locked(gp_arena *a, uintptr_t tag, uint64_t upto)
{
    size_t k = 0;
    for (size_t i = 0; i < a->npending; i++) {
        gp_pending_slot ps = a->pending[i];
        if (ps.tag == tag && ps.seq <= upto) {
            gp_slab *s = gp_arena_slab_of(a, ps.ptr);
            a->c.pending_slots--;
            a->c.pending_bytes -= s->slot_size;
            slot_push(a, s, (uint16_t)gp_slot_index(s, ps.ptr));
        } else {
            a->pending[k++] = ps;
        }
    }
    a->npending = k;
}

void gp_arena_slabs_drop_spare_locked(gp_arena *a)
{
    for (size_t i = 0; i < a->nstreams; i++)
        for (unsigned c = 0; c < GP_NCLASS; c++)
            if (a->streams[i].empty[c]) {
                slab_destroy(a, a->streams[i].empty[c]);
                a->streams[i].empty[c] = NULL;
            }
}

gpool_status gp_arena_slab_block_locked(gp_slab *s, gpool_mem_kind kind, const void *ptr,
                                        uintptr_t *base, size_t *size, size_t *requested,
                                        uintptr_t *tag, uint32_t *usage)
{
    uintptr_t p = (uintptr_t)ptr;
    uint32_t i = (uint32_t)((p - s->base) / s->slot_size);
    if (i >= s->nslots || gp_slot_state(s, i) != GP_SLOT_LIVE)
        return gp_bad_pointer(ptr, GP_PTR_FREED, kind, 0);
    *base = s->base + (uintptr_t)i * s->slot_size;
    *size = s->slot_size;
    *requested = gp_slot_req(s, i);
    *tag = s->tag;
    *usage = 0;
    return GPOOL_OK;
}

/* ---------- for the thread caches (tcache.c) and the stats ---------- */

size_t gp_arena_slots_take(gp_arena *a, unsigned cls, uintptr_t tag, const void *owner, void **out,
                           size_t n, gpool_status *st)
{
    size_t got = 0;
    *st = GPOOL_OK;
    pthread_mutex_lock(&a->lock);
    gp_arena_note_stream(a, tag);
    while (got < n) {
        gp_slab *s = NULL;
        *st = slab_with_room(a, cls, tag, owner, &s);
        if (*st != GPOOL_OK) break;
        while (got < n && s->nfree)
            out[got++] = (void *)slot_pop(a, s, GP_SLOT_CACHED);
    }
    if (got) *st = GPOOL_OK;
    GP_CHECK_ARENA(a, "slots_take");
    pthread_mutex_unlock(&a->lock);
    return got;
}

void gp_arena_slots_give(gp_arena *a, void *const *ptrs, size_t n, const void *owner)
{
    pthread_mutex_lock(&a->lock);
    for (size_t k = 0; k < n; k++) {
        uintptr_t p = (uintptr_t)ptrs[k];
        gp_slab *s = gp_arena_slab_of(a, p);
        long i = s ? gp_slot_index(s, p) : -1;
        if (i < 0 || gp_slot_state(s, (uint32_t)i) != GP_SLOT_CACHED) continue; /* cannot happen */
        if (owner && s->owner == owner) s->owner = NULL;
        a->frees_since_sync++;
        slot_push(a, s, (uint16_t)i);
    }
    GP_CHECK_ARENA(a, "slots_give");
    pthread_mutex_unlock(&a->lock);
}

uint64_t gp_arena_small_requested(gp_arena *a)
{
    uint64_t sum = 0;
    pthread_mutex_lock(&a->lock);
    for (size_t r = 0; r < a->heap.nregions; r++)
        GP_HEAP_FOREACH(&a->heap, r, x)
        {
            gp_slab *s = gp_range_slab(x);
            if (!s) continue;
            for (uint32_t i = 0; i < s->nslots; i++)
                if (gp_slot_state(s, i) == GP_SLOT_LIVE) sum += gp_slot_req(s, i);
        }
    pthread_mutex_unlock(&a->lock);
    return sum;
}
