/* test_bench_parser.c — the trace parser and the synthetic workloads of gpool-bench (no driver
 * needed). Its size options use gpool's size parser: test_units.c and test_bench_cli.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/bench.h"

#define HEADER "Thread,Time,Action,Pointer,Size,Stream\n"

static int parse(const char *text, bench_trace *t, char *err)
{
    return bench_trace_parse("t.csv", text, strlen(text), t, err, 512);
}

/* Parse text expecting failure; err must start with "t.csv:LINE:" and contain `what`. */
static void expect_error(const char *text, unsigned line, const char *what)
{
    bench_trace t;
    char err[512] = "";
    cr_assert_eq(parse(text, &t, err), -1, "parsed, but expected an error about %s", what);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t.csv:%u: ", line);
    cr_assert(strncmp(err, prefix, strlen(prefix)) == 0, "error \"%s\" lacks \"%s\"", err, prefix);
    cr_assert(strstr(err, what), "error \"%s\" does not mention \"%s\"", err, what);
}

Test(bench_parser, integer_times_and_slots)
{
    const char *text = HEADER "0,0,allocate,0x10,100,0x0\n"
                              "0,5,allocate,0x20,300,0x0\n"
                              "0,9,free,0x10,100,0x0\n"
                              "0,12,allocate,0x10,50,0x0\n" /* pointer reused after its free */
                              "0,13,free,0x20,300,0x0\n"
                              "0,14,free,0x10,50,0x0\n";
    bench_trace t;
    char err[512];
    cr_assert_eq(parse(text, &t, err), 0, "%s", err);
    cr_assert_str_eq(t.name, "t");
    cr_assert_eq(t.n_ops, 6);
    cr_assert_eq(t.n_allocs, 3);
    cr_assert_eq(t.peak_live, 400);
    cr_assert_eq(t.largest, 300);
    cr_assert_eq(t.unfreed, 0);
    cr_assert_eq(t.ops[2].kind, BENCH_OP_FREE);
    cr_assert_eq(t.ops[2].slot, 0);
    cr_assert_eq(t.ops[3].slot, 2);
    cr_assert_eq(t.ops[4].slot, 1);
    cr_assert_eq(t.ops[5].slot, 2);
    cr_assert_eq(t.ops[5].size, 50);
    bench_trace_free(&t);
}

Test(bench_parser, rmm_time_format_streams_and_failures)
{
    const char *text = HEADER "7,08:23:15.123456,allocate,0x7f00,1000,0x5a\n"
                              "7,08:23:15.2,allocate failure,0x0,99999,0x5a\n"
                              "7,08:23:16.000001,allocate,0x7f80,24,0x0\n"
                              "7,08:23:16.5,free,0x7f00,1000,0x5a\r\n"
                              "\n"
                              "7,23:59:59.999999,free,0x7f80,24,0x0\n";
    bench_trace t;
    char err[512];
    cr_assert_eq(parse(text, &t, err), 0, "%s", err);
    cr_assert_eq(t.n_ops, 4);
    cr_assert_eq(t.skipped_failures, 1);
    cr_assert_eq(t.n_streams, 2);
    cr_assert_eq(t.streams[1], 0x5a);
    cr_assert_eq(t.ops[0].stream, 1);
    cr_assert_eq(t.ops[1].stream, 0);
    cr_assert_eq(t.ops[2].stream, 1);
    bench_trace_free(&t);
}

Test(bench_parser, unfreed_blocks_are_counted)
{
    bench_trace t;
    char err[512];
    cr_assert_eq(parse(HEADER "0,0,allocate,0x1,10,0x0\n0,1,allocate,0x2,20,0x0\n", &t, err), 0);
    cr_assert_eq(t.unfreed, 2);
    cr_assert_eq(t.peak_live, 30);
    bench_trace_free(&t);
}

Test(bench_parser, malformed_rows_name_their_line)
{
    expect_error("Thread,Time,Action,Pointer,Size\n", 1, "header");
    expect_error(HEADER "0,0,allocate,0x1,10,0x0\n0,1,allocate,0x2,10\n", 3, "expected 6 columns");
    expect_error(HEADER "0,0,allocate,0x1,10,0x0,extra\n", 2, "found 7");
    expect_error(HEADER "0,0,allocate,0x1,10,0x0\n0,1,realloc,0x1,10,0x0\n", 3,
                 "unknown action \"realloc\"");
    expect_error(HEADER "0,0,allocate,0x1,10,0x0\n0,1,free,0x2,10,0x0\n", 3,
                 "free of pointer 0x2, which is not live");
    expect_error(HEADER "0,0,allocate,0x1,10,0x0\n0,1,free,0x1,10,0x0\n0,2,free,0x1,10,0x0\n", 4,
                 "not live");
    expect_error(HEADER "0,0,allocate,0x1,2199023255553,0x0\n", 2, "larger than");
    expect_error(HEADER "0,0,allocate,0x1,99999999999999999999999,0x0\n", 2, "larger than");
    expect_error(HEADER "0,0,allocate,0x1,12abc,0x0\n", 2, "bad size");
    expect_error(HEADER "0,0,allocate,0x1,-5,0x0\n", 2, "bad size");
    expect_error(HEADER "0,0,allocate,zz,5,0x0\n", 2, "bad pointer");
    expect_error(HEADER "0,0,allocate,0x1,5,0xq\n", 2, "bad stream");
    expect_error(HEADER "0,yesterday,allocate,0x1,5,0x0\n", 2, "bad time");
    expect_error(HEADER "0,12:61:00.5,allocate,0x1,5,0x0\n", 2, "bad time");
    expect_error(HEADER "0,0,allocate,0x1,5,0x0\n0,1,allocate,0x1,5,0x0\n", 3,
                 "still live (allocated on line 2)");
    expect_error(HEADER "0,0,allocate,0x1,5,0x0\n0,1,free,0x1,6,0x0\n", 3, "says size 6");
}

/* A bad field is quoted up to 64 bytes: a 100,000-byte one was printed whole. */
Test(bench_parser, long_bad_fields_quoted_short)
{
    enum { LONG = 100000 };
    char *text = malloc(sizeof HEADER + LONG + 64);
    cr_assert_not_null(text);
    int n = snprintf(text, sizeof HEADER + 64, HEADER "0,0,allocate,0x1,5,");
    memset(text + n, 'z', LONG);
    strcpy(text + n + LONG, "\n");
    bench_trace t;
    char err[512] = "";
    cr_assert_eq(parse(text, &t, err), -1);
    cr_assert(strstr(err, "bad stream"), "%s", err);
    char quoted[70];
    memset(quoted, 'z', 64);
    snprintf(quoted + 64, sizeof quoted - 64, "\" (");
    cr_assert(strstr(err, quoted), "not 64 bytes of the field: %s", err);
    free(text);
}

Test(bench_parser, empty_file_is_an_error)
{
    bench_trace t;
    char err[512];
    cr_assert_eq(parse("", &t, err), -1);
    cr_assert(strstr(err, "empty file"), "%s", err);
}

Test(bench_parser, files_from_disk)
{
    bench_trace t;
    char err[512];
    cr_assert_eq(bench_trace_load("bench/traces/test/rmm-time.csv", &t, err, sizeof err), 0, "%s",
                 err);
    cr_assert_str_eq(t.name, "rmm-time");
    cr_assert_eq(t.n_allocs, 2);
    cr_assert_eq(t.skipped_failures, 1);
    cr_assert_eq(t.peak_live, 1000 + 3145728);
    bench_trace_free(&t);

    cr_assert_eq(bench_trace_load("bench/traces/test/unknown-free.csv", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "unknown-free.csv:3: free of pointer 0x2000"), "%s", err);
    cr_assert_eq(bench_trace_load("bench/traces/test/bad-columns.csv", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "bad-columns.csv:3: expected 6 columns"), "%s", err);
    cr_assert_eq(bench_trace_load("bench/traces/test/huge-size.csv", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "huge-size.csv:4: size 2199023255553"), "%s", err);
    cr_assert_eq(bench_trace_load("bench/traces/test/unknown-action.csv", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "unknown-action.csv:3: unknown action"), "%s", err);
    cr_assert_eq(bench_trace_load("bench/traces/test/no-such-file.csv", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot open"), "%s", err);
}

/* A .gz trace is read through gzip -dc: the same trace, its name without .csv.gz. */
Test(bench_parser, gzip_files)
{
    bench_trace t;
    char err[512];
    cr_assert_eq(bench_trace_load("bench/traces/test/rmm-time.csv.gz", &t, err, sizeof err), 0,
                 "%s", err);
    cr_assert_str_eq(t.name, "rmm-time");
    cr_assert_eq(t.n_allocs, 2);
    cr_assert_eq(t.skipped_failures, 1);
    cr_assert_eq(t.peak_live, 1000 + 3145728);
    bench_trace_free(&t);
    cr_assert_eq(bench_trace_load("bench/traces/test/not-gzip.csv.gz", &t, err, sizeof err), -1);
    cr_assert(strstr(err, "not-gzip.csv.gz: not a valid gzip file"), "%s", err);
    cr_assert_eq(bench_trace_load("bench/traces/test/no-such-file.csv.gz", &t, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "no-such-file.csv.gz: cannot open: No such file"), "%s", err);
}

Test(bench_parser, shipped_traces_match_their_readme)
{
    static const struct {
        const char *file;
        size_t allocs;
    } traces[] = {{"bench/traces/cnn-train.csv", 14630},
                  {"bench/traces/transformer-train.csv", 4489},
                  {"bench/traces/unet-train.csv", 16124},
                  {"bench/traces/varimg-train.csv", 44434},
                  {"bench/traces/batch-decode.csv", 42217},
                  /* bench/traces/heldout/README.md */
                  {"bench/traces/heldout/decode8.csv.gz", 80902},
                  {"bench/traces/heldout/decode-stagger.csv.gz", 53324},
                  {"bench/traces/heldout/decode-many.csv.gz", 203543},
                  {"bench/traces/heldout/decode-16b.csv.gz", 136922},
                  {"bench/traces/heldout/decode-big.csv.gz", 167672},
                  {"bench/traces/heldout/bert-vary.csv.gz", 7512},
                  {"bench/traces/heldout/gpt-train.csv.gz", 5607},
                  {"bench/traces/heldout/lstm-train.csv.gz", 9561},
                  {"bench/traces/heldout/resnet50-infer.csv.gz", 25342},
                  {"bench/traces/heldout/densenet-train.csv.gz", 59705},
                  {"bench/traces/heldout/vit-train.csv.gz", 7224}};
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        bench_trace t;
        char err[512];
        cr_assert_eq(bench_trace_load(traces[i].file, &t, err, sizeof err), 0, "%s", err);
        cr_assert_eq(t.n_allocs, traces[i].allocs, "%s", traces[i].file);
        cr_assert_eq(t.n_ops, 2 * traces[i].allocs);
        cr_assert_eq(t.unfreed, 0);
        bench_trace_free(&t);
    }
}

Test(bench_parser, write_csv_round_trips)
{
    bench_trace t, u;
    char err[512];
    cr_assert_eq(parse(HEADER "0,0,allocate,0x10,100,0x0\n0,1,allocate,0x20,7,0x9\n"
                              "0,2,free,0x10,100,0x0\n0,3,free,0x20,7,0x9\n",
                       &t, err),
                 0);
    char path[] = "/tmp/test-bench-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(bench_trace_write_csv(&t, path), 0);
    cr_assert_eq(bench_trace_load(path, &u, err, sizeof err), 0, "%s", err);
    unlink(path);
    cr_assert_eq(u.n_ops, t.n_ops);
    cr_assert_eq(u.peak_live, t.peak_live);
    cr_assert_eq(u.n_streams, 2);
    for (size_t i = 0; i < t.n_ops; i++) {
        cr_assert_eq(u.ops[i].slot, t.ops[i].slot);
        cr_assert_eq(u.ops[i].size, t.ops[i].size);
        cr_assert_eq(u.ops[i].kind, t.ops[i].kind);
    }
    bench_trace_free(&t);
    bench_trace_free(&u);
}

Test(bench_parser, workloads_are_deterministic_and_balanced)
{
    const char *names[] = {"random", "train", "frame"};
    bench_workload_opts o;
    bench_workload_defaults(&o);
    o.ops = 20000;
    o.steps = 3;
    o.frames = 20;
    for (size_t i = 0; i < 3; i++) {
        bench_trace a, b;
        char err[256];
        cr_assert(bench_is_workload(names[i]));
        cr_assert_eq(bench_workload_make(names[i], &o, &a, err, sizeof err), 0, "%s", err);
        cr_assert_eq(bench_workload_make(names[i], &o, &b, err, sizeof err), 0, "%s", err);
        cr_assert_eq(a.n_ops, b.n_ops, "%s", names[i]);
        cr_assert_eq(a.peak_live, b.peak_live, "%s", names[i]);
        cr_assert(a.peak_live > 0);
        cr_assert_eq(a.unfreed, 0, "%s leaves blocks live", names[i]);
        cr_assert_eq(a.n_ops, 2 * a.n_allocs, "%s", names[i]);
        bench_trace_free(&a);
        bench_trace_free(&b);
    }
    bench_dist d;
    const char *dists[] = {"uniform", "normal", "geometric"};
    for (size_t i = 0; i < 3; i++) {
        bench_trace t;
        char err[256];
        cr_assert_eq(bench_parse_dist(dists[i], &d), 0);
        o.dist = d;
        o.min_size = 1000;
        o.max_size = 5000;
        cr_assert_eq(bench_workload_make("random", &o, &t, err, sizeof err), 0, "%s", err);
        cr_assert(t.largest <= 5000 && t.largest >= 1000, "%s", dists[i]);
        for (size_t k = 0; k < t.n_ops; k++)
            cr_assert(t.ops[k].size >= 1000);
        bench_trace_free(&t);
    }
    cr_assert_eq(bench_parse_dist("zipf", &d), -1);
    cr_assert_not(bench_is_workload("trace.csv"));
}

Test(bench_parser, map)
{
    bench_map m;
    cr_assert_eq(bench_map_init(&m, 4), 0);
    for (uint64_t i = 0; i < 10000; i++)
        cr_assert_eq(bench_map_put(&m, i * 4096, i), 0);
    uint64_t v;
    cr_assert(bench_map_get(&m, 0, &v));
    cr_assert_eq(v, 0);
    for (uint64_t i = 0; i < 10000; i += 2)
        cr_assert(bench_map_take(&m, i * 4096, NULL));
    for (uint64_t i = 0; i < 10000; i++) {
        int present = bench_map_get(&m, i * 4096, &v);
        cr_assert_eq(present, (int)(i & 1), "key %llu", (unsigned long long)i);
        if (present) cr_assert_eq(v, i);
    }
    cr_assert_eq(m.count, 5000);
    bench_map_destroy(&m);
}

/* ---- json.c and the snapshot reader of view.c ---- */

static bench_json *json(const char *text, char *err)
{
    return bench_json_parse(text, strlen(text), err, 256);
}

Test(bench_parser, json_values)
{
    char err[256] = "";
    bench_json *j =
        json(" {\"a\": [1, -2, 3.5e2, true, false, null],\n \"big\": 18446744073709551615,"
             " \"s\": \"q\\\"\\\\\\/\\n\\u00e9\\ud83d\\ude00\", \"o\": {}, \"e\": []} ",
             err);
    cr_assert(j, "%s", err);
    cr_assert_eq(j->type, BENCH_JSON_OBJECT);
    cr_assert_eq(j->n, 5);
    const bench_json *a = bench_json_get(j, "a");
    cr_assert(a && a->type == BENCH_JSON_ARRAY && a->n == 6);
    cr_assert_eq(bench_json_u64(a->items[0], 0), 1);
    cr_assert(a->items[1]->is_int && (int64_t)a->items[1]->u == -2);
    cr_assert(!a->items[2]->is_int && a->items[2]->num == 350.0);
    cr_assert_eq(bench_json_u64(a->items[2], 0), 350);
    cr_assert(a->items[3]->type == BENCH_JSON_BOOL && a->items[3]->num == 1);
    cr_assert(a->items[4]->type == BENCH_JSON_BOOL && a->items[4]->num == 0);
    cr_assert_eq(a->items[5]->type, BENCH_JSON_NULL);
    /* integers are exact to 64 bits (addresses) */
    cr_assert_eq(bench_json_u64(bench_json_get(j, "big"), 0), UINT64_MAX);
    cr_assert_str_eq(bench_json_get(j, "s")->str, "q\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
    cr_assert_eq(bench_json_get(j, "o")->n, 0);
    cr_assert_eq(bench_json_get(j, "e")->type, BENCH_JSON_ARRAY);
    cr_assert_null(bench_json_get(j, "missing"));
    cr_assert_null(bench_json_get(a, "a")); /* not an object */
    cr_assert_eq(bench_json_u64(bench_json_get(j, "s"), 7), 7);
    bench_json_free(j);
}

Test(bench_parser, json_errors_name_line_and_column)
{
    static const struct {
        const char *text, *what;
    } bad[] = {
        {"", "line 1 col 1: unexpected end"},
        {"{\"a\":1,}", "line 1 col 8: expected a string key"},
        {"[1 2]", "line 1 col 4: expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':'"},
        {"\"abc", "unterminated string"},
        {"\"a\\qb\"", "bad escape"},
        {"\"\\u12g4\"", "bad \\u escape"},
        {"[1]\n x", "line 2 col 2: trailing characters"},
        {"{\n\"a\": nul}", "line 2 col 6: unexpected character"},
        {"\"a\nb\"", "control character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        bench_json *j = json(bad[i].text, err);
        cr_assert_null(j, "parsed \"%s\"", bad[i].text);
        cr_assert(strstr(err, bad[i].what), "\"%s\": error \"%s\" lacks \"%s\"", bad[i].text, err,
                  bad[i].what);
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[300];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    char err[256] = "";
    cr_assert_null(json(deep, err));
    cr_assert(strstr(err, "nested too deeply"), "%s", err);
}

/* A snapshot in gpool_dump_json's shape: a device region of 1 GiB reserved with 3 pages of
 * 2 MiB backed, and a host kind with its page arenas. */
#define SNAP_BASE 140000000000000ull
static const char snapshot_text[] =
    "{\"version\":\"9.9.9\",\"device\":0,\"granularity\":2097152,\"stats\":{\"total\":{"
    "\"requested_bytes\":3000000,\"in_use_bytes\":3145728,\"reserved_bytes\":6291456,"
    "\"cached_bytes\":3145728},\"driver_calls\":{\"cuMemCreate\":3,\"cuMemMap\":3,\"other\":1}},"
    "\"arenas\":{\"device\":[{\"base\":140000000000000,\"size\":1073741824,\"page\":2097152,"
    "\"backed_pages\":3,\"ranges\":["
    "{\"addr\":140000000000000,\"size\":65536,\"state\":\"slab\",\"slot_size\":256,"
    "\"slots\":256,\"live_slots\":3},"
    "{\"addr\":140000000065536,\"size\":1048576,\"state\":\"in_use\",\"requested\":1000000,"
    "\"stream\":0},"
    "{\"addr\":140000001114112,\"size\":2031616,\"state\":\"in_use\",\"requested\":2000000,"
    "\"stream\":7},"
    "{\"addr\":140000003145728,\"size\":1048576,\"state\":\"pending\"},"
    "{\"addr\":140000004194304,\"size\":1069547520,\"state\":\"cached\"}]}],"
    "\"host_pinned\":{\"page_arenas\":[{\"page\":4096,\"registrations\":1,\"numa_bound_runs\":0,"
    "\"regions\":[{\"base\":200000000000000,\"size\":1048576,\"page\":4096,\"backed_pages\":4,"
    "\"ranges\":[{\"addr\":200000000000000,\"size\":8192,\"state\":\"in_use\",\"requested\":8000,"
    "\"stream\":0},{\"addr\":200000000008192,\"size\":1040384,\"state\":\"cached\"}]}]}],"
    "\"small\":null}}}\n";

Test(bench_parser, snapshot_regions_states_and_extent)
{
    bench_snapshot s;
    char err[512] = "";
    cr_assert_eq(bench_snapshot_parse("snap.json", snapshot_text, strlen(snapshot_text), &s, err,
                                      sizeof err),
                 0, "%s", err);
    cr_assert_str_eq(s.version, "9.9.9");
    cr_assert_eq(s.n_regions, 2);
    const bench_snap_region *d = &s.regions[0], *h = &s.regions[1];
    cr_assert_str_eq(d->kind, "device");
    cr_assert_eq(d->base, SNAP_BASE);
    cr_assert_eq(d->size, 1ull << 30);
    cr_assert_eq(d->page, 2u << 20);
    cr_assert_eq(d->backed_pages, 3);
    cr_assert_eq(d->n_ranges, 6); /* the free tail split: its backed page, then reserved */
    cr_assert_eq(d->ranges[0].state, BENCH_RANGE_SLAB);
    cr_assert_eq(d->ranges[1].state, BENCH_RANGE_IN_USE);
    cr_assert_eq(d->ranges[3].state, BENCH_RANGE_PENDING);
    cr_assert_eq(d->ranges[4].state, BENCH_RANGE_CACHED);
    cr_assert_eq(d->ranges[5].state, BENCH_RANGE_RESERVED);
    cr_assert_eq(d->ranges[5].addr, SNAP_BASE + (6u << 20));
    /* the free tail is not drawn: the extent is the 3 backed pages (the pending range ends at
     * 4 MiB, inside them) */
    cr_assert_eq(d->extent, 6u << 20);
    cr_assert_str_eq(h->kind, "host_pinned");
    cr_assert_eq(h->page, 4096);
    cr_assert_eq(h->extent, 4 * 4096);
    cr_assert_eq(s.reserved, (1ull << 30) + (1u << 20));
    cr_assert_eq(s.backed, (6u << 20) + 4 * 4096);
    cr_assert_eq(s.undrawn, s.reserved - (6u << 20) - 4 * 4096);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_IN_USE], 1048576 + 2031616 + 8192);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_SLAB], 65536);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_PENDING], 1048576);
    /* cached: what lies inside the extents */
    cr_assert_eq(s.state_bytes[BENCH_RANGE_CACHED], (2u << 20) + (4 * 4096 - 8192));
    cr_assert_eq(s.stats_requested, 3000000);
    cr_assert_eq(s.stats_reserved, 6291456);
    cr_assert_eq(s.driver_calls, 7);
    cr_assert_str_eq(bench_range_state_name(BENCH_RANGE_IN_USE), "in_use");
    bench_snapshot_free(&s);
}

Test(bench_parser, snapshot_errors)
{
    bench_snapshot s;
    char err[512] = "";
    const char *not_json = "{\"arenas\":";
    cr_assert_eq(bench_snapshot_parse("x.json", not_json, strlen(not_json), &s, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "x.json: not JSON: line 1 col 11"), "%s", err);
    const char *no_arenas = "{\"stats\":{}}";
    cr_assert_eq(bench_snapshot_parse("x.json", no_arenas, strlen(no_arenas), &s, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "no \"arenas\""), "%s", err);
    const char *bad_range = "{\"arenas\":{\"device\":[{\"base\":0,\"size\":4096,\"page\":4096,"
                            "\"backed_pages\":1,\"ranges\":[{\"addr\":0,\"size\":4096}]}]}}";
    cr_assert_eq(bench_snapshot_parse("x.json", bad_range, strlen(bad_range), &s, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "device region 0 range 0: needs addr, size and state"), "%s", err);
    const char *empty = "{\"arenas\":{}}";
    cr_assert_eq(bench_snapshot_parse("x.json", empty, strlen(empty), &s, err, sizeof err), 0);
    cr_assert_eq(s.n_regions, 0);
    bench_snapshot_free(&s);
    cr_assert_eq(bench_snapshot_load("/nonexistent/s.json", &s, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot open"), "%s", err);
}
