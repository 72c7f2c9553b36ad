/* test_record.c — the PyTorch trace recorder (tools/torch-trace/record.c): preloaded into a
 * client that allocates like c10's CPU allocator, it writes an RMM replay log with exactly the
 * 64-byte-aligned posix_memalign allocations and their frees, sizes carried to the frees. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrmap.h"

static char csv[64];

static void setup(void)
{
    snprintf(csv, sizeof csv, "/tmp/test-record-%d.csv", (int)getpid());
}

static void teardown(void)
{
    unlink(csv);
}

TestSuite(record, .init = setup, .fini = teardown);

/* Run the client under the shim (recording to csv when record is set); it prints how many
 * tensor-like allocations it made and how many it left live at exit. */
static void run_client(int n, int seed, int record, size_t *tensors, size_t *still)
{
    const char *b = getenv("GPOOL_TEST_BUILD");
    if (!b || !*b) b = "build";
    char out[128] = "", cmd[1024];
    if (record) snprintf(out, sizeof out, "GPOOL_RECORD_OUT=%s ", csv);
    snprintf(cmd, sizeof cmd, "%sLD_PRELOAD=%s/tools/gpool-record.so %s/tools/record_client %d %d",
             out, b, b, n, seed);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "%s", cmd);
    int got = fscanf(p, "%zu %zu", tensors, still);
    cr_assert_eq(pclose(p), 0, "%s", cmd);
    cr_assert_eq(got, 2, "%s", cmd);
}

Test(record, log_has_every_tensor_allocation_and_free)
{
    size_t tensors = 0, still = 0;
    run_client(20000, 7, 1, &tensors, &still);
    FILE *f = fopen(csv, "r");
    cr_assert(f, "no log written");
    char line[256];
    cr_assert(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "Thread,Time,Action,Pointer,Size,Stream\n");
    gp_ptrmap live;
    gp_ptrmap_init(&live);
    size_t allocs = 0, frees = 0, lines = 1;
    uint64_t last_ns = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        unsigned tid;
        unsigned long long ns, ptr, size;
        char action[16];
        cr_assert_eq(
            sscanf(line, "%u,%llu,%15[a-z],0x%llx,%llu,0x0", &tid, &ns, action, &ptr, &size), 5,
            "line %zu: %s", lines, line);
        cr_assert(ns >= last_ns, "line %zu: time goes back", lines);
        last_ns = ns;
        cr_assert_eq(ptr % 64, 0);
        cr_assert(size >= 1 && size <= 100000, "line %zu: size %llu", lines, size);
        if (!strcmp(action, "allocate")) {
            allocs++;
            cr_assert_null(gp_ptrmap_get(&live, (uintptr_t)ptr), "line %zu: live twice", lines);
            cr_assert_eq(gp_ptrmap_put(&live, (uintptr_t)ptr, (void *)(uintptr_t)size), 0);
        } else {
            cr_assert_str_eq(action, "free", "line %zu", lines);
            frees++;
            void *v = gp_ptrmap_get(&live, (uintptr_t)ptr);
            cr_assert_not_null(v, "line %zu: free of a pointer that is not live", lines);
            cr_assert_eq((uintptr_t)v, size, "line %zu: free names another size", lines);
            gp_ptrmap_del(&live, (uintptr_t)ptr);
        }
    }
    fclose(f);
    cr_assert_eq(allocs, tensors, "the 128-aligned and malloc blocks must not be recorded");
    cr_assert_eq(allocs - frees, still);
    cr_assert_eq(live.count, still);
    gp_ptrmap_fini(&live);
}

Test(record, nothing_is_written_without_an_output_file)
{
    size_t tensors = 0, still = 0;
    run_client(500, 3, 0, &tensors, &still);
    cr_assert(tensors > 0);
    cr_assert_neq(access(csv, F_OK), 0);
}
