/* The arena (arena.h): one memory kind's ranges over its backend. Large blocks are best-fit
 * ranges of the address-space heap (heap.c); small ones are slots of slabs (arena_slab.c), whose
 * one-page ranges come from here too. The arena backs exactly the pages that hold allocated bytes,
 * keeps free ranges and slots pending on a stream, and asks the stream-reuse rule (reuse.c,
 * through gp_reuse_ops) which of them are done: it decides when to ask and about which streams,
 * and applies the answers itself (clean, hand over, free). One attempt per request: the retry
 * ladder (ladder.c) makes room and tries again. The JSON memory map is arena_dump.c's. */
#include "arena_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "bad_pointer.h"
#include "check.h"
#include "error.h"

#define MiB ((size_t)1 << 20)

/* ---------- regions ---------- */

static gpool_status region_add(gp_arena *a, size_t min_bytes)
{
    size_t n = atomic_load_explicit(&a->map.nregs, memory_order_relaxed);
    if (n == GP_MAX_REGIONS)
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "%s: address space exhausted (%d regions)",
                       a->ops->name, GP_MAX_REGIONS);
    size_t want = a->va_reserve;
    if (want < min_bytes) want = min_bytes;
    want = (want + a->page - 1) & ~(a->page - 1);
    uintptr_t base = 0;
    size_t got = 0;
    gpool_status st = a->ops->reserve(a->bctx, want, &base, &got);
    if (st != GPOOL_OK) return st;
    _Atomic(gp_slab *) *gran = calloc(got >> GP_GRANULE_SHIFT, sizeof *gran);
    int registered = gran && gp_owners_add_region(a->owners, base, got, a->kind, gran) == 0;
    int idx = registered ? gp_heap_add_region(&a->heap, base, got, a->page) : -1;
    if (idx < 0) {
        if (registered) gp_owners_remove(a->owners, base);
        free(gran);
        a->ops->unreserve(a->bctx, base, got);
        if (gran && !registered)
            return gp_fail(GPOOL_ERR_OUT_OF_MEMORY,
                           "%s: the pool's address registry is full (%d arena regions)",
                           a->ops->name, GP_OWNER_REGIONS);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for a %zu MiB region's tables",
                       got / MiB);
    }
    a->map.regs[n].base = base;
    a->map.regs[n].size = got;
    a->map.regs[n].granule = gran;
    atomic_store_explicit(&a->map.nregs, n + 1, memory_order_release);
    return GPOOL_OK;
}

gpool_status gp_arena_reserve_first(gp_arena *a)
{
    pthread_mutex_lock(&a->lock);
    gpool_status st =
        atomic_load_explicit(&a->map.nregs, memory_order_relaxed) ? GPOOL_OK : region_add(a, 0);
    GP_CHECK_ARENA(a, "reserve");
    pthread_mutex_unlock(&a->lock);
    return st;
}

int gp_arena_contains(gp_arena *a, uintptr_t ptr)
{
    size_t n = atomic_load_explicit(&a->map.nregs, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (ptr - a->map.regs[i].base < a->map.regs[i].size) return 1;
    return 0;
}

/* ---------- physical backing ---------- */

/* Back every unbacked page under r, in chunks of chunk bytes (the placement's). */
static gpool_status back_range(gp_arena *a, gp_range *r, size_t chunk)
{
    gp_region *g = &a->heap.regions[r->region];
    size_t first = (r->addr - g->base) >> g->page_shift;
    size_t last = (r->addr + r->size - 1 - g->base) >> g->page_shift;
    for (size_t p = first; p <= last;) {
        if (g->page_phys[p]) {
            p++;
            continue;
        }
        size_t q = p;
        while (q <= last && !g->page_phys[q])
            q++;
        gpool_status st = a->ops->back(a->bctx, g, p, q - p, chunk);
        if (st != GPOOL_OK) return st;
        p = q;
    }
    return GPOOL_OK;
}

static size_t held_bytes(gp_arena *a)
{
    return a->ops->held_bytes(a->bctx);
}

static void note_held(gp_arena *a)
{
    size_t h = held_bytes(a);
    if (h > a->c.peak_held) a->c.peak_held = h;
}

/* ---------- placement with the pressure path ---------- */

/* True when r has pages that are not backed yet. */
static int needs_backing(gp_arena *a, gp_range *r)
{
    gp_region *g = &a->heap.regions[r->region];
    size_t first = (r->addr - g->base) >> g->page_shift;
    size_t last = (r->addr + r->size - 1 - g->base) >> g->page_shift;
    for (size_t p = first; p <= last; p++)
        if (!g->page_phys[p]) return 1;
    return 0;
}

/* True when some stream other than tag has free ranges waiting for its work. */
static int others_pending(gp_arena *a, uintptr_t tag)
{
    uintptr_t tags[8];
    size_t n = gp_heap_dirty_tags(&a->heap, tags, 8);
    for (size_t i = 0; i < n; i++)
        if (tags[i] != tag) return 1;
    for (size_t i = 0; i < a->npending; i++)
        if (a->pending[i].tag != tag) return 1;
    return 0;
}

/* A request that finds no exact fit (it splits a free range) polls the other streams first,
 * at most once every GP_SPLIT_POLL_EVERY large requests: their freed ranges that completed turn
 * clean and coalesce, and the best fit then often is one of them instead of a cut into a larger
 * clean range. The rate bounds the extra cuEventQuery/cuEventRecord calls (the measurements:
 * docs/history/placement-experiments.md). */
#define GP_SPLIT_POLL_EVERY 4u

/* True when taking r split a free range (no free range fit it exactly). */
static int split_fit(const gp_range *r)
{
    return r && ((r->next && r->next->is_free) || (r->prev && r->prev->is_free));
}

static gp_range *take(gp_arena *a, size_t size, size_t align, uintptr_t tag, unsigned flags,
                      int *no_nodes)
{
    /* slabs, and small blocks of streams other than the slab stream (out of the large blocks'
     * holes, which they would split; they do not move the slab zone), go top-down */
    if (flags & (GP_ARENA_SLAB | GP_ARENA_SMALL_RANGE))
        return gp_heap_take_top(&a->heap, size, align, tag, (flags & GP_ARENA_SLAB) != 0, no_nodes);
    return gp_heap_take(&a->heap, size, align, tag, no_nodes);
}

/* Put back a range just taken for stream tag: it may have been tag's pending free, so it goes
 * back pending at tag's current position (never earlier than the free it came from). */
static void give_back(gp_arena *a, gp_range *r, uintptr_t tag)
{
    gp_heap_give(&a->heap, r, gp_arena_free_tag(a, tag), gp_arena_position(a, tag));
}

/* ---------- asking the reuse rule (gp_reuse_ops), applying its answers ---------- */

/* Every stream's work is known done (after a device-wide synchronize). */
static void clean_all(gp_arena *a)
{
    uintptr_t tags[64];
    size_t n;
    /* releasing a pending slot can empty its slab, whose range comes back pending too */
    do {
        while (a->npending)
            gp_arena_clean_locked(a, a->pending[0].tag, UINT64_MAX);
        n = gp_heap_dirty_tags(&a->heap, tags, 64);
        for (size_t i = 0; i < n; i++)
            gp_arena_clean_locked(a, tags[i], UINT64_MAX);
    } while (n || a->npending);
}

/* Up to max streams with pending free ranges or pending small blocks. */
static size_t pending_tags(gp_arena *a, uintptr_t *out, size_t max)
{
    size_t n = gp_heap_dirty_tags(&a->heap, out, max);
    for (size_t i = 0; i < a->npending && n < max; i++) {
        size_t j = 0;
        while (j < n && out[j] != a->pending[i].tag)
            j++;
        if (j == n) out[n++] = a->pending[i].tag;
    }
    return n;
}

/* The streams' findings, in the order they were made. */
static void apply_steps(gp_arena *a, const gp_reuse_step *st, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (st[i].hand_over)
            gp_heap_retag(&a->heap, st[i].from, st[i].upto, st[i].to, st[i].to_seq);
        else
            gp_arena_clean_locked(a, st[i].from, st[i].upto);
    }
}

/* The deferred frees that completed, asking for the rest while the answer says there are more;
 * then, where the streams layer asks, which streams still have anything pending here. */
static void apply_answer(gp_arena *a, gp_reuse_answer *ans, int synced)
{
    apply_steps(a, ans->steps, ans->nsteps);
    for (;;) {
        for (size_t i = 0; i < ans->nfrees; i++) {
            const gp_reuse_free *f = &ans->frees[i];
            gp_arena_free_locked(a, f->ptr, f->tag, f->seq);
            if (f->clean) gp_arena_clean_locked(a, f->tag, UINT64_MAX);
        }
        if (!ans->more) break;
        ans->nfrees = 0;
        ans->more = 0;
        a->reuse->frees_done(a->reuse_ctx, synced, ans);
    }
    if (synced) clean_all(a); /* everything queued before the synchronize is done */
    if (ans->forget) {
        uintptr_t tags[GP_REUSE_STREAMS];
        a->reuse->forget(a->reuse_ctx, tags, pending_tags(a, tags, GP_REUSE_STREAMS));
    }
}

/* Which of the n streams in p mark a span of at least want bytes, and the latest position of
 * such a mark: one walk of the marked ranges for all of them. */
static void mark_fits(gp_arena *a, gp_reuse_pending *p, size_t n, size_t want)
{
    for (size_t k = 0; k < n; k++) {
        p[k].fits = 0;
        p[k].fit_seq = 0;
    }
    for (const gp_range *r = a->heap.dirty; r; r = r->dnext)
        for (size_t i = 0; i < r->nmarks; i++) {
            const gp_mark *m = &r->marks[i];
            if (m->hi - m->lo < want) continue;
            for (size_t k = 0; k < n; k++)
                if (p[k].tag == m->tag) {
                    if (!p[k].fits || m->seq > p[k].fit_seq) p[k].fit_seq = m->seq;
                    p[k].fits = 1;
                }
        }
}

/* Before fresh pages (or, QUERY_ONLY, a split), ask which of the other streams' pending
 * positions are done, and apply what comes back (reuse.c, rules 2 and 5). */
static void poll_streams(gp_arena *a, uintptr_t tag, unsigned flags, size_t want)
{
    uintptr_t tags[GP_REUSE_STREAMS];
    gp_reuse_pending p[GP_REUSE_STREAMS];
    size_t n = pending_tags(a, tags, GP_REUSE_STREAMS);
    for (size_t i = 0; i < n; i++)
        p[i] = (gp_reuse_pending){.tag = tags[i], .fits = 1, .fit_seq = UINT64_MAX};
    if (flags & GP_POLL_QUERY_ONLY) mark_fits(a, p, n, want);
    gp_reuse_req req = {.tag = tag, .flags = flags};
    gp_reuse_answer ans;
    ans.nsteps = ans.nfrees = 0;
    ans.more = ans.forget = 0;
    a->reuse->poll(a->reuse_ctx, &req, p, n, &ans);
    apply_answer(a, &ans, 0);
}

/* Memory short, or the pool goes (force): wait for every stream's work, then clean everything
 * and free what waited on it. */
static gpool_status sync_streams(gp_arena *a, int force, int others)
{
    uintptr_t tags[1];
    int pending =
        force || gp_heap_dirty_tags(&a->heap, tags, 1) || a->npending || a->frees_since_sync;
    gp_reuse_answer ans;
    ans.nsteps = ans.nfrees = 0;
    ans.more = ans.forget = 0;
    int synced = 0;
    gpool_status st = a->reuse->sync(a->reuse_ctx, pending, others, &synced, &ans);
    if (synced) {
        apply_answer(a, &ans, 1);
        a->frees_since_sync = 0;
    }
    return st;
}

gpool_status gp_arena_sync_all_locked(gp_arena *a)
{
    if (!a->reuse) return GPOOL_OK;
    gpool_status st = sync_streams(a, 1, 0);
    return st == GPOOL_OK ? st : sync_streams(a, 1, 0); /* a failure is tried once more */
}

/* Where the best place for the request lies on ranges other streams' frees may still be used
 * by (their marks), claim it first (reuse.c, rule 5): placement then follows the free space as
 * one stream would see it, instead of cutting fresh holes while another stream's freed ranges
 * wait. One claim per stream whose mark is on that place. */
static void claim(gp_arena *a, size_t size, size_t align, uintptr_t tag, unsigned flags)
{
    uintptr_t from[GP_MARKS];
    if (!a->reuse || a->streams_seen < 2 ||
        (flags & (GP_ARENA_SLAB | GP_ARENA_SMALL_RANGE | GPOOL_ALLOC_NO_STREAM_WAIT)))
        return;
    size_t n = gp_heap_claim(&a->heap, size, align, tag, from);
    if (!n) return;
    if (gp_arena_may_drive(a, tag) != GPOOL_OK) {
        gp_clear_error();
        return;
    }
    gp_reuse_req req = {.tag = tag, .flags = flags};
    for (size_t i = 0; i < n; i++) {
        gp_reuse_step st[2];
        apply_steps(a, st, a->reuse->claim(a->reuse_ctx, &req, from[i], st));
    }
}

static gpool_status place_once(gp_arena *a, size_t size, size_t align, uintptr_t tag,
                               unsigned flags, size_t chunk, gp_range **out)
{
    int no_nodes = 0;
    claim(a, size, align, tag, flags);
    gp_range *r = take(a, size, align, tag, flags, &no_nodes);
    int polls = a->reuse &&
                (!r || (flags & GP_ARENA_SLAB) || needs_backing(a, r) ||
                 (a->allocs_since_poll >= GP_SPLIT_POLL_EVERY && split_fit(r))) &&
                others_pending(a, tag);
    if (a->allocs_since_poll < GP_SPLIT_POLL_EVERY) a->allocs_since_poll++;
    if (a->reuse && (polls || !r || needs_backing(a, r))) {
        /* driver calls ahead: the streams layer may forbid them for this stream (capture) */
        gpool_status st = gp_arena_may_drive(a, tag);
        if (st != GPOOL_OK && ((r && !needs_backing(a, r)) || (flags & GP_ARENA_CAPTURE_MAP))) {
            gp_clear_error(); /* the poll was optional: serve what is free for the stream, or */
            polls = 0;        /* map fresh pages where the caller allows it */
        } else if (st != GPOOL_OK) {
            if (r) give_back(a, r, tag);
            return st;
        }
    }
    if (polls) {
        /* Before mapping fresh pages, see whether other streams' freed ranges are done. */
        int fresh = !r || (flags & GP_ARENA_SLAB) || needs_backing(a, r);
        if (r) give_back(a, r, tag);
        /* a split fit records a new event only on a stream with a pending range it would fit */
        poll_streams(a, tag, flags | (fresh ? 0 : GP_POLL_QUERY_ONLY), size);
        a->allocs_since_poll = 0;
        r = take(a, size, align, tag, flags, &no_nodes);
    }
    if (!r && !no_nodes) {
        gpool_status st = region_add(a, size + align);
        if (st != GPOOL_OK) return st;
        r = take(a, size, align, tag, flags, &no_nodes);
    }
    if (!r) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for block bookkeeping");
    gpool_status st = back_range(a, r, chunk);
    note_held(a);
    if (st != GPOOL_OK) {
        give_back(a, r, tag);
        return st;
    }
    note_held(a);
    *out = r;
    return GPOOL_OK;
}

static gpool_status make_room_impl(gp_arena *a, size_t *freed);

/* Make physical memory available: wait for pending work, drop spare slabs, unback every
 * page that holds no allocated byte; *freed: bytes unbacked. Returns GPOOL_OK, or the failure
 * that kept memory from being given back (its message in why): a failed synchronize (then
 * nothing is unmapped: queued work may still use any cached page) or a failed unmap or
 * release (those pages stay cached, retried later). Lock held. */
static gpool_status make_room(gp_arena *a, size_t *freed, char *why, size_t cap)
{
    *freed = 0;
    if (cap) why[0] = 0;
    if (a->reuse) {
        gpool_status s = sync_streams(a, 0, 1);
        if (s != GPOOL_OK) {
            if (cap) snprintf(why, cap, "%s", gpool_last_error());
            return s;
        }
    }
    gpool_status st = make_room_impl(a, freed);
    if (st != GPOOL_OK && cap) snprintf(why, cap, "%s", gpool_last_error());
    return st;
}

/* Returns the first give-back failure (GPOOL_OK: none); *freed: bytes unbacked. */
static gpool_status make_room_impl(gp_arena *a, size_t *freed)
{
    int synced = 1; /* make_room synchronized (or there is nothing to synchronize) */
    gp_arena_slabs_drop_spare_locked(a);
    /* After a synchronize, with the lock held since, what came back meanwhile (spare slabs,
     * slots that were pending) is idle too, and no queued work reads through a freed span. */
    if (synced && a->reuse) clean_all(a);
    if (synced && a->ndead) gp_arena_spans_settle_locked(a);
    /* Pages under ranges still pending on a stream count as used: the GPU may touch them. */
    gp_heap_pin_dirty(&a->heap, 1);
    gpool_status st = GPOOL_OK;
    for (size_t i = 0; i < a->heap.nregions; i++) {
        size_t f = 0;
        gpool_status s2 =
            a->ops->unback_unused(a->bctx, &a->heap.regions[i], 0, a->heap.regions[i].npages, &f);
        *freed += f;
        if (st == GPOOL_OK) st = s2;
    }
    gp_heap_pin_dirty(&a->heap, 0);
    return st;
}

/* "N x <=SIZE (BYTES)" for the size buckets (powers of two) holding the most live bytes. */
static void live_by_size(gp_arena *a, char *out, size_t cap)
{
    uint64_t count[64] = {0}, bytes[64] = {0};
    for (size_t i = 0; i < a->heap.nregions; i++)
        GP_HEAP_FOREACH(&a->heap, i, r)
        {
            if (r->is_free || gp_range_is_pad(r)) continue;
            gp_slab *s = r->aux;
            if (!s) {
                unsigned b = 64u - (unsigned)__builtin_clzll((unsigned long long)r->size - 1);
                count[b]++;
                bytes[b] += r->size;
                continue;
            }
            unsigned b = 64u - (unsigned)__builtin_clzll((unsigned long long)s->slot_size - 1);
            for (uint32_t k = 0; k < s->nslots; k++)
                if (gp_slot_state(s, k) != GP_SLOT_FREE) {
                    count[b]++;
                    bytes[b] += s->slot_size;
                }
        }
    size_t len = 0;
    out[0] = 0;
    for (int shown = 0; shown < 4; shown++) {
        int best = -1;
        for (int b = 0; b < 64; b++)
            if (bytes[b] && (best < 0 || bytes[b] > bytes[best])) best = b;
        if (best < 0 || len >= cap) break;
        len += (size_t)snprintf(out + len, cap - len, "%s%" PRIu64 " x <=%zu KiB (%" PRIu64 " MiB)",
                                shown ? ", " : "", count[best], ((size_t)1 << best) >> 10,
                                bytes[best] >> 20);
        bytes[best] = 0;
    }
}

/* The host's physical memory (sysinfo), 0 when unknown: what a host arena can never exceed. */
static size_t host_physical_bytes(void)
{
    struct sysinfo si;
    if (sysinfo(&si) != 0) return 0;
    return (size_t)si.totalram * (size_t)si.mem_unit;
}

static gpool_status oom_report(gp_arena *a, size_t size, const char *giveback_why)
{
    size_t held = held_bytes(a), idle = a->ops->idle_bytes(a->bctx);
    size_t drv_free = a->ops->driver_free(a->bctx);
    size_t waste = held > a->c.in_use + idle ? held - a->c.in_use - idle : 0;
    size_t others = 0, largest = gp_heap_largest_free(&a->heap);
    if (a->device_total && drv_free != SIZE_MAX && a->device_total > drv_free + held)
        others = a->device_total - drv_free - held;
    /* the cause: what holds the most of what is missing, named as it is */
    char cause[400];
    size_t host_total = a->device_total ? 0 : host_physical_bytes(); /* host arenas only */
    if (giveback_why && giveback_why[0])
        snprintf(cause, sizeof cause, "cached memory could not be given back: %s", giveback_why);
    else if (host_total && size > host_total)
        snprintf(cause, sizeof cause,
                 "host memory: the request is larger than the host's %zu bytes of physical "
                 "memory (sysinfo)",
                 host_total);
    else if (largest < size && a->c.in_use + size <= a->device_total)
        snprintf(cause, sizeof cause,
                 "address space: no free range of %zu bytes left in the "
                 "reservations (raise va_reserve)",
                 size);
    else if (waste && (waste >= size || (waste >= others && waste >= a->c.in_use)))
        snprintf(cause, sizeof cause,
                 "pinned pages: %zu bytes are free inside pages or chunks "
                 "that also hold live blocks (a chunk is given back only whole)",
                 waste);
    else if (others > a->c.in_use)
        snprintf(cause, sizeof cause,
                 "other users of the device (other pools of this process "
                 "or other processes) hold %zu bytes",
                 others);
    else if (host_total && drv_free != SIZE_MAX && drv_free + idle < size)
        snprintf(cause, sizeof cause,
                 "host memory: %zu of the host's %zu bytes of physical memory are available "
                 "(other processes, the page cache or this one hold the rest)",
                 drv_free, host_total);
    else
        snprintf(cause, sizeof cause,
                 "real exhaustion: live blocks of this pool hold %" PRIu64 " bytes (free "
                 "blocks, or lower what other users of the device take: %zu bytes)",
                 a->c.in_use, others);
    char drv[48];
    if (drv_free == SIZE_MAX)
        snprintf(drv, sizeof drv, "unknown");
    else
        snprintf(drv, sizeof drv, "%zu", drv_free);
    char live[200];
    live_by_size(a, live, sizeof live);
    a->c.ooms++;
    return gp_fail(GPOOL_ERR_OUT_OF_MEMORY,
                   "%s: cannot allocate %zu bytes: driver free %s bytes, pool holds %zu bytes "
                   "(%" PRIu64 " in use, %zu cached unmapped, %zu free inside partly used pages), "
                   "largest free address range %zu bytes; live blocks: %s; cause: %s",
                   a->ops->name, size, drv, held, a->c.in_use, idle, waste,
                   gp_heap_largest_free(&a->heap), live[0] ? live : "none", cause);
}

/* One attempt: the ladder (ladder.c) makes room and tries again, not the arena. */
gpool_status gp_arena_place(gp_arena *a, size_t size, size_t align, uintptr_t tag, unsigned flags,
                            size_t chunk, gp_range **out)
{
    /* under pressure (the ladder made room before this attempt): the place that needs the
     * fewest fresh pages (heap.c gp_heap_take) */
    a->heap.fewest_pages = (flags & GP_ARENA_FEWEST_PAGES) != 0;
    gpool_status st = place_once(a, size, align, tag, flags & ~GP_ARENA_FEWEST_PAGES, chunk, out);
    a->heap.fewest_pages = 0;
    return st;
}

/* ---------- for the kinds: setup, the lock and the backend ---------- */

gp_arena *gp_arena_new(void)
{
    return calloc(1, sizeof(gp_arena));
}

void gp_arena_set_stream_reuse(gp_arena *a, int waits)
{
    a->heap.merge_any = waits;
}

void gp_arena_set_device(gp_arena *a, uintptr_t slab_tag, size_t device_total)
{
    a->slab_tag = slab_tag;
    a->device_total = device_total;
}

void gp_arena_lock(gp_arena *a)
{
    pthread_mutex_lock(&a->lock);
}

void gp_arena_unlock(gp_arena *a)
{
    pthread_mutex_unlock(&a->lock);
}

void *gp_arena_backend(gp_arena *a)
{
    return a->bctx;
}

size_t gp_arena_page(gp_arena *a)
{
    return a->page;
}

void gp_arena_release_cached_locked(gp_arena *a)
{
    a->ops->release(a->bctx, 0);
}

/* ---------- for gpool_stream_release ---------- */

/* Lock held: what is pending on tag becomes pending on `to` at to_seq. 1 when anything was. */
static int retire_stream_locked(gp_arena *a, uintptr_t tag, uintptr_t to, uint64_t to_seq)
{
    int moved = 0;
    if (a->streams_seen == 1 && a->only_tag == tag) {
        /* its frees were made clean at once (single-stream mode): its queued work may still
         * use them, as when a second stream appears (note_stream) */
        gp_heap_retag_clean(&a->heap, tag, 0);
        a->streams_seen = 2;
        moved = 1;
    }
    if (gp_heap_largest_tagged(&a->heap, tag)) {
        gp_heap_retag(&a->heap, tag, UINT64_MAX, to, to_seq);
        moved = 1;
    }
    for (size_t i = 0; i < a->npending; i++)
        if (a->pending[i].tag == tag) {
            a->pending[i].tag = to;
            a->pending[i].seq = to_seq;
            moved = 1;
        }
    return moved;
}

gpool_status gp_arena_release_stream(gp_arena *a, uintptr_t tag)
{
    if (!a->reuse) return GPOOL_OK;
    pthread_mutex_lock(&a->lock); /* lock order: the arena's, then the streams' */
    uintptr_t rtag = a->reuse->retired_tag(a->reuse_ctx);
    int moved = retire_stream_locked(a, tag, rtag, 0);
    gp_reuse_release rel = {0};
    gpool_status st = a->reuse->release(a->reuse_ctx, tag, rtag, moved, &rel);
    for (;;) {
        for (size_t i = 0; i < rel.nclean; i++)
            gp_arena_clean_locked(a, rel.clean[i], UINT64_MAX);
        if (!rel.more) break;
        rel = (gp_reuse_release){0};
        a->reuse->release(a->reuse_ctx, 0, 0, 0, &rel); /* a backlog that completed */
    }
    GP_CHECK_ARENA(a, "release stream");
    pthread_mutex_unlock(&a->lock);
    return st;
}

void gp_arena_note_queued_use(gp_arena *a)
{
    pthread_mutex_lock(&a->lock);
    a->frees_since_sync++;
    pthread_mutex_unlock(&a->lock);
}

/* ---------- public ---------- */

gpool_status gp_arena_init(gp_arena *a, gpool_mem_kind kind, const gp_backend_ops *ops, void *bctx,
                           size_t page, size_t va_reserve, size_t small_max,
                           const gp_reuse_ops *reuse, void *ctx, gp_owners *owners)
{
    memset(a, 0, sizeof *a);
    if (gp_heap_init(&a->heap) != 0)
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory creating an arena");
    pthread_mutex_init(&a->lock, NULL);
    a->kind = kind;
    a->ops = ops;
    a->bctx = bctx;
    a->page = page;
    a->va_reserve = va_reserve;
    a->small_max = small_max;
    a->reuse = reuse;
    a->reuse_ctx = ctx;
    a->owners = owners;
    a->allocs_since_poll = GP_SPLIT_POLL_EVERY; /* the first split fit may poll */
    gp_ptrmap_init(&a->blocks);
    return GPOOL_OK;
}

void gp_arena_fini(gp_arena *a, uint64_t *live_count, uint64_t *live_bytes)
{
    uint64_t n = 0, bytes = 0;
    size_t nregs = atomic_load_explicit(&a->map.nregs, memory_order_relaxed);
    for (size_t i = 0; i < a->heap.nregions; i++)
        GP_HEAP_FOREACH(&a->heap, i, r)
        {
            if (r->is_free || gp_range_is_pad(r)) continue;
            gp_slab *s = r->aux;
            if (!s) {
                n++;
                bytes += r->size;
                continue;
            }
            for (uint16_t k = 0; k < s->nslots; k++)
                if (gp_slot_state(s, k) == GP_SLOT_LIVE) {
                    n++;
                    bytes += s->slot_size;
                }
            free(s);
        }
    if (live_count) *live_count = n;
    if (live_bytes) *live_bytes = bytes;
    if (a->ops && a->ops->fini) a->ops->fini(a->bctx, &a->heap);
    gp_arena_spans_fini(a);
    for (size_t i = 0; i < nregs; i++) {
        gp_owners_remove(a->owners, a->map.regs[i].base);
        free(a->map.regs[i].granule);
    }
    gp_heap_fini(&a->heap);
    gp_ptrmap_fini(&a->blocks);
    free(a->streams);
    free(a->pending);
    pthread_mutex_destroy(&a->lock);
    memset(a, 0, sizeof *a);
}

gpool_status gp_arena_alloc(gp_arena *a, size_t size, size_t align, uintptr_t tag, uint32_t usage,
                            void **out)
{
    return gp_arena_alloc_ex(a, size, align, tag, usage, 0, a->page, out);
}

gpool_status gp_arena_alloc_ex(gp_arena *a, size_t size, size_t align, uintptr_t tag,
                               uint32_t usage, unsigned flags, size_t chunk, void **out)
{
    gpool_status st;
    GP_ASSERT(size > 0 && align >= GP_MIN_ALIGN && (align & (align - 1)) == 0 && out);
    pthread_mutex_lock(&a->lock);
    gp_arena_note_stream(a, tag);
    /* Slabs serve the arena's slab stream (the pool's default stream); small blocks of other
     * streams are heap ranges, whose per-stream tags need no per-stream slabs. */
    if (size <= a->small_max && align <= GP_MIN_ALIGN && tag == a->slab_tag) {
        st = gp_arena_slab_alloc_locked(a, size, tag, out);
    } else {
        size_t rounded = (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
        gp_range *r = NULL;
        if (size <= a->small_max && align <= GP_MIN_ALIGN && a->streams_seen >= 2)
            flags |= GP_ARENA_SMALL_RANGE;
        /* under pressure, after make room: a block across partly used pages' free tail and
         * head, where that needs fewer fresh pages than the best place (or there is none) */
        int spans =
            (flags & GP_ARENA_FEWEST_PAGES) && rounded > a->small_max && align <= GP_MIN_ALIGN;
        size_t fresh = SIZE_MAX;
        if (spans) {
            a->heap.fewest_pages = 1;
            fresh = gp_heap_fresh_pages(&a->heap, rounded, align, tag);
            a->heap.fewest_pages = 0;
        }
        if (spans && fresh != SIZE_MAX && fresh && gp_arena_span_locked(a, rounded, tag, fresh, &r))
            st = GPOOL_OK;
        else
            st = gp_arena_place(a, rounded, align, tag, flags, chunk, &r);
        if (st == GPOOL_ERR_OUT_OF_MEMORY && spans &&
            gp_arena_span_locked(a, rounded, tag, SIZE_MAX, &r))
            st = GPOOL_OK;
        if (st == GPOOL_OK && gp_ptrmap_put(&a->blocks, r->addr, r) != 0) {
            gp_heap_give(&a->heap, r, gp_arena_free_tag(a, tag), 0);
            st = gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the block map");
        }
        if (st == GPOOL_OK) {
            r->requested = size;
            r->usage = usage;
            gp_arena_use_bytes(a, (int64_t)r->size);
            gp_arena_count_alloc(a, size);
            *out = (void *)r->addr;
        }
    }
    GP_CHECK_ARENA(a, "alloc");
    pthread_mutex_unlock(&a->lock);
    return st;
}

int gp_arena_alloc_cached(gp_arena *a, size_t size, size_t align, uintptr_t tag, uint32_t usage,
                          void **out)
{
    GP_ASSERT(size > 0 && align >= GP_MIN_ALIGN && (align & (align - 1)) == 0 && out);
    if (a->reuse || a->small_max) return 0; /* the warm path is for plain arenas */
    size_t rounded = (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
    int no_nodes = 0, served = 0;
    pthread_mutex_lock(&a->lock);
    gp_arena_note_stream(a, tag);
    gp_range *r = take(a, rounded, align, tag, 0, &no_nodes);
    if (r && needs_backing(a, r)) {
        give_back(a, r, tag); /* fresh pages ahead: the caller's full path backs them */
        r = NULL;
    }
    if (r && gp_ptrmap_put(&a->blocks, r->addr, r) != 0) {
        give_back(a, r, tag);
        r = NULL;
    }
    if (r) {
        r->requested = size;
        r->usage = usage;
        gp_arena_use_bytes(a, (int64_t)r->size);
        gp_arena_count_alloc(a, size);
        *out = (void *)r->addr;
        served = 1;
    }
    GP_CHECK_ARENA(a, "alloc_cached");
    pthread_mutex_unlock(&a->lock);
    return served;
}

/* A free of ptr that is no large block's start: say whether it is inside one (interior),
 * in the arena's memory (already freed) or not the arena's at all. Lock held; walks the
 * region (an error path). */
static gpool_status bad_range_pointer(gp_arena *a, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (!gp_arena_contains(a, p)) return gp_bad_pointer(ptr, GP_PTR_FOREIGN, a->kind, 0);
    for (size_t i = 0; i < a->heap.nregions; i++) {
        gp_region *g = &a->heap.regions[i];
        if (p - g->base >= g->size) continue;
        GP_HEAP_FOREACH(&a->heap, i, x)
        {
            if (p - x->addr >= x->size) continue;
            if (!x->is_free && !x->aux)
                return gp_bad_pointer(ptr, GP_PTR_INTERIOR, a->kind, x->addr);
            break;
        }
    }
    return gp_bad_pointer(ptr, GP_PTR_FREED, a->kind, 0);
}

gpool_status gp_arena_free_locked(gp_arena *a, void *ptr, uintptr_t tag, uint64_t seq)
{
    uintptr_t p = (uintptr_t)ptr;
    gp_arena_note_stream(a, tag);
    a->frees_since_sync++;
    gp_slab *s = gp_arena_slab_of(a, p);
    if (s) return gp_arena_slab_free_locked(a, s, ptr, tag, seq);
    gp_range *r = gp_ptrmap_del(&a->blocks, p);
    if (!r) return bad_range_pointer(a, ptr);
    gp_arena_use_bytes(a, -(int64_t)r->size);
    gp_arena_count_free(a, r->requested);
    if (a->nspans && gp_arena_span_free_locked(a, r, gp_arena_free_tag(a, tag), seq))
        return GPOOL_OK;
    gp_heap_give(&a->heap, r, gp_arena_free_tag(a, tag), seq);
    return GPOOL_OK;
}

gpool_status gp_arena_free(gp_arena *a, void *ptr, uintptr_t tag, uint64_t seq)
{
    pthread_mutex_lock(&a->lock);
    gpool_status st = gp_arena_free_locked(a, ptr, tag, seq);
    GP_CHECK_ARENA(a, "free");
    pthread_mutex_unlock(&a->lock);
    return st;
}

void gp_arena_clean_locked(gp_arena *a, uintptr_t tag, uint64_t upto)
{
    gp_heap_clean(&a->heap, tag, upto);
    gp_arena_pending_clean_locked(a, tag, upto);
}

gpool_status gp_arena_trim(gp_arena *a, size_t keep)
{
    pthread_mutex_lock(&a->lock);
    size_t freed;
    char why[300];
    gpool_status st = make_room(a, &freed, why, sizeof why);
    gpool_status rel = a->ops->release(a->bctx, keep); /* unmapped pages: safe in any case */
    if (st == GPOOL_OK) /* the message: what failed, and that memory stays cached */
        st = rel;
    else
        st = gp_fail(st, "gpool_trim: %s (the memory concerned stays cached)", why);
    GP_CHECK_ARENA(a, "trim");
    pthread_mutex_unlock(&a->lock);
    return st;
}

void gp_arena_stats(gp_arena *a, gp_arena_counters *c, size_t *held, size_t *idle)
{
    pthread_mutex_lock(&a->lock);
    note_held(a); /* failed backings leave cached pages behind: keep the peak honest */
    *c = a->c;    /* pending_slots and pending_bytes are kept where slots park and leave */
    *held = held_bytes(a);
    *idle = a->ops->idle_bytes(a->bctx);
    pthread_mutex_unlock(&a->lock);
}

/* Lock held: as gp_arena_block. */
static gpool_status block_locked(gp_arena *a, const void *ptr, uintptr_t *base, size_t *size,
                                 size_t *requested, uintptr_t *tag, uint32_t *usage)
{
    uintptr_t p = (uintptr_t)ptr;
    gpool_status st = GPOOL_OK;
    gp_slab *s = gp_arena_slab_of(a, p);
    if (s) {
        st = gp_arena_slab_block_locked(s, a->kind, ptr, base, size, requested, tag, usage);
    } else {
        gp_range *r = gp_ptrmap_get(&a->blocks, p); /* a block's start: no walk */
        for (size_t i = 0; i < a->heap.nregions && !r; i++) {
            gp_region *g = &a->heap.regions[i];
            if (p - g->base >= g->size) continue;
            GP_HEAP_FOREACH(&a->heap, i, x)
            {
                if (p - x->addr < x->size) {
                    r = x;
                    break;
                }
            }
        }
        if (!r || r->is_free || r->aux) {
            st = gp_bad_pointer(ptr, GP_PTR_FREED, a->kind, 0);
        } else {
            *base = r->addr;
            *size = r->size;
            *requested = r->requested;
            *tag = r->tag;
            *usage = r->usage;
        }
    }
    return st;
}

gpool_status gp_arena_block(gp_arena *a, const void *ptr, uintptr_t *base, size_t *size,
                            size_t *requested, uintptr_t *tag, uint32_t *usage)
{
    pthread_mutex_lock(&a->lock);
    gpool_status st = block_locked(a, ptr, base, size, requested, tag, usage);
    pthread_mutex_unlock(&a->lock);
    return st;
}

uint64_t gp_arena_in_use(gp_arena *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t n = a->c.in_use;
    pthread_mutex_unlock(&a->lock);
    return n;
}

gpool_status gp_arena_make_room(gp_arena *a, size_t *freed, char *why, size_t cap)
{
    pthread_mutex_lock(&a->lock);
    a->c.oom_retries++;
    gpool_status st = make_room(a, freed, why, cap);
    GP_CHECK_ARENA(a, "make_room");
    pthread_mutex_unlock(&a->lock);
    return st;
}

gpool_status gp_arena_oom_report(gp_arena *a, size_t size, size_t align, uintptr_t tag,
                                 const char *giveback_why)
{
    pthread_mutex_lock(&a->lock);
    /* the bytes the failed attempt placed: a new slab for a slab stream's small block */
    size_t placed = size <= a->small_max && align <= GP_MIN_ALIGN && tag == a->slab_tag
                        ? gp_slab_bytes(gp_size_class(size))
                        : (size + GP_MIN_ALIGN - 1) & ~(size_t)(GP_MIN_ALIGN - 1);
    gpool_status st = oom_report(a, placed, giveback_why);
    pthread_mutex_unlock(&a->lock);
    return st;
}

void gp_arena_take_locked(gp_arena *a, void *ptr, gp_block_ref *ref)
{
    gp_range *r = gp_ptrmap_del(&a->blocks, (uintptr_t)ptr);
    ref->live = r != NULL;
    ref->range = r;
    if (!r) return;
    ref->base = r->addr;
    ref->size = r->size;
    ref->requested = r->requested;
    ref->tag = r->tag;
    ref->usage = r->usage;
}

void gp_arena_free_taken_locked(gp_arena *a, gp_block_ref *ref, uintptr_t tag, uint64_t seq)
{
    gp_range *r = ref->range;
    gp_arena_note_stream(a, tag);
    a->frees_since_sync++;
    gp_arena_use_bytes(a, -(int64_t)r->size);
    gp_arena_count_free(a, r->requested);
    if (!a->nspans || !gp_arena_span_free_locked(a, r, gp_arena_free_tag(a, tag), seq))
        gp_heap_give(&a->heap, r, gp_arena_free_tag(a, tag), seq);
    ref->range = NULL;
    GP_CHECK_ARENA(a, "free");
}

gpool_status gp_arena_untake_locked(gp_arena *a, gp_block_ref *ref)
{
    gp_range *r = ref->range;
    ref->range = NULL;
    if (gp_ptrmap_put(&a->blocks, r->addr, r) == 0) return GPOOL_OK;
    /* the map does not grow for the entry just taken out: this cannot happen; were it to, the
     * block stays allocated (queued work may use it) rather than be freed early */
    return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the block map");
}

int gp_arena_single_stream_locked(gp_arena *a, uintptr_t tag)
{
    return a->streams_seen == 1 && tag == a->only_tag;
}
