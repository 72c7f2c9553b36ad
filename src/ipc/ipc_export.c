/* The exporting side of gpool's IPC: gpool_export_block, the pool's exports, the helper
 * thread that hands their file descriptors to importers, and frees deferred while importers
 * have a block open.
 *
 * Descriptors travel over an abstract Unix-domain socket with SCM_RIGHTS (unix(7)), served by
 * one helper thread per exporting pool. pidfd_getfd(2) would need no thread, but it needs
 * ptrace access to the exporter (PTRACE_MODE_ATTACH_REALCREDS), which Yama's default
 * ptrace_scope=1 refuses between sibling processes; the socket needs only the same user,
 * checked with SO_PEERCRED (an abstract socket has no file permissions). The connection stays
 * open while the import is: it closing (close, exit or crash of the importer) is how the
 * exporter learns the block is no longer used. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "ipc.h"
#include "pool.h"
#include "stream.h"
#include "vidmem.h"

/* Where the owner's deferred free stands in stream order: an event recorded on the free's
 * stream by the owner's thread (that stream may be this thread's per-thread stream, or be
 * destroyed, its handle given to a new stream, before the last importer closes), else the
 * stream itself (the legacy stream; a capturing stream, or one whose record failed). */
typedef struct gp_ipc_free_mark {
    CUevent ev;
    gpool_stream_t stream;
} gp_ipc_free_mark;

struct gp_ipc_export {
    gp_ipc_export *next;
    uint64_t id, secret;
    uintptr_t block;   /* the block's start */
    size_t block_size; /* gpool_block_desc.size */
    uintptr_t span;    /* the first handle's start */
    size_t span_size;
    size_t npieces;
    uint64_t *off, *size; /* per handle, from span */
    int *fds;             /* per handle, exported */
    size_t opens;         /* connections that have it open */
    int freed;            /* the owner freed it while open: free when opens reaches 0 */
    gp_ipc_free_mark free;
};

/* Lock (ipc->mu) held, in the freeing thread: the mark of a free on stream now. */
static gp_ipc_free_mark free_mark(gpool_t *pool, gpool_stream_t stream)
{
    gp_ipc_free_mark m = {.ev = NULL, .stream = stream};
    uintptr_t tag = gp_stream_tag(stream);
    if (!stream || stream == CU_STREAM_LEGACY || gp_stream_capturing(pool, tag)) return m;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    CUevent ev = NULL;
    if (GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
               pool->dc.drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS) {
        if (GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT,
                   pool->dc.drv->cuEventRecord(ev, (CUstream)stream)) == CUDA_SUCCESS)
            m = (gp_ipc_free_mark){.ev = ev, .stream = NULL};
        else
            GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(ev));
    }
    gp_dc_leave(&pool->dc, pushed);
    return m;
}

/* No lock held: the deferred free of block, once the work before the owner's free is done
 * (the event's wait; the block is then idle and goes back on the legacy stream). */
static void free_deferred(gpool_t *pool, uintptr_t block, gp_ipc_free_mark m)
{
    if (m.ev) {
        int pushed;
        gp_dc_enter(&pool->dc, &pushed);
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventSynchronize(m.ev));
        GP_DRV(pool->dc.cnt, GPOOL_DRV_EVENT, pool->dc.drv->cuEventDestroy(m.ev));
        gp_dc_leave(&pool->dc, pushed);
    }
    gpool_free_async(pool, (void *)block, m.stream);
}

static void export_drop(gp_ipc_export *e)
{
    for (size_t i = 0; i < e->npieces; i++)
        if (e->fds[i] >= 0) close(e->fds[i]);
    free(e->fds);
    free(e->off);
    free(e->size);
    free(e);
}

static void export_unlink(gp_ipc *ipc, gp_ipc_export *e)
{
    for (gp_ipc_export **p = &ipc->exports; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            atomic_fetch_sub_explicit(&ipc->nexports, 1, memory_order_relaxed);
            return;
        }
}

gp_ipc *gp_ipc_get(gpool_t *pool)
{
    gp_ipc *ipc = atomic_load(&pool->ipc);
    if (ipc) return ipc;
    pthread_mutex_lock(&pool->lock);
    ipc = atomic_load(&pool->ipc);
    if (!ipc && (ipc = calloc(1, sizeof *ipc))) {
        pthread_mutex_init(&ipc->mu, NULL);
        ipc->token = gp_ipc_random();
        ipc->next_export_id = 1;
        ipc->listen_fd = ipc->wake[0] = ipc->wake[1] = -1;
        gp_ipc_track(ipc);
        atomic_store(&pool->ipc, ipc);
    }
    pthread_mutex_unlock(&pool->lock);
    if (!ipc) gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory for the pool's IPC state");
    return ipc;
}

/* ---------- the helper thread ---------- */

/* A connection ended (mu held): the export loses an open; the block to free now, or 0. */
static uintptr_t conn_end(gp_ipc *ipc, size_t i, gp_ipc_free_mark *mark)
{
    gp_ipc_conn c = ipc->conns[i];
    ipc->conns[i] = ipc->conns[--ipc->nconns];
    close(c.fd);
    gp_ipc_export *e = c.exp;
    if (--e->opens || !e->freed) return 0;
    uintptr_t block = e->block;
    *mark = e->free;
    export_unlink(ipc, e);
    export_drop(e);
    return block;
}

static void reply_error(int fd, gpool_status st, const char *msg)
{
    gp_ipc_reply r = {.magic = GPOOL_IPC_MAGIC, .status = st};
    snprintf(r.message, sizeof r.message, "%s", msg);
    gp_ipc_send(fd, &r, sizeof r, NULL, 0);
}

/* One importer connected: check it, answer it, keep the connection while it is open. */
static void serve_open(gp_ipc *ipc, int fd)
{
    struct ucred cr;
    socklen_t crl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 || cr.uid != getuid()) {
        reply_error(fd, GPOOL_ERR_INVALID_ARG, "the importer runs as another user");
        close(fd);
        return;
    }
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    gp_ipc_request rq;
    size_t nfds = 0;
    if (gp_ipc_recv(fd, &rq, sizeof rq, NULL, 0, &nfds) != 0 || rq.magic != GPOOL_IPC_MAGIC ||
        rq.op != GP_IPC_OP_OPEN) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&ipc->mu);
    gp_ipc_export *e = ipc->exports;
    while (e && e->id != rq.export_id)
        e = e->next;
    if (e && e->secret == rq.secret && !e->freed && ipc->nconns == ipc->cap_conns &&
        ipc->cap_conns > 65536) {
        pthread_mutex_unlock(&ipc->mu);
        reply_error(fd, GPOOL_ERR_OUT_OF_MEMORY,
                    "too many open imports of this pool's blocks (65536): close some first");
        close(fd);
        return;
    }
    if (!e || e->secret != rq.secret || e->freed) {
        pthread_mutex_unlock(&ipc->mu);
        reply_error(fd, GPOOL_ERR_INVALID_POINTER,
                    !e || e->secret != rq.secret
                        ? "stale or forged handle: the exporting pool has no such export (the "
                          "block was freed, or the handle was not made by gpool_export_block)"
                        : "stale handle: the block was freed by its owner");
        close(fd);
        return;
    }
    if (ipc->nconns == ipc->cap_conns) {
        size_t c = ipc->cap_conns ? 2 * ipc->cap_conns : 16;
        gp_ipc_conn *n = realloc(ipc->conns, c * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&ipc->mu);
            reply_error(fd, GPOOL_ERR_OUT_OF_MEMORY, "the exporter is out of host memory");
            close(fd);
            return;
        }
        ipc->conns = n;
        ipc->cap_conns = c;
    }
    e->opens++; /* from here the block and its descriptors stay (a free is deferred) */
    ipc->conns[ipc->nconns++] = (gp_ipc_conn){.fd = fd, .exp = e};
    pthread_mutex_unlock(&ipc->mu);
    gp_ipc_reply r = {.magic = GPOOL_IPC_MAGIC,
                      .status = GPOOL_OK,
                      .npieces = (uint32_t)e->npieces,
                      .span = e->span_size,
                      .block_off = e->block - e->span};
    int ok = gp_ipc_send(fd, &r, sizeof r, NULL, 0) == 0;
    for (size_t i = 0; ok && i < e->npieces; i += GP_IPC_BATCH) {
        gp_ipc_batch b = {
            .n = (uint32_t)(e->npieces - i < GP_IPC_BATCH ? e->npieces - i : GP_IPC_BATCH)};
        memcpy(b.off, e->off + i, b.n * sizeof *b.off);
        memcpy(b.size, e->size + i, b.n * sizeof *b.size);
        ok = gp_ipc_send(fd, &b, sizeof b, e->fds + i, b.n) == 0;
    }
    /* a failed send: the importer sees the connection close; the loop ends the open */
    if (!ok) shutdown(fd, SHUT_RDWR);
}

static void *helper_main(void *arg)
{
    gpool_t *pool = arg;
    gp_ipc *ipc = atomic_load(&pool->ipc);
    struct pollfd few[2];
    for (;;) {
        pthread_mutex_lock(&ipc->mu);
        size_t n = ipc->nconns + ipc->npending + 2;
        if (n > ipc->cap_polls) {
            struct pollfd *np = realloc(ipc->polls, n * sizeof *np);
            if (np) {
                ipc->polls = np;
                ipc->cap_polls = n;
            }
        }
        /* out of memory: watch fewer connections this round (at least the wake pipe and the
         * listening socket: the helper never stops serving while the pool lives) */
        struct pollfd *pf = ipc->polls ? ipc->polls : few;
        size_t have = ipc->polls ? ipc->cap_polls : 2;
        if (n > have) n = have;
        pf[0] = (struct pollfd){.fd = ipc->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = ipc->listen_fd, .events = POLLIN};
        /* [2, nc): open imports; [nc, n): connections not yet asking */
        size_t nc = 2 + ipc->nconns < n ? 2 + ipc->nconns : n;
        for (size_t i = 2; i < nc; i++)
            pf[i] = (struct pollfd){.fd = ipc->conns[i - 2].fd, .events = POLLIN};
        for (size_t i = nc; i < n; i++)
            pf[i] = (struct pollfd){.fd = ipc->pending[i - nc], .events = POLLIN};
        pthread_mutex_unlock(&ipc->mu);
        if (poll(pf, n, -1) < 0) {
            if (errno != EINTR) { /* ENOMEM: try again shortly */
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        if (pf[0].revents) break; /* gp_ipc_destroy */
        /* a connection's request came (or it hung up): answer it now */
        for (size_t i = nc; i < n; i++) {
            if (!pf[i].revents) continue;
            pthread_mutex_lock(&ipc->mu);
            for (size_t k = 0; k < ipc->npending; k++)
                if (ipc->pending[k] == pf[i].fd) {
                    ipc->pending[k] = ipc->pending[--ipc->npending];
                    break;
                }
            pthread_mutex_unlock(&ipc->mu);
            serve_open(ipc, pf[i].fd);
        }
        /* an importer's connection readable or hung up: it closed (it sends nothing more) */
        for (size_t i = nc; i-- > 2;) {
            if (!pf[i].revents) continue;
            uintptr_t block = 0;
            gp_ipc_free_mark mark = {0};
            pthread_mutex_lock(&ipc->mu);
            for (size_t k = 0; k < ipc->nconns; k++)
                if (ipc->conns[k].fd == pf[i].fd) {
                    block = conn_end(ipc, k, &mark);
                    break;
                }
            pthread_mutex_unlock(&ipc->mu);
            if (block) free_deferred(pool, block, mark);
        }
        if (pf[1].revents & POLLIN) {
            int fd = accept4(ipc->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                pthread_mutex_lock(&ipc->mu);
                int kept = ipc->npending < GP_IPC_MAX_PENDING;
                if (kept) ipc->pending[ipc->npending++] = fd;
                pthread_mutex_unlock(&ipc->mu);
                if (!kept) close(fd); /* too many silent ones: this importer gets GPOOL_ERR_IO */
            }
        }
    }
    return NULL;
}

/* Start the helper thread (mu held). */
static gpool_status helper_start(gpool_t *pool, gp_ipc *ipc)
{
    if (ipc->running) return GPOOL_OK;
    struct sockaddr_un sun;
    size_t len = gp_ipc_sockaddr(&sun, (uint32_t)getpid(), ipc->token);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return gp_fail(GPOOL_ERR_IO, "gpool_export_block: socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sun, (socklen_t)len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return gp_fail(GPOOL_ERR_IO, "gpool_export_block: binding the IPC socket: %s", strerror(e));
    }
    if (pipe2(ipc->wake, O_CLOEXEC) != 0) {
        int e = errno;
        close(fd);
        return gp_fail(GPOOL_ERR_IO, "gpool_export_block: pipe: %s", strerror(e));
    }
    ipc->listen_fd = fd;
    int r = pthread_create(&ipc->thread, NULL, helper_main, pool);
    if (r != 0) {
        close(fd);
        close(ipc->wake[0]);
        close(ipc->wake[1]);
        ipc->listen_fd = ipc->wake[0] = ipc->wake[1] = -1;
        return gp_fail(GPOOL_ERR_IO, "gpool_export_block: starting the helper thread: %s",
                       strerror(r));
    }
    ipc->running = 1;
    return GPOOL_OK;
}

/* ---------- exports ---------- */

/* The block's physical handles, exported as descriptors, into a new export. */
static gpool_status export_new(gpool_t *pool, uintptr_t block, size_t size, gp_ipc_export **out)
{
    gp_arena *a = pool->device;
    gp_vidmem_piece *pc = malloc(GP_IPC_MAX_PIECES * sizeof *pc);
    if (!pc) return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory exporting a block");
    gp_arena_lock(a);
    int aliased = gp_vidmem_aliased(gp_arena_backend(a), block, size);
    size_t n =
        aliased ? 0 : gp_vidmem_pieces(gp_arena_backend(a), block, size, pc, GP_IPC_MAX_PIECES);
    gp_arena_unlock(a);
    if (aliased) {
        free(pc);
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "the block was placed across a partly used page under memory pressure (its "
                       "first page maps another block's physical page again): it cannot be "
                       "exported; allocate it while memory is not short");
    }
    if (!n || n > GP_IPC_MAX_PIECES) {
        free(pc);
        return gp_fail(n ? GPOOL_ERR_UNSUPPORTED : GPOOL_ERR_INVALID_POINTER,
                       n ? "the block spans %zu physical handles, more than %d can be exported"
                         : "the block has no mapped pages%.0zu",
                       n, GP_IPC_MAX_PIECES);
    }
    gp_ipc_export *e = calloc(1, sizeof *e);
    if (e) {
        e->off = calloc(n, sizeof *e->off);
        e->size = calloc(n, sizeof *e->size);
        e->fds = malloc(n * sizeof *e->fds);
    }
    if (!e || !e->off || !e->size || !e->fds) {
        if (e) {
            free(e->off);
            free(e->size);
            free(e->fds);
            free(e);
        }
        free(pc);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory exporting a block");
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (pc[i].addr < lo) lo = pc[i].addr;
        if (pc[i].addr + pc[i].size > hi) hi = pc[i].addr + pc[i].size;
        e->fds[i] = -1;
    }
    e->npieces = n;
    e->block = block;
    e->block_size = size;
    e->span = lo;
    e->span_size = hi - lo;
    gpool_status st = GPOOL_OK;
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    for (size_t i = 0; i < n && st == GPOOL_OK; i++) {
        e->off[i] = pc[i].addr - lo;
        e->size[i] = pc[i].size;
        int fd = -1;
        CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
                            pool->dc.drv->cuMemExportToShareableHandle(
                                &fd, pc[i].h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        if (r != CUDA_SUCCESS) {
            st = gp_cu_fail(r, "cuMemExportToShareableHandle");
        } else {
            /* kept until the block is freed: a program this process execs must not inherit it
             * (it would hold the physical memory; the driver's descriptor need not be
             * close-on-exec) */
            int fl = fcntl(fd, F_GETFD);
            if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
            e->fds[i] = fd;
        }
    }
    gp_dc_leave(&pool->dc, pushed);
    free(pc);
    if (st != GPOOL_OK) {
        export_drop(e);
        return st;
    }
    *out = e;
    return GPOOL_OK;
}

static gpool_status export_block(gpool_t *pool, const void *ptr, gpool_ipc_handle *out)
{
    if (!pool || !ptr || !out) return gp_fail(GPOOL_ERR_INVALID_ARG, "a NULL argument");
    if (!pool->cfg.ipc)
        return gp_fail(GPOOL_ERR_UNSUPPORTED,
                       "the pool was created without ipc (gpool_config.ipc = 1, GPOOL_CONF "
                       "ipc=1): its pages cannot be exported");
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    gpool_status st = gpool_get_block_desc(pool, ptr, &d);
    if (st != GPOOL_OK) return st;
    if (d.kind != GPOOL_MEM_DEVICE)
        return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p is not in a device block", ptr);
    gp_ipc *ipc = gp_ipc_get(pool);
    if (!ipc) return GPOOL_ERR_OUT_OF_MEMORY;
    uintptr_t block = (uintptr_t)d.device_ptr;
    pthread_mutex_lock(&ipc->mu);
    st = helper_start(pool, ipc);
    gp_ipc_export *e = ipc->exports;
    while (e && (e->block != block || e->freed))
        e = e->next;
    pthread_mutex_unlock(&ipc->mu);
    if (st != GPOOL_OK) return st;
    if (!e) {
        /* the caller owns the block: nobody frees it while this runs */
        gp_ipc_export *made = NULL;
        if ((st = export_new(pool, block, d.size, &made)) != GPOOL_OK) return st;
        pthread_mutex_lock(&ipc->mu);
        /* another thread may have exported the block meanwhile: one export a block */
        e = ipc->exports;
        while (e && (e->block != block || e->freed))
            e = e->next;
        if (!e) {
            e = made;
            made = NULL;
            e->id = ipc->next_export_id++;
            e->secret = gp_ipc_random();
            e->next = ipc->exports;
            ipc->exports = e;
            atomic_fetch_add_explicit(&ipc->nexports, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&ipc->mu);
        if (made) export_drop(made);
    }
    memset(out, 0, sizeof *out);
    out->magic = GPOOL_IPC_MAGIC;
    out->version = GPOOL_IPC_VERSION;
    out->device = (uint16_t)pool->cfg.device;
    out->pid = (uint32_t)getpid();
    out->token = ipc->token;
    out->export_id = e->id;
    out->secret = e->secret;
    out->block_size = d.size;
    out->offset = (uintptr_t)ptr - block;
    out->check = gp_ipc_checksum(out);
    return GPOOL_OK;
}

gpool_status gpool_export_block(gpool_t *pool, const void *ptr, gpool_ipc_handle *out)
{
    return gp_named(export_block(pool, ptr, out), "gpool_export_block");
}

int gp_ipc_owner_free(gpool_t *pool, void *ptr, gpool_stream_t stream)
{
    gp_ipc *ipc = atomic_load_explicit(&pool->ipc, memory_order_acquire);
    /* a pool that only imports (or exported nothing yet) frees without the lock: a block is
     * exported before its owner frees it, by the freeing thread or one it synchronized with */
    if (!ipc || !ptr || !atomic_load_explicit(&ipc->nexports, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&ipc->mu);
    gp_ipc_export *e = ipc->exports, *pending = NULL;
    for (; e && (e->block != (uintptr_t)ptr || e->freed); e = e->next)
        if (e->block == (uintptr_t)ptr) pending = e;
    int deferred = 0;
    if (!e && pending) {
        /* freed again while its deferred free waits for importers (the owner's double free):
         * the block is freed once, at the last close; freeing it now would hand an importer's
         * memory to a new block and make the deferred free free that block */
        deferred = GP_IPC_FREED_AGAIN;
    } else if (e && e->opens) {
        e->freed = 1;
        e->free = free_mark(pool, stream);
        deferred = 1;
    } else if (e) {
        export_unlink(ipc, e);
        export_drop(e);
    }
    pthread_mutex_unlock(&ipc->mu);
    return deferred;
}

void gp_ipc_exports_forget(gp_ipc *ipc)
{
    for (gp_ipc_export *e = ipc->exports; e; e = e->next)
        for (size_t i = 0; i < e->npieces; i++)
            if (e->fds[i] >= 0) {
                close(e->fds[i]);
                e->fds[i] = -1;
            }
}

void gp_ipc_destroy(gpool_t *pool)
{
    gp_ipc *ipc = atomic_load(&pool->ipc);
    if (!ipc) return;
    gp_ipc_untrack(ipc);
    if (ipc->running) {
        ssize_t w = write(ipc->wake[1], "q", 1);
        (void)w;
        pthread_join(ipc->thread, NULL);
        close(ipc->listen_fd);
        close(ipc->wake[0]);
        close(ipc->wake[1]);
    }
    for (size_t i = 0; i < ipc->nconns; i++)
        close(ipc->conns[i].fd);
    for (size_t i = 0; i < ipc->npending; i++)
        close(ipc->pending[i]);
    free(ipc->conns);
    free(ipc->polls);
    /* importers that still have a block mapped keep its physical memory alive (the driver
     * frees it after the last mapping and handle go); the owner's blocks go with the pool */
    while (ipc->exports) {
        gp_ipc_export *e = ipc->exports;
        ipc->exports = e->next;
        uintptr_t block = e->freed ? e->block : 0;
        gp_ipc_free_mark mark = e->free;
        export_drop(e);
        if (block) free_deferred(pool, block, mark);
    }
    pthread_mutex_lock(&ipc->mu);
    gp_ipc_imports_drop(pool, ipc);
    pthread_mutex_unlock(&ipc->mu);
    pthread_mutex_destroy(&ipc->mu);
    atomic_store(&pool->ipc, NULL);
    free(ipc);
}
