/* json.c — a small recursive-descent JSON reader, enough for gpool_dump_json snapshots: UTF-8
 * text, \u escapes (BMP and surrogate pairs), integers kept exactly as 64-bit values. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct reader {
    const char *s, *end, *start;
    char *err;
    size_t errlen;
    int failed;
} reader;

static void fail(reader *r, const char *what)
{
    if (r->failed) return;
    r->failed = 1;
    size_t line = 1, col = 1;
    for (const char *p = r->start; p < r->s && p < r->end; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(r->err, r->errlen, "line %zu col %zu: %s", line, col, what);
}

static void skip_ws(reader *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r'))
        r->s++;
}

static bench_json *new_node(reader *r, bench_json_type type)
{
    bench_json *j = calloc(1, sizeof *j);
    if (!j) fail(r, "out of host memory");
    if (j) j->type = type;
    return j;
}

static int push_item(reader *r, bench_json *parent, char *key, bench_json *item)
{
    if ((parent->n & (parent->n - 1)) == 0) { /* grow at 0, 1, 2, 4, 8, ... */
        size_t cap = parent->n ? parent->n * 2 : 1;
        bench_json **items = realloc(parent->items, cap * sizeof *items);
        if (!items) goto oom;
        parent->items = items;
        if (parent->type == BENCH_JSON_OBJECT) {
            char **keys = realloc(parent->keys, cap * sizeof *keys);
            if (!keys) goto oom;
            parent->keys = keys;
        }
    }
    parent->items[parent->n] = item;
    if (parent->type == BENCH_JSON_OBJECT) parent->keys[parent->n] = key;
    parent->n++;
    return 0;
oom:
    fail(r, "out of host memory");
    free(key);
    bench_json_free(item);
    return -1;
}

static void put_utf8(char **o, unsigned cp)
{
    char *p = *o;
    if (cp < 0x80) {
        *p++ = (char)cp;
    } else if (cp < 0x800) {
        *p++ = (char)(0xc0 | cp >> 6);
        *p++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *p++ = (char)(0xe0 | cp >> 12);
        *p++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *p++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *p++ = (char)(0xf0 | cp >> 18);
        *p++ = (char)(0x80 | (cp >> 12 & 0x3f));
        *p++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *p++ = (char)(0x80 | (cp & 0x3f));
    }
    *o = p;
}

static int hex4(reader *r, unsigned *out)
{
    if (r->end - r->s < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    r->s += 4;
    *out = v;
    return 0;
}

/* At the opening quote. A decoded string (never longer than its source). */
static char *parse_string(reader *r)
{
    r->s++;
    const char *q = r->s;
    while (q < r->end && *q != '"')
        q += *q == '\\' ? 2 : 1;
    if (q >= r->end) {
        fail(r, "unterminated string");
        return NULL;
    }
    char *out = malloc((size_t)(q - r->s) + 1), *o = out;
    if (!out) {
        fail(r, "out of host memory");
        return NULL;
    }
    while (*r->s != '"') {
        unsigned char c = (unsigned char)*r->s;
        if (c < 0x20) {
            fail(r, "control character in a string");
            goto bad;
        }
        if (c != '\\') {
            *o++ = (char)c;
            r->s++;
            continue;
        }
        r->s++;
        char e = *r->s++;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            *o++ = e;
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(r, &cp) != 0) {
                fail(r, "bad \\u escape");
                goto bad;
            }
            if (cp >= 0xd800 && cp < 0xdc00 && r->end - r->s >= 6 && r->s[0] == '\\' &&
                r->s[1] == 'u') {
                r->s += 2;
                if (hex4(r, &lo) != 0 || lo < 0xdc00 || lo >= 0xe000) {
                    fail(r, "bad surrogate pair");
                    goto bad;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            put_utf8(&o, cp); /* at most 4 bytes for a 6- or 12-byte escape */
            break;
        }
        default:
            fail(r, "bad escape in a string");
            goto bad;
        }
    }
    r->s++;
    *o = 0;
    return out;
bad:
    free(out);
    return NULL;
}

static bench_json *parse_number(reader *r)
{
    const char *p = r->s;
    if (p < r->end && *p == '-') p++;
    if (p >= r->end || *p < '0' || *p > '9') {
        fail(r, "unexpected character");
        return NULL;
    }
    int integer = 1;
    while (p < r->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
                          *p == '+' || *p == '-')) {
        if (*p == '.' || *p == 'e' || *p == 'E') integer = 0;
        p++;
    }
    char buf[64];
    if ((size_t)(p - r->s) >= sizeof buf) {
        fail(r, "number too long");
        return NULL;
    }
    memcpy(buf, r->s, (size_t)(p - r->s));
    buf[p - r->s] = 0;
    char *e;
    double d = strtod(buf, &e);
    if (*e) {
        fail(r, "bad number");
        return NULL;
    }
    bench_json *j = new_node(r, BENCH_JSON_NUMBER);
    if (!j) return NULL;
    j->num = d;
    if (integer) {
        errno = 0;
        if (buf[0] == '-') {
            long long v = strtoll(buf, &e, 10);
            j->u = (uint64_t)v;
        } else {
            j->u = strtoull(buf, &e, 10);
        }
        j->is_int = errno == 0;
    }
    r->s = p;
    return j;
}

static int literal(reader *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->s) < n || memcmp(r->s, word, n) != 0) return 0;
    r->s += n;
    return 1;
}

static bench_json *parse_value(reader *r, int depth)
{
    skip_ws(r);
    if (r->s >= r->end) {
        fail(r, "unexpected end of input");
        return NULL;
    }
    if (depth > JSON_MAX_DEPTH) {
        fail(r, "nested too deeply");
        return NULL;
    }
    char c = *r->s;
    bench_json *j;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        j = new_node(r, obj ? BENCH_JSON_OBJECT : BENCH_JSON_ARRAY);
        if (!j) return NULL;
        r->s++;
        skip_ws(r);
        if (r->s < r->end && *r->s == (obj ? '}' : ']')) {
            r->s++;
            return j;
        }
        for (;;) {
            char *key = NULL;
            if (obj) {
                skip_ws(r);
                if (r->s >= r->end || *r->s != '"') {
                    fail(r, "expected a string key");
                    goto bad;
                }
                if (!(key = parse_string(r))) goto bad;
                skip_ws(r);
                if (r->s >= r->end || *r->s != ':') {
                    free(key);
                    fail(r, "expected ':'");
                    goto bad;
                }
                r->s++;
            }
            bench_json *v = parse_value(r, depth + 1);
            if (!v) {
                free(key);
                goto bad;
            }
            if (push_item(r, j, key, v) != 0) goto bad;
            skip_ws(r);
            if (r->s < r->end && *r->s == ',') {
                r->s++;
                continue;
            }
            if (r->s < r->end && *r->s == (obj ? '}' : ']')) {
                r->s++;
                return j;
            }
            fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            goto bad;
        }
    bad:
        bench_json_free(j);
        return NULL;
    }
    if (c == '"') {
        char *str = parse_string(r);
        if (!str) return NULL;
        if (!(j = new_node(r, BENCH_JSON_STRING))) {
            free(str);
            return NULL;
        }
        j->str = str;
        return j;
    }
    int truth = literal(r, "true");
    if (truth || literal(r, "false")) {
        if ((j = new_node(r, BENCH_JSON_BOOL))) j->num = truth;
        return j;
    }
    if (literal(r, "null")) return new_node(r, BENCH_JSON_NULL);
    return parse_number(r);
}

bench_json *bench_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    reader r = {.s = text, .end = text + len, .start = text, .err = err, .errlen = errlen};
    bench_json *j = parse_value(&r, 0);
    if (!j) return NULL;
    skip_ws(&r);
    if (r.s != r.end) {
        fail(&r, "trailing characters after the value");
        bench_json_free(j);
        return NULL;
    }
    return j;
}

void bench_json_free(bench_json *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        if (j->keys) free(j->keys[i]);
        bench_json_free(j->items[i]);
    }
    free(j->keys);
    free(j->items);
    free(j->str);
    free(j);
}

const bench_json *bench_json_get(const bench_json *j, const char *key)
{
    if (!j || j->type != BENCH_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < j->n; i++)
        if (!strcmp(j->keys[i], key)) return j->items[i];
    return NULL;
}

uint64_t bench_json_u64(const bench_json *j, uint64_t def)
{
    if (!j || j->type != BENCH_JSON_NUMBER) return def;
    if (j->is_int) return j->u;
    return j->num >= 0 && j->num < 18446744073709551616.0 ? (uint64_t)j->num : def;
}
