/* One lookup per free (issue 24): a large device block's free on the pool's only stream
 * resolves its pointer once and does not take the streams lock (no other stream exists, so the
 * free's position on the event clock does not matter). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "pool.h"
#include "stream_internal.h"
#include "util_pool.h"

#define MiB ((size_t)1 << 20)

TestSuite(free_lookup);

struct freer {
    gpool_t *pool;
    void *ptr;
    gpool_status st;
    atomic_int done;
};

static void *free_it(void *arg)
{
    struct freer *f = arg;
    f->st = gpool_free(f->pool, f->ptr);
    atomic_store(&f->done, 1);
    return NULL;
}

/* The streams lock is held elsewhere the whole time: the free completes anyway. */
Test(free_lookup, a_large_free_on_the_only_stream_takes_no_streams_lock)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *warm = NULL, *p = NULL;
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &warm), GPOOL_OK); /* the stream is known */
    cr_assert_eq(gpool_free(pool, warm), GPOOL_OK);
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &p), GPOOL_OK);
    struct freer f = {.pool = pool, .ptr = p};
    pthread_mutex_lock(&pool->streams->lock);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_it, &f), 0);
    for (int i = 0; i < 200 && !atomic_load(&f.done); i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* up to 2 s */
    int done = atomic_load(&f.done);
    pthread_mutex_unlock(&pool->streams->lock);
    pthread_join(t, NULL);
    cr_expect(done, "the free waited for the streams lock");
    cr_expect_eq(f.st, GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}

/* Frees of a pointer that is not a live block's start are still told apart. */
Test(free_lookup, bad_pointers_are_still_reported)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = NULL;
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &p), GPOOL_OK);
    cr_expect_eq(gpool_free(pool, (char *)p + 256), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_free(pool, p), GPOOL_OK);
    cr_expect_eq(gpool_free(pool, p), GPOOL_ERR_INVALID_POINTER);
    int local;
    cr_expect_eq(gpool_free(pool, &local), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
}
