/*
 * findings.h - the answer first: the three to five results that matter
 * most on a machine, as sentences made from the summary's picks by a
 * stated rule (tb_report_findings_rule), for the top of the report.
 *
 * The rule: a shown setting whose result DIFFERS from the baseline comes
 * first (a speedup that changes the answer is the most important thing to
 * know); then settings with a verdict of faster or slower only, ranked by
 * the end of their 95% interval nearest 1x (the effect the data vouch for,
 * not the luckiest median), largest first; at most TB_FINDINGS_MAX.
 *
 * Test: bazel test //lib/report:report_test
 */
#ifndef TB_REPORT_FINDINGS_H
#define TB_REPORT_FINDINGS_H

#include <stddef.h>

#include "lib/report/results.h"
#include "lib/report/summary.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_FINDINGS_MAX 5

/* The rule above, as a sentence for the report. */
extern const char *const tb_report_findings_rule;

/* Whether r measures training as a whole (step time, epoch time, time per
 * 1000 samples, time to accuracy) rather than one kernel or operation: a
 * 5x faster GELU kernel is not a 5x faster training step. */
int tb_report_is_step_level(const tb_result_row *r);

/* The effect the interval vouches for: log of the end of the speedup
 * interval nearest 1 (positive when faster, negative when slower), 0 when
 * the interval holds 1 or is missing. */
double tb_report_sure_effect(const tb_result_row *r);

/* Picks the findings of picks[n] by the rule: writes up to max indices
 * into idx, best first, and returns how many. */
size_t tb_report_findings(const tb_report_pick *picks, size_t n, size_t *idx, size_t max);

/* One finding as a sentence, e.g. "**channels_last** (channels last):
 * 2.4× faster [2.0, 2.7] on the training step (small CNN), same result
 * within 0.17%." REQUIRES: p->best non-NULL. */
void tb_report_finding_text(const tb_report_pick *p, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
