/* The live pools of the process: thread caches check it at thread exit (is my pool still
 * there?), and GPOOL_LEAK_CHECK=1 reports pools never destroyed at process exit.
 * Lock order: the registry lock, then pool->lock, then arena locks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "error.h"
#include "pool.h"

typedef struct reg_entry {
    gpool_t *pool;
    uint64_t id;
} reg_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_entry *registry;
static size_t nregistry, cap_registry;
static int leak_check_armed;

void gp_registry_lock(void)
{
    pthread_mutex_lock(&registry_lock);
}
void gp_registry_unlock(void)
{
    pthread_mutex_unlock(&registry_lock);
}

int gp_registry_alive(gpool_t *pool, uint64_t id)
{
    for (size_t k = 0; k < nregistry; k++)
        if (registry[k].pool == pool && registry[k].id == id) return 1;
    return 0;
}

/* At exit (GPOOL_LEAK_CHECK=1): every pool still alive is a leak; say what it holds. Reads
 * counters only, no driver call (the driver may be shutting down too). */
static void leak_report(void)
{
    gp_registry_lock();
    for (size_t k = 0; k < nregistry; k++) {
        gpool_stats s = GPOOL_STATS_INIT;
        if (gpool_get_stats(registry[k].pool, &s) != GPOOL_OK) continue;
        fprintf(stderr,
                "gpool: leak check: pool %p (device %d) was never destroyed: %" PRIu64
                " live block%s, %" PRIu64 " bytes in use, %" PRIu64 " bytes of memory held\n",
                (void *)registry[k].pool, registry[k].pool->cfg.device,
                s.kind[GPOOL_MEM_AUTO].live_blocks, GP_PLURAL(s.kind[GPOOL_MEM_AUTO].live_blocks),
                s.kind[GPOOL_MEM_AUTO].in_use_bytes, s.kind[GPOOL_MEM_AUTO].reserved_bytes);
    }
    gp_registry_unlock();
}

int gp_pool_register(gpool_t *pool)
{
    gp_registry_lock();
    int ok = 1;
    if (nregistry == cap_registry) {
        size_t cap = cap_registry ? cap_registry * 2 : 8;
        reg_entry *nr = realloc(registry, cap * sizeof *nr);
        if (nr) {
            registry = nr;
            cap_registry = cap;
        } else {
            ok = 0;
        }
    }
    if (ok) registry[nregistry++] = (reg_entry){pool, pool->id};
    if (ok && !leak_check_armed) {
        const char *lc = getenv("GPOOL_LEAK_CHECK");
        if (lc && *lc && *lc != '0') atexit(leak_report);
        leak_check_armed = 1;
    }
    gp_registry_unlock();
    return ok ? 0 : -1;
}

void gp_pool_unregister(gpool_t *pool)
{
    gp_registry_lock();
    for (size_t i = 0; i < nregistry; i++)
        if (registry[i].pool == pool && registry[i].id == pool->id) {
            registry[i] = registry[--nregistry];
            break;
        }
    if (!nregistry) {
        free(registry);
        registry = NULL;
        cap_registry = 0;
    }
    gp_registry_unlock();
}

/* Pools of one device share pressure: before `self` reports out of memory, the other pools of
 * the process on its device give cached memory back. Stage 1 releases their unmapped cached
 * pages (no queued work can touch those); stage 2 trims them (gp_arena_trim: synchronizes
 * first, then unmaps pages that hold no live byte, so their streams stay safe). The registry
 * lock is held throughout: no pool can be destroyed meanwhile (gpool_destroy unregisters
 * first). Returns 1 when some pool held cached memory to give. */
int gp_registry_relieve(gpool_t *self, int stage)
{
    int any = 0;
    gp_registry_lock();
    for (size_t i = 0; i < nregistry; i++) {
        gpool_t *p = registry[i].pool;
        gp_arena *a = p->device;
        if (p == self || p->cfg.device != self->cfg.device || !a) continue;
        size_t held, idle;
        gp_arena_counters c;
        gp_arena_stats(a, &c, &held, &idle);
        if (held <= c.in_use && !idle) continue; /* nothing cached */
        any = 1;
        gp_tcache_flush_all(p);
        if (stage == 1) {
            gp_arena_lock(a);
            gp_arena_release_cached_locked(a);
            gp_arena_unlock(a);
        } else {
            gp_arena_trim(a, 0);
        }
    }
    gp_registry_unlock();
    gp_clear_error(); /* another pool's give-back failure is not this call's */
    return any;
}
