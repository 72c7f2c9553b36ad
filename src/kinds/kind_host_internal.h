/* The host kind's state (kind_host.c), shared with its statistics and JSON (kind_host_report.c):
 * one gp_sysmem per pool, with a host_kind for pinned and one for mapped memory, and a record
 * (host_block) for every live block. Not for other files. */
#ifndef GPOOL_KIND_HOST_INTERNAL_H
#define GPOOL_KIND_HOST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "host_clock.h"
#include "host_numa.h"
#include "host_pages.h"
#include "host_small.h"
#include "kind_host.h"
#include "pool.h"
#include "ptrmap.h"

#define KiB            ((size_t)1 << 10)
#define MiB            ((size_t)1 << 20)
#define GiB            ((size_t)1 << 30)
#define HOST_HUGE_PAGE (2 * MiB)

enum { PG_4K = 0, PG_2M = 1, PG_COUNT = 2 };
enum { SRC_LARGE = 0, SRC_SMALL = 1, SRC_DIRECT = 2 };

typedef struct host_block {
    uintptr_t host; /* CPU address (equal to the key under unified addressing) */
    uintptr_t dev;  /* a direct block's device address (its key), registered with it */
    size_t requested, size, page;
    gpool_stream_t stream;
    gpool_mem_kind kind;
    gpool_usage usage;
    uint8_t src, pg, fell_back;
    union {
        struct host_block *next_spare; /* a spare record's next (gp_sysmem.spare) */
        /* a live block's: 0, or the retired tag its free waits on instead of stream, which
         * was released since (gp_sysmem_stream_release) */
        uintptr_t wait;
    };
} host_block;

typedef struct host_kind {
    gp_arena *large[PG_COUNT]; /* made on first use, under sys->lock; never move */
    gp_small *small;           /* made on first use; dropped by trim when small_refs is 0 */
    _Atomic size_t reserved;   /* bytes registered / allocated from the driver */
    /* under sys->lock: */
    uint64_t small_refs; /* live small blocks + small allocs/frees in flight */
    uint64_t requested, in_use, peak_requested, peak_in_use, peak_reserved, peak_cached;
    uint64_t allocs, frees, live, ooms, spills;
    uint64_t pend_n, pend_bytes; /* freed, waiting on the event clock (still in in_use) */
} host_kind;

/* A host block its caller freed, waiting for the streams it was freed and allocated on. */
typedef struct host_pending {
    host_block *b;
    gp_host_mark mark[2];
    unsigned nmark;
} host_pending;

/* When the host kind asks the clock about waiting frees: this many of them or this many bytes;
 * or, when a request would otherwise need fresh memory, this many of its kind (one event per
 * stream covers them all, so a steady state of pairs pays three driver calls -- the last
 * event's query, a record and its query -- per that many frees, and holds that many blocks
 * more). The bytes bound what waits; the count only bounds the records kept (48 bytes each)
 * and a settle's length, so it is set high: a steady loop of small pairs polls once per 4096
 * frees. */
#define HOST_POLL_FREES      4096
#define HOST_POLL_BYTES      ((size_t)8 << 20)
#define HOST_NEED_POLL_FREES 16
#define HOST_NEED_POLL_BYTES ((size_t)4 << 20)
#define HOST_SPARE_RECORDS   HOST_POLL_FREES

struct gp_sysmem {
    pthread_mutex_t lock; /* blocks, counters, arena creation */
    gp_ptrmap blocks;     /* caller's address -> host_block */
    gp_host_env env;
    gp_numa numa;
    int uva, can_map;
    /* registered memory's device pointer is its host pointer: every device has
     * CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM (cuda.h, cuMemHostGetDevicePointer) */
    int reg_same_ptr;
    host_kind k[2];
    host_pending *pend; /* under lock: frees waiting on the event clock */
    size_t npend, cap_pend;
    uint64_t pend_bytes;
    gp_host_clock clock;
    /* under lock: records of settled blocks kept for the warm path (no malloc per pair); at
     * most as many as one settle gives back, freed by trim and destroy */
    host_block *spare;
    size_t nspare;
};

static inline int is_host_kind(gpool_mem_kind kind)
{
    return kind == GPOOL_MEM_HOST_PINNED || kind == GPOOL_MEM_HOST_MAPPED;
}
static inline host_kind *hk(gp_sysmem *s, gpool_mem_kind kind)
{
    return &s->k[kind - GPOOL_MEM_HOST_PINNED];
}

static inline gp_sysmem *sys_of(gpool_t *pool)
{
    return __atomic_load_n(&pool->sys, __ATOMIC_ACQUIRE);
}

/* kind_host_report.c: gp_host_kind's stats and dump_json (kind.h). */
void gp_host_stats(gpool_t *pool, gpool_stats *out, int exact);
void gp_host_dump_json(gpool_t *pool, FILE *f, int *first_member);

#endif
