/*
 * gelu.cu - GELU forward and backward on the GPU, fused and unfused: the
 * CUDA side of the "fused GELU" technique (torch.jit.script fusion).
 *
 * Variants (tb_gelu_variant, picked at run time by the launchers' argument):
 *   TB_GELU_FUSED    one kernel: read x (and dy), write y (dx). What a
 *                    fusing compiler makes of the formula.
 *   TB_GELU_UNFUSED  the baseline: one kernel per element-wise op, over
 *                    temporaries, as eager PyTorch runs
 *                    x * 0.5 * (1 + erf(x * M_SQRT1_2)): five launches
 *                    forward, ten backward (the steps of kernels/gelu_math.h).
 * Both compute the per-element math of kernels/gelu_math.h, which the CPU
 * tests check (lib/backend/cpu/gelu_test.c); on one device the two variants give
 * bitwise the same results.
 *
 * The tanh form (TB_GELU_TANH, GPT-2's; tb_cuda_gelu_tanh_*): the same two
 * variants, the unfused one as eager PyTorch runs nanoGPT's NewGELU,
 * 0.5 * x * (1.0 + torch.tanh(sqrt(2/pi) * (x + 0.044715 * torch.pow(x, 3.0)))):
 * eight launches forward, seventeen backward (three temporaries).
 *
 * Every kernel is one grid-stride loop over float4 when all its pointers are
 * 16-byte aligned (then the last n % 4 elements go to the first threads),
 * otherwise over floats. They are memory-bound: the figure of merit is
 * effective bandwidth, (bytes read + written once) / time, against a
 * device-to-device copy.
 *
 * Benchmark: bazel run //bench:gelu (CUDA events around each variant).
 * Build check (no GPU needed): bazel build //kernels:gelu_cuda; nvcc's
 * -Xptxas -v report must show no spills (tools/nvcc_wrap.sh enforces it).
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/gelu.h"
#include "kernels/gelu_math.h"
#include "kernels/map.cuh"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

/* ---- per-element ops, as functors so one kernel template serves all ---- */
typedef tb_fn1<tb_gelu_fwd_f> op_gelu_fwd;
typedef tb_fn2<tb_gelu_bwd_f> op_gelu_bwd;
typedef tb_fn1<tb_gelu_step_erf> op_erf;
typedef tb_fn1<tb_gelu_step_exp_neg> op_exp_neg;
typedef tb_fn2<tb_gelu_step_mul> op_mul;
typedef tb_fn2<tb_gelu_step_add> op_add;
typedef tb_fn1<tb_gelu_tanh_fwd_f> op_gelu_tanh_fwd;
typedef tb_fn2<tb_gelu_tanh_bwd_f> op_gelu_tanh_bwd;
typedef tb_fn1<tb_gelu_step_cube> op_cube;
typedef tb_fn1<tb_gelu_step_tanh> op_tanh;
typedef tb_fn1<tb_gelu_step_sech2> op_sech2;
struct op_scale {
    float k;
    __device__ float operator()(float a) const { return tb_gelu_step_scale(a, k); }
};
struct op_add_scalar {
    float k;
    __device__ float operator()(float a) const { return tb_gelu_step_add_scalar(a, k); }
};

/* Eager PyTorch's forward: t = x * M_SQRT1_2; t = erf(t); t = t + 1;
 * u = x * 0.5; y = u * t. Temporaries ping-pong; y is written last. */
static int gelu_fwd_unfused(const float *x, float *y, size_t n, float *t1, float *t2,
                            cudaStream_t s)
{
    TB_TRY(tb_launch_unary(x, t1, n, op_scale{TB_GELU_SQRT1_2}, s));
    TB_TRY(tb_launch_unary(t1, t2, n, op_erf{}, s));
    TB_TRY(tb_launch_unary(t2, t1, n, op_add_scalar{1.0f}, s));
    TB_TRY(tb_launch_unary(x, t2, n, op_scale{0.5f}, s));
    TB_TRY(tb_launch_binary(t2, t1, y, n, op_mul{}, s));
    return TB_OK;
}

/* One kernel per step of tb_gelu_grad_f, then dx = dy * gelu'(x): as many
 * launches as eager autograd makes for the decomposed forward, with its
 * intermediates recomputed since only x and dy come in. */
static int gelu_bwd_unfused(const float *x, const float *dy, float *dx, size_t n, float *t1,
                            float *t2, cudaStream_t s)
{
    TB_TRY(tb_launch_unary(x, t1, n, op_scale{TB_GELU_SQRT1_2}, s));     /* t1 = x / sqrt2     */
    TB_TRY(tb_launch_unary(t1, t2, n, op_erf{}, s));                     /* t2 = erf(t1)       */
    TB_TRY(tb_launch_unary(t2, t2, n, op_add_scalar{1.0f}, s));          /* t2 = t2 + 1        */
    TB_TRY(tb_launch_unary(t2, t2, n, op_scale{0.5f}, s));               /* t2 = Phi(x)        */
    TB_TRY(tb_launch_binary(t1, t1, t1, n, op_mul{}, s));                /* t1 = x^2 / 2       */
    TB_TRY(tb_launch_unary(t1, t1, n, op_exp_neg{}, s));                 /* t1 = exp(-x^2 / 2) */
    TB_TRY(tb_launch_binary(t1, x, t1, n, op_mul{}, s));                 /* t1 = t1 * x        */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{TB_GELU_INV_SQRT_2PI}, s)); /* t1 = x phi(x)     */
    TB_TRY(tb_launch_binary(t2, t1, t2, n, op_add{}, s));                /* t2 = gelu'(x)      */
    TB_TRY(tb_launch_binary(dy, t2, dx, n, op_mul{}, s));                /* dx = dy * gelu'(x) */
    return TB_OK;
}

/* The tanh form's forward, the steps of tb_gelu_tanh_fwd_f, one launch
 * each; y is written last (so y may equal x). */
static int gelu_tanh_fwd_unfused(const float *x, float *y, size_t n, float *t1, float *t2,
                                 cudaStream_t s)
{
    TB_TRY(tb_launch_unary(x, t1, n, op_cube{}, s));                   /* t1 = x^3 */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{TB_GELU_TANH_C}, s));   /* t1 = C x^3 */
    TB_TRY(tb_launch_binary(x, t1, t1, n, op_add{}, s));               /* t1 = x + t1 */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{TB_GELU_TANH_K}, s));   /* t1 = a */
    TB_TRY(tb_launch_unary(t1, t1, n, op_tanh{}, s));                  /* t1 = tanh(a) */
    TB_TRY(tb_launch_unary(t1, t1, n, op_add_scalar{1.0f}, s));        /* t1 = 1 + tanh(a) */
    TB_TRY(tb_launch_unary(x, t2, n, op_scale{0.5f}, s));              /* t2 = 0.5 x */
    TB_TRY(tb_launch_binary(t2, t1, y, n, op_mul{}, s));               /* y = t2 * t1 */
    return TB_OK;
}

/* The tanh form's backward, the steps of tb_gelu_tanh_grad_f, then
 * dx = dy * gelu_tanh'(x); the same order as lib/backend/cpu/gelu.c's. */
static int gelu_tanh_bwd_unfused(const float *x, const float *dy, float *dx, size_t n, float *t1,
                                 float *t2, float *t3, cudaStream_t s)
{
    TB_TRY(tb_launch_unary(x, t1, n, op_cube{}, s));                   /* t1 = x^3 */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{TB_GELU_TANH_C}, s));   /* t1 = C x^3 */
    TB_TRY(tb_launch_binary(x, t1, t1, n, op_add{}, s));               /* t1 = x + t1 */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{TB_GELU_TANH_K}, s));   /* t1 = a */
    TB_TRY(tb_launch_unary(t1, t2, n, op_tanh{}, s));                  /* t2 = tanh(a) */
    TB_TRY(tb_launch_unary(t2, t2, n, op_add_scalar{1.0f}, s));        /* t2 = 1 + tanh(a) */
    TB_TRY(tb_launch_unary(t2, t2, n, op_scale{0.5f}, s));             /* t2 = 0.5 (1 + tanh(a)) */
    TB_TRY(tb_launch_unary(t1, t1, n, op_sech2{}, s));                 /* t1 = sech^2(a) */
    TB_TRY(tb_launch_binary(t1, x, t1, n, op_mul{}, s));               /* t1 = t1 * x */
    TB_TRY(tb_launch_unary(t1, t1, n, op_scale{0.5f}, s));             /* t1 = 0.5 x sech^2(a) */
    TB_TRY(tb_launch_binary(x, x, t3, n, op_mul{}, s));                /* t3 = x^2 */
    TB_TRY(tb_launch_unary(t3, t3, n, op_scale{TB_GELU_TANH_3C}, s));  /* t3 = 3C x^2 */
    TB_TRY(tb_launch_unary(t3, t3, n, op_add_scalar{1.0f}, s));        /* t3 = t3 + 1 */
    TB_TRY(tb_launch_unary(t3, t3, n, op_scale{TB_GELU_TANH_K}, s));   /* t3 = da/dx */
    TB_TRY(tb_launch_binary(t1, t3, t1, n, op_mul{}, s));              /* t1 = t1 * t3 */
    TB_TRY(tb_launch_binary(t2, t1, t2, n, op_add{}, s));              /* t2 = gelu_tanh'(x) */
    TB_TRY(tb_launch_binary(dy, t2, dx, n, op_mul{}, s));              /* dx = dy * t2 */
    return TB_OK;
}

static int check_variant(const char *what, int variant, size_t n, int ptrs_ok, float *tmp1,
                         float *tmp2)
{
    if (variant != TB_GELU_FUSED && variant != TB_GELU_UNFUSED)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown GELU variant %d", what, variant);
    if (n > 0 && !ptrs_ok)
        return TB_FAIL(TB_ERR_INVALID, "%s: NULL pointer for %zu elements", what, n);
    if (n > 0 && variant == TB_GELU_UNFUSED && (!tmp1 || !tmp2))
        return TB_FAIL(TB_ERR_INVALID, "%s: the unfused variant needs two temporaries", what);
    return TB_OK;
}

extern "C" int tb_cuda_gelu_fwd(int variant, const float *x, float *y, size_t n, float *tmp1,
                                float *tmp2, void *stream)
{
    TB_TRY(check_variant("tb_cuda_gelu_fwd", variant, n, x && y, tmp1, tmp2));
    if (n == 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (variant == TB_GELU_FUSED)
        return tb_launch_unary(x, y, n, op_gelu_fwd{}, s);
    return gelu_fwd_unfused(x, y, n, tmp1, tmp2, s);
}

extern "C" int tb_cuda_gelu_bwd(int variant, const float *x, const float *dy, float *dx,
                                size_t n, float *tmp1, float *tmp2, void *stream)
{
    TB_TRY(check_variant("tb_cuda_gelu_bwd", variant, n, x && dy && dx, tmp1, tmp2));
    if (n == 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (variant == TB_GELU_FUSED)
        return tb_launch_binary(x, dy, dx, n, op_gelu_bwd{}, s);
    return gelu_bwd_unfused(x, dy, dx, n, tmp1, tmp2, s);
}

extern "C" int tb_cuda_gelu_tanh_fwd(int variant, const float *x, float *y, size_t n,
                                     float *tmp1, float *tmp2, void *stream)
{
    TB_TRY(check_variant("tb_cuda_gelu_tanh_fwd", variant, n, x && y, tmp1, tmp2));
    if (n == 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (variant == TB_GELU_FUSED)
        return tb_launch_unary(x, y, n, op_gelu_tanh_fwd{}, s);
    return gelu_tanh_fwd_unfused(x, y, n, tmp1, tmp2, s);
}

extern "C" int tb_cuda_gelu_tanh_bwd(int variant, const float *x, const float *dy, float *dx,
                                     size_t n, float *tmp1, float *tmp2, float *tmp3,
                                     void *stream)
{
    TB_TRY(check_variant("tb_cuda_gelu_tanh_bwd", variant, n, x && dy && dx, tmp1, tmp2));
    if (n > 0 && variant == TB_GELU_UNFUSED && !tmp3)
        return TB_FAIL(TB_ERR_INVALID, "tb_cuda_gelu_tanh_bwd: the unfused variant needs three "
                       "temporaries");
    if (n == 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (variant == TB_GELU_FUSED)
        return tb_launch_binary(x, dy, dx, n, op_gelu_tanh_bwd{}, s);
    return gelu_tanh_bwd_unfused(x, dy, dx, n, tmp1, tmp2, tmp3, s);
}
