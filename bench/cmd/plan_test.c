/*
 * plan_test.c - the time budgets' arithmetic of bench:all (plan.h): a
 * --describe line's budget_seconds read back (and a line without them, or
 * with a negative one, or names that are no file names, refused), the budgets of a plan added up per
 * profile, techniques that declare none counted apart, and a plan held to
 * its profile's limit: exactly at the limit passes, one second over does
 * not. The limits themselves are pinned, since results/README.md quotes
 * them.
 *
 * Run: bazel test //bench:plan_test
 */
#include "bench/cmd/plan.h"

#include <math.h>
#include <string.h>

#include "lib/core/testing.h"

/* A --describe line as tb_technique_describe writes it. */
static const char *line(char *buf, size_t cap, const char *name, double bd, double bf,
                        double bt)
{
    snprintf(buf, cap,
             "{\"name\":\"%s\",\"results\":\"%s\",\"what\":null,\"est_seconds\":[10,60,5,20],"
             "\"budget_seconds\":[%g,%g,%g,30],\"order\":3,\"after\":[\"ceilings\"],"
             "\"tiny\":{\"min_rows\":1,\"plots\":\"\",\"na_note\":null,\"gbench\":true}}\n",
             name, name, bd, bf, bt);
    return buf;
}

static void test_parse(void)
{
    char buf[1024];
    tb_plan_entry e;
    printf("a --describe line's budgets are read back\n");
    CHECK_OK(tb_plan_parse_entry("gelu", line(buf, sizeof buf, "gelu", 40, 600, 8), &e));
    CHECK(!strcmp(e.name, "gelu") && e.order == 3 && !strcmp(e.after[0], "ceilings"),
          "name, order, after");
    CHECK(e.budget_seconds[0] == 40 && e.budget_seconds[1] == 600 && e.budget_seconds[2] == 8,
          "budget_seconds = [40, 600, 8]");
    CHECK(e.budget_seconds[TB_PROFILE_GPU] == 30, "the gpu profile's budget read back");
    CHECK(e.est_seconds[1] == 60, "est_seconds kept apart from the budget");

    printf("a line without budget_seconds, or with a negative one, is refused\n");
    tb_error_clear();
    CHECK(tb_plan_parse_entry("old", "{\"name\":\"old\",\"est_seconds\":[1,2,3,4],\"order\":0,"
                                     "\"after\":[]}", &e) == TB_ERR_DATA &&
              strstr(tb_error_message(), "budget_seconds"),
          "stale binary: %s", tb_error_message());
    tb_error_clear();
    CHECK(tb_plan_parse_entry("neg", line(buf, sizeof buf, "neg", -1, 0, 0), &e) == TB_ERR_DATA,
          "negative budget refused");
    tb_error_clear();
    /* a binary from before the gpu profile: 3 budgets, its gpu one unknown */
    CHECK(tb_plan_parse_entry("three", "{\"name\":\"three\",\"est_seconds\":[1,2,3,4],"
                                       "\"budget_seconds\":[1,2,3],\"order\":0,\"after\":[]}",
                              &e) == TB_ERR_DATA,
          "budgets for 3 profiles of 4 refused");
    tb_error_clear();
    /* a foreign or stale binary's "after" that is no list of names: refused, not a crash */
    static const char *const afters[] = {"\"x\"", "{\"a\":1}", "[1]", "[\"ok\",null]"};
    for (size_t i = 0; i < sizeof afters / sizeof afters[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"name\":\"odd\",\"est_seconds\":[1,2,3,4],"
                 "\"budget_seconds\":[1,2,3,4],\"order\":0,\"after\":%s}", afters[i]);
        CHECK(tb_plan_parse_entry("odd", text, &e) == TB_ERR_DATA, "after %s refused",
              afters[i]);
        tb_error_clear();
    }
    /* names become file names (results/<device>/<results>.csv, <bin_dir>/<name>): an empty,
     * too long or path-like one is refused (the fuzzer's crash: an empty name was read) */
    static const char *const names[] = {
        "\"name\":\"\"", "\"name\":\"../x\"", "\"name\":\".hidden\"",
        "\"name\":\"ok\",\"results\":\"a/b\"", "\"name\":\"ok\",\"results\":\"\"",
        "\"name\":\"0123456789012345678901234567890123456789012345678901234567890123\""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "{%s,\"est_seconds\":[1,2,3,4],"
                 "\"budget_seconds\":[1,2,3,4],\"order\":0,\"after\":[]}", names[i]);
        CHECK(tb_plan_parse_entry("odd", text, &e) == TB_ERR_DATA &&
                  strstr(tb_error_message(), "name"),
              "%s refused: %s", names[i], tb_error_message());
        tb_error_clear();
    }
    CHECK(tb_plan_parse_entry("odd", "{\"name\":\"ok\",\"est_seconds\":[1,2,3,4],"
                                     "\"budget_seconds\":[1,2,3,4],\"order\":0,"
                                     "\"after\":[\"\"]}", &e) == TB_ERR_DATA,
          "an empty after name refused");
    tb_error_clear();
}

static void test_limits(void)
{
    printf("profile limits: default 15 min, full 4 h, tiny 10 min, gpu 10 min\n");
    CHECK(tb_plan_profile_limit(TB_PROFILE_DEFAULT) == 900, "default: 900 s");
    CHECK(tb_plan_profile_limit(TB_PROFILE_FULL) == 14400, "full: 14400 s");
    CHECK(tb_plan_profile_limit(TB_PROFILE_TINY) == 600, "tiny: 600 s");
    CHECK(tb_plan_profile_limit(TB_PROFILE_GPU) == 600, "gpu: 600 s");
    CHECK(tb_profile_sizes(TB_PROFILE_GPU) == TB_PROFILE_FULL &&
              tb_profile_sizes(TB_PROFILE_TINY) == TB_PROFILE_TINY,
          "the gpu profile is sized as full");
}

static tb_plan_entry entry(const char *name, double bd, double bf, double bt)
{
    tb_plan_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", name);
    e.budget_seconds[0] = bd;
    e.budget_seconds[1] = bf;
    e.budget_seconds[2] = bt;
    e.est_seconds[0] = bd + 5; /* set-up beyond the timed rounds */
    return e;
}

static void test_sum(void)
{
    tb_plan_entry e[4] = {entry("ceilings", 0, 0, 0), entry("a", 400, 5000, 100),
                          entry("b", 300, 9400, 100), entry("c", 200, 0, 400)};
    const tb_plan_entry *all[4] = {&e[0], &e[1], &e[2], &e[3]};
    tb_plan_budget b;

    printf("budgets add up per profile; none declared is counted apart\n");
    tb_plan_budget_sum(all, 4, TB_PROFILE_DEFAULT, &b);
    CHECK(b.n == 4 && b.total_s == 900 && b.undeclared == 1, "default: 900 s over 3 of 4 "
          "(got %g, %d undeclared)", b.total_s, b.undeclared);
    CHECK(b.limit_s == 900 && !b.over, "exactly at the limit is not over");
    CHECK(b.est_s == 5 + 405 + 305 + 205, "estimates summed apart (%g)", b.est_s);

    tb_plan_budget_sum(all, 4, TB_PROFILE_FULL, &b);
    CHECK(b.total_s == 14400 && b.undeclared == 2 && !b.over, "full: 14400 s, 2 undeclared");

    tb_plan_budget_sum(all, 4, TB_PROFILE_TINY, &b);
    CHECK(b.total_s == 600 && !b.over, "tiny: 600 s");

    printf("one second over the limit is over\n");
    e[3].budget_seconds[0] = 201;
    tb_plan_budget_sum(all, 4, TB_PROFILE_DEFAULT, &b);
    CHECK(b.total_s == 901 && b.over, "901 s > 900 s");

    printf("a subset (--only) counts only what it runs\n");
    tb_plan_budget_sum(all + 1, 2, TB_PROFILE_DEFAULT, &b);
    CHECK(b.n == 2 && b.total_s == 700 && !b.over && b.undeclared == 0, "a + b: 700 s");
}

/* The time keeper's arithmetic on known numbers. */
static void test_budget_cut(void)
{
    /* 100 s spent on 100 s of budgets, 700 s to run: 800 s, on time. */
    CHECK(tb_plan_budget_cut(900, 100, 100, 700, 70) == 0, "on time: no cut");
    CHECK(tb_plan_budget_cut(900, 200, 200, 700, 70) == 0, "exactly at the limit: no cut");
    /* On budget so far (300 of 300) and 1000 s projected: 100 s over, a
     * 70 s budget is 10% of what is left, so it gives up 10 s. */
    double c = tb_plan_budget_cut(900, 300, 300, 700, 70);
    CHECK(fabs(c - 10) < 1e-9, "100 s over, 10%% of the rest: cut 10 s (%g)", c);
    /* 200 s of budgets took 300 s: the 600 s still to run will take ~900,
     * ending at 1200: 300 s over, 200 s of budget (300 / 1.5) to take off,
     * 60 s's share of it is 20 s. */
    c = tb_plan_budget_cut(900, 300, 200, 600, 60);
    CHECK(fabs(c - 20) < 1e-9, "stretched 1.5x: cut 20 s (%g)", c);
    /* Far behind: at most TB_BUDGET_MAX_CUT of the budget. */
    c = tb_plan_budget_cut(900, 880, 800, 100, 40);
    CHECK(fabs(c - TB_BUDGET_MAX_CUT * 40) < 1e-9, "capped at %g of the budget (%g)",
          TB_BUDGET_MAX_CUT, c);
    /* The cuts of the remaining techniques, taken in turn with each running
     * exactly its cut budget, bring the run back to its limit. */
    double budgets[4] = {100, 50, 30, 20}, spent = 950, granted = 950, rest = 200;
    for (int i = 0; i < 4; i++) {
        double cut = tb_plan_budget_cut(1100, spent, granted, rest, budgets[i]);
        spent += budgets[i] - cut;
        granted += budgets[i];
        rest -= budgets[i];
    }
    CHECK(fabs(spent - 1100) < 1e-9, "50 s over with 200 s to run: ends at the limit (%g)",
          spent);
    CHECK(tb_plan_budget_cut(900, 950, 900, 100, 0) == 0, "no declared budget: nothing to cut");
    CHECK(tb_plan_budget_cut(0, 950, 900, 100, 10) == 0, "no limit: no cut");
}

/* The keeper's grants on known numbers. */
static void test_budget_grant(void)
{
    /* 300 s spent on 400 s of budgets, 400 s to run: 700 s projected, 140 s
     * before a 840 s target; a 40 s budget is 10% of what is left: half of
     * its 14 s share, 7 s. */
    double g = tb_plan_budget_grant(840, 300, 400, 400, 40);
    CHECK(fabs(g - 7) < 1e-9, "140 s ahead, 10%% of the rest: grant 7 s (%g)", g);
    CHECK(tb_plan_budget_grant(840, 440, 400, 400, 40) == 0, "on or behind the target: none");
    CHECK(tb_plan_budget_grant(840, 300, 400, 400, 0) == 0, "no declared budget: none");
    CHECK(tb_plan_budget_grant(0, 300, 400, 400, 40) == 0, "no target: none");
    /* Far ahead: at most TB_BUDGET_MAX_GRANT of the budget. */
    g = tb_plan_budget_grant(840, 10, 400, 50, 40);
    CHECK(fabs(g - TB_BUDGET_MAX_GRANT * 40) < 1e-9, "capped at %g of the budget (%g)",
          TB_BUDGET_MAX_GRANT, g);
    /* Granted in turn, each technique using all it is given: the run ends
     * before the target, and the grants shrink the slack without passing
     * it. Each using none of its grant: the slack grows for the next. */
    for (int uses = 1; uses >= 0; uses--) {
        double budgets[4] = {100, 50, 30, 20}, spent = 500, granted = 600, rest = 200, sum = 0;
        for (int i = 0; i < 4; i++) {
            double gi = tb_plan_budget_grant(840, spent, granted, rest, budgets[i]);
            CHECK(gi >= 0 && gi <= TB_BUDGET_MAX_GRANT * budgets[i], "grant %d: %g", i, gi);
            sum += gi;
            spent += budgets[i] + (uses ? gi : 0);
            granted += budgets[i] + gi;
            rest -= budgets[i];
        }
        CHECK(spent <= 840 + 1e-9 && sum > 0, "%s: ends at %g s of the 840 s target, %g s "
              "granted", uses ? "grants used" : "grants unused", spent, sum);
    }
}

int main(void)
{
    tb_test_verbose = 1;
    test_parse();
    test_limits();
    test_sum();
    test_budget_cut();
    test_budget_grant();
    return tb_test_exit(TB_OK);
}
