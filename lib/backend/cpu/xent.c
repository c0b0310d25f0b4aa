/*
 * xent.c - the CPU backend's cross-entropy losses: softmax_xent_fwd/bwd
 * (kernels/elementwise_math.h) and the lse form, xent_lse_fwd/bwd
 * (kernels/xent_math.h), which keeps one float per row between forward
 * and backward instead of a rows x classes softmax (GPT-2: 50,257 classes).
 *
 * xent_lse: OpenMP over rows (each row on one thread). Forward, per row: a
 * max pass, then a pass summing exp(z - max) in the fixed split of
 * kernels/xent_math.h (16 float lanes per 1024-element block, blocks in
 * double); lse = max + log(sum) and loss = lse - z[label] in double. Two
 * passes rather than one with online rescaling: the rescaled pass needs
 * two exps per element, and a 50,257-float row (200 KB) is still in L2 for
 * the second read. Backward: one pass, tb_xent_lse_grad_f per element, so
 * dlogits == logits (in place) works: each element is read before it is
 * written and nothing else reads it.
 * The exp is tb_exp_neg_f, whose fmaf needs FMA hardware to vectorize: the
 * row loops are compiled three times (baseline, AVX2+FMA, AVX-512) and the
 * best this CPU runs is picked at first use (tb_cpu_xent_lse_set_path lets
 * a test force one). All three give the same bits (same operations, same
 * split; -ffp-contract=off).
 *
 * Test: bazel test //lib/backend/cpu:cpu_ops_test
 */
#include <math.h>
#include <stdint.h>

#include "kernels/elementwise_math.h"
#include "kernels/xent_math.h"
#include "lib/backend/cpu/cpu.h"
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

/* ---- the lse form: one row's loops, compiled per ISA ---- */

/* max over z[0..k): lanes, then the lanes in order (max is exact, so any
 * order gives the same value; NaN is skipped here and caught by the sum). */
#define TB_XENT_ROW_MAX_BODY                                                   \
    float m[TB_XENT_LANES];                                                    \
    for (int l = 0; l < TB_XENT_LANES; l++)                                    \
        m[l] = -INFINITY;                                                      \
    int j = 0;                                                                 \
    for (; j + TB_XENT_LANES <= k; j += TB_XENT_LANES) {                       \
        _Pragma("omp simd")                                                    \
        for (int l = 0; l < TB_XENT_LANES; l++)                                \
            m[l] = z[j + l] > m[l] ? z[j + l] : m[l];                          \
    }                                                                          \
    for (int l = 0; j + l < k; l++)                                            \
        m[l] = z[j + l] > m[l] ? z[j + l] : m[l];                              \
    float mx = m[0];                                                           \
    for (int l = 1; l < TB_XENT_LANES; l++)                                    \
        mx = m[l] > mx ? m[l] : mx;

/* sum of exp(z - mx) in kernels/xent_math.h's split */
#define TB_XENT_ROW_SUM_BODY                                                   \
    double total = 0.0;                                                        \
    for (int b = 0; b < k; b += TB_XENT_BLOCK) {                               \
        int e = k - b < TB_XENT_BLOCK ? k : b + TB_XENT_BLOCK;                 \
        float acc[TB_XENT_LANES] = {0};                                        \
        int i = b;                                                             \
        for (; i + TB_XENT_LANES <= e; i += TB_XENT_LANES) {                   \
            _Pragma("omp simd")                                                \
            for (int l = 0; l < TB_XENT_LANES; l++)                            \
                acc[l] += tb_xent_lse_term_f(z[i + l], mx);                    \
        }                                                                      \
        for (int l = 0; i + l < e; l++)                                        \
            acc[l] += tb_xent_lse_term_f(z[i + l], mx);                        \
        for (int l = 0; l < TB_XENT_LANES; l++)                                \
            total += acc[l];                                                   \
    }

#define TB_DEFINE_XENT_LSE_ROWS(isa, attr)                                               \
    attr static void lse_fwd_row_##isa(const float *z, int k, int label, float *loss,    \
                                       float *lse)                                       \
    {                                                                                    \
        TB_XENT_ROW_MAX_BODY                                                             \
        TB_XENT_ROW_SUM_BODY                                                             \
        double l = (double)mx + log(total);                                              \
        *lse = (float)l;                                                                 \
        *loss = (float)(l - (double)z[label]);                                           \
    }                                                                                    \
    attr static void lse_bwd_row_##isa(const float *z, float lse, int k, int label,      \
                                       float scale, float *d)                            \
    {                                                                                    \
        _Pragma("omp simd")                                                              \
        for (int j = 0; j < k; j++)                                                      \
            d[j] = tb_xent_lse_grad_f(z[j], lse, j == label, scale);                     \
    }

TB_DEFINE_XENT_LSE_ROWS(generic, )
TB_DEFINE_XENT_LSE_ROWS(avx2, __attribute__((target("avx2,fma"))))
TB_DEFINE_XENT_LSE_ROWS(avx512, __attribute__((target("avx512f"))))

typedef struct lse_rows {
    void (*fwd)(const float *z, int k, int label, float *loss, float *lse);
    void (*bwd)(const float *z, float lse, int k, int label, float scale, float *d);
} lse_rows;

static const lse_rows lse_paths[] = {
    [TB_CPU_PATH_GENERIC] = {lse_fwd_row_generic, lse_bwd_row_generic},
    [TB_CPU_PATH_AVX2] = {lse_fwd_row_avx2, lse_bwd_row_avx2},
    [TB_CPU_PATH_AVX512] = {lse_fwd_row_avx512, lse_bwd_row_avx512},
};

static int lse_path = TB_CPU_PATH_AUTO; /* resolved on first use */

static int path_supported(int path)
{
    __builtin_cpu_init();
    switch (path) {
    case TB_CPU_PATH_GENERIC: return 1;
    case TB_CPU_PATH_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TB_CPU_PATH_AVX512: return __builtin_cpu_supports("avx512f");
    default: return 0;
    }
}

static const lse_rows *lse_rows_in_use(void)
{
    /* atomic: DataParallel's replicas may make their first call at once */
    int path = __atomic_load_n(&lse_path, __ATOMIC_RELAXED);
    if (path == TB_CPU_PATH_AUTO) {
        path = tb_cpu_path_best(TB_CPU_PATHS_ALL, path_supported);
        __atomic_store_n(&lse_path, path, __ATOMIC_RELAXED);
    }
    return &lse_paths[path];
}

int tb_cpu_xent_lse_set_path(int path)
{
    TB_TRY(tb_cpu_path_force(&lse_path, path, TB_CPU_PATHS_ALL, path_supported, "xent_lse"));
    lse_rows_in_use(); /* AUTO: the best again */
    return TB_OK;
}

int tb_cpu_xent_lse_path(void)
{
    lse_rows_in_use();
    return lse_path;
}

static int cpu_xent_lse_fwd(tb_backend *be, const float *logits, const int32_t *labels, int rows,
                            int classes, float *loss, float *lse)
{
    TB_TRY(xent_check(labels, rows, classes));
    const lse_rows *p = lse_rows_in_use();
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) \
    if ((size_t)rows * classes >= PAR_MIN / 8 && rows > 1)
    for (int r = 0; r < rows; r++)
        p->fwd(logits + (size_t)r * classes, classes, labels[r], loss + r, lse + r);
    return TB_OK;
}

static int cpu_xent_lse_bwd(tb_backend *be, const float *logits, const float *lse,
                            const int32_t *labels, int rows, int classes, float scale,
                            float *dlogits)
{
    TB_TRY(xent_check(labels, rows, classes));
    const lse_rows *p = lse_rows_in_use();
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) \
    if ((size_t)rows * classes >= PAR_MIN && rows > 1)
    for (int r = 0; r < rows; r++)
        p->bwd(logits + (size_t)r * classes, lse[r], classes, labels[r], scale,
               dlogits + (size_t)r * classes);
    return TB_OK;
}

void tb_cpu_install_xent(tb_backend *be)
{
    be->softmax_xent_fwd = cpu_softmax_xent_fwd;
    be->softmax_xent_bwd = cpu_softmax_xent_bwd;
    be->xent_lse_fwd = cpu_xent_lse_fwd;
    be->xent_lse_bwd = cpu_xent_lse_bwd;
}
