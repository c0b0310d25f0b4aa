/*
 * dnnl_test.c - the CPU backend's oneDNN GEMM and convolution
 * (lib/backend/cpu/gemm.c, conv.c) against the plain reference (lib/backend/ref/conv.c).
 *   bazel test //lib/backend/cpu:cpu_dnnl_test
 *
 * Runs on a minimal table (only the dnnl slots and a counting dev_alloc),
 * so it does not need the rest of the CPU backend. Inputs are uniform in
 * [-1, 1], never zeros. Errors are measured as max |got - ref| / max |ref|
 * over the tensor, because single elements can cancel to near zero:
 *   fp32 math: 1e-5. A float sum of a few hundred to a few thousand terms
 *     in any order is within ~sqrt(terms) * 6e-8 of the exact sum relative
 *     to the largest output (1e-6 to 4e-6 here); 1e-5 leaves margin and
 *     still catches any wrong index (which gives errors near 1).
 *   TF32 math (oneDNN bf16 fpmath): 1e-2. bf16 keeps 8 significant bits,
 *     so each product may be off by ~2 * 2^-9 = 4e-3 relative; random signs
 *     keep the sum's error near that relative to the largest output.
 * Every algorithm conv_find returns, and the default, runs each kind with
 * and without bias, both layouts, accumulate 0 and 1.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/ref/conv.h"
#include "lib/core/testing.h"
#include "lib/core/rng.h"

int tb_cpu_dnnl_algo_names(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                           int has_bias, char (*names)[64], int max, int *count);

#define TOL_F32 1e-5
#define TOL_TF32 1e-2

/* ---- a minimal backend: counting dev_alloc, dnnl slots ---- */

static size_t bytes_in_use;

typedef struct block { size_t bytes; double pad[7]; } block;

static int test_dev_alloc(tb_backend *be, void **p, size_t bytes)
{
    (void)be;
    block *b = aligned_alloc(64, sizeof(block) + ((bytes + 63) / 64) * 64);
    if (!b)
        return TB_FAIL(TB_ERR_DEVICE_OOM, "test allocator: %zu bytes", bytes);
    b->bytes = bytes;
    bytes_in_use += bytes;
    *p = b + 1;
    return TB_OK;
}

static int test_dev_free(tb_backend *be, void *p)
{
    (void)be;
    if (!p)
        return TB_OK;
    block *b = (block *)p - 1;
    bytes_in_use -= b->bytes;
    free(b);
    return TB_OK;
}

static tb_backend *backend_make(int threads)
{
    tb_backend *be = calloc(1, sizeof *be);
    tb_cpu_ctx *c = calloc(1, sizeof *c);
    c->threads = threads;
    be->ctx = c;
    be->name = "cpu";
    be->dev_alloc = test_dev_alloc;
    be->dev_free = test_dev_free;
    /* the ops and casts too: conv.c's matmul entry adds its bias and sums
     * its bias gradient through their slots */
    if (tb_cpu_install_dnnl_ops(be) != TB_OK || tb_cpu_install_ops(be) != TB_OK ||
        tb_cpu_install_cast_ops(be) != TB_OK) {
        tb_error_print(stdout);
        exit(1);
    }
    return be;
}

static void backend_free(tb_backend *be)
{
    tb_cpu_release_ops(be);
    tb_cpu_release_dnnl_ops(be);
    free(be->ctx);
    free(be);
}

/* ---- data ---- */

static uint64_t next_seed = 12345; /* each array its own stream */

/* Uniform in [-1, 1), no zeros. */
static float *random_floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (p)
        tb_rng_fill(p, n, next_seed++, -1.0, 1.0);
    return p;
}

static double rel_err(const float *got, const float *ref, size_t n)
{
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= max_diff)) /* catches NaN too */
            max_diff = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    return max_diff / (max_ref > 0 ? max_ref : 1.0);
}

/* ---- GEMM ---- */

static void test_gemm_case(tb_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                           float beta, tb_math math)
{
    /* Leading dimensions larger than the rows, so strides are exercised. */
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
    float *a = random_floats((size_t)(ta ? k : m) * lda);
    float *b = random_floats((size_t)(tb ? n : k) * ldb);
    float *c = random_floats((size_t)m * ldc);
    float *ref = malloc((size_t)m * ldc * sizeof *ref);
    memcpy(ref, c, (size_t)m * ldc * sizeof *ref);
    if (beta == 0.0f) /* beta == 0 must not read C */
        for (size_t i = 0; i < (size_t)m * ldc; i++)
            c[i] = NAN;
    tb_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref, ldc);
    int rc = be->gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, math);
    CHECK(rc == TB_OK, "gemm rc %d", rc);
    /* Compare the m x n part only (the padding columns are not C's), packed
     * so the error is relative to the largest element of all of C. */
    float *got_p = malloc((size_t)m * n * sizeof *got_p), *ref_p = malloc((size_t)m * n * sizeof *ref_p);
    for (int i = 0; i < m; i++) {
        memcpy(got_p + (size_t)i * n, c + (size_t)i * ldc, (size_t)n * sizeof *got_p);
        memcpy(ref_p + (size_t)i * n, ref + (size_t)i * ldc, (size_t)n * sizeof *ref_p);
    }
    double err = rel_err(got_p, ref_p, (size_t)m * n);
    free(got_p);
    free(ref_p);
    double tol = math == TB_MATH_TF32 ? TOL_TF32 : TOL_F32;
    CHECK(err <= tol, "gemm ta %d tb %d m %d n %d k %d alpha %g beta %g math %d: rel err %.3g > %g",
          ta, tb, m, n, k, alpha, beta, (int)math, err, tol);
    free(a);
    free(b);
    free(c);
    free(ref);
}

static void test_gemm(tb_backend *be)
{
    static const int sizes[][3] = {{17, 33, 65}, {1, 1, 1}, {64, 48, 129}, {5, 1, 7}};
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 2.0f}, {-1.5f, 0.0f}};
    int cases = 0;
    /* pack 1: the strided B and C are packed dense (gemm.c's default);
     * pack 0: oneDNN reads and writes them strided (its gemm:jit) */
    for (int pack = 1; pack >= 0; pack--) {
        tb_cpu_gemm_set_pack(pack);
        for (int math = TB_MATH_F32; math <= TB_MATH_TF32; math++)
            for (int t = 0; t < 4; t++)
                for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++, cases++)
                        test_gemm_case(be, t & 1, t >> 1, sizes[s][0], sizes[s][1],
                                       sizes[s][2], ab[i][0], ab[i][1], (tb_math)math);
    }
    tb_cpu_gemm_set_pack(1);
    printf("gemm: %d cases (strided B and C packed or not, 4 transposes, 4 sizes, alpha/beta, "
           "f32 tol %g, tf32 tol %g)\n", cases, TOL_F32, TOL_TF32);
}

/* More GEMM shapes than the primitive cache holds (512, dnnl.h): the
 * least recently used are evicted from the cache and its hash index, and a
 * shape evicted comes back right (re-created), as does one still cached. */
static void test_gemm_cache_evicts(tb_backend *be)
{
    int shapes = 540;
    for (int m = 1; m <= shapes; m++)
        test_gemm_case(be, 0, 0, m, 3, 2, 1.0f, 0.0f, TB_MATH_F32);
    test_gemm_case(be, 0, 0, 1, 3, 2, 1.0f, 0.0f, TB_MATH_F32);      /* evicted */
    test_gemm_case(be, 0, 0, shapes, 3, 2, 1.0f, 0.0f, TB_MATH_F32); /* still cached */
    test_gemm_case(be, 0, 0, 2, 3, 2, 1.0f, 0.0f, TB_MATH_F32);      /* evicted */
    printf("gemm cache: %d shapes through a 512-entry cache, evicted ones re-created\n", shapes);
}

/* Informational: does bf16 fpmath change anything on this CPU? */
static void test_gemm_tf32_differs(tb_backend *be)
{
    int m = 64, n = 64, k = 256;
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)k * n);
    float *c32 = malloc((size_t)m * n * sizeof(float)), *c16 = malloc((size_t)m * n * sizeof(float));
    CHECK(be->gemm(be, 0, 0, m, n, k, 1, a, k, b, n, 0, c32, n, TB_MATH_F32) == TB_OK, "f32");
    CHECK(be->gemm(be, 0, 0, m, n, k, 1, a, k, b, n, 0, c16, n, TB_MATH_TF32) == TB_OK, "tf32");
    double err = rel_err(c16, c32, (size_t)m * n);
    printf("gemm: TF32 (bf16 fpmath) vs F32 at 64x64x256: rel diff %.3g (%s)\n", err,
           err > 0 ? "bf16 math in use" : "identical: oneDNN ignored fpmath here");
    free(a);
    free(b);
    free(c32);
    free(c16);
}

static void test_gemm_errors(tb_backend *be)
{
    float a[4] = {1, 2, 3, 4}, c[4];
    int rc = be->gemm(be, 0, 0, 2, 2, 2, 1, a, 2, a, 2, 0, c, 2, TB_MATH_LOWP);
    CHECK(rc == TB_ERR_UNSUPPORTED, "gemm LOWP rc %d, want UNSUPPORTED", rc);
    CHECK(strstr(tb_error_message(), "LOWP") != NULL, "message names LOWP: %s",
          tb_error_message());
    tb_error_clear();
    rc = be->gemm(be, 0, 0, 2, 2, 2, 1, a, 1, a, 2, 0, c, 2, TB_MATH_F32);
    CHECK(rc == TB_ERR_INVALID, "gemm lda too small rc %d, want INVALID", rc);
    tb_error_clear();
    printf("gemm: LOWP unsupported, bad leading dimension rejected\n");
}

/* ---- convolution ---- */

typedef struct conv_data {
    tb_conv_desc d;
    size_t nx, nw, ny;
    float *x, *w, *b, *y, *dy; /* inputs */
    float *y_ref, *dx_ref, *dw_ref, *db_ref, *dw_old, *db_old, *dw_acc_ref, *db_acc_ref;
    float *y_ref_nb, *dw_ref_nb;
} conv_data;

static void conv_data_make(conv_data *t, const tb_conv_desc *d)
{
    memset(t, 0, sizeof *t);
    t->d = *d;
    t->nx = (size_t)d->n * d->c * d->h * d->w;
    t->nw = (size_t)d->k * d->c * d->r * d->s;
    t->ny = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
    t->x = random_floats(t->nx);
    t->w = random_floats(t->nw);
    t->b = random_floats((size_t)d->k);
    t->dy = random_floats(t->ny);
    t->dw_old = random_floats(t->nw);
    t->db_old = random_floats((size_t)d->k);
    t->y = malloc(t->ny * sizeof(float));
    t->y_ref = malloc(t->ny * sizeof(float));
    t->y_ref_nb = malloc(t->ny * sizeof(float));
    t->dx_ref = malloc(t->nx * sizeof(float));
    t->dw_ref = malloc(t->nw * sizeof(float));
    t->dw_ref_nb = malloc(t->nw * sizeof(float));
    t->db_ref = malloc((size_t)d->k * sizeof(float));
    t->dw_acc_ref = malloc(t->nw * sizeof(float));
    t->db_acc_ref = malloc((size_t)d->k * sizeof(float));
    tb_conv_ref_fwd(d, t->x, t->w, t->b, t->y_ref);
    tb_conv_ref_fwd(d, t->x, t->w, NULL, t->y_ref_nb);
    tb_conv_ref_bwd_data(d, t->dy, t->w, t->dx_ref);
    tb_conv_ref_bwd_filter(d, t->x, t->dy, t->dw_ref, t->db_ref, 0);
    memcpy(t->dw_acc_ref, t->dw_old, t->nw * sizeof(float));
    memcpy(t->db_acc_ref, t->db_old, (size_t)d->k * sizeof(float));
    tb_conv_ref_bwd_filter(d, t->x, t->dy, t->dw_acc_ref, t->db_acc_ref, 1);
}

static void conv_data_free(conv_data *t)
{
    float *all[] = {t->x, t->w, t->b, t->y, t->dy, t->y_ref, t->dx_ref, t->dw_ref, t->db_ref,
                    t->dw_old, t->db_old, t->dw_acc_ref, t->db_acc_ref, t->y_ref_nb,
                    t->dw_ref_nb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void conv_name(const tb_conv_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "N%d C%d %dx%d K%d %dx%d s%d p%d %s", d->n, d->c, d->h, d->w, d->k, d->r,
             d->s, d->stride, d->pad, d->layout == TB_NHWC ? "nhwc" : "nchw");
}

static void check_fwd(tb_backend *be, conv_data *t, int algo, const char *what)
{
    for (int bias = 0; bias < 2; bias++) {
        for (size_t i = 0; i < t->ny; i++)
            t->y[i] = NAN; /* written, never read */
        int rc = be->conv_fwd(be, &t->d, algo, t->x, t->w, bias ? t->b : NULL, t->y);
        double err = rel_err(t->y, bias ? t->y_ref : t->y_ref_nb, t->ny);
        CHECK(rc == TB_OK && err <= TOL_F32, "%s fwd algo %d bias %d: rc %d err %.3g", what,
              algo, bias, rc, err);
    }
}

static void check_bwd_data(tb_backend *be, conv_data *t, int algo, const char *what)
{
    float *dx = malloc(t->nx * sizeof(float));
    for (size_t i = 0; i < t->nx; i++)
        dx[i] = NAN;
    int rc = be->conv_bwd_data(be, &t->d, algo, t->dy, t->w, dx);
    double err = rel_err(dx, t->dx_ref, t->nx);
    CHECK(rc == TB_OK && err <= TOL_F32, "%s bwd data algo %d: rc %d err %.3g", what, algo, rc,
          err);
    free(dx);
}

static void check_bwd_filter(tb_backend *be, conv_data *t, int algo, const char *what)
{
    int k = t->d.k;
    float *dw = malloc(t->nw * sizeof(float)), *db = malloc((size_t)k * sizeof(float));
    for (int acc = 0; acc < 2; acc++)
        for (int bias = 0; bias < 2; bias++) {
            memcpy(dw, t->dw_old, t->nw * sizeof(float));
            memcpy(db, t->db_old, (size_t)k * sizeof(float));
            int rc = be->conv_bwd_filter(be, &t->d, algo, t->x, t->dy, dw, bias ? db : NULL, acc);
            double ew = rel_err(dw, acc ? t->dw_acc_ref : t->dw_ref, t->nw);
            double eb = bias ? rel_err(db, acc ? t->db_acc_ref : t->db_ref, (size_t)k)
                             : rel_err(db, t->db_old, (size_t)k); /* untouched */
            CHECK(rc == TB_OK && ew <= TOL_F32 && eb <= TOL_F32,
                  "%s bwd filter algo %d acc %d bias %d: rc %d err dw %.3g db %.3g", what,
                  algo, acc, bias, rc, ew, eb);
        }
    free(dw);
    free(db);
}

static void check_find_result(const tb_conv_algo_perf *perf, int n, const char *what,
                              const char *kind)
{
    CHECK(n >= 1, "%s %s: conv_find returned %d algorithms", what, kind, n);
    for (int i = 0; i < n; i++) {
        CHECK(strncmp(perf[i].name, "ref:", 4) != 0, "%s %s: ref impl %s returned", what, kind,
              perf[i].name);
        CHECK(perf[i].ms >= 0, "%s %s: %s failed", what, kind, perf[i].name);
        if (i > 0)
            CHECK(perf[i].ms >= perf[i - 1].ms, "%s %s: not sorted at %d", what, kind, i);
    }
}

/* The list of algorithms must not depend on the bias (find times without). */
static void check_bias_invariant(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                                 const char *what)
{
    char a[TB_MAX_CONV_ALGOS][64], b[TB_MAX_CONV_ALGOS][64];
    int na = 0, nb = 0;
    CHECK(tb_cpu_dnnl_algo_names(be, d, kind, 0, a, TB_MAX_CONV_ALGOS, &na) == TB_OK &&
              tb_cpu_dnnl_algo_names(be, d, kind, 1, b, TB_MAX_CONV_ALGOS, &nb) == TB_OK,
          "%s: algo names", what);
    int same = na == nb;
    for (int i = 0; same && i < na && i < TB_MAX_CONV_ALGOS; i++)
        same = strcmp(a[i], b[i]) == 0;
    CHECK(same, "%s kind %d: algorithm list differs with bias (%d vs %d)", what, (int)kind, na,
          nb);
    for (int i = 0; !same && i < na && i < TB_MAX_CONV_ALGOS; i++)
        printf("  %d: %s | %s\n", i, a[i], i < nb ? b[i] : "");
}

/* The default is the first non-`ref:` entry, or, when that is an im2col
 * `gemm:` one (oneDNN's choice for plain NCHW), the first direct
 * implementation on blocked activations ("+reorder"), if the list has one,
 * except where conv.c's gemm_stays keeps the gemm: bwd-data with
 * c * r * s < 16; plain 1x1 stride-1 convs' bwd-filter, and their fwd and
 * bwd-data from 128 pixels an image; and a forward `brgconv` choice with
 * at most 64 output pixels an image yields to the jit kernel after it. */
static void check_default_policy(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                                 int def, const char *what)
{
    char a[TB_MAX_CONV_ALGOS][64];
    int na = 0;
    CHECK(tb_cpu_dnnl_algo_names(be, d, kind, 0, a, TB_MAX_CONV_ALGOS, &na) == TB_OK,
          "%s: algo names", what);
    if (na > TB_MAX_CONV_ALGOS)
        na = TB_MAX_CONV_ALGOS;
    int first = 0, direct = -1;
    while (first < na - 1 && strncmp(a[first], "ref:", 4) == 0)
        first++;
    for (int i = first + 1; i < na && direct < 0; i++)
        if (strstr(a[i], "+reorder") && !strstr(a[i], "gemm:") && strncmp(a[i], "ref:", 4))
            direct = i;
    int plain_1x1 = d->layout == TB_NCHW && d->r == 1 && d->s == 1 && d->stride == 1 &&
                    d->pad == 0;
    int gemm_stays = (kind == TB_CONV_BWD_DATA && d->c * d->r * d->s < 16) ||
                     (plain_1x1 && (kind == TB_CONV_BWD_FILTER || d->h * d->w >= 128));
    int want = strstr(a[first], "gemm:") && direct >= 0 && !gemm_stays ? direct : first;
    /* a forward brgconv with at most 64 output pixels gives way to the
     * first jit kernel after it in its part (with or without "+reorder") */
    if (kind == TB_CONV_FWD && strncmp(a[want], "brgconv", 7) == 0 &&
        tb_conv_out_h(d) * tb_conv_out_w(d) <= 64) {
        int reordered = strstr(a[want], "+reorder") != NULL;
        for (int i = want + 1; i < na; i++)
            if (strncmp(a[i], "jit", 3) == 0 && (strstr(a[i], "+reorder") != NULL) == reordered) {
                want = i;
                break;
            }
    }
    /* every problem lists matmul (after the plain-layout entries); on NHWC
     * it is the default with at most 16 output pixels an image, for the
     * filter gradient and for a 1x1's other directions, on NCHW with at
     * most 4, for the filter gradient alone */
    int at = -1, px = tb_conv_out_h(d) * tb_conv_out_w(d);
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], "matmul") == 0)
            at = i;
    CHECK(at >= 0, "%s kind %d: matmul not listed (%d entries)", what, (int)kind, na);
    int mm = d->layout == TB_NHWC
                 ? px <= 16 && (kind == TB_CONV_BWD_FILTER || (d->r == 1 && d->s == 1))
                 : px <= 4 && kind == TB_CONV_BWD_FILTER;
    if (at >= 0 && mm)
        want = at;
    CHECK(def == want, "%s kind %d: default %d (%s), want %d (%s)", what, (int)kind, def,
          def >= 0 && def < na ? a[def] : "?", want, want < na ? a[want] : "?");
}

static const char *kind_names[] = {"fwd", "bwd_data", "bwd_filter"};

static void test_conv_shape(tb_backend *be, const tb_conv_desc *d)
{
    char what[96];
    conv_name(d, what, sizeof what);
    conv_data t;
    conv_data_make(&t, d);
    for (int kind = 0; kind < 3; kind++) {
        char before[TB_MAX_CONV_ALGOS][64], after[TB_MAX_CONV_ALGOS][64];
        int n_before = 0, n_after = 0;
        tb_cpu_dnnl_algo_names(be, d, (tb_conv_kind)kind, 0, before, TB_MAX_CONV_ALGOS,
                               &n_before);
        tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
        int n = 0, def = -1;
        int rc = be->conv_find(be, d, (tb_conv_kind)kind, perf, TB_MAX_CONV_ALGOS, &n);
        CHECK(rc == TB_OK, "%s %s: conv_find rc %d", what, kind_names[kind], rc);
        check_find_result(perf, n, what, kind_names[kind]);
        CHECK(be->conv_algo_default(be, d, (tb_conv_kind)kind, &def) == TB_OK && def >= 0,
              "%s: default", what);
        check_bias_invariant(be, d, (tb_conv_kind)kind, what);
        check_default_policy(be, d, (tb_conv_kind)kind, def, what);
        printf("%s %-10s default %d; found:", what, kind_names[kind], def);
        for (int i = 0; i < n; i++)
            printf(" %d=%s", perf[i].algo, perf[i].name);
        printf("\n");
        /* The default first, then every algorithm found. */
        for (int i = -1; i < n; i++) {
            int algo = i < 0 ? def : perf[i].algo;
            if (kind == TB_CONV_FWD)
                check_fwd(be, &t, algo, what);
            else if (kind == TB_CONV_BWD_DATA)
                check_bwd_data(be, &t, algo, what);
            else
                check_bwd_filter(be, &t, algo, what);
        }
        /* An id must mean the same implementation once primitives exist. */
        tb_cpu_dnnl_algo_names(be, d, (tb_conv_kind)kind, 0, after, TB_MAX_CONV_ALGOS,
                               &n_after);
        int same = n_before == n_after;
        for (int i = 0; same && i < n_before && i < TB_MAX_CONV_ALGOS; i++)
            same = strcmp(before[i], after[i]) == 0;
        CHECK(same, "%s %s: algorithm list changed after use", what, kind_names[kind]);
    }
    conv_data_free(&t);
}

static void test_conv(tb_backend *be)
{
    static const tb_conv_desc shapes[] = {
        {.n = 2, .c = 3, .h = 7, .w = 7, .k = 5, .r = 3, .s = 3, .stride = 1, .pad = 1},
        {.n = 3, .c = 8, .h = 13, .w = 13, .k = 16, .r = 5, .s = 5, .stride = 2, .pad = 2},
        {.n = 2, .c = 16, .h = 6, .w = 5, .k = 8, .r = 1, .s = 1, .stride = 1, .pad = 0},
        {.n = 2, .c = 5, .h = 9, .w = 9, .k = 7, .r = 1, .s = 1, .stride = 2, .pad = 0},
        /* the small CNN's first layer on 1x28x28 images */
        {.n = 4, .c = 1, .h = 28, .w = 28, .k = 16, .r = 3, .s = 3, .stride = 1, .pad = 1},
        /* a small CNN's inner layer: blocked (16-channel) implementations apply */
        {.n = 2, .c = 32, .h = 7, .w = 7, .k = 32, .r = 3, .s = 3, .stride = 1, .pad = 1},
        /* 1x1 with >= 128 pixels: the plain gemm stays in every direction */
        {.n = 2, .c = 16, .h = 12, .w = 11, .k = 32, .r = 1, .s = 1, .stride = 1, .pad = 0},
        /* the reduced ResNet-50's (width 24, 64x64, batch 4; lib/train/workload.h):
         * channel counts that are not multiples of 16 (blocked layouts pad
         * them), the stem, a bottleneck's 1x1s, its strided 3x3 (v1.5) and
         * the strided 1x1 shortcut, and the last stage's 2x2 maps */
        {.n = 4, .c = 3, .h = 64, .w = 64, .k = 24, .r = 7, .s = 7, .stride = 2, .pad = 3},
        {.n = 4, .c = 24, .h = 16, .w = 16, .k = 96, .r = 1, .s = 1, .stride = 1, .pad = 0},
        {.n = 4, .c = 48, .h = 16, .w = 16, .k = 48, .r = 3, .s = 3, .stride = 2, .pad = 1},
        {.n = 4, .c = 96, .h = 16, .w = 16, .k = 192, .r = 1, .s = 1, .stride = 2, .pad = 0},
        {.n = 4, .c = 192, .h = 2, .w = 2, .k = 192, .r = 3, .s = 3, .stride = 1, .pad = 1},
        /* its later stages' 1x1s: at most 16 pixels an image, matmul on NHWC */
        {.n = 4, .c = 96, .h = 4, .w = 4, .k = 48, .r = 1, .s = 1, .stride = 1, .pad = 0},
        {.n = 4, .c = 192, .h = 2, .w = 2, .k = 384, .r = 1, .s = 1, .stride = 1, .pad = 0},
        /* and its strided convolutions into 2x2: the 3x3 (v1.5) and the
         * shortcut (matmul's patch matrix, im2col, and col2im on NHWC) */
        {.n = 4, .c = 48, .h = 4, .w = 4, .k = 48, .r = 3, .s = 3, .stride = 2, .pad = 1},
        {.n = 4, .c = 96, .h = 4, .w = 4, .k = 192, .r = 1, .s = 1, .stride = 2, .pad = 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int layout = TB_NCHW; layout <= TB_NHWC; layout++) {
            tb_conv_desc d = shapes[i];
            d.layout = (tb_layout)layout;
            test_conv_shape(be, &d);
        }
}

static void test_conv_tf32(tb_backend *be)
{
    tb_conv_desc d = {.n = 2, .c = 16, .h = 9, .w = 9, .k = 16, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .layout = TB_NHWC, .math = TB_MATH_TF32};
    conv_data t;
    conv_data_make(&t, &d);
    int algo = -1;
    CHECK(be->conv_algo_default(be, &d, TB_CONV_FWD, &algo) == TB_OK, "tf32 default");
    int rc = be->conv_fwd(be, &d, algo, t.x, t.w, t.b, t.y);
    double err = rel_err(t.y, t.y_ref, t.ny);
    CHECK(rc == TB_OK && err <= TOL_TF32, "conv TF32 math: rc %d err %.3g", rc, err);
    printf("conv: TF32 (bf16 fpmath) fwd rel err %.3g (tol %g)\n", err, TOL_TF32);
    conv_data_free(&t);
}

static void test_conv_errors(tb_backend *be)
{
    tb_conv_desc d = {.n = 1, .c = 2, .h = 5, .w = 5, .k = 2, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .dtype = TB_F16, .math = TB_MATH_LOWP};
    float buf[64] = {0};
    int algo = 0, n = 0;
    tb_conv_algo_perf perf[4];
    /* fp16 is n/a on the CPU (oneDNN 2.6); bf16 works (lib/backend/cpu/cast_test.c) */
    CHECK(be->conv_fwd(be, &d, 0, buf, buf, NULL, buf) == TB_ERR_UNSUPPORTED, "fp16 fwd");
    CHECK(strstr(tb_error_message(), "fp16") != NULL, "message names fp16: %s",
          tb_error_message());
    tb_error_clear();
    CHECK(be->conv_find(be, &d, TB_CONV_FWD, perf, 4, &n) == TB_ERR_UNSUPPORTED && n == 0,
          "fp16 find");
    CHECK(be->conv_algo_default(be, &d, TB_CONV_BWD_DATA, &algo) == TB_ERR_UNSUPPORTED,
          "fp16 default");
    d.dtype = TB_F32;
    CHECK(be->conv_bwd_filter(be, &d, 0, buf, buf, buf, NULL, 0) == TB_ERR_INVALID,
          "fp32 data with LOWP math");
    d.dtype = TB_BF16;
    d.math = TB_MATH_F32;
    CHECK(be->conv_fwd(be, &d, 0, buf, buf, NULL, buf) == TB_ERR_INVALID,
          "bf16 data with F32 math");
    d.dtype = TB_F32;
    d.math = TB_MATH_F32;
    tb_error_clear();
    CHECK(be->conv_fwd(be, &d, 99, buf, buf, NULL, buf) == TB_ERR_INVALID, "algo 99 invalid");
    CHECK(be->conv_fwd(be, &d, -1, buf, buf, NULL, buf) == TB_ERR_INVALID, "algo -1 invalid");
    tb_error_clear();
    printf("conv: fp16 unsupported with a clear message, dtype/math mismatches and bad "
           "algorithm ids rejected\n");
}

/* Calls set oneDNN's OpenMP thread count and give the caller's back. */
static void test_threads_restored(tb_backend *be)
{
    omp_set_num_threads(1);
    float a[4] = {1, 2, 3, 4}, c[4];
    CHECK(be->gemm(be, 0, 0, 2, 2, 2, 1, a, 2, a, 2, 0, c, 2, TB_MATH_F32) == TB_OK, "gemm");
    CHECK(omp_get_max_threads() == 1, "omp threads not restored: %d", omp_get_max_threads());
    printf("threads: caller's OpenMP thread count restored after a call\n");
}

static void test_release(void)
{
    /* Never installed: release must be a no-op. */
    tb_backend *be = calloc(1, sizeof *be);
    tb_cpu_ctx *c = calloc(1, sizeof *c);
    be->ctx = c;
    tb_cpu_release_dnnl_ops(be);
    tb_cpu_release_dnnl_ops(be);
    free(c);
    free(be);
    printf("release: safe without install and twice\n");
}

int main(void)
{
    tb_backend *be = backend_make(2);
    test_gemm(be);
    test_gemm_cache_evicts(be);
    test_gemm_tf32_differs(be);
    test_gemm_errors(be);
    test_conv(be);
    test_conv_tf32(be);
    test_conv_errors(be);
    test_threads_restored(be);
    backend_free(be);
    CHECK(bytes_in_use == 0, "%zu bytes still allocated after release", bytes_in_use);
    test_release();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
