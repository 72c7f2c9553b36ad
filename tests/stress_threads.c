/* Multi-threaded stress: many threads mixing sizes and streams, freeing each other's blocks,
 * trimming and reading stats while the others allocate. Every block carries a pattern that
 * is checked when it is freed. A plain program (not Criterion) so it also runs under TSan:
 * `make test-tsan`. Exit status 0 when every check passed. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"

#define THREADS 4
#define OPS     6000
#define SLOTS   64
#define SHARED  32

static gpool_t *pool;
static CUstream streams[THREADS];
static _Atomic int failures;

/* Blocks handed between threads: freed by whoever takes them. */
static struct {
    pthread_mutex_t lock;
    void *ptr[SHARED];
    size_t size[SHARED];
    uint32_t seed[SHARED];
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "stress: " __VA_ARGS__);                                               \
            fprintf(stderr, " (%s)\n", gpool_last_error());                                        \
            atomic_fetch_add(&failures, 1);                                                        \
        }                                                                                          \
    } while (0)

static size_t pick_size(uint32_t *seed)
{
    uint32_t r = rnd(seed);
    switch (r % 10) {
    case 0:
        return (size_t)(r >> 8) % (6 * MiB) + 1; /* large */
    case 1:
        return (size_t)(r >> 8) % (600 << 10) + 1; /* medium */
    default:
        return (size_t)(r >> 8) % 16384 + 1; /* small: the thread-cache path */
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint32_t seed = 1000u + (uint32_t)id;
    void *ptr[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    gpool_stream_t strm[SLOTS] = {0};
    for (int op = 0; op < OPS; op++) {
        int i = (int)(rnd(&seed) % SLOTS);
        uint32_t what = rnd(&seed) % 100;
        if (what < 2) {
            CHECK(gpool_trim(pool, 0) == GPOOL_OK, "trim");
        } else if (what < 5) {
            gpool_stats st = GPOOL_STATS_INIT;
            CHECK(gpool_get_stats(pool, &st) == GPOOL_OK, "stats");
        } else if (what < 12 && ptr[i]) {
            /* hand it to another thread */
            pthread_mutex_lock(&shared.lock);
            int k = (int)(rnd(&seed) % SHARED);
            void *old = shared.ptr[k];
            size_t old_size = shared.size[k];
            uint32_t old_seed = shared.seed[k];
            shared.ptr[k] = ptr[i];
            shared.size[k] = size[i];
            shared.seed[k] = (uint32_t)(uintptr_t)ptr[i];
            pthread_mutex_unlock(&shared.lock);
            ptr[i] = NULL;
            if (old) {
                CHECK(check_pattern(old, old_size, old_seed), "shared block corrupted");
                CHECK(gpool_free(pool, old) == GPOOL_OK, "free of another thread's block");
            }
        } else if (ptr[i]) {
            CHECK(check_pattern(ptr[i], size[i], (uint32_t)(uintptr_t)ptr[i]), "block %p corrupted",
                  ptr[i]);
            gpool_status s =
                strm[i] ? gpool_free_async(pool, ptr[i], strm[i]) : gpool_free(pool, ptr[i]);
            CHECK(s == GPOOL_OK, "free");
            ptr[i] = NULL;
        } else {
            size[i] = pick_size(&seed);
            uint32_t how = rnd(&seed) % 4;
            strm[i] = how == 0 ? streams[id] : NULL;
            gpool_status s = strm[i] ? gpool_alloc_async(pool, size[i], NULL, strm[i], &ptr[i])
                                     : gpool_alloc(pool, size[i], NULL, &ptr[i]);
            CHECK(s == GPOOL_OK, "alloc %zu", size[i]);
            if (s != GPOOL_OK) continue;
            fill_pattern(ptr[i], size[i], (uint32_t)(uintptr_t)ptr[i]);
            if (how == 1) /* also used on this thread's stream */
                CHECK(gpool_record_stream(pool, ptr[i], streams[id]) == GPOOL_OK, "record");
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (ptr[i]) {
            CHECK(check_pattern(ptr[i], size[i], (uint32_t)(uintptr_t)ptr[i]), "block corrupted");
            CHECK(gpool_free(pool, ptr[i]) == GPOOL_OK, "final free");
        }
    return NULL;
}

int main(void)
{
    const struct sim_api *sim = sim_api();
    if (!sim) {
        fprintf(stderr, "stress: needs GPOOL_LIBCUDA pointing at the simulated driver\n");
        return 2;
    }
    sim->set_capacity(0, 512 * MiB);
    pool = test_pool("tcache_bytes=256K");
    if (!pool) return 2;
    CUresult (*retain)(CUcontext *, CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = sim_driver_proc("cuCtxSetCurrent");
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*destroy)(CUstream) = sim_driver_proc("cuStreamDestroy");
    CUresult (*release)(CUdevice) = sim_driver_proc("cuDevicePrimaryCtxRelease");
    CUcontext ctx;
    retain(&ctx, 0);
    set(ctx);
    for (int i = 0; i < THREADS; i++)
        mk(&streams[i], 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < SHARED; k++)
        if (shared.ptr[k]) {
            CHECK(check_pattern(shared.ptr[k], shared.size[k], shared.seed[k]), "shared block");
            CHECK(gpool_free(pool, shared.ptr[k]) == GPOOL_OK, "free shared");
        }
    gpool_stats st = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &st);
    CHECK(st.kind[GPOOL_MEM_DEVICE].live_blocks == 0, "live blocks left: %llu",
          (unsigned long long)st.kind[GPOOL_MEM_DEVICE].live_blocks);
    CHECK(gpool_destroy(pool) == GPOOL_OK, "destroy");
    for (int i = 0; i < THREADS; i++)
        destroy(streams[i]);
    release(0);
    CHECK(sim_live_total() == 0, "driver objects leaked: %zu", sim_live_total());
    int f = atomic_load(&failures);
    printf("stress (%d threads x %d ops, simulated driver): %d passed, %d failed\n", THREADS, OPS,
           f ? 0 : 1, f ? 1 : 0);
    return f ? 1 : 0;
}
