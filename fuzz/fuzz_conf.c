/* fuzz_conf.c — libFuzzer target: gpool_config_parse (the GPOOL_CONF syntax) and the size
 * parser under it (src/api/size_parse.c). It must never crash; it answers GPOOL_OK with sane
 * values, or GPOOL_ERR_CONFIG with a message, leaving the config untouched. A size it accepts
 * prints back as digits that parse to the same value. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "size_parse.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_conf: ");                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n  [%s:%d] %s\n", __FILE__, __LINE__, #cond);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Field by field: struct copies need not preserve padding bytes. */
static int cfg_equal(const gpool_config *a, const gpool_config *b)
{
    if (a->device != b->device || a->release_threshold != b->release_threshold ||
        a->tcache_bytes != b->tcache_bytes || a->small_max != b->small_max ||
        a->va_reserve != b->va_reserve || a->verbose != b->verbose ||
        a->default_stream != b->default_stream)
        return 0;
    for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++)
        if (a->budget[k] != b->budget[k]) return 0;
    if (a->struct_size != b->struct_size || a->peer_access != b->peer_access) return 0;
    if (!a->trace_path || !b->trace_path) return a->trace_path == b->trace_path;
    return strcmp(a->trace_path, b->trace_path) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the starting config, the rest is the string (cut at a NUL). */
    if (size > 4096) return 0;
    uint8_t start = size ? data[0] : 0;
    const uint8_t *s = size ? data + 1 : data;
    size_t n = size ? size - 1 : 0;
    char *conf = malloc(n + 1);
    if (!conf) return 0;
    memcpy(conf, s, n);
    conf[n] = 0;

    gpool_config cfg = GPOOL_CONFIG_INIT, before;
    CHECK(gpool_config_default(&cfg) == GPOOL_OK, "gpool_config_default");
    if (start & 1) cfg.device = 3;
    if (start & 2) cfg.tcache_bytes = 12345;
    if (start & 4) cfg.trace_path = "/tmp/x.csv";
    before = cfg;
    gpool_status st = gpool_config_parse(&cfg, conf);
    if (st == GPOOL_OK) {
        CHECK(cfg.device >= 0 && cfg.device <= 1 << 16, "device %d", cfg.device);
        CHECK(cfg.verbose == 0 || cfg.verbose == 1, "verbose %d", cfg.verbose);
        CHECK(cfg.small_max <= (size_t)64 << 10, "small_max %zu above 64K", cfg.small_max);
        CHECK(cfg.va_reserve == 0 || cfg.va_reserve >= (size_t)64 << 20, "va_reserve %zu",
              cfg.va_reserve);
        CHECK(!cfg.trace_path || cfg.trace_path == before.trace_path || strlen(cfg.trace_path) <= n,
              "trace path set, and longer than the input");
        CHECK(cfg.struct_size == sizeof cfg, "struct_size changed to %zu", cfg.struct_size);
        CHECK(cfg.default_stream == before.default_stream, "default_stream changed");
        /* parsing the same string again is idempotent */
        gpool_config again = cfg;
        CHECK(gpool_config_parse(&again, conf) == GPOOL_OK, "second parse failed");
        CHECK(cfg_equal(&again, &cfg), "second parse changed the result");
    } else {
        CHECK(st == GPOOL_ERR_CONFIG, "status %d for \"%s\"", (int)st, conf);
        const char *msg = gpool_last_error();
        CHECK(msg && strlen(msg) > 0, "no message for GPOOL_ERR_CONFIG");
        CHECK(cfg_equal(&cfg, &before), "cfg changed by a failed parse of \"%s\"", conf);
    }
    uint64_t v = 0, again = 0;
    const char *why = NULL;
    if (gp_size_parse(conf, strlen(conf), &v, &why) == 0) {
        char digits[32];
        snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
        CHECK(gp_size_parse(digits, strlen(digits), &again, NULL) == 0 && again == v,
              "size \"%s\" = %llu does not read back", conf, (unsigned long long)v);
    } else {
        CHECK(why && *why, "size \"%s\" refused without a reason", conf);
    }
    CHECK(gpool_config_parse(NULL, conf) == GPOOL_ERR_INVALID_ARG, "NULL cfg");
    CHECK(gpool_config_parse(&cfg, NULL) == GPOOL_ERR_INVALID_ARG, "NULL conf");
    free(conf);
    return 0;
}
