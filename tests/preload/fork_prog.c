/* fork_prog.c — fork() and GPOOL_TRACE under the interposer (tests/test_preload_fork.c). Reaches
 * the driver as driver_prog does (dlopen $GPOOL_LIBCUDA, cuGetProcAddress) and the runtime
 * through the cudart stand-in it is linked with. Every child arms alarm(): a child that hangs
 * dies of SIGALRM and is counted, never waited for forever.
 * Usage: fork_prog MODE [N]; prints key=value words, exits 0 unless its setup fails. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog_driver.h"

enum { CHILD_ALARM_S = 5, MIB = 1 << 20 };

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*ctx_set)(CUcontext);
static CUresult (*dev_get)(CUdevice *, int);
static CUresult (*retain)(CUcontext *, CUdevice);

/* Make device dev's primary context current. */
static int use_device(int dev)
{
    CUdevice d;
    CUcontext ctx;
    CHECK(dev_get(&d, dev) == CUDA_SUCCESS && retain(&ctx, d) == CUDA_SUCCESS);
    CHECK(ctx_set(ctx) == CUDA_SUCCESS);
    return 0;
}

static int setup(void)
{
    CHECK(prog_driver_open() == 0);
    CUresult (*init)(unsigned);
    *(void **)&init = prog_proc("cuInit");
    *(void **)&mem_alloc = prog_proc("cuMemAlloc");
    *(void **)&mem_free = prog_proc("cuMemFree");
    *(void **)&ctx_set = prog_proc("cuCtxSetCurrent");
    *(void **)&dev_get = prog_proc("cuDeviceGet");
    *(void **)&retain = prog_proc("cuDevicePrimaryCtxRetain");
    CHECK(init && mem_alloc && mem_free && ctx_set && dev_get && retain);
    CHECK(init(0) == CUDA_SUCCESS);
    return use_device(0);
}

/* One line on stdout with write() (a child must not flush the parent's stdio buffer). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && write(1, line, (size_t)n) < 0) _exit(9);
}

/* ---------------- a thread inside gpool's calls while the main thread forks ---------------- */

static atomic_int stop;

static void *churn(void *arg)
{
    (void)arg;
    use_device(0);
    CUdeviceptr p[8] = {0};
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        unsigned k = i % 8;
        if (p[k]) mem_free(p[k]);
        p[k] = 0;
        /* large and small sizes: the arena locks, not only the thread cache */
        if (mem_alloc(&p[k], (size_t)(1 + i % 5) * MIB + (i % 3) * 4096) != CUDA_SUCCESS) p[k] = 0;
    }
    for (unsigned k = 0; k < 8; k++)
        if (p[k]) mem_free(p[k]);
    return NULL;
}

/* How each child ended: 0 CUDA's answer (NOT_INITIALIZED), 2 got a block, 3 another code,
 * SIGALRM: hung. */
struct tally {
    int children, not_initialized, success, other, hung;
};

static void wait_child(pid_t pid, struct tally *t)
{
    int st = 0;
    t->children++;
    if (waitpid(pid, &st, 0) != pid || (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM))
        t->hung++;
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        t->not_initialized++;
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
        t->success++;
    else
        t->other++;
}

/* Driver calls in a child forked while another thread allocates: CUDA_ERROR_NOT_INITIALIZED
 * for cuMemAlloc and for cuMemFree of the parent's block, no hang; the parent goes on. */
static int child_driver(int forks)
{
    CHECK(setup() == 0);
    CUdeviceptr mine;
    CHECK(mem_alloc(&mine, MIB) == CUDA_SUCCESS);
    CHECK(mem_free(mine) == CUDA_SUCCESS); /* cached in the parent's pool */
    CUdeviceptr held;
    CHECK(mem_alloc(&held, 2 * MIB) == CUDA_SUCCESS);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, churn, NULL) == 0);
    struct tally t = {0};
    for (int i = 0; i < forks; i++) {
        usleep(200);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(CHILD_ALARM_S);
            CUdeviceptr p = 0;
            CUresult a = mem_alloc(&p, MIB);
            CUresult f = mem_free(held);
            /* cuGetProcAddress needs no initialisation: it answers in a child too */
            void *fn = prog_proc("cuMemAlloc");
            if (i == 0)
                say("child_alloc=%d child_free=%d child_getproc=%s\n", (int)a, (int)f,
                    fn ? "ok" : "failed");
            _exit(a == CUDA_ERROR_NOT_INITIALIZED && f == CUDA_ERROR_NOT_INITIALIZED && fn ? 0
                  : a == CUDA_SUCCESS                                                      ? 2
                                                                                           : 3);
        }
        wait_child(pid, &t);
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    CUdeviceptr after;
    int parent_ok = mem_alloc(&after, 3 * MIB) == CUDA_SUCCESS && mem_free(after) == CUDA_SUCCESS &&
                    mem_free(held) == CUDA_SUCCESS;
    say("children=%d not_initialized=%d success=%d other=%d hung=%d parent_ok=%d\n", t.children,
        t.not_initialized, t.success, t.other, t.hung, parent_ok);
    return 0;
}

/* Runtime calls in a child: cudaErrorInitializationError, nothing reaches the stand-in. */
static int child_runtime(int forks)
{
    void *held = NULL;
    CHECK(cudaMalloc(&held, MIB) == cudaSuccess && held);
    struct tally t = {0};
    for (int i = 0; i < forks; i++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(CHILD_ALARM_S);
            void *p = NULL;
            cudaError_t a = cudaMalloc(&p, MIB), f = cudaFree(held);
            if (i == 0) say("child_malloc=%d child_free=%d\n", (int)a, (int)f);
            _exit(a == cudaErrorInitializationError && f == cudaErrorInitializationError ? 0
                  : a == cudaSuccess                                                     ? 2
                                                                                         : 3);
        }
        wait_child(pid, &t);
    }
    void *after = NULL;
    int parent_ok = cudaMalloc(&after, MIB) == cudaSuccess && cudaFree(after) == cudaSuccess &&
                    cudaFree(held) == cudaSuccess;
    say("children=%d not_initialized=%d success=%d other=%d hung=%d parent_ok=%d\n", t.children,
        t.not_initialized, t.success, t.other, t.hung, parent_ok);
    return 0;
}

/* ---------------- GPOOL_TRACE ---------------- */

/* n allocate/free pairs on the current device: 2n trace rows. */
static int pairs(int n)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        CHECK(mem_alloc(&p, (size_t)(1 + i % 7) * 4096 + (i % 2) * MIB) == CUDA_SUCCESS);
        CHECK(mem_free(p) == CUDA_SUCCESS);
    }
    return 0;
}

static int trace_rows(int n)
{
    CHECK(setup() == 0);
    CHECK(pairs(n) == 0);
    say("rows=%d\n", 2 * n);
    return 0;
}

/* n pairs on device 0, then n on device 1 (GPOOL_SIM_DEVICES=2): one pool per device. */
static int trace_devices(int n)
{
    CHECK(setup() == 0);
    CHECK(pairs(n) == 0);
    CHECK(use_device(1) == 0);
    CHECK(pairs(n) == 0);
    say("rows=%d\n", 4 * n);
    return 0;
}

/* 2n pairs in the parent, three children forked between them; each child exits through
 * exit() (which flushes stdio buffers) after a driver call it is refused. */
static int trace_fork(int n)
{
    CHECK(setup() == 0);
    struct tally t = {0};
    for (int c = 0; c < 3; c++) {
        CHECK(pairs(n / 2) == 0);
        fflush(stdout); /* not fflush(NULL): a trace buffered in the process is what this tests */
        fflush(stderr);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(CHILD_ALARM_S);
            CUdeviceptr p;
            exit(mem_alloc(&p, 4096) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 3);
        }
        wait_child(pid, &t);
    }
    CHECK(pairs(2 * n - 3 * (n / 2)) == 0);
    say("rows=%d children=%d not_initialized=%d hung=%d\n", 4 * n, t.children, t.not_initialized,
        t.hung);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int n = argc > 2 ? atoi(argv[2]) : 0;
    if (!strcmp(mode, "child_driver")) return child_driver(n ? n : 20);
    if (!strcmp(mode, "child_runtime")) return child_runtime(n ? n : 5);
    if (!strcmp(mode, "trace_rows")) return trace_rows(n ? n : 100);
    if (!strcmp(mode, "trace_devices")) return trace_devices(n ? n : 100);
    if (!strcmp(mode, "trace_fork")) return trace_fork(n ? n : 100);
    fprintf(stderr, "usage: fork_prog child_driver|child_runtime|trace_rows|trace_devices|"
                    "trace_fork [N]\n");
    return 64;
}
