/* util_preload.c — running the helper programs of tests/preload/ with and without the
 * LD_PRELOAD interposer, and reading their KEY=value output (util_preload.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util_preload.h"

const char *build_dir(void)
{
    const char *b = getenv("GPOOL_TEST_BUILD");
    cr_assert_not_null(b, "GPOOL_TEST_BUILD is not set (run the tests with make test)");
    return b;
}

/* Run helper `prog` with argument `mode`; env is extra VAR=value words (GPOOL_CONF is unset
 * unless given); preload = 1 puts libgpool_preload.so in LD_PRELOAD. */
void run(struct run *r, const char *prog, const char *mode, int preload, const char *env)
{
    char cmd[8192];
    const char *b = build_dir();
    char pre[4200] = "";
    if (preload) snprintf(pre, sizeof pre, "LD_PRELOAD='%s/libgpool_preload.so'", b);
    /* sanitizer builds: the helpers and the interposer both carry the runtime */
    snprintf(cmd, sizeof cmd,
             "env -u GPOOL_CONF -u LD_PRELOAD "
             "ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0:allocator_may_return_null=1\""
             " %s %s '%s/tests/preload/%s' %s 2>&1",
             pre, env ? env : "", b, prog, mode);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = 0;
    int st = pclose(p);
    r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* run(), then check the helper's exit code (its output is the message when it differs). */
void run_expect(struct run *r, const char *prog, const char *mode, int preload, const char *env,
                int rc)
{
    run(r, prog, mode, preload, env);
    cr_assert_eq(r->rc, rc, "%s", r->out);
}

unsigned long field(const struct run *r, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *p = r->out;
    while ((p = strstr(p, pat))) {
        if (p == r->out || p[-1] == ' ' || p[-1] == '\n') return strtoul(p + strlen(pat), NULL, 10);
        p++;
    }
    cr_assert_fail("no %s= in the output:\n%s", key, r->out);
    return 0;
}

int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

void adv_run(const char *prog, const char *mode, const char *env)
{
    char e[1024];
    snprintf(e, sizeof e, "GPOOL_SIM_STRICT=0 %s", env ? env : "");
    struct run r;
    run_expect(&r, prog, mode, 1, e, 0);
    cr_expect_eq(field(&r, "violations"), 0, "%s: %s", mode, r.out);
}

const char *const cudafree_modes[CUDAFREE_MODES] = {
    "",
    "GPOOL_CONF=cudafree=batch",
    "GPOOL_CONF=cudafree=stream",
    "GPOOL_CONF=cudafree=sync",
    "GPOOL_CONF=sync_free=1",
    "GPOOL_CONF=cudafree_flush=event",
    "GPOOL_CONF=cudafree=batch,cudafree_flush=event,cudafree_batch=1M",
    "GPOOL_CONF=cudafree_batch=1M",
};

void adv_run_all_modes(const char *prog, const char *mode, const char *env)
{
    for (size_t i = 0; i < CUDAFREE_BASIC_MODES; i++) {
        char e[512];
        snprintf(e, sizeof e, "%s %s", cudafree_modes[i], env ? env : "");
        adv_run(prog, mode, e);
    }
}
