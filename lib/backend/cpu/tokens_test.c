/*
 * tokens_test.c - checks the CPU backend's embedding slots
 * (lib/backend/cpu/tokens.c) against the plain reference
 * (lib/backend/ref/tokens.c), and the reference's backward against finite
 * differences of its forward in double.
 *
 * Run: bazel test //lib/backend/cpu:cpu_tokens_test
 *
 * What it checks, at sizes with odd d (1, 3, 33, 1000), repeated tokens
 * (vocab < rows), rows a multiple of seq and not, on backends of 1 and 2
 * threads (the 2-thread split engages above PAR_MIN = 16384 elements):
 *   forward   bitwise equal to the reference: one float add, and the
 *             reference's double add of two floats is exact, rounded once.
 *   backward  (each accumulate flag both ways) within 1e-5 of the double
 *             reference, relative to the table's largest value (float sums
 *             of at most ~100 terms of size <= 1: measured 1.1e-7), AND
 *             bitwise equal to a plain float loop adding the rows in
 *             increasing order (the order backend.h promises), so 1 and 2
 *             threads give the same bits.
 *   never read  rows of wte no token names and rows of wpe at or past seq
 *             hold NaN; outputs a write-mode backward must not read hold
 *             NaN; rows of dwpe at or past seq hold a sentinel the backward
 *             must leave alone.
 *   refused   a token of -1 or vocab is TB_ERR_INVALID before anything is
 *             written (REQUIRES of backend.h; the CPU checks, its tokens are
 *             host memory); seq 0 and d 0 are TB_ERR_INVALID; rows 0 is a no-op.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/ref/tokens.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

#define BWD_TOL 1e-5
#define FD_TOL 1e-8
#define SENTINEL 12345.0f

typedef struct size_case {
    int rows, seq, d, vocab;
} size_case;

static const size_case SIZES[] = {
    {1, 1, 1, 1},        /* the smallest */
    {7, 7, 3, 5},        /* one sequence, tokens repeat */
    {10, 4, 17, 9},      /* rows not a multiple of seq */
    {195, 65, 100, 61},  /* 3 x 65, 2 threads engage (19,500 elements) */
    {64, 32, 1000, 257}, /* 63 column chunks split unevenly */
    {256, 128, 33, 1001},
};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])

static tb_rng rng = {0x746f6b656e733031ull}; /* "tokens01" */
static int cur_threads; /* of the backend under test, for the messages */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static float *rand_floats(size_t n)
{
    float *p = xmalloc(n * sizeof *p);
    tb_rng_fill(p, n, tb_rng_next_u64(&rng), -1.0, 1.0);
    return p;
}

static float *filled(size_t n, float v)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

static float *copy_of(const float *src, size_t n)
{
    float *p = xmalloc(n * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

/* max |a - b| / max(max |b|, 1e-30) */
static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        e = d > e || isnan(d) ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / (m > 1e-30 ? m : 1e-30);
}

/* One size's inputs: tokens (rows), wte (vocab, d) with NaN in the rows no
 * token names, wpe (seq + 2, d) with NaN in the 2 rows past seq, dy. */
typedef struct inputs {
    size_case s;
    int32_t *tokens;
    float *wte, *wpe, *dy;
} inputs;

static void inputs_make(const size_case *s, inputs *in)
{
    in->s = *s;
    in->tokens = xmalloc(sizeof *in->tokens * (size_t)(s->rows ? s->rows : 1));
    char *used = calloc((size_t)s->vocab, 1);
    for (int r = 0; r < s->rows; r++) {
        in->tokens[r] = (int32_t)tb_rng_below(&rng, (uint32_t)s->vocab);
        used[in->tokens[r]] = 1;
    }
    in->wte = rand_floats((size_t)s->vocab * s->d);
    for (int v = 0; v < s->vocab; v++)
        for (int c = 0; !used[v] && c < s->d; c++)
            in->wte[(size_t)v * s->d + c] = NAN;
    free(used);
    in->wpe = rand_floats((size_t)(s->seq + 2) * s->d);
    for (size_t i = (size_t)s->seq * s->d; i < (size_t)(s->seq + 2) * s->d; i++)
        in->wpe[i] = NAN;
    in->dy = rand_floats((size_t)s->rows * s->d);
}

static void inputs_free(inputs *in)
{
    free(in->tokens);
    free(in->wte);
    free(in->wpe);
    free(in->dy);
}

/* The order backend.h promises, in float: start from 0 or the old value,
 * add rows r = 0, 1, ... in turn. */
static void bwd_in_order(const inputs *in, float *dwte, int acc_wte, float *dwpe, int acc_wpe)
{
    const size_case *s = &in->s;
    if (!acc_wte)
        memset(dwte, 0, sizeof *dwte * (size_t)s->vocab * s->d);
    if (!acc_wpe)
        memset(dwpe, 0, sizeof *dwpe * (size_t)s->seq * s->d);
    for (int r = 0; r < s->rows; r++)
        for (int c = 0; c < s->d; c++) {
            float g = in->dy[(size_t)r * s->d + c];
            dwte[(size_t)in->tokens[r] * s->d + c] += g;
            dwpe[(size_t)(r % s->seq) * s->d + c] += g;
        }
}

static void check_fwd(tb_backend *be, const inputs *in)
{
    const size_case *s = &in->s;
    size_t ny = (size_t)s->rows * s->d;
    float *want = filled(ny, NAN), *got = filled(ny, NAN);
    CHECK(tb_ref_embedding_fwd(in->tokens, in->wte, in->wpe, s->rows, s->seq, s->d, s->vocab,
                               want) == TB_OK, "the reference forward ran");
    int rc = be->embedding_fwd(be, in->tokens, in->wte, in->wpe, s->rows, s->seq, s->d,
                               s->vocab, got);
    CHECK(rc == TB_OK, "%d threads: embedding_fwd rows=%d seq=%d d=%d vocab=%d ran",
          cur_threads, s->rows, s->seq, s->d, s->vocab);
    int finite = 1;
    for (size_t i = 0; i < ny; i++)
        finite &= isfinite(got[i]);
    CHECK(finite, "embedding_fwd rows=%d d=%d: every output finite (no NaN row of wte or wpe "
          "past seq was read)", s->rows, s->d);
    CHECK(memcmp(want, got, ny * sizeof *got) == 0,
          "embedding_fwd rows=%d seq=%d d=%d vocab=%d: bitwise the reference (rel err %.2g)",
          s->rows, s->seq, s->d, s->vocab, rel_err(got, want, ny));
    free(want);
    free(got);
}

/* One accumulate combination; the outputs the op writes start as random
 * (accumulate) or NaN (write: must not be read). dwpe has seq + 2 rows, the
 * last two a sentinel the op must not touch. */
static void check_bwd_case(tb_backend *be, const inputs *in, int acc_wte, int acc_wpe)
{
    const size_case *s = &in->s;
    size_t nte = (size_t)s->vocab * s->d, npe = (size_t)s->seq * s->d, npe2 = npe + 2 * s->d;
    float *te0 = acc_wte ? rand_floats(nte) : filled(nte, NAN);
    float *pe0 = acc_wpe ? rand_floats(npe2) : filled(npe2, NAN);
    for (size_t i = npe; i < npe2; i++)
        pe0[i] = SENTINEL;
    float *te_ref = copy_of(te0, nte), *pe_ref = copy_of(pe0, npe2);
    float *te_ord = copy_of(te0, nte), *pe_ord = copy_of(pe0, npe2);
    float *te = copy_of(te0, nte), *pe = copy_of(pe0, npe2);
    CHECK(tb_ref_embedding_bwd(in->tokens, in->dy, s->rows, s->seq, s->d, s->vocab, te_ref,
                               acc_wte, pe_ref, acc_wpe) == TB_OK, "the reference backward ran");
    bwd_in_order(in, te_ord, acc_wte, pe_ord, acc_wpe);
    int rc = be->embedding_bwd(be, in->tokens, in->dy, s->rows, s->seq, s->d, s->vocab, te,
                               acc_wte, pe, acc_wpe);
    CHECK(rc == TB_OK, "embedding_bwd ran");
    double e_te = rel_err(te, te_ref, nte), e_pe = rel_err(pe, pe_ref, npe);
    int untouched = 1;
    for (size_t i = npe; i < npe2; i++)
        untouched &= pe[i] == SENTINEL;
    CHECK(e_te <= BWD_TOL && e_pe <= BWD_TOL,
          "%d threads: embedding_bwd rows=%d seq=%d d=%d vocab=%d acc_wte=%d acc_wpe=%d: "
          "dwte rel err %.2g, dwpe %.2g (tol %g)", cur_threads, s->rows, s->seq, s->d,
          s->vocab, acc_wte, acc_wpe, e_te, e_pe, BWD_TOL);
    CHECK(memcmp(te, te_ord, nte * sizeof *te) == 0 && memcmp(pe, pe_ord, npe * sizeof *pe) == 0,
          "  bitwise the float sums over rows in increasing order");
    CHECK(untouched, "  rows of dwpe at or past seq left alone");
    free(te0), free(pe0), free(te_ref), free(pe_ref), free(te_ord), free(pe_ord), free(te),
        free(pe);
}

/* The same call on a 1-thread and a 2-thread backend: the same bits. */
static void check_threads_bitwise(tb_backend *one, tb_backend *two, const inputs *in)
{
    const size_case *s = &in->s;
    size_t ny = (size_t)s->rows * s->d, nte = (size_t)s->vocab * s->d;
    size_t npe = (size_t)s->seq * s->d;
    float *y[2], *te[2], *pe[2];
    float *te0 = rand_floats(nte), *pe0 = rand_floats(npe);
    tb_backend *be[2] = {one, two};
    int rc = TB_OK;
    for (int k = 0; k < 2; k++) {
        y[k] = filled(ny, NAN);
        te[k] = copy_of(te0, nte);
        pe[k] = copy_of(pe0, npe);
        rc |= be[k]->embedding_fwd(be[k], in->tokens, in->wte, in->wpe, s->rows, s->seq, s->d,
                                   s->vocab, y[k]);
        rc |= be[k]->embedding_bwd(be[k], in->tokens, in->dy, s->rows, s->seq, s->d, s->vocab,
                                   te[k], 1, pe[k], 1);
    }
    CHECK(rc == TB_OK && memcmp(y[0], y[1], ny * sizeof(float)) == 0 &&
              memcmp(te[0], te[1], nte * sizeof(float)) == 0 &&
              memcmp(pe[0], pe[1], npe * sizeof(float)) == 0,
          "rows=%d d=%d: 1 and 2 threads give the same bits (y, dwte, dwpe)", s->rows, s->d);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(te[k]), free(pe[k]);
    free(te0), free(pe0);
}

/* Bad token ids: refused before y, dwte or dwpe is written. */
static void check_refused(tb_backend *be)
{
    int32_t tokens[6] = {0, 3, 1, 4, 2, 0};
    float *wte = rand_floats(5 * 4), *wpe = rand_floats(3 * 4), *dy = rand_floats(6 * 4);
    float *y = filled(6 * 4, SENTINEL), *dte = filled(5 * 4, SENTINEL);
    float *dpe = filled(3 * 4, SENTINEL);
    const int32_t bad[] = {-1, 5, INT32_MIN};
    for (int b = 0; b < 3; b++) {
        tokens[4] = bad[b];
        int rf = be->embedding_fwd(be, tokens, wte, wpe, 6, 3, 4, 5, y);
        tb_error_clear();
        int rb = be->embedding_bwd(be, tokens, dy, 6, 3, 4, 5, dte, 0, dpe, 0);
        tb_error_clear();
        int kept = 1;
        for (int i = 0; i < 24; i++)
            kept &= y[i] == SENTINEL && (i >= 20 || dte[i] == SENTINEL) &&
                    (i >= 12 || dpe[i] == SENTINEL);
        CHECK(rf == TB_ERR_INVALID && rb == TB_ERR_INVALID && kept,
              "token %d (vocab 5): embedding_fwd and _bwd return TB_ERR_INVALID (%s, %s) and "
              "write nothing", (int)bad[b], tb_err_name(rf), tb_err_name(rb));
    }
    tokens[4] = 2;
    int r1 = be->embedding_fwd(be, tokens, wte, wpe, 6, 0, 4, 5, y);
    tb_error_clear();
    int r2 = be->embedding_bwd(be, tokens, dy, 6, 3, 0, 5, dte, 0, dpe, 0);
    tb_error_clear();
    CHECK(r1 == TB_ERR_INVALID && r2 == TB_ERR_INVALID, "seq 0 and d 0 are TB_ERR_INVALID");
    CHECK(be->embedding_fwd(be, tokens, wte, wpe, 0, 3, 4, 5, y) == TB_OK &&
              be->embedding_bwd(be, tokens, dy, 0, 3, 4, 5, dte, 1, dpe, 1) == TB_OK &&
              y[0] == SENTINEL && dte[0] == SENTINEL,
          "rows 0 with accumulate: runs and writes nothing");
    free(wte), free(wpe), free(dy), free(y), free(dte), free(dpe);
}

/* The double reference's backward is the gradient of its forward: with
 * L = sum(y * w), dL/dwte and dL/dwpe by central differences equal
 * embedding_bwd_f64(dy = w). The forward is linear, so they agree to
 * rounding (~1e-10); a wrong index is off by O(1). */
static void check_reference_fd(void)
{
    const int rows = 12, seq = 4, d = 3, vocab = 5;
    int32_t tokens[12];
    double wte[5 * 3], wpe[4 * 3], w[12 * 3], y[12 * 3], gte[5 * 3], gpe[4 * 3];
    for (int r = 0; r < rows; r++)
        tokens[r] = (int32_t)tb_rng_below(&rng, vocab);
    for (int i = 0; i < 15; i++)
        wte[i] = tb_rng_uniform(&rng, -1, 1);
    for (int i = 0; i < 12; i++)
        wpe[i] = tb_rng_uniform(&rng, -1, 1);
    for (int i = 0; i < 36; i++)
        w[i] = tb_rng_uniform(&rng, -1, 1);
    tb_ref_embedding_bwd_f64(tokens, w, rows, seq, d, vocab, gte, 0, gpe, 0);
    double worst = 0;
    for (int which = 0; which < 2; which++) {
        double *p = which ? wpe : wte, *g = which ? gpe : gte;
        int n = which ? 12 : 15;
        for (int i = 0; i < n; i++) {
            double keep = p[i], l[2];
            for (int k = 0; k < 2; k++) {
                p[i] = keep + (k ? -1e-6 : 1e-6);
                tb_ref_embedding_fwd_f64(tokens, wte, wpe, rows, seq, d, y);
                l[k] = 0;
                for (int j = 0; j < 36; j++)
                    l[k] += y[j] * w[j];
            }
            p[i] = keep;
            double fd = (l[0] - l[1]) / 2e-6, e = fabs(fd - g[i]);
            worst = e > worst ? e : worst;
        }
    }
    CHECK(worst < FD_TOL, "reference backward = finite differences of its forward (max abs err "
          "%.2g, tol %g)", worst, FD_TOL);
}

int main(void)
{
    tb_test_verbose = 1;
    tb_backend *be[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
        int rc = tb_backend_cpu_create(t + 1, &be[t]);
        if (rc != TB_OK)
            return tb_test_exit(rc);
    }
    check_reference_fd();
    for (size_t i = 0; i < N_SIZES; i++) {
        inputs in;
        inputs_make(&SIZES[i], &in);
        for (int t = 0; t < 2; t++) {
            cur_threads = t + 1;
            check_fwd(be[t], &in);
            for (int acc = 0; acc < 4; acc++)
                check_bwd_case(be[t], &in, acc & 1, acc >> 1);
        }
        check_threads_bitwise(be[0], be[1], &in);
        inputs_free(&in);
    }
    check_refused(be[1]);
    for (int t = 0; t < 2; t++)
        tb_backend_close(be[t]);
    return tb_test_exit(TB_OK);
}
