/* torch_captures.h — the CUDA graph captures the PyTorch hooks know to be running
 * (torch_captures.c), and whether a device synchronize is safe now. */
#ifndef GPOOL_TORCH_CAPTURES_H
#define GPOOL_TORCH_CAPTURES_H

#include <stddef.h>
#include <stdint.h>

#include "gpool.h"

/* Stream tag, seen capturing by the alloc hook on device: remembered while it captures. */
void gp_torch_capture_seen(int device, uintptr_t tag);

/* Is a capture remembered on any device (running, or ended and not yet forgotten)? One relaxed
 * load. */
int gp_torch_captures_listed(void);

/* How many remembered captures still run on device (pool: the device's), the ended ones
 * forgotten. Cost: nothing while none is remembered anywhere; else a lock and one
 * cuStreamIsCapturing each. */
size_t gp_torch_captures(int device, gpool_t *pool);

/* 1 when a device synchronize cannot invalidate a capture: no remembered capture runs on any
 * device (a global-mode capture prohibits the call process-wide), no pool window was begun on
 * a stream that captures now, and, unless oom (memory is short: waiting is the alternative to
 * failing), no window begun without a stream is open (torch 2.3+: a capture that has not
 * allocated yet, or a torch.cuda.use_mem_pool block, which the hooks cannot tell apart). */
int gp_torch_may_sync(int oom);

#endif
