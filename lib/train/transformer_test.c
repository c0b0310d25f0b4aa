/*
 * transformer_test.c - the transformer's layers (lib/nn/layer_tokens.c,
 * lib/nn/layer_ln.c, lib/nn/layer_attn.c) against float64 references and finite
 * differences, and --model=transformer training.
 *
 * Gradient checks, as lib/nn/gradcheck_test.c: random inputs, parameters and
 * upstream gradient dy (never zeros), L = sum(y * dy). The fp32 layer runs
 * on the CPU backend; a test-only float64 reference of the same function
 * (built on lib/backend/ref/attention.h's layer norm and attention) gives y and, by
 * central differences (h = 1e-6) of L, dL/dx and dL/dparams. Tolerances,
 * max |a - r| over max |r| of the tensor:
 *   forward   1e-5: fp32 sums of at most a few hundred terms, plus one
 *             exp/softmax; measured below 1e-6.
 *   gradients 1e-4: the fp32 analytic gradient carries the forward's
 *             rounding (1/std of layer norm, softmax); the differences of
 *             the float64 reference are exact to ~1e-9. A wrong formula is
 *             off by O(1).
 * Layer norm and attention run both variants (unfused/fused, manual/fused);
 * attention causal (GPT-2) and not. The per-token linear and attention
 * also under bf16 autocast, where the CPU has it (lib/nn/amp.h: their GEMMs
 * on bf16 copies): within TOL_BF16 of the float64 truth, and the forward
 * farther than TOL_LOWP_SEEN from it (the bf16 GEMMs did run).
 * Parameter gradients start at 1e30 with grad_accumulate = 0: the first
 * backward must write them.
 *
 * Training: 50 AdamW steps of batch 32 on 2048 Fashion-MNIST samples. The
 * loss of step 50 must be below 0.6x the first step's (measured: 2.4 ->
 * ~0.8); --fused-attention --fused-layernorm must end within TOL_TRAIN of
 * manual/unfused (see there).
 *
 * Run: bazel test //lib/train:transformer_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/ref/attention.h"
#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/nn/amp.h"
#include "lib/nn/layers.h"
#include "lib/core/rng.h"
#include "lib/train/loader.h"
#include "lib/nn/tensor.h"
#include "lib/train/train.h"
#include "lib/nn/nn_testing.h"

#define FD_H 1e-6
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define MAX_P 4
#define STEPS 50
/* Fused and manual attention, fused and unfused layer norm, round
 * differently (online softmax rescaling, one-pass statistics): ~1e-7
 * relative per op. 50 Adam steps amplify that (Adam normalizes small
 * gradients, so a rounding difference in a near-zero gradient moves a
 * weight by up to ~lr): measured, the parameters differ by ~1e-5 relative
 * and the loss of step 50 by < 1e-7. 1e-3 leaves room for other thread
 * counts and summation orders and is still 100x below what another seed
 * changes (~1e-1). The parameters must differ at all: the toggle reached
 * the layers. */
#define TOL_TRAIN 1e-3
/* Under bf16 autocast (8-bit mantissas, ~4e-3 a rounding): forward and
 * gradients within 2e-2 of the float64 truth, as embed_test's tied head;
 * and the forward at least this far from it (fp32 is within 1e-6), or the
 * GEMMs did not run in bf16. */
#define TOL_BF16 2e-2
#define TOL_LOWP_SEEN 1e-4

static tb_rng rng = {0x2545f4914f6cdd1dull};
static double urand(void) /* [-1, 1) */
{
    return tb_rng_uniform(&rng, -1, 1);
}

/* ---- cases and their float64 references ---- */
typedef enum ref_kind { REF_TLIN, REF_TMEAN, REF_LN, REF_MHA, REF_MHA_CAUSAL, REF_ADDRES } ref_kind;

typedef struct tf_case {
    const char *name;
    ref_kind kind;
    int n, tokens, dim, k; /* k: token linear outputs, or heads */
    int variant;           /* tb_ln_variant / tb_attn_variant */
    tb_dtype amp;          /* TB_BF16: the layer under bf16 autocast (TB_F32: off) */
} tf_case;

static void tmean_ref(const tf_case *c, const double *x, double *y)
{
    for (int n = 0; n < c->n; n++)
        for (int f = 0; f < c->dim; f++) {
            double s = 0;
            for (int t = 0; t < c->tokens; t++)
                s += x[((size_t)n * c->tokens + t) * c->dim + f];
            y[(size_t)n * c->dim + f] = s / c->tokens;
        }
}

static void ln_ref(const tf_case *c, const double *x, double *const *p, double *y)
{
    int rows = c->n * c->tokens;
    double *mean = malloc(rows * sizeof(double)), *rstd = malloc(rows * sizeof(double));
    tb_ref_layernorm_fwd_f64(x, p[0], p[1], 1e-5, rows, c->dim, y, mean, rstd);
    free(mean);
    free(rstd);
}

/* Projections, then the standard (N, H, T, D) attention of lib/backend/ref/attention.h. */
static void mha_ref(const tf_case *c, const double *x, double *const *p, double *y)
{
    int n = c->n, t = c->tokens, d = c->dim, h = c->k, hd = d / h, rows = n * t;
    size_t sz = (size_t)rows * d;
    double *qkv = malloc(3 * sz * sizeof(double)), *bhtd = malloc(4 * sz * sizeof(double));
    tb_linear_ref_f64(rows, d, 3 * d, x, p[0], p[1], qkv);
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < n; b++)
            for (int hh = 0; hh < h; hh++)
                for (int tt = 0; tt < t; tt++)
                    for (int e = 0; e < hd; e++)
                        bhtd[s * sz + (((size_t)b * h + hh) * t + tt) * hd + e] =
                            qkv[((size_t)b * t + tt) * 3 * d + s * d + hh * hd + e];
    tb_attn_desc desc = {.batch = n, .heads = h, .seq = t, .head_dim = hd,
                         .causal = c->kind == REF_MHA_CAUSAL,
                         .scale = (float)(1.0 / sqrt((double)hd))};
    double *o = bhtd + 3 * sz;
    /* the fp32 layer scales by the float 1/sqrt(D): the reference too */
    tb_ref_attention_fwd_f64(&desc, bhtd, bhtd + sz, bhtd + 2 * sz, o, NULL);
    for (int b = 0; b < n; b++)
        for (int hh = 0; hh < h; hh++)
            for (int tt = 0; tt < t; tt++)
                for (int e = 0; e < hd; e++)
                    qkv[((size_t)b * t + tt) * d + hh * hd + e] =
                        o[(((size_t)b * h + hh) * t + tt) * hd + e];
    tb_linear_ref_f64(rows, d, d, qkv, p[2], p[3], y);
    free(qkv);
    free(bhtd);
}

static void ref_forward(const tf_case *c, const double *x, double *const *p, double *y)
{
    int rows = c->n * c->tokens;
    switch (c->kind) {
    case REF_TLIN:
        tb_linear_ref_f64(rows, c->dim, c->k, x, p[0], p[1], y);
        break;
    case REF_TMEAN:
        tmean_ref(c, x, y);
        break;
    case REF_LN:
        ln_ref(c, x, p, y);
        break;
    case REF_MHA:
    case REF_MHA_CAUSAL:
        mha_ref(c, x, p, y);
        break;
    case REF_ADDRES:
        tb_linear_ref_f64(rows, c->dim, c->dim, x, p[0], p[1], y);
        for (size_t i = 0; i < (size_t)rows * c->dim; i++)
            y[i] += x[i];
        break;
    }
}

static int make_layer(tb_layer_ctx *ctx, const tf_case *c, tb_layer **l)
{
    tb_shape in = {1, c->tokens, c->dim};
    ctx->layernorm = (tb_ln_variant)c->variant;
    ctx->attention = (tb_attn_variant)c->variant;
    switch (c->kind) {
    case REF_TLIN:
        return tb_layer_token_linear_create(ctx, in, c->k, l);
    case REF_TMEAN:
        return tb_layer_token_mean_create(ctx, in, l);
    case REF_LN:
        return tb_layer_layernorm_create(ctx, in, l);
    case REF_MHA:
        return tb_layer_mha_create(ctx, in, c->k, l);
    case REF_MHA_CAUSAL:
        return tb_layer_mha_causal_create(ctx, in, c->k, 1, l);
    case REF_ADDRES: {
        tb_layer *lin;
        TB_TRY(tb_layer_token_linear_create(ctx, in, c->dim, &lin));
        return tb_layer_add_residual_create(ctx, lin, l);
    }
    }
    return TB_FAIL(TB_ERR_INVALID, "unknown case");
}

/* ---- the check of one case ---- */
typedef struct gc_bufs {
    size_t nx, ny, np[MAX_P];
    int nparams;
    double *x, *dy, *y_ref, *p[MAX_P];
    float *xf, *dyf, *yf, *dxf, *pgf;
} gc_bufs;

static double loss_of(const tf_case *c, gc_bufs *b, double *y)
{
    ref_forward(c, b->x, b->p, y);
    double s = 0;
    for (size_t i = 0; i < b->ny; i++)
        s += y[i] * b->dy[i];
    return s;
}

/* max |a - r| / max |r| of an fp32 result against the float64 one */
static double rel_err(const float *a, const double *r, size_t n)
{
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - r[i]));
        den = fmax(den, fabs(r[i]));
    }
    return num / den;
}

/* Central differences of L in v[i]; compares with the analytic grad. */
static double fd_err(const tf_case *c, gc_bufs *b, double *v, size_t n, const float *grad)
{
    double *y = malloc(b->ny * sizeof(double)), *fd = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + FD_H;
        double lp = loss_of(c, b, y);
        v[i] = keep - FD_H;
        double lm = loss_of(c, b, y);
        v[i] = keep;
        fd[i] = (lp - lm) / (2 * FD_H);
    }
    double e = rel_err(grad, fd, n);
    free(y);
    free(fd);
    return e;
}

static void fill(double *d, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)urand();
        d[i] = f[i];
    }
}

typedef struct param_list {
    tb_param *items[MAX_P];
    int n;
} param_list;

static void collect(tb_param *p, void *user)
{
    param_list *pl = user;
    if (pl->n < MAX_P)
        pl->items[pl->n++] = p;
}

/* Random parameters uploaded to the bound flat buffer; gradients 1e30. */
static int params_setup(tb_backend *be, tb_layer *l, gc_bufs *b, float **w, float **g)
{
    param_list pl = {0};
    tb_layer_for_each_param(l, collect, &pl);
    size_t total = tb_layer_param_count(l);
    b->nparams = pl.n;
    TB_TRY(be->dev_alloc(be, (void **)w, (total + 1) * sizeof(float)));
    TB_TRY(be->dev_alloc(be, (void **)g, (total + 1) * sizeof(float)));
    tb_layer_params_bind(l, *w, *g);
    float *host = malloc((total + 1) * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < pl.n; i++) {
        b->np[i] = pl.items[i]->n;
        b->p[i] = malloc(b->np[i] * sizeof(double));
        fill(b->p[i], host + at, b->np[i]);
        at += b->np[i];
    }
    TB_TRY(be->copy_h2d(be, *w, host, total * sizeof(float), NULL));
    for (size_t i = 0; i < total; i++)
        host[i] = 1e30f;
    TB_TRY(be->copy_h2d(be, *g, host, total * sizeof(float), NULL));
    free(host);
    return TB_OK;
}

/* Runs forward and backward of l on b's inputs; results into b's floats. */
static int run_layer(tb_backend *be, tb_layer *l, const tf_case *c, gc_bufs *b, float *g)
{
    tb_tensor x, dy;
    const tb_tensor *y, *dx;
    TB_TRY(tb_tensor_alloc(be, c->n, l->in.c, l->in.h, l->in.w, &x));
    TB_TRY(tb_tensor_alloc(be, c->n, l->out.c, l->out.h, l->out.w, &dy));
    TB_TRY(tb_tensor_from_host(&x, b->xf));
    TB_TRY(tb_tensor_from_host(&dy, b->dyf));
    TB_TRY(tb_layer_forward(l, &x, &y));
    TB_TRY(tb_tensor_to_host(y, b->yf));
    TB_TRY(tb_layer_backward(l, &dy, &dx));
    TB_TRY(tb_tensor_to_host(dx, b->dxf));
    TB_TRY(be->copy_d2h(be, b->pgf, g, tb_layer_param_count(l) * sizeof(float), NULL));
    tb_tensor_free(&x);
    tb_tensor_free(&dy);
    return TB_OK;
}

static void report(const tf_case *c, gc_bufs *b)
{
    char what[160];
    int lowp = c->amp != TB_F32;
    double tol_fwd = lowp ? TOL_BF16 : TOL_FWD, tol_grad = lowp ? TOL_BF16 : TOL_GRAD;
    double e = rel_err(b->yf, b->y_ref, b->ny);
    snprintf(what, sizeof what, "%s: forward rel err %.1e <= %.0e", c->name, e, tol_fwd);
    CHECK_WHAT(e <= tol_fwd, what);
    if (lowp) {
        /* fp32 comes within 1e-6: an error this large says the GEMMs ran
         * on bf16 copies, as autocast asks */
        snprintf(what, sizeof what, "%s: forward rel err %.1e > %.0e (bf16 GEMMs ran)",
                 c->name, e, TOL_LOWP_SEEN);
        CHECK_WHAT(e > TOL_LOWP_SEEN, what);
    }
    e = fd_err(c, b, b->x, b->nx, b->dxf);
    snprintf(what, sizeof what, "%s: dx rel err %.1e <= %.0e", c->name, e, tol_grad);
    CHECK_WHAT(e <= tol_grad, what);
    size_t at = 0;
    for (int i = 0; i < b->nparams; i++) {
        e = fd_err(c, b, b->p[i], b->np[i], b->pgf + at);
        snprintf(what, sizeof what, "%s: dparam%d rel err %.1e <= %.0e", c->name, i, e, tol_grad);
        CHECK_WHAT(e <= tol_grad, what);
        at += b->np[i];
    }
}

static void bufs_free(gc_bufs *b)
{
    free(b->x), free(b->dy), free(b->y_ref), free(b->xf), free(b->dyf), free(b->yf);
    free(b->dxf), free(b->pgf);
    for (int i = 0; i < b->nparams; i++)
        free(b->p[i]);
}

static int check_case(tb_backend *be, const tf_case *c)
{
    tb_layer_ctx ctx = {.be = be, .training = 1, .math = TB_MATH_F32, .amp = c->amp};
    tb_layer *l;
    gc_bufs b = {0};
    float *w = NULL, *g = NULL;
    int rc;
    TB_TRY(make_layer(&ctx, c, &l));
    l->need_dx = 1;
    b.nx = (size_t)c->n * tb_shape_numel(l->in);
    b.ny = (size_t)c->n * tb_shape_numel(l->out);
    b.x = malloc(b.nx * sizeof(double)), b.xf = malloc(b.nx * sizeof(float));
    b.dxf = malloc(b.nx * sizeof(float));
    b.dy = malloc(b.ny * sizeof(double)), b.dyf = malloc(b.ny * sizeof(float));
    b.y_ref = malloc(b.ny * sizeof(double)), b.yf = malloc(b.ny * sizeof(float));
    b.pgf = malloc((tb_layer_param_count(l) + 1) * sizeof(float));
    fill(b.x, b.xf, b.nx);
    fill(b.dy, b.dyf, b.ny);
    TB_TRY_GOTO(rc, params_setup(be, l, &b, &w, &g), out_free);
    TB_TRY_GOTO(rc, tb_layer_alloc(l, c->n), out_free);
    TB_TRY_GOTO(rc, run_layer(be, l, c, &b, g), out_free);
    ref_forward(c, b.x, b.p, b.y_ref);
    report(c, &b);

out_free:
    tb_layer_destroy(l);
    be->dev_free(be, w);
    be->dev_free(be, g);
    bufs_free(&b);
    return rc;
}

static int check_layers(tb_backend *be)
{
    static const tf_case cases[] = {
        {"token_linear 3x(5 tokens, 7) -> 6", REF_TLIN, 3, 5, 7, 6, 0},
        {"token_mean 3x(5, 7)", REF_TMEAN, 3, 5, 7, 0, 0},
        {"layernorm unfused 3x(5, 8)", REF_LN, 3, 5, 8, 0, TB_LN_UNFUSED},
        {"layernorm fused 3x(5, 8)", REF_LN, 3, 5, 8, 0, TB_LN_FUSED},
        {"mha manual 2x(5, 8) 2 heads", REF_MHA, 2, 5, 8, 2, TB_ATTN_MANUAL},
        {"mha fused 2x(5, 8) 2 heads", REF_MHA, 2, 5, 8, 2, TB_ATTN_FUSED},
        {"mha manual 3x(7, 12) 3 heads", REF_MHA, 3, 7, 12, 3, TB_ATTN_MANUAL},
        {"mha fused 3x(7, 12) 3 heads", REF_MHA, 3, 7, 12, 3, TB_ATTN_FUSED},
        {"causal mha manual 2x(5, 8) 2 heads", REF_MHA_CAUSAL, 2, 5, 8, 2, TB_ATTN_MANUAL},
        {"causal mha fused 2x(5, 8) 2 heads", REF_MHA_CAUSAL, 2, 5, 8, 2, TB_ATTN_FUSED},
        {"causal mha manual 3x(7, 12) 3 heads", REF_MHA_CAUSAL, 3, 7, 12, 3, TB_ATTN_MANUAL},
        {"causal mha fused 3x(7, 12) 3 heads", REF_MHA_CAUSAL, 3, 7, 12, 3, TB_ATTN_FUSED},
        {"add_residual(token_linear) 2x(5, 6)", REF_ADDRES, 2, 5, 6, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TB_TRY(check_case(be, &cases[i]));
    /* under bf16 autocast: the per-token linear (GPT-2's MLP) and
     * attention's projections (c_attn, c_proj) run on bf16 copies */
    static const tf_case lowp[] = {
        {"token_linear bf16 autocast 3x(5 tokens, 7) -> 6", REF_TLIN, 3, 5, 7, 6, 0, TB_BF16},
        {"causal mha manual bf16 autocast 3x(7, 12) 3 heads", REF_MHA_CAUSAL, 3, 7, 12, 3,
         TB_ATTN_MANUAL, TB_BF16},
        {"mha fused bf16 autocast 2x(5, 8) 2 heads", REF_MHA, 2, 5, 8, 2, TB_ATTN_FUSED, TB_BF16},
    };
    if (tb_amp_probe(be, TB_BF16) != TB_OK) {
        printf("skip: bf16 autocast is not available here (%s)\n", tb_error_message());
        tb_error_clear();
        return TB_OK;
    }
    for (size_t i = 0; i < sizeof lowp / sizeof lowp[0]; i++)
        TB_TRY(check_case(be, &lowp[i]));
    return TB_OK;
}

/* ---- training ---- */
static int train_loss(tb_backend *be, const tb_dataset *train, const tb_dataset *test,
                      int steps, int fused, float *loss, float **params, size_t *numel)
{
    tb_config c;
    tb_config_defaults(&c);
    c.device = "cpu";
    c.model = TB_MODEL_TRANSFORMER;
    c.optimizer = TB_OPT_ADAMW;
    c.batch_size = 32;
    c.max_steps = steps;
    c.seed = 3;
    c.fused_attention = fused;
    c.fused_layernorm = fused;
    TB_TRY(tb_config_validate(&c));
    tb_trainer *t;
    tb_epoch_stats es;
    TB_TRY(tb_trainer_create_with_data(&c, be, train, test, &t));
    int rc = tb_train_epoch(t, 0, &es);
    if (rc == TB_OK && es.steps != steps)
        rc = TB_FAIL(TB_ERR_INTERNAL, "ran %ld steps, wanted %d", es.steps, steps);
    *loss = es.last_loss;
    *numel = t->model->numel;
    *params = malloc(*numel * sizeof(float));
    if (rc == TB_OK && !*params)
        rc = TB_FAIL(TB_ERR_NOMEM, "parameter copy");
    if (rc == TB_OK)
        rc = be->copy_d2h(be, *params, t->model->flat_w, *numel * sizeof(float), NULL);
    tb_trainer_destroy(t);
    return rc;
}

static int check_training(tb_backend *be)
{
    tb_dataset *train = NULL, *test = NULL;
    float first, manual, fused, *p_first = NULL, *p_manual = NULL, *p_fused = NULL;
    size_t n;
    char what[128];
    int rc;
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TRAIN, 2048, &train), out_free);
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TEST, 256, &test), out_free);
    TB_TRY_GOTO(rc, train_loss(be, train, test, 1, 0, &first, &p_first, &n), out_free);
    TB_TRY_GOTO(rc, train_loss(be, train, test, STEPS, 0, &manual, &p_manual, &n), out_free);
    TB_TRY_GOTO(rc, train_loss(be, train, test, STEPS, 1, &fused, &p_fused, &n), out_free);
    snprintf(what, sizeof what, "transformer trains: loss step 1 %.4f -> step %d %.4f (< 0.6x)",
             first, STEPS, manual);
    CHECK_WHAT(isfinite(manual) && manual < 0.6f * first, what);
    double d = fabs((double)fused - manual) / fabs((double)manual);
    snprintf(what, sizeof what, "fused attn+LN: loss %.6f, rel diff %.1e <= %.0e", fused, d,
             TOL_TRAIN);
    CHECK_WHAT(d <= TOL_TRAIN, what);
    CHECK_WHAT(memcmp(p_manual, p_fused, n * sizeof(float)) != 0,
          "fused attn+LN: parameters differ from manual (the toggle is applied)");

out_free:
    free(p_first);
    free(p_manual);
    free(p_fused);
    tb_dataset_free(train);
    tb_dataset_free(test);
    return rc;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_layers(be));
    return check_training(be);
}

int main(void)
{
    return tb_test_main_cpu(
        2, "transformer_test: layers vs float64 and finite differences; 50 training steps", run,
        NULL);
}
