/* GPOOL_TRACE / gpool_config.trace_path: every alloc and free as an RMM replay-log row
 * (Thread,Time,Action,Pointer,Size,Stream) plus a 7th column, Kind (device, pinned or mapped on
 * allocate rows; empty on free rows, whose pointer names the block), so an application's
 * pattern replays with gpool-bench as it ran. Pointers and streams are hex, the default stream
 * 0x0.
 *
 * Several pools (one per device under the drop-in), several processes and forked children may
 * name one path (docs/tracing.md): the file is opened for appending (O_APPEND) and each row is
 * one write() of the complete line, which the kernel appends whole at the end of the file
 * (POSIX write(): with O_APPEND "the file offset shall be set to the end of the file prior to
 * each write and no intervening file modification operation shall occur"), so no row is lost,
 * torn or written twice; nothing is buffered in the process, so a child's exit() flushes none
 * of its parent's rows. The header is written once, by the open that finds the file empty
 * (under flock, so two processes opening it at once write one header). "%p" in the path is
 * replaced by the process id: one file per process, for traces that replay one process
 * each. Time is nanoseconds since this process's first trace open, shared by its pools. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "error.h"
#include "policy.h"
#include "pool.h"

static const char trace_header[] = "Thread,Time,Action,Pointer,Size,Stream,Kind\n";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's time origin: the first trace open (every pool of the process counts from it,
 * so the rows of two devices in one file share one clock). */
static _Atomic uint64_t process_t0;

static uint64_t trace_t0(void)
{
    uint64_t t0 = atomic_load_explicit(&process_t0, memory_order_relaxed), zero = 0;
    if (t0) return t0;
    uint64_t now = now_ns();
    return atomic_compare_exchange_strong(&process_t0, &zero, now) ? now : zero;
}

/* Write all of buf (one write() unless the kernel takes less); 0 or -1. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t k = write(fd, buf, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

/* path with every "%p" replaced by the process id, into out (0, or -1 when it does not fit). */
static int expand_path(const char *path, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *s = path; *s; s++) {
        int k = s[0] == '%' && s[1] == 'p' ? snprintf(out + n, cap - n, "%ld", (long)getpid())
                                           : snprintf(out + n, cap - n, "%c", *s);
        if (k < 0 || (size_t)k >= cap - n) return -1;
        n += (size_t)k;
        if (s[0] == '%' && s[1] == 'p') s++;
    }
    out[n] = 0;
    return 0;
}

gpool_status gp_trace_open(gpool_t *pool)
{
    const char *cfg_path = pool->cfg.trace_path; /* the pool's copy, NULL when unset */
    const char *given = cfg_path ? cfg_path : getenv("GPOOL_TRACE");
    if (!given || !*given) return GPOOL_OK;
    const char *src = cfg_path ? "" : " (GPOOL_TRACE)";
    char path[4096];
    if (expand_path(given, path, sizeof path) != 0)
        return gp_fail(GPOOL_ERR_IO, "the trace path%s is too long: %.200s...", src, given);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0)
        return gp_fail(GPOOL_ERR_IO, "cannot open the trace file %s%s: %s", path, src,
                       strerror(errno));
    struct stat st;
    int ok = flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 &&
             (st.st_size > 0 || write_all(fd, trace_header, sizeof trace_header - 1) == 0);
    int err = errno;
    flock(fd, LOCK_UN);
    pool->trace = ok ? fdopen(fd, "a") : NULL; /* the handle; rows bypass its buffer */
    if (!pool->trace) {
        if (ok) err = errno;
        close(fd);
        return gp_fail(GPOOL_ERR_IO, "cannot write the trace file %s%s: %s", path, src,
                       strerror(err));
    }
    setvbuf(pool->trace, NULL, _IONBF, 0);
    pool->trace_t0 = trace_t0();
    return GPOOL_OK;
}

void gp_trace_event(gpool_t *pool, int is_alloc, void *ptr, size_t size, gpool_stream_t stream)
{
    const char *kind = "";
    if (is_alloc) {
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        if (gpool_get_block_desc(pool, ptr, &d) == GPOOL_OK &&
            (unsigned)d.kind < GPOOL_MEM_KIND_COUNT)
            kind = gp_kind_trace_name(d.kind);
        else
            gp_clear_error(); /* the allocation succeeded: leave no message behind */
    }
    long tid = (long)syscall(SYS_gettid);
    char row[256];
    /* %p would write a null stream as "(nil)" (glibc), which is not hex */
    int n = snprintf(row, sizeof row, "%ld,%" PRIu64 ",%s,0x%" PRIxPTR ",%zu,0x%" PRIxPTR ",%s\n",
                     tid, now_ns() - pool->trace_t0, is_alloc ? "allocate" : "free", (uintptr_t)ptr,
                     size, (uintptr_t)stream, kind);
    if (n <= 0 || (size_t)n >= sizeof row) return; /* cannot happen: the fields are bounded */
    /* one write() per complete row, O_APPEND: whole at the end of the file (see the top) */
    (void)write_all(fileno(pool->trace), row, (size_t)n);
}

void gp_trace_close(gpool_t *pool)
{
    if (pool->trace) fclose(pool->trace);
    pool->trace = NULL;
}
