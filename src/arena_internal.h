/* The arena's fields: arena.c's own, and the debug checker's (arena_check.c, test_check.c).
 * Every other file goes through the functions of arena.h. */
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
    gp_sync_fn sync;
    gp_poll_fn poll;       /* optional; set after gp_arena_init */
    gp_seq_fn seq_of;      /* optional; set after gp_arena_init (without it: position 0) */
    gp_drive_fn may_drive; /* optional; set after gp_arena_init */
    void *owner;
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
    gp_arena_counters c;            /* large blocks and slabs' slot traffic through the slow path */
    uint64_t check_ops, check_cost; /* GPOOL_DEBUG: sampling of gp_arena_check_or_abort */
};

#endif
