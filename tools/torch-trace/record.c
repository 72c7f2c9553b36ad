/* record.c — an LD_PRELOAD shim that records the tensor allocations of a PyTorch program run on
 * the CPU, as an RMM replay log (`Thread,Time,Action,Pointer,Size,Stream`) for gpool-bench.
 *
 * PyTorch's CPU allocator (c10::alloc_cpu) takes every tensor storage from posix_memalign with
 * 64-byte alignment, so those calls and the frees of the pointers they returned are the requests
 * a GPU caching allocator would see from the same program. Nothing else is recorded. The log is
 * written when the process exits, to the file named by GPOOL_RECORD_OUT (nothing is recorded
 * when it is unset). A research tool: not part of libgpool. Built with -D_GNU_SOURCE. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TENSOR_ALIGN 64         /* c10's gAlignment */
#define LIVE_SLOTS   (1u << 22) /* open-addressing table of live pointers (power of two) */
#define MAX_EVENTS   (1u << 25) /* 32 M allocations and frees */

typedef struct event {
    uint64_t ns;
    uintptr_t ptr;
    uint64_t size;
    uint32_t tid;
    uint32_t is_alloc;
} event;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int recording;
static uintptr_t *live_ptr; /* 0 = empty slot */
static uint64_t *live_size;
static event *events;
static size_t n_events, dropped;
static uint64_t t0;
static int (*real_posix_memalign)(void **, size_t, size_t);
static void (*real_free)(void *);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t home(uintptr_t p)
{
    return (size_t)(((p >> 6) * 0x9E3779B97F4A7C15ull) >> 42) & (LIVE_SLOTS - 1);
}

static size_t find(uintptr_t p)
{
    size_t i = home(p);
    while (live_ptr[i] && live_ptr[i] != p)
        i = (i + 1) & (LIVE_SLOTS - 1);
    return i;
}

/* Remove slot i, shifting later members of its probe run back (no tombstones). */
static void remove_slot(size_t i)
{
    for (size_t j = (i + 1) & (LIVE_SLOTS - 1); live_ptr[j]; j = (j + 1) & (LIVE_SLOTS - 1)) {
        size_t h = home(live_ptr[j]);
        /* j's entry may move to i when its home is not in the cyclic range (i, j] */
        int stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (stays) continue;
        live_ptr[i] = live_ptr[j];
        live_size[i] = live_size[j];
        i = j;
    }
    live_ptr[i] = 0;
}

static void note(uintptr_t p, uint64_t size, int is_alloc)
{
    if (n_events == MAX_EVENTS) {
        dropped++;
        return;
    }
    events[n_events++] = (event){now_ns() - t0, p, size, (uint32_t)syscall(SYS_gettid), is_alloc};
}

__attribute__((constructor)) static void record_start(void)
{
    if (!getenv("GPOOL_RECORD_OUT")) return;
    live_ptr = map_zeroed(LIVE_SLOTS * sizeof *live_ptr);
    live_size = map_zeroed(LIVE_SLOTS * sizeof *live_size);
    events = map_zeroed(MAX_EVENTS * sizeof *events);
    if (!live_ptr || !live_size || !events) {
        fprintf(stderr, "gpool-record: cannot map the recording buffers; not recording\n");
        return;
    }
    t0 = now_ns();
    recording = 1;
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (!real_posix_memalign) real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    int rc = real_posix_memalign(out, align, size);
    if (rc != 0 || align != TENSOR_ALIGN || !recording) return rc;
    pthread_mutex_lock(&lock);
    size_t i = find((uintptr_t)*out);
    live_ptr[i] = (uintptr_t)*out;
    live_size[i] = size;
    note((uintptr_t)*out, size, 1);
    pthread_mutex_unlock(&lock);
    return 0;
}

void free(void *p)
{
    if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
    if (p && recording) {
        pthread_mutex_lock(&lock);
        size_t i = find((uintptr_t)p);
        if (live_ptr[i]) {
            note((uintptr_t)p, live_size[i], 0);
            remove_slot(i);
        }
        pthread_mutex_unlock(&lock);
    }
    real_free(p);
}

__attribute__((destructor)) static void record_write(void)
{
    if (!recording) return;
    pthread_mutex_lock(&lock);
    recording = 0;
    pthread_mutex_unlock(&lock);
    const char *path = getenv("GPOOL_RECORD_OUT");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gpool-record: cannot write %s\n", path);
        return;
    }
    fputs("Thread,Time,Action,Pointer,Size,Stream\n", f);
    for (size_t i = 0; i < n_events; i++)
        fprintf(f, "%u,%llu,%s,0x%llx,%llu,0x0\n", events[i].tid, (unsigned long long)events[i].ns,
                events[i].is_alloc ? "allocate" : "free", (unsigned long long)events[i].ptr,
                (unsigned long long)events[i].size);
    if (fclose(f) != 0) fprintf(stderr, "gpool-record: write error on %s\n", path);
    if (dropped)
        fprintf(stderr, "gpool-record: %zu events beyond the first %u were not recorded\n", dropped,
                MAX_EVENTS);
}
