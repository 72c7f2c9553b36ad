/* test_sim_phys.c — the simulated driver's referee tracks physical bytes: one VMM handle may be
 * mapped at several virtual addresses (cuMemMap: "a handle may be mapped at several addresses";
 * the Programming Guide's "Virtual Memory Management" section maps one allocation at two
 * ranges), and an access through one mapping conflicts with an unordered access to the same
 * bytes through another (sim/sim_phys.c). Each test loads the simulator itself
 * ($GPOOL_LIBCUDA), non-strict, and counts violations. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "util_sim.h"
#include "util_skip.h"

#define XSTR(x)   #x
#define STR(x)    XSTR(x)
#define FN(name)  static __typeof__(name) *p_##name
#define GET(name) (*(void **)&p_##name = sym(STR(name)))
#define GRAN      GPOOL_SIM_GRANULARITY

static void *lib;
static void *sym(const char *name)
{
    void *f = dlsym(lib, name);
    cr_assert_not_null(f, "%s not exported", name);
    return f;
}

FN(cuInit);
FN(cuDevicePrimaryCtxRetain);
FN(cuCtxSetCurrent);
FN(cuStreamCreate);
FN(cuStreamSynchronize);
FN(cuStreamWaitEvent);
FN(cuEventCreate);
FN(cuEventRecord);
FN(cuMemCreate);
FN(cuMemRelease);
FN(cuMemAddressReserve);
FN(cuMemAddressFree);
FN(cuMemMap);
FN(cuMemUnmap);
FN(cuMemSetAccess);
FN(gpoolsim_touch);
FN(gpoolsim_violations);

static void setup(void)
{
    NEED_SIM();
    setenv("GPOOL_SIM_STRICT", "0", 1); /* these tests provoke violations and count them */
    unsetenv("GPOOL_SIM_VIOLATION_LOG");
    const char *path = getenv("GPOOL_LIBCUDA");
    cr_assert_not_null(path, "GPOOL_LIBCUDA must name the simulated driver");
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    GET(cuInit);
    GET(cuDevicePrimaryCtxRetain);
    GET(cuCtxSetCurrent);
    GET(cuStreamCreate);
    GET(cuStreamSynchronize);
    GET(cuStreamWaitEvent);
    GET(cuEventCreate);
    GET(cuEventRecord);
    GET(cuMemCreate);
    GET(cuMemRelease);
    GET(cuMemAddressReserve);
    GET(cuMemAddressFree);
    GET(cuMemMap);
    GET(cuMemUnmap);
    GET(cuMemSetAccess);
    GET(gpoolsim_touch);
    GET(gpoolsim_violations);
    CUcontext ctx;
    cr_assert_eq(p_cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(p_cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(p_cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

static CUstream stream(void)
{
    CUstream s;
    cr_assert_eq(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

static CUmemGenericAllocationHandle handle(size_t size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    cr_assert_eq(p_cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
    return h;
}

static CUdeviceptr reserve(size_t size)
{
    CUdeviceptr va;
    cr_assert_eq(p_cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS);
    return va;
}

/* Map h (whole, size bytes) at va, read-write for device 0. */
static void map(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    cr_assert_eq(p_cuMemMap(va, size, 0, h, 0), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemSetAccess(va, size, &acc, 1), CUDA_SUCCESS);
}

static void touch(CUstream s, CUdeviceptr p, size_t n, int w)
{
    cr_assert_eq(p_gpoolsim_touch(s, p, n, w), CUDA_SUCCESS);
}

/* One handle at two addresses: the same bytes. */
static CUmemGenericAllocationHandle aliased(CUdeviceptr *a, CUdeviceptr *b)
{
    CUmemGenericAllocationHandle h = handle(GRAN);
    *a = reserve(GRAN);
    *b = reserve(GRAN);
    map(*a, GRAN, h);
    map(*b, GRAN, h);
    return h;
}

Test(phys, unordered_accesses_through_two_mappings_of_one_handle_race, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUdeviceptr a, b;
    aliased(&a, &b);
    touch(s1, a + 4096, 256, 1); /* kernel on s1 writes through the first mapping */
    touch(s2, b + 4096, 256, 1); /* a write on s2 through the second, no order */
    cr_assert_eq(p_gpoolsim_violations(), 1, "the same physical bytes, unordered");
    touch(s2, b + 4096 + 128, 8, 0); /* s2 is ordered after its own write */
    cr_assert_eq(p_gpoolsim_violations(), 1);
    touch(s1, a + 4096 + 64, 8, 0); /* s1 reads what s2 wrote through the other mapping */
    cr_assert_eq(p_gpoolsim_violations(), 2, "a read racing the alias's write");
}

Test(phys, an_event_orders_accesses_through_two_mappings, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUdeviceptr a, b;
    aliased(&a, &b);
    CUevent e;
    cr_assert_eq(p_cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    touch(s1, a, GRAN, 1);
    cr_assert_eq(p_cuEventRecord(e, s1), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
    touch(s2, b, GRAN, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}

Test(phys, different_bytes_of_one_handle_never_conflict, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUdeviceptr a, b;
    aliased(&a, &b);
    touch(s1, a, GRAN / 2, 1);
    touch(s2, b + GRAN / 2, GRAN / 2, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(s2, b + GRAN / 2 - 1, 2, 1);
    cr_assert_eq(p_gpoolsim_violations(), 1);
}

/* The tail-spanning layout of issue 27: handles h1 and h2 at their own addresses, and again
 * side by side at a fresh range; a block there at new + GRAN - 4096 spans h1's last 4 KiB and
 * h2's first bytes. */
Test(phys, a_block_spanning_two_handles_side_by_side_races_with_each, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUmemGenericAllocationHandle h1 = handle(GRAN), h2 = handle(GRAN);
    CUdeviceptr v1 = reserve(GRAN), v2 = reserve(GRAN), both = reserve(2 * GRAN);
    map(v1, GRAN, h1);
    map(v2, GRAN, h2);
    map(both, GRAN, h1);
    map(both + GRAN, GRAN, h2);
    touch(s1, v1, GRAN - 4096, 1);          /* a block at the head of h1 */
    touch(s1, v2 + 8192, 4096, 1);          /* a block in h2 after the spanning one */
    touch(s2, both + GRAN - 4096, 8192, 1); /* the spanning block: no conflict */
    cr_assert_eq(p_gpoolsim_violations(), 0);
    touch(s1, v1 + GRAN - 256, 16, 0); /* h1's tail through its own mapping */
    cr_assert_eq(p_gpoolsim_violations(), 1);
    touch(s1, v2 + 4000, 16, 0); /* h2's head through its own mapping */
    cr_assert_eq(p_gpoolsim_violations(), 2);
}

Test(phys, unmapping_one_alias_checks_only_its_own_pending_work, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUdeviceptr a, b;
    CUmemGenericAllocationHandle h = aliased(&a, &b);
    touch(s1, b, 4096, 1); /* pending through b only */
    cr_assert_eq(p_cuMemUnmap(a, GRAN), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 0, "nothing queued went through a");
    touch(s2, b, 16, 1); /* b's bytes keep their past */
    cr_assert_eq(p_gpoolsim_violations(), 1);
    map(a, GRAN, h);
    touch(s2, a + 8192, 16, 1);
    cr_assert_eq(p_cuMemUnmap(a, GRAN), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 2, "work through a still queued");
    cr_assert_eq(p_cuStreamSynchronize(s1), CUDA_SUCCESS);
    cr_assert_eq(p_cuStreamSynchronize(s2), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemUnmap(b, GRAN), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(p_gpoolsim_violations(), 2);
    cr_assert_eq(p_cuMemAddressFree(a, GRAN), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemAddressFree(b, GRAN), CUDA_SUCCESS);
}

Test(phys, a_new_handle_on_recycled_store_bytes_has_no_past, .init = setup)
{
    CUstream s1 = stream(), s2 = stream();
    CUdeviceptr a = reserve(GRAN), b = reserve(GRAN);
    CUmemGenericAllocationHandle h = handle(GRAN);
    map(a, GRAN, h);
    touch(s1, a, GRAN, 1);
    cr_assert_eq(p_cuStreamSynchronize(s1), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemUnmap(a, GRAN), CUDA_SUCCESS);
    cr_assert_eq(p_cuMemRelease(h), CUDA_SUCCESS);
    h = handle(GRAN); /* may reuse the same bytes of the store */
    map(b, GRAN, h);
    touch(s2, b, GRAN, 1);
    cr_assert_eq(p_gpoolsim_violations(), 0);
}
