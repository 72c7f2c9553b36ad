/* cudrv.c — see cudrv.h. */
#include "cudrv.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

int cudrv_load(cudrv *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    const char *env = getenv("GPOOL_LIBCUDA");
    const char *path = env && *env ? env : "libcuda.so.1";
    snprintf(d->path, sizeof d->path, "%s", path);
    d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        snprintf(err, errlen, "cannot load %s: %s", path, dlerror());
        return -1;
    }
    get_proc_fn get_proc;
    *(void **)&get_proc = dlsym(d->lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        snprintf(err, errlen, "%s has no cuGetProcAddress_v2: driver older than CUDA 12.0", path);
        return -1;
    }
    CUresult (*get_version)(int *);
    *(void **)&get_version = dlsym(d->lib, "cuDriverGetVersion");
    if (get_version) get_version(&d->version);
    int abi = d->version > 0 && d->version < 12000 ? d->version : 12000;
    void *fn;
    CUdriverProcAddressQueryResult qr;
    /* the base name, the CUDA 12.0 ABI: "cuMemAlloc" -> cuMemAlloc_v2, "cuCtxSynchronize" -> the
     * 12.0 one without a context argument (CUDA 13 added a _v2 that takes one) */
#define CUDRV_RESOLVE(name, ret, args)                                                             \
    fn = NULL;                                                                                     \
    if (get_proc(#name, &fn, abi, CU_GET_PROC_ADDRESS_DEFAULT, &qr) != CUDA_SUCCESS ||             \
        qr != CU_GET_PROC_ADDRESS_SUCCESS)                                                         \
        fn = NULL;                                                                                 \
    *(void **)&d->name = fn;
    CUDRV_ENTRIES(CUDRV_RESOLVE)
#undef CUDRV_RESOLVE
    if (!d->cuInit) {
        snprintf(err, errlen, "%s has no cuInit", path);
        return -1;
    }
    CUresult r = d->cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuInit: %s", cudrv_err(d, r));
        return -1;
    }
    return 0;
}

const char *cudrv_err(const cudrv *d, CUresult r)
{
    const char *name = NULL;
    if (d->cuGetErrorName && d->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "CUresult %d", (int)r);
    return buf;
}

int cudrv_is_sim(const cudrv *d)
{
    return d->lib && dlsym(d->lib, "gpoolsim_entry_names") != NULL;
}
