/* Structs that grow (issue 14; gpool.h, "Structs that grow"): every public struct carries
 * struct_size, and a call reads and writes only that many bytes. A caller compiled against an
 * older header is played here by test-local copies of smaller layouts (what a 0.2 caller's
 * struct would be to a later library), each followed by guard bytes the library must neither
 * read nor write; a newer caller by a larger struct. Bad sizes fail with INVALID_ARG and a
 * message naming the struct and its initializer, and leave the pool usable. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpool.h"
#include "util_pool.h"

#define GUARD 0xA5

/* An "older" gpool_config: the 0.2 layout cut after tcache_bytes. */
typedef struct old_config {
    size_t struct_size;
    int device;
    size_t release_threshold;
    size_t tcache_bytes;
} old_config;
_Static_assert(sizeof(old_config) == offsetof(gpool_config, small_max), "old_config is a prefix");

/* An "older" gpool_stats: the totals and per-kind counters only. */
typedef struct old_stats {
    size_t struct_size;
    gpool_kind_stats kind[GPOOL_MEM_KIND_SLOTS];
} old_stats;
_Static_assert(sizeof(old_stats) == offsetof(gpool_stats, driver_calls), "old_stats is a prefix");

/* An "older" gpool_block_desc: up to the block's size. */
typedef struct old_block_desc {
    size_t struct_size;
    gpool_mem_kind kind;
    gpool_usage usage;
    size_t requested_size;
    size_t size;
} old_block_desc;
_Static_assert(sizeof(old_block_desc) == offsetof(gpool_block_desc, page_size),
               "old_block_desc is a prefix");

/* An "older" gpool_alloc_params: kind and usage only. */
typedef struct old_alloc_params {
    size_t struct_size;
    gpool_mem_kind kind;
    gpool_usage usage;
} old_alloc_params;
_Static_assert(sizeof(old_alloc_params) == offsetof(gpool_alloc_params, alignment),
               "old_alloc_params is a prefix");

static int guard_intact(const unsigned char *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != GUARD) return 0;
    return 1;
}

Test(structs, initializers_set_struct_size)
{
    gpool_config c = GPOOL_CONFIG_INIT;
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(c.struct_size, sizeof c);
    cr_assert_eq(p.struct_size, sizeof p);
    cr_assert_eq(s.struct_size, sizeof s);
    cr_assert_eq(d.struct_size, sizeof d);
    /* GPOOL_CONFIG_INIT holds the same values as gpool_config_default() */
    gpool_config def;
    memset(&def, 0, sizeof def);
    cr_assert_eq(gpool_config_default(&def), GPOOL_OK);
    /* struct_size 0 is taken as the 0.2 layout: in 0.2, this header's */
    cr_assert_eq(def.struct_size, sizeof(gpool_config), "struct_size 0: the 0.2 layout");
    cr_assert_eq(def.tcache_bytes, c.tcache_bytes);
    cr_assert_eq(def.small_max, c.small_max);
    cr_assert_eq(def.device, c.device);
    cr_assert_null(def.trace_path);
    cr_assert_null(c.trace_path);
}

Test(structs, older_config_is_read_and_written_only_up_to_its_size)
{
    struct {
        old_config c;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    buf.c.struct_size = sizeof buf.c;
    /* the function (in parentheses: not the header's macro, which passes this header's size) */
    cr_assert_eq((gpool_config_default)((gpool_config *)&buf.c), GPOOL_OK, "%s",
                 gpool_last_error());
    /* a caller built with that older header: its macro passes its own sizeof */
    memset(&buf, GUARD, sizeof buf);
    cr_assert_eq(gpool_config_default_sized((gpool_config *)&buf.c, sizeof buf.c), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(buf.c.struct_size, sizeof buf.c);
    cr_assert_eq(buf.c.struct_size, sizeof buf.c, "struct_size is kept");
    cr_assert_eq(buf.c.device, 0);
    cr_assert_eq(buf.c.release_threshold, 0);
    cr_assert_eq(buf.c.tcache_bytes, (size_t)1 << 20);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard), "gpool_config_default wrote past");

    cr_assert_eq(gpool_config_parse((gpool_config *)&buf.c, "tcache_bytes=64K,device=0"), GPOOL_OK,
                 "%s", gpool_last_error());
    cr_assert_eq(buf.c.tcache_bytes, (size_t)64 << 10);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard), "gpool_config_parse wrote past");

    /* a key whose field the older struct lacks: refused, nothing changed */
    old_config before = buf.c;
    cr_assert_eq(gpool_config_parse((gpool_config *)&buf.c, "tcache_bytes=8K,small_max=4K"),
                 GPOOL_ERR_CONFIG);
    cr_assert(strstr(gpool_last_error(), "small_max: not in the caller"), "%s", gpool_last_error());
    cr_assert_eq(memcmp(&before, &buf.c, sizeof before), 0);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard));

    /* gpool_create reads only the older struct: the guard bytes, read as small_max, would be
     * refused (0xA5A5... is far above the limit) */
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create((const gpool_config *)&buf.c, &pool), GPOOL_OK, "%s",
                 gpool_last_error());
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 1000, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* A program built against 0.2.0 (gpool_config ends at peer_access) running on this library: its
 * config gets the default stream_reuse, and a GPOOL_CONF string setting stream_reuse is refused
 * with a message naming that key (not quoting the whole string). */
Test(structs, config_of_0_2_0_gets_the_default_stream_reuse_and_names_the_key_it_lacks)
{
    size_t size02 = offsetof(gpool_config, peer_access) + sizeof(int);
    size02 = (size02 + _Alignof(size_t) - 1) / _Alignof(size_t) * _Alignof(size_t);
    cr_assert_lt(size02, sizeof(gpool_config), "stream_reuse is past the 0.2.0 layout");
    struct {
        unsigned char c[sizeof(gpool_config)];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    gpool_config *c = (gpool_config *)buf.c;
    cr_assert_eq(gpool_config_default_sized(c, size02), GPOOL_OK, "%s", gpool_last_error());
    cr_assert(guard_intact(buf.c + size02, sizeof buf - size02), "wrote past the 0.2.0 layout");
    cr_assert_eq(gpool_config_parse(c, "release_threshold=1M,stream_reuse=events"),
                 GPOOL_ERR_CONFIG);
    const char *msg = gpool_last_error();
    cr_assert(strstr(msg, "stream_reuse") && !strstr(msg, "release_threshold"),
              "the message names the key the older struct lacks, only it: %s", msg);
    cr_assert(guard_intact(buf.c + size02, sizeof buf - size02));
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(c, &pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(structs, older_stats_get_only_their_bytes)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 3 * MiB, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    struct {
        old_stats s;
        unsigned char guard[256];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    buf.s.struct_size = sizeof buf.s;
    cr_assert_eq((gpool_get_stats)(pool, (gpool_stats *)&buf.s), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(buf.s.struct_size, sizeof buf.s);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard), "gpool_get_stats wrote past");
    gpool_stats full = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &full), GPOOL_OK);
    cr_assert_eq(buf.s.kind[GPOOL_MEM_DEVICE].live_blocks, 1);
    cr_assert_eq(buf.s.kind[GPOOL_MEM_DEVICE].requested_bytes,
                 full.kind[GPOOL_MEM_DEVICE].requested_bytes);
    for (int k = GPOOL_MEM_KIND_COUNT; k < GPOOL_MEM_KIND_SLOTS; k++)
        cr_assert_eq(full.kind[k].allocs, 0, "unused kind slots read 0");
    for (int i = GPOOL_DRV_COUNT; i < GPOOL_DRV_SLOTS; i++)
        cr_assert_eq(full.driver_calls[i], 0, "unused driver-call slots read 0");

    memset(&buf, GUARD, sizeof buf);
    buf.s.struct_size = sizeof buf.s;
    cr_assert_eq((gpool_calculate_stats)(pool, (gpool_stats *)&buf.s), GPOOL_OK);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard), "gpool_calculate_stats wrote past");
    cr_assert_eq(buf.s.kind[GPOOL_MEM_DEVICE].live_blocks, 1);

    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(structs, older_block_desc_gets_only_its_bytes)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 5000, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    struct {
        old_block_desc d;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    buf.d.struct_size = sizeof buf.d;
    cr_assert_eq((gpool_get_block_desc)(pool, p, (gpool_block_desc *)&buf.d), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(buf.d.struct_size, sizeof buf.d);
    cr_assert_eq(buf.d.kind, GPOOL_MEM_DEVICE);
    cr_assert_eq(buf.d.requested_size, 5000);
    cr_assert_geq(buf.d.size, 5000);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard), "gpool_get_block_desc wrote past");
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(structs, older_alloc_params_default_the_rest)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    struct {
        old_alloc_params a;
        unsigned char guard[64];
    } buf;
    /* the guard bytes, read as alignment, page_size and flags, would be refused */
    memset(&buf, GUARD, sizeof buf);
    buf.a.struct_size = sizeof buf.a;
    buf.a.kind = GPOOL_MEM_HOST_PINNED;
    buf.a.usage = GPOOL_USAGE_STAGING;
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4096, (const gpool_alloc_params *)&buf.a, &p), GPOOL_OK, "%s",
                 gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
    cr_assert_eq(d.kind, GPOOL_MEM_HOST_PINNED);
    cr_assert_eq(d.usage, GPOOL_USAGE_STAGING);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    buf.a.kind = GPOOL_MEM_DEVICE;
    cr_assert_eq(gpool_alloc_async(pool, 4096, (const gpool_alloc_params *)&buf.a, NULL, &p),
                 GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert(guard_intact(buf.guard, sizeof buf.guard));

    /* zero-initialised params (struct_size 0: the 0.2 layout) and NULL still mean defaults */
    gpool_alloc_params zero = {0};
    cr_assert_eq(gpool_alloc(pool, 4096, &zero, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    gpool_alloc_params pinned = {.kind = GPOOL_MEM_HOST_PINNED};
    cr_assert_eq(gpool_alloc(pool, 4096, &pinned, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK);
    cr_assert_eq(d.kind, GPOOL_MEM_HOST_PINNED);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* A caller built with a newer header: a larger struct. Out-structs get zeros beyond what this
 * library knows; in-structs must have zeros there (else the caller asked for something this
 * library cannot do). */
Test(structs, newer_callers_larger_structs)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    struct {
        gpool_stats s;
        uint64_t future[4];
    } big;
    memset(&big, 0xFF, sizeof big);
    big.s.struct_size = sizeof big;
    /* struct_size read from the struct: nothing past this library's sizeof is written */
    cr_assert_eq((gpool_get_stats)(pool, &big.s), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(big.s.struct_size, sizeof big);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(big.future[i], UINT64_MAX, "a size read from memory never widens a write");
    /* the size from the caller's header (what its macro passes): unknown fields read 0 */
    cr_assert_eq(gpool_get_stats_sized(pool, &big.s, sizeof big), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(big.s.struct_size, sizeof big);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(big.future[i], 0, "unknown fields of a newer struct read 0");

    struct {
        gpool_config c;
        uint64_t future[2];
    } cfg = {GPOOL_CONFIG_INIT, {0, 0}};
    cfg.c.struct_size = sizeof cfg;
    gpool_t *p2 = NULL;
    cr_assert_eq(gpool_create(&cfg.c, &p2), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(p2), GPOOL_OK);
    cfg.future[1] = 7;
    cr_assert_eq(gpool_create(&cfg.c, &p2), GPOOL_ERR_INVALID_ARG);
    cr_assert_null(p2);
    cr_assert(strstr(gpool_last_error(), "newer gpool.h"), "%s", gpool_last_error());

    struct {
        gpool_alloc_params a;
        uint64_t future[2];
    } params = {GPOOL_ALLOC_PARAMS_INIT, {0, 0}};
    params.a.struct_size = sizeof params;
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 100, &params.a, &p), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    params.future[0] = 1;
    cr_assert_eq(gpool_alloc(pool, 100, &params.a, &p), GPOOL_ERR_INVALID_ARG);
    cr_assert_null(p);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

static void assert_names(const char *type, const char *macro)
{
    const char *msg = gpool_last_error();
    cr_assert(strstr(msg, type), "message lacks %s: %s", type, msg);
    cr_assert(strstr(msg, macro), "message lacks %s: %s", macro, msg);
}

Test(structs, bad_sizes_are_invalid_args_and_the_pool_stays_usable)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *blk = NULL;
    cr_assert_eq(gpool_alloc(pool, 1 << 20, NULL, &blk), GPOOL_OK);
    const size_t bad[] = {0, 1, sizeof(size_t) - 1, 65537, (size_t)1 << 40, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = bad[i];
        gpool_stats s = GPOOL_STATS_INIT;
        s.struct_size = n;
        s.ooms = 12345;
        cr_assert_eq((gpool_get_stats)(pool, &s), GPOOL_ERR_INVALID_ARG, "stats size %zu", n);
        assert_names("gpool_stats", "GPOOL_STATS_INIT");
        cr_assert_eq(s.ooms, 12345, "a refused struct is not written");
        cr_assert_eq((gpool_calculate_stats)(pool, &s), GPOOL_ERR_INVALID_ARG);
        assert_names("gpool_stats", "GPOOL_STATS_INIT");

        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        d.struct_size = n;
        cr_assert_eq((gpool_get_block_desc)(pool, blk, &d), GPOOL_ERR_INVALID_ARG, "desc %zu", n);
        assert_names("gpool_block_desc", "GPOOL_BLOCK_DESC_INIT");

        gpool_config c = GPOOL_CONFIG_INIT;
        c.struct_size = n;
        gpool_t *p2 = (gpool_t *)&c;
        cr_assert_eq(gpool_create(&c, &p2), GPOOL_ERR_INVALID_ARG, "config size %zu", n);
        cr_assert_null(p2);
        assert_names("gpool_config", "GPOOL_CONFIG_INIT");
        if (n) { /* 0 is the 0.2 layout for these two */
            cr_assert_eq((gpool_config_default)(&c), GPOOL_ERR_INVALID_ARG);
            assert_names("gpool_config", "GPOOL_CONFIG_INIT");
            cr_assert_eq(gpool_config_default_sized(&c, n), GPOOL_ERR_INVALID_ARG);
            cr_assert_eq(gpool_config_parse(&c, "verbose=1"), GPOOL_ERR_INVALID_ARG);
            cr_assert_eq(c.verbose, 0);
            cr_assert_eq(c.struct_size, n, "a refused config is not written");
        }

        if (n) { /* struct_size 0 in alloc params: the 0.2 layout */
            gpool_alloc_params a = GPOOL_ALLOC_PARAMS_INIT;
            a.struct_size = n;
            void *p = (void *)&a;
            cr_assert_eq(gpool_alloc(pool, 100, &a, &p), GPOOL_ERR_INVALID_ARG, "params %zu", n);
            cr_assert_null(p);
            assert_names("gpool_alloc_params", "GPOOL_ALLOC_PARAMS_INIT");
            p = (void *)&a;
            cr_assert_eq(gpool_alloc_async(pool, 100, &a, NULL, &p), GPOOL_ERR_INVALID_ARG);
            cr_assert_null(p);
        }
    }
    /* still usable: allocate, describe, count, free */
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4 << 20, NULL, &p), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].live_blocks, 2);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, blk), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* gpool_block_info, the deprecated name, still works: a zeroed struct (struct_size 0) gets the
 * 0.2 layout; any other struct_size is honoured, never written past (an outside tester found it
 * filling the whole 0.2 layout over a 16-byte struct). */
Test(structs, deprecated_block_info_still_works)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 777, NULL, &p), GPOOL_OK);
    gpool_block_desc d;
    memset(&d, 0, sizeof d);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    cr_assert_eq(gpool_block_info(pool, p, &d), GPOOL_OK, "%s", gpool_last_error());
#pragma GCC diagnostic pop
    cr_assert_eq(d.requested_size, 777);
    cr_assert_eq(d.kind, GPOOL_MEM_DEVICE);
    cr_assert_eq(d.struct_size, sizeof d);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* trace_path is a pointer: gpool_create copies the string; gpool_config_parse stores a
 * library-owned copy, shared by equal paths. */
Test(structs, trace_path_is_copied)
{
    char path[] = "/tmp/gpool-structs-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    char *mine = strdup(path);
    gpool_config c = GPOOL_CONFIG_INIT;
    c.trace_path = mine;
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(&c, &pool), GPOOL_OK, "%s", gpool_last_error());
    memset(mine, 'x', strlen(mine)); /* the caller's string is its own again */
    free(mine);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4096, NULL, &p), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[256];
    int rows = 0;
    while (fgets(line, sizeof line, f))
        rows++;
    fclose(f);
    cr_assert_eq(rows, 3, "header, alloc and free rows: %d", rows);

    gpool_config a = GPOOL_CONFIG_INIT, b = GPOOL_CONFIG_INIT;
    char conf[300];
    snprintf(conf, sizeof conf, "trace=%s", path);
    cr_assert_eq(gpool_config_parse(&a, conf), GPOOL_OK);
    cr_assert_eq(gpool_config_parse(&b, conf), GPOOL_OK);
    cr_assert_str_eq(a.trace_path, path);
    cr_assert_eq(a.trace_path, b.trace_path, "equal paths share one library-owned copy");
    cr_assert_eq(gpool_config_parse(&a, "trace="), GPOOL_OK);
    cr_assert_null(a.trace_path, "an empty trace= clears the path");
    unlink(path);
}

Test(structs, config_default_macro_fills_an_uninitialised_struct)
{
    gpool_config c;
    memset(&c, 0xA5, sizeof c); /* garbage, as on the stack */
    cr_assert_eq(gpool_config_default(&c), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(c.struct_size, sizeof c);
    gpool_config want = GPOOL_CONFIG_INIT;
    cr_assert_eq(c.device, want.device);
    cr_assert_eq(c.release_threshold, want.release_threshold);
    cr_assert_eq(c.tcache_bytes, want.tcache_bytes);
    cr_assert_eq(c.small_max, want.small_max);
    for (int k = 0; k < GPOOL_MEM_KIND_SLOTS; k++)
        cr_assert_eq(c.budget[k], 0);
    cr_assert_eq(c.va_reserve, 0);
    cr_assert_eq(c.verbose, 0);
    cr_assert_null(c.default_stream);
    cr_assert_null(c.trace_path);
    cr_assert_eq(c.peer_access, want.peer_access);
}

Test(structs, getter_macros_fill_uninitialised_structs)
{
    /* the common idiom, no initializer: the macros pass this header's sizeof */
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 4096, NULL, &p), GPOOL_OK);
    gpool_stats st;
    memset(&st, 0xA5, sizeof st);
    cr_assert_eq(gpool_get_stats(pool, &st), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(st.struct_size, sizeof st);
    cr_assert_eq(st.kind[GPOOL_MEM_AUTO].live_blocks, 1);
    memset(&st, 0xA5, sizeof st);
    cr_assert_eq(gpool_calculate_stats(pool, &st), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(st.kind[GPOOL_MEM_AUTO].live_blocks, 1);
    gpool_block_desc d;
    memset(&d, 0xA5, sizeof d);
    cr_assert_eq(gpool_get_block_desc(pool, p, &d), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(d.struct_size, sizeof d);
    cr_assert_eq(d.requested_size, 4096);
    cr_assert_eq(gpool_get_stats(pool, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_get_block_desc(pool, p, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_get_stats(NULL, &st), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    gpool_destroy(pool);
}

Test(structs, deprecated_block_info_never_writes_past_struct_size)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, 777, NULL, &p), GPOOL_OK);
    struct {
        gpool_block_desc d;
        unsigned char guard[64];
    } buf;
    memset(&buf, GUARD, sizeof buf);
    buf.d.struct_size = 16;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    cr_assert_eq(gpool_block_info(pool, p, &buf.d), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(buf.d.struct_size, 16, "struct_size is kept");
    cr_assert(guard_intact((unsigned char *)&buf.d + 16, sizeof buf - 16), "wrote past 16 bytes");
    buf.d.struct_size = 65537;
    cr_assert_eq(gpool_block_info(pool, p, &buf.d), GPOOL_ERR_INVALID_ARG);
#pragma GCC diagnostic pop
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}
