/* cudart_standin.c — a stand-in libcudart.so.13 for the interposer tests. Its device-memory
 * functions fail loudly (a line on stderr, cudaErrorStubLibrary), so a test sees at once when a
 * call that gpool should serve reached "CUDA". The host-memory functions work (malloc), because
 * gpool passes those through until it has the host kinds. standin_calls() counts every call.
 * Each stand-in keeps cudart's signature, so the parameters it ignores are marked (void). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_ulong calls, null_frees;

unsigned long standin_calls(void);
unsigned long standin_calls(void)
{
    return atomic_load(&calls);
}

static cudaError_t fail_loudly(const char *name)
{
    atomic_fetch_add(&calls, 1);
    fprintf(stderr, "libcudart stand-in: %s called\n", name);
    return cudaErrorStubLibrary;
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
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
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
static void *driver_proc(const char *name)
{
    static void *lib;
    static CUresult (*getproc)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);
    if (!lib) {
        const char *path = getenv("GPOOL_LIBCUDA");
        lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib) *(void **)&getproc = dlsym(lib, "cuGetProcAddress_v2");
    }
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
    return runtime_code(r);
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
    return runtime_code(r);
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
    if (r != CUDA_SUCCESS) return runtime_code(r);
    out->type = managed                        ? cudaMemoryTypeManaged
                : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                               : cudaMemoryTypeUnregistered;
    out->device = ordinal;
    out->devicePointer = (void *)(uintptr_t)devp;
    out->hostPointer = host;
    return cudaSuccess;
}
