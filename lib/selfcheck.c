/*
 * selfcheck.c - every slot of a backend's table against the plain CPU
 * reference (see lib/selfcheck.h for what a walk does and prints).
 *
 *   bazel run //bench:selfcheck [-- --device=cuda:N | --device=cpu]
 *   bazel test //lib:selfcheck_test
 *
 * Adding an op: add its slot to lib/backend.h (the generated op table picks
 * it up), write check_<slot> here (inputs from sc_randf, outputs from
 * sc_outf, the reference on the host, one sc_case per size/variant), and
 * add {"<slot>", check_<slot>, NULL} to op_checks[]. Until then
 * //lib:selfcheck_test fails naming the slot, and bench:selfcheck reports it
 * as a failure.
 *
 * Tolerances: the max relative error against the largest reference value
 * (tb_max_rel_err, lib/stats.h), chosen by why the two sides may differ:
 *   TOL_EXACT 0      selections and single IEEE operations both sides do
 *                    alike: relu fwd/bwd, add, bias_add (one rounded add),
 *                    dropout (mask from kernels/rng_math.h, one multiply by
 *                    the same float scale), max pooling and its argmax,
 *                    count_nonfinite (a small integer). Masks and argmax are
 *                    compared bitwise.
 *   TOL_ROUND 1e-6   (~8 ulp) a few float roundings where the reference
 *                    rounds once from double: axpby, average pooling,
 *                    pool_bwd (overlapping windows add in another order),
 *                    softmax_xent_bwd.
 *   TOL_SUM 1e-5     (~100 ulp, TB_TOL_F32) sums in another order, or other
 *                    exp/log/erf/sqrt implementations: gemm, convolution,
 *                    bias_grad, reduce_sum, batch norm, softmax_xent_fwd,
 *                    gelu (within 1e-6 max(1, |x|) of the double
 *                    reference, lib/gelu_cpu_test.c: an absolute bound, so
 *                    its error is scaled by max(1, max |ref|)), optimizers.
 *   TOL_CANCEL 1e-4  gradients that subtract means which cancel most of
 *                    them: batch norm's and layer norm's dx (dy minus two
 *                    means; with n*hw = 2 samples per channel rounding grows
 *                    ~10x: 1.1e-5 seen on the CPU fast path, and
 *                    lib/cpu_ops_test.c uses 1e-4 too), attention's dq, dk,
 *                    dv (dS = P (dP - rowsum(dO * O))).
 *   TOL_TRANSFORM 1e-4  Winograd and FFT convolution algorithms: they sum
 *                    transformed data, which amplifies rounding.
 *   TOL_TF32 1e-2    TF32 math keeps 10 mantissa bits (oneDNN's bf16
 *                    fpmath, the CPU's analogue, 8): ~4e-3 per product.
 *   TOL_LOWP 2e-2    fp16/bf16 inputs with fp32 accumulation (TB_TOL_BF16).
 * Inputs are uniform in ranges that keep results of order one and are
 * never zero; reduce_sum's are positive so the sum cannot cancel to noise.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "kernels/augment_math.h"
#include "kernels/cast_math.h"
#include "lib/attn_ref.h"
#include "lib/conv_ref.h"
#include "lib/dp.h"
#include "lib/gelu_ref.h"
#include "lib/ops_ref.h"
#include "lib/optable.h"
#include "lib/selfcheck.h"
#include "lib/stats.h"
#include "lib/status.h"
#include "lib/train.h"

#define TOL_EXACT 0.0
#define TOL_ROUND 1e-6
#define TOL_SUM 1e-5
#define TOL_CANCEL 1e-4
#define TOL_TRANSFORM 1e-4
#define TOL_TF32 1e-2
#define TOL_LOWP 2e-2

#define SC_DEFAULT_SEED 0x73656c66636b3031ull /* "selfck01" */
#define SC_MAX_BUFS 64

/* One walk: the backend, where lines go, the input stream, and the
 * buffers of the check running now (freed by sc_release after it). */
typedef struct sc_ctx {
    tb_backend *be;
    FILE *out;
    uint64_t rng;
    tb_selfcheck_counts *counts;
    const char *slot;
    void *dev[SC_MAX_BUFS];
    int ndev;
    void *host[SC_MAX_BUFS];
    int nhost;
} sc_ctx;

/* ------------------------------------------------------------ inputs */

static uint64_t sc_next(sc_ctx *sc)
{
    uint64_t z = (sc->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi], never exactly 0. */
static float sc_uniform(sc_ctx *sc, float lo, float hi)
{
    float u = (float)(sc_next(sc) >> 40) * (1.0f / 16777216.0f);
    float v = lo + (hi - lo) * u;
    return v == 0.0f ? hi : v;
}

static void sc_fill(sc_ctx *sc, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sc_uniform(sc, lo, hi);
}

/* ------------------------------------------------------------ buffers */

/* Host memory freed after the check; filled with 0xff bytes (NaN floats). */
static int sc_host(sc_ctx *sc, void **p, size_t bytes)
{
    *p = NULL;
    if (sc->nhost == SC_MAX_BUFS)
        return TB_FAIL(TB_ERR_INTERNAL, "selfcheck: more than %d host buffers in one check",
                       SC_MAX_BUFS);
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return TB_FAIL(TB_ERR_NOMEM, "selfcheck: out of host memory (%zu bytes)", bytes);
    memset(*p, 0xff, bytes);
    sc->host[sc->nhost++] = *p;
    return TB_OK;
}

/* Device memory of the backend under test, freed after the check. Filled
 * with 0xff bytes: NaN as floats, so an output the op fails to write shows. */
static int sc_dev(sc_ctx *sc, void **p, size_t bytes)
{
    tb_backend *be = sc->be;
    *p = NULL;
    if (sc->ndev == SC_MAX_BUFS)
        return TB_FAIL(TB_ERR_INTERNAL, "selfcheck: more than %d device buffers in one check",
                       SC_MAX_BUFS);
    TB_TRY(be->dev_alloc(be, p, bytes ? bytes : 4));
    sc->dev[sc->ndev++] = *p;
    return be->memset(be, *p, 0xff, bytes, NULL);
}

static int sc_upload(sc_ctx *sc, void **dev, const void *host, size_t bytes)
{
    TB_TRY(sc_dev(sc, dev, bytes));
    return sc->be->copy_h2d(sc->be, *dev, host, bytes, NULL);
}

/* n random floats in [lo, hi] on the host (*host) and the device (*dev). */
static int sc_randf(sc_ctx *sc, float **host, float **dev, size_t n, float lo, float hi)
{
    TB_TRY(sc_host(sc, (void **)host, n * sizeof(float)));
    sc_fill(sc, *host, n, lo, hi);
    return sc_upload(sc, (void **)dev, *host, n * sizeof(float));
}

/* A reference output on the host (NaN-filled) and the device's (NaN-filled). */
static int sc_outf(sc_ctx *sc, float **host, float **dev, size_t n)
{
    TB_TRY(sc_host(sc, (void **)host, n * sizeof(float)));
    return sc_dev(sc, (void **)dev, n * sizeof(float));
}

static int sc_release(sc_ctx *sc)
{
    int rc = TB_OK;
    for (int i = 0; i < sc->ndev; i++) {
        int r = sc->be->dev_free(sc->be, sc->dev[i]);
        if (rc == TB_OK)
            rc = r;
    }
    for (int i = 0; i < sc->nhost; i++)
        free(sc->host[i]);
    sc->ndev = sc->nhost = 0;
    return rc;
}

/* ------------------------------------------------------------ one case */

/* One line of output: a slot at one size / variant / algorithm. */
typedef struct sc_case {
    char desc[192];
    int failed, na;
    char why[320];     /* the first failure, or the n/a reason */
    double rel, tol;   /* of the float output nearest its tolerance */
    double ratio;      /* rel / tol of that output; < 0 before any */
    int nfloat;        /* float outputs compared */
    char what[32];
    char exact[64];    /* outputs compared bitwise */
    char note[192];    /* extra facts for a PASS line */
} sc_case;

static void sc_case_start(sc_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sc_case_start(sc_case *c, const char *fmt, ...)
{
    memset(c, 0, sizeof *c);
    c->ratio = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->desc, sizeof c->desc, fmt, ap);
    va_end(ap);
}

/* Records the first failure of a case; later ones add nothing. */
static void sc_case_fail(sc_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sc_case_fail(sc_case *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

/* A call on the backend under test failed: the case fails with its error. */
static void sc_case_fail_rc(sc_case *c, const char *call, int rc)
{
    sc_case_fail(c, "%s returned %s: %s", call, tb_err_name(rc), tb_error_message());
    tb_error_clear();
}

/* Takes the op's status and waits for it. Returns 1 when the op ran and
 * its outputs are to be compared. optional: TB_ERR_UNSUPPORTED means n/a
 * (a math mode or optimizer the backend lacks), not a failure. */
static int sc_ran(sc_ctx *sc, sc_case *c, int rc, int optional)
{
    if (rc == TB_OK)
        rc = sc->be->sync(sc->be);
    if (rc == TB_OK)
        return 1;
    if (optional && rc == TB_ERR_UNSUPPORTED) {
        c->na = 1;
        snprintf(c->why, sizeof c->why, "%s", tb_error_message());
        tb_error_clear();
        return 0;
    }
    sc_case_fail_rc(c, sc->slot, rc);
    return 0;
}

/* Copies n floats of the device's output down and compares them with the
 * reference: max |got - ref| / max(max |ref|, min_scale) <= tol. min_scale 0 is
 * tb_max_rel_err; min_scale 1 turns it into an absolute error where the
 * outputs are all small (an op whose error bound is absolute, e.g. GELU's
 * 1e-6 max(1, |x|), where one output near 0 would otherwise divide by ~0). */
static int sc_cmp_floor(sc_ctx *sc, sc_case *c, const char *what, const float *ref,
                        const float *dev, size_t n, double tol, double min_scale)
{
    float *got;
    TB_TRY(sc_host(sc, (void **)&got, n * sizeof *got));
    int rc = sc->be->copy_d2h(sc->be, got, dev, n * sizeof *got, NULL);
    if (rc != TB_OK) {
        sc_case_fail_rc(c, "copy_d2h", rc);
        return TB_OK;
    }
    tb_compare cmp;
    TB_TRY(tb_compare_floats(ref, got, n, tol, &cmp));
    if (min_scale > 0 && cmp.verdict != TB_MATCH_EXACT) {
        double scale = min_scale;
        for (size_t i = 0; i < n; i++)
            if (isfinite(ref[i]) && fabs(ref[i]) > scale)
                scale = fabs(ref[i]);
        cmp.max_rel = cmp.max_abs / scale;
        cmp.verdict = cmp.max_rel <= tol ? TB_MATCH_WITHIN_TOL : TB_MATCH_DIFFERS;
    }
    double ratio = tol > 0 ? cmp.max_rel / tol : (cmp.max_rel > 0 ? INFINITY : 0);
    c->nfloat++;
    if (ratio > c->ratio) {
        c->ratio = ratio;
        c->rel = cmp.max_rel;
        c->tol = tol;
        snprintf(c->what, sizeof c->what, "%s", what);
    }
    if (cmp.verdict == TB_MATCH_DIFFERS)
        sc_case_fail(c, "%s: max_rel_err=%.2g > tol=%g at index %zu of %zu (got %.9g, want %.9g)",
                     what, cmp.max_rel, tol, cmp.worst, n, got[cmp.worst], ref[cmp.worst]);
    return TB_OK;
}

static int sc_cmp(sc_ctx *sc, sc_case *c, const char *what, const float *ref, const float *dev,
                  size_t n, double tol)
{
    return sc_cmp_floor(sc, c, what, ref, dev, n, tol, 0.0);
}

/* Same for outputs that must match bitwise (masks, argmax): n elements of
 * elem bytes. */
static int sc_cmp_exact(sc_ctx *sc, sc_case *c, const char *what, const void *ref,
                        const void *dev, size_t n, size_t elem)
{
    unsigned char *got;
    TB_TRY(sc_host(sc, (void **)&got, n * elem));
    int rc = sc->be->copy_d2h(sc->be, got, dev, n * elem, NULL);
    if (rc != TB_OK) {
        sc_case_fail_rc(c, "copy_d2h", rc);
        return TB_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (memcmp(got + i * elem, (const unsigned char *)ref + i * elem, elem) != 0) {
            sc_case_fail(c, "%s differs at element %zu of %zu (must match exactly)", what, i, n);
            return TB_OK;
        }
    }
    size_t len = strlen(c->exact);
    snprintf(c->exact + len, sizeof c->exact - len, "%s%s", len ? ", " : "", what);
    return TB_OK;
}

static void sc_case_end(sc_ctx *sc, sc_case *c)
{
    if (c->failed) {
        sc->counts->failed++;
        fprintf(sc->out, "FAIL %s %s: %s\n", sc->slot, c->desc, c->why);
    } else if (c->na) {
        sc->counts->na++;
        fprintf(sc->out, "n/a  %s %s: %s\n", sc->slot, c->desc, c->why);
    } else {
        sc->counts->passed++;
        fprintf(sc->out, "PASS %s %s", sc->slot, c->desc);
        if (c->nfloat)
            fprintf(sc->out, " max_rel_err=%.2g tol=%g", c->rel, c->tol);
        if (c->nfloat > 1)
            fprintf(sc->out, " (worst: %s)", c->what);
        if (c->exact[0])
            fprintf(sc->out, " %s exact", c->exact);
        if (c->note[0])
            fprintf(sc->out, " %s", c->note);
        fputc('\n', sc->out);
    }
    fflush(sc->out);
}

/* One line that is only a failure (e.g. a slot a check needs is NULL). */
static void sc_fail_line(sc_ctx *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sc_fail_line(sc_ctx *sc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(sc->out, "FAIL ");
    vfprintf(sc->out, fmt, ap);
    fputc('\n', sc->out);
    va_end(ap);
    fflush(sc->out);
    sc->counts->failed++;
}

/* ------------------------------------------------------------ element-wise */

/* 1 (a single element), odd, and odd past 64 Ki (threaded CPU paths,
 * a partial last CUDA block). */
static const size_t ew_sizes[] = {1, 1003, 65537};
#define N_EW_SIZES (sizeof ew_sizes / sizeof ew_sizes[0])

static const char *const gelu_names[] = {"unfused", "fused"};

static int check_gelu_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx, *want, *dy;
        TB_TRY(sc_randf(sc, &x, &dx, n, -6.0f, 6.0f));
        TB_TRY(sc_outf(sc, &want, &dy, n));
        tb_ref_gelu_fwd(x, want, n);
        for (int v = 0; v < 2; v++) {
            sc_case c;
            sc_case_start(&c, "%s n=%zu", gelu_names[v], n);
            if (sc_ran(sc, &c, be->gelu_fwd(be, (tb_gelu_variant)v, dx, dy, n), 0))
                TB_TRY(sc_cmp_floor(sc, &c, "y", want, dy, n, TOL_SUM, 1.0));
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_gelu_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx_in, *g, *dg, *want, *out;
        TB_TRY(sc_randf(sc, &x, &dx_in, n, -6.0f, 6.0f));
        TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, n));
        tb_ref_gelu_bwd(x, g, want, n);
        for (int v = 0; v < 2; v++) {
            sc_case c;
            sc_case_start(&c, "%s n=%zu", gelu_names[v], n);
            if (sc_ran(sc, &c, be->gelu_bwd(be, (tb_gelu_variant)v, dx_in, dg, out, n), 0))
                TB_TRY(sc_cmp_floor(sc, &c, "dx", want, out, n, TOL_SUM, 1.0));
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_relu_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx, *want, *dy;
        TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &dy, n));
        tb_ref_relu_fwd(x, want, n);
        sc_case c;
        sc_case_start(&c, "n=%zu", n);
        if (sc_ran(sc, &c, be->relu_fwd(be, dx, dy, n), 0))
            TB_TRY(sc_cmp(sc, &c, "y", want, dy, n, TOL_EXACT));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_relu_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx_unused, *y, *d_y, *g, *dg, *want, *out;
        TB_TRY(sc_randf(sc, &x, &dx_unused, n, -1.0f, 1.0f));
        TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
        tb_ref_relu_fwd(x, y, n); /* y > 0 about half the time */
        TB_TRY(sc_upload(sc, (void **)&d_y, y, n * sizeof *y));
        TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, n));
        tb_ref_relu_bwd(y, g, want, n);
        sc_case c;
        sc_case_start(&c, "n=%zu", n);
        if (sc_ran(sc, &c, be->relu_bwd(be, d_y, dg, out, n), 0))
            TB_TRY(sc_cmp(sc, &c, "dx", want, out, n, TOL_EXACT));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_add(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *a, *da, *b, *db, *want, *out;
        TB_TRY(sc_randf(sc, &a, &da, n, -1.0f, 1.0f));
        TB_TRY(sc_randf(sc, &b, &db, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, n));
        tb_ref_add(a, b, want, n);
        sc_case c;
        sc_case_start(&c, "n=%zu", n);
        if (sc_ran(sc, &c, be->add(be, da, db, out, n), 0))
            TB_TRY(sc_cmp(sc, &c, "y", want, out, n, TOL_EXACT));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_axpby(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    /* beta == 0: y starts as NaN, which the op must not read */
    static const float betas[] = {0.0f, 0.75f};
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        for (int b = 0; b < 2; b++) {
            float alpha = -1.25f, beta = betas[b];
            float *x, *dx, *want, *y;
            TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
            if (beta == 0.0f) {
                TB_TRY(sc_outf(sc, &want, &y, n));
            } else {
                TB_TRY(sc_randf(sc, &want, &y, n, -1.0f, 1.0f));
            }
            tb_ref_axpby(alpha, x, beta, want, n);
            sc_case c;
            sc_case_start(&c, "alpha=%g beta=%g n=%zu", alpha, beta, n);
            if (sc_ran(sc, &c, be->axpby(be, alpha, dx, beta, y, n), 0))
                TB_TRY(sc_cmp(sc, &c, "y", want, y, n, TOL_ROUND));
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ dense layers */

typedef struct gemm_case {
    int ta, tb, m, n, k, ld_pad;
    float alpha, beta;
    tb_math math;
} gemm_case;

static const char *const math_names[] = {"f32", "tf32", "lowp"};

static int gemm_one(sc_ctx *sc, const gemm_case *g)
{
    tb_backend *be = sc->be;
    int lda = (g->ta ? g->m : g->k) + g->ld_pad;
    int ldb = (g->tb ? g->k : g->n) + g->ld_pad;
    int ldc = g->n + g->ld_pad;
    size_t na = (size_t)(g->ta ? g->k : g->m) * lda;
    size_t nb = (size_t)(g->tb ? g->n : g->k) * ldb;
    size_t nc = (size_t)g->m * ldc;
    float *a, *da, *b, *db, *want, *c_dev;
    TB_TRY(sc_randf(sc, &a, &da, na, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &b, &db, nb, -1.0f, 1.0f));
    if (g->beta == 0.0f) {
        TB_TRY(sc_outf(sc, &want, &c_dev, nc)); /* NaN: must not be read */
    } else {
        TB_TRY(sc_randf(sc, &want, &c_dev, nc, -1.0f, 1.0f));
    }
    TB_TRY(tb_gemm_ref(g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta, want,
                       ldc));
    double tol = g->math == TB_MATH_F32 ? TOL_SUM : g->math == TB_MATH_TF32 ? TOL_TF32 : TOL_LOWP;
    sc_case c;
    sc_case_start(&c, "%c%c %dx%dx%d alpha=%g beta=%g ld+%d math=%s", g->ta ? 'T' : 'N',
                  g->tb ? 'T' : 'N', g->m, g->n, g->k, g->alpha, g->beta, g->ld_pad,
                  math_names[g->math]);
    if (sc_ran(sc, &c,
               be->gemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, da, lda, db, ldb, g->beta,
                        c_dev, ldc, g->math),
               g->math != TB_MATH_F32))
        TB_TRY(sc_cmp(sc, &c, "C", want, c_dev, nc, tol));
    sc_case_end(sc, &c);
    return sc_release(sc);
}

static int check_gemm(sc_ctx *sc)
{
    static const gemm_case cases[] = {
        {0, 0, 1, 1, 1, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 0, 7, 5, 3, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 0, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {0, 1, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {1, 0, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {1, 1, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_TF32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_LOWP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TB_TRY(gemm_one(sc, &cases[i]));
    return TB_OK;
}

/* ---- mixed precision: gemm_lowp and the casts (kernels/cast_math.h) ---- */

static const char *const lowp_names[] = {"f32", "bf16", "fp16"};

/* n floats and their lowp bits (host), the bits also on the device. */
static int sc_rand_lowp(sc_ctx *sc, tb_dtype dt, float **f, void **dev, size_t n)
{
    uint16_t *bits;
    TB_TRY(sc_host(sc, (void **)f, n * sizeof(float)));
    TB_TRY(sc_host(sc, (void **)&bits, n * sizeof *bits));
    sc_fill(sc, *f, n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        bits[i] = dt == TB_BF16 ? tb_f32_to_bf16((*f)[i]) : tb_f32_to_f16((*f)[i]);
    return sc_upload(sc, dev, bits, n * sizeof *bits);
}

/* Against the fp32 reference on the unrounded inputs: TOL_LOWP. */
static int gemm_lowp_one(sc_ctx *sc, tb_dtype dt, int ta, int tb, int m, int n, int k,
                         float beta)
{
    tb_backend *be = sc->be;
    int lda = ta ? m : k, ldb = tb ? k : n;
    float *a, *b, *want, *c;
    void *da, *db;
    TB_TRY(sc_rand_lowp(sc, dt, &a, &da, (size_t)m * k));
    TB_TRY(sc_rand_lowp(sc, dt, &b, &db, (size_t)k * n));
    if (beta == 0.0f)
        TB_TRY(sc_outf(sc, &want, &c, (size_t)m * n));
    else
        TB_TRY(sc_randf(sc, &want, &c, (size_t)m * n, -1.0f, 1.0f));
    TB_TRY(tb_gemm_ref(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, want, n));
    sc_case cs;
    sc_case_start(&cs, "%s %c%c %dx%dx%d beta=%g", lowp_names[dt], ta ? 'T' : 'N', tb ? 'T' : 'N',
                  m, n, k, beta);
    if (sc_ran(sc, &cs, be->gemm_lowp(be, dt, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, beta, c,
                                      n), 1))
        TB_TRY(sc_cmp(sc, &cs, "C", want, c, (size_t)m * n, TOL_LOWP));
    sc_case_end(sc, &cs);
    return sc_release(sc);
}

static int check_gemm_lowp(sc_ctx *sc)
{
    for (int dt = TB_BF16; dt <= TB_F16; dt++) {
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 0, 1, 65, 129, 100, 0.0f));
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 1, 0, 33, 17, 9, 1.0f));
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 0, 0, 7, 5, 3, 0.0f));
    }
    return TB_OK;
}

/* Edge values (ties, NaN, Inf, denormals, the largest finite) then random
 * ones over a wide range; the device must match the header bitwise. */
static void cast_inputs(sc_ctx *sc, float *x, size_t n)
{
    static const uint32_t edges[] = {
        0x3f808000u, 0x3f818000u, 0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u,
        0x00000001u, 0x00018000u, 0x807fffffu, 0x7f7fffffu, 0x477fe000u, 0x477ff000u,
        0x33000000u, 0x33000001u, 0x38800000u, 0x80000000u,
    };
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < sizeof edges / sizeof edges[0] ? edges[i] : (uint32_t)(sc_next(sc) >> 32);
        memcpy(&x[i], &u, sizeof u);
    }
}

static int check_cast_f32_to_lowp(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (int dt = TB_BF16; dt <= TB_F16; dt++) {
        for (size_t si = 0; si < N_EW_SIZES; si++) {
            size_t n = ew_sizes[si] + 16;
            float *x, *dx;
            uint16_t *want, *y;
            TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
            cast_inputs(sc, x, n);
            TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
            TB_TRY(sc_host(sc, (void **)&want, n * sizeof *want));
            TB_TRY(sc_dev(sc, (void **)&y, n * sizeof *y));
            for (size_t i = 0; i < n; i++)
                want[i] = dt == TB_BF16 ? tb_f32_to_bf16(x[i]) : tb_f32_to_f16(x[i]);
            sc_case c;
            sc_case_start(&c, "%s n=%zu (edge values, then random bits)", lowp_names[dt], n);
            if (sc_ran(sc, &c, be->cast_f32_to_lowp(be, (tb_dtype)dt, dx, y, n), 0))
                TB_TRY(sc_cmp_exact(sc, &c, "bits", want, y, n, sizeof *want));
            sc_case_end(sc, &c);
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

static int check_cast_lowp_to_f32(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (int dt = TB_BF16; dt <= TB_F16; dt++) {
        size_t n = 65536; /* every bit pattern */
        uint16_t *x, *dx;
        float *want, *y;
        TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
        for (size_t i = 0; i < n; i++)
            x[i] = (uint16_t)i;
        TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
        TB_TRY(sc_outf(sc, &want, &y, n));
        for (size_t i = 0; i < n; i++)
            want[i] = dt == TB_BF16 ? tb_bf16_to_f32(x[i]) : tb_f16_to_f32(x[i]);
        sc_case c;
        sc_case_start(&c, "%s all 65536 bit patterns", lowp_names[dt]);
        if (sc_ran(sc, &c, be->cast_lowp_to_f32(be, (tb_dtype)dt, dx, y, n), 0))
            TB_TRY(sc_cmp_exact(sc, &c, "values", want, y, n, sizeof *want));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static const int bias_shapes[][2] = {{1, 1}, {37, 129}, {300, 65}};
#define N_BIAS_SHAPES (sizeof bias_shapes / sizeof bias_shapes[0])

static int check_bias_add(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_BIAS_SHAPES; i++) {
        int rows = bias_shapes[i][0], cols = bias_shapes[i][1];
        size_t n = (size_t)rows * cols;
        float *y, *dy, *bias, *dbias;
        TB_TRY(sc_randf(sc, &y, &dy, n, -1.0f, 1.0f));
        TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)cols, -1.0f, 1.0f));
        tb_ref_bias_add(y, bias, rows, cols);
        sc_case c;
        sc_case_start(&c, "%dx%d", rows, cols);
        if (sc_ran(sc, &c, be->bias_add(be, dy, dbias, rows, cols), 0))
            TB_TRY(sc_cmp(sc, &c, "y", y, dy, n, TOL_EXACT));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_bias_grad(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_BIAS_SHAPES; i++) {
        int rows = bias_shapes[i][0], cols = bias_shapes[i][1];
        for (int acc = 0; acc < 2; acc++) {
            float *g, *dg, *want, *out;
            TB_TRY(sc_randf(sc, &g, &dg, (size_t)rows * cols, -1.0f, 1.0f));
            if (acc) {
                TB_TRY(sc_randf(sc, &want, &out, (size_t)cols, -1.0f, 1.0f));
            } else {
                TB_TRY(sc_outf(sc, &want, &out, (size_t)cols));
            }
            tb_ref_bias_grad(g, want, rows, cols, acc);
            sc_case c;
            sc_case_start(&c, "%dx%d accumulate=%d", rows, cols, acc);
            if (sc_ran(sc, &c, be->bias_grad(be, dg, out, rows, cols, acc), 0))
                TB_TRY(sc_cmp(sc, &c, "dbias", want, out, (size_t)cols, TOL_SUM));
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ convolution */

/* Odd spatial sizes, both layouts, stride 1 and 2, 3x3, 5x5 and 1x1. */
static const tb_conv_desc conv_descs[] = {
    {2, 3, 7, 7, 5, 3, 3, 1, 1, TB_NCHW, TB_F32, TB_MATH_F32},
    {3, 4, 9, 8, 6, 3, 3, 2, 1, TB_NHWC, TB_F32, TB_MATH_F32},
    {2, 5, 6, 5, 4, 5, 5, 1, 2, TB_NCHW, TB_F32, TB_MATH_F32},
    {2, 6, 5, 7, 3, 1, 1, 1, 0, TB_NHWC, TB_F32, TB_MATH_F32},
};
#define N_CONV_DESCS (sizeof conv_descs / sizeof conv_descs[0])

static const char *const conv_kind_names[] = {"fwd", "bwd_data", "bwd_filter"};

static void conv_desc_str(const tb_conv_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s %dx%dx%dx%d k%d %dx%d s%d p%d%s", d->layout == TB_NHWC ? "NHWC" : "NCHW",
             d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->stride, d->pad,
             d->math == TB_MATH_F32 ? "" : d->math == TB_MATH_TF32 ? " math=tf32" : " math=lowp");
}

typedef struct conv_sizes {
    size_t x, w, y;
} conv_sizes;

static conv_sizes conv_sizes_of(const tb_conv_desc *d)
{
    conv_sizes s;
    s.x = (size_t)d->n * d->c * d->h * d->w;
    s.w = (size_t)d->k * d->c * d->r * d->s;
    s.y = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
    return s;
}

/* The algorithms a conv check runs: the default first, then every other
 * one conv_find returns. */
typedef struct conv_algos {
    int n;
    int id[TB_MAX_CONV_ALGOS + 1];
    char name[TB_MAX_CONV_ALGOS + 1][80];
} conv_algos;

/* Transforming algorithms lose more to rounding (see the file header). */
static double conv_tol(const char *algo_name)
{
    if (strcasestr(algo_name, "winograd") || strcasestr(algo_name, "wino") ||
        strcasestr(algo_name, "fft"))
        return TOL_TRANSFORM;
    return TOL_SUM;
}

/* Fills *a; a failing conv_algo_default or conv_find is a FAIL line of the
 * slot being checked (the op cannot be checked without them). */
static void conv_algo_list(sc_ctx *sc, const tb_conv_desc *d, tb_conv_kind kind, conv_algos *a)
{
    tb_backend *be = sc->be;
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    a->n = 0;
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    int found = 0, dflt = -1;
    int rc = be->conv_algo_default(be, d, kind, &dflt);
    if (rc != TB_OK) {
        sc_case c;
        sc_case_start(&c, "%s default algorithm", ds);
        sc_case_fail_rc(&c, "conv_algo_default", rc);
        sc_case_end(sc, &c);
    }
    rc = be->conv_find(be, d, kind, perf, TB_MAX_CONV_ALGOS, &found);
    if (rc != TB_OK) {
        sc_case c;
        sc_case_start(&c, "%s algorithms", ds);
        sc_case_fail_rc(&c, "conv_find", rc);
        sc_case_end(sc, &c);
        found = 0;
    }
    const char *dflt_name = "?";
    for (int i = 0; i < found; i++)
        if (perf[i].algo == dflt)
            dflt_name = perf[i].name;
    if (dflt >= 0) {
        a->id[a->n] = dflt;
        snprintf(a->name[a->n++], sizeof a->name[0], "default:%s", dflt_name);
    }
    for (int i = 0; i < found && i < TB_MAX_CONV_ALGOS; i++) {
        if (perf[i].algo == dflt)
            continue;
        if (perf[i].ms < 0) { /* conv_find could not run it: nothing to check */
            sc_case c;
            sc_case_start(&c, "%s algo=%s", ds, perf[i].name);
            c.na = 1;
            snprintf(c.why, sizeof c.why, "conv_find reports it failed on this problem");
            sc_case_end(sc, &c);
            continue;
        }
        a->id[a->n] = perf[i].algo;
        snprintf(a->name[a->n++], sizeof a->name[0], "%s", perf[i].name);
    }
}

static int conv_fwd_one(sc_ctx *sc, const tb_conv_desc *d, int algo, const char *name,
                        int with_bias, int optional)
{
    tb_backend *be = sc->be;
    conv_sizes n = conv_sizes_of(d);
    float *x, *dx, *w, *dw, *bias = NULL, *dbias = NULL, *want, *y;
    TB_TRY(sc_randf(sc, &x, &dx, n.x, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &w, &dw, n.w, -1.0f, 1.0f));
    if (with_bias)
        TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)d->k, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &y, n.y));
    tb_conv_desc rd = *d;
    rd.math = TB_MATH_F32;
    TB_TRY(tb_conv_ref_fwd(&rd, x, w, bias, want));
    double tol = d->math == TB_MATH_TF32 ? TOL_TF32 : d->math == TB_MATH_LOWP ? TOL_LOWP
                                                                              : conv_tol(name);
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s%s algo=%s", ds, with_bias ? " bias" : "", name);
    if (sc_ran(sc, &c, be->conv_fwd(be, d, algo, dx, dw, dbias, y), optional))
        TB_TRY(sc_cmp(sc, &c, "y", want, y, n.y, tol));
    sc_case_end(sc, &c);
    return sc_release(sc);
}

/* Mixed precision: bf16 and fp16 inputs (each direction's, lib/backend.h),
 * fp32 outputs, against the fp32 reference on the unrounded inputs at
 * TOL_LOWP, both layouts, the default algorithm; n/a where the backend
 * lacks the dtype (CPU fp16). */
static int conv_lowp_one(sc_ctx *sc, tb_conv_kind kind, tb_dtype dt, tb_layout layout)
{
    tb_backend *be = sc->be;
    tb_conv_desc d = {.n = 2, .c = 5, .h = 9, .w = 7, .k = 8, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .layout = layout, .dtype = dt, .math = TB_MATH_LOWP};
    tb_conv_desc rd = d;
    rd.dtype = TB_F32;
    rd.math = TB_MATH_F32;
    conv_sizes n = conv_sizes_of(&d);
    float *x, *w, *g, *bias, *dbias, *want, *out, *want_b = NULL, *out_b = NULL;
    void *dx, *dw, *dg;
    TB_TRY(sc_rand_lowp(sc, dt, &x, &dx, n.x));
    TB_TRY(sc_rand_lowp(sc, dt, &w, &dw, n.w));
    TB_TRY(sc_rand_lowp(sc, dt, &g, &dg, n.y));
    TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)d.k, -1.0f, 1.0f));
    size_t nout = kind == TB_CONV_FWD ? n.y : kind == TB_CONV_BWD_DATA ? n.x : n.w;
    TB_TRY(sc_outf(sc, &want, &out, nout));
    if (kind == TB_CONV_FWD)
        TB_TRY(tb_conv_ref_fwd(&rd, x, w, bias, want));
    else if (kind == TB_CONV_BWD_DATA)
        TB_TRY(tb_conv_ref_bwd_data(&rd, g, w, want));
    else {
        TB_TRY(sc_outf(sc, &want_b, &out_b, (size_t)d.k));
        TB_TRY(tb_conv_ref_bwd_filter(&rd, x, g, want, want_b, 0));
    }
    sc_case c;
    sc_case_start(&c, "%s %s n=2 c=5 9x7 k=8 3x3 default algorithm",
                  layout == TB_NHWC ? "nhwc" : "nchw", lowp_names[dt]);
    int algo = 0;
    int rc = be->conv_algo_default(be, &d, kind, &algo);
    if (rc == TB_OK && kind == TB_CONV_FWD)
        rc = be->conv_fwd(be, &d, algo, dx, dw, dbias, out);
    else if (rc == TB_OK && kind == TB_CONV_BWD_DATA)
        rc = be->conv_bwd_data(be, &d, algo, dg, dw, out);
    else if (rc == TB_OK)
        rc = be->conv_bwd_filter(be, &d, algo, dx, dg, out, out_b, 0);
    if (sc_ran(sc, &c, rc, 1)) {
        TB_TRY(sc_cmp(sc, &c, kind == TB_CONV_FWD ? "y" : kind == TB_CONV_BWD_DATA ? "dx" : "dw",
                      want, out, nout, TOL_LOWP));
        if (out_b)
            TB_TRY(sc_cmp(sc, &c, "dbias", want_b, out_b, (size_t)d.k, TOL_LOWP));
    }
    sc_case_end(sc, &c);
    return sc_release(sc);
}

static int conv_lowp_cases(sc_ctx *sc, tb_conv_kind kind)
{
    for (int dt = TB_BF16; dt <= TB_F16; dt++)
        for (int lay = TB_NCHW; lay <= TB_NHWC; lay++)
            TB_TRY(conv_lowp_one(sc, kind, (tb_dtype)dt, (tb_layout)lay));
    return TB_OK;
}

static int check_conv_fwd(sc_ctx *sc)
{
    TB_TRY(conv_lowp_cases(sc, TB_CONV_FWD));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        conv_algos a;
        conv_algo_list(sc, &conv_descs[i], TB_CONV_FWD, &a);
        for (int j = 0; j < a.n; j++)
            TB_TRY(conv_fwd_one(sc, &conv_descs[i], a.id[j], a.name[j], 1, 0));
        if (a.n > 0) /* no conv bias before batch norm: bias NULL */
            TB_TRY(conv_fwd_one(sc, &conv_descs[i], a.id[0], a.name[0], 0, 0));
    }
    /* TF32 math with its own default algorithm; n/a where the backend lacks it */
    tb_conv_desc d = conv_descs[0];
    d.math = TB_MATH_TF32;
    int algo = 0;
    int rc = sc->be->conv_algo_default(sc->be, &d, TB_CONV_FWD, &algo);
    if (rc == TB_OK)
        return conv_fwd_one(sc, &d, algo, "default", 1, 1);
    sc_case c;
    char ds[96];
    conv_desc_str(&d, ds, sizeof ds);
    sc_case_start(&c, "%s default algorithm", ds);
    sc_ran(sc, &c, rc, 1);
    sc_case_end(sc, &c);
    return TB_OK;
}

static int check_conv_bwd_data(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    TB_TRY(conv_lowp_cases(sc, TB_CONV_BWD_DATA));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        const tb_conv_desc *d = &conv_descs[i];
        conv_sizes n = conv_sizes_of(d);
        char ds[96];
        conv_desc_str(d, ds, sizeof ds);
        conv_algos a;
        conv_algo_list(sc, d, TB_CONV_BWD_DATA, &a);
        for (int j = 0; j < a.n; j++) {
            float *g, *dg, *w, *dw, *want, *dx;
            TB_TRY(sc_randf(sc, &g, &dg, n.y, -1.0f, 1.0f));
            TB_TRY(sc_randf(sc, &w, &dw, n.w, -1.0f, 1.0f));
            TB_TRY(sc_outf(sc, &want, &dx, n.x));
            TB_TRY(tb_conv_ref_bwd_data(d, g, w, want));
            sc_case c;
            sc_case_start(&c, "%s algo=%s", ds, a.name[j]);
            if (sc_ran(sc, &c, be->conv_bwd_data(be, d, a.id[j], dg, dw, dx), 0))
                TB_TRY(sc_cmp(sc, &c, "dx", want, dx, n.x, conv_tol(a.name[j])));
            sc_case_end(sc, &c);
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

static int conv_bwd_filter_one(sc_ctx *sc, const tb_conv_desc *d, int algo, const char *name,
                               int with_bias, int acc)
{
    tb_backend *be = sc->be;
    conv_sizes n = conv_sizes_of(d);
    float *x, *dx, *g, *dg, *want_w, *dw, *want_b = NULL, *db = NULL;
    TB_TRY(sc_randf(sc, &x, &dx, n.x, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &g, &dg, n.y, -1.0f, 1.0f));
    if (acc) {
        TB_TRY(sc_randf(sc, &want_w, &dw, n.w, -1.0f, 1.0f));
        if (with_bias)
            TB_TRY(sc_randf(sc, &want_b, &db, (size_t)d->k, -1.0f, 1.0f));
    } else {
        TB_TRY(sc_outf(sc, &want_w, &dw, n.w));
        if (with_bias)
            TB_TRY(sc_outf(sc, &want_b, &db, (size_t)d->k));
    }
    TB_TRY(tb_conv_ref_bwd_filter(d, x, g, want_w, want_b, acc));
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s%s accumulate=%d algo=%s", ds, with_bias ? " dbias" : "", acc, name);
    if (sc_ran(sc, &c, be->conv_bwd_filter(be, d, algo, dx, dg, dw, db, acc), 0)) {
        TB_TRY(sc_cmp(sc, &c, "dw", want_w, dw, n.w, conv_tol(name)));
        if (with_bias)
            TB_TRY(sc_cmp(sc, &c, "dbias", want_b, db, (size_t)d->k, TOL_SUM));
    }
    sc_case_end(sc, &c);
    return sc_release(sc);
}

static int check_conv_bwd_filter(sc_ctx *sc)
{
    TB_TRY(conv_lowp_cases(sc, TB_CONV_BWD_FILTER));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        conv_algos a;
        conv_algo_list(sc, &conv_descs[i], TB_CONV_BWD_FILTER, &a);
        for (int j = 0; j < a.n; j++)
            TB_TRY(conv_bwd_filter_one(sc, &conv_descs[i], a.id[j], a.name[j], 1, 0));
        if (a.n > 0) /* gradient accumulation, without a conv bias */
            TB_TRY(conv_bwd_filter_one(sc, &conv_descs[i], a.id[0], a.name[0], 0, 1));
    }
    return TB_OK;
}

/* conv_algo_default: answers for every problem and kind with an id that
 * the conv_* checks then run (they fail if the id is unusable). */
static int check_conv_algo_default(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        char ds[96];
        conv_desc_str(&conv_descs[i], ds, sizeof ds);
        for (int k = 0; k < 3; k++) {
            int algo = -1;
            sc_case c;
            sc_case_start(&c, "%s %s", ds, conv_kind_names[k]);
            int rc = be->conv_algo_default(be, &conv_descs[i], (tb_conv_kind)k, &algo);
            if (rc != TB_OK)
                sc_case_fail_rc(&c, "conv_algo_default", rc);
            else if (algo < 0)
                sc_case_fail(&c, "returned algorithm id %d", algo);
            else
                snprintf(c.note, sizeof c.note, "algo=%d", algo);
            sc_case_end(sc, &c);
        }
    }
    return TB_OK;
}

/* conv_find: at least one algorithm, each named, fastest first. */
static int check_conv_find(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        char ds[96];
        conv_desc_str(&conv_descs[i], ds, sizeof ds);
        for (int k = 0; k < 3; k++) {
            tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
            int found = -1;
            sc_case c;
            sc_case_start(&c, "%s %s", ds, conv_kind_names[k]);
            int rc = be->conv_find(be, &conv_descs[i], (tb_conv_kind)k, perf, TB_MAX_CONV_ALGOS,
                                   &found);
            if (rc != TB_OK) {
                sc_case_fail_rc(&c, "conv_find", rc);
                sc_case_end(sc, &c);
                continue;
            }
            if (found < 1 || found > TB_MAX_CONV_ALGOS)
                sc_case_fail(&c, "returned %d algorithms (want 1..%d)", found, TB_MAX_CONV_ALGOS);
            float last = 0.0f;
            for (int j = 0; j < found && j < TB_MAX_CONV_ALGOS; j++) {
                if (!perf[j].name[0])
                    sc_case_fail(&c, "algorithm %d (id %d) has no name", j, perf[j].algo);
                if (perf[j].ms < 0)
                    continue;
                if (perf[j].ms < last)
                    sc_case_fail(&c, "not fastest first: %s %.3g ms after %.3g ms", perf[j].name,
                                 perf[j].ms, last);
                last = perf[j].ms;
            }
            if (!c.failed)
                snprintf(c.note, sizeof c.note, "%d algorithms, fastest %s %.3g ms", found,
                         perf[0].name, perf[0].ms);
            sc_case_end(sc, &c);
        }
    }
    return TB_OK;
}

/* ------------------------------------------------------------ batch norm */

static const tb_bn_desc bn_descs[] = {
    {3, 5, 7, TB_NCHW, 1e-5f, 0.1f},
    {4, 3, 9, TB_NHWC, 1e-5f, 0.1f},
    {2, 17, 1, TB_NCHW, 1e-5f, 0.1f},  /* after a linear layer */
    {5, 33, 13, TB_NHWC, 1e-3f, 0.2f},
};
#define N_BN_DESCS (sizeof bn_descs / sizeof bn_descs[0])

static void bn_desc_str(const tb_bn_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s n=%d c=%d hw=%d", d->layout == TB_NHWC ? "NHWC" : "NCHW", d->n, d->c,
             d->hw);
}

static int check_bn_fwd_train(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_BN_DESCS; i++) {
        const tb_bn_desc *d = &bn_descs[i];
        size_t n = (size_t)d->n * d->c * d->hw, c = (size_t)d->c;
        float *x, *dx, *ga, *dga, *be_, *dbe, *rm, *drm, *rv, *drv;
        float *y, *dy, *sm, *dsm, *si, *dsi;
        TB_TRY(sc_randf(sc, &x, &dx, n, -2.0f, 3.0f));
        TB_TRY(sc_randf(sc, &ga, &dga, c, 0.5f, 1.5f));
        TB_TRY(sc_randf(sc, &be_, &dbe, c, -0.5f, 0.5f));
        TB_TRY(sc_randf(sc, &rm, &drm, c, -0.5f, 0.5f));
        TB_TRY(sc_randf(sc, &rv, &drv, c, 0.5f, 1.5f));
        TB_TRY(sc_outf(sc, &y, &dy, n));
        TB_TRY(sc_outf(sc, &sm, &dsm, c));
        TB_TRY(sc_outf(sc, &si, &dsi, c));
        TB_TRY(tb_ref_bn_fwd_train(d, x, ga, be_, y, rm, rv, sm, si));
        char ds[64];
        bn_desc_str(d, ds, sizeof ds);
        sc_case k;
        sc_case_start(&k, "%s", ds);
        if (sc_ran(sc, &k, be->bn_fwd_train(be, d, dx, dga, dbe, dy, drm, drv, dsm, dsi), 0)) {
            TB_TRY(sc_cmp(sc, &k, "y", y, dy, n, TOL_SUM));
            TB_TRY(sc_cmp(sc, &k, "running_mean", rm, drm, c, TOL_SUM));
            TB_TRY(sc_cmp(sc, &k, "running_var", rv, drv, c, TOL_SUM));
            TB_TRY(sc_cmp(sc, &k, "save_mean", sm, dsm, c, TOL_SUM));
            TB_TRY(sc_cmp(sc, &k, "save_invstd", si, dsi, c, TOL_SUM));
        }
        sc_case_end(sc, &k);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_bn_fwd_infer(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_BN_DESCS; i++) {
        const tb_bn_desc *d = &bn_descs[i];
        size_t n = (size_t)d->n * d->c * d->hw, c = (size_t)d->c;
        float *x, *dx, *ga, *dga, *be_, *dbe, *rm, *drm, *rv, *drv, *y, *dy;
        TB_TRY(sc_randf(sc, &x, &dx, n, -2.0f, 3.0f));
        TB_TRY(sc_randf(sc, &ga, &dga, c, 0.5f, 1.5f));
        TB_TRY(sc_randf(sc, &be_, &dbe, c, -0.5f, 0.5f));
        TB_TRY(sc_randf(sc, &rm, &drm, c, -0.5f, 0.5f));
        TB_TRY(sc_randf(sc, &rv, &drv, c, 0.5f, 1.5f));
        TB_TRY(sc_outf(sc, &y, &dy, n));
        TB_TRY(tb_ref_bn_fwd_infer(d, x, ga, be_, rm, rv, y));
        char ds[64];
        bn_desc_str(d, ds, sizeof ds);
        sc_case k;
        sc_case_start(&k, "%s", ds);
        if (sc_ran(sc, &k, be->bn_fwd_infer(be, d, dx, dga, dbe, drm, drv, dy), 0))
            TB_TRY(sc_cmp(sc, &k, "y", y, dy, n, TOL_SUM));
        sc_case_end(sc, &k);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_bn_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_BN_DESCS; i++) {
        const tb_bn_desc *d = &bn_descs[i];
        size_t n = (size_t)d->n * d->c * d->hw, c = (size_t)d->c;
        for (int acc = 0; acc < 2; acc++) {
            float *x, *dx_in, *ga, *dga, *be_, *rm, *rv, *y, *sm, *si, *g, *dg, *d_sm, *d_si;
            float *wdx, *odx, *wdg, *odg, *wdb, *odb;
            TB_TRY(sc_randf(sc, &x, &dx_in, n, -2.0f, 3.0f));
            TB_TRY(sc_randf(sc, &ga, &dga, c, 0.5f, 1.5f));
            TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
            /* the forward's saved statistics, from the reference */
            TB_TRY(sc_host(sc, (void **)&be_, c * sizeof(float)));
            TB_TRY(sc_host(sc, (void **)&rm, c * sizeof(float)));
            TB_TRY(sc_host(sc, (void **)&rv, c * sizeof(float)));
            TB_TRY(sc_host(sc, (void **)&y, n * sizeof(float)));
            TB_TRY(sc_host(sc, (void **)&sm, c * sizeof(float)));
            TB_TRY(sc_host(sc, (void **)&si, c * sizeof(float)));
            sc_fill(sc, be_, c, -0.5f, 0.5f);
            sc_fill(sc, rm, c, -0.5f, 0.5f);
            sc_fill(sc, rv, c, 0.5f, 1.5f);
            TB_TRY(tb_ref_bn_fwd_train(d, x, ga, be_, y, rm, rv, sm, si));
            TB_TRY(sc_upload(sc, (void **)&d_sm, sm, c * sizeof(float)));
            TB_TRY(sc_upload(sc, (void **)&d_si, si, c * sizeof(float)));
            TB_TRY(sc_outf(sc, &wdx, &odx, n));
            if (acc) {
                TB_TRY(sc_randf(sc, &wdg, &odg, c, -1.0f, 1.0f));
                TB_TRY(sc_randf(sc, &wdb, &odb, c, -1.0f, 1.0f));
            } else {
                TB_TRY(sc_outf(sc, &wdg, &odg, c));
                TB_TRY(sc_outf(sc, &wdb, &odb, c));
            }
            TB_TRY(tb_ref_bn_bwd(d, x, g, ga, sm, si, wdx, wdg, wdb, acc));
            char ds[64];
            bn_desc_str(d, ds, sizeof ds);
            sc_case k;
            sc_case_start(&k, "%s accumulate=%d", ds, acc);
            if (sc_ran(sc, &k, be->bn_bwd(be, d, dx_in, dg, dga, d_sm, d_si, odx, odg, odb, acc),
                       0)) {
                TB_TRY(sc_cmp(sc, &k, "dx", wdx, odx, n, TOL_CANCEL));
                TB_TRY(sc_cmp(sc, &k, "dgamma", wdg, odg, c, TOL_SUM));
                TB_TRY(sc_cmp(sc, &k, "dbeta", wdb, odb, c, TOL_SUM));
            }
            sc_case_end(sc, &k);
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

/* ------------------------------------------------------------ pooling */

static const tb_pool_desc pool_descs[] = {
    {TB_POOL_MAX, 2, 3, 7, 7, 3, 2, 1, TB_NCHW},
    {TB_POOL_MAX, 2, 4, 6, 5, 2, 2, 0, TB_NHWC},
    {TB_POOL_MAX, 1, 5, 9, 9, 3, 1, 1, TB_NHWC},
    {TB_POOL_AVG, 2, 3, 7, 7, 3, 2, 1, TB_NCHW},
    {TB_POOL_AVG, 1, 5, 9, 9, 3, 1, 1, TB_NHWC},
};
#define N_POOL_DESCS (sizeof pool_descs / sizeof pool_descs[0])

static void pool_desc_str(const tb_pool_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s %s %dx%dx%dx%d window=%d s%d p%d",
             d->kind == TB_POOL_MAX ? "max" : "avg", d->layout == TB_NHWC ? "NHWC" : "NCHW", d->n,
             d->c, d->h, d->w, d->window, d->stride, d->pad);
}

static int check_pool_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_POOL_DESCS; i++) {
        const tb_pool_desc *d = &pool_descs[i];
        int p, q, max = d->kind == TB_POOL_MAX;
        TB_TRY(tb_ref_pool_out(d, &p, &q));
        size_t nin = (size_t)d->n * d->c * d->h * d->w, nout = (size_t)d->n * d->c * p * q;
        float *x, *dx, *y, *dy;
        int32_t *am = NULL, *dam = NULL;
        TB_TRY(sc_randf(sc, &x, &dx, nin, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &y, &dy, nout));
        if (max) {
            TB_TRY(sc_host(sc, (void **)&am, nout * sizeof *am));
            TB_TRY(sc_dev(sc, (void **)&dam, nout * sizeof *dam));
        }
        TB_TRY(tb_ref_pool_fwd(d, x, y, am));
        char ds[96];
        pool_desc_str(d, ds, sizeof ds);
        sc_case c;
        sc_case_start(&c, "%s", ds);
        if (sc_ran(sc, &c, be->pool_fwd(be, d, dx, dy, dam), 0)) {
            TB_TRY(sc_cmp(sc, &c, "y", y, dy, nout, max ? TOL_EXACT : TOL_ROUND));
            if (max)
                TB_TRY(sc_cmp_exact(sc, &c, "argmax", am, dam, nout, sizeof *am));
        }
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_pool_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_POOL_DESCS; i++) {
        const tb_pool_desc *d = &pool_descs[i];
        int p, q, max = d->kind == TB_POOL_MAX;
        TB_TRY(tb_ref_pool_out(d, &p, &q));
        size_t nin = (size_t)d->n * d->c * d->h * d->w, nout = (size_t)d->n * d->c * p * q;
        float *x, *y, *g, *dg, *want, *out;
        int32_t *am = NULL, *dam = NULL;
        TB_TRY(sc_host(sc, (void **)&x, nin * sizeof *x));
        TB_TRY(sc_host(sc, (void **)&y, nout * sizeof *y));
        sc_fill(sc, x, nin, -1.0f, 1.0f);
        if (max)
            TB_TRY(sc_host(sc, (void **)&am, nout * sizeof *am));
        TB_TRY(tb_ref_pool_fwd(d, x, y, am)); /* the forward's argmax, from the reference */
        if (max)
            TB_TRY(sc_upload(sc, (void **)&dam, am, nout * sizeof *am));
        TB_TRY(sc_randf(sc, &g, &dg, nout, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, nin));
        TB_TRY(tb_ref_pool_bwd(d, g, am, want));
        char ds[96];
        pool_desc_str(d, ds, sizeof ds);
        sc_case c;
        sc_case_start(&c, "%s", ds);
        if (sc_ran(sc, &c, be->pool_bwd(be, d, dg, dam, out), 0))
            TB_TRY(sc_cmp(sc, &c, "dx", want, out, nin, TOL_ROUND));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ loss, reductions */

static const int xent_shapes[][2] = {{1, 10}, {7, 10}, {33, 1001}};
#define N_XENT_SHAPES (sizeof xent_shapes / sizeof xent_shapes[0])

static int xent_labels(sc_ctx *sc, int rows, int classes, int32_t **host, int32_t **dev)
{
    TB_TRY(sc_host(sc, (void **)host, (size_t)rows * sizeof **host));
    for (int r = 0; r < rows; r++)
        (*host)[r] = (int32_t)(sc_next(sc) % (uint64_t)classes);
    return sc_upload(sc, (void **)dev, *host, (size_t)rows * sizeof **host);
}

static int check_softmax_xent_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_XENT_SHAPES; i++) {
        int rows = xent_shapes[i][0], classes = xent_shapes[i][1];
        size_t n = (size_t)rows * classes;
        float *z, *dz, *pr, *dpr, *l, *dl;
        int32_t *lab, *dlab;
        TB_TRY(sc_randf(sc, &z, &dz, n, -4.0f, 4.0f));
        TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
        TB_TRY(sc_outf(sc, &pr, &dpr, n));
        TB_TRY(sc_outf(sc, &l, &dl, (size_t)rows));
        TB_TRY(tb_ref_softmax_xent_fwd(z, lab, rows, classes, pr, l));
        sc_case c;
        sc_case_start(&c, "rows=%d classes=%d", rows, classes);
        if (sc_ran(sc, &c, be->softmax_xent_fwd(be, dz, dlab, rows, classes, dpr, dl), 0)) {
            TB_TRY(sc_cmp(sc, &c, "probs", pr, dpr, n, TOL_SUM));
            TB_TRY(sc_cmp(sc, &c, "loss", l, dl, (size_t)rows, TOL_SUM));
        }
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_softmax_xent_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_XENT_SHAPES; i++) {
        int rows = xent_shapes[i][0], classes = xent_shapes[i][1];
        size_t n = (size_t)rows * classes;
        float *z, *pr, *dpr, *l, *want, *out;
        int32_t *lab, *dlab;
        TB_TRY(sc_host(sc, (void **)&z, n * sizeof *z));
        TB_TRY(sc_host(sc, (void **)&pr, n * sizeof *pr));
        TB_TRY(sc_host(sc, (void **)&l, (size_t)rows * sizeof *l));
        sc_fill(sc, z, n, -4.0f, 4.0f);
        TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
        TB_TRY(tb_ref_softmax_xent_fwd(z, lab, rows, classes, pr, l));
        TB_TRY(sc_upload(sc, (void **)&dpr, pr, n * sizeof *pr));
        TB_TRY(sc_outf(sc, &want, &out, n));
        float scale = 1.0f / (float)rows;
        tb_ref_softmax_xent_bwd(pr, lab, rows, classes, scale, want);
        sc_case c;
        sc_case_start(&c, "rows=%d classes=%d scale=1/%d", rows, classes, rows);
        if (sc_ran(sc, &c, be->softmax_xent_bwd(be, dpr, dlab, rows, classes, scale, out), 0))
            TB_TRY(sc_cmp(sc, &c, "dlogits", want, out, n, TOL_ROUND));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_reduce_sum(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    static const size_t sizes[] = {1, 1003, 65537, 1000003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        float *x, *dx, want, *out;
        TB_TRY(sc_randf(sc, &x, &dx, n, 0.1f, 1.0f)); /* positive: no cancellation */
        TB_TRY(sc_dev(sc, (void **)&out, sizeof *out));
        tb_ref_reduce_sum(x, n, &want);
        sc_case c;
        sc_case_start(&c, "n=%zu", n);
        if (sc_ran(sc, &c, be->reduce_sum(be, dx, n, out), 0))
            TB_TRY(sc_cmp(sc, &c, "sum", &want, out, 1, TOL_SUM));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_count_nonfinite(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx, want, *out;
        TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
        sc_fill(sc, x, n, -1.0f, 1.0f);
        if (n >= 4) { /* a NaN and both infinities; n == 1 checks a count of 0 */
            x[1] = NAN;
            x[n / 2] = INFINITY;
            x[n - 1] = -INFINITY;
        }
        TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
        TB_TRY(sc_dev(sc, (void **)&out, sizeof *out));
        tb_ref_count_nonfinite(x, n, &want);
        sc_case c;
        sc_case_start(&c, "n=%zu nonfinite=%g", n, want);
        if (sc_ran(sc, &c, be->count_nonfinite(be, dx, n, out), 0))
            TB_TRY(sc_cmp(sc, &c, "count", &want, out, 1, TOL_EXACT));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ dropout */

static const float dropout_ps[] = {0.1f, 0.5f};
#define DROPOUT_SEED 0x64726f70ull
/* Just below 2^32, so the larger sizes cross into the next block key of
 * kernels/rng_math.h. */
#define DROPOUT_OFFSET ((1ull << 32) - 1000)

static int check_dropout_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        for (int k = 0; k < 2; k++) {
            float p = dropout_ps[k], *x, *dx, *y, *dy;
            uint8_t *m, *dm;
            TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
            TB_TRY(sc_outf(sc, &y, &dy, n));
            TB_TRY(sc_host(sc, (void **)&m, n));
            TB_TRY(sc_dev(sc, (void **)&dm, n));
            tb_ref_dropout_fwd(p, DROPOUT_SEED, DROPOUT_OFFSET, x, y, m, n);
            sc_case c;
            sc_case_start(&c, "p=%g n=%zu offset=2^32-1000", p, n);
            if (sc_ran(sc, &c, be->dropout_fwd(be, p, DROPOUT_SEED, DROPOUT_OFFSET, dx, dy, dm, n),
                       0)) {
                TB_TRY(sc_cmp(sc, &c, "y", y, dy, n, TOL_EXACT));
                TB_TRY(sc_cmp_exact(sc, &c, "mask", m, dm, n, 1));
            }
            sc_case_end(sc, &c);
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

static int check_dropout_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        for (int k = 0; k < 2; k++) {
            float p = dropout_ps[k], *x, *y, *g, *dg, *want, *out;
            uint8_t *m, *dm;
            TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
            TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
            TB_TRY(sc_host(sc, (void **)&m, n));
            sc_fill(sc, x, n, -1.0f, 1.0f);
            tb_ref_dropout_fwd(p, DROPOUT_SEED, DROPOUT_OFFSET, x, y, m, n);
            TB_TRY(sc_upload(sc, (void **)&dm, m, n));
            TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
            TB_TRY(sc_outf(sc, &want, &out, n));
            tb_ref_dropout_bwd(p, m, g, want, n);
            sc_case c;
            sc_case_start(&c, "p=%g n=%zu", p, n);
            if (sc_ran(sc, &c, be->dropout_bwd(be, p, dm, dg, out, n), 0))
                TB_TRY(sc_cmp(sc, &c, "dx", want, out, n, TOL_EXACT));
            sc_case_end(sc, &c);
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

/* ------------------------------------------------------------ optimizers */

typedef struct opt_case {
    const char *name;
    tb_opt_hparams hp;
    int required; /* else TB_ERR_UNSUPPORTED (from the backend or the reference) is n/a */
} opt_case;

static const opt_case opt_cases[] = {
    {"sgd momentum=0.9 wd=1e-4",
     {.kind = TB_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .grad_scale = 1.0f},
     1},
    {"sgd momentum=0 grad_scale=1024",
     {.kind = TB_OPT_SGD, .lr = 0.05f, .grad_scale = 1024.0f},
     1},
    {"adamw wd=0.01",
     {.kind = TB_OPT_ADAMW, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
      .eps = 1e-8f, .grad_scale = 1.0f},
     1},
    {"lars",
     {.kind = TB_OPT_LARS, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f,
      .trust_coef = 1e-3f, .eps = 1e-8f, .grad_scale = 1.0f},
     1},
    {"lars momentum=0 grad_scale=512",
     {.kind = TB_OPT_LARS, .lr = 0.1f, .weight_decay = 1e-4f, .trust_coef = 1e-3f, .eps = 1e-8f,
      .grad_scale = 512.0f},
     1},
    {"lamb",
     {.kind = TB_OPT_LAMB, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
      .eps = 1e-6f, .grad_scale = 1.0f},
     1},
    {"novograd",
     {.kind = TB_OPT_NOVOGRAD, .lr = 1e-3f, .weight_decay = 1e-3f, .beta1 = 0.95f,
      .beta2 = 0.98f, .eps = 1e-8f, .grad_scale = 1.0f},
     1},
};
#define N_OPT_CASES (sizeof opt_cases / sizeof opt_cases[0])

enum { OPT_TENSORS = 3 };
static const size_t opt_sizes[OPT_TENSORS] = {1003, 1, 37};

/* Which state buffers an optimizer keeps (NULL in the view otherwise). */
static int opt_has_state1(const tb_opt_hparams *hp)
{
    return hp->kind != TB_OPT_SGD || hp->momentum != 0.0f;
}
static int opt_has_state2(const tb_opt_hparams *hp)
{
    return hp->kind == TB_OPT_ADAMW || hp->kind == TB_OPT_LAMB;
}
/* NovoGrad's one float per tensor (tb_param_view.tensor_state) */
static int opt_has_tensor_state(const tb_opt_hparams *hp) { return hp->kind == TB_OPT_NOVOGRAD; }

static void opt_views(tb_param_view *v, float *p, float *g, float *s1, float *s2, float *ts)
{
    size_t off = 0;
    for (int t = 0; t < OPT_TENSORS; t++) {
        v[t] = (tb_param_view){p + off, g + off, s1 ? s1 + off : NULL, s2 ? s2 + off : NULL,
                               opt_sizes[t], ts ? ts + t : NULL};
        off += opt_sizes[t];
    }
}

/* Two steps (3 and 4, so bias correction is not trivial) from random
 * parameters, gradients and optimizer state. */
static int opt_one(sc_ctx *sc, const opt_case *oc, int fused)
{
    tb_backend *be = sc->be;
    size_t total = 0;
    for (int t = 0; t < OPT_TENSORS; t++)
        total += opt_sizes[t];
    int h1 = opt_has_state1(&oc->hp), h2 = opt_has_state2(&oc->hp);
    int hts = opt_has_tensor_state(&oc->hp);
    float *p, *dp, *g, *dg, *s1 = NULL, *ds1 = NULL, *s2 = NULL, *ds2 = NULL;
    float *ts = NULL, *dts = NULL;
    TB_TRY(sc_randf(sc, &p, &dp, total, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &g, &dg, total, -oc->hp.grad_scale, oc->hp.grad_scale));
    if (h1)
        TB_TRY(sc_randf(sc, &s1, &ds1, total, -0.1f, 0.1f));
    if (h2)
        TB_TRY(sc_randf(sc, &s2, &ds2, total, 1e-4f, 1e-2f)); /* a second moment: positive */
    if (hts) /* a squared gradient norm: positive, near sum g^2 of the tensors */
        TB_TRY(sc_randf(sc, &ts, &dts, OPT_TENSORS, 1.0f, 300.0f));
    tb_param_view hv[OPT_TENSORS], dv[OPT_TENSORS];
    opt_views(hv, p, g, s1, s2, ts);
    opt_views(dv, dp, dg, ds1, ds2, dts);
    sc_case c;
    sc_case_start(&c, "%s fused=%d tensors=1003,1,37 steps=3,4", oc->name, fused);
    tb_opt_hparams hp = oc->hp;
    int ran = 1;
    for (int step = 3; step <= 4 && ran; step++) {
        hp.step = step;
        int rc = tb_ref_opt_step(&hp, hv, OPT_TENSORS);
        if (rc == TB_ERR_UNSUPPORTED && !oc->required) {
            c.na = 1;
            snprintf(c.why, sizeof c.why, "no reference yet: %s", tb_error_message());
            tb_error_clear();
            sc_case_end(sc, &c);
            return sc_release(sc);
        }
        TB_TRY(rc);
        ran = sc_ran(sc, &c, be->opt_step(be, &hp, dv, OPT_TENSORS, fused), !oc->required);
    }
    if (ran) {
        TB_TRY(sc_cmp(sc, &c, "param", p, dp, total, TOL_SUM));
        if (h1)
            TB_TRY(sc_cmp(sc, &c, "state1", s1, ds1, total, TOL_SUM));
        if (h2)
            TB_TRY(sc_cmp(sc, &c, "state2", s2, ds2, total, TOL_SUM));
        if (hts)
            TB_TRY(sc_cmp(sc, &c, "tensor_state", ts, dts, OPT_TENSORS, TOL_SUM));
    }
    sc_case_end(sc, &c);
    return sc_release(sc);
}

static int check_opt_step(sc_ctx *sc)
{
    for (size_t i = 0; i < N_OPT_CASES; i++)
        for (int fused = 0; fused < 2; fused++)
            TB_TRY(opt_one(sc, &opt_cases[i], fused));
    return TB_OK;
}

/* ------------------------------------------------------------ layer norm, attention */

static const int ln_shapes[][2] = {{1, 7}, {37, 65}, {3, 1001}};
#define N_LN_SHAPES (sizeof ln_shapes / sizeof ln_shapes[0])
#define LN_EPS 1e-5f

static const char *const ln_names[] = {"unfused", "fused"};

static int check_layernorm_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_LN_SHAPES; i++) {
        int rows = ln_shapes[i][0], cols = ln_shapes[i][1];
        size_t n = (size_t)rows * cols;
        float *x, *dx, *ga, *dga, *bt, *dbt, *y, *sm, *sr;
        TB_TRY(sc_randf(sc, &x, &dx, n, -2.0f, 3.0f));
        TB_TRY(sc_randf(sc, &ga, &dga, (size_t)cols, 0.5f, 1.5f));
        TB_TRY(sc_randf(sc, &bt, &dbt, (size_t)cols, -0.5f, 0.5f));
        TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
        TB_TRY(sc_host(sc, (void **)&sm, (size_t)rows * sizeof *sm));
        TB_TRY(sc_host(sc, (void **)&sr, (size_t)rows * sizeof *sr));
        TB_TRY(tb_ref_layernorm_fwd(x, ga, bt, LN_EPS, rows, cols, y, sm, sr));
        for (int v = 0; v < 2; v++) {
            float *oy, *osm, *osr;
            TB_TRY(sc_dev(sc, (void **)&oy, n * sizeof *oy));
            TB_TRY(sc_dev(sc, (void **)&osm, (size_t)rows * sizeof *osm));
            TB_TRY(sc_dev(sc, (void **)&osr, (size_t)rows * sizeof *osr));
            sc_case c;
            sc_case_start(&c, "%s rows=%d cols=%d", ln_names[v], rows, cols);
            if (sc_ran(sc, &c, be->layernorm_fwd(be, (tb_ln_variant)v, dx, dga, dbt, LN_EPS, rows,
                                                 cols, oy, osm, osr), 0)) {
                TB_TRY(sc_cmp(sc, &c, "y", y, oy, n, TOL_SUM));
                TB_TRY(sc_cmp(sc, &c, "save_mean", sm, osm, (size_t)rows, TOL_SUM));
                TB_TRY(sc_cmp(sc, &c, "save_rstd", sr, osr, (size_t)rows, TOL_SUM));
            }
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int check_layernorm_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_LN_SHAPES; i++) {
        int rows = ln_shapes[i][0], cols = ln_shapes[i][1];
        size_t n = (size_t)rows * cols, nc = (size_t)cols;
        for (int v = 0; v < 2; v++) {
            for (int acc = 0; acc < 2; acc++) {
                float *x, *dx_in, *ga, *dga, *bt, *y, *sm, *sr, *dsm, *dsr, *g, *dg;
                float *wdx, *odx, *wdg, *odg, *wdb, *odb;
                TB_TRY(sc_randf(sc, &x, &dx_in, n, -2.0f, 3.0f));
                TB_TRY(sc_randf(sc, &ga, &dga, nc, 0.5f, 1.5f));
                TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
                TB_TRY(sc_host(sc, (void **)&bt, nc * sizeof *bt));
                TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
                TB_TRY(sc_host(sc, (void **)&sm, (size_t)rows * sizeof *sm));
                TB_TRY(sc_host(sc, (void **)&sr, (size_t)rows * sizeof *sr));
                sc_fill(sc, bt, nc, -0.5f, 0.5f);
                /* the forward's saved statistics, from the reference */
                TB_TRY(tb_ref_layernorm_fwd(x, ga, bt, LN_EPS, rows, cols, y, sm, sr));
                TB_TRY(sc_upload(sc, (void **)&dsm, sm, (size_t)rows * sizeof *sm));
                TB_TRY(sc_upload(sc, (void **)&dsr, sr, (size_t)rows * sizeof *sr));
                TB_TRY(sc_outf(sc, &wdx, &odx, n));
                if (acc) {
                    TB_TRY(sc_randf(sc, &wdg, &odg, nc, -1.0f, 1.0f));
                    TB_TRY(sc_randf(sc, &wdb, &odb, nc, -1.0f, 1.0f));
                } else {
                    TB_TRY(sc_outf(sc, &wdg, &odg, nc));
                    TB_TRY(sc_outf(sc, &wdb, &odb, nc));
                }
                TB_TRY(tb_ref_layernorm_bwd(x, g, ga, LN_EPS, rows, cols, wdx, wdg, wdb, acc));
                sc_case c;
                sc_case_start(&c, "%s rows=%d cols=%d accumulate=%d", ln_names[v], rows, cols,
                              acc);
                if (sc_ran(sc, &c, be->layernorm_bwd(be, (tb_ln_variant)v, dx_in, dg, dga, dsm, dsr,
                                                     rows, cols, odx, odg, odb, acc), 0)) {
                    TB_TRY(sc_cmp(sc, &c, "dx", wdx, odx, n, TOL_CANCEL));
                    TB_TRY(sc_cmp(sc, &c, "dgamma", wdg, odg, nc, TOL_SUM));
                    TB_TRY(sc_cmp(sc, &c, "dbeta", wdb, odb, nc, TOL_SUM));
                }
                sc_case_end(sc, &c);
                TB_TRY(sc_release(sc));
            }
        }
    }
    return TB_OK;
}

/* Odd sequence lengths, causal and not, head sizes 16 and 64. */
static const tb_attn_desc attn_descs[] = {
    {2, 3, 7, 16, 0, 0.25f},
    {1, 2, 65, 16, 1, 0.25f},
    {2, 1, 33, 64, 1, 0.125f},
};
#define N_ATTN_DESCS (sizeof attn_descs / sizeof attn_descs[0])

static const char *const attn_names[] = {"manual", "fused"};

static void attn_desc_str(const tb_attn_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "B=%d H=%d T=%d D=%d%s", d->batch, d->heads, d->seq, d->head_dim,
             d->causal ? " causal" : "");
}

/* What backend.h says saved holds: MANUAL P (B, H, T, T), FUSED the row
 * logsumexp (B, H, T), in floats. */
static size_t attn_saved_floats(const tb_attn_desc *d, int variant)
{
    size_t rows = (size_t)d->batch * d->heads * d->seq;
    return variant == TB_ATTN_MANUAL ? rows * d->seq : rows;
}

static int check_attention_workspace(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_ATTN_DESCS; i++) {
        for (int v = 0; v < 2; v++) {
            char ds[64];
            attn_desc_str(&attn_descs[i], ds, sizeof ds);
            size_t saved = 0, temp = 0, saved_only = 0;
            sc_case c;
            sc_case_start(&c, "%s %s", attn_names[v], ds);
            int rc = be->attention_workspace(be, (tb_attn_variant)v, &attn_descs[i], &saved, &temp);
            if (rc == TB_OK) /* either pointer may be NULL */
                rc = be->attention_workspace(be, (tb_attn_variant)v, &attn_descs[i], &saved_only,
                                             NULL);
            size_t want = attn_saved_floats(&attn_descs[i], v) * sizeof(float);
            if (rc != TB_OK)
                sc_case_fail_rc(&c, "attention_workspace", rc);
            else if (saved != want || saved_only != want)
                sc_case_fail(&c, "saved_bytes %zu (%zu with temp NULL), backend.h says %zu", saved,
                             saved_only, want);
            else
                snprintf(c.note, sizeof c.note, "saved=%zu temp=%zu bytes", saved, temp);
            sc_case_end(sc, &c);
        }
    }
    return TB_OK;
}

/* q, k, v random on both sides; saved sized by backend.h's rule. */
typedef struct attn_io {
    size_t n, rows;
    float *q, *k, *v, *dq, *dk, *dv; /* host, device */
} attn_io;

static int attn_inputs(sc_ctx *sc, const tb_attn_desc *d, attn_io *io)
{
    io->rows = (size_t)d->batch * d->heads * d->seq;
    io->n = io->rows * d->head_dim;
    TB_TRY(sc_randf(sc, &io->q, &io->dq, io->n, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &io->k, &io->dk, io->n, -1.0f, 1.0f));
    return sc_randf(sc, &io->v, &io->dv, io->n, -1.0f, 1.0f);
}

static int check_attention_fwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_ATTN_DESCS; i++) {
        const tb_attn_desc *d = &attn_descs[i];
        attn_io io;
        float *out, *lse;
        TB_TRY(attn_inputs(sc, d, &io));
        TB_TRY(sc_host(sc, (void **)&out, io.n * sizeof *out));
        TB_TRY(sc_host(sc, (void **)&lse, io.rows * sizeof *lse));
        TB_TRY(tb_ref_attention_fwd(d, io.q, io.k, io.v, out, lse));
        char ds[64];
        attn_desc_str(d, ds, sizeof ds);
        for (int v = 0; v < 2; v++) {
            float *o_out, *o_saved;
            TB_TRY(sc_dev(sc, (void **)&o_out, io.n * sizeof *o_out));
            TB_TRY(sc_dev(sc, (void **)&o_saved, attn_saved_floats(d, v) * sizeof *o_saved));
            sc_case c;
            sc_case_start(&c, "%s %s", attn_names[v], ds);
            if (sc_ran(sc, &c, be->attention_fwd(be, (tb_attn_variant)v, d, io.dq, io.dk, io.dv,
                                                 o_out, o_saved), 0)) {
                TB_TRY(sc_cmp(sc, &c, "out", out, o_out, io.n, TOL_SUM));
                if (v == TB_ATTN_FUSED)
                    TB_TRY(sc_cmp(sc, &c, "logsumexp", lse, o_saved, io.rows, TOL_SUM));
            }
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* The backward takes the forward's out and saved in the variant's own
 * format, so the backend's forward makes them (check_attention_fwd checks
 * that forward against the reference). */
static int check_attention_bwd(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_ATTN_DESCS; i++) {
        const tb_attn_desc *d = &attn_descs[i];
        attn_io io;
        float *g, *dg, *wq, *wk, *wv;
        TB_TRY(attn_inputs(sc, d, &io));
        TB_TRY(sc_randf(sc, &g, &dg, io.n, -1.0f, 1.0f));
        TB_TRY(sc_host(sc, (void **)&wq, io.n * sizeof *wq));
        TB_TRY(sc_host(sc, (void **)&wk, io.n * sizeof *wk));
        TB_TRY(sc_host(sc, (void **)&wv, io.n * sizeof *wv));
        TB_TRY(tb_ref_attention_bwd(d, io.q, io.k, io.v, g, wq, wk, wv));
        char ds[64];
        attn_desc_str(d, ds, sizeof ds);
        for (int v = 0; v < 2; v++) {
            float *o_out, *o_saved, *oq, *ok, *ov;
            TB_TRY(sc_dev(sc, (void **)&o_out, io.n * sizeof *o_out));
            TB_TRY(sc_dev(sc, (void **)&o_saved, attn_saved_floats(d, v) * sizeof *o_saved));
            TB_TRY(sc_dev(sc, (void **)&oq, io.n * sizeof *oq));
            TB_TRY(sc_dev(sc, (void **)&ok, io.n * sizeof *ok));
            TB_TRY(sc_dev(sc, (void **)&ov, io.n * sizeof *ov));
            sc_case c;
            sc_case_start(&c, "%s %s", attn_names[v], ds);
            int rc = be->attention_fwd(be, (tb_attn_variant)v, d, io.dq, io.dk, io.dv, o_out,
                                       o_saved);
            if (rc != TB_OK) {
                sc_case_fail_rc(&c, "attention_fwd (for the backward's inputs)", rc);
            } else if (sc_ran(sc, &c, be->attention_bwd(be, (tb_attn_variant)v, d, io.dq, io.dk,
                                                        io.dv, o_out, dg, o_saved, oq, ok, ov),
                              0)) {
                TB_TRY(sc_cmp(sc, &c, "dq", wq, oq, io.n, TOL_CANCEL));
                TB_TRY(sc_cmp(sc, &c, "dk", wk, ok, io.n, TOL_CANCEL));
                TB_TRY(sc_cmp(sc, &c, "dv", wv, ov, io.n, TOL_CANCEL));
            }
            sc_case_end(sc, &c);
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ runtime slots */

/* Calls a slot of the backend under test; a failure fails case c and jumps. */
#define SC_CALL(c, label, expr)                   \
    do {                                          \
        int sc_rc_ = (expr);                      \
        if (sc_rc_ != TB_OK) {                    \
            sc_case_fail_rc((c), #expr, sc_rc_);  \
            goto label;                           \
        }                                         \
    } while (0)

static size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

static int check_mem_roundtrip(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 1000003; /* odd: no copy path sees whole vectors only */
    unsigned char *pageable = NULL, *pinned = NULL;
    void *d1 = NULL, *d2 = NULL;
    sc_case c;
    sc_case_start(&c, "round trip %zu bytes: dev_alloc, copy_h2d, copy_d2d, copy_peer, copy_d2h, "
                      "memset, pageable and pinned host", bytes);
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&pageable, bytes, 0));
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&pinned, bytes, 1));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d1, bytes));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d2, bytes));
    for (size_t i = 0; i < bytes; i++)
        pageable[i] = (unsigned char)(sc_next(sc) >> 56);
    memset(pinned, 0, bytes);
    SC_CALL(&c, out_free, be->copy_h2d(be, d1, pageable, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_d2d(be, d2, d1, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d2, bytes, NULL));
    if (memcmp(pinned, pageable, bytes) != 0)
        sc_case_fail(&c, "h2d, d2d, d2h changed byte %zu", first_diff(pinned, pageable, bytes));
    /* copy_peer within one device here; across GPUs in the DataParallel step check */
    SC_CALL(&c, out_free, be->memset(be, d1, 0, bytes, NULL));
    SC_CALL(&c, out_free, be->copy_peer(be, d1, be, d2, bytes));
    SC_CALL(&c, out_free, be->sync(be));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d1, bytes, NULL));
    if (memcmp(pinned, pageable, bytes) != 0)
        sc_case_fail(&c, "copy_peer changed byte %zu", first_diff(pinned, pageable, bytes));
    /* all but the last 7 bytes: memset must stop where it is told */
    SC_CALL(&c, out_free, be->memset(be, d2, 0x5a, bytes - 7, NULL));
    SC_CALL(&c, out_free, be->copy_d2h(be, pinned, d2, bytes, NULL));
    for (size_t i = 0; i < bytes && !c.failed; i++) {
        unsigned char want = i < bytes - 7 ? 0x5a : pageable[i];
        if (pinned[i] != want)
            sc_case_fail(&c, "after memset of %zu bytes, byte %zu is 0x%02x, want 0x%02x",
                         bytes - 7, i, pinned[i], want);
    }
out_free:
    if (d2)
        SC_CALL(&c, out_free_d1, be->dev_free(be, d2));
out_free_d1:
    if (d1)
        SC_CALL(&c, out_free_host, be->dev_free(be, d1));
out_free_host:
    if (pinned)
        SC_CALL(&c, out_free_pageable, be->host_free(be, pinned, 1));
out_free_pageable:
    if (pageable)
        SC_CALL(&c, out_end, be->host_free(be, pageable, 0));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* mem_stats, mem_reset_peak, mem_set_limit, and the slots that may be NULL. */
static int check_mem_accounting(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 1 << 20;
    size_t in0, peak0, in1, peak1, in2, peak2, in3;
    void *d = NULL, *extra = NULL;
    sc_case c;
    sc_case_start(&c, "accounting: mem_stats, mem_reset_peak, mem_set_limit%s%s",
                  be->mem_empty_cache ? ", mem_empty_cache" : "",
                  be->mem_set_mode ? ", mem_set_mode" : "");
    SC_CALL(&c, out_end, be->mem_stats(be, &in0, &peak0));
    SC_CALL(&c, out_end, be->dev_alloc(be, &d, bytes));
    SC_CALL(&c, out_free, be->mem_stats(be, &in1, &peak1));
    if (in1 < in0 + bytes)
        sc_case_fail(&c, "in_use grew by %zd bytes after a %zu-byte dev_alloc",
                     (ssize_t)(in1 - in0), bytes);
    if (peak1 < in1)
        sc_case_fail(&c, "peak %zu below in_use %zu", peak1, in1);
    SC_CALL(&c, out_free, be->mem_reset_peak(be));
    SC_CALL(&c, out_free, be->mem_stats(be, &in2, &peak2));
    if (peak2 < in2 || peak2 > peak1)
        sc_case_fail(&c, "after mem_reset_peak: peak %zu, in_use %zu (peak before %zu)", peak2,
                     in2, peak1);
    SC_CALL(&c, out_free, be->mem_set_limit(be, in2 + 4096));
    int rc = be->dev_alloc(be, &extra, bytes);
    if (rc != TB_ERR_DEVICE_OOM)
        sc_case_fail(&c, "dev_alloc past mem_set_limit returned %s, want TB_ERR_DEVICE_OOM",
                     tb_err_name(rc));
    tb_error_clear();
    if (rc == TB_OK)
        SC_CALL(&c, out_free, be->dev_free(be, extra));
    SC_CALL(&c, out_free, be->mem_set_limit(be, 0));
    SC_CALL(&c, out_end, be->dev_free(be, d));
    d = NULL;
    SC_CALL(&c, out_end, be->mem_stats(be, &in3, &peak2));
    if (in3 + bytes > in2)
        sc_case_fail(&c, "in_use fell from %zu to %zu after freeing %zu bytes", in2, in3, bytes);
    if (be->mem_empty_cache)
        SC_CALL(&c, out_end, be->mem_empty_cache(be));
    if (be->mem_set_mode) {
        SC_CALL(&c, out_end, be->mem_set_mode(be, TB_MEM_PLAIN, 0));
        SC_CALL(&c, out_end, be->dev_alloc(be, &d, 4096));
        SC_CALL(&c, out_free, be->dev_free(be, d));
        d = NULL;
        SC_CALL(&c, out_end, be->mem_set_mode(be, TB_MEM_CACHING, 0)); /* the default */
    }
out_free:
    if (d)
        SC_CALL(&c, out_end, be->dev_free(be, d));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* Async copies and memset on a created stream, ordered by events. */
static int check_streams(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t bytes = 262147;
    unsigned char *src = NULL, *dst = NULL;
    void *d1 = NULL, *d2 = NULL;
    tb_stream *s = NULL;
    tb_event *e0 = NULL, *e1 = NULL;
    float ms = -1.0f;
    sc_case c;
    sc_case_start(&c, "streams and events: async h2d, d2d, memset, d2h on a created stream; "
                      "record, wait, sync, elapsed");
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&src, bytes, 1));
    SC_CALL(&c, out_free, be->host_alloc(be, (void **)&dst, bytes, 1));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d1, bytes));
    SC_CALL(&c, out_free, be->dev_alloc(be, &d2, bytes));
    SC_CALL(&c, out_free, be->stream_create(be, &s));
    SC_CALL(&c, out_free, be->event_create(be, &e0));
    SC_CALL(&c, out_free, be->event_create(be, &e1));
    for (size_t i = 0; i < bytes; i++)
        src[i] = (unsigned char)(sc_next(sc) >> 56) | 1; /* never 0: the memset below writes 0 */
    memset(dst, 0x77, bytes);
    SC_CALL(&c, out_free, be->event_record(be, e0, s));
    SC_CALL(&c, out_free, be->copy_h2d(be, d1, src, bytes, s));
    SC_CALL(&c, out_free, be->copy_d2d(be, d2, d1, bytes, s));
    SC_CALL(&c, out_free, be->memset(be, d1, 0, bytes, s));
    SC_CALL(&c, out_free, be->copy_d2h(be, dst, d2, bytes, s));
    SC_CALL(&c, out_free, be->event_record(be, e1, s));
    SC_CALL(&c, out_free, be->stream_wait_event(be, NULL, e1));
    SC_CALL(&c, out_free, be->event_sync(be, e1));
    SC_CALL(&c, out_free, be->stream_sync(be, s));
    SC_CALL(&c, out_free, be->sync(be));
    SC_CALL(&c, out_free, be->event_elapsed_ms(be, e0, e1, &ms));
    if (!(ms >= 0.0f) || !isfinite(ms))
        sc_case_fail(&c, "event_elapsed_ms gave %g ms, want a finite value >= 0", ms);
    if (memcmp(dst, src, bytes) != 0)
        sc_case_fail(&c, "async h2d, d2d, d2h changed byte %zu", first_diff(dst, src, bytes));
    SC_CALL(&c, out_free, be->copy_d2h(be, dst, d1, bytes, NULL));
    for (size_t i = 0; i < bytes && !c.failed; i++)
        if (dst[i] != 0)
            sc_case_fail(&c, "async memset left byte %zu as 0x%02x", i, dst[i]);
    snprintf(c.note, sizeof c.note, "elapsed=%.3g ms", ms);
out_free:
    if (e1)
        SC_CALL(&c, out_free_e0, be->event_destroy(be, e1));
out_free_e0:
    if (e0)
        SC_CALL(&c, out_free_stream, be->event_destroy(be, e0));
out_free_stream:
    if (s)
        SC_CALL(&c, out_free_d2, be->stream_destroy(be, s));
out_free_d2:
    if (d2)
        SC_CALL(&c, out_free_d1, be->dev_free(be, d2));
out_free_d1:
    if (d1)
        SC_CALL(&c, out_free_dst, be->dev_free(be, d1));
out_free_dst:
    if (dst)
        SC_CALL(&c, out_free_src, be->host_free(be, dst, 1));
out_free_src:
    if (src)
        SC_CALL(&c, out_end, be->host_free(be, src, 1));
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

static int check_device_info(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    tb_device_info info;
    sc_case c;
    sc_case_start(&c, "fingerprint fields");
    SC_CALL(&c, out_end, be->device_info(be, &info));
    if (strcmp(info.backend, be->name) != 0)
        sc_case_fail(&c, "backend \"%s\", want \"%s\"", info.backend, be->name);
    if (!info.name[0])
        sc_case_fail(&c, "no device name");
    if (info.index != be->device)
        sc_case_fail(&c, "index %d, want %d", info.index, be->device);
    snprintf(c.note, sizeof c.note, "%s %d: %s", info.backend, info.index, info.name);
out_end:
    sc_case_end(sc, &c);
    return TB_OK;
}

/* ------------------------------------------------------------ capture and device data */

/* graph_begin .. graph_destroy, one case for the four slots: add then axpby
 * captured, replayed twice with new inputs copied into the same buffers
 * between replays, against the same ops run directly (bitwise: the same
 * kernels on the same data). */
static int check_graph_capture(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    const size_t n = 4097;
    float *a, *da, *b, *db, *want, *dwant, *out, *dout;
    tb_graph *g = NULL;
    sc_case c;
    TB_TRY(sc_randf(sc, &a, &da, n, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &b, &db, n, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &dwant, n));
    TB_TRY(sc_outf(sc, &out, &dout, n));
    sc_case_start(&c, "add + axpby captured, replayed twice, n=%zu", n);
    SC_CALL(&c, out_end, be->graph_begin(be));
    int rc = be->add(be, da, db, dout, n);
    if (rc == TB_OK)
        rc = be->axpby(be, 2.0f, da, 0.5f, dout, n);
    tb_graph *tmp = NULL;
    int end_rc = be->graph_end(be, &tmp); /* always ends the capture */
    g = tmp;
    SC_CALL(&c, out_end, rc);
    SC_CALL(&c, out_end, end_rc);
    for (int rep = 0; rep < 2 && !c.failed; rep++) {
        if (rep == 1) { /* new inputs in the captured buffers */
            sc_fill(sc, a, n, -2.0f, 2.0f);
            SC_CALL(&c, out_end, be->copy_h2d(be, da, a, n * sizeof *a, NULL));
        }
        SC_CALL(&c, out_end, be->memset(be, dout, 0xff, n * sizeof(float), NULL));
        SC_CALL(&c, out_end, be->graph_launch(be, g));
        SC_CALL(&c, out_end, be->add(be, da, db, dwant, n));
        SC_CALL(&c, out_end, be->axpby(be, 2.0f, da, 0.5f, dwant, n));
        if (!sc_ran(sc, &c, TB_OK, 0))
            goto out_end;
        SC_CALL(&c, out_end, be->copy_d2h(be, want, dwant, n * sizeof *want, NULL));
        TB_TRY(sc_cmp_exact(sc, &c, rep ? "replay 2" : "replay 1", want, dout, n, sizeof(float)));
    }
out_end:
    if (g) {
        int drc = be->graph_destroy(be, g);
        if (drc != TB_OK)
            sc_case_fail_rc(&c, "graph_destroy", drc);
    }
    sc_case_end(sc, &c);
    return TB_OK;
}

/* augment_u8 against kernels/augment_math.h on the host (the function
 * datasets/augment.c runs; //datasets:augment_test ties the two), NCHW and
 * NHWC, 1 and 3 channels, with crops off the edge and flips. */
static int check_augment_u8(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    static const int shapes[2][4] = {{1, 28, 28, 2}, {3, 32, 30, 4}};
    const int n = 5;
    for (int si = 0; si < 2; si++)
        for (int lay = 0; lay < 2; lay++) {
            tb_augment_desc d = {.c = shapes[si][0], .h = shapes[si][1], .w = shapes[si][2],
                                 .pad = shapes[si][3], .layout = lay ? TB_NHWC : TB_NCHW};
            size_t plane = (size_t)d.h * d.w, per = plane * d.c, total = per * n;
            uint8_t *src, *dsrc;
            int32_t params[3 * 5], *dparams;
            float *want, *dout;
            for (int ch = 0; ch < d.c; ch++)
                tb_augment_norm(1, 0.3f + 0.1f * ch, 0.35f - 0.05f * ch, &d.scale[ch],
                                &d.bias[ch]);
            TB_TRY(sc_host(sc, (void **)&src, total));
            for (size_t i = 0; i < total; i++)
                src[i] = (uint8_t)(sc_next(sc) >> 56);
            for (int s = 0; s < n; s++) {
                params[3 * s] = (int32_t)(sc_next(sc) % (uint64_t)(2 * d.pad + 1));
                params[3 * s + 1] = s == 0 ? 0 : (int32_t)(sc_next(sc) % (uint64_t)(2 * d.pad + 1));
                params[3 * s + 2] = s % 2;
            }
            TB_TRY(sc_upload(sc, (void **)&dsrc, src, total));
            TB_TRY(sc_upload(sc, (void **)&dparams, params, sizeof params));
            TB_TRY(sc_outf(sc, &want, &dout, total));
            for (int s = 0; s < n; s++)
                for (int ch = 0; ch < d.c; ch++)
                    for (int y = 0; y < d.h; y++)
                        for (int x = 0; x < d.w; x++) {
                            size_t o = lay ? s * per + ((size_t)y * d.w + x) * d.c + ch
                                           : s * per + ch * plane + (size_t)y * d.w + x;
                            want[o] = tb_augment_pixel(src + s * per + ch * plane, d.h, d.w,
                                                       d.pad, params[3 * s], params[3 * s + 1],
                                                       params[3 * s + 2], d.scale[ch],
                                                       d.bias[ch], y, x);
                        }
            sc_case c;
            sc_case_start(&c, "%dx%dx%d pad %d %s n=%d", d.c, d.h, d.w, d.pad,
                          lay ? "NHWC" : "NCHW", n);
            if (sc_ran(sc, &c, be->augment_u8(be, &d, dsrc, dparams, dout, n), 0))
                TB_TRY(sc_cmp_exact(sc, &c, "images", want, dout, total, sizeof(float)));
            sc_case_end(sc, &c);
            TB_TRY(sc_release(sc));
        }
    return TB_OK;
}

static int check_labels_u8_to_i32(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    static const int sizes[] = {1, 255, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        uint8_t *src, *dsrc;
        int32_t *want, *dout;
        TB_TRY(sc_host(sc, (void **)&src, (size_t)n));
        TB_TRY(sc_host(sc, (void **)&want, (size_t)n * sizeof *want));
        for (int i = 0; i < n; i++) {
            src[i] = (uint8_t)(sc_next(sc) >> 56);
            want[i] = src[i];
        }
        TB_TRY(sc_upload(sc, (void **)&dsrc, src, (size_t)n));
        TB_TRY(sc_dev(sc, (void **)&dout, (size_t)n * sizeof *dout));
        sc_case c;
        sc_case_start(&c, "n=%d", n);
        if (sc_ran(sc, &c, be->labels_u8_to_i32(be, dsrc, dout, n), 0))
            TB_TRY(sc_cmp_exact(sc, &c, "labels", want, dout, (size_t)n, sizeof *want));
        sc_case_end(sc, &c);
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* ------------------------------------------------------------ the tables */

/* Op slots and their checks. null_ok: the reason lib/backend.h gives for
 * allowing the slot to be NULL (then NULL is n/a), or NULL. */
#define SC_NULL_GRAPH "lib/backend.h: n/a on the CPU backend, no kernel launches to capture"

typedef struct sc_op_check {
    const char *slot;
    int (*check)(sc_ctx *sc);
    const char *null_ok;
} sc_op_check;

static const sc_op_check op_checks[] = {
    {"gelu_fwd", check_gelu_fwd, NULL},
    {"gelu_bwd", check_gelu_bwd, NULL},
    {"relu_fwd", check_relu_fwd, NULL},
    {"relu_bwd", check_relu_bwd, NULL},
    {"add", check_add, NULL},
    {"axpby", check_axpby, NULL},
    {"gemm", check_gemm, NULL},
    {"gemm_lowp", check_gemm_lowp, NULL},
    {"cast_f32_to_lowp", check_cast_f32_to_lowp, NULL},
    {"cast_lowp_to_f32", check_cast_lowp_to_f32, NULL},
    {"bias_add", check_bias_add, NULL},
    {"bias_grad", check_bias_grad, NULL},
    {"conv_algo_default", check_conv_algo_default, NULL},
    {"conv_find", check_conv_find, NULL},
    {"conv_fwd", check_conv_fwd, NULL},
    {"conv_bwd_data", check_conv_bwd_data, NULL},
    {"conv_bwd_filter", check_conv_bwd_filter, NULL},
    {"bn_fwd_train", check_bn_fwd_train, NULL},
    {"bn_fwd_infer", check_bn_fwd_infer, NULL},
    {"bn_bwd", check_bn_bwd, NULL},
    {"pool_fwd", check_pool_fwd, NULL},
    {"pool_bwd", check_pool_bwd, NULL},
    {"softmax_xent_fwd", check_softmax_xent_fwd, NULL},
    {"softmax_xent_bwd", check_softmax_xent_bwd, NULL},
    {"reduce_sum", check_reduce_sum, NULL},
    {"count_nonfinite", check_count_nonfinite, NULL},
    {"dropout_fwd", check_dropout_fwd, NULL},
    {"dropout_bwd", check_dropout_bwd, NULL},
    {"opt_step", check_opt_step, NULL},
    {"layernorm_fwd", check_layernorm_fwd, NULL},
    {"layernorm_bwd", check_layernorm_bwd, NULL},
    {"attention_workspace", check_attention_workspace, NULL},
    {"attention_fwd", check_attention_fwd, NULL},
    {"attention_bwd", check_attention_bwd, NULL},
    /* one capture case walks all four graph slots; it runs under each name */
    {"graph_begin", check_graph_capture, SC_NULL_GRAPH},
    {"graph_end", check_graph_capture, SC_NULL_GRAPH},
    {"graph_launch", check_graph_capture, SC_NULL_GRAPH},
    {"graph_destroy", check_graph_capture, SC_NULL_GRAPH},
    {"augment_u8", check_augment_u8,
     "lib/backend.h: n/a on the CPU backend, the CPU is the device: augmentation already "
     "runs where the model runs"},
    {"labels_u8_to_i32", check_labels_u8_to_i32,
     "lib/backend.h: n/a on the CPU backend, host and device memory are the same"},
};
#define N_OP_CHECKS (sizeof op_checks / sizeof op_checks[0])

/* The runtime checks, run before the ops (which need memory to work). */
typedef struct sc_runtime_check {
    const char *name;
    int (*check)(sc_ctx *sc);
} sc_runtime_check;

static const sc_runtime_check runtime_checks[] = {
    {"memory", check_mem_roundtrip},
    {"memory", check_mem_accounting},
    {"streams", check_streams},
    {"device_info", check_device_info},
};
#define N_RUNTIME_CHECKS (sizeof runtime_checks / sizeof runtime_checks[0])

/* The slots that are not ops: which check exercises each, and where
 * lib/backend.h allows NULL, its reason. */
typedef struct sc_runtime_slot {
    const char *slot;
    const char *covered_by; /* a runtime_checks name, or who else calls it */
    const char *null_ok;
} sc_runtime_slot;

static const sc_runtime_slot runtime_slots[] = {
    {"dev_alloc", "memory", NULL},
    {"dev_free", "memory", NULL},
    {"host_alloc", "memory", NULL},
    {"host_free", "memory", NULL},
    {"copy_h2d", "memory", NULL},
    {"copy_d2h", "memory", NULL},
    {"copy_d2d", "memory", NULL},
    {"copy_peer", "memory", NULL},
    {"memset", "memory", NULL},
    {"mem_stats", "memory", NULL},
    {"mem_reset_peak", "memory", NULL},
    {"mem_set_limit", "memory", NULL},
    {"mem_empty_cache", "memory", "lib/backend.h: NULL where the backend keeps no cache"},
    {"mem_set_mode", "memory", "lib/backend.h: NULL where the backend has one policy only"},
    {"stream_create", "streams", NULL},
    {"stream_destroy", "streams", NULL},
    {"stream_sync", "streams", NULL},
    {"event_create", "streams", NULL},
    {"event_destroy", "streams", NULL},
    {"event_record", "streams", NULL},
    {"stream_wait_event", "streams", NULL},
    {"event_sync", "streams", NULL},
    {"event_elapsed_ms", "streams", NULL},
    {"sync", "streams", NULL},
    {"device_info", "device_info", NULL},
    {"destroy", "the caller, closing the backend it checked", NULL},
};
#define N_RUNTIME_SLOTS (sizeof runtime_slots / sizeof runtime_slots[0])

/* ---- training step checks ----
 * One entry per toggle setting: the same few optimizer steps on the
 * backend under test and on the CPU backend, compared by the epoch's mean
 * loss: 4 steps of batch 32 on 256 synthetic samples, small CNN, seed 7.
 * The sentinel (name NULL) ends the table. */
#define STEP_TOL 1e-3
#define STEP_WHY "4 fp32 steps; conv/gemm algorithms and reduction orders differ by backend"

static int step_loss(tb_backend *be, void (*tweak)(tb_config *), double *loss)
{
    tb_config c;
    config_defaults(&c);
    c.dataset = TB_DATA_SYNTHETIC;
    c.data_limit = 256;
    c.test_limit = 64;
    c.batch_size = 32;
    c.max_steps = 4;
    c.lr = 0.01;
    c.seed = 7;
    tweak(&c);
    TB_TRY(config_validate(&c));
    tb_trainer *t;
    tb_epoch_stats es;
    TB_TRY(trainer_create(&c, be, &t));
    int rc = train_epoch(t, 0, &es);
    *loss = es.mean_loss;
    trainer_destroy(t);
    return rc;
}

static int step_pair(tb_backend *be, void (*tweak)(tb_config *), double *got, double *ref)
{
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = step_loss(be, tweak, got);
    if (rc == TB_OK)
        rc = step_loss(cpu, tweak, ref);
    tb_backend_close(cpu);
    return rc;
}

#define STEP_CHECK(id, stmt)                                                            \
    static void tweak_##id(tb_config *c) { (void)c; stmt; }                             \
    static int step_##id(tb_backend *be, double *got, double *ref)                      \
    {                                                                                   \
        return step_pair(be, tweak_##id, got, ref);                                     \
    }

STEP_CHECK(default, (void)0)
STEP_CHECK(lars, c->optimizer = TB_OPT_LARS; c->lr = 1.0)
STEP_CHECK(lars_fused, c->optimizer = TB_OPT_LARS; c->lr = 1.0; c->fused_optimizer = 1)
STEP_CHECK(lamb, c->optimizer = TB_OPT_LAMB; c->lr = 0.005)
STEP_CHECK(novograd_fused, c->optimizer = TB_OPT_NOVOGRAD; c->fused_optimizer = 1)
STEP_CHECK(anomaly, c->detect_anomaly = 1)
STEP_CHECK(loss_read, c->loss_read_every = 3)
STEP_CHECK(checkpointing, c->checkpointing = 1)

/* --eval-no-grad changes evaluation only: the test loss after the steps. */
static int eval_loss(tb_backend *be, double *loss)
{
    tb_config c;
    config_defaults(&c);
    c.dataset = TB_DATA_SYNTHETIC;
    c.data_limit = 256;
    c.test_limit = 64;
    c.batch_size = 32;
    c.max_steps = 4;
    c.lr = 0.01;
    c.seed = 7;
    c.eval_no_grad = 1;
    TB_TRY(config_validate(&c));
    tb_trainer *t;
    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY(trainer_create(&c, be, &t));
    int rc = train_epoch(t, 0, &es);
    if (rc == TB_OK)
        rc = trainer_evaluate(t, &ev);
    *loss = ev.mean_loss;
    trainer_destroy(t);
    return rc;
}

static int step_eval_no_grad(tb_backend *be, double *got, double *ref)
{
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = eval_loss(be, got);
    if (rc == TB_OK)
        rc = eval_loss(cpu, ref);
    tb_backend_close(cpu);
    return rc;
}

/* DataParallel over 2 GPUs from one thread (lib/dp.h, TB_DP_ONE_THREAD):
 * the model on the device under test, its replica on the other GPU, the
 * copies between them copy_peer; against the same driver on 2 CPU
 * backends. 3 SGD steps of batch 32, small CNN, seed 7, synthetic batch. */
#define DP_CHECK_B 32
#define DP_CHECK_STEPS 3

static int dp_check_loss(tb_backend *be, const float *img, const int32_t *lab, double *loss)
{
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = DP_CHECK_B,
                       .conv_bias = 1, .seed = 7};
    tb_opt_hparams hp = {.kind = TB_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .grad_scale = 1.0f};
    tb_lr_schedule sch = {.peak_lr = 0.05};
    tb_model *m = NULL;
    tb_optim opt = {0};
    tb_dp *dp = NULL;
    float l = 0;
    int rc;
    TB_TRY_GOTO(rc, model_build(be, tb_spec_small_cnn, &o, &m), out_free);
    TB_TRY_GOTO(rc, optim_init(&opt, m, &hp, &sch, 0), out_free);
    TB_TRY_GOTO(rc, dp_create(m, tb_spec_small_cnn, &o, 2, TB_DP_ONE_THREAD, 0, &dp), out_free);
    for (int step = 0; step < DP_CHECK_STEPS; step++) {
        TB_TRY_GOTO(rc, model_zero_grad(m, 1), out_free);
        TB_TRY_GOTO(rc, dp_step(dp, img, lab, DP_CHECK_B, 1.0f, &l), out_free);
        TB_TRY_GOTO(rc, optim_step(&opt), out_free);
    }
    *loss = l;
out_free:
    dp_destroy(dp);
    optim_free(&opt);
    model_destroy(m);
    return rc;
}

/* TB_ERR_UNSUPPORTED (n/a), saying why, unless be is a GPU and a second
 * one is there. */
static int dp_check_usable(tb_backend *be)
{
    const char *why = NULL;
    int count = tb_cuda_device_count(&why);
    if (count == 0)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "needs 2 GPUs: no GPU (%s)", why ? why : "none found");
    if (count == 1)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "needs 2 GPUs, this machine has 1");
    tb_device_kind kind;
    int ord;
    if (tb_device_parse(be->name, &kind, &ord) != TB_OK || kind != TB_DEVICE_CUDA) {
        tb_error_clear();
        return TB_FAIL(TB_ERR_UNSUPPORTED, "the backend under test is %s: run with "
                       "--device=cuda to check DataParallel on %d GPUs", be->name, count);
    }
    return TB_OK;
}

static int step_dp_two_gpus(tb_backend *be, double *got, double *ref)
{
    float img[DP_CHECK_B * 784];
    int32_t lab[DP_CHECK_B];
    uint64_t s = 12345;
    TB_TRY(dp_check_usable(be));
    for (int i = 0; i < DP_CHECK_B * 784; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        img[i] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < DP_CHECK_B; i++)
        lab[i] = (i * 7 + 3) % 10;
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = dp_check_loss(be, img, lab, got);
    if (rc == TB_OK)
        rc = dp_check_loss(cpu, img, lab, ref);
    tb_backend_close(cpu);
    return rc;
}

/* --pin-memory and --non-blocking change how each batch reaches the
 * device, not its bytes: the loss after the steps is pageable's on the same
 * backend, bitwise. Pageable runs twice: on a backend whose training does
 * not repeat bitwise (a non-deterministic algorithm) the comparison could
 * not tell a bad copy from that, and the check says so instead. */
static void tweak_pageable(tb_config *c) { (void)c; }
static void tweak_pinned(tb_config *c) { c->pin_memory = 1; }
static void tweak_pinned_async(tb_config *c) { c->pin_memory = 1; c->non_blocking = 1; }

static int staged_vs_pageable(tb_backend *be, void (*tweak)(tb_config *), double *got,
                              double *ref)
{
    double again;
    TB_TRY(step_loss(be, tweak, got)); /* first: refused at once where n/a */
    TB_TRY(step_loss(be, tweak_pageable, ref));
    TB_TRY(step_loss(be, tweak_pageable, &again));
    if (memcmp(ref, &again, sizeof again) != 0)
        return TB_FAIL(TB_ERR_NUMERIC, "two pageable runs on %s gave losses %.9g and %.9g: its "
                       "training does not repeat bitwise (a non-deterministic algorithm?), so "
                       "pinned vs pageable cannot be compared bitwise", be->name, *ref, again);
    return TB_OK;
}

static int step_pinned(tb_backend *be, double *got, double *ref)
{
    return staged_vs_pageable(be, tweak_pinned, got, ref);
}

static int step_pinned_async(tb_backend *be, double *got, double *ref)
{
    return staged_vs_pageable(be, tweak_pinned_async, got, ref);
}

#define STAGED_WHY "the copy does not change the data: bitwise equal"

static const tb_step_check step_checks[] = {
    {"default config", STEP_TOL, STEP_WHY, step_default},
    {"optimizer=lars", STEP_TOL, STEP_WHY, step_lars},
    {"optimizer=lars fused-optimizer", STEP_TOL, STEP_WHY, step_lars_fused},
    {"optimizer=lamb", STEP_TOL, STEP_WHY, step_lamb},
    {"optimizer=novograd fused-optimizer", STEP_TOL, STEP_WHY, step_novograd_fused},
    {"detect-anomaly", STEP_TOL, STEP_WHY, step_anomaly},
    {"loss-read-every=3", STEP_TOL, STEP_WHY, step_loss_read},
    {"checkpointing", STEP_TOL, STEP_WHY, step_checkpointing},
    {"eval-no-grad (test loss)", STEP_TOL, STEP_WHY, step_eval_no_grad},
    {"DataParallel on 2 GPUs, one thread", STEP_TOL, STEP_WHY, step_dp_two_gpus},
    {"pin-memory (vs pageable, same backend)", 0, STAGED_WHY, step_pinned, "pageable"},
    {"pin-memory non-blocking (vs pageable, same backend)", 0, STAGED_WHY, step_pinned_async,
     "pageable"},
    {NULL, 0.0, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ the walk */

static const sc_op_check *find_op_check(const char *slot)
{
    for (size_t i = 0; i < N_OP_CHECKS; i++)
        if (strcmp(op_checks[i].slot, slot) == 0)
            return &op_checks[i];
    return NULL;
}

static const sc_runtime_slot *find_runtime_slot(const char *slot)
{
    for (size_t i = 0; i < N_RUNTIME_SLOTS; i++)
        if (strcmp(runtime_slots[i].slot, slot) == 0)
            return &runtime_slots[i];
    return NULL;
}

int tb_selfcheck_coverage(FILE *out)
{
    int problems = 0;
    for (size_t i = 0; i < tb_optable_count; i++) {
        const tb_slot_info *s = &tb_optable[i];
        const sc_op_check *oc = find_op_check(s->name);
        const sc_runtime_slot *rs = find_runtime_slot(s->name);
        if (s->kind == TB_SLOT_OP && !oc) {
            fprintf(out, "coverage: op slot '%s' (%s) has no selfcheck case: add check_%s to "
                         "op_checks[] in lib/selfcheck.c\n", s->name, s->section, s->name);
            problems++;
        }
        if (s->kind == TB_SLOT_OP && rs) {
            fprintf(out, "coverage: '%s' is an op (under backend.h's \"%s\" heading) but "
                         "lib/selfcheck.c lists it as not an op\n", s->name, s->section);
            problems++;
        }
        if (s->kind == TB_SLOT_RUNTIME && !rs) {
            fprintf(out, "coverage: runtime slot '%s' is not in runtime_slots[] of "
                         "lib/selfcheck.c: say which check exercises it\n", s->name);
            problems++;
        }
        if (s->kind == TB_SLOT_RUNTIME && oc) {
            fprintf(out, "coverage: '%s' is a runtime slot (before backend.h's first ---- "
                         "heading) but has an op check\n", s->name);
            problems++;
        }
    }
    for (size_t i = 0; i < N_OP_CHECKS; i++)
        if (!tb_optable_find(op_checks[i].slot)) {
            fprintf(out, "coverage: op_checks[] names '%s', which struct tb_backend does not "
                         "have\n", op_checks[i].slot);
            problems++;
        }
    for (size_t i = 0; i < N_RUNTIME_SLOTS; i++)
        if (!tb_optable_find(runtime_slots[i].slot)) {
            fprintf(out, "coverage: runtime_slots[] names '%s', which struct tb_backend does "
                         "not have\n", runtime_slots[i].slot);
            problems++;
        }
    return problems;
}

static int wanted(const tb_selfcheck_opts *o, const char *name)
{
    return !o->filter || strstr(name, o->filter) != NULL;
}

/* NULL runtime slots: n/a where backend.h allows it, else a failure.
 * Returns 1 when every slot the op checks need is there. */
static int runtime_slots_present(sc_ctx *sc, const tb_selfcheck_opts *o)
{
    int ok = 1;
    for (size_t i = 0; i < tb_optable_count; i++) {
        const tb_slot_info *s = &tb_optable[i];
        if (s->kind != TB_SLOT_RUNTIME)
            continue;
        const sc_runtime_slot *rs = find_runtime_slot(s->name);
        if (!rs) {
            sc_fail_line(sc, "%s: runtime slot not in lib/selfcheck.c's runtime_slots[] "
                             "(nothing checks it)", s->name);
            continue;
        }
        if (tb_slot_get(sc->be, s))
            continue;
        if (rs->null_ok) {
            if (!wanted(o, s->name) && !wanted(o, rs->covered_by))
                continue;
            sc->counts->na++;
            fprintf(sc->out, "n/a  %s: NULL on %s (%s)\n", s->name, sc->be->name, rs->null_ok);
        } else {
            sc_fail_line(sc, "%s: NULL on %s, and lib/backend.h does not allow NULL there",
                         s->name, sc->be->name);
            ok = 0;
        }
    }
    return ok;
}

/* Runs one check function; an error from it (not a verdict) is a FAIL. */
static void run_check(sc_ctx *sc, const char *slot, const char *label, int (*check)(sc_ctx *))
{
    sc->slot = slot;
    int rc = check(sc);
    int rel = sc_release(sc);
    if (rc == TB_OK && rel != TB_OK)
        rc = rel;
    if (rc != TB_OK) {
        sc_fail_line(sc, "%s %s: the check stopped: %s: %s", slot, label, tb_err_name(rc),
                     tb_error_message());
        tb_error_clear();
    }
}

static void run_op(sc_ctx *sc, const tb_slot_info *s)
{
    const sc_op_check *oc = find_op_check(s->name);
    if (!oc) {
        sc_fail_line(sc, "%s (%s): no selfcheck case in lib/selfcheck.c's op_checks[]",
                     s->name, s->section);
        return;
    }
    if (!tb_slot_get(sc->be, s)) {
        if (oc->null_ok) {
            sc->counts->na++;
            fprintf(sc->out, "n/a  %s: NULL on %s (%s)\n", s->name, sc->be->name, oc->null_ok);
        } else {
            sc_fail_line(sc, "%s: NULL on %s, and lib/backend.h does not allow NULL there",
                         s->name, sc->be->name);
        }
        return;
    }
    run_check(sc, s->name, "", oc->check);
}

static void run_step_checks(sc_ctx *sc)
{
    for (const tb_step_check *st = step_checks; st->name; st++) {
        sc->slot = "step";
        sc_case c;
        sc_case_start(&c, "%s", st->name);
        double got = 0, ref = 0;
        int rc = st->run(sc->be, &got, &ref);
        if (rc == TB_ERR_UNSUPPORTED) {
            c.na = 1;
            snprintf(c.why, sizeof c.why, "%s", tb_error_message());
            tb_error_clear();
        } else if (rc != TB_OK) {
            sc_case_fail_rc(&c, "the steps", rc);
        } else {
            tb_compare cmp;
            tb_compare_values(ref, got, st->tol, &cmp);
            if (cmp.verdict == TB_MATCH_DIFFERS)
                sc_case_fail(&c, "loss %.9g, %s %.9g: rel_err=%.2g > tol=%g (%s)", got,
                             st->ref ? st->ref : "CPU", ref, cmp.max_rel, st->tol, st->why);
            else
                snprintf(c.note, sizeof c.note, "loss=%.9g %s=%.9g rel_err=%.2g tol=%g", got,
                         st->ref ? st->ref : "cpu", ref, cmp.max_rel, st->tol);
        }
        sc_case_end(sc, &c);
    }
}

int tb_selfcheck_run(tb_backend *be, const tb_selfcheck_opts *opts, tb_selfcheck_counts *counts)
{
    tb_selfcheck_opts o = {0};
    if (opts)
        o = *opts;
    if (!o.out)
        o.out = stdout;
    memset(counts, 0, sizeof *counts);
    sc_ctx sc = {.be = be, .out = o.out, .rng = o.seed ? o.seed : SC_DEFAULT_SEED,
                 .counts = counts};
    fprintf(o.out, "selfcheck: %s:%d against the plain CPU reference, %zu slots, seed 0x%llx%s%s\n",
            be->name, be->device, tb_optable_count, (unsigned long long)sc.rng,
            o.filter ? ", only slots matching " : "", o.filter ? o.filter : "");
    if (runtime_slots_present(&sc, &o)) {
        for (size_t i = 0; i < N_RUNTIME_CHECKS; i++)
            if (wanted(&o, runtime_checks[i].name))
                run_check(&sc, runtime_checks[i].name, "", runtime_checks[i].check);
        for (size_t i = 0; i < tb_optable_count; i++)
            if (tb_optable[i].kind == TB_SLOT_OP && wanted(&o, tb_optable[i].name))
                run_op(&sc, &tb_optable[i]);
        if (wanted(&o, "step"))
            run_step_checks(&sc);
    } else {
        sc_fail_line(&sc, "ops: not run, the backend's runtime slots above are missing");
    }
    fprintf(o.out, "selfcheck: %d passed, %d failed, %d n/a\n", counts->passed, counts->failed,
            counts->na);
    fflush(o.out);
    return TB_OK;
}
