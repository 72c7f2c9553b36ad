/* preload.c — the core of libgpool_preload.so: configuration, the real driver table, one gpool
 * pool per device, the dlsym and cuGetProcAddress interposition, and the alloc/free helpers the
 * runtime and driver hooks share.
 *
 * How calls reach gpool:
 *   - cudaMalloc & co. are exported by this library, which LD_PRELOAD puts ahead of libcudart
 *     (preload_runtime.c).
 *   - Driver entry points are never linked by name: cudart, CuPy and PyTorch fetch them with
 *     dlsym(libcuda, "cuGetProcAddress_v2") and then cuGetProcAddress("cuMemAlloc", ...). We
 *     interpose dlsym (returning our cuGetProcAddress, or our cuMemAlloc_v2 & co. when those are
 *     asked for by their exported names) and answer cuGetProcAddress with our versions of the
 *     eight memory functions, the real entry point (at the requested ABI version) otherwise.
 *   - Programs linked with -lcuda call the driver's versioned names (cuMemAlloc_v2, ...): this
 *     library exports those too (preload_direct.c), running the same hooks.
 *
 * gpool itself (linked into this library) loads the same driver with dlopen + dlsym +
 * cuGetProcAddress. Its dlsym calls come from inside this library: those, and every lookup that
 * does not resolve to a hooked symbol of the driver, get the real answer, so gpool's own table
 * holds the real functions and nothing recurses.
 *
 * cudaFree / cuMemFree / cudaFreeHost / cuMemFreeHost semantics. The real calls may
 * synchronize, and programs rely on it (Programming Guide, "Implicit Synchronization": a
 * device or page-locked host allocation between two commands of different streams serializes
 * them): memory they free is never handed to other work before the work queued on it
 * completes, whatever streams touched it. We do not synchronize per free. GPOOL_CONF's
 * cudafree key chooses how a freed block becomes reusable (docs/dropin.md has the costs):
 *   batch (default): the block joins the calling thread's batch (preload_batch.c). While the
 *     process has no non-blocking stream (and no stream capture runs), every 32 blocks or
 *     8 MiB of a device the batch is flushed by the legacy-stream fence, one event record on
 *     the legacy stream per device (preload_fence.c): it orders the legacy, blocking and
 *     per-thread default streams, which the legacy stream orders only through work enqueued
 *     on it. Once a non-blocking stream exists, when the batch holds cudafree_batch bytes of
 *     a device (default: 1/64 of the device's memory, at least 64 MiB), one
 *     cuCtxSynchronize per device (cudafree_flush=event: events on the legacy and every
 *     non-blocking stream) covers the whole batch. Either way a thread's exit and an
 *     allocation that finds no memory flush it too, and then the blocks go back to the pool.
 *   stream: the same; it assumes no non-blocking stream, and when one appears it says so
 *     once (preload_notice.c) and frees into the batch from then on.
 *   sync (or sync_free=1): a cuCtxSynchronize per free (of every device gpool serves for a
 *     host block), exactly as CUDA does.
 * Host blocks are reachable from every device: their fence (made at once: host frees are
 * few) and their batch flush cover every device gpool serves. cudaFreeAsync/cuMemFreeAsync are
 * stream-ordered frees (gpool_free_async) in every mode; on the legacy stream they get the fence
 * too.
 *
 * Process teardown: pools are never destroyed. Once exit() starts (our atexit handler or
 * destructor ran), frees of gpool pointers succeed without touching gpool or the driver: the
 * driver may already have shut down (the simulator does so in its own destructor), and the OS
 * takes the memory back. */
#include "preload.h"
#include "preload_options.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- configuration ---------- */

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;
static int conf_enabled;     /* written once under conf_once */
static gpp_options conf_own; /* the interposer's keys (preload_options.h), read once */

int gpp_flush_with_events(void)
{
    return conf_own.flush_events;
}

int gpp_free_mode(void)
{
    return conf_own.free_mode;
}

static gpool_config conf_pool = GPOOL_CONFIG_INIT;
static atomic_int exiting;
/* 1 while serving (conf_enabled and not exiting), 0 when not, -1 before read_conf ran: the
 * one load the hooks' fast path makes. */
static atomic_int serving = -1;

/* GPOOL_CONF through the common reader: the interposer's keys (its own table) into conf_own,
 * gpool's into conf_pool. Any error: one line on stderr and the interposer passes everything
 * through, so a typo never crashes the framework. */
static void read_conf(void)
{
    gpool_config_default(&conf_pool);
    const char *env = getenv("GPOOL_CONF");
    if (env && gp_config_apply(&conf_pool, env, &gpp_option_table, &conf_own) != GPOOL_OK) {
        fprintf(stderr,
                "gpool preload: bad GPOOL_CONF: %s; gpool is disabled, CUDA allocations pass "
                "through\n",
                gpool_last_error());
        return;
    }
    if (conf_own.sync_free) conf_own.free_mode = GPP_CUDAFREE_SYNC;
    conf_enabled = !conf_own.disable;
    int expected = -1; /* unless exit() already started */
    atomic_compare_exchange_strong(&serving, &expected, conf_enabled);
}

/* fork. A child forked after the parent used CUDA through the interposer gets none of the
 * parent's CUDA state (sim/sim_state.c cites the documentation): the child handler below sets
 * gpp_forked_child and turns serving off, nothing else (no lock, no copy, no driver call), so
 * a child that never calls CUDA pays nothing. From then on gpp_driver() answers NULL, which
 * every driver hook turns into CUDA_ERROR_NOT_INITIALIZED, the real driver's answer in such a
 * child; the runtime hooks answer cudaErrorInitializationError (preload_runtime.c REAL). No
 * hook reaches gpool in the child: no lock another thread of the parent held at fork is ever
 * waited for, no block of the parent's pools is handed out or freed, and exit() in the child
 * does not switch to the exiting paths (which look blocks up in the parent's pools). The
 * parent goes on unaffected. A child forked before the parent touched CUDA is a process like
 * any other. */
atomic_int gpp_forked_child;
static atomic_int cuda_touched; /* gpp_driver() was called: the parent may hold CUDA state */
static _Atomic(const struct gpp_real_driver *) driver_loaded; /* gpp_driver()'s fast path */

static void fork_child(void)
{
    if (!atomic_load_explicit(&cuda_touched, memory_order_relaxed)) return;
    atomic_store_explicit(&gpp_forked_child, 1, memory_order_relaxed);
    atomic_store_explicit(&serving, 0, memory_order_relaxed);
    atomic_store_explicit(&driver_loaded, NULL, memory_order_relaxed);
}

int gpp_exiting(void)
{
    return atomic_load_explicit(&exiting, memory_order_relaxed);
}

int gpp_enabled(void)
{
    int s = atomic_load_explicit(&serving, memory_order_acquire);
    if (__builtin_expect(s >= 0, 1)) return s;
    pthread_once(&conf_once, read_conf);
    return conf_enabled && !gpp_exiting();
}

static void mark_exiting(void)
{
    if (!gpp_in_forked_child()) atomic_store(&exiting, 1);
    atomic_store(&serving, 0);
}

__attribute__((constructor)) static void preload_init(void)
{
    pthread_once(&conf_once, read_conf); /* a bad GPOOL_CONF is reported at start-up */
    atexit(mark_exiting);
    pthread_atfork(NULL, NULL, fork_child);
}

__attribute__((destructor)) static void preload_fini(void)
{
    mark_exiting();
}

/* ---------------------------------------------------------------- real dlsym -------------- */

typedef void *(*dlsym_fn)(void *, const char *);
/* dlsym may be called before a sanitizer runtime has set itself up (ASan resolves its
 * interceptors with dlsym(RTLD_NEXT) at start-up): the code on that path is not instrumented. */
#define GPP_UNINSTRUMENTED __attribute__((no_sanitize_address, no_sanitize("undefined", "thread")))
/* Read by the dlsym trampoline below; hidden, set once. */
__attribute__((used, visibility("hidden"))) dlsym_fn gpp_real_dlsym_ptr;

GPP_UNINSTRUMENTED __attribute__((used, visibility("hidden"))) dlsym_fn gpp_dlsym_resolve(void)
{
    dlsym_fn f = __atomic_load_n(&gpp_real_dlsym_ptr, __ATOMIC_ACQUIRE);
    if (f) return f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.17", "GLIBC_2.2.5", "GLIBC_2.0"};
    for (size_t i = 0; !f && i < sizeof versions / sizeof versions[0]; i++)
        *(void **)&f = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    __atomic_store_n(&gpp_real_dlsym_ptr, f, __ATOMIC_RELEASE);
    return f;
}

void *gpp_real_dlsym(void *handle, const char *name)
{
    dlsym_fn real = gpp_dlsym_resolve();
    return real ? real(handle, name) : NULL;
}

/* dl_iterate_phdr callback: the path of a loaded libcudart (dlopen is not called from inside
 * the iteration, which holds the loader's lock). */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size; /* dl_iterate_phdr's callback signature */
    char *out = arg;
    const char *path = info->dlpi_name, *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base || strncmp(base, "libcudart", 9) != 0 || strlen(path) >= 4096) return 0;
    strcpy(out, path);
    return 1;
}

void *gpp_real_runtime(const char *name)
{
    void *f = gpp_real_dlsym(RTLD_NEXT, name);
    if (f) return f;
    /* a libcudart loaded with RTLD_LOCAL (Python extension modules) is not "next" */
    char path[4096] = "";
    dl_iterate_phdr(find_cudart, path);
    void *h = path[0] ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!h) return NULL;
    f = gpp_real_dlsym(h, name);
    dlclose(h);
    return f;
}

/* The start of this library in memory: dlsym calls from here (gpool's driver loader) always
 * get the real symbol. */
static void *self_base(void)
{
    static void *base;
    void *b = __atomic_load_n(&base, __ATOMIC_ACQUIRE);
    if (!b) {
        Dl_info info;
        if (dladdr((void *)&gpp_dlsym_resolve, &info)) b = info.dli_fbase;
        __atomic_store_n(&base, b, __ATOMIC_RELEASE);
    }
    return b;
}

static void *object_base(const void *addr)
{
    Dl_info info;
    return addr && dladdr(addr, &info) ? info.dli_fbase : NULL;
}

/* Every dlsym call lands here except RTLD_NEXT lookups, which the trampoline sends straight
 * to the real dlsym: glibc resolves RTLD_NEXT relative to its caller's return address, and a
 * tail jump keeps that the original caller's (a C wrapper would make it this library). */
GPP_UNINSTRUMENTED __attribute__((used, noinline, visibility("hidden"))) void *
gpp_dlsym_slow(void *handle, const char *name)
{
    void *caller = __builtin_return_address(0);
    dlsym_fn real = gpp_dlsym_resolve();
    void *p = real(handle, name);
    if (!p || !name || name[0] != 'c' || name[1] != 'u') return p;
    void *hook = gpp_hook_for_symbol(name);
    if (!hook || object_base(caller) == self_base() || !gpp_enabled()) return p;
    const gpp_real_driver *d = gpp_driver();
    if (!d || object_base(p) != d->lib_base) return p; /* not the driver gpool serves */
    return hook;
}

#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define GPP_ENDBR "endbr64\n"
#else
#define GPP_ENDBR ""
#endif
/* dlsym(handle, name): RTLD_NEXT (-1) tail-jumps to the real dlsym, the rest to the C code. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n" GPP_ENDBR "  cmpq $-1, %rdi\n"
        "  jne gpp_dlsym_slow\n"
        "  movq gpp_real_dlsym_ptr(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1:\n"
        "  pushq %rdi\n"
        "  pushq %rsi\n"
        "  subq $8, %rsp\n"
        "  call gpp_dlsym_resolve\n"
        "  addq $8, %rsp\n"
        "  popq %rsi\n"
        "  popq %rdi\n"
        "  jmp *%rax\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "  cmn x0, #1\n"
        "  b.ne gpp_dlsym_slow\n"
        "  adrp x16, gpp_real_dlsym_ptr\n"
        "  ldr x16, [x16, :lo12:gpp_real_dlsym_ptr]\n"
        "  cbz x16, 1f\n"
        "  br x16\n"
        "1:\n"
        "  stp x29, x30, [sp, #-32]!\n"
        "  mov x29, sp\n"
        "  stp x0, x1, [sp, #16]\n"
        "  bl gpp_dlsym_resolve\n"
        "  mov x16, x0\n"
        "  ldp x0, x1, [sp, #16]\n"
        "  ldp x29, x30, [sp], #32\n"
        "  br x16\n"
        ".size dlsym, .-dlsym\n");
#else
/* Other architectures: RTLD_NEXT lookups resolve relative to this library. */
void *dlsym(void *handle, const char *name)
{
    if (handle == RTLD_NEXT) return gpp_dlsym_resolve()(handle, name);
    return gpp_dlsym_slow(handle, name);
}
#endif

/* ---------------------------------------------------------------- real driver ------------- */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static gpp_real_driver driver;
static const gpp_real_driver *driver_ok;

#define GPP_RESOLVE(field, name, ver, flags)                                                       \
    do {                                                                                           \
        void *fn_ = NULL;                                                                          \
        CUdriverProcAddressQueryResult q_;                                                         \
        if (d->cuGetProcAddress_v2(name, &fn_, ver, flags, &q_) != CUDA_SUCCESS ||                 \
            q_ != CU_GET_PROC_ADDRESS_SUCCESS)                                                     \
            fn_ = NULL;                                                                            \
        *(void **)&d->field = fn_;                                                                 \
    } while (0)

static char driver_error[600]; /* why load_driver failed, for the notice */
static const char *driver_path;

static void load_driver(void)
{
    gpp_real_driver *d = &driver;
    const char *env = getenv("GPOOL_LIBCUDA");
    driver_path = env && *env ? env : "libcuda.so.1";
    d->lib = dlopen(driver_path, RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        const char *why = dlerror();
        snprintf(driver_error, sizeof driver_error, "%s", why ? why : "dlopen failed");
        return;
    }
    snprintf(driver_error, sizeof driver_error, "%.500s lacks an entry point gpool needs",
             driver_path);
    dlsym_fn real = gpp_dlsym_resolve();
    *(void **)&d->cuGetProcAddress_v2 = real(d->lib, "cuGetProcAddress_v2");
    *(void **)&d->cuGetProcAddress_v1 = real(d->lib, "cuGetProcAddress");
    d->sym_cuMemAllocAsync_ptsz = real(d->lib, "cuMemAllocAsync_ptsz");
    d->sym_cuMemFreeAsync_ptsz = real(d->lib, "cuMemFreeAsync_ptsz");
    d->lib_base = object_base((void *)d->cuGetProcAddress_v2);
    if (!d->cuGetProcAddress_v2 || !d->lib_base) return;
    const cuuint64_t dflt = CU_GET_PROC_ADDRESS_DEFAULT;
    const cuuint64_t ptsz = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    GPP_RESOLVE(cuMemAlloc, "cuMemAlloc", 12000, dflt);
    GPP_RESOLVE(cuMemFree, "cuMemFree", 12000, dflt);
    GPP_RESOLVE(cuMemAllocAsync, "cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    GPP_RESOLVE(cuMemFreeAsync, "cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    GPP_RESOLVE(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 12000, ptsz);
    GPP_RESOLVE(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 12000, ptsz);
    GPP_RESOLVE(cuMemHostAlloc, "cuMemHostAlloc", 12000, dflt);
    GPP_RESOLVE(cuMemAllocHost, "cuMemAllocHost", 12000, dflt);
    GPP_RESOLVE(cuMemFreeHost, "cuMemFreeHost", 12000, dflt);
    GPP_RESOLVE(cuMemGetInfo, "cuMemGetInfo", 12000, dflt);
    GPP_RESOLVE(cuCtxGetCurrent, "cuCtxGetCurrent", 12000, dflt);
    GPP_RESOLVE(cuCtxGetDevice, "cuCtxGetDevice", 12000, dflt);
    GPP_RESOLVE(cuCtxPushCurrent, "cuCtxPushCurrent", 12000, dflt);
    GPP_RESOLVE(cuCtxPopCurrent, "cuCtxPopCurrent", 12000, dflt);
    GPP_RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent", 12000, dflt);
    GPP_RESOLVE(cuStreamCreate, "cuStreamCreate", 12000, dflt);
    GPP_RESOLVE(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 12000, dflt);
    GPP_RESOLVE(cuStreamDestroy, "cuStreamDestroy", 12000, dflt);
    GPP_RESOLVE(cuEventQuery, "cuEventQuery", 12000, dflt);
    GPP_RESOLVE(cuEventSynchronize, "cuEventSynchronize", 12000, dflt);
    GPP_RESOLVE(cuEventDestroy, "cuEventDestroy", 12000, dflt);
    GPP_RESOLVE(cuCtxSynchronize, "cuCtxSynchronize", 12000, dflt);
    GPP_RESOLVE(cuStreamSynchronize, "cuStreamSynchronize", 12000, dflt);
    GPP_RESOLVE(cuDeviceGet, "cuDeviceGet", 12000, dflt);
    GPP_RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 12000, dflt);
    GPP_RESOLVE(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 12000, dflt);
    GPP_RESOLVE(cuEventCreate, "cuEventCreate", 12000, dflt);
    GPP_RESOLVE(cuEventRecord, "cuEventRecord", 12000, dflt);
    GPP_RESOLVE(cuStreamWaitEvent, "cuStreamWaitEvent", 12000, dflt);
    const cuuint64_t legacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    GPP_RESOLVE(cuStreamBeginCapture, "cuStreamBeginCapture", 12000, legacy);
    GPP_RESOLVE(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 12000, ptsz);
    GPP_RESOLVE(cuStreamEndCapture, "cuStreamEndCapture", 12000, legacy);
    GPP_RESOLVE(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 12000, ptsz);
    GPP_RESOLVE(cuMemGetAddressRange, "cuMemGetAddressRange", 12000, dflt);
    GPP_RESOLVE(cuPointerGetAttribute, "cuPointerGetAttribute", 12000, dflt);
    GPP_RESOLVE(cuPointerGetAttributes, "cuPointerGetAttributes", 12000, dflt);
    GPP_RESOLVE(cuMemCreate, "cuMemCreate", 12000, dflt);
    GPP_RESOLVE(cuMemAllocManaged, "cuMemAllocManaged", 12000, dflt);
    GPP_RESOLVE(cuMemAllocPitch, "cuMemAllocPitch", 12000, dflt);
    GPP_RESOLVE(cuMemHostGetFlags, "cuMemHostGetFlags", 12000, dflt);
    GPP_RESOLVE(cuMemHostUnregister, "cuMemHostUnregister", 12000, dflt);
    GPP_RESOLVE(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer", 12000, dflt);
    GPP_RESOLVE(cuStreamGetCtx, "cuStreamGetCtx", 12000, legacy);
    GPP_RESOLVE(cuStreamIsCapturing, "cuStreamIsCapturing", 12000, legacy);
    GPP_RESOLVE(cuStreamIsCapturing_ptsz, "cuStreamIsCapturing", 12000, ptsz);
    if (d->cuMemAlloc && d->cuMemFree && d->cuCtxGetCurrent && d->cuCtxGetDevice &&
        d->cuCtxPushCurrent && d->cuCtxPopCurrent && d->cuCtxSetCurrent && d->cuStreamCreate &&
        d->cuCtxSynchronize && d->cuDeviceGet && d->cuDevicePrimaryCtxRetain)
        driver_ok = d;
}
#undef GPP_RESOLVE

static _Atomic(const gpp_real_driver *) driver_loaded; /* driver_ok, once load_driver ran */

const gpp_real_driver *gpp_driver(void)
{
    const gpp_real_driver *d = atomic_load_explicit(&driver_loaded, memory_order_acquire);
    if (__builtin_expect(d != NULL, 1)) return d;
    atomic_store_explicit(&cuda_touched, 1, memory_order_relaxed);
    if (gpp_in_forked_child()) return NULL; /* the parent's driver state is not ours */
    pthread_once(&driver_once, load_driver);
    if (driver_ok)
        atomic_store_explicit(&driver_loaded, driver_ok, memory_order_release);
    else if (gpp_enabled())
        gpp_notice_once(GPP_NOTICE_DRIVER,
                        "cannot load the CUDA driver (%s); CUDA calls pass through", driver_error);
    return driver_ok;
}

/* -1 until known; 1 when the driver symbols this library exports (preload_direct.c) can be
 * served: the driver loads, and a libcuda the program is linked with (the next definition of
 * cuGetProcAddress_v2 after this library) is that same driver. */
static atomic_int direct_state = -1;

static int direct_resolve(void)
{
    int ok = 0;
    const gpp_real_driver *d = gpp_driver();
    if (d) {
        void *linked = gpp_real_dlsym(RTLD_NEXT, "cuGetProcAddress_v2");
        ok = !linked || object_base(linked) == d->lib_base;
        if (!ok) {
            Dl_info info;
            const char *name = dladdr(linked, &info) && info.dli_fname ? info.dli_fname : "?";
            gpp_notice_once(GPP_NOTICE_LINKED,
                            "the program is linked with %s, not the driver gpool loads (%s): its "
                            "direct driver calls pass through",
                            name, driver_path);
        }
    }
    atomic_store_explicit(&direct_state, ok, memory_order_relaxed);
    return ok;
}

int gpp_direct_ok(void)
{
    int s = atomic_load_explicit(&direct_state, memory_order_relaxed);
    return __builtin_expect(s >= 0, 1) ? s : direct_resolve();
}

/* ---------------------------------------------------------------- pools ------------------- */

struct gpp_device {
    _Atomic(gpool_t *) pool;
    atomic_int failed;          /* gpool cannot serve this device: pass its calls through */
    CUcontext ctx;              /* its primary context (retained, like gpool's) */
    _Atomic size_t batch_limit; /* set with the pool, before the pool is published */
};
static struct gpp_device devices[GPP_MAX_DEVICES];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

int gpp_pools_exportable(void)
{
    return conf_pool.ipc;
}

gpool_t *gpp_pool_peek(int dev)
{
    if (dev < 0 || dev >= GPP_MAX_DEVICES) return NULL;
    return atomic_load_explicit(&devices[dev].pool, memory_order_acquire);
}

/* Retain dev's primary context (pool_lock held). */
static void open_context(const gpp_real_driver *d, int dev, struct gpp_device *g)
{
    CUdevice cudev;
    if (d->cuDeviceGet(&cudev, dev) != CUDA_SUCCESS ||
        d->cuDevicePrimaryCtxRetain(&g->ctx, cudev) != CUDA_SUCCESS) {
        g->ctx = NULL;
        return;
    }
}

/* cudafree_batch=, else 1/64 of the device's memory and at least 64 MiB: the one
 * cuMemGetInfo a pool's batch costs. */
static size_t batch_limit_of(gpool_t *pool)
{
    if (conf_own.batch_bytes) return conf_own.batch_bytes;
    size_t fr, total;
    size_t floor = (size_t)64 << 20;
    if (gpool_mem_get_info(pool, &fr, &total) == GPOOL_OK && total / 64 > floor) return total / 64;
    return floor;
}

size_t gpp_batch_limit(int dev)
{
    size_t lim = dev >= 0 && dev < GPP_MAX_DEVICES
                     ? atomic_load_explicit(&devices[dev].batch_limit, memory_order_relaxed)
                     : 0;
    return lim ? lim : (size_t)64 << 20;
}

gpool_t *gpp_pool(int dev)
{
    gpool_t *pool = gpp_pool_peek(dev);
    if (pool || dev < 0 || dev >= GPP_MAX_DEVICES) return pool;
    struct gpp_device *g = &devices[dev];
    if (atomic_load_explicit(&g->failed, memory_order_relaxed)) return NULL;
    const gpp_real_driver *d = gpp_driver();
    if (!d) return NULL;
    pthread_mutex_lock(&pool_lock);
    pool = atomic_load_explicit(&g->pool, memory_order_relaxed);
    if (!pool && !atomic_load_explicit(&g->failed, memory_order_relaxed)) {
        gpool_config cfg = conf_pool;
        cfg.device = dev;
        gpool_status st = gpool_create(&cfg, &pool);
        if (st == GPOOL_OK) {
            if (!g->ctx) open_context(d, dev, g); /* kept over a reset (gpp_device_reset) */
            atomic_store_explicit(&g->batch_limit, batch_limit_of(pool), memory_order_relaxed);
            atomic_store_explicit(&g->pool, pool, memory_order_release);
        } else {
            pool = NULL;
            atomic_store(&g->failed, 1);
            if (conf_pool.verbose) /* every device; otherwise the first one, once */
                fprintf(stderr, "gpool preload: device %d passes through to CUDA: %s\n", dev,
                        gpool_last_error());
            else
                gpp_notice_once(GPP_NOTICE_POOL,
                                "cannot serve device %d (%s); its CUDA allocations pass through",
                                dev, gpool_last_error());
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return pool;
}

/* cuDevicePrimaryCtxReset of dev, before the real call. cuda.h: the reset "Destroy[s] all
 * allocations and reset[s] all state on the primary context"; cuda_runtime_api.h,
 * cudaDeviceReset: "Explicitly destroys and cleans up all resources associated with the current
 * device in the current process. ... Any subsequent API call to this device will reinitialize
 * the device". Every block of dev's pool dies with the reset, live ones included (the program
 * reset the device: it names none again); so the pool goes now, while its memory, streams and
 * events are still the driver's: the cudaFree batches are flushed first (blocks of dev waiting
 * there go back to it), dev's work is waited for, then the pool is destroyed (gpool_destroy
 * gives every mapping, reservation and pinned host block back) and the next allocation on dev
 * makes a fresh pool. The pinned host blocks of dev's pool go with it: cudaMallocHost memory
 * is allocated in the current device's context, one of the "resources associated with the
 * current device". Our retain of the primary context stays ("Resetting the primary context
 * does not release it"), for the next pool. The caller guarantees that no other thread uses
 * the device meanwhile (cudaDeviceReset: "It is the caller's responsibility to ensure that the
 * device is not being accessed by any other host threads"); other devices' pools are not
 * touched. */
void gpp_device_reset(int dev)
{
    if (dev < 0 || dev >= GPP_MAX_DEVICES || !gpp_pool_peek(dev)) return;
    gpp_batch_flush_all();
    gpp_device_sync(dev);
    pthread_mutex_lock(&pool_lock);
    struct gpp_device *g = &devices[dev];
    gpool_t *pool = atomic_load_explicit(&g->pool, memory_order_relaxed);
    atomic_store_explicit(&g->pool, NULL, memory_order_release);
    if (pool) {
        gpp_host_flags_drop_pool(pool);
        gpp_legacy_fence_forget(dev);
        gpp_streams_reset(dev);
        (void)gpool_destroy(pool); /* live blocks are expected: the reset frees them */
    }
    pthread_mutex_unlock(&pool_lock);
}

__attribute__((visibility("default"))) gpool_status gpool_preload_stats_get(int device,
                                                                            gpool_stats *out)
{
    gpool_t *pool = gpp_pool_peek(device);
    return pool ? gpool_get_stats(pool, out) : GPOOL_ERR_NO_DEVICE;
}

CUstream gpp_stream(CUstream s, int per_thread)
{
    if (!s) return per_thread ? CU_STREAM_PER_THREAD : NULL;
    return s == CU_STREAM_LEGACY ? NULL : s;
}

/* ---------------------------------------------------------------- alloc / free ------------ */

static __attribute__((noinline)) gpool_status alloc_device_slow(int dev, size_t size,
                                                                CUstream stream, void **out)
{
    gpool_t *pool = gpp_pool(dev);
    if (__builtin_expect(!pool, 0)) return GPOOL_ERR_NO_DRIVER;
    /* A block for the legacy stream (cudaMalloc, cuMemAlloc, cudaMallocAsync on stream 0) may
     * be used on any stream at once. While every stream waits for the legacy stream, making
     * the legacy stream wait for another stream's frees (gpool's hand-over) orders them all;
     * a non-blocking stream does not wait for it, so then no hand-over: memory freed on other
     * streams comes only once their work is done (tests/test_preload_adversarial.c,
     * freeasync_then_cudamalloc_nonblocking_consumer). */
    const gpool_alloc_params *params = NULL;
    static const gpool_alloc_params no_wait = {.struct_size = sizeof no_wait,
                                               .flags = GPOOL_ALLOC_NO_STREAM_WAIT};
    if (!stream && __builtin_expect(gpp_nonblocking_streams() != 0, 0)) params = &no_wait;
    /* gpool_alloc's inline thread-cache path serves the default (legacy) stream */
    gpool_status st = stream || conf_pool.default_stream
                          ? gpool_alloc_async(pool, size, params, stream, out)
                          : gpool_alloc(pool, size, params, out);
    /* only once gpool found neither a cached block nor driver memory: the batches may hold
     * what is missing */
    if (st == GPOOL_ERR_OUT_OF_MEMORY && gpp_batch_flush_all())
        st = gpool_alloc_async(pool, size, params, stream, out);
    return st;
}

gpool_status gpp_alloc_device(int dev, size_t size, CUstream stream, void **out)
{
    /* the cached path of the legacy stream: the pool exists, gpool_alloc's thread cache; once a
     * non-blocking stream exists, alloc_device_slow (no hand-over from a busy stream) */
    gpool_t *pool = gpp_pool_peek(dev);
    gpool_status st;
    if (__builtin_expect(pool && !stream && !conf_pool.default_stream && !gpp_nonblocking_streams(),
                         1)) {
        st = gpool_alloc(pool, size, NULL, out);
        if (__builtin_expect(st == GPOOL_OK, 1)) return st;
        /* gpool found neither a cached block nor driver memory: the batches may hold it */
        if (st == GPOOL_ERR_OUT_OF_MEMORY && gpp_batch_flush_all())
            st = gpool_alloc_async(pool, size, NULL, stream, out);
    } else {
        st = alloc_device_slow(dev, size, stream, out);
    }
    /* cuda_runtime_api.h, cudaMalloc: a size no allocation can have is out of memory
     * (cudaErrorMemoryAllocation); gpool refuses it as an invalid argument */
    return st == GPOOL_ERR_INVALID_ARG ? GPOOL_ERR_OUT_OF_MEMORY : st;
}

/* Every device gpool serves: its work is done. */
static void sync_all_devices(void)
{
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++)
        if (gpp_pool_peek(dev)) gpp_device_sync(dev);
}

static gpp_free_result free_result(gpool_status st)
{
    return st == GPOOL_OK                    ? GPP_FREED
           : st == GPOOL_ERR_INVALID_POINTER ? GPP_NOT_OURS
                                             : GPP_FREE_FAILED;
}

/* Wait for all work of dev's context. */
CUcontext gpp_device_context(int dev)
{
    return dev >= 0 && dev < GPP_MAX_DEVICES ? devices[dev].ctx : NULL;
}

void gpp_device_sync(int dev)
{
    const gpp_real_driver *d = gpp_driver();
    struct gpp_device *g = &devices[dev];
    if (!d || !g->ctx) return;
    CUcontext cur = NULL, popped;
    int pushed = 0;
    if (d->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != g->ctx)
        pushed = d->cuCtxPushCurrent(g->ctx) == CUDA_SUCCESS;
    d->cuCtxSynchronize();
    if (pushed) d->cuCtxPopCurrent(&popped);
}

/* Order a cudaFree-style free of a block of dev after all work issued so far (see the top of
 * this file): a synchronize in sync mode, else the legacy-stream fence (preload_fence.c; the
 * other modes queue into the batch, which fences or synchronizes per flush). */
static void legacy_barrier(int dev)
{
    if (conf_own.free_mode == GPP_CUDAFREE_SYNC)
        gpp_device_sync(dev);
    else
        gpp_legacy_fence(dev);
}

/* A cudaFree/cuMemFree/cudaFreeHost goes to the calling thread's batch in batch and stream
 * mode: flushed by the legacy-stream fence every 32 blocks while no non-blocking stream
 * exists, by a synchronize per cudafree_batch bytes once one does (preload_batch.c). */
static int free_to_batch(void)
{
    return conf_own.free_mode != GPP_CUDAFREE_SYNC;
}

gpp_free_result gpp_free_now(void *p, int dev)
{
    gpp_device_sync(dev);
    return free_result(gpool_free(gpp_pool_peek(dev), p));
}

/* Whether one of our pools holds p (no driver call, no change). */
static int owned_anywhere(const void *p)
{
    gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        if (pool && gpool_get_block_desc(pool, p, &desc) == GPOOL_OK) return 1;
    }
    return 0;
}

/* A legacy free in batch and stream mode of p, not a block of device cur's pool: the other
 * devices' pools. */
static gpp_free_result batch_other_device(void *p, int cur)
{
    size_t size;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = dev == cur ? NULL : gpp_pool_peek(dev);
        if (pool && gpool_block_size(pool, p, &size) == GPOOL_OK)
            return gpp_batch_add(p, dev, size);
    }
    return GPP_NOT_OURS;
}

/* A stream-ordered free of another device's block on the calling thread's legacy (NULL) or
 * per-thread stream: the free is ordered after the work queued on that stream of the current
 * device (cuda_runtime_api.h, cudaFreeAsync: "Inserts a free operation into hStream"; stream 0
 * is the current context's default stream), which the block's pool cannot name (for it NULL
 * and CU_STREAM_PER_THREAD are its own device's streams). So that stream is synchronized and
 * the block goes back at once. 1 when it was; 0 when it cannot be now (a capture that the
 * synchronize would join or invalidate: cuda.h, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). A rare
 * path: a peer block freed on the caller's own default stream. */
static int callers_stream_done(CUstream stream)
{
    const gpp_real_driver *d = gpp_driver();
    if (!d || !d->cuStreamSynchronize) return 0;
    CUstream s = stream ? stream : CU_STREAM_LEGACY;
    if (atomic_load_explicit(&gpp_captures, memory_order_relaxed)) {
        CUstreamCaptureStatus st;
        if (!d->cuStreamIsCapturing || d->cuStreamIsCapturing(s, &st) != CUDA_SUCCESS ||
            st != CU_STREAM_CAPTURE_STATUS_NONE)
            return 0;
    }
    return d->cuStreamSynchronize(s) == CUDA_SUCCESS;
}

/* A stream-ordered free, on the caller's legacy or per-thread stream, of a block of another
 * device than the current one (cur): its pool would take NULL and CU_STREAM_PER_THREAD for its
 * own device's streams. GPP_NOT_OURS when no other device's pool holds p. */
static gpp_free_result peer_free_on_callers_stream(void *p, int cur, CUstream stream)
{
    gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = dev == cur ? NULL : gpp_pool_peek(dev);
        if (!pool || gpool_get_block_desc(pool, p, &desc) != GPOOL_OK) continue;
        if (callers_stream_done(stream)) return free_result(gpool_free(pool, p));
        legacy_barrier(dev); /* during a capture: as a cudaFree of the block (docs/dropin.md) */
        return free_result(gpool_free(pool, p));
    }
    return GPP_NOT_OURS;
}

static __attribute__((noinline)) gpp_free_result free_device_slow(void *p, CUstream stream,
                                                                  int legacy)
{
    if (__builtin_expect(gpp_exiting(), 0)) return owned_anywhere(p) ? GPP_FREED : GPP_NOT_OURS;
    /* freed already and waiting in a batch: gpool still counts it live */
    if (gpp_pending_has(p)) return GPP_FREE_INVALID;
    int cur = gpp_current_device();
    if (cur < 0) cur = 0;
    /* The current device first, without a lookup: gpool_free_async changes nothing and says
     * INVALID_POINTER for a pointer it does not own. */
    gpool_t *pool = gpp_pool_peek(cur);
    /* a pinned host block is not what cudaFree/cuMemFree/cudaFreeAsync free */
    if (__builtin_expect(gpp_host_blocks() != 0, 0) && gpp_host_block(p)) return GPP_FREE_INVALID;
    /* A stream-ordered free on the legacy stream (cudaFreeAsync(p, 0)) would make the block
     * reusable at once by the legacy stream's next request, cudaMalloc's included, whose block
     * a non-blocking stream may use at once without waiting for the legacy stream: once one
     * exists, such a free waits as cudaFree's do. */
    int on_callers = !legacy && (!stream || stream == CU_STREAM_PER_THREAD);
    if (!legacy && !stream && __builtin_expect(gpp_nonblocking_streams() != 0, 0)) legacy = 1;
    /* batch and stream mode: the block waits in the batch until its fence or synchronize */
    if (legacy && free_to_batch()) {
        /* the current device's pool first; gpool_block_size takes no lock for small blocks */
        size_t size;
        if (__builtin_expect(pool && gpool_block_size(pool, p, &size) == GPOOL_OK, 1))
            return gpp_batch_add(p, cur, size);
        return on_callers ? peer_free_on_callers_stream(p, cur, stream)
                          : batch_other_device(p, cur);
    }
    gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
    if (pool) {
        if (legacy)
            legacy_barrier(cur);
        else if (!stream) /* a stream-ordered free on the legacy stream */
            gpp_legacy_fence(cur);
        /* gpool_free's inline thread-cache path serves the default (legacy) stream */
        gpp_free_result r =
            free_result(!stream && !conf_pool.default_stream ? gpool_free(pool, p)
                                                             : gpool_free_async(pool, p, stream));
        if (r != GPP_NOT_OURS) return r;
    }
    if (on_callers) return peer_free_on_callers_stream(p, cur, stream);
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        if (dev == cur || !(pool = gpp_pool_peek(dev))) continue;
        if (gpool_get_block_desc(pool, p, &desc) != GPOOL_OK) continue;
        if (legacy)
            legacy_barrier(dev);
        else if (!stream) /* a stream-ordered free on the legacy stream */
            gpp_legacy_fence(dev);
        return free_result(gpool_free_async(pool, p, stream));
    }
    return GPP_NOT_OURS;
}

static inline gpp_free_result free_device(void *p, CUstream stream, int legacy)
{
    /* the cached path of cudaFree/cuMemFree in batch and stream mode (free_device_slow's
     * first case, inline): a block of the current device's pool, into the batch */
    if (__builtin_expect(legacy && free_to_batch() && !gpp_exiting() && !gpp_host_blocks(), 1)) {
        int cur = gpp_current_device();
        if (cur < 0) cur = 0;
        gpool_t *pool = gpp_pool_peek(cur);
        size_t size; /* gpool_block_size takes no lock for small blocks */
        if (__builtin_expect(pool && gpool_block_size(pool, p, &size) == GPOOL_OK, 1))
            return gpp_batch_add(p, cur, size);
        return batch_other_device(p, cur);
    }
    return free_device_slow(p, stream, legacy);
}

gpp_free_result gpp_free_device(void *p, CUstream stream, int legacy)
{
    gpp_free_result r = free_device(p, stream, legacy);
    if (r == GPP_FREED) gpp_buffer_id_drop((uintptr_t)p); /* its id dies with it */
    return r;
}

gpool_status gpp_alloc_host(size_t size, gpool_mem_kind kind, unsigned flags, void **out)
{
    int dev = gpp_current_device();
    gpool_t *pool = gpp_pool(dev < 0 ? 0 : dev);
    if (!pool) return GPOOL_ERR_NO_DRIVER;
    gpool_alloc_params params = {.kind = kind};
    gpool_status st = gpool_alloc(pool, size, &params, out);
    if (st == GPOOL_OK && kind == GPOOL_MEM_HOST_MAPPED) {
        /* gpool answers a mapped block with its device address; callers want the host one */
        gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
        if (gpool_get_block_desc(pool, *out, &desc) == GPOOL_OK && desc.host_ptr)
            *out = desc.host_ptr;
    }
    if (st == GPOOL_OK && !gpp_host_flags_put(*out, flags)) { /* no room to remember it */
        gpp_free_host(*out);
        *out = NULL;
        return GPOOL_ERR_OUT_OF_MEMORY;
    }
    return st;
}

gpp_free_result gpp_free_host(void *p)
{
    if (gpp_exiting()) return owned_anywhere(p) ? GPP_FREED : GPP_NOT_OURS;
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        if (!pool) continue;
        gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
        if (gpool_get_block_desc(pool, p, &desc) != GPOOL_OK || desc.kind == GPOOL_MEM_DEVICE)
            continue;
        /* cuda_runtime_api.h, cudaFreeHost: ptr must be what cudaMallocHost or cudaHostAlloc
         * returned; an address inside the block is an invalid value, and the block stays */
        if (p != desc.host_ptr && (uintptr_t)p != (uintptr_t)desc.device_ptr)
            return GPP_FREE_INVALID;
        /* the block is freed by the address gpool handed out */
        void *handle =
            desc.kind == GPOOL_MEM_HOST_MAPPED ? (void *)(uintptr_t)desc.device_ptr : desc.host_ptr;
        if (gpp_pending_has(handle ? handle : p)) return GPP_FREE_INVALID; /* freed already */
        gpp_host_flags_drop(p);
        gpp_buffer_id_drop(desc.device_ptr ? (uintptr_t)desc.device_ptr : (uintptr_t)desc.host_ptr);
        /* the same modes as cudaFree (see the top of this file); host memory is reachable
         * from every device, so each device gpool serves is covered */
        if (!free_to_batch())
            sync_all_devices();
        else if (!gpp_batch_fences()) /* a non-blocking stream exists, or a capture runs */
            return gpp_batch_add_host(handle ? handle : p, dev, desc.size);
        else /* host frees are few: the fence at once, the block reusable at once */
            gpp_legacy_fence_all();
        gpool_status st = gpool_free(pool, handle ? handle : p);
        if (st == GPOOL_ERR_INVALID_POINTER && handle && handle != p) st = gpool_free(pool, p);
        return free_result(st);
    }
    return GPP_NOT_OURS;
}

int gpp_host_device_pointer(void *p, void **devp)
{
    for (int dev = 0; dev < GPP_MAX_DEVICES; dev++) {
        gpool_t *pool = gpp_pool_peek(dev);
        gpool_block_desc desc = GPOOL_BLOCK_DESC_INIT;
        if (!pool || gpool_get_block_desc(pool, p, &desc) != GPOOL_OK) continue;
        if (desc.kind == GPOOL_MEM_DEVICE || !desc.device_ptr) return -1;
        uintptr_t off = desc.host_ptr ? (uintptr_t)p - (uintptr_t)desc.host_ptr : 0;
        *devp = (void *)(uintptr_t)(desc.device_ptr + off);
        return 1;
    }
    return 0;
}

gpool_status gpp_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    int dev = gpp_current_device();
    gpool_t *pool = gpp_pool(dev < 0 ? 0 : dev);
    if (!pool) return GPOOL_ERR_NO_DRIVER;
    gpool_status st = gpool_mem_get_info(pool, free_bytes, total_bytes);
    if (st == GPOOL_OK) { /* the pending batch is free memory the next shortage reclaims */
        size_t more = gpp_pending_bytes(dev < 0 ? 0 : dev);
        *free_bytes = *free_bytes + more < *total_bytes ? *free_bytes + more : *total_bytes;
    }
    return st;
}

/* ---------------------------------------------------------------- symbol substitution ----- */

/* Exported driver symbols we replace when dlsym asks for them by name. */
static const struct {
    const char *name;
    void *hook;
} symbol_hooks[] = {
    {"cuGetProcAddress_v2", (void *)gpp_cuGetProcAddress_v2},
    {"cuGetProcAddress", (void *)gpp_cuGetProcAddress_v1},
    {"cuMemAlloc_v2", (void *)gpp_cuMemAlloc_v2},
    {"cuMemFree_v2", (void *)gpp_cuMemFree_v2},
    {"cuMemAllocAsync", (void *)gpp_cuMemAllocAsync},
    {"cuMemAllocAsync_ptsz", (void *)gpp_cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", (void *)gpp_cuMemFreeAsync},
    {"cuMemFreeAsync_ptsz", (void *)gpp_cuMemFreeAsync_ptsz},
    {"cuMemHostAlloc", (void *)gpp_cuMemHostAlloc},
    {"cuMemAllocHost_v2", (void *)gpp_cuMemAllocHost_v2},
    {"cuMemFreeHost", (void *)gpp_cuMemFreeHost},
    {"cuMemHostGetFlags", (void *)gpp_cuMemHostGetFlags},
    {"cuMemHostUnregister", (void *)gpp_cuMemHostUnregister},
    {"cuMemHostGetDevicePointer_v2", (void *)gpp_cuMemHostGetDevicePointer_v2},
    {"cuMemGetInfo_v2", (void *)gpp_cuMemGetInfo_v2},
    {"cuCtxSetCurrent", (void *)gpp_cuCtxSetCurrent},
    {"cuCtxPushCurrent_v2", (void *)gpp_cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent_v2", (void *)gpp_cuCtxPopCurrent_v2},
    {"cuDevicePrimaryCtxReset_v2", (void *)gpp_cuDevicePrimaryCtxReset_v2},
    {"cuDevicePrimaryCtxReset", (void *)gpp_cuDevicePrimaryCtxReset_v2},
    {"cuStreamCreate", (void *)gpp_cuStreamCreate},
    {"cuStreamCreateWithPriority", (void *)gpp_cuStreamCreateWithPriority},
    {"cuStreamDestroy_v2", (void *)gpp_cuStreamDestroy_v2},
    {"cuStreamBeginCapture_v2", (void *)gpp_cuStreamBeginCapture_v2},
    {"cuStreamBeginCapture_v2_ptsz", (void *)gpp_cuStreamBeginCapture_v2_ptsz},
    {"cuStreamEndCapture", (void *)gpp_cuStreamEndCapture},
    {"cuStreamEndCapture_ptsz", (void *)gpp_cuStreamEndCapture_ptsz},
    {"cuMemGetAddressRange_v2", (void *)gpp_cuMemGetAddressRange_v2},
    {"cuPointerGetAttribute", (void *)gpp_cuPointerGetAttribute},
    {"cuPointerGetAttributes", (void *)gpp_cuPointerGetAttributes},
    {"cuMemCreate", (void *)gpp_cuMemCreate},
    {"cuMemAllocManaged", (void *)gpp_cuMemAllocManaged},
    {"cuMemAllocPitch_v2", (void *)gpp_cuMemAllocPitch_v2},
    {"cuIpcGetMemHandle", (void *)gpp_cuIpcGetMemHandle},
    {"cuIpcOpenMemHandle_v2", (void *)gpp_cuIpcOpenMemHandle_v2},
    {"cuIpcCloseMemHandle", (void *)gpp_cuIpcCloseMemHandle},
};

void *gpp_hook_for_symbol(const char *name)
{
    for (size_t i = 0; i < sizeof symbol_hooks / sizeof symbol_hooks[0]; i++)
        if (!strcmp(symbol_hooks[i].name, name)) return symbol_hooks[i].hook;
    return NULL;
}

/* cuGetProcAddress names base symbols; the ABI we replace exists from min_version on (older
 * versions, e.g. the 32-bit cuMemAlloc, get the real entry point). */
static const struct {
    const char *name;
    int min_version;
    void *hook, *hook_ptsz;
} proc_hooks[] = {
    {"cuMemAlloc", 3020, (void *)gpp_cuMemAlloc_v2, NULL},
    {"cuMemFree", 3020, (void *)gpp_cuMemFree_v2, NULL},
    {"cuMemAllocAsync", 11020, (void *)gpp_cuMemAllocAsync, (void *)gpp_cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, (void *)gpp_cuMemFreeAsync, (void *)gpp_cuMemFreeAsync_ptsz},
    {"cuMemHostAlloc", 2020, (void *)gpp_cuMemHostAlloc, NULL},
    {"cuMemAllocHost", 3020, (void *)gpp_cuMemAllocHost_v2, NULL},
    {"cuMemFreeHost", 2000, (void *)gpp_cuMemFreeHost, NULL},
    {"cuMemHostGetFlags", 2030, (void *)gpp_cuMemHostGetFlags, NULL},
    {"cuMemHostUnregister", 4000, (void *)gpp_cuMemHostUnregister, NULL},
    {"cuMemHostGetDevicePointer", 3020, (void *)gpp_cuMemHostGetDevicePointer_v2, NULL},
    {"cuMemGetInfo", 3020, (void *)gpp_cuMemGetInfo_v2, NULL},
    {"cuCtxSetCurrent", 4000, (void *)gpp_cuCtxSetCurrent, NULL},
    {"cuCtxPushCurrent", 4000, (void *)gpp_cuCtxPushCurrent_v2, NULL},
    {"cuCtxPopCurrent", 4000, (void *)gpp_cuCtxPopCurrent_v2, NULL},
    {"cuDevicePrimaryCtxReset", 7000, (void *)gpp_cuDevicePrimaryCtxReset_v2, NULL},
    {"cuStreamCreate", 2000, (void *)gpp_cuStreamCreate, NULL},
    {"cuStreamCreateWithPriority", 5050, (void *)gpp_cuStreamCreateWithPriority, NULL},
    {"cuStreamDestroy", 4000, (void *)gpp_cuStreamDestroy_v2, NULL},
    {"cuStreamBeginCapture", 10010, (void *)gpp_cuStreamBeginCapture_v2,
     (void *)gpp_cuStreamBeginCapture_v2_ptsz},
    {"cuStreamEndCapture", 10000, (void *)gpp_cuStreamEndCapture,
     (void *)gpp_cuStreamEndCapture_ptsz},
    {"cuGetProcAddress", 12000, (void *)gpp_cuGetProcAddress_v2, NULL},
    {"cuGetProcAddress", 11030, (void *)gpp_cuGetProcAddress_v1, NULL},
    {"cuMemGetAddressRange", 3020, (void *)gpp_cuMemGetAddressRange_v2, NULL},
    {"cuPointerGetAttribute", 4000, (void *)gpp_cuPointerGetAttribute, NULL},
    {"cuPointerGetAttributes", 7000, (void *)gpp_cuPointerGetAttributes, NULL},
    {"cuMemCreate", 10020, (void *)gpp_cuMemCreate, NULL},
    {"cuMemAllocManaged", 6000, (void *)gpp_cuMemAllocManaged, NULL},
    {"cuMemAllocPitch", 3020, (void *)gpp_cuMemAllocPitch_v2, NULL},
    {"cuIpcGetMemHandle", 4010, (void *)gpp_cuIpcGetMemHandle, NULL},
    {"cuIpcOpenMemHandle", 11000, (void *)gpp_cuIpcOpenMemHandle_v2, NULL},
    {"cuIpcCloseMemHandle", 4010, (void *)gpp_cuIpcCloseMemHandle, NULL},
};

/* Our replacement for what the real cuGetProcAddress answered (real_fn), or NULL to keep it. */
static void *proc_substitute(const gpp_real_driver *d, const char *symbol, int version,
                             cuuint64_t flags, void *real_fn)
{
    if (!symbol || !real_fn || !gpp_enabled()) return NULL;
    for (size_t i = 0; i < sizeof proc_hooks / sizeof proc_hooks[0]; i++) {
        if (strcmp(proc_hooks[i].name, symbol) != 0 || version < proc_hooks[i].min_version)
            continue;
        int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ||
                   (real_fn == d->sym_cuMemAllocAsync_ptsz && real_fn) ||
                   (real_fn == d->sym_cuMemFreeAsync_ptsz && real_fn) ||
                   real_fn == (void *)d->cuStreamBeginCapture_ptsz ||
                   real_fn == (void *)d->cuStreamEndCapture_ptsz;
        if (flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM) ptsz = 0;
        return ptsz && proc_hooks[i].hook_ptsz ? proc_hooks[i].hook_ptsz : proc_hooks[i].hook;
    }
    return NULL;
}

/* cuGetProcAddress needs no initialisation: in a forked child it still answers, with the real
 * entry points (serving is off there, so nothing is substituted), which then give the child
 * the driver's own answer. */
static const gpp_real_driver *getproc_driver(void)
{
    return gpp_in_forked_child() ? driver_ok : gpp_driver();
}

CUresult gpp_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    const gpp_real_driver *d = getproc_driver();
    if (!d) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
    if (r == CUDA_SUCCESS && pfn) {
        void *hook = proc_substitute(d, symbol, cuda_version, flags, *pfn);
        if (hook) *pfn = hook;
    }
    return r;
}

CUresult gpp_cuGetProcAddress_v1(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
{
    const gpp_real_driver *d = getproc_driver();
    if (!d || !d->cuGetProcAddress_v1) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = d->cuGetProcAddress_v1(symbol, pfn, cuda_version, flags);
    if (r == CUDA_SUCCESS && pfn) {
        void *hook = proc_substitute(d, symbol, cuda_version, flags, *pfn);
        if (hook) *pfn = hook;
    }
    return r;
}

/* Programs linked against libcuda that call cuGetProcAddress directly reach these. */
__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *symbolStatus)
{
    return gpp_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
}

__attribute__((visibility("default"))) CUresult
gpp_exported_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags) __asm__("cuGetProcAddress");
CUresult gpp_exported_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                          cuuint64_t flags)
{
    return gpp_cuGetProcAddress_v1(symbol, pfn, cudaVersion, flags);
}
