/**
 * @file gpool_preload.h
 * @brief What the LD_PRELOAD drop-in (libgpool_preload.so) exports besides CUDA's own names.
 *
 * gpool_preload.h — the counters of libgpool_preload.so, the LD_PRELOAD interposer that serves
 * cudaMalloc/cudaFree, cuMemAlloc/cuMemFree and the host allocations from gpool pools
 * (docs/dropin.md). A program run under it does not link it, so it finds these functions at
 * run time, and gets NULL when the interposer is not loaded:
 *
 *     typedef gpool_status (*stats_fn)(int, gpool_stats *);
 *     stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "gpool_preload_stats_get");
 *     gpool_stats st = GPOOL_STATS_INIT;
 *     if (get && get(0, &st) == GPOOL_OK) printf("%zu driver calls\n", ...);
 *
 * The structs follow gpool.h's rules (docs/concepts/structs.md: gpool_stats grows at the end,
 * struct_size first);
 * gpool_preload_batch_stats only grows at the end too.
 */
#ifndef GPOOL_PRELOAD_PUBLIC_H
#define GPOOL_PRELOAD_PUBLIC_H

#include "gpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The counters of the interposer's pool of one device, as gpool_get_stats() fills them.
 *  @param device the CUDA device ordinal.
 *  @param out    filled on success; set out->struct_size (GPOOL_STATS_INIT) first.
 *  @retval GPOOL_OK
 *  @retval GPOOL_ERR_NO_DEVICE the interposer has no pool for device yet (nothing allocated
 *          there, or the interposer passes every call through).
 *  @retval GPOOL_ERR_INVALID_ARG out is NULL or its struct_size is out of range.
 *  @return a gpool_status as listed. Thread-safe; cost: as gpool_get_stats(). */
GPOOL_API gpool_status gpool_preload_stats_get(int device, gpool_stats *out);

/** What the cudaFree batch (GPOOL_CONF cudafree=batch, the default) did since start, summed
 *  over all threads. */
typedef struct gpool_preload_batch_stats {
    unsigned long long frees; /**< cudaFree/cuMemFree calls queued in a synchronizing batch (not the
                                 fenced ones) */
    unsigned long long flushes;            /**< flushes (each: one synchronize per device in it) */
    unsigned long long syncs;              /**< device synchronizes made by flushes */
    unsigned long long peak_bytes;         /**< most bytes one thread's batch held */
    unsigned long long limit_bytes;        /**< the batch limit of device 0 */
    unsigned long long events;             /**< events recorded by flushes (cudafree_flush=event) */
    unsigned long long peak_waiting_bytes; /**< most bytes flushed but waiting on events */
} gpool_preload_batch_stats;

/** Fill *out with the cudaFree batch's counters (all zero before the first cudaFree).
 *  @param out filled; must not be NULL.
 *  Thread-safe (takes each thread's batch lock in turn: a sum, not one instant); cost: linear
 *  in the number of threads that have freed. */
GPOOL_API void gpool_preload_batch_stats_get(gpool_preload_batch_stats *out);

#ifdef __cplusplus
}
#endif

#endif
