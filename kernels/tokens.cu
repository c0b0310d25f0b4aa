/*
 * tokens.cu - token + position embedding forward and backward: the CUDA
 * backend's embedding_fwd and embedding_bwd (lib/backend/backend.h).
 *
 * Variants: none at run time.
 *   forward   element-wise, one thread per element of y (grid-stride):
 *             y[r, c] = wte[tokens[r], c] + wpe[r % seq, c]. Coalesced
 *             along c; reads two table rows and writes one row per token,
 *             as the CPU's (lib/backend/cpu/tokens.c) one float add.
 *   dwpe      one thread per (t, c) of dwpe[0:seq): starts from 0 or the
 *             old value and adds dy[t, c], dy[t + seq, c], ... in order.
 *             rows / seq (the batch) loads each, coalesced along c.
 *   dwte      no atomics. Block (b, k) owns the vocabulary bucket
 *             [b * W, (b + 1) * W) and 256 columns [256 k, 256 k + 256),
 *             thread = column: it zeroes its column of the bucket (when
 *             writing), then walks the rows r = 0, 1, ... in order. Tokens
 *             go through shared memory 256 rows at a time; each warp takes
 *             32 of them at once, __ballot_sync marks those in its bucket,
 *             and only those rows of dy are read and added. Every (v, c) is
 *             owned by one thread and summed over r in increasing order.
 *             Cost: every block reads all rows' tokens (4 bytes each) and
 *             does a ballot per 32 rows: buckets x column tiles x rows
 *             tokens. The grid aims at ~1024 blocks: GPT-2 small (d 768, 3
 *             column tiles, 342 buckets of 147 tokens) with 8 x 1024 rows
 *             reads 32 KB of tokens per block, 33 MB from L2 in all, and
 *             dy (25 MB) and the touched rows of dwte once: tens of
 *             microseconds on an H100, against the 154 MB dwte a write-mode
 *             call must zero anyway. (Estimated, not measured: no GPU where
 *             this was written.)
 * Determinism: both backward kernels add in the CPU backend's order (start
 * from 0 or the old value, rows increasing), with plain float adds (no
 * multiply to contract into an FMA), so CPU and CUDA give the same bits.
 *
 * Build check (no GPU needed): bazel build //kernels:tokens_cuda; on a GPU,
 * bazel test //kernels:tokens_cuda_test checks both against the reference.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/launch.cuh"
#include "kernels/tokens.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define FULL_MASK 0xffffffffu
#define WTE_THREADS 256 /* columns per block, and token rows per shared chunk */
#define WTE_BLOCKS 1024 /* target grid: buckets x column tiles */

__global__ void embed_fwd_kernel(const int32_t *tokens, const float *wte, const float *wpe,
                                 size_t n, int seq, int d, int vocab, float *y)
{
    TB_GRID_STRIDE(i, n)
    {
        size_t r = i / (size_t)d;
        int c = (int)(i % (size_t)d), tok = tokens[r];
        int t = (int)(r % (size_t)seq);
        y[i] = tok >= 0 && tok < vocab
                   ? wte[(size_t)tok * d + c] + wpe[(size_t)t * d + c]
                   : __int_as_float(0x7fc00000); /* NaN: bad token id */
    }
}

__global__ void embed_bwd_wpe_kernel(const float *dy, int rows, int seq, int d, float *dwpe,
                                     int accumulate)
{
    TB_GRID_STRIDE(i, (size_t)seq * d)
    {
        size_t t = i / (size_t)d, c = i % (size_t)d;
        float s = accumulate ? dwpe[i] : 0.0f;
        for (size_t r = t; r < (size_t)rows; r += (size_t)seq)
            s += dy[r * d + c];
        dwpe[i] = s;
    }
}

__global__ void __launch_bounds__(WTE_THREADS)
    embed_bwd_wte_kernel(const int32_t *tokens, const float *dy, int rows, int d, int vocab,
                         int bucket, float *dwte, int accumulate)
{
    __shared__ int32_t s_tok[WTE_THREADS];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int c = blockIdx.y * WTE_THREADS + threadIdx.x;
    int v0 = blockIdx.x * bucket, v1 = min(vocab, v0 + bucket);
    /* a warp whose 32 columns all lie past d has nothing to add, but stays
     * for the block's barriers */
    int active = blockIdx.y * WTE_THREADS + warp * 32 < d;
    if (!accumulate && c < d)
        for (int v = v0; v < v1; v++)
            dwte[(size_t)v * d + c] = 0.0f;
    for (int r0 = 0; r0 < rows; r0 += WTE_THREADS) {
        __syncthreads(); /* the previous chunk is read by every warp */
        int r = r0 + (int)threadIdx.x;
        s_tok[threadIdx.x] = r < rows ? tokens[r] : -1;
        __syncthreads();
        for (int sub = 0; active && sub < WTE_THREADS; sub += 32) {
            int tok = s_tok[sub + lane];
            unsigned hit = __ballot_sync(FULL_MASK, tok >= v0 && tok < v1);
            while (hit) { /* the warp's rows in its bucket, in increasing order */
                int j = __ffs(hit) - 1;
                hit &= hit - 1;
                int tj = __shfl_sync(FULL_MASK, tok, j);
                if (c < d)
                    dwte[(size_t)tj * d + c] += dy[(size_t)(r0 + sub + j) * d + c];
            }
        }
    }
}

extern "C" int tb_cuda_embedding_fwd(const int32_t *tokens, const float *wte, const float *wpe,
                                     int rows, int seq, int d, int vocab, float *y, void *stream)
{
    size_t n = (size_t)rows * d;
    if (n == 0)
        return TB_OK;
    embed_fwd_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(tokens, wte, wpe, n,
                                                                           seq, d, vocab, y);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_embedding_bwd(const int32_t *tokens, const float *dy, int rows, int seq,
                                     int d, int vocab, float *dwte, int accumulate_wte,
                                     float *dwpe, int accumulate_wpe, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (rows > 0 || !accumulate_wpe) {
        size_t n = (size_t)seq * d;
        embed_bwd_wpe_kernel<<<tb_grid_for(n), TB_BLOCK, 0, s>>>(dy, rows, seq, d, dwpe,
                                                                 accumulate_wpe);
        TB_CHECK_LAUNCH();
    }
    if (rows > 0 || !accumulate_wte) {
        unsigned tiles = (unsigned)((d + WTE_THREADS - 1) / WTE_THREADS);
        unsigned want = (WTE_BLOCKS + tiles - 1) / tiles;
        unsigned buckets = want < (unsigned)vocab ? want : (unsigned)vocab;
        int width = (int)((vocab + buckets - 1) / buckets);
        buckets = (unsigned)((vocab + width - 1) / width); /* none left empty */
        embed_bwd_wte_kernel<<<dim3(buckets, tiles), WTE_THREADS, 0, s>>>(
            tokens, dy, rows, d, vocab, width, dwte, accumulate_wte);
        TB_CHECK_LAUNCH();
    }
    return TB_OK;
}
