/* bench.h — the gpool-bench harness: traces and workloads, devices, allocation strategies,
 * the replay engine, and report formatting. Everything but bench/main.c is also linked into
 * the Criterion tests (build/libgpoolbench.a). */
#ifndef GPOOL_BENCH_H
#define GPOOL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>

#include "driver.h"

#define BENCH_KIB ((uint64_t)1 << 10)
#define BENCH_MIB ((uint64_t)1 << 20)
#define BENCH_GIB ((uint64_t)1 << 30)
#define BENCH_TIB ((uint64_t)1 << 40)

/* Largest request size a trace may hold: anything above is a corrupt row. */
#define BENCH_MAX_REQUEST BENCH_TIB

/* ---- gpool_msg.c ----------------------------------------------------------------------- */

/* A failed gpool call's text for a harness message, "call: STATUS: detail" with detail
 * gpool_last_error() less the "call: " it may start with: the call is named once. Writes buf
 * (len bytes) and returns it. Reads the calling thread's last error; no cost beyond a copy. */
const char *bench_gpool_msg(char *buf, size_t len, const char *call, gpool_status st);

/* The plural ending of a count: "1 pass", "2 passes" ("es" words spell it out). */
#define BENCH_PLURAL(n) ((n) == 1 ? "" : "s")

/* ---- util.c ---------------------------------------------------------------------------- */

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* A small deterministic generator (splitmix64 seeded xoshiro256**). */
typedef struct bench_rng {
    uint64_t s[4];
} bench_rng;
void bench_rng_seed(bench_rng *r, uint64_t seed);
uint64_t bench_rng_next(bench_rng *r);
double bench_rng_uniform(bench_rng *r); /* [0, 1) */
double bench_rng_normal(bench_rng *r);  /* mean 0, sd 1 */

/* A map from 64-bit keys to 64-bit values: open addressing with linear probing and
 * backward-shift deletion. */
typedef struct bench_map {
    uint64_t *keys; /* stored key + 1, so that 0 marks an empty cell and key 0 is allowed */
    uint64_t *vals;
    size_t mask, count;
} bench_map;
int bench_map_init(bench_map *m, size_t expected);
void bench_map_destroy(bench_map *m);
/* 0, or -1 if out of host memory. Overwrites an existing key. */
int bench_map_put(bench_map *m, uint64_t key, uint64_t val);
/* 1 and *val if present. */
int bench_map_get(const bench_map *m, uint64_t key, uint64_t *val);
/* 1 and *val (if val) if it was present; removes it. */
int bench_map_take(bench_map *m, uint64_t key, uint64_t *val);

/* "256 B", "64 KiB", "2 MiB", "1.5 MiB", "2 GiB": exact units where they divide evenly. */
void bench_size_text(char *buf, size_t len, uint64_t bytes);

/* Write s as a JSON string literal (with quotes) to f. */
void bench_json_string(FILE *f, const char *s);

/* Write ,"key":v with prec decimals to f; null when v is not finite (JSON has no inf/nan). */
void bench_json_number(FILE *f, const char *key, int prec, double v);

/* ---- trace.c: an allocation trace parsed once into an op array ------------------------- */

enum { BENCH_OP_ALLOC = 0, BENCH_OP_FREE = 1 };

/* Memory kind of an allocation: the optional 7th trace column, Kind (GPOOL_TRACE writes it). */
enum { BENCH_MEM_DEVICE = 0, BENCH_MEM_PINNED = 1, BENCH_MEM_MAPPED = 2, BENCH_MEM_KINDS = 3 };

typedef struct bench_op {
    uint64_t size;  /* requested bytes (for a free: the size of the block freed) */
    uint32_t slot;  /* allocation index, 0..n_allocs-1: a free names the alloc's slot */
    uint8_t stream; /* index into bench_trace.streams */
    uint8_t mem;    /* BENCH_MEM_*: the allocation's memory kind (frees: their block's) */
    uint8_t kind;   /* BENCH_OP_ALLOC / BENCH_OP_FREE */
    uint8_t thread; /* trace thread id modulo 256 (informational) */
} bench_op;

#define BENCH_MAX_STREAMS 64
_Static_assert(BENCH_MAX_STREAMS <= 256, "bench_op.stream is a uint8_t");

typedef struct bench_trace {
    char name[128]; /* file base name without .csv, or the workload name */
    bench_op *ops;
    size_t n_ops, cap_ops;
    size_t n_allocs;         /* number of slots */
    size_t skipped_failures; /* "allocate failure" rows */
    size_t unfreed;          /* allocations never freed (the replay frees them at the end) */
    uint64_t peak_live;      /* max sum of live requested sizes */
    uint64_t largest;        /* largest request */
    uint64_t total_bytes;    /* sum of all request sizes */
    uint64_t streams[BENCH_MAX_STREAMS]; /* raw stream handles as in the trace; [0] first seen */
    size_t n_streams;
    unsigned lag_ops; /* replay: work on each stream completes only at the next multiple of
                         lag_ops operations (0: at once); simulated driver (multistream.c) */
    size_t mem_allocs[BENCH_MEM_KINDS]; /* allocations of each memory kind (BENCH_MEM_*) */
    uint64_t peak_device;               /* max sum of live requested device sizes */
    int gen_failed; /* a generator's operation found no host memory (bench_workload_make) */
} bench_trace;

/* Parse an RMM replay log (header Thread,Time,Action,Pointer,Size,Stream), optionally with a
 * 7th column Kind (device, pinned or mapped; empty means device) as GPOOL_TRACE writes it. A
 * stream written as "(nil)" is the default stream. Returns 0, or -1 with "FILE:LINE: what" in
 * err. */
int bench_trace_load(const char *path, bench_trace *t, char *err, size_t errlen);
/* The same from a memory buffer; `name` is used in messages. */
int bench_trace_parse(const char *name, const char *text, size_t len, bench_trace *t, char *err,
                      size_t errlen);
void bench_trace_free(bench_trace *t);
/* Write the trace as RMM CSV (Time = op index, pointers synthesised from slots), with the Kind
 * column when the trace has host allocations. */
int bench_trace_write_csv(const bench_trace *t, const char *path);

/* Builders used by the workload generators (and tests). */
void bench_trace_init(bench_trace *t, const char *name);
uint32_t bench_trace_add_alloc(bench_trace *t, uint64_t size, unsigned stream);
void bench_trace_add_free(bench_trace *t, uint32_t slot);
/* Computes peak_live, peak_device, largest, unfreed; 0, or -1 when out of host memory. */
int bench_trace_finish(bench_trace *t);
/* Index of the op after which the live bytes first reach peak_live (0 for an empty trace). */
size_t bench_trace_peak_op(const bench_trace *t);

/* ---- multistream.c: multi-stream variants and lagged completion -------------------------- */

#define BENCH_STREAMS_SIDE 100u /* variant: inputs on a side stream, freed on the main one */

/* "1", "2", "4" or "side" -> 1, 2, 4, BENCH_STREAMS_SIDE. 0, or -1 if unknown. */
int bench_parse_streams(const char *s, unsigned *out);
const char *bench_streams_name(unsigned variant);
/* A variant (2, 4 or BENCH_STREAMS_SIDE) of a trace, named NAME@2s / @4s / @side, with the
 * given lagged completion. 0, or -1 with err. */
int bench_trace_multistream(const bench_trace *in, unsigned variant, unsigned lag_ops,
                            bench_trace *out, char *err, size_t errlen);
/* trace_scale.c: multiply every request size of t by factor (>= 1; 1 changes nothing); its name
 * gets "@xN". 0, or -1 with err when a size would pass BENCH_MAX_REQUEST. */
int bench_trace_scale(bench_trace *t, unsigned factor, char *err, size_t errlen);
/* The replay's side of lagged completion: hold every stream, release and hold again every
 * lag_ops operations, release at the end. No-ops when t->lag_ops is 0. */
void bench_lag_begin(const bench_trace *t, CUstream *streams);
void bench_lag_step(const bench_trace *t, CUstream *streams, size_t op_index);
void bench_lag_end(const bench_trace *t, CUstream *streams);

/* ---- workload.c: synthetic workloads ---------------------------------------------------- */

typedef enum { BENCH_DIST_UNIFORM, BENCH_DIST_NORMAL, BENCH_DIST_GEOMETRIC } bench_dist;

typedef struct bench_workload_opts {
    uint64_t seed;
    size_t ops;        /* random: number of alloc+free operations */
    uint64_t min_size; /* random: smallest request */
    uint64_t max_size; /* random: largest request */
    uint64_t max_live; /* random: live bytes are kept at or below this */
    bench_dist dist;   /* random: size distribution */
    unsigned steps;    /* train: steps */
    unsigned layers;   /* train: layers */
    unsigned frames;   /* frame: frames */
} bench_workload_opts;

void bench_workload_defaults(bench_workload_opts *o);
/* 1 if name is a workload ("random", "train", "frame"). */
int bench_is_workload(const char *name);
int bench_workload_make(const char *name, const bench_workload_opts *o, bench_trace *t, char *err,
                        size_t errlen);
int bench_parse_dist(const char *s, bench_dist *out);

/* ---- device.c: which driver, which device ----------------------------------------------- */

typedef struct bench_device {
    const gp_driver *drv;
    CUdevice dev;
    CUcontext ctx; /* the retained primary context, current on the main thread */
    int ordinal;
    int simulated;      /* 1 on the simulated driver */
    char name[256];     /* "simulated" or the GPU's name */
    char gpu_name[256]; /* what cuDeviceGetName says */
    uint64_t total_mem;
    uint64_t page_bytes; /* the device's allocation granularity (2 MiB if the driver won't say) */
    char libcuda[512];   /* the driver file in use */
} bench_device;

/* mode: "auto", "sim" or a device ordinal. Chooses the driver (setting GPOOL_LIBCUDA to the
 * simulator when it falls back to it), loads it through gpool's driver table and retains the
 * primary context. 0 or -1 with err. */
int bench_device_open(const char *mode, bench_device *d, char *err, size_t errlen);
void bench_device_close(bench_device *d);
/* Default simulator path: dirname(/proc/self/exe) + "/sim/libcuda.so.1". */
int bench_default_sim_path(char *buf, size_t len);

/* Simulator control, reached with dlopen(GPOOL_LIBCUDA) + dlsym. All return -1 / 0 when the
 * driver is not the simulator. */
int bench_sim_available(void);
int bench_sim_set_capacity(int device, uint64_t bytes);
uint64_t bench_sim_bytes_in_use(int device);
uint64_t bench_sim_call_total(void);
/* Held completion (gpoolsim_stream_hold/release): 0, or -1 off the simulator. */
int bench_sim_stream_hold(CUstream s);
int bench_sim_stream_release(CUstream s);
/* Leaked driver objects (handles, mappings, reservations, legacy and host allocations). */
uint64_t bench_sim_live_objects(void);

/* ---- strategies ------------------------------------------------------------------------- */

/* Driver entry points counted per strategy (bench/drvcost.c prices each). */
typedef enum bench_drv {
    BENCH_DRV_MEM_ALLOC = 0,   /* cuMemAlloc */
    BENCH_DRV_MEM_FREE,        /* cuMemFree */
    BENCH_DRV_MEM_ALLOC_ASYNC, /* cuMemAllocAsync */
    BENCH_DRV_MEM_FREE_ASYNC,  /* cuMemFreeAsync */
    BENCH_DRV_MEM_CREATE,      /* cuMemCreate */
    BENCH_DRV_MEM_RELEASE,     /* cuMemRelease */
    BENCH_DRV_MEM_MAP,         /* cuMemMap */
    BENCH_DRV_MEM_UNMAP,       /* cuMemUnmap */
    BENCH_DRV_MEM_SET_ACCESS,  /* cuMemSetAccess */
    BENCH_DRV_ADDRESS_RESERVE, /* cuMemAddressReserve */
    BENCH_DRV_ADDRESS_FREE,    /* cuMemAddressFree */
    BENCH_DRV_HOST,            /* cuMemHostAlloc/FreeHost/HostRegister/HostUnregister */
    BENCH_DRV_EVENT,           /* event create/record/query/synchronize/destroy */
    BENCH_DRV_STREAM,          /* stream wait/synchronize */
    BENCH_DRV_OTHER,           /* context and device queries, memsets */
    BENCH_DRV_N
} bench_drv;

typedef struct bench_strategy_stats {
    uint64_t reserved;              /* bytes held from the driver now */
    uint64_t peak_reserved;         /* max of reserved */
    uint64_t driver_calls;          /* allocation-related driver calls made */
    uint64_t by_entry[BENCH_DRV_N]; /* the same calls by entry point (sum: driver_calls) */
} bench_strategy_stats;

/* Estimated cost of one call of entry point e, in microseconds (bench/drvcost.c: a table of
 * documented estimates, replaced entry by entry by measured numbers when the file named by
 * GPOOL_BENCH_DRV_COSTS exists: lines "NAME MICROSECONDS", as gpu/latency.c --costs writes). */
double bench_drvcost_us(bench_drv e);
/* The entry point's name ("cuMemCreate") and where its number comes from. */
const char *bench_drvcost_name(bench_drv e);
const char *bench_drvcost_source(bench_drv e);
/* 1 when at least one number came from a measured cost file (see above). */
int bench_drvcost_measured(void);
/* Sum over entry points of calls[e] * bench_drvcost_us(e). */
double bench_drvcost_total_us(const uint64_t calls[BENCH_DRV_N]);

enum {
    BENCH_OK = 0,
    BENCH_OOM = 1,   /* the allocation failed for lack of memory */
    BENCH_ERR = -1,  /* anything else: message in s->err */
    BENCH_SKIP = -2, /* init: the strategy cannot run here (message in s->err) */
};

typedef struct bench_strategy bench_strategy;

typedef struct bench_strategy_ops {
    const char *name;  /* "cuda", "bfc", ... */
    const char *label; /* one line, printed in reports */
    int host;          /* 1: host memory (the capacity applies to nothing) */
    int (*init)(bench_strategy *s, const bench_device *dev); /* the replay sets the capacity */
    int (*alloc)(bench_strategy *s, uint64_t size, CUstream stream, void **out);
    /* Optional: allocate host memory of a trace's kind (mem: BENCH_MEM_PINNED or
     * BENCH_MEM_MAPPED). Without it the replay skips host allocations and says so. */
    int (*alloc_mem)(bench_strategy *s, uint64_t size, int mem, CUstream stream, void **out);
    int (*free)(bench_strategy *s, void *ptr, uint64_t size, CUstream stream);
    void (*stats)(bench_strategy *s, bench_strategy_stats *out);
    void (*fini)(bench_strategy *s);
    /* Optional: write a gpool_dump_json snapshot to f. 0, or -1 with s->err. */
    int (*snapshot)(bench_strategy *s, FILE *f);
} bench_strategy_ops;

struct bench_strategy {
    const bench_strategy_ops *ops;
    char spec[256];   /* as given: "gpool:tcache_bytes=0" */
    const char *args; /* after the ':' in spec, "" if none */
    const bench_device *dev;
    void *state;
    char err[512];
};

extern const bench_strategy_ops bench_strategy_cuda, bench_strategy_cuda_async, bench_strategy_bfc,
    bench_strategy_gpool, bench_strategy_cuda_host, bench_strategy_gpool_pinned;

/* Look up a strategy spec "name[:args]"; fills s (not initialised). 0 or -1 with err. */
int bench_strategy_lookup(const char *spec, bench_strategy *s, char *err, size_t errlen);
/* Names of all strategies, comma separated, for usage text. */
const char *bench_strategy_names(void);

/* Helpers shared by strategies. */
int bench_strategy_fail(bench_strategy *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The bfc model's internals, exposed for tests. */
uint64_t bench_bfc_round_size(uint64_t size);
uint64_t bench_bfc_segment_size(uint64_t rounded);

/* ---- replay.c ----------------------------------------------------------------------------- */

typedef struct bench_sample {
    uint64_t op;
    uint64_t live;
    uint64_t reserved;
} bench_sample;

typedef struct bench_replay_opts {
    uint64_t capacity;    /* 0: leave the device as it is */
    int stop_on_failure;  /* stop at the first failed allocation (fit) */
    int time_ops;         /* record per-op host time (p50/p99) */
    size_t samples;       /* >0: record about this many (live, reserved) samples for plots */
    int progress;         /* progress line on stderr for runs over a second */
    unsigned passes;      /* replays of the trace in the same instance (0 = 1); each pass ends
                             by freeing what is still live */
    const char *snapshot; /* strategies with a snapshot op: write one here at the trace's
                             peak-live point (first pass); with stop_on_failure, a failed
                             allocation writes it again (the state that could not serve it) */
} bench_replay_opts;

typedef struct bench_result {
    char strategy[256];
    char label[160];
    int skipped; /* 1: strategy unavailable here; note in `note` */
    int error;   /* 1: the run failed for another reason; message in `note` */
    char note[512];
    uint64_t allocs, failed_allocs, frees;
    uint64_t peak_live;                        /* of the blocks actually allocated */
    uint64_t peak_reserved;                    /* strategy's own count */
    uint64_t driver_calls;                     /* all: creating the instance and every pass */
    uint64_t driver_calls_init;                /* creating the instance (before the first op) */
    uint64_t driver_calls_first_pass;          /* in the first pass (with its end-of-pass frees) */
    uint64_t driver_calls_last_pass;           /* in the last pass: 0 is steady state */
    uint64_t first_pass_by_entry[BENCH_DRV_N]; /* first-pass calls by entry point */
    uint64_t last_pass_by_entry[BENCH_DRV_N];  /* last-pass calls by entry point */
    unsigned passes;                           /* passes run (fewer than asked after an error) */
    int snapshot; /* 1 written, -1 failed (snapshot_err), 0 not asked */
    char snapshot_err[256];
    uint64_t snapshot_op;   /* op index + 1 after which the snapshot was taken */
    int snapshot_failed_op; /* 1: that op was a failed allocation (stop_on_failure) */
    uint64_t sim_calls;     /* every simulated driver call during the run (0 on a GPU) */
    uint64_t sim_leaked;    /* sim bytes still in use after fini (should be 0) */
    uint64_t first_failure; /* op index + 1 of the first failure, 0 if none */
    uint64_t mem_allocs[BENCH_MEM_KINDS]; /* allocations replayed per memory kind */
    uint64_t host_skipped;                /* host-kind allocations the strategy cannot make */
    double p50_ns, p99_ns;                /* host time per op */
    double wall_s;
    bench_sample *samples;
    size_t n_samples;
} bench_result;

/* Run one fresh instance of `spec` over the trace. Returns 0 (see r->skipped / r->error). */
int bench_replay(const bench_device *dev, const char *spec, const bench_trace *t,
                 const bench_replay_opts *o, bench_result *r);
void bench_result_free(bench_result *r);
/* bench_replay in a child process on the simulator (a crash becomes r->error), unless
 * GPOOL_BENCH_NOFORK=1 or samples are asked for. */
void bench_replay_isolated(const bench_device *dev, const char *spec, const bench_trace *t,
                           const bench_replay_opts *o, bench_result *r);

/* Where the backed bytes at a trace's peak go (bench_fit_waste_measure), in bytes. */
typedef struct bench_fit_waste {
    int measured;       /* 1: read from a snapshot (strategies that write one: gpool) */
    uint64_t backed;    /* device pages with memory behind them */
    uint64_t step;      /* live blocks' sizes above what was asked (size-class steps) */
    uint64_t slab_free; /* slabs' bytes not in live slots */
    uint64_t tails;     /* free bytes after a block up to the end of its last page */
    uint64_t holes;     /* other free bytes on backed pages */
    uint64_t pending;   /* free bytes queued work may still use */
} bench_fit_waste;

/* The pages at the allocation that fails one page below the min capacity
 * (bench_fit_fail_measure), after the strategy gave back what it could: what the trace's
 * hardest request found. */
typedef struct bench_fit_fail {
    int measured;           /* 1: read from a snapshot at the failed allocation */
    uint64_t capacity;      /* min capacity - 1 page */
    uint64_t request;       /* bytes the failed allocation asked for */
    uint64_t backed_pages;  /* pages with memory behind them */
    uint64_t partial_pages; /* backed pages partly used by blocks, slabs or pending frees */
    uint64_t partial_free;  /* free bytes in those */
    uint64_t idle_pages;    /* backed pages holding nothing (a multi-page handle partly used) */
} bench_fit_fail;

typedef struct bench_fit {
    char strategy[256];
    int skipped, error;
    char note[512];
    uint64_t peak_live;
    uint64_t page_bytes;     /* the device's granularity */
    uint64_t physical_limit; /* peak_live rounded up to whole pages of page_bytes */
    uint64_t min_capacity;   /* 0 when not found within the search range */
    int64_t pages_above;     /* (min_capacity - physical_limit) / page_bytes, rounded up */
    double ratio;            /* min_capacity / peak_live */
    int goal_met;            /* min_capacity <= 1.05 * peak_live + 4 MiB */
    uint64_t driver_calls;   /* in the replay at min_capacity */
    uint64_t peak_reserved;
    unsigned replays;
    int leak_warned;
    bench_fit_waste waste; /* filled by bench_fit_waste_measure (fit), else not measured */
    bench_fit_fail fail;   /* filled by bench_fit_fail_measure (fit), else not measured */
} bench_fit;

/* Smallest capacity, in 2 MiB steps, at which the trace replays with no failure. Simulated
 * driver only. */
int bench_fit_run(const bench_device *dev, const char *spec, const bench_trace *t, int progress,
                  bench_fit *f);

/* fit_waste.c: one more replay of spec at f->min_capacity, with a gpool_dump_json snapshot at
 * the trace's peak, fills f->waste (left unmeasured for strategies without snapshots, or when
 * the replay or the snapshot fails). Simulated driver only, as bench_fit_run. */
void bench_fit_waste_measure(const bench_device *dev, const char *spec, const bench_trace *t,
                             bench_fit *f);

/* fit_fail.c: one more replay of spec one page below f->min_capacity, stopping at the failed
 * allocation with a gpool_dump_json snapshot there, fills f->fail (left unmeasured as
 * bench_fit_waste_measure leaves f->waste). Simulated driver only. */
void bench_fit_fail_measure(const bench_device *dev, const char *spec, const bench_trace *t,
                            bench_fit *f);

/* ---- json.c: a small JSON reader (for snapshots) ------------------------------------------ */

typedef enum {
    BENCH_JSON_NULL,
    BENCH_JSON_BOOL,
    BENCH_JSON_NUMBER,
    BENCH_JSON_STRING,
    BENCH_JSON_ARRAY,
    BENCH_JSON_OBJECT
} bench_json_type;

typedef struct bench_json bench_json;
struct bench_json {
    bench_json_type type;
    int is_int;         /* NUMBER: an integer that fits u64 (or i64 if negative) in `u` */
    uint64_t u;         /* NUMBER: the integer value (two's complement if negative) */
    double num;         /* NUMBER: the value as a double; BOOL: 0 or 1 */
    char *str;          /* STRING: NUL-terminated, escapes decoded */
    char **keys;        /* OBJECT: key of each item */
    bench_json **items; /* ARRAY / OBJECT: the values */
    size_t n;
};

/* Parse text (len bytes). NULL with "line L col C: what" in err. */
bench_json *bench_json_parse(const char *text, size_t len, char *err, size_t errlen);
void bench_json_free(bench_json *j);
/* Object member by key, or NULL (also when j is not an object). */
const bench_json *bench_json_get(const bench_json *j, const char *key);
/* Integer value of a NUMBER (def if j is NULL or not a number). */
uint64_t bench_json_u64(const bench_json *j, uint64_t def);

/* ---- view.c: draw a gpool_dump_json snapshot ------------------------------------------------ */

enum {
    BENCH_RANGE_IN_USE,
    BENCH_RANGE_CACHED,
    BENCH_RANGE_PENDING,
    BENCH_RANGE_SLAB,
    BENCH_RANGE_RESERVED, /* address space with no memory behind it (view's own label) */
    BENCH_RANGE_OTHER,
    BENCH_RANGE_STATES
};

typedef struct bench_snap_range {
    uint64_t addr, size;
    int state; /* BENCH_RANGE_* */
} bench_snap_range;

typedef struct bench_snap_region {
    char kind[32]; /* "device", "host_pinned", ... */
    uint64_t base, size, page, backed_pages;
    /* bytes from base that are drawn: a region is mostly a large reservation whose free tail
     * has no memory behind it; the extent ends at the last range that is not that tail or at
     * backed_pages x page, whichever is further, rounded up to a page */
    uint64_t extent;
    bench_snap_range *ranges;
    size_t n_ranges;
} bench_snap_region;

typedef struct bench_snapshot {
    char version[32];
    bench_snap_region *regions;
    size_t n_regions;
    uint64_t state_bytes[BENCH_RANGE_STATES]; /* sums over all ranges, within the extents */
    uint64_t reserved, backed;                /* sums of region sizes, of backed pages */
    uint64_t undrawn;                         /* sum of region size - extent */
    /* "stats"."total", when present */
    uint64_t stats_requested, stats_in_use, stats_reserved, stats_cached;
    uint64_t driver_calls; /* sum of "stats"."driver_calls" */
} bench_snapshot;

/* Read a gpool_dump_json file. 0, or -1 with "FILE: what" in err. */
/* The whole of stream f in a malloc'd buffer (*len bytes; NULL when out of memory), *bad = 1
 * on a read error. The caller closes f and frees the buffer. */
char *bench_read_stream(FILE *f, size_t *len, int *bad);
int bench_snapshot_load(const char *path, bench_snapshot *s, char *err, size_t errlen);
int bench_snapshot_parse(const char *name, const char *text, size_t len, bench_snapshot *s,
                         char *err, size_t errlen);
void bench_snapshot_free(bench_snapshot *s);
/* view_backing.c: split the "cached" ranges of r into the pages that have memory behind them
 * (still cached) and address space never backed ("reserved"). The snapshot gives how many pages
 * are backed, not which: pages shared with a range in use, pending or slab are backed; the
 * rest of the count goes to the cached pages nearest them. 0, or -1 when out of memory. */
int bench_snap_split_reserved(bench_snap_region *r);
const char *bench_range_state_name(int state);
/* Draw the memory map with gnuplot. 0, or -1 with err. */
int bench_view(const bench_snapshot *s, const char *title, const char *png, char *err,
               size_t errlen);

/* ---- plot.c ------------------------------------------------------------------------------- */

/* One gnuplot run: the data goes into a temporary file, the script down a pipe to gnuplot. */
typedef struct bench_gnuplot {
    char data[64];   /* the temporary data file's path, for the script to name */
    FILE *data_file; /* open for writing after bench_gnuplot_open; the caller closes it */
    FILE *pipe;      /* gnuplot's stdin after bench_gnuplot_start */
} bench_gnuplot;

/* Check that gnuplot is installed ("WHO needs gnuplot ...; no OUTPUT written" otherwise) and
 * create the data file /tmp/PREFIX-XXXXXX ("cannot create a temporary file for the WHAT data").
 * 0, or -1 with err and nothing left behind. */
int bench_gnuplot_open(bench_gnuplot *g, const char *who, const char *output, const char *prefix,
                       const char *what, char *err, size_t errlen);
/* Remove the data file (after it is closed) when no plot follows. */
void bench_gnuplot_discard(bench_gnuplot *g);
/* Start gnuplot once the data file is closed: 0, or -1 with err and the data file removed. */
int bench_gnuplot_start(bench_gnuplot *g, char *err, size_t errlen);
/* Close gnuplot's pipe (it draws and exits) and remove the data file. 0, or -1 with err. */
int bench_gnuplot_finish(bench_gnuplot *g, char *err, size_t errlen);

/* ---- hotpath.c ---------------------------------------------------------------------------- */

typedef struct bench_hotpath {
    double gpool_ns, jemalloc_ns, ratio;    /* per alloc+free pair, 1 thread */
    double gpool_scaling, jemalloc_scaling; /* 2-thread throughput / 1-thread */
    double gpool_ns_2t, jemalloc_ns_2t;     /* per pair per thread, 2 threads */
    uint64_t pairs;                         /* per round per thread */
    unsigned rounds;
    char note[256];
    double pinned_ns, mapped_ns;                     /* host kinds' pairs, 1 thread */
    double device_calls, pinned_calls, mapped_calls; /* driver calls per 100,000 pairs */
} bench_hotpath;

int bench_hotpath_run(const bench_device *dev, uint64_t pairs, unsigned rounds, bench_hotpath *h,
                      char *err, size_t errlen);

/* ---- scale.c ------------------------------------------------------------------------------ */

typedef struct bench_scale_row {
    uint64_t live; /* live blocks (2 x live allocated, half freed at random) */
    int small;     /* 1: small (slab) blocks, thread caches off; 0: large (heap) blocks */
    double gpool_pair_ns, jem_pair_ns;     /* alloc+free of a random size, ns per pair */
    double gpool_stats_ns, jem_stats_ns;   /* gpool_get_stats / mallctl epoch+stats.allocated */
    double gpool_lookup_ns, jem_lookup_ns; /* gpool_block_info / sallocx of a live block */
    double gpool_trim_ns, jem_trim_ns;     /* one gpool_trim(0) / one arena purge */
} bench_scale_row;

/* Fill each row's figures (rows[i].live and .small set by the caller). 0, or -1 with err. */
int bench_scale_run(const bench_device *dev, bench_scale_row *rows, size_t n, char *err,
                    size_t errlen);

/* ---- import.c ----------------------------------------------------------------------------- */

/* `gpool-bench import SNAPSHOT -o TRACE.csv [--device N]` (argv: the arguments after
 * "import"): runs tools/snapshot_import.py; returns the exit status when it cannot. */
int bench_import_main(int argc, char **argv);
/* startup.c: `gpool-bench startup`, the cost of LD_PRELOAD=libgpool_preload.so at process
 * start (argv after the command word; argv[-1] must be readable). */
int bench_startup_main(int argc, char **argv);

/* ---- dropin.c: the pair through libgpool_preload.so (hotpath --dropin) --------------------- */

typedef struct bench_dropin_row {
    uint64_t size, live; /* block size, live blocks held */
    double library_ns;   /* gpool_alloc+gpool_free, in this process */
    double runtime_ns;   /* cudaMalloc+cudaFree through the interposer (client process) */
    double driver_ns;    /* cuMemAlloc_v2+cuMemFree_v2 through the interposer */
    double batch_ns;     /* cudaMalloc+cudaFree once a non-blocking stream exists (batch) */
    double ratio;        /* max(runtime_ns, driver_ns) / library_ns */
} bench_dropin_row;

/* The sizes and heaps the benchmark runs; returns the number of rows. */
size_t bench_dropin_default_rows(const uint64_t **sizes, size_t *n_sizes, const uint64_t **heaps,
                                 size_t *n_heaps);
/* One row: best of `rounds` rounds of `pairs` pairs (an eighth of them for blocks over
 * 64 KiB). Needs build/bench/dropin_client and build/libgpool_preload.so next to gpool-bench.
 * 0; 1 with err when the live blocks do not fit on the device (the row is skipped); -1 with
 * err on failure. */
int bench_dropin_run(const bench_device *dev, uint64_t size, uint64_t live, uint64_t pairs,
                     unsigned rounds, bench_dropin_row *row, char *err, size_t errlen);

/* ---- report.c ----------------------------------------------------------------------------- */

/* What counter e counts, in a few words: "cuMemMap", or a class ("event calls", "context and
 * device calls"): the words replay's steady-state line and compare's summary use. */
const char *bench_drv_class(bench_drv e);

void bench_print_replay_table(FILE *f, const bench_device *dev, const bench_trace *t,
                              const bench_result *r, size_t n);
void bench_print_replay_json(FILE *f, const bench_device *dev, const bench_trace *t,
                             const bench_result *r, size_t n);
int bench_write_replay_csv(const char *path, const bench_device *dev, const bench_trace *t,
                           const bench_result *r, size_t n);
int bench_plot(const char *png, const bench_device *dev, const bench_trace *t,
               const bench_result *r, size_t n, char *err, size_t errlen);
void bench_print_fit(FILE *f, const bench_device *dev, const bench_trace *t, const bench_fit *fit,
                     int json);

#endif
