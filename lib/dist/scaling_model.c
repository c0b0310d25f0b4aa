/* scaling_model.c - the alpha-beta model; formulas and sources in scaling_model.h. */
#include "lib/dist/scaling_model.h"

#include <math.h>

double tb_scaling_allreduce_s(tb_allreduce_algo algo, int n, double bytes, double alpha_s,
                           double beta_bytes_s)
{
    if (n <= 1)
        return 0;
    if (algo == TB_ALLREDUCE_TREE) {
        double depth = ceil(log2((double)n));
        return 2.0 * depth * alpha_s + 2.0 * bytes / beta_bytes_s;
    }
    return 2.0 * (n - 1) * alpha_s + 2.0 * (double)(n - 1) / n * bytes / beta_bytes_s;
}

tb_scaling_point tb_scaling_predict(const tb_scaling_inputs *in, tb_allreduce_algo algo, int n)
{
    tb_scaling_point p = {.n = n};
    p.allreduce_s = tb_scaling_allreduce_s(algo, n, in->bytes, in->alpha_s, in->beta_bytes_s);
    p.exposed_s = p.allreduce_s;
    if (in->overlap)
        p.exposed_s = fmax(0.0, p.allreduce_s - in->backward_fraction * in->compute_s);
    p.step_s = in->compute_s + p.exposed_s;
    p.efficiency = p.step_s > 0 ? in->compute_s / p.step_s : NAN;
    return p;
}

const char *tb_scaling_algo_name(tb_allreduce_algo algo)
{
    return algo == TB_ALLREDUCE_TREE ? "tree" : "ring";
}
