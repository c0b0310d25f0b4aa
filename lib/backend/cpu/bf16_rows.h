/*
 * bf16_rows.h - rounding runs of fp32 results into bf16 activations, for
 * the CPU kernels written once per element type (batchnorm_body.h,
 * pool_body.h), and the fp32 stand-ins that let those bodies write fp32
 * outputs with the same code.
 *
 * Why a pass over a small stage rather than tb_f32_to_bf16 inside the
 * kernels' loops: at the sizes that stay in cache those loops are bound by
 * arithmetic, and tb_f32_to_bf16 as GCC vectorizes it is about ten integer
 * ops per 16 lanes; it made a bf16 batch norm's output pass twice as slow
 * as the fp32 one (a pass of 200k elements: 35 us against 17 us).
 * AVX512_BF16's vcvtne2ps2bf16 rounds 32 lanes in one instruction, with
 * tb_f32_to_bf16's bits except for fp32 denormals, which it flushes (those
 * lanes are redone), and brings the bf16 pass to the fp32 one's time. So a
 * kernel writes its results into a stage of BF16_STAGE floats (L1), and
 * bf16_rows.c rounds it out with the best code this CPU has.
 *
 * For each element type T (f32, bf16) the bodies use, through their
 * NAME(f) macros (f##_f32, f##_bf16):
 *   stage_T              a stage (for fp32, nothing: results go in place)
 *   stage_init_T(s)      before the first use
 *   stage_at_T(s, dst, m)  where to write the fp32 results of dst[0, m)
 *   stage_flush_T(s)     rounds out what is staged; call before returning
 *   STAGE_COLS_T         the longest run one stage_at_T may ask for
 *
 * Tests: lib/backend/cpu/ops_test.c runs every bf16 kernel on each path
 * this CPU has (tb_cpu_bf16_rows_set_path).
 */
#ifndef TB_BACKEND_CPU_BF16_ROWS_H
#define TB_BACKEND_CPU_BF16_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = tb_f32_to_bf16(src[i]) for i < n: the same bits on every path. */
void tb_cpu_bf16_round_row(uint16_t *dst, const float *src, size_t n);

/* A run of outputs dst[0, n); tb_cpu_bf16_round_runs rounds k of them
 * from src, one after the other (run r from src + the n of runs before). */
typedef struct bf16_run {
    uint16_t *dst;
    size_t n;
} bf16_run;

void tb_cpu_bf16_round_runs(const bf16_run *runs, int k, const float *src);

/* Code paths of tb_cpu_bf16_round_row and _runs, lib/backend/cpu/cpu.h's
 * TB_CPU_PATH_*: GENERIC (tb_f32_to_bf16 vectorized by GCC) or AVX512
 * (vcvtne2ps2bf16: AVX512F, DQ, BW and BF16). The best this CPU runs
 * unless a test forces one (process-wide, not while other threads run);
 * TB_ERR_UNSUPPORTED where the CPU lacks it. */
int tb_cpu_bf16_rows_set_path(int path);
int tb_cpu_bf16_rows_path(void); /* the path in use (never AUTO) */

/* bf16: the fp32 results of up to BF16_STAGE_RUNS runs of outputs (NCHW
 * batch norm writes a channel's rows, hw elements each, C * hw apart), not
 * yet rounded. Rounded out a stage at a time: once a row at a time, the
 * call, and reading back the stores just made (no store forwarding for
 * masked loads), made the 7x7 planes' bf16 pass 2x slower than fp32. */
#define BF16_STAGE ((size_t)1024) /* floats: 4 KB */
#define BF16_STAGE_RUNS 16

typedef struct stage_bf16 {
    int runs;
    size_t n; /* floats of buf in use */
    bf16_run run[BF16_STAGE_RUNS];
    float buf[BF16_STAGE];
} stage_bf16;

#define STAGE_COLS_bf16 BF16_STAGE

static inline void stage_init_bf16(stage_bf16 *s)
{
    s->runs = 0;
    s->n = 0;
}

static inline void stage_flush_bf16(stage_bf16 *s)
{
    if (s->runs)
        tb_cpu_bf16_round_runs(s->run, s->runs, s->buf);
    stage_init_bf16(s);
}

/* m more results, for dst[0, m): appended to the last run when dst
 * continues it, else a new run; what is staged is rounded out first when
 * they would not fit. REQUIRES: m <= BF16_STAGE. */
static inline float *stage_at_bf16(stage_bf16 *s, uint16_t *dst, size_t m)
{
    if (s->n + m > BF16_STAGE)
        stage_flush_bf16(s);
    bf16_run *last = s->runs ? &s->run[s->runs - 1] : NULL;
    if (last && dst == last->dst + last->n) {
        last->n += m;
    } else {
        if (s->runs == BF16_STAGE_RUNS)
            stage_flush_bf16(s);
        s->run[s->runs].dst = dst;
        s->run[s->runs].n = m;
        s->runs++;
    }
    s->n += m;
    return s->buf + s->n - m;
}

/* fp32: the results are written where they go, in one run */
typedef struct stage_f32 {
    char unused;
} stage_f32;

#define STAGE_COLS_f32 (SIZE_MAX / 2)

static inline void stage_init_f32(stage_f32 *s) { (void)s; }

static inline void stage_flush_f32(stage_f32 *s) { (void)s; }

static inline float *stage_at_f32(stage_f32 *s, float *dst, size_t m)
{
    (void)s, (void)m;
    return dst;
}

#endif
