/*
 * selfcheck.h - runs every op of a backend against the plain CPU reference
 * and says, one line per check, whether it is right.
 *
 * The walk follows lib/backend/optable.h (generated from lib/backend/backend.h), so it
 * reaches every slot of the table:
 *   - runtime slots (memory, streams, events, device info): a round trip
 *     through them (alloc, h2d, d2d, d2h, memset, async copies on a stream,
 *     event timing);
 *   - op slots: each has a check (listed in op_checks[] of lib/selfcheck/selfcheck.c,
 *     written in the lib/selfcheck_*.c file of its op family) that runs the
 *     op on the backend under test and the reference (lib/backend/ref/ops.h,
 *     lib/backend/ref/conv.h, lib/backend/ref/gelu.h) on fresh random inputs at a few
 *     sizes, odd ones included, and compares with the tolerance
 *     lib/selfcheck/internal.h states for that op; convolutions with the default
 *     algorithm and every one conv_find returns;
 *   - training step checks (a table in lib/selfcheck/train.c): toggles against
 *     the CPU backend, and --pin-memory / --non-blocking against pageable
 *     copies on the same backend (bitwise: a copy does not change data);
 *   - training-toggle cases (lib/selfcheck/toggles.c): every training toggle
 *     on the backend under test against its fp32 equivalent on the CPU, by
 *     the loss after a few steps, within a tolerance per dtype (fp32 1e-3,
 *     tf32 1e-2, bf16 3e-2, fp16 1e-2; the file says why). --only picks
 *     them by name too ("--only=amp").
 * Lines look like
 *   PASS conv_fwd NCHW 2x3x7x7 k5 3x3 s1 p1 bias algo=<name> max_rel_err=1.2e-07 tol=1e-05
 *   PASS step amp=bf16 (vs fp32) dtype=bf16 loss=2.0784 cpu=2.0775 rel_err=0.00044 tol=0.03
 *   FAIL relu_fwd n=1003 y: max_rel_err=1 > tol=0 at index 5 (got 0.3, want 0)
 *   n/a  gemm 64x48x80 math=lowp: <why>
 * and end with "selfcheck: N passed, N failed, N n/a".
 *
 * A NULL slot is n/a (with the reason) only where lib/backend/backend.h allows NULL
 * (mem_empty_cache, mem_set_mode); anywhere else it is a failure. A variant
 * a backend may lack (TF32 or low-precision math, optimizers beyond SGD and
 * AdamW) returning TB_ERR_UNSUPPORTED is n/a; the fp32 base case never is.
 *
 * Run it: bazel run //bench:selfcheck [-- --device=cuda:N | --device=cpu]
 * Tested: bazel test //lib/selfcheck:selfcheck_test (the CPU fast paths, coverage).
 */
#ifndef TB_SELFCHECK_H
#define TB_SELFCHECK_H

#include <stdint.h>
#include <stdio.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_selfcheck_opts {
    FILE *out;          /* the lines and the summary; stdout when NULL */
    uint64_t seed;      /* inputs depend on it only; 0 = a fixed default */
    const char *filter; /* only slots whose name contains it; NULL = all */
} tb_selfcheck_opts;

typedef struct tb_selfcheck_counts {
    int passed, failed, na;
} tb_selfcheck_counts;

/* Walks be's table as the file header says, printing one line per check
 * and the summary. Returns TB_OK when the walk ran, whatever the verdicts
 * (they are in *counts; a check that could not run is a failure there).
 * REQUIRES: be open; opts may be NULL (defaults). */
int tb_selfcheck_run(tb_backend *be, const tb_selfcheck_opts *opts, tb_selfcheck_counts *counts);

/* The coverage rule, as //lib/selfcheck:selfcheck_test checks it: every op slot of
 * lib/backend/optable.h has a check function, every runtime slot is in the
 * not-an-op list, and neither list names a slot backend.h does not have
 * (or puts an op among the runtime slots). Prints one line per problem,
 * naming the slot, to out; returns the number of problems. */
int tb_selfcheck_coverage(FILE *out);

/* A training step check: the same few optimizer steps of one toggle
 * setting on the backend under test and on the CPU backend (or, where ref
 * says so, of the toggle's off setting on the same backend), compared by
 * the loss after them. run writes both losses; TB_ERR_UNSUPPORTED means
 * the setting has no meaning on be (reported n/a with the message). */
typedef struct tb_step_check {
    const char *name; /* the toggle and its setting, e.g. "default config" */
    double tol;       /* relative, on the final loss; 0: bitwise equal */
    const char *why;  /* why that tolerance */
    int (*run)(tb_backend *be, double *loss_be, double *loss_ref);
    const char *ref;  /* what loss_ref comes from; NULL: "CPU" */
    const char *dtype; /* what the backend under test computes in; NULL: "fp32" */
} tb_step_check;

/* The table of them is sc_step_checks[] in lib/selfcheck/train.c. */

/* Host stand-ins for the device-data slots, with the slots' signatures:
 * the references the augment_u8 and labels_u8_to_i32 checks compare with
 * (augment_u8 from kernels/augment_math.h, as datasets/augment.c does). A
 * test puts them in a copy of a CPU backend, where those slots are NULL, to
 * drive --augment-on-device and --tensors-on-device through the trainer on
 * the CPU. be is unused. REQUIRES: host pointers. Return TB_OK. */
int tb_selfcheck_host_augment_u8(tb_backend *be, const tb_augment_desc *d, const uint8_t *src,
                                 const int32_t *params, float *dst, int n);
int tb_selfcheck_host_labels_u8_to_i32(tb_backend *be, const uint8_t *src, int32_t *dst, int n);

#ifdef __cplusplus
}
#endif
#endif
