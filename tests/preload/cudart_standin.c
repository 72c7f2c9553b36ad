/* cudart_standin.c — a stand-in libcudart.so.13 for the interposer tests. Its device-memory
 * functions fail loudly (a line on stderr, cudaErrorStubLibrary), so a test sees at once when a
 * call that gpool should serve reached "CUDA". The host-memory functions work (malloc), because
 * gpool passes those through until it has the host kinds. standin_calls() counts every call.
 * Each stand-in keeps cudart's signature, so the parameters it ignores are marked (void). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_ulong calls, null_frees;

/* cudart's per-thread last error (cudaGetLastError): set by every stand-in call that fails */
static _Thread_local cudaError_t last_error = cudaSuccess;
static cudaError_t note(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

unsigned long standin_calls(void);
unsigned long standin_calls(void)
{
    return atomic_load(&calls);
}

static cudaError_t fail_loudly(const char *name)
{
    atomic_fetch_add(&calls, 1);
    fprintf(stderr, "libcudart stand-in: %s called\n", name);
    return note(cudaErrorStubLibrary);
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    (void)p, (void)size;
    return fail_loudly("cudaMalloc");
}
/* cudaFree(NULL) is how NCCL and cuDF bring the runtime up: it succeeds, counted apart */
unsigned long standin_null_frees(void);
unsigned long standin_null_frees(void)
{
    return atomic_load(&null_frees);
}
cudaError_t cudaFree(void *p)
{
    if (!p) {
        atomic_fetch_add(&null_frees, 1);
        return cudaSuccess;
    }
    return fail_loudly("cudaFree");
}
cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    (void)p, (void)size, (void)s;
    return fail_loudly("cudaMallocAsync");
}
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s)
{
    (void)p, (void)size, (void)s;
    return fail_loudly("cudaMallocAsync_ptsz");
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    (void)p, (void)s;
    return fail_loudly("cudaFreeAsync");
}
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    (void)p, (void)s;
    return fail_loudly("cudaFreeAsync_ptsz");
}
cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    (void)p, (void)size, (void)pool, (void)s;
    return fail_loudly("cudaMallocFromPoolAsync");
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    (void)free_bytes, (void)total;
    return fail_loudly("cudaMemGetInfo");
}

/* host memory: working, counted */
cudaError_t cudaMallocHost(void **p, size_t size)
{
    atomic_fetch_add(&calls, 1);
    *p = malloc(size ? size : 1);
    return note(*p ? cudaSuccess : cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    (void)flags; /* the stand-in's host memory is plain malloc */
    return cudaMallocHost(p, size);
}
cudaError_t cudaFreeHost(void *p)
{
    atomic_fetch_add(&calls, 1);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags)
{
    (void)flags;
    atomic_fetch_add(&calls, 1);
    *dev = host;
    return cudaSuccess;
}

/* Functions that reach the driver, as libcudart does: dlopen the driver ($GPOOL_LIBCUDA),
 * dlsym(cuGetProcAddress_v2), then cuGetProcAddress (so, under LD_PRELOAD, gpool's hooks).
 * The caller has made a context current (the runtime would make the primary one current). */
static CUresult (*getproc)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
static void load_driver(void)
{
    const char *path = getenv("GPOOL_LIBCUDA");
    void *lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib) *(void **)&getproc = dlsym(lib, "cuGetProcAddress_v2");
}
static void *driver_proc(const char *name)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_driver); /* threads may make their first call at once */
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (!getproc || getproc(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
        q != CU_GET_PROC_ADDRESS_SUCCESS)
        return NULL;
    return fn;
}

static cudaError_t runtime_code(CUresult r)
{
    return r == CUDA_SUCCESS               ? cudaSuccess
           : r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation
                                           : cudaErrorInvalidValue;
}

cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*fn)(CUdeviceptr *, size_t, unsigned);
    *(void **)&fn = driver_proc("cuMemAllocManaged");
    if (!fn) return cudaErrorInitializationError;
    CUdeviceptr d = 0;
    CUresult r = fn(&d, size, flags);
    *p = (void *)(uintptr_t)d;
    return note(runtime_code(r));
}

cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    *(void **)&fn = driver_proc("cuMemAllocPitch");
    if (!fn) return cudaErrorInitializationError;
    CUdeviceptr d = 0;
    CUresult r = fn(&d, pitch, width, height, 16);
    *p = (void *)(uintptr_t)d;
    return note(runtime_code(r));
}

/* cudaPointerAttributes from one cuPointerGetAttributes call. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *out, const void *ptr)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*fn)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
    *(void **)&fn = driver_proc("cuPointerGetAttributes");
    if (!fn) return cudaErrorInitializationError;
    if (!out) return cudaErrorInvalidValue;
    unsigned type = 0;
    int managed = 0, ordinal = 0;
    CUdeviceptr devp = 0;
    void *host = NULL;
    CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                               CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void *data[] = {&type, &managed, &ordinal, &devp, &host};
    CUresult r = fn(5, a, data, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS) return note(runtime_code(r));
    out->type = managed                        ? cudaMemoryTypeManaged
                : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                               : cudaMemoryTypeUnregistered;
    out->device = ordinal;
    out->devicePointer = (void *)(uintptr_t)devp;
    out->hostPointer = host;
    return cudaSuccess;
}

/* cuda_runtime_api.h, cudaGetLastError: "Returns the last error that has been produced by any of
 * the runtime calls in the same instance of the CUDA Runtime library in the host thread and
 * resets it to cudaSuccess"; cudaPeekAtLastError: the same, without the reset. Not counted in
 * standin_calls: the interposer reads them on its own error paths (preload_runtime.c). */
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

/* cudaSetDevice: the device's primary context made current at once (cuda_runtime_api.h: "the
 * context will be current on device immediately"), through the driver's table as cudart does */
cudaError_t cudaSetDevice(int device)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    *(void **)&retain = driver_proc("cuDevicePrimaryCtxRetain");
    *(void **)&set = driver_proc("cuCtxSetCurrent");
    if (!retain || !set) return note(cudaErrorInitializationError);
    CUcontext c = NULL;
    if (retain(&c, (CUdevice)device) != CUDA_SUCCESS) return note(cudaErrorInvalidDevice);
    return note(set(c) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidDevice);
}

/* cudaDeviceReset: cuDevicePrimaryCtxReset of the current device, through the driver's table
 * as cudart does (cuda_runtime_api.h, cudaDeviceReset: "Explicitly destroys and cleans up all
 * resources associated with the current device in the current process. ... Any subsequent API
 * call to this device will reinitialize the device"). The primary context stays current: the
 * reset does not release it (cuda.h, cuDevicePrimaryCtxReset). */
cudaError_t cudaDeviceReset(void)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*get_device)(CUdevice *);
    CUresult (*reset)(CUdevice);
    *(void **)&get_device = driver_proc("cuCtxGetDevice");
    *(void **)&reset = driver_proc("cuDevicePrimaryCtxReset");
    if (!get_device || !reset) return note(cudaErrorInitializationError);
    CUdevice dev = 0;
    if (get_device(&dev) != CUDA_SUCCESS) dev = 0; /* no context current: device 0, as cudart */
    return note(reset(dev) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidDevice);
}

/* cudaStreamCreateWithFlags / WithPriority: cuStreamCreate through the driver's table (the
 * priority is a hint; the simulator has one priority) */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    atomic_fetch_add(&calls, 1);
    CUresult (*fn)(CUstream *, unsigned);
    *(void **)&fn = driver_proc("cuStreamCreate");
    if (!fn) return note(cudaErrorInitializationError);
    if (!s) return note(cudaErrorInvalidValue);
    return note(runtime_code(fn((CUstream *)s, flags)));
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
    (void)priority;
    return cudaStreamCreateWithFlags(s, flags);
}
