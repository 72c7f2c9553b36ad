/* Page and chunk size tables (pagesize.h): which chunk backs a device block of a size, which
 * page a host block gets, and which page sizes a request may ask for. */
#include "pagesize.h"

#include <stdint.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* The rule, in one place: blocks of at least `min_block` bytes are backed by chunks of
 * `chunk` bytes (rounded up to the granularity). Keeps per-block driver calls near 32 for
 * blocks up to 2 GiB while small blocks share pages. */
static const struct {
    size_t min_block, chunk;
} device_rule[] = {
    {1 * GiB, 64 * MiB},
    {256 * MiB, 32 * MiB},
    {64 * MiB, 8 * MiB},
    {0, 0 /* granularity */},
};

size_t gp_device_chunk_size(size_t block_bytes, size_t granularity)
{
    for (size_t i = 0;; i++) {
        if (block_bytes < device_rule[i].min_block) continue;
        size_t c = device_rule[i].chunk;
        return c > granularity ? c : granularity;
    }
}

static const struct {
    size_t min_block, page;
} host_rule[] = {
    {2 * MiB, 2 * MiB},
    {0, 4 * KiB},
};

size_t gp_host_page_size(size_t block_bytes)
{
    for (size_t i = 0;; i++)
        if (block_bytes >= host_rule[i].min_block) return host_rule[i].page;
}

int gp_page_size_valid(size_t page_size, size_t granularity)
{
    if (page_size == 0) return 1;
    if (page_size < granularity || page_size > GiB) return 0;
    if (page_size & (page_size - 1)) return 0;
    return page_size % granularity == 0;
}
