/* util_sizes.h — the size spellings every reader of a byte count must treat alike:
 * gpool_config_parse (GPOOL_CONF in the library and torch hooks), the LD_PRELOAD interposer's
 * GPOOL_CONF reading (its own keys and gpool's) and gpool-bench's size options. test_units.c,
 * test_preload.c and test_bench_cli.c / test_bench_parser.c each run the whole list. */
#ifndef GPOOL_TESTS_UTIL_SIZES_H
#define GPOOL_TESTS_UTIL_SIZES_H

#include <stdint.h>

/* Accepted, with the value they mean (units are powers of 1024, case-insensitive). */
static const struct size_spelling {
    const char *text;
    uint64_t value;
} sizes_accepted[] = {
    {"0", 0},
    {"4096", 4096},
    {"007", 7},
    {"512B", 512},
    {"512b", 512},
    {"64K", 64ull << 10},
    {"64k", 64ull << 10},
    {"64KiB", 64ull << 10},
    {"64KB", 64ull << 10},
    {"64M", 64ull << 20},
    {"64m", 64ull << 20},
    {"64MiB", 64ull << 20},
    {"64mib", 64ull << 20},
    {"64MB", 64ull << 20},
    {"64mb", 64ull << 20},
    {"2G", 2ull << 30},
    {"2GiB", 2ull << 30},
    {"2GB", 2ull << 30},
    {"1T", 1ull << 40},
    {"1TiB", 1ull << 40},
    {"1TB", 1ull << 40},
    {"16777215T", 16777215ull << 40},
    {"18446744073709551615", UINT64_MAX},
};

/* Rejected: garbage, signs, fractions, spaces inside, unknown or partial units, trailing
 * junk, and anything that does not fit in 64 bits. */
static const char *const sizes_rejected[] = {
    "",
    "K",
    "MiB",
    "x64M",
    "-1",
    "-64M",
    "+64M",
    "1.5G",
    "0x10",
    "64Q",
    "64P",
    "64 M",
    "64Mi",
    "64iB",
    "64BB",
    "64MiBx",
    "64M1",
    "18446744073709551616",
    "99999999999999999999",
    "16777216T",
    "17179869184G",
};

#define SIZES_ACCEPTED_COUNT (sizeof sizes_accepted / sizeof sizes_accepted[0])
#define SIZES_REJECTED_COUNT (sizeof sizes_rejected / sizeof sizes_rejected[0])

#endif
