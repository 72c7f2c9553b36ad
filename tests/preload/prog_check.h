/* prog_check.h — CHECK(cond) for the helper programs' modes (driver_prog, runtime_prog): when
 * cond does not hold, print "failed: COND (line N)" and return 1 from the mode's function. */
#ifndef GPOOL_TESTS_PROG_CHECK_H
#define GPOOL_TESTS_PROG_CHECK_H

#include <stdio.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("failed: %s (line %d)\n", #cond, __LINE__);                                     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#endif
