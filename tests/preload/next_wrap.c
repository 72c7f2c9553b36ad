/* next_wrap.c — libnext_wrap.so wraps next_value() the way interposers do, through
 * dlsym(RTLD_NEXT). If the interposed dlsym resolved RTLD_NEXT relative to itself instead of
 * this library, it would find this very function and recurse. */
#include <dlfcn.h>

int next_value(void);
int next_value(void)
{
    int (*next)(void);
    *(void **)&next = dlsym(RTLD_NEXT, "next_value");
    if (!next || next == next_value) return -1;
    return next() + 1;
}
