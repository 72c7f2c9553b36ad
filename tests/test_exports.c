/* libgpool.so exports exactly the public API: every dynamic symbol it defines is a gpool_
 * function, every GPOOL_API function declared in the public headers is among them, the
 * soname carries the major version, and gpool_version() agrees with the header's macros.
 * Runs `nm -D` and `readelf -d` on $GPOOL_TEST_BUILD/libgpool.so (set by `make test`). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"

enum { MAX_SYMS = 512, NAME_MAX_LEN = 128 };

struct symset {
    int count;
    char name[MAX_SYMS][NAME_MAX_LEN];
};

static int symset_has(const struct symset *s, const char *name)
{
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->name[i], name) == 0) return 1;
    return 0;
}

static void symset_add(struct symset *s, const char *name)
{
    cr_assert_lt(s->count, MAX_SYMS, "too many symbols");
    cr_assert_lt(strlen(name), (size_t)NAME_MAX_LEN, "symbol name too long: %s", name);
    if (!symset_has(s, name)) strcpy(s->name[s->count++], name);
}

static const char *lib_path(void)
{
    static char path[4096];
    const char *build = getenv("GPOOL_TEST_BUILD");
    cr_assert_not_null(build, "GPOOL_TEST_BUILD is not set (run the tests with make test)");
    snprintf(path, sizeof path, "%s/libgpool.so", build);
    return path;
}

/* Symbols libgpool.so defines in its dynamic table, without @VERSION suffixes. Version
 * definitions themselves (type A, e.g. GPOOL_0) go to *versions. */
static void exported_symbols(struct symset *syms, struct symset *versions)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", lib_path());
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    char line[512];
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[NAME_MAX_LEN];
        int n = sscanf(line, "%63s %7s %127s", addr, type, name);
        if (n == 2) { /* no address column */
            strcpy(name, type);
            strcpy(type, addr);
        } else if (n != 3) {
            continue;
        }
        char *at = strchr(name, '@');
        if (at) *at = '\0';
        symset_add(strcmp(type, "A") == 0 ? versions : syms, name);
    }
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
}

/* Names of the functions declared GPOOL_API in a public header (a missing header adds
 * nothing). Declarations may span lines: the name is the identifier before the first '('
 * after GPOOL_API. */
static void header_api(const char *header, struct symset *out)
{
    FILE *f = fopen(header, "r");
    if (!f) return;
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    for (char *p = text; (p = strstr(p, "GPOOL_API")) != NULL; p += 9) {
        char *after = p + 9;
        if (isalnum((unsigned char)*after) || *after == '_') continue; /* GPOOL_API_FOO */
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
        /* skip the macro's own definition and comments that mention it */
        char *bol = p;
        while (bol > text && bol[-1] != '\n')
            bol--;
        while (*bol == ' ')
            bol++;
        if (*bol == '#' || *bol == '*' || *bol == '/') continue;
        char *paren = strchr(after, '(');
        if (!paren) break;
        char *end = paren;
        while (end > after && isspace((unsigned char)end[-1]))
            end--;
        char *start = end;
        while (start > after && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
            start--;
        char name[NAME_MAX_LEN];
        size_t n = (size_t)(end - start);
        cr_assert(n > 0 && n < sizeof name, "cannot parse a GPOOL_API declaration in %s", header);
        memcpy(name, start, n);
        name[n] = '\0';
        symset_add(out, name);
    }
}

Test(exports, only_gpool_symbols_are_exported)
{
    static struct symset syms, versions;
    exported_symbols(&syms, &versions);
    cr_assert_gt(syms.count, 0, "%s exports nothing", lib_path());
    for (int i = 0; i < syms.count; i++)
        cr_expect(strncmp(syms.name[i], "gpool_", 6) == 0,
                  "%s exports the internal symbol %s (give it hidden visibility, or list it in "
                  "pkg/gpool.map if it is public API)",
                  lib_path(), syms.name[i]);
    for (int i = 0; i < versions.count; i++)
        cr_expect(strncmp(versions.name[i], "GPOOL_", 6) == 0, "unexpected version node %s",
                  versions.name[i]);
}

Test(exports, every_public_function_is_exported)
{
    static struct symset syms, versions, api;
    exported_symbols(&syms, &versions);
    header_api("include/gpool.h", &api);
    header_api("include/gpool_torch.h", &api);
    cr_assert_geq(api.count, 19,
                  "found only %d GPOOL_API functions in include/ (cwd must be "
                  "the repository root)",
                  api.count);
    for (int i = 0; i < api.count; i++)
        cr_expect(symset_has(&syms, api.name[i]),
                  "%s is declared GPOOL_API but %s does not export it (add it to pkg/gpool.map)",
                  api.name[i], lib_path());
    /* and nothing beyond the headers */
    for (int i = 0; i < syms.count; i++)
        cr_expect(symset_has(&api, syms.name[i]), "%s exports %s, which no public header declares",
                  lib_path(), syms.name[i]);
}

Test(exports, soname_carries_the_major_version)
{
    char cmd[4200], want[64];
    snprintf(cmd, sizeof cmd, "readelf -d '%s'", lib_path());
    snprintf(want, sizeof want, "[libgpool.so.%d]", GPOOL_VERSION_MAJOR);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, p))
        if (strstr(line, "SONAME") && strstr(line, want)) found = 1;
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
    cr_assert(found, "%s has no SONAME %s", lib_path(), want);

    /* the file itself is libgpool.so.MAJOR.MINOR.PATCH, reached through the links */
    char real[4096];
    cr_assert_not_null(realpath(lib_path(), real));
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/libgpool.so.%d.%d.%d", GPOOL_VERSION_MAJOR,
             GPOOL_VERSION_MINOR, GPOOL_VERSION_PATCH);
    size_t rl = strlen(real), sl = strlen(suffix);
    cr_assert(rl > sl && strcmp(real + rl - sl, suffix) == 0, "libgpool.so resolves to %s", real);
}

Test(exports, version_string_matches_the_macros)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", GPOOL_VERSION_MAJOR, GPOOL_VERSION_MINOR,
             GPOOL_VERSION_PATCH);
    cr_assert_str_eq(gpool_version(), want);
}
