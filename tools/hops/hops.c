/* The layers one request passes: runs warm gpool_alloc and gpool_free calls of each kind of
 * block against a libgpool built with -finstrument-functions -fno-inline (make hops), records
 * every library function entered during each measured call and the pthread_mutex_lock calls it
 * made, and prints the chain of src/ folders (api, policy, kinds, placement, streams, backends)
 * the call went through. A test instrument for issue 24's "each layer once, in order": the
 * figures in the closing notes come from it. Simulated driver; one thread. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"

#define MAX_CALLS 8192

static int recording;
static int depth;
static int ncalls, nlocks;
static void *fn_at[MAX_CALLS];
static int depth_at[MAX_CALLS];

#define NOINSTR __attribute__((no_instrument_function))

NOINSTR void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    depth++;
    if (recording && ncalls < MAX_CALLS) {
        depth_at[ncalls] = depth;
        fn_at[ncalls++] = fn;
    }
}

NOINSTR void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)fn, (void)site;
    depth--;
}

NOINSTR int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (recording) nlocks++;
    return real(m);
}

/* The src/ folder of a path such as ".../src/kinds/kind_host.c", or NULL. */
static const char *layer_of(char *path, char *out, size_t cap)
{
    char *src = strstr(path, "src/");
    if (!src) return NULL;
    char *slash = strchr(src + 4, '/');
    if (!slash) return NULL;
    snprintf(out, cap, "%.*s", (int)(slash - src - 4), src + 4);
    return out;
}

/* Print the measured call: its functions (with -v) and its chain of layers. */
static void report(const char *what, int verbose)
{
    char cmd[MAX_CALLS * 20 + 256], line[1024], fn[512], layer[64], last[64] = "";
    const char *lib = NULL;
    size_t len = 0;
    int keep[MAX_CALLS], nkeep = 0, hops = 0;
    for (int i = 0; i < ncalls; i++) {
        Dl_info di;
        if (!dladdr(fn_at[i], &di) || !strstr(di.dli_fname, "libgpool")) continue;
        lib = di.dli_fname;
        keep[nkeep++] = i;
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " 0x%lx",
                                (unsigned long)((char *)fn_at[i] - (char *)di.dli_fbase));
    }
    printf("== %s: %d functions, %d mutex locks\n  ", what, nkeep, nlocks);
    if (lib) {
        char head[1024];
        snprintf(head, sizeof head, "addr2line -f -e %s", lib);
        memmove(cmd + strlen(head), cmd, len + 1);
        memcpy(cmd, head, strlen(head));
        FILE *p = popen(cmd, "r");
        for (int k = 0; p && k < nkeep && fgets(fn, sizeof fn, p) && fgets(line, sizeof line, p);
             k++) {
            fn[strcspn(fn, "\n")] = 0;
            if (verbose) fprintf(stderr, "%*s%s %s", 2 * depth_at[keep[k]], "", fn, line);
            if (!layer_of(line, layer, sizeof layer) || !strcmp(layer, last)) continue;
            printf("%s%s", hops++ ? " > " : "", layer);
            snprintf(last, sizeof last, "%s", layer);
        }
        if (p) pclose(p);
    }
    printf("\n  (%d layer%s entered)\n", hops, hops == 1 ? "" : "s");
    ncalls = nlocks = 0;
}

#define MEASURE(what, call)                                                                        \
    do {                                                                                           \
        recording = 1;                                                                             \
        gpool_status st_ = call;                                                                   \
        recording = 0;                                                                             \
        if (st_ != GPOOL_OK) {                                                                     \
            fprintf(stderr, "hops: %s: %s\n", what, gpool_last_error());                           \
            exit(1);                                                                               \
        }                                                                                          \
        report(what, verbose);                                                                     \
    } while (0)

/* Warm pairs of size bytes of kind, then one measured alloc and free. */
static void pair(gpool_t *pool, gpool_mem_kind kind, size_t size, const char *name, int verbose)
{
    gpool_alloc_params prm = GPOOL_ALLOC_PARAMS_INIT;
    prm.kind = kind;
    void *p;
    for (int i = 0; i < 16; i++) {
        if (gpool_alloc(pool, size, &prm, &p) != GPOOL_OK || gpool_free(pool, p) != GPOOL_OK) {
            fprintf(stderr, "hops: %s\n", gpool_last_error());
            exit(1);
        }
    }
    char what[128];
    snprintf(what, sizeof what, "gpool_alloc %s (%zu B, warm)", name, size);
    MEASURE(what, gpool_alloc(pool, size, kind == GPOOL_MEM_DEVICE ? NULL : &prm, &p));
    snprintf(what, sizeof what, "gpool_free %s (%zu B)", name, size);
    MEASURE(what, gpool_free(pool, p));
}

int main(int argc, char **argv)
{
    int verbose = argc > 1 && !strcmp(argv[1], "-v");
    gpool_t *pool;
    if (gpool_create(NULL, &pool) != GPOOL_OK) {
        fprintf(stderr, "hops: %s\n", gpool_last_error());
        return 1;
    }
    printf("hops (device: simulated): layers each call passes, in order\n");
    pair(pool, GPOOL_MEM_DEVICE, 512, "device small", verbose);
    pair(pool, GPOOL_MEM_DEVICE, (size_t)4 << 20, "device large", verbose);
    pair(pool, GPOOL_MEM_HOST_PINNED, 512, "pinned small", verbose);
    pair(pool, GPOOL_MEM_HOST_PINNED, (size_t)1 << 20, "pinned large", verbose);
    pair(pool, GPOOL_MEM_HOST_MAPPED, 512, "mapped small", verbose);
    return gpool_destroy(pool) == GPOOL_OK ? 0 : 1;
}
