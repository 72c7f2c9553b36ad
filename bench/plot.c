/* plot.c — running gnuplot for report.c (--plot) and view.c (view): the data goes into a
 * temporary file that the gnuplot script names, the script goes down a pipe to gnuplot. */
#include "bench.h"

#include <stdlib.h>
#include <unistd.h>

int bench_gnuplot_open(bench_gnuplot *g, const char *who, const char *output, const char *prefix,
                       const char *what, char *err, size_t errlen)
{
    g->data_file = NULL;
    g->pipe = NULL;
    g->data[0] = '\0';
    if (!getenv("GPOOL_BENCH_GNUPLOT") && system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(err, errlen,
                 "%s needs gnuplot, which is not installed (apt-get install gnuplot-nox); "
                 "no %s written",
                 who, output);
        return -1;
    }
    snprintf(g->data, sizeof g->data, "/tmp/%s-XXXXXX", prefix);
    int fd = mkstemp(g->data);
    g->data_file = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!g->data_file) {
        if (fd >= 0) close(fd);
        snprintf(err, errlen, "cannot create a temporary file for the %s data", what);
        return -1;
    }
    return 0;
}

void bench_gnuplot_discard(bench_gnuplot *g)
{
    unlink(g->data);
}

int bench_gnuplot_start(bench_gnuplot *g, char *err, size_t errlen)
{
    /* GPOOL_BENCH_GNUPLOT: another command to read the script (tests capture it) */
    const char *cmd = getenv("GPOOL_BENCH_GNUPLOT");
    g->pipe = popen(cmd && *cmd ? cmd : "gnuplot", "w");
    if (!g->pipe) {
        unlink(g->data);
        snprintf(err, errlen, "cannot run gnuplot");
        return -1;
    }
    return 0;
}

int bench_gnuplot_finish(bench_gnuplot *g, char *err, size_t errlen)
{
    int rc = pclose(g->pipe);
    g->pipe = NULL;
    unlink(g->data);
    if (rc != 0) {
        snprintf(err, errlen, "gnuplot failed (exit status %d)", rc);
        return -1;
    }
    return 0;
}
