/* torch_captures.c — which CUDA graph captures the PyTorch hooks know to be running
 * (torch_captures.h).
 *
 * A stream the alloc hook saw capturing is remembered, per device, while it captures: a free on
 * any stream meanwhile may be a free inside that capture (PyTorch passes a block's own stream,
 * and a tensor made before torch.cuda.graph and dropped inside it has a stream that does not
 * capture), and no device synchronize may be made while it runs (one would invalidate it, on
 * any device: a global-mode capture prohibits the call process-wide). Forgotten once the stream
 * no longer captures. The list grows as needed; should it fail to, the hooks act as if a
 * capture were always running (frees held, no synchronize), which is safe and says so in the
 * stats (graph memory held). */
#include "torch_captures.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gpool_torch.h"
#include "stream.h"
#include "torch_batch.h"
#include "torch_pools.h"

static struct {
    uintptr_t *tag;
    size_t n, cap;
    int lost; /* a capture could not be listed: assume one runs from now on */
} captures[GP_TORCH_MAX_DEVICES];
static atomic_size_t listed; /* all devices, lost ones included: 0 skips the lock */
static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;

void gp_torch_capture_seen(int device, uintptr_t tag)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES) return;
    pthread_mutex_lock(&captures_lock);
    int known = 0;
    for (size_t i = 0; i < captures[device].n && !known; i++)
        known = captures[device].tag[i] == tag;
    if (!known && captures[device].n == captures[device].cap) {
        size_t cap = captures[device].cap ? 2 * captures[device].cap : 8;
        uintptr_t *t = realloc(captures[device].tag, cap * sizeof *t);
        if (t) {
            captures[device].tag = t;
            captures[device].cap = cap;
        } else if (!captures[device].lost) {
            captures[device].lost = 1;
            atomic_fetch_add(&listed, 1);
        }
    }
    if (!known && captures[device].n < captures[device].cap) {
        captures[device].tag[captures[device].n++] = tag;
        atomic_fetch_add(&listed, 1);
    }
    pthread_mutex_unlock(&captures_lock);
}

int gp_torch_captures_listed(void)
{
    return atomic_load_explicit(&listed, memory_order_relaxed) != 0;
}

size_t gp_torch_captures(int device, gpool_t *pool)
{
    if (device < 0 || device >= GP_TORCH_MAX_DEVICES || !pool ||
        !atomic_load_explicit(&listed, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&captures_lock);
    for (size_t i = 0; i < captures[device].n;) {
        if (gp_stream_capturing(pool, captures[device].tag[i])) {
            i++;
        } else { /* its capture ended */
            captures[device].tag[i] = captures[device].tag[--captures[device].n];
            atomic_fetch_sub(&listed, 1);
        }
    }
    size_t n = captures[device].n + (size_t)captures[device].lost;
    pthread_mutex_unlock(&captures_lock);
    return n;
}

int gp_torch_may_sync(int oom)
{
    for (int d = 0; d < GP_TORCH_MAX_DEVICES; d++) {
        gpool_t *pool = gpool_torch_pool(d);
        if (!pool) continue;
        if (gp_torch_captures(d, pool)) return 0;
        uintptr_t ws[8];
        size_t nws = 0, blind = gp_torch_windows(d, ws, 8, &nws, NULL);
        if (blind && !oom) return 0; /* a capture that has not allocated yet, perhaps */
        for (size_t i = 0; i < nws; i++)
            if (gp_stream_capturing(pool, ws[i])) return 0;
    }
    return 1;
}
