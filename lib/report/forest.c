/*
 * forest.c - the forest plot as a gnuplot multiplot; see forest.h.
 *
 * Layout: a grid of panels, one row of panels per level (training step
 * above kernels, a level with no rows left out) and one column per
 * machine, placed with screen-coordinate margins so that every panel's
 * rows line up with the labels of the first column. The x axis is log2
 * (a 2x speedup and a 2x slowdown are the same distance from 1x).
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/forest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/report/plot.h"

/* Appended to the label of a row whose result DIFFERS from its baseline's. */
#define DIFFERS_MARK "  [DIFFERS]"
#define OTHER_DIFFERS_MARK "  [another setting DIFFERS]"

static const char *differs_mark(int differs)
{
    return differs == 1 ? DIFFERS_MARK : differs == 2 ? OTHER_DIFFERS_MARK : "";
}

/* Verdict colours: the same in every figure and in the compare page. */
static const char *const group_color[TB_GROUP_COUNT] = {"#0072b2", "#777777", "#d55e00",
                                                        "#777777"};

void tb_forest_point_of(const tb_report_pick *p, tb_forest_point *out)
{
    memset(out, 0, sizeof *out);
    out->speedup = out->lo = out->hi = out->noise = NAN;
    out->group = tb_report_pick_group(p);
    if (!p->best || isnan(p->best->speedup))
        return;
    out->speedup = p->best->speedup;
    out->lo = p->best->speedup_ci_low;
    out->hi = p->best->speedup_ci_high;
    out->noise = p->best->noise_floor;
    out->differs = p->best->correctness == TB_CORRECT_DIFFERS ? 1
                   : p->differs && p->differs != p->best ? 2 : 0;
}

/* Rows of a level, counted. */
static size_t level_rows(const tb_forest *fp, int step)
{
    size_t k = 0;
    for (size_t i = 0; i < fp->n; i++)
        k += fp->rows[i].step_level == step;
    return k;
}

/* The x range over every point, intervals and noise bands included,
 * always holding 0.5x..2x so small effects are seen at their size. */
static void x_range(const tb_forest *fp, double *lo, double *hi)
{
    *lo = 0.5;
    *hi = 2;
    for (size_t i = 0; i < fp->n; i++)
        for (int c = 0; c < fp->ncols; c++) {
            const tb_forest_point *p = &fp->rows[i].at[c];
            double a = isnan(p->lo) ? p->speedup : p->lo, b = isnan(p->hi) ? p->speedup : p->hi;
            if (isnan(a))
                continue;
            *lo = fmin(*lo, a);
            *hi = fmax(*hi, b);
            if (!isnan(p->noise))
                *lo = fmin(*lo, fmax(1 - p->noise, 0.05)), *hi = fmax(*hi, 1 + p->noise);
        }
    *lo /= 1.3;
    *hi *= 1.3;
}

/* $f<level>_<col>: y, speedup, lo, hi, noise band lo, hi, colour; the top
 * row of a panel has the largest y. NaN rows are skipped (a gap). */
static void put_block(FILE *f, const tb_forest *fp, int step, int col)
{
    size_t nl = level_rows(fp, step), k = 0;
    fprintf(f, "$f%d_%d << EOD\n", step, col);
    for (size_t i = 0; i < fp->n; i++) {
        const tb_forest_row *r = &fp->rows[i];
        if (r->step_level != step)
            continue;
        const tb_forest_point *p = &r->at[col];
        double y = (double)(nl - k++);
        if (isnan(p->speedup))
            continue;
        double nf = isnan(p->noise) ? 0 : p->noise;
        unsigned rgb = 0;
        sscanf(group_color[p->group] + 1, "%x", &rgb);
        fprintf(f, "%g %.6g %.6g %.6g %.6g %.6g %u\n", y, p->speedup,
                isnan(p->lo) ? p->speedup : p->lo, isnan(p->hi) ? p->speedup : p->hi,
                fmax(1 - nf, 0.05), 1 + nf, rgb);
    }
    fputs("EOD\n", f);
}

static void setup(FILE *f, const void *arg)
{
    const tb_forest *fp = arg;
    double lo, hi;
    x_range(fp, &lo, &hi);
    for (int step = 1; step >= 0; step--)
        for (int c = 0; level_rows(fp, step) && c < fp->ncols; c++)
            put_block(f, fp, step, c);
    fprintf(f, "tb_xlo = %.4g\ntb_xhi = %.4g\n", lo, hi);
}

/* The y tick labels of a level: the row labels in the first column,
 * none in the others (they share the first column's rows). */
static void put_yticks(FILE *f, const tb_forest *fp, int step, int col)
{
    size_t nl = level_rows(fp, step), k = 0;
    if (col > 0) {
        fputs("        unset ytics\n", f); /* the rows are the first column's */
        return;
    }
    fputs("        set ytics (", f);
    for (size_t i = 0; i < fp->n; i++) {
        const tb_forest_row *r = &fp->rows[i];
        if (r->step_level != step)
            continue;
        char lab[200];
        snprintf(lab, sizeof lab, "%s%s", r->label, differs_mark(r->at[0].differs));
        fputs(k ? ", " : "", f);
        tb_plot_put_quoted(f, lab);
        fprintf(f, " %zu", nl - k++);
    }
    fputs(") nomirror scale 0\n", f);
}

/* Geometry in pixels: each row ROW_PX, each panel a title above and the
 * tick labels and axis label below, the key at the top. The label column
 * takes label_px() of the width, the machines share the rest. */
#define ROW_PX 21
#define PANEL_TOP_PX 34
#define PANEL_BOTTOM_PX 74
#define KEY_PX 56
#define LABEL_PX 420
#define LABEL_CHAR_PX 8.6 /* a character of Sans 12, the PNG's and SVG's font, on average */

/* The label column: at least LABEL_PX, and wide enough for the longest
 * row label (in bytes: a multi-byte character only widens it a little),
 * so that no label is cut at the figure's left edge. */
static int label_px(const tb_forest *fp)
{
    size_t longest = 0;
    for (size_t i = 0; i < fp->n; i++) {
        size_t n = strlen(fp->rows[i].label) + strlen(differs_mark(fp->rows[i].at[0].differs));
        longest = n > longest ? n : longest;
    }
    int px = (int)ceil(LABEL_CHAR_PX * (double)longest) + 24;
    return px > LABEL_PX ? px : LABEL_PX;
}

/* The figure's width and height, and its label column's width (label,
 * may be NULL), in pixels. */
static void size_of(const tb_forest *fp, int *w, int *h, int *label)
{
    size_t ns = level_rows(fp, 1), nk = level_rows(fp, 0);
    int lab = label_px(fp);
    if (label)
        *label = lab;
    *w = lab + (fp->ncols > 1 ? 380 : 580) * fp->ncols;
    *h = KEY_PX + (int)(ROW_PX * (ns + nk)) + (PANEL_TOP_PX + PANEL_BOTTOM_PX) * (!!ns + !!nk);
}

/* The legend as labels along the top (gnuplot's key stacks its entries
 * when placed on the screen in a multiplot): colours by verdict, the band. */
static void put_legend(FILE *f, int w)
{
    static const int x_px[TB_GROUP_NA] = {260, 380, 600}; /* after the band's entry */
    fprintf(f, "        set label 1 '▬ noise band (A/A)' at screen %.4f, screen 0.985 "
               "textcolor rgb '#999999'\n", 10.0 / w);
    for (int g = 0; g < TB_GROUP_NA; g++)
        fprintf(f, "        set label %d '● %s' at screen %.4f, screen 0.985 textcolor rgb '%s'\n",
                g + 2, tb_report_group_name(g), x_px[g] / (double)w, group_color[g]);
}

static void draw(FILE *f, const void *arg)
{
    const tb_forest *fp = arg;
    int w, hpx, lab;
    size_of(fp, &w, &hpx, &lab);
    double H = hpx, top = 1 - KEY_PX / H, label_w = lab / (double)w;
    double colw = (0.99 - label_w) / fp->ncols;
    fprintf(f, "        set multiplot\n"
               "        set logscale x 2\n        set xrange [tb_xlo:tb_xhi]\n"
               "        set format x '%%g×'\n        set grid xtics\n        set mxtics 1\n"
               "        set xlabel '%s'\n"
               "        unset key\n",
            fp->ncols > 1 ? "speedup (×, log scale)"
                          : "speedup over the baseline (×, log scale; right of 1× is faster)");
    put_legend(f, w);
    for (int step = 1; step >= 0; step--) {
        size_t nl = level_rows(fp, step);
        if (!nl)
            continue;
        double h = (PANEL_TOP_PX + PANEL_BOTTOM_PX + ROW_PX * (double)nl) / H;
        for (int c = 0; c < fp->ncols; c++) {
            double l = label_w + c * colw;
            fprintf(f, "        set lmargin at screen %.4f\n        set rmargin at screen %.4f\n"
                       "        set tmargin at screen %.4f\n        set bmargin at screen %.4f\n",
                    l + 0.005, l + colw - 0.01, top - PANEL_TOP_PX / H,
                    top - h + PANEL_BOTTOM_PX / H);
            fprintf(f, "        set yrange [0.4:%zu.6]\n", nl);
            fputs("        set title ", f);
            char title[200];
            if (fp->ncols > 1) /* the machine, and which panel */
                snprintf(title, sizeof title, "%s%s", fp->col_title[c],
                         step ? "" : ", kernels");
            else
                snprintf(title, sizeof title, "%s",
                         step ? "training step or epoch: technique: setting (workload)"
                              : "single kernels and operations: technique: setting (metric)");
            tb_plot_put_quoted(f, title);
            fputc('\n', f);
            put_yticks(f, fp, step, c);
            fputs("        set arrow 1 from 1, graph 0 to 1, graph 1 nohead dashtype 2 "
                  "linewidth 1.5 linecolor rgb 'black' front\n", f);
            fprintf(f, "        plot $f%d_%d using 2:1:5:6:($1-0.32):($1+0.32) with boxxyerror "
                       "fillstyle solid 0.35 noborder linecolor rgb '#bbbbbb', \\\n", step, c);
            fprintf(f, "            $f%d_%d using 2:1:3:4:7 with xerrorbars pointtype 7 "
                       "pointsize 1.3 linewidth 2 linecolor rgb variable\n", step, c);
            fputs("        unset label\n", f); /* the legend is drawn once */
        }
        top -= h;
    }
    fputs("        unset multiplot\n", f);
}

static tb_plot_custom custom_of(const tb_forest *fp)
{
    tb_plot_custom c = {setup, draw, fp, 0, 0};
    size_of(fp, &c.width_px, &c.height_px, NULL);
    return c;
}

static int check(const tb_forest *fp, const char *name)
{
    if (fp->ncols < 1 || fp->ncols > TB_FOREST_MAX_COLS)
        return TB_FAIL(TB_ERR_INVALID, "forest plot %s: %d columns (machines); 1 to %d can be "
                       "drawn side by side", name, fp->ncols, TB_FOREST_MAX_COLS);
    if (!fp->n)
        return TB_FAIL(TB_ERR_INVALID, "forest plot %s: no rows (no technique was compared "
                       "with its baseline)", name);
    return TB_OK;
}

int tb_forest_write_script(const tb_forest *fp, const char *dir, const char *name)
{
    TB_TRY(check(fp, name));
    tb_plot_custom c = custom_of(fp);
    return tb_plot_write_custom(&c, dir, name);
}

int tb_forest_render(const tb_forest *fp, const char *dir, const char *name)
{
    TB_TRY(check(fp, name));
    tb_plot_custom c = custom_of(fp);
    return tb_plot_render_custom(&c, dir, name, TB_PLOT_ALL);
}
