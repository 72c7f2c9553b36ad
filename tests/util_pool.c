#include "util_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpool_t *test_pool(const char *conf)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    if (conf && gpool_config_parse(&cfg, conf) != GPOOL_OK) {
        fprintf(stderr, "bad test config %s: %s\n", conf, gpool_last_error());
        return NULL;
    }
    gpool_t *p = NULL;
    if (gpool_create(&cfg, &p) != GPOOL_OK) {
        fprintf(stderr, "gpool_create: %s\n", gpool_last_error());
        return NULL;
    }
    return p;
}

uint32_t rnd(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x12345678u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

void fill_pattern(void *p, size_t n, uint32_t seed)
{
    unsigned char *b = p;
    uint32_t x = seed | 1;
    size_t step = n > 4096 ? 997 : 1; /* large blocks: sample every 997th byte and the ends */
    for (size_t i = 0; i < n; i += step)
        b[i] = (unsigned char)(rnd(&x) >> 24);
    b[n - 1] = (unsigned char)seed;
}

int check_pattern(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    uint32_t x = seed | 1;
    size_t step = n > 4096 ? 997 : 1;
    for (size_t i = 0; i < n; i += step)
        if (i != n - 1 && b[i] != (unsigned char)(rnd(&x) >> 24)) return 0;
    return b[n - 1] == (unsigned char)seed;
}
