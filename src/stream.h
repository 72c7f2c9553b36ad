/* Stream-ordered reuse (stream.c): per-stream free sequence numbers, events, blocks used on
 * several streams (gpool_record_stream). */
#ifndef GPOOL_STREAM_H
#define GPOOL_STREAM_H

#include "arena.h"
#include "gpool.h"

typedef struct gp_streams gp_streams;

gpool_status gp_streams_create(gpool_t *pool);
/* Destroys events; deferred blocks are left to the arenas' teardown. */
void gp_streams_destroy(gpool_t *pool);

/* The sequence number a free on stream tag gets now (pass it to gp_arena_free). */
uint64_t gp_stream_free_seq(gpool_t *pool, uintptr_t tag);

/* Note that the block at ptr (allocated on alloc_tag) is also used on stream tag. */
gpool_status gp_stream_record(gpool_t *pool, void *ptr, uintptr_t alloc_tag, uintptr_t tag);

/* If ptr was used on other streams, queue its free behind events on them and return 1
 * (*st says how that went); 0 when the caller frees it now. */
int gp_stream_defer_free(gpool_t *pool, void *ptr, uintptr_t tag, gpool_status *st);

/* Before freeing ptr now (host kinds): wait for the streams recorded on it, forget them. */
gpool_status gp_stream_wait_recorded(gpool_t *pool, void *ptr);

/* Free deferred blocks whose events completed (no lock held by the caller). */
void gp_stream_process(gpool_t *pool);

/* Blocks freed by the caller whose free waits on other streams' events. */
size_t gp_stream_deferred(gpool_t *pool);

/* Arena hooks: gp_poll_fn and gp_sync_fn. */
void gp_stream_poll(void *owner, gp_arena *a, uintptr_t tag, unsigned flags);
gpool_status gp_stream_sync(void *owner, gp_arena *a);

#endif
