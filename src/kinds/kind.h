/* A memory kind as the pool sees it: one interface, implemented by the device side
 * (kind_device.c: vidmem through the device arena and thread caches) and the host side
 * (kind_host.c: pinned and mapped host memory). pool.c validates a request, asks the policy where
 * it goes, and calls the kind the placement names, without knowing which one that is. */
#ifndef GPOOL_KIND_H
#define GPOOL_KIND_H

#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "gpool.h"
#include "policy.h"
#include "pool.h"

typedef struct gp_kind {
    /* Allocate a block placed on this kind (pl->kind, pl->page as the policy chose); stream:
     * the request's stream. The kind climbs its retry ladder (ladder.h); *refused: 1 when the
     * kind's budget refused the request (the policy may then move it, pool.c). */
    gpool_status (*alloc)(gpool_t *pool, const gp_placement *pl, const gpool_alloc_params *params,
                          gpool_stream_t stream, int *refused, void **out);
    /* Free ptr, freed on stream tag, if this kind owns it: ref->owned = 1 then (also for a
     * stale or interior pointer into its memory, with GPOOL_ERR_INVALID_POINTER). The pointer
     * is resolved once, into *ref, which the free path hands down (and the caller traces). */
    gpool_status (*free)(gpool_t *pool, void *ptr, uintptr_t tag, gp_block_ref *ref);
    /* Describe the live block containing ptr if this kind owns it (*owned as for free);
     * out->stream is the block's stream tag. */
    gpool_status (*block_info)(gpool_t *pool, const void *ptr, gpool_block_desc *out, int *owned);
    /* Fill this kind's gpool_stats.kind[] entries and add them into the totals and the pool-wide
     * counters; exact: sum small blocks' requested bytes by walking them. */
    void (*stats)(gpool_t *pool, gpool_stats *out, int exact);
    /* Give cached memory back until keep bytes stay cached (per arena). */
    gpool_status (*trim)(gpool_t *pool, size_t keep);
    /* This kind's members of gpool_dump_json's "arenas" object; *first: none written yet. */
    void (*dump_json)(gpool_t *pool, FILE *f, int *first);
    /* Free everything at gpool_destroy; add live blocks to *live / *bytes. Returns GPOOL_OK,
     * or the failure that made it give memory back without knowing queued work done. */
    gpool_status (*destroy)(gpool_t *pool, uint64_t *live, uint64_t *bytes);
} gp_kind;

extern const gp_kind gp_device_kind; /* kind_device.c */
extern const gp_kind gp_host_kind;   /* kind_host.c */

/* Every kind, in the order a pointer is looked up (device blocks are the common case). */
#define GP_KIND_COUNT 2
extern const gp_kind *const gp_kinds[GP_KIND_COUNT];

/* The kind whose memory ptr lies in, resolved once into *ref for a free to hand down: one
 * lock-free read of the pool's address registry (owners.h), which holds both kinds' ranges
 * (ref->slab: a small device block's slab). A pointer in no range goes to the host kind, whose
 * free tells foreign pinned memory from other foreign pointers. */
static inline const gp_kind *gp_kind_resolve(gpool_t *pool, const void *ptr, gp_block_ref *ref)
{
    gpool_mem_kind k = gp_owners_find(&pool->owners, (uintptr_t)ptr, &ref->slab);
    ref->resolved = 1;
    ref->owned = k == GPOOL_MEM_DEVICE;
    return ref->owned ? &gp_device_kind : &gp_host_kind;
}

/* The kind serving memory kind k (never AUTO). */
static inline const gp_kind *gp_kind_of(gpool_mem_kind k)
{
    return k == GPOOL_MEM_DEVICE ? &gp_device_kind : &gp_host_kind;
}

/* Free the deferred blocks (gpool_record_stream) whose streams' events completed -- all of
 * them, after a device-wide synchronize, when sync (memory is short) -- into their kinds
 * (deferred.c). How many there were. No lock held. */
size_t gp_kinds_finish_deferred(gpool_t *pool, int sync);

/* The device kind's arena over vidmem, made at gpool_create (it sets pool->granularity and
 * pool->device_total); host kinds are made on first use. On failure nothing of it is left. */
gpool_status gp_device_kind_create(gpool_t *pool);
/* Undo gp_device_kind_create on gpool_create's error path (no blocks yet, nothing to wait for). */
void gp_device_kind_abandon(gpool_t *pool);
/* gpool_mem_get_info: the driver's free and total device memory, with the memory the pool
 * caches counted as free. */
gpool_status gp_device_mem_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes);

#endif
