/* sim_ipc.c — what two processes share: the memfd-backed bytes of exportable memory, its
 * metadata, the 64-byte legacy IPC handle (cuIpcGetMemHandle/cuIpcOpenMemHandle/
 * cuIpcCloseMemHandle) and the cross-process part of the referee.
 *
 * Shareable memory is its own memfd: the allocation's bytes, then one page of metadata
 * (struct sim_ipc_meta: kind, size, device, properties, a nonce), so an importer holding only
 * the descriptor knows what it maps, as the real driver knows it from its own descriptor. A
 * VMM handle created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR gets one at cuMemCreate (a
 * descriptor per exportable handle: that is the cost of asking for the type); a cuMemAlloc
 * allocation is moved into one at its first cuIpcGetMemHandle (its bytes are copied and the
 * file mapped MAP_SHARED over the same addresses, so the pointer does not change). The kernel
 * keeps the pages while any descriptor or mapping of the file remains: physical memory lives
 * while any handle or mapping in any process references it, as the driver reference says
 * (cuMemExportToShareableHandle: "Once all shareable handles are closed and the allocation is
 * released, the allocated memory referenced will be released back to the OS").
 *
 * The legacy handle carries the exporter's pid and descriptor number and the file's identity
 * (device, inode, nonce): the importer opens /proc/<pid>/fd/<n> (the same user may; no
 * privilege beyond that), checks the identity, and maps the file. A handle of a process that
 * is gone, of memory freed since (a new allocation gets a new nonce: cuIpcGetMemHandle "will
 * return a unique handle for the new memory") or forged bytes is CUDA_ERROR_INVALID_HANDLE.
 *
 * Referee: every importer holds an open-file-description read lock (F_OFD_SETLK) on the first
 * metadata byte through its own description of the file, for as long as it has the memory
 * open. The kernel drops it when the importer closes or dies, so a crashed importer leaves no
 * count behind. When the exporter frees (cuMemFree/cuMemFreeAsync, or a VMM handle's last
 * release and unmap) it asks F_OFD_GETLK whether another description holds one: that free is
 * counted (gpoolsim_ipc_freed_while_open), and for legacy IPC it is also a violation: "Calling
 * cuMemFree on an exported memory region before calling cuIpcCloseMemHandle in the importing
 * context will result in undefined behavior" (cuda.h, cuIpcOpenMemHandle). For VMM memory
 * the reference makes it legal (the bytes stay), so it is only counted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim_ipc.h"

#define SIM_IPC_MAGIC        0x6770736d69706331ull /* "gpsmipc1" */
#define SIM_IPC_HANDLE_MAGIC 0x6770736d68646c31ull /* "gpsmhdl1" */

static unsigned long sim_ipc_freed_open;
static uint64_t sim_ipc_seq;

uint64_t sim_ipc_nonce(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_nsec << 8) ^
                 ((uint64_t)ts.tv_sec << 32) ^ ++sim_ipc_seq;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return x ? x : 1;
}

int sim_ipc_create(const struct sim_ipc_meta *meta)
{
    int fd = memfd_create("gpoolsim-ipc", MFD_CLOEXEC);
    if (fd < 0 && errno == EMFILE) {
        /* one descriptor per exportable handle: lift the soft limit once, as the stores do */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            fd = memfd_create("gpoolsim-ipc", MFD_CLOEXEC);
        }
    }
    if (fd < 0) return -1;
    struct sim_ipc_meta m = *meta;
    m.magic = SIM_IPC_MAGIC;
    if (ftruncate(fd, (off_t)(m.size + SIM_IPC_META_BYTES)) != 0 ||
        pwrite(fd, &m, sizeof m, (off_t)m.size) != (ssize_t)sizeof m) {
        close(fd);
        return -1;
    }
    return fd;
}

int sim_ipc_read_meta(int fd, struct sim_ipc_meta *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)SIM_IPC_META_BYTES)
        return -1;
    off_t at = st.st_size - (off_t)SIM_IPC_META_BYTES;
    if (pread(fd, out, sizeof *out, at) != (ssize_t)sizeof *out) return -1;
    if (out->magic != SIM_IPC_MAGIC || out->size != (uint64_t)at || out->size == 0) return -1;
    return 0;
}

int sim_ipc_reopen(int pid, int fd)
{
    char path[64];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    else
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

int sim_ipc_hold(int fd, uint64_t size)
{
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = (off_t)size, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &fl);
}

int sim_ipc_held_elsewhere(int fd, uint64_t size)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)size, .l_len = 1};
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

void sim_ipc_count_freed_open(void)
{
    sim_ipc_freed_open++;
}

/* ---- the legacy handle: 64 bytes (CU_IPC_HANDLE_SIZE) ---- */

struct sim_ipc_wire {
    uint64_t magic;
    int32_t pid;
    int32_t fd;
    uint64_t dev;
    uint64_t ino;
    uint64_t nonce;
    uint64_t size;
    int32_t device;
    uint32_t check;
};
_Static_assert(sizeof(struct sim_ipc_wire) <= CU_IPC_HANDLE_SIZE, "fits a CUipcMemHandle");

static uint32_t sim_ipc_check(const struct sim_ipc_wire *w)
{
    const unsigned char *b = (const unsigned char *)w;
    uint32_t h = 2166136261u; /* FNV-1a over everything before the check */
    for (size_t i = 0; i < offsetof(struct sim_ipc_wire, check); i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static void sim_ipc_encode(CUipcMemHandle *out, const struct sim_ipc_key *k)
{
    struct sim_ipc_wire w;
    memset(&w, 0, sizeof w);
    w.magic = SIM_IPC_HANDLE_MAGIC;
    w.pid = k->pid;
    w.fd = k->fd;
    w.dev = k->dev;
    w.ino = k->ino;
    w.nonce = k->nonce;
    w.size = k->size;
    w.device = k->device;
    w.check = sim_ipc_check(&w);
    memset(out, 0, sizeof *out);
    memcpy(out->reserved, &w, sizeof w);
}

static int sim_ipc_decode(const CUipcMemHandle *in, struct sim_ipc_key *k)
{
    struct sim_ipc_wire w;
    memcpy(&w, in->reserved, sizeof w);
    if (w.magic != SIM_IPC_HANDLE_MAGIC || w.check != sim_ipc_check(&w) || w.pid <= 0 || w.fd < 0 ||
        w.size == 0)
        return -1;
    k->pid = w.pid;
    k->fd = w.fd;
    k->dev = w.dev;
    k->ino = w.ino;
    k->nonce = w.nonce;
    k->size = w.size;
    k->device = w.device;
    return 0;
}

/* ---- entry points ---- */

/* cuda.h, cuIpcGetMemHandle: "a pointer to the base of an existing device memory allocation
 * created with cuMemAlloc"; anything else (VMM memory, an interior pointer, managed memory) is
 * CUDA_ERROR_INVALID_VALUE, the reference's error for a bad argument. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult rc = sim_enter(SIM_cuIpcGetMemHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    struct sim_ipc_key k;
    if (!pHandle) return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_legacy_ipc_export((uintptr_t)dptr, &k)) != CUDA_SUCCESS) return sim_leave(rc);
    sim_ipc_encode(pHandle, &k);
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuIpcOpenMemHandle: Flags "Must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"
 * (0 is accepted too, as the driver does); a handle already open in this process gets its
 * reference count raised and the same pointer; the errors are those the reference lists. */
CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CUresult rc = sim_enter(SIM_cuIpcOpenMemHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    int dev;
    struct sim_ipc_key k;
    if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
    if ((rc = sim_current_device(&dev)) != CUDA_SUCCESS) return sim_leave(rc);
    if (sim_ipc_decode(&handle, &k) != 0) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    /* the exporting process itself cannot open its handle: the real driver answers an
     * invalid context there */
    if (k.pid == (int32_t)getpid()) return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
    uintptr_t p;
    if (sim_legacy_ipc_find_open(&k, &p, Flags)) {
        *pdptr = (CUdeviceptr)p;
        return sim_leave(CUDA_SUCCESS);
    }
    int fd = sim_ipc_reopen(k.pid, k.fd);
    if (fd < 0) return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    struct stat st;
    struct sim_ipc_meta m;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != k.dev || (uint64_t)st.st_ino != k.ino ||
        sim_ipc_read_meta(fd, &m) != 0 || m.kind != SIM_IPC_LEGACY || m.nonce != k.nonce ||
        m.size < k.size || !sim_valid_device(m.device)) {
        close(fd);
        return sim_leave(CUDA_ERROR_INVALID_HANDLE);
    }
    void *map = mmap(NULL, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        close(fd);
        return sim_leave(CUDA_ERROR_MAP_FAILED);
    }
    if (sim_ipc_hold(fd, m.size) != 0 ||
        (rc = sim_legacy_ipc_add_open((uintptr_t)map, &k, &m, fd, Flags)) != CUDA_SUCCESS) {
        munmap(map, m.size);
        close(fd);
        return sim_leave(rc != CUDA_SUCCESS ? rc : CUDA_ERROR_MAP_FAILED);
    }
    *pdptr = (CUdeviceptr)(uintptr_t)map;
    return sim_leave(CUDA_SUCCESS);
}

/* cuda.h, cuIpcCloseMemHandle: decrements the reference count; at 0 the memory is unmapped;
 * "The original allocation in the exporting process as well as imported mappings in other
 * processes will be unaffected". A pointer not from cuIpcOpenMemHandle: INVALID_VALUE. */
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CUresult rc = sim_enter(SIM_cuIpcCloseMemHandle);
    if (rc != CUDA_SUCCESS) return sim_leave(rc);
    return sim_leave(sim_legacy_ipc_close((uintptr_t)dptr));
}

SIM_EXPORT unsigned long gpoolsim_ipc_freed_while_open(void)
{
    sim_lock();
    unsigned long n = sim_ipc_freed_open;
    sim_unlock();
    return n;
}

/* The CUDA 4.1 ABI of cuIpcOpenMemHandle (cudaTypedefs.h, PFN_cuIpcOpenMemHandle_v4010): the
 * same arguments as cuIpcOpenMemHandle_v2. */
SIM_EXPORT CUresult sim_cuIpcOpenMemHandle_v1(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                              unsigned int Flags)
{
    return cuIpcOpenMemHandle(pdptr, handle, Flags);
}
