/* gpool's IPC across fork(): Linux has no close-on-fork, so a child would keep every socket
 * of its parent's IPC state open -- the import connections (the exporter would think a block
 * the parent closed still open until the child exits) and the exporter's listening socket
 * (importers would connect to a socket nobody serves). The child cannot use its parent's pools
 * (a child forked after CUDA initialised cannot use the parent's context), so a fork handler
 * closes all of them in the child. */
#include <pthread.h>
#include <unistd.h>

#include "ipc.h"

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static gp_ipc *all; /* every pool's IPC state, through all_next */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* prepare: every state consistent at the fork (no thread halfway through a change) */
static void before_fork(void)
{
    pthread_mutex_lock(&all_lock);
    for (gp_ipc *ipc = all; ipc; ipc = ipc->all_next)
        pthread_mutex_lock(&ipc->mu);
}

static void parent_after_fork(void)
{
    for (gp_ipc *ipc = all; ipc; ipc = ipc->all_next)
        pthread_mutex_unlock(&ipc->mu);
    pthread_mutex_unlock(&all_lock);
}

static void child_after_fork(void)
{
    for (gp_ipc *ipc = all; ipc; ipc = ipc->all_next) {
        if (ipc->running) { /* the helper thread is not in the child */
            close(ipc->listen_fd);
            close(ipc->wake[0]);
            close(ipc->wake[1]);
            ipc->listen_fd = ipc->wake[0] = ipc->wake[1] = -1;
            ipc->running = 0;
        }
        for (size_t i = 0; i < ipc->nconns; i++)
            close(ipc->conns[i].fd);
        ipc->nconns = 0;
        for (size_t i = 0; i < ipc->npending; i++)
            close(ipc->pending[i]);
        ipc->npending = 0;
        gp_ipc_imports_forget(ipc);
        gp_ipc_exports_forget(ipc);
        pthread_mutex_unlock(&ipc->mu);
    }
    pthread_mutex_unlock(&all_lock);
}

static void register_handlers(void)
{
    pthread_atfork(before_fork, parent_after_fork, child_after_fork);
}

void gp_ipc_track(gp_ipc *ipc)
{
    pthread_once(&once, register_handlers);
    pthread_mutex_lock(&all_lock);
    ipc->all_next = all;
    all = ipc;
    pthread_mutex_unlock(&all_lock);
}

void gp_ipc_untrack(gp_ipc *ipc)
{
    pthread_mutex_lock(&all_lock);
    for (gp_ipc **p = &all; *p; p = &(*p)->all_next)
        if (*p == ipc) {
            *p = ipc->all_next;
            break;
        }
    pthread_mutex_unlock(&all_lock);
}
