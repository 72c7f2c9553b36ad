/* The thread-local error message (error.h): every failing path sets it with gp_fail and
 * returns its status; gpool_last_error reads it. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

gpool_status gp_fail(gpool_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

gpool_status gp_named(gpool_status st, const char *call)
{
    if (st == GPOOL_OK) return st;
    size_t n = strlen(call), skip = 0;
    if (!strncmp(last_error, call, n) && last_error[n] == ':') return st;
    if (!strncmp(last_error, "gpool_", 6)) { /* another public call's name: replace it */
        size_t k = 6;
        while ((last_error[k] >= 'a' && last_error[k] <= 'z') || last_error[k] == '_')
            k++;
        if (last_error[k] == ':') skip = k + (last_error[k + 1] == ' ' ? 2 : 1);
    }
    char buf[sizeof last_error];
    int k = snprintf(buf, sizeof buf, "%s: ", call);
    if (k < 0 || (size_t)k >= sizeof buf) return st;
    size_t len = strlen(last_error + skip), room = sizeof buf - (size_t)k - 1;
    if (len > room) len = room; /* the end of a long message goes, as gp_fail's would */
    memcpy(buf + k, last_error + skip, len);
    buf[(size_t)k + len] = '\0';
    memcpy(last_error, buf, (size_t)k + len + 1);
    return st;
}

void gp_clear_error(void)
{
    last_error[0] = '\0';
}

const char *gpool_last_error(void)
{
    return last_error;
}

const char *gpool_strerror(gpool_status status)
{
    switch (status) {
    case GPOOL_OK:
        return "success";
    case GPOOL_ERR_INVALID_ARG:
        return "invalid argument";
    case GPOOL_ERR_OUT_OF_MEMORY:
        return "out of memory";
    case GPOOL_ERR_INVALID_POINTER:
        return "invalid pointer";
    case GPOOL_ERR_NO_DRIVER:
        return "CUDA driver not available";
    case GPOOL_ERR_NO_DEVICE:
        return "no CUDA device";
    case GPOOL_ERR_UNSUPPORTED:
        return "not supported by the device or driver";
    case GPOOL_ERR_DRIVER:
        return "CUDA driver call failed";
    case GPOOL_ERR_CONFIG:
        return "bad configuration";
    case GPOOL_ERR_LIVE_BLOCKS:
        return "pool destroyed with live blocks";
    case GPOOL_ERR_IO:
        return "I/O error";
    }
    return "unknown status";
}

/* "MAJOR.MINOR.PATCH" from the macros in gpool.h, so the two cannot disagree. */
#define GP_STR_(x) #x
#define GP_STR(x)  GP_STR_(x)
#define GP_VERSION_STRING                                                                          \
    GP_STR(GPOOL_VERSION_MAJOR) "." GP_STR(GPOOL_VERSION_MINOR) "." GP_STR(GPOOL_VERSION_PATCH)

const char *gpool_version(void)
{
    return GP_VERSION_STRING;
}
