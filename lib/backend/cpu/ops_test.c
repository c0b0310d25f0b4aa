/*
 * ops_test.c - checks the CPU backend's own kernels (the files
 * lib/backend/cpu/ops_common.c lists)
 * against the plain reference (lib/backend/ref/ops.c), and the reference's
 * backward passes against finite differences in double.
 *
 * Run: bazel test //lib/backend/cpu:cpu_ops_test   (prints one line per group of checks,
 * FAIL lines with the worst element, and exits non-zero on any failure).
 *
 * It builds its own minimal backend (a tb_backend with a tb_cpu_ctx and
 * only these ops installed) so it does not need oneDNN or the rest of the
 * CPU backend. Inputs are random and never zero; sizes include odd ones
 * and ones above the one-thread cutoff; every op runs with 1 and 2 threads.
 * LARS is also checked against a float64 step written in the test from the
 * paper's formula, on purpose with an all-zero weight tensor and an
 * all-zero gradient (the cases where its trust ratio falls back to 1).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bn_math.h"
#include "kernels/cast_math.h"
#include "kernels/rng_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/bf16_rows.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/ref/ops.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"
#include "lib/core/rng.h"

static const size_t SIZES[] = {1, 7, 33, 1001, 65537};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
static const int THREADS[] = {1, 2};

/* ---------------------------------------------------------------- helpers */

static tb_backend *open_ops(int threads)
{
    tb_backend *be = calloc(1, sizeof *be);
    tb_cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        printf("out of memory\n");
        exit(1);
    }
    c->threads = threads;
    be->name = "cpu";
    be->ctx = c;
    if (tb_cpu_install_ops(be) != TB_OK) {
        tb_error_print(stdout);
        exit(1);
    }
    return be;
}

static void close_ops(tb_backend *be)
{
    tb_cpu_release_ops(be);
    free(be->ctx);
    free(be);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static float *fnew(size_t n) { return xmalloc(n * sizeof(float)); }
static double *dnew(size_t n) { return xmalloc(n * sizeof(double)); }

static tb_rng rng = {0x243f6a8885a308d3ull}; /* tb_rng_seeded(0x243f6a8885a308d3) */

static double urand(void) { return tb_rng_double01(&rng); } /* [0, 1) */

/* Uniform in [-r, r] without values near zero (no zeros: they hide bugs). */
static void fill(float *x, size_t n, float r)
{
    for (size_t i = 0; i < n; i++) {
        double u = urand() * 2.0 - 1.0;
        if (fabs(u) < 0.01)
            u = u < 0 ? -0.01 : 0.01;
        x[i] = (float)(u * r);
    }
}

static void fill_pos(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * urand());
}

/* Distinct values (a shuffled ramp), so max pooling has no ties. */
static void fill_distinct(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)i / (double)n * 2.0 - 1.0 + 0.5 / (double)n);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(urand() * (double)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

/* 1 when |got - want| <= atol + rtol |want| everywhere; prints the worst. */
static int near(const char *what, const float *got, const float *want, size_t n, double atol,
                double rtol)
{
    double worst = 0.0;
    size_t wi = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        double lim = atol + rtol * fabs((double)want[i]);
        if (!(e <= lim)) {
            ok = 0;
            if (!(e <= worst)) {
                worst = e;
                wi = i;
            }
        }
    }
    if (!ok)
        printf("  %s: element %zu is %.9g, want %.9g\n", what, wi, (double)got[wi],
               (double)want[wi]);
    return ok;
}

static int same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* ---------------------------------------------------------------- element-wise */

static void test_elementwise(int threads)
{
    tb_backend *be = open_ops(threads);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = SIZES[s];
        float *a = fnew(n), *b = fnew(n), *y = fnew(n), *r = fnew(n), *dy = fnew(n);
        fill(a, n, 3.0f);
        fill(b, n, 3.0f);
        fill(dy, n, 1.0f);

        CHECK(be->relu_fwd(be, a, y, n) == TB_OK, "relu_fwd status");
        tb_ref_relu_fwd(a, r, n);
        CHECK(same(y, r, n * 4), "relu_fwd n=%zu t=%d differs from the reference", n, threads);
        float *dx = fnew(n);
        CHECK(be->relu_bwd(be, y, dy, dx, n) == TB_OK, "relu_bwd status");
        tb_ref_relu_bwd(r, dy, r, n);
        CHECK(same(dx, r, n * 4), "relu_bwd n=%zu t=%d", n, threads);

        CHECK(be->add(be, a, b, y, n) == TB_OK, "add status");
        tb_ref_add(a, b, r, n);
        CHECK(same(y, r, n * 4), "add n=%zu t=%d", n, threads);

        for (size_t i = 0; i < n; i++)
            y[i] = NAN; /* beta == 0 must not read y */
        CHECK(be->axpby(be, 1.5f, a, 0.0f, y, n) == TB_OK, "axpby status");
        tb_ref_axpby(1.5f, a, 0.0f, r, n);
        CHECK(near("axpby beta=0", y, r, n, 0, 1e-6), "axpby beta=0 n=%zu t=%d", n, threads);
        memcpy(y, b, n * 4);
        memcpy(r, b, n * 4);
        CHECK(be->axpby(be, -0.5f, a, 0.75f, y, n) == TB_OK, "axpby status");
        tb_ref_axpby(-0.5f, a, 0.75f, r, n);
        CHECK(near("axpby", y, r, n, 1e-7, 1e-6), "axpby n=%zu t=%d", n, threads);
        free(a), free(b), free(y), free(r), free(dy), free(dx);
    }
    /* ReLU keeps NaN (anomaly detection must see it after the layer) */
    float nanin[3] = {NAN, -1.0f, 2.0f}, out[3];
    be->relu_fwd(be, nanin, out, 3);
    CHECK(isnan(out[0]) && out[1] == 0.0f && out[2] == 2.0f, "relu on NaN, -1, 2");
    printf("element-wise (relu, add, axpby) t=%d: done\n", threads);
    close_ops(be);
}

static void test_bias(int threads)
{
    static const int shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {1001, 65}, {300, 130}};
    tb_backend *be = open_ops(threads);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *y = fnew(n), *r = fnew(n), *bias = fnew(cols), *db = fnew(cols), *dr = fnew(cols);
        fill(y, n, 2.0f);
        memcpy(r, y, n * 4);
        fill(bias, cols, 1.0f);
        CHECK(be->bias_add(be, y, bias, rows, cols) == TB_OK, "bias_add status");
        tb_ref_bias_add(r, bias, rows, cols);
        CHECK(same(y, r, n * 4), "bias_add %dx%d t=%d", rows, cols, threads);
        for (int acc = 0; acc <= 1; acc++) {
            fill(db, cols, 1.0f);
            memcpy(dr, db, cols * 4);
            CHECK(be->bias_grad(be, y, db, rows, cols, acc) == TB_OK, "bias_grad status");
            tb_ref_bias_grad(y, dr, rows, cols, acc);
            CHECK(near("bias_grad", db, dr, cols, 1e-6, 1e-6), "bias_grad %dx%d acc=%d t=%d",
                  rows, cols, acc, threads);
        }
        free(y), free(r), free(bias), free(db), free(dr);
    }
    printf("bias_add, bias_grad (accumulate 0/1) t=%d: done\n", threads);
    close_ops(be);
}

static void test_reductions(void)
{
    tb_backend *be1 = open_ops(1), *be2 = open_ops(2);
    size_t sizes[] = {1, 7, 33, 1001, 65537, 3000017};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = fnew(n), got1, got2, again, want;
        fill(x, n, 1.0f);
        double abs_sum = 0.0;
        for (size_t i = 0; i < n; i++)
            abs_sum += fabs(x[i]);
        be1->reduce_sum(be1, x, n, &got1);
        be2->reduce_sum(be2, x, n, &got2);
        be2->reduce_sum(be2, x, n, &again);
        tb_ref_reduce_sum(x, n, &want);
        CHECK(fabs((double)got2 - want) <= 1e-6 * abs_sum + 1e-6, "reduce_sum n=%zu: %.9g want %.9g",
              n, (double)got2, (double)want);
        CHECK(same(&got2, &again, 4), "reduce_sum n=%zu not identical run to run", n);
        CHECK(same(&got1, &got2, 4), "reduce_sum n=%zu differs between 1 and 2 threads", n);

        float cnt;
        be2->count_nonfinite(be2, x, n, &cnt);
        CHECK(cnt == 0.0f, "count_nonfinite n=%zu on finite data: %g", n, (double)cnt);
        x[n - 1] = NAN;
        x[n / 2] = INFINITY;
        x[n / 3] = -INFINITY;
        size_t want_cnt = 1 + (n / 2 != n - 1) + (n / 3 != n / 2 && n / 3 != n - 1);
        for (int t = 0; t < 2; t++) {
            tb_backend *be = t ? be2 : be1;
            be->count_nonfinite(be, x, n, &cnt);
            tb_ref_count_nonfinite(x, n, &want);
            CHECK(cnt == (float)want_cnt && want == (float)want_cnt,
                  "count_nonfinite n=%zu: %g (reference %g), want %zu", n, (double)cnt,
                  (double)want, want_cnt);
        }
        free(x);
    }
    printf("reduce_sum (deterministic, same for 1 and 2 threads), count_nonfinite: done\n");
    close_ops(be1);
    close_ops(be2);
}

/* ---------------------------------------------------------------- dropout */

static void test_dropout(void)
{
    tb_backend *be1 = open_ops(1), *be2 = open_ops(2);
    static const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
    static const uint64_t offsets[] = {0, 12345, ((uint64_t)1 << 32) - 100};
    size_t n = 65537;
    float *x = fnew(n), *y1 = fnew(n), *y2 = fnew(n), *yr = fnew(n), *dx = fnew(n), *dr = fnew(n);
    uint8_t *m1 = xmalloc(n), *m2 = xmalloc(n), *mr = xmalloc(n);
    fill(x, n, 2.0f);
    for (size_t pi = 0; pi < 4; pi++) {
        for (size_t oi = 0; oi < 3; oi++) {
            float p = ps[pi];
            uint64_t seed = 42 + pi, off = offsets[oi];
            be1->dropout_fwd(be1, p, seed, off, x, y1, m1, n);
            be2->dropout_fwd(be2, p, seed, off, x, y2, m2, n);
            tb_ref_dropout_fwd(p, seed, off, x, yr, mr, n);
            CHECK(same(m1, mr, n) && same(y1, yr, n * 4), "dropout p=%g offset=%llu t=1",
                  (double)p, (unsigned long long)off);
            CHECK(same(m2, m1, n) && same(y2, y1, n * 4), "dropout p=%g: 2 threads differ",
                  (double)p);
            /* the first 1000 and the rest, with offsets, give the same mask */
            be2->dropout_fwd(be2, p, seed, off, x, y2, m2, 1000);
            be2->dropout_fwd(be2, p, seed, off + 1000, x + 1000, y2 + 1000, m2 + 1000, n - 1000);
            CHECK(same(m2, m1, n), "dropout p=%g: split with offsets differs", (double)p);
            size_t kept = 0;
            for (size_t i = 0; i < n; i++)
                kept += m1[i];
            double want = (1.0 - p) * n, sd = sqrt(n * p * (1.0 - p)) + 1.0;
            CHECK(fabs(kept - want) <= 5 * sd, "dropout p=%g kept %zu of %zu", (double)p, kept, n);
            be2->dropout_bwd(be2, p, m1, x, dx, n);
            tb_ref_dropout_bwd(p, m1, x, dr, n);
            CHECK(same(dx, dr, n * 4), "dropout_bwd p=%g", (double)p);
        }
    }
    be1->dropout_fwd(be1, 0.5f, 1, 0, x, y1, m1, n);
    be1->dropout_fwd(be1, 0.5f, 2, 0, x, y2, m2, n);
    size_t agree = 0;
    for (size_t i = 0; i < n; i++)
        agree += m1[i] == m2[i];
    CHECK(agree > n * 0.45 && agree < n * 0.55, "seeds 1 and 2 agree on %zu of %zu mask bits",
          agree, n);
    CHECK(be1->dropout_fwd(be1, 1.5f, 1, 0, x, y1, m1, n) == TB_ERR_INVALID, "p = 1.5 refused");
    tb_error_clear();
    printf("dropout (reference, threads, split offsets, block boundary, kept fraction): done\n");
    free(x), free(y1), free(y2), free(yr), free(dx), free(dr), free(m1), free(m2), free(mr);
    close_ops(be1);
    close_ops(be2);
}

/* ---------------------------------------------------------------- bf16 activations */

/* Batch norm and pooling on bf16 activations (x, y, dy, dx 2-byte; the
 * rest fp32) are checked against the fp32 reference run on the same
 * values: inputs rounded to bf16 first, the reference's outputs rounded to
 * bf16 after. Kernel and reference agree in fp32 to the fp32 tolerances;
 * rounded, two such values are the same or one bf16 ulp apart, at most
 * 2^-7 of the value (8 significant bits). Outputs that are one of the
 * inputs (max pooling) must match exactly. */
#define BF16_RTOL (1.0 / 128.0)

static void round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tb_bf16_to_f32(tb_f32_to_bf16(x[i]));
}

/* A bf16 copy of x[0, n) (x already rounded: exact). */
static uint16_t *bf16_copy(const float *x, size_t n)
{
    uint16_t *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = tb_f32_to_bf16(x[i]);
    return h;
}

static void widen_bf16(const uint16_t *h, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tb_bf16_to_f32(h[i]);
}

/* The buffers a kernel reads and writes: the fp32 arrays themselves, or
 * bf16 copies of them (act_in) and 2-byte outputs (act_out). */
static void *act_in(const tb_dtype dt, float *x, size_t n)
{
    return dt == TB_BF16 ? (void *)bf16_copy(x, n) : (void *)x;
}

static void *act_out(const tb_dtype dt, float *y, size_t n)
{
    return dt == TB_BF16 ? xmalloc(n * sizeof(uint16_t)) : (void *)y;
}

/* y = what the kernel wrote to out (widened when bf16); want rounded to
 * bf16 when the kernel's outputs are. */
static void act_result(const tb_dtype dt, const void *out, float *y, float *want, size_t n)
{
    if (dt != TB_BF16)
        return;
    widen_bf16(out, y, n);
    round_bf16(want, n);
}

static void act_free(const void *buf, const float *x)
{
    if (buf != (const void *)x)
        free((void *)buf);
}

static const char *dtype_name(tb_dtype dt) { return dt == TB_BF16 ? "bf16" : "f32"; }

/* The code paths of the bf16 outputs' rounding (bf16_rows.c) this CPU
 * runs: paths[0, return). */
static int bf16_row_paths(int *paths)
{
    int n = 0;
    paths[n++] = TB_CPU_PATH_GENERIC;
    if (tb_cpu_bf16_rows_set_path(TB_CPU_PATH_AVX512) == TB_OK)
        paths[n++] = TB_CPU_PATH_AVX512;
    tb_error_clear();
    tb_cpu_bf16_rows_set_path(TB_CPU_PATH_AUTO);
    return n;
}

/* tb_cpu_bf16_round_row = tb_f32_to_bf16 bit for bit on each path, at
 * every length to 70 (the AVX512 path's 32-lane blocks and masked tail),
 * on values that include fp32 denormals (AVX512_BF16 flushes them; the
 * path redoes them), ties, NaN, infinities, zeros and overflow to Inf. */
static void test_bf16_rows(void)
{
    static const uint32_t special[] = {0x00000001u, 0x807fffffu, 0x00400000u, 0x3f808000u,
                                       0x3f818000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                       0xff800000u, 0x7fc00001u, 0xff800001u, 0x00000000u,
                                       0x80000000u, 0x007fffffu, 0x00800000u};
    float src[70];
    uint16_t got[72], want[70];
    for (size_t i = 0; i < 70; i++) {
        uint32_t u = special[i % (sizeof special / sizeof special[0])];
        if (i % 3 == 1) {
            float f = (float)((urand() * 2.0 - 1.0) * 1e3);
            memcpy(&u, &f, sizeof u);
        }
        memcpy(&src[i], &u, sizeof u);
        want[i] = tb_f32_to_bf16(src[i]);
    }
    int paths[2], np = bf16_row_paths(paths);
    for (int k = 0; k < np; k++) {
        CHECK(tb_cpu_bf16_rows_set_path(paths[k]) == TB_OK, "bf16 rows path %d", paths[k]);
        for (size_t n = 0; n <= 70; n++) {
            got[n] = got[n + 1] = 0x5a5a;
            tb_cpu_bf16_round_row(got, src, n);
            CHECK(same(got, want, n * sizeof *got) && got[n] == 0x5a5a,
                  "bf16 rows path %d, n=%zu: differs from tb_f32_to_bf16 or wrote past n",
                  paths[k], n);
        }
    }
    tb_cpu_bf16_rows_set_path(TB_CPU_PATH_AUTO);
    printf("bf16 output rounding (paths: %d) = tb_f32_to_bf16, denormals, NaN, Inf, tails: done\n",
           np);
}

/* ---------------------------------------------------------------- batch norm */

static void test_bn_case(tb_backend *be, tb_bn_desc d)
{
    size_t total = (size_t)d.n * d.c * d.hw, C = (size_t)d.c;
    float *x = fnew(total), *y = fnew(total), *yr = fnew(total), *dy = fnew(total),
          *dx = fnew(total), *dxr = fnew(total);
    float *g = fnew(C), *b = fnew(C), *rm = fnew(C), *rv = fnew(C), *rmr = fnew(C),
          *rvr = fnew(C), *sm = fnew(C), *si = fnew(C), *smr = fnew(C), *sir = fnew(C),
          *dg = fnew(C), *db = fnew(C), *dgr = fnew(C), *dbr = fnew(C);
    int threads = ((tb_cpu_ctx *)be->ctx)->threads;
    fill(x, total, 2.0f);
    for (size_t i = 0; i < total; i++)
        x[i] += 0.5f; /* a mean away from zero */
    fill(dy, total, 1.0f);
    fill(g, C, 1.5f);
    fill(b, C, 1.0f);
    fill(rm, C, 0.5f);
    fill_pos(rv, C, 0.5f, 2.0f);
    memcpy(rmr, rm, C * 4);
    memcpy(rvr, rv, C * 4);
    const char *lay = d.layout == TB_NCHW ? "NCHW" : "NHWC", *dt = dtype_name(d.dtype);
    /* bf16: the kernel reads the rounded inputs, the reference the same
     * values in fp32; outputs get one rounding more (BF16_RTOL); the
     * statistics, dgamma and dbeta are fp32 either way */
    double ro = d.dtype == TB_BF16 ? BF16_RTOL : 0.0;
    if (d.dtype == TB_BF16) {
        round_bf16(x, total);
        round_bf16(dy, total);
    }
    tb_bn_desc dr = d;
    dr.dtype = TB_F32;
    void *xk = act_in(d.dtype, x, total), *dyk = act_in(d.dtype, dy, total);
    void *yk = act_out(d.dtype, y, total), *dxk = act_out(d.dtype, dx, total);

    CHECK(be->bn_fwd_train(be, &d, xk, g, b, yk, rm, rv, sm, si) == TB_OK, "bn_fwd_train status");
    tb_ref_bn_fwd_train(&dr, x, g, b, yr, rmr, rvr, smr, sir);
    act_result(d.dtype, yk, y, yr, total);
    CHECK(near("bn y", y, yr, total, 1e-5, 1e-5 + ro) && near("bn save_mean", sm, smr, C, 1e-6, 1e-6) &&
              near("bn save_invstd", si, sir, C, 0, 1e-6) &&
              near("bn running_mean", rm, rmr, C, 1e-6, 1e-6) &&
              near("bn running_var", rv, rvr, C, 0, 1e-6),
          "bn_fwd_train %s %s n=%d c=%d hw=%d t=%d", dt, lay, d.n, d.c, d.hw, threads);

    CHECK(be->bn_fwd_infer(be, &d, xk, g, b, rm, rv, yk) == TB_OK, "bn_fwd_infer status");
    tb_ref_bn_fwd_infer(&dr, x, g, b, rm, rv, yr);
    act_result(d.dtype, yk, y, yr, total);
    CHECK(near("bn infer y", y, yr, total, 1e-5, 1e-5 + ro),
          "bn_fwd_infer %s %s n=%d c=%d hw=%d t=%d", dt, lay, d.n, d.c, d.hw, threads);

    for (int acc = 0; acc <= 1; acc++) {
        fill(dg, C, 1.0f);
        fill(db, C, 1.0f);
        memcpy(dgr, dg, C * 4);
        memcpy(dbr, db, C * 4);
        CHECK(be->bn_bwd(be, &d, xk, dyk, g, sm, si, dxk, dg, db, acc) == TB_OK, "bn_bwd status");
        tb_ref_bn_bwd(&dr, x, dy, g, sm, si, dxr, dgr, dbr, acc);
        act_result(d.dtype, dxk, dx, dxr, total);
        CHECK(near("bn dx", dx, dxr, total, 1e-5, 1e-4 + ro) && near("bn dgamma", dg, dgr, C, 1e-5, 1e-5) &&
                  near("bn dbeta", db, dbr, C, 1e-5, 1e-5),
              "bn_bwd %s %s n=%d c=%d hw=%d acc=%d t=%d", dt, lay, d.n, d.c, d.hw, acc, threads);
    }
    act_free(xk, x), act_free(dyk, dy), act_free(yk, y), act_free(dxk, dx);
    free(x), free(y), free(yr), free(dy), free(dx), free(dxr), free(g), free(b), free(rm);
    free(rv), free(rmr), free(rvr), free(sm), free(si), free(smr), free(sir), free(dg), free(db);
    free(dgr), free(dbr);
}

/* Every shape and layout in fp32, then in bf16 on each rounding path. */
static void test_bn(int threads)
{
    /* hw < 32 takes batchnorm.c's small-plane NCHW path; {16, 600, 4}: two
     * position chunks, above the one-thread cutoff (NHWC: 4 row chunks, 3
     * channel blocks, the last partial); {5, 300, 7}: NHWC's 35 rows in 2
     * uneven chunks; {3, 1100, 2}: rows (NHWC 1100, NCHW small-plane 2200)
     * longer than a bf16 stage's 1024 floats */
    static const int shapes[][3] = {{2, 3, 7},    {33, 7, 1},   {3, 17, 49}, {1, 1, 2},
                                    {8, 40, 256}, {16, 600, 4}, {5, 300, 7}, {3, 1100, 2}};
    tb_backend *be = open_ops(threads);
    int paths[2], np = bf16_row_paths(paths);
    for (int run = 0; run <= np; run++) {
        tb_dtype dt = run == 0 ? TB_F32 : TB_BF16;
        if (run > 0)
            CHECK(tb_cpu_bf16_rows_set_path(paths[run - 1]) == TB_OK, "bf16 rows path");
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int l = 0; l < 2; l++) {
                tb_bn_desc d = {shapes[s][0], shapes[s][1], shapes[s][2], (tb_layout)l, 1e-5f,
                                0.1f, dt};
                test_bn_case(be, d);
            }
    }
    tb_cpu_bf16_rows_set_path(TB_CPU_PATH_AUTO);
    tb_bn_desc one = {1, 4, 1, TB_NCHW, 1e-5f, 0.1f};
    float v[4] = {1, 2, 3, 4};
    CHECK(be->bn_fwd_train(be, &one, v, v, v, v, v, v, v, v) == TB_ERR_INVALID,
          "bn training on one value per channel refused");
    tb_error_clear();
    printf("batch norm fwd train/infer, bwd (NCHW, NHWC, accumulate 0/1; fp32, bf16 on %d "
           "rounding paths) t=%d: done\n", np, threads);
    close_ops(be);
}

/* ---------------------------------------------------------------- pooling */

static void test_pool_case(tb_backend *be, tb_pool_desc d)
{
    int P, Q;
    if (tb_ref_pool_out(&d, &P, &Q) != TB_OK) {
        CHECK(0, "bad test pool shape");
        return;
    }
    size_t nin = (size_t)d.n * d.c * d.h * d.w, nout = (size_t)d.n * d.c * P * Q;
    float *x = fnew(nin), *y = fnew(nout), *yr = fnew(nout), *dy = fnew(nout), *dx = fnew(nin),
          *dxr = fnew(nin);
    int32_t *am = xmalloc(nout * 4), *amr = xmalloc(nout * 4);
    int max = d.kind == TB_POOL_MAX;
    fill_distinct(x, nin);
    fill(dy, nout, 1.0f);
    const char *what = max ? "max" : "avg";
    const char *lay = d.layout == TB_NCHW ? "NCHW" : "NHWC", *dt = dtype_name(d.dtype);
    int threads = ((tb_cpu_ctx *)be->ctx)->threads;
    /* bf16: as batch norm (BF16_RTOL); a maximum is an input, exact; the
     * rounded ramp has ties, where both take the first (argmax equal) */
    int bf = d.dtype == TB_BF16;
    double ro = bf ? BF16_RTOL : 0.0, tol_y = bf && max ? 0.0 : 1e-6;
    if (bf) {
        round_bf16(x, nin);
        round_bf16(dy, nout);
    }
    tb_pool_desc dr = d;
    dr.dtype = TB_F32;
    void *xk = act_in(d.dtype, x, nin), *dyk = act_in(d.dtype, dy, nout);
    void *yk = act_out(d.dtype, y, nout), *dxk = act_out(d.dtype, dx, nin);

    CHECK(be->pool_fwd(be, &d, xk, yk, max ? am : NULL) == TB_OK, "pool_fwd status");
    tb_ref_pool_fwd(&dr, x, yr, max ? amr : NULL);
    act_result(d.dtype, yk, y, yr, nout);
    CHECK(near("pool y", y, yr, nout, tol_y, tol_y + ro) && (!max || same(am, amr, nout * 4)),
          "pool_fwd %s %s %s %dx%dx%dx%d win=%d stride=%d pad=%d t=%d", what, dt, lay, d.n, d.c,
          d.h, d.w, d.window, d.stride, d.pad, threads);
    if (bf)
        memset(dxk, 0xff, nin * 2); /* NaN: pool_bwd must zero dx */
    else
        for (size_t i = 0; i < nin; i++)
            dx[i] = NAN; /* pool_bwd must zero dx */
    CHECK(be->pool_bwd(be, &d, dyk, max ? am : NULL, dxk) == TB_OK, "pool_bwd status");
    tb_ref_pool_bwd(&dr, dy, max ? amr : NULL, dxr);
    act_result(d.dtype, dxk, dx, dxr, nin);
    CHECK(near("pool dx", dx, dxr, nin, 1e-6, 1e-6 + ro),
          "pool_bwd %s %s %s %dx%dx%dx%d win=%d t=%d", what, dt, lay, d.n, d.c, d.h, d.w,
          d.window, threads);
    act_free(xk, x), act_free(dyk, dy), act_free(yk, y), act_free(dxk, dx);
    free(x), free(y), free(yr), free(dy), free(dx), free(dxr), free(am), free(amr);
}

/* Max pooling on values with many ties and some NaN: the first of equal
 * values wins and NaN propagates (a later NaN takes over), as in the
 * reference; y and argmax must match it exactly (bf16: the values are
 * exact in bf16, and y is compared bit for bit with the reference's). */
static void test_pool_ties_nan(tb_backend *be, tb_layout layout, int window, int pad,
                               tb_dtype dt)
{
    /* 9x9: with the 2x2 window (its own NCHW path) the last row and column are dropped */
    tb_pool_desc d = {TB_POOL_MAX, 2, 5, 9, 9, window, 2, pad, layout, dt};
    int P, Q;
    tb_ref_pool_out(&d, &P, &Q);
    size_t nin = (size_t)d.n * d.c * d.h * d.w, nout = (size_t)d.n * d.c * P * Q;
    float *x = fnew(nin), *y = fnew(nout), *yr = fnew(nout);
    int32_t *am = xmalloc(nout * 4), *amr = xmalloc(nout * 4);
    for (size_t i = 0; i < nin; i++)
        x[i] = i % 11 == 5 ? NAN : (float)((i * 7) % 4) - 1.5f; /* 4 values: ties everywhere */
    void *xk = act_in(dt, x, nin), *yk = act_out(dt, y, nout);
    CHECK(be->pool_fwd(be, &d, xk, yk, am) == TB_OK, "pool_fwd ties status");
    tb_pool_desc dr = d;
    dr.dtype = TB_F32;
    tb_ref_pool_fwd(&dr, x, yr, amr);
    act_result(dt, yk, y, yr, nout);
    CHECK(same(y, yr, nout * 4) && same(am, amr, nout * 4),
          "max pool ties/NaN %s %s %dx%d differs", dtype_name(dt),
          layout == TB_NCHW ? "NCHW" : "NHWC", window, window);
    act_free(xk, x), act_free(yk, y);
    free(x), free(y), free(yr), free(am), free(amr);
}

/* Every case in fp32, then in bf16 on each rounding path. */
static void test_pool(int threads)
{
    /* n, c, h, w, window, stride, pad */
    static const int shapes[][7] = {
        {2, 3, 7, 7, 3, 2, 1},   {2, 5, 8, 8, 2, 2, 0},     {2, 4, 7, 7, 7, 1, 0}, /* global */
        {1, 17, 9, 9, 3, 1, 1},  {1, 1, 1, 1, 1, 1, 0},     {16, 33, 28, 28, 3, 2, 1},
        {3, 2, 10, 11, 3, 2, 1}, /* odd width: a clipped last window in each row */
        /* pool.c's backward tasks: bf16 NHWC images of 95040 elements in
         * bands of 13 rows (at most 32768 elements) that windows straddle;
         * NCHW planes of 960 in groups of 4 (4096 elements), the last of 2 */
        {2, 99, 40, 24, 3, 2, 1},
        /* 2x2 stride 2 (pool.c's AVX512 path for bf16 NCHW): odd sizes
         * (a row and a column no window covers), 14 outputs a row (one
         * masked vector), 35 (two vectors and a tail) */
        {2, 3, 9, 7, 2, 2, 0},   {2, 3, 28, 28, 2, 2, 0},   {1, 2, 6, 70, 2, 2, 0},
    };
    tb_backend *be = open_ops(threads);
    int paths[2], np = bf16_row_paths(paths);
    int pool_avx512 = tb_cpu_pool_set_path(TB_CPU_PATH_AVX512) == TB_OK;
    tb_error_clear();
    /* fp32, then bf16 on each rounding path, and on pool.c's generic and
     * AVX512 paths for the 2x2 max pool */
    for (int run = 0; run <= np * (1 + pool_avx512); run++) {
        tb_dtype dt = run == 0 ? TB_F32 : TB_BF16;
        if (run > 0) {
            CHECK(tb_cpu_bf16_rows_set_path(paths[(run - 1) % np]) == TB_OK, "bf16 rows path");
            CHECK(tb_cpu_pool_set_path(run > np ? TB_CPU_PATH_AVX512 : TB_CPU_PATH_GENERIC) ==
                      TB_OK, "pool path");
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int k = 0; k < 2; k++)
                for (int l = 0; l < 2; l++) {
                    const int *v = shapes[s];
                    tb_pool_desc d = {(tb_pool_kind)k, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                                      (tb_layout)l, dt};
                    test_pool_case(be, d);
                }
        for (int l = 0; l < 2; l++) {
            test_pool_ties_nan(be, (tb_layout)l, 3, 1, dt);
            test_pool_ties_nan(be, (tb_layout)l, 2, 0, dt);
        }
    }
    tb_cpu_bf16_rows_set_path(TB_CPU_PATH_AUTO);
    tb_cpu_pool_set_path(TB_CPU_PATH_AUTO);
    tb_pool_desc bad = {TB_POOL_MAX, 1, 1, 4, 4, 2, 1, 2, TB_NCHW};
    float x[16], y[64];
    int32_t am[64];
    CHECK(be->pool_fwd(be, &bad, x, y, am) == TB_ERR_INVALID, "pad > window / 2 refused");
    tb_error_clear();
    printf("pooling max/avg fwd, bwd (NCHW, NHWC, padding, global; fp32, bf16 on %d rounding "
           "paths and %d pooling paths) t=%d: done\n", np, 1 + pool_avx512, threads);
    close_ops(be);
}

/* ---------------------------------------------------------------- softmax xent */

static void test_xent(int threads)
{
    static const int shapes[][2] = {{1, 1}, {7, 10}, {33, 1001}, {256, 10}, {1001, 7}};
    tb_backend *be = open_ops(threads);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], k = shapes[s][1];
        size_t n = (size_t)rows * k;
        float *z = fnew(n), *p = fnew(n), *pr = fnew(n), *l = fnew(rows), *lr = fnew(rows),
              *dz = fnew(n), *dzr = fnew(n);
        int32_t *lab = xmalloc((size_t)rows * 4);
        fill(z, n, s == 3 ? 80.0f : 4.0f); /* +-80: exp overflows without the max */
        for (int r = 0; r < rows; r++)
            lab[r] = (int32_t)(urand() * k);
        CHECK(be->softmax_xent_fwd(be, z, lab, rows, k, p, l) == TB_OK, "xent fwd status");
        tb_ref_softmax_xent_fwd(z, lab, rows, k, pr, lr);
        CHECK(near("probs", p, pr, n, 1e-7, 1e-5) && near("loss", l, lr, rows, 1e-5, 1e-5),
              "softmax_xent_fwd %dx%d t=%d", rows, k, threads);
        CHECK(be->softmax_xent_bwd(be, p, lab, rows, k, 1.0f / rows, dz) == TB_OK, "xent bwd");
        tb_ref_softmax_xent_bwd(p, lab, rows, k, 1.0f / rows, dzr);
        CHECK(near("dlogits", dz, dzr, n, 1e-8, 1e-6), "softmax_xent_bwd %dx%d t=%d", rows, k,
              threads);
        lab[rows - 1] = k;
        CHECK(be->softmax_xent_fwd(be, z, lab, rows, k, p, l) == TB_ERR_INVALID,
              "label out of range refused");
        tb_error_clear();
        free(z), free(p), free(pr), free(l), free(lr), free(dz), free(dzr), free(lab);
    }
    printf("softmax cross-entropy fwd, bwd (incl. logits of +-80) t=%d: done\n", threads);
    close_ops(be);
}

/* ---------------------------------------------------------------- lse cross-entropy */

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        w = e > w || isnan(e) ? e : w;
    }
    return w;
}

/* xent_lse on one shape: against the float64 reference, every code path
 * bitwise equal to the default one, in place == out of place bitwise, and
 * within tolerance of softmax_xent_fwd/bwd (the same loss, computed through
 * probabilities). Tolerances (errors printed for the widest shape):
 *   loss, lse: |err| <= 2e-6 + 1e-6 |ref|: the float lanes' sums (64 terms
 *     each) and exp's ~2 ulp, then one float rounding of values ~11.
 *   dlogits: |err| <= scale (1.2e-7 + 1e-6 |p - onehot|): exp's ~2 ulp
 *     of p <= 1 (absolute: p - 1 is exact, so the label's entry carries
 *     p's rounding), plus the float rounding of lse - z where p is not tiny.
 *   against softmax_xent: the lse is a float (the contract's one float per
 *     row), so exp(z - lse) carries its rounding, |lse| 6e-8 relative:
 *     |err| <= scale 1.2e-7 (1 + max |lse|) + 2e-5 |ref|. */
static double lse_worst_loss, lse_worst_grad;

static void test_xent_lse_shape(tb_backend *be, int rows, int k, float range, int threads)
{
    size_t n = (size_t)rows * k;
    float *z = fnew(n), *l = fnew(rows), *lse = fnew(rows), *lr = fnew(rows), *lser = fnew(rows),
          *dz = fnew(n), *dzr = fnew(n), *dzi = fnew(n), *p = fnew(n), *ls = fnew(rows),
          *dzs = fnew(n), *l2 = fnew(rows), *lse2 = fnew(rows), *dz2 = fnew(n);
    int32_t *lab = xmalloc((size_t)rows * 4);
    float scale = 1.0f / (float)rows;
    fill(z, n, range);
    for (int r = 0; r < rows; r++)
        lab[r] = (int32_t)(urand() * k);

    CHECK(be->xent_lse_fwd(be, z, lab, rows, k, l, lse) == TB_OK, "xent_lse_fwd status");
    tb_ref_xent_lse_fwd(z, lab, rows, k, lr, lser);
    CHECK(near("loss", l, lr, rows, 2e-6, 1e-6) && near("lse", lse, lser, rows, 2e-6, 1e-6),
          "xent_lse_fwd %dx%d t=%d", rows, k, threads);
    CHECK(be->xent_lse_bwd(be, z, lse, lab, rows, k, scale, dz) == TB_OK, "xent_lse_bwd status");
    tb_ref_xent_lse_bwd(z, lse, lab, rows, k, scale, dzr);
    CHECK(near("dlogits", dz, dzr, n, 1.2e-7 * scale, 1e-6), "xent_lse_bwd %dx%d t=%d", rows, k,
          threads);
    lse_worst_loss = fmax(lse_worst_loss, fmax(max_abs_diff(l, lr, rows),
                                               max_abs_diff(lse, lser, rows)));
    lse_worst_grad = fmax(lse_worst_grad, max_abs_diff(dz, dzr, n) / scale);

    /* in place: the logits overwritten by their gradient */
    memcpy(dzi, z, n * sizeof(float));
    CHECK(be->xent_lse_bwd(be, dzi, lse, lab, rows, k, scale, dzi) == TB_OK, "in place status");
    CHECK(same(dzi, dz, n * sizeof(float)), "xent_lse_bwd %dx%d in place != out of place", rows,
          k);

    /* the same loss and gradient as the softmax form */
    CHECK(be->softmax_xent_fwd(be, z, lab, rows, k, p, ls) == TB_OK, "softmax fwd status");
    CHECK(be->softmax_xent_bwd(be, p, lab, rows, k, scale, dzs) == TB_OK, "softmax bwd status");
    double max_lse = 0.0;
    for (int r = 0; r < rows; r++)
        max_lse = fmax(max_lse, fabs((double)lse[r]));
    CHECK(near("loss vs softmax_xent", l, ls, rows, 1e-5, 1e-5) &&
              near("dlogits vs softmax_xent", dz, dzs, n, 1.2e-7 * scale * (1.0 + max_lse), 2e-5),
          "xent_lse vs softmax_xent %dx%d", rows, k);

    /* every code path this CPU has gives the same bits */
    int def = tb_cpu_xent_lse_path();
    for (int path = TB_CPU_PATH_GENERIC; path <= TB_CPU_PATH_AVX512; path++) {
        if (tb_cpu_xent_lse_set_path(path) != TB_OK) {
            tb_error_clear();
            continue;
        }
        CHECK(be->xent_lse_fwd(be, z, lab, rows, k, l2, lse2) == TB_OK, "fwd path %d", path);
        CHECK(be->xent_lse_bwd(be, z, lse, lab, rows, k, scale, dz2) == TB_OK, "bwd path %d",
              path);
        CHECK(same(l2, l, rows * sizeof(float)) && same(lse2, lse, rows * sizeof(float)) &&
                  same(dz2, dz, n * sizeof(float)),
              "xent_lse %dx%d: code path %d differs from path %d", rows, k, path, def);
    }
    CHECK(tb_cpu_xent_lse_set_path(TB_CPU_PATH_AUTO) == TB_OK && tb_cpu_xent_lse_path() == def,
          "back to the default path");

    lab[rows - 1] = k;
    CHECK(be->xent_lse_fwd(be, z, lab, rows, k, l, lse) == TB_ERR_INVALID,
          "xent_lse_fwd: label out of range refused");
    CHECK(be->xent_lse_bwd(be, z, lse, lab, rows, k, scale, dz) == TB_ERR_INVALID,
          "xent_lse_bwd: label out of range refused");
    tb_error_clear();
    free(z), free(l), free(lse), free(lr), free(lser), free(dz), free(dzr), free(dzi), free(p);
    free(ls), free(dzs), free(l2), free(lse2), free(dz2), free(lab);
}

static void test_xent_lse(int threads)
{
    /* odd sizes, a block boundary (1024) +- 1, GPT-2's vocabulary; +-80
     * logits where exp overflows without the max */
    static const struct { int rows, k; float range; } shapes[] = {
        {1, 1, 4.0f}, {7, 10, 4.0f}, {33, 17, 80.0f}, {5, 1023, 4.0f}, {3, 1025, 8.0f},
        {9, 2049, 4.0f}, {1, 50257, 4.0f}, {6, 50257, 10.0f}, {257, 31, 4.0f},
    };
    tb_backend *be = open_ops(threads);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        test_xent_lse_shape(be, shapes[s].rows, shapes[s].k, shapes[s].range, threads);
    printf("lse cross-entropy fwd, bwd, in place, paths, vs softmax_xent t=%d: max |err| loss/lse "
           "%.3g, dlogits/scale %.3g\n",
           threads, lse_worst_loss, lse_worst_grad);
    close_ops(be);
}

/* ---------------------------------------------------------------- optimizers */

#define OPT_TENSORS 5

/* Three copies of the same parameters and state (fast per-tensor, fast
 * fused, reference) in one flat buffer each, as the library keeps them. */
typedef struct opt_set {
    float *flat[3];         /* param | state1 | state2 for all tensors | tensor states */
    float *grad;
    tb_param_view views[3][OPT_TENSORS];
    size_t total;
} opt_set;

static void opt_set_make(opt_set *o)
{
    o->total = 0;
    for (int i = 0; i < OPT_TENSORS; i++)
        o->total += SIZES[i];
    o->grad = fnew(o->total);
    for (int k = 0; k < 3; k++)
        o->flat[k] = fnew(3 * o->total + OPT_TENSORS);
    fill(o->flat[0], o->total, 1.0f);
    /* PyTorch's zero-initialized state */
    memset(o->flat[0] + o->total, 0, (2 * o->total + OPT_TENSORS) * 4);
    for (int k = 1; k < 3; k++)
        memcpy(o->flat[k], o->flat[0], (3 * o->total + OPT_TENSORS) * 4);
    for (int k = 0; k < 3; k++) {
        size_t off = 0;
        for (int i = 0; i < OPT_TENSORS; i++) {
            float *f = o->flat[k];
            /* tensor 1 unadapted (a bias, a norm's gamma or beta: LARS and
             * LAMB give it trust 1 and no weight decay) */
            o->views[k][i] = (tb_param_view){f + off, o->grad + off, f + o->total + off,
                                             f + 2 * o->total + off, SIZES[i],
                                             f + 3 * o->total + i, i == 1};
            off += SIZES[i];
        }
    }
}

static void opt_set_free(opt_set *o)
{
    free(o->grad);
    for (int k = 0; k < 3; k++)
        free(o->flat[k]);
}

static void test_opt_case(tb_backend *be, tb_opt_hparams hp, const char *name)
{
    opt_set o;
    opt_set_make(&o);
    int threads = ((tb_cpu_ctx *)be->ctx)->threads, ok = 1;
    for (int step = 1; step <= 4; step++) {
        hp.step = step;
        fill(o.grad, o.total, hp.grad_scale); /* grads as AMP leaves them: scaled */
        ok &= be->opt_step(be, &hp, o.views[0], OPT_TENSORS, 0) == TB_OK;
        ok &= be->opt_step(be, &hp, o.views[1], OPT_TENSORS, 1) == TB_OK;
        ok &= tb_ref_opt_step(&hp, o.views[2], OPT_TENSORS) == TB_OK;
    }
    CHECK(ok, "%s: opt_step status", name);
    size_t all = 3 * o.total + OPT_TENSORS;
    CHECK(near("fused vs per-tensor", o.flat[1], o.flat[0], all, 0, 1e-6),
          "%s t=%d: fused and per-tensor differ by more than 1e-6 relative", name, threads);
    CHECK(same(o.flat[1], o.flat[0], all * 4), "%s t=%d: fused and per-tensor not bitwise "
          "equal (expected on the CPU: same steps, no FMA contraction)", name, threads);
    CHECK(near("vs reference", o.flat[0], o.flat[2], all, 1e-6, 1e-5),
          "%s t=%d: differs from the reference", name, threads);
    opt_set_free(&o);
}

static void test_opt(int threads)
{
    tb_backend *be = open_ops(threads);
    tb_opt_hparams sgd = {.kind = TB_OPT_SGD, .lr = 0.1f, .momentum = 0.9f,
                          .weight_decay = 1e-4f, .grad_scale = 1.0f};
    test_opt_case(be, sgd, "SGD momentum 0.9 wd 1e-4");
    sgd.grad_scale = 1024.0f;
    test_opt_case(be, sgd, "SGD momentum 0.9 wd 1e-4 grad_scale 1024");
    sgd.momentum = 0.0f;
    sgd.weight_decay = 0.0f;
    test_opt_case(be, sgd, "SGD plain, grad_scale 1024");
    tb_opt_hparams adamw = {.kind = TB_OPT_ADAMW, .lr = 1e-3f, .weight_decay = 0.01f,
                            .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .grad_scale = 1.0f};
    test_opt_case(be, adamw, "AdamW");
    adamw.grad_scale = 65536.0f;
    test_opt_case(be, adamw, "AdamW grad_scale 65536");

    tb_opt_hparams lars = {.kind = TB_OPT_LARS, .lr = 1.0f, .momentum = 0.9f,
                           .weight_decay = 5e-4f, .trust_coef = 1e-3f, .grad_scale = 1.0f};
    test_opt_case(be, lars, "LARS momentum 0.9");
    lars.momentum = 0.0f;
    lars.grad_scale = 256.0f;
    test_opt_case(be, lars, "LARS momentum 0 grad_scale 256");
    tb_opt_hparams lamb = {.kind = TB_OPT_LAMB, .lr = 1e-3f, .weight_decay = 0.01f,
                           .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .grad_scale = 1.0f};
    test_opt_case(be, lamb, "LAMB");
    tb_opt_hparams novo = {.kind = TB_OPT_NOVOGRAD, .lr = 1e-2f, .weight_decay = 1e-3f,
                           .beta1 = 0.95f, .beta2 = 0.98f, .eps = 1e-8f, .grad_scale = 1024.0f};
    test_opt_case(be, novo, "NovoGrad grad_scale 1024");
    printf("optimizers SGD, AdamW, LARS, LAMB, NovoGrad: fused == per-tensor, both near the "
           "reference, 5 tensors "
           "of odd sizes, 4 steps t=%d: done\n", threads);
    close_ops(be);
}

/* LARS against a float64 step written here from the published formula
 * (You et al. 2017; torchlars, apex LARC with clip off), not from
 * kernels/optim_math.h nor lib/backend/ref/ops.c, which could share a mistake:
 *   g = grad / grad_scale; local_lr = eta |w| / (|g| + wd |w| + eps) when
 *   |w| > 0 and |g| > 0, else 1; d = local_lr (g + wd w);
 *   buf = d (first step), momentum buf + d (after); w -= lr buf.
 * Tensors: odd sizes, one crossing the CPU's 16384-element chunk and one of
 * three chunks, a zero tensor (BN beta at init: local_lr 1), a tensor whose
 * gradient is zero (local_lr 1, decay only). Fused and per-tensor, 2 steps. */
#define LARS_T 7

static void lars_step_f64(double lr, double momentum, double wd, double eta, double eps,
                          double grad_scale, int step, double *w, double *buf, const float *grad,
                          size_t n)
{
    double wn = 0.0, gn = 0.0;
    for (size_t i = 0; i < n; i++) {
        wn += w[i] * w[i];
        gn += (grad[i] / grad_scale) * (grad[i] / grad_scale);
    }
    wn = sqrt(wn);
    gn = sqrt(gn);
    double local_lr = wn > 0.0 && gn > 0.0 ? eta * wn / (gn + wd * wn + eps) : 1.0;
    for (size_t i = 0; i < n; i++) {
        double d = local_lr * (grad[i] / grad_scale + wd * w[i]);
        buf[i] = step == 1 ? d : momentum * buf[i] + d;
        w[i] -= lr * buf[i];
    }
}

static void test_lars_f64_case(tb_backend *be, int fused, float grad_scale)
{
    static const size_t n_of[LARS_T] = {1, 7, 100, 16387, 40000, 16, 33};
    enum { ZERO_W = 5, ZERO_G = 6 };
    const double lr = 2.0, mom = 0.9, wd = 5e-4, eta = 1e-3, eps = 1e-8;
    size_t off[LARS_T + 1] = {0};
    for (int t = 0; t < LARS_T; t++)
        off[t + 1] = off[t] + n_of[t];
    size_t total = off[LARS_T];
    float *w = fnew(total), *buf = fnew(total), *g = fnew(total), *w0 = fnew(total);
    float *got_w = fnew(total), *got_buf = fnew(total);
    double *rw = dnew(total), *rbuf = dnew(total);
    /* |w| in [0.1, 0.5), either sign: LARS moves a tensor by about
     * lr * eta * ||w||, which must stay far above the tolerance below, also
     * for the one-element tensor */
    fill_pos(w, total, 0.1f, 0.5f);
    for (size_t i = 0; i < total; i++)
        w[i] = urand() < 0.5 ? -w[i] : w[i];
    memset(w + off[ZERO_W], 0, n_of[ZERO_W] * sizeof(float));
    memset(buf, 0, total * sizeof(float));
    memcpy(w0, w, total * sizeof(float));
    for (size_t i = 0; i < total; i++)
        rw[i] = w[i], rbuf[i] = 0.0;
    tb_param_view v[LARS_T];
    for (int t = 0; t < LARS_T; t++)
        v[t] = (tb_param_view){w + off[t], g + off[t], buf + off[t], NULL, n_of[t], NULL};
    tb_opt_hparams hp = {.kind = TB_OPT_LARS, .lr = (float)lr, .momentum = (float)mom,
                         .weight_decay = (float)wd, .trust_coef = (float)eta, .eps = (float)eps,
                         .grad_scale = grad_scale};
    int ok = 1;
    for (int step = 1; step <= 2; step++) {
        hp.step = step;
        fill(g, total, 0.05f * grad_scale);
        memset(g + off[ZERO_G], 0, n_of[ZERO_G] * sizeof(float));
        ok &= be->opt_step(be, &hp, v, LARS_T, fused) == TB_OK;
        for (int t = 0; t < LARS_T; t++)
            lars_step_f64(lr, mom, wd, eta, eps, grad_scale, step, rw + off[t], rbuf + off[t],
                          g + off[t], n_of[t]);
    }
    CHECK(ok, "LARS f64 fused=%d: opt_step status", fused);
    for (size_t i = 0; i < total; i++)
        got_w[i] = (float)rw[i], got_buf[i] = (float)rbuf[i];
    for (int t = 0; t < LARS_T; t++) {
        size_t a = off[t], n = n_of[t];
        /* the step must be far above the tolerance, or the check says nothing */
        double moved = 0.0;
        for (size_t i = a; i < a + n; i++)
            moved = fmax(moved, fabs(rw[i] - w0[i]));
        CHECK(moved > 1e-4, "LARS f64: tensor %d (n %zu) moved only %g", t, n, moved);
        CHECK(near("LARS param vs f64", w + a, got_w + a, n, 1e-7, 1e-5) &&
                  near("LARS momentum vs f64", buf + a, got_buf + a, n, 1e-9, 1e-4),
              "LARS vs the float64 step: tensor %d (n %zu) fused=%d grad_scale %g", t, n, fused,
              (double)grad_scale);
    }
    hp.trust_coef = 0.0f;
    CHECK(be->opt_step(be, &hp, v, LARS_T, fused) == TB_ERR_INVALID,
          "LARS with trust_coef 0 (nothing but zero-norm tensors would move) refused");
    tb_error_clear();
    free(w), free(buf), free(g), free(w0), free(got_w), free(got_buf), free(rw), free(rbuf);
}

static void test_lars_f64(int threads)
{
    tb_backend *be = open_ops(threads);
    for (int fused = 0; fused <= 1; fused++) {
        test_lars_f64_case(be, fused, 1.0f);
        test_lars_f64_case(be, fused, 512.0f);
    }
    printf("LARS vs a float64 step from the paper's formula (7 tensors incl. zero weights, "
           "zero gradient, >1 chunk; fused and per-tensor; grad_scale 1, 512) t=%d: done\n",
           threads);
    close_ops(be);
}

/* ---------------------------------------------------------------- gradient checks */

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void drand_fill(double *x, size_t n, double r)
{
    for (size_t i = 0; i < n; i++) {
        double u = urand() * 2.0 - 1.0;
        x[i] = (fabs(u) < 0.01 ? 0.01 : u) * r;
    }
}

/* L = sum(w * bn(x; gamma, beta)) in double; running stats go to scratch. */
static double bn_loss(const tb_bn_desc *d, const double *x, const double *g, const double *b,
                      const double *w, double *scratch)
{
    size_t total = (size_t)d->n * d->c * d->hw, C = (size_t)d->c;
    double *y = scratch, *rm = y + total, *rv = rm + C, *sm = rv + C, *si = sm + C;
    memset(rm, 0, 2 * C * sizeof *rm);
    tb_ref_bn_fwd_train_f64(d, x, g, b, y, rm, rv, sm, si);
    return dot(w, y, total);
}

/* Central difference of loss at coordinate i of v. */
#define FD(v, i, expr)                                 \
    ({                                                 \
        double keep_ = (v)[i], h_ = 1e-6;              \
        (v)[i] = keep_ + h_;                           \
        double lp_ = (expr);                           \
        (v)[i] = keep_ - h_;                           \
        double lm_ = (expr);                           \
        (v)[i] = keep_;                                \
        (lp_ - lm_) / (2 * h_);                        \
    })

static void gradcheck_bn(tb_layout layout)
{
    tb_bn_desc d = {3, 4, 5, layout, 1e-5f, 0.1f};
    size_t total = 60, C = 4;
    double *x = dnew(total), *w = dnew(total), *g = dnew(C), *b = dnew(C), *dx = dnew(total),
           *dg = dnew(C), *db = dnew(C), *scr = dnew(total + 4 * C);
    drand_fill(x, total, 2.0);
    drand_fill(w, total, 1.0);
    drand_fill(g, C, 1.5);
    drand_fill(b, C, 1.0);
    bn_loss(&d, x, g, b, w, scr);
    double *sm = scr + total + 2 * C, *si = sm + C;
    double smc[4], sic[4];
    memcpy(smc, sm, sizeof smc);
    memcpy(sic, si, sizeof sic);
    tb_ref_bn_bwd_f64(&d, x, w, g, smc, sic, dx, dg, db, 0);
    double worst = 0.0;
    for (int t = 0; t < 8; t++) {
        size_t i = (size_t)(urand() * total);
        worst = fmax(worst, fabs(FD(x, i, bn_loss(&d, x, g, b, w, scr)) - dx[i]));
    }
    for (size_t c = 0; c < C; c++) {
        worst = fmax(worst, fabs(FD(g, c, bn_loss(&d, x, g, b, w, scr)) - dg[c]));
        worst = fmax(worst, fabs(FD(b, c, bn_loss(&d, x, g, b, w, scr)) - db[c]));
    }
    CHECK(worst < 1e-6, "bn %s gradient vs finite differences: error %.3g",
          layout == TB_NCHW ? "NCHW" : "NHWC", worst);
    free(x), free(w), free(g), free(b), free(dx), free(dg), free(db), free(scr);
}

static double xent_loss(const double *z, const int32_t *lab, int rows, int k, double scale,
                        double *scratch)
{
    double *loss = scratch + (size_t)rows * k;
    tb_ref_softmax_xent_fwd_f64(z, lab, rows, k, scratch, loss);
    double s = 0.0;
    for (int r = 0; r < rows; r++)
        s += scale * loss[r];
    return s;
}

static void gradcheck_xent(void)
{
    int rows = 4, k = 6;
    size_t n = (size_t)rows * k;
    int32_t lab[4] = {0, 5, 2, 3};
    double *z = dnew(n), *p = dnew(n), *l = dnew(rows), *dz = dnew(n), *scr = dnew(n + rows);
    drand_fill(z, n, 3.0);
    tb_ref_softmax_xent_fwd_f64(z, lab, rows, k, p, l);
    tb_ref_softmax_xent_bwd_f64(p, lab, rows, k, 0.25, dz);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(FD(z, i, xent_loss(z, lab, rows, k, 0.25, scr)) - dz[i]));
    CHECK(worst < 1e-7, "softmax-xent gradient vs finite differences: error %.3g", worst);
    free(z), free(p), free(l), free(dz), free(scr);
}

static double pool_loss(const tb_pool_desc *d, const double *x, const double *w, size_t nout,
                        double *y, int32_t *am)
{
    tb_ref_pool_fwd_f64(d, x, y, am);
    return dot(w, y, nout);
}

static void gradcheck_pool(tb_pool_kind kind, tb_layout layout)
{
    tb_pool_desc d = {kind, 2, 3, 6, 6, 3, 2, 1, layout};
    int P, Q;
    tb_ref_pool_out(&d, &P, &Q);
    size_t nin = 2 * 3 * 36, nout = (size_t)2 * 3 * P * Q;
    double *x = dnew(nin), *w = dnew(nout), *y = dnew(nout), *dx = dnew(nin);
    int32_t *am = xmalloc(nout * 4), *am2 = xmalloc(nout * 4);
    float *xf = fnew(nin);
    fill_distinct(xf, nin); /* spaced 2/nin apart: +-1e-6 never reorders them */
    for (size_t i = 0; i < nin; i++)
        x[i] = xf[i];
    drand_fill(w, nout, 1.0);
    pool_loss(&d, x, w, nout, y, am);
    tb_ref_pool_bwd_f64(&d, w, am, dx);
    double worst = 0.0;
    for (size_t i = 0; i < nin; i += 5)
        worst = fmax(worst, fabs(FD(x, i, pool_loss(&d, x, w, nout, y, am2)) - dx[i]));
    CHECK(worst < 1e-7, "%s pool %s gradient vs finite differences: error %.3g",
          kind == TB_POOL_MAX ? "max" : "avg", layout == TB_NCHW ? "NCHW" : "NHWC", worst);
    free(x), free(w), free(y), free(dx), free(am), free(am2), free(xf);
}

static void test_gradcheck(void)
{
    for (int l = 0; l < 2; l++) {
        gradcheck_bn((tb_layout)l);
        gradcheck_pool(TB_POOL_MAX, (tb_layout)l);
        gradcheck_pool(TB_POOL_AVG, (tb_layout)l);
    }
    gradcheck_xent();
    printf("float64 reference gradients vs central differences (bn, softmax-xent, max/avg "
           "pool): done\n");
}

/* Welford merging (bn_math.h, for the GPU's partial statistics) gives the
 * two-pass mean and variance. */
static void test_welford(void)
{
    double x[101], s = 0.0, q = 0.0;
    for (int i = 0; i < 101; i++) {
        x[i] = 3.0 + urand();
        s += x[i];
    }
    double mean = s / 101;
    for (int i = 0; i < 101; i++)
        q += (x[i] - mean) * (x[i] - mean);
    tb_welford a = {0, 0, 0}, b = {0, 0, 0};
    for (int i = 0; i < 40; i++)
        a = tb_welford_push(a, x[i]);
    for (int i = 40; i < 101; i++)
        b = tb_welford_push(b, x[i]);
    tb_welford m = tb_welford_merge(a, b);
    CHECK(m.count == 101 && fabs(m.mean - mean) < 1e-12 && fabs(m.m2 - q) < 1e-10,
          "welford merge: mean %.15g want %.15g, m2 %.15g want %.15g", m.mean, mean, m.m2, q);
    printf("welford merge matches two-pass statistics: done\n");
}

int main(void)
{
    for (int t = 0; t < 2; t++) {
        test_elementwise(THREADS[t]);
        test_bias(THREADS[t]);
        test_bn(THREADS[t]);
        test_pool(THREADS[t]);
        test_xent(THREADS[t]);
        test_xent_lse(THREADS[t]);
        test_opt(THREADS[t]);
        test_lars_f64(THREADS[t]);
    }
    test_bf16_rows();
    test_reductions();
    test_dropout();
    test_gradcheck();
    test_welford();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
