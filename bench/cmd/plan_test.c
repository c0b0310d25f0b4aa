/*
 * plan_test.c - the time budgets' arithmetic of bench:all (plan.h): a
 * --describe line's budget_seconds read back (and a line without them, or
 * with a negative one, refused), the budgets of a plan added up per
 * profile, techniques that declare none counted apart, and a plan held to
 * its profile's limit: exactly at the limit passes, one second over does
 * not. The limits themselves are pinned, since results/README.md quotes
 * them.
 *
 * Run: bazel test //bench:plan_test
 */
#include "bench/cmd/plan.h"

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

int main(void)
{
    tb_test_verbose = 1;
    test_parse();
    test_limits();
    test_sum();
    return tb_test_exit(TB_OK);
}
