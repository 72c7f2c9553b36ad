/* The driver table (driver.h): libcuda loaded at run time with dlopen, its entry points
 * resolved through cuGetProcAddress, and CUresult turned into gpool status and messages. */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static gp_driver driver;
static int driver_ready; /* guarded by driver_lock; written once */

static gpool_status resolve_entries(gp_driver *d, PFN_cuGetProcAddress_v12000 get_proc)
{
    int abi = d->version > 0 && d->version < GP_DRIVER_ABI ? d->version : GP_DRIVER_ABI;
    void *fn;
    CUdriverProcAddressQueryResult qr;
#define GP_DRIVER_RESOLVE(name, ver, req)                                                          \
    fn = NULL;                                                                                     \
    if (get_proc(#name, &fn, abi, CU_GET_PROC_ADDRESS_DEFAULT, &qr) != CUDA_SUCCESS ||             \
        qr != CU_GET_PROC_ADDRESS_SUCCESS)                                                         \
        fn = NULL;                                                                                 \
    if (!fn && (req))                                                                              \
        return gp_fail(GPOOL_ERR_NO_DRIVER, "%s: driver has no entry point %s (CUDA %d.%d)",       \
                       d->path, #name, abi / 1000, abi % 1000 / 10);                               \
    *(void **)&d->name = fn;
    GP_DRIVER_ENTRIES(GP_DRIVER_RESOLVE)
#undef GP_DRIVER_RESOLVE
    return GPOOL_OK;
}

static gpool_status load_driver(gp_driver *d)
{
    const char *env = getenv("GPOOL_LIBCUDA");
    const char *path = env && *env ? env : "libcuda.so.1";
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        const char *why = dlerror();
        return gp_fail(GPOOL_ERR_NO_DRIVER, "cannot load the CUDA driver %s%s: %s", path,
                       env && *env ? " (from GPOOL_LIBCUDA)" : "", why ? why : "unknown error");
    }
    PFN_cuGetProcAddress_v12000 get_proc;
    *(void **)&get_proc = dlsym(d->lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        dlclose(d->lib);
        return gp_fail(GPOOL_ERR_NO_DRIVER,
                       "%s has no cuGetProcAddress_v2: driver older than CUDA 12.0", path);
    }
    PFN_cuDriverGetVersion_v2020 get_version;
    *(void **)&get_version = dlsym(d->lib, "cuDriverGetVersion");
    if (!get_version || get_version(&d->version) != CUDA_SUCCESS) d->version = GP_DRIVER_ABI;
    gpool_status st = resolve_entries(d, get_proc);
    if (st != GPOOL_OK) {
        dlclose(d->lib);
        return st;
    }
    gp_drv_last = NULL; /* cuInit belongs to no pool: its error queries are counted nowhere */
    CUresult r = d->cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        dlclose(d->lib);
        return gp_fail(GPOOL_ERR_NO_DEVICE, "cuInit: no CUDA device (driver %s)", path);
    }
    if (r != CUDA_SUCCESS) {
        gpool_status fst = gp_cu_fail(r, "cuInit");
        dlclose(d->lib);
        return fst;
    }
    return GPOOL_OK;
}

gpool_status gp_driver_get(const gp_driver **out)
{
    pthread_mutex_lock(&driver_lock);
    gpool_status st = GPOOL_OK;
    if (!driver_ready) {
        st = load_driver(&driver);
        driver_ready = st == GPOOL_OK;
        if (st != GPOOL_OK) memset(&driver, 0, sizeof driver); /* nothing dangles */
    }
    pthread_mutex_unlock(&driver_lock);
    *out = st == GPOOL_OK ? &driver : NULL;
    return st;
}

_Thread_local gp_drv_counters *gp_drv_last;

/* Count a call that describes an error where the failed call was counted (if anywhere). */
static void count_error_query(void)
{
    if (gp_drv_last)
        atomic_fetch_add_explicit(&gp_drv_last->n[GPOOL_DRV_OTHER], 1, memory_order_relaxed);
}

const char *gp_cu_name(CUresult r)
{
    const char *name = NULL;
    if (driver.cuGetErrorName) count_error_query();
    if (driver.cuGetErrorName && driver.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
        return name;
    return "CUDA_ERROR_UNRECOGNIZED";
}

gpool_status gp_cu_fail(CUresult r, const char *what)
{
    const char *text = NULL;
    if (driver.cuGetErrorString) count_error_query();
    if (!driver.cuGetErrorString || driver.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "no description";
    gpool_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? GPOOL_ERR_OUT_OF_MEMORY : GPOOL_ERR_DRIVER;
    return gp_fail(st, "%s failed: %s (%d): %s", what, gp_cu_name(r), (int)r, text);
}

void gp_ctx_enter(const gp_driver *d, CUcontext ctx, gp_drv_counters *c, int *pushed)
{
    CUcontext cur = NULL;
    *pushed = 0;
    CUresult r = GP_DRV(c, GPOOL_DRV_OTHER, d->cuCtxGetCurrent(&cur));
    if (r == CUDA_SUCCESS && cur == ctx) return;
    /* A thread with no context gets the device's primary context made current and keeps it,
     * as the runtime API would do on its first call; later batches then cost one query. */
    if (r == CUDA_SUCCESS && cur == NULL &&
        GP_DRV(c, GPOOL_DRV_OTHER, d->cuCtxSetCurrent(ctx)) == CUDA_SUCCESS)
        return;
    *pushed = GP_DRV(c, GPOOL_DRV_OTHER, d->cuCtxPushCurrent(ctx)) == CUDA_SUCCESS;
}

void gp_ctx_leave(const gp_driver *d, gp_drv_counters *c, int pushed)
{
    CUcontext popped;
    if (pushed) GP_DRV(c, GPOOL_DRV_OTHER, d->cuCtxPopCurrent(&popped));
}
