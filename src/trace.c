/* GPOOL_TRACE / gpool_config.trace_path: every alloc and free as an RMM replay-log row
 * (Thread,Time,Action,Pointer,Size,Stream) plus a 7th column, Kind (device, pinned or mapped on
 * allocate rows; empty on free rows, whose pointer names the block), so an application's
 * pattern replays with gpool-bench as it ran. Pointers and streams are hex, the default stream
 * 0x0. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "pool.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

gpool_status gp_trace_open(gpool_t *pool)
{
    const char *cfg_path = pool->cfg.trace_path; /* the pool's copy, NULL when unset */
    const char *path = cfg_path ? cfg_path : getenv("GPOOL_TRACE");
    if (!path || !*path) return GPOOL_OK;
    pool->trace = fopen(path, "w");
    if (!pool->trace)
        return gp_fail(GPOOL_ERR_IO, "cannot open the trace file %s%s: %s", path,
                       cfg_path ? "" : " (GPOOL_TRACE)", strerror(errno));
    fprintf(pool->trace, "Thread,Time,Action,Pointer,Size,Stream,Kind\n");
    pool->trace_t0 = now_ns();
    return GPOOL_OK;
}

void gp_trace_event(gpool_t *pool, int is_alloc, void *ptr, size_t size, gpool_stream_t stream)
{
    static const char *const kind_name[GPOOL_MEM_KIND_COUNT] = {"", "device", "pinned", "mapped"};
    const char *kind = "";
    if (is_alloc) {
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        if (gpool_get_block_desc(pool, ptr, &d) == GPOOL_OK &&
            (unsigned)d.kind < GPOOL_MEM_KIND_COUNT)
            kind = kind_name[d.kind];
        else
            gp_clear_error(); /* the allocation succeeded: leave no message behind */
    }
    long tid = (long)syscall(SYS_gettid);
    pthread_mutex_lock(&pool->trace_lock);
    /* %p would write a null stream as "(nil)" (glibc), which is not hex */
    fprintf(pool->trace, "%ld,%" PRIu64 ",%s,0x%" PRIxPTR ",%zu,0x%" PRIxPTR ",%s\n", tid,
            now_ns() - pool->trace_t0, is_alloc ? "allocate" : "free", (uintptr_t)ptr, size,
            (uintptr_t)stream, kind);
    pthread_mutex_unlock(&pool->trace_lock);
}

void gp_trace_close(gpool_t *pool)
{
    if (pool->trace) fclose(pool->trace);
    pool->trace = NULL;
}
