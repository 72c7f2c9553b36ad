/* replay.c — run a strategy over a trace, and find the smallest capacity that fits it. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile(uint32_t *v, size_t n, double q)
{
    if (!n) return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

void bench_result_free(bench_result *r)
{
    free(r->samples);
    r->samples = NULL;
    r->n_samples = 0;
}

static void progress_line(const char *what, double frac, uint64_t start, uint64_t *last)
{
    uint64_t now = bench_now_ns();
    int tty = isatty(STDERR_FILENO);
    uint64_t every = tty ? 500000000ull : 5000000000ull;
    if (now - start < 1000000000ull || (*last != start && now - *last < every)) return;
    *last = now;
    fprintf(stderr, tty ? "\r%s: %5.1f%%  %.1f s " : "%s: %.1f%% after %.1f s\n", what,
            100.0 * frac, (double)(now - start) / 1e9);
}

static void write_snapshot(bench_strategy *s, const char *path, bench_result *r, uint64_t op,
                           int failed)
{
    r->snapshot_op = op;
    r->snapshot_failed_op = failed;
    FILE *f = fopen(path, "w");
    if (!f) {
        r->snapshot = -1;
        snprintf(r->snapshot_err, sizeof r->snapshot_err, "cannot create %s", path);
        return;
    }
    int rc = s->ops->snapshot(s, f);
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        snprintf(s->err, sizeof s->err, "write error");
    }
    r->snapshot = rc == 0 ? 1 : -1;
    if (rc != 0) snprintf(r->snapshot_err, sizeof r->snapshot_err, "%s: %.200s", path, s->err);
}

int bench_replay(const bench_device *dev, const char *spec, const bench_trace *t,
                 const bench_replay_opts *o, bench_result *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->strategy, sizeof r->strategy, "%s", spec);
    bench_strategy s;
    char err[512];
    if (bench_strategy_lookup(spec, &s, err, sizeof err) != 0) {
        r->error = 1;
        snprintf(r->note, sizeof r->note, "%s", err);
        return 0;
    }
    snprintf(r->label, sizeof r->label, "%s", s.ops->label);
    const gp_driver *drv = dev->drv;

    if (o->capacity && !s.ops->host) {
        if (dev->simulated) {
            bench_sim_set_capacity(dev->ordinal, o->capacity);
        } else if (o->capacity < dev->total_mem) {
            r->error = 1;
            snprintf(r->note, sizeof r->note,
                     "--capacity %llu is below %s's %llu bytes: a real GPU's memory cannot be "
                     "limited (use the simulated driver, --device sim)",
                     (unsigned long long)o->capacity, dev->gpu_name,
                     (unsigned long long)dev->total_mem);
            return 0;
        }
    }

    CUstream streams[BENCH_MAX_STREAMS] = {0};
    for (size_t i = 1; i < t->n_streams; i++) {
        CUresult cr = drv->cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING);
        if (cr != CUDA_SUCCESS) {
            r->error = 1;
            snprintf(r->note, sizeof r->note, "cuStreamCreate failed: %s", gp_cu_name(cr));
            for (size_t j = 1; j < i; j++)
                drv->cuStreamDestroy(streams[j]);
            return 0;
        }
    }

    uint64_t sim_before = dev->simulated && !s.ops->host ? bench_sim_bytes_in_use(dev->ordinal) : 0;
    uint64_t calls_before = bench_sim_call_total();
    unsigned passes = o->passes ? o->passes : 1;
    size_t total_ops = t->n_ops * passes;
    void **ptrs = calloc(t->n_allocs ? t->n_allocs : 1, sizeof *ptrs);
    uint16_t *slot_stream = calloc(t->n_allocs ? t->n_allocs : 1, sizeof *slot_stream);
    uint32_t *times = o->time_ops ? malloc((total_ops ? total_ops : 1) * sizeof *times) : NULL;
    size_t n_times = 0;
    size_t step = 0;
    if (o->samples) {
        step = total_ops / o->samples + 1;
        r->samples = calloc(o->samples + passes + 2, sizeof *r->samples);
    }
    if (!ptrs || !slot_stream || (o->time_ops && !times) || (o->samples && !r->samples)) {
        r->error = 1;
        snprintf(r->note, sizeof r->note, "out of host memory");
        goto out_free;
    }

    int rc = s.ops->init(&s, dev);
    if (rc != BENCH_OK) {
        *(rc == BENCH_SKIP ? &r->skipped : &r->error) = 1;
        snprintf(r->note, sizeof r->note, "%s", s.err);
        if (s.state) s.ops->fini(&s);
        goto out_free;
    }

    /* the snapshot goes after the op at which the trace's live bytes first peak */
    size_t snap_op = o->snapshot && s.ops->snapshot ? bench_trace_peak_op(t) : SIZE_MAX;
    char what[300];
    snprintf(what, sizeof what, "%s on %s", spec, t->name);
    uint64_t start = bench_now_ns(), last = start, live = 0, calls_at_pass = 0;
    uint64_t by_entry_at_pass[BENCH_DRV_N] = {0};
    bench_strategy_stats st;
    int stop = 0;
    bench_lag_begin(t, streams);
    for (unsigned pass = 0; pass < passes && !stop; pass++) {
        s.ops->stats(&s, &st);
        calls_at_pass = st.driver_calls;
        if (pass == 0) r->driver_calls_init = st.driver_calls;
        memcpy(by_entry_at_pass, st.by_entry, sizeof by_entry_at_pass);
        for (size_t i = 0; i < t->n_ops; i++) {
            const bench_op *op = &t->ops[i];
            size_t gi = (size_t)pass * t->n_ops + i; /* op index over all passes */
            CUstream stream = streams[op->stream];
            if (op->kind == BENCH_OP_ALLOC) {
                r->allocs++;
                slot_stream[op->slot] = op->stream;
                if (op->size == 0) goto next; /* nothing to allocate; its free is skipped too */
                if (op->mem != BENCH_MEM_DEVICE && !s.ops->alloc_mem) {
                    r->host_skipped++; /* host memory this strategy cannot make */
                    goto next;
                }
                void *p = NULL;
                uint64_t t0 = bench_now_ns();
                rc = op->mem != BENCH_MEM_DEVICE
                         ? s.ops->alloc_mem(&s, op->size, op->mem, stream, &p)
                         : s.ops->alloc(&s, op->size, stream, &p);
                uint64_t dt = bench_now_ns() - t0;
                if (times) times[n_times++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
                if (rc == BENCH_OK) {
                    r->mem_allocs[op->mem]++;
                    ptrs[op->slot] = p;
                    live += op->size;
                    if (live > r->peak_live) r->peak_live = live;
                } else if (rc == BENCH_OOM) {
                    r->failed_allocs++;
                    if (!r->first_failure) r->first_failure = gi + 1;
                    if (o->stop_on_failure) {
                        /* the state that could not serve it says more than the peak */
                        if (snap_op != SIZE_MAX) write_snapshot(&s, o->snapshot, r, gi + 1, 1);
                        stop = 1;
                        break;
                    }
                } else {
                    *(rc == BENCH_SKIP ? &r->skipped : &r->error) = 1;
                    snprintf(r->note, sizeof r->note, "op %zu: %.400s", gi + 1, s.err);
                    stop = 1;
                    break;
                }
            } else {
                void *p = ptrs[op->slot];
                if (!p) goto next;
                ptrs[op->slot] = NULL;
                uint64_t t0 = bench_now_ns();
                rc = s.ops->free(&s, p, op->size, stream);
                uint64_t dt = bench_now_ns() - t0;
                if (times) times[n_times++] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
                r->frees++;
                live -= op->size;
                if (rc != BENCH_OK) {
                    r->error = 1;
                    snprintf(r->note, sizeof r->note, "op %zu: %.400s", gi + 1, s.err);
                    stop = 1;
                    break;
                }
            }
        next:
            bench_lag_step(t, streams, i);
            if (pass == 0 && i == snap_op) write_snapshot(&s, o->snapshot, r, gi + 1, 0);
            if (step && gi % step == 0) {
                s.ops->stats(&s, &st);
                r->samples[r->n_samples++] = (bench_sample){gi, live, st.reserved};
            }
            if (o->progress && (gi & 4095) == 0)
                progress_line(what, (double)gi / (double)total_ops, start, &last);
        }
        if (pass == 0) {
            s.ops->stats(&s, &st);
            r->peak_reserved = st.peak_reserved;
        }
        /* blocks the trace never freed, or left behind by a stop: the pass ends empty */
        for (size_t i = 0; i < t->n_allocs; i++) {
            if (!ptrs[i]) continue;
            s.ops->free(&s, ptrs[i], 0, streams[slot_stream[i]]);
            ptrs[i] = NULL;
        }
        live = 0;
        s.ops->stats(&s, &st);
        if (pass == 0) r->driver_calls_first_pass = st.driver_calls - calls_at_pass;
        for (int e = 0; pass == 0 && e < BENCH_DRV_N; e++)
            r->first_pass_by_entry[e] = st.by_entry[e] - by_entry_at_pass[e];
        r->driver_calls_last_pass = st.driver_calls - calls_at_pass;
        for (int e = 0; e < BENCH_DRV_N; e++)
            r->last_pass_by_entry[e] = st.by_entry[e] - by_entry_at_pass[e];
        r->passes = pass + 1;
        if (step)
            r->samples[r->n_samples++] = (bench_sample){(pass + 1) * t->n_ops, 0, st.reserved};
    }
    bench_lag_end(t, streams);
    r->wall_s = (double)(bench_now_ns() - start) / 1e9;
    /* a trace with host kinds (GPOOL_TRACE's Kind column): say how they were replayed */
    if (!r->error && !r->skipped && r->host_skipped)
        snprintf(r->note, sizeof r->note,
                 "%llu pinned/mapped allocation%s of the trace not replayed: %s serves device "
                 "memory only",
                 (unsigned long long)r->host_skipped, BENCH_PLURAL(r->host_skipped), s.ops->name);
    else if (!r->error && !r->skipped &&
             (t->mem_allocs[BENCH_MEM_PINNED] || t->mem_allocs[BENCH_MEM_MAPPED]))
        snprintf(r->note, sizeof r->note,
                 "replayed as traced: %llu device, %llu pinned, %llu mapped allocations",
                 (unsigned long long)r->mem_allocs[BENCH_MEM_DEVICE],
                 (unsigned long long)r->mem_allocs[BENCH_MEM_PINNED],
                 (unsigned long long)r->mem_allocs[BENCH_MEM_MAPPED]);
    if (o->progress && last != start)
        fprintf(stderr, isatty(STDERR_FILENO) ? "\r%s: done in %.1f s\n" : "%s: done in %.1f s\n",
                what, r->wall_s);
    s.ops->stats(&s, &st);
    if (st.peak_reserved > r->peak_reserved) r->peak_reserved = st.peak_reserved;
    r->driver_calls = st.driver_calls;
    if (o->snapshot && s.ops->snapshot && !r->snapshot) {
        r->snapshot = -1;
        snprintf(r->snapshot_err, sizeof r->snapshot_err, "the replay stopped before the peak");
    }
    s.ops->fini(&s);
    if (dev->simulated) {
        r->sim_calls = bench_sim_call_total() - calls_before;
        if (!s.ops->host) {
            uint64_t after = bench_sim_bytes_in_use(dev->ordinal);
            r->sim_leaked = after > sim_before ? after - sim_before : 0;
        }
    }
    if (times && n_times) {
        qsort(times, n_times, sizeof *times, cmp_u32);
        r->p50_ns = percentile(times, n_times, 0.50);
        r->p99_ns = percentile(times, n_times, 0.99);
    }
out_free:
    free(ptrs);
    free(slot_stream);
    free(times);
    for (size_t i = 1; i < t->n_streams; i++)
        drv->cuStreamDestroy(streams[i]);
    return 0;
}

/* ---- fit ---------------------------------------------------------------------------------- */

#define FIT_STEP (2 * BENCH_MIB)

/* On the simulator each fit replay runs in a child process: every replay starts from a fresh
 * process state, and a strategy that crashes is reported instead of ending the whole run.
 * GPOOL_BENCH_NOFORK=1 keeps them in-process (for a debugger). */
void bench_replay_isolated(const bench_device *dev, const char *spec, const bench_trace *t,
                           const bench_replay_opts *o, bench_result *r)
{
    const char *nofork = getenv("GPOOL_BENCH_NOFORK");
    int fds[2];
    if (!dev->simulated || (nofork && *nofork == '1') || o->samples || pipe(fds) != 0) {
        bench_replay(dev, spec, t, o, r);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        bench_replay(dev, spec, t, o, r);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        bench_result cr;
        bench_replay(dev, spec, t, o, &cr);
        const char *p = (const char *)&cr;
        size_t left = sizeof cr;
        while (left) {
            ssize_t w = write(fds[1], p, left);
            if (w <= 0) _exit(1);
            p += w;
            left -= (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    char *p = (char *)r;
    while (got < sizeof *r) {
        ssize_t n = read(fds[0], p + got, sizeof *r - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got == sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r->samples = NULL; /* not recorded in fit replays */
        r->n_samples = 0;
        return;
    }
    memset(r, 0, sizeof *r);
    snprintf(r->strategy, sizeof r->strategy, "%s", spec);
    r->error = 1;
    if (WIFSIGNALED(status))
        snprintf(r->note, sizeof r->note,
                 "the replay crashed (signal %d: %s); rerun with GPOOL_BENCH_NOFORK=1 "
                 "under a debugger",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(r->note, sizeof r->note, "the replay exited with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int fit_try(const bench_device *dev, const char *spec, const bench_trace *t, uint64_t cap,
                   bench_fit *f, bench_result *r)
{
    bench_replay_opts o = {.capacity = cap, .stop_on_failure = 1};
    bench_replay_isolated(dev, spec, t, &o, r);
    f->replays++;
    if (r->sim_leaked) {
        fprintf(stderr,
                "gpool-bench: WARNING: %s left %llu bytes of simulated device memory in use "
                "after fini (capacity %llu)\n",
                spec, (unsigned long long)r->sim_leaked, (unsigned long long)cap);
        f->leak_warned = 1;
    }
    return r->error || r->skipped ? -1 : r->failed_allocs == 0;
}

int bench_fit_run(const bench_device *dev, const char *spec, const bench_trace *t, int progress,
                  bench_fit *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->strategy, sizeof f->strategy, "%s", spec);
    /* device memory only: a trace's host rows (pinned, mapped) take no device capacity */
    f->peak_live = t->peak_device;
    f->page_bytes = dev->page_bytes ? dev->page_bytes : FIT_STEP;
    f->physical_limit = (t->peak_device + f->page_bytes - 1) / f->page_bytes * f->page_bytes;
    bench_strategy s;
    if (bench_strategy_lookup(spec, &s, f->note, sizeof f->note) != 0) {
        f->error = 1;
        return 0;
    }
    if (s.ops->host) {
        f->skipped = 1;
        snprintf(f->note, sizeof f->note, "fit measures device memory; %s uses host memory", spec);
        return 0;
    }
    if (!dev->simulated) {
        f->skipped = 1;
        snprintf(f->note, sizeof f->note,
                 "fit needs the simulated driver (a real GPU's capacity cannot be set)");
        return 0;
    }
    if (!t->peak_device) {
        f->skipped = 1;
        snprintf(f->note, sizeof f->note,
                 "the trace allocates no device memory (fit measures device capacity)");
        return 0;
    }
    uint64_t peak = t->peak_device;
    uint64_t lo = (peak + FIT_STEP - 1) / FIT_STEP * FIT_STEP; /* fails below peak */
    lo = lo >= FIT_STEP ? lo - FIT_STEP : 0;
    uint64_t hi = (4 * peak + 64 * BENCH_MIB + FIT_STEP - 1) / FIT_STEP * FIT_STEP;
    bench_result r;
    uint64_t start = bench_now_ns();
    int ok = fit_try(dev, spec, t, hi, f, &r);
    if (ok < 0) {
        *(r.skipped ? &f->skipped : &f->error) = 1;
        snprintf(f->note, sizeof f->note, "%s", r.note);
        goto out;
    }
    if (!ok) {
        snprintf(f->note, sizeof f->note, "fails even at %llu bytes (4 x peak live + 64 MiB)",
                 (unsigned long long)hi);
        goto out;
    }
    f->driver_calls = r.driver_calls;
    f->peak_reserved = r.peak_reserved;
    while (hi - lo > FIT_STEP) {
        uint64_t mid = lo + (hi - lo) / FIT_STEP / 2 * FIT_STEP;
        ok = fit_try(dev, spec, t, mid, f, &r);
        if (ok < 0) {
            f->error = 1;
            snprintf(f->note, sizeof f->note, "at capacity %llu: %.400s", (unsigned long long)mid,
                     r.note);
            goto out;
        }
        if (ok) {
            hi = mid;
            f->driver_calls = r.driver_calls;
            f->peak_reserved = r.peak_reserved;
        } else {
            lo = mid;
        }
        if (progress && bench_now_ns() - start > 1000000000ull)
            fprintf(stderr, "fit %s on %s: replay %u, between %.0f and %.0f MiB\n", spec, t->name,
                    f->replays, (double)lo / BENCH_MIB, (double)hi / BENCH_MIB);
    }
    f->min_capacity = hi;
    f->pages_above = hi >= f->physical_limit
                         ? (int64_t)((hi - f->physical_limit + f->page_bytes - 1) / f->page_bytes)
                         : -(int64_t)((f->physical_limit - hi) / f->page_bytes);
    f->ratio = peak ? (double)hi / (double)peak : 0;
    f->goal_met = (double)hi <= 1.05 * (double)peak + 4.0 * BENCH_MIB;
out:
    /* give the device its full memory back */
    bench_sim_set_capacity(dev->ordinal, dev->total_mem);
    return 0;
}
