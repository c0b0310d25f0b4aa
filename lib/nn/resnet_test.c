/*
 * resnet_test.c - ResNet-50 v1.5 (lib/nn/model_resnet.c) as built by
 * tb_model_build, on the CPU backend, against the architecture written out
 * here a second time (arch_resnet50: torchvision's layer list as formulas,
 * independent of the library's code):
 *   - parameters: exactly 25,557,032 at 1000 classes with no conv bias
 *     (torchvision's resnet50), and that many plus exactly the conv biases
 *     with conv_bias on; the output shape of the stem, the pool, every stage
 *     and the head, at S = 32 and S = 224;
 *   - one training forward + backward at S = 32, batch 2, 10 classes: the
 *     loss is the float64 cross-entropy of the logits it returned (1e-5),
 *     the logits are O(1) (|z| < 10: the initialization does not blow up
 *     through 16 blocks), and every parameter tensor's gradient is finite
 *     and not all zero (a path that backward does not reach, e.g. a
 *     shortcut, leaves zeros). "Loss near ln(10)" is not checked: at S = 32
 *     stage 4 is 1x1, its batch norms see 2 values per channel (batch 2)
 *     and give +-1, so the logits are O(1) but not small; the mean loss of
 *     two rows was measured between 2.1 and 4.3 across image draws;
 *   - channels last computes the same model: evaluation logits (and their
 *     loss) within 1e-5 relative at S = 32, batch 2, fresh models (measured
 *     ~1e-6; after a training step the running statistics differ, below).
 *     Not in training mode: the same 2-value batch norms are a sign
 *     function of their input (x - mean is +-d, d/sqrt(d^2 + eps)), which
 *     turns the layouts' summation-order differences (~1e-4 relative after
 *     stage 3 at 8 values per channel) into O(1) differences in stage 4
 *     (measured: logits 0.3 to 0.9 apart, every layer up to stage 3 within
 *     5e-4). Any framework's batch norm does that on 2 values;
 *   - channels last in training, on ResNet-50's layer kinds at a size whose
 *     batch norms see 16 or more values per channel (a reduced ResNet: the
 *     7x7/2 stem, the padded 3x3/2 max pool, a projection bottleneck at
 *     stride 2 and an identity one, 3x16x16, batch 4): loss, logits and
 *     every parameter tensor's gradient within 1e-4 of NCHW (relative to
 *     the tensor's largest value; measured ~1e-6);
 *   - no_grad evaluation gives bitwise the logits of a normal evaluation,
 *     and checkpointing gives bitwise the loss and gradients of no
 *     checkpointing (the projection shortcuts run under both);
 *   - FLOPs per sample (the layers' vtbl->flops, summed over the tree here)
 *     equal the analytic count of every family, forward and backward, at
 *     S = 224 and S = 64; the forward conv + GEMM count at 224 is the
 *     published 4.09 G multiply-adds.
 * The bottleneck's gradients against float64 finite differences are in
 * gradcheck_test.c.
 *
 * Run: bazel test //lib/nn:resnet_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "lib/nn/model.h"
#include "lib/nn/nn_testing.h"

#define TORCHVISION_RESNET50_PARAMS 25557032u

static tb_rng rng = {0x5eed5eedull};

/* ---- the architecture, written out as formulas ---- */
static const int stage_width[4] = {64, 128, 256, 512};
static const int stage_blocks[4] = {3, 4, 6, 3};

/* What ResNet-50 holds and computes per sample, family by family. */
typedef struct arch_count {
    double params, conv_biases;
    tb_flops fl;
    tb_shape stem, pool, stage[4];
} arch_count;

static int out_size(int h, int r, int stride, int pad) { return (h + 2 * pad - r) / stride + 1; }

/* A conv r x r (pad r/2) of k filters on (c, h, h) and its BN: every conv
 * of ResNet-50 is one. Returns the output size. */
static int arch_conv_bn(arch_count *a, int c, int h, int k, int r, int stride, int need_dx)
{
    int p = out_size(h, r, stride, r / 2);
    double macs = (double)k * c * r * r * p * p, out = (double)k * p * p;
    a->params += (double)k * c * r * r + 2.0 * k;
    a->conv_biases += k;
    a->fl.fwd[TB_FLOPS_CONV] += 2 * macs;
    a->fl.bwd[TB_FLOPS_CONV] += (need_dx ? 4 : 2) * macs;
    a->fl.fwd[TB_FLOPS_NORM] += 8 * out; /* layer_bn.c's stated count */
    a->fl.bwd[TB_FLOPS_NORM] += 9 * out;
    return p;
}

static void arch_relu(arch_count *a, int c, int h)
{
    a->fl.fwd[TB_FLOPS_ELEMENTWISE] += (double)c * h * h;
    a->fl.bwd[TB_FLOPS_ELEMENTWISE] += (double)c * h * h;
}

/* One bottleneck on (c, h, h); returns its output size (4 w channels). */
static int arch_bottleneck(arch_count *a, int c, int h, int w, int stride)
{
    int h1 = arch_conv_bn(a, c, h, w, 1, 1, 1);
    arch_relu(a, w, h1);
    int h2 = arch_conv_bn(a, w, h1, w, 3, stride, 1);
    arch_relu(a, w, h2);
    int h3 = arch_conv_bn(a, w, h2, 4 * w, 1, 1, 1);
    if (stride != 1 || c != 4 * w)
        arch_conv_bn(a, c, h, 4 * w, 1, stride, 1);
    /* the add and the ReLU; backward the mask and the add of two gradients */
    a->fl.fwd[TB_FLOPS_ELEMENTWISE] += 2.0 * 4 * w * h3 * h3;
    a->fl.bwd[TB_FLOPS_ELEMENTWISE] += 4.0 * w * h3 * h3 + (double)c * h * h;
    return h3;
}

static void arch_resnet50(int S, int classes, arch_count *a)
{
    memset(a, 0, sizeof *a);
    int h = arch_conv_bn(a, 3, S, 64, 7, 2, 0); /* the images need no gradient */
    arch_relu(a, 64, h);
    a->stem = (tb_shape){64, h, h};
    h = out_size(h, 3, 2, 1);
    a->fl.fwd[TB_FLOPS_ELEMENTWISE] += 9.0 * 64 * h * h; /* max over 9 taps */
    a->fl.bwd[TB_FLOPS_ELEMENTWISE] += 64.0 * h * h;     /* dy to the argmax */
    a->pool = (tb_shape){64, h, h};
    int c = 64;
    for (int s = 0; s < 4; s++) {
        for (int b = 0; b < stage_blocks[s]; b++) {
            h = arch_bottleneck(a, c, h, stage_width[s], s > 0 && b == 0 ? 2 : 1);
            c = 4 * stage_width[s];
        }
        a->stage[s] = (tb_shape){c, h, h};
    }
    a->fl.fwd[TB_FLOPS_ELEMENTWISE] += (double)c * h * h; /* global average pool */
    a->fl.bwd[TB_FLOPS_ELEMENTWISE] += (double)c * h * h;
    a->params += (double)c * classes + classes;
    a->fl.fwd[TB_FLOPS_GEMM] += 2.0 * c * classes;
    a->fl.bwd[TB_FLOPS_GEMM] += 4.0 * c * classes;
    a->fl.fwd[TB_FLOPS_ELEMENTWISE] += classes; /* the bias */
    a->fl.bwd[TB_FLOPS_ELEMENTWISE] += classes;
}

/* ---- helpers ---- */
static int build_spec(tb_backend *be, const tb_layer_spec *spec, int S, int classes, int batch,
                      int conv_bias, int nhwc, int ckpt, tb_model **m)
{
    tb_model_opts o = {.in = {3, S, S}, .classes = classes, .max_batch = batch,
                       .conv_bias = conv_bias, .seed = 11, .channels_last = nhwc,
                       .checkpointing = ckpt};
    return tb_model_build(be, spec, &o, m);
}

static int build(tb_backend *be, int S, int classes, int batch, int conv_bias, int nhwc, int ckpt,
                 tb_model **m)
{
    return build_spec(be, tb_spec_resnet50, S, classes, batch, conv_bias, nhwc, ckpt, m);
}

static int shape_is(tb_shape s, tb_shape want)
{
    return s.c == want.c && s.h == want.h && s.w == want.w;
}

/* The model's shapes against the architecture's: stem conv, max pool, last
 * block of every stage, head. */
static void check_shapes(const tb_model *m, const arch_count *a, int S)
{
    tb_layer **ch = m->net->children;
    int n = m->net->nchildren, ok = n == 22 && shape_is(ch[0]->out, a->stem) &&
                                    shape_is(ch[3]->out, a->pool);
    /* children: conv bn relu maxpool, 16 bottlenecks, gap, fc */
    for (int s = 0, at = 3; s < 4 && ok; s++) {
        at += stage_blocks[s];
        ok = shape_is(ch[at]->out, a->stage[s]) && !strcmp(ch[at]->vt->kind, "residual");
    }
    ok = ok && shape_is(ch[n - 1]->out, (tb_shape){m->classes, 1, 1});
    CHECK(ok, "S = %d: stem (64, %d, %d), pool (64, %d, %d), stages 256/512/1024/2048 at "
          "%d/%d/%d/%d, head (%d, 1, 1)", S, a->stem.h, a->stem.w, a->pool.h, a->pool.w,
          a->stage[0].h, a->stage[1].h, a->stage[2].h, a->stage[3].h, m->classes);
}

/* ---- the checks ---- */
static int check_param_counts(tb_backend *be)
{
    arch_count a;
    arch_resnet50(32, 1000, &a);
    tb_model *m;
    TB_TRY(build(be, 32, 1000, 1, 0, 0, 0, &m));
    size_t no_bias = m->numel;
    CHECK(no_bias == TORCHVISION_RESNET50_PARAMS && (double)no_bias == a.params,
          "conv_bias 0, 1000 classes: %zu parameters (torchvision: %u)", no_bias,
          TORCHVISION_RESNET50_PARAMS);
    check_shapes(m, &a, 32);
    tb_model_destroy(m);
    TB_TRY(build(be, 32, 1000, 1, 1, 0, 0, &m));
    CHECK((double)m->numel == (double)no_bias + a.conv_biases,
          "conv_bias 1: %zu parameters, %zu more = the %.0f output channels of the 53 convs",
          m->numel, m->numel - no_bias, a.conv_biases);
    tb_model_destroy(m);
    return TB_OK;
}

/* One training step's data at S, batch n: images in [-1, 1), labels 0..9. */
#define MAX_BATCH 8
typedef struct batch {
    float *host;     /* (n, 3, S, S) NCHW */
    int32_t *labels; /* device (n) */
    int32_t host_labels[MAX_BATCH];
    int n, S;
} batch;

static int batch_make(tb_backend *be, int n, int S, batch *b)
{
    size_t numel = (size_t)n * 3 * S * S;
    b->n = n;
    b->S = S;
    b->host = malloc(numel * sizeof(float));
    if (!b->host)
        return TB_FAIL(TB_ERR_NOMEM, "test images");
    for (size_t i = 0; i < numel; i++)
        b->host[i] = (float)tb_rng_uniform(&rng, -1, 1);
    for (int i = 0; i < n; i++)
        b->host_labels[i] = (int32_t)(tb_rng_next_u64(&rng) % 10);
    TB_TRY(be->dev_alloc(be, (void **)&b->labels, (size_t)n * sizeof(int32_t)));
    return be->copy_h2d(be, b->labels, b->host_labels, (size_t)n * sizeof(int32_t), NULL);
}

static void batch_free(tb_backend *be, batch *b)
{
    free(b->host);
    if (b->labels)
        be->dev_free(be, b->labels);
}

/* The batch as m takes it (NHWC for a channels-last model). */
static int batch_upload(const tb_model *m, const batch *b, tb_tensor *x)
{
    TB_TRY(tb_tensor_alloc(m->ctx.be, b->n, 3, b->S, b->S, x));
    if (m->ctx.layout != TB_NHWC)
        return tb_tensor_from_host(x, b->host);
    size_t numel = (size_t)b->n * 3 * b->S * b->S;
    float *nhwc = malloc(numel * sizeof(float));
    if (!nhwc)
        return TB_FAIL(TB_ERR_NOMEM, "test images, NHWC");
    tb_tensor_host_nchw_to_nhwc(b->host, nhwc, b->n, 3, b->S, b->S);
    x->layout = TB_NHWC;
    int rc = tb_tensor_from_host(x, nhwc);
    free(nhwc);
    return rc;
}

/* What one training forward + backward gave. */
typedef struct step_out {
    float loss;
    float logits[MAX_BATCH * 10]; /* (n, 10) */
    float *grads;          /* (numel), NCHW parameter order */
} step_out;

static int train_step(tb_model *m, const batch *b, step_out *r)
{
    tb_tensor x;
    const tb_tensor *y;
    TB_TRY(batch_upload(m, b, &x));
    TB_TRY(tb_model_zero_grad(m, 1));
    TB_TRY(tb_model_forward_loss(m, &x, b->labels, &y));
    if (tb_tensor_numel(y) > sizeof r->logits / sizeof r->logits[0])
        return TB_FAIL(TB_ERR_INVALID, "%zu logits, room for %zu", tb_tensor_numel(y),
                       sizeof r->logits / sizeof r->logits[0]);
    TB_TRY(tb_tensor_to_host(y, r->logits));
    TB_TRY(tb_xent_read_loss(&m->loss, &r->loss));
    TB_TRY(tb_model_backward(m, 1.0f));
    tb_tensor_free(&x);
    float *raw = malloc(m->numel * sizeof(float));
    r->grads = malloc(m->numel * sizeof(float));
    if (!raw || !r->grads)
        return TB_FAIL(TB_ERR_NOMEM, "gradient copies");
    TB_TRY(m->ctx.be->copy_d2h(m->ctx.be, raw, m->flat_g, m->numel * sizeof(float), NULL));
    if (m->ctx.layout == TB_NHWC)
        tb_model_params_reorder(m, raw, r->grads, 0);
    else
        memcpy(r->grads, raw, m->numel * sizeof(float));
    free(raw);
    return TB_OK;
}

/* Every parameter tensor's gradient finite and not all zero. */
static void check_grads_live(const tb_model *m, const float *g)
{
    int dead = 0, bad = 0;
    const char *first = "";
    size_t at = 0;
    for (int i = 0; i < m->nparams; i++) {
        double mag = 0;
        for (size_t j = 0; j < m->params[i]->n; j++) {
            bad += !isfinite(g[at + j]);
            mag = fmax(mag, fabs(g[at + j]));
        }
        if (mag == 0 && !dead++)
            first = m->params[i]->name;
        at += m->params[i]->n;
    }
    CHECK(!bad && !dead, "gradients of all %d parameter tensors finite (%d not) and non-zero "
          "(%d all zero%s%s)", m->nparams, bad, dead, dead ? ", first: " : "", first);
}

static double max_abs(const float *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d / fmax(max_abs(b, n), 1e-30);
}

/* Logits of an evaluation forward, with or without no_grad. */
static int eval_logits(tb_model *m, const batch *b, int no_grad, float *out)
{
    tb_tensor x;
    const tb_tensor *y;
    TB_TRY(batch_upload(m, b, &x));
    tb_model_train_mode(m, 0);
    TB_TRY(tb_model_set_no_grad(m, no_grad));
    TB_TRY(tb_model_forward(m, &x, &y));
    TB_TRY(tb_tensor_to_host(y, out));
    TB_TRY(tb_model_set_no_grad(m, 0));
    tb_model_train_mode(m, 1);
    tb_tensor_free(&x);
    return TB_OK;
}

/* Mean softmax cross-entropy of (n, 10) logits, in float64. */
static double xent_f64(const float *z, const int32_t *labels, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double mx = -INFINITY, e = 0;
        for (int k = 0; k < 10; k++)
            mx = fmax(mx, z[i * 10 + k]);
        for (int k = 0; k < 10; k++)
            e += exp(z[i * 10 + k] - mx);
        sum += log(e) + mx - z[i * 10 + labels[i]];
    }
    return sum / n;
}

static int check_training(tb_backend *be)
{
    const int n = 2, S = 32;
    batch b = {0};
    tb_model *m[3] = {NULL, NULL, NULL}; /* NCHW, NHWC, NCHW checkpointing */
    step_out r[3] = {{0}};
    int rc;
    float eval[2][2 * 10]; /* NCHW, NHWC: before training changes the running statistics */
    TB_TRY_GOTO(rc, batch_make(be, n, S, &b), out_free);
    for (int i = 0; i < 3; i++) {
        TB_TRY_GOTO(rc, build(be, S, 10, n, 0, i == 1, i == 2, &m[i]), out_free);
        if (i < 2)
            TB_TRY_GOTO(rc, eval_logits(m[i], &b, 0, eval[i]), out_free);
        TB_TRY_GOTO(rc, train_step(m[i], &b, &r[i]), out_free);
    }
    double ref = xent_f64(r[0].logits, b.host_labels, n), zmax = max_abs(r[0].logits, n * 10);
    CHECK(isfinite(r[0].loss) && fabs(r[0].loss - ref) <= 1e-5 * ref && zmax < 10,
          "S = 32, batch 2: loss %.5f = float64 cross-entropy of its logits %.5f, max |logit| "
          "%.2f < 10 (ln 10 = %.4f)", r[0].loss, ref, zmax, log(10.0));
    check_grads_live(m[0], r[0].grads);
    CHECK(r[2].loss == r[0].loss && !memcmp(r[2].grads, r[0].grads, m[0]->numel * sizeof(float)),
          "checkpointing: loss and all %zu gradients bitwise equal", m[0]->numel);

    float with[2 * 10], without[2 * 10];
    TB_TRY_GOTO(rc, eval_logits(m[0], &b, 0, with), out_free);
    TB_TRY_GOTO(rc, eval_logits(m[0], &b, 1, without), out_free);
    CHECK(!memcmp(with, without, sizeof with), "no_grad evaluation: logits bitwise equal");
    double dy = rel_diff(eval[1], eval[0], n * 10), l0 = xent_f64(eval[0], b.host_labels, n);
    double dl = fabs(xent_f64(eval[1], b.host_labels, n) - l0) / l0;
    CHECK(dy <= 1e-5 && dl <= 1e-5, "channels last, evaluation: logits rel %.1e, loss rel %.1e "
          "(<= 1e-5)", dy, dl);

out_free:
    for (int i = 0; i < 3; i++) {
        free(r[i].grads);
        tb_model_destroy(m[i]);
    }
    batch_free(be, &b);
    return rc;
}

/* Worst over parameter tensors of max |a - b| / max |b|. */
static double grads_rel(const tb_model *m, const float *a, const float *b)
{
    double worst = 0;
    size_t at = 0;
    for (int i = 0; i < m->nparams; i++) {
        worst = fmax(worst, rel_diff(a + at, b + at, m->params[i]->n));
        at += m->params[i]->n;
    }
    return worst;
}

/* ResNet-50's layer kinds, small, with every batch norm seeing at least
 * 16 values per channel at 3x16x16, batch 4 (8x8 after the stem, 4x4
 * after the pool, 2x2 after the stride-2 conv). */
static const tb_layer_spec mini_resnet[] = {
    {TB_SPEC_CONV_BN_RELU, 16, 7, 2},
    {TB_SPEC_MAXPOOL, 0, 3, 2, 1},
    {TB_SPEC_BOTTLENECK, 8, 0, 2},
    {TB_SPEC_BOTTLENECK, 8, 0, 1},
    {TB_SPEC_GLOBAL_AVGPOOL, 0, 0, 0},
    {TB_SPEC_LINEAR, 0, 0, 0},
    {TB_SPEC_END, 0, 0, 0},
};

static int check_layout_training(tb_backend *be)
{
    const int n = 4, S = 16;
    batch b = {0};
    tb_model *m[2] = {NULL, NULL};
    step_out r[2] = {{0}};
    int rc;
    TB_TRY_GOTO(rc, batch_make(be, n, S, &b), out_free);
    for (int i = 0; i < 2; i++) {
        TB_TRY_GOTO(rc, build_spec(be, mini_resnet, S, 10, n, 0, i, 0, &m[i]), out_free);
        TB_TRY_GOTO(rc, train_step(m[i], &b, &r[i]), out_free);
    }
    double dl = fabs((double)r[1].loss - r[0].loss) / r[0].loss;
    double dy = rel_diff(r[1].logits, r[0].logits, n * 10), dg = grads_rel(m[0], r[1].grads,
                                                                          r[0].grads);
    CHECK(dl <= 1e-4 && dy <= 1e-4 && dg <= 1e-4, "channels last, training a reduced ResNet "
          "(stem, padded pool, bottlenecks /2 and /1): loss rel %.1e, logits %.1e, worst "
          "gradient tensor %.1e (<= 1e-4)", dl, dy, dg);

out_free:
    for (int i = 0; i < 2; i++) {
        free(r[i].grads);
        tb_model_destroy(m[i]);
    }
    batch_free(be, &b);
    return rc;
}

/* ---- FLOPs ---- */

/* Sums vtbl->flops over l's tree; counts leaves without one. */
static void tree_flops(const tb_layer *l, tb_flops *f, int *uncounted)
{
    if (l->vt->flops)
        l->vt->flops(l, f);
    else if (!l->nchildren)
        (*uncounted)++;
    for (int i = 0; i < l->nchildren; i++)
        tree_flops(l->children[i], f, uncounted);
}

static int check_flops(tb_backend *be, int S)
{
    static const char *const family[TB_FLOP_FAMILIES] = {"conv", "gemm", "attention", "norm",
                                                         "elementwise"};
    arch_count a;
    arch_resnet50(S, 1000, &a);
    tb_model *m;
    TB_TRY(build(be, S, 1000, 1, 0, 0, 0, &m));
    check_shapes(m, &a, S);
    tb_flops f = {{0}};
    int uncounted = 0;
    tree_flops(m->net, &f, &uncounted);
    tb_model_destroy(m);
    CHECK(uncounted == 0, "S = %d: every leaf layer counts its FLOPs (%d do not)", S, uncounted);
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        CHECK(f.fwd[k] == a.fl.fwd[k] && f.bwd[k] == a.fl.bwd[k],
              "S = %d, %-11s per sample: fwd %.6g (analytic %.6g), bwd %.6g (analytic %.6g)", S,
              family[k], f.fwd[k], a.fl.fwd[k], f.bwd[k], a.fl.bwd[k]);
    if (S == 224) {
        double macs = (a.fl.fwd[TB_FLOPS_CONV] + a.fl.fwd[TB_FLOPS_GEMM]) / 2;
        CHECK(macs >= 4.085e9 && macs < 4.095e9,
              "224x224: %.0f forward multiply-adds in convs and the head (published: 4.09 G)",
              macs);
    }
    return TB_OK;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_param_counts(be));
    TB_TRY(check_training(be));
    TB_TRY(check_layout_training(be));
    TB_TRY(check_flops(be, 224));
    return check_flops(be, 64);
}

int main(void)
{
    return tb_test_main_cpu(2, "resnet_test: ResNet-50 v1.5 parameters, shapes, a training step "
                            "in both layouts, no_grad, checkpointing, FLOPs", run, NULL);
}
