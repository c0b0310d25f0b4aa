/*
 * bars.h - a labeled bar chart: one bar per named configuration with its
 * 95% interval and a text above it (the absolute time beside the ratio),
 * and a dashed reference line. The report draws the waterfall (techniques
 * switched on one after another, cumulative) and leave-one-out (all on but
 * one) with it: configurations with names, not a series over numbers.
 *
 * Test: bazel test //lib/report:report_test (the scripts: labels, axis
 * titles); the figures themselves were checked by eye.
 */
#ifndef TB_REPORT_BARS_H
#define TB_REPORT_BARS_H

#include <stddef.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_bar {
    char label[96];            /* on the x axis: "+ channels last" */
    double y, lo, hi;          /* bar height and its interval (lo, hi NaN: none) */
    char text[48];             /* above the bar: "12.1 ms"; "" none */
    int color;                 /* index into tb_plot_colors */
} tb_bar;

typedef struct tb_bars {
    const char *title;
    const char *y_label;       /* with its unit */
    const char *x_label;
    const tb_bar *bars;
    size_t n;
    double ref_y;              /* dashed line; NaN: none */
    const char *ref_name;      /* its legend entry */
} tb_bars;

/* Renders dir/NAME.{gp,png,svg,pdf}. REQUIRES: dir exists, n >= 1, name
 * of [A-Za-z0-9._-]. */
int tb_bars_render(const tb_bars *b, const char *dir, const char *name);

#ifdef __cplusplus
}
#endif
#endif
