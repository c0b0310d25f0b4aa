/*
 * plan.h - what bench:all runs and in which order, read from the technique
 * binaries themselves: each answers --describe with its declaration
 * (bench/harness/technique.h). Ordered by the declared order (ties by
 * name), each technique after those it names in `after`. The time budgets
 * of a plan are added up and held to the profile's limit (below).
 *
 * Test: bazel test //bench:plan_test
 */
#ifndef TB_BENCH_PLAN_H
#define TB_BENCH_PLAN_H

#include "bench/harness/technique.h"

typedef struct tb_plan_entry {
    char name[64];
    char results[64];                   /* its CSV's name (results/<device>/<results>.csv) */
    double est_seconds[TB_PROFILES];    /* per tb_profile */
    double budget_seconds[TB_PROFILES]; /* timing budget per tb_profile; 0: the harness's default */
    int order;
    char after[TB_MAX_AFTER][64];
} tb_plan_entry;

/* Runs `<bin_dir>/<name> --describe` for each name of the comma-separated
 * list names and returns the entries in run order in *out (free() it),
 * their count in *n. Fails (TB_ERR_IO, TB_ERR_DATA) when a binary cannot be
 * run or answers no valid description, or when `after` forms a cycle. */
int tb_plan_describe(const char *bin_dir, const char *names, tb_plan_entry **out, int *n);

/* Parses one --describe line (text) of binary bin into *e: name,
 * est_seconds[TB_PROFILES], budget_seconds[TB_PROFILES], order, after. TB_ERR_DATA when a field
 * is missing or a budget is negative. */
int tb_plan_parse_entry(const char *bin, const char *text, tb_plan_entry *e);

/* ---- time budgets (issue 14) ----
 * Each technique declares, per profile, the wall time its rounds may take
 * (technique.h, budget_seconds); the budgets of the techniques a run plans
 * must add up to at most the profile's limit, the wall time the whole
 * bench:all run is promised to fit in. The limits, in seconds, one per
 * tb_profile, live here and nowhere else (results/README.md quotes them):
 *   default  900    bench:all within 15 minutes on a 2-core VM
 *   full     14400  4 hours
 *   tiny     600    the tests' profile: 10 minutes
 *   gpu      600    one H100 in 10 minutes, the aim: a short visit to a GPU
 *                   machine should be enough to run it (README: the
 *                   estimate, above it today; the plan warns) */
double tb_plan_profile_limit(int profile);

typedef struct tb_plan_budget {
    double limit_s;           /* tb_plan_profile_limit(profile) */
    double total_s;           /* sum of the declared budgets */
    double est_s;             /* sum of est_seconds, for comparison */
    int n;                    /* techniques counted */
    int undeclared;           /* of those, how many declare 0 (the harness's default:
                                 not in total_s, so the sum may be short) */
    int over;                 /* total_s > limit_s */
} tb_plan_budget;

/* Adds up the budgets of entries[0..n) for profile into *out.
 * REQUIRES: 0 <= profile < TB_PROFILES. */
void tb_plan_budget_sum(const tb_plan_entry *const *entries, int n, int profile,
                        tb_plan_budget *out);

/* ---- the time keeper ----
 * Budgets are wall time, but some of a technique's work is fixed (its
 * correctness checks, validation_frequency's fits, the minimum of rounds),
 * and it takes longer on a slower CPU: on a 2-core AVX2 VM the default
 * plan (860 s of budgets) ran 952 s, 52 s past its 900 s limit. So before
 * each technique bench:all projects the run's end: the seconds spent so
 * far, plus the budgets still to run (remaining_s, this one's included)
 * stretched by how much longer than their budgets the techniques so far
 * took (spent_s / granted_s, granted_s their budgets; from 1 to 3). When
 * that passes limit_s, the overshoot comes off the budgets still to run in
 * proportion to their size: this technique gives up its share, at most
 * TB_BUDGET_MAX_CUT of budget_s (its rounds keep their minimum anyway, and
 * its rows say they stopped on the budget). Returns the seconds to take
 * off budget_s (>= 0; 0 when the run is on time or the technique declares
 * no budget). */
double tb_plan_budget_cut(double limit_s, double spent_s, double granted_s, double remaining_s,
                          double budget_s);

/* The time keeper's other half: the time the techniques so far left
 * unused goes to those still to run. A technique that stops on its target
 * leaves part of its budget; one that stops on its budget (its intervals
 * wider than the target) could have used more. So when the projection above
 * ends before target_s, this technique gets TB_BUDGET_GRANT_SHARE of its
 * share (budget_s / remaining_s) of the difference, at most
 * TB_BUDGET_MAX_GRANT times budget_s. The share keeps a margin, and a grant
 * left unused comes back to the techniques after it. Returns the seconds to
 * add to budget_s (>= 0; 0 when the run is not ahead of target_s or the
 * technique declares no budget). */
#define TB_BUDGET_GRANT_SHARE 0.5
#define TB_BUDGET_MAX_GRANT 1.0
double tb_plan_budget_grant(double target_s, double spent_s, double granted_s,
                            double remaining_s, double budget_s);

#endif
