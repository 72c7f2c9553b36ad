/* prog_driver.h — the helper programs' shared driver preamble (the programs of tests/preload/).
 *
 * Programs that reach the driver as cudart, CuPy and PyTorch do: prog_driver_open() dlopens
 * $GPOOL_LIBCUDA (else libcuda.so.1) and takes its cuGetProcAddress_v2; prog_proc() and
 * prog_proc_v() look entry points up through it (under LD_PRELOAD they answer the interposer's
 * hooks); prog_driver_setup() does both and makes device 0's primary context current.
 * prog_sim_sym() finds a symbol of the simulated driver (gpoolsim_*), prog_sim_count() its call
 * counter. Programs linked with the driver (-lcuda: the simulator) define PROG_DRIVER_LINKED
 * before including this and get prog_linked_setup(n): cuInit, then the primary contexts of
 * devices 0..n-1 retained into prog_ctx[], device 0's current. CHECK-style: 0 on success, 1
 * (with a "failed:" line) otherwise. */
#ifndef GPOOL_TESTS_PROG_DRIVER_H
#define GPOOL_TESTS_PROG_DRIVER_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "prog_check.h"

typedef CUresult (*prog_getproc_fn)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

static void *prog_lib __attribute__((unused)); /* the driver prog_driver_open() loaded */
static prog_getproc_fn prog_getproc __attribute__((unused)); /* its cuGetProcAddress_v2 */

/* cuGetProcAddress(name, version, flags), NULL when the driver does not have it. */
static inline void *prog_proc_v(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (!prog_getproc || prog_getproc(name, &fn, version, flags, &q) != CUDA_SUCCESS ||
        q != CU_GET_PROC_ADDRESS_SUCCESS)
        return NULL;
    return fn;
}

/* The CUDA 12.0 ABI of name, default stream semantics. */
static inline void *prog_proc(const char *name)
{
    return prog_proc_v(name, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
}

static inline int prog_driver_open(void)
{
    const char *path = getenv("GPOOL_LIBCUDA");
    prog_lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(prog_lib);
    *(void **)&prog_getproc = dlsym(prog_lib, "cuGetProcAddress_v2");
    CHECK(prog_getproc);
    return 0;
}

/* prog_driver_open(), cuInit, device 0's primary context current (all through
 * cuGetProcAddress). */
static inline int prog_driver_setup(void)
{
    if (prog_driver_open()) return 1;
    CUresult (*init)(unsigned);
    CUresult (*dev_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    *(void **)&init = prog_proc("cuInit");
    *(void **)&dev_get = prog_proc("cuDeviceGet");
    *(void **)&retain = prog_proc("cuDevicePrimaryCtxRetain");
    *(void **)&set_current = prog_proc("cuCtxSetCurrent");
    CHECK(init && dev_get && retain && set_current);
    CUdevice dev;
    CUcontext ctx;
    CHECK(init(0) == CUDA_SUCCESS && dev_get(&dev, 0) == CUDA_SUCCESS);
    CHECK(retain(&ctx, dev) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS);
    return 0;
}

/* A symbol of the simulated driver at $GPOOL_LIBCUDA (NULL without one). */
static inline void *prog_sim_sym(const char *name)
{
    const char *path = getenv("GPOOL_LIBCUDA");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    return h ? dlsym(h, name) : NULL;
}

/* The simulator's count of calls to entry (0 without the simulator). */
static inline unsigned long prog_sim_count(const char *entry)
{
    unsigned long (*count)(const char *);
    *(void **)&count = prog_sim_sym("gpoolsim_call_count");
    return count ? count(entry) : 0;
}

#ifdef PROG_DRIVER_LINKED
#define PROG_MAX_DEVICES 2
static CUcontext prog_ctx[PROG_MAX_DEVICES]
    __attribute__((unused)); /* primary contexts prog_linked_setup retained */

static inline int prog_linked_setup(int devices)
{
    CHECK(devices >= 1 && devices <= PROG_MAX_DEVICES);
    CHECK(cuInit(0) == CUDA_SUCCESS);
    for (int i = 0; i < devices; i++) {
        CUdevice d;
        CHECK(cuDeviceGet(&d, i) == CUDA_SUCCESS);
        CHECK(cuDevicePrimaryCtxRetain(&prog_ctx[i], d) == CUDA_SUCCESS);
    }
    CHECK(cuCtxSetCurrent(prog_ctx[0]) == CUDA_SUCCESS);
    return 0;
}
#endif

#endif
