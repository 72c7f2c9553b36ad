/* preload_notice.c — the one line on stderr the interposer writes when it turns itself off or
 * cannot do what the configuration asks (a trace file it cannot open, a reservation that
 * fails, a driver it cannot load, ...). Each kind of notice is written at most once per
 * process, as a single write, so that a framework's log gets one line and not one per call. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "preload.h"

static atomic_int written[GPP_NOTICE_COUNT];

void gpp_notice_once(gpp_notice kind, const char *fmt, ...)
{
    if ((unsigned)kind >= GPP_NOTICE_COUNT || atomic_exchange(&written[kind], 1)) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    fprintf(stderr, "gpool preload: %s\n", line);
}
