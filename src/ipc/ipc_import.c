/* The importing side of gpool's IPC: gpool_import_block maps another process's exported block
 * (descriptors from the exporter's helper thread, ipc_export.c), gpool_close_imported unmaps it
 * and closes the connection, which tells the exporter. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "error.h"
#include "fork.h"
#include "ipc.h"
#include "pool.h"

struct gp_ipc_import {
    gp_ipc_import *next;
    uintptr_t ptr;  /* what the caller got */
    uintptr_t base; /* the reservation */
    size_t span;
    size_t npieces, nmapped;
    uint64_t *off, *size;
    int conn; /* open while the import is */
    /* what the handle named: the same export opened again maps nothing new (refs counts the
     * opens, as cuIpcOpenMemHandle's reference count does) */
    uint32_t pid;
    uint64_t token, export_id, offset;
    size_t refs;
    uintptr_t block;   /* the exported block's start here */
    size_t block_size; /* and its size (the handle's block_size) */
};

static void import_free(gp_ipc_import *im)
{
    if (im->conn >= 0) close(im->conn);
    free(im->off);
    free(im->size);
    free(im);
}

/* Unmap what im mapped and give its address space back (context entered); 0 or the status. */
static gpool_status import_unmap(gpool_t *pool, gp_ipc_import *im)
{
    gpool_status st = GPOOL_OK;
    while (im->nmapped) {
        size_t i = im->nmapped - 1;
        CUresult r =
            GP_DRV(&pool->cnt, GPOOL_DRV_MEM_UNMAP,
                   pool->dc.drv->cuMemUnmap((CUdeviceptr)(im->base + im->off[i]), im->size[i]));
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemUnmap");
        im->nmapped--;
    }
    if (im->base) {
        CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_ADDRESS_FREE,
                            pool->dc.drv->cuMemAddressFree((CUdeviceptr)im->base, im->span));
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemAddressFree");
        im->base = 0;
    }
    return st;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
}

/* Import and map the descriptors of one batch at their offsets (context entered). */
static gpool_status map_batch(gpool_t *pool, gp_ipc_import *im, const gp_ipc_batch *b, int *fds)
{
    for (uint32_t k = 0; k < b->n; k++) {
        size_t i = im->nmapped;
        if (b->off[k] + b->size[k] > im->span || b->off[k] + b->size[k] < b->off[k])
            return gp_fail(GPOOL_ERR_IO, "the exporter sent a handle outside the block's span");
        im->off[i] = b->off[k];
        im->size[i] = b->size[k];
        CUmemGenericAllocationHandle h = 0;
        CUresult r =
            GP_DRV(&pool->cnt, GPOOL_DRV_OTHER,
                   pool->dc.drv->cuMemImportFromShareableHandle(
                       &h, (void *)(intptr_t)fds[k], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(fds[k]); /* the imported handle holds the memory */
        fds[k] = -1;
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemImportFromShareableHandle");
        r = GP_DRV(
            &pool->cnt, GPOOL_DRV_MEM_MAP,
            pool->dc.drv->cuMemMap((CUdeviceptr)(im->base + b->off[k]), b->size[k], 0, h, 0));
        /* the mapping keeps the memory; the handle is not needed any more (cuda.h, cuMemRelease) */
        GP_DRV(&pool->cnt, GPOOL_DRV_MEM_RELEASE, pool->dc.drv->cuMemRelease(h));
        if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemMap");
        im->nmapped++;
    }
    return GPOOL_OK;
}

/* The handle's own checks: a gpool handle, this version, unaltered, for this pool. */
static gpool_status check_handle(gpool_t *pool, const gpool_ipc_handle *h)
{
    if (h->magic != GPOOL_IPC_MAGIC)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "not a gpool IPC handle (magic %#x)",
                       (unsigned)h->magic);
    if (h->version != GPOOL_IPC_VERSION)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "IPC handle version %u, this gpool reads %d",
                       (unsigned)h->version, GPOOL_IPC_VERSION);
    if (h->check != gp_ipc_checksum(h) || h->reserved || h->offset >= h->block_size)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "forged or damaged IPC handle (checksum)");
    gp_ipc *mine = atomic_load(&pool->ipc);
    if (h->pid == (uint32_t)getpid() && mine && mine->token == h->token)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "the handle is this pool's own block: use the block's pointer");
    if ((int)h->device != pool->cfg.device)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "the handle is for device %u, the pool's device is %d (a foreign pool)",
                       (unsigned)h->device, pool->cfg.device);
    if (!pool->dc.drv->cuMemImportFromShareableHandle)
        return gp_fail(GPOOL_ERR_UNSUPPORTED, "the driver has no cuMemImportFromShareableHandle");
    return GPOOL_OK;
}

/* Connect to the exporter and ask for the export: *conn gets the connection. */
static gpool_status ask_exporter(const gpool_ipc_handle *h, gp_ipc_reply *rep, int *conn)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return gp_fail(GPOOL_ERR_IO, "socket: %s", strerror(errno));
    }
    struct sockaddr_un sun;
    size_t len = gp_ipc_sockaddr(&sun, h->pid, h->token);
    if (connect(fd, (struct sockaddr *)&sun, (socklen_t)len) != 0) {
        int e = errno;
        close(fd);
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "stale handle: the exporting pool (process %u) is gone or no longer exports "
                       "(connect: %s)",
                       (unsigned)h->pid, strerror(e));
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    gp_ipc_request rq = {.magic = GPOOL_IPC_MAGIC,
                         .op = GP_IPC_OP_OPEN,
                         .export_id = h->export_id,
                         .secret = h->secret};
    size_t nfds = 0;
    if (gp_ipc_send(fd, &rq, sizeof rq, NULL, 0) != 0 ||
        gp_ipc_recv(fd, rep, sizeof *rep, NULL, 0, &nfds) != 0 || rep->magic != GPOOL_IPC_MAGIC) {
        int e = errno;
        close(fd);
        return gp_fail(GPOOL_ERR_IO, "no answer from the exporting process %u: %s",
                       (unsigned)h->pid, e ? strerror(e) : "it closed the connection");
    }
    rep->message[sizeof rep->message - 1] = '\0';
    if (rep->status != GPOOL_OK) {
        close(fd);
        return gp_fail((gpool_status)rep->status, "the exporter refused: %s", rep->message);
    }
    if (!rep->npieces || rep->npieces > GP_IPC_MAX_PIECES || rep->block_off >= rep->span ||
        h->offset >= rep->span - rep->block_off) {
        close(fd);
        return gp_fail(GPOOL_ERR_IO, "the exporter's answer does not fit the handle");
    }
    *conn = fd;
    return GPOOL_OK;
}

static gpool_status import_in_ctx(gpool_t *pool, gp_ipc_import *im, const gp_ipc_reply *rep)
{
    size_t gran = pool->granularity;
    im->span = rep->span;
    if (im->span % gran)
        return gp_fail(GPOOL_ERR_IO,
                       "the exported span (%zu bytes) is not a multiple of this "
                       "pool's granularity %zu",
                       im->span, gran);
    CUdeviceptr base = 0;
    CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_ADDRESS_RESERVE,
                        pool->dc.drv->cuMemAddressReserve(&base, im->span, gran, 0, 0));
    if (r != CUDA_SUCCESS) return gp_cu_fail(r, "cuMemAddressReserve");
    im->base = (uintptr_t)base;
    static gp_ipc_batch b; /* large: not on the stack */
    static pthread_mutex_t b_lock = PTHREAD_MUTEX_INITIALIZER;
    gpool_status st = GPOOL_OK;
    pthread_mutex_lock(&b_lock);
    while (st == GPOOL_OK && im->nmapped < im->npieces) {
        int fds[GP_IPC_BATCH];
        size_t nfds = 0;
        if (gp_ipc_recv(im->conn, &b, sizeof b, fds, GP_IPC_BATCH, &nfds) != 0) {
            st = gp_fail(GPOOL_ERR_IO, "receiving the block's descriptors: %s",
                         errno ? strerror(errno) : "the exporter closed the connection");
            break;
        }
        if (b.n != nfds || !b.n || im->nmapped + b.n > im->npieces)
            st = gp_fail(GPOOL_ERR_IO, "the exporter sent %zu descriptors for %u handles", nfds,
                         (unsigned)b.n);
        else
            st = map_batch(pool, im, &b, fds);
        close_all(fds, nfds);
    }
    pthread_mutex_unlock(&b_lock);
    if (st != GPOOL_OK) return st;
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = pool->dc.dev},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = GP_DRV(&pool->cnt, GPOOL_DRV_MEM_SET_ACCESS,
               pool->dc.drv->cuMemSetAccess((CUdeviceptr)im->base, im->span, &acc, 1));
    return r == CUDA_SUCCESS ? GPOOL_OK : gp_cu_fail(r, "cuMemSetAccess");
}

static gpool_status import_block(gpool_t *pool, const gpool_ipc_handle *h, void **out)
{
    if (!pool || !h || !out) return gp_fail(GPOOL_ERR_INVALID_ARG, "a NULL argument");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_import_block");
    gpool_status st = check_handle(pool, h);
    if (st != GPOOL_OK) return st;
    gp_ipc *ipc = gp_ipc_get(pool);
    if (!ipc) return GPOOL_ERR_OUT_OF_MEMORY;
    /* already open in this pool: the same address, one more reference */
    pthread_mutex_lock(&ipc->mu);
    for (gp_ipc_import *o = ipc->imports; o; o = o->next)
        if (o->pid == h->pid && o->token == h->token && o->export_id == h->export_id &&
            o->offset == h->offset) {
            o->refs++;
            *out = (void *)o->ptr;
            pthread_mutex_unlock(&ipc->mu);
            return GPOOL_OK;
        }
    pthread_mutex_unlock(&ipc->mu);
    gp_ipc_reply rep;
    int conn = -1;
    if ((st = ask_exporter(h, &rep, &conn)) != GPOOL_OK) return st;
    gp_ipc_import *im = calloc(1, sizeof *im);
    if (im) {
        im->conn = conn;
        im->npieces = rep.npieces;
        im->off = calloc(rep.npieces, sizeof *im->off);
        im->size = calloc(rep.npieces, sizeof *im->size);
    }
    if (!im || !im->off || !im->size) {
        if (im)
            import_free(im);
        else
            close(conn);
        return gp_fail(GPOOL_ERR_OUT_OF_MEMORY, "out of host memory importing a block");
    }
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    st = import_in_ctx(pool, im, &rep);
    if (st != GPOOL_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", gpool_last_error());
        import_unmap(pool, im); /* best effort: a mapping made by this call */
        gp_dc_leave(&pool->dc, pushed);
        import_free(im);
        return gp_fail(st, "%s", why);
    }
    gp_dc_leave(&pool->dc, pushed);
    im->ptr = im->base + rep.block_off + h->offset;
    im->block = im->base + rep.block_off;
    im->block_size =
        h->block_size < im->span - rep.block_off ? h->block_size : im->span - rep.block_off;
    im->pid = h->pid;
    im->token = h->token;
    im->export_id = h->export_id;
    im->offset = h->offset;
    im->refs = 1;
    pthread_mutex_lock(&ipc->mu);
    for (gp_ipc_import *o = ipc->imports; o; o = o->next)
        if (o->pid == im->pid && o->token == im->token && o->export_id == im->export_id &&
            o->offset == im->offset) {
            /* another thread opened it meanwhile: keep that mapping, drop this one */
            o->refs++;
            *out = (void *)o->ptr;
            pthread_mutex_unlock(&ipc->mu);
            gp_dc_enter(&pool->dc, &pushed);
            import_unmap(pool, im);
            gp_dc_leave(&pool->dc, pushed);
            import_free(im);
            return GPOOL_OK;
        }
    im->next = ipc->imports;
    ipc->imports = im;
    pthread_mutex_unlock(&ipc->mu);
    *out = (void *)im->ptr;
    return GPOOL_OK;
}

gpool_status gpool_import_block(gpool_t *pool, const gpool_ipc_handle *handle, void **out)
{
    return gp_named(import_block(pool, handle, out), "gpool_import_block");
}

static gpool_status close_imported(gpool_t *pool, void *ptr)
{
    if (!pool || !ptr) return gp_fail(GPOOL_ERR_INVALID_ARG, "a NULL argument");
    if (gp_fork_parents_pool(pool->id)) return gp_fork_refuse("gpool_close_imported");
    gp_ipc *ipc = atomic_load(&pool->ipc);
    gp_ipc_import *im = NULL;
    if (ipc) {
        pthread_mutex_lock(&ipc->mu);
        for (gp_ipc_import **p = &ipc->imports; *p; p = &(*p)->next)
            if ((*p)->ptr == (uintptr_t)ptr) {
                im = *p;
                if (--im->refs) { /* opened again: the mapping stays for the other opens */
                    pthread_mutex_unlock(&ipc->mu);
                    return GPOOL_OK;
                }
                *p = im->next;
                break;
            }
        pthread_mutex_unlock(&ipc->mu);
    }
    if (!im)
        return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p is not an open import of this pool", ptr);
    int pushed;
    gp_dc_enter(&pool->dc, &pushed);
    /* no queued work of this process may still read what is unmapped */
    CUresult r = GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuCtxSynchronize());
    gpool_status st =
        r == CUDA_SUCCESS ? import_unmap(pool, im) : gp_cu_fail(r, "cuCtxSynchronize");
    gp_dc_leave(&pool->dc, pushed);
    if (st != GPOOL_OK) {
        pthread_mutex_lock(&ipc->mu);
        im->refs = 1;
        im->next = ipc->imports;
        ipc->imports = im;
        pthread_mutex_unlock(&ipc->mu);
        return st;
    }
    import_free(im); /* closes the connection: the exporter may free the block now */
    return GPOOL_OK;
}

int gp_ipc_imported_range(gpool_t *pool, uintptr_t p, uintptr_t *base, size_t *size)
{
    gp_ipc *ipc = pool ? atomic_load_explicit(&pool->ipc, memory_order_acquire) : NULL;
    if (!ipc) return 0;
    int found = 0;
    pthread_mutex_lock(&ipc->mu);
    for (gp_ipc_import *im = ipc->imports; im && !found; im = im->next)
        if (p - im->block < im->block_size) {
            *base = im->block;
            *size = im->block_size;
            found = 1;
        }
    pthread_mutex_unlock(&ipc->mu);
    return found;
}

gpool_status gpool_close_imported(gpool_t *pool, void *ptr)
{
    return gp_named(close_imported(pool, ptr), "gpool_close_imported");
}

void gp_ipc_imports_drop(gpool_t *pool, gp_ipc *ipc)
{
    int pushed;
    if (!ipc->imports) return;
    gp_dc_enter(&pool->dc, &pushed);
    GP_DRV(&pool->cnt, GPOOL_DRV_OTHER, pool->dc.drv->cuCtxSynchronize());
    while (ipc->imports) {
        gp_ipc_import *im = ipc->imports;
        ipc->imports = im->next;
        import_unmap(pool, im);
        import_free(im);
    }
    gp_dc_leave(&pool->dc, pushed);
}

void gp_ipc_imports_forget(gp_ipc *ipc)
{
    for (gp_ipc_import *im = ipc->imports; im; im = im->next)
        if (im->conn >= 0) {
            close(im->conn);
            im->conn = -1;
        }
}
