/* Pinned and mapped host memory through the public API, on the simulated driver: every kind
 * and source (slab-allocated small blocks, 4 KiB and 2 MiB page arenas, the cuMemHostAlloc path
 * without unified addressing), NUMA placement, pointer checks, fault injection, fallback,
 * budgets, stats and leaks. On a real GPU (GPOOL_TEST_REAL_GPU=1) the tests that make their own
 * driver calls (through the simulator), inject faults or set the capacity skip; the rest run. */
#include <criterion/criterion.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"
#include "kind_host.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

#define KiB ((size_t)1 << 10)

static const struct sim_api *sim;

/* driver entry points for the test's own calls (through the simulator) */
static CUresult (*p_ctx_retain)(CUcontext *, CUdevice);
static CUresult (*p_ctx_release)(CUdevice);
static CUresult (*p_ctx_set)(CUcontext);
static CUresult (*p_host_dptr)(CUdeviceptr *, void *, unsigned);
static CUresult (*p_host_alloc)(void **, size_t, unsigned);
static CUresult (*p_free_host)(void *);
static CUresult (*p_host_register)(void *, size_t, unsigned);
static CUresult (*p_host_unregister)(void *);
static CUresult (*p_memset)(CUdeviceptr, unsigned char, size_t);
static CUcontext test_ctx;

static void setup(void)
{
    if (test_real_gpu()) return; /* sim and p_* stay NULL: the tests that use them skip */
    sim = sim_api();
    cr_assert_not_null(sim, "tests need GPOOL_LIBCUDA pointing at the simulated driver");
    *(void **)&p_ctx_retain = sim_driver_proc("cuDevicePrimaryCtxRetain");
    *(void **)&p_ctx_release = sim_driver_proc("cuDevicePrimaryCtxRelease");
    *(void **)&p_ctx_set = sim_driver_proc("cuCtxSetCurrent");
    *(void **)&p_host_dptr = sim_driver_proc("cuMemHostGetDevicePointer");
    *(void **)&p_host_alloc = sim_driver_proc("cuMemHostAlloc");
    *(void **)&p_free_host = sim_driver_proc("cuMemFreeHost");
    *(void **)&p_host_register = sim_driver_proc("cuMemHostRegister");
    *(void **)&p_host_unregister = sim_driver_proc("cuMemHostUnregister");
    *(void **)&p_memset = sim_driver_proc("cuMemsetD8");
    cr_assert(p_ctx_retain && p_ctx_release && p_ctx_set && p_host_dptr && p_host_alloc &&
              p_free_host && p_host_register && p_host_unregister && p_memset);
}

/* The test thread's own context, for driver calls made outside gpool (after a pool exists,
 * so the driver is initialised). */
static void enter_ctx(void)
{
    cr_assert_eq(p_ctx_retain(&test_ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(p_ctx_set(test_ctx), CUDA_SUCCESS);
}
static void leave_ctx(void)
{
    p_ctx_set(NULL);
    p_ctx_release(0);
}

TestSuite(sysmem, .init = setup);

static gpool_alloc_params kind_params(gpool_mem_kind kind)
{
    gpool_alloc_params p = {0};
    p.kind = kind;
    return p;
}

static gpool_status alloc_kind(gpool_t *pool, gpool_mem_kind kind, size_t size, void **out)
{
    gpool_alloc_params p = kind_params(kind);
    return gpool_alloc(pool, size, &p, out);
}

static const size_t sizes[] = {1,        255,       256, 4000,        16 * KiB, (64 * KiB) - 1,
                               64 * KiB, 100 * KiB, MiB, 2 * MiB - 1, 2 * MiB,  5 * MiB + 1};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

Test(sysmem, each_kind_allocates_and_is_usable)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    enter_ctx();
    const gpool_mem_kind kinds[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    for (int ki = 0; ki < 2; ki++) {
        gpool_mem_kind kind = kinds[ki];
        void *ptrs[NSIZES];
        for (int i = 0; i < NSIZES; i++) {
            cr_assert_eq(alloc_kind(pool, kind, sizes[i], &ptrs[i]), GPOOL_OK,
                         "kind %d size %zu: %s", kind, sizes[i], gpool_last_error());
            cr_assert_eq((uintptr_t)ptrs[i] % 256, 0, "256-byte aligned");
            gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
            cr_assert_eq(gpool_get_block_desc(pool, ptrs[i], &d), GPOOL_OK, "%s",
                         gpool_last_error());
            cr_assert_eq(d.kind, kind);
            cr_assert_eq(d.requested_size, sizes[i]);
            cr_assert_geq(d.size, sizes[i]);
            cr_assert_eq(d.page_size, sizes[i] >= 2 * MiB ? 2 * MiB : 4 * KiB, "size %zu page %zu",
                         sizes[i], d.page_size);
            cr_assert_eq(d.host_ptr, ptrs[i]);
            cr_assert_eq(d.device_ptr, (uint64_t)(uintptr_t)ptrs[i], "unified addressing");
            cr_assert_eq(d.fell_back, 0);
            cr_assert_eq(d.device, 0);
            /* the CPU can use it */
            fill_pattern(d.host_ptr, sizes[i], (uint32_t)(i + 1 + 100 * ki));
            CUdeviceptr dp = 0;
            if (kind == GPOOL_MEM_HOST_MAPPED) {
                /* the driver agrees on the device address, and the device writes land */
                cr_assert_eq(p_host_dptr(&dp, d.host_ptr, 0), CUDA_SUCCESS);
                cr_assert_eq((uint64_t)dp, d.device_ptr);
            } else {
                /* pinned memory is not mapped for the device */
                cr_assert_neq(p_host_dptr(&dp, d.host_ptr, 0), CUDA_SUCCESS);
            }
        }
        for (int i = 0; i < NSIZES; i++)
            cr_assert(check_pattern(ptrs[i], sizes[i], (uint32_t)(i + 1 + 100 * ki)),
                      "kind %d block %d overwritten", kind, i);
        if (kind == GPOOL_MEM_HOST_MAPPED) {
            cr_assert_eq(p_memset((CUdeviceptr)(uintptr_t)ptrs[NSIZES - 1], 0xab, 4096),
                         CUDA_SUCCESS);
            cr_assert_eq(((unsigned char *)ptrs[NSIZES - 1])[4095], 0xab);
        }
        gpool_stats s = GPOOL_STATS_INIT;
        gpool_get_stats(pool, &s);
        cr_assert_eq(s.kind[kind].live_blocks, NSIZES);
        cr_assert_eq(s.kind[kind].allocs, NSIZES);
        cr_assert_geq(s.kind[kind].in_use_bytes, s.kind[kind].requested_bytes);
        cr_assert_geq(s.kind[kind].reserved_bytes, s.kind[kind].in_use_bytes);
        for (int i = 0; i < NSIZES; i++)
            cr_assert_eq(gpool_free(pool, ptrs[i]), GPOOL_OK, "%s", gpool_last_error());
        gpool_get_stats(pool, &s);
        cr_assert_eq(s.kind[kind].live_blocks, 0);
        cr_assert_eq(s.kind[kind].in_use_bytes, 0);
        cr_assert_eq(s.kind[kind].requested_bytes, 0);
        cr_assert_eq(s.kind[kind].frees, NSIZES);
    }
    leave_ctx();
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0, "driver objects left after destroy");
}

Test(sysmem, zero_flag_and_alignment)
{
    gpool_t *pool = test_pool(NULL);
    const size_t zs[] = {1000, 200 * KiB, 3 * MiB};
    for (int i = 0; i < 3; i++) {
        gpool_alloc_params p = kind_params(GPOOL_MEM_HOST_PINNED);
        void *a;
        cr_assert_eq(gpool_alloc(pool, zs[i], &p, &a), GPOOL_OK);
        memset(a, 0x5a, zs[i]);
        cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        p.flags = GPOOL_ALLOC_ZERO;
        cr_assert_eq(gpool_alloc(pool, zs[i], &p, &a), GPOOL_OK);
        for (size_t j = 0; j < zs[i]; j += 97)
            cr_assert_eq(((unsigned char *)a)[j], 0);
        cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        p.flags = 0;
        p.alignment = 64 * KiB;
        cr_assert_eq(gpool_alloc(pool, zs[i], &p, &a), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq((uintptr_t)a % (64 * KiB), 0);
        cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, explicit_page_size_uses_huge_pages)
{
    gpool_t *pool = test_pool(NULL);
    gpool_alloc_params p = kind_params(GPOOL_MEM_HOST_MAPPED);
    p.page_size = 2 * MiB;
    void *a;
    cr_assert_eq(gpool_alloc(pool, 1000, &p, &a), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, a, &d), GPOOL_OK);
    cr_assert_eq(d.page_size, 2 * MiB);
    cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
    size_t ps = 0;
    cr_assert_eq(gpool_page_size(pool, GPOOL_MEM_HOST_PINNED, 100 * KiB, &ps), GPOOL_OK);
    cr_assert_eq(ps, 4 * KiB);
    cr_assert_eq(gpool_page_size(pool, GPOOL_MEM_HOST_PINNED, 8 * MiB, &ps), GPOOL_OK);
    cr_assert_eq(ps, 2 * MiB);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, interior_double_and_foreign_frees_are_refused)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL), *other = test_pool(NULL);
    enter_ctx();
    for (int i = 0; i < 3; i++) {
        size_t sz = i == 0 ? 1000 : i == 1 ? 300 * KiB : 4 * MiB;
        void *a;
        cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, sz, &a), GPOOL_OK);
        /* interior pointers: described, but not freeable */
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, (char *)a + sz - 1, &d), GPOOL_OK);
        cr_assert_eq(d.host_ptr, a);
        cr_assert_eq(gpool_free(pool, (char *)a + 256), GPOOL_ERR_INVALID_POINTER);
        cr_assert(strstr(gpool_last_error(), "not its start"), "%s", gpool_last_error());
        /* another pool's block: a clear error in the wrong pool, fine in its own */
        cr_assert_eq(gpool_free(other, a), GPOOL_ERR_INVALID_POINTER, "size %zu", sz);
        cr_assert_eq(gpool_get_block_desc(other, a, &d), GPOOL_ERR_INVALID_POINTER);
        cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        /* double free */
        cr_assert_eq(gpool_free(pool, a), GPOOL_ERR_INVALID_POINTER);
        cr_assert(strstr(gpool_last_error(), "already freed"), "%s", gpool_last_error());
        cr_assert_eq(gpool_get_block_desc(pool, a, &d), GPOOL_ERR_INVALID_POINTER);
    }
    /* a mapped block freed through a pool that has host memory of its own */
    void *m, *mine;
    cr_assert_eq(alloc_kind(other, GPOOL_MEM_HOST_MAPPED, 5000, &m), GPOOL_OK);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 5000, &mine), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, m), GPOOL_ERR_INVALID_POINTER);
    cr_assert(strstr(gpool_last_error(), "did not allocate"), "%s", gpool_last_error());
    cr_assert_eq(gpool_free(other, m), GPOOL_OK);
    /* registered-but-foreign memory: cuMemHostAlloc'ed and cuMemHostRegister'ed */
    void *h = NULL;
    cr_assert_eq(p_host_alloc(&h, 8192, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    cr_assert_eq(gpool_free(pool, h), GPOOL_ERR_INVALID_POINTER);
    cr_assert(strstr(gpool_last_error(), "page-locked"), "%s", gpool_last_error());
    cr_assert_eq(p_free_host(h), CUDA_SUCCESS);
    void *plain = aligned_alloc(4096, 16384);
    cr_assert_eq(p_host_register(plain, 16384, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    cr_assert_eq(gpool_free(pool, plain), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(p_host_unregister(plain), CUDA_SUCCESS);
    /* plain malloc memory */
    cr_assert_eq(gpool_free(pool, plain), GPOOL_ERR_INVALID_POINTER);
    cr_assert(strstr(gpool_last_error(), "not allocated by this pool"), "%s", gpool_last_error());
    free(plain);
    /* a device block given to the wrong pool */
    void *dv;
    cr_assert_eq(gpool_alloc(pool, 4096, NULL, &dv), GPOOL_OK);
    cr_assert_eq(gpool_free(other, dv), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(gpool_free(pool, dv), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, mine), GPOOL_OK);
    leave_ctx();
    cr_assert_eq(gpool_destroy(other), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, small_block_extents_never_serve_plain_malloc)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    enter_ctx();
    enum { NSMALL = 200, NMALLOC = 4000 };
    void *small[2][NSMALL];
    const gpool_mem_kind kinds[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    uint32_t seed = 7;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NSMALL; i++) {
            size_t sz = 1 + rnd(&seed) % (60 * KiB);
            cr_assert_eq(alloc_kind(pool, kinds[k], sz, &small[k][i]), GPOOL_OK);
            cr_assert(gp_sysmem_in_small_extent(pool, kinds[k], small[k][i]));
        }
    cr_assert_geq(gp_sysmem_small_arena(pool, GPOOL_MEM_HOST_PINNED), 0);
    cr_assert_neq(gp_sysmem_small_arena(pool, GPOOL_MEM_HOST_PINNED),
                  gp_sysmem_small_arena(pool, GPOOL_MEM_HOST_MAPPED));
    /* interleave plain mallocs with more small host blocks */
    void **plain = malloc(NMALLOC * sizeof *plain);
    for (int i = 0; i < NMALLOC; i++) {
        plain[i] = malloc(1 + rnd(&seed) % (64 * KiB));
        cr_assert_not_null(plain[i]);
        if (i % 100 == 0) {
            void *x;
            cr_assert_eq(alloc_kind(pool, kinds[i / 100 % 2], 4096, &x), GPOOL_OK);
            cr_assert_eq(gpool_free(pool, x), GPOOL_OK);
        }
    }
    for (int i = 0; i < NMALLOC; i++) {
        for (int k = 0; k < 2; k++)
            cr_assert(!gp_sysmem_in_small_extent(pool, kinds[k], plain[i]),
                      "malloc returned memory of the %s small-block arena",
                      k ? "mapped" : "pinned");
        CUdeviceptr dp;
        cr_assert_neq(p_host_dptr(&dp, plain[i], 0), CUDA_SUCCESS, "malloc memory is registered");
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, plain[i], &d), GPOOL_ERR_INVALID_POINTER);
    }
    for (int i = 0; i < NMALLOC; i++)
        free(plain[i]);
    free(plain);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NSMALL; i++)
            cr_assert_eq(gpool_free(pool, small[k][i]), GPOOL_OK);
    leave_ctx();
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, numa_placement_is_reported_and_applied)
{
    gpool_t *pool = test_pool(NULL);
    int node = -2;
    char why[256];
    cr_assert_eq(gp_sysmem_placement(pool, &node, why, sizeof why), GPOOL_OK);
    cr_assert_geq(node, -1);
    cr_assert_gt(strlen(why), 0);
    cr_log_info("host placement: node %d (%s)", node, why);
    /* the simulated GPU's PCI device is not in the host's topology: the driver's
     * CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID (0 on the simulator) decides, when the OS can bind; a
     * real GPU's node depends on the machine, so there only the binding below is checked */
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    const struct hwloc_topology_support *sup = hwloc_topology_get_support(topo);
    if (!test_real_gpu() && sup->membind->set_area_membind &&
        hwloc_get_numanode_obj_by_os_index(topo, 0)) {
        cr_assert_eq(node, 0, "%s", why);
        cr_assert(strstr(why, "driver"), "%s", why);
    }
    void *blocks[3];
    const size_t bs[3] = {8 * KiB, 512 * KiB, 4 * MiB};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, bs[i], &blocks[i]), GPOOL_OK);
        if (node < 0 || !sup->membind->get_area_membind) continue;
        hwloc_nodeset_t set = hwloc_bitmap_alloc();
        hwloc_membind_policy_t pol;
        cr_assert_eq(
            hwloc_get_area_membind(topo, blocks[i], bs[i], set, &pol, HWLOC_MEMBIND_BYNODESET), 0);
        cr_assert(hwloc_bitmap_isset(set, (unsigned)node), "block %d not bound to node %d", i,
                  node);
        cr_assert_eq(pol, HWLOC_MEMBIND_BIND, "block %d policy %d", i, (int)pol);
        hwloc_bitmap_free(set);
    }
    /* dump_json says what was achieved */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(gpool_dump_json(pool, f), GPOOL_OK);
    fclose(f);
    cr_assert(strstr(buf, "\"host_placement\":{\"numa_node\":"), "%s", buf);
    cr_assert(strstr(buf, "\"host_pinned\":{\"page_arenas\":["));
    cr_assert(strstr(buf, "\"small\":{\"allocator\":"), "%s", buf);
    free(buf);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(gpool_free(pool, blocks[i]), GPOOL_OK);
    hwloc_topology_destroy(topo);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* Arm failures of entry for its next `count` calls. */
static void fail_next(const char *entry, int count)
{
    for (int i = 1; i <= count; i++)
        cr_assert_eq(sim->fail_nth(entry, (unsigned long)i), 0);
}

Test(sysmem, registration_failures_surface_and_leak_nothing)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    const size_t fs[] = {1000, 300 * KiB, 6 * MiB};
    const gpool_mem_kind kinds[] = {GPOOL_MEM_HOST_PINNED, GPOOL_MEM_HOST_MAPPED};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            void *a = (void *)1;
            /* twice: the page arena retries once after giving unused pages back */
            fail_next("cuMemHostRegister", 2);
            gpool_status st = alloc_kind(pool, kinds[k], fs[i], &a);
            cr_assert_eq(st, GPOOL_ERR_OUT_OF_MEMORY, "kind %d size %zu: %s", kinds[k], fs[i],
                         gpool_last_error());
            cr_assert_null(a);
            cr_assert(strstr(gpool_last_error(), "cuMemHostRegister") ||
                          strstr(gpool_last_error(), "cannot allocate"),
                      "%s", gpool_last_error());
            sim->fail_clear();
            /* the pool keeps working */
            cr_assert_eq(alloc_kind(pool, kinds[k], fs[i], &a), GPOOL_OK, "%s", gpool_last_error());
            memset(a, 1, fs[i]);
            cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
        }
    /* the device address check of mapped memory */
    gpool_t *p2 = test_pool(NULL);
    void *a = (void *)1;
    cr_assert_eq(sim->fail_nth("cuMemHostGetDevicePointer", 1), 0);
    cr_assert_neq(alloc_kind(p2, GPOOL_MEM_HOST_MAPPED, 3 * MiB, &a), GPOOL_OK);
    cr_assert_null(a);
    cr_assert(strstr(gpool_last_error(), "cuMemHostGetDevicePointer"), "%s", gpool_last_error());
    sim->fail_clear();
    cr_assert_eq(alloc_kind(p2, GPOOL_MEM_HOST_MAPPED, 3 * MiB, &a), GPOOL_OK);
    cr_assert_eq(gpool_free(p2, a), GPOOL_OK);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_geq(s.ooms, 6);
    cr_assert_eq(s.kind[GPOOL_MEM_AUTO].live_blocks, 0);
    cr_assert_eq(gpool_destroy(p2), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0, "a failed registration leaked");
}

Test(sysmem, failures_at_every_registration_leak_nothing)
{
    NEED_SIM();
    /* fail the nth registration for n = 1..8 while a mixed workload runs */
    for (unsigned long n = 1; n <= 8; n++) {
        gpool_t *pool = test_pool(NULL);
        cr_assert_eq(sim->fail_nth("cuMemHostRegister", n), 0);
        void *ptrs[16];
        int failed = 0;
        for (int i = 0; i < 16; i++) {
            size_t sz = i % 4 == 0 ? 3 * MiB : i % 4 == 1 ? 128 * KiB : 2000 + 500 * (size_t)i;
            gpool_status st = alloc_kind(
                pool, i % 2 ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED, sz, &ptrs[i]);
            if (st != GPOOL_OK) {
                failed++;
                ptrs[i] = NULL;
            }
        }
        sim->fail_clear();
        for (int i = 0; i < 16; i++)
            if (i % 3 == 0) cr_assert_eq(gpool_free(pool, ptrs[i]), GPOOL_OK);
        gpool_status st = gpool_destroy(pool);
        cr_assert(st == GPOOL_OK || st == GPOOL_ERR_LIVE_BLOCKS);
        cr_assert_eq(sim_live_total(), 0, "n=%lu: leak (%d allocs failed)", n, failed);
    }
}

/* Block x came from an AUTO request that fell back to mapped sysmem: its description says so
 * and the pool has counted that one fallback. d and s are left for more checks. */
static void expect_mapped_fallback(gpool_t *pool, void *x, gpool_block_desc *d, gpool_stats *s)
{
    cr_assert_eq(gpool_get_block_desc(pool, x, d), GPOOL_OK);
    cr_assert_eq(d->kind, GPOOL_MEM_HOST_MAPPED);
    cr_assert_eq(d->fell_back, 1);
    gpool_get_stats(pool, s);
    cr_assert_eq(s->fallbacks, 1);
}

Test(sysmem, fallback_from_vidmem_to_mapped)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    sim->set_capacity(0, 8 * MiB);
    void *d;
    cr_assert_eq(gpool_alloc(pool, 6 * MiB, NULL, &d), GPOOL_OK);
    gpool_alloc_params p = {0};
    p.kind = GPOOL_MEM_AUTO;
    p.usage = GPOOL_USAGE_GPU_ONLY;
    void *x = (void *)1;
    /* without the flag: out of memory */
    cr_assert_eq(gpool_alloc(pool, 6 * MiB, &p, &x), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_null(x);
    /* explicit DEVICE never moves, flag or not */
    p.kind = GPOOL_MEM_DEVICE;
    p.flags = GPOOL_ALLOC_ALLOW_FALLBACK;
    cr_assert_eq(gpool_alloc(pool, 6 * MiB, &p, &x), GPOOL_ERR_OUT_OF_MEMORY);
    /* AUTO with the flag: mapped sysmem, said so */
    p.kind = GPOOL_MEM_AUTO;
    cr_assert_eq(gpool_alloc(pool, 6 * MiB, &p, &x), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc info = GPOOL_BLOCK_DESC_INIT;
    gpool_stats s = GPOOL_STATS_INIT;
    expect_mapped_fallback(pool, x, &info, &s);
    cr_assert_eq(info.usage, GPOOL_USAGE_GPU_ONLY);
    cr_assert_eq(info.device_ptr, (uint64_t)(uintptr_t)x);
    memset(info.host_ptr, 3, 6 * MiB);
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_MAPPED].live_blocks, 1);
    cr_assert_eq(sim->bytes_in_use(0) <= 8 * MiB, 1);
    cr_assert_eq(gpool_free(pool, x), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, d), GPOOL_OK);
    sim->set_capacity(0, (size_t)8 << 30);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, budgets_limit_kinds_and_auto_spills_pinned_to_mapped)
{
    gpool_t *pool = test_pool("budget_pinned=1M,budget_mapped=2M");
    cr_assert_not_null(pool);
    void *a, *b = (void *)1, *c;
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 768 * KiB, &a), GPOOL_OK);
    /* explicit kinds never move */
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 512 * KiB, &b), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert_null(b);
    cr_assert(strstr(gpool_last_error(), "host_pinned budget"), "%s", gpool_last_error());
    /* small blocks count too */
    void *sm[8];
    int n_ok = 0;
    for (int i = 0; i < 8; i++)
        if (alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 60 * KiB, &sm[i]) == GPOOL_OK)
            n_ok++;
        else
            sm[i] = NULL;
    cr_assert_lt(n_ok, 8);
    cr_assert_geq(n_ok, 3);
    /* AUTO STAGING picks pinned; over its budget it goes to mapped */
    gpool_alloc_params p = {0};
    p.kind = GPOOL_MEM_AUTO;
    p.usage = GPOOL_USAGE_STAGING;
    cr_assert_eq(gpool_alloc(pool, 512 * KiB, &p, &c), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    gpool_stats s = GPOOL_STATS_INIT;
    expect_mapped_fallback(pool, c, &d, &s);
    cr_assert_leq(s.kind[GPOOL_MEM_HOST_PINNED].in_use_bytes, MiB);
    /* mapped has no substitute: AUTO UPLOAD over the mapped budget is out of memory */
    p.usage = GPOOL_USAGE_UPLOAD;
    void *e = (void *)1;
    cr_assert_eq(gpool_alloc(pool, 2 * MiB, &p, &e), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(gpool_last_error(), "host_mapped budget"), "%s", gpool_last_error());
    /* freeing makes room again */
    cr_assert_eq(gpool_free(pool, a), GPOOL_OK);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 512 * KiB, &b), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, c), GPOOL_OK);
    for (int i = 0; i < 8; i++)
        if (sm[i]) cr_assert_eq(gpool_free(pool, sm[i]), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, stats_totals_and_trim)
{
    gpool_t *pool = test_pool(NULL);
    void *p1, *p2, *p3, *dv;
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 1000, &p1), GPOOL_OK);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 3 * MiB, &p2), GPOOL_OK);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_MAPPED, 100 * KiB, &p3), GPOOL_OK);
    cr_assert_eq(gpool_alloc(pool, MiB, NULL, &dv), GPOOL_OK);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    const gpool_kind_stats *pin = &s.kind[GPOOL_MEM_HOST_PINNED],
                           *map = &s.kind[GPOOL_MEM_HOST_MAPPED], *dev = &s.kind[GPOOL_MEM_DEVICE],
                           *tot = &s.kind[GPOOL_MEM_AUTO];
    cr_assert_eq(pin->requested_bytes, 1000 + 3 * MiB);
    cr_assert_eq(map->requested_bytes, 100 * KiB);
    cr_assert_eq(pin->live_blocks, 2);
    cr_assert_eq(map->live_blocks, 1);
    cr_assert_geq(pin->reserved_bytes, 3 * MiB);
    cr_assert_eq(tot->live_blocks, pin->live_blocks + map->live_blocks + dev->live_blocks);
    cr_assert_eq(tot->requested_bytes,
                 pin->requested_bytes + map->requested_bytes + dev->requested_bytes);
    cr_assert_eq(tot->reserved_bytes,
                 pin->reserved_bytes + map->reserved_bytes + dev->reserved_bytes);
    cr_assert_gt(s.driver_calls[GPOOL_DRV_HOST_REGISTER], 0);
    cr_assert_eq(gpool_free(pool, p1), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p2), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p3), GPOOL_OK);
    gpool_get_stats(pool, &s);
    cr_assert_eq(pin->in_use_bytes, 0);
    cr_assert_gt(pin->cached_bytes, 0, "freed host memory stays registered as cache");
    cr_assert_geq(pin->peak_in_use_bytes, 3 * MiB);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    gpool_get_stats(pool, &s);
    cr_assert_eq(pin->reserved_bytes, 0, "trim gives every unused host page back");
    cr_assert_eq(map->reserved_bytes, 0);
    cr_assert_gt(s.driver_calls[GPOOL_DRV_HOST_UNREGISTER], 0);
    /* and the pool goes on (the small-block arena is made again) */
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 1000, &p1), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, p1), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, dv), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, destroy_frees_live_host_blocks)
{
    gpool_t *pool = test_pool(NULL);
    void *x;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 1000 + (size_t)i * MiB, &x), GPOOL_OK);
        cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_MAPPED, 300 + (size_t)i * 700 * KiB, &x),
                     GPOOL_OK);
    }
    cr_assert_eq(gpool_destroy(pool), GPOOL_ERR_LIVE_BLOCKS);
    cr_assert(strstr(gpool_last_error(), "10 live blocks"), "%s", gpool_last_error());
    cr_assert_eq(sim_live_total(), 0);
}

Test(sysmem, without_unified_addressing_mapped_blocks_use_host_alloc)
{
    NEED_SIM();
    gpool_t *pool = test_pool(NULL);
    cr_assert_eq(gp_sysmem_force_no_uva(pool), GPOOL_OK);
    enter_ctx();
    void *m;
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_MAPPED, 10000, &m), GPOOL_OK, "%s",
                 gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, m, &d), GPOOL_OK);
    cr_assert_eq(d.device_ptr, (uint64_t)(uintptr_t)m);
    CUdeviceptr dp;
    cr_assert_eq(p_host_dptr(&dp, d.host_ptr, 0), CUDA_SUCCESS);
    cr_assert_eq((uint64_t)dp, d.device_ptr);
    memset(d.host_ptr, 9, 10000);
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.driver_calls[GPOOL_DRV_HOST_ALLOC], 1);
    /* pinned blocks without unified addressing have no device address */
    void *pn;
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_PINNED, 10000, &pn), GPOOL_OK);
    cr_assert_eq(gpool_get_block_desc(pool, pn, &d), GPOOL_OK);
    cr_assert_eq(d.device_ptr, 0);
    cr_assert_eq(gpool_free(pool, pn), GPOOL_OK);
    /* cuMemHostAlloc failing */
    void *f = (void *)1;
    cr_assert_eq(sim->fail_nth("cuMemHostAlloc", 1), 0);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_MAPPED, 10000, &f), GPOOL_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(gpool_last_error(), "cuMemHostAlloc"), "%s", gpool_last_error());
    cr_assert_null(f);
    cr_assert_eq(gpool_free(pool, m), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, m), GPOOL_ERR_INVALID_POINTER);
    cr_assert_eq(alloc_kind(pool, GPOOL_MEM_HOST_MAPPED, 10000, &m), GPOOL_OK);
    leave_ctx();
    cr_assert_eq(gpool_destroy(pool), GPOOL_ERR_LIVE_BLOCKS);
    cr_assert_eq(sim_live_total(), 0);
}

struct worker {
    gpool_t *pool;
    uint32_t seed;
    int errors;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    enum { SLOTS = 32 };
    void *live[SLOTS] = {0};
    size_t sz[SLOTS] = {0};
    uint32_t tag[SLOTS] = {0};
    for (int it = 0; it < 3000; it++) {
        int i = (int)(rnd(&w->seed) % SLOTS);
        if (live[i]) {
            if (!check_pattern(live[i], sz[i], tag[i])) w->errors++;
            if (gpool_free(w->pool, live[i]) != GPOOL_OK) w->errors++;
            live[i] = NULL;
            continue;
        }
        uint32_t r = rnd(&w->seed);
        sz[i] = r % 8 == 0 ? 64 * KiB + r % (3 * MiB) : 1 + r % (48 * KiB);
        gpool_mem_kind kind = r & 16 ? GPOOL_MEM_HOST_MAPPED : GPOOL_MEM_HOST_PINNED;
        gpool_alloc_params p = {0};
        p.kind = kind;
        if (gpool_alloc(w->pool, sz[i], &p, &live[i]) != GPOOL_OK) {
            w->errors++;
            live[i] = NULL;
            continue;
        }
        tag[i] = r;
        fill_pattern(live[i], sz[i], tag[i]);
    }
    for (int i = 0; i < SLOTS; i++)
        if (live[i] && gpool_free(w->pool, live[i]) != GPOOL_OK) w->errors++;
    return NULL;
}

Test(sysmem, threads_share_host_kinds)
{
    gpool_t *pool = test_pool(NULL);
    enum { T = 4 };
    pthread_t th[T];
    struct worker w[T];
    for (int t = 0; t < T; t++) {
        w[t] = (struct worker){.pool = pool, .seed = 1234u + (uint32_t)t * 77u};
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(w[t].errors, 0, "thread %d had %d errors", t, w[t].errors);
    }
    gpool_stats s = GPOOL_STATS_INIT;
    gpool_get_stats(pool, &s);
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_PINNED].live_blocks, 0);
    cr_assert_eq(s.kind[GPOOL_MEM_HOST_MAPPED].in_use_bytes, 0);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(sim_live_total(), 0);
}

/* More pinned memory than the host has: the cause named is the host's memory (its size from
 * sysinfo), not fragmentation inside pages no block lives in (before: "pinned pages: 0 bytes
 * are free inside pages or chunks that also hold live blocks"). */
Test(sysmem, host_oom_beyond_physical_memory_names_the_host)
{
    gpool_t *pool = test_pool(NULL);
    cr_assert_not_null(pool);
    void *p = (void *)1;
    gpool_status st = alloc_kind(pool, GPOOL_MEM_HOST_PINNED, (size_t)4 << 40, &p);
    cr_assert_eq(st, GPOOL_ERR_OUT_OF_MEMORY, "%s", gpool_last_error());
    cr_assert_null(p);
    const char *m = gpool_last_error();
    cr_assert_null(strstr(m, "free inside pages or chunks"), "%s", m);
    cr_assert(strstr(m, "host memory"), "%s", m);
    cr_assert(strstr(m, "physical"), "%s", m);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}
