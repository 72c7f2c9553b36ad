/* GPOOL_TRACE / gpool_config.trace_path: every alloc and free as an RMM replay-log row
 * (Thread,Time,Action,Pointer,Size,Stream), so an application's pattern can be replayed by
 * gpool-bench. */
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
    const char *path = pool->cfg.trace_path[0] ? pool->cfg.trace_path : getenv("GPOOL_TRACE");
    if (!path || !*path) return GPOOL_OK;
    pool->trace = fopen(path, "w");
    if (!pool->trace)
        return gp_fail(GPOOL_ERR_IO, "cannot open the trace file %s%s: %s", path,
                       pool->cfg.trace_path[0] ? "" : " (GPOOL_TRACE)", strerror(errno));
    fprintf(pool->trace, "Thread,Time,Action,Pointer,Size,Stream\n");
    pool->trace_t0 = now_ns();
    return GPOOL_OK;
}

void gp_trace_event(gpool_t *pool, int is_alloc, void *ptr, size_t size, gpool_stream_t stream)
{
    long tid = (long)syscall(SYS_gettid);
    pthread_mutex_lock(&pool->trace_lock);
    fprintf(pool->trace, "%ld,%" PRIu64 ",%s,%p,%zu,%p\n", tid, now_ns() - pool->trace_t0,
            is_alloc ? "allocate" : "free", ptr, size, (void *)stream);
    pthread_mutex_unlock(&pool->trace_lock);
}

void gp_trace_close(gpool_t *pool)
{
    if (pool->trace) fclose(pool->trace);
    pool->trace = NULL;
}
