/*
 * attention_test.c - checks the CPU backend's layer norm and attention slots
 * (lib/backend/cpu/attention.c) against each other and against the double reference
 * (lib/backend/ref/attention.c), and the reference's backward against finite
 * differences in double.
 *
 * Run: bazel test //lib/backend/cpu:cpu_attn_test   (one line per group, FAIL lines
 * with the worst element, non-zero exit on any failure).
 *
 * Tolerances. Errors are measured relative to the largest magnitude of the
 * reference tensor (max |got - ref| / max |ref|), because single elements
 * of out, dq, dk, dv can be near zero where an elementwise relative error
 * means nothing. Float rounding of sums of T products of size ~1 grows
 * like sqrt(T) * 2^-24 ~ 1e-6 at T = 256; the softmax exp is ~2 ulp; the
 * backward's dS = P (dP - rowdot) loses a few bits to cancellation. Seen
 * here: attention at most 1.1e-6 (forward and backward, either variant,
 * or fused vs manual), layer norm 2e-7. The bounds leave a margin of 5-10
 * for other inputs and ISAs (FMA or not):
 *   attention forward  5e-6     attention backward  1e-5
 *   fused vs manual    the same bounds (each is within them of the truth)
 *   layer norm         2e-6 forward, 1e-5 backward (dgamma sums rows)
 * Fused attention must also be bitwise the same with 1 and 2 threads, and
 * fused layer norm bitwise the same as unfused (same steps, same sums).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/ref/attention.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"
#include "lib/core/rng.h"

#define TRY(expr)                                                      \
    do {                                                               \
        if ((expr) != TB_OK) {                                         \
            printf("FAIL %s:%d: %s returned an error\n", __FILE__,     \
                   __LINE__, #expr);                                   \
            tb_error_print(stdout);                                    \
            exit(1);                                                   \
        }                                                              \
    } while (0)

#define ATTN_FWD_TOL 5e-6
#define ATTN_BWD_TOL 1e-5
#define LN_FWD_TOL 2e-6
#define LN_BWD_TOL 1e-5

/* T: one row, under a block, one block, blocks and a remainder, causal
 * tiles off the diagonal. D: padded to 64, exactly 64 (GPT-2's heads), two
 * column blocks (80 pads to 128). */
static const int SEQS[] = {1, 7, 64, 129, 256, 200, 520};
static const int DIMS[] = {16, 64, 80};
/* The same for the paths AUTO does not pick (kept short: the baseline
 * path is slow). */
static const int SEQS_OTHER[] = {7, 129, 200};

/* ---------------------------------------------------------------- helpers */

static void *xmalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        printf("out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static uint64_t next_seed = 1; /* each array its own stream */
static tb_rng rng = {0x9e3779b97f4a7c15ull}; /* tb_rng_seeded(0x9e3779b97f4a7c15) */

/* Uniform in [-a, a), never exactly zero. */
static double urand(double a)
{
    double u = tb_rng_uniform(&rng, -a, a);
    return u != 0.0 ? u : a / 2;
}

static float *rand_floats(size_t n, double a)
{
    float *p = xmalloc(n * sizeof *p);
    tb_rng_fill(p, n, next_seed++, -a, a);
    return p;
}

/* max |got - ref| / max |ref| (plain max |got - ref| when ref is all 0). */
static double rel_err(const float *got, const float *ref, size_t n, size_t *worst)
{
    double emax = 0.0, rmax = 0.0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= emax)) { /* NaN counts as worst */
            emax = e;
            *worst = i;
        }
        rmax = fabs((double)ref[i]) > rmax ? fabs((double)ref[i]) : rmax;
    }
    return rmax > 0.0 ? emax / rmax : emax;
}

static void check_close(const char *what, const float *got, const float *ref, size_t n,
                        double tol)
{
    size_t w;
    double e = rel_err(got, ref, n, &w);
    CHECK(e <= tol, "%s: relative error %.3g > %.1g at %zu (got %.9g, want %.9g)", what, e, tol,
          w, (double)got[w], (double)ref[w]);
}

static tb_backend *open_cpu(int threads)
{
    tb_backend *be;
    TRY(tb_backend_cpu_create(threads, &be));
    return be;
}

/* ---------------------------------------------------------------- gradient checks */

/* L = sum w * f(inputs) in double; compares one gradient array with central
 * differences over every element of the input it belongs to. */
typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *what, double *input, size_t n, const double *grad,
                     loss_fn loss, void *ctx)
{
    double worst = 0.0, gmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x0 = input[i], h = 1e-6 * (fabs(x0) > 1.0 ? fabs(x0) : 1.0);
        input[i] = x0 + h;
        double lp = loss(ctx);
        input[i] = x0 - h;
        double lm = loss(ctx);
        input[i] = x0;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - grad[i]);
        worst = e > worst ? e : worst;
        gmax = fabs(grad[i]) > gmax ? fabs(grad[i]) : gmax;
    }
    CHECK(worst <= 1e-7 * (gmax > 1.0 ? gmax : 1.0),
          "%s: finite differences differ by %.3g (largest gradient %.3g)", what, worst, gmax);
}

typedef struct attn_fd {
    tb_attn_desc d;
    double *q, *k, *v, *w, *out;
    size_t n;
} attn_fd;

static double attn_loss(void *p)
{
    attn_fd *c = p;
    TRY(tb_ref_attention_fwd_f64(&c->d, c->q, c->k, c->v, c->out, NULL));
    double l = 0.0;
    for (size_t i = 0; i < c->n; i++)
        l += c->w[i] * c->out[i];
    return l;
}

static double *rand_doubles(size_t n, double a)
{
    double *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = urand(a);
    return p;
}

static void test_attn_ref_gradients(void)
{
    for (int causal = 0; causal <= 1; causal++) {
        attn_fd c = {.d = {.batch = 1, .heads = 2, .seq = 5, .head_dim = 3, .causal = causal,
                           .scale = 0.7f}};
        c.n = (size_t)2 * 5 * 3;
        c.q = rand_doubles(c.n, 1.5), c.k = rand_doubles(c.n, 1.5), c.v = rand_doubles(c.n, 1);
        c.w = rand_doubles(c.n, 1), c.out = rand_doubles(c.n, 1);
        double *dq = rand_doubles(c.n, 1), *dk = rand_doubles(c.n, 1), *dv = rand_doubles(c.n, 1);
        TRY(tb_ref_attention_bwd_f64(&c.d, c.q, c.k, c.v, c.w, dq, dk, dv));
        char name[64];
        snprintf(name, sizeof name, "reference attention dq (causal %d)", causal);
        fd_check(name, c.q, c.n, dq, attn_loss, &c);
        snprintf(name, sizeof name, "reference attention dk (causal %d)", causal);
        fd_check(name, c.k, c.n, dk, attn_loss, &c);
        snprintf(name, sizeof name, "reference attention dv (causal %d)", causal);
        fd_check(name, c.v, c.n, dv, attn_loss, &c);
        free(c.q), free(c.k), free(c.v), free(c.w), free(c.out), free(dq), free(dk), free(dv);
    }
    printf("ok   reference attention gradients match finite differences\n");
}

typedef struct ln_fd {
    double *x, *gamma, *beta, *w, *y, *mean, *rstd;
    int rows, cols;
} ln_fd;

static double ln_loss(void *p)
{
    ln_fd *c = p;
    tb_ref_layernorm_fwd_f64(c->x, c->gamma, c->beta, 1e-5, c->rows, c->cols, c->y, c->mean,
                             c->rstd);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)c->rows * c->cols; i++)
        l += c->w[i] * c->y[i];
    return l;
}

static void test_ln_ref_gradients(void)
{
    ln_fd c = {.rows = 3, .cols = 7};
    size_t n = 21;
    c.x = rand_doubles(n, 2), c.gamma = rand_doubles(7, 1.5), c.beta = rand_doubles(7, 1);
    c.w = rand_doubles(n, 1), c.y = rand_doubles(n, 1);
    c.mean = rand_doubles(3, 1), c.rstd = rand_doubles(3, 1);
    double *dx = rand_doubles(n, 1), *dg = rand_doubles(7, 1), *db = rand_doubles(7, 1);
    ln_loss(&c);
    tb_ref_layernorm_bwd_f64(c.x, c.w, c.gamma, c.mean, c.rstd, 3, 7, dx, dg, db, 0);
    fd_check("reference layer norm dx", c.x, n, dx, ln_loss, &c);
    fd_check("reference layer norm dgamma", c.gamma, 7, dg, ln_loss, &c);
    fd_check("reference layer norm dbeta", c.beta, 7, db, ln_loss, &c);
    free(c.x), free(c.gamma), free(c.beta), free(c.w), free(c.y), free(c.mean), free(c.rstd);
    free(dx), free(dg), free(db);
    printf("ok   reference layer norm gradients match finite differences\n");
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_io {
    float *out, *saved, *dq, *dk, *dv;
} attn_io;

static void run_attn(tb_backend *be, tb_attn_variant var, const tb_attn_desc *d,
                     const float *q, const float *k, const float *v, const float *dout,
                     attn_io *io)
{
    size_t n = (size_t)d->batch * d->heads * d->seq * d->head_dim, saved, temp;
    TRY(be->attention_workspace(be, var, d, &saved, &temp));
    io->out = xmalloc(n * 4), io->saved = xmalloc(saved);
    io->dq = xmalloc(n * 4), io->dk = xmalloc(n * 4), io->dv = xmalloc(n * 4);
    /* The second run is measured: the first grows the gemm slot's own
     * cached workspace (oneDNN scratchpad), which attention does not count. */
    size_t in_use0 = 0, peak = 0;
    for (int run = 0; run < 2; run++) {
        TRY(be->mem_stats(be, &in_use0, NULL));
        TRY(be->mem_reset_peak(be));
        TRY(be->attention_fwd(be, var, d, q, k, v, io->out, io->saved));
        TRY(be->attention_bwd(be, var, d, q, k, v, io->out, dout, io->saved, io->dq, io->dk,
                              io->dv));
        TRY(be->mem_stats(be, NULL, &peak));
    }
    CHECK(peak - in_use0 <= temp, "attention variant %d: temporaries peaked at %zu bytes, "
          "attention_workspace said %zu", (int)var, peak - in_use0, temp);
}

static void free_io(attn_io *io)
{
    free(io->out), free(io->saved), free(io->dq), free(io->dk), free(io->dv);
}

static void same_bits(const char *what, const float *a, const float *b, size_t n)
{
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s: not bitwise equal", what);
}

/* A case's inputs (B = H = 2) and the double reference's outputs. */
typedef struct attn_ref {
    tb_attn_desc d;
    size_t n, rows;
    float *q, *k, *v, *dout;        /* inputs */
    float *ro, *rl, *rdq, *rdk, *rdv; /* out, logsumexp, gradients */
} attn_ref;

static void attn_ref_make(int T, int D, int causal, attn_ref *r)
{
    r->d = (tb_attn_desc){.batch = 2, .heads = 2, .seq = T, .head_dim = D, .causal = causal,
                          .scale = 1.0f / sqrtf((float)D)};
    r->n = (size_t)4 * T * D, r->rows = (size_t)4 * T;
    /* q twice as large: sharper softmax rows, some near one-hot */
    r->q = rand_floats(r->n, 2.0), r->k = rand_floats(r->n, 1.0), r->v = rand_floats(r->n, 1.0);
    r->dout = rand_floats(r->n, 1.0);
    r->ro = xmalloc(r->n * 4), r->rl = xmalloc(r->rows * 4), r->rdq = xmalloc(r->n * 4);
    r->rdk = xmalloc(r->n * 4), r->rdv = xmalloc(r->n * 4);
    TRY(tb_ref_attention_fwd(&r->d, r->q, r->k, r->v, r->ro, r->rl));
    TRY(tb_ref_attention_bwd(&r->d, r->q, r->k, r->v, r->dout, r->rdq, r->rdk, r->rdv));
}

static void attn_ref_free(attn_ref *r)
{
    free(r->q), free(r->k), free(r->v), free(r->dout);
    free(r->ro), free(r->rl), free(r->rdq), free(r->rdk), free(r->rdv);
}

static void attn_case(tb_backend *be1, tb_backend *be2, int T, int D, int causal)
{
    attn_ref r;
    attn_ref_make(T, D, causal, &r);
    const tb_attn_desc d = r.d;
    size_t n = r.n, rows = r.rows;
    const float *q = r.q, *k = r.k, *v = r.v, *dout = r.dout;
    const float *ro = r.ro, *rl = r.rl, *rdq = r.rdq, *rdk = r.rdk, *rdv = r.rdv;

    attn_io man, fu, fu1;
    run_attn(be2, TB_ATTN_MANUAL, &d, q, k, v, dout, &man);
    run_attn(be2, TB_ATTN_FUSED, &d, q, k, v, dout, &fu);
    run_attn(be1, TB_ATTN_FUSED, &d, q, k, v, dout, &fu1);
    char name[96];
    const char *vn[2] = {"manual", "fused"};
    attn_io *got[2] = {&man, &fu};
    for (int i = 0; i < 2; i++) {
#define CASE(field) (snprintf(name, sizeof name, "%s T=%d D=%d causal=%d %s", vn[i], T, D, \
                              causal, field), name)
        check_close(CASE("out"), got[i]->out, ro, n, ATTN_FWD_TOL);
        check_close(CASE("dq"), got[i]->dq, rdq, n, ATTN_BWD_TOL);
        check_close(CASE("dk"), got[i]->dk, rdk, n, ATTN_BWD_TOL);
        check_close(CASE("dv"), got[i]->dv, rdv, n, ATTN_BWD_TOL);
    }
    int i = 1;
    check_close(CASE("logsumexp"), fu.saved, rl, rows, ATTN_FWD_TOL);
    check_close(CASE("out vs manual"), fu.out, man.out, n, ATTN_FWD_TOL);
    check_close(CASE("dq vs manual"), fu.dq, man.dq, n, ATTN_BWD_TOL);
    check_close(CASE("dk vs manual"), fu.dk, man.dk, n, ATTN_BWD_TOL);
    check_close(CASE("dv vs manual"), fu.dv, man.dv, n, ATTN_BWD_TOL);
    same_bits(CASE("out, 1 vs 2 threads"), fu1.out, fu.out, n);
    same_bits(CASE("dq, 1 vs 2 threads"), fu1.dq, fu.dq, n);
    same_bits(CASE("dk, 1 vs 2 threads"), fu1.dk, fu.dk, n);
    same_bits(CASE("dv, 1 vs 2 threads"), fu1.dv, fu.dv, n);
#undef CASE
    free_io(&man), free_io(&fu), free_io(&fu1);
    attn_ref_free(&r);
}

/* A NaN in one key reaches every output, as in the reference: whole tiles
 * (T = 128 non-causal: 64-key tiles, the AVX-512 path's exp included) must
 * not turn a NaN score into a weight of ~0. */
static void attn_nan_case(tb_backend *be, int path)
{
    attn_ref r;
    attn_ref_make(128, 16, 0, &r);
    r.k[5 * 16 + 3] = NAN;
    attn_io fu;
    run_attn(be, TB_ATTN_FUSED, &r.d, r.q, r.k, r.v, r.dout, &fu);
    size_t nan = 0, per_head = (size_t)128 * 16;
    for (size_t i = 0; i < per_head; i++) /* batch 0, head 0 holds the NaN key */
        nan += isnan(fu.out[i]);
    CHECK(nan == per_head, "attention path %d: a NaN key reached %zu of %zu outputs", path, nan,
          per_head);
    free_io(&fu);
    attn_ref_free(&r);
}

static void test_attention_path(int path, int best)
{
    if (tb_cpu_attn_set_path(path) != TB_OK) { /* this CPU lacks it */
        tb_error_clear();
        printf("skip attention on code path %d: this CPU cannot run it\n", path);
        return;
    }
    CHECK(tb_cpu_attn_path() == path, "attention path %d not selected", path);
    tb_backend *be1 = open_cpu(1), *be2 = open_cpu(2);
    const int *seqs = path == best ? SEQS : SEQS_OTHER;
    size_t nseqs = path == best ? sizeof SEQS / sizeof SEQS[0]
                                : sizeof SEQS_OTHER / sizeof SEQS_OTHER[0];
    for (size_t t = 0; t < nseqs; t++)
        for (size_t dd = 0; dd < sizeof DIMS / sizeof DIMS[0]; dd++)
            for (int causal = 0; causal <= 1; causal++)
                attn_case(be1, be2, seqs[t], DIMS[dd], causal);
    /* an odd head size and a batch of 1 head */
    attn_case(be1, be2, 33, 5, 1);
    attn_nan_case(be2, path);
    tb_backend_close(be1);
    tb_backend_close(be2);
    printf("ok   attention on code path %d: fused = manual = reference, forward and backward\n",
           path);
}

/* Every fused code path (the portable one included), then the default. */
static void test_attention(void)
{
    TRY(tb_cpu_attn_set_path(TB_CPU_PATH_AUTO));
    int best = tb_cpu_attn_path();
    for (int path = TB_CPU_PATH_GENERIC; path <= TB_CPU_PATH_AVX512; path++)
        test_attention_path(path, best);
    TRY(tb_cpu_attn_set_path(TB_CPU_PATH_AUTO));
    CHECK(tb_cpu_attn_path() != TB_CPU_PATH_AUTO, "AUTO not resolved");
    CHECK(tb_cpu_attn_set_path(9) == TB_ERR_INVALID, "path 9 accepted");
    tb_error_clear();
    tb_backend *be2 = open_cpu(2);
    tb_attn_desc bad = {.batch = 1, .heads = 1, .seq = 0, .head_dim = 8, .scale = 1};
    size_t s;
    CHECK(be2->attention_workspace(be2, TB_ATTN_FUSED, &bad, &s, NULL) == TB_ERR_INVALID,
          "T = 0 accepted");
    bad.seq = 4;
    CHECK(be2->attention_workspace(be2, (tb_attn_variant)7, &bad, &s, NULL) == TB_ERR_INVALID,
          "variant 7 accepted");
    tb_error_clear();
    tb_backend_close(be2);
}

/* Autocast's bmm (tb_attn_desc.lowp) and the TF32 math on the manual
 * variant: its products on bf16-rounded operands (8 mantissa bits: each
 * rounding is off by up to 2^-9), the softmax in fp32. Against the double
 * reference within bf16's reach, bf16 farther from it than fp32's manual (so
 * the low-precision path ran), the temporaries within attention_workspace's
 * count (run_attn); the fused variant refuses both. */
#define ATTN_LOWP_TOL 1e-2

static int bf16_gemm_runs(tb_backend *be)
{
    uint16_t one = 0x3f80; /* 1.0 in bf16 */
    float c = 0;
    if (be->gemm_lowp(be, TB_BF16, 0, 0, 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1) != TB_OK) {
        tb_error_clear();
        return 0;
    }
    return c == 1.0f;
}

static void attn_lowp_case(tb_backend *be, int T, int D, int causal, int lowp)
{
    attn_ref r;
    attn_ref_make(T, D, causal, &r);
    const tb_attn_desc d = r.d;
    size_t n = r.n;
    const float *q = r.q, *k = r.k, *v = r.v, *dout = r.dout;
    attn_io f32, low;
    run_attn(be, TB_ATTN_MANUAL, &d, q, k, v, dout, &f32);
    tb_attn_desc dl = d;
    if (lowp)
        dl.lowp = TB_BF16;
    else
        dl.math = TB_MATH_TF32; /* on the CPU: oneDNN's bf16 fpmath mode */
    run_attn(be, TB_ATTN_MANUAL, &dl, q, k, v, dout, &low);
    char name[96];
    const float *got[4] = {low.out, low.dq, low.dk, low.dv};
    const float *ref[4] = {r.ro, r.rdq, r.rdk, r.rdv};
    const float *full[4] = {f32.out, f32.dq, f32.dk, f32.dv};
    const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "manual %s T=%d D=%d causal=%d %s", lowp ? "bf16" : "tf32",
                 T, D, causal, what[i]);
        check_close(name, got[i], ref[i], n, ATTN_LOWP_TOL);
        size_t w;
        /* TF32 on the CPU is oneDNN's bf16 fpmath, which oneDNN may ignore
         * (lib/backend/cpu/gemm.c): same bits as fp32 then */
        CHECK(!lowp || rel_err(got[i], ref[i], n, &w) > rel_err(full[i], ref[i], n, &w),
              "%s: no farther from the reference than fp32's: the low-precision path did not run",
              name);
    }
    CHECK(be->attention_fwd(be, TB_ATTN_FUSED, &dl, q, k, v, low.out, low.saved) ==
              TB_ERR_UNSUPPORTED, "fused attention accepted lowp %d / math %d", (int)dl.lowp,
          (int)dl.math);
    tb_error_clear();
    free_io(&f32), free_io(&low);
    attn_ref_free(&r);
}

static void test_attention_lowp(void)
{
    tb_backend *be = open_cpu(2);
    tb_attn_desc bad = {.batch = 1, .heads = 1, .seq = 4, .head_dim = 8, .scale = 1,
                        .lowp = TB_I32};
    size_t s;
    CHECK(be->attention_workspace(be, TB_ATTN_MANUAL, &bad, &s, NULL) == TB_ERR_INVALID,
          "lowp int32 accepted");
    bad.lowp = TB_F32, bad.math = TB_MATH_LOWP;
    CHECK(be->attention_workspace(be, TB_ATTN_MANUAL, &bad, &s, NULL) == TB_ERR_INVALID,
          "math LOWP accepted (lowp says the dtype)");
    tb_error_clear();
    static const int seqs[] = {7, 64, 129}, dims[] = {16, 64};
    int bf16 = bf16_gemm_runs(be);
    for (int lowp = 0; lowp <= 1; lowp++) {
        if (lowp && !bf16) {
            printf("skip manual attention in bf16: this CPU has no bf16 gemm\n");
            continue;
        }
        for (size_t t = 0; t < sizeof seqs / sizeof seqs[0]; t++)
            for (size_t dd = 0; dd < sizeof dims / sizeof dims[0]; dd++)
                for (int causal = 0; causal <= 1; causal++)
                    attn_lowp_case(be, seqs[t], dims[dd], causal, lowp);
        printf("ok   manual attention %s: within %g of the reference%s; the fused variant "
               "refuses it\n", lowp ? "on bf16 copies" : "in TF32 math", ATTN_LOWP_TOL,
               lowp ? ", farther than fp32's" : "");
    }
    tb_backend_close(be);
}

/* ---------------------------------------------------------------- layer norm */

static void ln_case(tb_backend *be, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    float eps = 1e-5f;
    float *x = rand_floats(n, 3.0), *g = rand_floats(cols, 1.5), *b = rand_floats(cols, 1.0);
    for (size_t i = 0; i < n; i++) /* an offset, as activations have: tests the two-pass var */
        x[i] += 4.0f;
    float *dy = rand_floats(n, 1.0);
    float *ry = xmalloc(n * 4), *rm = xmalloc(rows * 4 + 4), *rr = xmalloc(rows * 4 + 4);
    float *rdx = xmalloc(n * 4), *rdg = xmalloc(cols * 4), *rdb = xmalloc(cols * 4);
    TRY(tb_ref_layernorm_fwd(x, g, b, eps, rows, cols, ry, rm, rr));
    TRY(tb_ref_layernorm_bwd(x, dy, g, eps, rows, cols, rdx, rdg, rdb, 0));
    float *y[2], *m[2], *r[2], *dx[2], *dg[2], *db[2];
    char name[96];
    for (int var = 0; var < 2; var++) {
        y[var] = xmalloc(n * 4), m[var] = xmalloc(rows * 4 + 4), r[var] = xmalloc(rows * 4 + 4);
        dx[var] = xmalloc(n * 4), dg[var] = xmalloc(cols * 4), db[var] = xmalloc(cols * 4);
        TRY(be->layernorm_fwd(be, (tb_ln_variant)var, x, g, b, eps, rows, cols, y[var], m[var],
                              r[var]));
        TRY(be->layernorm_bwd(be, (tb_ln_variant)var, x, dy, g, m[var], r[var], rows, cols,
                              dx[var], dg[var], db[var], 0));
#define CASE(field) (snprintf(name, sizeof name, "layernorm %s %dx%d %s", \
                              var ? "fused" : "unfused", rows, cols, field), name)
        check_close(CASE("y"), y[var], ry, n, LN_FWD_TOL);
        check_close(CASE("rstd"), r[var], rr, rows, LN_FWD_TOL);
        check_close(CASE("dx"), dx[var], rdx, n, LN_BWD_TOL);
        check_close(CASE("dgamma"), dg[var], rdg, cols, LN_BWD_TOL);
        check_close(CASE("dbeta"), db[var], rdb, cols, LN_BWD_TOL);
        /* accumulate: a second backward adds the same gradients again */
        for (int c = 0; c < cols; c++)
            rdg[c] *= 2.0f, rdb[c] *= 2.0f;
        TRY(be->layernorm_bwd(be, (tb_ln_variant)var, x, dy, g, m[var], r[var], rows, cols,
                              dx[var], dg[var], db[var], 1));
        check_close(CASE("dgamma accumulated"), dg[var], rdg, cols, LN_BWD_TOL);
        check_close(CASE("dbeta accumulated"), db[var], rdb, cols, LN_BWD_TOL);
        for (int c = 0; c < cols; c++)
            rdg[c] *= 0.5f, rdb[c] *= 0.5f;
#undef CASE
    }
    snprintf(name, sizeof name, "layernorm %dx%d fused vs unfused", rows, cols);
    same_bits(name, y[0], y[1], n);
    same_bits(name, r[0], r[1], rows);
    same_bits(name, dx[0], dx[1], n);
    same_bits(name, dg[0], dg[1], cols);
    for (int var = 0; var < 2; var++)
        free(y[var]), free(m[var]), free(r[var]), free(dx[var]), free(dg[var]), free(db[var]);
    free(x), free(g), free(b), free(dy), free(ry), free(rm), free(rr), free(rdx), free(rdg);
    free(rdb);
}

static void test_layernorm(void)
{
    static const int ROWS[] = {1, 7, 33, 300}, COLS[] = {1, 7, 65, 769};
    tb_backend *be = open_cpu(2);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++)
            ln_case(be, ROWS[i], COLS[j]);
    float x = 1, y, m, r;
    CHECK(be->layernorm_fwd(be, TB_LN_FUSED, &x, &x, &x, 0.0f, 1, 1, &y, &m, &r) ==
              TB_ERR_INVALID, "eps 0 accepted");
    tb_error_clear();
    tb_backend_close(be);
    printf("ok   layer norm: fused = unfused (bitwise) = reference\n");
}

int main(void)
{
    test_attn_ref_gradients();
    test_ln_ref_gradients();
    test_layernorm();
    test_attention();
    test_attention_lowp();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
