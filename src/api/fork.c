/* fork.c — a pool used in a child of fork() (fork.h). CUDA state does not survive fork (any
 * CUDA use between fork() and exec() is undefined; a real driver answers the child
 * CUDA_ERROR_NOT_INITIALIZED: sim/sim_state.c names the sources). So the parent's
 * pools are not the child's: gpool refuses every call on them in the child, at once, instead
 * of waiting for a lock a thread of the parent held at fork (the child has only the thread that
 * forked) or handing out a block the parent also owns.
 *
 * Cost: the child handler stores one number, nothing else (no lock, no copy); it is
 * registered the first time a pool is created, so a process that never creates one has none.
 * Every refused call is one relaxed load and a compare in the caller. */
#include <pthread.h>

#include "error.h"
#include "fork.h"

_Atomic uint64_t gp_fork_first_own_id;
static _Atomic uint64_t last_id; /* the largest pool id handed out in this process */
static pthread_once_t armed = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
    uint64_t id = atomic_load_explicit(&last_id, memory_order_relaxed);
    if (id) atomic_store_explicit(&gp_fork_first_own_id, id + 1, memory_order_relaxed);
}

static void arm(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

void gp_fork_note_pool(uint64_t id)
{
    pthread_once(&armed, arm);
    uint64_t seen = atomic_load_explicit(&last_id, memory_order_relaxed);
    while (seen < id && !atomic_compare_exchange_weak_explicit(
                            &last_id, &seen, id, memory_order_relaxed, memory_order_relaxed)) {
    }
}

gpool_status gp_fork_refuse(const char *call)
{
    return gp_fail(GPOOL_ERR_DRIVER,
                   "%s: the pool was created by the parent of this forked process; CUDA state "
                   "does not survive fork (the driver answers CUDA_ERROR_NOT_INITIALIZED): "
                   "create pools after fork, or start the child with exec",
                   call);
}
