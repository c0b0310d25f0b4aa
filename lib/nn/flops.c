/*
 * flops.c - a model's FLOPs per sample by op family: the walk over the layer
 * tree, the loss, and the totals, shares and log line of flops.h.
 *
 * Tests: bazel test //lib/nn:flops_test
 */
#include "lib/nn/flops.h"

#include <stdio.h>
#include <string.h>

#include "lib/core/status.h"

/* Softmax cross-entropy over rows of `classes` logits, per logit: forward
 * max, subtract, exp, sum, divide (5); backward scale * (p - onehot), one
 * multiply (the onehot subtracts once per row, not counted). The variant
 * that keeps only the logsumexp moves the exp to the backward: the math is
 * the same softmax, so it counts the same. */
#define XENT_FWD_PER_LOGIT 5.0
#define XENT_BWD_PER_LOGIT 1.0

static void xent_flops(int classes, int rows, tb_flops *f)
{
    double logits = (double)classes * rows;
    f->fwd[TB_FLOPS_ELEMENTWISE] += XENT_FWD_PER_LOGIT * logits;
    f->bwd[TB_FLOPS_ELEMENTWISE] += XENT_BWD_PER_LOGIT * logits;
}

void tb_flops_layer(const tb_layer *l, tb_flops *f)
{
    if (l->vt->flops)
        l->vt->flops(l, f);
    for (int i = 0; i < l->nchildren; i++)
        tb_flops_layer(l->children[i], f);
}

void tb_model_flops(const tb_model *m, tb_flops *per_sample)
{
    memset(per_sample, 0, sizeof *per_sample);
    tb_flops_layer(m->net, per_sample);
    xent_flops(m->classes, m->labels_per_sample > 0 ? m->labels_per_sample : 1, per_sample);
}

double tb_flops_family(const tb_flops *f, tb_flop_family k)
{
    return f->fwd[k] + f->bwd[k];
}

double tb_flops_total(const tb_flops *f)
{
    double s = 0;
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        s += tb_flops_family(f, (tb_flop_family)k);
    return s;
}

double tb_flops_share(const tb_flops *f, tb_flop_family k)
{
    double total = tb_flops_total(f);
    return total > 0 ? tb_flops_family(f, k) / total : 0.0;
}

const char *tb_flops_family_name(tb_flop_family k)
{
    static const char *const names[TB_FLOP_FAMILIES] = {
        [TB_FLOPS_CONV] = "conv",           [TB_FLOPS_GEMM] = "gemm",
        [TB_FLOPS_ATTENTION] = "attention", [TB_FLOPS_NORM] = "norm",
        [TB_FLOPS_ELEMENTWISE] = "elementwise",
    };
    return (int)k >= 0 && k < TB_FLOP_FAMILIES ? names[k] : "?";
}

int tb_flops_format(const tb_flops *f, char *buf, size_t cap)
{
    static const char *const prefixes[] = {"", "k", "M", "G", "T", "P"};
    double v = tb_flops_total(f);
    int p = 0;
    /* the prefix that puts the printed value (rounded to 0.1) in [1, 1000) */
    while (p + 1 < (int)(sizeof prefixes / sizeof prefixes[0]) && v >= 999.95) {
        v /= 1000.0;
        p++;
    }
    size_t at = (size_t)snprintf(buf, cap, "%.1f %sFLOP/sample fwd+bwd (", v, prefixes[p]);
    for (int k = 0; k < TB_FLOP_FAMILIES && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s %.1f%%", k ? ", " : "",
                               tb_flops_family_name((tb_flop_family)k),
                               100.0 * tb_flops_share(f, (tb_flop_family)k));
    if (at < cap)
        at += (size_t)snprintf(buf + at, cap - at, ")");
    if (cap < TB_FLOPS_LINE || at >= cap)
        return TB_FAIL(TB_ERR_INVALID, "tb_flops_format: a buffer of %zu bytes, %d needed", cap,
                       TB_FLOPS_LINE);
    return TB_OK;
}
