/* replay.c — replays an allocation trace (RMM replay log: Thread,Time,Action,Pointer,Size,Stream)
 * through cudaMalloc/cudaFree under LD_PRELOAD=libgpool_preload.so and prints what the
 * interposer's cudaFree batch did: how many flushes (one synchronize each) per 1,000 frees,
 * and the most bytes the batch held.
 *
 *   dropin_replay [--nb [--busy]] TRACE.csv
 *
 * --nb creates a non-blocking stream first (after the first allocation), as PyTorch does for
 * its side streams: only then does cudaFree go through the batch (preload/preload_streams.c).
 * --busy (simulated driver only) models a GPU that lags behind: the non-blocking stream is held
 * (gpoolsim_stream_hold) and each new block gets a 1-byte cuMemsetD8Async on it, so a
 * synchronize has to wait for that work (gpoolsim_forced_syncs counts those waits: on a GPU,
 * each is the CPU stalled until the queue drains). Every other operation goes to the legacy
 * stream. Prints one line of key=value pairs, or "error=..."
 * and exits 1. Not linked with gpool. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct batch_stats {
    unsigned long long frees, flushes, syncs, peak_bytes, limit_bytes, events, peak_waiting;
} batch_stats; /* gpool_preload_batch_stats (preload/preload.h) */

typedef int (*rt_malloc_fn)(void **, size_t);
typedef int (*rt_free_fn)(void *);

/* trace pointer -> our pointer: open addressing, linear probing, tombstones */
static uint64_t *keys;
static void **vals;
static size_t mask;

static size_t slot_of(uint64_t k)
{
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}

static void put(uint64_t k, void *v)
{
    size_t i = slot_of(k);
    while (keys[i] && keys[i] != k + 1 && keys[i] != 1)
        i = (i + 1) & mask;
    keys[i] = k + 1;
    vals[i] = v;
}

static void *take(uint64_t k)
{
    for (size_t i = slot_of(k); keys[i]; i = (i + 1) & mask)
        if (keys[i] == k + 1) {
            keys[i] = 1; /* tombstone */
            return vals[i];
        }
    return NULL;
}

int main(int argc, char **argv)
{
    int nb = argc > 2 && !strcmp(argv[1], "--nb");
    int busy = nb && argc > 3 && !strcmp(argv[2], "--busy");
    CUstream nbs = NULL;
    CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream) = NULL;
    unsigned long (*forced)(void) = NULL;
    const char *path = argv[argc - 1];
    if (argc < 2) {
        fprintf(stderr, "usage: dropin_replay [--nb] TRACE.csv\n");
        return 64;
    }
    rt_malloc_fn cmalloc;
    rt_free_fn cfree;
    void (*stats)(batch_stats *);
    *(void **)&cmalloc = dlsym(RTLD_DEFAULT, "cudaMalloc");
    *(void **)&cfree = dlsym(RTLD_DEFAULT, "cudaFree");
    *(void **)&stats = dlsym(RTLD_DEFAULT, "gpool_preload_batch_stats_get");
    if (!cmalloc || !cfree || !stats) {
        printf("error=run under LD_PRELOAD=libgpool_preload.so\n");
        return 1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("error=cannot open %s\n", path);
        return 1;
    }
    mask = (1u << 22) - 1;
    keys = calloc(mask + 1, sizeof *keys);
    vals = calloc(mask + 1, sizeof *vals);
    if (!keys || !vals) return 1;
    char line[512];
    unsigned long long allocs = 0, frees = 0, failed = 0, free_ns = 0;
    int made_stream = !nb;
    while (fgets(line, sizeof line, f)) {
        char action[32];
        unsigned long long ptr, size;
        if (sscanf(line, "%*[^,],%*[^,],%31[^,],%llx,%llu", action, &ptr, &size) != 3) continue;
        if (!strcmp(action, "allocate")) {
            void *p = NULL;
            if (cmalloc(&p, size) != 0 || !p) {
                failed++;
                continue;
            }
            put(ptr, p);
            allocs++;
            if (memset_async) memset_async((CUdeviceptr)(uintptr_t)p, 0, 1, nbs);
            if (!made_stream) {
                const char *lib = getenv("GPOOL_LIBCUDA");
                void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
                CUresult (*create)(CUstream *, unsigned) = NULL;
                if (h) *(void **)&create = dlsym(h, "cuStreamCreate");
                if (!create || create(&nbs, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
                    printf("error=cannot create a non-blocking stream\n");
                    return 1;
                }
                made_stream = 1;
                int (*hold)(CUstream) = NULL;
                if (busy && h) {
                    *(void **)&hold = dlsym(h, "gpoolsim_stream_hold");
                    *(void **)&memset_async = dlsym(h, "cuMemsetD8Async");
                    *(void **)&forced = dlsym(h, "gpoolsim_forced_syncs");
                }
                if (busy && (!hold || !memset_async || !forced || hold(nbs) != 0)) {
                    printf("error=--busy needs the simulated driver\n");
                    return 1;
                }
            }
        } else if (!strcmp(action, "free")) {
            void *p = take(ptr);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int ok = p && cfree(p) == 0;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            free_ns += (unsigned long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
                                            (t1.tv_nsec - t0.tv_nsec));
            if (ok) frees++;
        }
    }
    fclose(f);
    batch_stats b;
    stats(&b);
    const char *base = strrchr(path, '/');
    printf("trace=%s nonblocking_stream=%d busy=%d allocs=%llu frees=%llu failed=%llu batched=%llu "
           "flushes=%llu syncs=%llu flushes_per_1000_frees=%.3f peak_batch_bytes=%llu "
           "limit_bytes=%llu events=%llu peak_waiting_bytes=%llu cudaFree_ns=%.1f "
           "forced_waits=%lu\n",
           base ? base + 1 : path, nb, busy, allocs, frees, failed, b.frees, b.flushes, b.syncs,
           frees ? 1000.0 * (double)b.flushes / (double)frees : 0.0, b.peak_bytes, b.limit_bytes,
           b.events, b.peak_waiting, frees ? (double)free_ns / (double)frees : 0.0,
           forced ? forced() : 0ul);
    return 0;
}
