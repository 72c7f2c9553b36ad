/* ipc.c — build/gpu/gpu-ipc, the two-process IPC check of `make gpu-check` (docs/ipc.md): a
 * producer process exports gpool blocks (gpool_export_block, pool with ipc=1), a consumer
 * process imports them (gpool_import_block) and reads them back with cuMemcpyDtoH; the producer
 * frees one while it is open and a new block must not take its memory. Also measures what
 * ipc=1 costs per page created (fresh pools, one 2 MiB block per page, ipc=0 vs ipc=1) and the
 * first export of a block. Prints "- PASS/FAIL/INFO ..." lines; exits 1 on a failure. Runs on
 * the simulated driver too where it can export memory (GPOOL_LIBCUDA). */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudrv.h"
#include "gpool.h"

static cudrv D;
static int failed;

static void line(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("- %s ", what);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    if (!strcmp(what, "FAIL")) failed = 1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned char pat(size_t i, uint32_t seed)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

typedef struct msg {
    gpool_ipc_handle h;
    uint64_t bytes;
    uint32_t seed, hold; /* hold: answer, wait for a byte, check again, close */
} msg;

static int rd(int fd, void *b, size_t n)
{
    size_t d = 0;
    while (d < n) {
        ssize_t r = read(fd, (char *)b + d, n - d);
        if (r <= 0) return -1;
        d += (size_t)r;
    }
    return 0;
}

static int check_dev(void *p, size_t n, uint32_t seed)
{
    unsigned char *h = malloc(n);
    int ok = h && D.cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)p, n) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < n; i++)
        ok = h[i] == pat(i, seed);
    free(h);
    return ok;
}

static int consumer(int in, int out)
{
    char err[256];
    if (cudrv_load(&D, err, sizeof err) != 0) return 90;
    gpool_t *pool;
    if (gpool_create(NULL, &pool) != GPOOL_OK) return 91;
    msg m;
    while (rd(in, &m, sizeof m) == 0) {
        void *p = NULL;
        int32_t ok = gpool_import_block(pool, &m.h, &p) == GPOOL_OK;
        if (!ok) fprintf(stderr, "consumer: %s\n", gpool_last_error());
        ok = ok && check_dev(p, m.bytes, m.seed);
        if (m.hold) {
            char go;
            if (write(out, &ok, sizeof ok) != sizeof ok || rd(in, &go, 1) != 0) return 92;
            ok = ok && check_dev(p, m.bytes, m.seed);
        }
        if (p && gpool_close_imported(pool, p) != GPOOL_OK) ok = 0;
        if (write(out, &ok, sizeof ok) != sizeof ok) return 93;
    }
    gpool_destroy(pool);
    return 0;
}

static gpool_t *ipc_pool(int ipc, size_t release_threshold)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    cfg.ipc = ipc;
    cfg.release_threshold = release_threshold;
    gpool_t *p = NULL;
    if (gpool_create(&cfg, &p) != GPOOL_OK) {
        line("FAIL", "gpool_create(ipc=%d): %s", ipc, gpool_last_error());
        return NULL;
    }
    return p;
}

/* time per page of fresh 2 MiB blocks in a pool with or without ipc */
static void cost(int ipc)
{
    enum { N = 256 };
    static void *b[N];
    gpool_t *p = ipc_pool(ipc, 1); /* no growth: one physical handle per page */
    if (!p) return;
    double t = now();
    int n = 0;
    while (n < N && gpool_alloc(p, (size_t)2 << 20, NULL, &b[n]) == GPOOL_OK)
        n++;
    t = now() - t;
    line("INFO", "ipc=%d: %d fresh 2 MiB pages, %.1f us per page (cuMemCreate + map + access)", ipc,
         n, n ? t / n * 1e6 : 0.0);
    if (ipc && n) {
        gpool_ipc_handle h;
        t = now();
        for (int i = 0; i < n; i++)
            gpool_export_block(p, b[i], &h);
        line("INFO", "first export of a 2 MiB block: %.1f us", (now() - t) / n * 1e6);
    }
    for (int i = 0; i < n; i++)
        gpool_free(p, b[i]);
    gpool_destroy(p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    int a[2], c[2];
    if (pipe(a) || pipe(c)) return 1;
    fflush(stdout);
    pid_t pid = fork(); /* before any CUDA call: a child cannot use its parent's context */
    if (pid == 0) {
        close(a[1]);
        close(c[0]);
        _exit(consumer(a[0], c[1]));
    }
    close(a[0]);
    close(c[1]);
    char err[256];
    if (cudrv_load(&D, err, sizeof err) != 0) {
        line("FAIL", "loading the driver: %s", err);
        return 1;
    }
    gpool_t *pool = ipc_pool(1, 0);
    if (!pool) return 1;
    size_t sizes[] = {1000, ((size_t)3 << 20) + 1, (size_t)64 << 20};
    for (int i = 0; i < 3; i++) {
        void *p;
        unsigned char *h = malloc(sizes[i]);
        for (size_t k = 0; k < sizes[i]; k++)
            h[k] = pat(k, 7 + (uint32_t)i);
        msg m = {.bytes = sizes[i], .seed = 7 + (uint32_t)i, .hold = i == 1};
        int ok = gpool_alloc(pool, sizes[i], NULL, &p) == GPOOL_OK &&
                 D.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)p, h, sizes[i]) == CUDA_SUCCESS &&
                 gpool_export_block(pool, p, &m.h) == GPOOL_OK;
        free(h);
        if (!ok) {
            line("FAIL", "producer, %zu bytes: %s", sizes[i], gpool_last_error());
            break;
        }
        int32_t got = 0;
        if (write(a[1], &m, sizeof m) != sizeof m || rd(c[0], &got, sizeof got) != 0) got = 0;
        if (m.hold && got) { /* the owner frees while the consumer has it open */
            void *q = NULL;
            gpool_free(pool, p);
            if (gpool_alloc(pool, sizes[i], NULL, &q) == GPOOL_OK) {
                if (q == p) line("FAIL", "a block freed while imported was reused at once");
                gpool_free(pool, q);
            }
            if (write(a[1], "g", 1) != 1 || rd(c[0], &got, sizeof got) != 0) got = 0;
        } else {
            gpool_free(pool, p);
        }
        line(got ? "PASS" : "FAIL", "another process read a %zu-byte block%s", sizes[i],
             m.hold ? " (freed by its owner while open)" : "");
    }
    close(a[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        line("FAIL", "the consumer exited %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    gpool_destroy(pool);
    for (int round = 0; round < 2; round++) { /* the first round also pays first-touch costs */
        cost(0);
        cost(1);
    }
    return failed;
}
