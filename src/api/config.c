/* gpool_config: its defaults, its GPOOL_CONF keys (a table the reader in options.c walks) and
 * its checks. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "gpool.h"
#include "options.h"
/* the interposer's keys: gpool accepts, checks and ignores them (gpool_config_parse) */
#include "../preload/preload_options.h"
#include "pool.h"
#include "sizeclass.h"
#include "structs.h"

#undef gpool_config_default /* the function; the header's macro calls the _sized one */

/* Fill the first size bytes of cfg with the defaults; trusted: size came from the caller's
 * header, so bytes beyond this library's struct may be zeroed. */
static void config_defaults(gpool_config *cfg, size_t size, int trusted)
{
    const gpool_config defaults = GPOOL_CONFIG_INIT;
    gp_struct_write(&gp_type_config_zero_ok, cfg, &defaults, size, trusted);
}

gpool_status gpool_config_default_sized(gpool_config *cfg, size_t struct_size)
{
    if (!cfg) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_config_default: cfg is NULL");
    gpool_status st = gp_struct_set_size(&gp_type_config, cfg, struct_size, "gpool_config_default");
    if (st == GPOOL_OK) config_defaults(cfg, struct_size, 1);
    return st;
}

gpool_status gpool_config_default(gpool_config *cfg)
{
    if (!cfg) return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_config_default: cfg is NULL");
    size_t size; /* the caller's struct may be older (smaller) or newer than this library's */
    gpool_status st =
        gp_struct_size(&gp_type_config_zero_ok, cfg, "gpool_config_default", 0, &size);
    if (st == GPOOL_OK) config_defaults(cfg, size, 0);
    return st;
}

/* gpool_peer_access, in its order */
static const char *const peer_access_names[] = {"auto", "none", "all", NULL};

/* gpool_stream_reuse, in its order */
static const char *const stream_reuse_names[] = {"wait", "events", NULL};

/* gpool's GPOOL_CONF keys: README's GPOOL_CONF row and gpool_config_parse's comment list them. */
static const gp_option config_keys[] = {
    {.name = "device",
     .type = GP_OPT_INT,
     .offset = offsetof(gpool_config, device),
     .min = 0,
     .max = 1 << 16,
     .help = "CUDA device ordinal"},
    {.name = "release_threshold",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, release_threshold),
     .help = "cached bytes beyond live blocks kept after a free (0: keep all)"},
    {.name = "tcache_bytes",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, tcache_bytes),
     .help = "per-thread cache bound (0: off)"},
    {.name = "small_max",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, small_max),
     .help = "largest request served from small size classes"},
    {.name = "budget_device",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, budget[GPOOL_MEM_DEVICE]),
     .help = "device memory budget (0: no limit)"},
    {.name = "budget_pinned",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, budget[GPOOL_MEM_HOST_PINNED]),
     .help = "pinned host memory budget (0: no limit)"},
    {.name = "budget_mapped",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, budget[GPOOL_MEM_HOST_MAPPED]),
     .help = "mapped host memory budget (0: no limit)"},
    {.name = "va_reserve",
     .type = GP_OPT_SIZE,
     .offset = offsetof(gpool_config, va_reserve),
     .help = "bytes of address space per reservation (0: automatic)"},
    {.name = "verbose",
     .type = GP_OPT_INT,
     .offset = offsetof(gpool_config, verbose),
     .min = 0,
     .max = 1,
     .help = "1: print OOM and leak reports on stderr"},
    {.name = "trace",
     .type = GP_OPT_PATH,
     .offset = offsetof(gpool_config, trace_path),
     .help = "log every alloc/free as RMM replay CSV to this file"},
    {.name = "peer_access",
     .type = GP_OPT_CHOICE,
     .offset = offsetof(gpool_config, peer_access),
     .choices = peer_access_names,
     .help = "devices that get access to device memory"},
    {.name = "stream_reuse",
     .type = GP_OPT_CHOICE,
     .offset = offsetof(gpool_config, stream_reuse),
     .choices = stream_reuse_names,
     .help = "wait: a stream may wait for another's frees; events: only completed ones"},
    {.name = "ipc",
     .type = GP_OPT_INT,
     .offset = offsetof(gpool_config, ipc),
     .min = 0,
     .max = 1,
     .help = "1: device pages exportable to other processes (gpool_export_block)"},
};

const gp_option_table gp_config_options = {config_keys, sizeof config_keys / sizeof config_keys[0]};

gpool_status gp_config_check(const gpool_config *cfg)
{
    if (cfg->small_max > GP_SMALL_LIMIT)
        return gp_fail(GPOOL_ERR_CONFIG, "gpool_config: small_max %zu exceeds the limit %zu",
                       cfg->small_max, GP_SMALL_LIMIT);
    if (cfg->va_reserve && cfg->va_reserve < ((size_t)64 << 20))
        return gp_fail(GPOOL_ERR_CONFIG, "gpool_config: va_reserve must be 0 or at least 64M");
    if (cfg->device < 0) return gp_fail(GPOOL_ERR_CONFIG, "gpool_config: device must be >= 0");
    if (cfg->peer_access < GPOOL_PEER_AUTO || cfg->peer_access > GPOOL_PEER_ALL)
        return gp_fail(GPOOL_ERR_CONFIG, "gpool_config: peer_access %d is not a gpool_peer_access",
                       cfg->peer_access);
    if (cfg->stream_reuse < GPOOL_STREAM_REUSE_WAIT ||
        cfg->stream_reuse > GPOOL_STREAM_REUSE_EVENTS)
        return gp_fail(GPOOL_ERR_CONFIG,
                       "gpool_config: stream_reuse %d is not a gpool_stream_reuse",
                       cfg->stream_reuse);
    return GPOOL_OK;
}

gpool_status gp_config_apply(gpool_config *cfg, const char *conf, const gp_option_table *other,
                             void *other_target)
{
    gpool_config tmp = *cfg;
    const gp_option_table *tables[] = {&gp_config_options, other};
    void *targets[] = {&tmp, other_target};
    gpool_status st = gp_options_apply(conf, other ? 2 : 1, tables, targets);
    if (st == GPOOL_OK) st = gp_config_check(&tmp);
    if (st == GPOOL_OK) *cfg = tmp;
    return st;
}

static size_t option_width(gp_option_type t)
{
    switch (t) {
    case GP_OPT_SIZE:
        return sizeof(size_t);
    case GP_OPT_PATH:
        return sizeof(const char *);
    default:
        return sizeof(int);
    }
}

/* The keys (comma-separated, into out) whose fields, at or past byte size of the struct, a parse
 * changed from before to after; 0 when none. */
static int keys_beyond(const gpool_config *after, const gpool_config *before, size_t size,
                       char *out, size_t cap)
{
    size_t len = 0;
    int n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < gp_config_options.count; i++) {
        const gp_option *k = &gp_config_options.keys[i];
        size_t w = option_width(k->type);
        if (k->offset + w <= size ||
            !memcmp((const char *)after + k->offset, (const char *)before + k->offset, w))
            continue;
        if (len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", n ? ", " : "", k->name);
        n++;
    }
    if (!n &&
        memcmp((const char *)after + size, (const char *)before + size, sizeof *after - size)) {
        snprintf(out, cap, "a setting");
        n = 1;
    }
    return n;
}

gpool_status gpool_config_parse(gpool_config *cfg, const char *conf)
{
    if (!cfg || !conf)
        return gp_fail(GPOOL_ERR_INVALID_ARG, "gpool_config_parse: %s is NULL",
                       cfg ? "conf" : "cfg");
    size_t size; /* the caller's struct may be older (smaller) or newer than this library's */
    gpool_status st = gp_struct_size(&gp_type_config_zero_ok, cfg, "gpool_config_parse", 0, &size);
    if (st != GPOOL_OK) return st;
    gpool_config tmp = GPOOL_CONFIG_INIT, before;
    gp_struct_read(&gp_type_config_zero_ok, &tmp, cfg, size);
    memcpy(&before, &tmp, sizeof tmp);
    /* One GPOOL_CONF serves a process that has the LD_PRELOAD interposer and the library: the
     * interposer's declared keys are checked here as it checks them, and dropped. */
    st = gp_config_apply(&tmp, conf, &gpp_option_table, NULL);
    if (st != GPOOL_OK) return gp_named(st, "gpool_config_parse");
    char beyond[200];
    if (size < sizeof tmp && keys_beyond(&tmp, &before, size, beyond, sizeof beyond))
        return gp_fail(
            GPOOL_ERR_CONFIG,
            "gpool_config_parse: %s: not in the caller's gpool_config (struct_size %zu, this "
            "library's %zu): the program was built with an older gpool.h",
            beyond, size, sizeof tmp);
    gp_struct_write(&gp_type_config_zero_ok, cfg, &tmp, size, 0);
    return GPOOL_OK;
}
