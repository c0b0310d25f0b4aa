/*
 * scaling_model_test.c - the alpha-beta formulas against values computed by
 * hand.  bazel test //lib/dist:scaling_model_test
 */
#include <math.h>
#include <stdio.h>

#include "lib/dist/scaling_model.h"

static int failures;

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-12 * fmax(1.0, fabs(want))) {
        printf("FAIL %s: got %.15g, want %.15g\n", what, got, want);
        failures++;
    }
}

int main(void)
{
    /* 100 MB over 10 GB/s links with 5 us latency. */
    double B = 100e6, a = 5e-6, b = 10e9;
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_RING, 1, B, a, b), 0, "ring n=1");
    /* n=2: 2*1*5us + 2*1/2 * 0.01 s = 10 us + 10 ms */
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_RING, 2, B, a, b), 0.01001, "ring n=2");
    /* n=8: 2*7*5us + 2*7/8*0.01 = 70 us + 17.5 ms */
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_RING, 8, B, a, b), 0.01757, "ring n=8");
    /* n=1024: 2*1023*5us + 2*1023/1024*0.01 = 10.23 ms + 19.98046875 ms */
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_RING, 1024, B, a, b), 0.03021046875, "ring n=1024");
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_TREE, 1, B, a, b), 0, "tree n=1");
    /* n=8: depth 3: 2*3*5us + 2*0.01 = 30 us + 20 ms */
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_TREE, 8, B, a, b), 0.02003, "tree n=8");
    /* n=1000: depth ceil(log2 1000) = 10: 100 us + 20 ms */
    near(tb_scaling_allreduce_s(TB_ALLREDUCE_TREE, 1000, B, a, b), 0.0201, "tree n=1000");
    /* Latency-bound: 4 KB, tree beats ring at 1024 devices. */
    double rs = tb_scaling_allreduce_s(TB_ALLREDUCE_RING, 1024, 4096, a, b);
    double ts = tb_scaling_allreduce_s(TB_ALLREDUCE_TREE, 1024, 4096, a, b);
    if (!(ts < rs)) {
        printf("FAIL small messages: tree %g should beat ring %g\n", ts, rs);
        failures++;
    }

    /* Efficiency: 50 ms compute, ring n=8 (17.57 ms). */
    tb_scaling_inputs in = {.compute_s = 0.05, .bytes = B, .alpha_s = a, .beta_bytes_s = b,
                            .overlap = 0, .backward_fraction = 0.6};
    tb_scaling_point p = tb_scaling_predict(&in, TB_ALLREDUCE_RING, 8);
    near(p.exposed_s, 0.01757, "no overlap: all exposed");
    near(p.step_s, 0.06757, "step");
    near(p.efficiency, 0.05 / 0.06757, "efficiency");
    in.overlap = 1; /* 30 ms of backward hides all 17.57 ms */
    p = tb_scaling_predict(&in, TB_ALLREDUCE_RING, 8);
    near(p.exposed_s, 0, "overlap hides it");
    near(p.efficiency, 1, "efficiency 1");
    in.compute_s = 0.02; /* 12 ms window: 5.57 ms exposed */
    p = tb_scaling_predict(&in, TB_ALLREDUCE_RING, 8);
    near(p.exposed_s, 0.01757 - 0.012, "partly exposed");
    near(p.efficiency, 0.02 / (0.02 + 0.00557), "partial efficiency");
    p = tb_scaling_predict(&in, TB_ALLREDUCE_TREE, 1);
    near(p.efficiency, 1, "one device");
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
