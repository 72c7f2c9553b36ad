/* Invalid-pointer reports (issue 24): a free of a pointer gpool does not own, of an interior
 * pointer or of a block already freed is refused with GPOOL_ERR_INVALID_POINTER and a message
 * that says which of the three it is, in the same words for every kind and size (one function
 * forms them: src/api/bad_pointer.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "util_pool.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

TestSuite(bad_pointer);

static void expect_msg(const char *what, const char *case_name)
{
    const char *msg = gpool_last_error();
    cr_expect(strstr(msg, what) != NULL, "%s: expected \"%s\" in \"%s\"", case_name, what, msg);
    cr_expect(strstr(msg, "gpool_free") != NULL, "%s: the call is named: \"%s\"", case_name, msg);
    cr_expect(strstr(msg, " or interior") == NULL, "%s: says which it is: \"%s\"", case_name, msg);
}

static void check_kind(gpool_t *pool, gpool_mem_kind kind, size_t size)
{
    char name[64];
    snprintf(name, sizeof name, "kind %d, %zu bytes", (int)kind, size);
    gpool_alloc_params params = {0};
    params.kind = kind;
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, size, &params, &p), GPOOL_OK, "%s: %s", name,
                 gpool_last_error());
    cr_expect_eq(gpool_free(pool, (char *)p + 256), GPOOL_ERR_INVALID_POINTER, "%s", name);
    expect_msg("not its start", name);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK, "%s: %s", name, gpool_last_error());
    cr_expect_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER, "%s", name);
    expect_msg("already freed", name);
}

Test(bad_pointer, interior_and_double_frees_say_which_for_every_kind)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    const gpool_mem_kind kinds[] = {GPOOL_MEM_DEVICE, GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    const size_t sizes[] = {1000, 300 * KiB, 4 * MiB};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            check_kind(pool, kinds[k], sizes[s]);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

Test(bad_pointer, a_foreign_pointer_is_not_allocated_by_this_pool)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &p), GPOOL_OK); /* the pool has memory */
    int local;
    cr_expect_eq(gpool_free(pool, &local), GPOOL_ERR_INVALID_POINTER);
    expect_msg("not allocated by this pool", "a stack address");
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}
