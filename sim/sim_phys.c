/* sim_phys.c — the referee sees physical bytes: an access to VMM memory is recorded under the
 * keys of the physical bytes its mapping reaches (the handle's store and offset, sim_vmm.c),
 * not under its device address, so an access through one mapping of a handle conflicts with
 * an unordered access to the same bytes through another mapping of it.
 *
 * Sources: cuda.h, cuMemMap ("maps the memory represented by handle"; a handle may be mapped
 * at several address ranges, and cuMemRelease frees it only once "all mappings" are gone) and
 * the Programming Guide's "Virtual Memory Management" section (one allocation mapped at two
 * virtual ranges is the same memory; "Stream synchronization behavior": work on different
 * streams not ordered by events may run concurrently). Other device-visible memory
 * (cuMemAlloc, pinned host memory) has one address per byte and keeps its address as key. */
#include "sim_internal.h"

void sim_hb_access(struct CUstream_st *s, uintptr_t p, size_t n, enum sim_access kind,
                   const char *what)
{
    if (n == 0 || p + n < p) return;
    while (n > 0) {
        uintptr_t key, via;
        size_t k;
        if (sim_vmm_phys(p, &key, &k, &via)) {
            if (k > n) k = n;
            sim_hb_access_key(s, key, k, kind, what, p, via);
        } else {
            /* not VMM memory: up to the end of its allocation or registration, keyed by address
             * (a range no allocation holds goes whole, as before) */
            k = sim_legacy_extent(p);
            if (!k) k = sim_host_extent(p);
            if (!k || k > n) k = n;
            sim_hb_access_key(s, p, k, kind, what, p, 0);
        }
        p += k;
        n -= k;
    }
}

void sim_phys_unmap(uintptr_t key, uintptr_t va, size_t n, int last, const char *what)
{
    sim_hb_unmap_key(key, n, va, va, last, what);
}
