/*
 * graph_capture_test.c - the trainer's --cuda-graphs capture frees what it
 * made when the captured step fails, on the CPU backend with stand-in graph
 * slots (no GPU here): graph_begin/end/launch/destroy count the graphs
 * alive, and the convolution forward fails while a capture is open.
 *   - a failed capture: the step's error comes back, the capture is ended
 *     and no graph stays alive (before the fix the instantiated graph of
 *     the failed step leaked);
 *   - a good capture: one graph, launched on the later steps, freed by
 *     tb_trainer_destroy.
 *
 * Run: bazel test //lib/train:graph_capture_test
 */
#include <stdio.h>
#include <stdlib.h>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/core/testing.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

static int capturing, alive, launches, fail_in_capture;
static int (*real_conv_fwd)(tb_backend *, const tb_conv_desc *, int, const float *,
                            const float *, const float *, float *);

static int fake_begin(tb_backend *be)
{
    (void)be;
    capturing = 1;
    return TB_OK;
}

static int fake_end(tb_backend *be, tb_graph **g)
{
    (void)be;
    capturing = 0;
    *g = malloc(1); /* what CUDA instantiates, whatever the step did */
    if (!*g)
        return TB_FAIL(TB_ERR_NOMEM, "fake graph");
    alive++;
    return TB_OK;
}

static int fake_launch(tb_backend *be, tb_graph *g)
{
    (void)be;
    (void)g;
    launches++;
    return TB_OK;
}

static int fake_destroy(tb_backend *be, tb_graph *g)
{
    (void)be;
    if (g) {
        free(g);
        alive--;
    }
    return TB_OK;
}

static int failing_conv_fwd(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                            const float *w, const float *bias, float *y)
{
    if (capturing && fail_in_capture)
        return TB_FAIL(TB_ERR_CUDA, "simulated failure inside the capture");
    return real_conv_fwd(be, d, algo, x, w, bias, y);
}

static void run(tb_backend *be, const tb_dataset *train, const tb_dataset *test, int fail)
{
    tb_config c;
    tb_trainer *t = NULL;
    float loss = 0;
    int rc = TB_OK, step;

    tb_config_defaults(&c);
    c.device = "cpu";
    c.dataset = TB_DATA_SYNTHETIC;
    c.batch_size = 16;
    c.cuda_graphs = 1;
    alive = launches = 0;
    fail_in_capture = fail;
    CHECK_OK(tb_trainer_create_with_data(&c, be, train, test, &t));
    if (!t)
        return;
    /* Warm-up steps run directly, the next one captures, later ones launch. */
    for (step = 1; step <= 8 && rc == TB_OK; step++)
        rc = tb_trainer_step(t, &loss);
    if (fail) {
        CHECK(rc == TB_ERR_CUDA && step > 2, "the capturing step fails with the op's error "
              "(after %d steps, %s)", step - 1, tb_err_name(rc));
        tb_error_clear();
        CHECK(!capturing && alive == 0 && !t->graph[0] && !t->graph[1],
              "failed capture: capture ended, no graph alive (%d)", alive);
    } else {
        CHECK(rc == TB_OK && alive == 1 && (t->graph[0] || t->graph[1]) && launches >= 1,
              "good capture: one graph (%d alive), launched %d times", alive, launches);
    }
    tb_trainer_destroy(t);
    CHECK(alive == 0, "after tb_trainer_destroy no graph is alive (%d)", alive);
}

int main(void)
{
    tb_backend *be = NULL;
    tb_dataset *train = NULL, *test = NULL;
    tb_synthetic_cfg sc = {.n = 64, .c = 1, .h = 28, .w = 28, .num_classes = 10, .seed = 1,
                           .noise = -1, .split = TB_SPLIT_TRAIN};

    tb_test_verbose = 1;
    CHECK_OK(tb_backend_cpu_create(1, &be));
    if (!be)
        return tb_test_exit(TB_ERR_INTERNAL);
    real_conv_fwd = be->conv_fwd;
    be->conv_fwd = failing_conv_fwd;
    be->graph_begin = fake_begin;
    be->graph_end = fake_end;
    be->graph_launch = fake_launch;
    be->graph_destroy = fake_destroy;
    CHECK_OK(tb_dataset_synthetic_create(&sc, &train));
    sc.split = TB_SPLIT_TEST;
    sc.n = 16;
    CHECK_OK(tb_dataset_synthetic_create(&sc, &test));
    if (train && test) {
        run(be, train, test, 1);
        run(be, train, test, 0);
    }
    tb_dataset_free(train);
    tb_dataset_free(test);
    tb_backend_close(be);
    return tb_test_exit(TB_OK);
}
