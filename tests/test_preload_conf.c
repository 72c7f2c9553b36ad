/* One GPOOL_CONF for the drop-in and the library in one process (issue 26): a program linked
 * with libgpool (examples/training_step, gpool_create(NULL) reads GPOOL_CONF) runs under
 * LD_PRELOAD=libgpool_preload.so with the interposer's keys and gpool's in one string; an
 * unknown key is still refused by both. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* README.md's "Try the drop-in without a GPU" recipe, as written (its include path and build
 * folder pointed at this tree), in a scratch folder: a cudart program under the drop-in and
 * the simulated driver is served by gpool. Skips without the toolkit's libcudart. */
Test(preload_conf, the_readmes_try_the_dropin_recipe_works, .timeout = 120)
{
    NEED_SIM();
    const char *cuda = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    char path[4200];
    snprintf(path, sizeof path, "%s/lib64/libcudart.so", cuda);
    if (access(path, R_OK) != 0) cr_skip_test("no %s: the recipe needs the CUDA runtime", path);
    const char *san = getenv("GPOOL_TEST_SAN");
    if (san && *san) cr_skip_test("the recipe's program is built plainly: not under %s", san);
    char root[4096];
    cr_assert_not_null(getcwd(root, sizeof root));
    char tmpl[] = "/tmp/gpool-try-dropin-XXXXXX";
    char *work = mkdtemp(tmpl);
    cr_assert_not_null(work);
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && awk '/^## Try the drop-in without a GPU/{m=1} m && /^```sh$/{f=1; next} "
             "f && /^```$/{exit} f{print}' '%s/README.md' | sed -e 's|-Iinclude|-I%s/include|' "
             "-e 's|$PWD/build|%s|g' -e 's|/usr/local/cuda|%s|g' > recipe.sh && "
             "grep -q LD_PRELOAD recipe.sh && env -u GPOOL_CONF bash recipe.sh 2>&1",
             work, root, root, build_dir(), cuda);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char out[8192];
    out[fread(out, 1, sizeof out - 1, p)] = 0;
    int st = pclose(p);
    cr_assert_eq(st, 0, "the recipe failed:\n%s", out);
    cr_assert(strstr(out, "gpool: ") && strstr(out, "driver calls for 1,000"), "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    cr_expect_eq(system(cmd), 0);
}
