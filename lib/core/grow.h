/*
 * grow.h - room for one more element in a growable array, the one
 * realloc-doubling step that caches, logs and record lists share.
 *
 *   if ((rc = TB_GROW(c->entries, c->cap, c->count, 16, "the conv cache")) != TB_OK) ...
 *   c->entries[c->count++] = e;
 *
 * Header only; exercised by its users (the conv algorithm cache of
 * lib/nn/layers.c, through //lib/nn:layers_test and the training tests).
 */
#ifndef TB_GROW_H
#define TB_GROW_H

#include <stdlib.h>

#include "lib/core/status.h"

/* *items holds *cap elements of elem bytes, count of them in use. When
 * count == *cap the array doubles (first_cap when empty); *items and *cap
 * change only on success. TB_ERR_NOMEM naming what. REQUIRES: first_cap > 0. */
static inline int tb_grow(void **items, int *cap, int count, size_t elem, int first_cap,
                          const char *what)
{
    if (count < *cap)
        return TB_OK;
    int n = *cap ? 2 * *cap : first_cap;
    void *p = realloc(*items, (size_t)n * elem);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory growing %s", what);
    *items = p;
    *cap = n;
    return TB_OK;
}

/* tb_grow on a typed array pointer: TB_GROW(arr, cap, count, first, what). */
#define TB_GROW(arr, cap, count, first_cap, what)                                      \
    tb_grow((void **)&(arr), &(cap), (count), sizeof *(arr), (first_cap), (what))

#endif
