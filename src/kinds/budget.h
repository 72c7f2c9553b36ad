/* A kind's budget and name: the one admission rule every allocation path passes (an attempt of
 * either kind, a thread cache's refill), applied where the kind takes memory, and the one table
 * of kind names. The budgets themselves are configuration (gpool_config.budget_*). */
#ifndef GPOOL_BUDGET_H
#define GPOOL_BUDGET_H

#include <stdint.h>

#include "gpool.h"

/* Whether kind admits `size` more bytes with `in_use` bytes in use, charging `charge` (the
 * size rounded as the kind counts it) against its budget. GPOOL_OK, or
 * GPOOL_ERR_OUT_OF_MEMORY with a message naming the budget (or the device's size). */
gpool_status gp_budget_admit(const gpool_t *pool, gpool_mem_kind kind, size_t size, uint64_t in_use,
                             uint64_t charge);

/* How many of `want` blocks of `unit` bytes kind's budget admits with `in_use` bytes in use
 * (want when the kind has no budget): the rule gp_budget_admit applies to one block, for a
 * thread cache taking several at once (so a cache never holds more than the budget allows). */
size_t gp_budget_admit_count(const gpool_t *pool, gpool_mem_kind kind, size_t unit, size_t want,
                             uint64_t in_use);

/* The kind's name in messages, stats and dumps ("device", "host_pinned", ...), and in trace
 * files ("device", "pinned", "mapped"; "" for AUTO). */
const char *gp_kind_name(gpool_mem_kind kind);
const char *gp_kind_trace_name(gpool_mem_kind kind);

#endif
