/*
 * gradcheck_test.c - every layer's backward against central finite
 * differences in float64, and every layer's fp32 forward against a plain
 * float64 reference.
 *
 * For each layer: random inputs and parameters (never zeros), a random
 * upstream gradient dy, and the scalar L = sum(y * dy). The fp32 layer runs
 * forward and backward through the CPU backend; a float64 reference of the
 * same layer (written here, test-only) gives y and, by central differences
 * (h = 1e-6) of L, dL/dx and dL/dparams. Tolerances, as max |a - r| over
 * max |r| of the tensor:
 *   forward   1e-5: fp32 rounding of sums of at most a few hundred terms
 *             gives ~1e-7 here (measured); 100x room for other summation
 *             orders (oneDNN's blocking, thread counts).
 *   gradients 1e-4: the analytic fp32 gradient also carries the fp32
 *             forward's rounding (e.g. through BN's 1/std), measured below
 *             4e-7; the finite differences themselves are exact to ~1e-9.
 *             A wrong formula is off by O(1).
 * Containers are checked whole: the residual block, and ResNet-50's
 * bottleneck (tb_resnet_bottleneck_create) with a projection shortcut at
 * stride 2 and 1 and with the identity.
 * Parameter gradients are filled with 1e30 before backward with
 * grad_accumulate = 0: the set_to_none contract says the first backward
 * writes them, so any leftover shows up as a failure.
 *
 * Run: bazel test //lib/nn:gradcheck_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/nn/layers.h"
#include "lib/nn/model.h"
#include "lib/nn/tensor.h"
#include "lib/nn/nn_testing.h"

#define FD_H 1e-6
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define MAX_P 16

/* ---- random numbers (the test's own; fixed seed) ---- */
static tb_rng rng = {0x1234567887654321ull};
static double urand(void) /* [-1, 1) */
{
    return tb_rng_uniform(&rng, -1, 1);
}

/* ---- float64 references ---- */
typedef enum ref_kind {
    REF_CONV, REF_BN, REF_RELU, REF_GELU, REF_GELU_TANH, REF_DROPOUT, REF_MAXPOOL, REF_AVGPOOL, REF_LINEAR,
    REF_RESBLOCK, REF_BOTTLENECK,
} ref_kind;

typedef struct gc_case {
    const char *name;
    ref_kind kind;
    int n;                        /* batch */
    tb_shape in, out;
    int k, r, stride, pad, bias;  /* conv; pool uses r (window), stride, pad;
                                     bottleneck: k its width, stride */
    float p;                      /* dropout */
    const double *keep;           /* dropout: 1 kept, 0 dropped (from the fp32 run) */
} gc_case;

static void conv_ref(int n, tb_shape in, int k, int r, int stride, int pad, const double *x,
                     const double *w, const double *b, double *y)
{
    int P = (in.h + 2 * pad - r) / stride + 1, Q = (in.w + 2 * pad - r) / stride + 1;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < k; o++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double s = b ? b[o] : 0;
                    for (int c = 0; c < in.c; c++)
                        for (int u = 0; u < r; u++)
                            for (int v = 0; v < r; v++) {
                                int hh = p * stride - pad + u, ww = q * stride - pad + v;
                                if (hh < 0 || hh >= in.h || ww < 0 || ww >= in.w)
                                    continue;
                                s += x[((i * in.c + c) * in.h + hh) * in.w + ww] *
                                     w[((o * in.c + c) * r + u) * r + v];
                            }
                    y[((i * k + o) * P + p) * Q + q] = s;
                }
}

/* Training-mode batch norm: batch mean and biased variance, eps 1e-5. */
static void bn_ref(int n, tb_shape in, const double *x, const double *g, const double *b, double *y)
{
    int hw = in.h * in.w;
    for (int c = 0; c < in.c; c++) {
        double m = 0, v = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                m += x[(i * in.c + c) * hw + j];
        m /= n * hw;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                double d = x[(i * in.c + c) * hw + j] - m;
                v += d * d;
            }
        v /= n * hw;
        double inv = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                size_t at = (size_t)(i * in.c + c) * hw + j;
                y[at] = g[c] * (x[at] - m) * inv + b[c];
            }
    }
}

static void pool_ref(int n, tb_shape in, int max, int win, int stride, int pad, const double *x,
                     double *y)
{
    int P = (in.h + 2 * pad - win) / stride + 1, Q = (in.w + 2 * pad - win) / stride + 1;
    for (int i = 0; i < n * in.c; i++)
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++) {
                double s = max ? -INFINITY : 0;
                for (int u = 0; u < win; u++)
                    for (int v = 0; v < win; v++) {
                        int hh = p * stride - pad + u, ww = q * stride - pad + v;
                        int inside = hh >= 0 && hh < in.h && ww >= 0 && ww < in.w;
                        double xv = inside ? x[(i * in.h + hh) * in.w + ww] : 0;
                        if (max && inside)
                            s = xv > s ? xv : s;
                        else if (!max)
                            s += xv;
                    }
                y[(i * P + p) * Q + q] = max ? s : s / (win * win);
            }
}

/* relu(bn2(conv2(relu(bn1(conv1(x))))) + x), no conv bias. Parameters in
 * tb_layer_for_each_param order: conv1.w, bn1.g, bn1.b, conv2.w, bn2.g, bn2.b */
static void resblock_ref(const gc_case *c, const double *x, double *const *p, double *y)
{
    size_t m = (size_t)c->n * tb_shape_numel(c->in);
    double *t = malloc(m * sizeof *t), *u = malloc(m * sizeof *u);
    conv_ref(c->n, c->in, c->in.c, 3, 1, 1, x, p[0], NULL, t);
    bn_ref(c->n, c->in, t, p[1], p[2], u);
    for (size_t i = 0; i < m; i++)
        u[i] = u[i] > 0 ? u[i] : 0;
    conv_ref(c->n, c->in, c->in.c, 3, 1, 1, u, p[3], NULL, t);
    bn_ref(c->n, c->in, t, p[4], p[5], u);
    for (size_t i = 0; i < m; i++) {
        double s = u[i] + x[i];
        y[i] = s > 0 ? s : 0;
    }
    free(t);
    free(u);
}

/* conv + BN (+ ReLU) on (n, in) into y; returns the output shape. */
static tb_shape conv_bn_ref(int n, tb_shape in, int k, int r, int stride, int relu,
                            const double *x, double *const *p, double *t, double *y)
{
    tb_shape o = {k, (in.h + 2 * (r / 2) - r) / stride + 1, (in.w + 2 * (r / 2) - r) / stride + 1};
    conv_ref(n, in, k, r, stride, r / 2, x, p[0], NULL, t);
    bn_ref(n, o, t, p[1], p[2], y);
    for (size_t i = 0; relu && i < (size_t)n * tb_shape_numel(o); i++)
        y[i] = y[i] > 0 ? y[i] : 0;
    return o;
}

/* ResNet v1.5 bottleneck of width w = c->k, no conv bias:
 * relu(bn3(conv1x1(4w)(relu(bn2(conv3x3/s(w)(relu(bn1(conv1x1(w)(x))))))))
 *      + shortcut), the shortcut bn(conv1x1/s(4w)(x)) when the stride or the
 * channels change, else x. Parameters in tb_layer_for_each_param order: the
 * main path's (conv, gamma, beta) x 3, then the shortcut's. */
static void bottleneck_ref(const gc_case *c, const double *x, double *const *p, double *y)
{
    int w = c->k, n = c->n;
    size_t cap = (size_t)n * (tb_shape_numel(c->in) + tb_shape_numel(c->out)) * 4;
    double *t = malloc(cap * sizeof *t), *u = malloc(cap * sizeof *u), *v = malloc(cap * sizeof *v);
    tb_shape s = conv_bn_ref(n, c->in, w, 1, 1, 1, x, p, t, u);
    s = conv_bn_ref(n, s, w, 3, c->stride, 1, u, p + 3, t, v);
    s = conv_bn_ref(n, s, 4 * w, 1, 1, 0, v, p + 6, t, y);
    const double *sc = x;
    if (c->stride != 1 || c->in.c != 4 * w) {
        conv_bn_ref(n, c->in, 4 * w, 1, c->stride, 0, x, p + 9, t, u);
        sc = u;
    }
    for (size_t i = 0; i < (size_t)n * tb_shape_numel(s); i++) {
        double sum = y[i] + sc[i];
        y[i] = sum > 0 ? sum : 0;
    }
    free(t);
    free(u);
    free(v);
}

static void ref_forward(const gc_case *c, const double *x, double *const *p, double *y)
{
    size_t m = (size_t)c->n * tb_shape_numel(c->in);
    switch (c->kind) {
    case REF_CONV:
        conv_ref(c->n, c->in, c->k, c->r, c->stride, c->pad, x, p[0], c->bias ? p[1] : NULL, y);
        break;
    case REF_BN: bn_ref(c->n, c->in, x, p[0], p[1], y); break;
    case REF_RELU:
        for (size_t i = 0; i < m; i++)
            y[i] = x[i] > 0 ? x[i] : 0;
        break;
    case REF_GELU:
        for (size_t i = 0; i < m; i++)
            y[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
        break;
    case REF_GELU_TANH: /* GPT-2's: approximate='tanh' */
        for (size_t i = 0; i < m; i++)
            y[i] = 0.5 * x[i] *
                   (1.0 + tanh(0.79788456080286535588 /* sqrt(2/pi) */ *
                               (x[i] + 0.044715 * x[i] * x[i] * x[i])));
        break;
    case REF_DROPOUT:
        for (size_t i = 0; i < m; i++)
            y[i] = x[i] * c->keep[i] / (1.0 - c->p);
        break;
    case REF_MAXPOOL:
    case REF_AVGPOOL:
        pool_ref(c->n, c->in, c->kind == REF_MAXPOOL, c->r, c->stride, c->pad, x, y);
        break;
    case REF_LINEAR:
        tb_linear_ref_f64(c->n, (int)tb_shape_numel(c->in), c->out.c, x, p[0], p[1], y);
        break;
    case REF_RESBLOCK: resblock_ref(c, x, p, y); break;
    case REF_BOTTLENECK: bottleneck_ref(c, x, p, y); break;
    }
}

/* ---- the harness ---- */
typedef struct gc_state {
    const gc_case *c;
    size_t nx, ny;
    double *x, *dy, *y;   /* float64 copies */
    double *p[MAX_P];
    size_t pn[MAX_P];
    int np;
} gc_state;

static double loss_of(gc_state *s)
{
    ref_forward(s->c, s->x, s->p, s->y);
    double l = 0;
    for (size_t i = 0; i < s->ny; i++)
        l += s->y[i] * s->dy[i];
    return l;
}

/* Central difference of L with respect to v[i]. */
static double numeric_grad(gc_state *s, double *v, size_t i)
{
    double keep = v[i];
    v[i] = keep + FD_H;
    double lp = loss_of(s);
    v[i] = keep - FD_H;
    double lm = loss_of(s);
    v[i] = keep;
    return (lp - lm) / (2 * FD_H);
}

/* max |a - r| / max |r|, printed; counts a failure above tol. */
static double compare(const char *what, const char *layer, const float *a, const double *r,
                      size_t n, double tol)
{
    double diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]);
        diff = d > diff || isnan(d) ? d : diff;
        mag = fabs(r[i]) > mag ? fabs(r[i]) : mag;
    }
    double rel = diff / (mag > 1e-12 ? mag : 1e-12);
    int bad = !(rel <= tol);
    printf("  %-22s %-12s rel err %.2e (tol %.0e, |ref| %.3g)%s\n", layer, what, rel, tol, mag,
           bad ? "  FAIL" : "");
    checks++;
    failures += bad;
    return rel;
}

static void collect_param(tb_param *p, void *user)
{
    tb_param **list = user;
    while (*list)
        list++;
    *list = p;
}

/* Fills x with random values; |x| >= min_abs keeps ReLU/maxpool off kinks. */
static void fill_random(float *f, double *d, size_t n, double scale, double min_abs)
{
    for (size_t i = 0; i < n; i++) {
        double v = urand() * scale;
        if (fabs(v) < min_abs)
            v = v < 0 ? v - min_abs : v + min_abs;
        f[i] = (float)v;
        d[i] = (double)f[i];
    }
}

typedef struct fp32_run {
    float *x32, *dy32, *y32, *dx32;
    float *flat_w, *flat_g;   /* host copies of the parameters and gradients */
} fp32_run;

/* Binds parameters to fresh device buffers filled with random values and
 * gradients filled with 1e30 (must be overwritten). */
static int bind_random_params(tb_backend *be, tb_layer *l, gc_state *s, float **dw, float **dg,
                              float **hw)
{
    size_t total = tb_layer_param_count(l);
    size_t bytes = (total ? total : 1) * sizeof(float);
    TB_TRY(be->dev_alloc(be, (void **)dw, bytes));
    TB_TRY(be->dev_alloc(be, (void **)dg, bytes));
    tb_layer_params_bind(l, *dw, *dg);
    tb_param *list[MAX_P + 1] = {0};
    tb_layer_for_each_param(l, collect_param, list);
    *hw = malloc(bytes);
    float *garbage = malloc(bytes);
    size_t at = 0;
    for (s->np = 0; list[s->np]; s->np++) {
        tb_param *p = list[s->np];
        s->pn[s->np] = p->n;
        s->p[s->np] = malloc(p->n * sizeof(double));
        /* gamma around 1 so BN is not near-degenerate; others symmetric */
        double base = p->init == TB_INIT_ONES ? 1.0 : 0.0;
        for (size_t j = 0; j < p->n; j++) {
            (*hw)[at + j] = (float)(base + 0.5 * urand());
            s->p[s->np][j] = (*hw)[at + j];
        }
        at += p->n;
    }
    for (size_t j = 0; j < total; j++)
        garbage[j] = 1e30f;
    TB_TRY(be->copy_h2d(be, *dw, *hw, total * sizeof(float), NULL));
    TB_TRY(be->copy_h2d(be, *dg, garbage, total * sizeof(float), NULL));
    free(garbage);
    return TB_OK;
}

/* Runs one case: forward check, then gradient checks of x and parameters. */
static int run_case(tb_layer_ctx *ctx, tb_layer *l, gc_case *c, double x_min_abs)
{
    tb_backend *be = ctx->be;
    gc_state s = {.c = c};
    s.nx = (size_t)c->n * tb_shape_numel(c->in);
    s.ny = (size_t)c->n * tb_shape_numel(c->out);
    float *dw, *dg, *hw;
    TB_TRY(bind_random_params(be, l, &s, &dw, &dg, &hw));
    TB_TRY(tb_layer_alloc(l, c->n));
    tb_tensor x, dy;
    TB_TRY(tb_tensor_alloc(be, c->n, c->in.c, c->in.h, c->in.w, &x));
    TB_TRY(tb_tensor_alloc(be, c->n, c->out.c, c->out.h, c->out.w, &dy));
    float *x32 = malloc(s.nx * sizeof(float)), *dy32 = malloc(s.ny * sizeof(float));
    float *y32 = malloc(s.ny * sizeof(float)), *dx32 = malloc(s.nx * sizeof(float));
    s.x = malloc(s.nx * sizeof(double));
    s.dy = malloc(s.ny * sizeof(double));
    s.y = malloc(s.ny * sizeof(double));
    fill_random(x32, s.x, s.nx, 1.0, x_min_abs);
    fill_random(dy32, s.dy, s.ny, 1.0, 0.0);
    TB_TRY(tb_tensor_from_host(&x, x32));
    TB_TRY(tb_tensor_from_host(&dy, dy32));

    const tb_tensor *y, *dx;
    ctx->training = 1;
    ctx->grad_accumulate = 0;
    TB_TRY(tb_layer_forward(l, &x, &y));
    TB_TRY(tb_tensor_to_host(y, y32));
    double *keep = NULL;
    if (c->kind == REF_DROPOUT) {
        keep = malloc(s.nx * sizeof(double));
        for (size_t i = 0; i < s.nx; i++)
            keep[i] = y32[i] != 0.0f;
        c->keep = keep;
    }
    TB_TRY(tb_layer_backward(l, &dy, &dx));
    TB_TRY(tb_tensor_to_host(dx, dx32));

    ref_forward(c, s.x, s.p, s.y);
    compare("forward", c->name, y32, s.y, s.ny, TOL_FWD);
    double *num = malloc((s.nx > 4096 ? s.nx : 4096) * sizeof(double));
    for (size_t i = 0; i < s.nx; i++)
        num[i] = numeric_grad(&s, s.x, i);
    compare("dx", c->name, dx32, num, s.nx, TOL_GRAD);

    size_t total = tb_layer_param_count(l);
    float *g32 = malloc((total ? total : 1) * sizeof(float));
    TB_TRY(be->copy_d2h(be, g32, dg, total * sizeof(float), NULL));
    size_t at = 0;
    for (int k = 0; k < s.np; k++) {
        double *pn = malloc(s.pn[k] * sizeof(double));
        for (size_t i = 0; i < s.pn[k]; i++)
            pn[i] = numeric_grad(&s, s.p[k], i);
        char what[32];
        snprintf(what, sizeof what, "d(param %d)", k);
        compare(what, c->name, g32 + at, pn, s.pn[k], TOL_GRAD);
        at += s.pn[k];
        free(pn);
    }

    if (keep) {
        size_t dropped = 0;
        for (size_t i = 0; i < s.nx; i++)
            dropped += keep[i] == 0;
        double rate = (double)dropped / (double)s.nx;
        double sd = sqrt(c->p * (1 - c->p) / (double)s.nx);
        int bad = fabs(rate - c->p) > 5 * sd;
        printf("  %-22s drop rate %.3f (p %.2f, 5 sd %.3f)%s\n", c->name, rate, (double)c->p,
               5 * sd, bad ? "  FAIL" : "");
        checks++;
        failures += bad;
    }
    for (int k = 0; k < s.np; k++)
        free(s.p[k]);
    free(keep); free(num); free(g32); free(x32); free(dy32); free(y32); free(dx32);
    free(s.x); free(s.dy); free(s.y); free(hw);
    tb_tensor_free(&x);
    tb_tensor_free(&dy);
    tb_layer_destroy(l);
    be->dev_free(be, dw);
    be->dev_free(be, dg);
    return TB_OK;
}

/* ---- the cases ---- */

static int check_conv(tb_layer_ctx *ctx, int n, tb_shape in, int k, int r, int stride, int pad,
                      int bias, const char *name)
{
    tb_layer *l;
    TB_TRY(tb_layer_conv2d_create(ctx, in, k, r, stride, pad, bias, &l));
    gc_case c = {.name = name, .kind = REF_CONV, .n = n, .in = in, .out = l->out, .k = k,
                 .r = r, .stride = stride, .pad = pad, .bias = bias};
    return run_case(ctx, l, &c, 0);
}

static int check_simple(tb_layer_ctx *ctx, ref_kind kind, tb_layer *l, int n, double min_abs,
                        const char *name)
{
    gc_case c = {.name = name, .kind = kind, .n = n, .in = l->in, .out = l->out};
    return run_case(ctx, l, &c, min_abs);
}

static int check_pool(tb_layer_ctx *ctx, int n, tb_shape in, tb_pool_kind kind, int win,
                      int stride, int pad, const char *name)
{
    tb_layer *l;
    TB_TRY(tb_layer_pool_create(ctx, in, kind, win, stride, pad, &l));
    gc_case c = {.name = name, .kind = kind == TB_POOL_MAX ? REF_MAXPOOL : REF_AVGPOOL, .n = n,
                 .in = in, .out = l->out, .r = win, .stride = stride, .pad = pad};
    return run_case(ctx, l, &c, 0);
}

static int check_dropout(tb_layer_ctx *ctx, int n, tb_shape in, float p)
{
    tb_layer *l;
    TB_TRY(tb_layer_dropout_create(ctx, in, p, &l));
    gc_case c = {.name = "dropout p=0.3", .kind = REF_DROPOUT, .n = n, .in = in, .out = in, .p = p};
    return run_case(ctx, l, &c, 0.05);
}

static int check_resblock(tb_layer_ctx *ctx, int n, tb_shape in)
{
    tb_layer *ls[5];
    TB_TRY(tb_layer_conv2d_create(ctx, in, in.c, 3, 1, 1, 0, &ls[0]));
    TB_TRY(tb_layer_batchnorm_create(ctx, in, &ls[1]));
    TB_TRY(tb_layer_relu_create(ctx, in, &ls[2]));
    TB_TRY(tb_layer_conv2d_create(ctx, in, in.c, 3, 1, 1, 0, &ls[3]));
    TB_TRY(tb_layer_batchnorm_create(ctx, in, &ls[4]));
    tb_layer *seq, *res;
    TB_TRY(tb_layer_seq_create(ctx, ls, 5, &seq));
    TB_TRY(tb_layer_residual_create(ctx, seq, NULL, &res));
    gc_case c = {.name = "residual block", .kind = REF_RESBLOCK, .n = n, .in = in, .out = in};
    return run_case(ctx, res, &c, 0);
}

/* tb_resnet_bottleneck_create's block (lib/nn/model_resnet.c). */
static int check_bottleneck(tb_layer_ctx *ctx, int n, tb_shape in, int width, int stride,
                            const char *name)
{
    tb_layer *l;
    TB_TRY(tb_resnet_bottleneck_create(ctx, in, width, stride, 0, &l));
    gc_case c = {.name = name, .kind = REF_BOTTLENECK, .n = n, .in = in, .out = l->out,
                 .k = width, .stride = stride};
    return run_case(ctx, l, &c, 0);
}

/* Softmax cross-entropy, mean over the batch: loss and dlogits. */
static int check_xent(tb_layer_ctx *ctx, int rows, int classes)
{
    tb_backend *be = ctx->be;
    tb_xent xe;
    TB_TRY(tb_xent_init(ctx, classes, rows, &xe));
    tb_tensor logits;
    TB_TRY(tb_tensor_alloc(be, rows, classes, 1, 1, &logits));
    int32_t *labels, hl[64];
    TB_TRY(be->dev_alloc(be, (void **)&labels, (size_t)rows * sizeof(int32_t)));
    size_t m = (size_t)rows * classes;
    float *l32 = malloc(m * sizeof(float)), *g32 = malloc(m * sizeof(float));
    double *l64 = malloc(m * sizeof(double)), *num = malloc(m * sizeof(double));
    fill_random(l32, l64, m, 3.0, 0);
    for (int i = 0; i < rows; i++)
        hl[i] = (int32_t)((urand() + 1) * 0.5 * classes) % classes;
    TB_TRY(tb_tensor_from_host(&logits, l32));
    TB_TRY(be->copy_h2d(be, labels, hl, (size_t)rows * sizeof(int32_t), NULL));
    float loss;
    const tb_tensor *dl;
    TB_TRY(tb_xent_forward(&xe, &logits, labels));
    TB_TRY(tb_xent_read_loss(&xe, &loss));
    TB_TRY(tb_xent_backward(&xe, 1.0f / rows, &dl));
    TB_TRY(tb_tensor_to_host(dl, g32));
    double ref = 0;
    for (int pass = 0; pass <= (int)m; pass++) {
        /* pass 0: the loss; pass j: d loss / d logit j-1 by central difference */
        double sign[2] = {1, -1}, l[2];
        for (int side = 0; side < (pass ? 2 : 1); side++) {
            if (pass)
                l64[pass - 1] += sign[side] * FD_H;
            double sum = 0;
            for (int i = 0; i < rows; i++) {
                double mx = -INFINITY, z = 0;
                for (int k = 0; k < classes; k++)
                    mx = fmax(mx, l64[i * classes + k]);
                for (int k = 0; k < classes; k++)
                    z += exp(l64[i * classes + k] - mx);
                sum += log(z) + mx - l64[i * classes + hl[i]];
            }
            l[side] = sum / rows;
            if (pass)
                l64[pass - 1] -= sign[side] * FD_H;
        }
        if (!pass)
            ref = l[0];
        else
            num[pass - 1] = (l[0] - l[1]) / (2 * FD_H);
    }
    float lf = loss;
    compare("loss", "softmax xent", &lf, &ref, 1, TOL_FWD);
    compare("dlogits", "softmax xent", g32, num, m, TOL_GRAD);
    free(l32); free(g32); free(l64); free(num);
    be->dev_free(be, labels);
    tb_tensor_free(&logits);
    tb_xent_free(&xe);
    return TB_OK;
}

static int run_all(tb_layer_ctx *ctx)
{
    tb_layer *l;
    TB_TRY(check_conv(ctx, 2, (tb_shape){3, 7, 7}, 4, 3, 1, 1, 1, "conv3x3 bias"));
    TB_TRY(check_conv(ctx, 2, (tb_shape){3, 7, 7}, 5, 3, 2, 1, 0, "conv3x3/2 no bias"));
    TB_TRY(check_conv(ctx, 3, (tb_shape){2, 5, 5}, 3, 1, 1, 0, 1, "conv1x1 bias"));
    TB_TRY(tb_layer_batchnorm_create(ctx, (tb_shape){3, 4, 5}, &l));
    TB_TRY(check_simple(ctx, REF_BN, l, 3, 0, "batchnorm"));
    TB_TRY(tb_layer_relu_create(ctx, (tb_shape){3, 5, 5}, &l));
    TB_TRY(check_simple(ctx, REF_RELU, l, 2, 0.01, "relu"));
    ctx->gelu = TB_GELU_UNFUSED;
    TB_TRY(tb_layer_gelu_create(ctx, (tb_shape){3, 5, 7}, &l));
    TB_TRY(check_simple(ctx, REF_GELU, l, 2, 0, "gelu unfused"));
    ctx->gelu = TB_GELU_FUSED;
    TB_TRY(tb_layer_gelu_create(ctx, (tb_shape){3, 5, 7}, &l));
    TB_TRY(check_simple(ctx, REF_GELU, l, 2, 0, "gelu fused"));
    ctx->gelu_approx = TB_GELU_TANH;
    ctx->gelu = TB_GELU_UNFUSED;
    TB_TRY(tb_layer_gelu_create(ctx, (tb_shape){3, 5, 7}, &l));
    TB_TRY(check_simple(ctx, REF_GELU_TANH, l, 2, 0, "gelu tanh unfused"));
    ctx->gelu = TB_GELU_FUSED;
    TB_TRY(tb_layer_gelu_create(ctx, (tb_shape){4, 3, 9}, &l));
    TB_TRY(check_simple(ctx, REF_GELU_TANH, l, 3, 0, "gelu tanh fused"));
    ctx->gelu_approx = TB_GELU_ERF;
    TB_TRY(check_dropout(ctx, 4, (tb_shape){8, 8, 8}, 0.3f));
    TB_TRY(check_pool(ctx, 2, (tb_shape){3, 6, 6}, TB_POOL_MAX, 2, 2, 0, "maxpool 2/2"));
    TB_TRY(check_pool(ctx, 2, (tb_shape){2, 7, 7}, TB_POOL_MAX, 3, 2, 1, "maxpool 3/2 pad1"));
    TB_TRY(check_pool(ctx, 2, (tb_shape){3, 6, 6}, TB_POOL_AVG, 2, 2, 0, "avgpool 2/2"));
    TB_TRY(check_pool(ctx, 2, (tb_shape){2, 7, 7}, TB_POOL_AVG, 3, 2, 1, "avgpool 3/2 pad1"));
    TB_TRY(tb_layer_global_avgpool_create(ctx, (tb_shape){4, 5, 5}, &l));
    gc_case gap = {.name = "global avgpool", .kind = REF_AVGPOOL, .n = 3, .in = l->in,
                   .out = l->out, .r = 5, .stride = 5};
    TB_TRY(run_case(ctx, l, &gap, 0));
    TB_TRY(tb_layer_linear_create(ctx, (tb_shape){3, 2, 2}, 7, &l));
    TB_TRY(check_simple(ctx, REF_LINEAR, l, 5, 0, "linear"));
    TB_TRY(check_resblock(ctx, 2, (tb_shape){3, 5, 5}));
    TB_TRY(check_bottleneck(ctx, 2, (tb_shape){6, 7, 7}, 3, 2, "bottleneck proj /2"));
    TB_TRY(check_bottleneck(ctx, 3, (tb_shape){4, 5, 5}, 2, 1, "bottleneck proj /1"));
    TB_TRY(check_bottleneck(ctx, 2, (tb_shape){8, 5, 6}, 2, 1, "bottleneck identity"));
    return check_xent(ctx, 6, 10);
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    tb_layer_ctx ctx = {.be = be, .training = 1, .math = TB_MATH_F32, .dropout_seed = 7};
    int rc = run_all(&ctx);
    tb_conv_algo_cache_free(&ctx.algos);
    return rc;
}

int main(void)
{
    return tb_test_main_cpu(2, "gradcheck: fp32 layers on the CPU backend vs float64 references",
                            run, NULL);
}
