/* Blocks placed across pages under pressure (src/placement/arena_span.c, issue 27): a request
 * that no fresh-page placement can serve begins in one partly used page's free tail, goes on in
 * fresh pages and ends in another's free head, both pages mapped again around the fresh ones.
 * Checked: it is served where it could not be before, its bytes are the pages' own physical
 * bytes (a write through the block shows at the original addresses, and the neighbours'
 * bytes stay theirs), the reuse rule covers those bytes through either address (the strict
 * simulator referees every access), export is refused, and trim gives everything back. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)

static const struct sim_api *sim;

static void setup(void)
{
    NEED_SIM();
    sim = sim_api();
    cr_assert_not_null(sim);
}

TestSuite(span, .init = setup);

static void *must(gpool_t *pool, size_t n)
{
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, n, NULL, &p), GPOOL_OK, "%zu: %s", n, gpool_last_error());
    return p;
}

static int all(const void *p, size_t n, unsigned char v)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != v) return 0;
    return 1;
}

/* 4 pages of 2 MiB: a 1.5 MiB | f 0.5 MiB | d 2 MiB | g 0.5 MiB | e 1.5 MiB; f and g freed leave
 * a 0.5 MiB tail in page 0 and a 0.5 MiB head in page 2, one page unbacked. */
struct layout {
    gpool_t *pool;
    void *a, *d, *e;
    unsigned char *tail, *head;
};

static void make_layout(struct layout *l)
{
    sim->set_capacity(0, 8 * MiB);
    l->pool = test_pool(NULL);
    cr_assert_not_null(l->pool);
    l->a = must(l->pool, 3 * MiB / 2);
    void *f = must(l->pool, MiB / 2);
    l->d = must(l->pool, 2 * MiB);
    void *g = must(l->pool, MiB / 2);
    l->e = must(l->pool, 3 * MiB / 2);
    cr_assert_eq((char *)f, (char *)l->a + 3 * MiB / 2, "the layout is not the expected one");
    cr_assert_eq((char *)g, (char *)l->d + 2 * MiB);
    memset(l->a, 0xa1, 3 * MiB / 2);
    memset(l->d, 0xd1, 2 * MiB);
    memset(l->e, 0xe1, 3 * MiB / 2);
    l->tail = f;
    l->head = g;
    cr_assert_eq(gpool_free(l->pool, f), GPOOL_OK);
    cr_assert_eq(gpool_free(l->pool, g), GPOOL_OK);
}

Test(span, a_block_over_a_tail_and_a_head_serves_what_fresh_pages_cannot)
{
    struct layout l;
    make_layout(&l);
    void *s = NULL;
    /* 3 MiB: fresh pages alone need 2, the device has 1 left */
    cr_assert_eq(gpool_alloc(l.pool, 3 * MiB, NULL, &s), GPOOL_OK, "%s", gpool_last_error());
    memset(s, 0x5b, 3 * MiB);
    /* its first and last half MiB are the tail's and the head's physical bytes */
    cr_assert(all(l.tail, MiB / 2, 0x5b), "the block's first bytes are not the tail's");
    cr_assert(all(l.head, MiB / 2, 0x5b), "the block's last bytes are not the head's");
    cr_assert(all(l.a, 3 * MiB / 2, 0xa1) && all(l.d, 2 * MiB, 0xd1) && all(l.e, 3 * MiB / 2, 0xe1),
              "a neighbour's bytes changed");
    size_t sz = 0;
    cr_assert_eq(gpool_block_size(l.pool, s, &sz), GPOOL_OK);
    cr_assert_eq(sz, 3 * MiB);
    /* nothing else is placed on the tail or the head while it lives */
    void *x = NULL;
    gpool_status st = gpool_alloc(l.pool, 256 * KiB, NULL, &x);
    if (st == GPOOL_OK) {
        cr_assert(x < (void *)l.tail || x >= (void *)(l.tail + MiB / 2), "got the span's tail");
        cr_assert(x < (void *)l.head || x >= (void *)(l.head + MiB / 2), "got the span's head");
        cr_assert_eq(gpool_free(l.pool, x), GPOOL_OK);
    }
    cr_assert_eq(gpool_free(l.pool, s), GPOOL_OK);
    /* after its free the tail serves again, and trim gives every page back */
    void *t = must(l.pool, MiB / 2);
    cr_assert_eq(gpool_free(l.pool, t), GPOOL_OK);
    cr_assert_eq(gpool_free(l.pool, l.a), GPOOL_OK);
    cr_assert_eq(gpool_free(l.pool, l.d), GPOOL_OK);
    cr_assert_eq(gpool_free(l.pool, l.e), GPOOL_OK);
    cr_assert_eq(gpool_trim(l.pool, 0), GPOOL_OK, "%s", gpool_last_error());
    gpool_stats stats = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(l.pool, &stats), GPOOL_OK);
    cr_assert_eq(stats.kind[GPOOL_MEM_DEVICE].reserved_bytes, 0, "%llu bytes still held",
                 (unsigned long long)stats.kind[GPOOL_MEM_DEVICE].reserved_bytes);
    cr_assert_eq(gpool_destroy(l.pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
    cr_assert_eq(sim->violations(), 0);
}

/* Freed on a stream whose kernel still reads it: another stream gets neither its tail nor
 * its head (through their own addresses) before that work is done; the referee checks the
 * physical bytes through both mappings. */
Test(span, its_bytes_wait_for_the_freeing_streams_work_through_either_address)
{
    struct layout l;
    make_layout(&l);
    CUresult (*mk)(CUstream *, unsigned) = sim_driver_proc("cuStreamCreate");
    cr_assert_not_null(mk);
    CUstream s1, s2;
    cr_assert_eq(mk(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cr_assert_eq(mk(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    void *s = NULL;
    cr_assert_eq(gpool_alloc_async(l.pool, 3 * MiB, &prm, s1, &s), GPOOL_OK, "%s",
                 gpool_last_error());
    cr_assert_eq(sim_kernel(s1, s, 3 * MiB), CUDA_SUCCESS);
    cr_assert_eq(gpool_free_async(l.pool, s, s1), GPOOL_OK);
    for (int i = 0; i < 4; i++) {
        void *x = NULL;
        if (gpool_alloc_async(l.pool, MiB / 2, &prm, s2, &x) != GPOOL_OK) break;
        cr_assert_eq(sim_kernel(s2, x, MiB / 2), CUDA_SUCCESS); /* the referee aborts a race */
    }
    cr_assert_eq(sim->violations(), 0);
}

/* An exported handle is one allocation: a block over two pages' aliases cannot be exported. */
Test(span, export_is_refused_with_a_reason)
{
    sim->set_capacity(0, 8 * MiB);
    gpool_t *pool = test_pool("ipc=1");
    if (!pool) cr_skip_test("no IPC pool on this simulator: %s", gpool_last_error());
    void *a = must(pool, 3 * MiB / 2), *f = must(pool, MiB / 2), *d = must(pool, 2 * MiB);
    void *g = must(pool, MiB / 2), *e = must(pool, 3 * MiB / 2);
    cr_assert_eq(gpool_free(pool, f), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, g), GPOOL_OK);
    void *s = must(pool, 3 * MiB);
    gpool_ipc_handle h;
    cr_assert_eq(gpool_export_block(pool, s, &h), GPOOL_ERR_UNSUPPORTED);
    cr_assert(strstr(gpool_last_error(), "partly used page"), "%s", gpool_last_error());
    void *ptrs[] = {s, a, d, e};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gpool_free(pool, ptrs[i]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* The tail and head together may spare more than one fresh page: 4 pages of 2 MiB, a 0.5 MiB |
 * f 1.5 MiB | d 2 MiB | g 1.5 MiB | e 0.5 MiB, f and g freed, one page unbacked. 5 MiB needs 3
 * fresh pages alone, 2 over the tail alone, 1 over the tail and the head (3 MiB of theirs):
 * served, its bytes the pages' own. */
Test(span, a_tail_and_a_head_together_spare_two_pages)
{
    sim->set_capacity(0, 8 * MiB);
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *a = must(pool, MiB / 2);
    unsigned char *f = must(pool, 3 * MiB / 2);
    void *d = must(pool, 2 * MiB);
    unsigned char *g = must(pool, 3 * MiB / 2);
    void *e = must(pool, MiB / 2);
    cr_assert_eq((char *)f, (char *)a + MiB / 2, "the layout is not the expected one");
    cr_assert_eq((char *)g, (char *)d + 2 * MiB);
    memset(a, 0xa1, MiB / 2);
    memset(d, 0xd1, 2 * MiB);
    memset(e, 0xe1, MiB / 2);
    cr_assert_eq(gpool_free(pool, f), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, g), GPOOL_OK);
    void *s = NULL;
    cr_assert_eq(gpool_alloc(pool, 5 * MiB, NULL, &s), GPOOL_OK, "%s", gpool_last_error());
    memset(s, 0x5b, 5 * MiB);
    cr_assert(all(f, 3 * MiB / 2, 0x5b), "the block's first bytes are not the tail's");
    cr_assert(all(g, 3 * MiB / 2, 0x5b), "the block's last bytes are not the head's");
    cr_assert(all(a, MiB / 2, 0xa1) && all(d, 2 * MiB, 0xd1) && all(e, MiB / 2, 0xe1),
              "a neighbour's bytes changed");
    void *ptrs[] = {s, a, d, e};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gpool_free(pool, ptrs[i]), GPOOL_OK);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
    cr_assert_eq(sim->violations(), 0);
}
