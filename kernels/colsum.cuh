/*
 * colsum.cuh - deterministic column sums of a (rows, cols) matrix in two
 * stages, for the parameter gradients that are column reductions: bias_grad
 * (kernels/reduce.cu) and layer norm's dgamma/dbeta (kernels/layernorm.cu).
 * CUDA only; C code never includes it.
 *
 * Why two stages: one thread (or one 32-column block) per column leaves a big
 * GPU idle when cols is small: at d = 768 that is 6 to 24 blocks on 132 SMs.
 * Here the rows are cut into TB_COLSUM_CHUNKS(rows) chunks as well, so the
 * first stage runs ceil(cols / 32) x chunks blocks (24 x 64 at d = 768 and
 * 8192 rows) and writes one double partial per (chunk, column); the second
 * stage sums each column's partials in chunk order.
 *
 * Fixed order: the chunking depends on rows only, never on the device;
 * within a chunk, row lane y of 8 sums rows y, y + 8, ... in order, then a
 * fixed tree adds the 8 lanes. Sums are in double, as the CPU backend's.
 * Index math is 32-bit apart from the element offset (a multiply, no
 * division anywhere).
 *
 * Tested through bench:selfcheck's bias_grad and layernorm_bwd cases on a
 * GPU (lib/selfcheck/); compile check: bazel build //kernels:ops_cuda
 * //kernels:attn_cuda.
 */
#ifndef TB_KERNELS_COLSUM_CUH
#define TB_KERNELS_COLSUM_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define TB_COLSUM_TILE 32       /* columns per block: one warp, coalesced */
#define TB_COLSUM_LANES 8       /* row lanes per block */
#define TB_COLSUM_MIN_ROWS 64   /* a chunk is at least this many rows */
#define TB_COLSUM_MAX_CHUNKS 64 /* and there are at most this many chunks */
#define TB_COLSUM_FINAL_THREADS 128

/* Row chunks of a column sum over `rows` rows (1 when rows == 0). */
static inline int tb_colsum_chunks(int rows)
{
    int c = (rows + TB_COLSUM_MIN_ROWS - 1) / TB_COLSUM_MIN_ROWS;
    return c < 1 ? 1 : (c > TB_COLSUM_MAX_CHUNKS ? TB_COLSUM_MAX_CHUNKS : c);
}

/* Doubles of partials a column sum of NV outputs needs. */
static inline size_t tb_colsum_partials(int nv, int rows, int cols)
{
    return (size_t)nv * tb_colsum_chunks(rows) * cols;
}

/* Stage 1. Term: a functor with `__device__ void operator()(int r, size_t i,
 * double *acc) const` adding row r's NV values at element offset i (r * cols
 * + c) to acc[0..NV). part[(v * chunks + chunk) * cols + c]. */
template <int NV, class Term>
__global__ void __launch_bounds__(TB_COLSUM_TILE *TB_COLSUM_LANES)
    tb_colsum_partial_kernel(Term term, int rows, int cols, int chunk_rows, double *part)
{
    __shared__ double s[NV][TB_COLSUM_LANES][TB_COLSUM_TILE + 1];
    int c = blockIdx.x * TB_COLSUM_TILE + threadIdx.x;
    int r0 = blockIdx.y * chunk_rows;
    int r1 = min(rows, r0 + chunk_rows);
    double acc[NV];
    for (int v = 0; v < NV; v++)
        acc[v] = 0.0;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += TB_COLSUM_LANES)
            term(r, (size_t)r * cols + c, acc);
    for (int v = 0; v < NV; v++)
        s[v][threadIdx.y][threadIdx.x] = acc[v];
    for (int half = TB_COLSUM_LANES / 2; half > 0; half /= 2) {
        __syncthreads();
        if ((int)threadIdx.y < half)
            for (int v = 0; v < NV; v++)
                s[v][threadIdx.y][threadIdx.x] += s[v][threadIdx.y + half][threadIdx.x];
    }
    if (threadIdx.y == 0 && c < cols)
        for (int v = 0; v < NV; v++)
            part[((size_t)v * gridDim.y + blockIdx.y) * cols + c] = s[v][0][threadIdx.x];
}

/* Outputs of a column sum: out[v][c] = (accumulate ? out[v][c] : 0) + sum. */
template <int NV>
struct tb_colsum_out {
    float *p[NV];
};

/* Stage 2: one thread per column adds its chunks' partials in chunk order. */
template <int NV>
__global__ void __launch_bounds__(TB_COLSUM_FINAL_THREADS)
    tb_colsum_final_kernel(const double *part, int chunks, int cols, tb_colsum_out<NV> out,
                           int accumulate)
{
    int c = blockIdx.x * TB_COLSUM_FINAL_THREADS + threadIdx.x;
    if (c >= cols)
        return;
    for (int v = 0; v < NV; v++) {
        double acc = accumulate ? (double)out.p[v][c] : 0.0;
        for (int k = 0; k < chunks; k++)
            acc += part[((size_t)v * chunks + k) * cols + c];
        out.p[v][c] = (float)acc;
    }
}

/* Column sums of NV values per element on stream s. part holds
 * tb_colsum_partials(NV, rows, cols) doubles. REQUIRES: rows >= 0, cols > 0. */
template <int NV, class Term>
static int tb_colsum_launch(Term term, int rows, int cols, double *part, tb_colsum_out<NV> out,
                            int accumulate, cudaStream_t s)
{
    int chunks = tb_colsum_chunks(rows);
    int chunk_rows = (rows + chunks - 1) / chunks;
    dim3 grid((unsigned)((cols + TB_COLSUM_TILE - 1) / TB_COLSUM_TILE), (unsigned)chunks);
    dim3 block(TB_COLSUM_TILE, TB_COLSUM_LANES);
    tb_colsum_partial_kernel<NV><<<grid, block, 0, s>>>(term, rows, cols, chunk_rows, part);
    TB_CHECK_LAUNCH();
    unsigned fgrid = (unsigned)((cols + TB_COLSUM_FINAL_THREADS - 1) / TB_COLSUM_FINAL_THREADS);
    tb_colsum_final_kernel<NV><<<fgrid, TB_COLSUM_FINAL_THREADS, 0, s>>>(part, chunks, cols, out,
                                                                        accumulate);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

#endif
