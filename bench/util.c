/* util.c — clock, random numbers, JSON strings, a pointer map, size texts. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double bench_rng_uniform(bench_rng *r)
{
    return (double)(bench_rng_next(r) >> 11) * 0x1.0p-53;
}

double bench_rng_normal(bench_rng *r)
{
    double u1 = bench_rng_uniform(r), u2 = bench_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* ---- bench_map -------------------------------------------------------------------------- */

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

int bench_map_init(bench_map *m, size_t expected)
{
    size_t n = 64;
    while (n < expected * 2)
        n <<= 1;
    m->keys = calloc(n, sizeof *m->keys);
    m->vals = calloc(n, sizeof *m->vals);
    m->mask = n - 1;
    m->count = 0;
    if (m->keys && m->vals) return 0;
    bench_map_destroy(m);
    return -1;
}

void bench_map_destroy(bench_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
}

static size_t map_cell(const bench_map *m, uint64_t stored)
{
    size_t i = hash64(stored) & m->mask;
    while (m->keys[i] && m->keys[i] != stored)
        i = (i + 1) & m->mask;
    return i;
}

static int map_grow(bench_map *m)
{
    bench_map n;
    if (bench_map_init(&n, m->mask + 1) != 0) return -1;
    for (size_t i = 0; i <= m->mask; i++) {
        if (!m->keys[i]) continue;
        size_t j = map_cell(&n, m->keys[i]);
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.count++;
    }
    bench_map_destroy(m);
    *m = n;
    return 0;
}

int bench_map_put(bench_map *m, uint64_t key, uint64_t val)
{
    if ((m->count + 1) * 2 > m->mask + 1 && map_grow(m) != 0) return -1;
    size_t i = map_cell(m, key + 1);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key + 1;
    m->vals[i] = val;
    return 0;
}

int bench_map_get(const bench_map *m, uint64_t key, uint64_t *val)
{
    size_t i = map_cell(m, key + 1);
    if (!m->keys[i]) return 0;
    *val = m->vals[i];
    return 1;
}

int bench_map_take(bench_map *m, uint64_t key, uint64_t *val)
{
    size_t i = map_cell(m, key + 1);
    if (!m->keys[i]) return 0;
    if (val) *val = m->vals[i];
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->keys[j]) break;
        size_t home = hash64(m->keys[j]) & m->mask;
        /* j may move back to i unless its home lies cyclically in (i, j] */
        int home_in = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!home_in) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->count--;
    return 1;
}

void bench_size_text(char *buf, size_t len, uint64_t b)
{
    if (b >= BENCH_GIB && b % BENCH_GIB == 0)
        snprintf(buf, len, "%llu GiB", (unsigned long long)(b / BENCH_GIB));
    else if (b >= BENCH_MIB && b % BENCH_MIB == 0)
        snprintf(buf, len, "%llu MiB", (unsigned long long)(b / BENCH_MIB));
    else if (b >= BENCH_MIB)
        snprintf(buf, len, "%.1f MiB", (double)b / (double)BENCH_MIB);
    else if (b >= BENCH_KIB && b % BENCH_KIB == 0)
        snprintf(buf, len, "%llu KiB", (unsigned long long)(b / BENCH_KIB));
    else
        snprintf(buf, len, "%llu B", (unsigned long long)b);
}
