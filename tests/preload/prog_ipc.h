/* prog_ipc.h — what the IPC helper programs (ipc_prog.c, ipc_adv_prog.c) share: the message a
 * producer sends its consumer, the runtime's IPC calls found by name (the stand-in cudart has
 * none: the interposer's answer, as they would ahead of the real libcudart), a content pattern
 * to fill and check, and whole reads and writes on a pipe. */
#ifndef GPOOL_TESTS_PROG_IPC_H
#define GPOOL_TESTS_PROG_IPC_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* one message producer -> consumer: a handle, the bytes behind it, their pattern, what to do */
typedef struct msg {
    cudaIpcMemHandle_t h;
    uint64_t bytes;
    uint32_t seed, op;
} msg;

static inline void *fn(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        printf("failed: no %s\n", name);
        exit(1);
    }
    return f;
}
static inline cudaError_t ipc_get(cudaIpcMemHandle_t *h, void *p)
{
    cudaError_t (*f)(cudaIpcMemHandle_t *, void *);
    *(void **)&f = fn("cudaIpcGetMemHandle");
    return f(h, p);
}
static inline cudaError_t ipc_open(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    cudaError_t (*f)(void **, cudaIpcMemHandle_t, unsigned);
    *(void **)&f = fn("cudaIpcOpenMemHandle");
    return f(p, h, flags);
}
static inline cudaError_t ipc_close(void *p)
{
    cudaError_t (*f)(void *);
    *(void **)&f = fn("cudaIpcCloseMemHandle");
    return f(p);
}

static inline unsigned char pattern_byte(size_t i, uint32_t seed)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}
static inline void fill(void *p, size_t n, uint32_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = pattern_byte(i, seed);
}
static inline int same(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern_byte(i, seed)) return 0;
    return 1;
}

/* all n bytes read (writing 0) or written (1), across EINTR and short transfers: 0, else -1 */
static inline int io(int fd, void *buf, size_t n, int writing)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = writing ? write(fd, (char *)buf + done, n - done)
                            : read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

/* a consumer process and the two pipe ends that talk to it */
typedef struct peer {
    pid_t pid;
    int to, from;
} peer;

/* fork a consumer running run(in, out) with only its own pipe ends open (an earlier consumer's,
 * inherited, would keep that one's pipe open); pid -1 when the pipes could not be made */
static inline peer spawn_consumer(int (*run)(int in, int out))
{
    int a[2], b[2];
    peer c = {-1, -1, -1};
    if (pipe(a) || pipe(b)) return c;
    fflush(stdout);
    c.pid = fork();
    if (c.pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != a[0] && fd != b[1]) close(fd);
        _exit(run(a[0], b[1]));
    }
    close(a[0]);
    close(b[1]);
    c.to = a[1];
    c.from = b[0];
    return c;
}

/* close the pipes and wait: the exit status, 128+N for signal N */
static inline int reap(peer *c)
{
    int st = 0;
    close(c->to);
    close(c->from);
    waitpid(c->pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
