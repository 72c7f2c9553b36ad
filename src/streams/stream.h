/* Stream-ordered reuse: the event clock (stream.c: tags, per-stream free positions, events,
 * waits) and the reuse rule (reuse.c: deferred frees of blocks used on several streams, and the
 * answers the device arena asks for through gp_stream_reuse_ops; the rule is stated at its
 * top). */
#ifndef GPOOL_STREAM_H
#define GPOOL_STREAM_H

#include "arena.h"
#include "gpool.h"

typedef struct gp_streams gp_streams;

/* Stream tags. A tag names one stream for the reuse rules; it is the CUstream handle except
 * for CU_STREAM_PER_THREAD, which names a different stream on each thread ("Stream
 * synchronization behavior": the per-thread default stream is local to its thread), so it is
 * tagged per thread with a value no stream handle has (handles are aligned pointers or the
 * small constants). Work can be queued on a per-thread tag only from its own thread. */
uintptr_t gp_stream_tag(gpool_stream_t s);
/* The handle to pass to the driver for tag (CU_STREAM_PER_THREAD for per-thread tags). */
gpool_stream_t gp_tag_stream(uintptr_t tag);
/* 1 when the calling thread can queue work on tag (every tag but other threads' per-thread
 * default streams). */
int gp_tag_mine(uintptr_t tag);

/* Per-thread default streams: on the caller's own per-thread tag, once another thread has
 * wanted its frees (it cannot record an event on that stream), cover every free so far with
 * an event now. Called at each alloc and free on CU_STREAM_PER_THREAD. */
void gp_stream_cover(gpool_t *pool, uintptr_t tag);

gpool_status gp_streams_create(gpool_t *pool);
/* Destroys events; deferred blocks are left to the arenas' teardown. */
void gp_streams_destroy(gpool_t *pool);

/* The position (seq) a free on stream tag gets now (pass it to gp_arena_free). */
uint64_t gp_stream_free_seq(gpool_t *pool, uintptr_t tag);

/* Note that the block at ptr (allocated on alloc_tag) is also used on stream tag. */
gpool_status gp_stream_record(gpool_t *pool, void *ptr, uintptr_t alloc_tag, uintptr_t tag);

/* Wait for the work queued on stream tag (cuStreamSynchronize). */
gpool_status gp_stream_wait(gpool_t *pool, uintptr_t tag);

/* If device block ptr (resolved in ref) was used on other streams, queue its free behind
 * events on them and return 1 (*st says how that went); 0 when the caller frees it now. */
int gp_stream_defer_free(gpool_t *pool, void *ptr, uintptr_t tag, const gp_block_ref *ref,
                         gpool_status *st);

/* Device block ptr (resolved in ref), allocated on another stream than tag: its free also
 * waits for the allocating stream. 1 when the free went that way (*st says how). */
int gp_stream_cross_free(gpool_t *pool, void *ptr, uintptr_t tag, const gp_block_ref *ref,
                         gpool_status *st);

/* Host block ptr (freed on stream tag) is freed once the work queued on tag and on the
 * streams recorded for it has completed: queued behind events (a later gp_stream_take_done
 * hands it back), or, when those streams are idle or had to be waited for here, *free_now = 1:
 * the caller frees it now. */
gpool_status gp_stream_defer_host_free(gpool_t *pool, void *ptr, uintptr_t tag,
                                       const gpool_block_desc *desc, int *free_now);

/* A deferred free whose events completed, for its kind to finish: a host block (host), or a
 * device block to free into the arena as f says. */
typedef struct gp_done_free {
    int host;
    gp_reuse_free f;
} gp_done_free;

/* Take up to max (at most 64) deferred frees whose events completed into out[] -- every one,
 * after a device-wide synchronize made here, when sync -- for the caller to free. No lock held
 * by the caller. Returns how many. */
size_t gp_stream_take_done(gpool_t *pool, int sync, gp_done_free *out, size_t max);

/* 1 when the block at ptr (the address its caller got) was freed and its free waits on
 * streams' events (a block used on other streams): no live block any more. */
int gp_stream_free_pending(gpool_t *pool, uintptr_t ptr);

/* Blocks of kind freed by the caller whose free still waits on streams' events. */
void gp_stream_deferred(gpool_t *pool, gpool_mem_kind kind, uint64_t *count, uint64_t *bytes,
                        uint64_t *requested);

/* The stream-reuse rule as the device arena asks it (arena.h gp_reuse_ops; ctx: the pool).
 * Answers only: none of these calls an arena function. */
extern const gp_reuse_ops gp_stream_reuse_ops;
void gp_stream_poll(void *ctx, const gp_reuse_req *req, const gp_reuse_pending *p, size_t n,
                    gp_reuse_answer *ans);
size_t gp_stream_claim(void *ctx, const gp_reuse_req *req, uintptr_t from, gp_reuse_step *out);
gpool_status gp_stream_sync(void *ctx, int pending, int others, int *synced, gp_reuse_answer *ans);
void gp_stream_frees_done(void *ctx, int synced, gp_reuse_answer *ans);
void gp_stream_forget(void *ctx, const uintptr_t *pending, size_t n);
uint64_t gp_stream_position(void *ctx, uintptr_t tag);
uintptr_t gp_stream_retired_tag(void *ctx);
gpool_status gp_stream_release_rule(void *ctx, uintptr_t tag, uintptr_t rtag, int moved,
                                    gp_reuse_release *rel);

/* Learn stream tag's context now, while the caller knows it is alive (an allocation on it):
 * a stream destroyed before its blocks' frees reach the pool (the PyTorch hooks' free batch)
 * is then known to be the pool context's, whose synchronize covers its work, instead of
 * "context unknown", which no synchronize covers. Cost: a lock and a lookup; one
 * cuStreamGetCtx per stream. */
void gp_stream_learn_ctx(gpool_t *pool, uintptr_t tag);

/* 1 when stream tag is capturing a CUDA graph (cuStreamIsCapturing; 0 without that entry). */
int gp_stream_capturing(gpool_t *pool, uintptr_t tag);
/* gp_reuse_ops.may_drive (ctx: the pool): GPOOL_ERR_UNSUPPORTED (message naming capture) for a
 * capturing stream. */
gpool_status gp_stream_may_drive(void *ctx, uintptr_t tag);

#endif
