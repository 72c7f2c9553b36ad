/* Thread-local error messages: every failing path sets one and returns its status. The
 * message stays until the thread's next failure sets another: public calls do not clear it on
 * entry or on success (gpool_last_error() promises only that it describes the last failure;
 * docs/api.md, "Errors"). */
#ifndef GPOOL_ERROR_H
#define GPOOL_ERROR_H

#include "gpool.h"

/* Format the calling thread's last-error message and return st. */
gpool_status gp_fail(gpool_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For a public call's failure: make the message start with "call: " (kept when it does,
 * replacing another public call's or struct's name an inner path put there, else prepended),
 * so the message names its source once. call may be a setting too ("GPOOL_CONF"). Returns st;
 * GPOOL_OK leaves the message alone. */
gpool_status gp_named(gpool_status st, const char *call);

/* The plural ending of a count in a message: "1 live block", "2 live blocks". */
#define GP_PLURAL(n) ((n) == 1 ? "" : "s")

/* Clear the calling thread's message. Not called at each public call: only where an inner
 * step's failure set a message and is recovered from or deliberately ignored (an optional
 * poll, another pool's give-back, a batch's best-effort free), so that its message is not
 * left behind for gpool_last_error(). */
void gp_clear_error(void);

#endif
