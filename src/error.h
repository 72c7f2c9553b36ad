/* Thread-local error messages: every failing path sets one and returns its status. */
#ifndef GPOOL_ERROR_H
#define GPOOL_ERROR_H

#include "gpool.h"

/* Format the calling thread's last-error message and return st. */
gpool_status gp_fail(gpool_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear the calling thread's message (at the start of each public call). */
void gp_clear_error(void);

#endif
