/*
 * conv_pick.h - which of a convolution library's candidate algorithms a
 * backend runs: its heuristic's first usable one (what PyTorch runs with
 * cudnn.benchmark = False), or, when the caller needs results that repeat
 * bitwise (tb_conv_desc.deterministic, cudnn.deterministic = True), the
 * first usable one that is also deterministic (no floating-point atomics).
 *
 * No cuDNN here: lib/backend/cuda/conv.c translates cuDNN's perf results
 * into candidates, so the choice is tested on the CPU.
 * Test: bazel test //lib/backend:conv_pick_test
 */
#ifndef TB_CONV_PICK_H
#define TB_CONV_PICK_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_conv_candidate {
    int algo;          /* the library's algorithm id */
    int ok;            /* the library can run it on this problem */
    int deterministic; /* its results repeat bitwise, run after run */
} tb_conv_candidate;

/* Index into c[0..n) of the algorithm to run, in the library's order of
 * preference; -1 when none qualifies. REQUIRES: n >= 0, c != NULL if n > 0. */
int tb_conv_pick(const tb_conv_candidate *c, int n, int want_deterministic);

/* 1 when candidate c may be offered at all (an autotuner's list under
 * want_deterministic drops the non-deterministic ones). */
int tb_conv_allowed(const tb_conv_candidate *c, int want_deterministic);

#ifdef __cplusplus
}
#endif
#endif
