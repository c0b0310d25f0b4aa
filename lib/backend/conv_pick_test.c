/*
 * conv_pick_test.c - the convolution algorithm choice on heuristic results
 * shaped like cuDNN's: the default takes the first usable one whatever its
 * determinism; a bitwise check gets the first deterministic usable one
 * (skipping e.g. CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, which adds with
 * atomics); none qualifying is -1. Also random lists against a direct
 * reading of the rule.
 *
 * Run: bazel test //lib/backend:conv_pick_test
 */
#include <stdlib.h>

#include "lib/backend/conv_pick.h"
#include "lib/core/testing.h"

/* The rule read directly: the first i with ok and (not wanted or det). */
static int ref_pick(const tb_conv_candidate *c, int n, int want)
{
    int i = 0;
    while (i < n && !(c[i].ok && (!want || c[i].deterministic)))
        i++;
    return i < n ? i : -1;
}

int main(void)
{
    /* cuDNN's order for a backward-filter problem: ALGO_0 (atomics) first. */
    const tb_conv_candidate bwd_filter[] = {{0, 1, 0}, {1, 1, 1}, {3, 1, 0}, {5, 1, 1}};
    CHECK(tb_conv_pick(bwd_filter, 4, 0) == 0, "default: the heuristic's first (ALGO_0)");
    CHECK(tb_conv_pick(bwd_filter, 4, 1) == 1, "deterministic: ALGO_1, skipping ALGO_0");

    /* The first says it cannot run: skipped either way. */
    const tb_conv_candidate fwd[] = {{6, 0, 1}, {1, 1, 1}, {0, 1, 1}};
    CHECK(tb_conv_pick(fwd, 3, 0) == 1 && tb_conv_pick(fwd, 3, 1) == 1,
          "an unusable first result is skipped");

    const tb_conv_candidate only_atomic[] = {{0, 1, 0}, {2, 0, 1}};
    CHECK(tb_conv_pick(only_atomic, 2, 1) == -1, "no deterministic usable algorithm: -1");
    CHECK(tb_conv_pick(only_atomic, 2, 0) == 0, "but the default still finds one");
    CHECK(tb_conv_pick(NULL, 0, 1) == -1 && tb_conv_pick(NULL, 0, 0) == -1, "empty list: -1");
    CHECK(!tb_conv_allowed(&bwd_filter[0], 1) && tb_conv_allowed(&bwd_filter[0], 0) &&
              !tb_conv_allowed(&fwd[0], 0),
          "an autotuner under determinism drops ALGO_0; nobody offers an unusable one");

    srand(20261124);
    int agree = 1;
    for (int t = 0; t < 2000; t++) {
        tb_conv_candidate c[8];
        int n = rand() % 9;
        for (int i = 0; i < n; i++)
            c[i] = (tb_conv_candidate){i, rand() % 3 != 0, rand() % 2};
        for (int want = 0; want < 2; want++)
            agree &= tb_conv_pick(c, n, want) == ref_pick(c, n, want);
    }
    CHECK(agree, "2000 random candidate lists: the pick follows the rule");
    return tb_test_exit(TB_OK);
}
