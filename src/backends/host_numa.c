/* Host memory placement (host_numa.h): the NUMA node nearest the GPU, found with hwloc,
 * and binding host pages to it. */
#include "host_numa.h"

#include <stdio.h>
#include <string.h>

static void set_none(gp_numa *n, const char *why)
{
    n->node = -1;
    snprintf(n->source, sizeof n->source, "none");
    snprintf(n->why, sizeof n->why, "%s", why);
}

/* The nodeset of the NUMA node with OS index id, or NULL. */
static hwloc_nodeset_t node_by_os_index(hwloc_topology_t t, unsigned id)
{
    hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(t, id);
    return o && o->nodeset ? hwloc_bitmap_dup(o->nodeset) : NULL;
}

void gp_numa_init(gp_numa *n, const gp_driver *drv, CUdevice dev, gp_drv_counters *cnt)
{
    memset(n, 0, sizeof *n);
    set_none(n, "not looked up");
    if (hwloc_topology_init(&n->topo) != 0) {
        n->topo = NULL;
        set_none(n, "hwloc_topology_init failed");
        return;
    }
    /* PCI devices from sysfs only: not the libpciaccess plugin (slow, leaks), and no OS
     * devices, whose plugins (cuda, nvml, opencl, gl) would start GPU runtimes in here. */
    hwloc_topology_set_io_types_filter(n->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(n->topo, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
    static const char *const skip[] = {"pci", "cuda", "nvml", "opencl", "gl", "rsmi", "levelzero"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        hwloc_topology_set_components(n->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
    if (hwloc_topology_load(n->topo) != 0) {
        hwloc_topology_destroy(n->topo);
        n->topo = NULL;
        set_none(n, "hwloc_topology_load failed");
        return;
    }
    const struct hwloc_topology_support *sup = hwloc_topology_get_support(n->topo);
    if (!sup || !sup->membind || !sup->membind->set_area_membind) {
        set_none(n, "the OS does not support binding memory areas (no mbind)");
        return;
    }
    /* 1. hwloc: the GPU's PCI device and the NUMA node(s) of its first non-I/O ancestor */
    char bus[32] = "";
    char pci_why[96] = "cuDeviceGetPCIBusId unavailable";
    if (drv->cuDeviceGetPCIBusId) {
        CUresult r = GP_DRV(cnt, GPOOL_DRV_OTHER, drv->cuDeviceGetPCIBusId(bus, sizeof bus, dev));
        if (r != CUDA_SUCCESS) {
            snprintf(pci_why, sizeof pci_why, "cuDeviceGetPCIBusId failed (%d)", (int)r);
            bus[0] = '\0';
        }
    }
    if (bus[0]) {
        hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(n->topo, bus);
        hwloc_obj_t anc = pci ? hwloc_get_non_io_ancestor_obj(n->topo, pci) : NULL;
        if (anc && anc->nodeset && !hwloc_bitmap_iszero(anc->nodeset)) {
            n->nodeset = hwloc_bitmap_dup(anc->nodeset);
            if (n->nodeset) {
                n->node = hwloc_bitmap_first(n->nodeset);
                snprintf(n->source, sizeof n->source, "hwloc-pci");
                snprintf(n->why, sizeof n->why, "PCI device %s is under %s L#%u, NUMA node %d", bus,
                         hwloc_obj_type_string(anc->type), anc->logical_index, n->node);
                return;
            }
        }
        snprintf(pci_why, sizeof pci_why, "hwloc has no PCI device %s", bus);
    }
    /* 2. the driver's idea of the nearest host node (CUDA 12.2+) */
    int id = -1;
    CUresult r = GP_DRV(cnt, GPOOL_DRV_OTHER,
                        drv->cuDeviceGetAttribute(&id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    if (r == CUDA_SUCCESS && id >= 0) {
        n->nodeset = node_by_os_index(n->topo, (unsigned)id);
        if (n->nodeset) {
            n->node = id;
            snprintf(n->source, sizeof n->source, "driver-attribute");
            snprintf(n->why, sizeof n->why, "%s; driver reports host NUMA node %d", pci_why, id);
            return;
        }
        char why[160];
        snprintf(why, sizeof why, "%s; driver reports host NUMA node %d, which hwloc does not know",
                 pci_why, id);
        set_none(n, why);
        return;
    }
    char why[160];
    snprintf(why, sizeof why, "%s; driver reports no host NUMA node", pci_why);
    set_none(n, why);
}

int gp_numa_bind(gp_numa *n, void *addr, size_t len)
{
    if (!n->nodeset) return 0;
    /* HWLOC_MEMBIND_BIND without STRICT: the node is preferred, so a full node does not turn
     * into an OOM kill; pages go elsewhere instead. */
    if (hwloc_set_area_membind(n->topo, addr, len, n->nodeset, HWLOC_MEMBIND_BIND,
                               HWLOC_MEMBIND_BYNODESET) == 0) {
        atomic_fetch_add_explicit(&n->bound, 1, memory_order_relaxed);
        return 1;
    }
    atomic_fetch_add_explicit(&n->bind_failures, 1, memory_order_relaxed);
    return 0;
}

void gp_numa_fini(gp_numa *n)
{
    if (n->nodeset) hwloc_bitmap_free(n->nodeset);
    if (n->topo) hwloc_topology_destroy(n->topo);
    n->nodeset = NULL;
    n->topo = NULL;
}
