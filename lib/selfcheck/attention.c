/*
 * attention.c - selfcheck's checks of the layer norm and attention
 * slots (both variants of each) against lib/backend/ref/ops.h and lib/backend/ref/attention.h,
 * at odd shapes, causal and not.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <stdio.h>

#include "lib/backend/ref/attention.h"
#include "lib/backend/ref/ops.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

/* ------------------------------------------------------------ layer norm, attention */

/* 517 x 768: GPT-2's width, 9 row chunks of the column sums (dgamma, dbeta),
 * the last one short; 4673 x 33: past the 64-chunk cap, a second column tile
 * with one live column. */
static const int ln_shapes[][2] = {{1, 7}, {37, 65}, {3, 1001}, {517, 768}, {4673, 33}};
#define LN_EPS 1e-5f

static const char *const ln_names[] = {"unfused", "fused"};

static int ln_fwd_one(sc_ctx *sc, int rows, int cols)
{
    tb_backend *be = sc->be;
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
        TB_TRY(SC_FINISH(sc, &c,
                         be->layernorm_fwd(be, (tb_ln_variant)v, dx, dga, dbt, LN_EPS, rows, cols,
                                           oy, osm, osr), 0,
                         {"y", y, oy, n, TOL_SUM}, {"save_mean", sm, osm, (size_t)rows, TOL_SUM},
                         {"save_rstd", sr, osr, (size_t)rows, TOL_SUM}));
    }
    return TB_OK;
}

static int ln_bwd_case(sc_ctx *sc, int rows, int cols, tb_ln_variant v, int acc)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * cols, nc = (size_t)cols;
    float *x, *dx_in, *ga, *dga, *bt, *y, *sm, *sr, *dsm, *dsr, *g, *dg;
    float *wdx, *odx, *wdg, *odg, *wdb, *odb;
    TB_TRY(sc_randf(sc, &x, &dx_in, n, -2.0f, 3.0f));
    TB_TRY(sc_randf(sc, &ga, &dga, nc, 0.5f, 1.5f));
    TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
    TB_TRY(sc_host_randf(sc, &bt, nc, -0.5f, 0.5f));
    TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
    TB_TRY(sc_host(sc, (void **)&sm, (size_t)rows * sizeof *sm));
    TB_TRY(sc_host(sc, (void **)&sr, (size_t)rows * sizeof *sr));
    /* the forward's saved statistics, from the reference */
    TB_TRY(tb_ref_layernorm_fwd(x, ga, bt, LN_EPS, rows, cols, y, sm, sr));
    TB_TRY(sc_upload(sc, (void **)&dsm, sm, (size_t)rows * sizeof *sm));
    TB_TRY(sc_upload(sc, (void **)&dsr, sr, (size_t)rows * sizeof *sr));
    TB_TRY(sc_outf(sc, &wdx, &odx, n));
    TB_TRY(sc_inoutf(sc, &wdg, &odg, nc, acc));
    TB_TRY(sc_inoutf(sc, &wdb, &odb, nc, acc));
    TB_TRY(tb_ref_layernorm_bwd(x, g, ga, LN_EPS, rows, cols, wdx, wdg, wdb, acc));
    sc_case c;
    sc_case_start(&c, "%s rows=%d cols=%d accumulate=%d", ln_names[v], rows, cols, acc);
    TB_TRY(SC_FINISH(sc, &c,
                     be->layernorm_bwd(be, v, dx_in, dg, dga, dsm, dsr, rows, cols, odx, odg, odb,
                                       acc), 0,
                     {"dx", wdx, odx, n, TOL_CANCEL}, {"dgamma", wdg, odg, nc, TOL_SUM},
                     {"dbeta", wdb, odb, nc, TOL_SUM}));
    return sc_release(sc);
}

static int ln_bwd_one(sc_ctx *sc, int rows, int cols)
{
    for (int v = 0; v < 2; v++)
        for (int acc = 0; acc < 2; acc++)
            TB_TRY(ln_bwd_case(sc, rows, cols, (tb_ln_variant)v, acc));
    return TB_OK;
}

int check_layernorm_fwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, ln_shapes, ln_fwd_one); }
int check_layernorm_bwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, ln_shapes, ln_bwd_one); }

/* Odd sequence lengths, causal and not, head sizes 16 and 64, and head
 * sizes 65-128 (kernels/attention.cu pads them to its 128 template, whose
 * key tiles hold 16 keys) with non-causal rows longer than one key tile;
 * scale 1/sqrt(head size) or near it. */
static const tb_attn_desc attn_descs[] = {
    {2, 3, 7, 16, 0, 0.25f},
    {1, 2, 65, 16, 1, 0.25f},
    {2, 1, 33, 64, 1, 0.125f},
    {1, 2, 37, 80, 0, 0.111803f},
    {2, 1, 70, 128, 0, 0.0883883f},
    {1, 1, 41, 96, 1, 0.102062f},
};
#define N_ATTN_DESCS (sizeof attn_descs / sizeof attn_descs[0])

static const char *const attn_names[] = {"manual", "fused"};

/* The manual variant's products in each math (tb_attn_desc): fp32 first
 * (both variants), then TF32 and autocast's bf16 and fp16 copies (manual
 * only; the fused variant refuses them), at a product's tolerance (the CPU
 * backend's bf16 cases: 2.1e-3 to 3.7e-3 of the largest value, forward and
 * backward, two chained products); a backend without the dtype's gemm says
 * unsupported: an n/a case. */
typedef struct attn_mode {
    const char *name;
    tb_math math;
    tb_dtype lowp;
    double tol_fwd, tol_bwd;
} attn_mode;

static const attn_mode attn_modes[] = {
    {"", TB_MATH_F32, TB_F32, TOL_SUM, TOL_CANCEL},
    {" tf32", TB_MATH_TF32, TB_F32, TOL_TF32, TOL_TF32},
    {" bf16", TB_MATH_F32, TB_BF16, TOL_LOWP, TOL_LOWP},
    {" fp16", TB_MATH_F32, TB_F16, TOL_LOWP, TOL_LOWP},
};
#define N_ATTN_MODES (sizeof attn_modes / sizeof attn_modes[0])

/* How many of the modes variant v runs. */
static size_t attn_modes_of(int v) { return v == TB_ATTN_MANUAL ? N_ATTN_MODES : 1; }

static tb_attn_desc attn_desc_in(const tb_attn_desc *d, const attn_mode *m)
{
    tb_attn_desc r = *d;
    r.math = m->math;
    r.lowp = m->lowp;
    return r;
}

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

int check_attention_workspace(sc_ctx *sc)
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

int check_attention_fwd(sc_ctx *sc)
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
            for (size_t m = 0; m < attn_modes_of(v); m++) {
                const attn_mode *mo = &attn_modes[m];
                tb_attn_desc dm = attn_desc_in(d, mo);
                float *o_out, *o_saved;
                TB_TRY(sc_dev(sc, (void **)&o_out, io.n * sizeof *o_out));
                TB_TRY(sc_dev(sc, (void **)&o_saved, attn_saved_floats(d, v) * sizeof *o_saved));
                sc_case c;
                sc_case_start(&c, "%s%s %s", attn_names[v], mo->name, ds);
                TB_TRY(SC_FINISH(sc, &c,
                                 be->attention_fwd(be, (tb_attn_variant)v, &dm, io.dq, io.dk,
                                                   io.dv, o_out, o_saved), m > 0,
                                 {"out", out, o_out, io.n, mo->tol_fwd},
                                 /* MANUAL saves P, which the reference does not make */
                                 {"logsumexp", v == TB_ATTN_FUSED ? lse : NULL, o_saved, io.rows,
                                  TOL_SUM}));
            }
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* The backward takes the forward's out and saved in the variant's own
 * format, so the backend's forward makes them (check_attention_fwd checks
 * that forward against the reference). */
int check_attention_bwd(sc_ctx *sc)
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
            for (size_t m = 0; m < attn_modes_of(v); m++) {
                const attn_mode *mo = &attn_modes[m];
                tb_attn_desc dm = attn_desc_in(d, mo);
                float *o_out, *o_saved, *oq, *ok, *ov;
                TB_TRY(sc_dev(sc, (void **)&o_out, io.n * sizeof *o_out));
                TB_TRY(sc_dev(sc, (void **)&o_saved, attn_saved_floats(d, v) * sizeof *o_saved));
                TB_TRY(sc_dev(sc, (void **)&oq, io.n * sizeof *oq));
                TB_TRY(sc_dev(sc, (void **)&ok, io.n * sizeof *ok));
                TB_TRY(sc_dev(sc, (void **)&ov, io.n * sizeof *ov));
                sc_case c;
                sc_case_start(&c, "%s%s %s", attn_names[v], mo->name, ds);
                int rc = be->attention_fwd(be, (tb_attn_variant)v, &dm, io.dq, io.dk, io.dv,
                                           o_out, o_saved);
                if (rc != TB_OK) {
                    if (m > 0 && rc == TB_ERR_UNSUPPORTED)
                        sc_case_na_rc(&c);
                    else
                        sc_case_fail_rc(&c, "attention_fwd (for the backward's inputs)", rc);
                    sc_case_end(sc, &c);
                    continue;
                }
                double tol = mo->tol_bwd;
                TB_TRY(SC_FINISH(sc, &c,
                                 be->attention_bwd(be, (tb_attn_variant)v, &dm, io.dq, io.dk,
                                                   io.dv, o_out, dg, o_saved, oq, ok, ov), m > 0,
                                 {"dq", wq, oq, io.n, tol}, {"dk", wk, ok, io.n, tol},
                                 {"dv", wv, ov, io.n, tol}));
            }
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

