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
    X(cuDeviceCanAccessPeer, SIM_INV)                                                              \
    X(cuCtxEnablePeerAccess, SIM_INV)                                                              \
    X(cuCtxDisablePeerAccess, SIM_INV)

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

/* ---- sim_device.c ---- */
/* Device of the calling thread's current context, or CUDA_ERROR_INVALID_CONTEXT. */
CUresult sim_current_device(int *dev);

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

/* ---- sim_legacy.c ---- */
/* Owning device of the cuMemAlloc allocation containing p, or -1. Lock held. */
int sim_legacy_device(uintptr_t p);

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

/* ---- teardown at unload (lock held): free bookkeeping, leave memory mapped ---- */
void sim_vmm_teardown(void);
void sim_legacy_teardown(void);
void sim_host_teardown(void);
void sim_stream_teardown(void);

#pragma GCC visibility pop

/* ---- older ABIs, exported under their historical (unversioned) names ---- */
CUresult sim_cuCtxPopCurrent_v1(CUcontext *pctx) __asm__("cuCtxPopCurrent");
CUresult sim_cuCtxPushCurrent_v1(CUcontext ctx) __asm__("cuCtxPushCurrent");
CUresult sim_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev) __asm__("cuDeviceGetUuid");
CUresult sim_cuDevicePrimaryCtxRelease_v1(CUdevice dev) __asm__("cuDevicePrimaryCtxRelease");
CUresult sim_cuEventDestroy_v1(CUevent hEvent) __asm__("cuEventDestroy");
CUresult sim_cuEventElapsedTime_v1(float *ms, CUevent a, CUevent b) __asm__("cuEventElapsedTime");
CUresult sim_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags) __asm__("cuGetProcAddress");
CUresult sim_cuMemHostRegister_v1(void *p, size_t bytesize,
                                  unsigned int Flags) __asm__("cuMemHostRegister");
CUresult sim_cuStreamDestroy_v1(CUstream hStream) __asm__("cuStreamDestroy");

/* ---- helpers ---- */
static inline int sim_is_aligned(uintptr_t v, size_t a)
{
    return (v & (a - 1)) == 0;
}

#endif /* GPOOL_SIM_INTERNAL_H */
