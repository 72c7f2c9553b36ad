/* preload_bufid.c — CU_POINTER_ATTRIBUTE_BUFFER_ID for gpool's blocks.
 *
 * cuda.h documents the attribute as "a process-wide unique ID for an allocated memory region"
 * (CUpointer_attribute; cuPointerGetAttribute). gpool's blocks share the driver's allocations
 * (a page holds many small blocks), so the driver's id would be the page's, the same for every
 * block in it; registration caches keyed on it (UCX, NCCL) would take one block's registration
 * for another's. Each block gets its own id instead, made on the first query of the block and
 * kept until the program frees it: a block allocated again at the same address gets a new one.
 * Ids have the top bit set, apart from the driver's own counters.
 *
 * Cost: nothing until the first BUFFER_ID query; then one map lookup under a mutex per query,
 * and per free one relaxed load (and the lookup only while ids exist). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "preload.h"
#include "ptrmap.h"

static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static gp_ptrmap ids;               /* block key -> id, under ids_lock */
static unsigned long long ids_made; /* under ids_lock */
atomic_long gpp_buffer_ids;         /* ids held in the map: 0 lets a free skip the lock */

int gpp_buffer_id(uintptr_t key, unsigned long long *id)
{
    pthread_mutex_lock(&ids_lock);
    uintptr_t have = (uintptr_t)gp_ptrmap_get(&ids, key);
    if (!have) {
        have = (uintptr_t)((1ull << 63) | ++ids_made);
        if (gp_ptrmap_put(&ids, key, (void *)have) != 0) {
            pthread_mutex_unlock(&ids_lock); /* no host memory: the driver's answer stands */
            return -1;
        }
        atomic_fetch_add_explicit(&gpp_buffer_ids, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&ids_lock);
    *id = have;
    return 0;
}

void gpp_buffer_id_drop_slow(uintptr_t key)
{
    pthread_mutex_lock(&ids_lock);
    if (gp_ptrmap_del(&ids, key))
        atomic_fetch_sub_explicit(&gpp_buffer_ids, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ids_lock);
}
