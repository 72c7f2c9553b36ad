/* cudrv.h — a small driver loader for the gpu-check tools (gpu/), separate from gpool's own
 * driver table (src/backends/driver.h): it adds the module and launch entry points the data-path
 * check needs (cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel) and treats every entry point
 * as optional, so the tools also run on the simulated driver and skip what it lacks. */
#ifndef GPOOL_GPU_CUDRV_H
#define GPOOL_GPU_CUDRV_H

#include <cuda.h>
#include <stddef.h>

#define CUDRV_ENTRIES(X)                                                                           \
    X(cuInit, CUresult, (unsigned))                                                                \
    X(cuDriverGetVersion, CUresult, (int *))                                                       \
    X(cuDeviceGetCount, CUresult, (int *))                                                         \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                                    \
    X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                          \
    X(cuDeviceGetAttribute, CUresult, (int *, CUdevice_attribute, CUdevice))                       \
    X(cuDeviceCanAccessPeer, CUresult, (int *, CUdevice, CUdevice))                                \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                 \
    X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice))                                             \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                      \
    X(cuCtxSynchronize, CUresult, (void))                                                          \
    X(cuMemAlloc, CUresult, (CUdeviceptr *, size_t))                                               \
    X(cuMemFree, CUresult, (CUdeviceptr))                                                          \
    X(cuMemAllocAsync, CUresult, (CUdeviceptr *, size_t, CUstream))                                \
    X(cuMemFreeAsync, CUresult, (CUdeviceptr, CUstream))                                           \
    X(cuDeviceGetDefaultMemPool, CUresult, (CUmemoryPool *, CUdevice))                             \
    X(cuMemPoolSetAttribute, CUresult, (CUmemoryPool, CUmemPool_attribute, void *))                \
    X(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void *, size_t))                                 \
    X(cuMemcpyDtoH, CUresult, (void *, CUdeviceptr, size_t))                                       \
    X(cuMemcpy, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                                      \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                            \
    X(cuStreamDestroy, CUresult, (CUstream))                                                       \
    X(cuStreamSynchronize, CUresult, (CUstream))                                                   \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                      \
    X(cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, CUjit_option *, void **)) \
    X(cuModuleUnload, CUresult, (CUmodule))                                                        \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                       \
    X(cuLaunchKernel, CUresult,                                                                    \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))                                                                          \
    X(cuGetErrorName, CUresult, (CUresult, const char **))

typedef struct cudrv {
    void *lib;
    char path[512];
    int version;
#define CUDRV_FIELD(name, ret, args) ret(*name) args;
    CUDRV_ENTRIES(CUDRV_FIELD)
#undef CUDRV_FIELD
} cudrv;

/* Load $GPOOL_LIBCUDA or libcuda.so.1 and resolve the entry points through cuGetProcAddress_v2
 * with the CUDA 12.0 ABI, by base name ("cuMemAlloc" gives cuMemAlloc_v2); missing ones stay
 * NULL. A driver without cuGetProcAddress_v2 (older than CUDA 12.0, which gpool rejects too) is
 * an error: dlsym of the plain names would give the old 32-bit ABIs. cuInit(0). 0, or -1 with a
 * message in err. */
int cudrv_load(cudrv *d, char *err, size_t errlen);
/* "CUDA_ERROR_X" for r. */
const char *cudrv_err(const cudrv *d, CUresult r);
/* 1 when the loaded driver is gpool's simulator. */
int cudrv_is_sim(const cudrv *d);

#endif
