/* The lock-count oracle (issue 24): how many mutexes an alloc+free pair takes, warm, for a
 * cached small device block, a large device block, a pinned and a mapped block. This
 * executable defines pthread_mutex_lock and pthread_mutex_trylock, forwarding to the C
 * library's (dlsym RTLD_NEXT); the library is linked in statically, so its calls come here
 * too, and only the calling thread's calls inside a counted window count. The counts are
 * pinned: a change that adds a lock to one of these pairs fails here and says by how many. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)

static _Thread_local int counting;
static _Thread_local unsigned long locks;
static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);

int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (!real_lock) real_lock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (counting) locks++;
    return real_lock(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
    if (!real_trylock)
        real_trylock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    if (counting) locks++;
    return real_trylock(m);
}

TestSuite(locks, .init = NULL);

enum { WARM = 5000, PAIRS = 4096 };

typedef struct pair_locks {
    unsigned long least, most;             /* over single pairs */
    double mean;                           /* per pair, over PAIRS pairs */
    unsigned long alloc_least, free_least; /* the pair's two halves in the common case */
} pair_locks;

/* Warm pairs of size (kind, params NULL for the device default), then count each pair. */
static pair_locks count_pairs(gpool_t *pool, size_t size, gpool_mem_kind kind)
{
    gpool_alloc_params p = GPOOL_ALLOC_PARAMS_INIT;
    p.kind = kind;
    const gpool_alloc_params *pp = kind == GPOOL_MEM_DEVICE ? NULL : &p;
    for (int i = 0; i < WARM; i++) {
        void *x = NULL;
        cr_assert_eq(gpool_alloc(pool, size, pp, &x), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(gpool_free(pool, x), GPOOL_OK, "%s", gpool_last_error());
    }
    pair_locks r = {.least = (unsigned long)-1,
                    .alloc_least = (unsigned long)-1,
                    .free_least = (unsigned long)-1};
    unsigned long total = 0;
    for (int i = 0; i < PAIRS; i++) {
        void *x = NULL;
        locks = 0;
        counting = 1;
        gpool_status sa = gpool_alloc(pool, size, pp, &x);
        unsigned long in_alloc = locks;
        gpool_status sf = gpool_free(pool, x);
        counting = 0;
        cr_assert_eq(sa, GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(sf, GPOOL_OK, "%s", gpool_last_error());
        total += locks;
        if (locks < r.least) r.least = locks;
        if (locks > r.most) r.most = locks;
        if (in_alloc < r.alloc_least) r.alloc_least = in_alloc;
        if (locks - in_alloc < r.free_least) r.free_least = locks - in_alloc;
    }
    r.mean = (double)total / PAIRS;
    return r;
}

/* The counter sees the library's locks: a pinned pair takes the host kind's lock at least. */
Test(locks, the_counter_sees_the_librarys_locks)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    locks = 0;
    counting = 1;
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s); /* takes the pool's locks */
    counting = 0;
    cr_expect_gt(locks, 0, "gpool_get_stats took no lock the counter saw");
    pair_locks h = count_pairs(pool, KiB, GPOOL_MEM_HOST_PINNED);
    cr_expect_gt(h.least, 0, "a pinned pair took no lock the counter saw");
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* least: the common pair's locks, alloc_least of them in the alloc (the rest in the free) */
static void expect_pair(const char *what, size_t size, gpool_mem_kind kind, unsigned long least,
                        unsigned long alloc_least, unsigned long most, double mean_max)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    pair_locks r = count_pairs(pool, size, kind);
    cr_log_info("%s pair: %lu..%lu locks, %.3f on average; common: %lu in the alloc, %lu in the "
                "free",
                what, r.least, r.most, r.mean, r.alloc_least, r.free_least);
    cr_expect_eq(r.alloc_least, alloc_least,
                 "%s alloc: %lu locks in the common case, pinned at %lu", what, r.alloc_least,
                 alloc_least);
    cr_expect_eq(r.free_least, least - alloc_least,
                 "%s free: %lu locks in the common case, pinned at %lu", what, r.free_least,
                 least - alloc_least);
    cr_expect_eq(r.least, least, "%s pair: %lu locks in the common case, pinned at %lu", what,
                 r.least, least);
    cr_expect_leq(r.most, most, "%s pair: up to %lu locks, pinned at most %lu", what, r.most, most);
    cr_expect_leq(r.mean, mean_max, "%s pair: %.3f locks on average, pinned at most %.3f", what,
                  r.mean, mean_max);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(locks, cached_small_device_pair)
{
    expect_pair("small device", KiB, GPOOL_MEM_DEVICE, 0, 0, 0, 0);
}

Test(locks, large_device_pair)
{
    expect_pair("large device", 4 * MiB, GPOOL_MEM_DEVICE, 2, 1, 2, 2);
}

Test(locks, pinned_pair)
{
    expect_pair("pinned", KiB, GPOOL_MEM_HOST_PINNED, 3, 2, 80, 3.05);
}

Test(locks, mapped_pair)
{
    expect_pair("mapped", KiB, GPOOL_MEM_HOST_MAPPED, 3, 2, 80, 3.05);
}
