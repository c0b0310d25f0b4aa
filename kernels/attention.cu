/*
 * attention.cu - multi-head attention kernels: the CUDA backend's
 * attention_fwd/bwd (lib/backend/cuda/attention.c calls the launchers of attention.h).
 *
 * Variants (tb_attn_variant), picked at run time by lib/backend/cuda/attention.c:
 *   manual  eager PyTorch's softmax(q @ k^T * scale + mask) @ v: the GEMMs
 *           are cuBLAS strided-batched calls made by lib/backend/cuda/attention.c (one
 *           call for all B*H heads, as torch.bmm); this file holds the two
 *           row kernels between them: masked softmax in place on the
 *           materialized (B, H, T, T) scores, and softmax backward
 *           dS = P (dP - rowsum(P dP)). One warp per row.
 *   fused   flash attention: the T x T matrix never leaves shared memory.
 *           forward: one block of 128 threads per (b, h, BQ-query tile);
 *             Q tile resident, K/V tiles of BK keys streamed through shared
 *             memory; scores, online softmax (kernels/attn_math.h, one warp
 *             per row), output rows accumulated in registers (each thread a
 *             DPT-column slice of one row); saves each row's logsumexp.
 *           backward: rowsum(dO * O) per row, then two kernels that each
 *             recompute P = exp(S - lse) tile by tile (as Triton's
 *             flash-attention tutorial splits it): dK, dV with one block
 *             per key tile looping over query tiles, and dQ with one block
 *             per query tile looping over key tiles. No atomics, so the
 *             result is deterministic; the price is computing S and dP
 *             twice (7 tile products per pair instead of 5).
 *           Head sizes up to 128: templates for D <= 32, 64, 128, the
 *           head dimension zero-padded to the template's (tiles 32 x 32;
 *           16 x 16 at 128 so shared memory stays under the 48 KB static
 *           limit and accumulators at 32 registers a thread: no spills).
 * The per-element math is shared with lib/backend/cpu/attention.c and tested there
 * (lib/backend/cpu/attention_test.c). Differences from the CPU: summation order and
 * FMA contraction: within float tolerance, not bitwise.
 *
 * Build check (no GPU needed): bazel build //kernels:attn_cuda; nvcc's
 * resource report lands next to the object (tools/cuda.bzl).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/attention.h"
#include "kernels/attn_math.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ROW_WARPS 8 /* manual softmax: rows per 256-thread block */
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float att_warp_max(float v)
{
    for (int d = 16; d > 0; d /= 2)
        v = tb_attn_max_f(v, __shfl_xor_sync(FULL_MASK, v, d));
    return v;
}

__device__ __forceinline__ float att_warp_sum(float v)
{
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

/* Tile sizes per head-size class. */
template <int MAXD> struct att_cfg;
template <> struct att_cfg<32> { enum { BQ = 32, BK = 32 }; };
template <> struct att_cfg<64> { enum { BQ = 32, BK = 32 }; };
template <> struct att_cfg<128> { enum { BQ = 16, BK = 16 }; };

/* dst[r][c] = src row r0 + r, column c; zero outside T x D. */
template <int ROWS, int MAXD, int LD>
__device__ __forceinline__ void att_load(float (*dst)[LD], const float *src, int r0, int T, int D)
{
    for (int e = threadIdx.x; e < ROWS * MAXD; e += ATT_THREADS) {
        int r = e / MAXD, c = e % MAXD;
        dst[r][c] = r0 + r < T && c < D ? src[(size_t)(r0 + r) * D + c] : 0.0f;
    }
}

/* ---------------------------------------------------------------- fused forward */

template <int DPT>
__device__ __forceinline__ void att_zero(float (&acc)[DPT])
{
#pragma unroll
    for (int x = 0; x < DPT; x++)
        acc[x] = 0.0f;
}

/* Keys a query tile [q0, q0 + BQ) attends to are [0, att_key_end): all T,
 * or under the causal mask none past the tile's last row. */
template <int BQ>
__device__ __forceinline__ int att_key_end(int causal, int q0, int T)
{
    return causal && q0 + BQ < T ? q0 + BQ : T;
}

/* acc[x] += sum over j < N of w[j] * tile[j][sub + TPR x]: this thread's
 * columns of one row of (weights x tile). */
template <int DPT, int TPR, int N, int LD>
__device__ __forceinline__ void att_acc_row(float (&acc)[DPT], const float *w,
                                            const float (*tile)[LD], int sub)
{
    for (int j = 0; j < N; j++) {
        const float p = w[j];
#pragma unroll
        for (int x = 0; x < DPT; x++)
            acc[x] += p * tile[j][sub + TPR * x];
    }
}

/* This thread's columns (< D) of one output row: acc[x] / f when DIV,
 * acc[x] * f otherwise. */
template <bool DIV, int DPT, int TPR>
__device__ __forceinline__ void att_store_row(float *dst, const float (&acc)[DPT], float f,
                                              int sub, int D)
{
#pragma unroll
    for (int x = 0; x < DPT; x++) {
        int d = sub + TPR * x;
        if (d < D)
            dst[d] = DIV ? acc[x] / f : acc[x] * f;
    }
}

template <int MAXD>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_fwd_kernel(const float *q, const float *k, const float *v, float *out, float *lse,
                    int T, int D, int causal, float scale)
{
    constexpr int BQ = att_cfg<MAXD>::BQ, BK = att_cfg<MAXD>::BK;
    constexpr int TPR = ATT_THREADS / BQ, DPT = MAXD / TPR;
    __shared__ float Qs[BQ][MAXD];
    __shared__ float Ks[BK][MAXD + 1];
    __shared__ float Vs[BK][MAXD];
    __shared__ float Ss[BQ][BK + 1];
    __shared__ float m_s[BQ], l_s[BQ], a_s[BQ];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int q0 = blockIdx.y * BQ, row = tid / TPR, sub = tid % TPR;
    const size_t hoff = (size_t)blockIdx.x * T * D;
    q += hoff, k += hoff, v += hoff, out += hoff;
    lse += (size_t)blockIdx.x * T;

    att_load<BQ, MAXD, MAXD>(Qs, q, q0, T, D);
    if (tid < BQ) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }
    float acc[DPT];
    att_zero(acc);
    const int kend = att_key_end<BQ>(causal, q0, T);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads(); /* the previous tile's readers are done */
        att_load<BK, MAXD, MAXD + 1>(Ks, k, k0, T, D);
        att_load<BK, MAXD, MAXD>(Vs, v, k0, T, D);
        __syncthreads();
        for (int e = tid; e < BQ * BK; e += ATT_THREADS) {
            int r = e / BK, c = e % BK;
            float dot = 0.0f;
#pragma unroll 16
            for (int x = 0; x < MAXD; x++)
                dot += Qs[r][x] * Ks[c][x];
            Ss[r][c] = k0 + c < T ? tb_attn_mask_f(dot, scale, causal, q0 + r, k0 + c)
                                  : -INFINITY;
        }
        __syncthreads();
        for (int r = warp; r < BQ; r += ATT_WARPS) { /* online softmax, a warp per row */
            float s = lane < BK ? Ss[r][lane] : -INFINITY;
            float mold = m_s[r];
            float mn = tb_attn_max_f(mold, att_warp_max(s));
            float p = lane < BK ? tb_attn_weight_f(s, mn) : 0.0f;
            float sum = att_warp_sum(p);
            if (lane < BK)
                Ss[r][lane] = p;
            if (lane == 0) {
                float al = tb_attn_rescale_f(mold, mn);
                a_s[r] = al;
                l_s[r] = tb_attn_sum_update_f(l_s[r], al, sum);
                m_s[r] = mn;
            }
        }
        __syncthreads();
        const float al = a_s[row];
#pragma unroll
        for (int x = 0; x < DPT; x++)
            acc[x] *= al;
        att_acc_row<DPT, TPR, BK, MAXD>(acc, Ss[row], Vs, sub);
    }
    const int i = q0 + row;
    if (i < T) {
        const float l = l_s[row];
        att_store_row<true, DPT, TPR>(out + (size_t)i * D, acc, l, sub, D);
        if (sub == 0)
            lse[i] = tb_attn_lse_f(m_s[row], l);
    }
}

/* ---------------------------------------------------------------- fused backward */

/* rowdot[r] = sum_d dout[r][d] * out[r][d]: a warp per row. */
__global__ void attn_rowdot_kernel(const float *out, const float *dout, float *rowdot,
                                   long rows, int D)
{
    long r = (long)blockIdx.x * ATT_WARPS + threadIdx.x / 32;
    if (r >= rows) /* whole warps leave together */
        return;
    int lane = threadIdx.x % 32;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32)
        s += dout[r * D + d] * out[r * D + d];
    s = att_warp_sum(s);
    if (lane == 0)
        rowdot[r] = s;
}

/* P (if Ps) and dS of query tile q0 against key tile k0, from shared tiles. */
template <int MAXD, int BQ, int BK>
__device__ __forceinline__ void att_bwd_tile(const float (*Qs)[MAXD + 1],
                                             const float (*dOs)[MAXD + 1],
                                             const float (*Ks)[MAXD + 1],
                                             const float (*Vs)[MAXD + 1], const float *lse_s,
                                             const float *rd_s, float (*Ps)[BK + 1],
                                             float (*dSs)[BK + 1], int q0, int k0, int T,
                                             int causal, float scale)
{
    for (int e = threadIdx.x; e < BQ * BK; e += ATT_THREADS) {
        int r = e / BK, c = e % BK, i = q0 + r, j = k0 + c;
        float s = 0.0f, dp = 0.0f;
#pragma unroll 16
        for (int x = 0; x < MAXD; x++) {
            s += Qs[r][x] * Ks[c][x];
            dp += dOs[r][x] * Vs[c][x];
        }
        float sc = i < T && j < T ? tb_attn_mask_f(s, scale, causal, i, j) : -INFINITY;
        float p = tb_attn_prob_f(sc, lse_s[r]);
        if (Ps)
            Ps[r][c] = p;
        dSs[r][c] = tb_attn_dscore_f(p, dp, rd_s[r]);
    }
}

template <int BQ>
__device__ __forceinline__ void att_load_rows(float *lse_s, float *rd_s, const float *lse,
                                              const float *rowdot, int q0, int T)
{
    if (threadIdx.x < BQ) {
        int i = q0 + threadIdx.x;
        lse_s[threadIdx.x] = i < T ? lse[i] : 0.0f;
        rd_s[threadIdx.x] = i < T ? rowdot[i] : 0.0f;
    }
}

/* dK, dV of one key tile: a block per (b, h, key tile). */
template <int MAXD>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dkdv_kernel(const float *q, const float *k, const float *v, const float *dout,
                         const float *lse, const float *rowdot, float *dk, float *dv, int T,
                         int D, int causal, float scale)
{
    constexpr int BQ = att_cfg<MAXD>::BQ, BK = att_cfg<MAXD>::BK;
    constexpr int TPR = ATT_THREADS / BK, DPT = MAXD / TPR;
    __shared__ float Ks[BK][MAXD + 1], Vs[BK][MAXD + 1];
    __shared__ float Qs[BQ][MAXD + 1], dOs[BQ][MAXD + 1];
    __shared__ float Ps[BQ][BK + 1], dSs[BQ][BK + 1];
    __shared__ float lse_s[BQ], rd_s[BQ];
    const int tid = threadIdx.x, k0 = blockIdx.y * BK, row = tid / TPR, sub = tid % TPR;
    const size_t hoff = (size_t)blockIdx.x * T * D, roff = (size_t)blockIdx.x * T;
    q += hoff, k += hoff, v += hoff, dout += hoff, dk += hoff, dv += hoff;
    lse += roff, rowdot += roff;

    att_load<BK, MAXD, MAXD + 1>(Ks, k, k0, T, D);
    att_load<BK, MAXD, MAXD + 1>(Vs, v, k0, T, D);
    float dk_acc[DPT], dv_acc[DPT];
#pragma unroll
    for (int x = 0; x < DPT; x++)
        dk_acc[x] = 0.0f, dv_acc[x] = 0.0f;
    for (int q0 = causal ? k0 / BQ * BQ : 0; q0 < T; q0 += BQ) {
        __syncthreads();
        att_load<BQ, MAXD, MAXD + 1>(Qs, q, q0, T, D);
        att_load<BQ, MAXD, MAXD + 1>(dOs, dout, q0, T, D);
        att_load_rows<BQ>(lse_s, rd_s, lse, rowdot, q0, T);
        __syncthreads();
        att_bwd_tile<MAXD, BQ, BK>(Qs, dOs, Ks, Vs, lse_s, rd_s, Ps, dSs, q0, k0, T, causal,
                                   scale);
        __syncthreads();
        for (int r = 0; r < BQ; r++) {
            const float p = Ps[r][row], ds = dSs[r][row];
#pragma unroll
            for (int x = 0; x < DPT; x++) {
                dv_acc[x] += p * dOs[r][sub + TPR * x];
                dk_acc[x] += ds * Qs[r][sub + TPR * x];
            }
        }
    }
    const int j = k0 + row;
    if (j < T) {
#pragma unroll
        for (int x = 0; x < DPT; x++) {
            int d = sub + TPR * x;
            if (d < D) {
                dk[(size_t)j * D + d] = dk_acc[x] * scale;
                dv[(size_t)j * D + d] = dv_acc[x];
            }
        }
    }
}

/* dQ of one query tile: a block per (b, h, query tile). */
template <int MAXD>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dq_kernel(const float *q, const float *k, const float *v, const float *dout,
                       const float *lse, const float *rowdot, float *dq, int T, int D,
                       int causal, float scale)
{
    constexpr int BQ = att_cfg<MAXD>::BQ, BK = att_cfg<MAXD>::BK;
    constexpr int TPR = ATT_THREADS / BQ, DPT = MAXD / TPR;
    __shared__ float Qs[BQ][MAXD + 1], dOs[BQ][MAXD + 1];
    __shared__ float Ks[BK][MAXD + 1], Vs[BK][MAXD + 1];
    __shared__ float dSs[BQ][BK + 1];
    __shared__ float lse_s[BQ], rd_s[BQ];
    const int tid = threadIdx.x, q0 = blockIdx.y * BQ, row = tid / TPR, sub = tid % TPR;
    const size_t hoff = (size_t)blockIdx.x * T * D, roff = (size_t)blockIdx.x * T;
    q += hoff, k += hoff, v += hoff, dout += hoff, dq += hoff;
    lse += roff, rowdot += roff;

    att_load<BQ, MAXD, MAXD + 1>(Qs, q, q0, T, D);
    att_load<BQ, MAXD, MAXD + 1>(dOs, dout, q0, T, D);
    att_load_rows<BQ>(lse_s, rd_s, lse, rowdot, q0, T);
    float acc[DPT];
    att_zero(acc);
    const int kend = att_key_end<BQ>(causal, q0, T);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        att_load<BK, MAXD, MAXD + 1>(Ks, k, k0, T, D);
        att_load<BK, MAXD, MAXD + 1>(Vs, v, k0, T, D);
        __syncthreads();
        att_bwd_tile<MAXD, BQ, BK>(Qs, dOs, Ks, Vs, lse_s, rd_s, NULL, dSs, q0, k0, T, causal,
                                   scale);
        __syncthreads();
        att_acc_row<DPT, TPR, BK, MAXD + 1>(acc, dSs[row], Ks, sub);
    }
    const int i = q0 + row;
    if (i < T)
        att_store_row<false, DPT, TPR>(dq + (size_t)i * D, acc, scale, sub, D);
}

/* ---------------------------------------------------------------- manual: row kernels */

__global__ void attn_softmax_fwd_kernel(float *p, long rows, int T, int causal)
{
    long r = (long)blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    if (r >= rows)
        return;
    int lane = threadIdx.x % 32, i = (int)(r % T);
    float *pr = p + (size_t)r * T;
    float mx = -INFINITY;
    for (int j = lane; j < T; j += 32) {
        float s = tb_attn_mask_f(pr[j], 1.0f, causal, i, j);
        pr[j] = s;
        mx = tb_attn_max_f(mx, s);
    }
    mx = att_warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < T; j += 32) {
        float w = tb_attn_weight_f(pr[j], mx);
        pr[j] = w;
        sum += w;
    }
    sum = att_warp_sum(sum);
    for (int j = lane; j < T; j += 32)
        pr[j] = pr[j] / sum;
}

__global__ void attn_softmax_bwd_kernel(const float *p, float *ds, long rows, int T)
{
    long r = (long)blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    if (r >= rows)
        return;
    int lane = threadIdx.x % 32;
    const float *pr = p + (size_t)r * T;
    float *dr = ds + (size_t)r * T;
    float dot = 0.0f;
    for (int j = lane; j < T; j += 32)
        dot += pr[j] * dr[j];
    dot = att_warp_sum(dot);
    for (int j = lane; j < T; j += 32)
        dr[j] = tb_attn_dscore_f(pr[j], dr[j], dot);
}

/* ---------------------------------------------------------------- launchers */

static int att_check(const tb_attn_desc *d, long *heads)
{
    *heads = (long)d->batch * d->heads;
    if (d->head_dim > TB_CUDA_ATTN_MAX_D)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "fused attention on CUDA: head size %d > %d; use the "
                       "manual variant", d->head_dim, TB_CUDA_ATTN_MAX_D);
    if (*heads > 0x7fffffffL || d->seq > 16 * 65535)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "fused attention on CUDA: B*H %ld or T %d too large "
                       "for the launch grid", *heads, d->seq);
    return TB_OK;
}

template <int MAXD>
static int att_fwd(const tb_attn_desc *d, long heads, const float *q, const float *k,
                   const float *v, float *out, float *lse, cudaStream_t s)
{
    dim3 grid((unsigned)heads, (unsigned)((d->seq + att_cfg<MAXD>::BQ - 1) / att_cfg<MAXD>::BQ));
    attn_fwd_kernel<MAXD><<<grid, ATT_THREADS, 0, s>>>(q, k, v, out, lse, d->seq, d->head_dim,
                                                       d->causal, d->scale);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

template <int MAXD>
static int att_bwd(const tb_attn_desc *d, long heads, const float *q, const float *k,
                   const float *v, const float *dout, const float *lse, const float *rowdot,
                   float *dq, float *dk, float *dv, cudaStream_t s)
{
    int T = d->seq, D = d->head_dim;
    dim3 gk((unsigned)heads, (unsigned)((T + att_cfg<MAXD>::BK - 1) / att_cfg<MAXD>::BK));
    attn_bwd_dkdv_kernel<MAXD><<<gk, ATT_THREADS, 0, s>>>(q, k, v, dout, lse, rowdot, dk, dv, T,
                                                          D, d->causal, d->scale);
    TB_CHECK_LAUNCH();
    dim3 gq((unsigned)heads, (unsigned)((T + att_cfg<MAXD>::BQ - 1) / att_cfg<MAXD>::BQ));
    attn_bwd_dq_kernel<MAXD><<<gq, ATT_THREADS, 0, s>>>(q, k, v, dout, lse, rowdot, dq, T, D,
                                                        d->causal, d->scale);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_attn_fused_fwd(const tb_attn_desc *d, const float *q, const float *k,
                                      const float *v, float *out, float *lse, void *stream)
{
    long heads;
    TB_TRY(att_check(d, &heads));
    cudaStream_t s = (cudaStream_t)stream;
    if (d->head_dim <= 32)
        return att_fwd<32>(d, heads, q, k, v, out, lse, s);
    if (d->head_dim <= 64)
        return att_fwd<64>(d, heads, q, k, v, out, lse, s);
    return att_fwd<128>(d, heads, q, k, v, out, lse, s);
}

extern "C" int tb_cuda_attn_fused_bwd(const tb_attn_desc *d, const float *q, const float *k,
                                      const float *v, const float *out, const float *dout,
                                      const float *lse, float *rowdot, float *dq, float *dk,
                                      float *dv, void *stream)
{
    long heads;
    TB_TRY(att_check(d, &heads));
    cudaStream_t s = (cudaStream_t)stream;
    long rows = heads * d->seq;
    unsigned grid = (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS);
    attn_rowdot_kernel<<<grid, ATT_THREADS, 0, s>>>(out, dout, rowdot, rows, d->head_dim);
    TB_CHECK_LAUNCH();
    if (d->head_dim <= 32)
        return att_bwd<32>(d, heads, q, k, v, dout, lse, rowdot, dq, dk, dv, s);
    if (d->head_dim <= 64)
        return att_bwd<64>(d, heads, q, k, v, dout, lse, rowdot, dq, dk, dv, s);
    return att_bwd<128>(d, heads, q, k, v, dout, lse, rowdot, dq, dk, dv, s);
}

extern "C" int tb_cuda_attn_softmax_fwd(float *p, long rows, int T, int causal, void *stream)
{
    if (rows <= 0 || T <= 0)
        return TB_OK;
    unsigned grid = (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS);
    attn_softmax_fwd_kernel<<<grid, ROW_WARPS * 32, 0, (cudaStream_t)stream>>>(p, rows, T,
                                                                               causal);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_attn_softmax_bwd(const float *p, float *ds, long rows, int T,
                                        void *stream)
{
    if (rows <= 0 || T <= 0)
        return TB_OK;
    unsigned grid = (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS);
    attn_softmax_bwd_kernel<<<grid, ROW_WARPS * 32, 0, (cudaStream_t)stream>>>(p, ds, rows, T);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
