/*
 * gelu.c - float64 reference GELU; see gelu.h.
 */
#include "lib/backend/ref/gelu.h"

#include <math.h>

#define TB_REF_SQRT1_2 0.70710678118654752440
#define TB_REF_INV_SQRT_2PI 0.39894228040143267794

double tb_ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x * TB_REF_SQRT1_2)); }

double tb_ref_gelu_grad(double x)
{
    return 0.5 * (1.0 + erf(x * TB_REF_SQRT1_2)) + x * exp(-0.5 * x * x) * TB_REF_INV_SQRT_2PI;
}

void tb_ref_gelu_fwd(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)tb_ref_gelu(x[i]);
}

void tb_ref_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = (float)((double)dy[i] * tb_ref_gelu_grad(x[i]));
}

/* Folds one element's error into e; non-finite results count as infinite. */
static void err_add(tb_ref_err *e, size_t i, double got, double ref, double scale)
{
    double abs_err = isfinite(got) ? fabs(got - ref) : INFINITY;
    double scaled = abs_err / (scale > 1.0 ? scale : 1.0);
    if (abs_err > e->max_abs)
        e->max_abs = abs_err;
    if (scaled > e->max_scaled) {
        e->max_scaled = scaled;
        e->worst = i;
    }
}

tb_ref_err tb_ref_gelu_fwd_err(const float *x, const float *y, size_t n)
{
    tb_ref_err e = {0};
    for (size_t i = 0; i < n; i++)
        err_add(&e, i, y[i], tb_ref_gelu(x[i]), fabs((double)x[i]));
    return e;
}

tb_ref_err tb_ref_gelu_bwd_err(const float *x, const float *dy, const float *dx, size_t n)
{
    tb_ref_err e = {0};
    for (size_t i = 0; i < n; i++)
        err_add(&e, i, dx[i], (double)dy[i] * tb_ref_gelu_grad(x[i]), fabs((double)dy[i]));
    return e;
}
