/*
 * plot.h - gnuplot figures: a small description in, a script plus PNG, SVG
 * and PDF out.
 *
 * The gnuplot script (NAME.gp, and NAME.dat when the data is not inline) is
 * kept in plots/<device>/ next to the images, so a figure can be restyled
 * for a paper and re-rendered by hand:
 *     cd plots/<device> && gnuplot NAME.gp
 * tunebench renders each image to a temporary name and renames it into
 * place (lib/core/atomic_file.h), so an interrupted run never leaves half a PNG.
 * gnuplot comes from Debian's gnuplot-nox (pngcairo, svg, pdfcairo); the
 * environment variable TB_GNUPLOT names another binary, and TB_GNUPLOT=none
 * writes the scripts only (a machine without gnuplot, such as a GPU box
 * running the kit: the figures are drawn later from the scripts).
 *
 * Test: bazel test //lib/report:plot_test
 */
#ifndef TB_PLOT_H
#define TB_PLOT_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_plot_format {
    TB_PLOT_PNG = 1,
    TB_PLOT_SVG = 2,
    TB_PLOT_PDF = 4,
    TB_PLOT_ALL = 7,
} tb_plot_format;

/* One line of points. A NaN y (an n/a point) leaves a gap. */
typedef struct tb_plot_series {
    const char *name;         /* legend entry */
    const double *x, *y;      /* n points each */
    const double *y_low, *y_high; /* error bars (e.g. the 95% interval): both or NULL */
    size_t n;
    int style;                /* 1..8: line style (colour, point) fixed by the caller, so a
                                 setting keeps its colour across figures; 0: by position */
} tb_plot_series;

/* A horizontal reference line, e.g. the copy-bandwidth ceiling. */
typedef struct tb_plot_hline {
    const char *name;
    double y;
} tb_plot_hline;

typedef struct tb_plot {
    const char *title;
    const char *x_label, *y_label; /* with units: "elements", "GB/s" */
    int x_log, y_log;         /* 0: linear axis; otherwise the log base (2, 10) */
    const tb_plot_series *series;
    size_t n_series;
    const tb_plot_hline *hlines; /* may be NULL */
    size_t n_hlines;
    int data_file;            /* 0: data inline in NAME.gp; 1: in NAME.dat beside it */
} tb_plot;

/* Writes dir/NAME.gp (and dir/NAME.dat) atomically.
 * REQUIRES: dir exists; name made of [A-Za-z0-9._-]; at least one series;
 * every series has n >= 1 points. */
int tb_plot_write_script(const tb_plot *p, const char *dir, const char *name);

/* Writes the script, runs gnuplot on it in dir and puts NAME.png / .svg /
 * .pdf (formats: a mask of tb_plot_format) into place. Fails with
 * TB_ERR_IO naming the install command when gnuplot is missing, and with
 * gnuplot's stderr when it fails; earlier images are then left as they were. */
int tb_plot_render(const tb_plot *p, const char *dir, const char *name, unsigned formats);

/* A figure the line plot above cannot draw (a forest plot, labeled bars):
 * setup() writes data blocks and settings once, draw() the plot or
 * multiplot commands, run once per output format. The script is kept as
 * NAME.gp like any other, with the same styles (linestyle 1..8 in the
 * colours of tb_plot_colors). */
typedef struct tb_plot_custom {
    void (*setup)(FILE *f, const void *arg);
    void (*draw)(FILE *f, const void *arg);
    const void *arg;
    int width_px, height_px;  /* 0: 1200 x 800 */
} tb_plot_custom;

/* As tb_plot_render, for a custom figure. REQUIRES: dir exists; name made
 * of [A-Za-z0-9._-]; setup and draw non-NULL. */
int tb_plot_render_custom(const tb_plot_custom *c, const char *dir, const char *name,
                          unsigned formats);

/* Writes dir/NAME.gp of a custom figure only. */
int tb_plot_write_custom(const tb_plot_custom *c, const char *dir, const char *name);

/* The eight colours of the line styles (Okabe-Ito, colour-blind safe), so
 * a setting keeps its colour across figures. */
extern const char *const tb_plot_colors[8];

/* Writes s as a double-quoted gnuplot string (" and \ escaped): for tick
 * labels and data-block text, where single quotes would end a label. */
void tb_plot_put_quoted(FILE *f, const char *s);

/* Writes the line styles 1..8 (tb_plot_colors) as gnuplot commands. */
void tb_plot_put_styles(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
