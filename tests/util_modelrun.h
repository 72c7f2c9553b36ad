/* util_modelrun.h — drive gpool and the executable model (util_model.h) side by side with
 * random operations: allocations of all three kinds and sizes across every threshold, frees
 * on the allocating or another stream, trims, several pools. Used by test_model (clean runs),
 * test_faults_pairs (runs with injected faults) and fuzz_ops. No Criterion dependency. */
#ifndef GPOOL_TESTS_UTIL_MODELRUN_H
#define GPOOL_TESTS_UTIL_MODELRUN_H

#include "util_model.h"

#define MODELRUN_STREAMS 3

typedef struct model_run {
    model m;
    gpool_t *pools[MODEL_MAX_POOLS];
    int npools;
    size_t capacity;
    gpool_stream_t streams[MODELRUN_STREAMS]; /* [0] = NULL; the others made by the caller */
    int faults;       /* 1 while injected faults may fire: statuses are checked, not outcomes */
    unsigned long op; /* operations run */
    unsigned long violations; /* the simulator's happens-before violations at the start */
    char why[1024];           /* the first violation */
} model_run;

/* Set the device capacity, reset the simulator's counts, create npools pools (tcache on or
 * off by rng). streams[1..] must be valid streams of the device's primary context. 0 on
 * failure (why says). */
int model_run_start(model_run *r, uint32_t *rng, size_t capacity, int npools,
                    const gpool_stream_t *streams);
/* One random operation, then every check; 0 on a violation (why says). */
int model_run_op(model_run *r, uint32_t *rng);
/* Stats invariants now (after faults stop: take a new driver-call baseline first). */
int model_run_check(model_run *r);
/* Free every live block, destroy the pools, check nothing is left in the simulator. */
int model_run_finish(model_run *r);

#endif
