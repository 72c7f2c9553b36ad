/* trace_scale.c — a trace with every request size multiplied (gpool-bench --scale N): the same
 * sequence of allocations and frees at N times the bytes, to check that the fit goals and the
 * replay's cost per operation hold on a device of an H200's size (issue 27: ×32 of the shipped
 * traces on a 141 GiB simulated device, GPOOL_SIM_MEMORY=141G). */
#include "bench.h"

#include <stdio.h>
#include <string.h>

int bench_trace_scale(bench_trace *t, unsigned factor, char *err, size_t errlen)
{
    if (factor < 1) {
        snprintf(err, errlen, "%s: scale factor must be at least 1", t->name);
        return -1;
    }
    if (factor == 1) return 0;
    if (t->largest > BENCH_MAX_REQUEST / factor || t->peak_live > UINT64_MAX / factor ||
        t->total_bytes > UINT64_MAX / factor) {
        snprintf(err, errlen, "%s: sizes times %u exceed the largest request (%llu bytes)", t->name,
                 factor, (unsigned long long)BENCH_MAX_REQUEST);
        return -1;
    }
    for (size_t i = 0; i < t->n_ops; i++)
        t->ops[i].size *= factor;
    t->peak_live *= factor;
    t->peak_device *= factor;
    t->largest *= factor;
    t->total_bytes *= factor;
    char suffix[16];
    snprintf(suffix, sizeof suffix, "@x%u", factor);
    size_t len = strlen(t->name);
    if (len + strlen(suffix) < sizeof t->name) memcpy(t->name + len, suffix, strlen(suffix) + 1);
    return 0;
}
