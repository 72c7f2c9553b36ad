/* The arena's fields: arena.c's and arena_slab.c's, and the debug checker's (arena_check.c,
 * test_check.c). Every other file goes through the functions of arena.h. */
#ifndef GPOOL_ARENA_INTERNAL_H
#define GPOOL_ARENA_INTERNAL_H

#include "arena.h"

/* A stream the arena has seen: its partial slabs per class. */
typedef struct gp_arena_stream {
    uintptr_t tag;
    gp_slab *partial[GP_NCLASS];
    gp_slab *empty[GP_NCLASS]; /* one spare empty slab per class */
} gp_arena_stream;

/* A small block freed on a stream other than its slab's: back to the slab once that
 * stream's work up to seq is done. */
typedef struct gp_pending_slot {
    uintptr_t ptr, tag;
    uint64_t seq;
} gp_pending_slot;

struct gp_arena {
    gp_arena_map map; /* first: arena.h's gp_arena_slab_of reads it through the cast */
    pthread_mutex_t lock;
    gpool_mem_kind kind;
    const gp_backend_ops *ops;
    void *bctx;
    size_t page;       /* physical page size of the backend */
    size_t va_reserve; /* bytes per new address reservation */
    size_t small_max;
    /* device bytes in all (0: host memory), for the OOM report */
    size_t device_total;
    uintptr_t slab_tag; /* the stream whose small blocks come from slabs (set by the owner) */
    gp_heap heap;
    gp_ptrmap blocks; /* large blocks by address */
    gp_arena_stream *streams;
    size_t nstreams, cap_streams;
    const gp_reuse_ops *reuse; /* the stream-reuse rule (NULL: none; positions are 0) */
    void *reuse_ctx;
    gp_owners *owners; /* the pool's address registry: the regions are registered there */
    gp_pending_slot *pending;
    size_t npending, cap_pending;
    /* While one stream is all the arena has seen, its frees are clean at once (nothing else
     * could observe them), so free space coalesces freely. The first request on a second
     * stream synchronizes once and switches to per-stream tags. */
    int streams_seen; /* 0, 1 or 2 (= several) */
    /* Frees since the last device synchronize: their memory may still be touched by queued
     * work even when it is clean for reuse, so it must not be unmapped before a sync. */
    uint64_t frees_since_sync;
    /* Large requests since the last poll of other streams (rate of the polls a split fit makes). */
    unsigned allocs_since_poll;
    uintptr_t only_tag;
    /* Blocks placed across pages under pressure, and the alias parts of freed ones waiting for
     * a synchronize (arena_span.c) */
    struct gp_span *spans, *dead;
    size_t nspans, cap_spans, ndead, cap_dead;
    gp_arena_counters c;            /* large blocks and slabs' slot traffic through the slow path */
    uint64_t check_ops, check_cost; /* GPOOL_DEBUG: sampling of gp_arena_check_or_abort */
};

/* ---------- shared by arena.c (ranges) and arena_slab.c (slabs); lock held ---------- */

/* The position a free on stream tag gets now (gp_reuse_ops.position; 0 without a rule). */
static inline uint64_t gp_arena_position(gp_arena *a, uintptr_t tag)
{
    return a->reuse ? a->reuse->position(a->reuse_ctx, tag) : 0;
}

/* GPOOL_OK when a request on stream tag may make driver calls (gp_reuse_ops.may_drive). */
static inline gpool_status gp_arena_may_drive(gp_arena *a, uintptr_t tag)
{
    return a->reuse ? a->reuse->may_drive(a->reuse_ctx, tag) : GPOOL_OK;
}

/* One attempt to place and back a range (arena.c): the ladder makes room, not the arena. */
gpool_status gp_arena_place(gp_arena *a, size_t size, size_t align, uintptr_t tag, unsigned flags,
                            size_t chunk, gp_range **out);

/* Single-stream mode: the first request on a second stream turns the clean ranges freed so
 * far pending on the first stream (their queued work may still use them), and from then on
 * every free is tagged by its stream. */
static inline void gp_arena_note_stream(gp_arena *a, uintptr_t tag)
{
    if (a->streams_seen == 0) {
        a->streams_seen = 1;
        a->only_tag = tag;
    } else if (a->streams_seen == 1 && tag != a->only_tag) {
        gp_heap_retag_clean(&a->heap, a->only_tag, 0);
        a->streams_seen = 2;
    }
}

/* The tag a range freed on stream tag gets. */
static inline uintptr_t gp_arena_free_tag(gp_arena *a, uintptr_t tag)
{
    return a->streams_seen < 2 && tag == a->only_tag ? GP_TAG_CLEAN : tag;
}

/* Accounting: in_use counts large blocks and every slab slot that is not free (live, parked
 * in a thread cache, or pending), so it is right whichever path allocates or frees a slot;
 * requested counts large blocks only (small ones are summed from their slabs on demand). */
static inline void gp_arena_use_bytes(gp_arena *a, int64_t d)
{
    a->c.in_use += (uint64_t)d;
    if (a->c.in_use > a->c.peak_in_use) a->c.peak_in_use = a->c.in_use;
}

static inline void gp_arena_count_alloc(gp_arena *a, size_t requested)
{
    a->c.requested += requested;
    a->c.allocs++;
    if (a->c.requested > a->c.peak_requested) a->c.peak_requested = a->c.requested;
}

static inline void gp_arena_count_free(gp_arena *a, size_t requested)
{
    a->c.requested -= requested;
    a->c.frees++;
}

/* The aux of a placeholder range, which holds bytes no block may get (arena_span.c): the parts of
 * a span's pages that are not the span's. Not a slab, not a block. */
extern char gp_span_mark;
static inline int gp_range_is_pad(const gp_range *r)
{
    return r->aux == (void *)&gp_span_mark;
}
/* The slab of a range that is one (NULL for a block, a placeholder or free space). */
static inline gp_slab *gp_range_slab(const gp_range *r)
{
    return r->is_free || gp_range_is_pad(r) ? NULL : (gp_slab *)r->aux;
}

/* Spans (arena_span.c). A large request of size bytes (a multiple of GP_MIN_ALIGN, alignment
 * GP_MIN_ALIGN) under pressure (after make room): 1 and *out (the block's range, not yet in the
 * block map) when it can begin in one page's free tail and end in another's free head, both
 * mapped again around fewer than `below` fresh pages (and fewer than the block needs on its
 * own); 0, nothing changed, otherwise. */
int gp_arena_span_locked(gp_arena *a, size_t size, uintptr_t tag, size_t below, gp_range **out);
/* Block r (off the block map, counters done) is a span: its pieces go back (tag, seq: the
 * free's mark), its alias part is held until gp_arena_spans_settle_locked. 1 when it was one. */
int gp_arena_span_free_locked(gp_arena *a, gp_range *r, uintptr_t tag, uint64_t seq);
/* After a synchronize (make room, trim): unmap the alias parts of freed spans. */
void gp_arena_spans_settle_locked(gp_arena *a);
/* Free the span bookkeeping (the backend unmaps what is mapped). */
void gp_arena_spans_fini(gp_arena *a);

/* The slab halves of arena.c's calls (arena_slab.c). */
gpool_status gp_arena_slab_alloc_locked(gp_arena *a, size_t size, uintptr_t tag, void **out);
gpool_status gp_arena_slab_free_locked(gp_arena *a, gp_slab *s, void *ptr, uintptr_t tag,
                                       uint64_t seq);
/* Slots pending on stream tag up to position upto go back to their slabs. */
void gp_arena_pending_clean_locked(gp_arena *a, uintptr_t tag, uint64_t upto);
/* Destroy every spare empty slab (their ranges go back to the heap). */
void gp_arena_slabs_drop_spare_locked(gp_arena *a);
/* Not a live slot's start: the report (an interior pointer of a live slot, or freed). */
gpool_status gp_arena_slab_bad(gp_arena *a, gp_slab *s, const void *ptr);
gpool_status gp_arena_slab_block_locked(gp_slab *s, gpool_mem_kind kind, const void *ptr,
                                        uintptr_t *base, size_t *size, size_t *requested,
                                        uintptr_t *tag, uint32_t *usage);

#endif
