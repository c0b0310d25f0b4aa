/*
 * flops_test.c - FLOPs counted once (lib/nn/flops.h) against closed forms
 * this file derives from each architecture, never from the code under test:
 *   - the small CNN: convolution and GEMM FLOPs, forward and backward (the
 *     first convolution computes no input gradient);
 *   - the one-block transformer: GEMM and attention FLOPs, and its three
 *     layer norms;
 *   - ResNet-50 at 224: convolution and GEMM FLOPs from the architecture,
 *     and the forward multiply-adds against torchvision's published 4.09 G;
 *   - GPT-2 small at T 1024 and a reduced one (2 layers, T 256): GEMM = 6
 *     N_mm T and attention = 12 L T^2 d exactly (causal, the whole T x T
 *     counted), the tied head's share of
 *     the GEMMs, all FLOPs within 1% of 6 x parameters x T plus attention;
 *   - every leaf layer of each model has a count;
 *   - need_dx: a layer that skips its input gradient does not count it;
 *     causal attention counts as the non-causal; the GELU form and
 *     dropout's p reach their counts;
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

/* Leaf layers of l's tree without a flops function (containers may have
 * none: their children do the work). */
static int uncounted_leaves(const tb_layer *l)
{
    int n = !l->vt->flops && !l->nchildren;
    for (int i = 0; i < l->nchildren; i++)
        n += uncounted_leaves(l->children[i]);
    return n;
}

static void check_all_counted(const char *model, const tb_model *m)
{
    char what[128];
    int n = uncounted_leaves(m->net);
    snprintf(what, sizeof what, "%s: every leaf layer counts its FLOPs (%d do not)", model, n);
    CHECK_WHAT(n == 0, what);
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
    check_all_counted("small CNN", m);
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
    check_all_counted("transformer", m);
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

/* ---- ResNet-50 v1.5 at 224 (torchvision's resnet50) ---- */

/* Multiply-adds of ResNet-50's convolutions on s x s images, from the
 * architecture: 7x7/2 stem to s/2, 3x3/2 max pool to s/4, bottlenecks
 * 3-4-6-3 (1x1 to mid, 3x3 mid with the stage's stride, 1x1 to 4 mid; a 1x1
 * projection with the stride on each stage's first block). *stem gets the
 * stem's share (the first layer: no input gradient). */
static double resnet50_conv_macs(int s, double *stem)
{
    static const int blocks[4] = {3, 4, 6, 3}, mids[4] = {64, 128, 256, 512};
    int res = s / 2;
    *stem = conv_macs(64, 3, 7, res);
    double macs = *stem;
    int cin = 64;
    res = res / 2;
    for (int st = 0; st < 4; st++) {
        int mid = mids[st], cout = 4 * mid;
        for (int b = 0; b < blocks[st]; b++) {
            int stride = b == 0 && st > 0 ? 2 : 1, ro = res / stride;
            macs += conv_macs(mid, cin, 1, res) + conv_macs(mid, mid, 3, ro) +
                    conv_macs(cout, mid, 1, ro);
            if (b == 0)
                macs += conv_macs(cout, cin, 1, ro);
            cin = cout;
            res = ro;
        }
    }
    return macs;
}

static int check_resnet50(tb_backend *be)
{
    tb_model_opts o = {.in = {3, 224, 224}, .classes = 1000, .max_batch = 1, .seed = 1};
    tb_model *m;
    TB_TRY(tb_model_build(be, tb_spec_resnet50, &o, &m));
    tb_flops f;
    tb_model_flops(m, &f);
    check_all_counted("ResNet-50", m);
    tb_model_destroy(m);
    print_flops("ResNet-50 at 224", &f);
    double stem, conv = resnet50_conv_macs(224, &stem), fc = 2048.0 * 1000;
    check_near("ResNet-50 conv fwd = 2 x MACs", f.fwd[TB_FLOPS_CONV], 2 * conv, 1e-12);
    check_near("ResNet-50 conv bwd = 2 x (2 x MACs) less the stem's dx", f.bwd[TB_FLOPS_CONV],
               4 * conv - 2 * stem, 1e-12);
    check_near("ResNet-50 GEMM fwd = 2 x 2048 x 1000", f.fwd[TB_FLOPS_GEMM], 2 * fc, 1e-12);
    /* torchvision lists 4.09 GFLOPS for resnet50: multiply-adds of the
     * convolutions and the linear layer, rounded to 3 digits (+-0.005 G) */
    double macs = (f.fwd[TB_FLOPS_CONV] + f.fwd[TB_FLOPS_GEMM]) / 2;
    check_near("ResNet-50 forward conv + linear multiply-adds vs torchvision's 4.09 G, "
               "within its rounding", macs, 4.09e9, 0.005 / 4.09);
    check_shares("ResNet-50", &f);
    return TB_OK;
}

/* ---- GPT-2 ---- */

/* GPT-2's matmul and attention FLOPs per sample of T tokens, in closed
 * form. N_mm = L (4 d^2 + 2 d mlp) + V d are the weights that multiply
 * activations (q k v 3 d^2 and the output projection d^2, fc and proj d mlp
 * each, the tied head V d; the embedding lookups, biases and layer norms do
 * no matmul): 2 N_mm per token forward, 4 N_mm backward (dW and dx; the
 * first matmul's input is a layer norm's, so no dx is skipped) = 6 N_mm T.
 * Attention, PaLM's term: Q K^T and P V over the whole T x T, 4 T d per
 * token per layer forward, 8 T d backward = 12 L T d per token. With
 * mlp = 4d this is PaLM's 6 N + 12 L T d per token, N = 12 L d^2 + V d. */
typedef struct gpt2_closed_form {
    double n_mm, gemm, head, attention; /* weights in matmuls; FLOPs per sample */
} gpt2_closed_form;

static gpt2_closed_form gpt2_formula(const tb_gpt2_dims *g)
{
    double L = g->layers, d = g->dim, T = g->context, V = g->vocab;
    gpt2_closed_form c;
    c.n_mm = L * (4 * d * d + 2 * d * g->mlp) + V * d;
    c.gemm = 6 * c.n_mm * T;
    c.head = 6 * V * d * T;
    c.attention = 12 * L * T * T * d;
    return c;
}

/* The first layer of kind in l's tree, or NULL. */
static const tb_layer *find_kind(const tb_layer *l, const char *kind)
{
    if (!strcmp(l->vt->kind, kind))
        return l;
    for (int i = 0; i < l->nchildren; i++) {
        const tb_layer *r = find_kind(l->children[i], kind);
        if (r)
            return r;
    }
    return NULL;
}

/* Builds GPT-2 g (tanh GELU, batch 1) and counts it: *f the model, *head
 * the tied head alone. */
static int gpt2_flops(tb_backend *be, const char *name, const tb_gpt2_dims *g, tb_flops *f,
                      tb_flops *head)
{
    tb_model_opts o = {.classes = g->vocab, .max_batch = 1, .seed = 1,
                       .gelu_approx = TB_GELU_TANH};
    tb_model *m;
    TB_TRY(tb_model_build_gpt2(be, g, &o, &m));
    tb_model_flops(m, f);
    memset(head, 0, sizeof *head);
    const tb_layer *h = find_kind(m->net, "tied_head");
    if (h)
        tb_flops_layer(h, head);
    CHECK_WHAT(h != NULL, "GPT-2 has a tied_head layer");
    check_all_counted(name, m);
    tb_model_destroy(m);
    print_flops(name, f);
    return TB_OK;
}

/* One GPT-2: matmuls and attention exactly the closed form, the head's
 * share of the GEMMs. *f: its FLOPs; *head_share: the head's share of the
 * GEMMs; *attn_share: the attention's share of all FLOPs. */
static int check_gpt2_dims(tb_backend *be, const char *name, const tb_gpt2_dims *g,
                           tb_flops *out, double *head_share, double *attn_share)
{
    tb_flops f, head;
    TB_TRY(gpt2_flops(be, name, g, &f, &head));
    *out = f;
    gpt2_closed_form c = gpt2_formula(g);
    char what[160];
    snprintf(what, sizeof what, "%s GEMM fwd+bwd = 6 N_mm T (N_mm = %.0f)", name, c.n_mm);
    check_near(what, tb_flops_family(&f, TB_FLOPS_GEMM), c.gemm, 1e-12);
    snprintf(what, sizeof what, "%s attention fwd+bwd = 12 L T^2 d", name);
    check_near(what, tb_flops_family(&f, TB_FLOPS_ATTENTION), c.attention, 1e-12);
    check_near("  of which forward: 4 L T^2 d", f.fwd[TB_FLOPS_ATTENTION], c.attention / 3,
               1e-12);
    *head_share = tb_flops_family(&head, TB_FLOPS_GEMM) / tb_flops_family(&f, TB_FLOPS_GEMM);
    snprintf(what, sizeof what, "%s head's share of the GEMM FLOPs = V d / N_mm", name);
    check_near(what, *head_share, c.head / c.gemm, 1e-12);
    *attn_share = tb_flops_share(&f, TB_FLOPS_ATTENTION);
    check_shares(name, &f);
    return TB_OK;
}

static int check_gpt2(tb_backend *be)
{
    tb_gpt2_dims small = tb_gpt2_small();
    double head_full, attn_full, head_red, attn_red;
    tb_flops f, reduced_f;
    TB_TRY(check_gpt2_dims(be, "GPT-2 small, T 1024", &small, &f, &head_full, &attn_full));
    /* PaLM's rule of thumb with all 124,439,808 parameters: the matmul-free
     * ones (wpe 786,432, biases and norms 121,344: 0.73%) overcount, the
     * norm, element-wise and loss FLOPs it leaves out undercount; both
     * under 1% */
    double T = small.context, params = (double)tb_gpt2_param_count(&small);
    double palm = 6 * params * T + 12.0 * small.layers * T * T * small.dim;
    check_near("GPT-2 small: all FLOPs vs 6 x 124,439,808 x T + 12 L T^2 d", tb_flops_total(&f),
               palm, 1e-2);
    tb_gpt2_dims reduced = small;
    reduced.layers = 2;
    reduced.context = 256;
    TB_TRY(check_gpt2_dims(be, "GPT-2 reduced (L 2, T 256)", &reduced, &reduced_f, &head_red,
                           &attn_red));
    printf("  GPT-2 head share of GEMM: %.1f%% full, %.1f%% reduced; attention share of all "
           "FLOPs: %.2f%% full, %.2f%% reduced\n", 100 * head_full, 100 * head_red,
           100 * attn_full, 100 * attn_red);
    /* the next issue's figures: about 73% vs 31%, attention 13% vs 1.5% */
    CHECK_WHAT(fabs(head_red - 0.73) < 0.01 && fabs(head_full - 0.31) < 0.01 &&
                   fabs(attn_full - 0.13) < 0.01 && fabs(attn_red - 0.015) < 0.001,
               "GPT-2 shares: head ~73% (reduced) vs ~31% (full), attention ~13% vs ~1.5%");
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
    TB_TRY(tb_layer_mha_causal_create(&ctx, tokens, 3, 1, &mha));
    tb_flops causal = layer_flops(mha, 1);
    tb_layer_destroy(mha);
    CHECK_WHAT(memcmp(&causal, &with, sizeof causal) == 0,
               "causal attention counts as much as non-causal (the whole T x T)");
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
    TB_TRY(check_resnet50(be));
    TB_TRY(check_gpt2(be));
    return TB_OK;
}

int main(void)
{
    return tb_test_main_cpu(1, "flops_test: FLOPs per sample and family against closed forms",
                            run, NULL);
}
