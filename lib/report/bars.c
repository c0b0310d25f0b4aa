/*
 * bars.c - labeled bar charts as gnuplot scripts; see bars.h.
 *
 * The bars are drawn with boxes from a datablock (x, y, lo, hi, colour),
 * their intervals with yerrorbars on top, the labels as xtics rotated so
 * that long configuration names stay readable, and the text above each
 * bar with `labels`.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/bars.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/report/plot.h"

static void setup(FILE *f, const void *arg)
{
    const tb_bars *b = arg;
    double top = isnan(b->ref_y) ? 0 : b->ref_y;
    fputs("$bars << EOD\n", f);
    for (size_t i = 0; i < b->n; i++) {
        const tb_bar *r = &b->bars[i];
        double lo = isnan(r->lo) ? r->y : r->lo, hi = isnan(r->hi) ? r->y : r->hi;
        unsigned rgb = 0;
        sscanf(tb_plot_colors[(r->color % 8 + 8) % 8] + 1, "%x", &rgb);
        if (isnan(r->y)) /* an n/a configuration: its label stays, no bar */
            fprintf(f, "%zu NaN NaN NaN %u \"\"\n", i, rgb);
        else
            fprintf(f, "%zu %.6g %.6g %.6g %u ", i, r->y, lo, hi, rgb);
        if (!isnan(r->y)) {
            tb_plot_put_quoted(f, r->text);
            fputc('\n', f);
            top = fmax(top, hi);
        }
    }
    fputs("EOD\n", f);
    fputs("set title ", f);
    tb_plot_put_quoted(f, b->title);
    fputs("\nset ylabel ", f);
    tb_plot_put_quoted(f, b->y_label);
    fputs("\nset xlabel ", f);
    tb_plot_put_quoted(f, b->x_label);
    fprintf(f, "\nset xrange [-0.7:%zu.7]\nset yrange [0:%.4g]\n", b->n - 1, top * 1.18);
    fputs("set xtics rotate by 35 right nomirror\nset grid ytics\nset boxwidth 0.7\n"
          "set style fill solid 0.8 noborder\nset key outside top center horizontal\n"
          "set bmargin 12\nset errorbars small\nset xtics (", f);
    for (size_t i = 0; i < b->n; i++) {
        fputs(i ? ", " : "", f);
        tb_plot_put_quoted(f, b->bars[i].label);
        fprintf(f, " %zu", i);
    }
    fputs(")\n", f);
}

static void draw(FILE *f, const void *arg)
{
    const tb_bars *b = arg;
    fputs("        plot $bars using 1:2:5 with boxes linecolor rgb variable notitle, \\\n"
          "            $bars using 1:2:3:4 with yerrorbars pointsize 0 linecolor rgb 'black' "
          "linewidth 1.5 title '95% interval', \\\n"
          "            $bars using 1:4:6 with labels offset 0,1.3 notitle", f);
    if (!isnan(b->ref_y)) {
        fprintf(f, ", \\\n            %.6g with lines dashtype 2 linewidth 1.5 linecolor rgb "
                   "'gray30' title ", b->ref_y);
        tb_plot_put_quoted(f, b->ref_name ? b->ref_name : "");
    }
    fputc('\n', f);
}

int tb_bars_render(const tb_bars *b, const char *dir, const char *name)
{
    if (!b->n)
        return TB_FAIL(TB_ERR_INVALID, "bar chart %s has no bars", name);
    tb_plot_custom c = {setup, draw, b, 1200, 800};
    return tb_plot_render_custom(&c, dir, name, TB_PLOT_ALL);
}
