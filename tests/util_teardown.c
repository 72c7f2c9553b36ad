/* Teardown checks Criterion would ignore, made to count (util_pool.h teardown_begin). Linked
 * into the Criterion suites only (it names the running test). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util_pool.h"

static char teardown_file[512];
static int teardown_failed;

void teardown_begin(void)
{
    const char *dir = getenv("GPOOL_TEST_TEARDOWN_DIR");
    teardown_failed = 0;
    teardown_file[0] = 0;
    if (!dir || !*dir) return;
    snprintf(teardown_file, sizeof teardown_file, "%s/%ld", dir, (long)getpid());
    FILE *f = fopen(teardown_file, "w");
    if (!f) return;
    fprintf(f, "%s::%s: teardown did not finish\n",
            criterion_current_test ? criterion_current_test->category : "?",
            criterion_current_test ? criterion_current_test->name : "?");
    fclose(f);
}

void teardown_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    teardown_failed = 1;
    fprintf(stderr, "%s:%d: teardown check failed: %s\n", file, line, msg);
    if (!teardown_file[0]) return;
    FILE *f = fopen(teardown_file, "a");
    if (!f) return;
    fprintf(f, "%s:%d: teardown check failed: %s\n", file, line, msg);
    fclose(f);
}

void teardown_end(void)
{
    if (teardown_file[0] && !teardown_failed) unlink(teardown_file);
}
