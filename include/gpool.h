/**
 * @file gpool.h
 * @brief gpool — a caching memory-pool allocator for NVIDIA GPUs over the CUDA driver API.
 *
 * This header is the whole public API, as a reference: each function says what it does, its
 * errors, whether it is thread-safe and what it costs. The concepts behind the calls are
 * explained once each, in docs/ (docs/api.md is the index).
 *
 * A pool (gpool_t) is bound to one CUDA device and hands out blocks of device memory, pinned
 * host memory, and pinned host memory mapped into the device. Freed blocks stay cached, so a
 * repeated workload is served without driver calls; when physical memory runs short the pool
 * gives cached pages back and remaps them where they are needed instead of failing.
 *
 * @par Rules for every call (docs/api.md)
 * - Errors: every call returns a gpool_status; on failure gpool_last_error() says what went
 *   wrong and out-pointers are NULL. Where a call lists GPOOL_ERR_DRIVER, a driver answer of
 *   CUDA_ERROR_OUT_OF_MEMORY comes back as GPOOL_ERR_OUT_OF_MEMORY; any call that records
 *   something may fail with GPOOL_ERR_OUT_OF_MEMORY when host memory runs out.
 * - fork(): in a child, a pool created before the fork answers GPOOL_ERR_DRIVER at once
 *   (alloc, free, destroy, trim, stats, block queries, gpool_dump_json, gpool_mem_get_info).
 * - Threads: every call is thread-safe unless it says otherwise (gpool_destroy()).
 * - Ownership: a block belongs to its pool; the library never takes ownership of caller
 *   memory, and strings it returns must not be freed.
 * - The driver is loaded at run time (libcuda.so.1, or GPOOL_LIBCUDA): nothing here needs
 *   cuda.h, and a program linked with gpool starts on a machine without a GPU.
 * - Versions: the soname is libgpool.so.MAJOR; GPOOL_VERSION_* is this header,
 *   gpool_version() the library in use.
 *
 * @par Structs that grow
 * Every public struct but gpool_kind_stats starts with struct_size, set by its initializer
 * macro (GPOOL_STATS_INIT, ...); a call reads and writes only that many bytes, and structs only
 * grow at the end. The getters are macros over _sized twins that pass sizeof, so an
 * uninitialised struct is filled correctly; the twins and macros stay in 1.0. The rules and
 * the decision: docs/concepts/structs.md.
 *
 * @par Deprecated names
 * Old names stay exported, marked GPOOL_DEPRECATED, for one minor version:
 * gpool_block_info() (use gpool_get_block_desc(); removed in 0.3).
 */
/**
 * @mainpage gpool: a caching memory-pool allocator for NVIDIA GPUs
 *
 * gpool serves device memory, pinned host memory and mapped (zero-copy) host memory from
 * pools that cache what is freed, so a program that allocates the same shapes again and again
 * (a training step, a render frame, a serving batch) stops calling the CUDA driver after the
 * first iterations, and a fragmented heap gives pages back and remaps them instead of failing.
 * It is a C11 library over the CUDA driver API, loaded at run time: nothing to link but
 * libgpool.
 *
 * @par Start here
 * - gpool_create() makes a pool for a device (configuration: gpool_config, or GPOOL_CONF);
 * - gpool_alloc() / gpool_alloc_async() hand out blocks, with a memory kind or a usage hint
 *   (gpool_alloc_params) that lets the policy pick device, pinned or mapped memory;
 * - gpool_free() / gpool_free_async() give them back (docs/concepts/streams.md: when freed
 *   memory is reused);
 * - gpool_get_stats(), gpool_dump_json() and gpool_trim() show and manage what the pool
 *   holds; gpool_last_error() says why a call failed.
 *
 * @code
 * gpool_t *pool;
 * if (gpool_create(NULL, &pool) != GPOOL_OK) fprintf(stderr, "%s\n", gpool_last_error());
 * void *buf;
 * gpool_alloc(pool, 64 << 20, NULL, &buf);   // 64 MiB of device memory
 * gpool_free_async(pool, buf, stream);       // reusable on `stream` at once
 * gpool_destroy(pool);
 * @endcode
 *
 * Without changing a program: LD_PRELOAD=libgpool_preload.so serves cudaMalloc/cuMemAlloc
 * from a pool (docs/dropin.md). The file reference for gpool.h lists every function; docs/api.md
 * the rules they share and the concept pages.
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
/** Marks a function as part of the public API: exported from libgpool.so, whose other
 *  symbols have hidden visibility (with GCC and Clang this is
 *  __attribute__((visibility("default")))). */
#define GPOOL_API
#endif

#if defined(__GNUC__) && !defined(GPOOL_NO_DEPRECATED_WARNINGS)
#define GPOOL_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
/** Marks an old name kept for compatibility: the compiler warns where it is used, naming its
 *  replacement (define GPOOL_NO_DEPRECATED_WARNINGS to silence it). Such names stay for one
 *  minor version after the one that replaced them. */
#define GPOOL_DEPRECATED(msg)
#endif

/** Major version of this header: incremented on incompatible API or ABI changes (and in the
 *  soname, libgpool.so.MAJOR). */
#define GPOOL_VERSION_MAJOR 0
/** Minor version of this header: incremented when functionality is added compatibly. */
#define GPOOL_VERSION_MINOR 3
/** Patch version of this header: incremented for compatible fixes. */
#define GPOOL_VERSION_PATCH 0

/** A CUDA stream; the same type as CUstream and cudaStream_t, so either can be passed
 *  directly. NULL is the legacy default stream. gpool never creates or destroys streams. */
typedef struct CUstream_st *gpool_stream_t;

/** An allocator instance bound to one CUDA device. Opaque: create it with gpool_create(),
 *  destroy it with gpool_destroy(). */
typedef struct gpool gpool_t;

/** Status codes returned by every gpool call. GPOOL_OK is 0; every other value is an error,
 *  and gpool_last_error() then holds the details. gpool_strerror() names each code. */
typedef enum gpool_status {
    GPOOL_OK = 0,                  /**< success */
    GPOOL_ERR_INVALID_ARG = 1,     /**< NULL pool or out-pointer, bad size, alignment or flag */
    GPOOL_ERR_OUT_OF_MEMORY = 2,   /**< physical memory (or the kind's budget) is exhausted */
    GPOOL_ERR_INVALID_POINTER = 3, /**< pointer not from this pool, or already freed */
    GPOOL_ERR_NO_DRIVER = 4,       /**< libcuda could not be loaded or lacks an entry point */
    GPOOL_ERR_NO_DEVICE = 5,       /**< no CUDA device, or the requested ordinal is absent */
    GPOOL_ERR_UNSUPPORTED = 6,     /**< the device or driver lacks a needed feature */
    GPOOL_ERR_DRIVER = 7,          /**< a driver call failed; the message names it */
    GPOOL_ERR_CONFIG = 8,          /**< bad configuration value or string */
    GPOOL_ERR_LIVE_BLOCKS = 9,     /**< gpool_destroy found live blocks (and freed them) */
    GPOOL_ERR_IO = 10,             /**< a file could not be opened or written */
} gpool_status;

/** Where a block lives, chosen per request in gpool_alloc_params.kind
 *  (docs/concepts/placement.md, docs/concepts/host-kinds.md). */
typedef enum gpool_mem_kind {
    GPOOL_MEM_AUTO = 0,        /**< let the placement policy choose from the usage hint */
    GPOOL_MEM_DEVICE = 1,      /**< device memory (vidmem), mapped through VMM */
    GPOOL_MEM_HOST_PINNED = 2, /**< page-locked host memory, for fast async copies */
    GPOOL_MEM_HOST_MAPPED = 3, /**< pinned host memory also mapped into the device (zero-copy) */
    GPOOL_MEM_KIND_COUNT = 4   /**< number of kinds (loop bound, not a kind) */
} gpool_mem_kind;

/** Entries of the per-kind arrays in public structs (gpool_config.budget, gpool_stats.kind):
 *  fixed within a major version, with room for kinds beyond GPOOL_MEM_KIND_COUNT; entries
 *  from GPOOL_MEM_KIND_COUNT on are unused (0). */
#define GPOOL_MEM_KIND_SLOTS 8

/** How the caller will use a block; with GPOOL_MEM_AUTO it picks the kind through one table
 *  (docs/concepts/placement.md). */
typedef enum gpool_usage {
    GPOOL_USAGE_DEFAULT = 0,       /**< no hint: device memory */
    GPOOL_USAGE_GPU_ONLY = 1,      /**< hot data touched only by kernels: device memory */
    GPOOL_USAGE_UPLOAD = 2,        /**< CPU writes, GPU reads once: mapped host memory */
    GPOOL_USAGE_READBACK = 3,      /**< GPU writes, CPU reads: pinned host memory */
    GPOOL_USAGE_STAGING = 4,       /**< source or target of async copies: pinned host memory */
    GPOOL_USAGE_MULTI_GPU = 5,     /**< shared by several GPUs: mapped host memory */
    GPOOL_USAGE_LARGE_DATASET = 6, /**< larger than the device should hold: mapped host memory */
    GPOOL_USAGE_COUNT = 7          /**< number of hints (array bound, not a hint) */
} gpool_usage;

/** Allocation flags for gpool_alloc_params.flags (bitwise or). The stream flags are explained
 *  in docs/concepts/streams.md, the fallback in docs/concepts/budgets.md. */
enum {
    GPOOL_ALLOC_ZERO = 1u << 0,           /**< fill the block with zero bytes */
    GPOOL_ALLOC_ALLOW_FALLBACK = 1u << 1, /**< AUTO may use mapped sysmem when vidmem is full or
                                               over budget */
    GPOOL_ALLOC_STREAM_WAIT = 1u << 2,    /**< reuse blocks pending on other streams by making
                                               the allocating stream wait on their event */
    GPOOL_ALLOC_NO_STREAM_WAIT = 1u << 3, /**< never make the allocating stream wait for another
                                               stream's work (as cudaMalloc's blocks); with
                                               STREAM_WAIT: GPOOL_ERR_INVALID_ARG */
    GPOOL_ALLOC_IN_CAPTURE = 1u << 4,     /**< on a stream capturing a CUDA graph, device memory
                                               may be mapped fresh (else only memory already free
                                               for the stream serves it); the caller keeps the
                                               block from eager reuse while a graph may replay:
                                               docs/concepts/streams.md, "Graph capture" */
};

/** Per-request parameters for gpool_alloc() and gpool_alloc_async(). Zero-initialised (or a
 *  NULL pointer) means: device memory, 256-byte alignment, automatic page size, the pool's
 *  default stream. Read during the call only. Initialise it with GPOOL_ALLOC_PARAMS_INIT. */
typedef struct gpool_alloc_params {
    size_t struct_size;    /**< sizeof the caller's struct (GPOOL_ALLOC_PARAMS_INIT sets it);
                                0 = the 0.2 layout */
    gpool_mem_kind kind;   /**< where the block lives; GPOOL_MEM_AUTO: chosen from usage */
    gpool_usage usage;     /**< how the block is used; decides the kind for GPOOL_MEM_AUTO and
                                is reported back by gpool_get_block_desc() */
    size_t alignment;      /**< power of two, at most the page size; 0 = 256 */
    size_t page_size;      /**< 0 = automatic; which others are accepted:
                                docs/concepts/placement.md, "Page and chunk sizes" */
    unsigned flags;        /**< GPOOL_ALLOC_* */
    gpool_stream_t stream; /**< stream for gpool_alloc (gpool_alloc_async overrides it) */
} gpool_alloc_params;

/** Initializer for a gpool_alloc_params: struct_size set, everything else the defaults.
 *  `gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;` */
#define GPOOL_ALLOC_PARAMS_INIT                                                                    \
    {                                                                                              \
        .struct_size = sizeof(gpool_alloc_params)                                                  \
    }

/** Values of gpool_config.stream_reuse: may a request make its stream wait for another
 *  stream's frees? (docs/concepts/streams.md, "Reuse across streams"). Has the size and
 *  representation of int (the field was an int before 0.3.0). */
typedef enum gpool_stream_reuse {
    GPOOL_STREAM_REUSE_WAIT = 0,  /**< a stream may wait for another's frees to reuse them */
    GPOOL_STREAM_REUSE_EVENTS = 1 /**< only frees whose work is known done cross streams */
} gpool_stream_reuse;

/** Values of gpool_config.peer_access: which devices can reach the pool's device memory
 *  (docs/concepts/placement.md, "Peer access"). Has the size and representation of int (the
 *  field was an int before 0.3.0). */
typedef enum gpool_peer_access {
    GPOOL_PEER_AUTO = 0, /**< the pool's device plus every device cuDeviceCanAccessPeer allows */
    GPOOL_PEER_NONE = 1, /**< the pool's device only */
    GPOOL_PEER_ALL = 2   /**< every device; gpool_create fails if one cannot reach this one */
} gpool_peer_access;

/** Pool configuration. Start from GPOOL_CONFIG_INIT (or gpool_config_default());
 *  gpool_config_parse() applies a "key=value,key=value" string (the GPOOL_CONF syntax).
 *  gpool_create() copies it, trace_path's string included. */
typedef struct gpool_config {
    /** sizeof the caller's struct (GPOOL_CONFIG_INIT and gpool_config_default() set it). */
    size_t struct_size;
    /** CUDA device ordinal (default 0). */
    int device;
    /** 0 (default): keep freed memory cached; otherwise give back what the pool caches beyond
     *  this many bytes after a large free (docs/concepts/placement.md, "Giving memory back"). */
    size_t release_threshold;
    /** Per-thread cache bound in bytes (default 1 MiB; 0 = off; docs/concepts/budgets.md). */
    size_t tcache_bytes;
    /** Largest request served from small size classes (default 16 KiB, at most 64 KiB). */
    size_t small_max;
    /** Per-kind bytes in use allowed, indexed by gpool_mem_kind; 0 = no limit. Binds on every
     *  path, thread caches included (docs/concepts/budgets.md). */
    size_t budget[GPOOL_MEM_KIND_SLOTS];
    /** Bytes of virtual address space per reservation (0 = 2 x device memory, at least 8 GiB;
     *  otherwise at least 64 MiB). */
    size_t va_reserve;
    /** 1 = print OOM and leak reports on stderr. */
    int verbose;
    /** Stream used by gpool_alloc and gpool_free (default NULL, the legacy stream). */
    gpool_stream_t default_stream;
    /** If not NULL (nor ""), log every alloc/free as RMM replay CSV to this file (else the
     *  GPOOL_TRACE environment variable names it); "%p" is replaced by the process id
     *  (docs/tracing.md). The caller's string (gpool_create() copies it), or the library's
     *  when gpool_config_parse() set it (never free that one). */
    const char *trace_path;
    /** Which devices get access to the pool's device memory (GPOOL_CONF key
     *  peer_access=auto|none|all); gpool_set_peer_access() changes it later. */
    gpool_peer_access peer_access;
    /** Not used: it covers the 0.2.0 layout's tail padding, so that fields added since start
     *  beyond a 0.2.0 caller's struct_size and are never read from its padding bytes. */
    int reserved0;
    /** May a request make its stream wait for another stream's frees (GPOOL_CONF key
     *  stream_reuse=wait|events; default GPOOL_STREAM_REUSE_WAIT)? Since 0.2.1: a caller
     *  built against 0.2.0 gets the default. */
    gpool_stream_reuse stream_reuse;
    /** Not used: it covers the 0.2.1 layout's tail padding (as reserved0 does for 0.2.0). */
    int reserved1;
    /** 1: device pages are created exportable (requestedHandleTypes =
     *  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), so that gpool_export_block() can share a
     *  block with another process (GPOOL_CONF key ipc=0|1; docs/ipc.md). 0 (default): not
     *  exportable, gpool_export_block() answers GPOOL_ERR_UNSUPPORTED. Importing needs no
     *  ipc. Since 0.3.0: a caller built against an older gpool.h gets 0. */
    int ipc;
} gpool_config;

/** Initializer for a gpool_config: struct_size set and the values gpool_config_default()
 *  fills (device 0, 1 MiB thread caches, 16 KiB small requests, everything else 0 or NULL).
 *  `gpool_config cfg = GPOOL_CONFIG_INIT;` */
#define GPOOL_CONFIG_INIT                                                                          \
    {                                                                                              \
        .struct_size = sizeof(gpool_config), .tcache_bytes = (size_t)1 << 20,                      \
        .small_max = (size_t)16 << 10                                                              \
    }

/** Counters for one memory kind (docs/concepts/stats.md). An element of gpool_stats.kind only,
 *  so it has no struct_size and never grows within a major version. */
typedef struct gpool_kind_stats {
    uint64_t requested_bytes;      /**< bytes callers asked for, over live blocks */
    uint64_t in_use_bytes;         /**< bytes of live blocks, rounded to their block sizes */
    uint64_t reserved_bytes;       /**< physical memory held from the driver */
    uint64_t cached_bytes;         /**< reserved bytes not holding a live block */
    uint64_t peak_requested_bytes; /**< high-water mark of requested_bytes */
    uint64_t peak_in_use_bytes;    /**< high-water mark of in_use_bytes */
    uint64_t peak_reserved_bytes;  /**< high-water mark of reserved_bytes */
    uint64_t peak_cached_bytes;    /**< high-water mark of cached_bytes */
    uint64_t allocs;               /**< successful allocations so far */
    uint64_t frees;                /**< frees so far */
    uint64_t live_blocks;          /**< blocks allocated and not yet freed */
} gpool_kind_stats;

/** Driver calls counted by gpool_stats.driver_calls (an index into that array);
 *  gpool_driver_call_name() names each one. */
typedef enum gpool_driver_call {
    GPOOL_DRV_MEM_CREATE = 0,  /**< cuMemCreate: physical memory obtained */
    GPOOL_DRV_MEM_RELEASE,     /**< cuMemRelease: physical memory given back */
    GPOOL_DRV_MEM_MAP,         /**< cuMemMap: pages mapped into a range */
    GPOOL_DRV_MEM_UNMAP,       /**< cuMemUnmap: pages unmapped */
    GPOOL_DRV_MEM_SET_ACCESS,  /**< cuMemSetAccess: access granted to mapped pages */
    GPOOL_DRV_ADDRESS_RESERVE, /**< cuMemAddressReserve: virtual address range reserved */
    GPOOL_DRV_ADDRESS_FREE,    /**< cuMemAddressFree: virtual address range released */
    GPOOL_DRV_HOST_ALLOC,      /**< cuMemHostAlloc: pinned host memory allocated */
    GPOOL_DRV_HOST_FREE,       /**< cuMemFreeHost: pinned host memory freed */
    GPOOL_DRV_HOST_REGISTER,   /**< cuMemHostRegister: host memory pinned (and mapped) */
    GPOOL_DRV_HOST_UNREGISTER, /**< cuMemHostUnregister: host memory unpinned */
    GPOOL_DRV_EVENT,           /**< event create/record/query/synchronize/destroy */
    GPOOL_DRV_STREAM,          /**< stream wait/synchronize */
    GPOOL_DRV_OTHER,           /**< memset, context and device queries */
    GPOOL_DRV_COUNT            /**< number of counters (loop bound, not a call) */
} gpool_driver_call;

/** Entries of gpool_stats.driver_calls: fixed within a major version, with room for counters
 *  beyond GPOOL_DRV_COUNT; entries from GPOOL_DRV_COUNT on are unused (0). */
#define GPOOL_DRV_SLOTS 32

/** A snapshot of a pool's counters, filled by gpool_get_stats() (docs/concepts/stats.md).
 *  Initialise it with GPOOL_STATS_INIT; new counters are only ever appended at the end. */
typedef struct gpool_stats {
    size_t struct_size; /**< sizeof the caller's struct (GPOOL_STATS_INIT sets it); kept */
    gpool_kind_stats kind[GPOOL_MEM_KIND_SLOTS]; /**< per kind; [GPOOL_MEM_AUTO] = totals */
    uint64_t driver_calls[GPOOL_DRV_SLOTS];      /**< driver calls made, by gpool_driver_call */
    uint64_t driver_calls_total; /**< sum of driver_calls: 0 growth means a steady state
                                      served entirely from the cache */
    uint64_t oom_retries;        /**< times the allocator released cache and tried again */
    uint64_t ooms;               /**< allocations that failed with GPOOL_ERR_OUT_OF_MEMORY */
    uint64_t fallbacks;          /**< AUTO requests placed on another kind than the policy picked
                                      first: device to mapped, or pinned to mapped */
    uint64_t pages_remapped;     /**< physical pages moved from one address range to another */
    uint64_t tcache_hits;        /**< allocations served from a thread cache */
    uint64_t pending_frees;      /**< blocks now waiting on a stream's work (host blocks: on the
                                      streams they were freed and allocated on) */
} gpool_stats;

/** Initializer for a gpool_stats: struct_size set, counters 0.
 *  `gpool_stats st = GPOOL_STATS_INIT;` */
#define GPOOL_STATS_INIT                                                                           \
    {                                                                                              \
        .struct_size = sizeof(gpool_stats)                                                         \
    }

/** What gpool knows about one live block, filled by gpool_get_block_desc(). Initialise it with
 *  GPOOL_BLOCK_DESC_INIT. */
typedef struct gpool_block_desc {
    size_t struct_size;    /**< sizeof the caller's struct (GPOOL_BLOCK_DESC_INIT sets it);
                                kept. Not the block's size: that is `size` */
    gpool_mem_kind kind;   /**< the kind it was placed in (never AUTO) */
    gpool_usage usage;     /**< the usage hint it was allocated with */
    size_t requested_size; /**< the size the caller asked for */
    size_t size;           /**< the size reserved for it (requested_size rounded up) */
    size_t page_size;      /**< physical page (chunk) size backing it */
    uint64_t device_ptr;   /**< address usable by the device (0 for HOST_PINNED without
                                unified addressing) */
    void *host_ptr;        /**< address usable by the CPU (NULL for DEVICE) */
    gpool_stream_t stream; /**< stream it was allocated on */
    int device;            /**< owning device ordinal */
    int fell_back;         /**< 1 if AUTO placed it on another kind than the policy picked
                                first (device to mapped, pinned to mapped) */
} gpool_block_desc;

/** Initializer for a gpool_block_desc: struct_size set, everything else 0.
 *  `gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;` */
#define GPOOL_BLOCK_DESC_INIT                                                                      \
    {                                                                                              \
        .struct_size = sizeof(gpool_block_desc)                                                    \
    }

/**
 * The version of the library in use, as "MAJOR.MINOR.PATCH"; it may be newer than the
 * GPOOL_VERSION_* macros a program was compiled with (same major version).
 *
 * @return a static string (never NULL; do not free). Thread-safe; never fails; no cost.
 */
GPOOL_API const char *gpool_version(void);

/**
 * A static, human-readable name for a status code ("out of memory", ...).
 *
 * @param status any value, including ones outside gpool_status ("unknown status").
 * @return a static string, never NULL; do not free. Thread-safe; no cost.
 */
GPOOL_API const char *gpool_strerror(gpool_status status);

/**
 * The detail message of the calling thread's last failed gpool call: the call and the cause
 * (the driver entry point and its error, or the requested, free and cached bytes of an
 * out-of-memory failure).
 *
 * Read it right after a call returned an error: a call that succeeds does not promise to clear
 * it (docs/api.md, "Errors").
 *
 * @return the message, or "" if no call has failed on this thread. Thread-local, owned by the
 *         library; its text may change at this thread's next gpool call. No cost.
 */
GPOOL_API const char *gpool_last_error(void);

/**
 * The name of a driver-call counter of gpool_stats.driver_calls ("cuMemCreate", ...).
 *
 * @param call a gpool_driver_call below GPOOL_DRV_COUNT.
 * @return a static string, or NULL when call is out of range. Thread-safe; no cost.
 */
GPOOL_API const char *gpool_driver_call_name(gpool_driver_call call);

/**
 * Fill a configuration with the defaults (the values of GPOOL_CONFIG_INIT): device 0, 1 MiB
 * thread caches, 16 KiB small requests, no budgets, automatic address-space reservation, no
 * trace, the legacy stream.
 *
 * In C this name is a macro over gpool_config_default_sized(), so an uninitialised struct is
 * filled correctly; the function itself reads cfg->struct_size (0 = the 0.2 layout, then set)
 * and writes only that many bytes (docs/concepts/structs.md).
 * Thread-safe (touches only *cfg). Cost: no allocation.
 *
 * @param[in,out] cfg the configuration to fill.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG cfg is NULL or cfg->struct_size is out of range; *cfg is
 *         unchanged.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_config_default(gpool_config *cfg);

/**
 * gpool_config_default() for a struct of struct_size bytes, whatever cfg->struct_size holds:
 * sets cfg->struct_size, then fills the defaults (docs/concepts/structs.md).
 *
 * @param[out] cfg         the configuration to fill (its first struct_size bytes).
 * @param      struct_size sizeof the caller's gpool_config.
 * @return a gpool_status, with the errors of gpool_config_default() (struct_size out of
 *         range: GPOOL_ERR_INVALID_ARG). Thread-safe; no allocation.
 */
GPOOL_API gpool_status gpool_config_default_sized(gpool_config *cfg, size_t struct_size);

/** Fills *cfg with the defaults for this header's gpool_config (see gpool_config_default()). */
#define gpool_config_default(cfg) gpool_config_default_sized((cfg), sizeof(gpool_config))

/**
 * Apply a "key=value,key=value" string (the GPOOL_CONF syntax) to a configuration.
 *
 * Keys: device, release_threshold, tcache_bytes, small_max, budget_device, budget_pinned,
 * budget_mapped, va_reserve, verbose (0 or 1), trace (a file path), peer_access (auto, none
 * or all), stream_reuse (wait or events). Spaces and tabs around keys and values and empty
 * items are ignored. The LD_PRELOAD interposer's keys (disable, sync_free, cudafree,
 * cudafree_batch, cudafree_flush) are checked as the interposer checks them and otherwise
 * ignored, so one GPOOL_CONF serves both. Any other key is an error.
 *
 * Sizes: decimal digits, then optionally K, M, G or T (each optionally followed by B or iB)
 * or B alone, case-insensitive; every unit is a power of 1024 (64K = 64KiB = 64KB = 65536).
 * Nothing else (no sign, fraction, space or hex); a value beyond 64 bits is an error.
 *
 * trace=PATH sets cfg->trace_path to a library-owned copy (never free it; valid until the
 * library is unloaded; equal paths share one copy); trace= clears it.
 *
 * Reads and writes only the first cfg->struct_size bytes (0 = the 0.2 layout).
 * Thread-safe (touches only *cfg and the library's table of trace paths, under a lock).
 * Cost: linear in the string's length.
 *
 * @param[in,out] cfg  the configuration to change; unchanged on error.
 * @param[in]     conf the string; "" changes nothing.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG cfg or conf is NULL, or cfg->struct_size is out of range.
 * @retval GPOOL_ERR_CONFIG an unknown key or bad value, or a key whose field lies beyond
 *         cfg->struct_size (a struct from an older header); the message names it.
 * @retval GPOOL_ERR_OUT_OF_MEMORY no host memory to copy a trace path.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_config_parse(gpool_config *cfg, const char *conf);

/**
 * Create a pool on one device.
 *
 * Loads the driver on first use, retains the device's primary context (shared with a
 * framework that already made it; released by gpool_destroy()) and reserves the device
 * address space (gpool_config.va_reserve). No memory is taken from the device until the first
 * allocation. Thread-safe. Cost: driver calls for the context, the device's attributes and
 * the reservation.
 *
 * @param[in]  cfg the configuration, or NULL for the defaults followed by the GPOOL_CONF
 *                 environment variable. Its first cfg->struct_size bytes are copied (fields
 *                 beyond them take their defaults), trace_path's string too.
 * @param[out] out receives the new pool, owned by the caller until gpool_destroy(); NULL on
 *                 error.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG out is NULL; cfg->struct_size is out of range (0 included);
 *         or cfg is larger than this library's gpool_config with non-zero bytes beyond it.
 * @retval GPOOL_ERR_NO_DRIVER the driver library could not be loaded or lacks an entry point.
 * @retval GPOOL_ERR_NO_DEVICE no CUDA device, or cfg->device is absent.
 * @retval GPOOL_ERR_UNSUPPORTED the device has no virtual memory management (VMM), or
 *         peer_access is GPOOL_PEER_ALL and a device cannot reach this one.
 * @retval GPOOL_ERR_CONFIG a bad configuration value (or GPOOL_CONF string).
 * @retval GPOOL_ERR_DRIVER a driver call failed; the message names it.
 * @retval GPOOL_ERR_OUT_OF_MEMORY host memory for the pool's bookkeeping ran out, or the
 *         device address space cannot be reserved.
 * @retval GPOOL_ERR_IO the trace file (cfg->trace_path or GPOOL_TRACE) cannot be written.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_create(const gpool_config *cfg, gpool_t **out);

/**
 * Destroy a pool and give all its memory back to the driver.
 *
 * Waits for the work queued on the pool's context (cuCtxSynchronize, tried twice) and for
 * pending stream-ordered frees. Blocks still live are freed too and reported (count and
 * bytes in the message; on stderr too when verbose). Every pointer the pool handed out is
 * invalid afterwards. NOT thread-safe for this pool: no other thread may use it meanwhile.
 * Cost: a context synchronize and one release per mapping and reservation.
 *
 * @param pool the pool; it is freed even when live blocks or a failure are reported.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_DRIVER the synchronize failed twice, or another driver call failed while
 *         memory was given back; the memory was given back anyway (the message names the
 *         call).
 * @retval GPOOL_ERR_LIVE_BLOCKS live blocks were found (and freed).
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_destroy(gpool_t *pool);

/**
 * Allocate a block, ordered on params->stream (or the pool's default stream).
 *
 * Served from the pool's cache when possible; otherwise pages are mapped, and when the driver
 * has none left the pool waits for pending frees, releases cached pages (this pool's, then the
 * process's other pools' on the device) and tries again before failing. How kinds, page sizes
 * and alignment are chosen: docs/concepts/placement.md; budgets and fallbacks:
 * docs/concepts/budgets.md. Thread-safe. Cost: a cached small block of the default stream
 * touches no lock (the thread cache); a cached block, one lock of its kind; fresh memory,
 * driver calls (gpool_stats counts them).
 *
 * @par When it must succeed
 * With no driver call failing meanwhile, a device allocation succeeds whenever the device's
 * free pages, less what the live device blocks of the process's pools pin (their pages, their
 * chunks' ends) and what each pool's cold-start growth may hold, cover the request; cached
 * memory never counts. The exact rule: docs/concepts/placement.md, stated executably by
 * tests/util_model.c.
 *
 * @param pool   the pool.
 * @param size   bytes to allocate; 0 returns GPOOL_OK with *out = NULL.
 * @param params kind, usage hint, alignment, page size, flags, stream; NULL = defaults
 *               (device memory). Its first params->struct_size bytes are read (0 = the 0.2
 *               layout), during the call only.
 * @param[out] out receives the address: a device address for DEVICE and HOST_MAPPED, the
 *                 host address for HOST_PINNED (gpool_get_block_desc() gives both). NULL on
 *                 error.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG NULL pool or out; a size beyond what any device could hold
 *         (128 TiB); bad params: an unknown kind, usage or flag, STREAM_WAIT with
 *         NO_STREAM_WAIT, an alignment that is not a power of two or exceeds the page size, a
 *         page_size that is not 0, a host page size or a power-of-two multiple of the
 *         granularity, params->struct_size out of range.
 * @retval GPOOL_ERR_OUT_OF_MEMORY after releasing cached memory and retrying, or at once for
 *         a request larger than the device or refused by its kind's budget; the message says
 *         requested, free and cached bytes and the cause.
 * @retval GPOOL_ERR_UNSUPPORTED the kind is not available on this device or driver; a device
 *         page_size gpool does not back blocks of this size with; or the stream is capturing
 *         a CUDA graph and the request would need driver calls (docs/concepts/streams.md).
 * @retval GPOOL_ERR_DRIVER a driver call failed.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_alloc(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                                   void **out);

/**
 * As gpool_alloc(), ordered on an explicit stream.
 *
 * The block may be one freed on this stream whose work has not finished yet (stream order
 * makes that safe), or one pending on another stream once this stream waits for that work
 * (gpool_config.stream_reuse and the GPOOL_ALLOC_*STREAM_WAIT flags decide when:
 * docs/concepts/streams.md, which also covers CU_STREAM_PER_THREAD and graph capture).
 * Thread-safe. Cost: as gpool_alloc(), plus an event query or a cuStreamWaitEvent when it
 * reuses another stream's memory.
 *
 * @param pool   the pool.
 * @param size   bytes to allocate; 0 returns GPOOL_OK with *out = NULL.
 * @param params as for gpool_alloc(); its stream field is ignored. NULL = defaults.
 * @param stream the stream the block will be used on first.
 * @param[out] out receives the address, as for gpool_alloc(); NULL on error.
 * @return a gpool_status, with the errors of gpool_alloc().
 */
GPOOL_API gpool_status gpool_alloc_async(gpool_t *pool, size_t size,
                                         const gpool_alloc_params *params, gpool_stream_t stream,
                                         void **out);

/**
 * Free a block on the pool's default stream (as gpool_free_async() on that stream).
 *
 * The memory goes back to the pool's cache, not to the driver; when it is reused:
 * docs/concepts/streams.md, "Frees". Thread-safe. Cost: a small block of the default stream
 * goes back to the thread cache without a lock; others take one lock of their kind; no driver
 * call unless the block was used on other streams or gpool_config.release_threshold gives
 * memory back.
 *
 * @param pool the pool that allocated the block.
 * @param ptr  the address gpool_alloc() returned; NULL is a no-op (GPOOL_OK).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr was not handed out by this pool, is inside a block
 *         rather than at its start, or was already freed; nothing changes.
 * @retval GPOOL_ERR_OUT_OF_MEMORY no host memory to record the free of a block used on other
 *         streams (gpool_record_stream()); the block stays live.
 * @retval GPOOL_ERR_DRIVER giving memory back afterwards (gpool_config.release_threshold) met a
 *         failed driver call (the block was freed); or a host block used on other streams could
 *         not be tracked and waiting for those streams failed (it was not freed).
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_free(gpool_t *pool, void *ptr);

/**
 * Free a block once the work queued on a stream so far is done: reusable at once on that
 * stream, on others once an event shows that work complete (host blocks: on every stream only
 * then; docs/concepts/streams.md, "Frees"). Before destroying the stream, call
 * gpool_stream_release(). Thread-safe. Cost: as gpool_free(); a host free makes no driver
 * call.
 *
 * @param pool   the pool that allocated the block.
 * @param ptr    the block's address; NULL is a no-op (GPOOL_OK).
 * @param stream the stream whose queued work may still use the block.
 * @return a gpool_status, with the errors of gpool_free().
 */
GPOOL_API gpool_status gpool_free_async(gpool_t *pool, void *ptr, gpool_stream_t stream);

/**
 * Mark that another stream also used a block (as PyTorch's record_stream): its free then
 * waits for the work queued on that stream too (docs/concepts/streams.md). Recording the
 * block's own stream, or a stream twice, changes nothing. Thread-safe. Cost: one lookup and
 * the streams lock; no driver call (the events come at the free).
 *
 * @param pool   the pool that allocated the block.
 * @param ptr    the block's address, as gpool_alloc() returned it.
 * @param stream the other stream.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL, or the block is already recorded on 8 other
 *         streams.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not the start of a live block of this pool (its
 *         free may be pending).
 * @retval GPOOL_ERR_OUT_OF_MEMORY no host memory for the record.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_record_stream(gpool_t *pool, void *ptr, gpool_stream_t stream);

/**
 * Tell the pool that a stream is about to be destroyed: call it before cuStreamDestroy() /
 * cudaStreamDestroy() of every stream the pool has seen, after its last gpool_free_async().
 * What is pending on the stream moves onto an event recorded now, and the pool forgets the
 * stream, so a new stream with the same handle value starts afresh
 * (docs/concepts/streams.md, "Destroying a stream").
 * Thread-safe with the pool's other calls, not with calls that still use the stream. Cost:
 * one cuEventRecord (cuEventCreate the first time a spare is missing), or one
 * cuStreamSynchronize for another context's stream, plus a walk of the pool's pending free
 * ranges and stream records, under the device arena's lock, and of its live host blocks, under
 * the host kinds' lock (one more cuEventRecord when host frees wait on the stream); no driver
 * call for a stream the pool never saw.
 *
 * @param pool   the pool.
 * @param stream the stream about to be destroyed; one the pool never saw is fine.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL, or stream is NULL, CU_STREAM_LEGACY,
 *         CU_STREAM_PER_THREAD or the pool's default stream.
 * @retval GPOOL_ERR_DRIVER no event could be recorded on the stream and waiting for it
 *         failed: its frees stay pending until the pool next synchronizes the device; the
 *         stream may still be destroyed.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_stream_release(gpool_t *pool, gpool_stream_t stream);

/**
 * Give cached physical memory back to the driver until at most keep_bytes stay cached.
 *
 * Waits for pending frees first (a context synchronize); live blocks are not touched; if the
 * synchronize fails nothing mapped is unmapped (docs/concepts/placement.md, "Giving memory
 * back"). Thread-safe. Cost: a context synchronize, then one unmap and release per page or
 * chunk given back, under each kind's lock.
 *
 * @param pool       the pool.
 * @param keep_bytes cached bytes to keep (0: release everything that holds no live block).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_DRIVER a driver call failed (the synchronize, an unmap, a release, a host
 *         unregister); the message names it. The memory concerned stays cached and a later
 *         trim, allocation or gpool_destroy tries again.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_trim(gpool_t *pool, size_t keep_bytes);

/**
 * Copy the pool's counters (docs/concepts/stats.md).
 *
 * In C this name is a macro over gpool_get_stats_sized(); the function itself reads
 * out->struct_size (set it with GPOOL_STATS_INIT) and writes only that many bytes
 * (docs/concepts/structs.md). Thread-safe; consistent per kind. Cost: reads running
 * counters (grows with the threads that allocated from the pool, not with the blocks), each
 * lock held only to copy a few: cheap enough to call often.
 *
 * @param pool the pool.
 * @param[in,out] out receives the snapshot; struct_size is kept.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range (0
 *         included); *out is unchanged.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_get_stats(gpool_t *pool, gpool_stats *out);

/**
 * gpool_get_stats() for a struct of struct_size bytes, whatever out->struct_size holds: sets
 * out->struct_size, then fills it (docs/concepts/structs.md).
 *
 * @param pool        the pool.
 * @param[out] out    receives the snapshot (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_stats.
 * @return a gpool_status, with the errors of gpool_get_stats(). Thread-safe; cheap.
 */
GPOOL_API gpool_status gpool_get_stats_sized(gpool_t *pool, gpool_stats *out, size_t struct_size);

/** Fills *out for this header's gpool_stats (see gpool_get_stats_sized()). */
#define gpool_get_stats(pool, out) gpool_get_stats_sized((pool), (out), sizeof(gpool_stats))

/**
 * Compute the pool's statistics by walking its blocks: as gpool_get_stats(), except that the
 * requested bytes of small blocks are summed slot by slot. For checks and debugging: it equals
 * gpool_get_stats() whenever no other thread allocates or frees meanwhile.
 *
 * A macro over gpool_calculate_stats_sized() in C, as gpool_get_stats() is. Thread-safe.
 * Cost: EXPENSIVE, grows with the heap (about a millisecond per 10^5 small blocks), holding
 * each kind's lock for the whole walk and stalling every thread that allocates from it.
 *
 * @param pool the pool.
 * @param[in,out] out receives the statistics; out->struct_size as for gpool_get_stats().
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_calculate_stats(gpool_t *pool, gpool_stats *out);

/**
 * gpool_calculate_stats() for a struct of struct_size bytes, as gpool_get_stats_sized() is for
 * gpool_get_stats() (docs/concepts/structs.md).
 *
 * @param pool        the pool.
 * @param[out] out    receives the statistics (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_stats.
 * @return a gpool_status, with the errors of gpool_calculate_stats(). Thread-safe; EXPENSIVE.
 */
GPOOL_API gpool_status gpool_calculate_stats_sized(gpool_t *pool, gpool_stats *out,
                                                   size_t struct_size);

/** Walks the pool for this header's gpool_stats (see gpool_calculate_stats_sized()). */
#define gpool_calculate_stats(pool, out)                                                           \
    gpool_calculate_stats_sized((pool), (out), sizeof(gpool_stats))

/**
 * Describe the live block that contains an address.
 *
 * A macro over gpool_get_block_desc_sized() in C; the function itself reads out->struct_size
 * (GPOOL_BLOCK_DESC_INIT) and writes only that many bytes (docs/concepts/structs.md).
 * Thread-safe. Cost: one lookup of the address (a lock of the block's kind), no driver call.
 *
 * @param pool the pool.
 * @param ptr  an address inside the block (not necessarily its start).
 * @param[in,out] out receives the description; struct_size is kept.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range (0
 *         included); *out is unchanged.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is NULL or not inside a live block of this pool.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_get_block_desc(gpool_t *pool, const void *ptr, gpool_block_desc *out);

/**
 * gpool_get_block_desc() for a struct of struct_size bytes, whatever out->struct_size holds:
 * sets out->struct_size, then fills it (docs/concepts/structs.md).
 *
 * @param pool        the pool.
 * @param ptr         an address inside the block.
 * @param[out] out    receives the description (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_block_desc.
 * @return a gpool_status, with the errors of gpool_get_block_desc(). Thread-safe; one lookup.
 */
GPOOL_API gpool_status gpool_get_block_desc_sized(gpool_t *pool, const void *ptr,
                                                  gpool_block_desc *out, size_t struct_size);

/** Describes a block for this header's gpool_block_desc (see gpool_get_block_desc_sized()). */
#define gpool_get_block_desc(pool, ptr, out)                                                       \
    gpool_get_block_desc_sized((pool), (ptr), (out), sizeof(gpool_block_desc))

/**
 * Deprecated name of gpool_get_block_desc() (0.1); removed in 0.3. A function, not a macro:
 * it reads out->struct_size as the function gpool_get_block_desc() does, except that 0 means
 * the 0.2 layout, so a zeroed gpool_block_desc still works.
 *
 * @param pool the pool.
 * @param ptr  an address inside the block.
 * @param[in,out] out receives the description.
 * @return a gpool_status, with the errors of gpool_get_block_desc(). Thread-safe; one lookup.
 */
GPOOL_API gpool_status gpool_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out)
    GPOOL_DEPRECATED("use gpool_get_block_desc");

/**
 * Free and total device memory as the application sees it: the driver's free memory plus
 * this pool's cached bytes (which the pool gives back when asked for more).
 * Thread-safe. Cost: one cuMemGetInfo and the device kind's running counters (no walk).
 *
 * @param pool the pool.
 * @param[out] free_bytes  receives the free bytes.
 * @param[out] total_bytes receives the device's total bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG a NULL argument.
 * @retval GPOOL_ERR_DRIVER cuMemGetInfo failed.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_mem_get_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes);

/**
 * The physical page (chunk) size gpool would back a block of this size with; gpool_alloc()
 * accepts it as params->page_size (docs/concepts/placement.md, "Page and chunk sizes").
 * Thread-safe. Cost: a table lookup; no lock, no driver call.
 *
 * @param pool the pool.
 * @param kind the memory kind; GPOOL_MEM_AUTO: the kind the policy picks for
 *             GPOOL_USAGE_DEFAULT.
 * @param size the block's size in bytes.
 * @param[out] out receives the page size in bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG a NULL argument or a bad kind.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_page_size(gpool_t *pool, gpool_mem_kind kind, size_t size,
                                       size_t *out);

/**
 * Write a JSON snapshot of the pool: its stats, every address range of every arena with its
 * state (in_use, slab, pending, cached, reserved or alias), and the host kinds' blocks and
 * placement.
 * The schema: docs/snapshot-json.md. Thread-safe. Cost: walks every range, under each kind's
 * lock.
 *
 * @param pool the pool.
 * @param f    an open stream to write to; the caller keeps it (not closed or flushed beyond
 *             the write).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or f is NULL.
 * @retval GPOOL_ERR_IO writing to f failed.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_dump_json(gpool_t *pool, FILE *f);

/**
 * Change which devices can reach the pool's device memory (gpool_config.peer_access) at run
 * time: every mapping the pool holds gets the new access at once (devices left out lose it),
 * and later mappings get it too (docs/concepts/placement.md, "Peer access").
 * Thread-safe. Cost: one cuMemSetAccess per mapped physical handle, under the device arena's
 * lock.
 *
 * @param pool        the pool.
 * @param peer_access a gpool_peer_access value (passed as an int: 0.2 callers that pass an
 *                    int are served alike).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL or peer_access is not a gpool_peer_access.
 * @retval GPOOL_ERR_UNSUPPORTED GPOOL_PEER_ALL and a device cannot reach the pool's device.
 * @retval GPOOL_ERR_OUT_OF_MEMORY no host memory for the new access list.
 * @retval GPOOL_ERR_DRIVER a driver call failed; the previous access was put back.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_set_peer_access(gpool_t *pool, gpool_peer_access peer_access);

/**
 * The size of the live device block that starts at ptr (gpool_get_block_desc()'s size field).
 * Thread-safe. Cost: as gpool_free()'s own lookup; no lock for a small block.
 *
 * @param pool the pool.
 * @param ptr  the block's address as gpool_alloc() returned it.
 * @param[out] size receives the block's size in bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or size is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not the start of a live device block of this pool.
 * @return a gpool_status as listed.
 */
GPOOL_API gpool_status gpool_block_size(gpool_t *pool, const void *ptr, size_t *size);

/* ---------- Sharing blocks with other processes (CUDA IPC; docs/ipc.md) ---------- */

/** GPOOL_IPC_MAGIC in a gpool_ipc_handle's first four bytes ("GPIH", little-endian). */
#define GPOOL_IPC_MAGIC 0x48495047u
/** The layout of gpool_ipc_handle this header describes. */
#define GPOOL_IPC_VERSION 1

/**
 * What another process needs to map one exported device block: plain bytes, 64 of them (the
 * size of CUDA's cudaIpcMemHandle_t), to be sent any way the processes like (a pipe, a
 * socket, shared memory). It names no file descriptor: the importer gets those from the
 * exporting process over a Unix-domain socket (SCM_RIGHTS) that a helper thread of the
 * exporting pool serves; the socket's abstract name comes from pid and token. Nothing in it
 * is a capability by itself: the exporter also checks the importer's user (SO_PEERCRED).
 */
typedef struct gpool_ipc_handle {
    uint32_t magic;      /**< GPOOL_IPC_MAGIC */
    uint16_t version;    /**< GPOOL_IPC_VERSION */
    uint16_t device;     /**< the exporting pool's device ordinal */
    uint32_t pid;        /**< the exporting process */
    uint32_t check;      /**< checksum of the other fields (a torn or altered handle) */
    uint64_t token;      /**< random, per exporting pool: names its socket */
    uint64_t export_id;  /**< the export, inside that pool */
    uint64_t secret;     /**< random, per export: a guessed export_id is not enough */
    uint64_t block_size; /**< the block's size (gpool_block_desc.size) */
    uint64_t offset;     /**< the exported pointer's offset from the block's start */
    uint64_t reserved;   /**< zero */
} gpool_ipc_handle;

/**
 * Share a live device block with other processes: fill *out with a handle that
 * gpool_import_block() in another process turns into a pointer to the same memory.
 *
 * The pool must have been created with gpool_config.ipc = 1 (GPOOL_CONF ipc=1): only then
 * are its device pages exportable. ptr may be anywhere inside the block; the importer gets
 * the same offset inside its mapping. A small block that shares its pages (a slab) exports
 * those pages: the importer maps them whole and can reach their other blocks too (the
 * driver shares pages, not bytes). The first export of a block exports its pages' file
 * descriptors (cuMemExportToShareableHandle, one per physical handle) and starts the pool's
 * helper thread if none runs; later exports of the same block reuse them.
 *
 * While any process has the block open, freeing it (gpool_free, gpool_free_async, or the
 * drop-in's cudaFree) succeeds but is deferred: its pages are not reused until the last
 * importer closed it or died (its socket closed); then the block is freed on the stream it
 * was freed on (that stream must still exist). Freeing it again meanwhile answers
 * GPOOL_ERR_INVALID_POINTER and changes nothing (it is freed once). A block freed with no
 * importer ends its export: handles made for it are stale from then on.
 *
 * Cost: the first export of a block takes one lookup under the device arena's lock,
 * O(physical handles of the pool), and one driver call per physical handle it spans; later
 * ones a lookup of the pool's exports. The helper thread costs one thread and one socket per
 * exporting pool, and one descriptor per open import.
 *
 * @param pool the exporting pool.
 * @param ptr  an address inside a live device block of the pool.
 * @param[out] out receives the handle.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool, ptr or out is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not inside a live device block of this pool.
 * @retval GPOOL_ERR_UNSUPPORTED the pool was created without ipc.
 * @retval GPOOL_ERR_DRIVER cuMemExportToShareableHandle failed (the message says why).
 * @retval GPOOL_ERR_IO the helper thread's socket could not be set up.
 * @retval GPOOL_ERR_OUT_OF_MEMORY out of host memory.
 * @return a gpool_status as listed; on error nothing is exported. Thread-safe.
 */
GPOOL_API gpool_status gpool_export_block(gpool_t *pool, const void *ptr, gpool_ipc_handle *out);

/**
 * Map a block another process exported (gpool_export_block()) into this process: *out
 * points at the exported address, reachable by the pool's device.
 *
 * Connects to the exporter's socket, receives the pages' file descriptors, imports them
 * (cuMemImportFromShareableHandle), maps them into fresh address space and gives the pool's
 * device read-write access. The connection stays open until gpool_close_imported(): it is
 * how the exporter knows the block is still used. The importing pool needs no ipc setting.
 * Order: the exporter's writes are visible once the work that made them completed (the
 * processes synchronize between them, as with CUDA IPC). A handle this pool already has open
 * (same export, same offset) maps nothing new: *out gets the same address and the import
 * counts one more open (as cuIpcOpenMemHandle does); each gpool_close_imported() drops one.
 *
 * Cost: one connection, one message each way (plus one per 200 physical handles), and per
 * physical handle an import, a map; one reservation and one cuMemSetAccess.
 *
 * @param pool   the importing pool (its device must be the exporter's).
 * @param handle the handle, as gpool_export_block() wrote it.
 * @param[out] out receives the address.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG a NULL argument; the handle is not a gpool handle, is of
 *         another version, was altered (its checksum), was exported by this same pool, or
 *         names another device.
 * @retval GPOOL_ERR_INVALID_POINTER stale: the exporting pool or process is gone, or the
 *         block was freed, or the exporter does not know the export (a forged handle).
 * @retval GPOOL_ERR_UNSUPPORTED the driver lacks cuMemImportFromShareableHandle.
 * @retval GPOOL_ERR_DRIVER a driver call failed.
 * @retval GPOOL_ERR_IO the exchange with the exporter failed.
 * @retval GPOOL_ERR_OUT_OF_MEMORY out of host memory.
 * @return a gpool_status as listed; on error nothing stays mapped, imported or open.
 *         Thread-safe.
 */
GPOOL_API gpool_status gpool_import_block(gpool_t *pool, const gpool_ipc_handle *handle,
                                          void **out);

/**
 * Unmap a block gpool_import_block() mapped and tell its exporter (the connection closes).
 * A block imported n times is unmapped by the n-th close; the earlier ones only count down.
 * Synchronizes the pool's context first (cuCtxSynchronize), so that no queued work of this
 * process still reads the memory when it is unmapped. The address must not be used after.
 *
 * Cost: a context synchronize, one unmap per physical handle, one address free.
 *
 * @param pool the pool that imported it.
 * @param ptr  the address gpool_import_block() gave.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or ptr is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not an open import of this pool (never imported,
 *         or already closed).
 * @retval GPOOL_ERR_DRIVER unmapping failed; the import stays open.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_close_imported(gpool_t *pool, void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* GPOOL_H */
