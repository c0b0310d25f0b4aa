/*
 * forest.h - the forest plot: every technique's speedup with its 95%
 * interval, one row each, sorted by effect, coloured by verdict, with a
 * line at 1x and each row's own noise band (its A/A floor around 1x).
 * Training-step results and kernel-level results go in separate panels
 * (a 5x GELU kernel is not a 5x training step). Several columns draw
 * several machines side by side with the same rows (bench:compare).
 *
 * Test: bazel test //lib/report:report_test (the script: labels, panels,
 * caption); the figure itself was checked by eye.
 */
#ifndef TB_REPORT_FOREST_H
#define TB_REPORT_FOREST_H

#include <stddef.h>

#include "lib/report/summary.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_FOREST_MAX_COLS 6

/* One machine's value of a row; speedup NaN: not measured there. */
typedef struct tb_forest_point {
    double speedup, lo, hi;   /* median ratio and its 95% interval */
    double noise;             /* relative noise floor (0.1 = ±10%); NaN unknown */
    tb_report_group group;    /* its verdict, for the colour */
    int differs;              /* 1: its correctness is DIFFERS; 2: another setting's of
                                 the technique is (the shown one's is not) */
} tb_forest_point;

typedef struct tb_forest_row {
    char label[160];          /* "channels_last: channels last (small CNN)" */
    int step_level;           /* 1: training-step panel; 0: kernel panel */
    tb_forest_point at[TB_FOREST_MAX_COLS];
} tb_forest_row;

typedef struct tb_forest {
    int ncols;                              /* machines, 1..TB_FOREST_MAX_COLS */
    const char *col_title[TB_FOREST_MAX_COLS];
    tb_forest_row *rows;                    /* top to bottom, within each panel */
    size_t n;
} tb_forest;

/* The point of a pick's shown row (speedup NaN when it has none). */
void tb_forest_point_of(const tb_report_pick *p, tb_forest_point *out);

/* Renders dir/NAME.{gp,png,svg,pdf}. REQUIRES: dir exists, 1 <= ncols <=
 * TB_FOREST_MAX_COLS, n >= 1. */
int tb_forest_render(const tb_forest *fp, const char *dir, const char *name);

/* Writes dir/NAME.gp only (for tests: no gnuplot needed). */
int tb_forest_write_script(const tb_forest *fp, const char *dir, const char *name);

#ifdef __cplusplus
}
#endif
#endif
