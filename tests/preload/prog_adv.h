/* prog_adv.h — what the adversarial campaign programs (adv_prog.c, adv2_prog.c, adv3_prog.c) share:
 * linked with the simulator (driver entry points by name, as a -lcuda program) and the cudart
 * stand-in (the runtime's memory calls, which the interposer serves); a stream maker and a kernel
 * write the simulator's happens-before referee sees. CHECK-style: 0 on success, 1 otherwise. */
#ifndef GPOOL_TESTS_PROG_ADV_H
#define GPOOL_TESTS_PROG_ADV_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

/* One scenario of a campaign program: a function of no argument, of one int (arg) or of two
 * (arg, arg2), named on the command line. */
typedef struct adv_mode {
    const char *name;
    int (*run)(void);
    int (*run_arg)(int);
    int arg;
    int (*run_args)(int, int);
    int arg2;
} adv_mode;

/* A campaign program's main: set up devs simulated devices, run the scenario argv[1] names and
 * print the referee's violations. Exit 0 (passed), 1 (setup or a check failed), 2 (no such
 * scenario) or 4 (passed its checks, but the referee saw violations). */
static inline int adv_main(const adv_mode *modes, size_t n, int devs, int argc, char **argv)
{
    if (argc < 2) return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (prog_linked_setup(devs)) return 1;
    int rc = 2;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(argv[1], modes[i].name))
            rc = modes[i].run       ? modes[i].run()
                 : modes[i].run_arg ? modes[i].run_arg(modes[i].arg)
                                    : modes[i].run_args(modes[i].arg, modes[i].arg2);
    unsigned long v = gpoolsim_violations();
    printf("violations=%lu\n", v);
    fflush(stdout);
    if (rc == 0 && v) rc = 4;
    return rc;
}

#endif
