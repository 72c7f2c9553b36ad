/* sim_state.c — the simulator's global state: the driver lock, configuration from the
 * environment, call counters, fault injection, device capacity accounting, live-object
 * counters and the JSON statistics written when the library is unloaded. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "size_parse.h"

#define SIM_FAIL_SLOTS 8

struct sim_device_memory {
    size_t capacity;
    size_t in_use;
    size_t peak;
};

static pthread_mutex_t sim_mutex = PTHREAD_MUTEX_INITIALIZER;
static int sim_initialized;
static int sim_deinitialized;
static int sim_ndevices = 1;
static struct sim_device_memory sim_mem[GPOOL_SIM_MAX_DEVICES];
static size_t sim_total_in_use, sim_total_peak;
static unsigned long sim_calls[SIM_ENTRY_COUNT];
static unsigned long sim_fail_at[SIM_ENTRY_COUNT][SIM_FAIL_SLOTS]; /* call number, 0 = free */
static unsigned long sim_forced;
static long sim_live[SIM_LIVE_KIND_COUNT];
static char *sim_stats_path;
/* GPOOL_SIM_FORK=driver: this process is a child forked after cuInit (sim_forked_child). */
static int sim_fork_rule;
static int sim_forked_child;
static int sim_misconfigured; /* a bad GPOOL_SIM_* value (sim_bad_config) */

static const char *const sim_entry_names[SIM_ENTRY_COUNT] = {
#define SIM_NAME_ENTRY(name, err) #name,
    SIM_ENTRY_LIST(SIM_NAME_ENTRY)
#undef SIM_NAME_ENTRY
};

static const CUresult sim_entry_errors[SIM_ENTRY_COUNT] = {
#define SIM_ERROR_ENTRY(name, err) err,
    SIM_ENTRY_LIST(SIM_ERROR_ENTRY)
#undef SIM_ERROR_ENTRY
};

void sim_lock(void)
{
    pthread_mutex_lock(&sim_mutex);
}
void sim_unlock(void)
{
    pthread_mutex_unlock(&sim_mutex);
}

static int sim_works_before_init(enum sim_entry entry)
{
    return entry == SIM_cuInit || entry == SIM_cuDriverGetVersion ||
           entry == SIM_cuGetProcAddress || entry == SIM_cuGetErrorString ||
           entry == SIM_cuGetErrorName;
}

CUresult sim_enter(enum sim_entry entry)
{
    sim_lock();
    unsigned long n = ++sim_calls[entry];
    if (sim_deinitialized) return CUDA_ERROR_DEINITIALIZED;
    if (sim_forked_child && !sim_works_before_init(entry)) return CUDA_ERROR_NOT_INITIALIZED;
    if (sim_misconfigured && (entry == SIM_cuInit || !sim_works_before_init(entry)))
        return CUDA_ERROR_NOT_INITIALIZED;
    for (int i = 0; i < SIM_FAIL_SLOTS; i++) {
        if (sim_fail_at[entry][i] == n) {
            sim_fail_at[entry][i] = 0;
            return sim_entry_errors[entry];
        }
    }
    if (!sim_initialized && !sim_works_before_init(entry)) return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

CUresult sim_leave(CUresult rc)
{
    sim_unlock();
    return rc;
}

int sim_device_count(void)
{
    return sim_ndevices;
}
int sim_is_initialized(void)
{
    return sim_initialized;
}
void sim_set_initialized(void)
{
    sim_initialized = 1;
}
int sim_valid_device(int dev)
{
    return sim_initialized && dev >= 0 && dev < sim_ndevices;
}
size_t sim_capacity(int dev)
{
    return sim_mem[dev].capacity;
}
size_t sim_device_used(int dev)
{
    return sim_mem[dev].in_use;
}

CUresult sim_charge(int dev, size_t bytes)
{
    struct sim_device_memory *m = &sim_mem[dev];
    if (m->in_use > m->capacity || bytes > m->capacity - m->in_use) return CUDA_ERROR_OUT_OF_MEMORY;
    m->in_use += bytes;
    if (m->in_use > m->peak) m->peak = m->in_use;
    sim_total_in_use += bytes;
    if (sim_total_in_use > sim_total_peak) sim_total_peak = sim_total_in_use;
    return CUDA_SUCCESS;
}

void sim_uncharge(int dev, size_t bytes)
{
    sim_mem[dev].in_use -= bytes;
    sim_total_in_use -= bytes;
}

void sim_live_add(enum sim_live_kind kind, long delta)
{
    sim_live[kind] += delta;
}
void sim_count_forced_sync(void)
{
    sim_forced++;
}

/* ---- configuration ---- */

/* A bad GPOOL_SIM_* value: said once on stderr, and every call but those that need no
 * initialisation answers CUDA_ERROR_NOT_INITIALIZED ("initialization has failed", cuda.h), cuInit
 * included, as a driver that cannot start does. No abort: the program sees a status. */

void sim_bad_config(const char *var, const char *value, const char *why)
{
    fprintf(stderr, "gpool simulated driver: bad %s=\"%s\": %s; every call fails\n", var, value,
            why);
    sim_misconfigured = 1;
}

static int sim_entry_index(const char *name, size_t len)
{
    if (len > 3 && strncmp(name + len - 3, "_v2", 3) == 0) len -= 3;
    for (int i = 0; i < SIM_ENTRY_COUNT; i++) {
        if (strlen(sim_entry_names[i]) == len && strncmp(sim_entry_names[i], name, len) == 0)
            return i;
    }
    return -1;
}

/* gpool's one size parser (src/api/size_parse.c, linked in): GPOOL_SIM_MEMORY is spelled as
 * GPOOL_CONF's sizes are. */
static int sim_parse_size(const char *s, size_t *out)
{
    uint64_t v;
    if (gp_size_parse(s, strlen(s), &v, NULL) != 0 || v > SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
}

static int sim_arm(int entry, unsigned long call_number)
{
    for (int i = 0; i < SIM_FAIL_SLOTS; i++) {
        if (sim_fail_at[entry][i] == 0) {
            sim_fail_at[entry][i] = call_number;
            return 0;
        }
    }
    return -1;
}

static void sim_parse_fail(const char *spec)
{
    const char *p = spec;
    while (*p) {
        const char *colon = strchr(p, ':');
        if (!colon) {
            sim_bad_config("GPOOL_SIM_FAIL", spec, "expected entry:N");
            return;
        }
        int entry = sim_entry_index(p, (size_t)(colon - p));
        if (entry < 0) {
            sim_bad_config("GPOOL_SIM_FAIL", spec, "unknown entry point");
            return;
        }
        char *end;
        errno = 0;
        unsigned long n = strtoul(colon + 1, &end, 10);
        if (end == colon + 1 || errno || n == 0 || (*end && *end != ',')) {
            sim_bad_config("GPOOL_SIM_FAIL", spec, "N must be a call number >= 1");
            return;
        }
        if (sim_arm(entry, n) != 0) {
            sim_bad_config("GPOOL_SIM_FAIL", spec, "too many failures armed");
            return;
        }
        p = *end ? end + 1 : end;
    }
}

/* The child of a fork (pthread_atfork child handler; it runs on the one thread the child has).
 * The driver's state does not survive fork: CUDA duplicates none of its internal data
 * structures or threads into the child, and any CUDA use between fork() and exec() is
 * undefined (the CUDA C++ guidelines' rule "[fork] A call to fork must be immediately followed
 * by a call to exec", CUDA-1.6 in Axivion's CUDA rule reference). What a real driver answers
 * such a child, cuInit included, is CUDA_ERROR_NOT_INITIALIZED (3; the runtime's
 * cudaErrorInitializationError, also 3, "initialization error": pytorch/pytorch#17357,
 * apache/mxnet#14753); the driver API reference documents that code as "the CUDA driver has
 * not been initialized with cuInit() or ... initialization has failed". POSIX fork(): the
 * child has one thread and a copy of the parent's mutexes in whatever state they were (IEEE
 * Std 1003.1). With GPOOL_SIM_FORK=driver the simulator does the same
 * for a child forked after cuInit succeeded; cuDriverGetVersion, cuGetProcAddress and the
 * error-string calls, which need no initialisation, still answer. The driver lock is made
 * anew in every child, so a child never waits for a call another thread of the parent was
 * inside at fork (the bookkeeping that call was changing is not used again). The child never
 * writes the parent's GPOOL_SIM_STATS under the rule. */
static void sim_fork_child(void)
{
    pthread_mutex_init(&sim_mutex, NULL);
    if (!sim_fork_rule || !sim_initialized) return;
    sim_forked_child = 1;
    free(sim_stats_path);
    sim_stats_path = NULL;
}

__attribute__((constructor)) static void sim_configure(void)
{
    pthread_atfork(NULL, NULL, sim_fork_child);
    size_t capacity = (size_t)8 << 30;
    const char *v = getenv("GPOOL_SIM_MEMORY");
    if (v && *v && sim_parse_size(v, &capacity) != 0) {
        sim_bad_config("GPOOL_SIM_MEMORY", v, "expected a size: " GP_SIZE_SYNTAX);
        return;
    }
    v = getenv("GPOOL_SIM_DEVICES");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 0 || n > GPOOL_SIM_MAX_DEVICES) {
            sim_bad_config("GPOOL_SIM_DEVICES", v, "expected 0..16");
            return;
        }
        sim_ndevices = (int)n;
    }
    for (int d = 0; d < GPOOL_SIM_MAX_DEVICES; d++)
        sim_mem[d].capacity = capacity;
    v = getenv("GPOOL_SIM_FAIL");
    if (v && *v) sim_parse_fail(v);
    v = getenv("GPOOL_SIM_STATS");
    if (v && *v) sim_stats_path = strdup(v);
    v = getenv("GPOOL_SIM_FORK");
    if (v && *v && strcmp(v, "driver") != 0 && strcmp(v, "inherit") != 0) {
        sim_bad_config("GPOOL_SIM_FORK", v, "expected driver or inherit");
        return;
    }
    sim_fork_rule = v && !strcmp(v, "driver");
}

/* ---- statistics at unload ---- */

static void sim_write_stats(void)
{
    FILE *f = fopen(sim_stats_path, "w");
    if (f) {
        fputs("{\"calls\":{", f);
        for (int i = 0; i < SIM_ENTRY_COUNT; i++)
            fprintf(f, "%s\"%s\":%lu", i ? "," : "", sim_entry_names[i], sim_calls[i]);
        fprintf(f,
                "},\"bytes_in_use\":%zu,\"peak_bytes\":%zu,\"live\":{\"handles\":%ld,"
                "\"mappings\":%ld,\"reservations\":%ld,\"host_allocs\":%ld,"
                "\"host_registrations\":%ld,\"streams\":%ld,\"events\":%ld,"
                "\"legacy_allocs\":%ld},\"violations\":%lu}\n",
                sim_total_in_use, sim_total_peak, sim_live[SIM_LIVE_HANDLES],
                sim_live[SIM_LIVE_MAPPINGS], sim_live[SIM_LIVE_RESERVATIONS],
                sim_live[SIM_LIVE_HOST_ALLOCS], sim_live[SIM_LIVE_HOST_REGS],
                sim_live[SIM_LIVE_STREAMS], sim_live[SIM_LIVE_EVENTS], sim_live[SIM_LIVE_LEGACY],
                sim_hb_count());
        fclose(f);
    } else {
        fprintf(stderr, "gpool simulated driver: cannot write GPOOL_SIM_STATS=%s: %s\n",
                sim_stats_path, strerror(errno));
    }
}

/* At process exit or the last dlclose: write the statistics, then shut the driver down as the
 * real one does. Later calls get CUDA_ERROR_DEINITIALIZED; the bookkeeping is freed, the memory
 * handed out stays mapped (other threads may still be using it). */
__attribute__((destructor)) static void sim_unload(void)
{
    sim_lock();
    if (sim_stats_path) sim_write_stats();
    sim_deinitialized = 1;
    sim_vmm_teardown();
    sim_legacy_teardown();
    sim_host_teardown();
    sim_capture_teardown();
    sim_stream_teardown();
    sim_hb_teardown();
    sim_unlock();
    free(sim_stats_path);
    sim_stats_path = NULL;
}

/* ---- control API ---- */

SIM_EXPORT int gpoolsim_fail_nth(const char *entry, unsigned long nth)
{
    if (!entry) return -1;
    int idx = sim_entry_index(entry, strlen(entry));
    if (idx < 0) return -1;
    sim_lock();
    int rc = 0;
    if (nth == 0)
        memset(sim_fail_at[idx], 0, sizeof sim_fail_at[idx]);
    else
        rc = sim_arm(idx, sim_calls[idx] + nth);
    sim_unlock();
    return rc;
}

SIM_EXPORT void gpoolsim_fail_clear(void)
{
    sim_lock();
    memset(sim_fail_at, 0, sizeof sim_fail_at);
    sim_unlock();
}

SIM_EXPORT CUresult gpoolsim_injected_error(const char *entry)
{
    int idx = entry ? sim_entry_index(entry, strlen(entry)) : -1;
    return idx < 0 ? CUDA_ERROR_INVALID_VALUE : sim_entry_errors[idx];
}

SIM_EXPORT unsigned long gpoolsim_call_count(const char *entry)
{
    int idx = entry ? sim_entry_index(entry, strlen(entry)) : -1;
    if (idx < 0) return 0;
    sim_lock();
    unsigned long n = sim_calls[idx];
    sim_unlock();
    return n;
}

SIM_EXPORT unsigned long gpoolsim_call_total(void)
{
    unsigned long n = 0;
    sim_lock();
    for (int i = 0; i < SIM_ENTRY_COUNT; i++)
        n += sim_calls[i];
    sim_unlock();
    return n;
}

SIM_EXPORT void gpoolsim_reset_counts(void)
{
    sim_lock();
    for (int i = 0; i < SIM_ENTRY_COUNT; i++) {
        /* armed failures stay armed at the same distance from now */
        for (int k = 0; k < SIM_FAIL_SLOTS; k++)
            if (sim_fail_at[i][k]) sim_fail_at[i][k] -= sim_calls[i];
        sim_calls[i] = 0;
    }
    sim_unlock();
}

SIM_EXPORT size_t gpoolsim_bytes_in_use(int device)
{
    if (device < 0 || device >= GPOOL_SIM_MAX_DEVICES) return 0;
    sim_lock();
    size_t n = sim_mem[device].in_use;
    sim_unlock();
    return n;
}

SIM_EXPORT size_t gpoolsim_peak_bytes(int device)
{
    if (device < 0 || device >= GPOOL_SIM_MAX_DEVICES) return 0;
    sim_lock();
    size_t n = sim_mem[device].peak;
    sim_unlock();
    return n;
}

SIM_EXPORT void gpoolsim_set_capacity(int device, size_t bytes)
{
    if (device < 0 || device >= GPOOL_SIM_MAX_DEVICES) return;
    sim_lock();
    sim_mem[device].capacity = bytes;
    sim_unlock();
}

SIM_EXPORT unsigned long gpoolsim_forced_syncs(void)
{
    sim_lock();
    unsigned long n = sim_forced;
    sim_unlock();
    return n;
}

SIM_EXPORT void gpoolsim_get_live(struct gpoolsim_live *out)
{
    if (!out) return;
    sim_lock();
    out->handles = (size_t)sim_live[SIM_LIVE_HANDLES];
    out->mappings = (size_t)sim_live[SIM_LIVE_MAPPINGS];
    out->reservations = (size_t)sim_live[SIM_LIVE_RESERVATIONS];
    out->host_allocs = (size_t)sim_live[SIM_LIVE_HOST_ALLOCS];
    out->host_registrations = (size_t)sim_live[SIM_LIVE_HOST_REGS];
    out->streams = (size_t)sim_live[SIM_LIVE_STREAMS];
    out->events = (size_t)sim_live[SIM_LIVE_EVENTS];
    out->legacy_allocs = (size_t)sim_live[SIM_LIVE_LEGACY];
    sim_unlock();
}

SIM_EXPORT const char *const *gpoolsim_entry_names(size_t *count)
{
    if (count) *count = SIM_ENTRY_COUNT;
    return sim_entry_names;
}
