/*
 * gelu.c - float64 reference GELU; see gelu.h.
 */
#include "lib/backend/ref/gelu.h"

#include <math.h>

#define TB_REF_SQRT1_2 0.70710678118654752440
#define TB_REF_INV_SQRT_2PI 0.39894228040143267794
#define TB_REF_SQRT_2_PI 0.79788456080286535588 /* sqrt(2/pi) */
#define TB_REF_TANH_C 0.044715

double tb_ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x * TB_REF_SQRT1_2)); }

double tb_ref_gelu_grad(double x)
{
    return 0.5 * (1.0 + erf(x * TB_REF_SQRT1_2)) + x * exp(-0.5 * x * x) * TB_REF_INV_SQRT_2PI;
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

/* The loops both forms share: f is the GELU, g its derivative, each in
 * double and rounded once to float. */
typedef double (*gelu_fn)(double x);

static void fwd_with(gelu_fn f, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)f(x[i]);
}

static void bwd_with(gelu_fn g, const float *x, const float *dy, float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = (float)((double)dy[i] * g(x[i]));
}

static tb_ref_err fwd_err_with(gelu_fn f, const float *x, const float *y, size_t n)
{
    tb_ref_err e = {0};
    for (size_t i = 0; i < n; i++)
        err_add(&e, i, y[i], f(x[i]), fabs((double)x[i]));
    return e;
}

static tb_ref_err bwd_err_with(gelu_fn g, const float *x, const float *dy, const float *dx,
                               size_t n)
{
    tb_ref_err e = {0};
    for (size_t i = 0; i < n; i++)
        err_add(&e, i, dx[i], (double)dy[i] * g(x[i]), fabs((double)dy[i]));
    return e;
}

void tb_ref_gelu_fwd(const float *x, float *y, size_t n) { fwd_with(tb_ref_gelu, x, y, n); }

void tb_ref_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    bwd_with(tb_ref_gelu_grad, x, dy, dx, n);
}

tb_ref_err tb_ref_gelu_fwd_err(const float *x, const float *y, size_t n)
{
    return fwd_err_with(tb_ref_gelu, x, y, n);
}

tb_ref_err tb_ref_gelu_bwd_err(const float *x, const float *dy, const float *dx, size_t n)
{
    return bwd_err_with(tb_ref_gelu_grad, x, dy, dx, n);
}

/* ---- the tanh form ---- */

double tb_ref_gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(TB_REF_SQRT_2_PI * (x + TB_REF_TANH_C * x * x * x)));
}

/* d/dx: 0.5 (1 + tanh a) + 0.5 x (1 - tanh^2 a) a'(x); 1 - tanh^2 as
 * 1 / cosh^2, which does not cancel for large |a|. */
double tb_ref_gelu_tanh_grad(double x)
{
    double a = TB_REF_SQRT_2_PI * (x + TB_REF_TANH_C * x * x * x);
    double da = TB_REF_SQRT_2_PI * (1.0 + 3.0 * TB_REF_TANH_C * x * x);
    double ch = cosh(a);
    return 0.5 * (1.0 + tanh(a)) + 0.5 * x * da / (ch * ch);
}

void tb_ref_gelu_tanh_fwd(const float *x, float *y, size_t n)
{
    fwd_with(tb_ref_gelu_tanh, x, y, n);
}

void tb_ref_gelu_tanh_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    bwd_with(tb_ref_gelu_tanh_grad, x, dy, dx, n);
}

tb_ref_err tb_ref_gelu_tanh_fwd_err(const float *x, const float *y, size_t n)
{
    return fwd_err_with(tb_ref_gelu_tanh, x, y, n);
}

tb_ref_err tb_ref_gelu_tanh_bwd_err(const float *x, const float *dy, const float *dx, size_t n)
{
    return bwd_err_with(tb_ref_gelu_tanh_grad, x, dy, dx, n);
}
