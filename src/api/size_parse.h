/* size_parse.h — the one parser of byte counts. GPOOL_CONF (gpool_config_parse, the torch
 * hooks), the LD_PRELOAD interposer's own keys and gpool-bench's size options all use it, so
 * a size means the same everywhere. */
#ifndef GPOOL_SIZE_PARSE_H
#define GPOOL_SIZE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The accepted spellings, for messages and --help texts. */
#define GP_SIZE_SYNTAX                                                                             \
    "a whole number of bytes, optionally with a unit: K, M, G or T (powers of 1024; KiB and KB "   \
    "mean the same) or B"

/* Parse the len bytes at s as a byte count: decimal digits, then optionally one unit -- B, or
 * K, M, G, T (powers of 1024) each optionally followed by B or iB -- case-insensitive, nothing
 * else (no sign, space, fraction or hex). Returns 0 and sets *out, or -1 and, when why is not
 * NULL, points it at a static phrase saying what is wrong ("not a number", "negative", "too
 * large", "unknown unit 'x'"...); *out is untouched then. */
int gp_size_parse(const char *s, size_t len, uint64_t *out, const char **why);

#endif
