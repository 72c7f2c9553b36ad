/* test_bench_dump.c — gpool_dump_json labels free space exactly: "cached" where pages have
 * memory behind them, "reserved" where the address space was never backed, and gpool-bench's
 * snapshot reader takes those labels as they are. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench.h"
#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

/* The pool's gpool_dump_json read back by gpool-bench's snapshot reader (into *s, the JSON text
 * in *text for the caller to search and free); returns the device regions' backed bytes. */
static uint64_t snapshot(gpool_t *pool, bench_snapshot *s, char **text)
{
    size_t len = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    cr_assert_eq(gpool_dump_json(pool, f), GPOOL_OK);
    fclose(f);
    char err[300];
    cr_assert_eq(bench_snapshot_parse("dump", *text, len, s, err, sizeof err), 0, "%s", err);
    uint64_t backed = 0;
    for (size_t i = 0; i < s->n_regions; i++)
        if (!strcmp(s->regions[i].kind, "device"))
            backed += s->regions[i].backed_pages * s->regions[i].page;
    return backed;
}

Test(bench_dump, free_space_is_cached_where_backed_and_reserved_elsewhere)
{
    NEED_SIM();
    gpool_t *pool = test_pool("tcache_bytes=0");
    cr_assert_not_null(pool);
    void *a, *b;
    cr_assert_eq(gpool_alloc(pool, 4 * MiB, NULL, &a), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, NULL, &b), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
    char *text;
    bench_snapshot s;
    uint64_t backed = snapshot(pool, &s, &text);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_IN_USE], 2 * MiB);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_CACHED], backed - 2 * MiB,
                 "every backed free page, and nothing more, is cached (%llu backed)",
                 (unsigned long long)backed);
    cr_assert_geq(s.state_bytes[BENCH_RANGE_CACHED], 4 * MiB, "the freed 4 MiB stay mapped");
    cr_assert_gt(s.state_bytes[BENCH_RANGE_RESERVED] + s.undrawn, 0,
                 "the unbacked tail is reserved (drawn or past the extent)");
    cr_assert_not_null(strstr(text, "\"state\":\"reserved\""), "the dump says it itself");
    bench_snapshot_free(&s);
    free(text);
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* A free range pending on a stream is "pending" only where that stream's frees lie on backed
 * pages: the never-backed address space it coalesced with is "reserved" (a 2-stream snapshot
 * once drew the whole 8 GiB reservation as pending). */
Test(bench_dump, pending_is_only_the_marked_backed_bytes)
{
    NEED_SIM();
    const struct sim_api *sim = sim_api();
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    CUresult (*rm)(CUstream) = sim_driver_proc("cuStreamDestroy");
    cr_assert(mk && rm);
    gpool_t *pool = test_pool("tcache_bytes=0");
    cr_assert_not_null(pool);
    CUstream A, B;
    cr_assert_eq(mk(&A, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(mk(&B, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    sim->stream_hold(A);
    void *a, *b;
    cr_assert_eq(gpool_alloc_async(pool, 2 * MiB, NULL, B, &b), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_alloc_async(pool, 4 * MiB, NULL, A, &a), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_free_async(pool, a, A), GPOOL_OK);
    char *text;
    bench_snapshot s;
    uint64_t backed = snapshot(pool, &s, &text);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_IN_USE], 2 * MiB);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_PENDING], 4 * MiB,
                 "pending: the 4 MiB freed on the held stream, no more (%llu)",
                 (unsigned long long)s.state_bytes[BENCH_RANGE_PENDING]);
    cr_assert_eq(s.state_bytes[BENCH_RANGE_IN_USE] + s.state_bytes[BENCH_RANGE_PENDING] +
                     s.state_bytes[BENCH_RANGE_CACHED] + s.state_bytes[BENCH_RANGE_SLAB],
                 backed, "backed bytes are in use, pending, cached or slab");
    bench_snapshot_free(&s);
    free(text);
    sim->stream_release(A);
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    rm(A);
    rm(B);
}
