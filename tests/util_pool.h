/* Helpers shared by the library's tests. */
#ifndef GPOOL_TESTS_UTIL_POOL_H
#define GPOOL_TESTS_UTIL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

#define MiB ((size_t)1 << 20)

/* A pool with defaults plus the GPOOL_CONF-style string conf (may be NULL). */
gpool_t *test_pool(const char *conf);
/* Fill / check a block with a pattern derived from seed. */
void fill_pattern(void *p, size_t n, uint32_t seed);
int check_pattern(const void *p, size_t n, uint32_t seed);
/* xorshift */
uint32_t rnd(uint32_t *s);

#endif
