/* Host memory placement: the NUMA node nearest the GPU, found with hwloc (PCI bus id -> PCI
 * device -> first non-I/O ancestor -> its nodeset) or, where hwloc has no PCI object for the
 * device, from the driver's CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID. Binding is best effort: a
 * machine without NUMA, without hwloc data for the device or without mbind still gets host
 * memory, and `why` says what placement was achieved. */
#ifndef GPOOL_HOST_NUMA_H
#define GPOOL_HOST_NUMA_H

#include <hwloc.h>
#include <stdatomic.h>
#include <stddef.h>

#include "driver.h"

typedef struct gp_numa {
    hwloc_topology_t topo;                      /* NULL when hwloc could not load one */
    hwloc_nodeset_t nodeset;                    /* NULL when there is nothing to bind to */
    int node;                                   /* first node of nodeset, or -1 */
    char source[24];                            /* "hwloc-pci", "driver-attribute" or "none" */
    char why[160];                              /* how the node was found, or why there is none */
    _Atomic unsigned long bound, bind_failures; /* area bindings done / refused by the OS */
} gp_numa;

/* Find the node nearest device dev. Never fails: without a node, node is -1 and why says
 * why. Driver calls are counted in cnt. */
void gp_numa_init(gp_numa *n, const gp_driver *drv, CUdevice dev, gp_drv_counters *cnt);

/* Bind [addr, addr+len) (page aligned, not yet touched) to the node. Returns 1 when bound,
 * 0 when there is no node or the OS refused (counted in bind_failures). */
int gp_numa_bind(gp_numa *n, void *addr, size_t len);

void gp_numa_fini(gp_numa *n);

#endif
