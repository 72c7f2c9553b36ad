/* The vidmem caching allocator through the public API, on the simulated driver. On a real GPU
 * (GPOOL_TEST_REAL_GPU=1) the tests that set the capacity, count driver calls or bytes, or touch
 * device memory from the host skip; the rest run there. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpool.h"
#include "gpool_torch.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *sim;
static void setup(void)
{
    if (test_real_gpu()) return; /* sim stays NULL: the tests that use it skip themselves */
    sim = sim_api();
    cr_assert_not_null(sim, "tests need GPOOL_LIBCUDA pointing at the simulated driver");
}

TestSuite(core, .init = setup);

Test(core, create_destroy_leaves_nothing)
{
    gpool_t *p = test_pool(NULL);
    cr_assert_not_null(p);
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(p, &s), GPOOL_OK);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].in_use_bytes, 0);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0, "driver objects left after destroy");
    cr_assert_eq(sim_bytes_in_use(0), 0);
}

Test(core, sizes_hold_their_contents)
{
    NEED_HOST_VIDMEM();
    gpool_t *p = test_pool(NULL);
    static const size_t sizes[] = {
        1,     255,     256,           257,     1000,          4096,    16384,   16385,
        65536, 1 << 20, (2 << 20) - 1, 2 << 20, (2 << 20) + 1, 5 << 20, 33 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *ptrs[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(gpool_alloc(p, sizes[i], NULL, &ptrs[i]), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_not_null(ptrs[i]);
        cr_assert_eq((uintptr_t)ptrs[i] % 256, 0, "blocks are 256-byte aligned");
        fill_pattern(ptrs[i], sizes[i], (uint32_t)i + 1);
    }
    for (int i = 0; i < N; i++) {
        cr_assert(check_pattern(ptrs[i], sizes[i], (uint32_t)i + 1), "block %d overwritten", i);
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(p, ptrs[i], &d), GPOOL_OK);
        cr_assert_eq(d.requested_size, sizes[i]);
        cr_assert_geq(d.size, sizes[i]);
        cr_assert_eq(d.kind, GPOOL_MEM_DEVICE);
        cr_assert_eq(d.device_ptr, (uint64_t)(uintptr_t)ptrs[i]);
        /* interior pointers describe the same block */
        cr_assert_eq(gpool_get_block_desc(p, (char *)ptrs[i] + sizes[i] - 1, &d), GPOOL_OK);
        cr_assert_eq(d.device_ptr, (uint64_t)(uintptr_t)ptrs[i]);
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(gpool_free(p, ptrs[i]), GPOOL_OK);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(p, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].in_use_bytes, 0);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].live_blocks, 0);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].allocs, N);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* Random alloc/free with a pattern in every block, verified at free: no two live blocks
 * overlap and nothing is lost across reuse, splitting and coalescing. */
Test(core, random_sequence_keeps_contents)
{
    NEED_HOST_VIDMEM();
    gpool_t *p = test_pool(NULL);
    enum { SLOTS = 400, OPS = 20000 };
    void *ptr[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint32_t seed = 7;
    for (int op = 0; op < OPS; op++) {
        int i = (int)(rnd(&seed) % SLOTS);
        if (ptr[i]) {
            cr_assert(check_pattern(ptr[i], size[i], (uint32_t)i * 31 + 1), "op %d slot %d", op, i);
            cr_assert_eq(gpool_free(p, ptr[i]), GPOOL_OK, "%s", gpool_last_error());
            ptr[i] = NULL;
        } else {
            uint32_t r = rnd(&seed);
            size_t sz =
                r % 8 == 0 ? (size_t)(r >> 8) % (8 << 20) + 1 : (size_t)(r >> 8) % 20000 + 1;
            cr_assert_eq(gpool_alloc(p, sz, NULL, &ptr[i]), GPOOL_OK, "%s", gpool_last_error());
            size[i] = sz;
            fill_pattern(ptr[i], sz, (uint32_t)i * 31 + 1);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (ptr[i]) {
            cr_assert(check_pattern(ptr[i], size[i], (uint32_t)i * 31 + 1));
            gpool_free(p, ptr[i]);
        }
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(core, zero_size_and_null_free)
{
    gpool_t *p = test_pool(NULL);
    void *x = (void *)1;
    cr_assert_eq(gpool_alloc(p, 0, NULL, &x), GPOOL_OK);
    cr_assert_null(x, "size 0 gives NULL");
    cr_assert_eq(gpool_free(p, NULL), GPOOL_OK);
    gpool_destroy(p);
}

Test(core, bad_input_gets_status_and_pool_stays_usable)
{
    gpool_t *p = test_pool(NULL);
    void *x = NULL;
    cr_assert_eq(gpool_alloc(NULL, 10, NULL, &x), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_alloc(p, 10, NULL, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_alloc(p, SIZE_MAX, NULL, &x), GPOOL_ERR_INVALID_ARG);
    cr_assert_null(x);
    cr_assert_eq(gpool_alloc(p, SIZE_MAX - 4096, NULL, &x), GPOOL_ERR_INVALID_ARG);
    cr_assert(strstr(gpool_last_error(), "exceeds") != NULL, "%s", gpool_last_error());
    gpool_alloc_params bad = {.kind = (gpool_mem_kind)42};
    cr_assert_eq(gpool_alloc(p, 10, &bad, &x), GPOOL_ERR_INVALID_ARG);
    bad = (gpool_alloc_params){.alignment = 3000};
    cr_assert_eq(gpool_alloc(p, 10, &bad, &x), GPOOL_ERR_INVALID_ARG);
    bad = (gpool_alloc_params){.flags = 1u << 30};
    cr_assert_eq(gpool_alloc(p, 10, &bad, &x), GPOOL_ERR_INVALID_ARG);
    bad = (gpool_alloc_params){.page_size = 12345};
    cr_assert_eq(gpool_alloc(p, 10, &bad, &x), GPOOL_ERR_INVALID_ARG);
    bad = (gpool_alloc_params){.usage = (gpool_usage)99};
    cr_assert_eq(gpool_alloc(p, 10, &bad, &x), GPOOL_ERR_INVALID_ARG);

    void *small = NULL, *big = NULL;
    cr_assert_eq(gpool_alloc(p, 100, NULL, &small), GPOOL_OK);
    cr_assert_eq(gpool_alloc(p, 3 << 20, NULL, &big), GPOOL_OK);
    int local;
    cr_assert_eq(gpool_free(p, &local), GPOOL_ERR_INVALID_POINTER, "foreign pointer");
    cr_assert_eq(gpool_free(p, (char *)small + 8), GPOOL_ERR_INVALID_POINTER, "interior (small)");
    cr_assert_eq(gpool_free(p, (char *)big + 256), GPOOL_ERR_INVALID_POINTER, "interior (big)");
    cr_assert_eq(gpool_free(NULL, small), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_free(p, small), GPOOL_OK);
    cr_assert_eq(gpool_free(p, small), GPOOL_ERR_INVALID_POINTER, "double free (small)");
    cr_assert(strlen(gpool_last_error()) > 0);
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    cr_assert_eq(gpool_free(p, big), GPOOL_ERR_INVALID_POINTER, "double free (big)");
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(p, big, &d), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_get_block_desc(p, &local, &d), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_get_block_desc(p, big, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_get_stats(p, NULL), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_trim(NULL, 0), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_destroy(NULL), GPOOL_ERR_INVALID_ARG);
    /* still usable */
    cr_assert_eq(gpool_alloc(p, 100, NULL, &small), GPOOL_OK);
    cr_assert_eq(gpool_free(p, small), GPOOL_OK);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(p, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_DEVICE].live_blocks, 0);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(core, destroy_with_live_blocks_reports_and_frees)
{
    gpool_t *p = test_pool(NULL);
    void *a, *b, *c;
    gpool_alloc(p, 100, NULL, &a);
    gpool_alloc(p, 5 << 20, NULL, &b);
    gpool_alloc(p, 300, NULL, &c);
    gpool_free(p, c);
    cr_assert_eq(gpool_destroy(p), GPOOL_ERR_LIVE_BLOCKS);
    cr_assert(strstr(gpool_last_error(), "2 live blocks") != NULL, "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0, "everything returned to the driver");
    cr_assert_eq(sim_bytes_in_use(0), 0);
}

/* One block is "1 live block", never "1 live blocks" (issue 26). */
Test(core, destroy_message_counts_in_the_right_number)
{
    gpool_t *p = test_pool(NULL);
    void *a;
    cr_assert_eq(gpool_alloc(p, 100, NULL, &a), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p), GPOOL_ERR_LIVE_BLOCKS);
    const char *m = gpool_last_error();
    cr_assert(strstr(m, "gpool_destroy: 1 live block (") &&
                  strstr(m, "was still allocated; freed it"),
              "%s", m);
    cr_assert_eq(sim_live_total(), 0);
}

Test(core, oom_at_capacity_then_recovers)
{
    NEED_SIM();
    sim->set_capacity(0, 64 * MiB);
    gpool_t *p = test_pool(NULL);
    void *blk[64];
    int n = 0;
    gpool_status st;
    while ((st = gpool_alloc(p, 6 * MiB, NULL, &blk[n])) == GPOOL_OK)
        n++;
    cr_assert_eq(st, GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_eq(n, 10, "64 MiB holds ten 6 MiB blocks (pages shared), got %d", n);
    const char *msg = gpool_last_error();
    cr_assert(strstr(msg, "cannot allocate 6291456 bytes") && strstr(msg, "cause"), "%s", msg);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(p, &s);
    cr_assert_geq(s.ooms, 1);
    cr_assert_geq(s.oom_retries, 1);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gpool_free(p, blk[i]), GPOOL_OK);
    /* after freeing, one block of nearly all memory fits */
    void *big;
    cr_assert_eq(gpool_alloc(p, 62 * MiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    fill_pattern(big, 62 * MiB, 3);
    cr_assert(check_pattern(big, 62 * MiB, 3));
    gpool_free(p, big);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* Free every other block of a full device: a best-fit allocator over fixed segments would have
 * only 3 MiB holes, but gpool remaps the free pages into one range. */
Test(core, fragmenting_sequence_succeeds_by_remapping)
{
    NEED_SIM();
    sim->set_capacity(0, 128 * MiB);
    gpool_t *p = test_pool(NULL);
    void *blk[32];
    for (int i = 0; i < 32; i++)
        cr_assert_eq(gpool_alloc(p, 4 * MiB, NULL, &blk[i]), GPOOL_OK, "%d: %s", i,
                     gpool_last_error());
    for (int i = 0; i < 32; i += 2)
        cr_assert_eq(gpool_free(p, blk[i]), GPOOL_OK);
    void *big;
    cr_assert_eq(gpool_alloc(p, 60 * MiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    fill_pattern(big, 60 * MiB, 9);
    for (int i = 1; i < 32; i += 2)
        fill_pattern(blk[i], 4 * MiB, (uint32_t)i);
    cr_assert(check_pattern(big, 60 * MiB, 9));
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(p, &s);
    cr_assert_gt(s.pages_remapped, 0, "free pages were remapped");
    for (int i = 1; i < 32; i += 2) {
        cr_assert(check_pattern(blk[i], 4 * MiB, (uint32_t)i));
        gpool_free(p, blk[i]);
    }
    gpool_free(p, big);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* A repeated workload: the second pass is served from the cache with no driver call. */
Test(core, steady_state_makes_no_driver_calls)
{
    NEED_SIM();
    gpool_t *p = test_pool(NULL);
    static const size_t sizes[] = {512, 3000, 70000, 1 << 20, 3 << 20, 9 << 20, 200, 40 << 20};
    void *ptr[8];
    unsigned long before = 0;
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) before = sim->call_total();
        for (int i = 0; i < 8; i++)
            cr_assert_eq(gpool_alloc(p, sizes[i], NULL, &ptr[i]), GPOOL_OK);
        for (int i = 7; i >= 0; i--)
            cr_assert_eq(gpool_free(p, ptr[i]), GPOOL_OK);
    }
    cr_assert_eq(sim->call_total(), before, "passes 2 and 3 made %lu driver calls",
                 sim->call_total() - before);
    gpool_destroy(p);
}

Test(core, trim_gives_memory_back)
{
    NEED_SIM();
    gpool_t *p = test_pool(NULL);
    void *a, *b;
    gpool_alloc(p, 20 * MiB, NULL, &a);
    gpool_alloc(p, 100, NULL, &b);
    gpool_free(p, a);
    cr_assert_geq(sim->bytes_in_use(0), 20 * MiB, "cached after free");
    cr_assert_eq(gpool_trim(p, 0), GPOOL_OK);
    cr_assert_leq(sim->bytes_in_use(0), 2 * MiB, "only the small block's page stays: %zu",
                  sim->bytes_in_use(0));
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(p, &s);
    cr_assert_leq(s.kind[GPOOL_MEM_DEVICE].reserved_bytes, 2 * MiB);
    gpool_free(p, b);
    gpool_destroy(p);
}

Test(core, zero_flag_fills_zeros)
{
    NEED_HOST_VIDMEM();
    gpool_t *p = test_pool(NULL);
    void *a;
    gpool_alloc(p, 5000, NULL, &a);
    memset(a, 0xab, 5000);
    gpool_free(p, a);
    gpool_alloc_params prm = {.flags = GPOOL_ALLOC_ZERO};
    cr_assert_eq(gpool_alloc(p, 5000, &prm, &a), GPOOL_OK);
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(((unsigned char *)a)[i], 0);
    gpool_free(p, a);
    gpool_destroy(p);
}

Test(core, aligned_requests)
{
    gpool_t *p = test_pool(NULL);
    for (size_t al = 256; al <= 2 * MiB; al <<= 1) {
        gpool_alloc_params prm = {.alignment = al};
        void *a;
        cr_assert_eq(gpool_alloc(p, 1000, &prm, &a), GPOOL_OK);
        cr_assert_eq((uintptr_t)a % al, 0, "alignment %zu", al);
        gpool_free(p, a);
    }
    gpool_destroy(p);
}

Test(core, mem_get_info_counts_cache_as_free)
{
    NEED_SIM();
    sim->set_capacity(0, 256 * MiB);
    gpool_t *p = test_pool(NULL);
    void *a;
    gpool_alloc(p, 64 * MiB, NULL, &a);
    size_t fr, total;
    cr_assert_eq(gpool_mem_get_info(p, &fr, &total), GPOOL_OK);
    cr_assert_eq(total, 256 * MiB);
    cr_assert_eq(fr, 192 * MiB);
    gpool_free(p, a);
    cr_assert_eq(gpool_mem_get_info(p, &fr, &total), GPOOL_OK);
    cr_assert_eq(fr, 256 * MiB, "cached bytes count as free: %zu", fr);
    gpool_destroy(p);
}

Test(core, dump_json_is_valid)
{
    gpool_t *p = test_pool(NULL);
    void *a, *b;
    gpool_alloc(p, 100, NULL, &a);
    gpool_alloc(p, 3 << 20, NULL, &b);
    char path[] = "/tmp/gpool-dumpXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    cr_assert_eq(gpool_dump_json(p, f), GPOOL_OK);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(\"%s\")); "
             "assert d[\"stats\"][\"device\"][\"live_blocks\"]==2' ",
             path);
    cr_assert_eq(system(cmd), 0, "snapshot is valid JSON with the live blocks");
    unlink(path);
    gpool_free(p, a);
    gpool_free(p, b);
    gpool_destroy(p);
}

Test(core, strerror_names_every_status)
{
    for (int s = 0; s <= GPOOL_ERR_IO; s++)
        cr_assert_not_null(gpool_strerror((gpool_status)s));
    cr_assert_str_eq(gpool_strerror((gpool_status)999), "unknown status");
    cr_assert_str_eq(gpool_version(), "0.3.0");
    cr_assert_null(gpool_driver_call_name(GPOOL_DRV_COUNT));
}

Test(core, no_driver_is_a_clear_error)
{
    setenv("GPOOL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    gpool_t *p = (gpool_t *)1;
    cr_assert_eq(gpool_create(NULL, &p), GPOOL_ERR_NO_DRIVER);
    cr_assert_null(p);
    cr_assert(strstr(gpool_last_error(), "/nonexistent/libcuda.so.1") != NULL, "%s",
              gpool_last_error());
}

Test(core, missing_device_ordinal)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.device = 5;
    gpool_t *p;
    cr_assert_eq(gpool_create(&cfg, &p), GPOOL_ERR_NO_DEVICE);
    cr_assert(strstr(gpool_last_error(), "device 5") != NULL, "%s", gpool_last_error());
}

Test(core, bad_conf_env_is_config_error)
{
    setenv("GPOOL_CONF", "tcache_bytes=1M,bogus=3", 1);
    gpool_t *p;
    cr_assert_eq(gpool_create(NULL, &p), GPOOL_ERR_CONFIG);
    cr_assert(strstr(gpool_last_error(), "bogus") != NULL, "%s", gpool_last_error());
    unsetenv("GPOOL_CONF");
}

/* Count of needle in hay. */
static int occurrences(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A configuration message names its source once: GPOOL_CONF or the call (issue 26: it said
 * "GPOOL_CONF: config: unknown key ..."). */
Test(core, config_messages_name_their_source_once)
{
    gpool_t *p = NULL;
    setenv("GPOOL_CONF", "bogus=3", 1);
    cr_assert_eq(gpool_create(NULL, &p), GPOOL_ERR_CONFIG);
    const char *m = gpool_last_error();
    cr_assert(!strncmp(m, "GPOOL_CONF: unknown key 'bogus'", 31), "%s", m);
    cr_assert_eq(occurrences(m, "GPOOL_CONF"), 1, "%s", m);
    cr_assert_eq(occurrences(m, "config: "), 0, "%s", m);
    setenv("GPOOL_CONF", "small_max=1G", 1);
    cr_assert_eq(gpool_create(NULL, &p), GPOOL_ERR_CONFIG);
    m = gpool_last_error();
    cr_assert(!strncmp(m, "GPOOL_CONF: small_max ", 22), "%s", m);
    cr_assert_eq(occurrences(m, "config: "), 0, "%s", m);
    unsetenv("GPOOL_CONF");
    gpool_config c = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_parse(&c, "tcache_bytes=lots"), GPOOL_ERR_CONFIG);
    m = gpool_last_error();
    cr_assert(!strncmp(m, "gpool_config_parse: tcache_bytes=lots is not a size", 51), "%s", m);
    cr_assert_eq(occurrences(m, "config: "), 0, "%s", m);
    cr_assert_eq(gpool_config_parse(&c, "small_max=1G"), GPOOL_ERR_CONFIG);
    m = gpool_last_error();
    cr_assert(!strncmp(m, "gpool_config_parse: small_max ", 30), "%s", m);
    gpool_config_default(&c);
    c.small_max = (size_t)1 << 30;
    cr_assert_eq(gpool_create(&c, &p), GPOOL_ERR_CONFIG);
    m = gpool_last_error();
    cr_assert(!strncmp(m, "gpool_config: small_max ", 24), "%s", m);
    cr_assert_eq(occurrences(m, "config: "), 1, "%s", m);
}

/* The PyTorch hook reads GPOOL_CONF too: its message names GPOOL_CONF once, no "config: ". */
Test(core, torch_config_message_names_gpool_conf_once)
{
    setenv("GPOOL_CONF", "bogus=3", 1);
    cr_assert_null(gpool_torch_alloc(4096, 0, NULL));
    const char *m = gpool_last_error();
    cr_assert(!strncmp(m, "GPOOL_CONF: unknown key 'bogus'", 31), "%s", m);
    cr_assert_eq(occurrences(m, "GPOOL_CONF"), 1, "%s", m);
    cr_assert_eq(occurrences(m, "config: "), 0, "%s", m);
    unsetenv("GPOOL_CONF");
}

Test(core, trace_records_rmm_csv)
{
    char path[] = "/tmp/gpool-traceXXXXXX";
    close(mkstemp(path));
    char conf[128];
    snprintf(conf, sizeof conf, "trace=%s", path);
    gpool_t *p = test_pool(conf);
    void *a;
    gpool_alloc(p, 1234, NULL, &a);
    gpool_free(p, a);
    gpool_destroy(p);
    FILE *f = fopen(path, "r");
    char line[256];
    cr_assert(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "Thread,Time,Action,Pointer,Size,Stream,Kind\n");
    cr_assert(fgets(line, sizeof line, f));
    cr_assert(strstr(line, ",allocate,") && strstr(line, ",1234,"), "%s", line);
    cr_assert(fgets(line, sizeof line, f));
    cr_assert(strstr(line, ",free,") && strstr(line, ",1234,"), "%s", line);
    fclose(f);
    unlink(path);
}

Test(core, leak_check_at_exit_names_undestroyed_pools)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        setenv("GPOOL_LEAK_CHECK", "1", 1);
        gpool_t *p = test_pool(NULL);
        void *a;
        gpool_alloc(p, 3 << 20, NULL, &a);
        exit(0); /* never destroyed */
    }
    close(fds[1]);
    char buf[1024] = {0};
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(strstr(buf, "leak check") && strstr(buf, " 1 live block,"), "stderr: %s", buf);
}

Test(core, oom_message_lists_live_blocks_by_size)
{
    NEED_SIM();
    sim->set_capacity(0, 32 * MiB);
    gpool_t *p = test_pool(NULL);
    void *a, *b;
    cr_assert_eq(gpool_alloc(p, 20 * MiB, NULL, &a), GPOOL_OK);
    cr_assert_eq(gpool_alloc(p, 20 * MiB, NULL, &b), GPOOL_ERR_OUT_OF_MEMORY);
    const char *m = gpool_last_error();
    cr_assert(strstr(m, "live blocks: 1 x <=32768 KiB (20 MiB)"), "%s", m);
    cr_assert(strstr(m, "real exhaustion"), "%s", m);
    gpool_free(p, a);
    gpool_destroy(p);
}

Test(core, release_threshold_gives_excess_back_after_frees)
{
    NEED_SIM();
    gpool_t *p = test_pool("release_threshold=8M");
    void *a, *b;
    gpool_alloc(p, 40 * MiB, NULL, &a);
    gpool_alloc(p, 1 * MiB, NULL, &b);
    cr_assert_geq(sim->bytes_in_use(0), 41 * MiB);
    gpool_free(p, a);
    cr_assert_leq(sim->bytes_in_use(0), 2 * MiB + 8 * MiB, "excess over 8 MiB released: %zu",
                  sim->bytes_in_use(0));
    gpool_free(p, b);
    gpool_destroy(p);
    p = test_pool(NULL); /* default: everything stays cached */
    gpool_alloc(p, 40 * MiB, NULL, &a);
    gpool_free(p, a);
    cr_assert_geq(sim->bytes_in_use(0), 40 * MiB);
    gpool_destroy(p);
}

/* A thread that idles does not keep its cache: trim takes it back (the thread is not inside a
 * gpool call), and the pages go back to the driver. */
struct idle_ctx {
    gpool_t *pool;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int cached, done;
};

static void *idle_thread(void *arg)
{
    struct idle_ctx *c = arg;
    void *p[40];
    for (int i = 0; i < 40; i++)
        gpool_alloc(c->pool, 256, NULL, &p[i]);
    for (int i = 0; i < 40; i++)
        gpool_free(c->pool, p[i]);
    pthread_mutex_lock(&c->lock);
    c->cached = 1;
    pthread_cond_broadcast(&c->cv);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->lock); /* idle, its cache still full */
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

Test(core, trim_takes_back_an_idle_threads_cache)
{
    NEED_SIM();
    struct idle_ctx c = {.pool = test_pool(NULL)};
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cv, NULL);
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, &c);
    pthread_mutex_lock(&c.lock);
    while (!c.cached)
        pthread_cond_wait(&c.cv, &c.lock);
    pthread_mutex_unlock(&c.lock);
    cr_assert_gt(sim->bytes_in_use(0), 0, "the idle thread's cache holds a slab");
    cr_assert_eq(gpool_trim(c.pool, 0), GPOOL_OK);
    cr_assert_eq(sim->bytes_in_use(0), 0, "trim returned the idle thread's cached blocks: %zu",
                 sim->bytes_in_use(0));
    pthread_mutex_lock(&c.lock);
    c.done = 1;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.lock);
    pthread_join(t, NULL);
    void *p;
    cr_assert_eq(gpool_alloc(c.pool, 256, NULL, &p), GPOOL_OK, "the pool still works");
    cr_assert_eq(gpool_free(c.pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(c.pool), GPOOL_OK);
}

/* Very large blocks are backed by multi-page chunks (pagesize.c); after the block is freed
 * its pages serve smaller blocks, and memory pressure and trim give the chunks back whole. */
Test(core, chunked_large_blocks_are_reused_and_released)
{
    NEED_SIM();
    sim->set_capacity(0, 512 * MiB);
    gpool_t *p = test_pool(NULL);
    void *big;
    cr_assert_eq(gpool_alloc(p, 300 * MiB, NULL, &big), GPOOL_OK, "%s", gpool_last_error());
    fill_pattern(big, 300 * MiB, 77);
    cr_assert(check_pattern(big, 300 * MiB, 77));
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(p, big, &d), GPOOL_OK);
    cr_assert_eq(d.page_size, 32 * MiB, "backed by 32 MiB chunks (pagesize.c)");
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    /* smaller blocks reuse the chunked range; a second large one needs the chunks back */
    void *small[20];
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(gpool_alloc(p, 5 * MiB, NULL, &small[i]), GPOOL_OK, "%s", gpool_last_error());
        fill_pattern(small[i], 5 * MiB, (uint32_t)i);
    }
    void *big2;
    cr_assert_eq(gpool_alloc(p, 380 * MiB, NULL, &big2), GPOOL_OK, "%s", gpool_last_error());
    for (int i = 0; i < 20; i++) {
        cr_assert(check_pattern(small[i], 5 * MiB, (uint32_t)i));
        gpool_free(p, small[i]);
    }
    gpool_free(p, big2);
    cr_assert_eq(gpool_trim(p, 0), GPOOL_OK);
    cr_assert_eq(sim->bytes_in_use(0), 0);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(core, unwritable_trace_file_is_an_error)
{
    gpool_t *p = (gpool_t *)1;
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    cfg.trace_path = "/nonexistent-dir/trace.csv";
    cr_assert_eq(gpool_create(&cfg, &p), GPOOL_ERR_IO);
    cr_assert_null(p);
    cr_assert(strstr(gpool_last_error(), "/nonexistent-dir/trace.csv"), "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0, "nothing left behind");
}

/* Every refusal names the call that refused, first: "gpool_alloc_async: unknown memory kind
 * 42", not a bare "unknown memory kind 42" a caller cannot place. */
static void names_call(gpool_status got, const char *call)
{
    cr_assert_neq(got, GPOOL_OK, "%s accepted bad input", call);
    const char *msg = gpool_last_error();
    size_t n = strlen(call);
    cr_assert(!strncmp(msg, call, n) && msg[n] == ':',
              "%s's message does not start with its name: %s", call, msg);
}

Test(core, bad_input_messages_name_the_call)
{
    gpool_t *p = test_pool(NULL);
    void *x = NULL;
    static const gpool_alloc_params bads[] = {
        {.kind = (gpool_mem_kind)42}, {.alignment = 3000},        {.flags = 1u << 30},
        {.page_size = 12345},         {.usage = (gpool_usage)99},
    };
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        gpool_alloc_params b = bads[i];
        b.struct_size = sizeof b;
        names_call(gpool_alloc(p, 10, &b, &x), "gpool_alloc");
        names_call(gpool_alloc_async(p, 10, &b, NULL, &x), "gpool_alloc_async");
    }
    names_call(gpool_alloc(p, SIZE_MAX - 4096, NULL, &x), "gpool_alloc");
    names_call(gpool_alloc_async(p, SIZE_MAX - 4096, NULL, NULL, &x), "gpool_alloc_async");
    names_call(gpool_alloc_async(NULL, 10, NULL, NULL, &x), "gpool_alloc_async");
    int local;
    names_call(gpool_free(p, &local), "gpool_free");
    names_call(gpool_free_async(p, &local, NULL), "gpool_free_async");
    void *big = NULL;
    cr_assert_eq(gpool_alloc(p, 3 << 20, NULL, &big), GPOOL_OK);
    cr_assert_eq(gpool_free(p, big), GPOOL_OK);
    names_call(gpool_free(p, big), "gpool_free");
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    names_call(gpool_get_block_desc(p, &local, &d), "gpool_get_block_desc");
    names_call(gpool_record_stream(p, &local, NULL), "gpool_record_stream");
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}
