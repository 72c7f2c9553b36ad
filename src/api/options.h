/* options.h — the GPOOL_CONF reader: a "key=value,key=value" string applied through tables of
 * keys. Each component declares its own keys (name, type, where the value goes, help text):
 * gpool's are gp_config_options (config.c, into a gpool_config); the LD_PRELOAD interposer
 * declares its own (preload/preload_options.h) and passes both tables to one reader, so a key,
 * a size or a bad value reads the same wherever GPOOL_CONF is read. An unknown key is an
 * error everywhere. */
#ifndef GPOOL_OPTIONS_H
#define GPOOL_OPTIONS_H

#include <stddef.h>

#include "gpool.h"

typedef enum {
    GP_OPT_SIZE,   /* a byte count (size_parse.h) into a size_t */
    GP_OPT_INT,    /* a decimal integer in [min, max] into an int */
    GP_OPT_BOOL,   /* 0 or 1 into an int */
    GP_OPT_CHOICE, /* one of choices[] into an int: its index */
    GP_OPT_PATH,   /* a string into a const char *: a library-owned copy (gp_intern); "" = NULL */
} gp_option_type;

typedef struct gp_option {
    const char *name;
    gp_option_type type;
    size_t offset;              /* where the value goes: this offset in the table's target */
    int min, max;               /* GP_OPT_INT bounds */
    const char *const *choices; /* GP_OPT_CHOICE: the names, NULL-terminated */
    const char *help;           /* one line: what the key does (README's tables say the same) */
} gp_option;

typedef struct gp_option_table {
    const gp_option *keys;
    size_t count;
} gp_option_table;

/* Apply conf to targets[i] through tables[i], i < n. A NULL target: its table's keys are
 * checked and their values dropped. Items are trimmed of spaces and tabs around the key and
 * the value; empty items are skipped. The whole string is checked before anything is written,
 * so on error no target changes. GPOOL_ERR_CONFIG names the key and the bad value (an unknown
 * key's message lists the known ones). */
gpool_status gp_options_apply(const char *conf, size_t n, const gp_option_table *const tables[],
                              void *const targets[]);

/* gpool_config's keys. */
extern const gp_option_table gp_config_options;

/* gpool_config_parse with one more table: gpool's keys go into *cfg, `other`'s into
 * other_target (NULL: checked and ignored); then gp_config_check. *cfg is unchanged on
 * error. */
gpool_status gp_config_apply(gpool_config *cfg, const char *conf, const gp_option_table *other,
                             void *other_target);

#endif
