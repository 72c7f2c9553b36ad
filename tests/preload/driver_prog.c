/* driver_prog.c — reaches the driver the way cudart, CuPy and PyTorch do: dlopen libcuda
 * ($GPOOL_LIBCUDA, the simulator), dlsym(cuGetProcAddress_v2), then cuGetProcAddress and dlsym
 * for the memory entry points. Under LD_PRELOAD=libgpool_preload.so those must be gpool's.
 * Usage: driver_prog MODE; prints key=value lines, exits 0 when the mode's checks hold. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_driver.h"

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);
typedef CUresult (*getproc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);
typedef CUresult (*info_fn)(size_t *, size_t *);

/* The file a function pointer lives in (basename). */
static const char *where(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "none";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static int cache(void)
{
    alloc_fn alloc_gp, alloc_sym;
    free_fn free_gp, free_sym;
    *(void **)&alloc_gp = prog_proc_v("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    *(void **)&free_gp = prog_proc_v("cuMemFree", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    *(void **)&alloc_sym = dlsym(prog_lib, "cuMemAlloc_v2");
    *(void **)&free_sym = dlsym(prog_lib, "cuMemFree_v2");
    CHECK(alloc_gp && free_gp && alloc_sym && free_sym);
    printf("cuMemAlloc_from=%s dlsym_from=%s\n", where((void *)alloc_gp), where((void *)alloc_sym));
    enum { N = 4000, LIVE = 8 };
    CUdeviceptr live[LIVE] = {0};
    for (int i = 0; i < N; i++) {
        CUdeviceptr *slot = &live[i % LIVE];
        free_fn fr = i & 1 ? free_gp : free_sym;
        if (*slot) CHECK(fr(*slot) == CUDA_SUCCESS);
        size_t size = ((size_t)1 << 20) + (size_t)(i % 48) * (64 << 10); /* 1 MiB .. 4 MiB */
        CHECK((i & 2 ? alloc_gp : alloc_sym)(slot, size) == CUDA_SUCCESS && *slot);
        *(volatile char *)(uintptr_t)*slot = 1; /* simulated device memory is host memory */
    }
    for (int i = 0; i < LIVE; i++)
        CHECK(free_gp(live[i]) == CUDA_SUCCESS);
    /* the stream-ordered forms, legacy and per-thread */
    alloc_async_fn aa, aa_pt;
    free_async_fn fa, fa_pt;
    *(void **)&aa = prog_proc_v("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    *(void **)&fa = prog_proc_v("cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    *(void **)&aa_pt =
        prog_proc_v("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    *(void **)&fa_pt =
        prog_proc_v("cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CHECK(aa && fa && aa_pt && fa_pt);
    for (int i = 0; i < 100; i++) {
        CUdeviceptr a, b;
        CHECK(aa(&a, 1 << 20, NULL) == CUDA_SUCCESS && aa_pt(&b, 8192, NULL) == CUDA_SUCCESS);
        CHECK(fa(a, NULL) == CUDA_SUCCESS && fa_pt(b, NULL) == CUDA_SUCCESS);
    }
    info_fn info;
    *(void **)&info = prog_proc_v("cuMemGetInfo", 12000, 0);
    size_t fr = 0, total = 0;
    CHECK(info && info(&fr, &total) == CUDA_SUCCESS && fr <= total && total > 0);
    printf("allocs=%d cuMemAlloc=%lu cuMemAllocAsync=%lu cuMemCreate=%lu\n", N,
           prog_sim_count("cuMemAlloc"), prog_sim_count("cuMemAllocAsync"),
           prog_sim_count("cuMemCreate"));
    return 0;
}

static int getproc_checks(void)
{
    /* asking for cuGetProcAddress itself (both ABIs) gives a working function, no recursion */
    getproc_v2_fn gp2;
    getproc_v1_fn gp1;
    *(void **)&gp2 = prog_proc_v("cuGetProcAddress", 12000, 0);
    *(void **)&gp1 = prog_proc_v("cuGetProcAddress", 11030, 0);
    CHECK(gp2 && gp1);
    void *a = NULL, *b = NULL, *c = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK(gp2("cuMemAlloc", &a, 12000, 0, &q) == CUDA_SUCCESS && q == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(gp1("cuMemAlloc", &b, 11030, 0) == CUDA_SUCCESS);
    CHECK(a == prog_proc_v("cuMemAlloc", 12000, 0) && a == b);
    getproc_v1_fn gp1_sym;
    *(void **)&gp1_sym = dlsym(prog_lib, "cuGetProcAddress");
    CHECK(gp1_sym && gp1_sym("cuMemFree", &c, 12000, 0) == CUDA_SUCCESS);
    CHECK(c == prog_proc_v("cuMemFree", 12000, 0));
    /* everything else is the real entry point at the requested version */
    CHECK(prog_proc_v("cuCtxSynchronize", 12000, 0) == dlsym(prog_lib, "cuCtxSynchronize"));
    CHECK(prog_proc_v("cuCtxSynchronize", 13000, 0) == dlsym(prog_lib, "cuCtxSynchronize_v2"));
    CHECK(prog_proc_v("cuMemCreate", 12000, 0) == dlsym(prog_lib, "cuMemCreate"));
    /* too old a version: the driver's answer passes through */
    void *old = (void *)1;
    CHECK(prog_getproc("cuMemAlloc", &old, 2000, 0, &q) != CUDA_SUCCESS);
    CHECK(q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(prog_getproc("cuNoSuchThing", &old, 12000, 0, &q) != CUDA_SUCCESS);
    CHECK(q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    printf("cuMemAlloc_from=%s cuGetProcAddress_from=%s cuCtxSynchronize_from=%s\n", where(a),
           where((void *)gp2), where(prog_proc_v("cuCtxSynchronize", 12000, 0)));
    return 0;
}

static int foreign(void)
{
    free_fn fr;
    alloc_fn al;
    *(void **)&fr = prog_proc_v("cuMemFree", 12000, 0);
    *(void **)&al = prog_proc_v("cuMemAlloc", 12000, 0);
    CUresult bogus = fr((CUdeviceptr)0x12345000), zero = fr(0);
    CUresult nullout = al(NULL, 4096), zerosize;
    CUdeviceptr p = 0;
    zerosize = al(&p, 0);
    printf("bogus=%d zero=%d nullout=%d zerosize=%d\n", (int)bogus, (int)zero, (int)nullout,
           (int)zerosize);
    CHECK(bogus == CUDA_ERROR_INVALID_VALUE && nullout == CUDA_ERROR_INVALID_VALUE);
    CHECK(zerosize == CUDA_ERROR_INVALID_VALUE);
    return 0;
}

static int oom(void)
{
    alloc_fn al;
    free_fn fr;
    *(void **)&al = prog_proc_v("cuMemAlloc", 12000, 0);
    *(void **)&fr = prog_proc_v("cuMemFree", 12000, 0);
    CUdeviceptr p = 0;
    CUresult r = al(&p, (size_t)1 << 40);
    printf("cuMemAlloc=%d\n", (int)r);
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(al(&p, 1 << 20) == CUDA_SUCCESS && fr(p) == CUDA_SUCCESS);
    return 0;
}

static free_fn exit_free;
static CUdeviceptr exit_blocks[8];
static void free_at_exit(void)
{
    for (int i = 0; i < 4; i++)
        if (exit_free(exit_blocks[i]) != CUDA_SUCCESS) _Exit(5);
}
/* Runs after the simulator may have shut down: must not crash. Its result is not checked
 * (the real driver answers CUDA_ERROR_DEINITIALIZED there too). */
__attribute__((destructor)) static void free_in_destructor(void)
{
    for (int i = 4; i < 6; i++)
        if (exit_free && exit_blocks[i]) exit_free(exit_blocks[i]);
}

static int at_exit(void)
{
    alloc_fn al;
    *(void **)&al = prog_proc_v("cuMemAlloc", 12000, 0);
    *(void **)&exit_free = prog_proc_v("cuMemFree", 12000, 0);
    for (int i = 0; i < 8; i++)
        CHECK(al(&exit_blocks[i], (size_t)(i + 1) << 20) == CUDA_SUCCESS);
    atexit(free_at_exit);
    printf("exit=armed\n");
    return 0;
}

/* The cached path makes no driver call, and the thread's device follows its context through
 * cuCtxSetCurrent / cuCtxPushCurrent / cuCtxPopCurrent (needs GPOOL_SIM_DEVICES=2). */
static int devices(void)
{
    CUresult (*dev_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*push)(CUcontext);
    CUresult (*pop)(CUcontext *);
    size_t (*in_use)(int);
    void (*reset)(void);
    alloc_fn al;
    free_fn fr;
    *(void **)&dev_get = prog_proc_v("cuDeviceGet", 12000, 0);
    *(void **)&retain = prog_proc_v("cuDevicePrimaryCtxRetain", 12000, 0);
    *(void **)&set_current = prog_proc_v("cuCtxSetCurrent", 12000, 0);
    *(void **)&push = dlsym(prog_lib, "cuCtxPushCurrent_v2"); /* both ways of reaching the hooks */
    *(void **)&pop = prog_proc_v("cuCtxPopCurrent", 12000, 0);
    *(void **)&in_use = dlsym(prog_lib, "gpoolsim_bytes_in_use");
    *(void **)&reset = dlsym(prog_lib, "gpoolsim_reset_counts");
    *(void **)&al = prog_proc_v("cuMemAlloc", 12000, 0);
    *(void **)&fr = dlsym(prog_lib, "cuMemFree_v2");
    CHECK(dev_get && retain && set_current && push && pop && in_use && reset && al && fr);
    printf("cuCtxSetCurrent_from=%s\n", where((void *)set_current));
    CUdevice d0, d1;
    CUcontext c0, c1, popped = NULL;
    CHECK(dev_get(&d0, 0) == CUDA_SUCCESS && dev_get(&d1, 1) == CUDA_SUCCESS);
    CHECK(retain(&c0, d0) == CUDA_SUCCESS && retain(&c1, d1) == CUDA_SUCCESS);
    CUdeviceptr a, b, c, p;
    CHECK(al(&a, 4 << 20) == CUDA_SUCCESS); /* device 0 (setup made it current) */
    size_t used0 = in_use(0), used1 = in_use(1);
    CHECK(used0 > 0 && used1 == 0);
    CHECK(set_current(c1) == CUDA_SUCCESS);
    CHECK(al(&b, 4 << 20) == CUDA_SUCCESS);
    CHECK(in_use(1) > 0 && in_use(0) == used0);
    used1 = in_use(1);
    CHECK(push(c0) == CUDA_SUCCESS);
    /* 16 MiB: more than the pages a's cold-start growth handle left free (src/backends/vidmem.h),
     * so device 0 must map more */
    CHECK(al(&c, 16 << 20) == CUDA_SUCCESS);
    CHECK(in_use(0) > used0 && in_use(1) == used1);
    CHECK(pop(&popped) == CUDA_SUCCESS && popped == c0);
    /* device 1 again: 1000 cached pairs make no driver call at all */
    CHECK(al(&p, 4096) == CUDA_SUCCESS && fr(p) == CUDA_SUCCESS);
    used1 = in_use(1); /* with the small blocks' first slab */
    reset();
    for (int i = 0; i < 1000; i++)
        CHECK(al(&p, 4096) == CUDA_SUCCESS && fr(p) == CUDA_SUCCESS);
    unsigned long (*total)(void);
    *(void **)&total = dlsym(prog_lib, "gpoolsim_call_total");
    CHECK(total);
    printf("pairs=1000 driver_calls=%lu cuCtxGetCurrent=%lu cuMemGetInfo=%lu\n", total(),
           prog_sim_count("cuCtxGetCurrent"), prog_sim_count("cuMemGetInfo"));
    CHECK(in_use(1) == used1); /* served by device 1's cache */
    CHECK(fr(a) == CUDA_SUCCESS && fr(b) == CUDA_SUCCESS && fr(c) == CUDA_SUCCESS);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cache";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (prog_driver_setup() != 0) return 1;
    if (!strcmp(mode, "cache")) return cache();
    if (!strcmp(mode, "getproc")) return getproc_checks();
    if (!strcmp(mode, "foreign")) return foreign();
    if (!strcmp(mode, "oom")) return oom();
    if (!strcmp(mode, "exit")) return at_exit();
    if (!strcmp(mode, "devices")) return devices();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
}
