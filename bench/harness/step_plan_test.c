/*
 * step_plan_test.c - the arms of a step technique's experiment: one per
 * timed setting, each compared with its baseline's arm, one A/A arm per
 * timed baseline; n/a settings get none, nor do settings whose baseline is
 * not timed; bad bases are refused; which groups of arms are rebuilt every
 * round from the check pass's peaks.
 * Run: bazel test //bench/harness:step_plan_test
 */
#include "bench/harness/step_plan.h"
#include "lib/core/testing.h"

#include <stdio.h>

/* Two baselines (0 and 2), each with a compared setting; setting 3 is n/a. */
static void test_two_groups(void)
{
    printf("two baselines, one n/a setting\n");
    const int base[] = {0, 0, 2, 2, 2};
    const int timed[] = {1, 1, 1, 0, 1};
    tb_step_plan p;
    CHECK_OK(tb_step_plan_make(base, timed, 5, &p));
    /* arms: base 0, base 2, set 1, set 4, A/A of 0, A/A of 2 */
    CHECK(p.n_arms == 6, "6 arms, got %d", p.n_arms);
    CHECK(p.set_arm[3] == -1, "the n/a setting has no arm");
    CHECK(p.aa_arm[1] == -1 && p.aa_arm[4] == -1, "compared settings have no A/A arm");
    for (int i = 0; i < 5; i++) {
        if (p.set_arm[i] < 0)
            continue;
        int a = p.set_arm[i];
        CHECK(p.arm_setting[a] == i, "arm %d times setting %d", a, i);
        CHECK(p.arm_aa[a] == 0, "arm %d is no A/A arm", a);
        CHECK(p.arm_base[a] == p.set_arm[base[i]], "setting %d's arm is compared with its "
              "baseline's arm", i);
    }
    for (int b = 0; b < 5; b += 2) {
        if (base[b] != b)
            continue;
        int a = p.aa_arm[b];
        CHECK(a >= 0 && p.arm_aa[a] == 1 && p.arm_setting[a] == b &&
                  p.arm_base[a] == p.set_arm[b] && a != p.set_arm[b],
              "baseline %d has its own A/A arm, compared with it", b);
    }
    for (int a = 0; a < p.n_arms; a++) {
        int bb = p.arm_base[a];
        CHECK(p.arm_base[bb] == bb, "arm %d's base %d is a baseline arm", a, bb);
    }
    /* keep alive or rebuild: the arms time settings 0, 2, 1, 4, 0, 2, so
     * baseline 0's group (arms 0, 2, 4) peaks at 10 + 20 + 10 = 40 and
     * baseline 2's (arms 1, 3, 5) at 30 + 40 + 30 = 100 */
    const double peak[] = {10, 20, 30, 1000, 40};
    int alone[6];
    CHECK(tb_step_plan_alone(&p, peak, 0, alone) == 0, "no limit: all alive");
    CHECK(tb_step_plan_alone(&p, peak, 140, alone) == 0, "140 fits under 140: all alive");
    /* 139: the larger group goes; 40 alive + its largest arm, 40, fit */
    CHECK(tb_step_plan_alone(&p, peak, 139, alone) == 3, "139: one group rebuilt");
    CHECK(!alone[0] && alone[1] && !alone[2] && alone[3] && !alone[4] && alone[5],
          "139: baseline 2's group rebuilt, baseline 0's alive");
    CHECK(tb_step_plan_alone(&p, peak, 80, alone) == 3, "80: 40 alive + 40 rebuilt fit");
    /* 79: both groups go, one arm at a time */
    CHECK(tb_step_plan_alone(&p, peak, 79, alone) == 6, "79: every arm rebuilt");
    CHECK(tb_step_plan_alone(&p, peak, 10, alone) == 6, "10: every arm rebuilt (none fits: "
          "the checks say so)");

    /* parking: settings keep 2, 4, 6, -, 8 bytes parked (group 0's arms
     * 2 + 4 + 2, group 2's 6 + 8 + 6) */
    const double kept[] = {2, 4, 6, 0, 8};
    const double unknown[] = {2, 4, 0, 0, 8};
    const int no_graphs[] = {0, 0, 0, 0, 0}, graph0[] = {0, 1, 0, 0, 0};
    int mode[6];
    CHECK(tb_step_plan_park(&p, peak, kept, no_graphs, 140, mode) == 0, "140: all alive");
    /* 100: group 2 parks: 40 alive + 20 kept + its largest activations 32 = 92 */
    CHECK(tb_step_plan_park(&p, peak, kept, no_graphs, 100, mode) == 3, "100: one group parked");
    CHECK(mode[0] == TB_ARM_ALIVE && mode[1] == TB_ARM_PARKED && mode[2] == TB_ARM_ALIVE &&
              mode[3] == TB_ARM_PARKED && mode[4] == TB_ARM_ALIVE && mode[5] == TB_ARM_PARKED,
          "100: baseline 2's group parked, baseline 0's alive");
    /* 70: 92 does not fit; all parked: 28 kept + 32 = 60 do */
    CHECK(tb_step_plan_park(&p, peak, kept, no_graphs, 70, mode) == 6, "70: every arm parked");
    for (int a = 0; a < 6; a++)
        CHECK(mode[a] == TB_ARM_PARKED, "70: arm %d parked", a);
    /* 59: nothing parked fits: rebuilt as tb_step_plan_alone says */
    CHECK(tb_step_plan_park(&p, peak, kept, no_graphs, 59, mode) == 6, "59: every arm rebuilt");
    CHECK(mode[0] == TB_ARM_REBUILT && mode[5] == TB_ARM_REBUILT, "59: rebuilt, not parked");
    /* a graph in the group left alive: every group parks */
    CHECK(tb_step_plan_park(&p, peak, kept, graph0, 100, mode) == 6, "100, graphs alive: all park");
    CHECK(mode[0] == TB_ARM_PARKED && mode[2] == TB_ARM_PARKED, "100, graphs: group 0 parked too");
    /* a parked arm's kept bytes unknown: rebuilt */
    CHECK(tb_step_plan_park(&p, peak, unknown, no_graphs, 100, mode) == 3, "unknown: 3 away");
    CHECK(mode[1] == TB_ARM_REBUILT && mode[0] == TB_ARM_ALIVE, "unknown kept bytes: rebuilt");
    CHECK(tb_step_plan_park(&p, peak, kept, NULL, 0, mode) == 0, "no limit: all alive");
    tb_step_plan_free(&p);
}

/* A baseline that ran out of memory in the check takes its settings along. */
static void test_untimed_baseline(void)
{
    printf("a baseline that is not timed\n");
    const int base[] = {0, 0, 0};
    const int timed[] = {0, 1, 1};
    tb_step_plan p;
    CHECK_OK(tb_step_plan_make(base, timed, 3, &p));
    CHECK(p.n_arms == 0, "no arm at all, got %d", p.n_arms);
    CHECK(p.set_arm[1] == -1 && p.set_arm[2] == -1, "its settings are not compared");
    tb_step_plan_free(&p);
}

/* Only a baseline (a device toggle on the CPU): it and its A/A copy. */
static void test_baseline_only(void)
{
    printf("a baseline alone\n");
    const int base[] = {0, 0};
    const int timed[] = {1, 0};
    tb_step_plan p;
    CHECK_OK(tb_step_plan_make(base, timed, 2, &p));
    CHECK(p.n_arms == 2 && p.arm_aa[1] == 1 && p.arm_base[1] == 0 && p.arm_base[0] == 0,
          "the baseline and its A/A arm");
    tb_step_plan_free(&p);
}

static void test_refused(void)
{
    printf("bad bases\n");
    const int chain[] = {0, 0, 1};  /* 2's base is not a baseline */
    const int out_of_range[] = {0, 5};
    const int timed[] = {1, 1, 1};
    tb_step_plan p;
    CHECK(tb_step_plan_make(chain, timed, 3, &p) == TB_ERR_INVALID, "a base that is no baseline");
    tb_error_clear();
    CHECK(tb_step_plan_make(out_of_range, timed, 2, &p) == TB_ERR_INVALID, "a base out of range");
    tb_error_clear();
    CHECK(tb_step_plan_make(chain, timed, 0, &p) == TB_ERR_INVALID, "no settings");
    tb_error_clear();
}

int main(void)
{
    test_two_groups();
    test_untimed_baseline();
    test_baseline_only();
    test_refused();
    return tb_test_exit(TB_OK);
}
