/* sim_legacy.c — cuMemAlloc/cuMemFree, their stream-ordered forms and cuMemGetAddressRange.
 * Each allocation is its own anonymous mapping (page aligned, so 256-byte aligned) and counts
 * its requested size against the current context's device. The stream-ordered forms take
 * effect at once; they add a unit of work to the stream, and cuMemFreeAsync is an access for
 * the happens-before checker: earlier accesses not ordered before it, and later ones not
 * ordered after it, are violations (cuda.h, cuMemFreeAsync: "the free operation ... is
 * stream ordered"; accessing the memory after it is undefined behaviour). cuMemFree frees at
 * once: cuda.h, cuMemFree "will not perform any implicit synchronization when the pointer was
 * allocated with cuMemAllocAsync" and only "may" synchronize for others, so accesses the host
 * does not know complete are violations. During a global-mode capture cuMemAlloc/cuMemFree
 * are prohibited ("potentially unsafe", cuda.h cuThreadExchangeStreamCaptureMode). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_ipc.h"

struct sim_legacy_alloc {
    struct sim_legacy_alloc *next;
    uintptr_t ptr;
    size_t size;   /* requested */
    size_t mapped; /* page rounded */
    int device;
    int managed; /* cuMemAllocManaged: the host reaches it at the same address */
    unsigned long long buffer_id;
    uint64_t graph; /* made during capture graph (sim_capture.c): a graph memory node's */
    int async;      /* cuMemAllocAsync: pool memory, not for legacy IPC */
    /* legacy IPC (sim_ipc.c): an exported allocation lives in its own memfd (shared, fd);
     * an opened handle's mapping in this process is an entry too (imported, opens, key) */
    int shared, imported, fd;
    int lazy_peer; /* opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    unsigned opens;
    uint64_t nonce;
    struct sim_ipc_key key;
};

static struct sim_legacy_alloc *sim_legacy;

static CUresult sim_alloc_kind(CUdeviceptr *dptr, size_t bytesize, int managed)
{
    int dev;
    CUresult rc;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return rc;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytesize > SIZE_MAX - page) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_legacy_alloc *a = calloc(1, sizeof *a); /* graph 0: not a graph allocation */
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = sim_charge(dev, bytesize)) != CUDA_SUCCESS) {
        free(a);
        return rc;
    }
    a->mapped = (bytesize + page - 1) & ~(page - 1);
    void *p = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        sim_uncharge(dev, bytesize);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->ptr = (uintptr_t)p;
    sim_hb_forget(a->ptr, a->mapped); /* fresh memory: older shadow entries are not its past */
    a->size = bytesize;
    a->device = dev;
    a->managed = managed;
    a->buffer_id = sim_next_buffer_id();
    a->next = sim_legacy;
    sim_legacy = a;
    sim_live_add(SIM_LIVE_LEGACY, 1);
    *dptr = (CUdeviceptr)a->ptr;
    return CUDA_SUCCESS;
}

static CUresult sim_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    return sim_alloc_kind(dptr, bytesize, 0);
}

size_t sim_legacy_extent(uintptr_t p)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next)
        if (p >= a->ptr && p - a->ptr < a->size) return a->size - (p - a->ptr);
    return 0;
}

int sim_legacy_contains(uintptr_t p, size_t n)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next)
        if (p >= a->ptr && p - a->ptr < a->size) return n <= a->size - (p - a->ptr);
    return 0;
}

/* stream: the free is stream-ordered work on it (already submitted), else a host free. */
static CUresult sim_free(CUdeviceptr dptr, struct CUstream_st *stream)
{
    for (struct sim_legacy_alloc **pp = &sim_legacy; *pp; pp = &(*pp)->next) {
        struct sim_legacy_alloc *a = *pp;
        if (a->ptr != (uintptr_t)dptr || a->imported) continue;
        *pp = a->next;
        if (!stream) sim_hb_release(a->ptr, a->size, "cuMemFree");
        if (a->shared) {
            /* cuda.h, cuIpcOpenMemHandle: "Calling cuMemFree on an exported memory region
             * before calling cuIpcCloseMemHandle in the importing context will result in
             * undefined behavior" (sim_ipc.c: the importers' locks) */
            if (sim_ipc_held_elsewhere(a->fd, a->mapped)) {
                sim_ipc_count_freed_open();
                sim_hb_violation("%s of %#lx (%zu bytes) while another process has it open "
                                 "with cuIpcOpenMemHandle (cuda.h, cuIpcOpenMemHandle: undefined "
                                 "behavior)",
                                 stream ? "cuMemFreeAsync" : "cuMemFree", (unsigned long)a->ptr,
                                 a->size);
            }
            close(a->fd);
        }
        munmap((void *)a->ptr, a->mapped);
        sim_uncharge(a->device, a->size);
        free(a);
        sim_live_add(SIM_LIVE_LEGACY, -1);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* cuDevicePrimaryCtxReset of dev: every allocation made in its context goes, as cuMemFree
 * would free it (not the mappings of other processes' memory opened here). Lock held. */
void sim_legacy_reset(int dev)
{
    for (;;) {
        struct sim_legacy_alloc *a = sim_legacy;
        while (a && (a->device != dev || a->imported))
            a = a->next;
        if (!a) return;
        sim_hb_release(a->ptr, a->size, "cuDevicePrimaryCtxReset");
        if (a->shared) {
            if (sim_ipc_held_elsewhere(a->fd, a->mapped)) sim_ipc_count_freed_open();
            close(a->fd);
        }
        struct sim_legacy_alloc **pp = &sim_legacy;
        while (*pp != a)
            pp = &(*pp)->next;
        *pp = a->next;
        munmap((void *)a->ptr, a->mapped);
        sim_uncharge(a->device, a->size);
        free(a);
        sim_live_add(SIM_LIVE_LEGACY, -1);
    }
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult rc = sim_enter(SIM_cuMemAlloc);
    if (rc == CUDA_SUCCESS) rc = sim_capture_unsafe_call();
    if (rc == CUDA_SUCCESS) rc = sim_alloc(dptr, bytesize);
    return sim_leave(rc);
}

CUresult cuMemFree(CUdeviceptr dptr)
{
    CUresult rc = sim_enter(SIM_cuMemFree);
    if (rc == CUDA_SUCCESS) rc = sim_capture_unsafe_call();
    if (rc == CUDA_SUCCESS) rc = sim_free(dptr, NULL);
    return sim_leave(rc);
}

CUresult sim_mem_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuMemAllocAsync);
    if (rc == CUDA_SUCCESS &&
        (rc = sim_stream_lookup_pt(hStream, per_thread, &s)) == CUDA_SUCCESS &&
        (rc = sim_capture_check_legacy(s)) == CUDA_SUCCESS &&
        (rc = sim_alloc(dptr, bytesize)) == CUDA_SUCCESS) {
        if (s->capture) sim_legacy->graph = s->capture_id; /* a graph memory node (sim_capture.c) */
        sim_legacy->async = 1;
        sim_stream_submit_work(s);
    }
    return sim_leave(rc);
}

void sim_legacy_graph_release(uint64_t capture_id)
{
    for (struct sim_legacy_alloc **pp = &sim_legacy; *pp;) {
        struct sim_legacy_alloc *a = *pp;
        if (a->graph != capture_id) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        munmap((void *)a->ptr, a->mapped);
        sim_uncharge(a->device, a->size);
        free(a);
        sim_live_add(SIM_LIVE_LEGACY, -1);
    }
}

CUresult sim_mem_free_async(CUdeviceptr dptr, CUstream hStream, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = sim_enter(SIM_cuMemFreeAsync);
    if (rc == CUDA_SUCCESS) rc = sim_stream_lookup_pt(hStream, per_thread, &s);
    if (rc == CUDA_SUCCESS) rc = sim_capture_check_legacy(s);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_legacy_alloc *a = sim_legacy;
    while (a && (a->ptr != (uintptr_t)dptr || a->imported))
        a = a->next;
    if (!a) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    /* cuda.h, cuMemFreeAsync: during stream capture it creates a free node "and must therefore
     * be passed the address of a graph allocation" (sim_capture.c) */
    if (s->capture && !a->graph) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if (sim_stream_submit_work(s)) return sim_leave(CUDA_SUCCESS); /* captured: freed at launch */
    sim_hb_access(s, a->ptr, a->size, SIM_FREE, "cuMemFreeAsync");
    return sim_leave(sim_free(dptr, s));
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return sim_mem_alloc_async(dptr, bytesize, hStream, 0);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return sim_mem_free_async(dptr, hStream, 0);
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult rc = sim_enter(SIM_cuMemGetAddressRange);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    uintptr_t p = (uintptr_t)dptr, base = 0;
    size_t size = 0;
    int found = sim_vmm_range(p, &base, &size);
    for (struct sim_legacy_alloc *a = sim_legacy; a && !found; a = a->next) {
        if (p >= a->ptr && p - a->ptr < a->size) {
            base = a->ptr;
            size = a->size;
            found = 1;
        }
    }
    if (!found) return sim_leave(CUDA_ERROR_NOT_FOUND);
    if (pbase) *pbase = (CUdeviceptr)base;
    if (psize) *psize = size;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuMemAllocManaged: memory "automatically managed by the Unified Memory system",
 * accessible from the host and every device at the same address; flags must be
 * CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST, a size of 0 is CUDA_ERROR_INVALID_VALUE. The
 * simulator counts it against the current device's capacity, as memory that starts there. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CUresult rc = sim_enter(SIM_cuMemAllocManaged);
    if (rc == CUDA_SUCCESS && flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) rc = sim_capture_unsafe_call();
    if (rc == CUDA_SUCCESS) rc = sim_alloc_kind(dptr, bytesize, 1);
    return sim_leave(rc);
}

/* The pitch the simulator pads rows to: the 512 bytes current GPUs report as
 * CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT's multiple for cuMemAllocPitch rows. */
#define SIM_PITCH_ALIGN ((size_t)512)

/* cuda.h, cuMemAllocPitch: at least WidthInBytes * Height bytes, rows padded to *pPitch;
 * ElementSizeBytes "may be 4, 8 or 16". Counted like cuMemAlloc (the padded size). */
CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                         unsigned int ElementSizeBytes)
{
    CUresult rc = sim_enter(SIM_cuMemAllocPitch);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
        WidthInBytes > SIZE_MAX - SIM_PITCH_ALIGN)
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    size_t pitch = (WidthInBytes + SIM_PITCH_ALIGN - 1) & ~(SIM_PITCH_ALIGN - 1);
    if (Height > SIZE_MAX / pitch) return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    if ((rc = sim_capture_unsafe_call()) == CUDA_SUCCESS &&
        (rc = sim_alloc(dptr, pitch * Height)) == CUDA_SUCCESS)
        *pPitch = pitch;
    return sim_leave(rc);
}

/* Pointer attributes of a cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged allocation: its base
 * and size (cuda.h, cuMemGetAddressRange); managed memory is reachable from the host too.
 * Lock held. */
int sim_legacy_describe(uintptr_t p, struct sim_ptr_info *out)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next) {
        if (p < a->ptr || p - a->ptr >= a->size) continue;
        out->memtype = CU_MEMORYTYPE_DEVICE;
        out->device = a->device;
        out->managed = a->managed;
        out->vmm = 0;
        /* cuda.h, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: "suitable for
         * cudaIpcGetMemHandle": cuMemAlloc memory, not managed, pool or opened memory */
        out->ipc_capable = !a->managed && !a->async && !a->graph && !a->imported;
        out->base = a->ptr;
        out->size = a->size;
        out->map_base = a->ptr;
        out->map_size = a->size;
        out->buffer_id = a->buffer_id;
        out->devp = p;
        out->host = a->managed ? p : 0;
        return 1;
    }
    return 0;
}

void sim_legacy_teardown(void)
{
    while (sim_legacy) {
        struct sim_legacy_alloc *a = sim_legacy;
        sim_legacy = a->next;
        if (a->shared || a->imported) close(a->fd); /* the mappings keep the file */
        free(a);
    }
}

int sim_legacy_device(uintptr_t p)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next)
        if (p >= a->ptr && p - a->ptr < a->mapped) return a->device;
    return -1;
}

/* ---- legacy IPC (sim_ipc.c) ---- */

/* Copy the allocation's bytes into fd, skipping zero chunks (the file is sparse). */
static int sim_legacy_copy_out(int fd, const struct sim_legacy_alloc *a)
{
    static const unsigned char zero[65536];
    for (size_t off = 0; off < a->mapped; off += sizeof zero) {
        size_t n = a->mapped - off < sizeof zero ? a->mapped - off : sizeof zero;
        const void *src = (const void *)(a->ptr + off);
        if (memcmp(src, zero, n) == 0) continue;
        if (pwrite(fd, src, n, (off_t)off) != (ssize_t)n) return -1;
    }
    return 0;
}

CUresult sim_legacy_ipc_export(uintptr_t p, struct sim_ipc_key *out)
{
    struct sim_legacy_alloc *a = sim_legacy;
    while (a && (a->ptr != p || a->imported))
        a = a->next;
    if (!a || a->managed || a->async || a->graph) return CUDA_ERROR_INVALID_VALUE;
    if (!a->shared) {
        struct sim_ipc_meta m;
        memset(&m, 0, sizeof m);
        m.kind = SIM_IPC_LEGACY;
        m.device = a->device;
        m.size = a->mapped;
        m.nonce = sim_ipc_nonce();
        m.pid = (int32_t)getpid();
        int fd = sim_ipc_create(&m);
        if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
        if (sim_legacy_copy_out(fd, a) != 0) {
            close(fd);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* the same addresses, now over the shared file */
        if (mmap((void *)a->ptr, a->mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 0) == MAP_FAILED) {
            close(fd);
            return CUDA_ERROR_MAP_FAILED;
        }
        a->shared = 1;
        a->fd = fd;
        a->nonce = m.nonce;
    }
    struct stat st;
    if (fstat(a->fd, &st) != 0) return CUDA_ERROR_MAP_FAILED;
    memset(out, 0, sizeof *out);
    out->pid = (int32_t)getpid();
    out->fd = a->fd;
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->nonce = a->nonce;
    out->size = a->size;
    out->device = a->device;
    return CUDA_SUCCESS;
}

int sim_legacy_lazy_peer(uintptr_t p)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next)
        if (p >= a->ptr && p - a->ptr < a->mapped) return a->imported && a->lazy_peer;
    return 0;
}

int sim_legacy_ipc_find_open(const struct sim_ipc_key *k, uintptr_t *p, unsigned flags)
{
    for (struct sim_legacy_alloc *a = sim_legacy; a; a = a->next) {
        if (!a->imported || a->key.pid != k->pid || a->key.dev != k->dev || a->key.ino != k->ino ||
            a->key.nonce != k->nonce)
            continue;
        a->opens++;
        if (flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) a->lazy_peer = 1;
        *p = a->ptr;
        return 1;
    }
    return 0;
}

CUresult sim_legacy_ipc_add_open(uintptr_t p, const struct sim_ipc_key *k,
                                 const struct sim_ipc_meta *m, int fd, unsigned flags)
{
    struct sim_legacy_alloc *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->ptr = p;
    a->size = k->size;
    a->mapped = m->size;
    a->device = m->device;
    a->imported = 1;
    a->opens = 1;
    /* cuda.h, cuIpcOpenMemHandle: for another device's memory the flag "can attempt to
     * enable peer access between the devices as if the user called cuCtxEnablePeerAccess";
     * the simulator grants it to this mapping alone, where the devices are peer capable */
    a->lazy_peer = (flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0;
    a->fd = fd;
    a->key = *k;
    a->buffer_id = sim_next_buffer_id();
    sim_hb_forget(p, a->mapped);
    a->next = sim_legacy;
    sim_legacy = a;
    sim_live_add(SIM_LIVE_LEGACY, 1);
    return CUDA_SUCCESS;
}

CUresult sim_legacy_ipc_close(uintptr_t p)
{
    for (struct sim_legacy_alloc **pp = &sim_legacy; *pp; pp = &(*pp)->next) {
        struct sim_legacy_alloc *a = *pp;
        if (a->ptr != p || !a->imported) continue;
        if (--a->opens > 0) return CUDA_SUCCESS;
        *pp = a->next;
        sim_hb_release(a->ptr, a->size, "cuIpcCloseMemHandle");
        munmap((void *)a->ptr, a->mapped);
        close(a->fd); /* drops this process's lock: the exporter sees it closed */
        free(a);
        sim_live_add(SIM_LIVE_LEGACY, -1);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}
