/*
 * workload.c - the workloads' sizes, labels and FLOP counts (workload.h).
 *
 * Tests: bazel test //lib/train:workload_test
 */
#include "lib/train/workload.h"

#include <math.h>
#include <stdio.h>

#include "lib/nn/model.h"
#include "lib/train/train.h"

/* The reduced sizes (see workload.h for why these). */
#define RESNET50_REDUCED_WIDTH 24
#define RESNET50_REDUCED_IMAGE 64
#define RESNET50_REDUCED_BATCH 4
#define GPT2_REDUCED_LAYERS 2
#define GPT2_REDUCED_WIDTH 192
#define GPT2_REDUCED_CONTEXT 256
#define GPT2_REDUCED_VOCAB 2048
#define GPT2_REDUCED_BATCH 1

void tb_workload_apply(tb_config *c, tb_workload w, tb_workload_size s)
{
    if (w == TB_WL_SMALL_CNN)
        return;
    c->dataset = TB_DATA_SYNTHETIC;
    c->model = w == TB_WL_RESNET50 ? TB_MODEL_RESNET50 : TB_MODEL_GPT2;
    /* 0: the model's own, the full size (tb_config_validate) */
    c->image_size = c->context = c->layers = c->vocab = c->width = c->batch_size = 0;
    if (s == TB_WL_FULL)
        return;
    if (s == TB_WL_GPU) {
        c->batch_size = w == TB_WL_RESNET50 ? TB_WL_GPU_BATCH_RESNET50 : TB_WL_GPU_BATCH_GPT2;
        return;
    }
    if (s == TB_WL_TINY) {
        c->batch_size = 2;
        if (w == TB_WL_RESNET50) {
            c->width = 8;
            c->image_size = 64;
            c->batch_size = 4;
        } else {
            c->layers = 1, c->width = 64, c->context = 32, c->vocab = 256;
        }
        return;
    }
    if (w == TB_WL_RESNET50) {
        c->width = RESNET50_REDUCED_WIDTH;
        c->image_size = RESNET50_REDUCED_IMAGE;
        c->batch_size = RESNET50_REDUCED_BATCH;
    } else {
        c->layers = GPT2_REDUCED_LAYERS;
        c->width = GPT2_REDUCED_WIDTH;
        c->context = GPT2_REDUCED_CONTEXT;
        c->vocab = GPT2_REDUCED_VOCAB;
        c->batch_size = GPT2_REDUCED_BATCH;
    }
}

const char *tb_workload_model_name(tb_workload w)
{
    static const char *const names[TB_WORKLOADS] = {"small_cnn", "resnet50", "gpt2"};
    return (int)w >= 0 && w < TB_WORKLOADS ? names[w] : "?";
}

void tb_workload_label(tb_workload w, tb_workload_size s, char *buf, size_t cap)
{
    if (w == TB_WL_SMALL_CNN)
        snprintf(buf, cap, "small_cnn-fashion_mnist");
    else
        snprintf(buf, cap, "%s-%s-synthetic", tb_workload_model_name(w),
                 s == TB_WL_FULL || s == TB_WL_GPU ? "full"
                 : s == TB_WL_TINY                 ? "tiny"
                                                   : "reduced");
}

void tb_workload_describe(const tb_config *c, char *buf, size_t cap)
{
    if (c->model == TB_MODEL_RESNET50)
        snprintf(buf, cap, "resnet50 width %d, %dx%d, batch %d", c->width, c->image_size,
                 c->image_size, c->batch_size);
    else if (c->model == TB_MODEL_GPT2)
        snprintf(buf, cap, "gpt2 %d layers, d %d, context %d, vocab %d, batch %d", c->layers,
                 c->width, c->context, c->vocab, c->batch_size);
    else
        snprintf(buf, cap, "%s, batch %d", tb_model_names[c->model], c->batch_size);
}

int tb_workload_flops(const tb_config *c, tb_backend *be, tb_flops *per_sample)
{
    tb_model *m = NULL;
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = 1,
                       .conv_bias = tb_config_conv_bias(c),
                       .gelu_approx = tb_config_gelu_approx(c), .seed = 1};
    if (c->model == TB_MODEL_GPT2) {
        tb_gpt2_dims g = tb_train_gpt2_dims(c);
        o.classes = g.vocab;
        TB_TRY(tb_model_build_gpt2(be, &g, &o, &m));
    } else if (c->model == TB_MODEL_RESNET50) {
        tb_layer_spec spec[TB_SPEC_RESNET50_LEN];
        tb_spec_resnet50_width(c->width, spec);
        o.in = (tb_shape){3, c->image_size, c->image_size};
        o.classes = 1000;
        TB_TRY(tb_model_build(be, spec, &o, &m));
    } else {
        const tb_layer_spec *spec = c->model == TB_MODEL_WIDE_CNN      ? tb_spec_wide_cnn
                                    : c->model == TB_MODEL_TRANSFORMER ? tb_spec_transformer
                                                                       : tb_spec_small_cnn;
        if (c->model == TB_MODEL_WIDE_CNN)
            o.in = (tb_shape){3, 32, 32};
        TB_TRY(tb_model_build(be, spec, &o, &m));
    }
    tb_model_flops(m, per_sample);
    tb_model_destroy(m);
    return TB_OK;
}

double tb_workload_share_gap(const tb_flops *a, const tb_flops *b)
{
    double gap = 0;
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        gap = fmax(gap, fabs(tb_flops_share(a, (tb_flop_family)k) -
                             tb_flops_share(b, (tb_flop_family)k)));
    return gap;
}

/* The full models' shares, in tb_flop_family order, as tb_workload_flops
 * counts them (workload_test recounts them). */
static const double full_shares[TB_WORKLOADS][TB_FLOP_FAMILIES] = {
    [TB_WL_RESNET50] = {0.990465, 0.000501, 0, 0.007705, 0.001328},
    [TB_WL_GPT2] = {0, 0.863914, 0.131997, 0.000448, 0.003641},
};

double tb_workload_full_share(tb_workload w, tb_flop_family k)
{
    if ((int)w < 0 || w >= TB_WORKLOADS || (int)k < 0 || k >= TB_FLOP_FAMILIES)
        return 0;
    return full_shares[w][k];
}
