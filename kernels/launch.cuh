/*
 * launch.cuh - launch geometry shared by the kernels in kernels/ (CUDA
 * only; C code never includes it).
 *
 * Element-wise kernels are grid-stride loops: TB_BLOCK threads a block and
 * at most TB_MAX_BLOCKS blocks, enough to fill any current GPU; the loop
 * covers the rest. Reductions use a FIXED grid instead (see reduce.cu), so
 * their summation order, and with it their result, does not depend on the
 * device. A (rows, cols) walk where each element needs its row or column
 * uses a 2-D grid instead of dividing a flat index (a 64-bit division is
 * dozens of instructions per element): rows on blockIdx.y, columns on x.
 */
#ifndef TB_KERNELS_LAUNCH_CUH
#define TB_KERNELS_LAUNCH_CUH

#include <stddef.h>
#include <stdint.h>

#define TB_BLOCK 256
#define TB_MAX_BLOCKS 4096

/* Blocks for `items` threads' worth of work, capped. REQUIRES: items > 0. */
static inline unsigned tb_grid_for(size_t items)
{
    size_t blocks = (items + TB_BLOCK - 1) / TB_BLOCK;
    return (unsigned)(blocks < TB_MAX_BLOCKS ? blocks : TB_MAX_BLOCKS);
}

static inline int tb_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

#define TB_GRID_STRIDE(i, n)                                                       \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);         \
         i += (size_t)gridDim.x * blockDim.x)

/* Rows a 2-D grid covers at once (gridDim.y's limit); more rows loop. */
#define TB_GRID_Y_MAX 65535u

/* A 2-D grid of TB_BLOCK-thread blocks over (rows, cols): enough x blocks
 * for a row (at most TB_MAX_BLOCKS), one y block per row up to
 * TB_GRID_Y_MAX. REQUIRES: rows > 0, cols > 0. */
static inline dim3 tb_grid_2d(size_t rows, size_t cols)
{
    size_t x = (cols + TB_BLOCK - 1) / TB_BLOCK;
    return dim3((unsigned)(x < TB_MAX_BLOCKS ? x : TB_MAX_BLOCKS),
                (unsigned)(rows < TB_GRID_Y_MAX ? rows : TB_GRID_Y_MAX));
}

/* Visits every (r, c) of a rows x cols matrix once under tb_grid_2d: r a
 * size_t, c an int. REQUIRES: cols <= INT_MAX / 2 (c's stride cannot overflow). */
#define TB_ROWS_COLS_2D(r, c, rows, cols)                                          \
    for (size_t r = blockIdx.y; r < (size_t)(rows); r += gridDim.y)                 \
        for (int c = (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (int)(cols); \
             c += (int)(gridDim.x * blockDim.x))

#endif
