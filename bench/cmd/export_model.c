/*
 * export_model.c - writes what tools/torch_match.py needs to rebuild a
 * tunebench model in PyTorch and check that both compute the same numbers:
 * the initial parameters, one seeded batch, the logits and loss of a
 * training-mode forward, the gradients, and after ONE optimizer step the
 * updated parameters and the loss (and logits) of a second forward on the
 * same batch.
 *
 *   bazel run //bench:export_model -- --model=small_cnn --batch-size=4 --out=/tmp/tm
 *   python3 tools/torch_match.py /tmp/tm       (PyTorch, outside CI)
 *   tools/torch_match.sh                       (every model at its reduced size)
 *   bazel run //bench:export_model -- --help   (every flag)
 *
 * The model and the optimizer come from the same flags as bench:train
 * (lib/train/config.h): --model, --seed, --batch-size (default 4 here),
 * --image-size (resnet50), --layers, --context, --vocab (gpt2, at GPT-2
 * small's 12 heads and width 768), --gelu, --conv-bias, --lr, --momentum,
 * --weight-decay, --channels-last, --tf32, --conv-autotune,
 * --fused-optimizer... plus --classes (image models, default 10),
 * --resnet-blocks (ResNet-50 cut after its first N bottlenecks, a
 * shallower network of the same blocks whose gradients are well enough
 * conditioned to compare) and --out. Only SGD (with momentum and weight decay: the trainer's recipe,
 * PyTorch's torch.optim.SGD) and AdamW are exported, without --amp, and
 * dropout defaults to 0 here (PyTorch cannot draw the same masks). The batch
 * is drawn from --seed alone: images uniform in [-1, 1) with uniform labels,
 * or T + 1 uniform token ids per sample (input the first T, labels the last
 * T).
 *
 * Files in --out (raw little-endian, C order; parameter-shaped files in
 * tb_layer_for_each_param order and NCHW/KCRS layout even with
 * --channels-last):
 *   params0.f32  initial parameters (numel floats)
 *   x.f32 | x.i32  the batch: images (N, C, H, W), or token ids (N, T)
 *   labels.i32   one label per sample, or per token (N, T)
 *   logits0.f32  training-mode forward (batch statistics), (N, classes) or (N, T, vocab)
 *   grads.f32    gradients of the mean loss
 *   params1.f32  parameters after one optimizer step
 *   logits1.f32  training-mode forward on the same batch after the step
 *   manifest.json  written last: model, dims, optimizer, both losses, and each
 *                  parameter tensor's name, layer kind, shape, offset, numel
 * Batch norm's running statistics are not exported. Exit codes: 0 done,
 * 2 bad flag, 1 any other error (printed as the error chain).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cmd/cli.h"
#include "lib/backend/backend.h"
#include "lib/core/atomic_file.h"
#include "lib/core/outdir.h"
#include "lib/core/flags.h"
#include "lib/core/json.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"
#include "lib/nn/model.h"
#include "lib/nn/optim.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

static const char *summary =
    "Builds a model from bench:train's flags on a seeded batch, runs one training step\n"
    "(forward, backward, one optimizer step, forward again) and writes parameters, batch,\n"
    "logits, gradients and losses to --out for tools/torch_match.py.";

/* Flags of this command beyond tb_config's. */
typedef struct export_opts {
    const char *out;
    int classes;      /* image models' classes */
    int resnet_blocks; /* resnet50: keep the first N bottlenecks; 0 = all 16 */
} export_opts;

#define RESNET50_BLOCKS 16
#define MAX_SPEC 64

/* What the export holds on the host. */
typedef struct export_data {
    size_t numel;
    int n, classes;
    size_t in_numel;      /* per sample: C*H*W floats or T token ids */
    int labels_per_sample;
    size_t logits_numel;  /* whole batch */
    float *params0, *grads, *params1;
    float *x;             /* (N, C, H, W) NCHW, image models */
    int32_t *tokens;      /* (N, T) token models */
    int32_t *labels;      /* (N * labels_per_sample) */
    float *logits0, *logits1;
    float loss0, loss1;
    double lr;            /* of the step taken */
} export_data;

static int fail(void)
{
    int code = tb_error_last();
    tb_error_print(stderr);
    return tb_exit_code(code);
}

static int little_endian(void)
{
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Per-sample input of an image model: --image-size for resnet50, the
 * others' own. */
static tb_shape image_shape(const tb_config *c)
{
    if (c->model == TB_MODEL_RESNET50)
        return (tb_shape){3, c->image_size, c->image_size};
    return c->model == TB_MODEL_WIDE_CNN ? (tb_shape){3, 32, 32} : (tb_shape){1, 28, 28};
}

/* GPT-2 small's heads, width and MLP at --layers, --context, --vocab. */
static tb_gpt2_dims gpt2_dims(const tb_config *c)
{
    tb_gpt2_dims g = tb_gpt2_small();
    g.layers = c->layers;
    g.context = c->context;
    g.vocab = c->vocab;
    return g;
}

/* The description of an image model (lib/nn/model.h). */
static const tb_layer_spec *image_spec(const tb_config *c)
{
    switch (c->model) {
    case TB_MODEL_WIDE_CNN: return tb_spec_wide_cnn;
    case TB_MODEL_TRANSFORMER: return tb_spec_transformer;
    case TB_MODEL_RESNET50: return tb_spec_resnet50;
    default: return tb_spec_small_cnn;
    }
}

/* tb_spec_resnet50 with only its first `blocks` bottlenecks, the pool and
 * the head kept: a shallower network of the same blocks, for comparing
 * gradients where the whole one is too ill-conditioned to (see
 * tools/torch_match.py). spec holds MAX_SPEC entries. */
static void resnet_truncated(int blocks, tb_layer_spec *spec)
{
    int n = 0, seen = 0;
    for (const tb_layer_spec *s = tb_spec_resnet50; s->kind != TB_SPEC_END && n < MAX_SPEC - 1;
         s++) {
        if (s->kind == TB_SPEC_BOTTLENECK && seen++ >= blocks)
            continue;
        spec[n++] = *s;
    }
    spec[n] = (tb_layer_spec){TB_SPEC_END, 0, 0, 0};
}

static int build_model(const tb_config *c, const export_opts *eo, tb_backend *be,
                       tb_model **out)
{
    tb_layer_spec truncated[MAX_SPEC];
    tb_model_opts mo = {
        .in = image_shape(c), .classes = eo->classes, .max_batch = c->batch_size,
        .conv_bias = tb_config_conv_bias(c), .dropout = (float)c->dropout,
        .seed = (uint64_t)c->seed, .channels_last = c->channels_last,
        .gelu_approx = tb_config_gelu_approx(c),
    };
    if (c->model == TB_MODEL_GPT2) {
        tb_gpt2_dims g = gpt2_dims(c);
        mo.classes = g.vocab;
        TB_TRY(tb_model_build_gpt2(be, &g, &mo, out));
    } else if (c->model == TB_MODEL_RESNET50 && eo->resnet_blocks) {
        resnet_truncated(eo->resnet_blocks, truncated);
        TB_TRY(tb_model_build(be, truncated, &mo, out));
    } else {
        TB_TRY(tb_model_build(be, image_spec(c), &mo, out));
    }
    tb_model *m = *out;
    m->ctx.gelu = c->fused_gelu ? TB_GELU_FUSED : TB_GELU_UNFUSED;
    m->ctx.layernorm = c->fused_layernorm ? TB_LN_FUSED : TB_LN_UNFUSED;
    m->ctx.attention = c->fused_attention ? TB_ATTN_FUSED : TB_ATTN_MANUAL;
    m->ctx.math = c->tf32 ? TB_MATH_TF32 : TB_MATH_F32;
    m->ctx.conv_math = tb_config_conv_tf32(c, be->name) ? TB_MATH_TF32 : TB_MATH_F32;
    m->ctx.conv_autotune = c->conv_autotune;
    m->ctx.conv_deterministic = c->cudnn_deterministic;
    return TB_OK;
}

/* ---- the host side: buffers, the seeded batch ---- */

static void data_free(export_data *d)
{
    free(d->params0);
    free(d->grads);
    free(d->params1);
    free(d->x);
    free(d->tokens);
    free(d->labels);
    free(d->logits0);
    free(d->logits1);
}

static int data_alloc(export_data *d, const tb_model *m, int n)
{
    d->numel = m->numel;
    d->n = n;
    d->classes = m->classes;
    int tokens = m->in_dtype == TB_I32;
    d->labels_per_sample = m->labels_per_sample > 0 ? m->labels_per_sample : 1;
    d->in_numel = tb_shape_numel(m->in);
    d->logits_numel = (size_t)n * d->labels_per_sample * m->classes;
    size_t pbytes = d->numel * sizeof(float), lbytes = d->logits_numel * sizeof(float);
    d->params0 = malloc(pbytes);
    d->grads = malloc(pbytes);
    d->params1 = malloc(pbytes);
    d->logits0 = malloc(lbytes);
    d->logits1 = malloc(lbytes);
    d->labels = malloc((size_t)n * d->labels_per_sample * sizeof(int32_t));
    if (tokens)
        d->tokens = malloc((size_t)n * d->in_numel * sizeof(int32_t));
    else
        d->x = malloc((size_t)n * d->in_numel * sizeof(float));
    if (!d->params0 || !d->grads || !d->params1 || !d->logits0 || !d->logits1 || !d->labels ||
        (!d->tokens && !d->x))
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the export (%zu parameters)",
                       d->numel);
    return TB_OK;
}

/* A batch from the seed only: images uniform in [-1, 1), labels uniform;
 * token models see a random sequence of T + 1 ids, inputs its first T and
 * labels its last T (next-token prediction). */
static void data_fill_batch(export_data *d, uint64_t seed)
{
    tb_rng r = tb_rng_make(seed, 0, 0, TB_RNG_SYNTH_NOISE);
    if (d->tokens) {
        int t = (int)d->in_numel;
        for (int i = 0; i < d->n; i++) {
            int32_t prev = (int32_t)tb_rng_below(&r, (uint32_t)d->classes);
            for (int j = 0; j < t; j++) {
                int32_t next = (int32_t)tb_rng_below(&r, (uint32_t)d->classes);
                d->tokens[(size_t)i * t + j] = prev;
                d->labels[(size_t)i * t + j] = next;
                prev = next;
            }
        }
        return;
    }
    for (size_t i = 0; i < (size_t)d->n * d->in_numel; i++)
        d->x[i] = 2.0f * tb_rng_float01(&r) - 1.0f;
    for (int i = 0; i < d->n; i++)
        d->labels[i] = (int32_t)tb_rng_below(&r, (uint32_t)d->classes);
}

/* ---- the device side: one training step ---- */

typedef struct device_batch {
    tb_tensor x;          /* (N, C, H, W) images, or (N, 1, T, 1) int32 token ids */
    int32_t *labels;      /* (N * labels_per_sample) */
} device_batch;

static void batch_free(tb_backend *be, device_batch *b)
{
    tb_tensor_free(&b->x);
    if (b->labels)
        be->dev_free(be, b->labels);
}

/* Copies the host batch to the device in the layout the model reads. */
static int batch_upload(tb_model *m, const export_data *d, device_batch *b)
{
    tb_backend *be = m->ctx.be;
    size_t nl = (size_t)d->n * d->labels_per_sample;
    TB_TRY(be->dev_alloc(be, (void **)&b->labels, nl * sizeof(int32_t)));
    TB_TRY(be->copy_h2d(be, b->labels, d->labels, nl * sizeof(int32_t), NULL));
    TB_TRY(tb_tensor_alloc(be, d->n, m->in.c, m->in.h, m->in.w, &b->x));
    if (d->tokens) {
        /* int32 ids in the fp32 tensor's memory: the same 4 bytes each */
        b->x.dtype = TB_I32;
        return be->copy_h2d(be, b->x.data, d->tokens, (size_t)d->n * d->in_numel * 4, NULL);
    }
    if (m->ctx.layout != TB_NHWC || m->in.c == 1)
        return tb_tensor_from_host(&b->x, d->x);
    float *nhwc = malloc((size_t)d->n * d->in_numel * sizeof(float));
    if (!nhwc)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the channels-last batch");
    tb_tensor_host_nchw_to_nhwc(d->x, nhwc, d->n, m->in.c, m->in.h, m->in.w);
    b->x.layout = TB_NHWC;
    int rc = tb_tensor_from_host(&b->x, nhwc);
    free(nhwc);
    return rc;
}

/* A parameter-shaped device buffer to host, in NCHW order. */
static int params_to_host(const tb_model *m, const float *dev, float *host)
{
    tb_backend *be = m->ctx.be;
    size_t bytes = m->numel * sizeof(float);
    TB_TRY(be->copy_d2h(be, host, dev, bytes, NULL));
    if (m->ctx.layout != TB_NHWC)
        return TB_OK;
    float *tmp = malloc(bytes);
    if (!tmp)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory reordering parameters");
    memcpy(tmp, host, bytes);
    tb_model_params_reorder(m, tmp, host, 0);
    free(tmp);
    return TB_OK;
}

/* Training-mode forward and loss; logits to host. */
static int forward_to_host(tb_model *m, const device_batch *b, float *logits, float *loss)
{
    const tb_tensor *out;
    TB_TRY(tb_model_forward_loss(m, &b->x, b->labels, &out));
    TB_TRY(tb_xent_read_loss(&m->loss, loss));
    return tb_tensor_to_host(out, logits);
}

/* zero_grad, forward, backward, one optimizer step, forward again: the
 * trainer's step (lib/train/train.c) with one micro-batch. */
static int run_step(const tb_config *c, tb_model *m, export_data *d)
{
    device_batch b = {0};
    tb_optim opt = {0};
    int rc;
    TB_TRY_GOTO(rc, batch_upload(m, d, &b), out_free_batch);
    TB_TRY_GOTO(rc, params_to_host(m, m->flat_w, d->params0), out_free_batch);
    TB_TRY_GOTO(rc, tb_train_optim_init(c, m, &opt), out_free_batch);
    tb_model_train_mode(m, 1);
    TB_TRY_GOTO(rc, tb_model_zero_grad(m, c->grads_to_none), out_free_optim);
    TB_TRY_GOTO(rc, forward_to_host(m, &b, d->logits0, &d->loss0), out_free_optim);
    TB_TRY_GOTO(rc, tb_model_backward(m, 1.0f), out_free_optim);
    TB_TRY_GOTO(rc, params_to_host(m, m->flat_g, d->grads), out_free_optim);
    d->lr = tb_lr_at_step(&opt.sched, 1);
    TB_TRY_GOTO(rc, tb_optim_step(&opt), out_free_optim);
    TB_TRY_GOTO(rc, params_to_host(m, m->flat_w, d->params1), out_free_optim);
    TB_TRY_GOTO(rc, forward_to_host(m, &b, d->logits1, &d->loss1), out_free_optim);

out_free_optim:
    tb_optim_free(&opt);
out_free_batch:
    batch_free(m->ctx.be, &b);
    return rc;
}

/* ---- the manifest ---- */

/* A parameter's shape as PyTorch declares it, from its layer's kind; the
 * flat size (n) for kinds not listed. */
static int param_shape(const tb_layer *l, int index, const tb_param *p, int64_t shape[4])
{
    const char *k = l->vt->kind;
    int64_t n = (int64_t)p->n, out_c = l->out.c;
    if (!strcmp(k, "conv2d") && index == 0) {
        int64_t r = (int64_t)llround(sqrt((double)n / (double)(out_c * l->in.c)));
        shape[0] = out_c, shape[1] = l->in.c, shape[2] = r, shape[3] = r;
        return 4;
    }
    if (!strcmp(k, "linear") && index == 0) {
        shape[0] = out_c, shape[1] = n / out_c;
        return 2;
    }
    if ((!strcmp(k, "token_linear") || !strcmp(k, "mha")) && (index == 0 || index == 2)) {
        shape[1] = l->in.w, shape[0] = n / l->in.w;
        return 2;
    }
    if (!strcmp(k, "embedding")) { /* wte (vocab, d), wpe (context, d) */
        shape[1] = l->out.w, shape[0] = n / l->out.w;
        return 2;
    }
    shape[0] = n;
    return 1;
}

typedef struct manifest_ctx {
    const tb_config *cfg;
    const export_opts *eo;
    const tb_model *m;
    const export_data *d;
    tb_device_info dev;
} manifest_ctx;

static void write_param(FILE *f, const tb_model *m, const tb_layer *l, int i, const char *path,
                        int *first)
{
    const tb_param *p = &l->params[i];
    int64_t shape[4];
    int rank = param_shape(l, i, p, shape);
    char name[256];
    int dup = 0; /* mha's two weights, the embedding's wte and wpe */
    for (int j = 0; j < l->nparams; j++)
        dup += j != i && !strcmp(l->params[j].name, p->name);
    if (dup)
        snprintf(name, sizeof name, "%s.%s[%d]", path, p->name, i);
    else
        snprintf(name, sizeof name, "%s.%s", path, p->name);
    fprintf(f, "%s\n    {\"name\": ", *first ? "" : ",");
    *first = 0;
    tb_json_write_string(f, name);
    fprintf(f, ", \"layer\": \"%s\", \"shape\": [", l->vt->kind);
    for (int r = 0; r < rank; r++)
        fprintf(f, "%s%lld", r ? ", " : "", (long long)shape[r]);
    fprintf(f, "], \"offset\": %zu, \"numel\": %zu}", (size_t)(p->w - m->flat_w), p->n);
}

/* Every parameter of l and its children, in tb_layer_for_each_param order,
 * named by the path of layer names ("res2.seq.conv1.weight"). */
static void write_params(FILE *f, const tb_model *m, const tb_layer *l, const char *path,
                         int *first)
{
    for (int i = 0; i < l->nparams; i++)
        write_param(f, m, l, i, path, first);
    for (int i = 0; i < l->nchildren; i++) {
        const tb_layer *c = l->children[i];
        char sub[256];
        const char *nm = c->name[0] ? c->name : c->vt->kind;
        if (path[0])
            snprintf(sub, sizeof sub, "%s.%s", path, nm);
        else
            snprintf(sub, sizeof sub, "%s", nm);
        write_params(f, m, c, sub, first);
    }
}

static void write_input(FILE *f, const manifest_ctx *mc)
{
    const tb_model *m = mc->m;
    const export_data *d = mc->d;
    if (d->tokens)
        fprintf(f, "  \"input\": {\"file\": \"x.i32\", \"dtype\": \"int32\", \"shape\": [%d, %zu]},\n"
                   "  \"labels\": {\"file\": \"labels.i32\", \"dtype\": \"int32\", "
                   "\"shape\": [%d, %zu]},\n"
                   "  \"logits_shape\": [%d, %zu, %d],\n",
                d->n, d->in_numel, d->n, d->in_numel, d->n, d->in_numel, d->classes);
    else
        fprintf(f, "  \"input\": {\"file\": \"x.f32\", \"dtype\": \"float32\", "
                   "\"shape\": [%d, %d, %d, %d]},\n"
                   "  \"labels\": {\"file\": \"labels.i32\", \"dtype\": \"int32\", "
                   "\"shape\": [%d]},\n"
                   "  \"logits_shape\": [%d, %d],\n",
                d->n, m->in.c, m->in.h, m->in.w, d->n, d->n, d->classes);
}

static void write_optimizer(FILE *f, const manifest_ctx *mc)
{
    const tb_config *c = mc->cfg;
    fprintf(f, "  \"optimizer\": {\"kind\": \"%s\", \"lr\": %.9g, \"momentum\": %.9g, "
               "\"weight_decay\": %.9g, \"beta1\": %.9g, \"beta2\": %.9g, \"eps\": %.9g, "
               "\"steps\": 1},\n",
            tb_optimizer_names[c->optimizer], mc->d->lr, c->momentum, c->weight_decay, c->beta1,
            c->beta2, c->eps);
}

static int write_manifest(const void *arg, FILE *f)
{
    const manifest_ctx *mc = arg;
    const tb_config *c = mc->cfg;
    const export_data *d = mc->d;
    fprintf(f, "{\n  \"format\": \"tunebench-export 1\",\n  \"model\": \"%s\",\n",
            tb_model_names[c->model]);
    fprintf(f, "  \"device\": ");
    tb_json_write_string(f, mc->dev.name);
    fprintf(f, ",\n  \"backend\": \"%s\",\n  \"seed\": %lld,\n  \"batch\": %d,\n"
               "  \"classes\": %d,\n  \"conv_bias\": %s,\n  \"channels_last\": %s,\n"
               "  \"dropout\": %.9g,\n  \"gelu\": \"%s\",\n  \"math\": \"%s\",\n",
            mc->dev.backend, c->seed, d->n, d->classes,
            c->model != TB_MODEL_GPT2 && tb_config_conv_bias(c) ? "true" : "false",
            c->channels_last ? "true" : "false", c->dropout,
            mc->m->ctx.gelu_approx == TB_GELU_TANH ? "tanh" : "erf",
            mc->m->ctx.math == TB_MATH_TF32 ? "tf32" : "f32");
    if (c->model == TB_MODEL_RESNET50)
        fprintf(f, "  \"resnet_blocks\": %d,\n",
                mc->eo->resnet_blocks ? mc->eo->resnet_blocks : RESNET50_BLOCKS);
    if (c->model == TB_MODEL_GPT2) {
        tb_gpt2_dims g = gpt2_dims(c);
        fprintf(f, "  \"gpt2\": {\"layers\": %d, \"heads\": %d, \"dim\": %d, \"mlp\": %d, "
                   "\"context\": %d, \"vocab\": %d},\n",
                g.layers, g.heads, g.dim, g.mlp, g.context, g.vocab);
    }
    write_input(f, mc);
    write_optimizer(f, mc);
    fprintf(f, "  \"loss0\": %.9g,\n  \"loss1\": %.9g,\n  \"numel\": %zu,\n"
               "  \"files\": {\"params0\": \"params0.f32\", \"grads\": \"grads.f32\", "
               "\"params1\": \"params1.f32\", \"logits0\": \"logits0.f32\", "
               "\"logits1\": \"logits1.f32\"},\n  \"params\": [",
            d->loss0, d->loss1, d->numel);
    int first = 1;
    write_params(f, mc->m, mc->m->net, "", &first);
    fprintf(f, "\n  ]\n}\n");
    return TB_OK;
}

/* ---- files ---- */

static int write_file(const char *dir, const char *name, const void *buf, size_t bytes)
{
    char path[PATH_MAX];
    TB_TRY(tb_outdir_join(dir, name, path, sizeof path));
    return tb_atomic_write(path, buf, bytes);
}

static int write_export(const manifest_ctx *mc, const char *dir)
{
    const export_data *d = mc->d;
    size_t pb = d->numel * sizeof(float), lb = d->logits_numel * sizeof(float);
    size_t nin = (size_t)d->n * d->in_numel;
    TB_TRY(tb_mkdir_p(dir));
    TB_TRY(write_file(dir, "params0.f32", d->params0, pb));
    TB_TRY(write_file(dir, "grads.f32", d->grads, pb));
    TB_TRY(write_file(dir, "params1.f32", d->params1, pb));
    if (d->tokens)
        TB_TRY(write_file(dir, "x.i32", d->tokens, nin * sizeof(int32_t)));
    else
        TB_TRY(write_file(dir, "x.f32", d->x, nin * sizeof(float)));
    TB_TRY(write_file(dir, "labels.i32", d->labels,
                      (size_t)d->n * d->labels_per_sample * sizeof(int32_t)));
    TB_TRY(write_file(dir, "logits0.f32", d->logits0, lb));
    TB_TRY(write_file(dir, "logits1.f32", d->logits1, lb));
    char path[PATH_MAX];
    TB_TRY(tb_outdir_join(dir, "manifest.json", path, sizeof path));
    return tb_atomic_write_with(path, write_manifest, mc);
}

/* ---- the command ---- */

static int check_config(const tb_config *c, const export_opts *eo)
{
    if (!eo->out || !eo->out[0])
        return TB_FAIL(TB_ERR_INVALID, "--out=DIR is required");
    if (c->optimizer != TB_OPT_SGD && c->optimizer != TB_OPT_ADAMW)
        return TB_FAIL(TB_ERR_INVALID, "--optimizer=%s: only sgd and adamw are exported "
                       "(tools/torch_match.py runs torch.optim.SGD / AdamW)",
                       tb_optimizer_names[c->optimizer]);
    if (c->amp_dtype != TB_AMP_OFF)
        return TB_FAIL(TB_ERR_INVALID, "--amp: the export compares fp32 with fp32; leave it off");
    if (c->dropout != 0)
        return TB_FAIL(TB_ERR_INVALID, "--dropout=%g: PyTorch cannot draw tunebench's masks; "
                       "export with 0", c->dropout);
    if (eo->classes < 2)
        return TB_FAIL(TB_ERR_INVALID, "--classes=%d: must be >= 2", eo->classes);
    if (eo->resnet_blocks < 0 || eo->resnet_blocks > RESNET50_BLOCKS ||
        (eo->resnet_blocks && c->model != TB_MODEL_RESNET50))
        return TB_FAIL(TB_ERR_INVALID, "--resnet-blocks=%d: resnet50 only, 0..%d (0 = all)",
                       eo->resnet_blocks, RESNET50_BLOCKS);
    if (!little_endian())
        return TB_FAIL(TB_ERR_INVALID, "the export's raw files are little-endian; this host "
                       "is not");
    return TB_OK;
}

static int run(const tb_config *c, const export_opts *eo)
{
    TB_TRY(check_config(c, eo));
    tb_device_kind kind;
    int ordinal;
    TB_TRY(tb_device_parse(c->device, &kind, &ordinal));
    tb_backend *be;
    TB_TRY(tb_backend_open(kind, ordinal, c->threads, &be));
    tb_model *m = NULL;
    export_data d = {0};
    manifest_ctx mc = {.cfg = c, .eo = eo, .d = &d};
    int rc;
    TB_TRY_GOTO(rc, be->device_info(be, &mc.dev), out_close);
    TB_TRY_GOTO(rc, build_model(c, eo, be, &m), out_close);
    mc.m = m;
    TB_TRY_GOTO(rc, data_alloc(&d, m, c->batch_size), out_free);
    data_fill_batch(&d, (uint64_t)c->seed);
    TB_TRY_GOTO(rc, run_step(c, m, &d), out_free);
    char dir[PATH_MAX];
    tb_cli_path(eo->out, dir, sizeof dir);
    TB_TRY_GOTO(rc, write_export(&mc, dir), out_free);
    printf("%s on %s: %zu parameters in %d tensors, batch %d; loss %.6f, after one %s step "
           "%.6f\nwrote %s\n",
           tb_model_names[c->model], mc.dev.backend, m->numel, m->nparams, d.n, d.loss0,
           tb_optimizer_names[c->optimizer], d.loss1, dir);

out_free:
    data_free(&d);
    tb_model_destroy(m);
out_close:
    tb_backend_close(be);
    return rc;
}

/* tb_config's flags followed by this command's own. */
#define EXTRA_FLAGS 3
#define MAX_FLAGS 128

int main(int argc, char **argv)
{
    tb_config cfg;
    tb_config_defaults(&cfg);
    cfg.dropout = 0;
    cfg.batch_size = 4;
    cfg.dataset = TB_DATA_SYNTHETIC; /* no data is read; resnet50 and gpt2 refuse others */
    export_opts eo = {.out = "", .classes = 10};
    size_t ncfg;
    const tb_flag *cfg_flags = tb_config_flags(&cfg, &ncfg);
    static tb_flag flags[MAX_FLAGS];
    if (ncfg + EXTRA_FLAGS > MAX_FLAGS) {
        TB_FAIL(TB_ERR_INVALID, "export_model: %zu config flags do not fit", ncfg);
        return fail();
    }
    memcpy(flags, cfg_flags, ncfg * sizeof *flags);
    flags[ncfg] = (tb_flag){"out", TB_FLAG_STRING, &eo.out, "folder the export is written to",
                            NULL};
    flags[ncfg + 1] = (tb_flag){"classes", TB_FLAG_INT, &eo.classes,
                                "classes of an image model (gpt2: --vocab)", NULL,
                                TB_RANGE(0, 1 << 20)};
    flags[ncfg + 2] = (tb_flag){"resnet-blocks", TB_FLAG_INT, &eo.resnet_blocks,
                                "resnet50: only the first N bottlenecks (then the pool and "
                                "the head); 0 = all 16", NULL, TB_RANGE(0, 16)};
    int code = tb_cli_parse("bench:export_model", "", summary, flags, ncfg + EXTRA_FLAGS, 0,
                            &argc, argv);
    if (code >= 0)
        return code;
    if (tb_config_validate(&cfg) != TB_OK || run(&cfg, &eo) != TB_OK)
        return fail();
    return 0;
}
