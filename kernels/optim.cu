/*
 * optim.cu - optimizer steps on the GPU, per tensor and fused: the CUDA side
 * of the "fused optimizer" technique (Adam(fused=True), apex's
 * multi-tensor apply).
 *
 * Variants (chosen by the caller, lib/backend/cuda/optim.c, from opt_step's fused
 * flag):
 *   per tensor  the baseline: one element-wise kernel per PyTorch in-place
 *               op, per tensor (opt_pass_kernel, tb_opt_pass picks the op):
 *               SGD with momentum 3-5 launches a tensor, AdamW 9-10, each
 *               a full pass over memory, as torch.optim's for-loop runs.
 *   fused       ONE launch for all tensors (opt_fused_kernel): block b
 *               updates chunk b of a device table of {param, grad, state1,
 *               state2, n} chunks, every element read and written once.
 * Both use the per-element math of kernels/optim_math.h, shared with the CPU
 * backend (lib/backend/cpu/optim.c) whose tests check it; they agree within float
 * rounding (nvcc may contract a multiply and an add into an FMA).
 *
 * Large-batch optimizers (LARS, LAMB, NovoGrad) need a norm per tensor
 * before any element moves: lb_partial_kernel, lb_scalar_kernel and
 * lb_apply_kernel (kernels/optim.h says how they split the work), used per
 * tensor or once over all tensors (fused).
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/launch.cuh"
#include "kernels/optim.h"
#include "kernels/optim_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

/* No __restrict__: dst aliases a in the in-place passes. */
__global__ void opt_pass_kernel(tb_opt_pass pass, float *dst, const float *a, const float *b,
                                float k, size_t n)
{
    TB_GRID_STRIDE(i, n)
    {
        float r;
        switch (pass) {
        case TB_PASS_MUL: r = tb_opt_step_mul(a[i], k); break;
        case TB_PASS_ADD: r = tb_opt_step_add(a[i], b[i], k); break;
        case TB_PASS_COPY: r = a[i]; break;
        case TB_PASS_ADDCMUL: r = tb_opt_step_addcmul(dst[i], a[i], b[i], k); break;
        case TB_PASS_SQRT: r = tb_opt_step_sqrt(a[i]); break;
        case TB_PASS_DIV: r = tb_opt_step_div(dst[i], k); break;
        case TB_PASS_ADD_SCALAR: r = tb_opt_step_add_scalar(dst[i], k); break;
        default: r = tb_opt_step_addcdiv(dst[i], a[i], b[i], k); break;
        }
        dst[i] = r;
    }
}

__global__ void opt_fused_kernel(tb_opt_fused_kind kind, tb_sgd_coef sgd, tb_adamw_coef adamw,
                                 const tb_opt_chunk *chunks)
{
    tb_opt_chunk ch = chunks[blockIdx.x];
    if (kind == TB_FUSED_SGD) {
        for (size_t i = threadIdx.x; i < ch.n; i += blockDim.x) {
            float unused = 0.0f; /* momentum 0: no buffer */
            tb_sgd_elem(&sgd, &ch.param[i], ch.grad[i], ch.state1 ? &ch.state1[i] : &unused);
        }
        return;
    }
    for (size_t i = threadIdx.x; i < ch.n; i += blockDim.x)
        tb_adamw_elem(&adamw, &ch.param[i], ch.grad[i], &ch.state1[i], &ch.state2[i]);
}

extern "C" int tb_cuda_opt_pass(tb_opt_pass pass, float *dst, const float *a, const float *b,
                                float k, size_t n, void *stream)
{
    if (pass < TB_PASS_MUL || pass > TB_PASS_ADDCDIV)
        return TB_FAIL(TB_ERR_INVALID, "tb_cuda_opt_pass: unknown pass %d", (int)pass);
    if (n == 0)
        return TB_OK;
    opt_pass_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(pass, dst, a, b, k, n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_opt_fused(tb_opt_fused_kind kind, const tb_sgd_coef *sgd,
                                 const tb_adamw_coef *adamw, const tb_opt_chunk *chunks,
                                 int nchunks, void *stream)
{
    tb_sgd_coef s = {};
    tb_adamw_coef a = {};

    if ((kind == TB_FUSED_SGD && !sgd) || (kind == TB_FUSED_ADAMW && !adamw) ||
        (kind != TB_FUSED_SGD && kind != TB_FUSED_ADAMW))
        return TB_FAIL(TB_ERR_INVALID, "tb_cuda_opt_fused: kind %d without its coefficients",
                       (int)kind);
    if (nchunks <= 0)
        return TB_OK;
    if (sgd)
        s = *sgd;
    if (adamw)
        a = *adamw;
    opt_fused_kernel<<<(unsigned)nchunks, TB_BLOCK, 0, (cudaStream_t)stream>>>(kind, s, a, chunks);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

/* ---------------------------------------------------------------- large batch */

#define FULL_MASK 0xffffffffu

/* Sum of v over the block (TB_BLOCK threads), in a fixed order; every
 * thread gets the result. */
__device__ float lb_block_sum(float v, float *smem)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); /* smem may still be read from a previous call */
    if (lane == 0)
        smem[warp] = v;
    __syncthreads();
    v = lane < TB_BLOCK / 32 ? smem[lane] : 0.0f;
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

__global__ void __launch_bounds__(TB_BLOCK) lb_partial_kernel(tb_lb_coefs k,
                                                              const tb_opt_chunk *chunks,
                                                              float *partial)
{
    __shared__ float smem[TB_BLOCK / 32];
    tb_opt_chunk ch = chunks[blockIdx.x];
    k = tb_lb_for_tensor(&k, ch.no_adapt);
    float s0 = 0.0f, s1 = 0.0f;
    float inv = k.kind == TB_OPT_LARS ? k.lars.b.inv_scale : k.novo.b.inv_scale;
    for (size_t i = threadIdx.x; i < ch.n; i += blockDim.x) {
        float p = ch.param[i], o;
        if (k.kind == TB_OPT_LAMB) {
            tb_lamb_moments(&k.lamb, ch.grad[i], &ch.state1[i], &ch.state2[i]);
            o = tb_lamb_dir(&k.lamb, p, ch.state1[i], ch.state2[i]);
        } else {
            o = tb_lb_unscale(ch.grad[i], inv);
        }
        s0 += p * p;
        s1 += o * o;
    }
    s0 = lb_block_sum(s0, smem);
    s1 = lb_block_sum(s1, smem);
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = s0;
        partial[2 * blockIdx.x + 1] = s1;
    }
}

__global__ void lb_scalar_kernel(tb_lb_coefs k, const tb_opt_chunk *chunks, int nchunks,
                                 const float *partial, float *scalars)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nchunks || (c > 0 && chunks[c - 1].tensor == chunks[c].tensor))
        return;
    int t = chunks[c].tensor;
    double s0 = 0.0, s1 = 0.0;
    for (int j = c; j < nchunks && chunks[j].tensor == t; j++) {
        s0 += partial[2 * j];
        s1 += partial[2 * j + 1];
    }
    float w_norm = (float)sqrt(s0), o_norm = (float)sqrt(s1);
    float r;
    if (tb_lb_scalar_unadapted(&k, chunks[c].no_adapt, &r)) {
        /* trust 1, no weight decay */
    } else if (k.kind == TB_OPT_LARS) {
        r = tb_lars_trust(&k.lars, w_norm, o_norm);
    } else if (k.kind == TB_OPT_LAMB) {
        r = tb_lamb_scale(&k.lamb, w_norm, o_norm);
    } else {
        float v = tb_novograd_v(&k.novo, *chunks[c].tensor_state, (float)s1);
        *chunks[c].tensor_state = v;
        r = tb_novograd_denom(&k.novo, v);
    }
    scalars[t] = r;
}

__global__ void __launch_bounds__(TB_BLOCK) lb_apply_kernel(tb_lb_coefs k,
                                                            const tb_opt_chunk *chunks,
                                                            const float *scalars)
{
    tb_opt_chunk ch = chunks[blockIdx.x];
    k = tb_lb_for_tensor(&k, ch.no_adapt);
    float r = scalars[ch.tensor];
    for (size_t i = threadIdx.x; i < ch.n; i += blockDim.x) {
        if (k.kind == TB_OPT_LARS) {
            /* momentum 0: no buffer, never dereferenced; any valid pointer
             * (a local's address would cost a stack frame) */
            tb_lars_elem(&k.lars, r, &ch.param[i], ch.grad[i],
                         ch.state1 ? &ch.state1[i] : &ch.param[i]);
        } else if (k.kind == TB_OPT_LAMB) {
            tb_lamb_apply(&k.lamb, r, &ch.param[i], ch.state1[i], ch.state2[i]);
        } else {
            tb_novograd_elem(&k.novo, r, &ch.param[i], ch.grad[i], &ch.state1[i]);
        }
    }
}

extern "C" int tb_cuda_opt_lb(const tb_lb_coefs *k, const tb_opt_chunk *chunks, int nchunks,
                              float *partial, float *scalars, void *stream)
{
    if (!k || k->kind < TB_OPT_LARS || k->kind > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_INVALID, "tb_cuda_opt_lb: kind %d is not a large-batch optimizer",
                       k ? k->kind : -1);
    if (nchunks <= 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    lb_partial_kernel<<<(unsigned)nchunks, TB_BLOCK, 0, s>>>(*k, chunks, partial);
    TB_CHECK_LAUNCH();
    lb_scalar_kernel<<<(unsigned)((nchunks + TB_BLOCK - 1) / TB_BLOCK), TB_BLOCK, 0, s>>>(
        *k, chunks, nchunks, partial, scalars);
    TB_CHECK_LAUNCH();
    lb_apply_kernel<<<(unsigned)nchunks, TB_BLOCK, 0, s>>>(*k, chunks, scalars);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
