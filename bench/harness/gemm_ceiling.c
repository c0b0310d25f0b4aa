/* gemm_ceiling.c - see gemm_ceiling.h. */
#include "bench/harness/gemm_ceiling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/harness.h"
#include "lib/train/config.h"

#define CEILING_REPS 3

typedef struct gemm_case {
    tb_backend *be;
    int n, amp;
    tb_math math;
    float *a, *b, *c;         /* (n x n); a, b hold bf16/fp16 bits under amp */
} gemm_case;

static int run_gemm(void *arg)
{
    gemm_case *g = arg;
    if (g->amp != TB_AMP_OFF)
        return g->be->gemm_lowp(g->be, g->amp == TB_AMP_BF16 ? TB_BF16 : TB_F16, 0, 0, g->n,
                                g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n);
    return g->be->gemm(g->be, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c,
                       g->n, g->math);
}

/* Operands of uniform random values in [-0.5, 0.5) (seeded: the same every
 * run), as bench:ceilings gives its GEMMs: a GPU multiplying constants
 * can draw less power and clock higher than on real data (the H200 run's
 * bf16 ceiling read 868 TFLOP/s on operands of 0.5 against
 * bench:ceilings' 670 on random ones, at another size and statistic).
 * Under amp, cast to bf16 / fp16 on the device. */
static int fill(gemm_case *g, void *dev, size_t elems, uint64_t seed)
{
    tb_backend *be = g->be;
    if (g->amp == TB_AMP_OFF)
        return tb_bench_upload_random(be, dev, elems, seed, -0.5, 0.5);
    float *tmp = NULL;
    TB_TRY(be->dev_alloc(be, (void **)&tmp, elems * sizeof *tmp));
    int rc = tb_bench_upload_random(be, tmp, elems, seed, -0.5, 0.5);
    if (rc == TB_OK)
        rc = be->cast_f32_to_lowp(be, g->amp == TB_AMP_BF16 ? TB_BF16 : TB_F16, tmp, dev, elems);
    if (rc == TB_OK)
        rc = be->sync(be);
    be->dev_free(be, tmp);
    return rc;
}

/* Frees what operands() allocated. */
static void operands_free(gemm_case *g)
{
    g->be->dev_free(g->be, g->c);
    g->be->dev_free(g->be, g->b);
    g->be->dev_free(g->be, g->a);
    g->a = g->b = g->c = NULL;
}

/* g's operands allocated (bf16/fp16 a and b under amp, fp32 c) and a, b
 * filled; on failure nothing stays allocated. */
static int operands(gemm_case *g)
{
    size_t nn = (size_t)g->n * g->n, ab = g->amp != TB_AMP_OFF ? nn * 2 : nn * 4;
    int rc = TB_OK;
    g->a = g->b = g->c = NULL;
    TB_TRY_GOTO(rc, g->be->dev_alloc(g->be, (void **)&g->a, ab), out_free);
    TB_TRY_GOTO(rc, g->be->dev_alloc(g->be, (void **)&g->b, ab), out_free);
    TB_TRY_GOTO(rc, g->be->dev_alloc(g->be, (void **)&g->c, nn * 4), out_free);
    TB_TRY_GOTO(rc, fill(g, g->a, nn, 7), out_free);
    TB_TRY_GOTO(rc, fill(g, g->b, nn, 8), out_free);
    return TB_OK;
out_free:
    operands_free(g);
    return rc;
}

static int measure(gemm_case *g, double *best)
{
    TB_TRY(operands(g));
    int rc = run_gemm(g); /* warm-up: primitives, caches */
    if (rc == TB_OK)
        rc = g->be->sync(g->be);
    *best = INFINITY;
    for (int i = 0; rc == TB_OK && i < CEILING_REPS; i++) {
        double s;
        rc = tb_bench_time_op(g->be, run_gemm, g, &s);
        *best = fmin(*best, s);
    }
    operands_free(g);
    return rc;
}

/* One GEMM of fresh operands (operands()), its fp32 output read back into
 * host (n x n floats). */
static int gemm_once(gemm_case *g, float *host)
{
    TB_TRY(operands(g));
    int rc = run_gemm(g);
    if (rc == TB_OK)
        rc = g->be->copy_d2h(g->be, host, g->c, (size_t)g->n * g->n * sizeof *host, NULL);
    if (rc == TB_OK)
        rc = g->be->sync(g->be);
    operands_free(g);
    return rc;
}

int tb_gemm_tf32_differs(tb_backend *be, int *differs)
{
    static int known = -1; /* the process's answer, once measured */
    if (known >= 0) {
        *differs = known;
        return TB_OK;
    }
    const int n = TB_TF32_PROBE_N;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *out[2] = {malloc(bytes), malloc(bytes)};
    int rc = out[0] && out[1] ? TB_OK
                              : TB_FAIL(TB_ERR_NOMEM, "out of host memory for a %d^3 GEMM", n);
    for (int k = 0; rc == TB_OK && k < 2; k++) {
        gemm_case g = {.be = be, .n = n, .amp = TB_AMP_OFF, .math = k ? TB_MATH_TF32 : TB_MATH_F32};
        rc = gemm_once(&g, out[k]);
    }
    if (rc == TB_OK)
        known = *differs = memcmp(out[0], out[1], bytes) != 0;
    free(out[0]);
    free(out[1]);
    return rc;
}

/* The cache: one ceiling per (amp, tf32) and size, for the process. */
typedef struct cached {
    int valid, n;
    double gflops;
    char how[96];
} cached;

static cached cache[3][2];

int tb_gemm_ceiling(tb_backend *be, int amp, int tf32, int n, double *gflops, char *how,
                    size_t cap)
{
    amp = amp < TB_AMP_OFF || amp > TB_AMP_FP16 ? TB_AMP_OFF : amp;
    tf32 = amp == TB_AMP_OFF && tf32 ? 1 : 0;
    cached *k = &cache[amp][tf32];
    if (k->valid && k->n == n) {
        *gflops = k->gflops;
        snprintf(how, cap, "%s", k->how);
        return TB_OK;
    }
    const char *prec = amp == TB_AMP_BF16 ? "bf16" : amp == TB_AMP_FP16 ? "fp16"
                       : tf32             ? "tf32" : "fp32";
    gemm_case g = {.be = be, .n = n, .amp = amp, .math = tf32 ? TB_MATH_TF32 : TB_MATH_F32};
    double best = INFINITY;
    int rc = measure(&g, &best);
    if (rc == TB_ERR_UNSUPPORTED) {
        k->gflops = NAN;
        snprintf(k->how, sizeof k->how, "no %s GEMM on this backend: no ceiling", prec);
        tb_error_clear();
    } else if (rc != TB_OK) {
        return rc;
    } else {
        k->gflops = 2.0 * n * n * (double)n / best / 1e9;
        snprintf(k->how, sizeof k->how, "%s GEMM %d^3, best of %d in this process", prec, n,
                 CEILING_REPS);
    }
    k->valid = 1;
    k->n = n;
    *gflops = k->gflops;
    snprintf(how, cap, "%s", k->how);
    return TB_OK;
}
