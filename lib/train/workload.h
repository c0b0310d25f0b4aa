/*
 * workload.h - the workloads a step technique is measured on, and their
 * sizes per profile (issue 15): the small CNN on Fashion-MNIST (loader
 * techniques, time to accuracy), ResNet-50 v1.5 and GPT-2 small, the last
 * two on synthetic data, labeled so in their name.
 *
 * Sizes. full: the real models (ResNet-50 at 224 x 224, batch 32; GPT-2 at
 * context 1024, 12 layers, d 768, the 50,257-token vocabulary, batch 4, the
 * batches of tb_config_model_batch). reduced (the default profile on the
 * CPU): the same architectures, narrower and smaller, so that a training
 * step lasts tens of milliseconds to a few tenths of a second on a 2-core
 * CPU, with each op family's share of the FLOPs kept near the full model's
 * (tb_workload_share_gap, checked by workload_test within
 * TB_WORKLOAD_SHARE_TOL):
 *   - ResNet-50: every layer kept (3-4-6-3 bottlenecks, strides, 1000-class
 *     head), width 24 instead of 64 (channels 3/8, conv FLOPs 1/7) on
 *     64 x 64 images, batch 4: conv 96.2% of the FLOPs against 99.0% at
 *     full size. The norms' share goes as 1 / width and the 1000-class
 *     head's as 1 / (width x pixels): width 16 put 94.5% in the convs,
 *     outside the tolerance. Batch 4, not 2: stage 4 is 2 x 2 there, and
 *     batch norms over 8 values per channel turned rounding differences
 *     into loss differences past the step techniques' tolerances (tiny:
 *     width 8 at 32 x 32, batch 2 differed 12% after 5 steps between NCHW
 *     and channels-last; at 64 x 64, batch 4, 3.6%).
 *   - GPT-2: 2 blocks, d 192 (3 heads of 64), context 256, vocabulary 2,048.
 *     Attention's share of a block goes as T / 6d and the head's as
 *     V / 12 L d, so T / d and V / (L d) stay GPT-2 small's (1024 / 768 and
 *     50,257 / (12 x 768) are 1.33 and 5.45; here 1.33 and 5.33). A 2-layer
 *     model at context 256 with the full vocabulary would put about 73% of
 *     its GEMM FLOPs in the head (31% in GPT-2 small) and 1.5% in attention
 *     (13%). Counted: gemm 85.7%, attention 13.2% (full: 86.4%, 13.2%).
 *   The small CNN has one size (the profile's batch, bench/harness).
 *
 * Use:
 *   tb_config c;  tb_config_defaults(&c);
 *   tb_workload_apply(&c, TB_WL_GPT2, TB_WL_REDUCED);  tb_config_validate(&c);
 *   tb_flops f;  tb_workload_flops(&c, be, &f);
 *
 * Tests: bazel test //lib/train:workload_test
 */
#ifndef TB_WORKLOAD_H
#define TB_WORKLOAD_H

#include <stddef.h>

#include "lib/backend/backend.h"
#include "lib/nn/flops.h"
#include "lib/train/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_workload {
    TB_WL_SMALL_CNN = 0,      /* the small CNN on Fashion-MNIST */
    TB_WL_RESNET50 = 1,       /* ResNet-50 v1.5 on synthetic images */
    TB_WL_GPT2 = 2,           /* GPT-2 small on synthetic tokens */
    TB_WORKLOADS = 3,
} tb_workload;

/* A set of workloads, e.g. TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2). */
#define TB_WL_BIT(w) (1u << (w))

typedef enum tb_workload_size {
    TB_WL_REDUCED = 0,        /* the CPU's default: see the top of this file */
    TB_WL_FULL = 1,           /* the real sizes */
    TB_WL_TINY = 2,           /* tests: shapes, not timings (resnet50 width 8 at
                                 64x64, batch 4; gpt2 1 layer, d 64, context 32,
                                 vocab 256, batch 2) */
    TB_WL_GPU = 3,            /* the gpu profile (bench/harness/technique.h): the
                                 real models at batches whose trainers (one per
                                 arm) live together on an 80 GB GPU,
                                 TB_WL_GPU_BATCH_*; labeled "full" (the
                                 models are); the step harness halves the
                                 batch where memory is short */
} tb_workload_size;

/* The gpu profile's batches: 64 images of 224 x 224, 4 sequences of 1024
 * tokens (4,096 tokens a step). Interleaved rounds keep one trainer per arm
 * alive (2-4 of them); at batches 256 and 16 one ResNet-50 trainer peaked at
 * 78 GB and one GPT-2 trainer at 40 GB on an H100 (first GPU run,
 * 2026-11-24), so each round rebuilt every arm and the profile would have
 * taken over an hour. */
#define TB_WL_GPU_BATCH_RESNET50 64
#define TB_WL_GPU_BATCH_GPT2 4

/* Largest difference, absolute, between a reduced workload's share of the
 * FLOPs of any op family and the full model's (0.03: 3 points). */
#define TB_WORKLOAD_SHARE_TOL 0.03

/* Sets what makes c workload w at size s: model, dataset (synthetic for
 * resnet50 and gpt2), their size flags and batch. The small CNN is left
 * as c has it (the harness sets its profile's batch), size ignored. Call
 * before tb_config_validate. */
void tb_workload_apply(tb_config *c, tb_workload w, tb_workload_size s);

/* "small_cnn", "resnet50", "gpt2"; "?" outside the enum. */
const char *tb_workload_model_name(tb_workload w);

/* The CSV's workload column: "small_cnn-fashion_mnist",
 * "resnet50-reduced-synthetic", "gpt2-full-synthetic", "gpt2-tiny-synthetic" (the data named,
 * so synthetic rows say so). buf gets at most cap - 1 characters. */
void tb_workload_label(tb_workload w, tb_workload_size s, char *buf, size_t cap);

/* One line of c's model configuration, e.g. "resnet50 width 16, 64x64,
 * batch 4" or "gpt2 2 layers, d 192, context 256, vocab 2048, batch 1".
 * REQUIRES: c validated. */
void tb_workload_describe(const tb_config *c, char *buf, size_t cap);

/* *per_sample = the FLOPs of one training sample of c's model
 * (tb_model_flops), from a model built on be at batch 1 and destroyed.
 * REQUIRES: c validated. Errors: those of building the model. */
int tb_workload_flops(const tb_config *c, tb_backend *be, tb_flops *per_sample);

/* The largest |share(a, k) - share(b, k)| over the op families. */
double tb_workload_share_gap(const tb_flops *a, const tb_flops *b);

/* The full model's FLOP share of family k for workload w (resnet50, gpt2),
 * as tb_workload_flops counts it at TB_WL_FULL (workload_test checks these
 * against a count of the built full models, to 1e-3); 0 for the small CNN.
 * Kept so that a row can show the full model's shares without building a
 * 124M-parameter model in every run. */
double tb_workload_full_share(tb_workload w, tb_flop_family k);

#ifdef __cplusplus
}
#endif
#endif
