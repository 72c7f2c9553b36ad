/* size_parse.c — byte counts with binary units ("64M", "64MiB", "64MB"): see size_parse.h. */
#include "size_parse.h"

#include <ctype.h>

#define BAD_UNIT "unknown unit (use B, or K, M, G or T optionally followed by B or iB)"

static int fail(const char **why, const char *what)
{
    if (why) *why = what;
    return -1;
}

int gp_size_parse(const char *s, size_t len, uint64_t *out, const char **why)
{
    if (!s || !len) return fail(why, "empty");
    if (s[0] == '-') return fail(why, "negative");
    if (!isdigit((unsigned char)s[0])) return fail(why, "not a number");
    uint64_t v = 0;
    size_t i = 0;
    for (; i < len && isdigit((unsigned char)s[i]); i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return fail(why, "too large (more than 64 bits)");
        v = v * 10 + d;
    }
    unsigned shift = 0;
    if (i < len) {
        switch (toupper((unsigned char)s[i])) {
        case 'B':
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
            return fail(why,
                        isalpha((unsigned char)s[i]) ? BAD_UNIT : "not a whole number of bytes");
        }
        i++;
        /* after K/M/G/T: nothing, "B" or "iB"; after B: nothing */
        if (shift && i < len && toupper((unsigned char)s[i]) == 'I') {
            i++;
            if (i == len || toupper((unsigned char)s[i]) != 'B') return fail(why, BAD_UNIT);
        }
        if (shift && i < len && toupper((unsigned char)s[i]) == 'B') i++;
        if (i < len) return fail(why, "junk after the unit");
    }
    if (shift && v > (UINT64_MAX >> shift)) return fail(why, "too large (more than 64 bits)");
    *out = v << shift;
    return 0;
}
