/*
 * dp_sim_test.c - DataParallel's one-thread mode on the CUDA-semantics sim
 * backend (lib/backend/sim/sim.h): two replicas on two sim devices whose
 * every op takes 3 ms on the device's worker thread, while the host only
 * queues them, as on GPUs.
 *
 * The phase times must come from the devices: forward, backward and
 * reduce together take most of the step (>= half of its host wall time,
 * which ends when the loss has been read, or tb_dp_read_times returned).
 * Host clocks around the queueing read ~0 for those phases. Both with the
 * loss read in tb_dp_step and with tb_dp_read_times after a step that
 * reads nothing. (The loss read is the host's wait, which overlaps the
 * device's phases: it is printed, not checked.) The bound is a fraction
 * of a wall time the injected delays make long, not a speed.
 *
 * Run: bazel test //lib/dist:dp_sim_test
 */
#include <stdio.h>
#include <stdlib.h>

#include "lib/backend/sim/sim.h"
#include "lib/core/clock.h"
#include "lib/core/rng.h"
#include "lib/core/testing.h"
#include "lib/dist/dp.h"

#define B 16
#define OP_DELAY_S 0.003

static void check_times(const tb_dp_times *t, double wall, const char *what)
{
    double device = t->forward_s + t->backward_s + t->reduce_s;
    printf("%s: wall %.1f ms; scatter %.1f replicate %.1f forward %.1f gather+loss %.1f "
           "backward %.1f reduce %.1f loss read %.1f ms\n", what, 1e3 * wall, 1e3 * t->scatter_s,
           1e3 * t->replicate_s, 1e3 * t->forward_s, 1e3 * t->gather_loss_s,
           1e3 * t->backward_s, 1e3 * t->reduce_s, 1e3 * t->loss_read_s);
    CHECK(device >= 0.5 * wall, "%s: forward + backward + reduce = %.1f ms of a %.1f ms step: "
          "timed as queued, not as run", what, 1e3 * device, 1e3 * wall);
}

static int run(tb_backend *const *bes, float *images, int32_t *labels)
{
    tb_dp_check_net net = {0};
    tb_dp *dp = NULL;
    tb_dp_times t;
    float loss = 0;
    int rc;
    TB_TRY_GOTO(rc, tb_dp_check_net_build(bes[0], B, &net), out_free);
    TB_TRY_GOTO(rc, tb_dp_create_on(net.m, tb_spec_small_cnn, &net.opts, 2, TB_DP_ONE_THREAD,
                                    bes, &dp), out_free);
    TB_TRY_GOTO(rc, tb_dp_step(dp, images, labels, B, 1.0f, &loss), out_free); /* warm-up */
    for (int i = 0; i < 2; i++)
        TB_TRY_GOTO(rc, tb_sim_set_op_delay(bes[i], OP_DELAY_S), out_free);
    double t0 = tb_clock_s();
    TB_TRY_GOTO(rc, tb_dp_step(dp, images, labels, B, 1.0f, &loss), out_free);
    double wall = tb_clock_s() - t0;
    CHECK(loss > 0 && loss < 10, "loss %g", loss);
    check_times(&dp->times, wall, "step reading the loss");
    t0 = tb_clock_s();
    TB_TRY_GOTO(rc, tb_dp_step(dp, images, labels, B, 1.0f, NULL), out_free);
    TB_TRY_GOTO(rc, tb_dp_read_times(dp, &t), out_free);
    wall = tb_clock_s() - t0;
    check_times(&t, wall, "step reading nothing, then tb_dp_read_times");
out_free:
    tb_dp_destroy(dp);
    tb_dp_check_net_free(&net);
    return rc;
}

int main(void)
{
    tb_backend *bes[2] = {0};
    float *images = malloc((size_t)B * 28 * 28 * sizeof *images);
    int32_t labels[B];
    tb_rng r = tb_rng_seeded(5);
    for (size_t i = 0; images && i < (size_t)B * 28 * 28; i++)
        images[i] = 2.0f * tb_rng_float01(&r) - 1.0f;
    for (int i = 0; i < B; i++)
        labels[i] = (int32_t)tb_rng_below(&r, 10);
    int rc = images ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "out of host memory for the batch");
    for (int i = 0; i < 2 && rc == TB_OK; i++)
        rc = tb_backend_sim_create(1, &bes[i]);
    if (rc == TB_OK)
        rc = run(bes, images, labels);
    for (int i = 0; i < 2; i++)
        if (bes[i])
            bes[i]->destroy(bes[i]);
    free(images);
    return tb_test_exit(rc);
}
