/*
 * optim.cu - optimizer steps on the GPU, per tensor and fused: the CUDA side
 * of the "fused optimizer" technique (Adam(fused=True), apex's
 * multi-tensor apply).
 *
 * Variants (chosen by the caller, lib/cuda_optim.c, from opt_step's fused
 * flag):
 *   per tensor  the baseline: one element-wise kernel per PyTorch in-place
 *               op, per tensor (opt_pass_kernel, tb_opt_pass picks the op):
 *               SGD with momentum 3-5 launches a tensor, AdamW 9-10, each
 *               a full pass over memory, as torch.optim's for-loop runs.
 *   fused       ONE launch for all tensors (opt_fused_kernel): block b
 *               updates chunk b of a device table of {param, grad, state1,
 *               state2, n} chunks, every element read and written once.
 * Both use the per-element math of kernels/optim_math.h, shared with the CPU
 * backend (lib/cpu_ops.c) whose tests check it; they agree within float
 * rounding (nvcc may contract a multiply and an add into an FMA).
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/launch.cuh"
#include "kernels/optim.h"
#include "kernels/optim_math.h"
#include "lib/cuda_check.h"
#include "lib/status.h"

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
