/* strategy.c — the registry of allocation strategies and helpers they share. */
#include "bench.h"

#include <stdarg.h>
#include <string.h>

static const bench_strategy_ops *const strategies[] = {
    &bench_strategy_cuda,  &bench_strategy_cuda_async, &bench_strategy_bfc,
    &bench_strategy_gpool, &bench_strategy_cuda_host,  &bench_strategy_gpool_pinned,
};

const char *bench_strategy_names(void)
{
    return "cuda, cuda-async, bfc, gpool[:KEY=VAL,...], cuda-host, gpool-pinned[:KEY=VAL,...]";
}

/* A gpool strategy's KEY=VAL options, checked as its init will parse them: a misspelt key is
 * an error naming the valid ones before anything runs. */
static int check_options(const bench_strategy *s, char *err, size_t errlen)
{
    gpool_config cfg = GPOOL_CONFIG_INIT;
    gpool_config_default(&cfg);
    if (gpool_config_parse(&cfg, s->args) == GPOOL_OK) return 0;
    const char *why = gpool_last_error(), *call = "gpool_config_parse: ";
    if (!strncmp(why, call, strlen(call))) why += strlen(call);
    snprintf(err, errlen, "strategy %s: %s", s->spec, why);
    return -1;
}

int bench_strategy_lookup(const char *spec, bench_strategy *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (strlen(spec) >= sizeof s->spec) {
        snprintf(err, errlen, "strategy spec too long: %.40s...", spec);
        return -1;
    }
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    char *colon = strchr(s->spec, ':');
    size_t name_len = colon ? (size_t)(colon - s->spec) : strlen(s->spec);
    s->args = colon ? colon + 1 : "";
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        const bench_strategy_ops *ops = strategies[i];
        if (strlen(ops->name) == name_len && !strncmp(ops->name, s->spec, name_len)) {
            int takes_args = !strcmp(ops->name, "gpool") || !strcmp(ops->name, "gpool-pinned");
            if (colon && !takes_args) {
                snprintf(err, errlen, "strategy %s takes no options (got \"%s\")", ops->name,
                         s->args);
                return -1;
            }
            if (colon && check_options(s, err, errlen) != 0) return -1;
            s->ops = ops;
            return 0;
        }
    }
    snprintf(err, errlen, "unknown strategy \"%.*s\" (known: %s)", (int)name_len, s->spec,
             bench_strategy_names());
    return -1;
}

int bench_strategy_fail(bench_strategy *s, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return rc;
}
