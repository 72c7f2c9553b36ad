/* One GPOOL_CONF for a process that has both the LD_PRELOAD interposer and the library: the
 * library accepts the interposer's declared keys (preload/preload_options.h), checks their
 * values and ignores them; an unknown key is still an error (issue 26). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpool.h"

Test(conf_shared, parse_accepts_and_ignores_the_interposers_keys)
{
    gpool_config c = GPOOL_CONFIG_INIT, plain = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_parse(&c, "cudafree=batch,budget_device=1G,cudafree_batch=64M,"
                                        "cudafree_flush=event,sync_free=0,disable=0"),
                 GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_config_parse(&plain, "budget_device=1G"), GPOOL_OK);
    cr_assert_eq(memcmp(&c, &plain, sizeof c), 0, "an interposer key changed gpool's config");
}

Test(conf_shared, interposer_keys_are_still_checked)
{
    static const char *bad[] = {"cudafree=sometimes", "cudafree_batch=12Q", "sync_free=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpool_config c = GPOOL_CONFIG_INIT;
        cr_assert_eq(gpool_config_parse(&c, bad[i]), GPOOL_ERR_CONFIG, "'%s' accepted", bad[i]);
    }
}

Test(conf_shared, an_unknown_key_is_still_an_error_and_lists_both_tables)
{
    gpool_config c = GPOOL_CONFIG_INIT;
    cr_assert_eq(gpool_config_parse(&c, "cudafree=batch,cudafreee=batch"), GPOOL_ERR_CONFIG);
    const char *msg = gpool_last_error();
    cr_assert(strstr(msg, "unknown key 'cudafreee'"), "%s", msg);
    cr_assert(strstr(msg, "budget_device") && strstr(msg, "cudafree_batch"), "%s", msg);
}

Test(conf_shared, create_from_the_environment_with_the_interposers_keys)
{
    cr_assert_eq(setenv("GPOOL_CONF", "cudafree=batch,budget_device=1G", 1), 0);
    gpool_t *pool = NULL;
    cr_assert_eq(gpool_create(NULL, &pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(gpool_destroy(pool), GPOOL_OK, "%s", gpool_last_error());
    cr_assert_eq(setenv("GPOOL_CONF", "budget_device=1G,bogus=1", 1), 0);
    cr_assert_eq(gpool_create(NULL, &pool), GPOOL_ERR_CONFIG);
    cr_assert(strstr(gpool_last_error(), "unknown key 'bogus'"), "%s", gpool_last_error());
    unsetenv("GPOOL_CONF");
}
