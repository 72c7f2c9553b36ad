/* import.c — `gpool-bench import SNAPSHOT -o TRACE.csv`: converts a PyTorch memory snapshot
 * into replay CSV by running tools/snapshot_import.py (installed as gpool-snapshot-import next
 * to gpool-bench), so that a user's own model can be replayed. */
#include "bench.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The converter: $GPOOL_SNAPSHOT_IMPORT, else next to the executable (installed), else the
 * source tree's tools/ seen from the build directory (build/ or build/NAME/). */
static int find_script(char *out, size_t len)
{
    const char *env = getenv("GPOOL_SNAPSHOT_IMPORT");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    const char *dir = dirname(exe);
    static const char *const rel[] = {"gpool-snapshot-import", "../tools/snapshot_import.py",
                                      "../../tools/snapshot_import.py"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(out, len, "%s/%s", dir, rel[i]);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

int bench_import_main(int argc, char **argv)
{
    char script[PATH_MAX + 64];
    if (find_script(script, sizeof script) != 0) {
        fprintf(stderr, "gpool-bench import: the converter (tools/snapshot_import.py, installed as "
                        "gpool-snapshot-import next to gpool-bench) was not found; set "
                        "GPOOL_SNAPSHOT_IMPORT to its path\n");
        return 1;
    }
    const char *python = getenv("PYTHON");
    if (!python || !*python) python = "python3";
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) {
        fprintf(stderr, "gpool-bench import: out of host memory\n");
        return 1;
    }
    args[0] = (char *)python;
    args[1] = script;
    for (int i = 0; i < argc; i++)
        args[i + 2] = argv[i];
    setenv("GPOOL_IMPORT_PROG", "gpool-bench import", 1);
    execvp(python, args);
    fprintf(stderr, "gpool-bench import: cannot run %s: %s (set PYTHON to a Python 3)\n", python,
            strerror(errno));
    free(args);
    return 1;
}
