/* trace.c — RMM replay-log parser: `Thread,Time,Action,Pointer,Size,Stream`, parsed once into
 * an op array whose frees name the slot (allocation index) they release. */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- building --------------------------------------------------------------------------- */

void bench_trace_init(bench_trace *t, const char *name)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_streams = 1; /* stream index 0 is the default stream (0x0) */
}

static int push_op(bench_trace *t, bench_op op)
{
    if (t->n_ops == t->cap_ops) {
        size_t cap = t->cap_ops ? t->cap_ops * 2 : 4096;
        bench_op *ops = realloc(t->ops, cap * sizeof *ops);
        if (!ops) return -1;
        t->ops = ops;
        t->cap_ops = cap;
    }
    t->ops[t->n_ops++] = op;
    return 0;
}

uint32_t bench_trace_add_alloc(bench_trace *t, uint64_t size, unsigned stream)
{
    bench_op op = {.size = size,
                   .slot = (uint32_t)t->n_allocs,
                   .stream = (uint8_t)stream,
                   .kind = BENCH_OP_ALLOC};
    if (push_op(t, op) != 0) t->gen_failed = 1; /* generators only: bench_workload_make says */
    t->total_bytes += size;
    t->mem_allocs[BENCH_MEM_DEVICE]++;
    return (uint32_t)t->n_allocs++;
}

void bench_trace_add_free(bench_trace *t, uint32_t slot)
{
    /* Generators free what they allocated; find the size by scanning back is too slow, so
     * the size is filled in by bench_trace_finish. */
    bench_op op = {.size = 0, .slot = slot, .stream = 0, .kind = BENCH_OP_FREE};
    if (push_op(t, op) != 0) t->gen_failed = 1;
}

int bench_trace_finish(bench_trace *t)
{
    uint64_t *sizes = calloc(t->n_allocs ? t->n_allocs : 1, sizeof *sizes);
    uint8_t *streams = calloc(t->n_allocs ? t->n_allocs : 1, sizeof *streams);
    uint8_t *mems = calloc(t->n_allocs ? t->n_allocs : 1, sizeof *mems);
    unsigned char *live = calloc(t->n_allocs ? t->n_allocs : 1, 1);
    if (!sizes || !streams || !mems || !live) {
        free(sizes);
        free(streams);
        free(mems);
        free(live);
        return -1;
    }
    uint64_t cur = 0, peak = 0, largest = 0, dev_cur = 0, dev_peak = 0;
    size_t nlive = 0;
    for (size_t i = 0; i < t->n_ops; i++) {
        bench_op *op = &t->ops[i];
        if (op->kind == BENCH_OP_ALLOC) {
            sizes[op->slot] = op->size;
            streams[op->slot] = op->stream;
            mems[op->slot] = op->mem;
            live[op->slot] = 1;
            nlive++;
            cur += op->size;
            if (cur > peak) peak = cur;
            if (op->mem == BENCH_MEM_DEVICE && (dev_cur += op->size) > dev_peak) dev_peak = dev_cur;
            if (op->size > largest) largest = op->size;
        } else {
            op->size = sizes[op->slot];
            if (op->stream == 0) op->stream = streams[op->slot];
            op->mem = mems[op->slot];
            live[op->slot] = 0;
            nlive--;
            cur -= op->size;
            if (op->mem == BENCH_MEM_DEVICE) dev_cur -= op->size;
        }
    }
    t->peak_live = peak;
    t->peak_device = dev_peak;
    t->largest = largest;
    t->unfreed = nlive;
    free(sizes);
    free(streams);
    free(mems);
    free(live);
    return 0;
}

size_t bench_trace_peak_op(const bench_trace *t)
{
    uint64_t cur = 0;
    for (size_t i = 0; i < t->n_ops; i++) {
        const bench_op *op = &t->ops[i];
        cur = op->kind == BENCH_OP_ALLOC ? cur + op->size : cur - op->size;
        if (op->kind == BENCH_OP_ALLOC && cur == t->peak_live) return i;
    }
    return 0;
}

void bench_trace_free(bench_trace *t)
{
    free(t->ops);
    t->ops = NULL;
    t->n_ops = t->cap_ops = 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

typedef struct field {
    const char *p;
    size_t n;
} field;

static field trim(const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
        n--;
    return (field){p, n};
}

static int field_is(field f, const char *s)
{
    return f.n == strlen(s) && !memcmp(f.p, s, f.n);
}

/* Decimal unsigned integer, all of the field; -1 on non-digits or overflow. */
static int parse_u64(field f, uint64_t *out)
{
    if (!f.n) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (!isdigit((unsigned char)f.p[i])) return -1;
        unsigned d = (unsigned)(f.p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -2;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int parse_hex(field f, uint64_t *out)
{
    if (f.n >= 2 && f.p[0] == '0' && (f.p[1] == 'x' || f.p[1] == 'X')) f.p += 2, f.n -= 2;
    if (!f.n || f.n > 16) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < f.n; i++) {
        int c = (unsigned char)f.p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* Time: integer nanoseconds, or RMM's "HH:MM:SS.fraction" (fraction up to 9 digits). */
static int parse_time(field f, uint64_t *ns)
{
    if (parse_u64(f, ns) == 0) return 0;
    const char *p = f.p, *end = f.p + f.n;
    uint64_t parts[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        const char *start = p;
        while (p < end && isdigit((unsigned char)*p) && p - start < 4)
            parts[k] = parts[k] * 10 + (uint64_t)(*p++ - '0');
        if (p == start) return -1;
        if (k < 2) {
            if (p == end || *p != ':') return -1;
            p++;
        }
    }
    if (parts[1] > 59 || parts[2] > 60) return -1;
    uint64_t frac = 0;
    int digits = 0;
    if (p < end && *p == '.') {
        p++;
        while (p < end && isdigit((unsigned char)*p) && digits < 9)
            frac = frac * 10 + (uint64_t)(*p++ - '0'), digits++;
        if (!digits) return -1;
    }
    if (p != end) return -1;
    for (; digits < 9; digits++)
        frac *= 10;
    *ns = ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1000000000ull + frac;
    return 0;
}

static int fail(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...)
{
    int n =
        line ? snprintf(err, errlen, "%s:%zu: ", name, line) : snprintf(err, errlen, "%s: ", name);
    if (n < 0) n = 0;
    if ((size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *base_name(const char *path, char *buf, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, len, "%s", b);
    size_t n = strlen(buf);
    if (n > 3 && !strcmp(buf + n - 3, ".gz")) buf[n -= 3] = 0;
    if (n > 4 && !strcmp(buf + n - 4, ".csv")) buf[n - 4] = 0;
    return buf;
}

/* How much of a field a message quotes: at most 64 bytes of it. */
static int shown(field fl)
{
    return (int)(fl.n > 64 ? 64 : fl.n);
}

int bench_trace_parse(const char *name, const char *text, size_t len, bench_trace *t, char *err,
                      size_t errlen)
{
    char bn[128];
    bench_trace_init(t, base_name(name, bn, sizeof bn));
    bench_map live;
    uint32_t *alloc_line = NULL; /* line of each slot's allocate row */
    uint64_t *slot_size = NULL;  /* size of each slot's allocation */
    size_t cap_lines = 0;
    if (bench_map_init(&live, 4096) != 0) return fail(err, errlen, name, 0, "out of host memory");
    int rc = -1;
    size_t line = 0;
    const char *p = text, *end = text + len;
    int saw_header = 0;
    size_t columns = 6; /* 7 with the Kind column */
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        line++;
        field row = trim(p, (size_t)(eol - p));
        p = nl ? nl + 1 : end;
        if (row.n == 0) continue; /* blank line */
        field f[8];
        size_t nf = 0;
        const char *s = row.p, *rend = row.p + row.n;
        for (;;) {
            const char *c = memchr(s, ',', (size_t)(rend - s));
            const char *fe = c ? c : rend;
            if (nf < 8) f[nf] = trim(s, (size_t)(fe - s));
            nf++;
            if (!c) break;
            s = c + 1;
        }
        if (!saw_header) {
            saw_header = 1;
            if ((nf == 6 || (nf == 7 && field_is(f[6], "Kind"))) && field_is(f[0], "Thread") &&
                field_is(f[1], "Time") && field_is(f[2], "Action") && field_is(f[3], "Pointer") &&
                field_is(f[4], "Size") && field_is(f[5], "Stream")) {
                columns = nf;
                continue;
            }
            fail(err, errlen, name, line,
                 "expected the header \"Thread,Time,Action,Pointer,Size,Stream\" (optionally "
                 "\",Kind\"), found \"%.*s\"",
                 (int)(row.n > 80 ? 80 : row.n), row.p);
            goto out;
        }
        if (nf != columns) {
            fail(err, errlen, name, line,
                 "expected %zu columns (Thread,Time,Action,Pointer,Size,Stream%s), found %zu",
                 columns, columns == 7 ? ",Kind" : "", nf);
            goto out;
        }
        uint64_t thread, ns, ptr, size, stream;
        if (parse_u64(f[0], &thread) != 0 && parse_hex(f[0], &thread) != 0) {
            fail(err, errlen, name, line, "bad thread id \"%.*s\"", shown(f[0]), f[0].p);
            goto out;
        }
        if (parse_time(f[1], &ns) != 0) {
            fail(err, errlen, name, line,
                 "bad time \"%.*s\" (expected integer nanoseconds or HH:MM:SS.us)", shown(f[1]),
                 f[1].p);
            goto out;
        }
        int is_alloc = field_is(f[2], "allocate"), is_free = field_is(f[2], "free");
        if (field_is(f[2], "allocate failure")) {
            t->skipped_failures++;
            continue;
        }
        if (!is_alloc && !is_free) {
            fail(err, errlen, name, line,
                 "unknown action \"%.*s\" (expected allocate, free or allocate failure)",
                 shown(f[2]), f[2].p);
            goto out;
        }
        if (parse_hex(f[3], &ptr) != 0) {
            fail(err, errlen, name, line, "bad pointer \"%.*s\" (expected hex)", shown(f[3]),
                 f[3].p);
            goto out;
        }
        int sr = parse_u64(f[4], &size);
        if (sr == -1) {
            fail(err, errlen, name, line, "bad size \"%.*s\" (expected a decimal byte count)",
                 shown(f[4]), f[4].p);
            goto out;
        }
        if (sr == -2 || size > BENCH_MAX_REQUEST) {
            fail(err, errlen, name, line, "size %.*s is larger than the 1 TiB any device holds",
                 shown(f[4]), f[4].p);
            goto out;
        }
        /* glibc's printf("%p") writes the null stream as "(nil)" (GPOOL_TRACE did) */
        if (field_is(f[5], "(nil)"))
            stream = 0;
        else if (parse_hex(f[5], &stream) != 0) {
            fail(err, errlen, name, line, "bad stream \"%.*s\" (expected hex)", shown(f[5]),
                 f[5].p);
            goto out;
        }
        unsigned sidx = 0;
        if (stream != 0) {
            for (sidx = 1; sidx < t->n_streams && t->streams[sidx] != stream; sidx++) {
            }
            if (sidx == t->n_streams) {
                if (t->n_streams == BENCH_MAX_STREAMS) {
                    fail(err, errlen, name, line, "more than %d distinct streams",
                         BENCH_MAX_STREAMS - 1);
                    goto out;
                }
                t->streams[t->n_streams++] = stream;
            }
        }
        int mem = BENCH_MEM_DEVICE;
        if (columns == 7 && f[6].n) {
            if (field_is(f[6], "pinned"))
                mem = BENCH_MEM_PINNED;
            else if (field_is(f[6], "mapped"))
                mem = BENCH_MEM_MAPPED;
            else if (!field_is(f[6], "device")) {
                fail(err, errlen, name, line,
                     "unknown kind \"%.*s\" (expected device, pinned, mapped or nothing)",
                     shown(f[6]), f[6].p);
                goto out;
            }
        }
        uint64_t live_slot;
        int is_live = bench_map_get(&live, ptr, &live_slot);
        bench_op op = {
            .size = size, .stream = (uint8_t)sidx, .mem = (uint8_t)mem, .thread = (uint8_t)thread};
        if (is_alloc) {
            if (is_live) {
                fail(err, errlen, name, line,
                     "allocate of pointer 0x%llx, which is still live (allocated on line %u)",
                     (unsigned long long)ptr, alloc_line[live_slot]);
                goto out;
            }
            if (t->n_allocs >= UINT32_MAX) {
                fail(err, errlen, name, line, "too many allocations");
                goto out;
            }
            if (t->n_allocs == cap_lines) {
                cap_lines = cap_lines ? cap_lines * 2 : 4096;
                uint32_t *nl2 = realloc(alloc_line, cap_lines * sizeof *nl2);
                if (nl2) alloc_line = nl2;
                uint64_t *ns2 = realloc(slot_size, cap_lines * sizeof *ns2);
                if (ns2) slot_size = ns2;
                if (!nl2 || !ns2) {
                    fail(err, errlen, name, line, "out of host memory");
                    goto out;
                }
            }
            alloc_line[t->n_allocs] = (uint32_t)line;
            slot_size[t->n_allocs] = size;
            if (bench_map_put(&live, ptr, t->n_allocs) != 0) {
                fail(err, errlen, name, line, "out of host memory");
                goto out;
            }
            op.kind = BENCH_OP_ALLOC;
            op.slot = (uint32_t)t->n_allocs++;
            t->total_bytes += size;
            t->mem_allocs[mem]++;
        } else {
            if (!is_live) {
                fail(err, errlen, name, line, "free of pointer 0x%llx, which is not live",
                     (unsigned long long)ptr);
                goto out;
            }
            uint32_t slot = (uint32_t)live_slot;
            if (slot_size[slot] != size) {
                fail(err, errlen, name, line,
                     "free of pointer 0x%llx says size %llu, but %llu was allocated (line %u)",
                     (unsigned long long)ptr, (unsigned long long)size,
                     (unsigned long long)slot_size[slot], alloc_line[slot]);
                goto out;
            }
            op.kind = BENCH_OP_FREE;
            op.slot = slot;
            bench_map_take(&live, ptr, NULL);
        }
        if (push_op(t, op) != 0) {
            fail(err, errlen, name, line, "out of host memory");
            goto out;
        }
    }
    if (!saw_header) {
        fail(err, errlen, name, 0,
             "empty file (expected the header "
             "\"Thread,Time,Action,Pointer,Size,Stream\")");
        goto out;
    }
    rc = 0;
out:
    bench_map_destroy(&live);
    if (rc == 0 && bench_trace_finish(t) != 0) {
        snprintf(err, errlen, "%s: out of host memory", name);
        rc = -1;
    }
    free(alloc_line);
    free(slot_size);
    if (rc != 0) bench_trace_free(t);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* A gzip-compressed trace is read through `gzip -dc` (no library needed): the child's output
 * comes back on a pipe; *child is its pid. */
static FILE *open_gzip(const char *path, pid_t *child)
{
    if (access(path, R_OK) != 0) return NULL; /* errno says why, as fopen would */
    int fds[2];
    if (pipe(fds) != 0) return NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO); /* our message says what failed */
        close(fds[0]);
        close(fds[1]);
        execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "rb");
    if (!f) {
        close(fds[0]);
        waitpid(pid, NULL, 0);
        return NULL;
    }
    *child = pid;
    return f;
}

int bench_trace_load(const char *path, bench_trace *t, char *err, size_t errlen)
{
    pid_t child = -1;
    FILE *f = ends_with(path, ".gz") ? open_gzip(path, &child) : fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb) free(buf);
        buf = nb;
    }
    int ioerr = ferror(f), status = 0;
    fclose(f);
    if (child > 0 && (waitpid(child, &status, 0) != child || !WIFEXITED(status))) status = -1;
    if (!buf) {
        snprintf(err, errlen, "%s: out of host memory", path);
        return -1;
    }
    if (ioerr || status != 0) {
        free(buf);
        if (ioerr)
            snprintf(err, errlen, "%s: read error", path);
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(err, errlen, "%s: cannot run gzip to decompress it", path);
        else
            snprintf(err, errlen, "%s: not a valid gzip file (gzip -dc failed)", path);
        return -1;
    }
    int rc = bench_trace_parse(path, buf, len, t, err, errlen);
    free(buf);
    return rc;
}

int bench_trace_write_csv(const bench_trace *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    static const char *const mem_name[BENCH_MEM_KINDS] = {"device", "pinned", "mapped"};
    int kinds = t->mem_allocs[BENCH_MEM_PINNED] || t->mem_allocs[BENCH_MEM_MAPPED];
    fprintf(f, "Thread,Time,Action,Pointer,Size,Stream%s\n", kinds ? ",Kind" : "");
    for (size_t i = 0; i < t->n_ops; i++) {
        const bench_op *op = &t->ops[i];
        /* synthetic, unique, 512-aligned pointers */
        fprintf(f, "0,%zu,%s,0x%llx,%llu,0x%llx%s%s\n", i,
                op->kind == BENCH_OP_ALLOC ? "allocate" : "free",
                (unsigned long long)(0x10000000000ull + (uint64_t)op->slot * 512),
                (unsigned long long)op->size, (unsigned long long)t->streams[op->stream],
                kinds ? "," : "", kinds ? mem_name[op->mem < BENCH_MEM_KINDS ? op->mem : 0] : "");
    }
    return fclose(f) == 0 ? 0 : -1;
}
