/*
 * loss_scaler_test.c - the dynamic loss scaler's skip-and-adjust rule
 * (lib/nn/loss_scaler.h) on injected gradients: Inf and NaN skip the step and
 * halve the scale; 2000 finite steps in a row double it; a bad step in the
 * middle restarts the count; defaults are GradScaler's.
 *
 * Run: bazel test //lib/nn:loss_scaler_test
 */
#include <math.h>
#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/nn/loss_scaler.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

#define N 1000

static int step(tb_loss_scaler *s, tb_backend *be, float *dev, float *host, float bad)
{
    for (int i = 0; i < N; i++)
        host[i] = 0.001f * (float)(i + 1);
    if (bad != 0.0f)
        host[N / 2] = bad;
    int skip = -1;
    if (be->copy_h2d(be, dev, host, sizeof(float) * N, NULL) != TB_OK ||
        tb_loss_scaler_update(s, dev, N, &skip) != TB_OK) {
        tb_error_print(stdout);
        return -1;
    }
    return skip;
}

int main(void)
{
    tb_backend *be;
    if (tb_backend_cpu_create(1, &be) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    float host[N], *dev;
    tb_loss_scaler s;
    if (be->dev_alloc(be, (void **)&dev, sizeof host) != TB_OK ||
        tb_loss_scaler_init(&s, be) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    CHECK(s.scale == 65536.0f && s.growth_factor == 2.0f && s.backoff_factor == 0.5f &&
          s.growth_interval == 2000, "GradScaler's defaults");

    CHECK(step(&s, be, dev, host, 0.0f) == 0, "finite gradients: step taken");
    CHECK(s.scale == 65536.0f && s.good_steps == 1, "no change after one good step");
    CHECK(step(&s, be, dev, host, INFINITY) == 1, "Inf: step skipped");
    CHECK(s.scale == 32768.0f && s.skipped_steps == 1 && s.good_steps == 0,
          "Inf: scale halved to %g, skipped %ld", (double)s.scale, s.skipped_steps);
    CHECK(step(&s, be, dev, host, NAN) == 1, "NaN: step skipped");
    CHECK(step(&s, be, dev, host, -INFINITY) == 1, "-Inf: step skipped");
    CHECK(s.scale == 8192.0f && s.skipped_steps == 3, "two more halvings: %g", (double)s.scale);

    /* 1999 good steps: no growth; one bad one restarts the count */
    for (int i = 0; i < 1999; i++)
        CHECK(step(&s, be, dev, host, 0.0f) == 0 || i > 5, "good step %d", i);
    CHECK(s.scale == 8192.0f && s.good_steps == 1999, "no growth before 2000");
    CHECK(step(&s, be, dev, host, NAN) == 1 && s.scale == 4096.0f && s.good_steps == 0,
          "a NaN at 1999 good steps: halved, count restarted");
    for (int i = 0; i < 2000; i++)
        step(&s, be, dev, host, 0.0f);
    CHECK(s.scale == 8192.0f && s.good_steps == 0, "2000 good steps: doubled to %g",
          (double)s.scale);
    for (int i = 0; i < 2000; i++)
        step(&s, be, dev, host, 0.0f);
    CHECK(s.scale == 16384.0f, "another 2000: doubled again (%g)", (double)s.scale);
    CHECK(s.skipped_steps == 4 && s.steps == 4 + 1 + 1999 + 4000, "counts: %ld skipped, %ld steps",
          s.skipped_steps, s.steps);
    printf("scale %g after %ld steps, %ld skipped\n", (double)s.scale, s.steps, s.skipped_steps);

    tb_loss_scaler_free(&s);
    be->dev_free(be, dev);
    tb_backend_close(be);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
