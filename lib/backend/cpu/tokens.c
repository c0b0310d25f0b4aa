/*
 * tokens.c - the CPU backend's token-model embedding slots
 * (lib/backend/backend.h, "token models"): embedding_fwd, embedding_bwd.
 * tb_cpu_install_token_ops (cpu.h) fills them.
 *
 *   embedding_fwd  y[r, :] = wte[tokens[r], :] + wpe[r % seq, :]: rows
 *                  split statically over the threads, each row one simd
 *                  add. One read of the two table rows and one write of y
 *                  per row: memory bound, as an element-wise add.
 *   embedding_bwd  a table it writes (accumulate 0) is first zeroed, each
 *                  thread a contiguous share (memset), then after a
 *                  barrier one pass over dy for both tables, split by
 *                  COLUMNS: thread k owns columns [c0, c1) (whole 16-float
 *                  chunks, so no two threads share a cache line of a row)
 *                  and walks the rows r = 0, 1, ... in order adding
 *                  dy[r, c0:c1] into dwte[tokens[r], c0:c1] and
 *                  dwpe[r % seq, c0:c1]. Every element's sum therefore runs
 *                  over r in increasing order, starting from 0 or the old
 *                  value, whatever the thread count: the same bits with 1
 *                  or N threads, and the same bits as the CUDA kernels,
 *                  which add in the same order (kernels/tokens.cu). dy is
 *                  read once in all; dwte's zeroing (vocab x d floats, 154
 *                  MB for GPT-2 small) is the cost of writing rather than
 *                  adding, which a tied head avoids (it writes dwte first).
 *                  Zeroing in per-thread contiguous shares rather than in
 *                  each thread's columns row by row: 10 ms instead of 15
 *                  for a write-mode call at GPT-2 small's size (below).
 *
 * Measured on one thread of the 2-core build VM (process CPU time, the
 * machine shared), GPT-2 small (d 768, vocab 50,257) at 8 x 1024 tokens:
 * forward 6-8 ms (an add slot over the same bytes: 3.4 ms; the gap is the
 * row gather from a 154 MB table), backward adding 7-8 ms (~17 GB/s
 * counting dy read and the touched rows of dwte read and written), writing
 * 10-11 ms (memset of dwte alone 3 ms).
 *
 * Token ids are checked on the host before anything is read or written:
 * an id outside [0, vocab) is TB_ERR_INVALID naming its row (the tokens
 * are host memory here, and checking them costs one pass over rows ints).
 *
 * Tests: bazel test //lib/backend/cpu:cpu_tokens_test (against
 * lib/backend/ref/tokens.c, both thread counts bitwise equal).
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define COL_CHUNK 16 /* floats: one 64-byte cache line */

static int tokens_check(const char *op, const int32_t *tokens, int rows, int seq, int d,
                        int vocab)
{
    TB_TRY(tb_check_embedding(op, rows, seq, d, vocab));
    for (int r = 0; r < rows; r++)
        if (tokens[r] < 0 || tokens[r] >= vocab)
            return TB_FAIL(TB_ERR_INVALID, "%s: token %d of row %d is not in [0, %d)", op,
                           (int)tokens[r], r, vocab);
    return TB_OK;
}

static int cpu_embedding_fwd(tb_backend *be, const int32_t *tokens, const float *wte,
                             const float *wpe, int rows, int seq, int d, int vocab, float *y)
{
    TB_TRY(tokens_check("embedding_fwd", tokens, rows, seq, d, vocab));
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * d >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *te = wte + (size_t)tokens[r] * d, *pe = wpe + (size_t)(r % seq) * d;
        float *yr = y + (size_t)r * d;
#pragma omp simd
        for (int c = 0; c < d; c++)
            yr[c] = te[c] + pe[c];
    }
    return TB_OK;
}

/* This thread's share of n floats set to zero, inside a parallel region. */
static void zero_share(float *p, size_t n)
{
    size_t lo, hi;
    thread_range(n, &lo, &hi);
    memset(p + lo, 0, sizeof(float) * (hi - lo));
}

/* Adds dy's rows in increasing order into columns [c0, c1) of both tables. */
static void add_columns(const int32_t *tokens, const float *dy, int rows, int seq, int d,
                        float *dwte, float *dwpe, int c0, int c1)
{
    for (int r = 0, t = 0; r < rows; r++, t = t + 1 == seq ? 0 : t + 1) {
        const float *g = dy + (size_t)r * d;
        float *te = dwte + (size_t)tokens[r] * d, *pe = dwpe + (size_t)t * d;
#pragma omp simd
        for (int c = c0; c < c1; c++) {
            te[c] += g[c];
            pe[c] += g[c];
        }
    }
}

static int cpu_embedding_bwd(tb_backend *be, const int32_t *tokens, const float *dy, int rows,
                             int seq, int d, int vocab, float *dwte, int accumulate_wte,
                             float *dwpe, int accumulate_wpe)
{
    TB_TRY(tokens_check("embedding_bwd", tokens, rows, seq, d, vocab));
    int chunks = (d + COL_CHUNK - 1) / COL_CHUNK;
    size_t work = (size_t)rows * d + (accumulate_wte ? 0 : (size_t)vocab * d);
    int t = threads_of(be);
#pragma omp parallel num_threads(t) if (chunks > 1 && work >= PAR_MIN)
    {
        if (!accumulate_wte)
            zero_share(dwte, (size_t)vocab * d);
        if (!accumulate_wpe)
            zero_share(dwpe, (size_t)seq * d);
#pragma omp barrier
        size_t lo, hi;
        thread_range((size_t)chunks, &lo, &hi);
        int c0 = (int)lo * COL_CHUNK, c1 = (int)hi * COL_CHUNK < d ? (int)hi * COL_CHUNK : d;
        if (c0 < c1)
            add_columns(tokens, dy, rows, seq, d, dwte, dwpe, c0, c1);
    }
    return TB_OK;
}

int tb_cpu_install_token_ops(tb_backend *be)
{
    be->embedding_fwd = cpu_embedding_fwd;
    be->embedding_bwd = cpu_embedding_bwd;
    return TB_OK;
}
