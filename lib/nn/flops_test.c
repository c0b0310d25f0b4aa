/*
 * flops_test.c - FLOPs counted once (lib/nn/flops.h) against closed forms
 * this file derives from each architecture, never from the code under test:
 *   - the small CNN: convolution and GEMM FLOPs, forward and backward (the
 *     first convolution computes no input gradient);
 *   - the one-block transformer: GEMM and attention FLOPs, and its three
 *     layer norms;
 *   - need_dx: a layer that skips its input gradient does not count it;
 *     the GELU form and dropout's p reach their counts;
 *   - the families' shares sum to 1; the log line, golden.
 *
 * Run: bazel test //lib/nn:flops_test
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/nn/flops.h"
#include "lib/nn/model.h"
#include "lib/nn/nn_testing.h"

/* |got - want| <= rel |want|, printed as a checklist line. */
static void check_near(const char *what, double got, double want, double rel)
{
    char line[256];
    double err = want != 0 ? fabs(got - want) / fabs(want) : fabs(got);
    snprintf(line, sizeof line, "%s: %.6g vs %.6g (rel. diff %.1e <= %.0e)", what, got, want,
             err, rel);
    CHECK_WHAT(err <= rel, line);
}

static void check_shares(const char *model, const tb_flops *f)
{
    double sum = 0;
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        sum += tb_flops_share(f, (tb_flop_family)k);
    char what[128];
    snprintf(what, sizeof what, "%s: the families' shares sum to 1", model);
    check_near(what, sum, 1.0, 1e-12);
}

static void print_flops(const char *model, const tb_flops *f)
{
    char line[TB_FLOPS_LINE];
    if (tb_flops_format(f, line, sizeof line) == TB_OK)
        printf("  %s: %s\n", model, line);
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        printf("    %-11s fwd %.6g  bwd %.6g\n", tb_flops_family_name((tb_flop_family)k),
               f->fwd[k], f->bwd[k]);
}

/* ---- the small CNN (model.h): 1x28x28, 10 classes, no conv bias ---- */

/* Multiply-adds of a k x c x r x r convolution with an oh x oh output. */
static double conv_macs(int k, int c, int r, int oh) { return (double)k * c * r * r * oh * oh; }

static int check_small_cnn(tb_backend *be)
{
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = 1, .seed = 1};
    tb_model *m;
    TB_TRY(tb_model_build(be, tb_spec_small_cnn, &o, &m));
    tb_flops f;
    tb_model_flops(m, &f);
    print_flops("small CNN", &f);
    /* conv3x3(16) at 28x28 (the first layer: no input gradient), 2x2 max
     * pool to 14x14, a residual block of two 16->16 at 14x14, conv3x3/2(32)
     * to 7x7, a residual block of two 32->32 at 7x7 */
    double first = conv_macs(16, 1, 3, 28);
    double rest = 2 * conv_macs(16, 16, 3, 14) + conv_macs(32, 16, 3, 7) +
                  2 * conv_macs(32, 32, 3, 7);
    check_near("small CNN conv fwd = 2 x MACs", f.fwd[TB_FLOPS_CONV], 2 * (first + rest), 1e-12);
    check_near("small CNN conv bwd = dW of the first + (dW + dx) of the rest",
               f.bwd[TB_FLOPS_CONV], 2 * first + 4 * rest, 1e-12);
    /* linear 32*7*7 -> 64, linear 64 -> 10 */
    double fc = 32.0 * 7 * 7 * 64 + 64.0 * 10;
    check_near("small CNN GEMM fwd = 2 x MACs of the two linear layers", f.fwd[TB_FLOPS_GEMM],
               2 * fc, 1e-12);
    check_near("small CNN GEMM bwd = dW + dx", f.bwd[TB_FLOPS_GEMM], 4 * fc, 1e-12);
    CHECK_WHAT(f.fwd[TB_FLOPS_ATTENTION] == 0 && f.bwd[TB_FLOPS_ATTENTION] == 0,
               "small CNN: no attention FLOPs");
    check_shares("small CNN", &f);
    tb_model_destroy(m);
    return TB_OK;
}

/* ---- the one-block transformer (model.h): 28 tokens of 28 features,
 * token linear to d 64, one block of 4 heads and MLP 128, layer norm, mean
 * over tokens, linear to 10 classes ---- */
static int check_transformer(tb_backend *be)
{
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = 1, .seed = 1};
    tb_model *m;
    TB_TRY(tb_model_build(be, tb_spec_transformer, &o, &m));
    tb_flops f;
    tb_model_flops(m, &f);
    print_flops("transformer", &f);
    double T = 28, F = 28, d = 64, M = 128, C = 10;
    /* matmul multiply-adds per sample: the token linear, q k v and output
     * projections (4 d^2 per token), the MLP (2 d M per token), the head */
    double embed = T * F * d, block = T * (4 * d * d + 2 * d * M), head = d * C;
    check_near("transformer GEMM fwd = 2 x MACs", f.fwd[TB_FLOPS_GEMM],
               2 * (embed + block + head), 1e-12);
    /* the token linear reads the image: its dx is skipped */
    check_near("transformer GEMM bwd = 2 x MACs for dW, and dx but the first layer's",
               f.bwd[TB_FLOPS_GEMM], 2 * embed + 4 * (block + head), 1e-12);
    /* Q K^T and P V over 4 heads of 16: 2 T T 16 each per head */
    check_near("transformer attention fwd = 4 T^2 d", f.fwd[TB_FLOPS_ATTENTION], 4 * T * T * d,
               1e-12);
    check_near("transformer attention bwd = 8 T^2 d", f.bwd[TB_FLOPS_ATTENTION], 8 * T * T * d,
               1e-12);
    /* two in the block, one before the mean; 7 and 13 per element */
    check_near("transformer norm = 3 layer norms of T x d, 7 + 13 per element",
               tb_flops_family(&f, TB_FLOPS_NORM), 3 * 20 * T * d, 1e-12);
    CHECK_WHAT(f.fwd[TB_FLOPS_CONV] == 0 && f.bwd[TB_FLOPS_CONV] == 0,
               "transformer: no convolution FLOPs");
    check_shares("transformer", &f);
    tb_model_destroy(m);
    return TB_OK;
}

/* ---- single layers: need_dx, the GELU form, dropout ---- */

/* f of l alone with need_dx as given. */
static tb_flops layer_flops(tb_layer *l, int need_dx)
{
    tb_flops f;
    memset(&f, 0, sizeof f);
    l->need_dx = need_dx;
    tb_flops_layer(l, &f);
    return f;
}

static int check_need_dx(tb_backend *be)
{
    tb_layer_ctx ctx = {.be = be};
    tb_shape tokens = {1, 5, 12};
    tb_layer *lin, *mha;
    TB_TRY(tb_layer_token_linear_create(&ctx, tokens, 7, &lin));
    tb_flops with = layer_flops(lin, 1), without = layer_flops(lin, 0);
    check_near("token linear: need_dx 0 drops dx, 2 T in out", with.bwd[TB_FLOPS_GEMM] -
               without.bwd[TB_FLOPS_GEMM], 2.0 * 5 * 12 * 7, 0);
    CHECK_WHAT(with.fwd[TB_FLOPS_GEMM] == without.fwd[TB_FLOPS_GEMM] &&
                   with.fwd[TB_FLOPS_GEMM] == 2.0 * 5 * 12 * 7,
               "token linear: forward 2 T in out either way");
    tb_layer_destroy(lin);
    int rc = tb_layer_mha_create(&ctx, tokens, 3, &mha);
    if (rc != TB_OK)
        return rc;
    with = layer_flops(mha, 1);
    without = layer_flops(mha, 0);
    check_near("attention: need_dx 0 drops dx from dq dk dv, 2 T d 3d", with.bwd[TB_FLOPS_GEMM] -
               without.bwd[TB_FLOPS_GEMM], 2.0 * 5 * 12 * 36, 0);
    CHECK_WHAT(with.bwd[TB_FLOPS_ATTENTION] == without.bwd[TB_FLOPS_ATTENTION],
               "attention: dq dk dv are computed either way");
    tb_layer_destroy(mha);
    return TB_OK;
}

static int check_gelu_dropout(tb_backend *be)
{
    tb_layer_ctx ctx = {.be = be};
    tb_shape s = {3, 4, 5};
    tb_layer *gelu, *drop, *nodrop;
    TB_TRY(tb_layer_gelu_create(&ctx, s, &gelu));
    ctx.gelu_approx = TB_GELU_ERF;
    tb_flops erf = layer_flops(gelu, 1);
    ctx.gelu_approx = TB_GELU_TANH;
    tb_flops tanh_form = layer_flops(gelu, 1);
    tb_layer_destroy(gelu);
    CHECK_WHAT(erf.fwd[TB_FLOPS_ELEMENTWISE] == 5 * 60.0 &&
                   erf.bwd[TB_FLOPS_ELEMENTWISE] == 11 * 60.0,
               "GELU erf form: 5 forward, 11 backward per element");
    CHECK_WHAT(tanh_form.fwd[TB_FLOPS_ELEMENTWISE] == 9 * 60.0 &&
                   tanh_form.bwd[TB_FLOPS_ELEMENTWISE] == 18 * 60.0,
               "GELU tanh form (ctx->gelu_approx): 9 forward, 18 backward per element");
    TB_TRY(tb_layer_dropout_create(&ctx, s, 0.1f, &drop));
    tb_flops fd = layer_flops(drop, 1);
    tb_layer_destroy(drop);
    TB_TRY(tb_layer_dropout_create(&ctx, s, 0.0f, &nodrop));
    tb_flops fn = layer_flops(nodrop, 1);
    tb_layer_destroy(nodrop);
    CHECK_WHAT(fd.fwd[TB_FLOPS_ELEMENTWISE] == 60 && fd.bwd[TB_FLOPS_ELEMENTWISE] == 60 &&
                   tb_flops_total(&fn) == 0,
               "dropout: one multiply per element each way, nothing at p = 0");
    return TB_OK;
}

/* ---- totals, shares and the log line ---- */
static void check_format(void)
{
    tb_flops f;
    memset(&f, 0, sizeof f);
    f.fwd[TB_FLOPS_CONV] = 8e9;
    f.bwd[TB_FLOPS_CONV] = 16e9;
    f.fwd[TB_FLOPS_GEMM] = 0.2e9;
    f.bwd[TB_FLOPS_GEMM] = 0.4e9;
    f.fwd[TB_FLOPS_NORM] = 0.1e9;
    f.bwd[TB_FLOPS_NORM] = 0.2e9;
    f.bwd[TB_FLOPS_ELEMENTWISE] = 0.1e9;
    char line[TB_FLOPS_LINE];
    CHECK_OK(tb_flops_format(&f, line, sizeof line));
    const char *want = "25.0 GFLOP/sample fwd+bwd (conv 96.0%, gemm 2.4%, attention 0.0%, "
                       "norm 1.2%, elementwise 0.4%)";
    CHECK_WHAT(strcmp(line, want) == 0, line);
    CHECK_WHAT(tb_flops_total(&f) == 25e9 && tb_flops_family(&f, TB_FLOPS_GEMM) == 0.6e9,
               "totals: 25e9 in all, 0.6e9 GEMM");
    f.bwd[TB_FLOPS_CONV] = 999.96e9 - 8e9 - 1e9;
    CHECK_OK(tb_flops_format(&f, line, sizeof line));
    CHECK_WHAT(strncmp(line, "1.0 TFLOP/sample", 16) == 0, line);
    memset(&f, 0, sizeof f);
    f.fwd[TB_FLOPS_ELEMENTWISE] = 12;
    CHECK_OK(tb_flops_format(&f, line, sizeof line));
    CHECK_WHAT(strncmp(line, "12.0 FLOP/sample", 16) == 0, line);
    CHECK_WHAT(tb_flops_format(&f, line, 40) == TB_ERR_INVALID,
               "a buffer below TB_FLOPS_LINE is refused");
    tb_error_clear();
    memset(&f, 0, sizeof f);
    CHECK_WHAT(tb_flops_share(&f, TB_FLOPS_CONV) == 0, "no FLOPs: shares 0, not NaN");
    CHECK_WHAT(strcmp(tb_flops_family_name(TB_FLOPS_ATTENTION), "attention") == 0 &&
                   strcmp(tb_flops_family_name(TB_FLOP_FAMILIES), "?") == 0,
               "family names");
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    check_format();
    TB_TRY(check_need_dx(be));
    TB_TRY(check_gelu_dropout(be));
    TB_TRY(check_transformer(be));
    TB_TRY(check_small_cnn(be));
    return TB_OK;
}

int main(void)
{
    return tb_test_main_cpu(1, "flops_test: FLOPs per sample and family against closed forms",
                            run, NULL);
}
