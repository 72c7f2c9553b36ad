/* The pool object shared by the public API files. */
#ifndef GPOOL_POOL_H
#define GPOOL_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "arena.h"
#include "driver.h"
#include "gpool.h"
#include "owners.h"

typedef struct gp_tcache gp_tcache;

struct gpool {
    uint64_t id; /* unique per pool in this process; thread caches match on it */
    gpool_config cfg;
    gp_drv_counters cnt;        /* the pool's driver calls (dc.cnt points here) */
    gp_devctx dc;               /* driver table, device, primary context and &cnt */
    gp_arena *device;           /* the device kind's arena (kind_device.c) */
    struct gp_sysmem *sys;      /* host kinds, created by kind_host.c on first use */
    struct gp_streams *streams; /* stream-ordered reuse state (stream.c) */
    _Atomic size_t stream_busy; /* recorded + deferred blocks (stream.c); while 0,
                                   frees skip stream.c entirely */
    pthread_mutex_t lock;       /* guards tcaches list, host arena creation */
    gp_tcache *tcaches;
    _Atomic uint64_t flush_epoch; /* bumped when thread caches should give back */
    uintptr_t default_tag;
    size_t granularity;
    size_t device_total; /* cuDeviceTotalMem: no device block larger than this can fit */
    /* totals of thread caches that have gone away */
    uint64_t tc_allocs, tc_frees, tc_hits;
    uint64_t tc_requested; /* their requested-bytes balance (see gp_tcache.requested) */
    _Atomic uint64_t fallbacks;
    FILE *trace;
    pthread_mutex_t trace_lock;
    uint64_t trace_t0;
    /* peaks reported so far, by kind (under lock): reported peaks never go down */
    gpool_kind_stats peaks_seen[GPOOL_MEM_KIND_COUNT];
    /* device allocations that failed out of memory / that released cache and retried: once
     * per gpool_alloc call, however many attempts it made */
    _Atomic uint64_t dev_ooms, dev_oom_retries;
    _Atomic(struct gp_ipc *) ipc; /* blocks shared with other processes (ipc.h); NULL: none */
    /* which kind's memory each address is (owners.h); last: 14 KiB the hot fields stay before */
    gp_owners owners;
};

gpool_status gp_config_check(const gpool_config *cfg);

/* Add one kind's counters into a total (gpool_stats.kind[GPOOL_MEM_AUTO]). */
void gp_kind_stats_add(gpool_kind_stats *total, const gpool_kind_stats *k);

/* Thread caches (tcache.h for the fast paths, tcache.c). */
/* Give every thread cache's blocks back at the owning threads' next call (or now for the
 * calling thread). */
void gp_tcache_flush_all(gpool_t *pool);
/* Sum of thread caches' counters (pool->lock held by the caller); O(threads). requested: the
 * caches' part of the small blocks' requested bytes (modulo 2^64, see gp_tcache). */
void gp_tcache_totals(gpool_t *pool, uint64_t *allocs, uint64_t *frees, uint64_t *hits,
                      uint64_t *cached_bytes, uint64_t *requested);
/* Drop all caches of a pool being destroyed (pool->lock held). */
void gp_tcache_pool_gone(gpool_t *pool);

/* The registry of live pools (registry.c): register at create, unregister first at
 * destroy; the lock guards gp_registry_alive. */
int gp_pool_register(gpool_t *pool);
void gp_pool_unregister(gpool_t *pool);
void gp_registry_lock(void);
void gp_registry_unlock(void);
int gp_registry_alive(gpool_t *pool, uint64_t id);
/* Other pools of the process on pool's device give cached memory back (stage 1: unmapped
 * pages, stage 2: idle mapped pages too, after synchronizing); 1 when one had some. */
int gp_registry_relieve(gpool_t *pool, int stage);
void gp_tcache_flush_mine(gpool_t *pool);
/* Take back the caches of threads not inside a gpool call right now (idle ones); bytes taken. */
size_t gp_tcache_reclaim_idle(gpool_t *pool);

/* Trace log (trace.c). */
/* Opens the configured trace file; GPOOL_ERR_IO when it cannot be written. */
gpool_status gp_trace_open(gpool_t *pool);
void gp_trace_event(gpool_t *pool, int is_alloc, void *ptr, size_t size, gpool_stream_t stream);
void gp_trace_close(gpool_t *pool);

#endif
