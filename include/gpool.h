/*
 * gpool — a caching memory-pool allocator for NVIDIA GPUs over the CUDA driver API.
 *
 * Every call returns a gpool_status; on failure gpool_last_error() holds a message that says
 * exactly what went wrong (thread-local, valid until the calling thread's next gpool call).
 * Unless a function says otherwise it is thread-safe: any thread may call it on any pool.
 * The CUDA driver is loaded at run time (dlopen of libcuda.so.1, or the file named by the
 * GPOOL_LIBCUDA environment variable); nothing here needs cuda.h.
 */
#ifndef GPOOL_H
#define GPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPOOL_API __attribute__((visibility("default")))
#else
#define GPOOL_API
#endif

#define GPOOL_VERSION_MAJOR 0
#define GPOOL_VERSION_MINOR 1
#define GPOOL_VERSION_PATCH 0

/** A CUDA stream; the same type as CUstream and cudaStream_t. NULL is the legacy stream. */
typedef struct CUstream_st *gpool_stream_t;

/** An allocator instance bound to one CUDA device. Opaque. */
typedef struct gpool gpool_t;

/** Status codes. GPOOL_OK is 0; every other value is an error. */
typedef enum gpool_status {
    GPOOL_OK = 0,
    GPOOL_ERR_INVALID_ARG = 1,     /**< NULL pool or out-pointer, bad size, alignment or flag */
    GPOOL_ERR_OUT_OF_MEMORY = 2,   /**< physical memory (or the kind's budget) is exhausted */
    GPOOL_ERR_INVALID_POINTER = 3, /**< pointer not from this pool, or already freed */
    GPOOL_ERR_NO_DRIVER = 4,       /**< libcuda could not be loaded or lacks an entry point */
    GPOOL_ERR_NO_DEVICE = 5,       /**< no CUDA device, or the requested ordinal is absent */
    GPOOL_ERR_UNSUPPORTED = 6,     /**< the device or driver lacks a needed feature */
    GPOOL_ERR_DRIVER = 7,          /**< a driver call failed; the message names it */
    GPOOL_ERR_CONFIG = 8,          /**< bad configuration value or string */
    GPOOL_ERR_LIVE_BLOCKS = 9,     /**< gpool_destroy found live blocks (and freed them) */
    GPOOL_ERR_IO = 10,             /**< a file could not be written */
} gpool_status;

/** Where a block lives. */
typedef enum gpool_mem_kind {
    GPOOL_MEM_AUTO = 0,        /**< let the placement policy choose from the usage hint */
    GPOOL_MEM_DEVICE = 1,      /**< device memory (vidmem), mapped through VMM */
    GPOOL_MEM_HOST_PINNED = 2, /**< page-locked host memory, for fast async copies */
    GPOOL_MEM_HOST_MAPPED = 3, /**< pinned host memory also mapped into the device (zero-copy) */
    GPOOL_MEM_KIND_COUNT = 4
} gpool_mem_kind;

/** How the caller will use a block; GPOOL_MEM_AUTO turns this into a kind. */
typedef enum gpool_usage {
    GPOOL_USAGE_DEFAULT = 0,       /**< no hint: device memory */
    GPOOL_USAGE_GPU_ONLY = 1,      /**< hot data touched only by kernels */
    GPOOL_USAGE_UPLOAD = 2,        /**< CPU writes, GPU reads once */
    GPOOL_USAGE_READBACK = 3,      /**< GPU writes, CPU reads */
    GPOOL_USAGE_STAGING = 4,       /**< source or target of async copies */
    GPOOL_USAGE_MULTI_GPU = 5,     /**< shared by several GPUs */
    GPOOL_USAGE_LARGE_DATASET = 6, /**< larger than the device should hold */
    GPOOL_USAGE_COUNT = 7
} gpool_usage;

/** Allocation flags (bitwise or). */
enum {
    GPOOL_ALLOC_ZERO = 1u << 0,           /**< fill the block with zero bytes */
    GPOOL_ALLOC_ALLOW_FALLBACK = 1u << 1, /**< AUTO may use mapped sysmem when vidmem is full */
    GPOOL_ALLOC_STREAM_WAIT = 1u << 2,    /**< reuse blocks pending on other streams by making
                                               the allocating stream wait on their event */
};

/** Per-request parameters. Zero-initialised means: device memory, default alignment (256
 *  bytes), automatic page size, the pool's default stream. */
typedef struct gpool_alloc_params {
    gpool_mem_kind kind;
    gpool_usage usage;
    size_t alignment;      /**< power of two, at most the page size; 0 = 256 */
    size_t page_size;      /**< 0 = automatic; else a multiple of the device granularity */
    unsigned flags;        /**< GPOOL_ALLOC_* */
    gpool_stream_t stream; /**< stream for gpool_alloc (gpool_alloc_async overrides it) */
} gpool_alloc_params;

/** Pool configuration. Start from gpool_config_default(); gpool_config_parse() applies a
 *  "key=value,key=value" string (the GPOOL_CONF syntax). */
typedef struct gpool_config {
    int device;                 /**< CUDA device ordinal (default 0) */
    size_t release_threshold;   /**< cached bytes kept after gpool_trim(…, 0)-style release
                                     on memory pressure; 0 = release all (default 0) */
    size_t tcache_bytes;        /**< per-thread cache bound in bytes (default 1 MiB; 0 = off) */
    size_t small_max;           /**< largest request served from small size classes (64 KiB) */
    size_t budget[GPOOL_MEM_KIND_COUNT]; /**< per-kind byte budget; 0 = no limit */
    size_t va_reserve;          /**< bytes of virtual address space per reservation
                                     (0 = 2 x device memory) */
    int verbose;                /**< 1 = print OOM and leak reports on stderr */
    gpool_stream_t default_stream; /**< stream used by gpool_alloc/gpool_free (NULL) */
    char trace_path[256];       /**< if set, log every alloc/free as RMM CSV to this file */
} gpool_config;

/** Counters for one memory kind. Bytes "in use" are rounded block sizes; "requested" are the
 *  sizes callers asked for; "reserved" is physical memory mapped; "cached" is reserved memory
 *  not holding a live block. */
typedef struct gpool_kind_stats {
    uint64_t requested_bytes, in_use_bytes, reserved_bytes, cached_bytes;
    uint64_t peak_requested_bytes, peak_in_use_bytes, peak_reserved_bytes, peak_cached_bytes;
    uint64_t allocs, frees, live_blocks;
} gpool_kind_stats;

/** Driver calls counted by gpool_stats.driver_calls. */
typedef enum gpool_driver_call {
    GPOOL_DRV_MEM_CREATE = 0,
    GPOOL_DRV_MEM_RELEASE,
    GPOOL_DRV_MEM_MAP,
    GPOOL_DRV_MEM_UNMAP,
    GPOOL_DRV_MEM_SET_ACCESS,
    GPOOL_DRV_ADDRESS_RESERVE,
    GPOOL_DRV_ADDRESS_FREE,
    GPOOL_DRV_HOST_ALLOC,
    GPOOL_DRV_HOST_FREE,
    GPOOL_DRV_HOST_REGISTER,
    GPOOL_DRV_HOST_UNREGISTER,
    GPOOL_DRV_EVENT,   /**< event create/record/query/synchronize/destroy */
    GPOOL_DRV_STREAM,  /**< stream wait/synchronize */
    GPOOL_DRV_OTHER,   /**< memset, context and device queries */
    GPOOL_DRV_COUNT
} gpool_driver_call;

/** A snapshot of a pool's counters. kind[GPOOL_MEM_AUTO] holds the totals over all kinds. */
typedef struct gpool_stats {
    gpool_kind_stats kind[GPOOL_MEM_KIND_COUNT];
    uint64_t driver_calls[GPOOL_DRV_COUNT];
    uint64_t driver_calls_total;
    uint64_t oom_retries;    /**< times the allocator released cache and tried again */
    uint64_t ooms;           /**< allocations that failed with GPOOL_ERR_OUT_OF_MEMORY */
    uint64_t fallbacks;      /**< AUTO requests placed in mapped sysmem because vidmem was full */
    uint64_t pages_remapped; /**< physical pages moved from one address range to another */
    uint64_t tcache_hits;    /**< allocations served from a thread cache */
    uint64_t pending_frees;  /**< blocks now waiting on another stream's work */
} gpool_stats;

/** What gpool knows about one live block. */
typedef struct gpool_block_desc {
    gpool_mem_kind kind;       /**< the kind it was placed in (never AUTO) */
    gpool_usage usage;
    size_t requested_size, size; /**< what was asked for, what was reserved for it */
    size_t page_size;          /**< physical page (chunk) size backing it */
    uint64_t device_ptr;       /**< address usable by the device (0 for HOST_PINNED without
                                    unified addressing) */
    void *host_ptr;            /**< address usable by the CPU (NULL for DEVICE) */
    gpool_stream_t stream;     /**< stream it was allocated on */
    int device;                /**< owning device ordinal */
    int fell_back;             /**< 1 if AUTO placed it in sysmem because vidmem was full */
} gpool_block_desc;

/** The library's version as "MAJOR.MINOR.PATCH". Thread-safe, never fails. */
GPOOL_API const char *gpool_version(void);

/** A static, human-readable name for a status code. Never returns NULL. */
GPOOL_API const char *gpool_strerror(gpool_status status);

/** The detail message of the calling thread's last failed gpool call ("" if none). The
 *  string is thread-local and valid until that thread's next gpool call. */
GPOOL_API const char *gpool_last_error(void);

/** The name of a driver-call counter ("cuMemCreate", ...); NULL when out of range. */
GPOOL_API const char *gpool_driver_call_name(gpool_driver_call call);

/** Fill *cfg with the defaults. GPOOL_ERR_INVALID_ARG if cfg is NULL. */
GPOOL_API gpool_status gpool_config_default(gpool_config *cfg);

/** Apply "key=value,key=value" to *cfg (keys: device, release_threshold, tcache_bytes,
 *  small_max, budget_device, budget_pinned, budget_mapped, va_reserve, verbose, trace).
 *  Sizes take K/M/G/T suffixes. An unknown key or bad value returns GPOOL_ERR_CONFIG naming
 *  it, and leaves *cfg unchanged. Thread-safe (touches only *cfg). */
GPOOL_API gpool_status gpool_config_parse(gpool_config *cfg, const char *conf);

/** Create a pool on cfg->device (cfg NULL: defaults, then GPOOL_CONF from the environment).
 *  Loads the driver on first use and retains the device's primary context (sharing it with
 *  a framework that already made it). Errors: GPOOL_ERR_INVALID_ARG (out NULL),
 *  GPOOL_ERR_NO_DRIVER, GPOOL_ERR_NO_DEVICE, GPOOL_ERR_UNSUPPORTED (no VMM),
 *  GPOOL_ERR_CONFIG, GPOOL_ERR_DRIVER, GPOOL_ERR_OUT_OF_MEMORY. On error *out is NULL. */
GPOOL_API gpool_status gpool_create(const gpool_config *cfg, gpool_t **out);

/** Destroy a pool and give all its memory back to the driver. Live blocks are freed too and
 *  reported: GPOOL_ERR_LIVE_BLOCKS with their count and bytes in the message (and on stderr
 *  when verbose). NULL is GPOOL_ERR_INVALID_ARG. No other thread may use the pool meanwhile. */
GPOOL_API gpool_status gpool_destroy(gpool_t *pool);

/** Allocate size bytes; *out receives the address (a device address for DEVICE and
 *  HOST_MAPPED, the host address for HOST_PINNED). params NULL = defaults. size 0 returns
 *  GPOOL_OK with *out = NULL. Errors: GPOOL_ERR_INVALID_ARG (NULL pool or out, bad params,
 *  size beyond what any device could hold), GPOOL_ERR_OUT_OF_MEMORY (after releasing cached
 *  memory and retrying; the message says requested, free, cached bytes and the cause),
 *  GPOOL_ERR_DRIVER. On error *out is NULL. */
GPOOL_API gpool_status gpool_alloc(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                                   void **out);

/** As gpool_alloc, ordered on stream: the block may be one freed on this stream whose work
 *  has not finished yet (stream order makes that safe), never one pending on another stream
 *  unless GPOOL_ALLOC_STREAM_WAIT is set. */
GPOOL_API gpool_status gpool_alloc_async(gpool_t *pool, size_t size,
                                         const gpool_alloc_params *params, gpool_stream_t stream,
                                         void **out);

/** Free a block from gpool_alloc on the pool's default stream. NULL is a no-op (GPOOL_OK).
 *  A pointer this pool did not hand out, or one already freed, is GPOOL_ERR_INVALID_POINTER
 *  and changes nothing. */
GPOOL_API gpool_status gpool_free(gpool_t *pool, void *ptr);

/** Free a block once the work queued on stream so far is done: it is reused at once by
 *  allocations on that stream, by others only after an event recorded now has completed.
 *  Errors as gpool_free. */
GPOOL_API gpool_status gpool_free_async(gpool_t *pool, void *ptr, gpool_stream_t stream);

/** Mark that stream also used the block (as PyTorch's record_stream): its free then waits
 *  for the work queued on that stream too. GPOOL_ERR_INVALID_POINTER for unknown ptr. */
GPOOL_API gpool_status gpool_record_stream(gpool_t *pool, void *ptr, gpool_stream_t stream);

/** Give cached physical memory back to the driver until at most keep_bytes stay cached.
 *  Waits for pending frees first. Errors: GPOOL_ERR_INVALID_ARG, GPOOL_ERR_DRIVER. */
GPOOL_API gpool_status gpool_trim(gpool_t *pool, size_t keep_bytes);

/** Copy the pool's counters into *out. Errors: GPOOL_ERR_INVALID_ARG. */
GPOOL_API gpool_status gpool_get_stats(gpool_t *pool, gpool_stats *out);

/** Describe the live block that contains ptr (ptr may point inside it). Errors:
 *  GPOOL_ERR_INVALID_ARG (NULL pool or out), GPOOL_ERR_INVALID_POINTER (not a live block of
 *  this pool). */
GPOOL_API gpool_status gpool_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out);

/** Free and total device memory as the application sees it: the driver's free memory plus
 *  this pool's cached bytes. Errors: GPOOL_ERR_INVALID_ARG, GPOOL_ERR_DRIVER. */
GPOOL_API gpool_status gpool_mem_get_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes);

/** The physical page (chunk) size gpool would back a block of size bytes of kind with, in
 *  *out (AUTO: the kind the policy picks for GPOOL_USAGE_DEFAULT). Errors:
 *  GPOOL_ERR_INVALID_ARG. */
GPOOL_API gpool_status gpool_page_size(gpool_t *pool, gpool_mem_kind kind, size_t size,
                                       size_t *out);

/** Write a JSON snapshot of every address range and block (state: in_use, cached, pending)
 *  and the stats to f. Errors: GPOOL_ERR_INVALID_ARG, GPOOL_ERR_IO. */
GPOOL_API gpool_status gpool_dump_json(gpool_t *pool, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* GPOOL_H */
