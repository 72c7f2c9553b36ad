/* The layers one request passes: runs warm gpool_alloc and gpool_free calls of each kind of
 * block against a libgpool built with -finstrument-functions -fno-inline (make hops), records
 * every library function entered during each measured call and the pthread_mutex_lock calls it
 * made, and prints the chain of src/ folders (api, policy, kinds, placement, streams, backends)
 * the call went through. A test instrument for issue 24's "each layer once, in order": the
 * figures in the closing notes come from it, and it exits 1 when any measured call made an
 * upcall (a function calling into a layer above its own). Simulated driver; one thread. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"

#define MAX_CALLS 8192

static int recording;
static int depth;
static int ncalls, nlocks, total_upcalls;
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

/* Where each library function is declared (nm -l: the declaring file, which addr2line of an
 * entry address does not always give for header inlines emitted out of line), by offset. */
#define MAX_FNS 8192
static unsigned long decl_off[MAX_FNS];
static char *decl_path[MAX_FNS];
static int ndecl = -1;

static const char *decl_of(const char *lib, unsigned long off)
{
    if (ndecl < 0) {
        char cmd[1200], line[1200];
        snprintf(cmd, sizeof cmd, "nm -l %s", lib);
        FILE *p = popen(cmd, "r");
        ndecl = 0;
        while (p && ndecl < MAX_FNS && fgets(line, sizeof line, p)) {
            unsigned long a;
            char type, name[512], path[600];
            if (sscanf(line, "%lx %c %511s %599s", &a, &type, name, path) != 4) continue;
            decl_off[ndecl] = a;
            decl_path[ndecl++] = strdup(path);
        }
        if (p) pclose(p);
    }
    for (int i = 0; i < ndecl; i++)
        if (decl_off[i] == off) return decl_path[i];
    return NULL;
}

/* Layers from the top down: a call from one layer into a higher one is an upcall. */
static const char *const ranks[] = {"api", "policy", "kinds", "placement", "streams", "backends"};

static int rank_of(const char *layer)
{
    for (int i = 0; i < (int)(sizeof ranks / sizeof *ranks); i++)
        if (!strcmp(layer, ranks[i])) return i;
    return -1; /* torch, ipc: beside the stack, not ranked */
}

/* Print the measured call: its functions (with -v), its chain of layers (in the order their
 * functions were entered, returns included), the layers it reached from the top in call order,
 * and every upcall (a function calling into a layer above its own: what "each layer once, in
 * order" rules out). */
static void report(FILE *out, const char *what, int verbose)
{
    char cmd[MAX_CALLS * 20 + 256], line[1024], fn[512], layer[64], last[64] = "";
    const char *lib = NULL;
    size_t len = 0;
    int keep[MAX_CALLS], nkeep = 0, hops = 0, nup = 0;
    unsigned long off_of[MAX_CALLS];
    int rank_at[64] = {0}, open_at[64] = {0}; /* the function open at each depth: its rank */
    char fn_at_depth[64][96] = {{0}}, ups[16][256];
    for (int i = 0; i < ncalls; i++) {
        Dl_info di;
        if (!dladdr(fn_at[i], &di) || !strstr(di.dli_fname, "libgpool")) continue;
        lib = di.dli_fname;
        off_of[nkeep] = (unsigned long)((char *)fn_at[i] - (char *)di.dli_fbase);
        keep[nkeep++] = i;
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " 0x%lx", off_of[nkeep - 1]);
    }
    fprintf(out, "== %s: %d functions, %d mutex locks\n  ", what, nkeep, nlocks);
    if (lib) {
        char head[1024];
        snprintf(head, sizeof head, "addr2line -f -e %s", lib);
        memmove(cmd + strlen(head), cmd, len + 1);
        memcpy(cmd, head, strlen(head));
        FILE *p = popen(cmd, "r");
        for (int k = 0; p && k < nkeep && fgets(fn, sizeof fn, p) && fgets(line, sizeof line, p);
             k++) {
            fn[strcspn(fn, "\n")] = 0;
            const char *decl = decl_of(lib, off_of[k]);
            if (decl) snprintf(line, sizeof line, "%s\n", decl);
            if (verbose) fprintf(stderr, "%*s%s %s", 2 * depth_at[keep[k]], "", fn, line);
            if (!layer_of(line, layer, sizeof layer)) continue;
            int d = depth_at[keep[k]], r = rank_of(layer);
            if (d > 0 && d < 64) {
                int caller = open_at[d - 1] ? rank_at[d - 1] : -1; /* the open function one up */
                if (r >= 0 && caller >= 0 && r < caller && nup < 16)
                    snprintf(ups[nup++], sizeof ups[0], "%.80s (%s) -> %.80s (%s)",
                             fn_at_depth[d - 1], ranks[caller], fn, layer);
                rank_at[d] = r >= 0 ? r : rank_at[d - 1];
                open_at[d] = 1;
                snprintf(fn_at_depth[d], sizeof fn_at_depth[d], "%.90s", fn);
            }
            if (!strcmp(layer, last)) continue;
            fprintf(out, "%s%s", hops++ ? " > " : "", layer);
            snprintf(last, sizeof last, "%s", layer);
        }
        if (p) pclose(p);
    }
    fprintf(out, "\n  (%d layer%s entered; %d upcall%s)\n", hops, hops == 1 ? "" : "s", nup,
            nup == 1 ? "" : "s");
    for (int i = 0; i < nup; i++)
        fprintf(out, "  upcall: %s\n", ups[i]);
    total_upcalls += nup;
    ncalls = nlocks = 0;
}

#define NMEASURED 8 /* measured pairs per kind of block: a warm call is not always the same */

/* One measured call: its report into *text (malloc'd). */
#define MEASURE(what, call, text)                                                                  \
    do {                                                                                           \
        size_t len_;                                                                               \
        FILE *out_ = open_memstream(text, &len_);                                                  \
        recording = 1;                                                                             \
        gpool_status st_ = call;                                                                   \
        recording = 0;                                                                             \
        if (st_ != GPOOL_OK || !out_) {                                                            \
            fprintf(stderr, "hops: %s: %s\n", what, gpool_last_error());                           \
            exit(1);                                                                               \
        }                                                                                          \
        report(out_, what, verbose);                                                               \
        fclose(out_);                                                                              \
    } while (0)

/* Print each distinct report of n once, with how many of the calls it describes. */
static void print_distinct(char **text, int n)
{
    for (int i = 0; i < n; i++) {
        int same = 0, first = 1;
        for (int j = 0; j < n; j++) {
            if (strcmp(text[i], text[j])) continue;
            same++;
            if (j < i) first = 0;
        }
        if (!first) continue;
        printf("%s  (%d of %d measured calls)\n", text[i], same, n);
    }
    for (int i = 0; i < n; i++)
        free(text[i]);
}

/* Warm pairs of size bytes of kind, then NMEASURED measured allocs and frees. */
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
    char what[128], *alloc_text[NMEASURED], *free_text[NMEASURED];
    for (int i = 0; i < NMEASURED; i++) {
        snprintf(what, sizeof what, "gpool_alloc %s (%zu B, warm)", name, size);
        MEASURE(what, gpool_alloc(pool, size, kind == GPOOL_MEM_DEVICE ? NULL : &prm, &p),
                &alloc_text[i]);
        snprintf(what, sizeof what, "gpool_free %s (%zu B)", name, size);
        MEASURE(what, gpool_free(pool, p), &free_text[i]);
    }
    print_distinct(alloc_text, NMEASURED);
    print_distinct(free_text, NMEASURED);
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
    if (total_upcalls) fprintf(stderr, "hops: %d upcalls (see above)\n", total_upcalls);
    return gpool_destroy(pool) == GPOOL_OK && !total_upcalls ? 0 : 1;
}
