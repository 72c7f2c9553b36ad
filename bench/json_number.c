/* json_number.c — numbers in gpool-bench's JSON output: JSON has no inf or nan, so a value that
 * is not finite (a ratio over nothing, a rate over no time) is written as null. */
#include "bench.h"

#include <math.h>

void bench_json_number(FILE *f, const char *key, int prec, double v)
{
    fprintf(f, ",");
    bench_json_string(f, key);
    if (isfinite(v))
        fprintf(f, ":%.*f", prec, v);
    else
        fprintf(f, ":null");
}
