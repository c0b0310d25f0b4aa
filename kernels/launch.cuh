/*
 * launch.cuh - launch geometry shared by the kernels in kernels/ (CUDA
 * only; C code never includes it).
 *
 * Element-wise kernels are grid-stride loops: TB_BLOCK threads a block and
 * at most TB_MAX_BLOCKS blocks, enough to fill any current GPU; the loop
 * covers the rest. Reductions use a FIXED grid instead (see reduce.cu), so
 * their summation order, and with it their result, does not depend on the
 * device.
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

#endif
