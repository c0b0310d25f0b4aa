/*
 * flops.h - a model's FLOPs per sample, counted once: the sum over its layer
 * tree of each layer family's vtbl->flops, plus the loss, kept per op family
 * (lib/nn/layers.h's tb_flop_family, where the counting rules are), forward
 * and backward apart. Throughput times tb_flops_total is the model's FLOP
 * rate; divided by a measured ceiling it is the MFU.
 *
 *   tb_flops f;
 *   tb_model_flops(m, &f);
 *   char line[TB_FLOPS_LINE];
 *   tb_flops_format(&f, line, sizeof line);
 *       -> "24.6 GFLOP/sample fwd+bwd (conv 97.1%, gemm 0.2%, attention 0.0%,
 *           norm 1.2%, elementwise 1.5%)"
 *   double mfu = tb_flops_total(&f) * samples_per_s / ceiling_flop_per_s;
 *
 * These are model FLOPs (what the math needs), not what a kernel happens to
 * run: a mean computed as a GEMM with a constant matrix counts as a mean,
 * a causal attention counts its whole T x T matrix, a fused and an unfused
 * variant count the same.
 *
 * Tests: bazel test //lib/nn:flops_test
 */
#ifndef TB_FLOPS_H
#define TB_FLOPS_H

#include <stddef.h>

#include "lib/nn/layers.h"
#include "lib/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enough room for tb_flops_format's line. */
#define TB_FLOPS_LINE 160

/* *per_sample = the FLOPs of one training step of m on ONE sample: every
 * layer's forward and backward (the layer tree walked by tb_flops_layer)
 * and the softmax cross-entropy over m->labels_per_sample rows of
 * m->classes logits (a model built before the token models leaves
 * labels_per_sample 0: one row). Overwrites *per_sample. */
void tb_model_flops(const tb_model *m, tb_flops *per_sample);

/* Adds the FLOPs of l and of everything below it for one sample to *f: each
 * layer's vt->flops (a container's counts its own work, e.g. a residual
 * add; a NULL flops counts zero), then its children's, recursively. */
void tb_flops_layer(const tb_layer *l, tb_flops *f);

/* Forward plus backward of one family. REQUIRES: 0 <= k < TB_FLOP_FAMILIES */
double tb_flops_family(const tb_flops *f, tb_flop_family k);
/* Forward plus backward, all families. */
double tb_flops_total(const tb_flops *f);
/* tb_flops_family / tb_flops_total, in [0, 1]; 0 when the total is 0. The
 * shares of the TB_FLOP_FAMILIES families sum to 1 (or all are 0). */
double tb_flops_share(const tb_flops *f, tb_flop_family k);
/* "conv", "gemm", "attention", "norm", "elementwise"; "?" outside the enum. */
const char *tb_flops_family_name(tb_flop_family k);

/* One line for logs, e.g. "24.6 GFLOP/sample fwd+bwd (conv 97.1%, gemm 0.2%,
 * attention 0.0%, norm 1.2%, elementwise 1.5%)": the total with an SI prefix
 * (k, M, G, T, P: the value printed is in [1, 1000)), then each family's
 * share in enum order. Errors: TB_ERR_INVALID when cap < TB_FLOPS_LINE
 * (buf then holds as much as fits). */
int tb_flops_format(const tb_flops *f, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
