/* structs.c — public structs that grow (gpool.h, "Structs that grow"): struct_size checks and
 * copies between the caller's layout and the library's, the library-owned strings
 * gpool_config_parse() stores, and the deprecated names kept for one minor version. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "structs.h"

const gp_struct_type gp_type_config = {"gpool_config", "GPOOL_CONFIG_INIT", sizeof(gpool_config),
                                       0};
const gp_struct_type gp_type_config_zero_ok = {"gpool_config", "GPOOL_CONFIG_INIT",
                                               sizeof(gpool_config), GP_CONFIG_SIZE_0_2};
const gp_struct_type gp_type_alloc_params = {"gpool_alloc_params", "GPOOL_ALLOC_PARAMS_INIT",
                                             sizeof(gpool_alloc_params), GP_ALLOC_PARAMS_SIZE_0_2};
const gp_struct_type gp_type_stats = {"gpool_stats", "GPOOL_STATS_INIT", sizeof(gpool_stats), 0};
const gp_struct_type gp_type_block_desc = {"gpool_block_desc", "GPOOL_BLOCK_DESC_INIT",
                                           sizeof(gpool_block_desc), 0};

gpool_status gp_struct_size(const gp_struct_type *t, const void *caller, const char *call, int read,
                            size_t *size)
{
    size_t n;
    memcpy(&n, caller, sizeof n);
    if (n == 0 && t->size0) n = t->size0;
    if (n < sizeof(size_t) || n > GP_STRUCT_SIZE_MAX)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "%s: %s.struct_size is %zu, not the size of a %s (%zu to %zu bytes; this "
                       "library's is %zu): initialise it with %s",
                       call, t->name, n, t->name, sizeof(size_t), GP_STRUCT_SIZE_MAX, t->ours,
                       t->macro);
    if (read && n > t->ours) {
        const unsigned char *tail = (const unsigned char *)caller + t->ours;
        for (size_t i = 0; i < n - t->ours; i++)
            if (tail[i])
                return gp_fail(GPOOL_ERR_INVALID_ARG,
                               "%s: the %s has %zu bytes (struct_size), this library's only %zu, "
                               "and byte %zu beyond them is not zero: the program was built "
                               "with a newer gpool.h and sets a field this library (%s) lacks",
                               call, t->name, n, t->ours, t->ours + i, gpool_version());
    }
    *size = n;
    return GPOOL_OK;
}

void gp_struct_read(const gp_struct_type *t, void *full, const void *caller, size_t size)
{
    size_t n = size < t->ours ? size : t->ours;
    memcpy(full, caller, n);
    memcpy(full, &t->ours, sizeof t->ours);
}

gpool_status gp_struct_set_size(const gp_struct_type *t, void *caller, size_t size,
                                const char *call)
{
    if (!caller) return gp_fail(GPOOL_ERR_INVALID_ARG, "%s: out is NULL", call);
    if (size < sizeof size || size > GP_STRUCT_SIZE_MAX)
        return gp_fail(GPOOL_ERR_INVALID_ARG,
                       "%s: struct_size %zu is not the size of a %s (%zu to %zu bytes; this "
                       "library's is %zu)",
                       call, size, t->name, sizeof size, (size_t)GP_STRUCT_SIZE_MAX, t->ours);
    memcpy(caller, &size, sizeof size); /* struct_size is the first field */
    return GPOOL_OK;
}

void gp_struct_write(const gp_struct_type *t, void *caller, const void *full, size_t size,
                     int zero_tail)
{
    size_t n = size < t->ours ? size : t->ours;
    memcpy((char *)caller + sizeof size, (const char *)full + sizeof size, n - sizeof size);
    memcpy(caller, &size, sizeof size);
    if (zero_tail && size > t->ours) memset((char *)caller + t->ours, 0, size - t->ours);
}

/* ---------- library-owned strings ---------- */

struct interned {
    struct interned *next;
    char s[];
};
static struct interned *interned;
static pthread_mutex_t interned_lock = PTHREAD_MUTEX_INITIALIZER;

const char *gp_intern(const char *s, size_t len)
{
    pthread_mutex_lock(&interned_lock);
    struct interned *e = interned;
    while (e && (strncmp(e->s, s, len) || e->s[len]))
        e = e->next;
    if (!e && (e = malloc(sizeof *e + len + 1))) {
        memcpy(e->s, s, len);
        e->s[len] = 0;
        e->next = interned;
        interned = e;
    }
    pthread_mutex_unlock(&interned_lock);
    return e ? e->s : NULL;
}

__attribute__((destructor)) static void interned_free(void)
{
    pthread_mutex_lock(&interned_lock);
    while (interned) {
        struct interned *e = interned;
        interned = e->next;
        free(e);
    }
    pthread_mutex_unlock(&interned_lock);
}

/* ---------- deprecated names (gpool.h, "Deprecated names") ---------- */

/* As the function form of gpool_get_block_desc (struct_size read from the struct, never a
 * write past it), with struct_size 0 taken as the 0.2 layout. */
gpool_status gpool_block_info(gpool_t *pool, const void *ptr, gpool_block_desc *out)
{
    if (out && out->struct_size == 0) out->struct_size = GP_BLOCK_DESC_SIZE_0_2;
    return (gpool_get_block_desc)(pool, ptr, out);
}
