/*
 * gelu.h - float64 reference GELU, the exact-erf form (libm's double erf)
 * and the tanh form (TB_GELU_TANH, libm's double tanh): the
 * oracle for lib/backend/cpu/gelu_test.c and kernels/gelu_cuda_test.c, and the
 * benchmark's max-error column. Slow on purpose: plain loops, no threads.
 */
#ifndef TB_GELU_REF_H
#define TB_GELU_REF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

double tb_ref_gelu(double x);      /* 0.5 x (1 + erf(x / sqrt2)) */
double tb_ref_gelu_grad(double x); /* Phi(x) + x phi(x) */

/* y = gelu(x), computed in double, rounded once to float. */
void tb_ref_gelu_fwd(const float *x, float *y, size_t n);
/* dx = dy * gelu'(x), computed in double, rounded once to float. */
void tb_ref_gelu_bwd(const float *x, const float *dy, float *dx, size_t n);

/* How far a float result is from the double reference:
 *   max_abs    = max |got - ref|
 *   max_scaled = max |got - ref| / max(1, |x|), the bound the tests state
 *                (it stays meaningful where gelu(x) ~ 0 for x << 0)
 *   worst      = index of the largest scaled error */
typedef struct tb_ref_err {
    double max_abs;
    double max_scaled;
    size_t worst;
} tb_ref_err;

/* Error of y against gelu(x). A NaN or Inf in y counts as an infinite
 * error, so a bound check on the result fails. */
tb_ref_err tb_ref_gelu_fwd_err(const float *x, const float *y, size_t n);
/* Error of dx against dy * gelu'(x); max_scaled divides by max(1, |dy|)
 * instead (gelu' is bounded, in [-0.17, 1.13]). */
tb_ref_err tb_ref_gelu_bwd_err(const float *x, const float *dy, const float *dx, size_t n);

/* The tanh GELU (TB_GELU_TANH, lib/backend/backend.h), in double:
 *   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
double tb_ref_gelu_tanh(double x);
double tb_ref_gelu_tanh_grad(double x); /* its derivative, by the chain rule */
void tb_ref_gelu_tanh_fwd(const float *x, float *y, size_t n);
void tb_ref_gelu_tanh_bwd(const float *x, const float *dy, float *dx, size_t n);
/* The error helpers above, against the tanh form. */
tb_ref_err tb_ref_gelu_tanh_fwd_err(const float *x, const float *y, size_t n);
tb_ref_err tb_ref_gelu_tanh_bwd_err(const float *x, const float *dy, const float *dx, size_t n);

#ifdef __cplusplus
}
#endif
#endif
