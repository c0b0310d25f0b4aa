/*
 * optable.h - the list of struct tb_backend's function-pointer slots, for
 * walking a backend's table by name (bench:selfcheck, lib/selfcheck/selfcheck.c).
 *
 * The list is not written by hand: tools/gen_optable.py reads lib/backend/backend.h
 * at build time (the genrule //lib/backend:optable_gen) and writes optable.c, so a
 * slot added to backend.h is in tb_optable on the next build, and
 * //lib/selfcheck:selfcheck_test fails until it has a selfcheck case.
 *
 * Kinds follow backend.h's layout: slots declared before the struct's first
 * "---- <section> ----" heading are runtime slots (memory, streams, events,
 * device info, destroy); slots under a heading are ops.
 */
#ifndef TB_OPTABLE_H
#define TB_OPTABLE_H

#include <stddef.h>
#include <string.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_slot_kind {
    TB_SLOT_RUNTIME = 0, /* memory, streams, events, device info, destroy */
    TB_SLOT_OP = 1,      /* an op: has a selfcheck case */
} tb_slot_kind;

typedef struct tb_slot_info {
    const char *name;    /* the member's name, e.g. "conv_fwd" */
    size_t offset;       /* offsetof(tb_backend, name) */
    tb_slot_kind kind;
    const char *section; /* backend.h's heading, e.g. "convolution"; "runtime" */
} tb_slot_info;

/* Any slot's value, type-erased: only compared with NULL or stored back. */
typedef void (*tb_slot_fn)(void);

/* Every slot, in declaration order (generated from backend.h by the
 * :optable_gen rule of lib/backend/BUILD). */
extern const tb_slot_info tb_optable[];
extern const size_t tb_optable_count;

/* The slot named name, or NULL. */
static inline const tb_slot_info *tb_optable_find(const char *name)
{
    for (size_t i = 0; i < tb_optable_count; i++)
        if (strcmp(tb_optable[i].name, name) == 0)
            return &tb_optable[i];
    return NULL;
}

/* The value of slot s in be (NULL when the backend leaves it empty). */
static inline tb_slot_fn tb_slot_get(const tb_backend *be, const tb_slot_info *s)
{
    tb_slot_fn f;
    memcpy(&f, (const char *)be + s->offset, sizeof f);
    return f;
}

/* Sets slot s of be to f (tests use it to break one op on purpose). */
static inline void tb_slot_set(tb_backend *be, const tb_slot_info *s, tb_slot_fn f)
{
    memcpy((char *)be + s->offset, &f, sizeof f);
}

#ifdef __cplusplus
}
#endif
#endif
