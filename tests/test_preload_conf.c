/* One GPOOL_CONF for the drop-in and the library in one process (issue 26): a program linked
 * with libgpool (examples/training_step, gpool_create(NULL) reads GPOOL_CONF) runs under
 * LD_PRELOAD=libgpool_preload.so with the interposer's keys and gpool's in one string; an
 * unknown key is still refused by both. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "util_preload.h"
#include "util_skip.h"

/* examples/training_step relative to tests/preload/, run with the simulator on its library
 * path (it links -lcuda for its own streams). */
static void run_example(struct run *r, int preload, const char *conf)
{
    char env[4400];
    snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s/sim' GPOOL_CONF='%s'", build_dir(), conf);
    run(r, "../../examples/training_step", "", preload, env);
}

Test(preload_conf, the_library_under_the_dropin_takes_the_interposers_keys)
{
    NEED_SIM();
    static struct run both, lib;
    run_example(&both, 1, "cudafree=batch,cudafree_batch=64M,budget_device=2G");
    cr_assert_eq(both.rc, 0, "%s", both.out);
    cr_assert(!strstr(both.out, "bad GPOOL_CONF"), "%s", both.out);
    cr_assert(strstr(both.out, "steady state"), "%s", both.out);
    run_example(&lib, 0, "cudafree=stream,budget_device=2G");
    cr_assert_eq(lib.rc, 0, "%s", lib.out);
}

Test(preload_conf, an_unknown_key_is_refused_by_both)
{
    NEED_SIM();
    static struct run lib, pre;
    run_example(&lib, 0, "cudafree=batch,cudafreee=batch");
    cr_assert_neq(lib.rc, 0, "%s", lib.out);
    cr_assert(strstr(lib.out, "unknown key 'cudafreee'"), "%s", lib.out);
    run(&pre, "runtime_prog", "serve", 1, "GPOOL_CONF=budget_device=1G,bogus=1");
    cr_assert(strstr(pre.out, "unknown key 'bogus'") && strstr(pre.out, "disabled"), "%s", pre.out);
}
