/*
 * model_resnet.c - ResNet-50 v1.5, layer for layer torchvision's resnet50:
 * the description tb_spec_resnet50 (built by tb_model_build) and its
 * bottleneck block, tb_resnet_bottleneck_create. See model.h.
 *
 * v1.5 puts a stage's stride in the bottleneck's 3x3 convolution (v1 had it
 * in the first 1x1, which then skips three quarters of its input); the first
 * block of every stage has a projection shortcut (1x1 conv with the block's
 * stride, then BN) since its channel count changes. Torchvision's
 * convolutions have no bias (BN follows each): 25,557,032 parameters at
 * 1000 classes. The initial values are tb_model_build's (PyTorch's layer
 * defaults), not torchvision's kaiming_normal: the parameter count and the
 * function are the same, the starting point is the repository's convention.
 *
 * Small images and batches are ill-conditioned: at S = 32 stage 4 is 1x1,
 * so with batch 2 its batch norms normalize 2 values per channel (a sign
 * function), and gradients grow towards the input (batch norm at
 * initialization). Measured, the stem conv's gradient norm over its weight
 * norm after one backward: 2.8e7 at S = 32, batch 2; 2.6e3 at batch 4;
 * 107 at S = 64, batch 8; 52 at S = 128, batch 8. One SGD step at lr 0.05
 * then moves the weights far from where the running statistics were taken
 * (evaluation losses of 1e8 and more after 3 steps); lr 0.005 at S = 64,
 * batch 8 keeps both losses near ln 1000.
 *
 * Tests: bazel test //lib/nn:resnet_test //lib/nn:gradcheck_test
 */
#include <stdio.h>

#include "lib/nn/model.h"

/* Spec fields: {kind, k, r, stride, pad}; a bottleneck's k is its width
 * (4k channels out), the stride of the first block of stages 2-4 is 2. */
const tb_layer_spec tb_spec_resnet50[] = {
    {TB_SPEC_CONV_BN_RELU, 64, 7, 2},   /* stem: 7x7/2, pad 3 */
    {TB_SPEC_MAXPOOL, 0, 3, 2, 1},      /* 3x3/2, pad 1 */
    {TB_SPEC_BOTTLENECK, 64, 0, 1},     /* stage 1 (torchvision's layer1): 3 blocks */
    {TB_SPEC_BOTTLENECK, 64, 0, 1},
    {TB_SPEC_BOTTLENECK, 64, 0, 1},
    {TB_SPEC_BOTTLENECK, 128, 0, 2},    /* stage 2: 4 blocks */
    {TB_SPEC_BOTTLENECK, 128, 0, 1},
    {TB_SPEC_BOTTLENECK, 128, 0, 1},
    {TB_SPEC_BOTTLENECK, 128, 0, 1},
    {TB_SPEC_BOTTLENECK, 256, 0, 2},    /* stage 3: 6 blocks */
    {TB_SPEC_BOTTLENECK, 256, 0, 1},
    {TB_SPEC_BOTTLENECK, 256, 0, 1},
    {TB_SPEC_BOTTLENECK, 256, 0, 1},
    {TB_SPEC_BOTTLENECK, 256, 0, 1},
    {TB_SPEC_BOTTLENECK, 256, 0, 1},
    {TB_SPEC_BOTTLENECK, 512, 0, 2},    /* stage 4: 3 blocks */
    {TB_SPEC_BOTTLENECK, 512, 0, 1},
    {TB_SPEC_BOTTLENECK, 512, 0, 1},
    {TB_SPEC_GLOBAL_AVGPOOL, 0, 0, 0},
    {TB_SPEC_LINEAR, 0, 0, 0},          /* 2048 -> classes */
    {TB_SPEC_END, 0, 0, 0},
};

#define BOTTLENECK_EXPANSION 4

_Static_assert(sizeof tb_spec_resnet50 / sizeof tb_spec_resnet50[0] == TB_SPEC_RESNET50_LEN,
               "TB_SPEC_RESNET50_LEN counts tb_spec_resnet50's entries");

void tb_spec_resnet50_width(int width, tb_layer_spec out[TB_SPEC_RESNET50_LEN])
{
    for (int i = 0; i < TB_SPEC_RESNET50_LEN; i++) {
        out[i] = tb_spec_resnet50[i];
        if (out[i].kind == TB_SPEC_CONV_BN_RELU || out[i].kind == TB_SPEC_BOTTLENECK)
            out[i].k = tb_spec_resnet50[i].k / 64 * width; /* 64, 128, 256, 512: exact */
    }
}

/* A path under construction: its layers, destroyed on failure. */
typedef struct path {
    tb_layer *items[8];
    int n;
} path;

static void path_clear(path *p)
{
    for (int i = 0; i < p->n; i++)
        tb_layer_destroy(p->items[i]);
    p->n = 0;
}

static void path_push(path *p, tb_layer *l, const char *kind, int index)
{
    snprintf(l->name, sizeof l->name, "%s%d", kind, index);
    p->items[p->n++] = l;
}

static tb_shape path_out(const path *p, tb_shape in)
{
    return p->n ? p->items[p->n - 1]->out : in;
}

/* conv r x r (pad r/2, so 1x1 and 3x3 keep the size at stride 1) + BN, then
 * ReLU when relu; appended to p as conv<index>, bn<index>, relu<index>. */
static int push_conv_bn(tb_layer_ctx *ctx, path *p, int k, int r, int stride, int bias, int relu,
                        int index, tb_shape in)
{
    tb_layer *l;
    TB_TRY(tb_layer_conv2d_create(ctx, in, k, r, stride, r / 2, bias, &l));
    path_push(p, l, "conv", index);
    TB_TRY(tb_layer_batchnorm_create(ctx, l->out, &l));
    path_push(p, l, "bn", index);
    if (!relu)
        return TB_OK;
    TB_TRY(tb_layer_relu_create(ctx, l->out, &l));
    path_push(p, l, "relu", index);
    return TB_OK;
}

/* The sequence of p's layers, named name; p is emptied (the sequence owns
 * them, also on failure). */
static int path_seq(tb_layer_ctx *ctx, path *p, const char *name, tb_layer **out)
{
    int n = p->n;
    p->n = 0;
    TB_TRY(tb_layer_seq_create(ctx, p->items, n, out));
    snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    return TB_OK;
}

int tb_resnet_bottleneck_create(tb_layer_ctx *ctx, tb_shape in, int width, int stride, int bias,
                                tb_layer **out)
{
    *out = NULL;
    if (width < 1 || stride < 1)
        return TB_FAIL(TB_ERR_INVALID, "bottleneck: width %d, stride %d", width, stride);
    int k = BOTTLENECK_EXPANSION * width, rc;
    path main_p = {0}, proj = {0};
    tb_layer *main_seq = NULL, *shortcut = NULL;
    TB_TRY_GOTO(rc, push_conv_bn(ctx, &main_p, width, 1, 1, bias, 1, 1, in), out_clear);
    TB_TRY_GOTO(rc, push_conv_bn(ctx, &main_p, width, 3, stride, bias, 1, 2, path_out(&main_p, in)),
                out_clear);
    TB_TRY_GOTO(rc, push_conv_bn(ctx, &main_p, k, 1, 1, bias, 0, 3, path_out(&main_p, in)),
                out_clear);
    if (stride != 1 || in.c != k)
        TB_TRY_GOTO(rc, push_conv_bn(ctx, &proj, k, 1, stride, bias, 0, 0, in), out_clear);
    TB_TRY_GOTO(rc, path_seq(ctx, &main_p, "main", &main_seq), out_clear);
    if (proj.n)
        TB_TRY_GOTO(rc, path_seq(ctx, &proj, "downsample", &shortcut), out_destroy_main);
    return tb_layer_residual_create(ctx, main_seq, shortcut, out);

out_destroy_main:
    tb_layer_destroy(main_seq);
out_clear:
    path_clear(&main_p);
    path_clear(&proj);
    return rc;
}
