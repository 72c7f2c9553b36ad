/* ipc_prog.c — CUDA IPC through the drop-in between two real processes (tests/test_preload_ipc.c,
 * docs/ipc.md). Run under LD_PRELOAD=libgpool_preload.so with GPOOL_CONF=ipc=1. Before any CUDA
 * call the program forks its consumers; the producer allocates with cudaMalloc, writes, and
 * sends cudaIpcGetMemHandle's handles over pipes; a consumer opens them with
 * cudaIpcOpenMemHandle (or cuIpcOpenMemHandle), reads, and closes. Linked with the simulator
 * (the driver by name; device pointers are host addresses there) and the cudart stand-in.
 * Usage: ipc_prog MODE; prints key=value lines; exits 0 when the mode's checks hold, 1 when a
 * CHECK fails.
 *   basic     three blocks (1000 B, 3 MiB, 9 MiB + 12345), one handle asked for an interior
 *             pointer: the consumer gets the allocation's base and reads what was written
 *   free_open the producer frees while the consumer has the block open, allocates and writes
 *             again: the consumer still reads the old bytes; after its close the block goes
 *   crash     the consumer dies with the block open: the producer's block is freed anyway
 *   many      8 blocks, 3 consumers
 *   errors    a damaged, a stale and a non-gpool handle: clear errors, nothing mapped
 *   noipc     (GPOOL_CONF without ipc) cudaIpcGetMemHandle answers cudaErrorNotSupported */
#include <cuda.h>
#include <cuda_runtime_api.h>
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

#define DP(p) ((CUdeviceptr)(uintptr_t)(p))

/* msg.op: 0 read, close, answer; 1 read, answer, wait, read, close, answer; 2 read, answer,
 * wait, die; 3 open, answer the code (closes on success) */
static int rd(int fd, void *buf, size_t n)
{
    return io(fd, buf, n, 0);
}
static int wr(int fd, const void *buf, size_t n)
{
    return io(fd, (void *)buf, n, 1);
}

/* ---------- consumer ---------- */

static int consumer(int in, int out)
{
    msg m;
    int rc = 0;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    while (rd(in, &m, sizeof m) == 0) {
        void *p = NULL;
        cudaError_t e = ipc_open(&p, m.h, cudaIpcMemLazyEnablePeerAccess);
        if (m.op == 3) {
            int32_t ans = e;
            wr(out, &ans, sizeof ans);
            if (e == cudaSuccess) ipc_close(p);
            continue;
        }
        CHECK(e == cudaSuccess);
        int32_t ok = same(p, m.bytes, m.seed);
        if (m.op == 1 || m.op == 2) {
            wr(out, &ok, sizeof ok);
            char go;
            CHECK(rd(in, &go, 1) == 0);
            if (m.op == 2) _exit(0); /* dies with the block open, once the owner freed it */
            ok = ok && same(p, m.bytes, m.seed);
        }
        if (!ok) rc = 1;
        CHECK(ipc_close(p) == cudaSuccess);
        CHECK(ipc_close(p) != cudaSuccess); /* closed: not an import any more */
        wr(out, &ok, sizeof ok);
    }
    struct gpoolsim_live live;
    gpoolsim_get_live(&live);
    printf("consumer_mappings=%zu\n", live.mappings);
    fflush(stdout);
    return rc;
}

/* the drop-in answers the requested size for a live block (preload_query.c) */
static int live_block(void *p, size_t requested)
{
    size_t sz = 0;
    CUdeviceptr base = 0;
    return cuMemGetAddressRange(&base, &sz, DP(p)) == CUDA_SUCCESS && base == DP(p) &&
           sz == requested;
}

static int wait_gone(void *p, size_t requested)
{
    for (int i = 0; i < 500 && live_block(p, requested); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return !live_block(p, requested);
}

/* ---------- modes ---------- */

static int mode_basic(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    size_t sizes[] = {1000, 3 * MIB, 9 * MIB + 12345};
    for (int i = 0; i < 3; i++) {
        void *p;
        CHECK(cudaMalloc(&p, sizes[i]) == cudaSuccess);
        fill(p, sizes[i], 11 + (uint32_t)i);
        msg m = {.bytes = sizes[i], .seed = 11 + (uint32_t)i, .op = 0};
        /* an interior pointer: the handle is the allocation's, opened at its base */
        CHECK(ipc_get(&m.h, (char *)p + (i == 2 ? 4096 : 0)) == cudaSuccess);
        CHECK(wr(c.to, &m, sizeof m) == 0);
        int32_t ok = 0;
        CHECK(rd(c.from, &ok, sizeof ok) == 0);
        CHECK(ok);
        CHECK(cudaFree(p) == cudaSuccess);
    }
    /* the driver's names too */
    void *p;
    CHECK(cudaMalloc(&p, 2 * MIB) == cudaSuccess);
    fill(p, 2 * MIB, 77);
    msg m = {.bytes = 2 * MIB, .seed = 77, .op = 0};
    CUipcMemHandle dh;
    CUresult (*cu_get)(CUipcMemHandle *, CUdeviceptr);
    *(void **)&cu_get = fn("cuIpcGetMemHandle");
    CHECK(cu_get(&dh, DP(p)) == CUDA_SUCCESS);
    memcpy(&m.h, &dh, sizeof dh);
    CHECK(wr(c.to, &m, sizeof m) == 0);
    int32_t ok = 0;
    CHECK(rd(c.from, &ok, sizeof ok) == 0 && ok);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(reap(&c) == 0);
    printf("read=4\n");
    return 0;
}

static int mode_free_open(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    size_t n = 3 * MIB + 12345;
    void *p, *q;
    CHECK(cudaMalloc(&p, n) == cudaSuccess);
    fill(p, n, 5);
    msg m = {.bytes = n, .seed = 5, .op = 1};
    CHECK(ipc_get(&m.h, p) == cudaSuccess);
    CHECK(wr(c.to, &m, sizeof m) == 0);
    int32_t ok = 0;
    CHECK(rd(c.from, &ok, sizeof ok) == 0 && ok);
    CHECK(cudaFree(p) == cudaSuccess); /* while the consumer has it open */
    CHECK(cudaMalloc(&q, n) == cudaSuccess);
    printf("reused_before_close=%d\n", q == p);
    fill(q, n, 6);
    CHECK(wr(c.to, "g", 1) == 0);
    CHECK(rd(c.from, &ok, sizeof ok) == 0);
    printf("consumer_read_ok=%d\n", ok);
    CHECK(cudaFree(q) == cudaSuccess);
    CHECK(reap(&c) == 0);
    return 0;
}

static int mode_crash(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    size_t n = 3 * MIB + 12345;
    void *p;
    CHECK(cudaMalloc(&p, n) == cudaSuccess);
    fill(p, n, 9);
    msg m = {.bytes = n, .seed = 9, .op = 2};
    CHECK(ipc_get(&m.h, p) == cudaSuccess);
    CHECK(wr(c.to, &m, sizeof m) == 0);
    int32_t ok = 0;
    CHECK(rd(c.from, &ok, sizeof ok) == 0 && ok);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(live_block(p, n));      /* deferred: the consumer has it open */
    CHECK(wr(c.to, "g", 1) == 0); /* now the consumer dies */
    CHECK(reap(&c) == 0);         /* it exited without closing */
    printf("freed_after_crash=%d\n", wait_gone(p, n));
    return 0;
}

static int mode_many(void)
{
    enum { NC = 3, NB = 8 };
    peer c[NC];
    for (int k = 0; k < NC; k++) {
        c[k] = spawn_consumer(consumer);
        CHECK(c[k].pid > 0);
    }
    void *p[NB];
    size_t sz[NB];
    for (int i = 0; i < NB; i++) {
        sz[i] = i % 3 == 0 ? (size_t)(700 + 32 * i) : (size_t)(i + 1) * MIB + 333;
        CHECK(cudaMalloc(&p[i], sz[i]) == cudaSuccess);
        fill(p[i], sz[i], 50 + (uint32_t)i);
    }
    int good = 0;
    for (int i = 0; i < NB; i++) {
        msg m = {.bytes = sz[i], .seed = 50 + (uint32_t)i, .op = 0};
        CHECK(ipc_get(&m.h, p[i]) == cudaSuccess);
        for (int k = 0; k < NC; k++)
            CHECK(wr(c[k].to, &m, sizeof m) == 0);
        for (int k = 0; k < NC; k++) {
            int32_t ok = 0;
            CHECK(rd(c[k].from, &ok, sizeof ok) == 0);
            good += ok;
        }
    }
    for (int k = 0; k < NC; k++)
        CHECK(reap(&c[k]) == 0);
    for (int i = 0; i < NB; i++)
        CHECK(cudaFree(p[i]) == cudaSuccess);
    printf("reads_ok=%d\n", good);
    return 0;
}

static int mode_errors(void)
{
    peer c = spawn_consumer(consumer);
    CHECK(c.pid > 0);
    void *p;
    CHECK(cudaMalloc(&p, 2 * MIB) == cudaSuccess);
    msg m = {.op = 3};
    CHECK(ipc_get(&m.h, p) == cudaSuccess);
    int32_t code = 0;
    /* damaged: one byte of a gpool handle changed */
    msg bad = m;
    bad.h.reserved[40] ^= 1;
    CHECK(wr(c.to, &bad, sizeof bad) == 0 && rd(c.from, &code, sizeof code) == 0);
    printf("damaged=%d\n", code);
    /* stale: the block was freed with no importer */
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(wr(c.to, &m, sizeof m) == 0 && rd(c.from, &code, sizeof code) == 0);
    printf("stale=%d\n", code);
    /* not gpool's: passes to the runtime (the stand-in has no IPC) */
    memset(&bad.h, 0, sizeof bad.h);
    CHECK(wr(c.to, &bad, sizeof bad) == 0 && rd(c.from, &code, sizeof code) == 0);
    printf("foreign_ok=%d\n", code == cudaSuccess);
    CHECK(reap(&c) == 0);
    return 0;
}

static int mode_noipc(void)
{
    void *p;
    cudaIpcMemHandle_t h;
    CHECK(cudaMalloc(&p, MIB) == cudaSuccess);
    printf("code=%d\n", (int)ipc_get(&h, p));
    CHECK(cudaFree(p) == cudaSuccess);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = !strcmp(mode, "basic")       ? mode_basic()
             : !strcmp(mode, "free_open") ? mode_free_open()
             : !strcmp(mode, "crash")     ? mode_crash()
             : !strcmp(mode, "many")      ? mode_many()
             : !strcmp(mode, "errors")    ? mode_errors()
             : !strcmp(mode, "noipc")     ? mode_noipc()
                                          : 2;
    fflush(stdout);
    return rc;
}
