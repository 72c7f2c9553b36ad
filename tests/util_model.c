/* util_model.c — the executable model (see util_model.h). */
#include "util_model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util_sim.h"

void model_init(model *m, size_t capacity, size_t page, int npools, gpool_t *const *pools)
{
    memset(m, 0, sizeof *m);
    m->capacity = capacity;
    m->page = page;
    m->chunk_max = 1;
    /* gpool.h, "When it must succeed": G, the device's pages / 4 on a device of 4 GiB or more */
    m->grow_max = capacity >= ((size_t)4 << 30) ? capacity / page / 4 : 0;
    m->npools = npools;
    for (int i = 0; i < npools; i++) {
        m->pools[i] = pools[i];
        gpool_get_stats(pools[i], &m->prev[i]);
        m->base_ooms[i] = m->prev[i].ooms;
    }
    model_baseline(m);
}

static size_t pages_of(const model *m, size_t bytes)
{
    return (bytes + m->page - 1) / m->page;
}

size_t model_block_pages(const model *m, const model_block *b)
{
    return pages_of(m, b->size) + 1 + 2 * (m->chunk_max - 1);
}

int model_never_fits(const model *m, gpool_mem_kind kind, size_t size)
{
    return kind == GPOOL_MEM_DEVICE && pages_of(m, size) > m->capacity / m->page;
}

int model_must_fit(const model *m, int pool, gpool_mem_kind kind, size_t size, size_t other_bytes)
{
    if (kind != GPOOL_MEM_DEVICE) return size <= ((size_t)256 << 20); /* host: plenty here */
    size_t have = m->capacity / m->page, used = pages_of(m, other_bytes);
    used += (size_t)m->npools * m->grow_max; /* pages growth may pin, per pool */
    for (size_t i = 0; i < m->nlive; i++) {
        const model_block *b = &m->live[i];
        if (b->kind == GPOOL_MEM_DEVICE && (m->shared || b->pool == pool))
            used += model_block_pages(m, b);
    }
    return used <= have && have - used >= pages_of(m, size) + 1;
}

void model_add(model *m, int pool, void *ptr, size_t size, gpool_mem_kind kind,
               gpool_stream_t stream, uint32_t seed)
{
    if (m->nlive == MODEL_MAX_LIVE) return; /* callers keep below the bound */
    gpool_block_desc d = GPOOL_BLOCK_DESC_INIT;
    void *host = ptr;
    if (kind != GPOOL_MEM_DEVICE && gpool_get_block_desc(m->pools[pool], ptr, &d) == GPOOL_OK &&
        d.host_ptr)
        host = d.host_ptr;
    m->live[m->nlive++] = (model_block){ptr, host, size, kind, stream, seed, pool};
}

int model_remove(model *m, void *ptr, model_block *out)
{
    for (size_t i = 0; i < m->nlive; i++)
        if (m->live[i].ptr == ptr) {
            if (out) *out = m->live[i];
            m->live[i] = m->live[--m->nlive];
            return 1;
        }
    return 0;
}

void model_note_chunk(model *m, size_t chunk_bytes)
{
    size_t c = pages_of(m, chunk_bytes);
    if (c > m->chunk_max) m->chunk_max = c;
}

static unsigned char pat(uint32_t seed, size_t i)
{
    uint32_t x = seed ^ (uint32_t)(i * 2654435761u);
    x ^= x >> 15;
    return (unsigned char)(x * 0x2c1b3c6du >> 24);
}

/* every byte of the first 4 KiB and the last byte, one in 4093 up to 1 MiB, then one in
 * 262139 (several bytes in every 2 MiB page, at shifting offsets) */
static size_t next_i(size_t i, size_t n)
{
    size_t step = i < 4096 ? 1 : i < ((size_t)1 << 20) ? 4093 : 262139;
    if (i + 1 < n && i + step >= n) return n - 1;
    return i + step;
}

void model_fill(void *p, size_t n, uint32_t seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i = next_i(i, n))
        b[i] = pat(seed, i);
}

int model_check(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i = next_i(i, n))
        if (b[i] != pat(seed, i)) return 0;
    return 1;
}

void model_baseline(model *m)
{
    const struct sim_api *sim = sim_api();
    m->base_sim_total = sim ? sim->call_total() : 0;
    for (int i = 0; i < m->npools; i++) {
        gpool_stats s = GPOOL_STATS_INIT;
        gpool_get_stats(m->pools[i], &s);
        m->base_pool_total[i] = s.driver_calls_total;
    }
}

static int fail(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return 0;
}

#define U(x) ((unsigned long long)(x))

static void kind_sum(gpool_kind_stats *t, const gpool_kind_stats *k)
{
    uint64_t *a = (uint64_t *)t;
    const uint64_t *b = (const uint64_t *)k;
    for (size_t i = 0; i < sizeof *t / sizeof(uint64_t); i++)
        a[i] += b[i];
}

static int check_kind(const model *m, int pool, int k, const gpool_kind_stats *ks,
                      const gpool_kind_stats *old, char *why, size_t cap)
{
    uint64_t n = 0, req = 0;
    for (size_t i = 0; i < m->nlive; i++)
        if (m->live[i].pool == pool && (k == 0 || (int)m->live[i].kind == k)) {
            n++;
            req += m->live[i].size;
        }
    const char *where = "pool %d kind %d: ";
    char pre[48];
    snprintf(pre, sizeof pre, where, pool, k);
    if (ks->live_blocks != n)
        return fail(why, cap, "%slive_blocks %llu, model %llu", pre, U(ks->live_blocks), U(n));
    uint64_t slack = k == GPOOL_MEM_AUTO || k == GPOOL_MEM_DEVICE ? m->slack_requested : 0;
    if (ks->requested_bytes < req || ks->requested_bytes > req + slack)
        return fail(why, cap, "%srequested_bytes %llu, model %llu", pre, U(ks->requested_bytes),
                    U(req));
    if (ks->allocs - ks->frees != ks->live_blocks)
        return fail(why, cap, "%sallocs %llu - frees %llu != live %llu", pre, U(ks->allocs),
                    U(ks->frees), U(ks->live_blocks));
    if (ks->in_use_bytes > ks->reserved_bytes || ks->in_use_bytes < ks->requested_bytes)
        return fail(why, cap, "%sin_use %llu not within [requested %llu, reserved %llu]", pre,
                    U(ks->in_use_bytes), U(ks->requested_bytes), U(ks->reserved_bytes));
    if (ks->cached_bytes != ks->reserved_bytes - ks->in_use_bytes)
        return fail(why, cap, "%scached %llu != reserved %llu - in_use %llu", pre,
                    U(ks->cached_bytes), U(ks->reserved_bytes), U(ks->in_use_bytes));
    const uint64_t cur[4] = {ks->requested_bytes, ks->in_use_bytes, ks->reserved_bytes,
                             ks->cached_bytes};
    const uint64_t pk[4] = {ks->peak_requested_bytes, ks->peak_in_use_bytes,
                            ks->peak_reserved_bytes, ks->peak_cached_bytes};
    const uint64_t was[4] = {old->peak_requested_bytes, old->peak_in_use_bytes,
                             old->peak_reserved_bytes, old->peak_cached_bytes};
    static const char *const names[4] = {"requested", "in_use", "reserved", "cached"};
    for (int i = 0; i < 4; i++) {
        if (pk[i] < cur[i])
            return fail(why, cap, "%speak_%s %llu below current %llu", pre, names[i], U(pk[i]),
                        U(cur[i]));
        if (pk[i] < was[i])
            return fail(why, cap, "%speak_%s went down: %llu -> %llu", pre, names[i], U(was[i]),
                        U(pk[i]));
    }
    if (ks->allocs < old->allocs || ks->frees < old->frees)
        return fail(why, cap, "%sallocs or frees went down", pre);
    return 1;
}

/* Simulator entry points with their own gpool counter, in gpool_driver_call order. */
static const char *const mem_entries[] = {
    "cuMemCreate",       "cuMemRelease",        "cuMemMap",
    "cuMemUnmap",        "cuMemSetAccess",      "cuMemAddressReserve",
    "cuMemAddressFree",  "cuMemHostAlloc",      "cuMemFreeHost",
    "cuMemHostRegister", "cuMemHostUnregister",
};

int model_check_stats(model *m, int check_calls, char *why, size_t cap)
{
    gpool_stats s[MODEL_MAX_POOLS];
    for (int p = 0; p < MODEL_MAX_POOLS; p++)
        s[p] = (gpool_stats)GPOOL_STATS_INIT;
    uint64_t calls[GPOOL_DRV_COUNT] = {0}, pool_delta = 0;
    for (int p = 0; p < m->npools; p++) {
        gpool_get_stats(m->pools[p], &s[p]);
        for (int k = 0; k < GPOOL_MEM_KIND_COUNT; k++)
            if (!check_kind(m, p, k, &s[p].kind[k], &m->prev[p].kind[k], why, cap)) return 0;
        gpool_kind_stats sum = {0};
        for (int k = 1; k < GPOOL_MEM_KIND_COUNT; k++)
            kind_sum(&sum, &s[p].kind[k]);
        if (memcmp(&sum, &s[p].kind[GPOOL_MEM_AUTO], sizeof sum) != 0)
            return fail(why, cap, "pool %d: totals are not the sum of the kinds", p);
        uint64_t ooms = s[p].ooms - m->base_ooms[p];
        if (ooms != m->oom_fails[p])
            return fail(why, cap, "pool %d: ooms counted %llu, %llu allocations failed so", p,
                        U(ooms), U(m->oom_fails[p]));
        if (s[p].oom_retries < m->prev[p].oom_retries || s[p].ooms < m->prev[p].ooms)
            return fail(why, cap, "pool %d: ooms or oom_retries went down", p);
        uint64_t tot = 0;
        for (int i = 0; i < GPOOL_DRV_COUNT; i++) {
            calls[i] += s[p].driver_calls[i];
            tot += s[p].driver_calls[i];
        }
        if (tot != s[p].driver_calls_total)
            return fail(why, cap, "pool %d: driver_calls_total is not their sum", p);
        pool_delta += s[p].driver_calls_total - m->base_pool_total[p];
    }
    const struct sim_api *sim = sim_api();
    if (check_calls && sim) {
        unsigned long sim_delta = sim->call_total() - m->base_sim_total;
        if (pool_delta != sim_delta)
            return fail(why, cap,
                        "driver calls counted by the pools since the baseline %llu, "
                        "made (simulator) %lu",
                        U(pool_delta), sim_delta);
        /* per entry point: only valid while these pools are the only callers since the
         * counts were reset (test_model resets them before creating its pools) */
        for (int i = 0; i <= GPOOL_DRV_HOST_UNREGISTER; i++) {
            unsigned long made = sim->call_count(mem_entries[i]);
            if (made != calls[i])
                return fail(why, cap, "%s: pools counted %llu, simulator saw %lu", mem_entries[i],
                            U(calls[i]), made);
        }
    }
    memcpy(m->prev, s, sizeof(gpool_stats) * (size_t)m->npools);
    return 1;
}

int model_check_content(const model *m, char *why, size_t cap)
{
    for (size_t i = 0; i < m->nlive; i++) {
        const model_block *b = &m->live[i];
        if (!model_check(b->host, b->size, b->seed))
            return fail(why, cap, "live block %p (%zu bytes, kind %d, pool %d) lost its content",
                        b->ptr, b->size, (int)b->kind, b->pool);
    }
    return 1;
}
