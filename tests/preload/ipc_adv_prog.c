/* ipc_adv_prog.c — an outsider's checks of CUDA IPC through the drop-in against the CUDA
 * runtime reference (cudaIpcGetMemHandle / cudaIpcOpenMemHandle / cudaIpcCloseMemHandle in
 * cuda_runtime_api.h) and docs/ipc.md (tests/test_preload_ipc_adversarial.c). Run under
 * LD_PRELOAD=libgpool_preload.so with GPOOL_CONF=ipc=1; the program forks its consumer before
 * any CUDA call and passes handles over pipes. Prints key=value lines; exits 0 when the mode's
 * checks hold, 1 when a CHECK fails.
 *   twice  a handle asked for a pointer in the middle of a block, opened twice by one
 *          consumer: the reference says the second open returns the existing pointer and
 *          counts a reference; each close drops one, the memory stays until the last; a close
 *          past the opens fails; flags other than cudaIpcMemLazyEnablePeerAccess are refused;
 *          the same with the driver's cuIpcOpenMemHandle / cuIpcCloseMemHandle
 *   self   the exporting process opens its own handle: an error, nothing mapped
 *   batch  (cudafree=batch, the default) a handle sent after cudaFree, before the batch is
 *          flushed: opens and reads the block's bytes, as docs/ipc.md says
 *   batch_reuse (cudafree=batch) a block freed while open elsewhere, then 40 blocks of its
 *          size allocated and written: none takes its memory
 *   fds    six rounds of allocate, share, open, read, close, free: no round leaves a
 *          descriptor behind in either process
 *   range  cuMemGetAddressRange on an opened pointer (a slab block, a 3 MiB + 1 block): the
 *          allocation's base and size, as for cudaMalloc memory */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../sim/gpool_sim.h"
#include "prog_check.h"
#include "prog_ipc.h"

enum {
    OP_TWICE = 1,
    OP_READ,
    OP_FDS,
    OP_BAD_FLAGS,
    OP_STATUS,
    OP_RANGE,
    OP_DRIVER,
    OP_HOLD,
    OP_BUFID
};

static int32_t fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    int32_t n = 0;
    if (!d) return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---------- consumer ---------- */

/* bits: 1 both opens worked, 2 same pointer, 4 base bytes right, 8 readable after one close,
 * 16 second close worked, 32 a third close failed */
static int32_t open_twice(const msg *m)
{
    void *a = NULL, *b = NULL;
    int32_t bits = 0;
    if (ipc_open(&a, m->h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 0;
    if (ipc_open(&b, m->h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        ipc_close(a);
        return 0;
    }
    bits |= 1;
    if (a == b) bits |= 2;
    if (same(a, m->bytes, m->seed)) bits |= 4;
    if (ipc_close(a) == cudaSuccess && same(b, m->bytes, m->seed)) bits |= 8;
    if (ipc_close(b) == cudaSuccess) bits |= 16;
    if (ipc_close(b) != cudaSuccess) bits |= 32;
    return bits;
}

static int consumer(int in, int out)
{
    msg m;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    while (io(in, &m, sizeof m, 0) == 0) {
        int32_t ans = 0;
        void *p = NULL;
        if (m.op == OP_TWICE) {
            ans = open_twice(&m);
        } else if (m.op == OP_READ) {
            if (ipc_open(&p, m.h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                ans = same(p, m.bytes, m.seed);
                if (ipc_close(p) != cudaSuccess) ans = 0;
            }
        } else if (m.op == OP_RANGE) {
            /* bits: 1 opened, 2 the range's base is the pointer, 4 its size covers the
             * allocation and no more than its block */
            if (ipc_open(&p, m.h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                CUdeviceptr base = 0;
                size_t size = 0;
                ans = 1;
                if (cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)p + 7) ==
                    CUDA_SUCCESS) {
                    if (base == (CUdeviceptr)(uintptr_t)p) ans |= 2;
                    if (size >= m.bytes && size < m.bytes + 2 * MIB) ans |= 4;
                }
                ipc_close(p);
            }
        } else if (m.op == OP_BUFID) {
            /* bits: 1 opened and its BUFFER_ID read, 2 the id differs from the last open's, 4
             * the address is the last open's (what makes bit 2 a check of a stale id) */
            static CUdeviceptr last_p;
            static unsigned long long last_id;
            if (ipc_open(&p, m.h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                unsigned long long id = 0;
                CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p;
                if (cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp) ==
                    CUDA_SUCCESS) {
                    ans = 1;
                    if (!last_p || id != last_id) ans |= 2;
                    if (dp == last_p) ans |= 4;
                    last_p = dp;
                    last_id = id;
                }
                if (ipc_close(p) != cudaSuccess) ans = 0;
            }
        } else if (m.op == OP_DRIVER) {
            /* the driver's forms: bits 1 bad flags refused, 2 both opens, 4 same pointer, 8 two
             * closes, 16 a third close fails */
            CUipcMemHandle dh;
            CUdeviceptr a = 0, b = 0;
            memcpy(&dh, &m.h, sizeof dh);
            if (cuIpcOpenMemHandle(&a, dh, 0x80u) == CUDA_ERROR_INVALID_VALUE) ans |= 1;
            if (cuIpcOpenMemHandle(&a, dh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS &&
                cuIpcOpenMemHandle(&b, dh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS) {
                ans |= 2;
                if (a == b) ans |= 4;
                if (cuIpcCloseMemHandle(a) == CUDA_SUCCESS &&
                    cuIpcCloseMemHandle(b) == CUDA_SUCCESS)
                    ans |= 8;
                if (cuIpcCloseMemHandle(b) != CUDA_SUCCESS) ans |= 16;
            }
        } else if (m.op == OP_HOLD) { /* open, read, answer; on a byte: read, close */
            if (ipc_open(&p, m.h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 1;
            ans = same(p, m.bytes, m.seed);
            char go;
            if (io(out, &ans, sizeof ans, 1) || io(in, &go, 1, 0)) return 1;
            ans = same(p, m.bytes, m.seed);
            if (ipc_close(p) != cudaSuccess) ans = 0;
        } else if (m.op == OP_FDS) {
            ans = fds_open();
        } else if (m.op == OP_BAD_FLAGS || m.op == OP_STATUS) {
            ans = ipc_open(&p, m.h, m.op == OP_BAD_FLAGS ? 0x80u : cudaIpcMemLazyEnablePeerAccess);
            if (ans == cudaSuccess) ipc_close(p);
        }
        if (io(out, &ans, sizeof ans, 1)) return 1;
    }
    return 0;
}

static int32_t ask(peer *c, msg *m)
{
    int32_t ans = -1;
    if (io(c->to, m, sizeof *m, 1) || io(c->from, &ans, sizeof ans, 0)) return -1;
    return ans;
}

/* ---------- modes ---------- */

static int mode_twice(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    void *p;
    CHECK(cudaMalloc(&p, 3 * MIB) == cudaSuccess);
    fill(p, 3 * MIB, 21);
    msg m = {.bytes = 3 * MIB, .seed = 21, .op = OP_TWICE};
    /* asked for a pointer inside the block: the handle is the allocation's */
    CHECK(ipc_get(&m.h, (char *)p + MIB) == cudaSuccess);
    int32_t bits = ask(&c, &m);
    printf("twice_bits=%d\n", bits);
    printf("twice_same_pointer=%d\n", bits > 0 && (bits & 2) ? 1 : 0);
    m.op = OP_BAD_FLAGS;
    printf("bad_flags_code=%d\n", ask(&c, &m));
    m.op = OP_DRIVER;
    printf("driver_bits=%d\n", ask(&c, &m));
    m.op = OP_READ; /* still openable and intact after all that */
    printf("read_after=%d\n", ask(&c, &m));
    CHECK(reap(&c) == 0);
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
}

static int mode_self(void)
{
    void *p, *q = NULL;
    CHECK(cudaMalloc(&p, 2 * MIB) == cudaSuccess);
    cudaIpcMemHandle_t h;
    CHECK(ipc_get(&h, p) == cudaSuccess);
    struct gpoolsim_live before, after;
    gpoolsim_get_live(&before);
    cudaError_t e = ipc_open(&q, h, cudaIpcMemLazyEnablePeerAccess);
    gpoolsim_get_live(&after);
    printf("self_code=%d\n", (int)e);
    printf("self_mapped=%zu\n", after.mappings - before.mappings);
    if (e == cudaSuccess) ipc_close(q);
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
}

static int mode_batch(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    void *p;
    CHECK(cudaMalloc(&p, 2 * MIB) == cudaSuccess);
    fill(p, 2 * MIB, 8);
    msg m = {.bytes = 2 * MIB, .seed = 8, .op = OP_READ};
    CHECK(ipc_get(&m.h, p) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess); /* in the batch: not yet in the pool */
    printf("batch_read=%d\n", ask(&c, &m));
    CHECK(reap(&c) == 0);
    return 0;
}

/* cudafree=batch: the owner frees a block another process has open, then allocates and writes
 * 40 blocks of its size (flushing the batch): none takes its memory, the importer's bytes stay */
static int mode_batch_reuse(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    void *p, *q[40];
    CHECK(cudaMalloc(&p, 2 * MIB) == cudaSuccess);
    fill(p, 2 * MIB, 44);
    msg m = {.bytes = 2 * MIB, .seed = 44, .op = OP_HOLD};
    CHECK(ipc_get(&m.h, p) == cudaSuccess);
    int32_t ans = ask(&c, &m);
    CHECK(ans == 1);
    CHECK(cudaFree(p) == cudaSuccess);
    int reused = 0;
    for (int i = 0; i < 40; i++) {
        CHECK(cudaMalloc(&q[i], 2 * MIB) == cudaSuccess);
        reused += q[i] == p;
        fill(q[i], 2 * MIB, 99);
        if (i % 2) CHECK(cudaFree(q[i]) == cudaSuccess);
    }
    ans = -1;
    CHECK(io(c.to, "g", 1, 1) == 0 && io(c.from, &ans, sizeof ans, 0) == 0);
    printf("reused_while_open=%d\n", reused);
    printf("importer_intact=%d\n", ans);
    for (int i = 0; i < 40; i += 2)
        CHECK(cudaFree(q[i]) == cudaSuccess);
    CHECK(reap(&c) == 0);
    return 0;
}

static int mode_fds(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    int32_t prod[6] = {0}, cons[6] = {0};
    int reads = 0;
    for (int round = 0; round < 6; round++) {
        void *p;
        size_t n = (size_t)(round + 1) * MIB + 777;
        CHECK(cudaMalloc(&p, n) == cudaSuccess);
        fill(p, n, (uint32_t)round);
        msg m = {.bytes = n, .seed = (uint32_t)round, .op = OP_READ};
        CHECK(ipc_get(&m.h, p) == cudaSuccess);
        reads += ask(&c, &m) == 1;
        CHECK(cudaFree(p) == cudaSuccess);
        /* the helper thread ends the open when it sees the close: give it up to 2 s */
        struct timespec ts = {0, 20 * 1000 * 1000}, first = {0, 200 * 1000 * 1000};
        nanosleep(round ? &ts : &first, NULL);
        for (int i = 0; i < 100 && round && fds_open() > prod[0]; i++)
            nanosleep(&ts, NULL);
        msg f = {.op = OP_FDS};
        cons[round] = ask(&c, &f);
        prod[round] = fds_open();
    }
    printf("reads=%d\n", reads);
    printf("producer_fd_growth=%d\n", prod[5] - prod[0]);
    printf("consumer_fd_growth=%d\n", cons[5] - cons[0]);
    CHECK(reap(&c) == 0);
    return 0;
}

static int mode_range(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    size_t sizes[2] = {1000, 3 * MIB + 1};
    void *keep[2];
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMalloc(&keep[i], sizes[i]) == cudaSuccess);
        msg m = {.bytes = sizes[i], .op = OP_RANGE};
        CHECK(ipc_get(&m.h, keep[i]) == cudaSuccess);
        printf("range_bits_%d=%d\n", i, ask(&c, &m));
    }
    CHECK(reap(&c) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(cudaFree(keep[i]) == cudaSuccess);
    return 0;
}

/* Two blocks opened and closed in turn: each open's BUFFER_ID is new (CUDA: an id is never
 * given to another allocation in the process's life), also where an open lands at the
 * address of the one closed before it. */
static int mode_bufid(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    void *b[2];
    msg m[2];
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMalloc(&b[i], 2 * MIB) == cudaSuccess);
        m[i] = (msg){.bytes = 2 * MIB, .op = OP_BUFID};
        CHECK(ipc_get(&m[i].h, b[i]) == cudaSuccess);
    }
    int all = 7, reused = 0; /* bit 4 of all: set here, as it cannot be asked for */
    for (int round = 0; round < 6; round++) {
        int bits = ask(&c, &m[round % 2]);
        if (!(bits & 1) || !(bits & 2)) all = bits;
        if (bits & 4) reused++;
    }
    printf("bufid_bits=%d\nbufid_same_address=%d\n", all, reused);
    CHECK(reap(&c) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(cudaFree(b[i]) == cudaSuccess);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = !strcmp(mode, "twice")         ? mode_twice()
             : !strcmp(mode, "self")        ? mode_self()
             : !strcmp(mode, "batch")       ? mode_batch()
             : !strcmp(mode, "fds")         ? mode_fds()
             : !strcmp(mode, "range")       ? mode_range()
             : !strcmp(mode, "batch_reuse") ? mode_batch_reuse()
             : !strcmp(mode, "bufid")       ? mode_bufid()
                                            : 2;
    fflush(stdout);
    return rc;
}
