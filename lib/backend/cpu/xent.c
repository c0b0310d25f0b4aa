/*
 * xent.c - the CPU backend's softmax cross-entropy loss: softmax_xent_fwd/bwd
 * (kernels/elementwise_math.h).
 */
#include <math.h>
#include <stdint.h>

#include "kernels/elementwise_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

static int xent_check(const int32_t *labels, int rows, int classes)
{
    TB_TRY(tb_check_xent(rows, classes));
    for (int r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= classes)
            return TB_FAIL(TB_ERR_INVALID, "softmax cross-entropy: label %d of row %d is not in "
                           "[0, %d)", labels[r], r, classes);
    return TB_OK;
}

/* One row; subtracts the max so exp never overflows; the loss is
 * log(sum) - (z[label] - max), which stays accurate where probs[label]
 * underflows. */
static void xent_row(const float *z, int label, int k, float *p, float *loss)
{
    float mx = z[0];
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    double s = 0.0;
    for (int j = 0; j < k; j++) {
        p[j] = expf(z[j] - mx);
        s += p[j];
    }
    for (int j = 0; j < k; j++)
        p[j] = (float)(p[j] / s);
    *loss = (float)(log(s) - ((double)z[label] - mx));
}

static int cpu_softmax_xent_fwd(tb_backend *be, const float *logits, const int32_t *labels,
                                int rows, int classes, float *probs, float *loss)
{
    TB_TRY(xent_check(labels, rows, classes));
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) \
    if ((size_t)rows * classes >= PAR_MIN / 8)
    for (int r = 0; r < rows; r++)
        xent_row(logits + (size_t)r * classes, labels[r], classes, probs + (size_t)r * classes,
                 loss + r);
    return TB_OK;
}

static int cpu_softmax_xent_bwd(tb_backend *be, const float *probs, const int32_t *labels, int rows,
                                int classes, float scale, float *dlogits)
{
    TB_TRY(xent_check(labels, rows, classes));
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * classes >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *pr = probs + (size_t)r * classes;
        float *dr = dlogits + (size_t)r * classes;
        int label = labels[r];
#pragma omp simd
        for (int j = 0; j < classes; j++)
            dr[j] = tb_xent_grad_f(pr[j], j == label, scale);
    }
    return TB_OK;
}

void tb_cpu_install_xent(tb_backend *be)
{
    be->softmax_xent_fwd = cpu_softmax_xent_fwd;
    be->softmax_xent_bwd = cpu_softmax_xent_bwd;
}
