/* gpool_sim.h — control API of the simulated CUDA driver (build/sim/libcuda.so.1).
 *
 * The simulator implements the CUDA driver entry points gpool uses on host memory, following
 * the real driver's documented rules. It is a test instrument: numbers measured on it are not
 * GPU numbers. Tests reach these functions with dlopen(getenv("GPOOL_LIBCUDA")) + dlsym, so
 * they talk to the same instance gpool itself loads.
 *
 * Environment (read once, when the library is loaded):
 *   GPOOL_SIM_DEVICES=N      number of devices (default 1, at most GPOOL_SIM_MAX_DEVICES;
 *                            0 makes cuInit return CUDA_ERROR_NO_DEVICE)
 *   GPOOL_SIM_MEMORY=SIZE    capacity of each device, spelled as GPOOL_CONF's sizes (gpool's
 *                            parser, src/api/size_parse.c: 64M, 64MiB, 64MB; binary) (default 8G)
 *   GPOOL_SIM_FAIL=e:N,...   the Nth call (from process start) of entry point e fails once
 *   GPOOL_SIM_STATS=FILE     write a JSON summary to FILE when the library is unloaded
 *                            (process exit or last dlclose); "violations" is the count of
 *                            happens-before violations (below)
 *   GPOOL_SIM_STRICT=1       abort() at the first happens-before violation
 *   GPOOL_SIM_VIOLATION_LOG=FILE  append one line per violation to FILE (O_APPEND, so the
 *                            processes of a whole test run can share one file)
 *   GPOOL_SIM_REUSE_STREAM_HANDLES=1  a new stream may get the handle value of a destroyed
 *                            stream (as a real driver may); the destroyed stream's queued
 *                            work still completes
 *   GPOOL_SIM_PEER=all|none|A:B,...   which devices can access which peers (cuDeviceCanAccessPeer;
 *                            "A:B": A can access B's memory); default all
 *   GPOOL_SIM_HOST_ALIAS=1   CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 0: registered (and
 *                            write-combined) host memory gets a device pointer different from
 *                            its host pointer; the host pointer is then no device address
 *   GPOOL_SIM_MIN_GRANULARITY=SIZE   MINIMUM allocation granularity (64K..2M, a power of
 *                            two, any size spelling; 0 = default, equal to RECOMMENDED = 2 MiB)
 *   GPOOL_SIM_DEVICE_NO_CPU=1  VMM device memory is not accessible from the CPU: its addresses
 *                            stay PROT_NONE, contents are reached only through copies
 *   GPOOL_SIM_FORK=driver|inherit  a child forked after cuInit: "driver" answers its driver
 *                            calls CUDA_ERROR_NOT_INITIALIZED, as a real driver does (its state
 *                            does not survive fork; sim_state.c cites the source); "inherit"
 *                            (default) lets the child go on with a copy of the parent's state,
 *                            which the simulator's own tools rely on (gpool-bench replay's
 *                            isolated runs, the fault tests' forked plans). Either way a child
 *                            never waits on the driver lock held at fork; under "driver" it
 *                            does not write the parent's GPOOL_SIM_STATS
 * A malformed value of any of these is said on stderr, and then every call that needs
 * initialisation answers CUDA_ERROR_NOT_INITIALIZED, cuInit included (no abort).
 *
 * At unload (process exit or last dlclose) the statistics are written first, then the driver
 * shuts down like the real one: later calls return CUDA_ERROR_DEINITIALIZED. Cleanup code that
 * runs from an __attribute__((destructor)) after that point sees those errors and its frees are
 * not in the statistics; tear down before exit or from an atexit() handler instead.
 *
 * cuDevicePrimaryCtxReset(dev) finishes the context's work (held work forced), destroys its
 * streams and events and frees its cuMemAlloc, cuMemCreate/cuMemMap and pinned host memory;
 * the context stays retained and usable, reserved address ranges stay.
 *
 * Streams follow the driver's ordering rules: NULL and CU_STREAM_LEGACY are the current
 * context's legacy stream, implicitly synchronizing with the context's blocking streams;
 * CU_STREAM_PER_THREAD (and NULL in the _ptsz/_ptds entry points) is the calling thread's own
 * per-thread default stream; streams and events belong to the context current when made.
 *
 * Happens-before checker: every access to device-visible memory (cuMemcpy*, cuMemsetD*,
 * cuMemFreeAsync, gpoolsim_touch) is recorded with its stream and position; two overlapping
 * accesses, one a write, with no order between them (events, stream/event/context
 * synchronization the host observed, the legacy stream's implicit edges) are a violation, as is
 * freeing, unmapping or unregistering memory with accesses the host does not know complete.
 * Each violation is counted (gpoolsim_violations), described on stderr and logged as above.
 *
 * Device access (sim_access.c): a copy or memset whose device (the current context's) lacks
 * access fails with CUDA_ERROR_ILLEGAL_ADDRESS: VMM mappings need cuMemSetAccess for that
 * device (cuCtxEnablePeerAccess grants nothing there), cuMemAlloc memory its own device or
 * cuCtxEnablePeerAccess, pinned host memory is reachable from every device.
 * VMM physical memory is one sparse memfd per device (offsets per handle), so 141 GiB of
 * 2 MiB handles costs no descriptor per handle.
 *
 * Interprocess memory (sim_ipc.c; rules from the driver API reference, cuda.h):
 *   cuMemCreate with requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR gives the
 *     handle its own memfd (its bytes, then a 4 KiB metadata page): one descriptor per
 *     exportable handle. Other types (WIN32, WIN32_KMT, FABRIC): CUDA_ERROR_NOT_SUPPORTED.
 *     cuMemGetAllocationPropertiesFromHandle reports the requested types.
 *   cuMemExportToShareableHandle(&fd, h, POSIX_FILE_DESCRIPTOR, 0): a new descriptor (not
 *     close-on-exec) the caller owns; a handle created without that type:
 *     CUDA_ERROR_INVALID_VALUE; another type: CUDA_ERROR_NOT_SUPPORTED.
 *   cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, POSIX_FILE_DESCRIPTOR), in any
 *     process that got the descriptor (inherited, SCM_RIGHTS): a handle of the same physical
 *     bytes, its size, device and properties from the file; it maps like any handle, counts
 *     in this process's device bytes and live handles; the caller still closes fd. Not such a
 *     descriptor (closed, forged, a pipe): CUDA_ERROR_INVALID_VALUE, nothing created; a device
 *     this process lacks: CUDA_ERROR_NOT_SUPPORTED. Physical memory lives while any handle,
 *     mapping or descriptor in any process references it ("Once all shareable handles are
 *     closed and the allocation is released, the allocated memory referenced will be released
 *     back to the OS", cuMemExportToShareableHandle).
 *   cuIpcGetMemHandle(&ih, base of a cuMemAlloc/cuMemAllocPitch allocation): a 64-byte handle
 *     (the same one each call; a later allocation at the same address gets another); the
 *     first call moves the allocation into a memfd at the same address, contents kept. VMM,
 *     managed, cuMemAllocAsync or interior pointers: CUDA_ERROR_INVALID_VALUE.
 *   cuIpcOpenMemHandle(&p, ih, 0 or CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) in another process of
 *     the same user (it opens /proc/<pid>/fd/<n> of the exporter): a mapping of the same bytes,
 *     device memory of the exporter's device; a second open in the process gives the same
 *     pointer and counts; cuIpcCloseMemHandle undoes one open (not opened:
 *     CUDA_ERROR_INVALID_VALUE). The exporter's own handle: CUDA_ERROR_INVALID_CONTEXT; forged
 *     bytes, memory freed since, an exporter that exited: CUDA_ERROR_INVALID_HANDLE. Opened
 *     mappings count in gpoolsim_live.legacy_allocs until closed; cuMemFree refuses them.
 *   cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE): 1 for cuMemAlloc
 *     memory, 0 for VMM, managed, pool, host and cuIpcOpenMemHandle memory.
 *   The referee across processes: each importer holds an open-file-description lock on the
 *   file while it has the memory open (the kernel drops it when the importer exits, even
 *   killed). The owner freeing memory another process has open is counted
 *   (gpoolsim_ipc_freed_while_open); for legacy IPC it is also a violation ("Calling cuMemFree
 *   on an exported memory region before calling cuIpcCloseMemHandle in the importing context
 *   will result in undefined behavior", cuIpcOpenMemHandle). For VMM memory it is legal (the
 *   importer keeps the bytes): counted only. Content written by one process is read by the
 *   other at once (shared pages); accesses of one process are not ordered against the other's
 *   by the happens-before checker.
 *   All of these are in cuGetProcAddress's table (cuIpcOpenMemHandle at 4010 and 11000).
 *
 * Where the simulator differs from a GPU: device pointers are host addresses (tests may read
 * and write them, unless GPOOL_SIM_DEVICE_NO_CPU=1); all devices share the host's memory; stream
 * work (copies, memsets, stream-ordered alloc/free) takes effect at once, only its *order* (the
 * checker) and *completion* (events, queries) are modelled; captured work is recorded, never run;
 * cuGetProcAddress answers CUDA_ERROR_NOT_FOUND (and *symbolStatus) for unknown symbols and for
 * versions older than the oldest simulated ABI.
 *
 * Injected failures have no side effects. They return CUDA_ERROR_OUT_OF_MEMORY for every entry
 * point that obtains memory or a driver object (cuMemCreate, cuMemAlloc, cuMemAllocAsync,
 * cuMemAllocManaged, cuMemAllocPitch, cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister,
 * cuMemAddressReserve, cuMemMap, cuStreamCreate, cuEventCreate, cuDevicePrimaryCtxRetain,
 * cuMemImportFromShareableHandle, cuIpcOpenMemHandle), CUDA_ERROR_NO_DEVICE for cuInit,
 * CUDA_ERROR_INVALID_CONTEXT for the context calls, and CUDA_ERROR_INVALID_VALUE otherwise;
 * gpoolsim_entry_names() lists every injectable name and gpoolsim_injected_error() tells which
 * code a name gets.
 */
#ifndef GPOOL_SIM_H
#define GPOOL_SIM_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPOOL_SIM_MAX_DEVICES 16
#define GPOOL_SIM_GRANULARITY ((size_t)2 << 20)

/* Arm a one-shot failure: the nth call of `entry` counted from now fails (nth >= 1).
 * nth == 0 disarms every pending failure of `entry`. Names are base names ("cuMemAlloc");
 * the "_v2" spelling is accepted too. Returns 0, or -1 for an unknown name / too many armed. */
int gpoolsim_fail_nth(const char *entry, unsigned long nth);
void gpoolsim_fail_clear(void);
/* The CUresult an injected failure of `entry` returns (CUDA_ERROR_INVALID_VALUE if unknown). */
CUresult gpoolsim_injected_error(const char *entry);

/* Calls since process start or the last gpoolsim_reset_counts(); failed calls count too. */
unsigned long gpoolsim_call_count(const char *entry);
unsigned long gpoolsim_call_total(void);
void gpoolsim_reset_counts(void);

/* Device memory accounting (VMM handles located on the device plus cuMemAlloc*). */
size_t gpoolsim_bytes_in_use(int device);
size_t gpoolsim_peak_bytes(int device);
/* May be set below the bytes in use: later allocations then fail with OUT_OF_MEMORY. */
void gpoolsim_set_capacity(int device, size_t bytes);

/* Held completion: work submitted to a held stream (event records, async copies, waits)
 * does not complete until the stream is released or someone synchronizes on it. NULL and
 * CU_STREAM_LEGACY name the current context's legacy stream (device 0's without a context),
 * CU_STREAM_PER_THREAD the calling thread's per-thread stream. Return 0, or -1 for an
 * unknown stream. */
int gpoolsim_stream_hold(CUstream s);
int gpoolsim_stream_release(CUstream s);
/* Number of cuEventSynchronize/cuStreamSynchronize/cuCtxSynchronize calls that had to
 * release held work to return. */
unsigned long gpoolsim_forced_syncs(void);

struct gpoolsim_live {
    size_t handles;            /* cuMemCreate handles not yet cuMemRelease'd */
    size_t mappings;           /* cuMemMap ranges not yet unmapped */
    size_t reservations;       /* cuMemAddressReserve ranges not yet freed */
    size_t host_allocs;        /* cuMemHostAlloc / cuMemAllocHost not yet freed */
    size_t host_registrations; /* cuMemHostRegister ranges not yet unregistered */
    size_t streams;            /* cuStreamCreate streams not yet destroyed */
    size_t events;             /* cuEventCreate events not yet destroyed */
    size_t legacy_allocs;      /* cuMemAlloc / cuMemAllocAsync not yet freed */
};
/* Leak checks: all zero after a clean shutdown. */
void gpoolsim_get_live(struct gpoolsim_live *out);

/* A kernel on stream s reads (is_write == 0) or writes [p, p+bytes): an access for the
 * happens-before checker. CUDA_ERROR_INVALID_HANDLE for an unknown stream,
 * CUDA_ERROR_INVALID_CONTEXT for NULL/CU_STREAM_LEGACY/CU_STREAM_PER_THREAD without a current
 * context, CUDA_ERROR_INVALID_VALUE for memory that is not allocated/mapped device-visible
 * memory (or memory already freed by cuMemFreeAsync, ordered after the free). */
CUresult gpoolsim_touch(CUstream s, CUdeviceptr p, size_t bytes, int is_write);
/* Happens-before violations found in this process so far. */
unsigned long gpoolsim_violations(void);
/* Calls (of any entry point taking a stream) that named a created stream after its
 * cuStreamDestroy: each answered CUDA_ERROR_INVALID_HANDLE. With
 * GPOOL_SIM_REUSE_STREAM_HANDLES=1 a value already given to a new stream names that one and is
 * not counted. */
unsigned long gpoolsim_destroyed_stream_calls(void);
/* Modes (also set by the environment, see above); set them before allocating what they
 * affect. gpoolsim_set_peer_capable: -1 for bad ordinals or dev == peer; disabling also
 * drops peer access already enabled. gpoolsim_set_min_granularity: 0 or -1 (bad size). */
int gpoolsim_set_peer_capable(int dev, int peer, int can);
void gpoolsim_set_host_alias(int on);
int gpoolsim_set_min_granularity(size_t bytes);
void gpoolsim_set_device_no_cpu(int on);
/* Would device `dev` be allowed to read (write != 0) [p, p+n)? CUDA_SUCCESS,
 * CUDA_ERROR_ILLEGAL_ADDRESS, or CUDA_ERROR_INVALID_CONTEXT for a bad ordinal on device memory. */
CUresult gpoolsim_device_access(int dev, const void *p, size_t n, int write);

/* Frees by this process (cuMemFree/cuMemFreeAsync of exported cuMemAlloc memory, the last
 * release/unmap of an exported VMM handle) while an importer still had the memory open
 * (cuIpcOpenMemHandle / cuMemImportFromShareableHandle, not yet closed or released): another
 * process, or this one through its own cuMemImportFromShareableHandle. */
unsigned long gpoolsim_ipc_freed_while_open(void);

/* Every injectable entry point (base names), in a fixed order. */
const char *const *gpoolsim_entry_names(size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GPOOL_SIM_H */
