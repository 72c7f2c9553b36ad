/* client.c — the program `gpool-bench hotpath --dropin` runs under
 * LD_PRELOAD=libgpool_preload.so: it reaches device memory as a framework does, and times the
 * alloc+free pair of a cached block with a given number of live blocks held.
 *
 *   dropin_client runtime|driver|runtime-nb SIZE LIVE PAIRS ROUNDS
 *
 * runtime: cudaMalloc/cudaFree, found with dlsym(RTLD_DEFAULT) (the interposer exports them; no
 * libcudart is linked). driver: dlopen($GPOOL_LIBCUDA), the primary context of device 0 made
 * current, then cuMemAlloc_v2/cuMemFree_v2 through dlsym (the interposer substitutes its own).
 * runtime-nb: as runtime, after creating a non-blocking stream (cuStreamCreate through dlsym):
 * the interposer's cudaFree then goes through its batch.
 * Prints one line: "ns_per_pair=X" (X the best of ROUNDS rounds of PAIRS pairs),
 * or "error=..." and exits 1. Not linked with gpool: what it measures is the interposer. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*rt_malloc_fn)(void **, size_t);
typedef int (*rt_free_fn)(void *);
typedef CUresult (*drv_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*drv_free_fn)(CUdeviceptr);

static rt_malloc_fn rt_malloc;
static rt_free_fn rt_free;
static drv_alloc_fn drv_alloc;
static drv_free_fn drv_free;
static int use_driver;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what)
{
    printf("error=%s\n", what);
    return 1;
}

static int alloc_one(size_t size, void **out)
{
    if (use_driver) {
        CUdeviceptr p = 0;
        if (drv_alloc(&p, size) != CUDA_SUCCESS) return -1;
        *out = (void *)(uintptr_t)p;
        return 0;
    }
    return rt_malloc(out, size) == 0 ? 0 : -1;
}

static int free_one(void *p)
{
    if (use_driver) return drv_free((CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS ? 0 : -1;
    return rt_free(p) == 0 ? 0 : -1;
}

static int setup_driver(void)
{
    const char *path = getenv("GPOOL_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fail("cannot load the driver");
    CUresult (*init)(unsigned);
    CUresult (*dev_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    *(void **)&init = dlsym(lib, "cuInit");
    *(void **)&dev_get = dlsym(lib, "cuDeviceGet");
    *(void **)&retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&set_current = dlsym(lib, "cuCtxSetCurrent");
    *(void **)&drv_alloc = dlsym(lib, "cuMemAlloc_v2");
    *(void **)&drv_free = dlsym(lib, "cuMemFree_v2");
    if (!init || !dev_get || !retain || !set_current || !drv_alloc || !drv_free)
        return fail("driver entry points missing");
    CUdevice dev;
    CUcontext ctx;
    if (init(0) != CUDA_SUCCESS || dev_get(&dev, 0) != CUDA_SUCCESS ||
        retain(&ctx, dev) != CUDA_SUCCESS || set_current(ctx) != CUDA_SUCCESS)
        return fail("no context on device 0");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 6) {
        fprintf(stderr, "usage: dropin_client runtime|driver|runtime-nb SIZE LIVE PAIRS ROUNDS\n");
        return 64;
    }
    use_driver = !strcmp(argv[1], "driver");
    size_t size = strtoull(argv[2], NULL, 10);
    size_t live = strtoull(argv[3], NULL, 10);
    uint64_t pairs = strtoull(argv[4], NULL, 10);
    unsigned rounds = (unsigned)strtoul(argv[5], NULL, 10);
    if (!size || !pairs || !rounds) return fail("bad arguments");
    if (use_driver) {
        if (setup_driver() != 0) return 1;
    } else {
        *(void **)&rt_malloc = dlsym(RTLD_DEFAULT, "cudaMalloc");
        *(void **)&rt_free = dlsym(RTLD_DEFAULT, "cudaFree");
        if (!rt_malloc || !rt_free) return fail("cudaMalloc not found (is LD_PRELOAD set?)");
    }
    void **held = calloc(live ? live : 1, sizeof *held);
    if (!held) return fail("out of host memory");
    for (size_t i = 0; i < live; i++)
        if (alloc_one(size, &held[i]) != 0) return fail("the live blocks do not fit");
    if (!strcmp(argv[1], "runtime-nb")) { /* after the first cudaMalloc: a context is current */
        const char *path = getenv("GPOOL_LIBCUDA");
        void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        CUresult (*create)(CUstream *, unsigned) = NULL;
        if (lib) *(void **)&create = dlsym(lib, "cuStreamCreate");
        CUstream s;
        if (!create || create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return fail("cannot create a non-blocking stream");
    }
    /* warm-up: a tenth of a round */
    for (uint64_t i = 0; i < pairs / 10 + 1; i++) {
        void *p;
        if (alloc_one(size, &p) != 0 || free_one(p) != 0) return fail("alloc+free failed");
    }
    double best = 0;
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < pairs; i++) {
            void *p;
            if (alloc_one(size, &p) != 0 || free_one(p) != 0) return fail("alloc+free failed");
        }
        double ns = (double)(now_ns() - t0) / (double)pairs;
        if (best == 0 || ns < best) best = ns;
    }
    printf("ns_per_pair=%.2f\n", best);
    for (size_t i = 0; i < live; i++)
        free_one(held[i]);
    free(held);
    return 0;
}
