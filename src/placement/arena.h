/* Glossary (arena.h, heap.h, stream.h and the files behind them use these words so):
 *   page     the backend's unit of physical memory (the device's granularity, or a host page);
 *            a page is backed when physical memory is mapped at its address.
 *   chunk    several pages the backend creates, and gives back, as one physical allocation.
 *   handle   the backend's name for one page's or chunk's physical memory (heap.h page_phys).
 *   region   one reserved virtual address range; the heap places ranges inside regions.
 *   range    a run of addresses in a region: free, or a block (a large block, or a slab).
 *   granule  32 KiB (GP_GRANULE): slabs are granule aligned and sized, and each region has a
 *            table from granule to slab for the lock-free free path.
 *   slab     a range cut into equal slots of one size class, serving one stream.
 *   slot     one small block's place in a slab (free, live, cached by a thread cache, or
 *            pending on another stream).
 *   tag      the stream a free range or slot may still be used by (stream.h gp_stream_tag),
 *            or GP_TAG_CLEAN.
 *   mark     on a free range: a stream whose frees there its queued work may still touch, the
 *            span of those frees and the latest position (heap.h gp_mark); a range holds
 *            up to GP_MARKS.
 *   position a point in a stream's queued work (seq): a free gets its stream's current
 *            position, and is done once an event recorded at or after it has completed.
 *   pending  freed, but reusable only on its own stream until its position is done
 *            (also called dirty, for free ranges: a range with marks).
 *   clean    free and reusable by every stream: no queued work can touch it (no mark). */
/* The arena: one memory kind's blocks. Large blocks are best-fit ranges of the address-space
 * heap; small ones are slots of slabs (per size class and stream). The arena asks its
 * backend to back exactly the pages that hold allocated bytes, and on memory pressure takes
 * physical pages back from wherever they are unused and maps them where they are needed —
 * so an allocation fails only when the free pages really run out. Knows nothing of CUDA. */
#ifndef GPOOL_ARENA_H
#define GPOOL_ARENA_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"
#include "heap.h"
#include "owners.h"
#include "ptrmap.h"
#include "sizeclass.h"

#define GP_MAX_REGIONS 64
/* Internal request flag: a new slab (placed at the top of free space, and other streams'
 * pending frees are polled before it grows the arena). */
#define GP_ARENA_SLAB (1u << 30)
/* Flag in gp_reuse_req.flags: the cheap poll a request makes before splitting a free range; a
 * new event is recorded only on a stream whose gp_reuse_pending.fits says the request fits. */
#define GP_POLL_QUERY_ONLY (1u << 28)
/* Internal request flag: a small request (<= small_max) of another stream than the slab stream,
 * in multi-stream mode: a heap range placed at the top, near the slabs (arena.c take). */
#define GP_ARENA_SMALL_RANGE (1u << 25)
/* Internal request flag: memory is short and the ladder made room before this attempt; the
 * range goes where the fewest fresh pages are needed (heap.c, fewest_pages). */
#define GP_ARENA_FEWEST_PAGES (1u << 24)
/* Flag to gp_arena_alloc_ex: the request's stream captures a graph and the caller allows fresh
 * pages for it (GPOOL_ALLOC_IN_CAPTURE; the thread's capture mode is relaxed meanwhile): the
 * streams layer's refusal (gp_reuse_ops.may_drive) then stops the polls of other streams, not the
 * mapping. */
#define GP_ARENA_CAPTURE_MAP (1u << 23)

enum { GP_SLOT_FREE = 0, GP_SLOT_LIVE = 1, GP_SLOT_CACHED = 2, GP_SLOT_PENDING = 3 };

typedef struct gp_slab {
    uintptr_t base;
    uint32_t slot_size;
    uint16_t nslots, nfree;
    uint64_t recip; /* ceil(2^40 / slot_size): slot index by multiplication */
    uintptr_t tag;  /* stream the slab serves */
    uint8_t cls;
    uint16_t stream;   /* index into gp_arena.streams */
    const void *owner; /* thread cache that refills from it first (cuts false sharing) */
    gp_range *range;
    struct gp_slab *prev, *next; /* the (class, stream) partial list */
    /* Per slot: state and requested bytes. Written by thread caches without the lock, so
     * relaxed atomics (plain moves on x86). */
    _Atomic uint8_t state[GP_SLAB_MAX_SLOTS];
    _Atomic uint32_t req[GP_SLAB_MAX_SLOTS];
    uint16_t free_stack[GP_SLAB_MAX_SLOTS];
} gp_slab;

static inline uint8_t gp_slot_state(gp_slab *s, uint32_t i)
{
    return atomic_load_explicit(&s->state[i], memory_order_relaxed);
}
static inline void gp_slot_set(gp_slab *s, uint32_t i, uint8_t v)
{
    atomic_store_explicit(&s->state[i], v, memory_order_relaxed);
}
static inline uint32_t gp_slot_req(gp_slab *s, uint32_t i)
{
    return atomic_load_explicit(&s->req[i], memory_order_relaxed);
}
static inline void gp_slot_set_req(gp_slab *s, uint32_t i, uint32_t v)
{
    atomic_store_explicit(&s->req[i], v, memory_order_relaxed);
}
/* Index of the slot starting at p, or -1 when p is not the start of a slot of s. */
static inline long gp_slot_index(const gp_slab *s, uintptr_t p)
{
    uintptr_t off = p - s->base;
    uint64_t i = ((uint64_t)off * s->recip) >> 40;
    if (i * s->slot_size != off || i >= s->nslots) return -1;
    return (long)i;
}

/* Per region: the slab of each granule. Read without the lock by the free fast path, so the
 * table never moves and entries are atomics. The first member of gp_arena, so that
 * gp_arena_slab_of can read it inline; the arena's other fields are arena.c's own
 * (arena_internal.h). */
typedef struct gp_arena_map {
    struct gp_arena_region {
        uintptr_t base;
        size_t size;
        _Atomic(gp_slab *) *granule;
    } regs[GP_MAX_REGIONS];
    _Atomic size_t nregs;
} gp_arena_map;

/* Opaque outside arena.c and the debug checker (arena_internal.h). */
typedef struct gp_arena gp_arena;

/* ---------- the stream-reuse rule, as the arena asks it (reuse.c) ----------
 * One way down: the arena decides when streams must be asked and which (it holds the marks and
 * the pending slots); the streams layer answers what is done, in return values, and never calls
 * an arena function; the arena then applies the answer itself (clean, hand over, free). Every
 * call below is made under the arena lock; the streams layer takes its own lock inside (lock
 * order: an arena's lock, then the streams'), and may make driver calls (with its context
 * entered and left inside each call). */

/* A request, as a poll or a claim sees it. */
typedef struct gp_reuse_req {
    uintptr_t tag;  /* the requesting stream */
    unsigned flags; /* the request's GPOOL_ALLOC_* flags, and GP_POLL_QUERY_ONLY */
} gp_reuse_req;

/* A stream the arena holds pending memory of (marked free ranges or pending slots). */
typedef struct gp_reuse_pending {
    uintptr_t tag;
    /* With QUERY_ONLY: a span marked by tag fits the request, and the latest position among
     * the marks that fit (whether one still fits once tag's work up to a position is done);
     * without, 1 and UINT64_MAX. */
    int fits;
    uint64_t fit_seq;
} gp_reuse_pending;

/* One finding, applied in order: hand_over 0, stream from's work up to position upto is done
 * (its marks there and its pending slots turn clean); hand_over 1, stream to now waits for
 * from's work up to upto: from's marks up to there become to's, at to_seq (reuse.c, rule 5;
 * pending slots keep waiting). */
typedef struct gp_reuse_step {
    int hand_over;
    uintptr_t from, to;
    uint64_t upto, to_seq;
} gp_reuse_step;

/* A deferred device free whose streams' work is done (reuse.c, rules 3 and 4): the arena frees
 * ptr on stream tag at position seq, then with clean set cleans tag (a released stream's tag of
 * its own, done: reuse.c free_done). */
typedef struct gp_reuse_free {
    void *ptr;
    uintptr_t tag;
    uint64_t seq;
    int clean;
} gp_reuse_free;

#define GP_REUSE_STREAMS 64 /* pending streams one poll asks about at most */
#define GP_REUSE_FREES   64 /* deferred frees one answer carries at most */

/* What a poll or a synchronize found. */
typedef struct gp_reuse_answer {
    size_t nsteps, nfrees;
    int more;   /* more deferred frees are done than frees holds: ask frees_done */
    int forget; /* the streams layer would forget streams with nothing pending: call forget */
    gp_reuse_step steps[2 * GP_REUSE_STREAMS]; /* at most two per stream asked */
    gp_reuse_free frees[GP_REUSE_FREES];
} gp_reuse_answer;

/* What the streams layer found at a stream's release: tags whose work is now known done, for
 * the arena to clean. */
typedef struct gp_reuse_release {
    size_t nclean;
    int more; /* more tags are done than clean holds: ask release again with tag 0 */
    uintptr_t clean[GP_REUSE_STREAMS];
} gp_reuse_release;

typedef struct gp_reuse_ops {
    /* GPOOL_OK, or the error a request on stream tag fails with if it needs driver calls
     * (polling, mapping, growing, synchronizing): a stream capturing a CUDA graph may only get
     * memory already free. Asked only when driver calls are ahead: it is one itself. */
    gpool_status (*may_drive)(void *ctx, uintptr_t tag);
    /* The position (seq) a free on stream tag gets now: where a range given back (a slab
     * emptied, a range taken and put back) goes pending. Asked when that happens, rarely. */
    uint64_t (*position)(void *ctx, uintptr_t tag);
    /* Before a request maps fresh pages (or splits a range, QUERY_ONLY): of the n streams in p
     * (n <= GP_REUSE_STREAMS), which positions are done now (events queried, recorded where
     * none covers the frees; with GPOOL_ALLOC_STREAM_WAIT the requester waits instead), and
     * the deferred frees that completed. Fills *ans (counts zeroed by the caller). */
    void (*poll)(void *ctx, const gp_reuse_req *req, const gp_reuse_pending *p, size_t n,
                 gp_reuse_answer *ans);
    /* The request's best place carries a mark of stream from: make it usable (rule 5). Up to
     * two steps into out; returns how many. */
    size_t (*claim)(void *ctx, const gp_reuse_req *req, uintptr_t from, gp_reuse_step *out);
    /* Memory is short (or the pool goes): wait for every stream's work. pending: the arena
     * holds pending or recently freed memory (force: synchronize anyway); others: a failed
     * synchronize of another context's stream fails the call. *synced 1 when everything queued
     * before is done: *ans then holds the deferred frees (all of them done). */
    gpool_status (*sync)(void *ctx, int pending, int others, int *synced, gp_reuse_answer *ans);
    /* After an answer with more set: the next deferred frees done (all, with synced). */
    void (*frees_done)(void *ctx, int synced, gp_reuse_answer *ans);
    /* After an answer with forget set: the n streams the arena still holds pending memory of
     * (n == GP_REUSE_STREAMS: maybe more); the streams layer forgets the others' records. */
    void (*forget)(void *ctx, const uintptr_t *pending, size_t n);
    /* Stream tag goes away (gpool_stream_release): a retired tag of its own for what is pending
     * on it (a value no stream handle has). */
    uintptr_t (*retired_tag)(void *ctx);
    /* Then, the arena's pending memory of tag moved to rtag (moved: there was some): the
     * streams layer's part (its records, an event recorded on tag now, deferred frees), with
     * the tags now known done in *rel. GPOOL_ERR_DRIVER when tag could be neither recorded on
     * nor synchronized (what was pending on it stays pending until a device-wide synchronize).
     * tag 0: only the tags known done since (after an answer with more set). */
    gpool_status (*release)(void *ctx, uintptr_t tag, uintptr_t rtag, int moved,
                            gp_reuse_release *rel);
} gp_reuse_ops;

typedef struct gp_arena_counters {
    uint64_t in_use, requested, peak_in_use, peak_requested, peak_held;
    uint64_t allocs, frees; /* through the arena (thread caches count their own) */
    uint64_t pending_slots; /* small blocks waiting on another stream (gp_arena_stats) */
    uint64_t pending_bytes; /* their slot bytes (counted in in_use until released) */
    uint64_t oom_retries, ooms;
    /* Requested bytes of small blocks allocated through the arena minus those of small blocks
     * freed through it (modulo 2^64: thread caches keep the other part, see gp_tcache); the
     * sum over both is the live small blocks' requested bytes, kept without a walk. */
    uint64_t small_requested;
} gp_arena_counters;

/* A zeroed arena to gp_arena_init (free() it after gp_arena_fini); NULL when out of memory. */
gp_arena *gp_arena_new(void);

/* Set up an arena over a backend context (owned by the arena from now on). reuse: the stream-
 * reuse rule the arena asks, with its ctx (NULL: one stream's memory, reusable at once).
 * owners: the pool's address registry, where the arena's regions are registered (NULL: none). */
gpool_status gp_arena_init(gp_arena *a, gpool_mem_kind kind, const gp_backend_ops *ops, void *bctx,
                           size_t page, size_t va_reserve, size_t small_max,
                           const gp_reuse_ops *reuse, void *ctx, gp_owners *owners);
/* After gp_arena_init, before the first allocation: 1 when a request may make its stream wait
 * for another stream's frees (gpool_config.stream_reuse = wait): free ranges then coalesce
 * whatever streams' frees they hold (heap.h merge_any). */
void gp_arena_set_stream_reuse(gp_arena *a, int waits);
/* After gp_arena_init: the stream whose small blocks come from slabs, and the device's bytes in
 * all (for the OOM report). */
void gp_arena_set_device(gp_arena *a, uintptr_t slab_tag, size_t device_total);

/* The arena lock, for callers that call *_locked functions or the backend under it. */
void gp_arena_lock(gp_arena *a);
void gp_arena_unlock(gp_arena *a);
/* The backend context the arena owns (its calls that need the arena lock take it). */
void *gp_arena_backend(gp_arena *a);
/* The backend's physical page size. */
size_t gp_arena_page(gp_arena *a);
/* Lock held: give the backend's cached unmapped memory back (backend release, keep 0). */
void gp_arena_release_cached_locked(gp_arena *a);

/* Free everything; reports live blocks through *live_count / *live_bytes. */
void gp_arena_fini(gp_arena *a, uint64_t *live_count, uint64_t *live_bytes);

/* Allocate (takes the lock): one attempt at cached and fresh memory (other streams' completed
 * frees polled on the way); out of memory is the caller's ladder's to climb (ladder.h: it calls
 * gp_arena_make_room and tries again, then gp_arena_oom_report). size > 0; align a power of
 * two >= 256. tag = stream. */
gpool_status gp_arena_alloc(gp_arena *a, size_t size, size_t align, uintptr_t tag, uint32_t usage,
                            void **out);

/* A large block from cached memory only, for an arena without slabs or a reuse rule (the host
 * kind's page arenas): 1 and *out when a free range on backed pages fits (no driver call, no
 * question to the streams), else 0 with nothing changed and no error set. Takes the arena's lock,
 * so a caller may hold its own lock around it (nothing here waits on the driver). */
int gp_arena_alloc_cached(gp_arena *a, size_t size, size_t align, uintptr_t tag, uint32_t usage,
                          void **out);

/* As gp_arena_alloc, with the request's GPOOL_ALLOC_* flags (for the polls, gp_reuse_req) and the
 * chunk size the placement chose for a large block (pl->page; gp_arena_alloc: one page). Slabs are
 * backed page by page. */
gpool_status gp_arena_alloc_ex(gp_arena *a, size_t size, size_t align, uintptr_t tag,
                               uint32_t usage, unsigned flags, size_t chunk, void **out);

/* The ladder's make-room rung: wait for pending work (gp_reuse_ops.sync), drop spare slabs and give
 * back the backing of every page that holds no allocated byte; *freed: bytes given back.
 * GPOOL_OK, or the failure that kept memory from going back (message in why, cap bytes; those
 * pages stay cached). Takes the lock; counts one oom retry. */
gpool_status gp_arena_make_room(gp_arena *a, size_t *freed, char *why, size_t cap);
/* The out-of-memory report for a request (size, align, tag as to gp_arena_alloc) that no rung
 * could serve: what the arena holds and why the memory is missing (giveback_why: why make room
 * failed, or ""). Always GPOOL_ERR_OUT_OF_MEMORY. Takes the lock. */
gpool_status gp_arena_oom_report(gp_arena *a, size_t size, size_t align, uintptr_t tag,
                                 const char *giveback_why);

/* Reserve the arena's first address range now (gpool_create: a va_reserve the driver cannot
 * give is reported there, not as out-of-memory by every later allocation). */
gpool_status gp_arena_reserve_first(gp_arena *a);

/* Lock held: the work of stream tag up to seq upto is done — its free ranges and pending
 * slots become reusable by every stream. */
void gp_arena_clean_locked(gp_arena *a, uintptr_t tag, uint64_t upto);

/* Lock held: wait for every stream's work and clean everything (gpool_destroy: blocks freed on
 * their only stream may still be used by work queued there, since such a free is reusable at
 * once and marks nothing). A failed synchronize is tried once more; another context's stream
 * that cannot be synchronized (its owner may have destroyed it) is let pass. */
gpool_status gp_arena_sync_all_locked(gp_arena *a);

/* Stream tag goes away (gpool_stream_release; takes the lock): everything pending on it -- its
 * marks at every position, its pending slots, and in single-stream mode the frees it made clean
 * at once -- becomes pending on a retired tag of its own, which the reuse rule's release ties
 * to an event recorded on tag now, so that a new stream with tag's value starts clean. Errors
 * as the rule's release. */
gpool_status gp_arena_release_stream(gp_arena *a, uintptr_t tag);
/* Takes the lock: queued work now touches a block (its pages stay mapped until a sync). */
void gp_arena_note_queued_use(gp_arena *a);

/* Lock held: free a block (gp_arena_free, for callers that hold the lock). */
gpool_status gp_arena_free_locked(gp_arena *a, void *ptr, uintptr_t tag, uint64_t seq);

/* Free a block (takes the lock). tag/seq: the stream whose work may still use it: the block
 * is reusable at once on that stream, on others after gp_arena_clean_locked(tag, >= seq).
 * GPOOL_ERR_INVALID_POINTER for anything that is not a live block of this arena. */
gpool_status gp_arena_free(gp_arena *a, void *ptr, uintptr_t tag, uint64_t seq);

/* Where addr lies, in one lock-free read of the granule tables: 1 when inside one of the
 * arena's regions (*slab: the slab holding it, or NULL for a large block or free space), 0
 * when not the arena's memory (*slab NULL). */
static inline int gp_arena_resolve(gp_arena *a, uintptr_t addr, gp_slab **slab)
{
    const gp_arena_map *m = (const gp_arena_map *)(const void *)a; /* gp_arena's first member */
    size_t n = atomic_load_explicit(&m->nregs, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        uintptr_t off = addr - m->regs[i].base;
        if (off < m->regs[i].size) {
            *slab = atomic_load_explicit(&m->regs[i].granule[off >> GP_GRANULE_SHIFT],
                                         memory_order_acquire);
            return 1;
        }
    }
    *slab = NULL;
    return 0;
}

/* The slab holding addr, or NULL. Lock-free read of the granule tables. */
static inline gp_slab *gp_arena_slab_of(gp_arena *a, uintptr_t addr)
{
    gp_slab *s;
    gp_arena_resolve(a, addr, &s);
    return s;
}

/* Take up to n free slots of class cls on stream tag into out[] (marks them CACHED). Takes
 * the lock. Returns how many; 0 with the error set on failure. */
size_t gp_arena_slots_take(gp_arena *a, unsigned cls, uintptr_t tag, const void *owner, void **out,
                           size_t n, gpool_status *st);

/* Give back n CACHED slots (from a thread cache). Takes the lock. */
void gp_arena_slots_give(gp_arena *a, void *const *ptrs, size_t n, const void *owner);

/* Requested bytes of live small blocks (scans every slab; lock taken). Expensive: for
 * gpool_calculate_stats only, never for gpool_get_stats. */
uint64_t gp_arena_small_requested(gp_arena *a);

/* Release cached physical memory: wait for pending work (sync), drop the backing of every
 * unused page and give idle memory to the driver until keep bytes stay held beyond in-use. */
gpool_status gp_arena_trim(gp_arena *a, size_t keep);

/* Locked snapshot of counters and bytes held by the backend; O(1) (the lock is held for a
 * copy of the counters only). */
void gp_arena_stats(gp_arena *a, gp_arena_counters *c, size_t *held, size_t *idle);

/* Describe the block containing ptr (lock taken). */
gpool_status gp_arena_block(gp_arena *a, const void *ptr, uintptr_t *base, size_t *size,
                            size_t *requested, uintptr_t *tag, uint32_t *usage);
/* A pointer being freed, resolved once (kind_device.c, kind_host.c) and handed down: whose it is
 * and, when live is 1, the live block starting at it. */
typedef struct gp_block_ref {
    int resolved;     /* the fields owned and slab are set (the gpool_free fast path did) */
    int owned;        /* the kind that resolved it owns the memory ptr lies in */
    int live;         /* ptr is the start of a live block: the fields below describe it */
    gp_slab *slab;    /* a small device block's slab (NULL: a range, or host memory) */
    uintptr_t base;   /* the block's start */
    size_t size;      /* its bytes (slot or range) */
    size_t requested; /* bytes asked for */
    uintptr_t tag;    /* the stream tag it was allocated on */
    uint32_t usage;
    void *range; /* a large block taken off the block map (gp_arena_take_locked) */
} gp_block_ref;

/* Lock held: take the large block starting at ptr off the block map, resolving it once into
 * *ref (live 1: base, size, requested, tag, usage say who it was, and the range is ref->range).
 * The caller then frees it (gp_arena_free_taken_locked) or puts it back
 * (gp_arena_untake_locked). live 0: not a large block's start (nothing taken). */
void gp_arena_take_locked(gp_arena *a, void *ptr, gp_block_ref *ref);
/* Lock held: free the block gp_arena_take_locked took, as gp_arena_free_locked (tag, seq). */
void gp_arena_free_taken_locked(gp_arena *a, gp_block_ref *ref, uintptr_t tag, uint64_t seq);
/* Lock held: put the block gp_arena_take_locked took back on the block map; GPOOL_OK, or
 * GPOOL_ERR_OUT_OF_MEMORY when the map cannot grow (the block then stays allocated). */
gpool_status gp_arena_untake_locked(gp_arena *a, gp_block_ref *ref);
/* Lock held: 1 when a free on stream tag is reusable at once by every stream (one stream is
 * all the arena has seen): its position does not matter. */
int gp_arena_single_stream_locked(gp_arena *a, uintptr_t tag);

/* Bytes in use (lock taken). */
uint64_t gp_arena_in_use(gp_arena *a);

/* Lock must be held: true when ptr lies in one of this arena's regions. */
int gp_arena_contains(gp_arena *a, uintptr_t ptr);

/* Write the JSON array of regions and ranges (lock taken). */
void gp_arena_dump_json(gp_arena *a, FILE *f);

#endif
