/* heap_check.c — the address-space heap's invariants (see check.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

/* Count a violation; the first one is the message. */
void gp_check_bad(check_ctx *c, const char *fmt, ...)
{
    if (c->n++ || !c->msg || !c->cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->cap, fmt, ap);
    va_end(ap);
}

static int key_less(const gp_range *a, const gp_range *b)
{
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* Walk the treap: BST order within (lo, hi), parent priority >= child's, every node free.
 * Returns the node count (bounded, so a cycle cannot hang the check). */
static size_t treap_walk(check_ctx *c, const gp_range *n, const gp_range *lo, const gp_range *hi,
                         size_t *bytes, size_t budget)
{
    size_t count = 0;
    while (n) {
        if (count >= budget) {
            gp_check_bad(c, "treap: more nodes than free ranges (a cycle?)");
            return count;
        }
        count++;
        *bytes += n->size;
        if (!n->is_free)
            gp_check_bad(c, "range %#" PRIxPTR " is in the free index but allocated", n->addr);
        if ((lo && !key_less(lo, n)) || (hi && !key_less(n, hi)))
            gp_check_bad(c,
                         "treap order: range %#" PRIxPTR " (%zu bytes) out of (size, addr) order",
                         n->addr, n->size);
        if ((n->left && n->left->prio > n->prio) || (n->right && n->right->prio > n->prio))
            gp_check_bad(c, "treap priority: a child of range %#" PRIxPTR " outranks it", n->addr);
        count += treap_walk(c, n->left, lo, n, bytes, budget - count);
        lo = n; /* right subtree: iterate */
        n = n->right;
    }
    return count;
}

/* A free range's marks: at most GP_MARKS, of real streams, spans inside the range. */
static void check_marks(check_ctx *c, const gp_range *r)
{
    if (r->nmarks > GP_MARKS) {
        gp_check_bad(c, "range %#" PRIxPTR ": %u marks", r->addr, r->nmarks);
        return;
    }
    for (size_t i = 0; i < r->nmarks; i++) {
        const gp_mark *m = &r->marks[i];
        if (m->tag == GP_TAG_CLEAN)
            gp_check_bad(c, "range %#" PRIxPTR ": a mark of the clean tag", r->addr);
        if (m->lo >= m->hi || m->lo < r->addr || m->hi > r->addr + r->size)
            gp_check_bad(c,
                         "range %#" PRIxPTR ": mark of %#" PRIxPTR " spans [%#" PRIxPTR
                         ", %#" PRIxPTR ") outside it",
                         r->addr, m->tag, m->lo, m->hi);
    }
}

size_t gp_heap_check(const gp_heap *h, char *msg, size_t cap)
{
    check_ctx c = {msg, cap, 0};
    if (msg && cap) msg[0] = 0;
    size_t free_ranges = 0, free_bytes = 0, marked = 0;
    for (size_t i = 0; i < h->nregions; i++) {
        const gp_region *g = &h->regions[i];
        uintptr_t at = g->base;
        const gp_range *prev = NULL;
        /* allocated bytes per page, recomputed */
        uint32_t *used = calloc(g->npages ? g->npages : 1, sizeof *used);
        if (g->npages != g->size >> g->page_shift || ((size_t)1 << g->page_shift) != g->page)
            gp_check_bad(&c, "region %zu: page size/count inconsistent", i);
        for (const gp_range *r = g->first; r; prev = r, r = r->next) {
            if (r->prev != prev) gp_check_bad(&c, "range %#" PRIxPTR ": prev link broken", r->addr);
            if (r->region != i)
                gp_check_bad(&c, "range %#" PRIxPTR ": region %u, in %zu", r->addr, r->region, i);
            if (r->addr != at)
                gp_check_bad(&c,
                             "region %zu: range at %#" PRIxPTR ", expected %#" PRIxPTR
                             " (gap or overlap)",
                             i, r->addr, at);
            if (r->size == 0 || r->size % GP_MIN_ALIGN || r->addr % GP_MIN_ALIGN)
                gp_check_bad(&c, "range %#" PRIxPTR ": size %zu not a positive multiple of %u",
                             r->addr, r->size, GP_MIN_ALIGN);
            if (r->addr + r->size > g->base + g->size || r->addr + r->size < r->addr) {
                gp_check_bad(&c, "range %#" PRIxPTR " runs past its region", r->addr);
                break;
            }
            at = r->addr + r->size;
            if (r->is_free) {
                free_ranges++;
                free_bytes += r->size;
                marked += r->nmarks > 0;
                check_marks(&c, r);
                if (gp_heap_mergeable(h, prev, r))
                    gp_check_bad(&c,
                                 "free ranges %#" PRIxPTR " and %#" PRIxPTR
                                 " would merge but are not coalesced",
                                 prev->addr, r->addr);
            } else {
                if (r->left || r->right || r->dprev || r->dnext)
                    gp_check_bad(&c, "allocated range %#" PRIxPTR " keeps index links", r->addr);
                if (r->nmarks)
                    gp_check_bad(&c, "allocated range %#" PRIxPTR " keeps marks", r->addr);
                if (used) {
                    size_t p0 = (r->addr - g->base) >> g->page_shift;
                    size_t p1 = (r->addr + r->size - 1 - g->base) >> g->page_shift;
                    for (size_t p = p0; p <= p1; p++) {
                        uintptr_t lo = g->base + (p << g->page_shift), hi = lo + g->page;
                        uintptr_t s = lo > r->addr ? lo : r->addr;
                        uintptr_t e = hi < r->addr + r->size ? hi : r->addr + r->size;
                        used[p] += (uint32_t)(e - s);
                    }
                }
            }
        }
        if (at != g->base + g->size)
            gp_check_bad(&c, "region %zu: ranges end at %#" PRIxPTR ", the region at %#" PRIxPTR, i,
                         at, g->base + g->size);
        for (size_t p = 0; used && p < g->npages; p++)
            if (used[p] != g->page_used[p]) {
                gp_check_bad(&c, "region %zu page %zu: page_used %u, allocated bytes %u", i, p,
                             g->page_used[p], used[p]);
                break;
            }
        free(used);
    }
    if (free_bytes != h->free_bytes)
        gp_check_bad(&c, "free_bytes %zu, free ranges hold %zu", h->free_bytes, free_bytes);
    size_t bytes = 0;
    size_t indexed = treap_walk(&c, h->root, NULL, NULL, &bytes, free_ranges + 1);
    if (indexed != free_ranges || h->nfree != free_ranges)
        gp_check_bad(&c, "%zu free ranges, %zu indexed, count %zu", free_ranges, indexed, h->nfree);
    size_t d = 0;
    const gp_range *dp = NULL;
    for (const gp_range *r = h->dirty; r && d <= free_ranges; dp = r, r = r->dnext, d++) {
        if (r->dprev != dp) gp_check_bad(&c, "dirty list links broken");
        if (!r->is_free || !r->nmarks)
            gp_check_bad(&c, "dirty list holds range %#" PRIxPTR " (free %d, %u marks)", r->addr,
                         r->is_free, r->nmarks);
    }
    if (d != marked)
        gp_check_bad(&c, "dirty list holds %zu, %zu free ranges have marks", d, marked);
    return c.n;
}

void gp_check_abort(const char *what, const char *file, int line)
{
    fprintf(stderr, "gpool debug check failed at %s:%d: %s\n", file, line, what);
    abort();
}
