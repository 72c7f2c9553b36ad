/* The wire of gpool's IPC: the exporter's abstract Unix-domain socket name, messages with file
 * descriptors (SCM_RIGHTS, unix(7)), the handle's checksum and random tokens. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"

size_t gp_ipc_sockaddr(void *out, uint32_t pid, uint64_t token)
{
    struct sockaddr_un *sun = out;
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    /* abstract namespace (unix(7)): sun_path[0] is NUL, the name is the bytes after it */
    int n = snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1, "gpool-ipc-%u-%016llx",
                     (unsigned)pid, (unsigned long long)token);
    return offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n;
}

uint32_t gp_ipc_checksum(const gpool_ipc_handle *h)
{
    gpool_ipc_handle c = *h;
    c.check = 0;
    const unsigned char *p = (const unsigned char *)&c;
    uint32_t x = 2166136261u;
    for (size_t i = 0; i < sizeof c; i++)
        x = (x ^ p[i]) * 16777619u;
    return x;
}

uint64_t gp_ipc_random(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v && v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^
        (uintptr_t)&v;
    return v ? v : 1;
}

int gp_ipc_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * GP_IPC_BATCH)];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > GP_IPC_BATCH) {
        errno = EINVAL;
        return -1;
    }
    if (nfds) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    /* a stream socket: the descriptors go with the first byte; the rest may take more sends */
    size_t done = 0;
    while (done < len) {
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        done += (size_t)n;
        iov.iov_base = (char *)buf + done;
        iov.iov_len = len - done;
        m.msg_control = NULL;
        m.msg_controllen = 0;
    }
    return 0;
}

/* Close the descriptors of every SCM_RIGHTS message in m; adds them to fds while room. */
static void take_fds(struct msghdr *m, int *fds, size_t maxfds, size_t *nfds, int *overflow)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else {
                close(fd);
                *overflow = 1;
            }
        }
    }
}

int gp_ipc_recv(int sock, void *buf, size_t len, int *fds, size_t maxfds, size_t *nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * GP_IPC_BATCH)];
        struct cmsghdr align;
    } ctl;
    size_t done = 0;
    int overflow = 0;
    *nfds = 0;
    while (done < len) {
        struct iovec iov = {.iov_base = (char *)buf + done, .iov_len = len - done};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = ctl.buf,
                           .msg_controllen = sizeof ctl.buf};
        memset(&ctl, 0, sizeof ctl);
        ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        /* a failed recvmsg leaves msg_controllen as set here: nothing in ctl is new */
        if (n >= 0) take_fds(&m, fds, maxfds, nfds, &overflow);
        if (n <= 0 || (m.msg_flags & MSG_CTRUNC)) {
            if (n == 0) errno = 0;
            if (m.msg_flags & MSG_CTRUNC) errno = EMSGSIZE;
            goto fail;
        }
        done += (size_t)n;
    }
    if (!overflow) return 0;
    errno = EMSGSIZE;
fail:;
    int saved = errno;
    for (size_t i = 0; i < *nfds; i++)
        close(fds[i]);
    *nfds = 0;
    errno = saved;
    return -1;
}
