/* prog_adv.h — what the adversarial campaign programs (adv_prog.c, adv2_prog.c) share: linked
 * with the simulator (driver entry points by name, as a -lcuda program) and the cudart stand-in
 * (the runtime's memory calls, which the interposer serves); a stream maker and a kernel write
 * the simulator's happens-before referee sees. CHECK-style: 0 on success, 1 otherwise. */
#ifndef GPOOL_TESTS_PROG_ADV_H
#define GPOOL_TESTS_PROG_ADV_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../../sim/gpool_sim.h"
#define PROG_DRIVER_LINKED
#include "prog_driver.h"

/* The cudart stand-in's count of runtime calls that reached it (not the interposer). */
unsigned long standin_calls(void);

#define MIB   ((size_t)1 << 20)
#define DP(p) ((CUdeviceptr)(uintptr_t)(p))

/* A new stream with these flags; NULL when cuStreamCreate fails. */
static inline CUstream make_stream(unsigned flags)
{
    CUstream s = NULL;
    if (cuStreamCreate(&s, flags) != CUDA_SUCCESS) return NULL;
    return s;
}

/* A kernel on s writes [p, p+n). */
static inline int kernel_write(CUstream s, void *p, size_t n)
{
    CHECK(gpoolsim_touch(s, DP(p), n, 1) == CUDA_SUCCESS);
    return 0;
}

#endif
