/* sim_access.c — who may touch which memory: peer capability and peer access between
 * contexts, the device-access rule every copy and memset goes through, and the modes that make
 * the simulator less convenient than unified addressing on one host (alias device pointers
 * for registered host memory, MINIMUM < RECOMMENDED granularity, device memory the CPU cannot
 * touch).
 *
 * Rules and their sources (cuda.h doc comments of the CUDA 13 driver API):
 * - VMM memory: a device reaches a mapping only with the access cuMemSetAccess gave that
 *   device (cuMemSetAccess; the "Virtual Memory Management" section: peer access through
 *   cuCtxEnablePeerAccess does not apply to cuMemCreate allocations, access is set on the
 *   address range). Anything else is an illegal address, as a kernel fault would be.
 * - cuMemAlloc memory: its own device, or a device whose context enabled peer access to the
 *   owning device's context (cuCtxEnablePeerAccess: "enables direct access to memory
 *   allocations in a peer context"); cuDeviceCanAccessPeer says whether that is possible.
 * - Pinned host memory (cuMemHostAlloc, cuMemHostRegister): accessible from all contexts on
 *   all devices with unified addressing (cuMemHostAlloc: "automatically be immediately
 *   accessible to all contexts on all devices which support unified addressing"). Its device
 *   address is the host address unless CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0 on some
 *   device: then registered memory has a different device pointer (cuMemHostGetDevicePointer)
 *   and the host pointer is not a device address.
 * The device of a synchronous copy or memset is the current context's (cuda.h, "API
 * synchronization behavior"); of an async one its stream's context: streams carry no context
 * in this simulator yet, so the current context stands for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "size_parse.h"

static size_t sim_min_gran_mode;
static int sim_alias_mode;
static int sim_no_cpu_mode;
static unsigned char sim_peer_capable[GPOOL_SIM_MAX_DEVICES][GPOOL_SIM_MAX_DEVICES];
static unsigned char sim_peer_enabled[GPOOL_SIM_MAX_DEVICES][GPOOL_SIM_MAX_DEVICES];

static void sim_peer_all(int can)
{
    for (int a = 0; a < GPOOL_SIM_MAX_DEVICES; a++)
        for (int b = 0; b < GPOOL_SIM_MAX_DEVICES; b++)
            sim_peer_capable[a][b] = (unsigned char)(can && a != b);
}

static void sim_parse_peer(const char *v)
{
    if (strcmp(v, "all") == 0) return sim_peer_all(1);
    if (strcmp(v, "none") == 0) return sim_peer_all(0);
    sim_peer_all(0);
    const char *p = v;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || *end != ':') {
            sim_bad_config("GPOOL_SIM_PEER", v, "expected all|none|A:B,...");
            return;
        }
        p = end + 1;
        long b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || a < 0 || b < 0 || a >= GPOOL_SIM_MAX_DEVICES ||
            b >= GPOOL_SIM_MAX_DEVICES || a == b) {
            sim_bad_config("GPOOL_SIM_PEER", v, "A:B are two different device ordinals");
            return;
        }
        sim_peer_capable[a][b] = 1;
        p = *end ? end + 1 : end;
    }
}

static int sim_parse_flag(const char *var)
{
    const char *v = getenv(var);
    if (!v || !*v) return 0;
    if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0) return *v == '1';
    sim_bad_config(var, v, "expected 0 or 1");
    return 0;
}

__attribute__((constructor)) static void sim_access_configure(void)
{
    sim_peer_all(1);
    const char *v = getenv("GPOOL_SIM_PEER");
    if (v && *v) sim_parse_peer(v);
    v = getenv("GPOOL_SIM_MIN_GRANULARITY");
    if (v && *v) {
        uint64_t k;
        if (gp_size_parse(v, strlen(v), &k, NULL) != 0 ||
            (k != 0 && (k < 65536 || k > GPOOL_SIM_GRANULARITY || (k & (k - 1)))))
            sim_bad_config("GPOOL_SIM_MIN_GRANULARITY", v,
                           "expected 0 or a power of two from 64K to 2M");
        else
            sim_min_gran_mode = (size_t)k;
    }
    sim_alias_mode = sim_parse_flag("GPOOL_SIM_HOST_ALIAS");
    sim_no_cpu_mode = sim_parse_flag("GPOOL_SIM_DEVICE_NO_CPU");
}

size_t sim_mode_min_granularity(void)
{
    return sim_min_gran_mode;
}
int sim_mode_host_alias(void)
{
    return sim_alias_mode;
}
int sim_mode_device_no_cpu(void)
{
    return sim_no_cpu_mode;
}

/* ---- peer capability and peer access ---- */

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult rc = sim_enter(SIM_cuDeviceCanAccessPeer);
    if (rc == CUDA_SUCCESS) {
        if (!canAccessPeer)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (!sim_valid_device(dev) || !sim_valid_device(peerDev))
            rc = CUDA_ERROR_INVALID_DEVICE;
        else
            *canAccessPeer = sim_peer_capable[dev][peerDev];
    }
    return sim_leave(rc);
}

/* cuda.h, cuCtxEnablePeerAccess: the current context gets access to peerContext's
 * allocations; INVALID_CONTEXT without a current context, for an invalid peer or the current
 * context itself; PEER_ACCESS_UNSUPPORTED when cuDeviceCanAccessPeer says no; ALREADY_ENABLED
 * the second time; Flags must be 0. It grants nothing on VMM mappings (see the top). */
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    int me, peer;
    CUresult rc = sim_enter(SIM_cuCtxEnablePeerAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (Flags != 0) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    CUcontext cur = sim_current_context();
    if (!cur || sim_context_device(cur, &me) != CUDA_SUCCESS ||
        sim_context_device(peerContext, &peer) != CUDA_SUCCESS || cur == peerContext)
        return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
    if (!sim_peer_capable[me][peer]) return sim_leave(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    if (sim_peer_enabled[me][peer]) return sim_leave(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    sim_peer_enabled[me][peer] = 1;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuCtxDisablePeerAccess: PEER_ACCESS_NOT_ENABLED if it was not enabled. */
CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    int me, peer;
    CUresult rc = sim_enter(SIM_cuCtxDisablePeerAccess);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    CUcontext cur = sim_current_context();
    if (!cur || sim_context_device(cur, &me) != CUDA_SUCCESS ||
        sim_context_device(peerContext, &peer) != CUDA_SUCCESS)
        return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
    if (!sim_peer_enabled[me][peer]) return sim_leave(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    sim_peer_enabled[me][peer] = 0;
    return sim_leave(CUDA_SUCCESS);
}

/* ---- the device-access rule ---- */

CUresult sim_mem_device_access(int dev, uintptr_t p, size_t n, int write)
{
    if (n == 0) return CUDA_SUCCESS;
    uintptr_t host;
    size_t contig;
    if (sim_vmm_translate(p, &host, &contig) != 0 || sim_vmm_reserved(p)) {
        if (dev < 0 || dev >= GPOOL_SIM_MAX_DEVICES) return CUDA_ERROR_INVALID_CONTEXT;
        return sim_vmm_access(dev, p, n, write);
    }
    int owner = sim_legacy_device(p);
    if (owner >= 0) {
        if (dev < 0 || dev >= GPOOL_SIM_MAX_DEVICES) return CUDA_ERROR_INVALID_CONTEXT;
        /* an IPC mapping opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: peer access of its
         * own (sim_legacy.c) */
        return owner == dev || sim_peer_enabled[dev][owner] ||
                       (sim_peer_capable[dev][owner] && sim_legacy_lazy_peer(p))
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    if (sim_host_classify(p, &host, &contig) == SIM_HOST_NOT_ON_DEV)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS; /* pinned host memory: every device; unknown memory: not checked */
}

CUresult sim_copy_device(struct CUstream_st *s, int *dev)
{
    /* the device of the stream's context (sim_stream.c); no stream: the current context's */
    if (s)
        *dev = s->device;
    else if (sim_current_device(dev) != CUDA_SUCCESS)
        *dev = -1;
    return CUDA_SUCCESS;
}

/* Where the bytes at p are, for an argument that is a device address (is_dev 1), a host
 * address (0) or either (-1). */
static CUresult sim_resolve(uintptr_t p, int is_dev, uintptr_t *host, size_t *contig)
{
    if (is_dev != 0) {
        int t = sim_vmm_translate(p, host, contig);
        if (t < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        if (t > 0) return CUDA_SUCCESS;
        if (sim_vmm_reserved(p)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    enum sim_host_addr h = sim_host_classify(p, host, contig);
    if (h == SIM_HOST_ALIAS) return CUDA_SUCCESS;
    if (h == SIM_HOST_NOT_ON_DEV && is_dev == 1) return CUDA_ERROR_ILLEGAL_ADDRESS;
    *host = p;
    *contig = SIZE_MAX - p;
    return CUDA_SUCCESS;
}

static CUresult sim_check_arg(int dev, uintptr_t p, int is_dev, size_t n, int write)
{
    if (is_dev == 0) return CUDA_SUCCESS;
    if (is_dev < 0) {
        /* cuMemcpy infers each side from the address (unified addressing): registered host
         * memory named by its host pointer is a host argument */
        uintptr_t host;
        size_t contig;
        if (sim_host_classify(p, &host, &contig) == SIM_HOST_NOT_ON_DEV) return CUDA_SUCCESS;
    }
    return sim_mem_device_access(dev, p, n, write);
}

CUresult sim_mem_move(int dev, uintptr_t dst, int dst_dev, uintptr_t src, int src_dev, size_t n)
{
    CUresult rc = sim_check_arg(dev, dst, dst_dev, n, 1);
    if (rc == CUDA_SUCCESS) rc = sim_check_arg(dev, src, src_dev, n, 0);
    while (rc == CUDA_SUCCESS && n > 0) {
        uintptr_t d, s;
        size_t cd, cs;
        if ((rc = sim_resolve(dst, dst_dev, &d, &cd)) != CUDA_SUCCESS ||
            (rc = sim_resolve(src, src_dev, &s, &cs)) != CUDA_SUCCESS)
            break;
        size_t k = n < cd ? n : cd;
        if (cs < k) k = cs;
        memmove((void *)d, (const void *)s, k);
        dst += k;
        src += k;
        n -= k;
    }
    return rc;
}

CUresult sim_mem_fill(int dev, uintptr_t dst, const void *pattern, size_t width, size_t count)
{
    size_t n = width * count;
    CUresult rc = sim_mem_device_access(dev, dst, n, 1);
    while (rc == CUDA_SUCCESS && n > 0) {
        uintptr_t d;
        size_t cd;
        if ((rc = sim_resolve(dst, 1, &d, &cd)) != CUDA_SUCCESS) break;
        size_t k = n < cd ? n : cd;
        k -= k % width; /* mappings are granularity aligned: never cuts an element */
        if (k == 0) return CUDA_ERROR_INVALID_VALUE;
        if (width == 1)
            memset((void *)d, *(const unsigned char *)pattern, k);
        else
            for (size_t i = 0; i < k; i += width)
                memcpy((char *)d + i, pattern, width);
        dst += k;
        n -= k;
    }
    return rc;
}

/* ---- control API ---- */

SIM_EXPORT int gpoolsim_set_peer_capable(int dev, int peer, int can)
{
    if (dev < 0 || peer < 0 || dev >= GPOOL_SIM_MAX_DEVICES || peer >= GPOOL_SIM_MAX_DEVICES ||
        dev == peer)
        return -1;
    sim_lock();
    sim_peer_capable[dev][peer] = (unsigned char)(can != 0);
    if (!can) sim_peer_enabled[dev][peer] = 0;
    sim_unlock();
    return 0;
}

SIM_EXPORT CUresult gpoolsim_device_access(int dev, const void *p, size_t n, int write)
{
    sim_lock();
    CUresult rc = sim_mem_device_access(dev, (uintptr_t)p, n, write);
    sim_unlock();
    return rc;
}

SIM_EXPORT int gpoolsim_set_min_granularity(size_t bytes)
{
    if (bytes != 0 && (bytes < 65536 || bytes > GPOOL_SIM_GRANULARITY || (bytes & (bytes - 1))))
        return -1;
    sim_lock();
    sim_min_gran_mode = bytes;
    sim_unlock();
    return 0;
}

SIM_EXPORT void gpoolsim_set_host_alias(int on)
{
    sim_lock();
    sim_alias_mode = on != 0;
    sim_unlock();
}

SIM_EXPORT void gpoolsim_set_device_no_cpu(int on)
{
    sim_lock();
    sim_no_cpu_mode = on != 0;
    sim_unlock();
}
