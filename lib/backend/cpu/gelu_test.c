/*
 * gelu_test.c - checks the CPU GELU (lib/backend/cpu/gelu.c), both forms
 * (exact erf and tanh), and the shared per-element math of
 * kernels/gelu_math.h against the float64 reference (lib/backend/ref/gelu.c).
 *
 *   bazel test //lib/backend/cpu:gelu_cpu_test
 *
 * What it checks, and why:
 *  1. The scalar math (tb_erf_f, tb_exp_neg_f, tb_tanh_f, tb_sech2_f, gelu,
 *     gelu', gelu_tanh, gelu_tanh') over a dense grid. The CUDA kernels run
 *     these very functions, so this is the CPU's proof of the GPU's
 *     per-element arithmetic.
 *  2. Both forms x every ISA path this CPU has x threads {1, 2} x
 *     fused/unfused x forward/backward x sizes {1, 7, 15, 16, 17, 1000, 4097, 100003} on
 *     random inputs (uniform in [-8, 8], normals, a few tiny and large
 *     values), at an aligned and a misaligned address: within the stated
 *     bound of the reference, bitwise equal to the scalar math (so fused ==
 *     unfused == every ISA == the CUDA math), and nothing written past n.
 *  3. In-place use, n = 0, and the error statuses.
 *  4. A thread that used the unfused variants leaves no temporaries behind
 *     when it exits (DataParallel replicas are such threads): the heap,
 *     counted by mallinfo2, is back within 1 MiB after 4 threads each
 *     grew 3 x 4 MiB of temporaries.
 *
 * Tolerances (measured maxima are printed beside them):
 *   erf:   |err| <= 4e-7 and |err| <= 4e-7 |erf(x)|
 *   exp:   |err| <= 3e-7 exp(-s) for s in [0, 86]; exactly 0 beyond
 *   gelu:  |err| <= 1e-6 max(1, |x|)
 *   dx:    |err| <= 1e-6 max(1, |dy|)
 *   tanh:  |err| <= 2e-7 (absolute: 1 - e cancels for tiny |a|)
 *   sech2: |err| <= 6e-7 sech^2(a) for |a| <= 43; exactly 0 beyond
 *   gelu_tanh, its dx: the same bounds as gelu's, against the tanh formula
 */
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gelu_math.h"
#include "lib/backend/cpu/gelu.h"
#include "lib/backend/ref/gelu.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"
#include "lib/core/rng.h"

#define FWD_TOL 1e-6
#define BWD_TOL 1e-6
#define ERF_TOL 4e-7
#define EXP_TOL 3e-7
#define TANH_TOL 2e-7
#define SECH2_TOL 6e-7
#define GUARD 32 /* floats past n that must stay untouched */
#define CANARY 12345.0f

/* ---- inputs ---- */

static tb_rng rng = {0x243f6a8885a308d3ULL}; /* tb_rng_seeded(0x243f6a8885a308d3) */

static uint64_t rng_next(void) { return tb_rng_next_u64(&rng); }

static double rng_uniform(void) { return tb_rng_double01(&rng); }

static float rng_normal(void)
{
    double u1 = rng_uniform() + 0x1.0p-60, u2 = rng_uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Mostly uniform in [-8, 8], one in four normal, a few tiny or large. */
static void fill_inputs(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t pick = rng_next() % 64;
        if (pick == 0)
            x[i] = (float)((rng_uniform() - 0.5) * 1e-6);
        else if (pick == 1)
            x[i] = (float)((rng_uniform() - 0.5) * 40.0);
        else if (pick < 17)
            x[i] = rng_normal();
        else
            x[i] = (float)((rng_uniform() - 0.5) * 16.0);
    }
}

/* ---- the two forms, one table row each: what the array tests loop over ---- */

typedef struct gelu_form {
    const char *name;
    int (*fwd)(tb_gelu_variant, const float *, float *, size_t, int);
    int (*bwd)(tb_gelu_variant, const float *, const float *, float *, size_t, int);
    float (*fwd_f)(float);
    float (*bwd_f)(float, float);
    void (*ref_fwd)(const float *, float *, size_t);
    tb_ref_err (*fwd_err)(const float *, const float *, size_t);
    tb_ref_err (*bwd_err)(const float *, const float *, const float *, size_t);
} gelu_form;

/* The header's functions are static inline: wrap them to take addresses. */
static float erf_fwd_f(float x) { return tb_gelu_fwd_f(x); }
static float erf_bwd_f(float x, float dy) { return tb_gelu_bwd_f(x, dy); }
static float tanh_fwd_f(float x) { return tb_gelu_tanh_fwd_f(x); }
static float tanh_bwd_f(float x, float dy) { return tb_gelu_tanh_bwd_f(x, dy); }

static const gelu_form forms[] = {
    {"erf", tb_cpu_gelu_fwd, tb_cpu_gelu_bwd, erf_fwd_f, erf_bwd_f, tb_ref_gelu_fwd,
     tb_ref_gelu_fwd_err, tb_ref_gelu_bwd_err},
    {"tanh", tb_cpu_gelu_tanh_fwd, tb_cpu_gelu_tanh_bwd, tanh_fwd_f, tanh_bwd_f,
     tb_ref_gelu_tanh_fwd, tb_ref_gelu_tanh_fwd_err, tb_ref_gelu_tanh_bwd_err},
};
#define NFORMS (sizeof forms / sizeof forms[0])

/* ---- 1. the shared scalar math over a dense grid ---- */

static void test_scalar_math(void)
{
    double erf_abs = 0, erf_rel = 0, exp_rel = 0, fwd = 0, bwd = 0;
    /* Every 2^-14 over [-12, 12], then a geometric sweep of tiny values. */
    for (double d = -12.0; d <= 12.0; d += 0x1.0p-14) {
        float x = (float)d;
        double r = erf((double)x), g = tb_erf_f(x);
        erf_abs = fmax(erf_abs, fabs(g - r));
        if (r != 0)
            erf_rel = fmax(erf_rel, fabs(g - r) / fabs(r));
        float one = 1.0f;
        tb_ref_err ef = tb_ref_gelu_fwd_err(&x, (float[]){tb_gelu_fwd_f(x)}, 1);
        tb_ref_err eb = tb_ref_gelu_bwd_err(&x, &one, (float[]){tb_gelu_grad_f(x)}, 1);
        fwd = fmax(fwd, ef.max_scaled);
        bwd = fmax(bwd, eb.max_scaled);
    }
    for (float x = 1e-30f; x < 1e-2f; x *= 1.001f) {
        double r = erf((double)x);
        erf_rel = fmax(erf_rel, fabs(tb_erf_f(x) - r) / r);
        erf_rel = fmax(erf_rel, fabs(tb_erf_f(-x) + r) / r);
    }
    for (double s = 0; s <= 86.0; s += 0x1.0p-12) {
        double r = exp(-(double)(float)s);
        exp_rel = fmax(exp_rel, fabs(tb_exp_neg_f((float)s) - r) / r);
    }
    printf("scalar math: erf abs %.3g rel %.3g (tol %.0e), exp rel %.3g (tol %.0e),"
           " gelu %.3g (tol %.0e), gelu' %.3g (tol %.0e)\n",
           erf_abs, erf_rel, ERF_TOL, exp_rel, EXP_TOL, fwd, FWD_TOL, bwd, BWD_TOL);
    CHECK(erf_abs <= ERF_TOL && erf_rel <= ERF_TOL, "erf error %g / %g", erf_abs, erf_rel);
    CHECK(exp_rel <= EXP_TOL, "exp error %g", exp_rel);
    CHECK(fwd <= FWD_TOL, "gelu error %g", fwd);
    CHECK(bwd <= BWD_TOL, "gelu' error %g", bwd);

    CHECK(tb_exp_neg_f(86.5f) == 0.0f && tb_exp_neg_f(INFINITY) == 0.0f, "exp flush");
    CHECK(tb_exp_neg_f(0.0f) == 1.0f, "exp(0) = %.9g", tb_exp_neg_f(0.0f));
    CHECK(tb_erf_f(0.0f) == 0.0f && tb_erf_f(30.0f) == 1.0f && tb_erf_f(-30.0f) == -1.0f,
          "erf(0), erf(+-30)");
    CHECK(isnan(tb_gelu_fwd_f(NAN)) && isnan(tb_gelu_grad_f(NAN)), "NaN must propagate");
    CHECK(tb_gelu_fwd_f(INFINITY) == INFINITY, "gelu(inf) = %g", tb_gelu_fwd_f(INFINITY));
    CHECK(tb_gelu_fwd_f(100.0f) == 100.0f && tb_gelu_grad_f(100.0f) == 1.0f, "gelu(100)");
    CHECK(tb_gelu_fwd_f(-100.0f) == 0.0f && tb_gelu_grad_f(-100.0f) == 0.0f, "gelu(-100)");
}

/* The tanh form's own pieces: tanh and sech^2 against libm's double, the
 * tanh GELU and its derivative against the double formula. */
static void test_scalar_tanh_math(void)
{
    double tanh_abs = 0, sech2_rel = 0, fwd = 0, bwd = 0;
    for (double d = -12.0; d <= 12.0; d += 0x1.0p-14) {
        float x = (float)d, one = 1.0f;
        tb_ref_err ef = tb_ref_gelu_tanh_fwd_err(&x, (float[]){tb_gelu_tanh_fwd_f(x)}, 1);
        tb_ref_err eb = tb_ref_gelu_tanh_bwd_err(&x, &one, (float[]){tb_gelu_tanh_grad_f(x)}, 1);
        fwd = fmax(fwd, ef.max_scaled);
        bwd = fmax(bwd, eb.max_scaled);
    }
    for (double d = -43.0; d <= 43.0; d += 0x1.0p-12) {
        float a = (float)d;
        double ch = cosh((double)a);
        tanh_abs = fmax(tanh_abs, fabs(tb_tanh_f(a) - tanh((double)a)));
        sech2_rel = fmax(sech2_rel, fabs(tb_sech2_f(a) * ch * ch - 1.0));
    }
    for (float a = 1e-30f; a < 1e-2f; a *= 1.001f) {
        tanh_abs = fmax(tanh_abs, fabs(tb_tanh_f(a) - tanh((double)a)));
        tanh_abs = fmax(tanh_abs, fabs(tb_tanh_f(-a) - tanh(-(double)a)));
        sech2_rel = fmax(sech2_rel, fabs(tb_sech2_f(a) * cosh((double)a) * cosh((double)a) - 1));
    }
    printf("tanh math: tanh abs %.3g (tol %.0e), sech2 rel %.3g (tol %.0e),"
           " gelu_tanh %.3g (tol %.0e), gelu_tanh' %.3g (tol %.0e)\n",
           tanh_abs, TANH_TOL, sech2_rel, SECH2_TOL, fwd, FWD_TOL, bwd, BWD_TOL);
    CHECK(tanh_abs <= TANH_TOL, "tanh error %g", tanh_abs);
    CHECK(sech2_rel <= SECH2_TOL, "sech2 error %g", sech2_rel);
    CHECK(fwd <= FWD_TOL, "gelu_tanh error %g", fwd);
    CHECK(bwd <= BWD_TOL, "gelu_tanh' error %g", bwd);

    CHECK(tb_tanh_f(0.0f) == 0.0f && tb_tanh_f(50.0f) == 1.0f && tb_tanh_f(-50.0f) == -1.0f,
          "tanh(0), tanh(+-50)");
    CHECK(tb_tanh_f(INFINITY) == 1.0f && tb_tanh_f(-INFINITY) == -1.0f, "tanh(+-inf)");
    CHECK(tb_sech2_f(0.0f) == 1.0f && tb_sech2_f(50.0f) == 0.0f && tb_sech2_f(-INFINITY) == 0.0f,
          "sech2(0), sech2(50), sech2(-inf)");
    CHECK(isnan(tb_tanh_f(NAN)) && isnan(tb_sech2_f(NAN)), "tanh, sech2: NaN must propagate");
    CHECK(isnan(tb_gelu_tanh_fwd_f(NAN)) && isnan(tb_gelu_tanh_grad_f(NAN)),
          "gelu_tanh: NaN must propagate");
    CHECK(tb_gelu_tanh_fwd_f(100.0f) == 100.0f && tb_gelu_tanh_grad_f(100.0f) == 1.0f,
          "gelu_tanh(100) = %.9g, ' = %.9g", tb_gelu_tanh_fwd_f(100.0f),
          tb_gelu_tanh_grad_f(100.0f));
    CHECK(tb_gelu_tanh_fwd_f(-100.0f) == 0.0f && tb_gelu_tanh_grad_f(-100.0f) == 0.0f,
          "gelu_tanh(-100)");
    /* Different functions: the tanh form is 1e-3-close to the erf form,
     * never equal; a mixed-up dispatch would show here. */
    CHECK(fabsf(tb_gelu_tanh_fwd_f(1.5f) - tb_gelu_fwd_f(1.5f)) > 1e-5f, "tanh == erf form?");
}

/* ---- 2. the array functions ---- */

typedef struct bufs {
    float *x, *dy, *y, *dx; /* each n + 1 + GUARD floats; [off, off + n) is used */
} bufs;

static int run_case(const gelu_form *f, tb_gelu_variant v, int threads, size_t n, size_t off,
                    const bufs *b)
{
    const float *x = b->x + off, *dy = b->dy + off;
    float *y = b->y + off, *dx = b->dx + off;
    for (size_t i = 0; i < n + GUARD; i++)
        y[i] = dx[i] = CANARY;
    int rc = f->fwd(v, x, y, n, threads);
    if (rc == TB_OK)
        rc = f->bwd(v, x, dy, dx, n, threads);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        return rc;
    }

    tb_ref_err ef = f->fwd_err(x, y, n), eb = f->bwd_err(x, dy, dx, n);
    size_t not_bitwise = 0, overrun = 0;
    for (size_t i = 0; i < n; i++) {
        float fy = f->fwd_f(x[i]), fdx = f->bwd_f(x[i], dy[i]);
        not_bitwise += memcmp(&fy, &y[i], sizeof fy) != 0 || memcmp(&fdx, &dx[i], sizeof fdx) != 0;
    }
    for (size_t i = n; i < n + GUARD; i++)
        overrun += y[i] != CANARY || dx[i] != CANARY;
    CHECK(ef.max_scaled <= FWD_TOL, "%s %s fwd n=%zu threads=%d: error %g at x=%.9g", f->name,
          v == TB_GELU_FUSED ? "fused" : "unfused", n, threads, ef.max_scaled,
          n ? x[ef.worst] : 0.0f);
    CHECK(eb.max_scaled <= BWD_TOL, "%s %s bwd n=%zu threads=%d: error %g at x=%.9g", f->name,
          v == TB_GELU_FUSED ? "fused" : "unfused", n, threads, eb.max_scaled,
          n ? x[eb.worst] : 0.0f);
    CHECK(not_bitwise == 0, "%s n=%zu threads=%d: %zu elements differ from gelu_math.h",
          f->name, n, threads, not_bitwise);
    CHECK(overrun == 0, "%s n=%zu threads=%d: %zu writes past n", f->name, n, threads, overrun);
    return TB_OK;
}

static void test_paths(void)
{
    static const size_t sizes[] = {1, 7, 15, 16, 17, 1000, 4097, 100003};
    static const tb_cpu_isa isas[] = {TB_ISA_GENERIC, TB_ISA_AVX2, TB_ISA_AVX512};
    const size_t nmax = 100003, cap = nmax + 1 + GUARD;
    bufs b = {malloc(cap * 4), malloc(cap * 4), malloc(cap * 4), malloc(cap * 4)};
    if (!b.x || !b.dy || !b.y || !b.dx) {
        CHECK(0, "out of memory");
        goto out_free;
    }
    fill_inputs(b.x, cap);
    fill_inputs(b.dy, cap);

    for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
        if (!tb_cpu_isa_supported(isas[ii])) {
            printf("isa %-7s: not on this CPU, skipped\n", tb_cpu_isa_name(isas[ii]));
            continue;
        }
        CHECK(tb_cpu_gelu_set_isa(isas[ii]) == TB_OK, "set_isa %s", tb_cpu_isa_name(isas[ii]));
        CHECK(tb_cpu_gelu_isa() == isas[ii], "isa in use");
        int cases = 0, before = failures;
        for (size_t fi = 0; fi < NFORMS; fi++)
            for (int threads = 1; threads <= 2; threads++)
                for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                    for (size_t off = 0; off <= 1; off++)
                        for (int v = 0; v <= 1; v++) {
                            CHECK(run_case(&forms[fi], (tb_gelu_variant)v, threads, sizes[si],
                                           off, &b) == TB_OK,
                                  "run_case");
                            cases++;
                        }
        printf("isa %-7s: %d cases (erf/tanh x fused/unfused x fwd/bwd x threads 1,2 x 8 sizes "
               "x 2 alignments): %s\n",
               tb_cpu_isa_name(isas[ii]), cases, failures == before ? "ok" : "FAILED");
    }
    CHECK(tb_cpu_gelu_set_isa(TB_ISA_AUTO) == TB_OK, "set_isa auto");
    printf("auto picks %s\n", tb_cpu_isa_name(tb_cpu_gelu_isa()));
out_free:
    free(b.x);
    free(b.dy);
    free(b.y);
    free(b.dx);
    tb_cpu_gelu_ws_free();
}

/* Fused == unfused, bitwise, directly (run_case shows it through the
 * scalar math; this says it without that detour), at an odd size. */
static void test_fused_equals_unfused(void)
{
    enum { N = 65537 };
    static float x[N], dy[N], y[2][N], dx[2][N];
    fill_inputs(x, N);
    fill_inputs(dy, N);
    for (size_t fi = 0; fi < NFORMS; fi++) {
        const gelu_form *f = &forms[fi];
        for (int v = 0; v <= 1; v++) {
            CHECK(f->fwd((tb_gelu_variant)v, x, y[v], N, 2) == TB_OK, "%s fwd", f->name);
            CHECK(f->bwd((tb_gelu_variant)v, x, dy, dx[v], N, 2) == TB_OK, "%s bwd", f->name);
        }
        CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0, "%s: fused and unfused forward differ",
              f->name);
        CHECK(memcmp(dx[0], dx[1], sizeof dx[0]) == 0, "%s: fused and unfused backward differ",
              f->name);
    }
    printf("fused == unfused bitwise (erf, tanh; n = %d): checked\n", N);
}

/* ---- 3. in place, empty, and errors ---- */

static void test_in_place_and_errors(void)
{
    enum { N = 5003 };
    static float x[N], y[N], dy[N], dx[N], ref[N];
    fill_inputs(x, N);
    fill_inputs(dy, N);
    for (size_t fi = 0; fi < NFORMS; fi++)
        for (int v = 0; v <= 1; v++) {
            const gelu_form *f = &forms[fi];
            memcpy(y, x, sizeof x);
            f->ref_fwd(x, ref, N);
            CHECK(f->fwd((tb_gelu_variant)v, y, y, N, 2) == TB_OK, "%s in-place fwd", f->name);
            CHECK(f->fwd_err(x, y, N).max_scaled <= FWD_TOL, "%s in-place fwd result", f->name);
            memcpy(dx, dy, sizeof dy);
            CHECK(f->bwd((tb_gelu_variant)v, x, dx, dx, N, 2) == TB_OK, "%s in-place bwd",
                  f->name);
            CHECK(f->bwd_err(x, dy, dx, N).max_scaled <= BWD_TOL, "%s in-place bwd result",
                  f->name);
            /* dx = x: the unfused backward reads x in several passes; the
             * last writes dx, so x must still be intact until then. */
            memcpy(dx, x, sizeof x);
            CHECK(f->bwd((tb_gelu_variant)v, dx, dy, dx, N, 2) == TB_OK, "%s bwd dx = x",
                  f->name);
            CHECK(f->bwd_err(x, dy, dx, N).max_scaled <= BWD_TOL, "%s bwd dx = x result",
                  f->name);
        }
    printf("in place (y = x, dx = dy): checked\n");

    CHECK(tb_cpu_gelu_fwd(TB_GELU_UNFUSED, NULL, NULL, 0, 1) == TB_OK, "n = 0 is a no-op");
    tb_error_clear();
    CHECK(tb_cpu_gelu_fwd((tb_gelu_variant)7, x, y, N, 1) == TB_ERR_INVALID, "bad variant");
    CHECK(tb_cpu_gelu_bwd(TB_GELU_FUSED, x, NULL, dx, N, 1) == TB_ERR_INVALID, "NULL dy");
    CHECK(tb_cpu_gelu_fwd(TB_GELU_FUSED, x, y, N, -1) == TB_ERR_INVALID, "threads < 0");
    CHECK(tb_cpu_gelu_fwd_ws(TB_GELU_UNFUSED, x, y, N, 1, NULL, NULL) == TB_ERR_INVALID,
          "unfused without temporaries");
    CHECK(tb_cpu_gelu_fwd_ws(TB_GELU_FUSED, x, y, N, 1, NULL, NULL) == TB_OK,
          "fused needs no temporaries");
    CHECK(tb_cpu_gelu_set_isa((tb_cpu_isa)42) == TB_ERR_INVALID, "unknown ISA");
    CHECK(tb_cpu_gelu_fwd(TB_GELU_UNFUSED, x, y, SIZE_MAX / 2, 1) == TB_ERR_NOMEM,
          "impossible temporaries report TB_ERR_NOMEM");
    CHECK(tb_error_last() == TB_ERR_NOMEM, "error chain holds the NOMEM");
    printf("error statuses: checked (last message: %s)\n", tb_error_message());
    tb_error_clear();
    CHECK(tb_cpu_gelu_tanh_bwd(TB_GELU_UNFUSED, x, dy, dx, SIZE_MAX / 2, 1) == TB_ERR_NOMEM,
          "tanh: impossible temporaries report TB_ERR_NOMEM");
    CHECK(tb_cpu_gelu_tanh_fwd((tb_gelu_variant)7, x, y, N, 1) == TB_ERR_INVALID,
          "tanh: bad variant");
    CHECK(tb_cpu_gelu_tanh_bwd(TB_GELU_FUSED, x, NULL, dx, N, 1) == TB_ERR_INVALID,
          "tanh: NULL dy");
    CHECK(tb_cpu_gelu_tanh_fwd(TB_GELU_UNFUSED, NULL, NULL, 0, 1) == TB_OK,
          "tanh: n = 0 is a no-op");
    tb_error_clear();
    tb_cpu_gelu_ws_free();
}

/* ---- the per-thread cache dies with its thread ---- */

#define WS_FLOATS ((size_t)1 << 20)

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void *unfused_in_a_thread(void *arg)
{
    float *buf = arg; /* x, dy, out: WS_FLOATS each */
    int *rc = malloc(sizeof *rc);
    if (!rc)
        return NULL;
    float *x = buf, *dy = buf + WS_FLOATS, *out = buf + 2 * WS_FLOATS;
    *rc = tb_cpu_gelu_fwd(TB_GELU_UNFUSED, x, out, WS_FLOATS, 1);
    if (*rc == TB_OK)
        *rc = tb_cpu_gelu_tanh_bwd(TB_GELU_UNFUSED, x, dy, out, WS_FLOATS, 1);
    return rc;
}

static void test_thread_exit_frees(void)
{
    float *buf = malloc(3 * WS_FLOATS * sizeof *buf);
    CHECK(buf != NULL, "inputs");
    if (!buf)
        return;
    fill_inputs(buf, 2 * WS_FLOATS);
    size_t before = heap_in_use();
    for (int k = 0; k < 4; k++) {
        pthread_t th;
        void *ret = NULL;
        CHECK(pthread_create(&th, NULL, unfused_in_a_thread, buf) == 0, "thread %d", k);
        pthread_join(th, &ret);
        CHECK(ret && *(int *)ret == TB_OK, "thread %d: GELU ran", k);
        free(ret);
    }
    size_t after = heap_in_use();
    double grew_mib = ((double)after - (double)before) / 1048576.0;
    printf("heap after 4 threads used 3 x 4 MiB temporaries each: %+.2f MiB\n", grew_mib);
    CHECK(grew_mib < 1.0, "the threads' temporaries were not freed at exit: %+.1f MiB", grew_mib);
    free(buf);
}

int main(void)
{
    test_scalar_math();
    test_scalar_tanh_math();
    test_paths();
    test_fused_equals_unfused();
    test_in_place_and_errors();
    test_thread_exit_frees();
    if (failures) {
        printf("gelu_cpu_test: %d FAILED\n", failures);
        return 1;
    }
    printf("gelu_cpu_test: all passed\n");
    return 0;
}
