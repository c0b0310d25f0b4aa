/*
 * grow.h - room for one more element in an array that grows by doubling
 * (result rows, trace events, telemetry samples, document blocks). Header
 * only.
 *
 * Test: bazel test //lib/core:grow_test
 */
#ifndef TB_GROW_H
#define TB_GROW_H

#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* items (NULL at first) is a malloc'ed array of *cap elements of elem
 * bytes, n of them used. Returns it with room for n + 1: when n == *cap,
 * realloc'ed to twice *cap elements (first when *cap is 0) and *cap
 * updated. Returns NULL when out of memory; items and *cap are then
 * unchanged, so the caller still owns the old array.
 * REQUIRES: n <= *cap, elem > 0, first > 0. */
static inline void *tb_grow(void *items, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return items;
    size_t want = *cap ? 2 * *cap : first;
    void *p = realloc(items, want * elem);
    if (p)
        *cap = want;
    return p;
}

#ifdef __cplusplus
}
#endif
#endif
