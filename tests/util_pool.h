/* Helpers shared by the library's tests. */
#ifndef GPOOL_TESTS_UTIL_POOL_H
#define GPOOL_TESTS_UTIL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

#define MiB ((size_t)1 << 20)

/* Checks in a suite's teardown (.fini). Criterion counts nothing that happens there -- a
 * failed assertion, a crash, an exit: the test still passes -- so a teardown calls
 * teardown_begin() first, teardown_expect() for each check and teardown_end() last. When
 * $GPOOL_TEST_TEARDOWN_DIR is set (make test sets it), teardown_begin leaves a file there
 * naming the test, teardown_expect appends each failure to it and teardown_end removes it only
 * when every check held; make test fails when a file is left (a failed check, or a teardown
 * that crashed or exited before its end). Failures are printed on stderr either way. */
void teardown_begin(void);
void teardown_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void teardown_end(void);
#define teardown_expect(cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond)) teardown_fail(__FILE__, __LINE__, __VA_ARGS__);                               \
    } while (0)

/* A pool with defaults plus the GPOOL_CONF-style string conf (may be NULL). */
gpool_t *test_pool(const char *conf);
/* Fill / check a block with a pattern derived from seed. */
void fill_pattern(void *p, size_t n, uint32_t seed);
int check_pattern(const void *p, size_t n, uint32_t seed);
/* xorshift */
uint32_t rnd(uint32_t *s);

#endif
