/*
 * nn_testing.h - what the tests of lib/nn and lib/train share: the main of
 * a test that runs its checks on the CPU backend (open the backend, print
 * what the test checks, run the checks, close the backend and report with
 * lib/core/testing.h's counters), and the float64 references more than one
 * of them checks layers against. Header only, for tests (//lib/nn:testing
 * is testonly).
 *
 *   static int run(tb_backend *be, void *arg) { ... CHECK(...) ... }
 *   int main(void) { return tb_test_main_cpu(2, "x_test: what it checks", run, NULL); }
 */
#ifndef TB_NN_TESTING_H
#define TB_NN_TESTING_H

#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/core/testing.h"

/* The checks: TB_OK, or the status that stopped them. */
typedef int (*tb_test_body)(tb_backend *be, void *arg);

/* threads: the CPU backend's (0 = all cores). Checks print as a checklist
 * (tb_test_verbose). Returns main's exit status (tb_test_exit). */
__attribute__((unused))
static int tb_test_main_cpu(int threads, const char *banner, tb_test_body body, void *arg)
{
    tb_backend *be;
    tb_test_verbose = 1;
    int rc = tb_backend_cpu_create(threads, &be);
    if (rc != TB_OK)
        return tb_test_exit(rc);
    if (banner)
        printf("%s\n", banner);
    rc = body(be, arg);
    tb_backend_close(be);
    return tb_test_exit(rc);
}

/* The linear layer in float64: y (rows, out_f) = x (rows, in_f) W^T + b,
 * W (out_f, in_f) row-major. */
__attribute__((unused))
static void tb_linear_ref_f64(int rows, int in_f, int out_f, const double *x, const double *w,
                              const double *b, double *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_f; o++) {
            double s = b[o];
            for (int i = 0; i < in_f; i++)
                s += x[(size_t)r * in_f + i] * w[(size_t)o * in_f + i];
            y[(size_t)r * out_f + o] = s;
        }
}

#endif
