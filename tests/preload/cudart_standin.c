/* cudart_standin.c — a stand-in libcudart.so.13 for the interposer tests. Its device-memory
 * functions fail loudly (a line on stderr, cudaErrorStubLibrary), so a test sees at once when a
 * call that gpool should serve reached "CUDA". The host-memory functions work (malloc), because
 * gpool passes those through until it has the host kinds. standin_calls() counts every call.
 * Each stand-in keeps cudart's signature, so the parameters it ignores are marked (void). */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
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
