/*
 * gemm_ceiling.h - the GEMM ceiling a step technique's model FLOP rate is
 * held to (its MFU, issue 15), measured in the same process: a square
 * n x n x n GEMM in the precision the setting trains in (fp32; TF32 math
 * with --tf32, oneDNN's bf16 fpmath mode on the CPU; bf16 operands with
 * fp32 accumulation under --amp=bf16, fp16 under --amp=fp16), on seeded
 * random operands as bench:ceilings' (not constants: a GPU multiplying
 * constants clocks higher), timed a few
 * times with the backend's events after one warm-up, the fastest kept
 * (a ceiling: the best the device showed). Measured once per precision
 * and cached for the process. bench:ceilings measures the same ceilings
 * with full statistics; this short one keeps each technique standalone.
 *
 *   double gflops;  char how[96];
 *   tb_gemm_ceiling(be, TB_AMP_OFF, 0, 1024, &gflops, how, sizeof how);
 */
#ifndef TB_BENCH_GEMM_CEILING_H
#define TB_BENCH_GEMM_CEILING_H

#include <stddef.h>

#include "lib/backend/backend.h"

/* *gflops = the ceiling, 1e9 FLOP/s (2 n^3 / fastest time); how = one
 * line saying what was measured ("fp32 GEMM 1024^3, best of 3 in this
 * process"). amp is a tb_amp_dtype, tf32 the config's flag. Where the
 * backend has no such GEMM (fp16 on the CPU), *gflops is NaN, how says
 * why, and TB_OK is returned. REQUIRES: n >= 16. Errors: device memory,
 * a failing GEMM. */
int tb_gemm_ceiling(tb_backend *be, int amp, int tf32, int n, double *gflops, char *how,
                    size_t cap);

/* Whether TF32 math changes a GEMM's output on this backend: one
 * TB_TF32_PROBE_N^3 GEMM of seeded random operands (as the ceilings') in
 * fp32 and one in TF32 math, their outputs compared bit for bit. *differs
 * 1: it does (CUDA's tensor cores; oneDNN's bf16 fpmath mode where it
 * computes in bf16); 0: bitwise the same output, the same arithmetic
 * (oneDNN computing that mode in fp32, as Debian 12's oneDNN 2.6 does on a
 * CPU without AVX512_BF16, and on an AVX-512 BF16 EPYC too). Measured once
 * per process. Errors: the backend's; TB_ERR_UNSUPPORTED where it refuses
 * TF32 math (its message says why). What the probe found, for notes:
 * TB_TF32_PROBE_DIFFERED and TB_TF32_PROBE_SAME. */
#define TB_TF32_PROBE_N 256
#define TB_TF32_PROBE_DIFFERED "a 256^3 GEMM differed from fp32's"
#define TB_TF32_PROBE_SAME "a 256^3 GEMM came out bitwise fp32's"
int tb_gemm_tf32_differs(tb_backend *be, int *differs);

#endif
