/* Public structs that grow (gpool.h, "Structs that grow"): checking a caller's struct_size and
 * copying between the caller's layout and the library's; library-owned copies of parsed
 * strings. */
#ifndef GPOOL_STRUCTS_H
#define GPOOL_STRUCTS_H

#include <stddef.h>

#include "gpool.h"

/* Largest struct_size accepted: beyond it the field is taken as uninitialised. */
#define GP_STRUCT_SIZE_MAX ((size_t)65536)

/* The sizes of the 0.2 layouts (the first with struct_size): what struct_size 0 means where
 * it is allowed. Computed from the 0.2 structs' last fields (rounded up to the structs'
 * alignment, that of size_t), so they stay right when fields are appended. */
#define GP_SIZE_UP(n)            (((n) + _Alignof(size_t) - 1) / _Alignof(size_t) * _Alignof(size_t))
#define GP_ALLOC_PARAMS_SIZE_0_2 GP_SIZE_UP(offsetof(gpool_alloc_params, stream) + sizeof(void *))
#define GP_CONFIG_SIZE_0_2       GP_SIZE_UP(offsetof(gpool_config, peer_access) + sizeof(int))
#define GP_BLOCK_DESC_SIZE_0_2   GP_SIZE_UP(offsetof(gpool_block_desc, fell_back) + sizeof(int))

/* One public struct: its name and initializer macro (for messages), the library's sizeof, and
 * the size struct_size 0 stands for (0: struct_size 0 is an error). */
typedef struct gp_struct_type {
    const char *name, *macro;
    size_t ours, size0;
} gp_struct_type;

extern const gp_struct_type gp_type_config, gp_type_config_zero_ok, gp_type_alloc_params,
    gp_type_stats, gp_type_block_desc;

/* The caller's struct size, checked: struct_size 0 is replaced by t->size0 (an error when 0),
 * anything below sizeof(size_t) or above GP_STRUCT_SIZE_MAX is GPOOL_ERR_INVALID_ARG naming
 * the call, the struct and its macro. read: the library reads the struct, so bytes beyond
 * t->ours (a newer caller's fields) must be zero. */
gpool_status gp_struct_size(const gp_struct_type *t, const void *caller, const char *call, int read,
                            size_t *size);

/* Overlay the first min(size, t->ours) bytes of the caller's struct on full (already holding
 * the defaults), and set full's struct_size to t->ours. */
void gp_struct_read(const gp_struct_type *t, void *full, const void *caller, size_t size);

/* Copy full's fields into the first min(size, t->ours) bytes of the caller's struct, set its
 * struct_size to size, and (zero_tail: only when size came from the caller's header, never
 * when it was read from the struct) zero its bytes beyond t->ours. */
void gp_struct_write(const gp_struct_type *t, void *caller, const void *full, size_t size,
                     int zero_tail);

/* Set the caller's struct_size to size (a size from the caller's header: the _sized calls),
 * after checking it as gp_struct_size does; GPOOL_ERR_INVALID_ARG naming the call when caller
 * is NULL or size is out of range (then nothing is written). */
gpool_status gp_struct_set_size(const gp_struct_type *t, void *caller, size_t size,
                                const char *call);

/* A library-owned copy of s[0..len), NUL-terminated, shared by equal strings and freed when
 * the library is unloaded; NULL when out of memory. */
const char *gp_intern(const char *s, size_t len);

#endif
