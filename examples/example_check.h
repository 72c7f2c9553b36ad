/* example_check.h — the error checks every example uses, kept here so that each example reads
 * as the allocation story it tells.
 *
 * Before including this header, an example names itself, e.g.
 *     #define EXAMPLE_NAME "training_step"
 * and its failure messages start with that name.
 *
 *   CHECK_GPOOL(call)  runs a gpool call; every gpool call returns a status, and on failure
 *                      gpool_last_error() says exactly what happened. Prints both and exits 1.
 *   CHECK_CU(call)     runs a CUDA driver call (the examples' own streams and copies); on
 *                      failure prints the driver's error name and exits 1.
 *
 * Real programs would handle errors rather than exit; the examples keep it short.
 */
#ifndef GPOOL_EXAMPLE_CHECK_H
#define GPOOL_EXAMPLE_CHECK_H

#include <cuda.h>
#include <gpool.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef EXAMPLE_NAME
#error "define EXAMPLE_NAME (the example's name, a string) before including example_check.h"
#endif

#define CHECK_GPOOL(call)                                                                          \
    do {                                                                                           \
        gpool_status st_ = (call);                                                                 \
        if (st_ != GPOOL_OK) {                                                                     \
            fprintf(stderr, EXAMPLE_NAME ": %s failed: %s: %s\n", #call, gpool_strerror(st_),      \
                    gpool_last_error());                                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *name_ = "?";                                                               \
            cuGetErrorName(r_, &name_);                                                            \
            fprintf(stderr, EXAMPLE_NAME ": %s failed: %s\n", #call, name_);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
