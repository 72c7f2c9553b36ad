/* report.c — tables, JSON, CSV and gnuplot output. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double mib(uint64_t b)
{
    return (double)b / (double)BENCH_MIB;
}

static const char *status_of(const bench_result *r)
{
    return r->skipped ? "skipped" : r->error ? "error" : "ok";
}

/* What each counter of bench_drv counts, as the steady-state line names it: one entry point,
 * or a class of them (gpool_driver_call's). */
static const char *const drv_what[BENCH_DRV_N] = {
    [BENCH_DRV_MEM_ALLOC] = "cuMemAlloc",
    [BENCH_DRV_MEM_FREE] = "cuMemFree",
    [BENCH_DRV_MEM_ALLOC_ASYNC] = "cuMemAllocAsync",
    [BENCH_DRV_MEM_FREE_ASYNC] = "cuMemFreeAsync",
    [BENCH_DRV_MEM_CREATE] = "cuMemCreate",
    [BENCH_DRV_MEM_RELEASE] = "cuMemRelease",
    [BENCH_DRV_MEM_MAP] = "cuMemMap",
    [BENCH_DRV_MEM_UNMAP] = "cuMemUnmap",
    [BENCH_DRV_MEM_SET_ACCESS] = "cuMemSetAccess",
    [BENCH_DRV_ADDRESS_RESERVE] = "cuMemAddressReserve",
    [BENCH_DRV_ADDRESS_FREE] = "cuMemAddressFree",
    [BENCH_DRV_HOST] = "pinned host calls (cuMemHostAlloc/FreeHost/Register/Unregister)",
    [BENCH_DRV_EVENT] = "event calls (cuEventCreate/Record/Query/Synchronize/Destroy)",
    [BENCH_DRV_STREAM] = "stream calls (cuStreamWaitEvent/Synchronize)",
    [BENCH_DRV_OTHER] = "context and device calls (cuCtxPushCurrent/PopCurrent, queries, memsets)",
};

const char *bench_drv_class(bench_drv e)
{
    switch (e) {
    case BENCH_DRV_HOST:
        return "pinned host calls";
    case BENCH_DRV_EVENT:
        return "event calls";
    case BENCH_DRV_STREAM:
        return "stream calls";
    case BENCH_DRV_OTHER:
        return "context and device calls";
    default:
        return bench_drvcost_name(e);
    }
}

/* The last pass's driver calls by what they are ("event calls (...) 4, context ... 2"), then
 * whose they are and why, from what the trace holds. */
static void last_pass_calls(FILE *f, const bench_trace *t, const bench_result *x)
{
    const char *sep = ": ";
    for (int e = 0; e < BENCH_DRV_N; e++)
        if (x->last_pass_by_entry[e]) {
            fprintf(f, "%s%s %llu", sep, drv_what[e], (unsigned long long)x->last_pass_by_entry[e]);
            sep = ", ";
        }
    const uint64_t *by = x->last_pass_by_entry;
    uint64_t host = (uint64_t)t->mem_allocs[BENCH_MEM_PINNED] + t->mem_allocs[BENCH_MEM_MAPPED];
    uint64_t mem = 0;
    for (int e = BENCH_DRV_MEM_ALLOC; e <= BENCH_DRV_ADDRESS_FREE; e++)
        mem += by[e];
    fprintf(f,
            ".\n    These are gpool's own calls (gpool_get_stats counts them; the harness's stream "
            "creation is not among them):");
    if (by[BENCH_DRV_EVENT] && host)
        fprintf(f,
                " the trace's %llu pinned/mapped allocation%s: each host block's free is "
                "queued behind an event on every stream that may still use it (the freeing "
                "one, the allocating one if another), recorded and queried at the free;",
                (unsigned long long)host, BENCH_PLURAL(host));
    if ((by[BENCH_DRV_EVENT] || by[BENCH_DRV_STREAM]) && t->n_streams > 1)
        fprintf(f,
                " the trace's %zu streams: a block freed on one stream is given to another only "
                "after an event shows that work done, or that stream waits for it "
                "(cuStreamWaitEvent);",
                t->n_streams);
    if (by[BENCH_DRV_HOST])
        fprintf(f, " pinned host memory obtained or given back (cuMemHostAlloc/Register and their "
                   "frees): the host kinds did not keep it cached between passes;");
    if (mem)
        fprintf(f, " device memory mapped or given back in the last pass: the cache did not hold "
                   "the first pass's pages (release_threshold, trims or memory pressure);");
    if (by[BENCH_DRV_OTHER]) fprintf(f, " making the pool's context current around those calls.");
    fprintf(f, "\n");
}

void bench_print_replay_table(FILE *f, const bench_device *dev, const bench_trace *t,
                              const bench_result *r, size_t n)
{
    fprintf(f,
            "replay %s: %zu allocation%s, %zu free%s, peak live %.1f MiB, largest %.1f MiB"
            "  (device: %s)\n",
            t->name, t->n_allocs, BENCH_PLURAL(t->n_allocs), t->n_ops - t->n_allocs,
            BENCH_PLURAL(t->n_ops - t->n_allocs), mib(t->peak_live), mib(t->largest), dev->name);
    unsigned passes = 1;
    int sw = 24; /* the strategy column: as wide as the longest name */
    for (size_t i = 0; i < n; i++) {
        if (r[i].passes > passes) passes = r[i].passes;
        if ((int)strlen(r[i].strategy) > sw) sw = (int)strlen(r[i].strategy);
    }
    if (passes > 1)
        fprintf(f,
                "%u passes over the trace in one instance per strategy (each pass ends with "
                "everything freed); allocs and times cover all passes\n",
                passes);
    fprintf(f, "%-*s %9s %7s %10s %10s %8s %9s %10s", sw, "strategy", "allocs", "failed",
            "live MiB", "reserv MiB", "res/live", "drv init", "drv replay");
    if (passes > 1) fprintf(f, " %13s", "drv last pass");
    fprintf(f, " %8s %8s\n", "p50 ns", "p99 ns");
    for (size_t i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        if (x->skipped || x->error) {
            fprintf(f, "%-*s %s: %s\n", sw, x->strategy, status_of(x), x->note);
            continue;
        }
        fprintf(f, "%-*s %9llu %7llu %10.1f %10.1f %8.3f %9llu %10llu", sw, x->strategy,
                (unsigned long long)x->allocs, (unsigned long long)x->failed_allocs,
                mib(x->peak_live), mib(x->peak_reserved),
                x->peak_live ? (double)x->peak_reserved / (double)x->peak_live : 0.0,
                (unsigned long long)x->driver_calls_init,
                (unsigned long long)(x->driver_calls - x->driver_calls_init));
        if (passes > 1) fprintf(f, " %13llu", (unsigned long long)x->driver_calls_last_pass);
        fprintf(f, " %8.0f %8.0f\n", x->p50_ns, x->p99_ns);
        if (x->sim_leaked)
            fprintf(f,
                    "%-*s WARNING: %llu bytes of simulated device memory still in use after "
                    "fini\n",
                    sw, "", (unsigned long long)x->sim_leaked);
    }
    fprintf(f,
            "drv init: driver calls creating the strategy's instance (before the first "
            "operation); drv replay: driver calls while replaying the trace, %s, end-of-pass "
            "frees included%s\n",
            passes > 1 ? "all passes" : "the one pass",
            passes > 1 ? "; drv last pass: those of the last pass alone (0: steady state)" : "");
    for (size_t i = 0; i < n; i++)
        if (!r[i].skipped && !r[i].error)
            fprintf(f, "  %s: %s%s%s\n", r[i].strategy, r[i].label, r[i].note[0] ? "; " : "",
                    r[i].note);
    for (size_t i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        if (x->skipped || x->error || strncmp(x->strategy, "gpool", 5) != 0 || x->passes < 2)
            continue;
        fprintf(f,
                "  steady state: %s made %llu driver call%s in the last of %u passes (goal 0: %s)",
                x->strategy, (unsigned long long)x->driver_calls_last_pass,
                BENCH_PLURAL(x->driver_calls_last_pass), x->passes,
                x->driver_calls_last_pass == 0 ? "met" : "NOT met");
        if (x->driver_calls_last_pass)
            last_pass_calls(f, t, x);
        else
            fprintf(f, "\n");
    }
    if (t->skipped_failures)
        fprintf(f, "  (%zu \"allocate failure\" row%s skipped)\n", t->skipped_failures,
                BENCH_PLURAL(t->skipped_failures));
}

static void json_trace(FILE *f, const bench_trace *t)
{
    fprintf(f, "{\"name\":");
    bench_json_string(f, t->name);
    fprintf(f,
            ",\"ops\":%zu,\"allocs\":%zu,\"peak_live_bytes\":%llu,\"largest_bytes\":%llu,"
            "\"skipped_failure_rows\":%zu}",
            t->n_ops, t->n_allocs, (unsigned long long)t->peak_live, (unsigned long long)t->largest,
            t->skipped_failures);
}

void bench_print_replay_json(FILE *f, const bench_device *dev, const bench_trace *t,
                             const bench_result *r, size_t n)
{
    fprintf(f, "{\"command\":\"replay\",\"device\":");
    bench_json_string(f, dev->name);
    fprintf(f, ",\"trace\":");
    json_trace(f, t);
    fprintf(f, ",\"strategies\":[");
    for (size_t i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        fprintf(f, "%s{\"strategy\":", i ? "," : "");
        bench_json_string(f, x->strategy);
        fprintf(f, ",\"label\":");
        bench_json_string(f, x->label);
        fprintf(f, ",\"status\":\"%s\",\"note\":", status_of(x));
        bench_json_string(f, x->note);
        fprintf(f,
                ",\"allocs\":%llu,\"failed_allocs\":%llu,\"frees\":%llu,\"peak_live_bytes\":%llu,"
                "\"peak_reserved_bytes\":%llu,\"passes\":%u,\"driver_calls\":%llu,"
                "\"driver_calls_first_pass\":%llu,\"driver_calls_last_pass\":%llu,"
                "\"sim_driver_calls\":%llu,"
                "\"sim_bytes_leaked\":%llu",
                (unsigned long long)x->allocs, (unsigned long long)x->failed_allocs,
                (unsigned long long)x->frees, (unsigned long long)x->peak_live,
                (unsigned long long)x->peak_reserved, x->passes,
                (unsigned long long)x->driver_calls, (unsigned long long)x->driver_calls_first_pass,
                (unsigned long long)x->driver_calls_last_pass, (unsigned long long)x->sim_calls,
                (unsigned long long)x->sim_leaked);
        fprintf(f, ",\"driver_calls_init\":%llu,\"last_pass_by_entry\":{",
                (unsigned long long)x->driver_calls_init);
        for (int e = 0, k = 0; e < BENCH_DRV_N; e++)
            if (x->last_pass_by_entry[e])
                fprintf(f, "%s\"%s\":%llu", k++ ? "," : "", bench_drvcost_name((bench_drv)e),
                        (unsigned long long)x->last_pass_by_entry[e]);
        fprintf(f, "}");
        bench_json_number(f, "p50_ns", 0, x->p50_ns);
        bench_json_number(f, "p99_ns", 0, x->p99_ns);
        bench_json_number(f, "wall_s", 3, x->wall_s);
        if (x->snapshot) {
            fprintf(f, ",\"snapshot\":");
            if (x->snapshot > 0)
                fprintf(f, "\"written\",\"snapshot_op\":%llu,\"snapshot_at\":\"%s\"",
                        (unsigned long long)x->snapshot_op,
                        x->snapshot_failed_op ? "failed_alloc" : "peak_live");
            else
                bench_json_string(f, x->snapshot_err);
        }
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

static void csv_field(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int bench_write_replay_csv(const char *path, const bench_device *dev, const bench_trace *t,
                           const bench_result *r, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "device,trace,strategy,status,allocs,failed_allocs,peak_live_bytes,"
               "peak_reserved_bytes,driver_calls,p50_ns,p99_ns,note,passes,"
               "driver_calls_first_pass,driver_calls_last_pass,driver_calls_init\n");
    for (size_t i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        csv_field(f, dev->name);
        fputc(',', f);
        csv_field(f, t->name);
        fputc(',', f);
        csv_field(f, x->strategy);
        fprintf(f, ",%s,%llu,%llu,%llu,%llu,%llu,%.0f,%.0f,", status_of(x),
                (unsigned long long)x->allocs, (unsigned long long)x->failed_allocs,
                (unsigned long long)x->peak_live, (unsigned long long)x->peak_reserved,
                (unsigned long long)x->driver_calls, x->p50_ns, x->p99_ns);
        csv_field(f, x->note);
        fprintf(f, ",%u,%llu,%llu,%llu\n", x->passes,
                (unsigned long long)x->driver_calls_first_pass,
                (unsigned long long)x->driver_calls_last_pass,
                (unsigned long long)x->driver_calls_init);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int bench_plot(const char *png, const bench_device *dev, const bench_trace *t,
               const bench_result *r, size_t n, char *err, size_t errlen)
{
    bench_gnuplot g;
    if (bench_gnuplot_open(&g, "--plot", "plot", "gpool-bench-plot", "plot", err, errlen) != 0)
        return -1;
    FILE *f = g.data_file;
    const char *data = g.data;
    /* one gnuplot data block per strategy: op, live MiB, reserved MiB */
    size_t blocks = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].skipped || r[i].error || !r[i].n_samples) continue;
        for (size_t k = 0; k < r[i].n_samples; k++)
            fprintf(f, "%llu %.3f %.3f\n", (unsigned long long)r[i].samples[k].op,
                    mib(r[i].samples[k].live), mib(r[i].samples[k].reserved));
        fprintf(f, "\n\n");
        blocks++;
    }
    fclose(f);
    if (!blocks) {
        bench_gnuplot_discard(&g);
        snprintf(err, errlen, "nothing to plot");
        return -1;
    }
    if (bench_gnuplot_start(&g, err, errlen) != 0) return -1;
    FILE *gp = g.pipe;
    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) "
                "{ set terminal pngcairo size 1200,700 noenhanced } "
                "else { set terminal png size 1200,700 noenhanced }\n");
    fprintf(gp, "set output '%s'\n", png);
    fprintf(gp, "set title '%s: reserved vs live bytes (device: %s)'\n", t->name, dev->name);
    /* the legend outside the data, right of the plot; live bytes a wide pale band under the
     * curves, each strategy its own colour and dash pattern drawn thin over it, so curves that
     * coincide (cuda's reserved is its live bytes) all stay visible */
    fprintf(gp, "set xlabel 'operation'\nset ylabel 'MiB'\nset key outside right top\nset grid\n"
                "set offsets 0, 0, graph 0.05, 0\n");
    static const char *const colours[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    fprintf(gp, "plot '%s' index 0 using 1:2 with lines lw 6 lc rgb '#c8c8c8' title 'live'", data);
    size_t idx = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].skipped || r[i].error || !r[i].n_samples) continue;
        fprintf(gp,
                ", '%s' index %zu using 1:3 with lines lw 1.5 dt %zu lc rgb '%s' "
                "title 'reserved: %s'",
                data, idx, idx % 5 + 1, colours[idx % 8], r[i].strategy);
        idx++;
    }
    fprintf(gp, "\n");
    return bench_gnuplot_finish(&g, err, errlen);
}

static void fit_waste_json(FILE *f, const bench_fit_waste *w)
{
    if (!w->measured) {
        fprintf(f, ",\"waste_at_peak\":null");
        return;
    }
    fprintf(f,
            ",\"waste_at_peak\":{\"backed_bytes\":%llu,\"size_class_step_bytes\":%llu,"
            "\"slab_free_bytes\":%llu,\"tail_bytes\":%llu,\"hole_bytes\":%llu,"
            "\"pending_bytes\":%llu}",
            (unsigned long long)w->backed, (unsigned long long)w->step,
            (unsigned long long)w->slab_free, (unsigned long long)w->tails,
            (unsigned long long)w->holes, (unsigned long long)w->pending);
}

static void fit_fail_json(FILE *f, const bench_fit_fail *x)
{
    if (!x->measured) {
        fprintf(f, ",\"at_failure\":null");
        return;
    }
    fprintf(f,
            ",\"at_failure\":{\"capacity_bytes\":%llu,\"request_bytes\":%llu,"
            "\"backed_pages\":%llu,\"partial_pages\":%llu,\"partial_free_bytes\":%llu,"
            "\"idle_pages\":%llu}",
            (unsigned long long)x->capacity, (unsigned long long)x->request,
            (unsigned long long)x->backed_pages, (unsigned long long)x->partial_pages,
            (unsigned long long)x->partial_free, (unsigned long long)x->idle_pages);
}

void bench_print_fit(FILE *f, const bench_device *dev, const bench_trace *t, const bench_fit *x,
                     int json)
{
    if (json) {
        fprintf(f, "{\"command\":\"fit\",\"device\":");
        bench_json_string(f, dev->name);
        fprintf(f, ",\"trace\":");
        json_trace(f, t);
        fprintf(f, ",\"strategy\":");
        bench_json_string(f, x->strategy);
        fprintf(f, ",\"status\":\"%s\",\"note\":",
                x->skipped        ? "skipped"
                : x->error        ? "error"
                : x->min_capacity ? "ok"
                                  : "no_fit");
        bench_json_string(f, x->note);
        fprintf(f, ",\"min_capacity_bytes\":%llu,\"peak_live_bytes\":%llu",
                (unsigned long long)x->min_capacity, (unsigned long long)x->peak_live);
        bench_json_number(f, "ratio", 4, x->ratio);
        fprintf(f, ",\"page_bytes\":%llu,\"physical_limit_bytes\":%llu,\"pages_above_limit\":",
                (unsigned long long)x->page_bytes, (unsigned long long)x->physical_limit);
        if (x->min_capacity)
            fprintf(f, "%lld", (long long)x->pages_above);
        else
            fprintf(f, "null");
        fprintf(f,
                ",\"goal_bytes\":%.0f,\"goal_met\":%s,\"driver_calls\":%llu,"
                "\"peak_reserved_bytes\":%llu,\"replays\":%u,\"leak_warning\":%s",
                1.05 * (double)x->peak_live + 4.0 * BENCH_MIB, x->goal_met ? "true" : "false",
                (unsigned long long)x->driver_calls, (unsigned long long)x->peak_reserved,
                x->replays, x->leak_warned ? "true" : "false");
        fit_waste_json(f, &x->waste);
        fit_fail_json(f, &x->fail);
        fprintf(f, "}\n");
        return;
    }
    fprintf(f, "fit %s on %s (device: %s)\n", x->strategy, t->name, dev->name);
    if (x->skipped || x->error) {
        fprintf(f, "  %s: %s\n", x->skipped ? "skipped" : "error", x->note);
        return;
    }
    fprintf(f, "  peak_live_bytes     %llu (%.1f MiB)\n", (unsigned long long)x->peak_live,
            mib(x->peak_live));
    if (!x->min_capacity) {
        fprintf(f, "  min_capacity_bytes  not found: %s\n", x->note);
        return;
    }
    fprintf(f, "  min_capacity_bytes  %llu (%.1f MiB)\n", (unsigned long long)x->min_capacity,
            mib(x->min_capacity));
    fprintf(f, "  ratio               %.4f\n", x->ratio);
    fprintf(f, "  physical_limit      %llu (%.1f MiB, %llu page%s of %.1f MiB)\n",
            (unsigned long long)x->physical_limit, mib(x->physical_limit),
            (unsigned long long)(x->physical_limit / x->page_bytes),
            BENCH_PLURAL(x->physical_limit / x->page_bytes), mib(x->page_bytes));
    fprintf(f, "  pages_above_limit   %lld (min capacity - physical limit, in pages)\n",
            (long long)x->pages_above);
    fprintf(f, "  goal (<= 1.05 x peak + 4 MiB = %.1f MiB): %s\n",
            mib((uint64_t)(1.05 * (double)x->peak_live)) + 4.0, x->goal_met ? "met" : "NOT met");
    fprintf(f, "  driver calls at min %llu, peak reserved %.1f MiB, %u replay%s\n",
            (unsigned long long)x->driver_calls, mib(x->peak_reserved), x->replays,
            BENCH_PLURAL(x->replays));
    const bench_fit_waste *w = &x->waste;
    if (w->measured)
        fprintf(f,
                "  at the peak        backed %.1f MiB, live %.1f MiB; not live: tails %.2f MiB, "
                "holes %.2f MiB, slabs' free slots %.2f MiB, size-class steps %.2f MiB, pending "
                "%.2f MiB (tails: free bytes after a block in its last page; a snapshot at the "
                "trace's peak in a replay at the min capacity)\n",
                mib(w->backed), mib(x->peak_live), mib(w->tails), mib(w->holes), mib(w->slab_free),
                mib(w->step), mib(w->pending));
    const bench_fit_fail *y = &x->fail;
    if (y->measured)
        fprintf(f,
                "  at the failure     a request of %.2f MiB at %.1f MiB (min capacity - 1 page) "
                "found %llu backed page%s: %llu partly used (%.2f MiB free in them), %llu "
                "holding nothing (pages of a multi-page handle partly in use)\n",
                mib(y->request), mib(y->capacity), (unsigned long long)y->backed_pages,
                BENCH_PLURAL(y->backed_pages), (unsigned long long)y->partial_pages,
                mib(y->partial_free), (unsigned long long)y->idle_pages);
}
