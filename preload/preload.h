/* preload.h — shared state of libgpool_preload.so, the LD_PRELOAD interposer that serves
 * cudaMalloc & co. (runtime API) and cuMemAlloc & co. (driver API, reached through dlsym and
 * cuGetProcAddress, or called by name from programs linked with -lcuda) from gpool pools. Not
 * installed; only the preload sources include it.
 *
 * The interposer is built on gpool's public API (include/gpool.h) plus a table of the real
 * driver entry points it needs itself (resolved with the real cuGetProcAddress of the same
 * libcuda gpool loads: $GPOOL_LIBCUDA or libcuda.so.1). */
#ifndef GPOOL_PRELOAD_H
#define GPOOL_PRELOAD_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>

#include "gpool.h"

#define GPP_MAX_DEVICES 64

/* Everything below is internal to the .so (the version script exports only the hooks). */
#pragma GCC visibility push(hidden)

/* The real driver entry points, resolved once (gpp_driver()). Hooked ones are here so that a
 * pointer gpool does not own can be passed through. */
typedef struct gpp_real_driver {
    void *lib;      /* dlopen handle of the driver gpool uses too */
    void *lib_base; /* load address of that object (dladdr), to recognise its symbols */
    PFN_cuGetProcAddress_v12000 cuGetProcAddress_v2;
    PFN_cuGetProcAddress_v11030 cuGetProcAddress_v1;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemAllocAsync_v11020 cuMemAllocAsync, cuMemAllocAsync_ptsz;
    PFN_cuMemFreeAsync_v11020 cuMemFreeAsync, cuMemFreeAsync_ptsz;
    PFN_cuMemHostAlloc_v2020 cuMemHostAlloc;
    PFN_cuMemAllocHost_v3020 cuMemAllocHost;
    PFN_cuMemFreeHost_v2000 cuMemFreeHost;
    PFN_cuMemGetInfo_v3020 cuMemGetInfo;
    PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
    PFN_cuCtxGetDevice_v2000 cuCtxGetDevice;
    PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent;
    PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent;
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    PFN_cuStreamCreate_v2000 cuStreamCreate;
    PFN_cuStreamCreateWithPriority_v5050 cuStreamCreateWithPriority; /* may be NULL */
    PFN_cuStreamDestroy_v4000 cuStreamDestroy;
    PFN_cuEventQuery_v2000 cuEventQuery;
    PFN_cuEventSynchronize_v2000 cuEventSynchronize;
    PFN_cuEventDestroy_v4000 cuEventDestroy;
    PFN_cuCtxSynchronize_v2000 cuCtxSynchronize;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize; /* may be NULL */
    PFN_cuDeviceGet_v2000 cuDeviceGet;
    PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxReset_v11000 cuDevicePrimaryCtxReset; /* may be NULL */
    PFN_cuEventCreate_v2000 cuEventCreate;
    PFN_cuEventRecord_v2000 cuEventRecord;
    PFN_cuStreamWaitEvent_v3020 cuStreamWaitEvent; /* may be NULL */
    PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture, cuStreamBeginCapture_ptsz;
    PFN_cuStreamEndCapture_v10000 cuStreamEndCapture, cuStreamEndCapture_ptsz;
    /* pointer queries (preload_query.c) and allocations gpool does not serve (preload_others.c);
     * each may be NULL */
    PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange;
    PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute;
    PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemAllocManaged_v6000 cuMemAllocManaged;
    PFN_cuMemAllocPitch_v3020 cuMemAllocPitch;
    PFN_cuMemHostGetFlags_v2030 cuMemHostGetFlags;
    PFN_cuMemHostUnregister_v4000 cuMemHostUnregister;
    PFN_cuMemHostGetDevicePointer_v3020 cuMemHostGetDevicePointer;
    PFN_cuStreamGetCtx_v9020 cuStreamGetCtx;
    PFN_cuStreamIsCapturing_v10000 cuStreamIsCapturing, cuStreamIsCapturing_ptsz; /* may be NULL */
    /* the addresses the driver exports for the per-thread-stream variants (may be NULL) */
    void *sym_cuMemAllocAsync_ptsz, *sym_cuMemFreeAsync_ptsz;
} gpp_real_driver;

/* The real driver table, loaded on first use; NULL when the driver cannot be loaded. */
const gpp_real_driver *gpp_driver(void);

/* 1 while the interposer serves calls: GPOOL_CONF was valid, disable=1 not given, the
 * process is not exiting. Reads the configuration on first call. */
int gpp_enabled(void);
/* 1 in a child forked after the parent called into CUDA through the interposer (preload.c
 * "fork"): gpp_enabled() is 0 and gpp_driver() NULL there. */
extern atomic_int gpp_forked_child;
static inline int gpp_in_forked_child(void)
{
    return __builtin_expect(atomic_load_explicit(&gpp_forked_child, memory_order_relaxed), 0);
}
/* 1 once exit() has started (our atexit handler or destructor ran). */
int gpp_exiting(void);

/* The pool of device dev, created on first use; NULL when gpool cannot serve that device
 * (the caller passes the call through). */
gpool_t *gpp_pool(int dev);
/* The pool of dev if it exists already (never creates). */
gpool_t *gpp_pool_peek(int dev);
/* 1 when the pools' device pages are made exportable (GPOOL_CONF ipc=1): cudaIpcGetMemHandle
 * then takes their blocks (preload_ipc.c). */
int gpp_pools_exportable(void);
/* The device of the calling thread's current context (-1 when none is current). Cached per
 * thread (preload_ctx.c): no driver call once known, until the thread switches contexts
 * through one of the hooks below (or cudaSetDevice). */
extern _Thread_local __attribute__((tls_model("initial-exec"))) int gpp_tl_device;
int gpp_current_device_slow(void);
static inline int gpp_current_device(void)
{
    int dev = gpp_tl_device;
    return __builtin_expect(dev >= 0, 1) ? dev : gpp_current_device_slow();
}
/* Forget the calling thread's cached device (its current context may have changed). */
void gpp_current_device_changed(void);

/* Stream handles: runtime/driver NULL means the legacy stream (or the per-thread stream for
 * the _ptsz variants); gpool's tag for the legacy stream is NULL. */
CUstream gpp_stream(CUstream s, int per_thread);

/* Outcome of trying to free a pointer through gpool. */
/* GPP_FREE_INVALID: gpool's, but not what the call frees (a host block given to cudaFree):
 * nothing freed, CUDA's invalid value. */
typedef enum { GPP_NOT_OURS = 0, GPP_FREED, GPP_FREE_FAILED, GPP_FREE_INVALID } gpp_free_result;

/* Allocate size device bytes on device dev for stream; returns the gpool status (OK with
 * *out set, OUT_OF_MEMORY, or another error meaning "pass through"). */
gpool_status gpp_alloc_device(int dev, size_t size, CUstream stream, void **out);
/* Free p: legacy = 1 for cudaFree/cuMemFree semantics (see preload.c), else stream-ordered
 * on stream. */
gpp_free_result gpp_free_device(void *p, CUstream stream, int legacy);
/* Host memory: kind is GPOOL_MEM_HOST_PINNED or _MAPPED, flags the CU_MEMHOSTALLOC_* asked
 * (cuMemHostGetFlags answers them). Returns the gpool status; UNSUPPORTED (host kinds not
 * available) and other non-OOM errors mean "pass through". */
gpool_status gpp_alloc_host(size_t size, gpool_mem_kind kind, unsigned flags, void **out);
gpp_free_result gpp_free_host(void *p);
/* Device address of host pointer p if gpool owns it: 1 and *dev set, else 0. */
int gpp_host_device_pointer(void *p, void **dev);
/* Free/total memory of the current device counting gpool's cache as free; gpool status. */
gpool_status gpp_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* 1 when the driver symbols this library exports for programs linked with -lcuda
 * (preload_direct.c) are served by the hooks: the driver loaded, and the program's linked
 * libcuda, if any, is that driver. 0: they go to the next definition (the linked libcuda). */
int gpp_direct_ok(void);

/* The real dlsym (glibc's), for lookups of our own. */
void *gpp_real_dlsym(void *handle, const char *name);
/* A runtime API function of the real libcudart (the next definition after this library, or
 * the one in a libcudart loaded with RTLD_LOCAL); NULL if none is loaded. */
void *gpp_real_runtime(const char *name);

/* Symbol substitution: the hook for an exact exported driver symbol name, or NULL. */
void *gpp_hook_for_symbol(const char *name);

/* Driver hooks (preload_driver.c). */
CUresult gpp_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult gpp_cuMemFree_v2(CUdeviceptr dptr);
CUresult gpp_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult gpp_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult gpp_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult gpp_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult gpp_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags);
CUresult gpp_cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult gpp_cuMemFreeHost(void *p);
CUresult gpp_cuMemHostGetFlags(unsigned int *pFlags, void *p);
CUresult gpp_cuMemHostUnregister(void *p);
CUresult gpp_cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags);
CUresult gpp_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
CUresult gpp_cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status);
CUresult gpp_cuGetProcAddress_v1(const char *symbol, void **pfn, int cuda_version,
                                 cuuint64_t flags);
/* Context switches (preload_ctx.c): the real call, then the thread's cached device is dropped. */
CUresult gpp_cuCtxSetCurrent(CUcontext ctx);
CUresult gpp_cuCtxPushCurrent_v2(CUcontext ctx);
CUresult gpp_cuCtxPopCurrent_v2(CUcontext *pctx);
/* cuDevicePrimaryCtxReset (both ABIs; cudaDeviceReset reaches it through cuGetProcAddress):
 * dev's pool is dropped, then the real call (preload_ctx.c). */
CUresult gpp_cuDevicePrimaryCtxReset_v2(CUdevice dev);

/* Stream creation (preload_streams.c): the real call; a non-blocking stream switches cudaFree
 * from the immediate free to the batch (once, with one synchronize per device). */
CUresult gpp_cuStreamCreate(CUstream *ph, unsigned int flags);
CUresult gpp_cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority);
/* Non-blocking streams created so far (0: every stream waits for the legacy stream); one
 * relaxed load. */
extern atomic_int gpp_nonblocking_count;
static inline int gpp_nonblocking_streams(void)
{
    return atomic_load_explicit(&gpp_nonblocking_count, memory_order_relaxed);
}
CUresult gpp_cuStreamDestroy_v2(CUstream s);
/* cudafree_flush=event: a flush records events instead of synchronizing (see
 * preload_streams.c); 0 for the default, one cuCtxSynchronize per device. */
int gpp_flush_with_events(void);
/* Event flush of dev: record an event on the legacy stream and on every live non-blocking
 * stream of dev (plus those recorded when such a stream was destroyed); up to max events in
 * out, how many. */
size_t gpp_record_flush_events(int dev, CUevent *out, size_t max);
/* The primary context of dev the interposer retained (NULL before its pool exists). */
CUcontext gpp_device_context(int dev);

/* cudaFree/cuMemFree in batch and stream mode (preload_batch.c): queue p, a live block of size
 * bytes of dev's pool. The calling thread's batch is flushed (the legacy-stream fence per
 * device every 32 blocks or 8 MiB while no non-blocking stream exists; one synchronize per
 * device once it holds the batch limit of a device when one does; then every block back to
 * its pool). */
gpp_free_result gpp_batch_add(void *p, int dev, size_t size);
/* Flush every thread's batch (an allocation found no memory); how many blocks went back. */
size_t gpp_batch_flush_all(void);
/* Blocks whose flush came during a capture wait, parked, until the last capture ends: then
 * (no capture running) one synchronize of each device they cover gives them back. How many
 * went back. Called when a capture ends and by gpp_batch_flush_all. */
size_t gpp_batch_unpark(void);
/* Wait for all work of dev's context (preload.c). */
void gpp_device_sync(int dev);
/* The batch limit of dev in bytes: cudafree_batch=, else 1/64 of the device's memory and at
 * least 64 MiB. Computed once per device. */
size_t gpp_batch_limit(int dev);
/* Free through gpool after an exact synchronize (the batch's fallback when it cannot queue). */
gpp_free_result gpp_free_now(void *p, int dev);
/* The pending set (preload_pending.c): blocks freed by the program, waiting in a batch.
 * gpp_pending_has: 1 when p waits in a batch. Thread-safe. */
int gpp_pending_has(const void *p); /* add and remove: preload_pending.h, inline */
/* CU_POINTER_ATTRIBUTE_BUFFER_ID of gpool blocks (preload_bufid.c), keyed by the block's
 * device address (its host address when it has none): gpp_buffer_id gives key's id, made on
 * first use (0; -1 when out of host memory); gpp_buffer_id_drop forgets it (the block was
 * freed). Thread-safe. */
int gpp_buffer_id(uintptr_t key, unsigned long long *id);
void gpp_buffer_id_drop_slow(uintptr_t key);
extern atomic_long gpp_buffer_ids;
static inline void gpp_buffer_id_drop(uintptr_t key)
{
    if (__builtin_expect(atomic_load_explicit(&gpp_buffer_ids, memory_order_relaxed) != 0, 0))
        gpp_buffer_id_drop_slow(key);
}

/* The legacy-stream fence (preload_fence.c): one event record on the legacy stream of dev
 * (of every device gpool serves: _all, for host blocks), made by a legacy free before the
 * block goes back to its pool; a synchronize when the record fails. */
void gpp_legacy_fence(int dev);
void gpp_legacy_fence_all(void);
/* Make stream s (a new non-blocking stream) wait for every device's last fence: its work is
 * then ordered after the work of every block freed by a fence alone so far. 0 when it does,
 * -1 when a wait could not be made. */
int gpp_fence_wait(CUstream s);
/* cuDevicePrimaryCtxReset of dev (preload.c, gpp_device_reset): what the reset destroys goes
 * from the interposer's tables first: dev's fence event (preload_fence.c), its tracked
 * non-blocking streams and retired events (preload_streams.c), the host-flag entries of the
 * pool's host blocks (preload_hostflags.c). */
void gpp_legacy_fence_forget(int dev);
void gpp_streams_reset(int dev);
void gpp_host_flags_drop_pool(gpool_t *pool);
/* Drop dev's pool before the reset destroys its memory (preload.c). */
void gpp_device_reset(int dev);
/* GPOOL_CONF's cudafree mode, GPP_CUDAFREE_* (preload_options.h; sync_free=1 is SYNC). */
int gpp_free_mode(void);
/* cudaFreeHost/cuMemFreeHost in batch mode once the batch synchronizes: queue host block
 * handle (the pointer gpool_free takes) of dev's pool. A flush covers every device gpool
 * serves (host memory is reachable from all). */
gpp_free_result gpp_batch_add_host(void *handle, int dev, size_t size);
/* 1 while batches are flushed by the legacy-stream fence (no non-blocking stream exists, no
 * stream capture runs), 0 while they synchronize. */
int gpp_batch_fences(void);
/* The flags a gpool host block was allocated with (preload_hostflags.c): put at allocation
 * (p: the pointer the program got), dropped at free; get finds p or any address inside the
 * block: 1 and *flags, or 0 when p is no gpool host block. gpp_host_blocks() counts the live
 * ones (0: a device free needs no host check). */
int gpp_host_flags_put(void *p, unsigned flags);
void gpp_host_flags_drop(void *p);
int gpp_host_flags_get(void *p, unsigned *flags);
int gpp_host_block(void *p);
long gpp_host_blocks(void);
/* The device of a stream (preload_streams.c): -1 for the default streams (the caller uses the
 * current device) and when it cannot be told. */
int gpp_stream_device(CUstream s);

/* Stream capture (preload_capture.c). gpp_captures counts the captures begun through the
 * hooks and not yet ended: while it is not 0, gpp_capture_check() asks the driver whether a
 * potentially unsafe call (cuMemAlloc, cuMemFree) is allowed now, and returns the driver's
 * CUDA_ERROR_STREAM_CAPTURE_* refusal (the capture then invalidated, as CUDA does) or
 * CUDA_SUCCESS. */
extern atomic_int gpp_captures;
CUresult gpp_capture_probe(void);
static inline CUresult gpp_capture_check(void)
{
    if (__builtin_expect(atomic_load_explicit(&gpp_captures, memory_order_relaxed) == 0, 1))
        return CUDA_SUCCESS;
    return gpp_capture_probe();
}
/* 1 when a synchronize made by the calling thread now would be refused and invalidate a
 * capture begun through the hooks (cuda.h, cuThreadExchangeStreamCaptureMode: a global-mode
 * capture of any thread, a thread-local one of this thread; the calling thread taken to be in
 * the default, global, mode), without asking the driver. */
int gpp_capture_forbids_sync(void);
/* A stream destroyed: its capture, if any, has ended. */
void gpp_capture_forget(CUstream s);
/* 1 when stream (as passed to a _ptsz entry point when per_thread) is capturing a graph: its
 * stream-ordered allocations and frees go to the driver, which makes them graph memory nodes
 * (preload_capture.c). One relaxed load while no capture was begun. */
int gpp_capture_stream_ordered(CUstream stream, int per_thread);
CUresult gpp_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode);
CUresult gpp_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult gpp_cuStreamEndCapture(CUstream s, CUgraph *g);
CUresult gpp_cuStreamEndCapture_ptsz(CUstream s, CUgraph *g);

/* Pointer queries (preload_query.c): for an address inside a gpool block, the block's own base
 * and requested size, memory type, device and context (what cudaMalloc memory reports); every
 * other pointer and attribute gets the real driver's answer. */
CUresult gpp_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
CUresult gpp_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CUresult gpp_cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes, void **data,
                                    CUdeviceptr ptr);

/* Memory for others (preload_others.c): allocations gpool does not serve. One that fails with
 * CUDA_ERROR_OUT_OF_MEMORY gets gpool's cache of that device back (gpp_give_back) and is tried
 * once more. */
/* Flush the cudaFree batches, then give dev's cached memory to the driver (gpool_trim, 0
 * kept). 1 when that released something (a retry may succeed), else 0 (also while a stream
 * capture begun through the hooks is running: no synchronize then). */
int gpp_give_back(int dev);
CUresult gpp_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags);
CUresult gpp_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult gpp_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                unsigned int element_size);
/* CUDA IPC on gpool blocks (preload_ipc.c). */
CUresult gpp_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
CUresult gpp_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult gpp_cuIpcCloseMemHandle(CUdeviceptr dptr);
/* cuMemAlloc passed through to the driver (gpool did not serve it), with the same retry. */
CUresult gpp_real_mem_alloc(CUdeviceptr *dptr, size_t bytesize);

/* One line on stderr, "gpool preload: <message>", at most once per process and kind
 * (preload_notice.c): the interposer turned itself off, or cannot do what GPOOL_CONF asks. */
typedef enum {
    GPP_NOTICE_DRIVER,      /* the driver cannot be loaded: every call passes through */
    GPP_NOTICE_POOL,        /* a device's pool cannot be created: its calls pass through */
    GPP_NOTICE_LINKED,      /* the program's linked libcuda is not the one gpool loaded */
    GPP_NOTICE_FLUSH_EVENT, /* cudafree_flush=event cannot track a stream: flushes synchronize */
    GPP_NOTICE_STREAM_MODE, /* cudafree=stream met a non-blocking stream: batch from then on */
    GPP_NOTICE_IPC,         /* an IPC handle of a block of a pool without ipc=1 (preload_ipc.c) */
    GPP_NOTICE_COUNT
} gpp_notice;
void gpp_notice_once(gpp_notice kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#pragma GCC visibility pop

/* Bytes of dev's blocks waiting in the cudaFree batches of all threads (cudafree=batch). */
size_t gpp_pending_bytes(int dev);

/* gpool_preload_stats_get, gpool_preload_batch_stats(_get): the installed header. */
#include "gpool_preload.h"

#endif
