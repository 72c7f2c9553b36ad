/* gpool_config defaults and the "key=value,key=value" syntax of GPOOL_CONF. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpool.h"
#include "sizeclass.h"
#include "structs.h"

gpool_status gpool_config_default(gpool_config *cfg)
{
    if (!cfg) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_config_default: cfg is NULL");
    size_t size; /* the caller's struct may be older (smaller) or newer than this library's */
    gpool_status st =
        gp_struct_size(&gp_type_config_zero_ok, cfg, "gpool_config_default", 0, &size);
    if (st != GPOOL_OK) return st;
    const gpool_config defaults = GPOOL_CONFIG_INIT;
    gp_struct_write(&gp_type_config_zero_ok, cfg, &defaults, size, 1);
    return GPOOL_OK;
}

/* Parse a byte count with an optional K/M/G/T suffix (powers of 1024). */
static int parse_size(const char *s, size_t len, size_t *out)
{
    if (!len || !isdigit((unsigned char)s[0])) return -1;
    char buf[64];
    if (len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 0:
        break;
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return -1;
    }
    if (*end) {
        end++;
        if (toupper((unsigned char)*end) == 'I') end++;
        if (toupper((unsigned char)*end) == 'B') end++;
        if (*end) return -1;
    }
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    v <<= shift;
    if (v > SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
}

typedef enum { K_SIZE, K_INT, K_PATH, K_PEER } key_type;

static const struct conf_key {
    const char *name;
    key_type type;
    size_t offset;
    long min, max; /* K_INT bounds */
} conf_keys[] = {
    {"device", K_INT, offsetof(gpool_config, device), 0, 1 << 16},
    {"release_threshold", K_SIZE, offsetof(gpool_config, release_threshold), 0, 0},
    {"tcache_bytes", K_SIZE, offsetof(gpool_config, tcache_bytes), 0, 0},
    {"small_max", K_SIZE, offsetof(gpool_config, small_max), 0, 0},
    {"budget_device", K_SIZE, offsetof(gpool_config, budget[GPOOL_MEM_DEVICE]), 0, 0},
    {"budget_pinned", K_SIZE, offsetof(gpool_config, budget[GPOOL_MEM_HOST_PINNED]), 0, 0},
    {"budget_mapped", K_SIZE, offsetof(gpool_config, budget[GPOOL_MEM_HOST_MAPPED]), 0, 0},
    {"va_reserve", K_SIZE, offsetof(gpool_config, va_reserve), 0, 0},
    {"verbose", K_INT, offsetof(gpool_config, verbose), 0, 1},
    {"trace", K_PATH, offsetof(gpool_config, trace_path), 0, 0},
    {"peer_access", K_PEER, offsetof(gpool_config, peer_access), 0, 0},
};

static gpool_status apply(gpool_config *cfg, const char *key, size_t klen, const char *val,
                          size_t vlen)
{
    for (size_t i = 0; i < sizeof conf_keys / sizeof conf_keys[0]; i++) {
        const struct conf_key *k = &conf_keys[i];
        if (strlen(k->name) != klen || strncmp(k->name, key, klen)) continue;
        char *field = (char *)cfg + k->offset;
        size_t v = 0;
        switch (k->type) {
        case K_SIZE:
            if (parse_size(val, vlen, &v))
                return gp_fail(GPOOL_ERR_CONFIG, "config: %s=%.*s is not a size (e.g. 64M)",
                               k->name, (int)vlen, val);
            memcpy(field, &v, sizeof v);
            return GPOOL_OK;
        case K_INT: {
            if (parse_size(val, vlen, &v) || v < (size_t)k->min || v > (size_t)k->max)
                return gp_fail(GPOOL_ERR_CONFIG, "config: %s=%.*s must be an integer in [%ld, %ld]",
                               k->name, (int)vlen, val, k->min, k->max);
            int iv = (int)v;
            memcpy(field, &iv, sizeof iv);
            return GPOOL_OK;
        }
        case K_PEER: {
            static const char *const names[] = {"auto", "none", "all"};
            for (int m = 0; m < 3; m++) {
                if (strlen(names[m]) == vlen && !strncmp(names[m], val, vlen)) {
                    memcpy(field, &m, sizeof m);
                    return GPOOL_OK;
                }
            }
            return gp_fail(GPOOL_ERR_CONFIG, "config: %s=%.*s must be auto, none or all", k->name,
                           (int)vlen, val);
        }
        case K_PATH: { /* a library-owned copy (structs.h); "" clears the path */
            const char *path = vlen ? gp_intern(val, vlen) : NULL;
            if (vlen && !path)
                return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "config: out of host memory copying %s",
                               k->name);
            memcpy(field, &path, sizeof path);
            return GPOOL_OK;
        }
        }
    }
    return gp_fail(GPOOL_ERR_CONFIG, "config: unknown key '%.*s'", (int)klen, key);
}

gpool_status gp_config_check(const gpool_config *cfg)
{
    if (cfg->small_max > GP_SMALL_LIMIT)
        return gp_fail(GPOOL_ERR_CONFIG, "config: small_max %zu exceeds the limit %zu",
                       cfg->small_max, GP_SMALL_LIMIT);
    if (cfg->va_reserve && cfg->va_reserve < ((size_t)64 << 20))
        return gp_fail(GPOOL_ERR_CONFIG, "config: va_reserve must be 0 or at least 64M");
    if (cfg->device < 0) return gp_fail(GPOOL_ERR_CONFIG, "config: device must be >= 0");
    if (cfg->peer_access < GPOOL_PEER_AUTO || cfg->peer_access > GPOOL_PEER_ALL)
        return gp_fail(GPOOL_ERR_CONFIG, "config: peer_access %d is not a gpool_peer_access",
                       cfg->peer_access);
    return GPOOL_OK;
}

gpool_status gpool_config_parse(gpool_config *cfg, const char *conf)
{
    if (!cfg || !conf)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_config_parse: %s is NULL",
                       cfg ? "conf" : "cfg");
    size_t size; /* the caller's struct may be older (smaller) or newer than this library's */
    gpool_status st = gp_struct_size(&gp_type_config_zero_ok, cfg, "gpool_config_parse", 0, &size);
    if (st != GPOOL_OK) return st;
    gpool_config tmp = GPOOL_CONFIG_INIT, before;
    gp_struct_read(&gp_type_config_zero_ok, &tmp, cfg, size);
    memcpy(&before, &tmp, sizeof tmp);
    const char *p = conf;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p))
            p++, len--;
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len) {
            const char *eq = memchr(p, '=', len);
            if (!eq)
                return gp_fail(GPOOL_ERR_CONFIG, "config: '%.*s' is not key=value", (int)len, p);
            st = apply(&tmp, p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1);
            if (st != GPOOL_OK) return st;
        }
        if (!end) break;
        p = end + 1;
    }
    st = gp_config_check(&tmp);
    if (st != GPOOL_OK) return st;
    if (size < sizeof tmp && memcmp((char *)&tmp + size, (char *)&before + size, sizeof tmp - size))
        return gp_fail(GPOOL_ERR_CONFIG,
                       "config: '%s' sets a field beyond the caller's gpool_config (struct_size "
                       "%zu, this library's %zu): the program was built with an older gpool.h",
                       conf, size, sizeof tmp);
    gp_struct_write(&gp_type_config_zero_ok, cfg, &tmp, size, 0);
    return GPOOL_OK;
}
