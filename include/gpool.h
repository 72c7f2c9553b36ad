/**
 * @file gpool.h
 * @brief gpool — a caching memory-pool allocator for NVIDIA GPUs over the CUDA driver API.
 *
 * This header is the whole public API. A pool (gpool_t) is bound to one CUDA device and hands
 * out blocks of three kinds of memory: device memory (vidmem, mapped through the driver's
 * virtual memory management), pinned host memory, and pinned host memory mapped into the
 * device (zero-copy). Freed blocks stay cached, so a repeated workload is served without
 * driver calls; when physical memory runs short the pool gives cached pages back and remaps
 * them where they are needed instead of failing.
 *
 * @par Errors
 * Every call returns a gpool_status; on failure gpool_last_error() holds a message that says
 * exactly what went wrong (thread-local, valid until the calling thread's next gpool call).
 * Out-pointers are set to NULL (or left unchanged, where a function says so) on failure.
 *
 * @par Thread-safety
 * Unless a function says otherwise it is thread-safe: any thread may call it on any pool.
 * gpool_destroy() is the exception: no other thread may use that pool meanwhile.
 *
 * @par fork()
 * A pool belongs to the process that created it. CUDA state does not survive fork() (the child
 * cannot use the parent's context; the driver answers CUDA_ERROR_NOT_INITIALIZED), so in a
 * child every call on a pool created before the fork -- alloc, free, destroy, trim, stats,
 * block queries, gpool_dump_json, gpool_mem_get_info -- returns GPOOL_ERR_DRIVER at once, its
 * message saying so, without waiting for a lock a thread of the parent held at fork and
 * without handing out or freeing a block (a child never gets a block the parent owns). The
 * parent is unaffected. Pools the child creates itself work as anywhere (where the driver lets
 * the child use CUDA: a child forked after CUDA initialised must exec first). Cost: one load
 * and compare per call; the fork handler only stores a number.
 *
 * @par Ownership
 * A block belongs to the pool that allocated it and must be freed through that pool
 * (gpool_free(), gpool_free_async()) or is freed by gpool_destroy(). The library never takes
 * ownership of caller memory (gpool_create() copies the configuration, trace_path included);
 * strings it returns or stores (gpool_config_parse()'s trace_path) are static, thread-local or
 * library-owned and must not be freed.
 *
 * @par The driver
 * The CUDA driver is loaded at run time (dlopen of libcuda.so.1, or the file named by the
 * GPOOL_LIBCUDA environment variable); nothing here needs cuda.h, and a program linked with
 * gpool starts on a machine without a GPU (gpool_create() then says so).
 *
 * @par Versioning
 * The library follows semantic versioning: the soname is libgpool.so.MAJOR, and
 * GPOOL_VERSION_MAJOR/MINOR/PATCH describe the header a program was compiled with, while
 * gpool_version() returns the version of the library it runs with. A program built with a
 * header of the same major version keeps working with a newer library. (Before 1.0 a minor
 * version may still break the ABI, as semantic versioning allows: 0.2.0 did, adding the
 * struct_size fields below, so a program built with 0.1 must be rebuilt.)
 *
 * @par Structs that grow
 * Every struct passed to or filled by a call (gpool_config, gpool_alloc_params, gpool_stats,
 * gpool_block_desc) starts with `size_t struct_size`: the size of the struct the caller was
 * compiled with. Set it with the initializer macros (GPOOL_CONFIG_INIT,
 * GPOOL_ALLOC_PARAMS_INIT, GPOOL_STATS_INIT, GPOOL_BLOCK_DESC_INIT), e.g.
 * `gpool_stats st = GPOOL_STATS_INIT;`; gpool_config_default() sets it too. The rules:
 * - a newer library reads and writes only the first struct_size bytes of a caller's (older,
 *   smaller) struct and uses the defaults for the fields the caller does not have;
 * - an older library given a newer, larger struct uses the fields it knows; the bytes beyond
 *   them must be zero in a struct it reads (else GPOOL_ERR_INVALID_ARG: the caller asked for
 *   something this library cannot do); in a struct it fills they are set to zero when the size
 *   came from the caller's header (the _sized calls and the macros below), and left as they
 *   are when the library read struct_size from the struct itself (it never writes past its
 *   own sizeof on the strength of a size read from memory that may be uninitialised);
 * - the getters and gpool_config_default() are macros in C that pass sizeof as this header
 *   declares it (gpool_get_stats_sized() and the other _sized calls), so the common
 *   `gpool_stats st; gpool_get_stats(pool, &st);` needs no initializer;
 * - struct_size below sizeof(size_t) (the struct_size field alone), or above 65536, is
 *   GPOOL_ERR_INVALID_ARG and gpool_last_error() names the struct and its macro. The one
 *   exception: struct_size 0 in a gpool_alloc_params means the 0.2 layout, so a
 *   zero-initialised gpool_alloc_params (or a NULL pointer) still means the defaults; and
 *   gpool_config_default() and gpool_config_parse() take struct_size 0 as the 0.2 layout
 *   too (and set it), so a zeroed gpool_config can be filled by gpool_config_default();
 * - structs only grow at the end: a new field is added after every existing one, at an offset
 *   at or beyond the previous sizeof (so an older struct's trailing padding never becomes a
 *   field), and fields are never removed, moved or resized within a major version. Arrays
 *   bounded by an enum count are sized GPOOL_MEM_KIND_SLOTS or GPOOL_DRV_SLOTS, which leave
 *   room for new kinds and counters (unused entries read 0); gpool_kind_stats, an array
 *   element, never grows (new per-kind counters would come as a new array at the end of
 *   gpool_stats).
 *
 * @par Deprecated names
 * A call that fills a struct from a pool is named gpool_get_<struct> (gpool_get_stats() fills
 * a gpool_stats, gpool_get_block_desc() a gpool_block_desc; gpool_calculate_stats() is the
 * walking variant); a call that works on a struct alone is gpool_<struct>_<verb>
 * (gpool_config_default(), gpool_config_parse()); each struct's initializer is
 * GPOOL_<STRUCT>_INIT. Old names stay exported, marked
 * GPOOL_DEPRECATED, for one minor version: gpool_block_info() (use gpool_get_block_desc();
 * removed in 0.3).
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
 * - gpool_free() / gpool_free_async() give them back; a block freed on a stream is reusable
 *   on that stream at once and elsewhere once the stream's work is done. The stream passed
 *   must belong to the CUDA context current on the calling thread;
 * - gpool_get_stats(), gpool_dump_json() (schema: docs/snapshot-json.md) and gpool_trim()
 *   show and manage what the pool holds; gpool_last_error() says why a call failed.
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
 * from a pool (see the README). The file reference for gpool.h lists every function, its
 * errors and its thread-safety.
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
#define GPOOL_VERSION_MINOR 2
/** Patch version of this header: incremented for compatible fixes. */
#define GPOOL_VERSION_PATCH 1

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

/** Where a block lives. Chosen per request in gpool_alloc_params.kind. */
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

/** How the caller will use a block, in the spirit of Vulkan Memory Allocator's usage values.
 *  With GPOOL_MEM_AUTO the placement policy turns the hint into a kind through one table:
 *  GPU-only and default data go to vidmem, upload / multi-GPU / large-dataset data to mapped
 *  sysmem, readback and staging buffers to pinned sysmem. */
typedef enum gpool_usage {
    GPOOL_USAGE_DEFAULT = 0,       /**< no hint: device memory */
    GPOOL_USAGE_GPU_ONLY = 1,      /**< hot data touched only by kernels */
    GPOOL_USAGE_UPLOAD = 2,        /**< CPU writes, GPU reads once */
    GPOOL_USAGE_READBACK = 3,      /**< GPU writes, CPU reads */
    GPOOL_USAGE_STAGING = 4,       /**< source or target of async copies */
    GPOOL_USAGE_MULTI_GPU = 5,     /**< shared by several GPUs */
    GPOOL_USAGE_LARGE_DATASET = 6, /**< larger than the device should hold */
    GPOOL_USAGE_COUNT = 7          /**< number of hints (array bound, not a hint) */
} gpool_usage;

/** Allocation flags for gpool_alloc_params.flags (bitwise or). */
enum {
    GPOOL_ALLOC_ZERO = 1u << 0,           /**< fill the block with zero bytes */
    GPOOL_ALLOC_ALLOW_FALLBACK = 1u << 1, /**< AUTO may use mapped sysmem when vidmem is full */
    GPOOL_ALLOC_STREAM_WAIT = 1u << 2,    /**< reuse blocks pending on other streams by making
                                               the allocating stream wait on their event */
    GPOOL_ALLOC_NO_STREAM_WAIT = 1u << 3, /**< never make the allocating stream wait for another
                                               stream's work (gpool_config.stream_reuse = wait's
                                               hand-over is skipped): memory other streams freed
                                               comes only once an event shows their work done.
                                               For a block the caller may use on any stream at
                                               once, as cudaMalloc's; with STREAM_WAIT:
                                               GPOOL_ERR_INVALID_ARG */
};

/** Per-request parameters for gpool_alloc() and gpool_alloc_async(). Zero-initialised (or a
 *  NULL pointer) means: device memory, default alignment (256 bytes), automatic page size,
 *  the pool's default stream. The struct is read during the call only. Initialise it with
 *  GPOOL_ALLOC_PARAMS_INIT (struct_size 0 is taken as the 0.2 layout; see "Structs that
 *  grow"). */
typedef struct gpool_alloc_params {
    size_t struct_size;    /**< sizeof the caller's struct (GPOOL_ALLOC_PARAMS_INIT sets it);
                                0 = the 0.2 layout */
    gpool_mem_kind kind;   /**< where the block lives; GPOOL_MEM_AUTO: chosen from usage */
    gpool_usage usage;     /**< how the block is used; decides the kind for GPOOL_MEM_AUTO and
                                is reported back by gpool_get_block_desc() */
    size_t alignment;      /**< power of two, at most the page size; 0 = 256 */
    size_t page_size;      /**< 0 = automatic. Host kinds: 4096 or 2 MiB, used as asked.
                                Device: the granularity, or the chunk size gpool backs a
                                block of this size with (gpool_page_size()); any other
                                multiple of the granularity is refused (UNSUPPORTED) */
    unsigned flags;        /**< GPOOL_ALLOC_* */
    gpool_stream_t stream; /**< stream for gpool_alloc (gpool_alloc_async overrides it) */
} gpool_alloc_params;

/** Initializer for a gpool_alloc_params: struct_size set, everything else the defaults.
 *  `gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;` */
#define GPOOL_ALLOC_PARAMS_INIT                                                                    \
    {                                                                                              \
        .struct_size = sizeof(gpool_alloc_params)                                                  \
    }

/** Pool configuration. Start from GPOOL_CONFIG_INIT (or gpool_config_default());
 *  gpool_config_parse() applies a "key=value,key=value" string (the GPOOL_CONF syntax).
 *  gpool_create() copies it, trace_path's string included. */
typedef struct gpool_config {
    /** sizeof the caller's struct (GPOOL_CONFIG_INIT and gpool_config_default() set it). */
    size_t struct_size;
    /** CUDA device ordinal (default 0). */
    int device;
    /** When non-zero: after a large block is freed, if the pool caches more than this many
     *  bytes of physical memory beyond what live blocks use, it gives the excess back to the
     *  driver (like gpool_trim(pool, release_threshold)). 0 (default): keep everything
     *  cached; memory is released only under memory pressure or by gpool_trim. */
    size_t release_threshold;
    /** Per-thread cache bound in bytes (default 1 MiB; 0 = off). */
    size_t tcache_bytes;
    /** Largest request served from small size classes (default 16 KiB). */
    size_t small_max;
    /** Per-kind byte budget, indexed by gpool_mem_kind; 0 = no limit. Every allocation of the
     *  kind is admitted against it, whichever path serves it; blocks parked in thread caches
     *  count as in use (a cache takes only what the budget admits, and gives its blocks back
     *  before a request is refused). */
    size_t budget[GPOOL_MEM_KIND_SLOTS];
    /** Bytes of virtual address space per reservation (0 = 2 x device memory, at least 8 GiB;
     *  otherwise at least 64 MiB). */
    size_t va_reserve;
    /** 1 = print OOM and leak reports on stderr. */
    int verbose;
    /** Stream used by gpool_alloc and gpool_free (default NULL, the legacy stream). */
    gpool_stream_t default_stream;
    /** If not NULL (nor ""), log every alloc/free as RMM replay CSV to this file (else the
     *  GPOOL_TRACE environment variable names it). The file is appended to (O_APPEND), one
     *  write() per complete row, the header once when the file is empty: several pools,
     *  processes and forked children may share one path without losing, tearing or
     *  duplicating a row; remove the file before a new recording. "%p" in the path is
     *  replaced by the process id (one file per process). docs/tracing.md. The string
     *  is the caller's (gpool_create() copies it), or the library's when gpool_config_parse()
     *  set it (kept until the library is unloaded; never free it). */
    const char *trace_path;
    /** Which devices get access to the pool's device memory (gpool_peer_access; GPOOL_CONF
     *  key peer_access=auto|none|all). VMM memory is reachable only by the devices named in
     *  cuMemSetAccess -- peer access enabled between contexts does not extend to it -- so a
     *  block another GPU must read needs this. Applied to every mapping the pool makes;
     *  gpool_set_peer_access() changes it later, existing mappings included. */
    int peer_access;
    /** Not used: it covers the 0.2.0 layout's tail padding, so that fields added since start
     *  beyond a 0.2.0 caller's struct_size and are never read from its padding bytes. */
    int reserved0;
    /** May a request make its stream wait for another stream's frees (gpool_stream_reuse;
     *  GPOOL_CONF key stream_reuse=wait|events)? Default GPOOL_STREAM_REUSE_WAIT: when the best
     *  place for a request is memory another stream freed and its work may still use, and
     *  taking it spares mapping fresh memory (now, or later: the request's own place would be
     *  the frontier, the free memory next to unmapped address space), the requesting stream
     *  waits for an event recorded
     *  after that free (cuStreamWaitEvent) and reuses it, as cuMemAllocAsync does by default
     *  (CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES). GPOOL_STREAM_REUSE_EVENTS: gpool
     *  never adds a dependency between streams on its own; another stream's freed memory is
     *  reused once an event shows its work done (PyTorch's caching allocator's rule).
     *  Since 0.2.1: a caller built against 0.2.0 gets the default. */
    int stream_reuse;
    /** Not used: it covers the 0.2.1 layout's tail padding (as reserved0 does for 0.2.0). */
    int reserved1;
    /** 1: device pages are created exportable (requestedHandleTypes =
     *  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), so that gpool_export_block() can share a
     *  block with another process (GPOOL_CONF key ipc=0|1; docs/ipc.md). 0 (default): not
     *  exportable, gpool_export_block() answers GPOOL_ERR_UNSUPPORTED. Importing needs no
     *  ipc. Since 0.2.2: a caller built against an older gpool.h gets 0. */
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

/** Values of gpool_config.stream_reuse. */
typedef enum gpool_stream_reuse {
    GPOOL_STREAM_REUSE_WAIT = 0,  /**< a stream may wait for another's frees to reuse them */
    GPOOL_STREAM_REUSE_EVENTS = 1 /**< only frees whose work is known done cross streams */
} gpool_stream_reuse;

/** Values of gpool_config.peer_access. */
typedef enum gpool_peer_access {
    GPOOL_PEER_AUTO = 0, /**< the pool's device plus every device cuDeviceCanAccessPeer allows */
    GPOOL_PEER_NONE = 1, /**< the pool's device only */
    GPOOL_PEER_ALL = 2   /**< every device; gpool_create fails if one cannot reach this one */
} gpool_peer_access;

/** Counters for one memory kind. Bytes "in use" are rounded block sizes; "requested" are the
 *  sizes callers asked for; "reserved" is physical memory mapped; "cached" is reserved memory
 *  not holding a live block. Peaks are high-water marks since the pool was created. Only an
 *  element of gpool_stats.kind, so it has no struct_size and never grows within a major
 *  version. */
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

/** A snapshot of a pool's counters, filled by gpool_get_stats(). kind[GPOOL_MEM_AUTO] holds
 *  the totals over all kinds. Initialise it with GPOOL_STATS_INIT; new counters are only ever
 *  appended at the end (see "Structs that grow"). */
typedef struct gpool_stats {
    size_t struct_size; /**< sizeof the caller's struct (GPOOL_STATS_INIT sets it); kept */
    gpool_kind_stats kind[GPOOL_MEM_KIND_SLOTS]; /**< per kind; [GPOOL_MEM_AUTO] = totals */
    uint64_t driver_calls[GPOOL_DRV_SLOTS];      /**< driver calls made, by gpool_driver_call */
    uint64_t driver_calls_total; /**< sum of driver_calls: 0 growth means a steady state
                                      served entirely from the cache */
    uint64_t oom_retries;        /**< times the allocator released cache and tried again */
    uint64_t ooms;               /**< allocations that failed with GPOOL_ERR_OUT_OF_MEMORY */
    uint64_t fallbacks;      /**< AUTO requests placed in mapped sysmem because vidmem was full */
    uint64_t pages_remapped; /**< physical pages moved from one address range to another */
    uint64_t tcache_hits;    /**< allocations served from a thread cache */
    uint64_t pending_frees;  /**< blocks now waiting on a stream's work (host blocks: on the
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
    int fell_back;         /**< 1 if AUTO placed it in sysmem because vidmem was full */
} gpool_block_desc;

/** Initializer for a gpool_block_desc: struct_size set, everything else 0.
 *  `gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;` */
#define GPOOL_BLOCK_DESC_INIT                                                                      \
    {                                                                                              \
        .struct_size = sizeof(gpool_block_desc)                                                    \
    }

/**
 * The version of the library in use, as "MAJOR.MINOR.PATCH".
 *
 * It may differ from the GPOOL_VERSION_* macros a program was compiled with, when it runs
 * with a newer libgpool.so of the same major version.
 *
 * @return a static string (never NULL; do not free). Thread-safe; never fails.
 */
GPOOL_API const char *gpool_version(void);

/**
 * A static, human-readable name for a status code ("out of memory", ...).
 *
 * @param status any value, including ones outside gpool_status ("unknown status").
 * @return a static string, never NULL; do not free. Thread-safe.
 */
GPOOL_API const char *gpool_strerror(gpool_status status);

/**
 * The detail message of the calling thread's last failed gpool call.
 *
 * The message names the call and the cause (for example the driver entry point and its
 * error, or the requested, free and cached bytes of an out-of-memory failure).
 *
 * @return the message, or "" if no call has failed on this thread. The string is
 *         thread-local, owned by the library, and valid until this thread's next gpool call.
 */
GPOOL_API const char *gpool_last_error(void);

/**
 * The name of a driver-call counter of gpool_stats.driver_calls ("cuMemCreate", ...).
 *
 * @param call a gpool_driver_call below GPOOL_DRV_COUNT.
 * @return a static string, or NULL when call is out of range. Thread-safe.
 */
GPOOL_API const char *gpool_driver_call_name(gpool_driver_call call);

/**
 * Fill a configuration with the defaults: device 0, 1 MiB thread caches, 16 KiB small
 * requests, no budgets, automatic address-space reservation, no trace, the legacy stream.
 * GPOOL_CONFIG_INIT gives the same values without a call.
 *
 * In C, gpool_config_default(cfg) is a macro that calls gpool_config_default_sized() with
 * sizeof(gpool_config) as this header declares it, so `gpool_config cfg;
 * gpool_config_default(&cfg);` fills an uninitialised struct correctly, struct_size included.
 * The function itself (called as `(gpool_config_default)(cfg)`, or through a binding such as
 * Python's ctypes) reads cfg->struct_size instead: only the first struct_size bytes are
 * written and struct_size is kept; 0 is taken as the 0.2 layout (and then set to it).
 *
 * @param[in,out] cfg the configuration to fill.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG cfg is NULL or cfg->struct_size is out of range (see
 *         "Structs that grow"); *cfg is unchanged.
 * @return a gpool_status as listed. Thread-safe (touches only *cfg); no allocation.
 */
GPOOL_API gpool_status gpool_config_default(gpool_config *cfg);

/**
 * gpool_config_default() for a struct of struct_size bytes, whatever cfg->struct_size holds:
 * sets cfg->struct_size to struct_size, then fills the defaults as gpool_config_default()
 * does. The gpool_config_default(cfg) macro calls it with sizeof(gpool_config).
 *
 * @param[out] cfg         the configuration to fill (its first struct_size bytes).
 * @param      struct_size sizeof the caller's gpool_config.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG cfg is NULL or struct_size is out of range (see "Structs that
 *         grow"); *cfg is unchanged.
 * @return a gpool_status as listed. Thread-safe (touches only *cfg); no allocation.
 */
GPOOL_API gpool_status gpool_config_default_sized(gpool_config *cfg, size_t struct_size);

/** Fills *cfg with the defaults for this header's gpool_config (see gpool_config_default()). */
#define gpool_config_default(cfg) gpool_config_default_sized((cfg), sizeof(gpool_config))

/**
 * Apply a "key=value,key=value" string (the GPOOL_CONF syntax) to a configuration.
 *
 * Keys: device, release_threshold, tcache_bytes, small_max, budget_device, budget_pinned,
 * budget_mapped, va_reserve, verbose (0 or 1), trace (a file path), peer_access (auto, none or
 * all), stream_reuse (wait or events). Spaces and tabs around keys and values are ignored, as are
 * empty items. The LD_PRELOAD interposer's keys (disable, sync_free, cudafree, cudafree_batch,
 * cudafree_flush) are accepted, their values checked as the interposer checks them, and
 * otherwise ignored, so one GPOOL_CONF serves a process that has both. Any other key is an
 * error.
 *
 * Sizes: decimal digits, then optionally a unit -- K, M, G or T, each optionally followed by B
 * or iB, or B alone -- case-insensitive, nothing else (no sign, fraction, space or hex). Units
 * are powers of 1024 in every spelling: 64K, 64KiB and 64KB all mean 65536 bytes. A value that
 * does not fit in 64 bits is an error. The LD_PRELOAD interposer and gpool-bench read sizes
 * the same way.
 *
 * trace=PATH sets cfg->trace_path to a library-owned copy of PATH: never free it; it stays
 * valid until the library is unloaded (its destructor frees it). Equal paths share one copy,
 * so parsing the same string again does not grow memory. trace= (empty) clears it.
 *
 * Reads and writes only the first cfg->struct_size bytes (0 = the 0.2 layout); a key whose
 * field lies beyond them (a struct from an older header) is GPOOL_ERR_CONFIG.
 *
 * @param[in,out] cfg  the configuration to change; unchanged on error.
 * @param[in]     conf the string; "" changes nothing.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG cfg or conf is NULL, or cfg->struct_size is out of range.
 * @retval GPOOL_ERR_CONFIG an unknown key or bad value; the message names it.
 * @retval GPOOL_ERR_OUT_OF_MEMORY no host memory to copy a trace path.
 * @return a gpool_status as listed. Thread-safe (touches only *cfg and the library's table of
 *         trace paths, under a lock). Cost: linear in the string's length.
 */
GPOOL_API gpool_status gpool_config_parse(gpool_config *cfg, const char *conf);

/**
 * Create a pool on one device.
 *
 * Loads the driver on first use and retains the device's primary context (sharing it with a
 * framework that already made it; the pool releases it when destroyed). No memory is taken
 * from the device until the first allocation.
 *
 * @param[in]  cfg the configuration, or NULL for the defaults followed by the GPOOL_CONF
 *                 environment variable. Copied (its first cfg->struct_size bytes; fields
 *                 beyond them take their defaults), and so is the trace_path string: the
 *                 caller may free or reuse both once the call returns.
 * @param[out] out receives the new pool, owned by the caller until gpool_destroy(); NULL on
 *                 error.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG out is NULL; or cfg->struct_size is out of range (0
 *         included; the message names gpool_config and GPOOL_CONFIG_INIT); or cfg is larger
 *         than this library's gpool_config with non-zero bytes beyond it (a field this
 *         library lacks is set).
 * @retval GPOOL_ERR_NO_DRIVER the driver library could not be loaded or lacks an entry point.
 * @retval GPOOL_ERR_NO_DEVICE no CUDA device, or cfg->device is absent.
 * @retval GPOOL_ERR_UNSUPPORTED the device has no virtual memory management (VMM).
 * @retval GPOOL_ERR_CONFIG a bad configuration value (or GPOOL_CONF string).
 * @retval GPOOL_ERR_DRIVER a driver call failed; the message names it.
 * @retval GPOOL_ERR_OUT_OF_MEMORY host memory for the pool's bookkeeping ran out, or the
 *         device address space (cfg->va_reserve, reserved here) cannot be reserved.
 * @retval GPOOL_ERR_IO the trace file (cfg->trace_path or GPOOL_TRACE) cannot be written.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_create(const gpool_config *cfg, gpool_t **out);

/**
 * Destroy a pool and give all its memory back to the driver.
 *
 * Waits for the work queued on the pool's context (cuCtxSynchronize, tried twice) and for
 * pending stream-ordered frees. Blocks still live are freed too and reported: the message gives
 * their count and bytes (also printed on stderr when verbose). Every pointer the pool handed
 * out is invalid afterwards.
 *
 * @param pool the pool; it is freed even when live blocks or a failure are reported.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_DRIVER the synchronize failed twice; the memory was given back anyway, without
 *         knowing the queued work done (the message names the call).
 * @retval GPOOL_ERR_LIVE_BLOCKS live blocks were found (and freed).
 * @return a gpool_status as listed. Not thread-safe for this pool: no other thread may use
 *         it meanwhile.
 */
GPOOL_API gpool_status gpool_destroy(gpool_t *pool);

/**
 * Allocate a block.
 *
 * The block is ordered on params->stream (or the pool's default stream). It is served from
 * the pool's cache when possible; otherwise pages are mapped, and when the driver has none
 * left the pool waits for pending frees, releases cached pages and tries again before
 * failing.
 *
 * @param pool   the pool.
 * @param size   bytes to allocate; 0 returns GPOOL_OK with *out = NULL.
 * @param params kind, usage hint, alignment, page size, flags, stream; NULL = defaults
 *               (device memory). Read during the call only: its first params->struct_size
 *               bytes (0 = the 0.2 layout); fields beyond them take their defaults.
 * @param[out] out receives the address: a device address for DEVICE and HOST_MAPPED, the
 *                 host address for HOST_PINNED (gpool_get_block_desc() gives both). The block
 *                 belongs to pool until freed. NULL on error.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG NULL pool or out, bad params (params->struct_size out of
 *         range included), size beyond what any device could hold.
 * @retval GPOOL_ERR_OUT_OF_MEMORY after releasing cached memory (this pool's, then that of
 *         the process's other pools on the device) and retrying; the message says requested,
 *         free and cached bytes and the cause (live blocks, pages or chunks pinned by live
 *         blocks, other users of the device, address space, or a driver call that failed
 *         while memory was given back). A request of more pages than the device has is
 *         refused at once, without driver calls.
 *
 * @par When it must succeed
 * With P the device granularity, C the largest chunk (in pages) any device block of the
 * process's pools on this device was backed with (1 until a block of 64 MiB or more was
 * allocated; see gpool_page_size()), and no driver call failing during the call: a device
 * allocation of S bytes succeeds whenever
 *     capacity/P - (pages other users of the device hold)
 *       - sum over live device blocks of all pools of the process on the device of
 *           (ceil(size/P) + 1 + 2 (C - 1))
 *       - (pools of the process on the device) x G
 *     >= ceil(S/P) + 1.
 * Each live block pins the pages it touches (ceil(size/P) + 1 at most) and, where chunks
 * back them, the rest of the first and last chunk (a chunk goes back to the driver only
 * whole). G is what a pool's cold-start growth may pin: on a device of 4 GiB or more, a pool
 * without a release threshold backs its first allocations with handles of up to 32 pages,
 * holding at most capacity/(4P) pages in them (0 on a smaller device; see src/vidmem.h).
 * Cached memory of any pool of the process never counts: it is given back first.
 * tests/util_model.c states this rule executably and tests/test_model.c checks it.
 * @retval GPOOL_ERR_UNSUPPORTED the kind is not available on this device or driver; a
 *         device page_size gpool does not back blocks of this size with; or the stream is
 *         capturing a CUDA graph and the request would need driver calls (see
 *         gpool_alloc_async()).
 * @retval GPOOL_ERR_DRIVER a driver call failed.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_alloc(gpool_t *pool, size_t size, const gpool_alloc_params *params,
                                   void **out);

/**
 * As gpool_alloc(), ordered on an explicit stream.
 *
 * The block may be one freed on this stream whose work has not finished yet (stream order
 * makes that safe), or one pending on another stream only once this stream waits for that
 * work: always with GPOOL_ALLOC_STREAM_WAIT, and (gpool_config.stream_reuse = wait, the
 * default; never with GPOOL_ALLOC_NO_STREAM_WAIT) when that block is the best place for the request
 * and spares mapping fresh memory, now or later (the place of the stream's own would be the
 * frontier: the free memory next to unmapped address space); the stream then waits on an event
 * recorded after the free (cuStreamWaitEvent). With stream_reuse = events and no flag, never a
 * block whose other stream's work may still run.
 *
 * CU_STREAM_PER_THREAD names the calling thread's per-thread default stream: a block freed on
 * it by one thread is reused at once by that thread only, by others once its work completed.
 *
 * Graph capture: on a stream that is capturing (cuStreamIsCapturing), gpool makes none of the
 * calls the capture prohibits. A device block is served only from memory already free for that
 * stream (mapped, free, not pending on another stream's work; the stream's own frees count, so
 * launch the graph on that stream or after it); a request that would need driver calls (fresh
 * pages, polling other streams, waiting) fails with GPOOL_ERR_UNSUPPORTED and a message naming
 * the capture, and the capture stays valid. Host kinds on a capturing stream always fail that
 * way. GPOOL_ALLOC_ZERO is captured as a memset node (cuMemsetD8Async on the stream).
 *
 * @param pool   the pool.
 * @param size   bytes to allocate; 0 returns GPOOL_OK with *out = NULL.
 * @param params as for gpool_alloc(); its stream field is ignored. NULL = defaults.
 * @param stream the stream the block will be used on first.
 * @param[out] out receives the address, as for gpool_alloc(); NULL on error.
 * @return a gpool_status, with the errors of gpool_alloc(). Thread-safe.
 */
GPOOL_API gpool_status gpool_alloc_async(gpool_t *pool, size_t size,
                                         const gpool_alloc_params *params, gpool_stream_t stream,
                                         void **out);

/**
 * Free a block on the pool's default stream.
 *
 * The memory goes back to the pool's cache (not to the driver): reusable at once on the
 * default stream, on other streams once the work queued so far is done (host blocks: on every
 * stream only then, see gpool_free_async()). A block allocated on
 * another stream (gpool_alloc_async()) also waits for the work queued on that stream, as
 * gpool_free_async() describes.
 *
 * @param pool the pool that allocated the block.
 * @param ptr  the address gpool_alloc() returned; NULL is a no-op (GPOOL_OK).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr was not handed out by this pool, or was already
 *         freed; nothing changes.
 * @retval GPOOL_ERR_DRIVER the block was freed, but giving memory back afterwards
 *         (gpool_config.release_threshold) met a failed driver call; the message names it.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_free(gpool_t *pool, void *ptr);

/**
 * Free a block once the work queued on a stream so far is done.
 *
 * It is reused at once by allocations on that stream, by others only after an event
 * recorded on the stream later has completed (events are recorded only when another stream
 * needs the memory; a single-stream workload records none). Host blocks are reused, on any
 * stream, only once that work is done; their free makes no driver call: the pool records one
 * event per stream for many waiting host frees (when 256 of them or 8 MiB wait, or a request
 * that would otherwise need fresh memory finds 16 or 4 MiB of its kind waiting; a request its
 * budget refuses asks at once), so freed host memory may stay reserved a little longer;
 * gpool_trim() finishes them. A device block freed on another stream than it was
 * allocated on also waits for the work queued so far on the allocating stream (the pool may
 * have handed it out while that stream's earlier work on the memory was still queued), so
 * that stream must still exist then. Before destroying the stream, call
 * gpool_stream_release(): gpool would otherwise record events on it later.
 *
 * @param pool   the pool that allocated the block.
 * @param ptr    the block's address; NULL is a no-op (GPOOL_OK).
 * @param stream the stream whose queued work may still use the block.
 * @return a gpool_status, with the errors of gpool_free(). Thread-safe.
 */
GPOOL_API gpool_status gpool_free_async(gpool_t *pool, void *ptr, gpool_stream_t stream);

/**
 * Mark that another stream also used a block (as PyTorch's record_stream): its free then
 * waits for the work queued on that stream too.
 *
 * @param pool   the pool that allocated the block.
 * @param ptr    the block's address.
 * @param stream the other stream.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not a live block of this pool.
 * @retval GPOOL_ERR_DRIVER recording the stream's event failed.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_record_stream(gpool_t *pool, void *ptr, gpool_stream_t stream);

/**
 * Tell the pool that a stream is about to be destroyed: call it before cuStreamDestroy() /
 * cudaStreamDestroy() of every stream the pool has seen (the drop-in does, for every pool of
 * every device, in its cuStreamDestroy hook).
 *
 * What is pending on the stream -- its freed blocks, reusable by other streams only once its
 * work queued so far completes -- moves onto an event recorded on the stream now (the device
 * may still be working on it: cuStreamDestroy returns at once and frees the stream's resources
 * once that work has completed, so the event is legal and completes then). The pool drops its
 * record of the stream, so no later driver call names it, and a new stream that gets the same
 * handle value starts with nothing of the old one's. Its cached memory goes back to the shared
 * cache: every stream may reuse it once the event completed. Memory stays flat across any
 * number of create/use/destroy cycles.
 *
 * Call it after the stream's last gpool_free_async() and before the destroy. A block allocated
 * on the stream and still live may be freed later on another stream: its free then waits for
 * the event recorded here instead of the allocating stream (while the 256 latest released
 * streams are remembered; for a stream the pool holds no record of -- nothing freed on it --
 * the free still names the allocating stream: free such blocks before the release).
 *
 * @param pool   the pool.
 * @param stream the stream about to be destroyed; one the pool never saw is fine (nothing to
 *               do but the event).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL, or stream is NULL, CU_STREAM_LEGACY,
 *         CU_STREAM_PER_THREAD (never destroyed) or the pool's default stream
 *         (gpool_config.default_stream: destroy the pool first).
 * @retval GPOOL_ERR_DRIVER no event could be recorded on the stream (it is of another context,
 *         or capturing) and waiting for it (cuStreamSynchronize) failed: the stream's frees
 *         stay pending until the pool next synchronizes the device (memory pressure,
 *         gpool_trim()); the stream may still be destroyed.
 * @return a gpool_status as listed. Thread-safe (with the pool's other calls; not with calls
 *         that still use the stream).
 * Cost: one cuEventRecord (cuEventCreate the first time a spare is missing), or one
 * cuStreamSynchronize for another context's stream, plus a walk of the pool's pending free
 * ranges and stream records; under the device arena's lock.
 */
GPOOL_API gpool_status gpool_stream_release(gpool_t *pool, gpool_stream_t stream);

/**
 * Give cached physical memory back to the driver until at most keep_bytes stay cached.
 *
 * Waits for pending frees first (a context synchronize). Live blocks are not touched. If
 * the synchronize fails nothing mapped is unmapped (queued work may still use any cached
 * page); unmapped cached pages are still released.
 *
 * @param pool       the pool.
 * @param keep_bytes cached bytes to keep (0: release everything that holds no live block).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL.
 * @retval GPOOL_ERR_DRIVER a driver call failed (the synchronize, an unmap, a release, a host
 *         unregister); the message names it. The memory concerned stays cached and a later
 *         trim, allocation or gpool_destroy tries again.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_trim(gpool_t *pool, size_t keep_bytes);

/**
 * Copy the pool's counters.
 *
 * Cheap at any heap size: it reads running counters (the cost grows with the number of
 * threads that allocated from the pool, not with the number of blocks), and holds each
 * internal lock only to copy a few counters, so it may be called often.
 *
 * @param pool the pool.
 * @param[in,out] out receives the snapshot (consistent per kind; counters of different kinds
 *                 may be taken at slightly different moments while other threads allocate).
 *                 out->struct_size must be set (GPOOL_STATS_INIT): only that many bytes are
 *                 written, and struct_size is kept.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range (0
 *         included); *out is unchanged.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_get_stats(gpool_t *pool, gpool_stats *out);

/**
 * gpool_get_stats() for a struct of struct_size bytes, whatever out->struct_size holds: sets
 * out->struct_size to struct_size, then fills it. In C, gpool_get_stats(pool, out) is a macro
 * that calls this with sizeof(gpool_stats) as this header declares it, so an uninitialised
 * `gpool_stats st;` is filled correctly; the function (`(gpool_get_stats)(pool, out)`, or a
 * binding) reads out->struct_size instead.
 *
 * @param pool        the pool.
 * @param[out] out    receives the snapshot (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_stats.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or struct_size is out of range.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_get_stats_sized(gpool_t *pool, gpool_stats *out, size_t struct_size);

/** Fills *out for this header's gpool_stats (see gpool_get_stats_sized()). */
#define gpool_get_stats(pool, out) gpool_get_stats_sized((pool), (out), sizeof(gpool_stats))

/**
 * Compute the pool's statistics by walking its blocks: as gpool_get_stats(), except that the
 * requested bytes of small blocks are summed slot by slot over every slab instead of taken
 * from running counters. For checks and debugging (it must equal gpool_get_stats() whenever
 * no other thread allocates or frees meanwhile).
 *
 * EXPENSIVE: its cost grows with the heap (every slab's slots are visited, about a
 * millisecond per 10^5 small blocks), and it holds each memory kind's lock for the whole
 * walk, stalling every thread that allocates from that kind meanwhile. Do not call it on a
 * hot path; gpool_get_stats() and gpool_mem_get_info() are the cheap calls.
 *
 * @param pool the pool.
 * @param[in,out] out receives the statistics; out->struct_size as for gpool_get_stats().
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_calculate_stats(gpool_t *pool, gpool_stats *out);

/**
 * gpool_calculate_stats() for a struct of struct_size bytes, as gpool_get_stats_sized() is
 * for gpool_get_stats(); the gpool_calculate_stats(pool, out) macro passes sizeof(gpool_stats).
 * EXPENSIVE, as gpool_calculate_stats().
 *
 * @param pool        the pool.
 * @param[out] out    receives the statistics (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_stats.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or struct_size is out of range.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_calculate_stats_sized(gpool_t *pool, gpool_stats *out,
                                                   size_t struct_size);

/** Walks the pool for this header's gpool_stats (see gpool_calculate_stats_sized()). */
#define gpool_calculate_stats(pool, out)                                                           \
    gpool_calculate_stats_sized((pool), (out), sizeof(gpool_stats))

/**
 * Describe the live block that contains an address.
 *
 * Cost: one lookup of the address (a lock of the block's memory kind), no driver call.
 *
 * @param pool the pool.
 * @param ptr  an address inside the block (not necessarily its start).
 * @param[in,out] out receives the description. out->struct_size must be set
 *                (GPOOL_BLOCK_DESC_INIT): only that many bytes are written, and struct_size
 *                is kept.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or out->struct_size is out of range (0
 *         included); *out is unchanged.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not inside a live block of this pool.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_get_block_desc(gpool_t *pool, const void *ptr, gpool_block_desc *out);

/**
 * gpool_get_block_desc() for a struct of struct_size bytes, whatever out->struct_size holds:
 * sets out->struct_size to struct_size, then fills it. The gpool_get_block_desc(pool, ptr,
 * out) macro calls this with sizeof(gpool_block_desc), so an uninitialised
 * `gpool_block_desc d;` is filled correctly.
 *
 * @param pool        the pool.
 * @param ptr         an address inside the block.
 * @param[out] out    receives the description (its first struct_size bytes).
 * @param struct_size sizeof the caller's gpool_block_desc.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or out is NULL, or struct_size is out of range.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not inside a live block of this pool.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_get_block_desc_sized(gpool_t *pool, const void *ptr,
                                                  gpool_block_desc *out, size_t struct_size);

/** Describes a block for this header's gpool_block_desc (see gpool_get_block_desc_sized()). */
#define gpool_get_block_desc(pool, ptr, out)                                                       \
    gpool_get_block_desc_sized((pool), (ptr), (out), sizeof(gpool_block_desc))

/**
 * Deprecated name of gpool_get_block_desc() (0.1); removed in 0.3. A function, not a macro:
 * it reads out->struct_size as the function form `(gpool_get_block_desc)(...)` does (only that
 * many bytes are written), except that struct_size 0 means the 0.2 layout, so a zeroed
 * gpool_block_desc still works.
 *
 * @param pool the pool.
 * @param ptr  an address inside the block.
 * @param[in,out] out receives the description.
 * @return a gpool_status, with the errors of gpool_get_block_desc(). Thread-safe.
 */
GPOOL_API gpool_status gpool_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out)
    GPOOL_DEPRECATED("use gpool_get_block_desc");

/**
 * Free and total device memory as the application sees it: the driver's free memory plus
 * this pool's cached bytes (which the pool gives back when asked for more).
 *
 * Cheap at any heap size: one cuMemGetInfo driver call and the device kind's running counters
 * (no walk; internal locks held only to copy counters).
 *
 * @param pool the pool.
 * @param[out] free_bytes  receives the free bytes.
 * @param[out] total_bytes receives the device's total bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG a NULL argument.
 * @retval GPOOL_ERR_DRIVER cuMemGetInfo failed.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_mem_get_info(gpool_t *pool, size_t *free_bytes, size_t *total_bytes);

/**
 * The physical page (chunk) size gpool would back a block with: the size placement uses
 * (device blocks: the chunk of the size rounded up to 256 bytes, as the block is placed;
 * gpool_alloc() accepts it as params->page_size).
 *
 * @param pool the pool.
 * @param kind the memory kind; GPOOL_MEM_AUTO: the kind the policy picks for
 *             GPOOL_USAGE_DEFAULT.
 * @param size the block's size in bytes.
 * @param[out] out receives the page size in bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG a NULL argument or a bad kind.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_page_size(gpool_t *pool, gpool_mem_kind kind, size_t size,
                                       size_t *out);

/**
 * Write a JSON snapshot of every address range and block (state: in_use, cached, pending)
 * and the stats.
 *
 * @param pool the pool.
 * @param f    an open stream to write to; the caller keeps it (not closed or flushed beyond
 *             the write).
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or f is NULL.
 * @retval GPOOL_ERR_IO writing to f failed.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_dump_json(gpool_t *pool, FILE *f);

/**
 * Change which devices can reach the pool's device memory (gpool_config.peer_access) at run
 * time: every mapping the pool holds gets the new access at once (devices left out lose it),
 * one cuMemSetAccess per mapped physical handle, and later mappings get it too.
 *
 * @param pool        the pool.
 * @param peer_access a gpool_peer_access value.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool is NULL or peer_access is not a gpool_peer_access.
 * @retval GPOOL_ERR_UNSUPPORTED GPOOL_PEER_ALL and a device cannot reach the pool's device.
 * @retval GPOOL_ERR_DRIVER a driver call failed; the previous access was put back.
 * @return a gpool_status as listed. Thread-safe.
 */
GPOOL_API gpool_status gpool_set_peer_access(gpool_t *pool, int peer_access);

/**
 * The size of the live device block that starts at ptr (as gpool_get_block_desc()'s size field),
 * without taking the pool's lock for small blocks: as cheap as gpool_free()'s own lookup.
 *
 * @param pool the pool.
 * @param ptr  the block's address as gpool_alloc() returned it.
 * @param[out] size receives the block's size in bytes.
 * @retval GPOOL_OK
 * @retval GPOOL_ERR_INVALID_ARG pool or size is NULL.
 * @retval GPOOL_ERR_INVALID_POINTER ptr is not the start of a live device block of this pool.
 * @return a gpool_status as listed. Thread-safe.
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
 * was freed on (that stream must still exist). Freeing it again meanwhile does nothing more
 * (it is freed once). A block freed with no importer ends its
 * export: handles made for it are stale from then on.
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
