/*
 * case.c - the plumbing every selfcheck check shares: the input
 * stream, host and device buffers freed after each check, and one case
 * (a line of output): run, compare against the reference, print.
 * Contracts in lib/selfcheck/internal.h; run as part of //lib/selfcheck:selfcheck
 * (bazel test //lib/selfcheck:selfcheck_test).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cast_math.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/stats.h"
#include "lib/core/status.h"

/* ------------------------------------------------------------ inputs */

/* The run's stream, drawn as 24-bit floats, not tb_rng_fill: the check
 * tolerances were set on these inputs, and bn_bwd's dx (relative, 1e-4)
 * fails on tb_rng_fill's draws at an element that nearly cancels. */
void sc_fill(sc_ctx *sc, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        float v = lo + (hi - lo) * tb_rng_float01(&sc->rng);
        x[i] = v == 0.0f ? hi : v;
    }
}

/* ------------------------------------------------------------ buffers */

/* Host memory freed after the check; filled with 0xff bytes (NaN floats). */
int sc_host(sc_ctx *sc, void **p, size_t bytes)
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
int sc_dev(sc_ctx *sc, void **p, size_t bytes)
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

int sc_upload(sc_ctx *sc, void **dev, const void *host, size_t bytes)
{
    TB_TRY(sc_dev(sc, dev, bytes));
    return sc->be->copy_h2d(sc->be, *dev, host, bytes, NULL);
}

int sc_host_randf(sc_ctx *sc, float **host, size_t n, float lo, float hi)
{
    TB_TRY(sc_host(sc, (void **)host, n * sizeof(float)));
    sc_fill(sc, *host, n, lo, hi);
    return TB_OK;
}

int sc_randf(sc_ctx *sc, float **host, float **dev, size_t n, float lo, float hi)
{
    TB_TRY(sc_host_randf(sc, host, n, lo, hi));
    return sc_upload(sc, (void **)dev, *host, n * sizeof(float));
}

int sc_outf(sc_ctx *sc, float **host, float **dev, size_t n)
{
    TB_TRY(sc_host(sc, (void **)host, n * sizeof(float)));
    return sc_dev(sc, (void **)dev, n * sizeof(float));
}

int sc_inoutf(sc_ctx *sc, float **host, float **dev, size_t n, int reads)
{
    if (reads)
        return sc_randf(sc, host, dev, n, -1.0f, 1.0f);
    return sc_outf(sc, host, dev, n);
}

const char *const sc_lowp_names[] = {"f32", "bf16", "fp16"};

int sc_rand_lowp(sc_ctx *sc, tb_dtype dt, float **f, void **dev, size_t n)
{
    uint16_t *bits;
    TB_TRY(sc_host(sc, (void **)f, n * sizeof(float)));
    TB_TRY(sc_host(sc, (void **)&bits, n * sizeof *bits));
    sc_fill(sc, *f, n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        bits[i] = dt == TB_BF16 ? tb_f32_to_bf16((*f)[i]) : tb_f32_to_f16((*f)[i]);
    return sc_upload(sc, dev, bits, n * sizeof *bits);
}

int sc_release(sc_ctx *sc)
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

void sc_case_start(sc_case *c, const char *fmt, ...)
{
    memset(c, 0, sizeof *c);
    c->ratio = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->desc, sizeof c->desc, fmt, ap);
    va_end(ap);
}

void sc_case_fail(sc_case *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

void sc_case_fail_rc(sc_case *c, const char *call, int rc)
{
    sc_case_fail(c, "%s returned %s: %s", call, tb_err_name(rc), tb_error_message());
    tb_error_clear();
}

void sc_case_na_rc(sc_case *c)
{
    c->na = 1;
    snprintf(c->why, sizeof c->why, "%s", tb_error_message());
    tb_error_clear();
}

int sc_ran(sc_ctx *sc, sc_case *c, int rc, int optional)
{
    if (rc == TB_OK)
        rc = sc->be->sync(sc->be);
    if (rc == TB_OK)
        return 1;
    if (optional && rc == TB_ERR_UNSUPPORTED) {
        sc_case_na_rc(c);
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
int sc_cmp_floor(sc_ctx *sc, sc_case *c, const char *what, const float *ref,
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

int sc_cmp(sc_ctx *sc, sc_case *c, const char *what, const float *ref, const float *dev,
                  size_t n, double tol)
{
    return sc_cmp_floor(sc, c, what, ref, dev, n, tol, 0.0);
}

/* Same for outputs that must match bitwise (masks, argmax): n elements of
 * elem bytes. */
int sc_cmp_exact(sc_ctx *sc, sc_case *c, const char *what, const void *ref,
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

int sc_each_shape(sc_ctx *sc, const int (*shapes)[2], size_t n, int (*one)(sc_ctx *, int, int))
{
    for (size_t i = 0; i < n; i++) {
        TB_TRY(one(sc, shapes[i][0], shapes[i][1]));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

void sc_case_end(sc_ctx *sc, sc_case *c)
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

static int sc_expect_cmp(sc_ctx *sc, sc_case *c, const sc_expect *e)
{
    if (!e->want)
        return TB_OK;
    if (e->elem)
        return sc_cmp_exact(sc, c, e->what, e->want, e->got, e->n, e->elem);
    return sc_cmp_floor(sc, c, e->what, e->want, e->got, e->n, e->tol, e->floor);
}

int sc_cmp_all(sc_ctx *sc, sc_case *c, const sc_expect *e, size_t ne)
{
    for (size_t i = 0; i < ne; i++)
        TB_TRY(sc_expect_cmp(sc, c, &e[i]));
    return TB_OK;
}

int sc_finish(sc_ctx *sc, sc_case *c, int rc, int optional, const sc_expect *e, size_t ne)
{
    if (sc_ran(sc, c, rc, optional))
        TB_TRY(sc_cmp_all(sc, c, e, ne));
    sc_case_end(sc, c);
    return TB_OK;
}

void sc_fail_line(sc_ctx *sc, const char *fmt, ...)
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

