/* Invalid-pointer reports (bad_pointer.h): every GPOOL_ERR_INVALID_POINTER about a pointer
 * gpool does not own, an interior pointer or a double free is worded here, so that every kind
 * and path says the same thing in the same words. */
#include "bad_pointer.h"

#include <inttypes.h>

#include "budget.h"
#include "error.h"
#include "policy.h"

gpool_status gp_bad_pointer(const void *ptr, gp_bad_ptr why, gpool_mem_kind kind, uintptr_t base)
{
    const char *name = kind == GPOOL_MEM_AUTO    ? ""
                       : kind == GP_MEM_HOST_ANY ? "host"
                                                 : gp_kind_name(kind);
    const char *sp = kind == GPOOL_MEM_AUTO ? "" : " ";
    switch (why) {
    case GP_PTR_FOREIGN:
        return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p was not allocated by this pool", ptr);
    case GP_PTR_FOREIGN_LOCKED:
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "%p is page-locked host memory this pool did not allocate (another pool's "
                       "block, or cuMemHostAlloc/cuMemHostRegister memory): free it where it "
                       "came from",
                       ptr);
    case GP_PTR_INTERIOR:
        if (base)
            return gp_fail(GPOOL_ERR_INVALID_POINTER,
                           "%p is inside the %s%sblock at 0x%" PRIxPTR
                           " but not its start: free the address gpool_alloc returned",
                           ptr, name, sp, base);
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "%p is inside a %s%sblock but not its start: free the address gpool_alloc "
                       "returned",
                       ptr, name, sp);
    case GP_PTR_FREED:
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "%p is in this pool's %s%smemory but not a live block: already freed", ptr,
                       name, sp);
    case GP_PTR_HOST_ALIAS:
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "%p is the host address of the %s%sblock at 0x%" PRIxPTR
                       ": pass the address gpool_alloc returned",
                       ptr, name, sp, base);
    case GP_PTR_PENDING:
        return gp_fail(GPOOL_ERR_INVALID_POINTER,
                       "%p was already freed: a double free (its first free is pending on a "
                       "stream)",
                       ptr);
    }
    return gp_fail(GPOOL_ERR_INVALID_POINTER, "%p is not a live block of this pool", ptr);
}
