/* Host memory as an arena backend: address space is an mmap(PROT_NONE) reservation; a run of
 * pages is backed by mapping it read-write (MADV_HUGEPAGE for 2 MiB pages), binding it to
 * the NUMA node nearest the GPU and registering it with cuMemHostRegister (PORTABLE, plus
 * DEVICEMAP for mapped memory); unbacking unregisters the run and maps PROT_NONE over it, so
 * its pages go back to the OS. Host pages cannot move to another address, so nothing stays
 * cached unmapped: idle_bytes is always 0 and release has nothing to do. */
#ifndef GPOOL_HOST_PAGES_H
#define GPOOL_HOST_PAGES_H

#include <stdatomic.h>

#include "backend.h"
#include "driver.h"
#include "host_numa.h"

/* What every host backend of a pool shares. */
struct gp_owners;

typedef struct gp_host_env {
    gp_devctx dc;
    gp_numa *numa;
    struct gp_owners *owners; /* the pool's address registry: extents register there */
} gp_host_env;

extern const gp_backend_ops gp_hostmem_ops;

/* A backend for kind (HOST_PINNED or HOST_MAPPED) with pages of `page` bytes (4 KiB or
 * 2 MiB). *reserved (shared per kind) follows the bytes registered. */
gpool_status gp_hostmem_create(const gp_host_env *env, gpool_mem_kind kind, size_t page,
                               _Atomic size_t *reserved, void **out);

/* Registration runs and NUMA bindings done so far (for dump_json). */
void gp_hostmem_counts(void *ctx, uint64_t *registrations, uint64_t *bound_runs);

/* Mapped memory without unified addressing: one cuMemHostAlloc(PORTABLE | DEVICEMAP) block
 * of size bytes (align at most the OS page), *host its CPU address, *dev its device address,
 * *got the bytes it holds (whole OS pages). gp_hostmem_direct_free gives it back. */
gpool_status gp_hostmem_direct_alloc(const gp_host_env *env, size_t size, size_t align,
                                     uintptr_t *host, uintptr_t *dev, size_t *got);
void gp_hostmem_direct_free(const gp_host_env *env, uintptr_t host);

/* 1 when the driver knows p as page-locked host memory (cuMemHostGetDevicePointer succeeds). */
int gp_hostmem_page_locked(const gp_host_env *env, const void *p);

/* Unmap-with-PROT_NONE a range, keeping the address space reserved. 0 on success. */
int gp_host_map_none(void *addr, size_t len);

#endif
