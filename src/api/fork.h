/* fork.h — pools in a child process. A pool created before fork() belongs to the parent: its
 * driver state (context, mappings, streams) does not survive fork, its locks may have been
 * held by a thread the child does not have, its thread caches hold the parent's blocks. The
 * public calls on such a pool answer GPOOL_ERR_DRIVER at once (fork.c), touching nothing;
 * pools the child creates itself work as anywhere. */
#ifndef GPOOL_FORK_H
#define GPOOL_FORK_H

#include <stdatomic.h>
#include <stdint.h>

#include "gpool.h"

/* Pool ids below this were created before the last fork (0 in a process that never forked
 * after creating a pool: every id is >= 1). Written only by the child handler. */
extern _Atomic uint64_t gp_fork_first_own_id;

/* A pool with this id was created: arm the fork handler (once per process). Thread-safe. */
void gp_fork_note_pool(uint64_t id);

/* 1 when the pool with this id is a parent's (created before this process was forked). One
 * relaxed load: the hot paths call it. */
static inline int gp_fork_parents_pool(uint64_t id)
{
    return __builtin_expect(id < atomic_load_explicit(&gp_fork_first_own_id, memory_order_relaxed),
                            0);
}

/* GPOOL_ERR_DRIVER with the message that says why ("call: the pool was created by the parent
 * of this forked process ..."). */
gpool_status gp_fork_refuse(const char *call);

#endif
