/* sim_hb.c — the happens-before checker: a shadow map of accesses to device-visible memory.
 *
 * The shadow map is a sorted array of disjoint address ranges (split on demand, merged when
 * equal; never per byte: ranges may be 100 GiB). Each range keeps its last write (stream id,
 * position) and, per stream, the last read since that write. An access by the unit of work
 * at position p of stream S, whose vector clock is C (sim_stream.c), conflicts with an earlier
 * access (T, q) when C[T] < q (no order between them) and one of the two writes. Such a pair is
 * a data race on a GPU: the two may run concurrently ("Stream synchronization behavior":
 * work on different streams may run concurrently unless ordered by events or the legacy
 * stream). cuMemFreeAsync counts as a write that ends the memory's life: a later access is a
 * use after free. Releasing memory on the host (cuMemFree, cuMemUnmap, cuMemFreeHost,
 * cuMemHostUnregister) while an access the host does not know complete remains is a
 * violation too (cuda.h: those calls release at once; only cuMemFree "may" synchronize).
 *
 * A violation is counted, described on stderr (both accesses, streams, range), appended as
 * one line to GPOOL_SIM_VIOLATION_LOG (O_APPEND: several processes can share the file) and
 * written into GPOOL_SIM_STATS; with GPOOL_SIM_STRICT=1 the first one aborts the process.
 * Nothing here runs unless memory is copied, set, touched or freed asynchronously, so
 * allocation-only workloads pay nothing.
 *
 * The map is keyed by what names the bytes: the device address, except for VMM memory, whose
 * keys are physical (store, offset: sim_phys.c), because one handle may be mapped at several
 * addresses (cuMemMap) and two mappings of it reach the same bytes. Each access remembers the
 * mapping it went through (via), so unmapping one alias checks the work queued through it. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

struct sim_acc {
    uint32_t sid;
    uint64_t pos;
    const char *what;
    uintptr_t via; /* base of the VMM mapping it went through; 0: not VMM memory */
};

struct sim_shadow {
    uintptr_t lo, hi;
    int has_write;
    int freed; /* the write is a cuMemFreeAsync */
    struct sim_acc w;
    struct sim_acc *r; /* last read per stream since the write */
    uint32_t nr;
};

static struct sim_shadow *sim_sh;
static size_t sim_nsh, sim_cap_sh;
static unsigned long sim_violations;
static int sim_strict = -1;
static const char *sim_vlog;

static void sim_hb_config(void)
{
    if (sim_strict >= 0) return;
    const char *v = getenv("GPOOL_SIM_STRICT");
    sim_strict = v && *v == '1';
    v = getenv("GPOOL_SIM_VIOLATION_LOG");
    sim_vlog = v && *v ? v : NULL;
}

int sim_hb_visible(uintptr_t p, size_t n)
{
    /* every byte in device-visible memory: cuMemAlloc memory, pinned or registered host memory,
     * VMM mappings. A range may run over several adjacent allocations, registrations or
     * mappings (one per cuMemMap): each is mapped at its own address under unified addressing,
     * so a kernel reaches all of them. */
    while (n > 0) {
        uintptr_t base;
        size_t size, left = sim_legacy_extent(p);
        if (!left) left = sim_host_extent(p);
        if (!left && sim_vmm_range(p, &base, &size)) left = size - (p - base);
        if (!left) return 0;
        if (n <= left) return 1;
        p += left;
        n -= left;
    }
    return 1;
}

void sim_hb_violation(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sim_hb_config();
    sim_violations++;
    fprintf(stderr, "gpool simulated driver: VIOLATION %lu: %s\n", sim_violations, msg);
    if (sim_vlog) {
        int fd = open(sim_vlog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[900];
            int len = snprintf(line, sizeof line, "pid %ld: %s\n", (long)getpid(), msg);
            if (len > 0) {
                ssize_t wr = write(fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line);
                (void)wr;
            }
            close(fd);
        }
    }
    if (sim_strict) {
        fprintf(stderr, "gpool simulated driver: GPOOL_SIM_STRICT=1: aborting\n");
        abort();
    }
}

unsigned long sim_hb_count(void)
{
    return sim_violations;
}

static const char *sim_kind_name(int write, int freed)
{
    return freed ? "free" : write ? "write" : "read";
}

/* first index whose range ends after p */
static size_t sim_sh_lower(uintptr_t p)
{
    size_t lo = 0, hi = sim_nsh;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sim_sh[mid].hi <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int sim_sh_insert(size_t at, const struct sim_shadow *v)
{
    if (sim_nsh == sim_cap_sh) {
        size_t cap = sim_cap_sh ? 2 * sim_cap_sh : 64;
        struct sim_shadow *n = realloc(sim_sh, cap * sizeof *n);
        if (!n) return -1;
        sim_sh = n;
        sim_cap_sh = cap;
    }
    memmove(sim_sh + at + 1, sim_sh + at, (sim_nsh - at) * sizeof *sim_sh);
    sim_sh[at] = *v;
    sim_nsh++;
    return 0;
}

static void sim_sh_remove(size_t at, size_t count)
{
    if (count == 0) return;
    for (size_t i = at; i < at + count; i++)
        free(sim_sh[i].r);
    memmove(sim_sh + at, sim_sh + at + count, (sim_nsh - at - count) * sizeof *sim_sh);
    sim_nsh -= count;
}

/* make x a range boundary */
static int sim_sh_split(uintptr_t x)
{
    size_t i = sim_sh_lower(x);
    if (i == sim_nsh || sim_sh[i].lo >= x) return 0;
    struct sim_shadow right = sim_sh[i];
    right.lo = x;
    if (right.nr) {
        right.r = malloc(right.nr * sizeof *right.r);
        if (!right.r) return -1;
        memcpy(right.r, sim_sh[i].r, right.nr * sizeof *right.r);
    } else {
        right.r = NULL;
    }
    sim_sh[i].hi = x;
    if (sim_sh_insert(i + 1, &right) != 0) {
        free(right.r);
        sim_sh[i].hi = right.hi;
        return -1;
    }
    return 0;
}

static int sim_ordered(const struct CUstream_st *s, const struct sim_acc *a)
{
    if (a->sid == s->sid) return 1;
    return (a->sid < s->nclock ? s->clock[a->sid] : 0) >= a->pos;
}

static void sim_report(const struct CUstream_st *s, uintptr_t lo, uintptr_t hi, int kind,
                       const char *what, const struct sim_acc *prior, int prior_write,
                       int prior_freed)
{
    char a[96], b[96];
    sim_stream_name(s->sid, a, sizeof a);
    sim_stream_name(prior->sid, b, sizeof b);
    const char *why = prior_freed ? (sim_ordered(s, prior) ? "use after cuMemFreeAsync"
                                                           : "access racing with cuMemFreeAsync")
                                  : "unordered accesses, one a write";
    sim_hb_violation("%s: %s (%s) on %s at position %llu and %s (%s) on %s at position %llu "
                     "overlap in [%#lx, %#lx) with no happens-before order",
                     why, sim_kind_name(kind != SIM_READ, kind == SIM_FREE), what, a,
                     (unsigned long long)s->submitted, sim_kind_name(prior_write, prior_freed),
                     prior->what, b, (unsigned long long)prior->pos, (unsigned long)lo,
                     (unsigned long)hi);
}

/* Check one shadow range against an access; returns 1 if a violation was reported (with the
 * device addresses of the range: keys minus delta). */
static int sim_check(const struct CUstream_st *s, const struct sim_shadow *sh, int kind,
                     const char *what, uintptr_t delta)
{
    if (sh->has_write && (sh->freed || !sim_ordered(s, &sh->w))) {
        sim_report(s, sh->lo - delta, sh->hi - delta, kind, what, &sh->w, 1, sh->freed);
        return 1;
    }
    if (kind == SIM_READ) return 0;
    for (uint32_t i = 0; i < sh->nr; i++) {
        if (!sim_ordered(s, &sh->r[i])) {
            sim_report(s, sh->lo - delta, sh->hi - delta, kind, what, &sh->r[i], 0, 0);
            return 1;
        }
    }
    return 0;
}

static void sim_update(struct sim_shadow *sh, const struct CUstream_st *s, int kind,
                       const char *what, uintptr_t via)
{
    struct sim_acc acc = {s->sid, s->submitted, what, via};
    if (kind != SIM_READ) {
        sh->has_write = 1;
        sh->freed = kind == SIM_FREE;
        sh->w = acc;
        sh->nr = 0;
        free(sh->r);
        sh->r = NULL;
        return;
    }
    for (uint32_t i = 0; i < sh->nr; i++) {
        if (sh->r[i].sid == s->sid) {
            sh->r[i] = acc;
            return;
        }
    }
    struct sim_acc *n = realloc(sh->r, (sh->nr + 1) * sizeof *n);
    if (!n) return; /* out of memory: this read goes unrecorded */
    sh->r = n;
    sh->r[sh->nr++] = acc;
}

static int sim_same(const struct sim_shadow *a, const struct sim_shadow *b)
{
    return a->hi == b->lo && a->nr == 0 && b->nr == 0 && a->has_write == b->has_write &&
           a->freed == b->freed && a->w.sid == b->w.sid && a->w.pos == b->w.pos &&
           a->w.what == b->w.what && a->w.via == b->w.via;
}

void sim_hb_access_key(struct CUstream_st *s, uintptr_t p, size_t n, enum sim_access kind,
                       const char *what, uintptr_t va, uintptr_t via)
{
    if (n == 0 || p + n < p) return;
    uintptr_t end = p + n;
    if (sim_sh_split(p) != 0 || sim_sh_split(end) != 0) return;
    int reported = 0;
    uintptr_t cursor = p;
    size_t i = sim_sh_lower(p);
    size_t first = i;
    while (cursor < end) {
        if (i == sim_nsh || sim_sh[i].lo > cursor) {
            uintptr_t stop = (i == sim_nsh || sim_sh[i].lo > end) ? end : sim_sh[i].lo;
            struct sim_shadow fresh = {.lo = cursor, .hi = stop};
            if (sim_sh_insert(i, &fresh) != 0) return;
        }
        struct sim_shadow *sh = &sim_sh[i];
        if (!reported) reported = sim_check(s, sh, kind, what, p - va);
        sim_update(sh, s, kind, what, via);
        cursor = sh->hi;
        i++;
    }
    /* merge equal neighbours around the range */
    size_t lo = first ? first - 1 : 0, hi = i < sim_nsh ? i : sim_nsh - 1;
    for (size_t k = hi; k > lo; k--) {
        if (sim_same(&sim_sh[k - 1], &sim_sh[k])) {
            sim_sh[k - 1].hi = sim_sh[k].hi;
            sim_sh_remove(k, 1);
        }
    }
}

/* remove the shadow of keys [p, p+n) (keep it: remove 0); with what, first check the host knows
 * every access done (only those through the mapping at via, when via is not 0); reports name
 * device addresses, keys minus delta */
static void sim_hb_drop_key(uintptr_t p, size_t n, const char *what, uintptr_t delta, uintptr_t via,
                            int remove)
{
    if (n == 0 || sim_nsh == 0) return;
    uintptr_t end = p + n < p ? UINTPTR_MAX : p + n;
    if (sim_sh_split(p) != 0 || sim_sh_split(end) != 0) return;
    size_t i = sim_sh_lower(p), j = i;
    int reported = !what;
    for (; j < sim_nsh && sim_sh[j].lo < end; j++) {
        const struct sim_shadow *sh = &sim_sh[j];
        const struct sim_acc *pending = NULL;
        int pw = 0;
        if (reported) continue;
        if (sh->has_write && !sh->freed && sim_host_clock(sh->w.sid) < sh->w.pos &&
            (!via || sh->w.via == via)) {
            pending = &sh->w;
            pw = 1;
        }
        for (uint32_t k = 0; !pending && k < sh->nr; k++)
            if (sim_host_clock(sh->r[k].sid) < sh->r[k].pos && (!via || sh->r[k].via == via))
                pending = &sh->r[k];
        if (pending) {
            char b[96];
            sim_stream_name(pending->sid, b, sizeof b);
            sim_hb_violation("%s of [%#lx, %#lx) while a %s (%s) on %s at position %llu is not "
                             "known complete",
                             what, (unsigned long)(sh->lo - delta), (unsigned long)(sh->hi - delta),
                             sim_kind_name(pw, 0), pending->what, b,
                             (unsigned long long)pending->pos);
            reported = 1;
        }
    }
    if (remove) sim_sh_remove(i, j - i);
}

void sim_hb_release(uintptr_t p, size_t n, const char *what)
{
    sim_hb_drop_key(p, n, what, 0, 0, 1);
}

void sim_hb_forget(uintptr_t p, size_t n)
{
    sim_hb_drop_key(p, n, NULL, 0, 0, 1);
}

void sim_hb_unmap_key(uintptr_t key, size_t n, uintptr_t va, uintptr_t via, int last,
                      const char *what)
{
    /* the last mapping: every access went through a mapping of this handle, and the bytes may
     * go to a new handle (sim_vmm.c recycles store offsets) with no past */
    sim_hb_drop_key(key, n, what, key - va, last ? 0 : via, last);
}

int sim_hb_freed(struct CUstream_st *s, uintptr_t p, size_t n, int *ordered)
{
    int found = 0;
    *ordered = 1;
    for (size_t i = sim_sh_lower(p); i < sim_nsh && sim_sh[i].lo < p + n; i++) {
        if (!sim_sh[i].freed) continue;
        found = 1;
        if (!sim_ordered(s, &sim_sh[i].w)) *ordered = 0;
    }
    return found;
}

void sim_hb_teardown(void)
{
    sim_sh_remove(0, sim_nsh);
    free(sim_sh);
    sim_sh = NULL;
    sim_cap_sh = 0;
}

/* ---- control API ---- */

/* A kernel on stream h reads (is_write 0) or writes the range. */
SIM_EXPORT CUresult gpoolsim_touch(CUstream h, CUdeviceptr ptr, size_t bytes, int is_write)
{
    struct CUstream_st *s;
    uintptr_t p = (uintptr_t)ptr;
    int ordered;
    sim_lock();
    CUresult rc = sim_is_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup(h, &s);
    if (rc == CUDA_SUCCESS && (bytes == 0 || p + bytes < p)) rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && sim_hb_freed(s, p, bytes, &ordered)) {
        if (ordered) rc = CUDA_ERROR_INVALID_VALUE; /* plainly unallocated now */
    } else if (rc == CUDA_SUCCESS && !sim_hb_visible(p, bytes)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) rc = sim_capture_check_legacy(s);
    if (rc == CUDA_SUCCESS && !sim_stream_submit_work(s))
        sim_hb_access(s, p, bytes, is_write ? SIM_WRITE : SIM_READ,
                      is_write ? "kernel write" : "kernel read");
    sim_unlock();
    return rc;
}

SIM_EXPORT unsigned long gpoolsim_violations(void)
{
    sim_lock();
    unsigned long n = sim_violations;
    sim_unlock();
    return n;
}
