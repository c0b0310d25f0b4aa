/*
 * cast_test.c - mixed precision on the CPU: the casts of kernels/cast_math.h
 * (the code both backends run) and the CPU backend's low-precision slots.
 *
 *   casts: round to nearest even at ties and between, NaN (quiet, sign
 *   kept), +-Inf, signed zeros, fp32 denormals (bf16 keeps them; fp16
 *   flushes them), fp16 denormals, the largest finite values and the
 *   overflow threshold (65520 -> Inf), every bf16 and fp16 bit pattern
 *   round-tripping lowp -> f32 -> lowp, and the cast slots equal to the
 *   header with 1 and 2 threads on a size above the one-thread cutoff, on
 *   the AVX-512 bf16 path (where the CPU has it) and the portable one;
 *   gemm_lowp (bf16) and bf16 convolution, all three directions and both
 *   layouts, against the fp32 reference at the bf16 tolerance; fp16 refused
 *   with TB_ERR_UNSUPPORTED (oneDNN 2.6 has no CPU fp16).
 * Prints which oneDNN implementation ran bf16 (this VM has no AVX512_BF16).
 *
 * Run: bazel test //lib/backend/cpu:cast_test
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/ref/conv.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"
#include "lib/core/rng.h"

static float fbits(uint32_t u) { return tb_cast_bits_f32(u); }

static void test_bf16_edges(void)
{
    struct { uint32_t in; uint16_t want; const char *what; } cases[] = {
        {0x3f800000u, 0x3f80, "1.0"},
        {0x3f808000u, 0x3f80, "tie to even (down)"},
        {0x3f818000u, 0x3f82, "tie to even (up)"},
        {0x3f808001u, 0x3f81, "just above a tie"},
        {0x3f807fffu, 0x3f80, "just below a tie"},
        {0x80000000u, 0x8000, "-0"},
        {0x7f800000u, 0x7f80, "+Inf"},
        {0xff800000u, 0xff80, "-Inf"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX rounds to Inf"},
        {0x7f7f0000u, 0x7f7f, "bf16 max"},
        {0x7f7f7fffu, 0x7f7f, "below the bf16 overflow tie"},
        {0x00000001u, 0x0000, "smallest fp32 denormal -> 0"},
        {0x00010000u, 0x0001, "bf16 denormal kept"},
        {0x00018000u, 0x0002, "denormal tie to even"},
        {0x807fffffu, 0x8080, "largest negative denormal rounds to -FLT_MIN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = tb_f32_to_bf16(fbits(cases[i].in));
        CHECK(got == cases[i].want, "bf16(%08x) %s: got %04x want %04x", cases[i].in,
              cases[i].what, got, cases[i].want);
    }
    uint16_t nan = tb_f32_to_bf16(fbits(0x7f800001u)); /* signalling, payload only in low bits */
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "bf16 NaN stays NaN: %04x", nan);
    nan = tb_f32_to_bf16(fbits(0xffc00000u));
    CHECK(nan == 0xffc0, "bf16 -NaN keeps its sign: %04x", nan);
    /* every pattern: exact widening, and back to the same bits (NaN: a NaN) */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tb_bf16_to_f32((uint16_t)h);
        uint16_t back = tb_f32_to_bf16(f);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan)
            CHECK(isnan(f) && (back & 0x7f80) == 0x7f80 && (back & 0x7f), "bf16 NaN %04x", h);
        else if (back != h) {
            CHECK(0, "bf16 round trip %04x -> %g -> %04x", h, (double)f, back);
            break;
        }
    }
}

static void test_f16_edges(void)
{
    struct { float in; uint16_t want; const char *what; } cases[] = {
        {1.0f, 0x3c00, "1.0"},
        {-2.0f, 0xc000, "-2"},
        {65504.0f, 0x7bff, "fp16 max"},
        {65519.99f, 0x7bff, "just below the overflow tie"},
        {65520.0f, 0x7c00, "overflow tie -> Inf"},
        {1e30f, 0x7c00, "huge -> Inf"},
        {-INFINITY, 0xfc00, "-Inf"},
        {-0.0f, 0x8000, "-0"},
        {6.103515625e-05f, 0x0400, "smallest normal 2^-14"},
        {5.9604644775390625e-08f, 0x0001, "smallest denormal 2^-24"},
        {2.98023223876953125e-08f, 0x0000, "2^-25 ties to even 0"},
        {2.9802326e-08f, 0x0001, "just above 2^-25"},
        {8.940696716308594e-08f, 0x0002, "1.5 * 2^-24 ties to even 2"},
        {1e-45f, 0x0000, "fp32 denormal -> 0"},
        {1.00048828125f, 0x3c00, "1 + 2^-11 ties to even (down)"},
        {1.00146484375f, 0x3c02, "1 + 3 * 2^-11 ties to even (up)"},
        {6.1e-05f, 0x03ff, "just below 2^-14: largest denormal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = tb_f32_to_f16(cases[i].in);
        CHECK(got == cases[i].want, "fp16(%.9g) %s: got %04x want %04x", (double)cases[i].in,
              cases[i].what, got, cases[i].want);
    }
    CHECK((tb_f32_to_f16(NAN) & 0x7e00) == 0x7e00, "fp16 NaN is a quiet NaN");
    CHECK(tb_f32_to_f16(-NAN) & 0x8000, "fp16 -NaN keeps its sign");
    CHECK(tb_f16_to_f32(0x7bff) == 65504.0f, "fp16 max widens exactly");
    CHECK(tb_f16_to_f32(0x0001) == 5.9604644775390625e-08f, "fp16 denormal widens exactly");
    CHECK(isinf(tb_f16_to_f32(0xfc00)) && tb_f16_to_f32(0xfc00) < 0, "fp16 -Inf");
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tb_f16_to_f32((uint16_t)h);
        uint16_t back = tb_f32_to_f16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan)
            CHECK(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff), "fp16 NaN %04x", h);
        else if (back != h) {
            CHECK(0, "fp16 round trip %04x -> %g -> %04x", h, (double)f, back);
            break;
        }
    }
    /* round to nearest: the result is one of the two neighbours, the nearer */
    tb_rng r = tb_rng_seeded(12345);
    for (int i = 0; i < 200000; i++) {
        float f = (float)tb_rng_uniform(&r, -1.0, 1.0) * 70000.0f;
        float r = tb_f16_to_f32(tb_f32_to_f16(f));
        if (fabsf(f) >= 65520.0f)
            continue;
        float ulp = fabsf(f) < 6.103515625e-05f ? 5.9604644775390625e-08f
                                                 : ldexpf(1.0f, ilogbf(fabsf(f)) - 10);
        if (!(fabsf(r - f) <= 0.5f * ulp)) {
            CHECK(0, "fp16 of %.9g is %.9g: more than half an ulp (%g)", (double)f, (double)r,
                  (double)ulp);
            break;
        }
    }
}

/* The slots equal the header, 1 and 2 threads, past the one-thread cutoff. */
static void test_cast_slots(void)
{
    size_t n = 100003;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint16_t *lp = malloc(n * sizeof *lp);
    tb_rng r = tb_rng_seeded(7);
    for (size_t i = 0; i < n; i++)
        x[i] = fbits((uint32_t)(tb_rng_next_u64(&r) >> 32)); /* any bit pattern: NaN, Inf, denormals */
    for (int run = 0; run < 4; run++) {
        int threads = 1 + run % 2, path = run < 2 ? TB_CPU_PATH_AUTO : TB_CPU_PATH_GENERIC;
        CHECK(tb_cpu_cast_set_path(path) == TB_OK, "cast path %d", path);
        printf("cast slots: %d threads, bf16 path %s\n", threads,
               tb_cpu_cast_path() == TB_CPU_PATH_AVX512 ? "avx512" : "generic");
        tb_backend *be;
        if (tb_backend_cpu_create(threads, &be) != TB_OK) {
            tb_error_print(stdout);
            exit(1);
        }
        for (int dt = TB_BF16; dt <= TB_F16; dt++) {
            int rc = be->cast_f32_to_lowp(be, (tb_dtype)dt, x, lp, n);
            CHECK(rc == TB_OK, "cast_f32_to_lowp dtype %d: %s", dt, tb_err_name(rc));
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += lp[i] != (dt == TB_BF16 ? tb_f32_to_bf16(x[i]) : tb_f32_to_f16(x[i]));
            CHECK(bad == 0, "cast_f32_to_lowp dtype %d threads %d: %zu differ", dt, threads, bad);
            rc = be->cast_lowp_to_f32(be, (tb_dtype)dt, lp, y, n);
            CHECK(rc == TB_OK, "cast_lowp_to_f32 dtype %d: %s", dt, tb_err_name(rc));
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                float want = dt == TB_BF16 ? tb_bf16_to_f32(lp[i]) : tb_f16_to_f32(lp[i]);
                bad += memcmp(&want, &y[i], 4) != 0;
            }
            CHECK(bad == 0, "cast_lowp_to_f32 dtype %d threads %d: %zu differ", dt, threads, bad);
        }
        CHECK(be->cast_f32_to_lowp(be, TB_F32, x, lp, n) == TB_ERR_INVALID, "fp32 refused");
        tb_error_clear();
        tb_backend_close(be);
    }
    tb_cpu_cast_set_path(TB_CPU_PATH_AUTO);
    CHECK(tb_cpu_cast_set_path(99) == TB_ERR_INVALID, "unknown cast path refused");
    tb_error_clear();
    free(x);
    free(y);
    free(lp);
}

static float rnd(tb_rng *r) { return (float)tb_rng_uniform(r, -1.0, 1.0); }

static double max_rel(const float *want, const float *got, size_t n)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(want[i]));
        err = fmax(err, fabs((double)want[i] - got[i]));
        if (!isfinite(got[i]))
            return INFINITY;
    }
    return err / (scale > 0 ? scale : 1);
}

/* n random floats, and their bf16 copy. */
static void rand_pair(size_t n, tb_rng *s, float **f, uint16_t **lp)
{
    *f = malloc(n * sizeof **f);
    *lp = malloc(n * sizeof **lp);
    for (size_t i = 0; i < n; i++) {
        (*f)[i] = rnd(s);
        (*lp)[i] = tb_f32_to_bf16((*f)[i]);
    }
}

#define TOL_BF16 2e-2

static void test_gemm_lowp(tb_backend *be)
{
    int m = 37, n = 65, k = 129;
    tb_rng s = tb_rng_seeded(99);
    float *a, *b, *c = malloc((size_t)m * n * 4), *want = malloc((size_t)m * n * 4);
    uint16_t *al, *bl;
    rand_pair((size_t)m * k, &s, &a, &al);
    rand_pair((size_t)k * n, &s, &b, &bl);
    for (int beta = 0; beta <= 1; beta++) {
        for (int i = 0; i < m * n; i++)
            c[i] = want[i] = beta ? rnd(&s) : NAN;
        tb_gemm_ref(0, 1, m, n, k, 1.0f, a, k, b, k, (float)beta, want, n); /* B stored n x k */
        int rc = be->gemm_lowp(be, TB_BF16, 0, 1, m, n, k, 1.0f, al, k, bl, k, (float)beta, c, n);
        if (rc != TB_OK) {
            CHECK(0, "gemm_lowp bf16: %s: %s", tb_err_name(rc), tb_error_message());
            tb_error_clear();
            break;
        }
        double e = max_rel(want, c, (size_t)m * n);
        printf("gemm_lowp bf16 NT %dx%dx%d beta=%d: max_rel_err %.2g (tol %g)\n", m, n, k, beta,
               e, TOL_BF16);
        CHECK(e <= TOL_BF16, "gemm_lowp bf16 beta %d: %.3g", beta, e);
    }
    int rc = be->gemm_lowp(be, TB_F16, 0, 1, m, n, k, 1.0f, al, k, bl, k, 0.0f, c, n);
    CHECK(rc == TB_ERR_UNSUPPORTED, "gemm_lowp fp16 on the CPU is n/a: got %s", tb_err_name(rc));
    printf("gemm_lowp fp16: %s\n", tb_error_message());
    tb_error_clear();
    free(a), free(b), free(al), free(bl), free(c), free(want);
}

/* The name of desc's default algorithm for `kind` ("?" if not found). */
static const char *default_name(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind)
{
    static char name[64];
    int algo = -1, found = 0;
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    snprintf(name, sizeof name, "?");
    if (be->conv_algo_default(be, d, kind, &algo) == TB_OK &&
        be->conv_find(be, d, kind, perf, TB_MAX_CONV_ALGOS, &found) == TB_OK)
        for (int i = 0; i < found; i++)
            if (perf[i].algo == algo)
                snprintf(name, sizeof name, "%s", perf[i].name);
    tb_error_clear();
    return name;
}

/* The same direction with lowp_out (bf16 activations): y or dx written in
 * bf16 by the default algorithm for that descriptor, within one rounding
 * (2^-8 relative) of the fp32 output got[0, n) of the same inputs. */
#define TOL_LOWP_OUT 4e-3
static void lowp_out_one(tb_backend *be, tb_conv_desc d, tb_conv_kind kind, const uint16_t *xl,
                         const uint16_t *wl, const uint16_t *dyl, const float *bias,
                         const float *got, size_t n)
{
    d.lowp_out = 1;
    uint16_t *out = malloc(n * sizeof *out);
    float *wide = malloc(n * sizeof *wide);
    int algo;
    int rc = be->conv_algo_default(be, &d, kind, &algo);
    if (rc == TB_OK && kind == TB_CONV_FWD)
        rc = be->conv_fwd(be, &d, algo, (const float *)xl, (const float *)wl, bias,
                          (float *)out);
    else if (rc == TB_OK)
        rc = be->conv_bwd_data(be, &d, algo, (const float *)dyl, (const float *)wl,
                               (float *)out);
    const char *lay = d.layout == TB_NHWC ? "nhwc" : "nchw";
    if (rc != TB_OK) {
        CHECK(0, "bf16 conv %s kind %d, bf16 outputs: %s: %s", lay, kind, tb_err_name(rc),
              tb_error_message());
        tb_error_clear();
    } else {
        for (size_t i = 0; i < n; i++)
            wide[i] = tb_bf16_to_f32(out[i]);
        double e = max_rel(got, wide, n);
        printf("conv bf16 %s kind %d, bf16 outputs (%s): max_rel_err to fp32's %.2g (tol %g)\n",
               lay, kind, default_name(be, &d, kind), e, TOL_LOWP_OUT);
        CHECK(e <= TOL_LOWP_OUT, "bf16 conv %s kind %d, bf16 outputs: %.3g", lay, kind, e);
    }
    free(out);
    free(wide);
}

static void conv_one(tb_backend *be, tb_conv_desc d)
{
    size_t nx = (size_t)d.n * d.c * d.h * d.w, nw = (size_t)d.k * d.c * d.r * d.s;
    size_t ny = (size_t)d.n * d.k * tb_conv_out_h(&d) * tb_conv_out_w(&d);
    tb_rng s = tb_rng_seeded(5);
    float *x, *w, *dy, *bias = malloc(d.k * 4);
    uint16_t *xl, *wl, *dyl;
    rand_pair(nx, &s, &x, &xl);
    rand_pair(nw, &s, &w, &wl);
    rand_pair(ny, &s, &dy, &dyl);
    for (int i = 0; i < d.k; i++)
        bias[i] = rnd(&s);
    size_t most = nx > ny ? nx : ny;
    most = most > nw ? most : nw;
    float *want = malloc(most * 4), *got = malloc(most * 4), *wantb = malloc(d.k * 4),
          *gotb = malloc(d.k * 4);
    tb_conv_desc rd = d;
    rd.dtype = TB_F32;
    rd.math = TB_MATH_F32;
    const char *lay = d.layout == TB_NHWC ? "nhwc" : "nchw";
    for (int kind = 0; kind < 3; kind++) {
        int algo;
        int rc = be->conv_algo_default(be, &d, (tb_conv_kind)kind, &algo);
        if (rc == TB_OK && kind == TB_CONV_FWD) {
            tb_conv_ref_fwd(&rd, x, w, bias, want);
            rc = be->conv_fwd(be, &d, algo, (const float *)xl, (const float *)wl, bias, got);
        } else if (rc == TB_OK && kind == TB_CONV_BWD_DATA) {
            tb_conv_ref_bwd_data(&rd, dy, w, want);
            rc = be->conv_bwd_data(be, &d, algo, (const float *)dyl, (const float *)wl, got);
        } else if (rc == TB_OK) {
            tb_conv_ref_bwd_filter(&rd, x, dy, want, wantb, 0);
            rc = be->conv_bwd_filter(be, &d, algo, (const float *)xl, (const float *)dyl, got,
                                     gotb, 0);
        }
        if (rc != TB_OK) {
            CHECK(0, "bf16 conv %s kind %d: %s: %s", lay, kind, tb_err_name(rc),
                  tb_error_message());
            tb_error_clear();
            continue;
        }
        const char *name = default_name(be, &d, (tb_conv_kind)kind);
        size_t n = kind == TB_CONV_FWD ? ny : kind == TB_CONV_BWD_DATA ? nx : nw;
        double e = max_rel(want, got, n);
        if (kind == TB_CONV_BWD_FILTER)
            e = fmax(e, max_rel(wantb, gotb, (size_t)d.k));
        printf("conv bf16 %s kind %d (%s): max_rel_err %.2g (tol %g)\n", lay, kind, name, e,
               TOL_BF16);
        CHECK(e <= TOL_BF16, "bf16 conv %s kind %d: %.3g", lay, kind, e);
        if (kind != TB_CONV_BWD_FILTER)
            lowp_out_one(be, d, (tb_conv_kind)kind, xl, wl, dyl, bias, got, n);
    }
    free(x), free(w), free(dy), free(xl), free(wl), free(dyl), free(bias);
    free(want), free(got), free(wantb), free(gotb);
}

/* Every part-3 entry ("+widen": the fp32 twin's kernel, its operands
 * widened and narrowed by its reorders) in every direction, against the
 * fp32 reference on the same bf16 values; y and dx also written in bf16
 * (lowp_out). Only where bf16 runs on oneDNN's bf16 kernels: a widened
 * CPU's list is the twin's own. */
static void conv_widened_all(tb_backend *be, tb_conv_desc d)
{
    size_t nx = (size_t)d.n * d.c * d.h * d.w, nw = (size_t)d.k * d.c * d.r * d.s;
    size_t ny = (size_t)d.n * d.k * tb_conv_out_h(&d) * tb_conv_out_w(&d);
    size_t most = nx > ny ? nx : ny;
    most = most > nw ? most : nw;
    tb_rng s = tb_rng_seeded(9);
    float *x, *w, *dy, *want = malloc(most * 4), *got = malloc(most * 4), *wantb = malloc(d.k * 4),
                       *gotb = malloc(d.k * 4), *bias = malloc(d.k * 4);
    uint16_t *xl, *wl, *dyl, *out = malloc(most * 2);
    rand_pair(nx, &s, &x, &xl);
    rand_pair(nw, &s, &w, &wl);
    rand_pair(ny, &s, &dy, &dyl);
    for (int i = 0; i < d.k; i++)
        bias[i] = rnd(&s);
    tb_conv_desc rd = d;
    rd.dtype = TB_F32, rd.math = TB_MATH_F32;
    tb_conv_ref_fwd(&rd, x, w, bias, want);
    const char *lay = d.layout == TB_NHWC ? "nhwc" : "nchw";
    for (int kind = 0; kind < 3; kind++) {
        tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
        int found = 0, widened = 0;
        CHECK(be->conv_find(be, &d, (tb_conv_kind)kind, perf, TB_MAX_CONV_ALGOS, &found) ==
                  TB_OK, "conv_find %s kind %d", lay, kind);
        tb_error_clear();
        size_t n = kind == TB_CONV_FWD ? ny : kind == TB_CONV_BWD_DATA ? nx : nw;
        if (kind == TB_CONV_BWD_DATA)
            tb_conv_ref_bwd_data(&rd, dy, w, want);
        else if (kind == TB_CONV_BWD_FILTER)
            tb_conv_ref_bwd_filter(&rd, x, dy, want, wantb, 0);
        for (int i = 0; i < found; i++) {
            if (!strstr(perf[i].name, "+widen"))
                continue;
            widened++;
            for (int lowp = 0; lowp < (kind == TB_CONV_BWD_FILTER ? 1 : 2); lowp++) {
                tb_conv_desc dd = d;
                dd.lowp_out = lowp;
                void *o = lowp ? (void *)out : (void *)got;
                int a = perf[i].algo, rc;
                if (kind == TB_CONV_FWD)
                    rc = be->conv_fwd(be, &dd, a, (const float *)xl, (const float *)wl, bias, o);
                else if (kind == TB_CONV_BWD_DATA)
                    rc = be->conv_bwd_data(be, &dd, a, (const float *)dyl, (const float *)wl, o);
                else
                    rc = be->conv_bwd_filter(be, &dd, a, (const float *)xl, (const float *)dyl,
                                             o, gotb, 0);
                if (rc != TB_OK) {
                    CHECK(0, "%s %s kind %d: %s: %s", perf[i].name, lay, kind, tb_err_name(rc),
                          tb_error_message());
                    tb_error_clear();
                    continue;
                }
                if (lowp)
                    for (size_t j = 0; j < n; j++)
                        got[j] = tb_bf16_to_f32(out[j]);
                double e = max_rel(want, got, n);
                if (kind == TB_CONV_BWD_FILTER)
                    e = fmax(e, max_rel(wantb, gotb, (size_t)d.k));
                printf("conv bf16 %s kind %d%s (%s): max_rel_err %.2g (tol %g)\n", lay, kind,
                       lowp ? ", bf16 outputs" : "", perf[i].name, e, TOL_BF16);
                CHECK(e <= TOL_BF16, "%s %s kind %d lowp_out %d: %.3g", perf[i].name, lay, kind,
                      lowp, e);
            }
        }
        CHECK(widened > 0, "bf16 %s kind %d: no +widen entry in the algorithm list", lay, kind);
    }
    free(x), free(w), free(dy), free(xl), free(wl), free(dyl), free(out);
    free(want), free(got), free(wantb), free(gotb), free(bias);
}

/* conv_bwd = conv_bwd_filter then conv_bwd_data, bit for bit, written and
 * accumulated, with a bias gradient; shared says whether the CPU should
 * have reordered dy once for both (tb_cpu_conv_bwd_shared_calls). */
static void conv_bwd_same(tb_backend *be, tb_conv_desc d, int shared)
{
    size_t nx = (size_t)d.n * d.c * d.h * d.w, nw = (size_t)d.k * d.c * d.r * d.s;
    size_t ny = (size_t)d.n * d.k * tb_conv_out_h(&d) * tb_conv_out_w(&d);
    size_t es = d.dtype == TB_F32 ? 4 : 2, xs = d.lowp_out ? es : 4;
    tb_rng s = tb_rng_seeded(11);
    float *x, *w, *dy;
    uint16_t *xl, *wl, *dyl;
    rand_pair(nx, &s, &x, &xl);
    rand_pair(nw, &s, &w, &wl);
    rand_pair(ny, &s, &dy, &dyl);
    const void *xi = d.dtype == TB_F32 ? (void *)x : (void *)xl;
    const void *wi = d.dtype == TB_F32 ? (void *)w : (void *)wl;
    const void *dyi = d.dtype == TB_F32 ? (void *)dy : (void *)dyl;
    float *dw[2], *db[2];
    void *dx[2];
    for (int v = 0; v < 2; v++) {
        dw[v] = malloc(nw * 4), db[v] = malloc(d.k * 4), dx[v] = malloc(nx * xs);
    }
    int af, ad;
    CHECK(be->conv_algo_default(be, &d, TB_CONV_BWD_FILTER, &af) == TB_OK &&
              be->conv_algo_default(be, &d, TB_CONV_BWD_DATA, &ad) == TB_OK,
          "conv_bwd: default algorithms");
    const char *lay = d.layout == TB_NHWC ? "nhwc" : "nchw";
    for (int acc = 0; acc < 2; acc++) {
        for (int v = 0; v < 2; v++) {
            for (size_t i = 0; i < nw; i++)
                dw[v][i] = 0.25f * (float)(i % 7);
            for (int i = 0; i < d.k; i++)
                db[v][i] = 0.5f * (float)(i % 3);
            memset(dx[v], 0, nx * xs);
        }
        long before = tb_cpu_conv_bwd_shared_calls();
        int rc0 = be->conv_bwd_filter(be, &d, af, xi, dyi, dw[0], db[0], acc);
        int rc1 = be->conv_bwd_data(be, &d, ad, dyi, wi, dx[0]);
        int rc2 = be->conv_bwd(be, &d, af, ad, xi, dyi, wi, dw[1], db[1], acc, dx[1]);
        long took = tb_cpu_conv_bwd_shared_calls() - before;
        CHECK(rc0 == TB_OK && rc1 == TB_OK && rc2 == TB_OK, "conv_bwd %s %s: %s",
              d.dtype == TB_F32 ? "fp32" : "bf16", lay, tb_error_message());
        tb_error_clear();
        int same = !memcmp(dw[0], dw[1], nw * 4) && !memcmp(db[0], db[1], (size_t)d.k * 4) &&
                   !memcmp(dx[0], dx[1], nx * xs);
        printf("conv_bwd %s %s%s c%d s%d accumulate=%d: %s, dy reordered %s\n",
               d.dtype == TB_F32 ? "fp32" : "bf16", lay, d.lowp_out ? " bf16 outputs" : "", d.c,
               d.stride, acc, same ? "the two calls' bits" : "DIFFERS", took ? "once" : "per call");
        CHECK(same, "conv_bwd %s c%d s%d accumulate=%d differs from the two calls", lay, d.c,
              d.stride, acc);
        CHECK(took == shared, "conv_bwd %s c%d s%d: dy shared %ld times, want %d", lay, d.c,
              d.stride, took, shared);
    }
    for (int v = 0; v < 2; v++)
        free(dw[v]), free(db[v]), free(dx[v]);
    free(x), free(w), free(dy), free(xl), free(wl), free(dyl);
}

static void test_conv_bwd(tb_backend *be)
{
    int native = !tb_cpu_bf16_widened(be);
    tb_conv_desc d = {.n = 4, .c = 16, .h = 14, .w = 14, .k = 32, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .layout = TB_NCHW, .dtype = TB_F32, .math = TB_MATH_F32};
    /* fp32 NCHW: both direct kernels on blocked dy (the small CNN's) */
    int blocked = strstr(default_name(be, &d, TB_CONV_BWD_DATA), "+reorder") &&
                  strstr(default_name(be, &d, TB_CONV_BWD_FILTER), "+reorder");
    conv_bwd_same(be, d, blocked);
    tb_conv_desc n = d; /* NHWC: no reorder of dy at all */
    n.layout = TB_NHWC;
    conv_bwd_same(be, n, 0);
    tb_conv_desc b = d; /* bf16 activations: dx written in bf16 */
    b.dtype = TB_BF16, b.math = TB_MATH_LOWP, b.lowp_out = 1;
    conv_bwd_same(be, b, native && blocked);
    tb_conv_desc s = b; /* filter on the fp32 twin (+widen), data on bf16: two layouts */
    s.stride = 2;
    conv_bwd_same(be, s, 0);
}

static void test_conv_lowp(tb_backend *be)
{
    for (int lay = 0; lay < 2; lay++) {
        tb_conv_desc d = {.n = 3, .c = 5, .h = 9, .w = 7, .k = 16, .r = 3, .s = 3, .stride = 1,
                          .pad = 1, .layout = (tb_layout)lay, .dtype = TB_BF16,
                          .math = TB_MATH_LOWP};
        conv_one(be, d);
    }
    /* shape (n c h w k r stride pad) and layout, each run in bf16 */
    static const struct {
        int n, c, h, w, k, r, stride, pad;
        tb_layout layout;
    } cases[] = {
        /* c * r * s < 16: the im2col default for bwd-data (conv.c's gemm_stays) */
        {2, 1, 10, 9, 16, 3, 1, 1, TB_NCHW},
        /* 1x1 stride 1 with >= 128 pixels: the plain gemm in every direction */
        {2, 16, 12, 11, 32, 1, 1, 0, TB_NCHW},
        /* 1x1 stride 1 on NHWC with <= 16 pixels: matmul (conv.c) in every
         * direction, its bias and bias gradient summed from bf16 */
        {3, 24, 4, 3, 40, 1, 1, 0, TB_NHWC},
        /* the patch-matrix cases of matmul: a strided 1x1 to 4x4 (every
         * direction: im2col, and col2im for dx) and a padded 3x3 at 4x4 (its
         * filter gradient) */
        {3, 24, 7, 7, 40, 1, 2, 0, TB_NHWC},
        {3, 24, 4, 4, 16, 3, 1, 1, TB_NHWC},
        /* NCHW with at most 4 output pixels: matmul's filter gradient on
         * NCHW (im2col_nchw, dy copied to rows, its bias gradient widened
         * from bf16), a strided padded 3x3 to 2x2 */
        {3, 24, 4, 4, 16, 3, 2, 1, TB_NCHW},
        /* NCHW strided to at most 49 output pixels: the filter gradient's
         * default is im2col's gemm (conv.c's strided_lowp_gemm), or with at
         * most 32 channels the fp32 twin's kernel (STRIDED_WIDEN_MAX_C; the
         * small CNN's 16->32 3x3 stride 2 to 7x7) */
        {3, 16, 14, 14, 32, 3, 2, 1, TB_NCHW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_one(be, (tb_conv_desc){.n = cases[i].n, .c = cases[i].c, .h = cases[i].h,
                                    .w = cases[i].w, .k = cases[i].k, .r = cases[i].r,
                                    .s = cases[i].r, .stride = cases[i].stride,
                                    .pad = cases[i].pad, .layout = cases[i].layout,
                                    .dtype = TB_BF16, .math = TB_MATH_LOWP});
    /* which filter-gradient default strided_lowp_gemm gives: on NCHW to
     * 7x7 and 4x4, with at most 32 channels the fp32 twin's kernel where
     * bf16 runs on oneDNN's bf16 kernels (else gemm), with more gemm;
     * oneDNN's own choice to 8x8 and on NHWC */
    int native = !tb_cpu_bf16_widened(be);
    enum { ONEDNN, GEMM, WIDEN_OR_GEMM };
    static const struct {
        int c, h, k;
        tb_layout layout;
        int want;
    } strided[] = {
        {16, 14, 32, TB_NCHW, WIDEN_OR_GEMM}, {24, 8, 24, TB_NCHW, WIDEN_OR_GEMM},
        {48, 8, 48, TB_NCHW, GEMM}, {24, 16, 24, TB_NCHW, ONEDNN}, {16, 14, 32, TB_NHWC, ONEDNN},
    };
    static const char *const want_name[] = {"oneDNN's own choice", "im2col's gemm",
                                            "the fp32 twin's kernel (+widen)"};
    for (size_t i = 0; i < sizeof strided / sizeof strided[0]; i++) {
        tb_conv_desc s = {.n = 2, .c = strided[i].c, .h = strided[i].h, .w = strided[i].h,
                          .k = strided[i].k, .r = 3, .s = 3, .stride = 2, .pad = 1,
                          .layout = strided[i].layout, .dtype = TB_BF16, .math = TB_MATH_LOWP};
        const char *name = default_name(be, &s, TB_CONV_BWD_FILTER);
        int got = strstr(name, "+widen") ? 2 : strstr(name, "gemm:") ? GEMM : ONEDNN;
        int want = strided[i].want == WIDEN_OR_GEMM ? (native ? 2 : GEMM) : strided[i].want;
        printf("bf16 %s %dx%d stride 2, %d channels, filter gradient default: %s\n",
               s.layout == TB_NCHW ? "NCHW" : "NHWC", tb_conv_out_h(&s), tb_conv_out_w(&s), s.c,
               name);
        CHECK(got == want, "bf16 stride-2 filter gradient to %dx%d, %d channels, on %s: default "
              "%s, want %s", tb_conv_out_h(&s), tb_conv_out_w(&s), s.c,
              s.layout == TB_NCHW ? "NCHW" : "NHWC", name, want_name[want]);
    }
    if (native) {
        static const int widen_cases[][9] = { /* n c h w k r stride pad nhwc */
            {3, 16, 14, 14, 32, 3, 2, 1, 0}, {2, 5, 9, 7, 16, 3, 1, 1, 0}, {2, 8, 6, 6, 16, 3, 1, 1, 1},
        };
        for (size_t i = 0; i < sizeof widen_cases / sizeof widen_cases[0]; i++) {
            const int *c = widen_cases[i];
            conv_widened_all(be, (tb_conv_desc){.n = c[0], .c = c[1], .h = c[2], .w = c[3],
                                                .k = c[4], .r = c[5], .s = c[5], .stride = c[6],
                                                .pad = c[7], .layout = c[8] ? TB_NHWC : TB_NCHW,
                                                .dtype = TB_BF16, .math = TB_MATH_LOWP});
        }
    }
    tb_conv_desc d = {.n = 2, .c = 4, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .layout = TB_NCHW, .dtype = TB_F16, .math = TB_MATH_LOWP};
    int algo;
    int rc = be->conv_algo_default(be, &d, TB_CONV_FWD, &algo);
    CHECK(rc == TB_ERR_UNSUPPORTED, "fp16 conv on the CPU is n/a: got %s", tb_err_name(rc));
    tb_error_clear();
    d.dtype = TB_BF16;
    d.math = TB_MATH_F32;
    rc = be->conv_algo_default(be, &d, TB_CONV_FWD, &algo);
    CHECK(rc == TB_ERR_INVALID, "bf16 with F32 math refused: got %s", tb_err_name(rc));
    tb_error_clear();
}

int main(void)
{
    test_bf16_edges();
    test_f16_edges();
    test_cast_slots();
    tb_backend *be;
    if (tb_backend_cpu_create(2, &be) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    /* bf16 both ways on every CPU: oneDNN's bf16 kernels where it has
     * them, and the fp32 widening a CPU without AVX-512 runs. */
    int native = !tb_cpu_bf16_widened(be);
    printf("bf16 on this CPU: %s\n", native ? "oneDNN's bf16 kernels" : "widened to fp32");
    for (int widen = native ? 0 : 1; widen < 2; widen++) {
        tb_cpu_bf16_force_widened(be, widen);
        printf("-- bf16 %s\n", widen ? "widened to fp32" : "on oneDNN's bf16 kernels");
        CHECK(tb_cpu_bf16_widened(be) == widen, "bf16 path %d not taken", widen);
        test_gemm_lowp(be);
        test_conv_lowp(be);
        test_conv_bwd(be);
    }
    tb_cpu_bf16_force_widened(be, 0);
    tb_backend_close(be);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
