/* util_model.h — the executable model of gpool (issue 13): live blocks with size, kind, stream
 * and pool; device capacity and page size; the rule for which requests must succeed (stated
 * in gpool.h at gpool_alloc); the stats invariants. Small on purpose: it says what gpool
 * promises, not how gpool works. Shared by tests/test_model.c, tests/test_faults*.c and
 * fuzz/fuzz_ops.c. No Criterion dependency: checks return 0 and write the reason. */
#ifndef GPOOL_TESTS_UTIL_MODEL_H
#define GPOOL_TESTS_UTIL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

#define MODEL_MAX_LIVE  512
#define MODEL_MAX_POOLS 8

typedef struct model_block {
    void *ptr;  /* what gpool_alloc returned */
    void *host; /* where the CPU reads and writes it */
    size_t size;
    gpool_mem_kind kind;
    gpool_stream_t stream;
    uint32_t seed; /* pattern written into it */
    int pool;
} model_block;

typedef struct model {
    size_t capacity;  /* device bytes */
    size_t page;      /* device granularity P */
    size_t chunk_max; /* largest chunk (pages) a device block of this run was backed with */
    size_t grow_max;  /* pages growth may pin, per pool (gpool.h: G; src/backends/vidmem.h) */
    int shared;       /* 1: pools of the device share pressure (gpool.h): no pool's cache
                         counts against another */
    int npools;
    uint64_t slack_requested; /* device requested bytes may exceed the model by this much
                                 (fuzz_ops: small blocks pending on a held stream) */
    gpool_t *pools[MODEL_MAX_POOLS];
    size_t nlive;
    model_block live[MODEL_MAX_LIVE];
    gpool_stats prev[MODEL_MAX_POOLS];   /* last stats seen: peaks never go down */
    uint64_t oom_fails[MODEL_MAX_POOLS]; /* OOM statuses gpool returned, by pool */
    uint64_t base_ooms[MODEL_MAX_POOLS]; /* stats.ooms when the pool was attached */
    unsigned long base_sim_total;        /* simulator call total at the baseline */
    uint64_t base_pool_total[MODEL_MAX_POOLS];
} model;

/* Start a model of `npools` pools on one device of `capacity` bytes and page size `page`. */
void model_init(model *m, size_t capacity, size_t page, int npools, gpool_t *const *pools);

/* Pages a live block may pin: ceil(size/P) + 1, plus 2 (C - 1) once chunks of C pages back
 * device blocks (a chunk is given back only when none of its pages holds a byte). */
size_t model_block_pages(const model *m, const model_block *b);

/* 1 when gpool must serve a request of `size` bytes of `kind` in pool `pool` now (gpool.h,
 * gpool_alloc: "When it must succeed"); `other_bytes` are device bytes held by other users. */
int model_must_fit(const model *m, int pool, gpool_mem_kind kind, size_t size, size_t other_bytes);
/* 1 when the request can never fit (more pages than the device has): gpool refuses it at once. */
int model_never_fits(const model *m, gpool_mem_kind kind, size_t size);

/* Record a successful allocation / a free (by pointer; returns 0 when unknown). */
void model_add(model *m, int pool, void *ptr, size_t size, gpool_mem_kind kind,
               gpool_stream_t stream, uint32_t seed);
int model_remove(model *m, void *ptr, model_block *out);
/* A device block of `size` bytes was backed: remember its chunk size (pages). */
void model_note_chunk(model *m, size_t chunk_bytes);

/* Write / verify a block's pattern (every byte of the first 4 KiB, then samples: 1 in 4093 to
 * 1 MiB, several in every 2 MiB page, the last byte). check returns 1 when intact. */
void model_fill(void *p, size_t n, uint32_t seed);
int model_check(const void *p, size_t n, uint32_t seed);

/* Baseline for the driver-call invariant: take it when no driver call of the harness itself
 * happens between this call and the next model_check_stats. */
void model_baseline(model *m);

/* Every stats invariant for every pool; 0 with `why` filled on the first violation.
 * check_calls: compare driver_calls with the simulator's counts (needs GPOOL_LIBCUDA = the
 * simulator, and no driver call by anyone else since model_baseline and the last
 * gpoolsim_reset_counts). */
int model_check_stats(model *m, int check_calls, char *why, size_t cap);
/* Every live block still holds its pattern; 0 with `why` filled otherwise. */
int model_check_content(const model *m, char *why, size_t cap);

#endif
