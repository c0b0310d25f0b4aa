/*
 * channels_last_test.c - NHWC (channels last) computes the same model as
 * NCHW, for the small CNN (1x28x28) and the wide CNN (3x16x16 and its real
 * 3x32x32 input).
 *
 * Model level, 8 random images and labels, the same seed:
 *   the initial parameters of the NHWC model, mapped back to NCHW order
 *   (tb_model_params_reorder), equal the NCHW model's bitwise;
 *   the loss of one forward within 1e-5 relative;
 *   every layer's forward output (mapped back to NCHW) within 1e-5 of the
 *   NCHW one relative to that tensor's largest magnitude;
 *   every parameter gradient of one backward, mapped back to NCHW order,
 *   within 1e-5 of the NCHW one relative to the largest magnitude of that
 *   tensor's gradient (a per-element ratio means nothing for gradients that
 *   are nearly zero; the two layouts only sum in different orders), unless
 *   a ReLU decided differently (below). These models have no conv bias
 *   before batch norm: BN cancels such a bias, its true gradient is zero and
 *   what the buffer holds is rounding noise (~1e-7 in both layouts),
 *   relative to nothing. The trainer-level check keeps the biases (PyTorch's
 *   default).
 * Trainer level: the loss after 5 SGD steps (batch 32; Fashion-MNIST for the
 * small CNN, synthetic data for the wide one) within 1e-5 relative.
 *
 * ReLU decisions. The two layouts sum convolutions in different orders, so
 * a ReLU input within rounding (~1e-6) of zero can land on 0 in one layout
 * and on a tiny positive value in the other. The forward barely notices
 * (that element differs by ~1e-6), but the gradient through it is passed
 * whole in one layout and dropped in the other: the gradient of a ReLU
 * network is discontinuous there, and no summation order is the right one.
 * A single such element moves the weight gradients of every layer before it
 * by ~1e-2 relative. This was the "known failure" this test once kept out of
 * the regular suite (//lib:channels_last_wide32_test, manual: the wide CNN
 * on 3x32x32, gradients 8.6e-2 apart). With the kernels of today (and at
 * 13e1b10, the first commit that built after it was written) its images
 * seed gives no such element and the gradients agree within 2.7e-6; other
 * seeds do. Measured at images seed 1 (8 images, 3x32x32): the 64-channel
 * residual block's sum before its ReLU is 9.2e-7 in NCHW and -2.0e-6 in
 * NHWC at one element (that tensor's largest magnitude is 6.5; every
 * layer's forward output agrees within 2.6e-6), so its output gradient
 * there is -2.4e-5 in one layout and 0 in the other; everything after it
 * in backward order agrees within 1.6e-6, everything before it is off by
 * 1e-2 to 6e-2. Over image seeds 1-8 at batch 1, 2, 4, .., 32 (96
 * cases, 3x16x16 and 3x32x32): 17 had such elements (all within 8.2e-7 of
 * their tensor's largest magnitude); the 79 without agreed within 6.9e-6 in
 * every gradient. No library change: oneDNN's NHWC convolutions, the NHWC
 * batch norm and pooling and tb_model_params_reorder compute the same function.
 * So the test counts, over every layer's output, the elements that are
 * zero in exactly one layout. None: the gradients must agree within 1e-5.
 * Some: each must be a rounding-level value (the non-zero side within 1e-5
 * of the tensor's largest magnitude; a wrong mask, e.g. a layout bug, would
 * give large ones), and the gradients are printed but not compared. The
 * case "wide_cnn 3x32x32, images seed 1" reaches that branch on this
 * machine (a regression test of the explanation, not of a kernel).
 *
 * Run: bazel test //lib/train:channels_last_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/nn/layers.h"
#include "lib/nn/model.h"
#include "lib/nn/tensor.h"
#include "lib/train/train.h"
#include "lib/nn/nn_testing.h"

#define TOL 1e-5
#define BATCH 8
#define STEPS 5
#define MAX_OUTPUTS 256

static double rel_diff(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

typedef struct side {
    tb_model *m;
    tb_tensor x;
    int32_t *labels;
    float loss;
    float *w, *g;           /* host copies in NCHW order */
} side;

static void side_free(tb_backend *be, side *s)
{
    tb_model_destroy(s->m);
    tb_tensor_free(&s->x);
    if (s->labels)
        be->dev_free(be, s->labels);
    free(s->w);
    free(s->g);
}

/* Host copy of a device parameter-shaped buffer, in NCHW order. */
static int params_to_host(const tb_model *m, const float *dev, float **out)
{
    size_t bytes = m->numel * sizeof(float);
    float *raw = malloc(bytes);
    *out = malloc(bytes);
    if (!raw || !*out) {
        free(raw);
        return TB_FAIL(TB_ERR_NOMEM, "params copy");
    }
    int rc = m->ctx.be->copy_d2h(m->ctx.be, raw, dev, bytes, NULL);
    if (rc == TB_OK)
        tb_model_params_reorder(m, raw, *out, 0);
    if (m->ctx.layout == TB_NCHW)
        memcpy(*out, raw, bytes);
    free(raw);
    return rc;
}

/* One forward + backward of images (NCHW host) in the layout of o. */
static int run_side(tb_backend *be, const tb_layer_spec *spec, const tb_model_opts *o,
                    const float *images, const int32_t *labels, side *s)
{
    tb_shape in = o->in;
    size_t numel = (size_t)BATCH * tb_shape_numel(in);
    TB_TRY(tb_model_build(be, spec, o, &s->m));
    TB_TRY(tb_tensor_alloc(be, BATCH, in.c, in.h, in.w, &s->x));
    float *nhwc = malloc(numel * sizeof(float));
    if (!nhwc)
        return TB_FAIL(TB_ERR_NOMEM, "nhwc batch");
    tb_tensor_host_nchw_to_nhwc(images, nhwc, BATCH, in.c, in.h, in.w);
    s->x.layout = o->channels_last ? TB_NHWC : TB_NCHW;
    int rc = tb_tensor_from_host(&s->x, o->channels_last ? nhwc : images);
    free(nhwc);
    TB_TRY(rc);
    TB_TRY(be->dev_alloc(be, (void **)&s->labels, BATCH * sizeof(int32_t)));
    TB_TRY(be->copy_h2d(be, s->labels, labels, BATCH * sizeof(int32_t), NULL));
    TB_TRY(params_to_host(s->m, s->m->flat_w, &s->w));
    TB_TRY(tb_model_zero_grad(s->m, 1));
    TB_TRY(tb_model_forward_loss(s->m, &s->x, s->labels, NULL));
    TB_TRY(tb_xent_read_loss(&s->m->loss, &s->loss));
    TB_TRY(tb_model_backward(s->m, 1.0f));
    return params_to_host(s->m, s->m->flat_g, &s->g);
}

/* Worst over parameter tensors of max |a - b| / max |b|. */
static double grads_rel_err(const tb_model *m, const float *a, const float *b)
{
    double worst = 0;
    size_t at = 0;
    for (int i = 0; i < m->nparams; i++) {
        double diff = 0, mag = 0;
        for (size_t j = at; j < at + m->params[i]->n; j++) {
            diff = fmax(diff, fabs((double)a[j] - b[j]));
            mag = fmax(mag, fabs((double)b[j]));
        }
        worst = fmax(worst, diff / fmax(mag, 1e-30));
        at += m->params[i]->n;
    }
    return worst;
}

/* The forward outputs of a model's layers, in tree order (both layouts
 * build the same tree). */
typedef struct output_list {
    const tb_layer *layer[MAX_OUTPUTS];
    const tb_tensor *t[MAX_OUTPUTS];
    int n;
} output_list;

static void outputs_collect(const tb_layer *l, output_list *o)
{
    for (int i = 0; i < l->nacts && o->n < MAX_OUTPUTS; i++) {
        if (!l->acts[i].output)
            continue;
        o->layer[o->n] = l;
        o->t[o->n++] = l->acts[i].t;
    }
    for (int i = 0; i < l->nchildren; i++)
        outputs_collect(l->children[i], o);
}

/* Host copy of t's current shape in NCHW order. */
static int tensor_host_nchw(const tb_tensor *t, float **out)
{
    size_t n = tb_tensor_numel(t);
    float *raw = malloc(n * sizeof(float));
    *out = malloc(n * sizeof(float));
    if (!raw || !*out) {
        free(raw);
        return TB_FAIL(TB_ERR_NOMEM, "host copy of %zu floats", n);
    }
    int rc = tb_tensor_to_host(t, raw);
    if (t->layout != TB_NHWC) {
        memcpy(*out, raw, n * sizeof(float));
        free(raw);
        return rc;
    }
    size_t C = t->c, HW = (size_t)t->h * t->w;
    for (size_t b = 0; b < (size_t)t->n; b++)
        for (size_t p = 0; p < HW; p++)
            for (size_t c = 0; c < C; c++)
                (*out)[(b * C + c) * HW + p] = raw[(b * HW + p) * C + c];
    free(raw);
    return rc;
}

/* What comparing the layer outputs of the two layouts found. */
typedef struct fwd_diff {
    double worst;            /* max over outputs of max |a - b| / max |a| */
    char worst_at[TB_LAYER_NAME];
    long flips;              /* elements zero in exactly one layout */
    double flip_worst;       /* largest |non-zero side| / max |a| over those */
    char flip_at[TB_LAYER_NAME];
} fwd_diff;

static void fwd_diff_add(fwd_diff *r, const char *name, const float *a, const float *b,
                         size_t n)
{
    double diff = 0, mag = 0, flip = 0;
    for (size_t j = 0; j < n; j++) {
        diff = fmax(diff, fabs((double)a[j] - b[j]));
        mag = fmax(mag, fabs((double)a[j]));
    }
    mag = fmax(mag, 1e-30);
    for (size_t j = 0; j < n; j++) {
        if ((a[j] == 0.0f) == (b[j] == 0.0f))
            continue;
        r->flips++;
        flip = fmax(flip, fmax(fabs((double)a[j]), fabs((double)b[j])) / mag);
    }
    if (diff / mag > r->worst) {
        r->worst = diff / mag;
        snprintf(r->worst_at, sizeof r->worst_at, "%s", name);
    }
    if (flip > r->flip_worst) {
        r->flip_worst = flip;
        snprintf(r->flip_at, sizeof r->flip_at, "%s", name);
    }
}

/* Every layer output of a (NCHW) against b (NHWC), after one forward. */
static int compare_outputs(const tb_model *a, const tb_model *b, fwd_diff *r)
{
    static output_list oa, ob;
    memset(r, 0, sizeof *r);
    oa.n = ob.n = 0;
    outputs_collect(a->net, &oa);
    outputs_collect(b->net, &ob);
    if (oa.n != ob.n || oa.n == MAX_OUTPUTS)
        return TB_FAIL(TB_ERR_INTERNAL, "layer outputs: %d in NCHW, %d in NHWC (at most %d)",
                       oa.n, ob.n, MAX_OUTPUTS - 1);
    for (int i = 0; i < oa.n; i++) {
        float *ha = NULL, *hb = NULL;
        int rc = tensor_host_nchw(oa.t[i], &ha);
        if (rc == TB_OK)
            rc = tensor_host_nchw(ob.t[i], &hb);
        if (rc == TB_OK && tb_tensor_numel(oa.t[i]) != tb_tensor_numel(ob.t[i]))
            rc = TB_FAIL(TB_ERR_INTERNAL, "layer %s: output sizes differ", oa.layer[i]->name);
        if (rc == TB_OK)
            fwd_diff_add(r, oa.layer[i]->name, ha, hb, tb_tensor_numel(oa.t[i]));
        free(ha);
        free(hb);
        TB_TRY(rc);
    }
    return TB_OK;
}

static int check_model(tb_backend *be, const char *name, const tb_layer_spec *spec, tb_shape in,
                       uint32_t image_seed)
{
    size_t numel = (size_t)BATCH * tb_shape_numel(in);
    float *images = malloc(numel * sizeof(float));
    int32_t labels[BATCH];
    if (!images)
        return TB_FAIL(TB_ERR_NOMEM, "images");
    uint32_t r = image_seed;
    for (size_t i = 0; i < numel; i++) {
        r = r * 1664525u + 1013904223u;
        images[i] = (float)(r >> 8) / 16777216.0f * 2.0f - 1.0f;
    }
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 7 + 3) % 10;
    tb_model_opts o = {.in = in, .classes = 10, .max_batch = BATCH, .conv_bias = 0,
                       .dropout = 0.1f, .seed = 3};
    side a = {0}, b = {0};
    int rc;
    TB_TRY_GOTO(rc, run_side(be, spec, &o, images, labels, &a), out_free);
    o.channels_last = 1;
    TB_TRY_GOTO(rc, run_side(be, spec, &o, images, labels, &b), out_free);
    char what[160];
    snprintf(what, sizeof what, "%s: initial parameters equal (NHWC mapped back)", name);
    CHECK_WHAT(memcmp(a.w, b.w, a.m->numel * sizeof(float)) == 0, what);
    double dl = rel_diff(b.loss, a.loss), dg = grads_rel_err(a.m, b.g, a.g);
    snprintf(what, sizeof what, "%s: loss %.7g vs %.7g, rel diff %.1e <= %.0e", name, b.loss,
             a.loss, dl, TOL);
    CHECK_WHAT(dl <= TOL, what);
    fwd_diff f;
    TB_TRY_GOTO(rc, compare_outputs(a.m, b.m, &f), out_free);
    snprintf(what, sizeof what, "%s: every layer's output, rel err %.1e (%s) <= %.0e", name,
             f.worst, f.worst_at, TOL);
    CHECK_WHAT(f.worst <= TOL, what);
    if (f.flips == 0) {
        snprintf(what, sizeof what, "%s: gradients (NHWC mapped back), rel err %.1e <= %.0e",
                 name, dg, TOL);
        CHECK_WHAT(dg <= TOL, what);
        goto out_free;
    }
    snprintf(what, sizeof what, "%s: %ld ReLU outputs zero in one layout only, all at rounding "
             "level (%.1e of the max, %s) <= %.0e", name, f.flips, f.flip_worst, f.flip_at, TOL);
    CHECK_WHAT(f.flip_worst <= TOL, what);
    printf("    so gradients not compared: a ReLU's gradient jumps at 0 (rel err %.1e)\n", dg);

out_free:
    side_free(be, &a);
    side_free(be, &b);
    free(images);
    return rc;
}

static int train_loss(tb_backend *be, tb_config *c, float *loss)
{
    tb_epoch_stats es;
    TB_TRY(tb_trainer_one_epoch(c, be, NULL, NULL, &es, NULL));
    *loss = es.last_loss;
    return TB_OK;
}

static int check_training(tb_backend *be, int model, int dataset)
{
    tb_config c;
    tb_config_defaults(&c);
    c.device = "cpu";
    c.model = model;
    c.dataset = dataset;
    c.batch_size = 32;
    c.data_limit = 1024;
    c.test_limit = 100;
    c.max_steps = STEPS;
    c.lr = 0.01;
    c.seed = 5;
    float base, nhwc;
    TB_TRY(train_loss(be, &c, &base));
    c.channels_last = 1;
    TB_TRY(train_loss(be, &c, &nhwc));
    char what[160];
    double d = rel_diff(nhwc, base);
    snprintf(what, sizeof what, "%s: loss after %d steps %.7g vs %.7g, rel diff %.1e <= %.0e",
             tb_model_names[model], STEPS, nhwc, base, d, TOL);
    CHECK_WHAT(d <= TOL, what);
    return TB_OK;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_model(be, "small_cnn", tb_spec_small_cnn, (tb_shape){1, 28, 28}, 12345));
    TB_TRY(check_model(be, "wide_cnn on 3x16x16", tb_spec_wide_cnn, (tb_shape){3, 16, 16},
                       12345));
    TB_TRY(check_model(be, "wide_cnn 3x32x32", tb_spec_wide_cnn, (tb_shape){3, 32, 32}, 12345));
    TB_TRY(check_model(be, "wide_cnn 3x32x32, images seed 1", tb_spec_wide_cnn,
                       (tb_shape){3, 32, 32}, 1));
    TB_TRY(check_training(be, TB_MODEL_SMALL_CNN, TB_DATA_FASHION_MNIST));
    return check_training(be, TB_MODEL_WIDE_CNN, TB_DATA_SYNTHETIC);
}

int main(void)
{
    return tb_test_main_cpu(0, NULL, run, NULL);
}
