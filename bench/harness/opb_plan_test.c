/* opb_plan_test.c - the pairing logic of op-level sweeps (opb_plan.h):
 * which arms a sweep's cases give, which comparisons, the A/A copies made
 * for baselines without one, and the declarations refused. No timing. */
#include "bench/harness/opb_plan.h"

#include <string.h>

#include "lib/core/testing.h"

/* gelu's shape at one size: a copy (compared with nothing), a forward
 * baseline with its own A/A copy and a variant, a backward baseline with a
 * variant and no A/A copy (the plan must make one). */
static void test_arms(void)
{
    const opb_plan_case cases[] = {
        {"copy/1024", 0, 0},
        {"fwd_unfused/1024", 1, 0},
        {"fwd_unfused_again/1024", 1, 1},
        {"fwd_fused/1024", 1, 0},
        {"bwd_unfused/1024", 4, 0},
        {"bwd_fused/1024", 4, 0},
    };
    opb_plan p;
    CHECK_OK(opb_plan_build(cases, 6, &p));
    CHECK(p.n_arms == 7, "6 cases + 1 A/A arm made for bwd_unfused: %d arms", p.n_arms);
    for (int i = 0; i < 6; i++) {
        CHECK(p.arm_of_case[i] == i && p.case_of_arm[i] == (size_t)i, "case %d is arm %d", i, i);
        CHECK(!strcmp(p.arms[i].name, cases[i].name), "arm %d named %s", i, p.arms[i].name);
    }
    CHECK(p.arms[0].base == 0 && !p.arms[0].aa, "copy: its own base, no comparison");
    CHECK(p.arms[3].base == 1 && !p.arms[3].aa, "fwd_fused compared with fwd_unfused");
    CHECK(p.arms[2].base == 1 && p.arms[2].aa, "fwd_unfused_again: the registered A/A copy");
    CHECK(p.arms[5].base == 4 && !p.arms[5].aa, "bwd_fused compared with bwd_unfused");
    CHECK(!strcmp(p.arms[6].name, "bwd_unfused_again/1024"), "made A/A arm named %s",
          p.arms[6].name);
    CHECK(p.arms[6].base == 4 && p.arms[6].aa && p.case_of_arm[6] == 4,
          "made A/A arm runs bwd_unfused's case");
    CHECK(opb_plan_aa_arm(&p, 1) == 2, "fwd A/A: the registered copy");
    CHECK(opb_plan_aa_arm(&p, 4) == 6, "bwd A/A: the made copy");
    CHECK(opb_plan_aa_arm(&p, 0) == -1, "copy: no A/A (nothing compared with it)");
    CHECK(opb_plan_find(&p, "fwd_unf") == -1, "part of a name is no match");
    CHECK(opb_plan_find(&p, "fwd_unfused/1024") == 1, "prefix lookup finds the base, "
          "not its _again copy");
    CHECK(opb_plan_find(&p, "bwd_unfused_again/1024") == 6, "the made copy by name");
    for (int i = 0; i < p.n_arms; i++) {
        int b = p.arms[i].base;
        CHECK(b >= 0 && b < p.n_arms && p.arms[b].base == b,
              "arm %d's base %d is a baseline (rounds.h's REQUIRES)", i, b);
    }
    opb_plan_free(&p);
}

/* Which arms a row reads: a variant's declared comparison and its base's
 * A/A arm (registered or made); undeclared pairs refused. */
static void test_pairs(void)
{
    const opb_plan_case cases[] = {
        {"fwd_unfused/1", 0, 0}, {"fwd_unfused_again/1", 0, 1}, {"fwd_fused/1", 0, 0},
        {"bwd_unfused/1", 3, 0}, {"bwd_fused/1", 3, 0},
    };
    opb_plan p;
    CHECK_OK(opb_plan_build(cases, 5, &p));
    int aa = -2;
    CHECK_OK(opb_plan_pair(&p, 2, 0, 1, &aa));
    CHECK(aa == 1, "fwd_fused vs fwd_unfused reads the registered A/A arm: %d", aa);
    aa = -2;
    CHECK_OK(opb_plan_pair(&p, 2, 0, -1, &aa));
    CHECK(aa == 1, "without again, the plan's A/A arm of fwd_unfused: %d", aa);
    aa = -2;
    CHECK_OK(opb_plan_pair(&p, 4, 3, -1, &aa));
    CHECK(aa == 5 && !strcmp(p.names[5], "bwd_unfused_again/1"),
          "bwd_fused reads the A/A arm made for bwd_unfused: %d", aa);
    aa = -2;
    CHECK_OK(opb_plan_pair(&p, -1, 3, -1, &aa));
    CHECK(aa == 5, "the baseline row bwd_unfused reads its made A/A arm");
    CHECK(opb_plan_pair(&p, 4, 0, -1, &aa) == TB_ERR_INVALID,
          "bwd_fused vs fwd_unfused was never declared: refused");
    tb_error_clear();
    CHECK(opb_plan_pair(&p, 1, 0, -1, &aa) == TB_ERR_INVALID,
          "an A/A copy read as a variant: refused");
    tb_error_clear();
    CHECK(opb_plan_pair(&p, 2, 0, 2, &aa) == TB_ERR_INVALID,
          "a variant passed as the A/A copy: refused");
    tb_error_clear();
    CHECK(opb_plan_pair(&p, 2, 0, 5, &aa) == TB_ERR_INVALID,
          "another baseline's A/A copy: refused");
    tb_error_clear();
    opb_plan_free(&p);
}

static void test_refused(void)
{
    opb_plan p;
    const opb_plan_case chain[] = {{"a/1", 0, 0}, {"b/1", 0, 0}, {"c/1", 1, 0}};
    CHECK(opb_plan_build(chain, 3, &p) == TB_ERR_INVALID,
          "a comparison with a variant (not a baseline) is refused");
    tb_error_clear();
    const opb_plan_case two_aa[] = {{"a/1", 0, 0}, {"a_again/1", 0, 1}, {"a_twice/1", 0, 1}};
    CHECK(opb_plan_build(two_aa, 3, &p) == TB_ERR_INVALID, "two A/A copies are refused");
    tb_error_clear();
    const opb_plan_case self_aa[] = {{"a/1", 0, 1}};
    CHECK(opb_plan_build(self_aa, 1, &p) == TB_ERR_INVALID, "an A/A copy of itself is refused");
    tb_error_clear();
    const opb_plan_case out[] = {{"a/1", 3, 0}};
    CHECK(opb_plan_build(out, 1, &p) == TB_ERR_INVALID, "a base out of range is refused");
    tb_error_clear();
}

/* Rates only (ceilings): every case its own baseline, no A/A arms made. */
static void test_no_comparisons(void)
{
    const opb_plan_case cases[] = {{"triad/1", 0, 0}, {"gemm/1", 1, 0}};
    opb_plan p;
    CHECK_OK(opb_plan_build(cases, 2, &p));
    CHECK(p.n_arms == 2, "no A/A arms without comparisons");
    CHECK(p.arms[0].base == 0 && p.arms[1].base == 1, "both baselines");
    opb_plan_free(&p);
    CHECK_OK(opb_plan_build(NULL, 0, &p));
    CHECK(p.n_arms == 0, "an empty sweep plans no arm");
    opb_plan_free(&p);
}

int main(void)
{
    tb_test_verbose = 1;
    test_arms();
    test_pairs();
    test_refused();
    test_no_comparisons();
    return tb_test_exit(TB_OK);
}
