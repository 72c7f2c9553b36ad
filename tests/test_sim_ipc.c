/* test_sim_ipc.c — the simulator's CUDA IPC with two real processes: VMM shareable handles
 * (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, cuMemExportToShareableHandle,
 * cuMemImportFromShareableHandle), legacy IPC of cuMemAlloc memory (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle), CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE
 * and the cross-process referee (sim/sim_ipc.c cites the cuda.h doc comments).
 *
 * The second process is this binary run again (fork + exec of the path /proc/self/exe names:
 * under valgrind the link itself is the tool's binary, readlink answers ours) with
 * GPOOLSIM_IPC_PEER naming its part: a constructor runs that part before Criterion starts and
 * exits with 0 or the line of the failed check. It talks to the test over two pipes (lines
 * "R" ready, "G" go, or a value). */
#include <criterion/criterion.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util_sim.h"
#include "util_skip.h"

#define MiB  ((size_t)1 << 20)
#define GRAN (2 * MiB)
#define VSZ  (2 * GRAN) /* one shareable VMM handle */
#define LSZ  ((size_t)300000)

static struct {
    PFN_cuInit_v2000 cuInit;
    PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
    PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
    CUresult (*cuCtxSynchronize)(CUcontext); /* what cuGetProcAddress gives at CUDA 13: _v2 */
    PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
    PFN_cuMemAddressFree_v10020 cuMemAddressFree;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemRelease_v10020 cuMemRelease;
    PFN_cuMemMap_v10020 cuMemMap;
    PFN_cuMemUnmap_v10020 cuMemUnmap;
    PFN_cuMemSetAccess_v10020 cuMemSetAccess;
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 cuMemGetAllocationPropertiesFromHandle;
    PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle;
    PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle;
    PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle;
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemAllocManaged_v6000 cuMemAllocManaged;
    PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
    PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
    PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH;
    PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute;
    PFN_cuIpcGetMemHandle_v4010 cuIpcGetMemHandle;
    PFN_cuIpcOpenMemHandle_v11000 cuIpcOpenMemHandle;
    PFN_cuIpcCloseMemHandle_v4010 cuIpcCloseMemHandle;
    unsigned long (*freed_while_open)(void);
} D;
static const struct sim_api *S;

/* Every entry point through cuGetProcAddress (as cudart finds them): 0, or -1 if one is
 * missing. */
static int load_all(void)
{
    S = sim_api();
    if (!S) return -1;
#define LOAD(name)                                                                                 \
    do {                                                                                           \
        *(void **)&D.name = sim_driver_proc(#name);                                                \
        if (!D.name) return -1;                                                                    \
    } while (0)
    LOAD(cuInit);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxSynchronize);
    LOAD(cuMemAddressReserve);
    LOAD(cuMemAddressFree);
    LOAD(cuMemCreate);
    LOAD(cuMemRelease);
    LOAD(cuMemMap);
    LOAD(cuMemUnmap);
    LOAD(cuMemSetAccess);
    LOAD(cuMemGetAllocationPropertiesFromHandle);
    LOAD(cuMemRetainAllocationHandle);
    LOAD(cuMemExportToShareableHandle);
    LOAD(cuMemImportFromShareableHandle);
    LOAD(cuMemAlloc);
    LOAD(cuMemFree);
    LOAD(cuMemAllocManaged);
    LOAD(cuMemAllocAsync);
    LOAD(cuMemFreeAsync);
    LOAD(cuMemcpyHtoD);
    LOAD(cuMemcpyDtoH);
    LOAD(cuPointerGetAttribute);
    LOAD(cuIpcGetMemHandle);
    LOAD(cuIpcOpenMemHandle);
    LOAD(cuIpcCloseMemHandle);
#undef LOAD
    *(void **)&D.freed_while_open = dlsym(S->lib, "gpoolsim_ipc_freed_while_open");
    return D.freed_while_open ? 0 : -1;
}

static int start_driver(void)
{
    CUcontext ctx;
    if (load_all() != 0 || D.cuInit(0) != CUDA_SUCCESS ||
        D.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static CUmemAllocationProp prop_of(CUmemAllocationHandleType types)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.requestedHandleTypes = types;
    return p;
}

/* Reserve, map and grant device 0 read-write access to handle h of `size` bytes. */
static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t size)
{
    CUdeviceptr va = 0;
    CUmemAccessDesc a = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (D.cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS) return 0;
    if (D.cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS ||
        D.cuMemSetAccess(va, size, &a, 1) != CUDA_SUCCESS) {
        D.cuMemAddressFree(va, size);
        return 0;
    }
    return va;
}

static void unmap(CUdeviceptr va, size_t size)
{
    D.cuMemUnmap(va, size);
    D.cuMemAddressFree(va, size);
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v) return 0;
    return 1;
}

static void hex_encode(const void *p, size_t n, char *out)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static int hex_decode(const char *s, void *p, size_t n)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        b[i] = (unsigned char)v;
    }
    return 0;
}

/* ---- the pipes between the two processes ---- */

static int line_send(int fd, const char *s)
{
    size_t n = strlen(s);
    return write(fd, s, n) == (ssize_t)n && write(fd, "\n", 1) == 1 ? 0 : -1;
}

static int line_recv(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        char c;
        if (read(fd, &c, 1) != 1) return -1;
        if (c == '\n') break;
        buf[len++] = c;
    }
    buf[len] = 0;
    return 0;
}

/* ---- the second process's parts ---- */

#define PCHECK(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "ipc peer: %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
            _exit(__LINE__ % 200 + 10);                                                            \
        }                                                                                          \
    } while (0)

/* "vmm FD KEEP": import FD, check it reads 'A', write 'B', "R"; after "G" check 'B' is still
 * there (the exporter may have released meanwhile), then release (KEEP=0) or exit holding
 * everything (KEEP=1: a crashed importer). */
static int peer_vmm(int in, int out, int fd, int keep)
{
    char buf[256];
    CUmemGenericAllocationHandle h;
    PCHECK(D.cuMemImportFromShareableHandle(
               &h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS);
    close(fd);
    CUmemAllocationProp p;
    PCHECK(D.cuMemGetAllocationPropertiesFromHandle(&p, h) == CUDA_SUCCESS);
    PCHECK(p.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    PCHECK(p.location.type == CU_MEM_LOCATION_TYPE_DEVICE && p.location.id == 0);
    PCHECK(S->bytes_in_use(0) == VSZ); /* counts in the importer */
    CUdeviceptr va = map_rw(h, VSZ);
    PCHECK(va != 0);
    PCHECK(all_bytes((void *)va, VSZ, 'A'));
    memset((void *)va, 'B', VSZ);
    PCHECK(line_send(out, "R") == 0);
    PCHECK(line_recv(in, buf, sizeof buf) == 0 && strcmp(buf, "G") == 0);
    PCHECK(all_bytes((void *)va, VSZ, 'B'));
    if (keep) _exit(0);
    unmap(va, VSZ);
    PCHECK(D.cuMemRelease(h) == CUDA_SUCCESS);
    PCHECK(S->bytes_in_use(0) == 0 && sim_live_total() == 0);
    return 0;
}

/* "legacy HEX KEEP": open the handle, read 'A' through cuMemcpyDtoH, write 'B', "R"; after
 * "G" close (KEEP=0) or exit without closing. */
static int peer_legacy(int in, int out, const char *hex, int keep)
{
    char buf[256];
    CUipcMemHandle ih;
    PCHECK(hex_decode(hex, &ih, sizeof ih) == 0);
    CUdeviceptr p = 0, q = 0;
    PCHECK(D.cuIpcOpenMemHandle(&p, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS);
    /* cuda.h, cuIpcOpenMemHandle: opened again by the same context, the same pointer */
    PCHECK(D.cuIpcOpenMemHandle(&q, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS);
    PCHECK(p == q);
    int capable = -1;
    PCHECK(D.cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) ==
           CUDA_SUCCESS);
    PCHECK(capable == 0);
    PCHECK(D.cuMemFree(p) == CUDA_ERROR_INVALID_VALUE); /* not this process's cuMemAlloc */
    PCHECK(D.cuIpcGetMemHandle(&ih, p) == CUDA_ERROR_INVALID_VALUE);
    unsigned char *host = malloc(LSZ);
    PCHECK(host != NULL);
    PCHECK(D.cuMemcpyDtoH(host, p, LSZ) == CUDA_SUCCESS);
    PCHECK(all_bytes(host, LSZ, 'A'));
    memset(host, 'B', LSZ);
    PCHECK(D.cuMemcpyHtoD(p, host, LSZ) == CUDA_SUCCESS);
    /* a copy from pageable memory may return before its DMA is done (cuda.h, API sync
     * behavior): the referee wants it known complete before the close */
    PCHECK(D.cuCtxSynchronize(NULL) == CUDA_SUCCESS);
    PCHECK(line_send(out, "R") == 0);
    PCHECK(line_recv(in, buf, sizeof buf) == 0 && strcmp(buf, "G") == 0);
    free(host);
    if (keep) _exit(0);
    PCHECK(D.cuIpcCloseMemHandle(p) == CUDA_SUCCESS); /* count 2 -> 1: still mapped */
    PCHECK(all_bytes((void *)p, LSZ, 'B'));
    PCHECK(D.cuIpcCloseMemHandle(p) == CUDA_SUCCESS);
    PCHECK(D.cuIpcCloseMemHandle(p) == CUDA_ERROR_INVALID_VALUE); /* closed */
    PCHECK(sim_live_total() == 0);
    return 0;
}

/* "export MODE": the exporter side of legacy IPC in this process: cuMemAlloc, fill 'A',
 * send the handle. MODE dev1: on device 1, then wait for "G"; exit: exit at once; free: free first,
 * then send the handle and wait for "G"; freeopen: wait for "R" (the other side opened it), free,
 * send the violation and freed-while-open counts, wait for "G". */
static int peer_export(int in, int out, const char *mode)
{
    char buf[256], hex[2 * CU_IPC_HANDLE_SIZE + 1];
    CUdeviceptr p;
    CUipcMemHandle ih;
    if (strcmp(mode, "dev1") == 0) { /* the memory of device 1 */
        CUcontext c1;
        PCHECK(D.cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
        PCHECK(D.cuCtxSetCurrent(c1) == CUDA_SUCCESS);
    }
    PCHECK(D.cuMemAlloc(&p, LSZ) == CUDA_SUCCESS);
    memset((void *)p, 'A', LSZ);
    PCHECK(D.cuIpcGetMemHandle(&ih, p) == CUDA_SUCCESS);
    hex_encode(&ih, sizeof ih, hex);
    if (strcmp(mode, "free") == 0) PCHECK(D.cuMemFree(p) == CUDA_SUCCESS);
    PCHECK(line_send(out, hex) == 0);
    if (strcmp(mode, "exit") == 0) _exit(0);
    if (strcmp(mode, "freeopen") == 0) {
        PCHECK(line_recv(in, buf, sizeof buf) == 0 && strcmp(buf, "R") == 0);
        PCHECK(D.cuMemFree(p) == CUDA_SUCCESS);
        snprintf(buf, sizeof buf, "%lu %lu", S->violations(), D.freed_while_open());
        PCHECK(line_send(out, buf) == 0);
    }
    PCHECK(line_recv(in, buf, sizeof buf) == 0 && strcmp(buf, "G") == 0);
    return 0;
}

/* One descriptor over a Unix-domain socket (SCM_RIGHTS): 0, or -1. */
static int fd_send(int sock, int fd)
{
    char byte = 'F';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int fd_recv(int sock)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (recvmsg(sock, &msg, 0) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static int peer_run(const char *cmd, int in, int out)
{
    char what[32], arg[160];
    int n = 0;
    if (sscanf(cmd, "%31s %159s %d", what, arg, &n) < 2) return 2;
    if (start_driver() != 0) return 3;
    if (strcmp(what, "vmm") == 0) return peer_vmm(in, out, atoi(arg), n);
    if (strcmp(what, "vmmsock") == 0) { /* the descriptor comes later, over a socket */
        int fd = fd_recv(atoi(arg));
        PCHECK(fd >= 0);
        return peer_vmm(in, out, fd, n);
    }
    if (strcmp(what, "legacy") == 0) return peer_legacy(in, out, arg, n);
    if (strcmp(what, "export") == 0) return peer_export(in, out, arg);
    return 4;
}

__attribute__((constructor)) static void ipc_peer_main(void)
{
    const char *cmd = getenv("GPOOLSIM_IPC_PEER");
    if (!cmd) return;
    int in = atoi(getenv("GPOOLSIM_IPC_IN")), out = atoi(getenv("GPOOLSIM_IPC_OUT"));
    int rc = peer_run(cmd, in, out);
    fflush(NULL);
    _exit(rc);
}

/* ---- the test's side ---- */

struct peer {
    pid_t pid;
    int to, from;
};

/* Start the second process on part `cmd`; strict: its GPOOL_SIM_STRICT ("0", "1"). */
static void peer_start(struct peer *pr, const char *cmd, const char *strict)
{
    int a[2], b[2];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0 && n < (ssize_t)sizeof self - 1);
    self[n] = '\0';
    cr_assert_eq(pipe(a), 0);
    cr_assert_eq(pipe(b), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char v[16];
        close(a[1]);
        close(b[0]);
        setenv("GPOOLSIM_IPC_PEER", cmd, 1);
        snprintf(v, sizeof v, "%d", a[0]);
        setenv("GPOOLSIM_IPC_IN", v, 1);
        snprintf(v, sizeof v, "%d", b[1]);
        setenv("GPOOLSIM_IPC_OUT", v, 1);
        if (strict) setenv("GPOOL_SIM_STRICT", strict, 1);
        execl(self, "test_sim_ipc-peer", (char *)NULL);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    pr->pid = pid;
    pr->to = a[1];
    pr->from = b[0];
}

static void peer_expect(struct peer *pr, const char *want)
{
    char buf[256];
    cr_assert_eq(line_recv(pr->from, buf, sizeof buf), 0, "peer gave no line (wanted %s)", want);
    cr_assert_str_eq(buf, want);
}

/* Wait for the peer: its wait status. */
static int peer_wait(struct peer *pr)
{
    int st = 0;
    close(pr->to);
    close(pr->from);
    cr_assert_eq(waitpid(pr->pid, &st, 0), pr->pid);
    return st;
}

static void peer_ok(struct peer *pr)
{
    int st = peer_wait(pr);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer failed: status %#x", st);
}

static void setup(void)
{
    NEED_SIM();
    setenv("GPOOL_SIM_DEVICES", "2", 1); /* read when the simulator loads: here and in peers */
    cr_assert_eq(start_driver(), 0, "GPOOL_LIBCUDA must name the simulated driver");
}

static void assert_clean(void)
{
    cr_assert_eq(sim_live_total(), 0);
    cr_assert_eq(S->bytes_in_use(0), 0);
}

/* A shareable handle of VSZ bytes mapped read-write at *va, filled with 'A', exported as *fd. */
static void vmm_exported(CUmemGenericAllocationHandle *h, CUdeviceptr *va, int *fd)
{
    CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    cr_assert_eq(D.cuMemCreate(h, VSZ, &p, 0), CUDA_SUCCESS);
    *va = map_rw(*h, VSZ);
    cr_assert_neq(*va, 0);
    memset((void *)*va, 'A', VSZ);
    *fd = -1;
    cr_assert_eq(
        D.cuMemExportToShareableHandle(fd, *h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_SUCCESS);
    cr_assert_geq(*fd, 0);
}

/* Start the peer on "vmm FD KEEP" (FD is closed here once the peer has it) and wait for its "R". */
static void peer_vmm_ready(struct peer *pr, int fd, int keep)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "vmm %d %d", fd, keep);
    peer_start(pr, cmd, NULL);
    close(fd);
    peer_expect(pr, "R");
}

/* Legacy IPC of LSZ bytes of cuMemAlloc memory filled with 'A': its handle as hex in hex. */
static CUdeviceptr legacy_exported(char hex[2 * CU_IPC_HANDLE_SIZE + 1])
{
    CUdeviceptr p;
    cr_assert_eq(D.cuMemAlloc(&p, LSZ), CUDA_SUCCESS);
    memset((void *)p, 'A', LSZ);
    CUipcMemHandle ih;
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, p), CUDA_SUCCESS);
    hex_encode(&ih, sizeof ih, hex);
    return p;
}

/* Start the peer on "legacy HEX KEEP" and wait for its "R". */
static void peer_legacy_ready(struct peer *pr, const char *hex, int keep)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "legacy %s %d", hex, keep);
    peer_start(pr, cmd, NULL);
    peer_expect(pr, "R");
}

TestSuite(sim_ipc, .init = setup, .timeout = 60);

/* A shareable handle, written here, read and rewritten by the importer, read back here: the
 * same physical bytes in two processes (cuMemImportFromShareableHandle + cuMemMap). */
Test(sim_ipc, vmm_content_both_ways)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    int fd;
    vmm_exported(&h, &va, &fd);
    CUmemAllocationProp got;
    cr_assert_eq(D.cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
    cr_assert_eq(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    struct peer pr;
    peer_vmm_ready(&pr, fd, 0);
    cr_assert(all_bytes((void *)va, VSZ, 'B'), "the importer's writes are seen here");
    /* cuMemRetainAllocationHandle keeps working on a shareable mapping */
    CUmemGenericAllocationHandle r;
    cr_assert_eq(D.cuMemRetainAllocationHandle(&r, (void *)va), CUDA_SUCCESS);
    cr_assert_eq(r, h);
    cr_assert_eq(D.cuMemRelease(r), CUDA_SUCCESS);
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    cr_assert(all_bytes((void *)va, VSZ, 'B'));
    unmap(va, VSZ);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0, "the importer had closed");
    assert_clean();
}

/* Exporting needs the type at cuMemCreate; types the simulator has not are refused. */
Test(sim_ipc, vmm_export_needs_the_handle_type)
{
    CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle h;
    int fd = -1;
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(
        D.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fd, -1);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);

    p = prop_of(CU_MEM_HANDLE_TYPE_FABRIC);
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_NOT_SUPPORTED);
    p = prop_of(CU_MEM_HANDLE_TYPE_WIN32);
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_ERROR_NOT_SUPPORTED);

    p = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(
        D.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
        CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(
        D.cuMemExportToShareableHandle(NULL, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    assert_clean();
}

/* A closed descriptor, one that is no shareable memory, a forged file: errors, nothing made. */
Test(sim_ipc, vmm_import_of_closed_or_forged_descriptors_fails)
{
    CUmemGenericAllocationHandle h = 0;
    const CUmemAllocationHandleType T = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    int fd = -1;
    CUmemAllocationProp p = prop_of(T);
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemExportToShareableHandle(&fd, h, T, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(close(fd), 0); /* a closed descriptor */
    struct gpoolsim_live before;
    S->get_live(&before);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, T),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)-1, T),
                 CUDA_ERROR_INVALID_VALUE);
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)pp[0], T),
                 CUDA_ERROR_INVALID_VALUE);
    close(pp[0]);
    close(pp[1]);
    int forged = memfd_create("forged", 0);
    cr_assert_geq(forged, 0);
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    cr_assert_eq(ftruncate(forged, (off_t)(GRAN + 4096)), 0);
    cr_assert_eq(pwrite(forged, junk, sizeof junk, (off_t)GRAN - 4096), (ssize_t)sizeof junk);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)forged, T),
                 CUDA_ERROR_INVALID_VALUE);
    close(forged);
    cr_assert_eq(
        D.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)0, CU_MEM_HANDLE_TYPE_FABRIC),
        CUDA_ERROR_NOT_SUPPORTED);
    struct gpoolsim_live after;
    S->get_live(&after);
    cr_assert_eq(after.handles, before.handles, "nothing imported");
    cr_assert_eq(after.mappings, before.mappings, "nothing mapped");
    assert_clean();
}

/* The owner releases and unmaps while the importer maps: the bytes stay for the importer
 * (cuda.h, cuMemExportToShareableHandle: memory is released once all shareable handles are
 * closed and the allocation is released), the owner's accounting returns, and the referee
 * counts the free (gpoolsim_ipc_freed_while_open). */
Test(sim_ipc, vmm_owner_releases_while_imported)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    int fd;
    vmm_exported(&h, &va, &fd);
    struct peer pr;
    peer_vmm_ready(&pr, fd, 0);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0, "still mapped here: nothing freed yet");
    unmap(va, VSZ);
    cr_assert_eq(D.freed_while_open(), 1);
    assert_clean();
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr); /* it read its bytes after the owner's free */
}

/* The importer dies holding the handle and its mapping: nothing stays counted in the owner,
 * whose free is then not reported (the kernel dropped the importer's lock). */
Test(sim_ipc, vmm_importer_exits_without_closing)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    int fd;
    vmm_exported(&h, &va, &fd);
    struct peer pr;
    peer_vmm_ready(&pr, fd, 1);
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    cr_assert(all_bytes((void *)va, VSZ, 'B'));
    unmap(va, VSZ);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0);
    assert_clean();
}

/* Legacy IPC: cuMemAlloc memory written here (before its first handle: the bytes move with
 * it), opened, read, rewritten and closed by the other process, read back here. */
Test(sim_ipc, legacy_open_read_close)
{
    char hex[2 * CU_IPC_HANDLE_SIZE + 1], again_hex[sizeof hex];
    CUdeviceptr p = legacy_exported(hex);
    CUipcMemHandle again;
    cr_assert_eq(D.cuIpcGetMemHandle(&again, p), CUDA_SUCCESS);
    hex_encode(&again, sizeof again, again_hex);
    cr_assert_str_eq(hex, again_hex, "the same handle each time");
    cr_assert(all_bytes((void *)p, LSZ, 'A'), "the bytes moved with the allocation");
    struct peer pr;
    peer_legacy_ready(&pr, hex, 0);
    unsigned char *host = malloc(LSZ);
    cr_assert_not_null(host);
    cr_assert_eq(D.cuMemcpyDtoH(host, p, LSZ), CUDA_SUCCESS);
    cr_assert(all_bytes(host, LSZ, 'B'), "the importer's writes are seen here");
    free(host);
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    cr_assert_eq(D.cuMemFree(p), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0);
    cr_assert_eq(S->violations(), 0);
    assert_clean();
}

/* The importer exits with the handle open: the owner's free afterwards is clean. */
Test(sim_ipc, legacy_importer_exits_without_closing)
{
    char hex[2 * CU_IPC_HANDLE_SIZE + 1];
    CUdeviceptr p = legacy_exported(hex);
    struct peer pr;
    peer_legacy_ready(&pr, hex, 1);
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    cr_assert_eq(D.cuMemFree(p), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0);
    cr_assert_eq(S->violations(), 0);
    assert_clean();
}

/* cuda.h, cuIpcOpenMemHandle: "Calling cuMemFree on an exported memory region before calling
 * cuIpcCloseMemHandle in the importing context will result in undefined behavior": the
 * exporter's referee reports it (a violation, counted) and the importer's bytes stay; under
 * GPOOL_SIM_STRICT=1 the exporter aborts there. */
Test(sim_ipc, legacy_free_while_open_is_a_violation)
{
    struct peer pr;
    char hex[256], buf[256];
    peer_start(&pr, "export freeopen", "0");
    cr_assert_eq(line_recv(pr.from, hex, sizeof hex), 0);
    CUipcMemHandle ih;
    cr_assert_eq(hex_decode(hex, &ih, sizeof ih), 0);
    CUdeviceptr p;
    cr_assert_eq(D.cuIpcOpenMemHandle(&p, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
    cr_assert_eq(line_send(pr.to, "R"), 0);
    cr_assert_eq(line_recv(pr.from, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "1 1", "violations and frees while open in the exporter");
    cr_assert(all_bytes((void *)p, LSZ, 'A'), "the bytes stay while opened here");
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    cr_assert(all_bytes((void *)p, LSZ, 'A'), "and after the exporter exited");
    cr_assert_eq(D.cuIpcCloseMemHandle(p), CUDA_SUCCESS);
    assert_clean();

    peer_start(&pr, "export freeopen", "1");
    cr_assert_eq(line_recv(pr.from, hex, sizeof hex), 0);
    cr_assert_eq(hex_decode(hex, &ih, sizeof ih), 0);
    cr_assert_eq(D.cuIpcOpenMemHandle(&p, ih, 0), CUDA_SUCCESS);
    cr_assert_eq(line_send(pr.to, "R"), 0);
    int st = peer_wait(&pr);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "strict: aborted (status %#x)", st);
    cr_assert_eq(D.cuIpcCloseMemHandle(p), CUDA_SUCCESS);
    assert_clean();
}

/* Handles that name nothing: of the process itself, forged, of freed memory, of a process
 * that exited; and the calls that take only cuMemAlloc memory or opened pointers. */
Test(sim_ipc, legacy_bad_handles_and_pointers)
{
    CUdeviceptr p, q = 0;
    CUipcMemHandle ih;
    cr_assert_eq(D.cuMemAlloc(&p, LSZ), CUDA_SUCCESS);
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, p + 256), CUDA_ERROR_INVALID_VALUE, "not the base");
    cr_assert_eq(D.cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, p), CUDA_SUCCESS);
    cr_assert_eq(D.cuIpcOpenMemHandle(&q, ih, 0), CUDA_ERROR_INVALID_CONTEXT, "its own handle");
    cr_assert_eq(D.cuIpcOpenMemHandle(&q, ih, 2), CUDA_ERROR_INVALID_VALUE, "unknown flag");
    cr_assert_eq(D.cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_VALUE, "not opened");
    cr_assert_eq(D.cuMemFree(p), CUDA_SUCCESS);

    CUipcMemHandle junk;
    for (size_t i = 0; i < sizeof junk.reserved; i++)
        junk.reserved[i] = (char)(i * 37 + 11);
    cr_assert_eq(D.cuIpcOpenMemHandle(&q, junk, 0), CUDA_ERROR_INVALID_HANDLE, "forged");

    /* VMM memory is no legacy IPC memory */
    CUmemAllocationProp prop = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va = map_rw(h, GRAN);
    cr_assert_neq(va, 0);
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, va), CUDA_ERROR_INVALID_VALUE);
    unmap(va, GRAN);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);

    char hex[256];
    struct peer pr;
    peer_start(&pr, "export free", NULL); /* a handle of memory freed since */
    cr_assert_eq(line_recv(pr.from, hex, sizeof hex), 0);
    cr_assert_eq(hex_decode(hex, &ih, sizeof ih), 0);
    cr_assert_eq(D.cuIpcOpenMemHandle(&q, ih, 0), CUDA_ERROR_INVALID_HANDLE, "stale");
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);

    peer_start(&pr, "export exit", NULL); /* a handle of a process that is gone */
    cr_assert_eq(line_recv(pr.from, hex, sizeof hex), 0);
    peer_ok(&pr);
    cr_assert_eq(hex_decode(hex, &ih, sizeof ih), 0);
    cr_assert_eq(D.cuIpcOpenMemHandle(&q, ih, 0), CUDA_ERROR_INVALID_HANDLE, "exporter gone");
    cr_assert_eq(q, 0);
    assert_clean();
}

/* cuda.h, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: "suitable for cudaIpcGetMemHandle":
 * cuMemAlloc memory (interior pointers too) yes; VMM, managed and pool memory no. (The
 * importer's mapping: no, legacy_open_read_close's second process checks it.) */
Test(sim_ipc, is_legacy_cuda_ipc_capable_both_ways)
{
    int v = -1;
    const CUpointer_attribute A = CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE;
    CUdeviceptr p, m, a;
    cr_assert_eq(D.cuMemAlloc(&p, LSZ), CUDA_SUCCESS);
    cr_assert_eq(D.cuPointerGetAttribute(&v, A, p), CUDA_SUCCESS);
    cr_assert_eq(v, 1);
    cr_assert_eq(D.cuPointerGetAttribute(&v, A, p + 1000), CUDA_SUCCESS);
    cr_assert_eq(v, 1);
    cr_assert_eq(D.cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    cr_assert_eq(D.cuPointerGetAttribute(&v, A, m), CUDA_SUCCESS);
    cr_assert_eq(v, 0);
    CUipcMemHandle ih;
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, m), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemAllocAsync(&a, 4096, NULL), CUDA_SUCCESS);
    cr_assert_eq(D.cuPointerGetAttribute(&v, A, a), CUDA_SUCCESS);
    cr_assert_eq(v, 0);
    cr_assert_eq(D.cuIpcGetMemHandle(&ih, a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(D.cuMemFreeAsync(a, NULL), CUDA_SUCCESS);

    CUmemAllocationProp prop = prop_of(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va = map_rw(h, GRAN);
    cr_assert_neq(va, 0);
    v = -1;
    cr_assert_eq(D.cuPointerGetAttribute(&v, A, va), CUDA_SUCCESS);
    cr_assert_eq(v, 0);
    unmap(va, GRAN);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(m), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemFree(p), CUDA_SUCCESS);
    assert_clean();
}

/* cuda.h, cuIpcOpenMemHandle: another device's memory is reached from this context only with
 * peer access; CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS enables it "as if the user called
 * cuCtxEnablePeerAccess" (the simulator: for that mapping), where the devices can be peers. */
Test(sim_ipc, legacy_lazy_peer_access_for_another_device)
{
    int (*set_peer_capable)(int, int, int);
    *(void **)&set_peer_capable = dlsym(S->lib, "gpoolsim_set_peer_capable");
    cr_assert_not_null(set_peer_capable);
    struct peer pr;
    char hex[256];
    peer_start(&pr, "export dev1", NULL);
    cr_assert_eq(line_recv(pr.from, hex, sizeof hex), 0);
    CUipcMemHandle ih;
    cr_assert_eq(hex_decode(hex, &ih, sizeof ih), 0);
    unsigned char *host = malloc(LSZ);
    cr_assert_not_null(host);
    CUdeviceptr p;
    int dev = -1;
    cr_assert_eq(D.cuIpcOpenMemHandle(&p, ih, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p),
                 CUDA_SUCCESS);
    cr_assert_eq(dev, 1, "the exporter's device");
    cr_assert_eq(D.cuMemcpyDtoH(host, p, LSZ), CUDA_ERROR_ILLEGAL_ADDRESS, "no peer access");
    cr_assert_eq(D.cuIpcCloseMemHandle(p), CUDA_SUCCESS);
    cr_assert_eq(D.cuIpcOpenMemHandle(&p, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemcpyDtoH(host, p, LSZ), CUDA_SUCCESS);
    cr_assert(all_bytes(host, LSZ, 'A'));
    cr_assert_eq(set_peer_capable(0, 1, 0), 0);
    cr_assert_eq(D.cuMemcpyDtoH(host, p, LSZ), CUDA_ERROR_ILLEGAL_ADDRESS, "not peer capable");
    cr_assert_eq(D.cuIpcCloseMemHandle(p), CUDA_SUCCESS);
    free(host);
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    assert_clean();
}

/* cudart finds driver entry points through cuGetProcAddress: every new one is there, and
 * cuIpcOpenMemHandle has both its ABIs (cudaTypedefs.h: _v4010 and _v11000). */
Test(sim_ipc, entry_points_through_cuGetProcAddress)
{
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    *(void **)&gpa = dlsym(S->lib, "cuGetProcAddress_v2");
    cr_assert_not_null(gpa);
    const char *names[] = {"cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
                           "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *fn = NULL;
        cr_assert_eq(gpa(names[i], &fn, 13000, 0, NULL), CUDA_SUCCESS, "%s", names[i]);
        cr_assert_not_null(fn, "%s", names[i]);
    }
    void *v1 = NULL, *v2 = NULL;
    cr_assert_eq(gpa("cuIpcOpenMemHandle", &v1, 4010, 0, NULL), CUDA_SUCCESS);
    cr_assert_eq(gpa("cuIpcOpenMemHandle", &v2, 11000, 0, NULL), CUDA_SUCCESS);
    cr_assert_eq(v1, dlsym(S->lib, "cuIpcOpenMemHandle"));
    cr_assert_eq(v2, dlsym(S->lib, "cuIpcOpenMemHandle_v2"));
    cr_assert_eq(gpa("cuIpcOpenMemHandle", &v1, 4000, 0, NULL), CUDA_ERROR_NOT_FOUND);
}

/* The descriptor reaches a process that is already running over a Unix-domain socket
 * (SCM_RIGHTS), as a C API's helper thread passes it: no inheritance needed. */
Test(sim_ipc, vmm_descriptor_passed_over_a_socket)
{
    CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h;
    cr_assert_eq(D.cuMemCreate(&h, VSZ, &p, 0), CUDA_SUCCESS);
    CUdeviceptr va = map_rw(h, VSZ);
    cr_assert_neq(va, 0);
    memset((void *)va, 'A', VSZ);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "vmmsock %d 0", sv[1]);
    struct peer pr;
    peer_start(&pr, cmd, NULL);
    close(sv[1]);
    int fd = -1;
    cr_assert_eq(
        D.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_SUCCESS); /* made after the peer started: it cannot have inherited it */
    cr_assert_eq(fd_send(sv[0], fd), 0);
    close(fd);
    close(sv[0]);
    peer_expect(&pr, "R");
    cr_assert(all_bytes((void *)va, VSZ, 'B'));
    cr_assert_eq(line_send(pr.to, "G"), 0);
    peer_ok(&pr);
    unmap(va, VSZ);
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 0);
    assert_clean();
}

/* Two imports in one process are two handles of the same bytes; each counts; the owner's
 * free while one is held is counted (an importer holds the memory, this process or another). */
Test(sim_ipc, vmm_two_imports_alias_the_same_bytes)
{
    const CUmemAllocationHandleType T = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemAllocationProp p = prop_of(T);
    CUmemGenericAllocationHandle h, i1, i2;
    int fd = -1;
    cr_assert_eq(D.cuMemCreate(&h, GRAN, &p, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemExportToShareableHandle(&fd, h, T, 0), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&i1, (void *)(intptr_t)fd, T), CUDA_SUCCESS);
    cr_assert_eq(D.cuMemImportFromShareableHandle(&i2, (void *)(intptr_t)fd, T), CUDA_SUCCESS);
    close(fd);
    cr_assert_neq(i1, i2);
    cr_assert_eq(S->bytes_in_use(0), 3 * GRAN);
    CUdeviceptr a = map_rw(i1, GRAN), b = map_rw(i2, GRAN);
    cr_assert(a && b && a != b);
    memset((void *)a, 'Q', GRAN);
    cr_assert(all_bytes((void *)b, GRAN, 'Q'));
    cr_assert_eq(D.cuMemRelease(h), CUDA_SUCCESS);
    cr_assert_eq(D.freed_while_open(), 1);
    cr_assert(all_bytes((void *)b, GRAN, 'Q'), "the importers keep the bytes");
    unmap(a, GRAN);
    cr_assert_eq(D.cuMemRelease(i1), CUDA_SUCCESS);
    unmap(b, GRAN);
    cr_assert_eq(D.cuMemRelease(i2), CUDA_SUCCESS);
    assert_clean();
}
