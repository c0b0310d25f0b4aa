/*
 * opb_plan.h - which arms an op-level sweep's rounds run, and which
 * comparisons they give (bench/harness/opbench.c's pairing logic, apart
 * from timing so that it can be tested without a clock).
 *
 * A sweep registers cases (opbench.h: opb_register) and says which case is
 * compared with which (opb_compare). The plan turns that into the arms of
 * one interleaved experiment (bench/harness/rounds.h): one arm per case,
 * in registration order, each variant's `base` the arm of its base case;
 * plus, for every base case that has variants but no A/A copy of its own,
 * an A/A arm that runs the base case again under the name
 * "<name>_again/<rest>" (the noise check the issue asks of every compared
 * row). A case nothing is compared with, and that is compared with
 * nothing (a ceiling, a copy), is an arm of its own: interleaved with the
 * others, timed with the same minimum repetition time, with no comparison.
 *
 * Test: bazel test //bench/harness:opb_plan_test
 */
#ifndef TB_BENCH_OPB_PLAN_H
#define TB_BENCH_OPB_PLAN_H

#include <stddef.h>

#include "bench/harness/rounds.h"

/* What the plan needs of a case: its name ("gelu_fwd_fused/1024", without
 * the trailing '/'), the case it is compared with (its own index: none)
 * and whether it is that case's A/A copy. */
typedef struct opb_plan_case {
    const char *name;
    size_t base;
    int aa;
} opb_plan_case;

typedef struct opb_plan {
    tb_arm *arms;              /* (n_arms); run, prepare and user left to the caller */
    int n_arms;
    size_t *case_of_arm;       /* (n_arms): the case an arm runs */
    int *arm_of_case;          /* (n_cases): the arm that times a case */
    char **names;              /* (n_arms): arms[i].name points here */
    size_t n_cases;
} opb_plan;

/* Builds the arms. Errors (TB_ERR_INVALID): a base index out of range; a
 * case compared with a case that is itself compared with another (a
 * comparison's base must be a baseline); two A/A copies of one baseline; an
 * A/A copy that names itself. */
int opb_plan_build(const opb_plan_case *cases, size_t n_cases, opb_plan *plan);
void opb_plan_free(opb_plan *plan);

/* The A/A arm of baseline arm `base_arm`, or -1 when it has none (a
 * baseline nothing is compared with). */
int opb_plan_aa_arm(const opb_plan *plan, int base_arm);

/* The arm whose name is `name` followed by '/' or the end, or -1. */
int opb_plan_find(const opb_plan *plan, const char *name);

/* Which arms a row reads (opbench.c's fillers): *aa_arm gets the A/A arm
 * of baseline arm `base` (the arm `again` when again >= 0, else the one
 * the plan has, -1 when it has none). When var >= 0 the row is var's
 * comparison with base, which must have been declared (var's base is base
 * and var is no A/A copy). TB_ERR_INVALID: an undeclared comparison, or
 * `again` not declared the A/A copy of base. */
int opb_plan_pair(const opb_plan *plan, int var, int base, int again, int *aa_arm);

#endif
