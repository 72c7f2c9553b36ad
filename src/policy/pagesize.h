/* Page and chunk sizes: one table per memory type says which physical chunk backs a request
 * of a given size. Chunks are whole multiples of the device's allocation granularity; larger
 * chunks for very large blocks cut driver calls (one cuMemCreate + cuMemMap per chunk). */
#ifndef GPOOL_PAGESIZE_H
#define GPOOL_PAGESIZE_H

#include <stddef.h>

/* Chunk size for backing a device block of block_bytes (granularity: a power of two).
 * Never below the granularity; always a power-of-two multiple of it. */
size_t gp_device_chunk_size(size_t block_bytes, size_t granularity);

/* Page size for a host block of block_bytes: 4 KiB pages below 2 MiB, 2 MiB (transparent
 * huge pages) from 2 MiB up. */
size_t gp_host_page_size(size_t block_bytes);

/* Validate a caller's explicit page size: 0 (automatic) or a power-of-two multiple of the
 * granularity, at most 1 GiB. Returns 1 when acceptable. */
int gp_page_size_valid(size_t page_size, size_t granularity);

#endif
