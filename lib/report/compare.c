/*
 * compare.c - merges results folders of several machines; see compare.h.
 *
 * Test: bazel test //lib/report:compare_test
 */
#define _GNU_SOURCE
#include "lib/report/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/report/cells.h"
#include "lib/report/findings.h"
#include "lib/report/forest.h"
#include "lib/report/doc.h"
#include "lib/report/plot.h"

double tb_compare_seconds(double v, const char *unit)
{
    if (!strcmp(unit, "s"))
        return v;
    if (!strcmp(unit, "ms"))
        return v * 1e-3;
    if (!strcmp(unit, "us"))
        return v * 1e-6;
    if (!strcmp(unit, "ns"))
        return v * 1e-9;
    return NAN;
}

/* ---- loading ---- */

/* The highest GPU power NVML reported while the machine's run was
 * recorded (telemetry.json), or NaN: the per-watt figures' divisor when no
 * --power is given, named as such. */
static void measured_power(tb_cmp_machine *m)
{
    const tb_json *segs = m->f->telemetry ? tb_json_get(m->f->telemetry, "segments") : NULL;
    m->power_w = NAN;
    m->power_src[0] = '\0';
    for (size_t i = 0; segs && i < segs->len; i++) {
        double w = tb_json_get_number(tb_json_at(segs, i), "gpu_power_w_max", NAN);
        if (!isnan(w) && (isnan(m->power_w) || w > m->power_w))
            m->power_w = w;
    }
    if (!isnan(m->power_w))
        snprintf(m->power_src, sizeof m->power_src, "NVML, highest sample of the run");
}

static int add_machine(tb_cmp_set *s, const char *dir)
{
    if (s->n == TB_COMPARE_MAX)
        return TB_FAIL(TB_ERR_INVALID, "more than %d machines to compare", TB_COMPARE_MAX);
    /* the same folder twice (by another path, too) would read as two
     * machines that agree exactly */
    char real[PATH_MAX], other[PATH_MAX];
    if (realpath(dir, real))
        for (int i = 0; i < s->n; i++)
            if (realpath(s->m[i].dir, other) && !strcmp(real, other))
                return TB_FAIL(TB_ERR_INVALID, "%s is given twice (as %s too): give each "
                               "machine's results once", dir, s->m[i].dir);
    tb_cmp_machine *m = &s->m[s->n];
    memset(m, 0, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    TB_TRY(tb_report_load(dir, NULL, &m->f));
    const char *name = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "device.name") : NULL;
    const char *thr = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "device.threads") : NULL;
    const char *be = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "device.backend") : NULL;
    if (be && !strcmp(be, "cpu") && thr)
        snprintf(m->label, sizeof m->label, "#%d %s (%s threads)", s->n + 1,
                 name ? name : m->f->slug, thr);
    else
        snprintf(m->label, sizeof m->label, "#%d %s", s->n + 1, name ? name : m->f->slug);
    m->price = NAN;
    measured_power(m);
    /* techniques run with different profiles time different sizes and
     * sweeps: their rows are not one experiment on two machines */
    const char *prof = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "run.profile") : NULL;
    for (int i = 0; prof && i < s->n; i++) {
        const char *other = s->m[i].f->have_fp ? tb_fingerprint_get(&s->m[i].f->fp,
                                                                    "run.profile") : NULL;
        if (other && strcmp(prof, other) != 0) {
            fprintf(stderr, "bench:compare: warning: %s ran the %s profile, %s the %s profile: "
                    "their sizes and sweeps differ, so their rows are not the same "
                    "measurement\n", dir, prof, s->m[i].dir, other);
            break;
        }
    }
    s->n++;
    return TB_OK;
}

int tb_compare_add_dir(tb_cmp_set *s, const char *dir)
{
    char(*dirs)[PATH_MAX] = calloc(TB_COMPARE_MAX, PATH_MAX);
    int n = 0, rc;
    if (!dirs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory listing %s", dir);
    rc = tb_report_results_folders(dir, dirs[0], PATH_MAX, TB_COMPARE_MAX, &n);
    for (int i = 0; i < n && rc == TB_OK; i++)
        rc = add_machine(s, dirs[i]);
    free(dirs);
    return rc;
}

int tb_compare_set_prices(tb_cmp_set *s, tb_price_kind kind, const double *v, int n)
{
    if (n != s->n)
        return TB_FAIL(TB_ERR_INVALID, "%d prices for %d machines: give one per machine, in "
                       "order", n, s->n);
    s->price_kind = kind;
    for (int i = 0; i < n; i++)
        s->m[i].price = v[i];
    return TB_OK;
}

int tb_compare_set_power(tb_cmp_set *s, const double *v, int n)
{
    if (n != s->n)
        return TB_FAIL(TB_ERR_INVALID, "%d power figures for %d machines: give one per machine, "
                       "in order", n, s->n);
    for (int i = 0; i < n; i++) {
        s->m[i].power_w = v[i];
        snprintf(s->m[i].power_src, sizeof s->m[i].power_src, "given with --power");
    }
    return TB_OK;
}

void tb_compare_free(tb_cmp_set *s)
{
    for (int i = 0; i < s->n; i++)
        tb_report_folder_free(s->m[i].f);
    s->n = 0;
}

/* ---- lookups ---- */

/* Technique t's index in machine m's folder, or -1. */
static int tech_index(const tb_cmp_machine *m, const char *t)
{
    for (int i = 0; i < m->f->ntech; i++)
        if (!strcmp(m->f->tech[i], t))
            return i;
    return -1;
}

/* The rows of technique t on machine m, or NULL. */
static const tb_results *tech_rows(const tb_cmp_machine *m, const char *t)
{
    int i = tech_index(m, t);
    return i < 0 ? NULL : &m->f->rows[i];
}

/* The headline setting technique t declares in machine m's results, the
 * metric that headline is read on, and the workload its rows name ("":
 * none, or the summary's rule). */
static const char *tech_headline(const tb_cmp_machine *m, const char *t)
{
    int i = tech_index(m, t);
    return i < 0 ? "" : m->f->headline[i];
}

static const char *tech_headline_metric(const tb_cmp_machine *m, const char *t)
{
    int i = tech_index(m, t);
    return i < 0 ? "" : m->f->headline_metric[i];
}

static const char *tech_workload(const tb_cmp_machine *m, const char *t)
{
    int i = tech_index(m, t);
    return i < 0 ? "" : m->f->workload[i];
}

/* Whether row r is of like's setting and metric on like's workload (any
 * point of its sweep). */
static int same_series(const tb_result_row *r, const tb_result_row *like)
{
    return !strcmp(r->setting, like->setting) && !strcmp(r->metric, like->metric) &&
           !strcmp(r->workload, like->workload);
}

static const tb_result_row *find_row(const tb_results *res, const tb_result_row *like)
{
    for (size_t i = 0; res && i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (same_series(r, like) && same_point(r->param_value, like->param_value) &&
            !isnan(r->median))
            return r;
    }
    return NULL;
}

/* Techniques of every machine, reference first, each once. */
static int all_techniques(const tb_cmp_set *s, char (*out)[32], int max)
{
    int n = 0;
    for (int k = -1; k < s->n; k++) {
        const tb_cmp_machine *m = &s->m[k < 0 ? s->reference : k];
        for (int i = 0; i < m->f->ntech; i++) {
            int seen = 0;
            for (int j = 0; j < n; j++)
                seen |= !strcmp(out[j], m->f->tech[i]);
            if (!seen && n < max)
                snprintf(out[n++], 32, "%s", m->f->tech[i]);
        }
    }
    return n;
}

/* The comparison of one technique on one machine. */
typedef struct cmp_cell {
    tb_report_pick own;            /* the machine's own best */
    const tb_result_row *at_ref;   /* the reference's best setting, timed here */
    double vs_ref;                 /* reference median / this median; NaN when not comparable */
    double vs_lo, vs_hi;           /* from the two medians' 95% intervals (not paired: the
                                      machines ran apart), NaN when either has none */
} cmp_cell;

static void compute_cell(const tb_cmp_set *s, int m, const char *tech, const tb_report_pick *ref,
                         cmp_cell *c)
{
    const tb_results *res = tech_rows(&s->m[m], tech);
    memset(c, 0, sizeof *c);
    c->vs_ref = c->vs_lo = c->vs_hi = NAN;
    if (!res) {
        snprintf(c->own.technique, sizeof c->own.technique, "%s", tech);
        return;
    }
    tb_report_pick_headline(res, tech, tech_headline(&s->m[m], tech),
                            tech_headline_metric(&s->m[m], tech), &c->own);
    const tb_result_row *like = ref->best ? ref->best : ref->baseline;
    if (!like)
        return;
    c->at_ref = find_row(res, like);
    if (!c->at_ref)
        return;
    const tb_result_row *a = c->at_ref;
    c->vs_ref = tb_compare_seconds(like->median, like->unit) /
                tb_compare_seconds(a->median, a->unit);
    if (like->ci_low > 0 && like->ci_high > 0 && a->ci_low > 0 && a->ci_high > 0) {
        c->vs_lo = tb_compare_seconds(like->ci_low, like->unit) /
                   tb_compare_seconds(a->ci_high, a->unit);
        c->vs_hi = tb_compare_seconds(like->ci_high, like->unit) /
                   tb_compare_seconds(a->ci_low, a->unit);
    }
}

/* ---- text ---- */

/* "2.3× [2.1, 2.5] the reference's speed": the interval from the two
 * medians' own (a conservative bound: the machines were not timed in
 * paired rounds), none where a median has no interval. */
static void speed_str(char *buf, size_t cap, const cmp_cell *c)
{
    char n[32], lo[32], hi[32];
    if (isnan(c->vs_ref)) {
        snprintf(buf, cap, "n/a: not measured at the reference's setting and point");
        return;
    }
    tb_report_num(n, sizeof n, c->vs_ref);
    if (isnan(c->vs_lo) || isnan(c->vs_hi)) {
        snprintf(buf, cap, "%s× the reference's speed (no interval)", n);
        return;
    }
    tb_report_num(lo, sizeof lo, c->vs_lo);
    tb_report_num(hi, sizeof hi, c->vs_hi);
    snprintf(buf, cap, "%s× [%s, %s] the reference's speed", n, lo, hi);
}

static void own_str(char *buf, size_t cap, const cmp_cell *c)
{
    char sp[128];
    if (!c->own.baseline) {
        if (c->own.na)
            tb_report_na(buf, cap, NULL, c->own.na->note);
        else
            snprintf(buf, cap, "n/a: not run on this machine");
        return;
    }
    if (!c->own.best) {
        if (c->own.na)
            tb_report_na(buf, cap, c->own.na->setting, c->own.na->note);
        else
            snprintf(buf, cap, "n/a: no setting compared with the baseline");
        return;
    }
    /* its own summary point and workload, which need not be the
     * reference's (gelu's at 67108864 elements on the H200, 16777216 on
     * the EPYC): said, so that the row does not read as one point */
    const tb_result_row *x = c->own.best;
    char pt[96] = "";
    if (x->param_name[0] && !isnan(x->param_value))
        tb_report_point(pt, sizeof pt, x);
    tb_report_speedup(sp, sizeof sp, x);
    snprintf(buf, cap, "%s: %s (%s)%s%s%s%s", x->setting, sp,
             tb_timing_verdict_name(x->timing_verdict), pt[0] ? " at " : "", pt,
             x->workload[0] ? " on " : "", x->workload);
}

/* What a training throughput counts ("samples", "images", "tokens") when
 * unit is one ("samples/s", ...: a loader's or a step technique's rate);
 * NULL for any other rate (GB/s, GFLOP/s, a fraction). */
static const char *items_of(const char *unit)
{
    static const char *const items[] = {"samples", "images", "tokens"};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        size_t n = strlen(items[i]);
        if (strncmp(unit, items[i], n) == 0 && strcmp(unit + n, "/s") == 0)
            return items[i];
    }
    return NULL;
}

/* items/s per dollar or per watt for the row measured at the reference's
 * setting (items: samples, images or tokens, as its rate counts them);
 * n/a with the reason otherwise. */
static void cost_str(char *buf, size_t cap, const tb_cmp_set *s, int m, const cmp_cell *c,
                     int per_watt)
{
    const tb_cmp_machine *mm = &s->m[m];
    double div = per_watt ? mm->power_w : mm->price;
    const char *r = c->at_ref ? c->at_ref->rate_unit : "";
    char n[32];
    if (isnan(div) || (!per_watt && s->price_kind == TB_PRICE_NONE)) {
        snprintf(buf, cap, "n/a: no %s", per_watt ? "--power given and no NVML power measured"
                                                   : "price given");
    } else if (!c->at_ref || !items_of(r) || isnan(c->at_ref->rate)) {
        snprintf(buf, cap, "n/a: rate is %s, not a training throughput (samples/s, images/s, "
                 "tokens/s)", r[0] ? r : "not measured");
    } else if (per_watt) {
        tb_report_num(n, sizeof n, c->at_ref->rate / div);
        snprintf(buf, cap, "%s %s/s per W (power: %s)", n, items_of(r), mm->power_src);
    } else if (s->price_kind == TB_PRICE_PER_HOUR) {
        tb_report_num(n, sizeof n, c->at_ref->rate * 3600.0 / div);
        snprintf(buf, cap, "%s %s per $", n, items_of(r));
    } else {
        tb_report_num(n, sizeof n, c->at_ref->rate / div);
        snprintf(buf, cap, "%s %s/s per $ of purchase price", n, items_of(r));
    }
}

/* ---- sections ---- */

static void sec_machines(tb_doc *d, const tb_cmp_set *s)
{
    static const char *const h[6] = {"machine", "backend", "host", "results folder", "price",
                                     "power"};
    tb_doc_table(d, 6, h);
    for (int i = 0; i < s->n; i++) {
        const tb_cmp_machine *m = &s->m[i];
        char label[240], price[64], power[200];
        snprintf(label, sizeof label, "%s%s", m->label, i == s->reference ? " (reference)" : "");
        const char *be = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "device.backend") : NULL;
        const char *host = m->f->have_fp ? tb_fingerprint_get(&m->f->fp, "run.host") : NULL;
        if (isnan(m->price))
            snprintf(price, sizeof price, "n/a: not given");
        else
            snprintf(price, sizeof price, "$%.2f%s", m->price,
                     s->price_kind == TB_PRICE_PER_HOUR ? " per hour" : " purchase");
        if (isnan(m->power_w))
            snprintf(power, sizeof power, "n/a: no --power given and no NVML power measured");
        else
            snprintf(power, sizeof power, "%.0f W (%s)", m->power_w, m->power_src);
        const char *row[6] = {label, be ? be : "unknown", host ? host : "unknown", m->dir, price,
                              power};
        tb_doc_row(d, row);
    }
}

static void sec_software(tb_doc *d, const tb_cmp_set *s)
{
    const tb_cmp_machine *ref = &s->m[s->reference];
    int warned = 0;
    for (int i = 0; i < s->n; i++) {
        if (i == s->reference)
            continue;
        const tb_cmp_machine *m = &s->m[i];
        if (!ref->f->have_fp || !m->f->have_fp) {
            char t[600];
            snprintf(t, sizeof t, "**Warning**: %s or the reference has no fingerprint.json; "
                     "software stacks cannot be compared.", m->label);
            tb_doc_para(d, t);
            warned = 1;
            continue;
        }
        char diff[4096] = "", t[4800];
        int nd = 0;
        if (tb_fingerprint_diff(&ref->f->fp, &m->f->fp, TB_FP_SOFTWARE, diff, sizeof diff,
                                &nd) != TB_OK) {
            tb_error_clear();
            continue;
        }
        if (nd == 0)
            continue;
        for (char *p = diff; (p = strchr(p, '\n')) != NULL;)
            *p = ';';
        snprintf(t, sizeof t, "**Warning: software stacks differ** between %s and the reference "
                 "(%d keys): %s A difference between these machines may come from the software, "
                 "not the hardware.", m->label, nd, diff);
        tb_doc_para(d, t);
        warned = 1;
    }
    if (!warned)
        tb_doc_para(d, "Software stacks: the same on every machine (libraries, runtime, driver, "
                       "compiler, build flags, git revision, OS).");
}

static void sec_table(tb_doc *d, const tb_cmp_set *s, char (*tech)[32], int nt)
{
    int ncols = 2 + 2 * s->n;
    const char **h = calloc((size_t)ncols, sizeof *h);
    char (*hb)[260] = calloc((size_t)ncols, sizeof *hb);
    const char **row = calloc((size_t)ncols, sizeof *row);
    char (*cells)[TB_REPORT_CELL] = calloc((size_t)ncols, sizeof *cells);
    if (!h || !hb || !row || !cells)
        goto out_free;
    h[0] = "technique";
    h[1] = "reference's best: setting, metric, point";
    for (int i = 0; i < s->n; i++) {
        snprintf(hb[2 + 2 * i], 260, "%s: own best setting, speedup [95%% CI]", s->m[i].label);
        snprintf(hb[3 + 2 * i], 260, "%s: speed at the reference's best", s->m[i].label);
        h[2 + 2 * i] = hb[2 + 2 * i];
        h[3 + 2 * i] = hb[3 + 2 * i];
    }
    tb_doc_table(d, ncols, h);
    for (int t = 0; t < nt; t++) {
        cmp_cell ref;
        compute_cell(s, s->reference, tech[t], &(tb_report_pick){{0}}, &ref);
        const tb_result_row *like = ref.own.best ? ref.own.best : ref.own.baseline;
        snprintf(cells[0], TB_REPORT_CELL, "%s", tech[t]);
        if (like) {
            char pt[64] = "no sweep";
            if (like->param_name[0] && !isnan(like->param_value))
                snprintf(pt, sizeof pt, "%s = %.0f", like->param_name, like->param_value);
            snprintf(cells[1], TB_REPORT_CELL, "%s, %s, %s%s%s", like->setting, like->metric, pt,
                     like->workload[0] ? ", on " : "", like->workload);
        } else {
            snprintf(cells[1], TB_REPORT_CELL, "n/a: not timed on the reference");
        }
        for (int i = 0; i < s->n; i++) {
            cmp_cell c;
            compute_cell(s, i, tech[t], &ref.own, &c);
            own_str(cells[2 + 2 * i], TB_REPORT_CELL, &c);
            speed_str(cells[3 + 2 * i], TB_REPORT_CELL, &c);
        }
        for (int c = 0; c < ncols; c++)
            row[c] = cells[c];
        tb_doc_row(d, row);
    }
out_free:
    free(h);
    free(hb);
    free(row);
    free(cells);
}

static void sec_costs(tb_doc *d, const tb_cmp_set *s, char (*tech)[32], int nt)
{
    static const char *const h[4] = {"technique", "machine", "per dollar", "per watt"};
    tb_doc_table(d, 4, h);
    for (int t = 0; t < nt; t++) {
        cmp_cell ref;
        compute_cell(s, s->reference, tech[t], &(tb_report_pick){{0}}, &ref);
        for (int i = 0; i < s->n; i++) {
            cmp_cell c;
            char usd[200], w[200];
            compute_cell(s, i, tech[t], &ref.own, &c);
            cost_str(usd, sizeof usd, s, i, &c, 0);
            cost_str(w, sizeof w, s, i, &c, 1);
            const char *row[4] = {tech[t], s->m[i].label, usd, w};
            tb_doc_row(d, row);
        }
    }
}

/* ---- at a glance: the forest plot of every machine ---- */

/* The forest's rows: every technique compared on some machine, in the
 * reference machine's summary order (then the others' techniques), one
 * column per machine. */
static size_t glance_rows(const tb_cmp_set *s, char (*tech)[32], int nt, tb_forest_row *rows)
{
    tb_report_pick ref[TB_REPORT_MAX_TECH * TB_COMPARE_MAX];
    size_t order[TB_REPORT_MAX_TECH * TB_COMPARE_MAX], n = 0;
    if (nt <= 0)
        return 0;
    for (int t = 0; t < nt; t++) {
        cmp_cell c;
        compute_cell(s, s->reference, tech[t], &(tb_report_pick){{0}}, &c);
        ref[t] = c.own;
    }
    tb_report_order(ref, (size_t)nt, order);
    for (int k = 0; k < nt; k++) {
        int t = (int)order[k], any = 0;
        tb_forest_row *r = &rows[n];
        memset(r, 0, sizeof *r);
        const tb_result_row *shown = NULL;
        const char *work = "";
        for (int m = 0; m < s->n && m < TB_FOREST_MAX_COLS; m++) {
            cmp_cell c;
            compute_cell(s, m, tech[t], &ref[t], &c);
            tb_forest_point_of(&c.own, &r->at[m]);
            if (!isnan(r->at[m].speedup) && (!shown || m == s->reference)) {
                shown = c.own.best;
                work = tech_workload(&s->m[m], tech[t]);
            }
            any |= !isnan(r->at[m].speedup);
        }
        if (!any)
            continue;
        r->step_level = tb_report_is_step_level(shown);
        /* as in the report: the results' workload, else the default small CNN */
        snprintf(r->label, sizeof r->label, "%s: %s (%s)", tech[t], shown->setting,
                 work[0] ? work : r->step_level ? "small CNN" : shown->metric);
        n++;
    }
    return n;
}

static void sec_glance(tb_doc *d, const tb_cmp_set *s, char (*tech)[32], int nt,
                       const char *plots)
{
    tb_forest_row *rows = calloc((size_t)nt + 1, sizeof *rows);
    tb_forest fp = {s->n < TB_FOREST_MAX_COLS ? s->n : TB_FOREST_MAX_COLS, {0}, rows, 0};
    char png[PATH_MAX + 32], cap[800];
    tb_doc_heading(d, 2, "At a glance");
    if (!rows) {
        tb_doc_para(d, "The side-by-side forest plot was not drawn: out of memory.");
        return;
    }
    for (int m = 0; m < fp.ncols; m++)
        fp.col_title[m] = s->m[m].label;
    fp.n = glance_rows(s, tech, nt, rows);
    if (!fp.n || tb_forest_render(&fp, plots, "forest_compare") != TB_OK) {
        tb_doc_para(d, fp.n ? "The side-by-side forest plot was not drawn (see the error "
                              "above)."
                            : "No technique was compared with its baseline on any machine.");
        if (fp.n)
            tb_error_print(stderr), tb_error_clear();
        free(rows);
        return;
    }
    if (snprintf(png, sizeof png, "%s/forest_compare.png", plots) >= (int)sizeof png) {
        tb_doc_para(d, "The side-by-side forest plot was drawn but is not shown: its path is "
                       "too long.");
        free(rows);
        return;
    }
    snprintf(cap, sizeof cap,
             "Each technique's speedup over its own baseline on each machine (%d%s side by "
             "side, same rows), with its 95%% interval, coloured by verdict; the grey band is "
             "the row's noise floor on that machine, the dashed line 1×. A row missing on a "
             "machine was not compared there. Upper panels: the training step or epoch; lower: "
             "single kernels and operations. Also `forest_compare.svg` and `.pdf` in `plots/`.",
             fp.ncols, s->n > fp.ncols ? " of the machines" : " machines");
    tb_doc_figure(d, png, "plots/forest_compare.png",
                  "forest plot of every machine side by side", cap);
    free(rows);
}

/* ---- figures ---- */

enum { MAXPTS = 64 };

typedef struct series_buf {
    double x[MAXPTS], y[MAXPTS], lo[MAXPTS], hi[MAXPTS];
    size_t n;
} series_buf;

/* Per machine, over the sweep of the reference's best setting: its speedup
 * (vs_ref == 0) or its speed relative to the reference (vs_ref == 1). */
static void collect(const tb_cmp_set *s, int m, const char *tech, const tb_result_row *like,
                    int vs_ref, series_buf *b)
{
    const tb_results *res = tech_rows(&s->m[m], tech);
    const tb_results *ref = tech_rows(&s->m[s->reference], tech);
    b->n = 0;
    for (size_t i = 0; res && i < res->n && b->n < MAXPTS; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!same_series(r, like) || isnan(r->param_value) || isnan(r->median))
            continue;
        if (!vs_ref) {
            if (isnan(r->speedup))
                continue;
            b->x[b->n] = r->param_value;
            b->y[b->n] = r->speedup;
            b->lo[b->n] = r->speedup_ci_low;
            b->hi[b->n++] = r->speedup_ci_high;
            continue;
        }
        const tb_result_row *rr = find_row(ref, r);
        if (!rr)
            continue;
        double v = tb_compare_seconds(rr->median, rr->unit) / tb_compare_seconds(r->median, r->unit);
        /* Interval from the two medians' intervals (conservative ends). */
        b->x[b->n] = r->param_value;
        b->y[b->n] = v;
        b->lo[b->n] = tb_compare_seconds(rr->ci_low, rr->unit) /
                      tb_compare_seconds(r->ci_high, r->unit);
        b->hi[b->n++] = tb_compare_seconds(rr->ci_high, rr->unit) /
                        tb_compare_seconds(r->ci_low, r->unit);
    }
}

static int plot_one(tb_doc *d, const tb_cmp_set *s, const char *tech, const tb_result_row *like,
                    int vs_ref, const char *plots)
{
    series_buf *b = calloc((size_t)s->n, sizeof *b);
    tb_plot_series ser[TB_COMPARE_MAX];
    if (!b)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory plotting %s", tech);
    int ns = 0, rc = TB_OK;
    for (int i = 0; i < s->n; i++) {
        collect(s, i, tech, like, vs_ref, &b[i]);
        if (b[i].n >= 2)
            ser[ns++] = (tb_plot_series){s->m[i].label, b[i].x, b[i].y, b[i].lo, b[i].hi, b[i].n};
    }
    if (ns > 0) {
        char name[96], title[300], ylab[200], png[PATH_MAX + 128], cap[600];
        snprintf(name, sizeof name, "%s_compare_%s", tech, vs_ref ? "vs_reference" : "speedup");
        char what[160];
        snprintf(what, sizeof what, "%s%s%s", like->metric, like->workload[0] ? ", " : "",
                 like->workload);
        if (vs_ref)
            snprintf(title, sizeof title, "%s, %s (%s): speed relative to %s", tech,
                     like->setting, what, s->m[s->reference].label);
        else
            snprintf(title, sizeof title, "%s: %s over its baseline (%s), per machine", tech,
                     like->setting, what);
        snprintf(ylab, sizeof ylab, "%s", vs_ref ? "reference time / this time (x)" : "speedup (x)");
        tb_plot_hline one = {vs_ref ? "the reference" : "no change", 1.0};
        tb_plot p = {title, like->param_name, ylab, 2, 0, ser, (size_t)ns, &one, 1, 0};
        rc = tb_plot_render(&p, plots, name, TB_PLOT_ALL);
        if (rc == TB_OK) {
            snprintf(png, sizeof png, "%s/%s.png", plots, name);
            char md[200];
            snprintf(md, sizeof md, "plots/%s.png", name);
            snprintf(cap, sizeof cap, "Figure `%s` (also `.svg` and `.pdf` in `plots/`): %s; "
                     "error bars are 95%% intervals.", name, title);
            tb_doc_figure(d, png, md, name, cap);
        }
    }
    free(b);
    return rc;
}

static int sec_plots(tb_doc *d, const tb_cmp_set *s, char (*tech)[32], int nt, const char *plots)
{
    for (int t = 0; t < nt; t++) {
        cmp_cell ref;
        compute_cell(s, s->reference, tech[t], &(tb_report_pick){{0}}, &ref);
        const tb_result_row *like = ref.own.best;
        if (!like || !like->param_name[0])
            continue;
        TB_TRY(plot_one(d, s, tech[t], like, 0, plots));
        TB_TRY(plot_one(d, s, tech[t], like, 1, plots));
    }
    return TB_OK;
}

/* ---- compare.csv ---- */

static void csv_num(FILE *f, double v)
{
    char b[64];
    tb_format_number(b, sizeof b, v);
    fputs(b, f);
}

static const char *const csv_cols =
    "technique,machine,device,is_reference,setting,metric,param_name,param_value,unit,median,"
    "ci_low,ci_high,speedup,speedup_ci_low,speedup_ci_high,speed_vs_reference,"
    "speed_vs_reference_low,speed_vs_reference_high,own_best_setting,"
    "own_best_speedup,rate,rate_unit,price_usd,price_kind,power_w,rate_per_dollar,rate_per_watt,"
    "workload\n";

static void csv_row(FILE *f, const tb_cmp_set *s, int m, const char *tech, const cmp_cell *c)
{
    const tb_cmp_machine *mm = &s->m[m];
    const tb_result_row *r = c->at_ref;
    tb_results_put_csv_string(f, tech), fputc(',', f);
    tb_results_put_csv_string(f, mm->label), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->device : ""), fputc(',', f);
    fputs(m == s->reference ? "1," : "0,", f);
    tb_results_put_csv_string(f, r ? r->setting : ""), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->metric : ""), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->param_name : ""), fputc(',', f);
    csv_num(f, r ? r->param_value : NAN), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->unit : ""), fputc(',', f);
    const double nan_ = NAN;
    double v[6] = {r ? r->median : nan_, r ? r->ci_low : nan_, r ? r->ci_high : nan_,
                   r ? r->speedup : nan_, r ? r->speedup_ci_low : nan_,
                   r ? r->speedup_ci_high : nan_};
    for (int i = 0; i < 6; i++)
        csv_num(f, v[i]), fputc(',', f);
    csv_num(f, c->vs_ref), fputc(',', f);
    csv_num(f, c->vs_lo), fputc(',', f);
    csv_num(f, c->vs_hi), fputc(',', f);
    tb_results_put_csv_string(f, c->own.best ? c->own.best->setting : ""), fputc(',', f);
    csv_num(f, c->own.best ? c->own.best->speedup : nan_), fputc(',', f);
    int samples = r && items_of(r->rate_unit);
    csv_num(f, r ? r->rate : nan_), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->rate_unit : ""), fputc(',', f);
    csv_num(f, mm->price), fputc(',', f);
    fputs(s->price_kind == TB_PRICE_PER_HOUR ? "per_hour," : s->price_kind == TB_PRICE_PURCHASE
                                                                 ? "purchase,"
                                                                 : ",", f);
    csv_num(f, mm->power_w), fputc(',', f);
    double per_usd = NAN;
    if (samples && s->price_kind == TB_PRICE_PER_HOUR)
        per_usd = r->rate * 3600.0 / mm->price;
    else if (samples && s->price_kind == TB_PRICE_PURCHASE)
        per_usd = r->rate / mm->price;
    csv_num(f, per_usd), fputc(',', f);
    csv_num(f, samples ? r->rate / mm->power_w : nan_), fputc(',', f);
    tb_results_put_csv_string(f, r ? r->workload : "");
    fputc('\n', f);
}

static int write_csv(const tb_cmp_set *s, char (*tech)[32], int nt, const char *path)
{
    tb_atomic_file af;
    int rc;
    TB_TRY(tb_atomic_open(&af, path));
    fputs(csv_cols, af.fp);
    for (int t = 0; t < nt; t++) {
        cmp_cell ref;
        compute_cell(s, s->reference, tech[t], &(tb_report_pick){{0}}, &ref);
        for (int i = 0; i < s->n; i++) {
            cmp_cell c;
            compute_cell(s, i, tech[t], &ref.own, &c);
            csv_row(af.fp, s, i, tech[t], &c);
        }
    }
    TB_TRY_GOTO(rc, tb_atomic_commit(&af), out_fail);
    return TB_OK;
out_fail:
    return TB_FAIL(rc, "cannot write %s", path);
}

/* ---- the page ---- */

int tb_compare_write(const tb_cmp_set *s, const char *out_dir)
{
    char plots[PATH_MAX + 16], path[PATH_MAX + 32];
    char(*tech)[32] = calloc(TB_REPORT_MAX_TECH * TB_COMPARE_MAX, 32);
    tb_doc *d = tb_doc_new();
    int rc = TB_OK;
    if (!tech || !d) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory comparing machines");
        goto out_free;
    }
    if (s->n < 1 || s->reference < 0 || s->reference >= s->n) {
        rc = TB_FAIL(TB_ERR_INVALID, "nothing to compare");
        goto out_free;
    }
    snprintf(plots, sizeof plots, "%s/plots", out_dir);
    TB_TRY_GOTO(rc, tb_mkdir_p(plots), out_free);
    int nt = all_techniques(s, tech, TB_REPORT_MAX_TECH * TB_COMPARE_MAX);

    char title[400];
    snprintf(title, sizeof title, "tunebench: %d machines compared, reference %s", s->n,
             s->m[s->reference].label);
    tb_doc_heading(d, 1, title);
    tb_doc_para(d, "Each technique's speedup on each machine (over that machine's own baseline, "
                   "with its 95% interval), and how fast each machine runs the reference "
                   "machine's best setting: reference time divided by this machine's time at "
                   "the same setting, metric and point (2× means twice as fast as the "
                   "reference). The best setting of a machine follows the report's summary rule "
                   "(REPORT.md of each folder).");
    sec_glance(d, s, tech, nt, plots);
    tb_doc_heading(d, 2, "Machines");
    sec_machines(d, s);
    sec_software(d, s);
    tb_doc_heading(d, 2, "Per technique");
    sec_table(d, s, tech, nt);
    tb_doc_heading(d, 2, "Per dollar and per watt");
    tb_doc_para(d, "For rows whose rate is a training throughput (samples/s, images/s or "
                   "tokens/s): with a price per hour, items per dollar (rate × 3600 / price); "
                   "with a purchase price, items/s per dollar; with a power figure, items/s per "
                   "watt (items per joule).");
    sec_costs(d, s, tech, nt);
    tb_doc_heading(d, 2, "Figures");
    TB_TRY_GOTO(rc, sec_plots(d, s, tech, nt, plots), out_free);
    tb_doc_para(d, "Files: `compare.csv` (every number above; columns in results/README.md), "
                   "`COMPARE.md`, `COMPARE.html` (self-contained), `plots/` (PNG, SVG, PDF and "
                   "gnuplot scripts).");
    snprintf(path, sizeof path, "%s/compare.csv", out_dir);
    TB_TRY_GOTO(rc, write_csv(s, tech, nt, path), out_free);
    snprintf(path, sizeof path, "%s/COMPARE.md", out_dir);
    TB_TRY_GOTO(rc, tb_doc_save_md(d, path), out_free);
    snprintf(path, sizeof path, "%s/COMPARE.html", out_dir);
    TB_TRY_GOTO(rc, tb_doc_save_html(d, title, path), out_free);
out_free:
    tb_doc_free(d);
    free(tech);
    return rc;
}
