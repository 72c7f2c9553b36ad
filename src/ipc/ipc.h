/* Sharing device blocks between processes (include/gpool.h, "Sharing blocks with other
 * processes"; docs/ipc.md). ipc_wire.c: the socket and its messages; ipc_export.c: the
 * exporting side (exports, the helper thread, deferred frees); ipc_import.c: the importing
 * side. */
#ifndef GPOOL_IPC_H
#define GPOOL_IPC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

/* Physical handles per message (SCM_RIGHTS carries at most SCM_MAX_FD = 253 descriptors). */
#define GP_IPC_BATCH 200
/* Physical handles one export may span (a block of 8 GiB in single 2 MiB pages). */
#define GP_IPC_MAX_PIECES 4096

enum { GP_IPC_OP_OPEN = 1 };
/* Connections accepted and not yet asking: more are refused (closed) until some ask. */
#define GP_IPC_MAX_PENDING 64

/* importer -> exporter, the first and only message of a connection */
typedef struct gp_ipc_request {
    uint32_t magic, op;
    uint64_t export_id, secret;
} gp_ipc_request;

/* exporter -> importer: the answer, then (status OK) ceil(npieces / GP_IPC_BATCH) batches */
typedef struct gp_ipc_reply {
    uint32_t magic;
    int32_t status;   /* a gpool_status */
    uint32_t npieces; /* physical handles */
    uint32_t reserved;
    uint64_t span;      /* bytes from the first handle's start to the last one's end */
    uint64_t block_off; /* the block's start, from the span's start */
    char message[192];  /* why, when status is not OK */
} gp_ipc_reply;

typedef struct gp_ipc_batch {
    uint32_t n, reserved;
    uint64_t off[GP_IPC_BATCH], size[GP_IPC_BATCH]; /* from the span's start */
} gp_ipc_batch; /* with n descriptors (SCM_RIGHTS), in the same order */

typedef struct gp_ipc_export gp_ipc_export;
typedef struct gp_ipc_import gp_ipc_import;

/* One connection of an importer (exporter side). */
typedef struct gp_ipc_conn {
    int fd;
    gp_ipc_export *exp;
} gp_ipc_conn;

/* A pool's IPC state, made by its first export or import. */
typedef struct gp_ipc {
    pthread_mutex_t mu; /* guards everything below */
    uint64_t token;     /* names the socket */
    uint64_t next_export_id;
    gp_ipc_export *exports;
    _Atomic size_t nexports; /* on the list (written under mu): frees skip mu while 0 */
    gp_ipc_import *imports;
    /* the helper thread (started by the first export) */
    int listen_fd, wake[2], running;
    pthread_t thread;
    /* the helper's poll list (its own; kept here, not on its stack, so that a forked child,
     * which has no helper, still reaches it: freed with the state) */
    struct pollfd *polls;
    size_t cap_polls;
    gp_ipc_conn *conns;
    size_t nconns, cap_conns;
    /* accepted connections whose request has not come yet: served when readable, so that a
     * silent one holds up nobody */
    int pending[GP_IPC_MAX_PENDING];
    size_t npending;
    struct gp_ipc *all_next; /* every state, for the fork handler (ipc_fork.c) */
} gp_ipc;

/* The pool's IPC state, made on first use; NULL with the error set (out of memory). */
gp_ipc *gp_ipc_get(gpool_t *pool);
/* Before a free of ptr (a block start) on stream: 1 when an importer has the block open, so
 * the free is deferred until the last one closes (the caller returns GPOOL_OK);
 * GP_IPC_FREED_AGAIN when the block's free is deferred already (a double free: nothing
 * changes); else 0 (the block's export, if any, ends). */
#define GP_IPC_FREED_AGAIN 2
int gp_ipc_owner_free(gpool_t *pool, void *ptr, gpool_stream_t stream);
/* At gpool_destroy, before the kinds go: stop the helper thread, really free the blocks whose
 * frees were deferred, unmap every import. */
void gp_ipc_destroy(gpool_t *pool);
/* ipc_import.c: unmap every import of the pool (mu held). */
void gp_ipc_imports_drop(gpool_t *pool, gp_ipc *ipc);
/* 1 when p lies in a block this pool imported (*base, *size: that block's start and size, as
 * the exporter's allocation), else 0. Takes the IPC lock; for pointer queries. */
int gp_ipc_imported_range(gpool_t *pool, uintptr_t p, uintptr_t *base, size_t *size);

/* ipc_fork.c: in a forked child every socket of every state is closed (the child cannot use
 * its parent's pools, and it must not keep their imports open nor their socket bound). */
void gp_ipc_track(gp_ipc *ipc);
void gp_ipc_untrack(gp_ipc *ipc);
/* ipc_export.c: the child's copies of the exported descriptors are closed (mu held): they
 * would keep the pages' physical memory alive as long as the child runs. */
void gp_ipc_exports_forget(gp_ipc *ipc);
/* ipc_import.c: the child's copies of the import connections are closed (mu held). */
void gp_ipc_imports_forget(gp_ipc *ipc);

/* ipc_wire.c */
/* The abstract socket address of an exporter; returns the address length. */
size_t gp_ipc_sockaddr(void *sun, uint32_t pid, uint64_t token);
/* The handle's checksum (FNV-1a over its bytes, check taken as 0). */
uint32_t gp_ipc_checksum(const gpool_ipc_handle *h);
/* Random bytes (getrandom, else the clock and pid); never fails. */
uint64_t gp_ipc_random(void);
/* Send len bytes with nfds descriptors (0: none); 0 or -1 (errno). */
int gp_ipc_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds);
/* Receive exactly len bytes and up to maxfds descriptors (close-on-exec; *nfds gets how many
 * came). 0, or -1: errno set (0 on end of stream); descriptors that came are closed then. */
int gp_ipc_recv(int sock, void *buf, size_t len, int *fds, size_t maxfds, size_t *nfds);

#endif
