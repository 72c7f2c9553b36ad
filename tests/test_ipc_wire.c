/* test_ipc_wire.c — the IPC socket's message layer (src/ipc/ipc_wire.c) on a socketpair: a
 * receive that fails must not take descriptors it was never given. recvmsg(2) that fails
 * leaves msg_controllen as the caller set it, so control data of an earlier receive (the same
 * stack buffer) would be parsed again and its descriptors, the caller's by then, closed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ipc.h"

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

/* Two receives in a row at the same stack depth (nothing runs between them that could
 * overwrite the first one's control buffer): the first's status and descriptors, the second's
 * status. */
static __attribute__((noinline)) void recv_twice(int sock, int *first, int got[4], size_t *ngot,
                                                 int *second, size_t *n2)
{
    uint64_t back = 0;
    *first = gp_ipc_recv(sock, &back, sizeof back, got, 4, ngot);
    int again[4];
    *second = gp_ipc_recv(sock, &back, sizeof back, again, 4, n2);
}

Test(ipc_wire, a_timed_out_receive_closes_nothing_received_before)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 50 * 1000};
    cr_assert_eq(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    int sent = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(sent, 0);
    uint64_t word = 42;
    cr_assert_eq(gp_ipc_send(sv[0], &word, sizeof word, &sent, 1), 0);
    close(sent);
    int got[4], first, second;
    size_t ngot = 0, n2 = 99;
    /* the second receive gets nothing: it times out and must leave the first's alone */
    recv_twice(sv[1], &first, got, &ngot, &second, &n2);
    cr_assert_eq(first, 0);
    cr_assert_eq(ngot, 1);
    int mine = got[0]; /* the caller's now */
    cr_assert_eq(second, -1);
    cr_assert_eq(n2, 0);
    cr_assert(is_open(mine), "a failed receive closed a descriptor of an earlier one");
    uint64_t back = 0;
    /* and a peer that goes away: EOF, the same */
    close(sv[0]);
    cr_assert_eq(gp_ipc_recv(sv[1], &back, sizeof back, got, 4, &n2), -1);
    cr_assert(is_open(mine), "a receive at EOF closed a descriptor of an earlier one");
    close(mine);
    close(sv[1]);
}
