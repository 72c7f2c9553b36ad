/* test_peer.c — gpool under the simulator's device rules: VMM mappings reachable by the
 * devices that peer_access names (VMM memory is reachable only by the locations given to
 * cuMemSetAccess), mapped host memory when registered memory's device pointer differs from its
 * host pointer, and a pool filling an H200-sized device. Every test process starts with
 * GPOOL_SIM_DEVICES=2, set before the simulator is loaded. */
#include <criterion/criterion.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpool.h"
#include "util_pool.h"
#include "util_sim.h"
#include "util_skip.h"

static const struct sim_api *S;
static CUresult (*device_access)(int, const void *, size_t, int);
static int (*set_peer_capable)(int, int, int);
static void (*set_host_alias)(int);

static void setup_with(const char *memory)
{
    NEED_SIM();
    setenv("GPOOL_SIM_DEVICES", "2", 1);
    if (memory) setenv("GPOOL_SIM_MEMORY", memory, 1);
    S = sim_api();
    cr_assert_not_null(S);
    *(void **)&device_access = dlsym(S->lib, "gpoolsim_device_access");
    *(void **)&set_peer_capable = dlsym(S->lib, "gpoolsim_set_peer_capable");
    *(void **)&set_host_alias = dlsym(S->lib, "gpoolsim_set_host_alias");
    cr_assert(device_access && set_peer_capable && set_host_alias);
}

static void setup(void)
{
    setup_with(NULL);
}
static void setup_h200(void)
{
    setup_with("141G");
}

static gpool_t *pool_on(int device, const char *conf)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_default(&cfg), GPOOL_OK);
    cfg.device = device;
    if (conf) cr_assert_eq(gpool_config_parse(&cfg, conf), GPOOL_OK, "%s", gpool_last_error());
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(&cfg, &pool), GPOOL_OK, "%s", gpool_last_error());
    return pool;
}

static void *alloc_device(gpool_t *pool, size_t size)
{
    gpool_alloc_params p = {.kind = GPOOL_MEM_DEVICE};
    void *ptr = NULL;
    cr_assert_eq(gpool_alloc(pool, size, &p, &ptr), GPOOL_OK, "%s", gpool_last_error());
    return ptr;
}

static uint64_t set_access_calls(gpool_t *pool)
{
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    return s.driver_calls[GPOOL_DRV_MEM_SET_ACCESS];
}

/* Default peer_access=auto: a device block is reachable from the peer device, with one
 * cuMemSetAccess per newly mapped run (all devices in one call). Failed before gpool set
 * access for its own device only. */
Test(peer, default_auto_gives_peer_devices_access_to_vmm_blocks, .init = setup)
{
    gpool_t *pool = pool_on(0, NULL);
    uint64_t before = set_access_calls(pool);
    void *big = alloc_device(pool, 6 * MiB);
    cr_assert_eq(set_access_calls(pool) - before, 1, "one cuMemSetAccess for the new run");
    void *small = alloc_device(pool, 4096);
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(device_access(d, big, 6 * MiB, 1), CUDA_SUCCESS, "device %d", d);
        cr_assert_eq(device_access(d, small, 4096, 1), CUDA_SUCCESS, "device %d", d);
    }
    cr_assert_eq(gpool_free(pool, big), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, small), GPOOL_OK);
    /* a pool on device 1 is reachable from device 0 too */
    gpool_t *p1 = pool_on(1, NULL);
    void *b1 = alloc_device(p1, 2 * MiB);
    cr_assert_eq(device_access(0, b1, 2 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(gpool_free(p1, b1), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p1), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

Test(peer, none_keeps_blocks_to_the_pools_device, .init = setup)
{
    gpool_t *pool = pool_on(0, "peer_access=none");
    void *b = alloc_device(pool, 2 * MiB);
    cr_assert_eq(device_access(0, b, 2 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(device_access(1, b, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}

/* auto follows cuDeviceCanAccessPeer(peer, pool device); all insists and fails at creation. */
Test(peer, auto_follows_can_access_peer_and_all_fails_when_one_cannot, .init = setup)
{
    cr_assert_eq(set_peer_capable(1, 0, 0), 0); /* device 1 cannot reach device 0 */
    gpool_t *pool = pool_on(0, "peer_access=auto");
    void *b = alloc_device(pool, 2 * MiB);
    cr_assert_eq(device_access(1, b, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(gpool_free(pool, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);

    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_default(&cfg), GPOOL_OK);
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=all"), GPOOL_OK);
    gpool_t *p = NULL;
    cr_assert_eq(gpool_create(&cfg, &p), GPOOL_ERR_UNSUPPORTED);
    cr_assert_null(p);
    cr_assert_not_null(strstr(gpool_last_error(), "device 1 cannot access device 0"), "%s",
                       gpool_last_error());
    /* device 0 can reach device 1: all works for a pool on device 1 */
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=all,device=1"), GPOOL_OK);
    cr_assert_eq(gpool_create(&cfg, &p), GPOOL_OK, "%s", gpool_last_error());
    b = alloc_device(p, 2 * MiB);
    cr_assert_eq(device_access(0, b, 2 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(gpool_free(p, b), GPOOL_OK);
    cr_assert_eq(gpool_destroy(p), GPOOL_OK);
}

Test(peer, config_key_takes_auto_none_all_only, .init = setup)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_default(&cfg), GPOOL_OK);
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_AUTO);
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=none"), GPOOL_OK);
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_NONE);
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=all"), GPOOL_OK);
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_ALL);
    cr_assert_eq(gpool_config_parse(&cfg, "peer_access=some"), GPOOL_ERR_CONFIG);
    cr_assert_eq(cfg.peer_access, GPOOL_PEER_ALL, "a failed parse changes nothing");
    cfg.peer_access = 7;
    gpool_t *p = NULL;
    cr_assert_eq(gpool_create(&cfg, &p), GPOOL_ERR_CONFIG);
}

/* Host-alias mode (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 0): mapped host blocks work and
 * every device pointer gpool reports is one the device can use; pinned blocks (registered, not
 * mapped) report none. Failed before: mapped allocations returned GPOOL_ERR_UNSUPPORTED. */
Test(peer, mapped_host_memory_works_when_device_pointers_differ, .init = setup)
{
    set_host_alias(1);
    gpool_t *pool = pool_on(0, NULL);
    CUresult (*host_dptr)(CUdeviceptr *, void *, unsigned) =
        (CUresult(*)(CUdeviceptr *, void *, unsigned))sim_driver_proc("cuMemHostGetDevicePointer");
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t) =
        (CUresult(*)(CUdeviceptr, unsigned char, size_t))sim_driver_proc("cuMemsetD8");
    cr_assert(host_dptr && memset8);
    const size_t sizes[] = {100, 5000, 3 * MiB};
    for (int i = 0; i < 3; i++) {
        gpool_alloc_params p = {.kind = GPOOL_MEM_HOST_MAPPED};
        void *ptr = NULL;
        cr_assert_eq(gpool_alloc(pool, sizes[i], &p, &ptr), GPOOL_OK, "%s", gpool_last_error());
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, ptr, &d), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(d.kind, GPOOL_MEM_HOST_MAPPED);
        cr_assert_not_null(d.host_ptr);
        CUdeviceptr dp = 0;
        cr_assert_eq(host_dptr(&dp, d.host_ptr, 0), CUDA_SUCCESS);
        cr_assert_eq(d.device_ptr, (uint64_t)dp, "the driver's device pointer");
        if (sizes[i] < 16384) /* small blocks come from registered extents: an alias */
            cr_assert_neq(d.device_ptr, (uint64_t)(uintptr_t)d.host_ptr, "size %zu", sizes[i]);
        cr_assert_eq(device_access(0, (void *)(uintptr_t)d.device_ptr, sizes[i], 1), CUDA_SUCCESS);
        memset(d.host_ptr, 0, sizes[i]);
        cr_assert_eq(memset8((CUdeviceptr)d.device_ptr + sizes[i] - 1, 0x5a, 1), CUDA_SUCCESS);
        cr_assert_eq(((unsigned char *)d.host_ptr)[sizes[i] - 1], 0x5a);
        /* both addresses find the block */
        gpool_block_desc again = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, (void *)(uintptr_t)d.device_ptr, &again), GPOOL_OK);
        cr_assert_eq(again.host_ptr, d.host_ptr);
        cr_assert_eq(gpool_get_block_desc(pool, d.host_ptr, &again), GPOOL_OK);
        cr_assert_eq(again.device_ptr, d.device_ptr);
        cr_assert_eq(gpool_free(pool, ptr), GPOOL_OK);
    }
    /* small mapped blocks share registrations: 64 of them, one extent registered */
    gpool_stats st0 = GPOOL_STATS_INIT, st1 = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &st0), GPOOL_OK);
    void *many[64];
    for (int i = 0; i < 64; i++) {
        gpool_alloc_params p = {.kind = GPOOL_MEM_HOST_MAPPED};
        cr_assert_eq(gpool_alloc(pool, 256, &p, &many[i]), GPOOL_OK, "%s", gpool_last_error());
        cr_assert_eq(memset8((CUdeviceptr)(uintptr_t)many[i], (unsigned char)i, 256), CUDA_SUCCESS);
    }
    for (int i = 0; i < 64; i++) {
        gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
        cr_assert_eq(gpool_get_block_desc(pool, many[i], &d), GPOOL_OK);
        cr_assert_eq(((unsigned char *)d.host_ptr)[255], (unsigned char)i);
    }
    cr_assert_eq(gpool_get_stats(pool, &st1), GPOOL_OK);
    cr_assert_leq(
        st1.driver_calls[GPOOL_DRV_HOST_REGISTER] - st0.driver_calls[GPOOL_DRV_HOST_REGISTER], 1);
    cr_assert_eq(st1.driver_calls[GPOOL_DRV_HOST_ALLOC] - st0.driver_calls[GPOOL_DRV_HOST_ALLOC],
                 0);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(gpool_free(pool, many[i]), GPOOL_OK);

    gpool_alloc_params pp = {.kind = GPOOL_MEM_HOST_PINNED};
    void *pinned = NULL;
    cr_assert_eq(gpool_alloc(pool, 5000, &pp, &pinned), GPOOL_OK, "%s", gpool_last_error());
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    cr_assert_eq(gpool_get_block_desc(pool, pinned, &d), GPOOL_OK);
    cr_assert(d.device_ptr == 0 ||
                  device_access(0, (void *)(uintptr_t)d.device_ptr, 5000, 1) == CUDA_SUCCESS,
              "pinned block reports device pointer %#llx, which the device cannot use",
              (unsigned long long)d.device_ptr);
    cr_assert_eq(gpool_free(pool, pinned), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    set_host_alias(0);
}

/* A pool fills most of an H200 (141 GiB) in 1 GiB blocks and gives it back, in seconds. */
Test(peer, pool_fills_an_h200_sized_device, .init = setup_h200, .timeout = 120)
{
    NOT_UNDER_VALGRIND("a 141 GiB device needs more address space than valgrind allows");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gpool_t *pool = pool_on(0, NULL);
    enum { N = 136 };
    void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = alloc_device(pool, (size_t)1 << 30);
        ((volatile char *)b[i])[i] = 1; /* touch a little */
    }
    cr_assert_geq(S->bytes_in_use(0), (size_t)N << 30);
    for (int i = 0; i < N; i++)
        cr_assert_eq(gpool_free(pool, b[i]), GPOOL_OK);
    cr_assert_eq(gpool_trim(pool, 0), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
    cr_assert_eq(S->bytes_in_use(0), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "pool on 141 GiB: %d x 1 GiB blocks in %.2f s\n", N,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
}

/* gpool_set_peer_access changes the access of the mappings the pool already holds (devices
 * left out lose it) and of later ones; a failed change puts the old access back. */
Test(peer, set_peer_access_applies_to_existing_mappings, .init = setup)
{
    gpool_t *pool = pool_on(0, NULL);
    void *big = alloc_device(pool, 6 * MiB), *small = alloc_device(pool, 4096);
    cr_assert_eq(device_access(1, big, 6 * MiB, 1), CUDA_SUCCESS);

    uint64_t before = set_access_calls(pool);
    cr_assert_eq(gpool_set_peer_access(pool, GPOOL_PEER_NONE), GPOOL_OK, "%s", gpool_last_error());
    uint64_t calls = set_access_calls(pool) - before;
    gpool_stats s = GPOOL_STATS_INIT;
    cr_assert_eq(gpool_get_stats(pool, &s), GPOOL_OK);
    cr_assert_geq(calls, 1);
    cr_assert_leq(calls, s.kind[GPOOL_MEM_DEVICE].reserved_bytes / (2 * MiB),
                  "at most one call per mapped handle");
    cr_assert_eq(device_access(1, big, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(device_access(1, small, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(device_access(0, big, 6 * MiB, 1), CUDA_SUCCESS);
    void *later = alloc_device(pool, 8 * MiB);
    cr_assert_eq(device_access(1, later, 1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);

    cr_assert_eq(gpool_set_peer_access(pool, GPOOL_PEER_AUTO), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(device_access(1, big, 6 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(device_access(1, small, 4096, 1), CUDA_SUCCESS);
    cr_assert_eq(device_access(1, later, 8 * MiB, 1), CUDA_SUCCESS);

    /* a driver failure halfway: the old access is put back */
    cr_assert_eq(S->fail_nth("cuMemSetAccess", 1), 0);
    cr_assert_eq(gpool_set_peer_access(pool, GPOOL_PEER_NONE), GPOOL_ERR_DRIVER);
    cr_assert_not_null(strstr(gpool_last_error(), "restored"), "%s", gpool_last_error());
    cr_assert_eq(device_access(1, later, 8 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(device_access(1, big, 6 * MiB, 1), CUDA_SUCCESS);

    /* all, when a device cannot: refused, nothing changes */
    cr_assert_eq(set_peer_capable(1, 0, 0), 0);
    cr_assert_eq(gpool_set_peer_access(pool, GPOOL_PEER_ALL), GPOOL_ERR_UNSUPPORTED);
    cr_assert_eq(device_access(1, big, 6 * MiB, 1), CUDA_SUCCESS);
    cr_assert_eq(gpool_set_peer_access(pool, (gpool_peer_access)9), GPOOL_ERR_INVALID_ARG);
    cr_assert_eq(gpool_set_peer_access(NULL, GPOOL_PEER_NONE), GPOOL_ERR_INVALID_ARG);

    cr_assert_eq(gpool_free(pool, big), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, small), GPOOL_OK);
    cr_assert_eq(gpool_free(pool, later), GPOOL_OK);
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK);
}
