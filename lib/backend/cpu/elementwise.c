/*
 * elementwise.c - the CPU backend's element-wise slots relu_fwd/bwd, add, axpby and
 * bias_add (kernels/elementwise_math.h), and the bf16 activations' relu and
 * add (relu_fwd_lowp, relu_bwd_lowp, add_lowp: the same results as the fp32
 * ops on values widened from bf16, rounded back to nearest even as
 * kernels/cast_math.h rounds; ReLU's results are inputs, so only the add
 * rounds). Shared setup: ops_common.h.
 */
#include <stddef.h>
#include <stdint.h>

#include "kernels/cast_math.h"
#include "kernels/elementwise_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/bf16_rows.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

/* ---------------------------------------------------------------- element-wise */

static int cpu_relu_fwd(tb_backend *be, const float *x, float *y, size_t n)
{
    PAR_MAP(threads_of(be), n, y, tb_relu_f(x[i]));
    return TB_OK;
}

static int cpu_relu_bwd(tb_backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    PAR_MAP(threads_of(be), n, dx, tb_relu_bwd_f(y[i], dy[i]));
    return TB_OK;
}

static int cpu_add(tb_backend *be, const float *a, const float *b, float *y, size_t n)
{
    PAR_MAP(threads_of(be), n, y, tb_add_f(a[i], b[i]));
    return TB_OK;
}

/* ---------------------------------------------------- bf16 activations */

static int bf16_only(tb_dtype dtype, const char *op)
{
    if (dtype == TB_BF16)
        return TB_OK;
    return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: the CPU backend's low-precision activations are "
                   "bf16 (dtype %d asked)", op, (int)dtype);
}

/* On the bits, branch-free (the loops vectorize): a bf16 is below zero
 * when its sign is set and it is neither a zero nor a NaN; above zero when
 * its sign is clear and it is neither. ReLU's results are its inputs (or
 * +0), so they need no rounding; tb_relu_f's -0 and NaN stay as they are. */
static inline int bf16_below0(uint16_t h)
{
    uint16_t m = h & 0x7fffu;
    return (h & 0x8000u) && m != 0 && m <= 0x7f80u;
}

static inline int bf16_above0(uint16_t h)
{
    uint16_t m = h & 0x7fffu;
    return !(h & 0x8000u) && m != 0 && m <= 0x7f80u;
}

/* The loops over a thread's range, compiled for x86-64-v4 (AVX-512), v3
 * and the baseline: SSE2 has no unsigned 16-bit compares, and GCC left the
 * baseline's bf16 add and ReLU backward scalar, 4x slower than fp32's. */
#ifdef __SANITIZE_THREAD__
#define EW_CLONES
#else
#define EW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

EW_CLONES static void relu_fwd_rows(const uint16_t *x, uint16_t *y, size_t lo, size_t hi)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++)
        y[i] = bf16_below0(x[i]) ? 0 : x[i];
}

EW_CLONES static void relu_bwd_rows(const uint16_t *y, const uint16_t *dy, uint16_t *dx,
                                    size_t lo, size_t hi)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++)
        dx[i] = bf16_above0(y[i]) ? dy[i] : 0;
}

/* The sums go through an L1 stage that tb_cpu_bf16_round_row rounds out
 * (AVX512_BF16's conversion where the CPU has it: bf16_rows.h; rounding
 * in integer code made the add slower than fp32's). */
EW_CLONES static void add_rows(const uint16_t *a, const uint16_t *b, uint16_t *y, size_t lo,
                               size_t hi)
{
    float stage[BF16_STAGE];
    for (size_t at = lo; at < hi; at += BF16_STAGE) {
        size_t m = hi - at < BF16_STAGE ? hi - at : BF16_STAGE;
#pragma omp simd
        for (size_t j = 0; j < m; j++)
            stage[j] = tb_cast_bits_f32((uint32_t)a[at + j] << 16) +
                       tb_cast_bits_f32((uint32_t)b[at + j] << 16);
        tb_cpu_bf16_round_row(y + at, stage, m);
    }
}

/* Runs call in each thread with lo, hi its static share of [0, n). */
#define PAR_ROWS(t, n, call)                                                                   \
    do {                                                                                       \
        const size_t len_ = (n);                                                               \
        _Pragma("omp parallel num_threads(t) if (len_ >= PAR_MIN)")                            \
        {                                                                                      \
            size_t lo, hi;                                                                     \
            thread_range(len_, &lo, &hi);                                                      \
            call;                                                                              \
        }                                                                                      \
    } while (0)

static int cpu_relu_fwd_lowp(tb_backend *be, tb_dtype dtype, const void *x, void *y, size_t n)
{
    TB_TRY(bf16_only(dtype, "relu_fwd_lowp"));
    int t = threads_of(be);
    PAR_ROWS(t, n, relu_fwd_rows(x, y, lo, hi));
    return TB_OK;
}

static int cpu_relu_bwd_lowp(tb_backend *be, tb_dtype dtype, const void *y, const void *dy,
                             void *dx, size_t n)
{
    TB_TRY(bf16_only(dtype, "relu_bwd_lowp"));
    int t = threads_of(be);
    PAR_ROWS(t, n, relu_bwd_rows(y, dy, dx, lo, hi));
    return TB_OK;
}

static int cpu_add_lowp(tb_backend *be, tb_dtype dtype, const void *a, const void *b, void *y,
                        size_t n)
{
    TB_TRY(bf16_only(dtype, "add_lowp"));
    int t = threads_of(be);
    PAR_ROWS(t, n, add_rows(a, b, y, lo, hi));
    return TB_OK;
}

static int cpu_axpby(tb_backend *be, float alpha, const float *x, float beta, float *y, size_t n)
{
    int t = threads_of(be);
    if (beta == 0.0f) /* y may hold garbage (NaN): never read it */
        PAR_MAP(t, n, y, alpha * x[i]);
    else
        PAR_MAP(t, n, y, tb_axpby_f(alpha, x[i], beta, y[i]));
    return TB_OK;
}

static int cpu_bias_add(tb_backend *be, float *y, const float *bias, int rows, int cols)
{
    int t = threads_of(be);
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_add: rows %d, cols %d", rows, cols);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            yr[c] += bias[c];
    }
    return TB_OK;
}

void tb_cpu_install_elementwise(tb_backend *be)
{
    be->relu_fwd = cpu_relu_fwd;
    be->relu_bwd = cpu_relu_bwd;
    be->add = cpu_add;
    be->relu_fwd_lowp = cpu_relu_fwd_lowp;
    be->relu_bwd_lowp = cpu_relu_bwd_lowp;
    be->add_lowp = cpu_add_lowp;
    be->axpby = cpu_axpby;
    be->bias_add = cpu_bias_add;
}
