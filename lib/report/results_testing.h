/*
 * results_testing.h - a timed result row for the tests of lib/report
 * (results, report, compare), so each test states only the numbers its
 * checks read. Header only, for tests (//lib/report:results_testing is
 * testonly).
 */
#ifndef TB_RESULTS_TESTING_H
#define TB_RESULTS_TESTING_H

#include <stdio.h>

#include "lib/report/results.h"

/* How a row's repetitions spread around its median, as factors of it. */
typedef struct tb_test_spread {
    double ci_low, ci_high, min, max;
} tb_test_spread;

/* A timed row of technique on the CPU backend of device, in ms: median and
 * reps, with interval and range from spread; every other column as
 * tb_result_row_init leaves it. param_name "" and param_value NaN: no sweep. */
__attribute__((unused))
static void tb_test_timed_row(tb_result_row *r, const char *technique, const char *device,
                              const char *setting, int is_baseline, const char *param_name,
                              double param_value, const char *metric, int reps, double median,
                              tb_test_spread spread)
{
    tb_result_row_init(r);
    snprintf(r->technique, sizeof r->technique, "%s", technique);
    snprintf(r->backend, sizeof r->backend, "cpu");
    snprintf(r->device, sizeof r->device, "%s", device);
    snprintf(r->setting, sizeof r->setting, "%s", setting);
    r->is_baseline = is_baseline;
    snprintf(r->param_name, sizeof r->param_name, "%s", param_name);
    r->param_value = param_value;
    snprintf(r->metric, sizeof r->metric, "%s", metric);
    snprintf(r->unit, sizeof r->unit, "ms");
    r->reps = reps;
    r->median = median;
    r->ci_low = median * spread.ci_low;
    r->ci_high = median * spread.ci_high;
    r->min = median * spread.min;
    r->max = median * spread.max;
}

#endif
