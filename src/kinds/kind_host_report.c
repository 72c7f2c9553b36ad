/* The host kinds' statistics and JSON (gp_host_kind's stats and dump_json, kind.h): counters
 * read under the host lock, arenas and the small-block allocator described by their own
 * dumps, and where host memory was placed. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include "budget.h"
#include "kind_host_internal.h"

static const char *const src_name[] = {"page_arena", "small_slab", "cuMemHostAlloc"};

void gp_host_stats(gpool_t *pool, gpool_stats *out, int exact)
{
    (void)exact; /* host counters are exact already */
    gp_sysmem *s = sys_of(pool);
    if (!s) return;
    gpool_kind_stats *total = &out->kind[GPOOL_MEM_AUTO];
    for (gpool_mem_kind kind = GPOOL_MEM_HOST_PINNED; kind <= GPOOL_MEM_HOST_MAPPED; kind++) {
        host_kind *k = hk(s, kind);
        gpool_kind_stats *ks = &out->kind[kind];
        uint64_t retries = 0;
        pthread_mutex_lock(&s->lock);
        for (int pg = 0; pg < PG_COUNT; pg++) {
            if (!k->large[pg]) continue;
            gp_arena_counters c;
            size_t held, idle;
            gp_arena_stats(k->large[pg], &c, &held, &idle);
            retries += c.oom_retries;
        }
        size_t res = atomic_load_explicit(&k->reserved, memory_order_relaxed);
        ks->requested_bytes = k->requested;
        ks->in_use_bytes = k->in_use - k->pend_bytes; /* waiting frees are frees */
        out->pending_frees += k->pend_n;
        ks->reserved_bytes = res;
        ks->cached_bytes = res > ks->in_use_bytes ? res - ks->in_use_bytes : 0;
        ks->peak_requested_bytes = k->peak_requested;
        ks->peak_in_use_bytes = k->peak_in_use;
        ks->peak_reserved_bytes = k->peak_reserved > res ? k->peak_reserved : res;
        ks->peak_cached_bytes =
            k->peak_cached > ks->cached_bytes ? k->peak_cached : ks->cached_bytes;
        ks->allocs = k->allocs;
        ks->frees = k->frees;
        ks->live_blocks = k->live;
        out->ooms += k->ooms;
        pthread_mutex_unlock(&s->lock);
        out->oom_retries += retries;
        gp_kind_stats_add(total, ks);
    }
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void gp_host_dump_json(gpool_t *pool, FILE *f, int *first_member)
{
    gp_sysmem *s = sys_of(pool);
    if (!s) return;
    for (gpool_mem_kind kind = GPOOL_MEM_HOST_PINNED; kind <= GPOOL_MEM_HOST_MAPPED; kind++) {
        host_kind *k = hk(s, kind);
        fprintf(f, "%s\"%s\":{\"page_arenas\":[", *first_member ? "" : ",", gp_kind_name(kind));
        *first_member = 0;
        int first = 1;
        for (int pg = 0; pg < PG_COUNT; pg++) {
            pthread_mutex_lock(&s->lock);
            gp_arena *a = k->large[pg];
            pthread_mutex_unlock(&s->lock);
            if (!a) continue;
            uint64_t regs = 0, bound = 0;
            gp_arena_lock(a);
            gp_hostmem_counts(gp_arena_backend(a), &regs, &bound);
            gp_arena_unlock(a);
            fprintf(f,
                    "%s{\"page\":%zu,\"registrations\":%" PRIu64 ",\"numa_bound_runs\":%" PRIu64
                    ",\"regions\":",
                    first ? "" : ",", gp_arena_page(a), regs, bound);
            gp_arena_dump_json(a, f);
            fprintf(f, "}");
            first = 0;
        }
        pthread_mutex_lock(&s->lock);
        fprintf(f, "],\"small\":");
        if (k->small) {
            size_t ext = 0;
            uint64_t regs = 0;
            gp_small_counts(k->small, &ext, &regs);
            fprintf(f,
                    "{\"allocator\":%u,\"extents\":%zu,\"registrations\":%" PRIu64
                    ",\"live_blocks\":%" PRIu64 "}",
                    gp_small_arena_index(k->small), ext, regs, k->small_refs);
        } else {
            fprintf(f, "null");
        }
        fprintf(f, ",\"budget_spills\":%" PRIu64 ",\"blocks\":[", k->spills);
        first = 1;
        for (size_t i = 0; i < s->blocks.cap; i++) {
            if (!s->blocks.keys[i]) continue;
            host_block *b = s->blocks.vals[i];
            if (b->kind != kind) continue;
            fprintf(f,
                    "%s{\"addr\":%" PRIuPTR ",\"host\":%" PRIuPTR ",\"size\":%zu,\"requested\":%zu,"
                    "\"page\":%zu,\"source\":\"%s\",\"fell_back\":%d}",
                    first ? "" : ",", s->blocks.keys[i], b->host, b->size, b->requested, b->page,
                    src_name[b->src], b->fell_back);
            first = 0;
        }
        pthread_mutex_unlock(&s->lock);
        fprintf(f, "]}");
    }
    fprintf(f, ",\"host_placement\":{\"numa_node\":%d,\"source\":", s->numa.node);
    json_string(f, s->numa.source);
    fprintf(f, ",\"why\":");
    json_string(f, s->numa.why);
    fprintf(f, ",\"bound_areas\":%lu,\"bind_failures\":%lu,\"unified_addressing\":%d}",
            atomic_load(&s->numa.bound), atomic_load(&s->numa.bind_failures), s->uva);
}
