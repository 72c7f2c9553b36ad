/* sim_internal.h — shared state of the simulated CUDA driver. Not installed. */
#ifndef GPOOL_SIM_INTERNAL_H
#define GPOOL_SIM_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpool_sim.h"

/* Internal functions stay out of the library's dynamic symbol table. */
#pragma GCC visibility push(hidden)

#define SIM_DRIVER_VERSION 13000
#define SIM_EXPORT         __attribute__((visibility("default")))

#define SIM_OOM CUDA_ERROR_OUT_OF_MEMORY
#define SIM_INV CUDA_ERROR_INVALID_VALUE
#define SIM_CTX CUDA_ERROR_INVALID_CONTEXT

/* Every entry point that counts calls and takes injected failures: X(base name, error an
 * injected failure returns). Names are never macro-expanded (only used with # and ##). */
#define SIM_ENTRY_LIST(X)                                                                          \
    X(cuInit, CUDA_ERROR_NO_DEVICE)                                                                \
    X(cuDriverGetVersion, SIM_INV)                                                                 \
    X(cuDeviceGetCount, SIM_INV)                                                                   \
    X(cuDeviceGet, SIM_INV)                                                                        \
    X(cuDeviceGetName, SIM_INV)                                                                    \
    X(cuDeviceGetUuid, SIM_INV)                                                                    \
    X(cuDeviceTotalMem, SIM_INV)                                                                   \
    X(cuDeviceGetAttribute, SIM_INV)                                                               \
    X(cuDeviceGetPCIBusId, SIM_INV)                                                                \
    X(cuDevicePrimaryCtxRetain, SIM_OOM)                                                           \
    X(cuDevicePrimaryCtxRelease, SIM_INV)                                                          \
    X(cuDevicePrimaryCtxGetState, SIM_INV)                                                         \
    X(cuDevicePrimaryCtxReset, SIM_INV)                                                            \
    X(cuCtxGetCurrent, SIM_CTX)                                                                    \
    X(cuCtxSetCurrent, SIM_CTX)                                                                    \
    X(cuCtxPushCurrent, SIM_CTX)                                                                   \
    X(cuCtxPopCurrent, SIM_CTX)                                                                    \
    X(cuCtxGetDevice, SIM_CTX)                                                                     \
    X(cuCtxSynchronize, SIM_CTX)                                                                   \
    X(cuMemGetInfo, SIM_INV)                                                                       \
    X(cuMemAddressReserve, SIM_OOM)                                                                \
    X(cuMemAddressFree, SIM_INV)                                                                   \
    X(cuMemCreate, SIM_OOM)                                                                        \
    X(cuMemRelease, SIM_INV)                                                                       \
    X(cuMemMap, SIM_OOM)                                                                           \
    X(cuMemUnmap, SIM_INV)                                                                         \
    X(cuMemSetAccess, SIM_INV)                                                                     \
    X(cuMemGetAccess, SIM_INV)                                                                     \
    X(cuMemGetAllocationGranularity, SIM_INV)                                                      \
    X(cuMemGetAllocationPropertiesFromHandle, SIM_INV)                                             \
    X(cuMemRetainAllocationHandle, SIM_INV)                                                        \
    X(cuMemAlloc, SIM_OOM)                                                                         \
    X(cuMemFree, SIM_INV)                                                                          \
    X(cuMemAllocAsync, SIM_OOM)                                                                    \
    X(cuMemFreeAsync, SIM_INV)                                                                     \
    X(cuMemGetAddressRange, SIM_INV)                                                               \
    X(cuMemAllocManaged, SIM_OOM)                                                                  \
    X(cuMemAllocPitch, SIM_OOM)                                                                    \
    X(cuPointerGetAttribute, SIM_INV)                                                              \
    X(cuPointerGetAttributes, SIM_INV)                                                             \
    X(cuMemHostAlloc, SIM_OOM)                                                                     \
    X(cuMemAllocHost, SIM_OOM)                                                                     \
    X(cuMemFreeHost, SIM_INV)                                                                      \
    X(cuMemHostRegister, SIM_OOM)                                                                  \
    X(cuMemHostUnregister, SIM_INV)                                                                \
    X(cuMemHostGetDevicePointer, SIM_INV)                                                          \
    X(cuMemHostGetFlags, SIM_INV)                                                                  \
    X(cuStreamCreate, SIM_OOM)                                                                     \
    X(cuStreamDestroy, SIM_INV)                                                                    \
    X(cuStreamSynchronize, SIM_INV)                                                                \
    X(cuStreamWaitEvent, SIM_INV)                                                                  \
    X(cuStreamQuery, SIM_INV)                                                                      \
    X(cuEventCreate, SIM_OOM)                                                                      \
    X(cuEventRecord, SIM_INV)                                                                      \
    X(cuEventQuery, SIM_INV)                                                                       \
    X(cuEventSynchronize, SIM_INV)                                                                 \
    X(cuEventDestroy, SIM_INV)                                                                     \
    X(cuEventElapsedTime, SIM_INV)                                                                 \
    X(cuMemcpy, SIM_INV)                                                                           \
    X(cuMemcpyAsync, SIM_INV)                                                                      \
    X(cuMemcpyHtoD, SIM_INV)                                                                       \
    X(cuMemcpyDtoH, SIM_INV)                                                                       \
    X(cuMemcpyDtoD, SIM_INV)                                                                       \
    X(cuMemcpyHtoDAsync, SIM_INV)                                                                  \
    X(cuMemcpyDtoHAsync, SIM_INV)                                                                  \
    X(cuMemcpyDtoDAsync, SIM_INV)                                                                  \
    X(cuMemsetD8, SIM_INV)                                                                         \
    X(cuMemsetD8Async, SIM_INV)                                                                    \
    X(cuMemsetD32, SIM_INV)                                                                        \
    X(cuMemsetD32Async, SIM_INV)                                                                   \
    X(cuGetProcAddress, SIM_INV)                                                                   \
    X(cuGetErrorString, SIM_INV)                                                                   \
    X(cuGetErrorName, SIM_INV)                                                                     \
    X(cuStreamGetCtx, SIM_INV)                                                                     \
    X(cuStreamGetFlags, SIM_INV)                                                                   \
    X(cuStreamGetId, SIM_INV)                                                                      \
    X(cuStreamBeginCapture, SIM_INV)                                                               \
    X(cuStreamEndCapture, SIM_INV)                                                                 \
    X(cuStreamIsCapturing, SIM_INV)                                                                \
    X(cuStreamGetCaptureInfo, SIM_INV)                                                             \
    X(cuThreadExchangeStreamCaptureMode, SIM_INV)                                                  \
    X(cuGraphDestroy, SIM_INV)                                                                     \
    X(cuDeviceCanAccessPeer, SIM_INV)                                                              \
    X(cuCtxEnablePeerAccess, SIM_INV)                                                              \
    X(cuCtxDisablePeerAccess, SIM_INV)                                                             \
    X(cuMemExportToShareableHandle, SIM_INV)                                                       \
    X(cuMemImportFromShareableHandle, SIM_OOM)                                                     \
    X(cuIpcGetMemHandle, SIM_INV)                                                                  \
    X(cuIpcOpenMemHandle, SIM_OOM)                                                                 \
    X(cuIpcCloseMemHandle, SIM_INV)

enum sim_entry {
#define SIM_ENUM_ENTRY(name, err) SIM_##name,
    SIM_ENTRY_LIST(SIM_ENUM_ENTRY)
#undef SIM_ENUM_ENTRY
        SIM_ENTRY_COUNT
};

/* ---- sim_state.c: lock, config, counters, capacity, live counts ---- */

/* Locks the driver, counts the call, applies an armed failure, then checks cuInit happened
 * (except for entries that work before cuInit). Always pair with sim_leave(). */
CUresult sim_enter(enum sim_entry entry);
CUresult sim_leave(CUresult rc);
/* For internal callers that need the lock without counting a call. */
void sim_lock(void);
void sim_unlock(void);

int sim_device_count(void);      /* configured devices */
int sim_is_initialized(void);    /* lock held */
void sim_set_initialized(void);  /* lock held */
int sim_valid_device(int dev);   /* lock held: initialized and 0 <= dev < count */
size_t sim_capacity(int dev);    /* lock held */
size_t sim_device_used(int dev); /* lock held */
/* Count bytes against a device's capacity: CUDA_ERROR_OUT_OF_MEMORY past it. Lock held. */
CUresult sim_charge(int dev, size_t bytes);
void sim_uncharge(int dev, size_t bytes);

/* Live object counters (lock held). */
enum sim_live_kind {
    SIM_LIVE_HANDLES,
    SIM_LIVE_MAPPINGS,
    SIM_LIVE_RESERVATIONS,
    SIM_LIVE_HOST_ALLOCS,
    SIM_LIVE_HOST_REGS,
    SIM_LIVE_STREAMS,
    SIM_LIVE_EVENTS,
    SIM_LIVE_LEGACY,
    SIM_LIVE_KIND_COUNT
};
void sim_live_add(enum sim_live_kind kind, long delta);
void sim_count_forced_sync(void); /* lock held */
/* A bad GPOOL_SIM_* value (constructors): said on stderr; every call that needs initialisation
 * then answers CUDA_ERROR_NOT_INITIALIZED. */
void sim_bad_config(const char *var, const char *value, const char *why);

/* ---- sim_device.c ---- */
/* Device of the calling thread's current context, or CUDA_ERROR_INVALID_CONTEXT. */
CUresult sim_current_device(int *dev);

/* ---- sim_phys.c: the referee's keys for VMM memory are physical ---- */
/* Shadow key of byte `offset` of store `store` (sim_vmm.c): above every user address (below
 * 2^48), one span of 2^SIM_PHYS_STORE_SHIFT per store, so every mapping of a handle names the
 * same keys. */
#define SIM_PHYS_STORE_SHIFT 42
static inline uintptr_t sim_phys_key(int store, size_t offset)
{
    return ((uintptr_t)1 << 56) + ((uintptr_t)store << SIM_PHYS_STORE_SHIFT) + offset;
}
/* The mapping [va, va+n) of the handle whose first byte has key `key` goes (cuMemUnmap); last:
 * the handle's last mapping. Lock held. */
void sim_phys_unmap(uintptr_t key, uintptr_t va, size_t n, int last, const char *what);

/* ---- sim_vmm.c ---- */
/* The VMM mapping containing p, for cuMemGetAddressRange. Lock held. */
int sim_vmm_range(uintptr_t p, uintptr_t *base, size_t *size);

/* ---- sim_stream.c ---- */
/* Resolve a user stream handle (NULL/LEGACY/PER_THREAD = default stream). Lock held. */
CUresult sim_stream_lookup(CUstream hstream, struct CUstream_st **out);
/* Append one unit of work to a stream (async copy, memset, alloc, free). Lock held. */
void sim_stream_submit(struct CUstream_st *s);
/* Complete every stream's work, releasing holds; returns nonzero if anything was held. */
int sim_streams_force_all(void);

/* ---- streams, events, happens-before (sim_stream.c, sim_hb.c, sim_capture.c) ---- */

/* Handles of created streams are opaque slot numbers, never struct addresses (so that the
 * GPOOL_SIM_REUSE_STREAM_HANDLES mode can hand a destroyed stream's value to a new stream). */
struct sim_wait {
    uint64_t position;         /* where on the waiting stream the wait sits */
    struct CUstream_st *fence; /* awaited stream ... */
    uint64_t fence_position;   /* ... and position on it */
};

enum sim_stream_kind { SIM_STREAM_CREATED, SIM_STREAM_LEGACY_KIND, SIM_STREAM_PER_THREAD_KIND };

struct CUstream_st {
    struct CUstream_st *next;
    unsigned flags;
    int kind;   /* enum sim_stream_kind */
    int device; /* context (primary context of this device) current when it was made */
    int held;
    int destroyed;
    unsigned refs; /* 1 until destroyed, plus events and waits pointing at it */
    uint32_t sid;  /* happens-before id, never reused */
    size_t slot;   /* created streams: handle slot */
    uint64_t submitted;
    uint64_t completed;
    struct sim_wait *waits; /* pending waits in position order */
    size_t nwaits, cap_waits;
    uint64_t *clock; /* vector clock of the next unit of work: clock[sid] == submitted */
    size_t nclock;
    uint64_t host_seen; /* host clock version last joined */
    /* graph capture (sim_capture.c) */
    int capture;      /* 0, or a CUstreamCaptureStatus while capturing */
    int capture_mode; /* CUstreamCaptureMode of the capture */
    uint64_t capture_id;
    pthread_t capture_thread;
};

/* Resolve a stream handle: NULL and CU_STREAM_LEGACY are the current context's legacy stream,
 * CU_STREAM_PER_THREAD the calling thread's own stream (NULL too when per_thread is set: the
 * _ptsz/_ptds entry points). Lock held. */
CUresult sim_stream_lookup_pt(CUstream hstream, int per_thread, struct CUstream_st **out);
/* Submit one unit of work to s: next position, clock joined with the host's knowledge and the
 * legacy stream's implicit edges. Returns 0, or 1 when s is capturing (the work is recorded
 * into the graph, not executed: no position, no access). Lock held. */
int sim_stream_submit_work(struct CUstream_st *s);
/* The host learns that the work whose clock is c has completed. Lock held. */
void sim_host_learn(const uint64_t *c, size_t n);
uint64_t sim_host_clock(uint32_t sid); /* lock held */
/* Finish s up to now (forcing holds, counted) and let the host learn it. Lock held. */
void sim_stream_sync_host(struct CUstream_st *s);
/* Description of stream sid for messages ("stream 0x1010 (created)"). */
const char *sim_stream_name(uint32_t sid, char *buf, size_t n);
/* Current context's device, or -1. */
int sim_current_ctx_device(void);
CUcontext sim_ctx_handle(int dev);
int sim_reuse_stream_handles(void); /* GPOOL_SIM_REUSE_STREAM_HANDLES=1 */

/* Access kinds of the happens-before checker. */
enum sim_access { SIM_READ, SIM_WRITE, SIM_FREE };
/* Record an access by the unit of work just submitted to s (sim_stream_submit_work returned 0).
 * Lock held. */
void sim_hb_access(struct CUstream_st *s, uintptr_t p, size_t n, enum sim_access kind,
                   const char *what);
/* The shadow map under the access (sim_phys.c turns device addresses into keys: the address
 * itself, or for VMM memory the physical bytes' key): the unit of work just submitted to s
 * accesses keys [key, key+n), device addresses [va, va+n) through the mapping at via (0: not
 * VMM memory). Lock held. */
void sim_hb_access_key(struct CUstream_st *s, uintptr_t key, size_t n, enum sim_access kind,
                       const char *what, uintptr_t va, uintptr_t via);
/* The mapping at via of keys [key, key+n) (device addresses [va, va+n)) goes: a violation when
 * an access through it the host does not know complete remains (any access, when last: the
 * handle's last mapping, whose shadow entries then go). Lock held. */
void sim_hb_unmap_key(uintptr_t key, size_t n, uintptr_t va, uintptr_t via, int last,
                      const char *what);
/* Memory [p, p+n) is released by the host (free, unmap, unregister): a violation when an
 * access the host does not know complete remains; the shadow entries go. Lock held. */
void sim_hb_release(uintptr_t p, size_t n, const char *what);
/* Drop shadow entries of [p, p+n) without checking (fresh memory). Lock held. */
void sim_hb_forget(uintptr_t p, size_t n);
/* Is [p, p+n) inside memory freed by cuMemFreeAsync? *ordered tells whether the access on s
 * comes after that free. Lock held. */
int sim_hb_freed(struct CUstream_st *s, uintptr_t p, size_t n, int *ordered);
void sim_hb_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned long sim_hb_count(void);
/* [p, p+n) is device-visible memory: a cuMemAlloc block, a VMM mapping, pinned host memory. */
int sim_hb_visible(uintptr_t p, size_t n);
void sim_hb_teardown(void);
/* Legacy allocations (sim_legacy.c): is [p, p+n) inside one? Lock held. */
int sim_legacy_contains(uintptr_t p, size_t n);
/* The graph memory nodes' allocations made by capture capture_id go (sim_capture.c). Lock
 * held. */
void sim_legacy_graph_release(uint64_t capture_id);
/* Pinned or registered host memory (sim_host.c): is [p, p+n) inside one range? Lock held. */
/* Bytes from p to the end of the host allocation/registration (cuMemAlloc allocation) holding
 * p; 0 if none. Lock held. */
size_t sim_host_extent(uintptr_t p);
size_t sim_legacy_extent(uintptr_t p);
int sim_host_contains(uintptr_t p, size_t n);

/* Graph capture: calling thread prohibited from potentially unsafe calls (invalidates the
 * captures concerned): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, else CUDA_SUCCESS. Lock held. */
CUresult sim_capture_unsafe_call(void);
/* s is capturing: operations that query or synchronize it fail and invalidate it. */
CUresult sim_capture_check_sync(struct CUstream_st *s);
/* Legacy-stream work while a blocking stream of its context captures (implicit sync). */
CUresult sim_capture_check_legacy(struct CUstream_st *s);
void sim_capture_teardown(void);
void sim_capture_forget(struct CUstream_st *s);
/* sim_ptsz.c: the per-thread form of an entry point, or NULL */
void *sim_proc_per_thread(void *fn);
void sim_capture_join(struct CUstream_st *s, const struct CUstream_st *from);
/* Entry point bodies shared by the plain and the _ptsz forms (per_thread: NULL is the
 * calling thread's stream). */
CUresult sim_stream_synchronize(CUstream hStream, int per_thread);
CUresult sim_stream_query(CUstream hStream, int per_thread);
CUresult sim_stream_wait_event(CUstream hStream, CUevent hEvent, unsigned Flags, int per_thread);
CUresult sim_event_record(CUevent hEvent, CUstream hStream, int per_thread);
CUresult sim_mem_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, int per_thread);
CUresult sim_mem_free_async(CUdeviceptr dptr, CUstream hStream, int per_thread);
CUresult sim_copy_entry(enum sim_entry entry, uintptr_t dst, uintptr_t src, size_t n,
                        CUstream hstream, int async, int per_thread);
CUresult sim_set_entry(enum sim_entry entry, uintptr_t dst, unsigned value, size_t width,
                       size_t count, CUstream hstream, int async, int per_thread);
/* Finish the streams of a device's context; the host learns it. Nonzero if a hold was
 * released. Lock held. */
int sim_ctx_streams_sync(int dev);

/* ---- sim_device.c: contexts ---- */
/* Device of a valid, retained context (CUDA_ERROR_INVALID_CONTEXT otherwise). Lock held. */
CUresult sim_context_device(CUcontext ctx, int *dev);
CUcontext sim_current_context(void);

/* ---- sim_vmm.c: device access and storage of VMM mappings (lock held) ---- */
int sim_vmm_reserved(uintptr_t p); /* p lies in a cuMemAddressReserve range */
/* Every byte of [p, p+n) mapped with (write ? read-write : read) access for location dev
 * (a device ordinal): CUDA_SUCCESS, else CUDA_ERROR_ILLEGAL_ADDRESS. */
CUresult sim_vmm_access(int dev, uintptr_t p, size_t n, int write);
/* Where the simulator reads and writes the bytes at device address p, and how many bytes are
 * contiguous there: 1, 0 when p is not mapped, -1 on failure. */
int sim_vmm_translate(uintptr_t p, uintptr_t *host, size_t *contig);
/* The physical bytes behind device address p (sim_phys.c): their key (sim_phys_key of the
 * handle's store and offset, plus the offset into the mapping), how many bytes from p on are
 * contiguous there, and the base of the mapping holding p. 0 when p is not mapped. */
int sim_vmm_phys(uintptr_t p, uintptr_t *key, size_t *contig, uintptr_t *map_base);

/* ---- sim_legacy.c ---- */
/* Owning device of the cuMemAlloc allocation containing p, or -1. Lock held. */
int sim_legacy_device(uintptr_t p);
/* p lies in a cuIpcOpenMemHandle mapping opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS. */
int sim_legacy_lazy_peer(uintptr_t p);

/* ---- pointer attributes (sim_pointer.c): what each kind of memory says about p ---- */
struct sim_ptr_info {
    int memtype;        /* CU_MEMORYTYPE_DEVICE or CU_MEMORYTYPE_HOST */
    int device;         /* owning device (host memory: the device current when it was made) */
    int managed;        /* cuMemAllocManaged memory */
    int vmm;            /* a cuMemMap mapping */
    int ipc_capable;    /* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE */
    uintptr_t base;     /* start of the allocation (VMM: the reserved range) holding p, in p's
                           address space */
    size_t size;        /* its size in bytes */
    uintptr_t map_base; /* the mapping holding p (VMM: one cuMemMap; else the allocation) */
    size_t map_size;
    unsigned long long buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID of the allocation */
    uintptr_t devp;               /* device address of p, 0 if none */
    uintptr_t host;               /* host address of p, 0 if the host cannot reach it */
};
/* A new allocation's buffer id: unique in the process, never reused. Lock held. */
unsigned long long sim_next_buffer_id(void);
/* Fill *out for the memory holding p: 1, or 0 when the driver does not know p. Lock held. */
int sim_vmm_describe(uintptr_t p, struct sim_ptr_info *out);
int sim_legacy_describe(uintptr_t p, struct sim_ptr_info *out);
int sim_host_describe(uintptr_t p, struct sim_ptr_info *out);

/* ---- sim_host.c: device addresses of pinned host memory (lock held) ---- */
enum sim_host_addr {
    SIM_HOST_NONE,      /* not pinned host memory known to the driver */
    SIM_HOST_ALIAS,     /* a device alias of registered host memory: *host says where */
    SIM_HOST_PINNED,    /* pinned host memory, host pointer valid on the device too */
    SIM_HOST_NOT_ON_DEV /* registered host memory by its host pointer, alias mode on */
};
enum sim_host_addr sim_host_classify(uintptr_t p, uintptr_t *host, size_t *contig);

/* ---- sim_access.c: modes, peers, the device-access rule, copies through it ---- */
size_t sim_mode_min_granularity(void); /* 0: MINIMUM == RECOMMENDED */
int sim_mode_host_alias(void);
int sim_mode_device_no_cpu(void);
/* Can device dev read (write) [p, p+n)? CUDA_SUCCESS or CUDA_ERROR_ILLEGAL_ADDRESS. Memory
 * the simulator does not know (pageable host memory) is not checked. Lock held. */
CUresult sim_mem_device_access(int dev, uintptr_t p, size_t n, int write);
/* Device doing a copy or memset on stream s (NULL: a synchronous form). Lock held. */
CUresult sim_copy_device(struct CUstream_st *s, int *dev);
/* A copy/memset by device dev: checks every device-side range, then moves the bytes through
 * the simulator's storage. dst_dev/src_dev: 1 when that argument is a device pointer, 0 when a
 * host pointer, -1 when inferred from the address (cuMemcpy). Lock held. */
CUresult sim_mem_move(int dev, uintptr_t dst, int dst_dev, uintptr_t src, int src_dev, size_t n);
CUresult sim_mem_fill(int dev, uintptr_t dst, const void *pattern, size_t width, size_t count);

/* ---- cuDevicePrimaryCtxReset of dev (sim_device.c): each part's objects of dev go (lock
 * held) ---- */
void sim_stream_reset(int dev);
void sim_legacy_reset(int dev);
void sim_vmm_reset(int dev);
void sim_host_reset(int dev);

/* ---- teardown at unload (lock held): free bookkeeping, leave memory mapped ---- */
void sim_vmm_teardown(void);
void sim_legacy_teardown(void);
void sim_host_teardown(void);
void sim_stream_teardown(void);

#pragma GCC visibility pop

/* per-thread forms defined next to their plain forms */
SIM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx);
SIM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
SIM_EXPORT CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId);
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *status);
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *st,
                                                   cuuint64_t *id, CUgraph *graph,
                                                   const CUgraphNode **deps,
                                                   const CUgraphEdgeData **edges, size_t *ndeps);

/* ---- older ABIs, exported under their historical (unversioned) names ---- */
CUresult sim_cuCtxPopCurrent_v1(CUcontext *pctx) __asm__("cuCtxPopCurrent");
CUresult sim_cuCtxPushCurrent_v1(CUcontext ctx) __asm__("cuCtxPushCurrent");
CUresult sim_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev) __asm__("cuDeviceGetUuid");
CUresult sim_cuDevicePrimaryCtxRelease_v1(CUdevice dev) __asm__("cuDevicePrimaryCtxRelease");
CUresult sim_cuDevicePrimaryCtxReset_v1(CUdevice dev) __asm__("cuDevicePrimaryCtxReset");
CUresult sim_cuEventDestroy_v1(CUevent hEvent) __asm__("cuEventDestroy");
CUresult sim_cuEventElapsedTime_v1(float *ms, CUevent a, CUevent b) __asm__("cuEventElapsedTime");
CUresult sim_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags) __asm__("cuGetProcAddress");
CUresult sim_cuMemHostRegister_v1(void *p, size_t bytesize,
                                  unsigned int Flags) __asm__("cuMemHostRegister");
CUresult sim_cuStreamDestroy_v1(CUstream hStream) __asm__("cuStreamDestroy");
CUresult sim_cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                   unsigned int Flags) __asm__("cuIpcOpenMemHandle");

/* ---- helpers ---- */
static inline int sim_is_aligned(uintptr_t v, size_t a)
{
    return (v & (a - 1)) == 0;
}

#endif /* GPOOL_SIM_INTERNAL_H */
