/* preload_options.h — the LD_PRELOAD interposer's own GPOOL_CONF keys, declared as a table for
 * the common reader (src/api/options.h). preload.c applies them (gpool's keys go to its pools);
 * the PyTorch hooks (src/torch/torch.c) read the same GPOOL_CONF with this table and a NULL target,
 * so these keys are checked and ignored there. README's interposer table lists them. */
#ifndef GPOOL_PRELOAD_OPTIONS_H
#define GPOOL_PRELOAD_OPTIONS_H

#include <stddef.h>

#include "options.h"

/* How a block freed by cudaFree/cuMemFree becomes reusable (preload.c explains each). */
enum { GPP_CUDAFREE_BATCH, GPP_CUDAFREE_STREAM, GPP_CUDAFREE_SYNC };

/* Where the interposer's keys go. All zero is the default. */
typedef struct gpp_options {
    int disable;        /* disable=1: pass every call through to CUDA */
    int sync_free;      /* sync_free=1: as cudafree=sync */
    int free_mode;      /* cudafree=batch|stream|sync: GPP_CUDAFREE_* */
    size_t batch_bytes; /* cudafree_batch=SIZE; 0 = 1/64 of device memory, at least 64 MiB */
    int flush_events;   /* cudafree_flush=sync|event: 1 for event */
} gpp_options;

static const char *const gpp_free_modes[] = {"batch", "stream", "sync", NULL}; /* GPP_CUDAFREE_* */
static const char *const gpp_flush_modes[] = {"sync", "event", NULL};

static const gp_option gpp_option_keys[] = {
    {.name = "disable",
     .type = GP_OPT_BOOL,
     .offset = offsetof(gpp_options, disable),
     .help = "1: pass every call through to CUDA"},
    {.name = "sync_free",
     .type = GP_OPT_BOOL,
     .offset = offsetof(gpp_options, sync_free),
     .help = "1: as cudafree=sync"},
    {.name = "cudafree",
     .type = GP_OPT_CHOICE,
     .offset = offsetof(gpp_options, free_mode),
     .choices = gpp_free_modes,
     .help = "how a cudaFree/cudaFreeHost'd block becomes reusable: after a legacy-stream "
             "event record, per batch once a non-blocking stream exists (batch; stream: "
             "the same, with a notice), or after a device synchronize (sync)"},
    {.name = "cudafree_batch",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpp_options, batch_bytes),
     .help = "bytes a batch collects before its synchronize (0: 1/64 of the device)"},
    {.name = "cudafree_flush",
     .type = GP_OPT_CHOICE,
     .offset = offsetof(gpp_options, flush_events),
     .choices = gpp_flush_modes,
     .help = "a batch's flush synchronizes the device, or records events"},
};

static const gp_option_table gpp_option_table = {gpp_option_keys, sizeof gpp_option_keys /
                                                                      sizeof gpp_option_keys[0]};

#endif
