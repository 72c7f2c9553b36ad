/* options.c — the GPOOL_CONF reader over tables of keys (options.h). */
#include "options.h"
#include "structs.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "size_parse.h"

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
    while (*len && is_blank(**s))
        (*s)++, (*len)--;
    while (*len && is_blank((*s)[*len - 1]))
        (*len)--;
}

static int same(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && !strncmp(name, s, len);
}

/* "a, b or c" from a NULL-terminated list. */
static void list_choices(char *buf, size_t cap, const char *const *choices)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; choices[i] && used < cap; i++) {
        const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
        int w = snprintf(buf + used, cap - used, "%s%s", sep, choices[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* "k1, k2, ..." of every table's keys. */
static void list_keys(char *buf, size_t cap, size_t n, const gp_option_table *const tables[])
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < tables[t]->count && used < cap; i++) {
            int w =
                snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", tables[t]->keys[i].name);
            if (w < 0) return;
            used += (size_t)w;
        }
}

/* Parse val for key k; write it at target + k->offset when target is not NULL. */
static gpool_status apply_one(const gp_option *k, const char *val, size_t vlen, char *target)
{
    char *field = target ? target + k->offset : NULL;
    uint64_t v = 0;
    const char *why = NULL;
    switch (k->type) {
    case GP_OPT_SIZE:
        if (gp_size_parse(val, vlen, &v, &why))
            return gp_fail(GPOOL_ERR_CONFIG, "%s=%.*s is not a size: %s", k->name, (int)vlen, val,
                           why);
        if (v > SIZE_MAX)
            return gp_fail(GPOOL_ERR_CONFIG, "%s=%.*s is too large", k->name, (int)vlen, val);
        if (field) {
            size_t sv = (size_t)v;
            memcpy(field, &sv, sizeof sv);
        }
        return GPOOL_OK;
    case GP_OPT_INT:
    case GP_OPT_BOOL: {
        int lo = k->type == GP_OPT_BOOL ? 0 : k->min, hi = k->type == GP_OPT_BOOL ? 1 : k->max;
        int digits = vlen > 0; /* digits only: a unit makes no sense here */
        for (size_t i = 0; i < vlen; i++)
            digits &= val[i] >= '0' && val[i] <= '9';
        if (!digits || gp_size_parse(val, vlen, &v, NULL) || v < (uint64_t)lo || v > (uint64_t)hi) {
            if (k->type == GP_OPT_BOOL)
                return gp_fail(GPOOL_ERR_CONFIG, "%s=%.*s must be 0 or 1", k->name, (int)vlen, val);
            return gp_fail(GPOOL_ERR_CONFIG, "%s=%.*s must be an integer in [%d, %d]", k->name,
                           (int)vlen, val, lo, hi);
        }
        if (field) {
            int iv = (int)v;
            memcpy(field, &iv, sizeof iv);
        }
        return GPOOL_OK;
    }
    case GP_OPT_CHOICE:
        for (int m = 0; k->choices[m]; m++) {
            if (!same(k->choices[m], val, vlen)) continue;
            if (field) memcpy(field, &m, sizeof m);
            return GPOOL_OK;
        }
        {
            char names[200];
            list_choices(names, sizeof names, k->choices);
            return gp_fail(GPOOL_ERR_CONFIG, "%s must be %s, not '%.*s'", k->name, names, (int)vlen,
                           val);
        }
    case GP_OPT_PATH: /* a library-owned copy (structs.h); "" clears the path */
        if (field) {
            const char *path = vlen ? gp_intern(val, vlen) : NULL;
            if (vlen && !path)
                return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory copying %s", k->name);
            memcpy(field, &path, sizeof path);
        }
        return GPOOL_OK;
    }
    return gp_fail(GPOOL_ERR_CONFIG, "key %s has no type", k->name);
}

/* One pass over conf; write = 0 checks only. */
static gpool_status walk(const char *conf, size_t n, const gp_option_table *const tables[],
                         void *const targets[], int write)
{
    for (const char *p = conf; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *item = p;
        trim(&item, &len);
        if (len) {
            const char *eq = memchr(item, '=', len);
            if (!eq) return gp_fail(GPOOL_ERR_CONFIG, "'%.*s' is not key=value", (int)len, item);
            const char *key = item, *val = eq + 1;
            size_t klen = (size_t)(eq - item), vlen = len - klen - 1;
            trim(&key, &klen);
            trim(&val, &vlen);
            const gp_option *k = NULL;
            void *target = NULL;
            for (size_t t = 0; t < n && !k; t++)
                for (size_t i = 0; i < tables[t]->count && !k; i++)
                    if (same(tables[t]->keys[i].name, key, klen)) {
                        k = &tables[t]->keys[i];
                        target = write ? targets[t] : NULL;
                    }
            if (!k) {
                char known[600];
                list_keys(known, sizeof known, n, tables);
                return gp_fail(GPOOL_ERR_CONFIG, "unknown key '%.*s' (keys: %s)", (int)klen, key,
                               known);
            }
            gpool_status st = apply_one(k, val, vlen, target);
            if (st != GPOOL_OK) return st;
        }
        if (!end) break;
        p = end + 1;
    }
    return GPOOL_OK;
}

gpool_status gp_options_apply(const char *conf, size_t n, const gp_option_table *const tables[],
                              void *const targets[])
{
    gpool_status st = walk(conf, n, tables, targets, 0);
    return st == GPOOL_OK ? walk(conf, n, tables, targets, 1) : st;
}
