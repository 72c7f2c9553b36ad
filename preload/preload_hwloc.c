/* preload_hwloc.c — hwloc, loaded by the interposer only when gpool first uses it. gpool asks
 * hwloc for the NUMA node nearest a GPU when it places pinned host memory
 * (src/backends/host_numa.c); most processes started under LD_PRELOAD (shells, compilers,
 * nvidia-smi) never get there, and linking hwloc would make each of them load libhwloc, libudev and
 * libm at start-up (about 1 ms of CPU per process, gpool-bench startup). So libgpool_preload.so
 * does not link hwloc: the functions gpool calls are defined here, and the first call dlopens
 * libhwloc.so.15 (hwloc 2.x; RTLD_LOCAL, found as the dynamic loader would find a NEEDED entry) and
 * resolves them all. Where hwloc is absent, hwloc_topology_init fails and gpool places host memory
 * without it, as src/backends/host_numa.c already does when hwloc has no data (the others then are
 * never reached; they answer failure all the same). libgpool.so keeps linking hwloc. */
#include <dlfcn.h>
#include <hwloc.h>
#include <pthread.h>

#include "preload.h"

/* X(return type, name, (parameters), (arguments), answer without hwloc) */
#define GPP_HWLOC_FUNCTIONS(X)                                                                     \
    X(int, hwloc_topology_init, (hwloc_topology_t * t), (t), -1)                                   \
    X(int, hwloc_topology_load, (hwloc_topology_t t), (t), -1)                                     \
    X(const struct hwloc_topology_support *, hwloc_topology_get_support, (hwloc_topology_t t),     \
      (t), NULL)                                                                                   \
    X(int, hwloc_topology_set_components, (hwloc_topology_t t, unsigned long f, const char *n),    \
      (t, f, n), -1)                                                                               \
    X(int, hwloc_topology_set_io_types_filter, (hwloc_topology_t t, enum hwloc_type_filter_e f),   \
      (t, f), -1)                                                                                  \
    X(int, hwloc_topology_set_type_filter,                                                         \
      (hwloc_topology_t t, hwloc_obj_type_t y, enum hwloc_type_filter_e f), (t, y, f), -1)         \
    X(int, hwloc_get_type_depth, (hwloc_topology_t t, hwloc_obj_type_t y), (t, y),                 \
      HWLOC_TYPE_DEPTH_UNKNOWN)                                                                    \
    X(hwloc_obj_t, hwloc_get_obj_by_depth, (hwloc_topology_t t, int d, unsigned i), (t, d, i),     \
      NULL)                                                                                        \
    X(const char *, hwloc_obj_type_string, (hwloc_obj_type_t y), (y), "unknown")                   \
    X(int, hwloc_set_area_membind,                                                                 \
      (hwloc_topology_t t, const void *a, size_t l, hwloc_const_bitmap_t s,                        \
       hwloc_membind_policy_t p, int f),                                                           \
      (t, a, l, s, p, f), -1)                                                                      \
    X(hwloc_bitmap_t, hwloc_bitmap_dup, (hwloc_const_bitmap_t b), (b), NULL)                       \
    X(int, hwloc_bitmap_first, (hwloc_const_bitmap_t b), (b), -1)                                  \
    X(int, hwloc_bitmap_iszero, (hwloc_const_bitmap_t b), (b), 1)

static struct {
#define GPP_HWLOC_FIELD(ret, name, params, args, fail) ret(*name) params;
    GPP_HWLOC_FUNCTIONS(GPP_HWLOC_FIELD)
#undef GPP_HWLOC_FIELD
    void (*hwloc_bitmap_free)(hwloc_bitmap_t);
    void (*hwloc_topology_destroy)(hwloc_topology_t);
} hw;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void hw_load(void)
{
    void *lib = dlopen("libhwloc.so.15", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libhwloc.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    int all = 1;
#define GPP_HWLOC_RESOLVE(ret, name, params, args, fail)                                           \
    all &= (*(void **)&hw.name = gpp_real_dlsym(lib, #name)) != NULL;
    GPP_HWLOC_FUNCTIONS(GPP_HWLOC_RESOLVE)
    GPP_HWLOC_RESOLVE(void, hwloc_bitmap_free, , , )
    GPP_HWLOC_RESOLVE(void, hwloc_topology_destroy, , , )
#undef GPP_HWLOC_RESOLVE
    if (!all) hw.hwloc_topology_init = NULL; /* an hwloc without one of them: none is used */
}

#define GPP_HWLOC_DEFINE(ret, name, params, args, fail)                                            \
    ret name params                                                                                \
    {                                                                                              \
        pthread_once(&hw_once, hw_load);                                                           \
        return hw.hwloc_topology_init && hw.name ? hw.name args : (fail);                          \
    }
GPP_HWLOC_FUNCTIONS(GPP_HWLOC_DEFINE)
#undef GPP_HWLOC_DEFINE

void hwloc_bitmap_free(hwloc_bitmap_t b)
{
    pthread_once(&hw_once, hw_load);
    if (hw.hwloc_topology_init && b) hw.hwloc_bitmap_free(b);
}

void hwloc_topology_destroy(hwloc_topology_t t)
{
    pthread_once(&hw_once, hw_load);
    if (hw.hwloc_topology_init && t) hw.hwloc_topology_destroy(t);
}
