/* gpool_msg.c — the text of a failed gpool call in the harness's messages, naming the call
 * once. */
#include "bench.h"

#include <string.h>

const char *bench_gpool_msg(char *buf, size_t len, const char *call, gpool_status st)
{
    const char *detail = gpool_last_error();
    size_t n = strlen(call);
    if (!strncmp(detail, call, n) && detail[n] == ':') /* gp_named put the call there */
        detail += n + (detail[n + 1] == ' ' ? 2 : 1);
    if (*detail)
        snprintf(buf, len, "%s: %s: %s", call, gpool_strerror(st), detail);
    else
        snprintf(buf, len, "%s: %s", call, gpool_strerror(st));
    return buf;
}
