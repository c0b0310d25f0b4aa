/*
 * tokens.h - plain C reference of the token-model embedding slots of
 * lib/backend/backend.h (embedding_fwd, embedding_bwd): straight loops, one
 * thread, sums in double. The oracle of lib/backend/cpu/tokens_test.c and of
 * bench:selfcheck (lib/selfcheck/tokens.c), and the float64 ops a layer's
 * gradient check calls. Slow on purpose.
 *
 * Shapes are the slots': tokens (rows) int32, token-major rows r = b * seq +
 * t; wte (vocab, d); wpe (at least seq, d), position t = r % seq; y and dy
 * (rows, d). The backward writes or adds rows [0, vocab) of dwte and rows
 * [0, seq) of dwpe only: rows of a longer position table (context > seq)
 * are the caller's (the embedding layer zeroes them when it writes).
 *
 * Unlike the fast versions, these check every token and return
 * TB_ERR_INVALID for one outside [0, vocab), before writing anything: the
 * reference never reads outside the table either.
 *
 * Tests: bazel test //lib/backend/cpu:cpu_tokens_test
 */
#ifndef TB_TOKENS_REF_H
#define TB_TOKENS_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = wte[tokens[r], :] + wpe[r % seq, :], each element added in
 * double and rounded once. REQUIRES: rows >= 0, seq >= 1, d >= 1, vocab >= 1. */
int tb_ref_embedding_fwd(const int32_t *tokens, const float *wte, const float *wpe, int rows,
                         int seq, int d, int vocab, float *y);
/* dwte[v, :] = (accumulate_wte ? dwte[v, :] : 0) + sum of dy[r, :] over r with tokens[r] == v;
 * dwpe[t, :] = (accumulate_wpe ? dwpe[t, :] : 0) + sum of dy[r, :] over r with r % seq == t;
 * each sum (the old value included) in double, rounded once. Same REQUIRES. */
int tb_ref_embedding_bwd(const int32_t *tokens, const float *dy, int rows, int seq, int d,
                         int vocab, float *dwte, int accumulate_wte, float *dwpe,
                         int accumulate_wpe);

/* The same in double, for finite-difference gradient checks (no checks:
 * REQUIRES every token in [0, vocab)). */
void tb_ref_embedding_fwd_f64(const int32_t *tokens, const double *wte, const double *wpe,
                              int rows, int seq, int d, double *y);
void tb_ref_embedding_bwd_f64(const int32_t *tokens, const double *dy, int rows, int seq, int d,
                              int vocab, double *dwte, int accumulate_wte, double *dwpe,
                              int accumulate_wpe);

#ifdef __cplusplus
}
#endif
#endif
