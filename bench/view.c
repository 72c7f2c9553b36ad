/* view.c — read a gpool_dump_json snapshot and draw its memory map with gnuplot: one band of
 * rows per region (long regions wrap over rows of a common width), ranges coloured by state,
 * page boundaries marked, a legend with the bytes in each state and the totals in the title. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const state_names[BENCH_RANGE_STATES] = {"in_use", "cached",   "pending",
                                                            "slab",   "reserved", "other"};
/* two shades per state: neighbouring ranges of one state alternate, so blocks stay apart */
static const char *const state_colours[BENCH_RANGE_STATES][2] = {
    {"#d62728", "#f08080"}, {"#2ca02c", "#98df8a"}, {"#ff7f0e", "#ffbb78"},
    {"#1f77b4", "#aec7e8"}, {"#d9d9d9", "#e8e8e8"}, {"#9467bd", "#c5b0d5"}};

const char *bench_range_state_name(int state)
{
    return state >= 0 && state < BENCH_RANGE_STATES ? state_names[state] : "?";
}

static double mib(uint64_t b)
{
    return (double)b / (double)BENCH_MIB;
}

void bench_snapshot_free(bench_snapshot *s)
{
    for (size_t i = 0; i < s->n_regions; i++)
        free(s->regions[i].ranges);
    free(s->regions);
    memset(s, 0, sizeof *s);
}

static int add_region(bench_snapshot *s, const char *kind, const bench_json *g, char *err,
                      size_t errlen)
{
    if (!g || g->type != BENCH_JSON_OBJECT) {
        snprintf(err, errlen, "%s: a region is not an object", kind);
        return -1;
    }
    bench_snap_region *regs = realloc(s->regions, (s->n_regions + 1) * sizeof *regs);
    if (!regs) goto oom;
    s->regions = regs;
    bench_snap_region *r = &regs[s->n_regions];
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    r->base = bench_json_u64(bench_json_get(g, "base"), 0);
    r->size = bench_json_u64(bench_json_get(g, "size"), 0);
    r->page = bench_json_u64(bench_json_get(g, "page"), 0);
    r->backed_pages = bench_json_u64(bench_json_get(g, "backed_pages"), 0);
    const bench_json *ranges = bench_json_get(g, "ranges");
    if (!bench_json_get(g, "base") || !bench_json_get(g, "size") || !ranges ||
        ranges->type != BENCH_JSON_ARRAY) {
        snprintf(err, errlen, "%s region %zu: needs base, size and a ranges array", kind,
                 s->n_regions);
        return -1;
    }
    s->n_regions++;
    s->reserved += r->size;
    s->backed += r->backed_pages * r->page;
    r->ranges = calloc(ranges->n ? ranges->n : 1, sizeof *r->ranges);
    if (!r->ranges) goto oom;
    for (size_t i = 0; i < ranges->n; i++) {
        const bench_json *x = ranges->items[i];
        const bench_json *st = bench_json_get(x, "state");
        if (!bench_json_get(x, "addr") || !bench_json_get(x, "size") || !st ||
            st->type != BENCH_JSON_STRING) {
            snprintf(err, errlen, "%s region %zu range %zu: needs addr, size and state", kind,
                     s->n_regions - 1, i);
            return -1;
        }
        bench_snap_range *y = &r->ranges[r->n_ranges++];
        y->addr = bench_json_u64(bench_json_get(x, "addr"), 0);
        y->size = bench_json_u64(bench_json_get(x, "size"), 0);
        y->state = BENCH_RANGE_OTHER;
        for (int k = 0; k < BENCH_RANGE_OTHER; k++)
            if (!strcmp(st->str, state_names[k])) y->state = k;
    }
    if (bench_snap_split_reserved(r) != 0) goto oom;
    /* the drawn extent: up to the last range with memory behind it */
    uint64_t ext = r->backed_pages * r->page;
    for (size_t i = 0; i < r->n_ranges; i++) {
        const bench_snap_range *y = &r->ranges[i];
        if (y->addr < r->base || y->state == BENCH_RANGE_RESERVED) continue;
        uint64_t end = y->addr - r->base + y->size;
        if (end > ext) ext = end;
    }
    if (r->page) ext = (ext + r->page - 1) / r->page * r->page;
    r->extent = ext < r->size ? ext : r->size;
    s->undrawn += r->size - r->extent;
    for (size_t i = 0; i < r->n_ranges; i++) {
        const bench_snap_range *y = &r->ranges[i];
        if (y->addr < r->base || y->addr - r->base >= r->extent) continue;
        uint64_t off = y->addr - r->base;
        s->state_bytes[y->state] += y->size < r->extent - off ? y->size : r->extent - off;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of host memory");
    return -1;
}

static int add_regions(bench_snapshot *s, const char *kind, const bench_json *arr, char *err,
                       size_t errlen)
{
    if (!arr || arr->type != BENCH_JSON_ARRAY) return 0;
    for (size_t i = 0; i < arr->n; i++)
        if (add_region(s, kind, arr->items[i], err, errlen) != 0) return -1;
    return 0;
}

int bench_snapshot_parse(const char *name, const char *text, size_t len, bench_snapshot *s,
                         char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    char why[300];
    bench_json *root = bench_json_parse(text, len, why, sizeof why);
    if (!root) {
        snprintf(err, errlen, "%s: not JSON: %s", name, why);
        return -1;
    }
    const bench_json *arenas = bench_json_get(root, "arenas");
    if (!arenas || arenas->type != BENCH_JSON_OBJECT) {
        snprintf(err, errlen, "%s: not a gpool_dump_json snapshot (no \"arenas\" object)", name);
        bench_json_free(root);
        return -1;
    }
    const bench_json *v = bench_json_get(root, "version");
    if (v && v->type == BENCH_JSON_STRING) snprintf(s->version, sizeof s->version, "%s", v->str);
    const bench_json *stats = bench_json_get(root, "stats");
    const bench_json *total = bench_json_get(stats, "total");
    s->stats_requested = bench_json_u64(bench_json_get(total, "requested_bytes"), 0);
    s->stats_in_use = bench_json_u64(bench_json_get(total, "in_use_bytes"), 0);
    s->stats_reserved = bench_json_u64(bench_json_get(total, "reserved_bytes"), 0);
    s->stats_cached = bench_json_u64(bench_json_get(total, "cached_bytes"), 0);
    const bench_json *calls = bench_json_get(stats, "driver_calls");
    if (calls && calls->type == BENCH_JSON_OBJECT)
        for (size_t i = 0; i < calls->n; i++)
            s->driver_calls += bench_json_u64(calls->items[i], 0);
    char what[300];
    int rc = 0;
    for (size_t k = 0; k < arenas->n && rc == 0; k++) {
        const bench_json *a = arenas->items[k];
        const char *kind = arenas->keys[k];
        if (a->type == BENCH_JSON_ARRAY) { /* device: [region, ...] */
            rc = add_regions(s, kind, a, what, sizeof what);
        } else if (a->type == BENCH_JSON_OBJECT) { /* host kinds: page_arenas[].regions */
            const bench_json *pa = bench_json_get(a, "page_arenas");
            for (size_t i = 0; pa && pa->type == BENCH_JSON_ARRAY && i < pa->n && rc == 0; i++)
                rc = add_regions(s, kind, bench_json_get(pa->items[i], "regions"), what,
                                 sizeof what);
        }
    }
    bench_json_free(root);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", name, what);
        bench_snapshot_free(s);
        return -1;
    }
    return 0;
}

char *bench_read_stream(FILE *f, size_t *len, int *bad)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    *bad = ferror(f) != 0;
    *len = n;
    return buf;
}

int bench_snapshot_load(const char *path, bench_snapshot *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    size_t len = 0;
    int bad = 0;
    char *buf = bench_read_stream(f, &len, &bad);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: %s", path, bad ? "read error" : "out of host memory");
        return -1;
    }
    int rc = bench_snapshot_parse(path, buf, len, s, err, errlen);
    free(buf);
    return rc;
}

/* ---- drawing ------------------------------------------------------------------------------ */

#define VIEW_MAX_ROWS       48
#define VIEW_MAX_PAGE_MARKS 128 /* page marks per row at most; else every k-th page */

static uint64_t rows_of(const bench_snapshot *s, uint64_t w)
{
    uint64_t rows = 0;
    for (size_t i = 0; i < s->n_regions; i++)
        rows += s->regions[i].extent ? (s->regions[i].extent + w - 1) / w : 1;
    return rows;
}

/* Boxes "xlo y xlo xhi ylo yhi" (x in MiB within the row) for [off, off+len) of a region that
 * starts at row `row0`. */
static void put_span(FILE *f, uint64_t w, uint64_t row0, uint64_t off, uint64_t len, double h)
{
    while (len) {
        uint64_t row = off / w, in = off % w;
        uint64_t n = w - in < len ? w - in : len;
        double y = (double)(row0 + row);
        fprintf(f, "%.6f %.3f %.6f %.6f %.3f %.3f\n", mib(in + n / 2), y, mib(in), mib(in + n),
                y - h / 2, y + h / 2);
        off += n;
        len -= n;
    }
}

/* The map is scaled to the memory that is backed: a region is drawn as pieces, cut where a run
 * of reserved (never backed) address space of at least VIEW_GAP_PAGES pages lies inside its
 * extent. Each piece is drawn like a region of its own; labels[i] names it. */
#define VIEW_GAP_PAGES 8

typedef struct view_pieces view_pieces;
static int view_draw(const bench_snapshot *s, const bench_snapshot *full, const view_pieces *v,
                     const char *title, const char *png, char *err, size_t errlen);

struct view_pieces {
    bench_snap_region *r;
    char (*labels)[160];
    size_t n;
    uint64_t skipped; /* reserved bytes cut out */
};

static int add_piece(view_pieces *v, const bench_snap_region *r, uint64_t from, uint64_t to)
{
    bench_snap_region *nr = realloc(v->r, (v->n + 1) * sizeof *nr);
    if (!nr) return -1;
    v->r = nr;
    char(*nl)[160] = realloc(v->labels, (v->n + 1) * sizeof *nl);
    if (!nl) return -1;
    v->labels = nl;
    bench_snap_region *p = &v->r[v->n];
    *p = *r;
    p->base = r->base + from;
    p->size = p->extent = to - from;
    char sz[32], pg[32], len[32], off[32];
    bench_size_text(sz, sizeof sz, r->size);
    bench_size_text(pg, sizeof pg, r->page);
    bench_size_text(len, sizeof len, to - from);
    bench_size_text(off, sizeof off, from);
    if (from == 0)
        snprintf(v->labels[v->n], sizeof v->labels[v->n], "%s 0x%llx, %s, %s pages, %llu backed",
                 r->kind, (unsigned long long)r->base, sz, pg, (unsigned long long)r->backed_pages);
    else
        snprintf(v->labels[v->n], sizeof v->labels[v->n], "  ... +%s (%s)", off, len);
    v->n++;
    return 0;
}

static int view_cut(const bench_snapshot *s, view_pieces *v)
{
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < s->n_regions; i++) {
        const bench_snap_region *r = &s->regions[i];
        uint64_t start = 0, gap_min = r->page ? VIEW_GAP_PAGES * r->page : UINT64_MAX;
        for (size_t j = 0; j < r->n_ranges; j++) {
            const bench_snap_range *x = &r->ranges[j];
            if (x->addr < r->base || x->addr - r->base >= r->extent) continue;
            uint64_t off = x->addr - r->base;
            uint64_t end = off + x->size < r->extent ? off + x->size : r->extent;
            if (x->state != BENCH_RANGE_RESERVED || end - off < gap_min) continue;
            if (off > start && add_piece(v, r, start, off) != 0) return -1;
            v->skipped += end - off;
            start = end;
        }
        if (start < r->extent || (start == 0 && r->extent == 0))
            if (add_piece(v, r, start, r->extent) != 0) return -1;
    }
    return 0;
}

int bench_view(const bench_snapshot *full, const char *title, const char *png, char *err,
               size_t errlen)
{
    view_pieces v;
    if (view_cut(full, &v) != 0) {
        free(v.r);
        free(v.labels);
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    bench_snapshot piece_snap = *full;
    piece_snap.regions = v.r;
    piece_snap.n_regions = v.n;
    const bench_snapshot *s = &piece_snap;
    int rc = view_draw(s, full, &v, title, png, err, errlen);
    free(v.r);
    free(v.labels);
    return rc;
}

static int view_draw(const bench_snapshot *s, const bench_snapshot *full, const view_pieces *v,
                     const char *title, const char *png, char *err, size_t errlen)
{
    bench_gnuplot g;
    if (bench_gnuplot_open(&g, "view", "picture", "gpool-bench-view", "map", err, errlen) != 0)
        return -1;
    FILE *f = g.data_file;
    const char *data = g.data;
    /* row width: the smallest power of two >= the largest page (and 64 KiB) that keeps the
     * map within VIEW_MAX_ROWS rows */
    uint64_t w = 64 * BENCH_KIB;
    for (size_t i = 0; i < s->n_regions; i++)
        while (w < s->regions[i].page)
            w *= 2;
    while (w < BENCH_TIB && rows_of(s, w) > VIEW_MAX_ROWS)
        w *= 2;
    uint64_t nrows = rows_of(s, w);

    /* gnuplot data blocks: 0 region backgrounds, 1..5 the states (only the non-empty ones
     * plotted), 6 page boundaries */
    int block = 0, idx_bg = -1, idx_state[BENCH_RANGE_STATES][2], idx_pages = -1;
    uint64_t row0 = 0;
    for (size_t i = 0; i < s->n_regions; i++) {
        const bench_snap_region *r = &s->regions[i];
        put_span(f, w, row0, 0, r->extent, 0.84);
        row0 += r->extent ? (r->extent + w - 1) / w : 1;
    }
    if (s->n_regions) {
        fprintf(f, "\n\n");
        idx_bg = block++;
    }
    for (int k = 0; k < 2 * BENCH_RANGE_STATES; k++) {
        int state = k / 2, shade = k % 2;
        idx_state[state][shade] = -1;
        size_t n = 0;
        row0 = 0;
        for (size_t i = 0; i < s->n_regions; i++) {
            const bench_snap_region *r = &s->regions[i];
            size_t seq = 0; /* position in the current run of ranges in this state */
            for (size_t j = 0; j < r->n_ranges; j++) {
                const bench_snap_range *x = &r->ranges[j];
                if (x->state != state) {
                    seq = 0;
                    continue;
                }
                if (seq++ % 2 != (size_t)shade || x->addr < r->base ||
                    x->addr - r->base >= r->extent)
                    continue;
                uint64_t off = x->addr - r->base;
                uint64_t len = x->size < r->extent - off ? x->size : r->extent - off;
                put_span(f, w, row0, off, len, 0.7);
                n++;
            }
            row0 += r->extent ? (r->extent + w - 1) / w : 1;
        }
        if (n) {
            fprintf(f, "\n\n");
            idx_state[state][shade] = block++;
        }
    }
    /* page boundaries: short vertical ticks "x y 0 dy" */
    uint64_t marks_every = 1;
    size_t n_marks = 0;
    row0 = 0;
    for (size_t i = 0; i < s->n_regions; i++) {
        const bench_snap_region *r = &s->regions[i];
        if (r->page && r->page < r->extent) {
            uint64_t per_row = w / r->page, every = 1;
            while (per_row / every > VIEW_MAX_PAGE_MARKS)
                every *= 2;
            if (every > marks_every) marks_every = every;
            for (uint64_t off = r->page * every; off < r->extent; off += r->page * every) {
                if (off % w == 0) continue; /* a row start is a boundary already */
                fprintf(f, "%.6f %.3f 0 0.84\n", mib(off % w), (double)(row0 + off / w) - 0.42);
                n_marks++;
            }
        }
        row0 += r->extent ? (r->extent + w - 1) / w : 1;
    }
    if (n_marks) {
        fprintf(f, "\n\n");
        idx_pages = block++;
    }
    if (fclose(f) != 0) {
        bench_gnuplot_discard(&g);
        snprintf(err, errlen, "cannot write the map data");
        return -1;
    }

    if (bench_gnuplot_start(&g, err, errlen) != 0) return -1;
    FILE *gp = g.pipe;
    int height = 220 + 26 * (int)(nrows < 4 ? 4 : nrows);
    fprintf(gp,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) "
            "{ set terminal pngcairo size 1400,%d noenhanced font ',10' } "
            "else { set terminal png size 1400,%d noenhanced }\n",
            height, height);
    fprintf(gp, "set output '%s'\n", png);
    char wtext[32], reserved[32], backed[32], undrawn[32];
    bench_size_text(wtext, sizeof wtext, w);
    bench_size_text(undrawn, sizeof undrawn, s->undrawn + v->skipped);
    bench_size_text(reserved, sizeof reserved, s->reserved);
    bench_size_text(backed, sizeof backed, s->backed);
    fprintf(gp,
            "set title \"gpool memory map: %s (gpool %s)\\n%zu region%s, %s of address space "
            "(%s never backed, not drawn), %s backed\\nshown: in use %.1f MiB, cached %.1f MiB, "
            "pending %.1f MiB, slab %.1f MiB, reserved %.1f MiB\\npool stats: requested %.1f MiB, "
            "in use %.1f MiB, "
            "reserved %.1f MiB, cached %.1f MiB; %llu driver calls\"\n",
            title, *s->version ? s->version : "?", full->n_regions, full->n_regions == 1 ? "" : "s",
            reserved, undrawn, backed, mib(s->state_bytes[BENCH_RANGE_IN_USE]),
            mib(s->state_bytes[BENCH_RANGE_CACHED]), mib(s->state_bytes[BENCH_RANGE_PENDING]),
            mib(s->state_bytes[BENCH_RANGE_SLAB]),
            mib(s->state_bytes[BENCH_RANGE_RESERVED] > v->skipped
                    ? s->state_bytes[BENCH_RANGE_RESERVED] - v->skipped
                    : 0),
            mib(s->stats_requested), mib(s->stats_in_use), mib(s->stats_reserved),
            mib(s->stats_cached), (unsigned long long)s->driver_calls);
    fprintf(gp, "set xlabel 'offset in the row (MiB); each row is %s'\n", wtext);
    fprintf(gp, "set xrange [0:%.6f]\nset yrange [%.2f:-0.6]\n", mib(w),
            (double)(nrows ? nrows : 1) - 0.4);
    fprintf(gp, "set key outside right top\nset grid xtics\nunset mytics\nset tics nomirror\n");
    fprintf(gp, "set style fill solid 1.0 noborder\n");
    /* y tics: each region's first row */
    fprintf(gp, "set ytics (");
    row0 = 0;
    for (size_t i = 0; i < s->n_regions; i++) {
        const bench_snap_region *r = &s->regions[i];
        /* one line per label and row: labels never overlap */
        fprintf(gp, "%s\"%s\" %llu", i ? ", " : "", v->labels[i], (unsigned long long)row0);
        uint64_t rows = r->extent ? (r->extent + w - 1) / w : 1;
        uint64_t every = rows > 16 ? 8 : 4; /* offset labels on continuation rows */
        for (uint64_t k = every; k < rows; k += every) {
            char off[32];
            bench_size_text(off, sizeof off, k * w);
            fprintf(gp, ", \"+%s\" %llu", off, (unsigned long long)(row0 + k));
        }
        row0 += rows;
    }
    fprintf(gp, ")\n");
    if (!s->n_regions) {
        fprintf(gp, "set label 'no regions: the pool holds no memory' at graph 0.5,0.5 center\n");
        fprintf(gp, "plot 1/0 notitle\n");
    } else {
        fprintf(gp,
                "plot '%s' index %d using 1:2:3:4:5:6 with boxxyerror lc rgb '#d9d9d9' "
                "title 'address space'",
                data, idx_bg);
        for (int k = 0; k < BENCH_RANGE_STATES; k++) {
            int titled = 0;
            for (int shade = 0; shade < 2; shade++) {
                if (idx_state[k][shade] < 0) continue;
                fprintf(gp, ", '%s' index %d using 1:2:3:4:5:6 with boxxyerror lc rgb '%s' ", data,
                        idx_state[k][shade], state_colours[k][shade]);
                if (titled)
                    fprintf(gp, "notitle");
                else
                    fprintf(gp, "title '%s: %.2f MiB'", state_names[k], mib(s->state_bytes[k]));
                titled = 1;
            }
        }
        if (idx_pages >= 0) {
            char every[48] = "";
            if (marks_every > 1)
                snprintf(every, sizeof every, " (every %llu pages)",
                         (unsigned long long)marks_every);
            fprintf(gp,
                    ", '%s' index %d using 1:2:3:4 with vectors nohead lc rgb 'black' lw 1 "
                    "title 'page boundary%s'",
                    data, idx_pages, every);
        }
        fprintf(gp, "\n");
    }
    return bench_gnuplot_finish(&g, err, errlen);
}
