/*
 * graph_sim_test.c - --cuda-graphs on the CUDA-semantics sim backend
 * (lib/backend/sim/sim.h), where a capture records the step's calls with
 * their arguments and replays them, as a CUDA graph does.
 *
 * Each case trains the small CNN for a few optimizer steps twice on fresh
 * sim backends, with --cuda-graphs and without (same seed, same batches),
 * and compares the parameters (max |difference| <= 1e-5 x max |w|, float
 * rounding; the ops and their order are the same, so they usually agree to
 * the bit):
 *   - gradient accumulation 1, 2, 3 and 4 with grads set to none: a replay
 *     must reset the gradients on the first micro-batch of a step and add
 *     on the others, whichever micro-batch the graph was captured on; also
 *     with grads zeroed by a memset, and with --loss-read-every=3 (the loss
 *     summed on the device outside the graph);
 *   - dynamic loss scaling whose scale changes every 2 steps: the trainer
 *     must keep replaying (re-capture at the new scale), not fall back to
 *     launching ops; every full micro-batch after the 3 warm-ups is a
 *     replay (tb_sim_graph_launches counts them).
 * And the sim without graphs trains what the CPU backend trains (its
 * generated op wrappers copy the arguments right).
 *
 * Run: bazel test //lib/train:graph_sim_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/backend/sim/sim.h"
#include "lib/core/testing.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

typedef struct run_cfg {
    int graphs, accum, steps;
    int on_cpu;        /* the CPU backend itself instead of the sim */
    int zero_grads;    /* grads zeroed by a memset (set_to_none off) */
    int read_every;    /* --loss-read-every; 0: 1 */
    int scale_every;   /* > 0: loss scaling on, growth after this many good steps */
} run_cfg;

typedef struct run_out {
    float *w;          /* (numel) parameters after the steps */
    size_t numel;
    long launches;
} run_out;

static int run_steps(tb_trainer *t, const run_cfg *r, run_out *out)
{
    if (r->scale_every > 0) {
        TB_TRY(tb_trainer_enable_loss_scaling(t));
        t->scaler.growth_interval = r->scale_every;
    }
    for (int s = 0; s < r->steps; s++) {
        float loss;
        TB_TRY(tb_trainer_step(t, &loss));
    }
    TB_TRY(t->be->sync(t->be));
    out->numel = t->model->numel;
    out->w = malloc(out->numel * sizeof *out->w);
    if (!out->w)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the parameters");
    TB_TRY(t->be->copy_d2h(t->be, out->w, t->model->flat_w, out->numel * sizeof(float), NULL));
    out->launches = tb_sim_is(t->be) ? tb_sim_graph_launches(t->be) : 0;
    return TB_OK;
}

static int train(const tb_dataset *train_ds, const tb_dataset *test_ds, const run_cfg *r,
                 run_out *out)
{
    tb_config c;
    tb_config_defaults(&c);
    c.dataset = TB_DATA_SYNTHETIC;
    c.batch_size = 8;
    c.accum_steps = r->accum;
    c.cuda_graphs = r->graphs;
    c.seed = 3;
    c.grads_to_none = !r->zero_grads;
    c.loss_read_every = r->read_every > 0 ? r->read_every : 1;
    tb_backend *be = NULL;
    tb_trainer *t = NULL;
    int rc;
    TB_TRY(r->on_cpu ? tb_backend_cpu_create(1, &be) : tb_backend_sim_create(1, &be));
    TB_TRY_GOTO(rc, tb_config_validate(&c), out_close);
    TB_TRY_GOTO(rc, tb_trainer_create_with_data(&c, be, train_ds, test_ds, &t), out_close);
    rc = run_steps(t, r, out);
    tb_trainer_destroy(t);
out_close:
    be->destroy(be);
    return rc;
}

static double max_rel_diff(const run_out *a, const run_out *b)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < a->numel; i++) {
        d = fmax(d, fabs((double)a->w[i] - (double)b->w[i]));
        m = fmax(m, fabs((double)b->w[i]));
    }
    return m > 0 ? d / m : d;
}

/* Trains as ref says, then as r says, and checks that r's weights are
 * ref's within the tolerance. Both runs' results stay in *o_ref and *o;
 * returns 0 when either failed to train. */
static int compare(const tb_dataset *tr, const tb_dataset *te, const run_cfg *ref,
                   const run_cfg *r, run_out *o_ref, run_out *o, const char *what)
{
    printf("%s\n", what);
    int rc = train(tr, te, ref, o_ref);
    rc = rc == TB_OK ? train(tr, te, r, o) : rc;
    CHECK(rc == TB_OK, "%s: training failed: %s", what, tb_error_message());
    tb_error_clear();
    if (rc != TB_OK)
        return 0;
    double d = max_rel_diff(o, o_ref);
    printf("    max |w - w_ref| / max |w_ref| = %.3g\n", d);
    CHECK(d <= 1e-5, "%s: trained other weights (%.3g)", what, d);
    return 1;
}

/* --cuda-graphs against launches. */
static void check_case(const tb_dataset *tr, const tb_dataset *te, run_cfg r, const char *what)
{
    run_out eager = {0}, graph = {0};
    run_cfg ref = r;
    ref.graphs = 0;
    r.graphs = 1;
    if (compare(tr, te, &ref, &r, &eager, &graph, what)) {
        long micro = (long)r.steps * r.accum;
        CHECK(graph.launches == micro - 3, "%s: %ld replays of %ld micro-batches, want all "
              "but the 3 warm-ups", what, graph.launches, micro);
        CHECK(eager.launches == 0, "no graph without --cuda-graphs");
    }
    free(eager.w);
    free(graph.w);
}

/* tb_trainer_graph_settle_steps: after that many steps of a fresh trainer,
 * every step is replays alone, no capture (the step harness warms a
 * graph arm that long before timing it, and checks past it); for
 * accumulation 1 it is tight: the step before it captures. */
static int (*sim_graph_begin)(tb_backend *be);
static long captures;
static int counting_begin(tb_backend *be)
{
    captures++;
    return sim_graph_begin(be);
}

static void check_settle(const tb_dataset *tr, const tb_dataset *te, int accum)
{
    tb_config c;
    tb_config_defaults(&c);
    c.dataset = TB_DATA_SYNTHETIC;
    c.batch_size = 8;
    c.accum_steps = accum;
    c.cuda_graphs = 1;
    c.seed = 3;
    tb_backend *be = NULL;
    tb_trainer *t = NULL;
    float loss;
    int settle = tb_trainer_graph_settle_steps(&c), rc = tb_backend_sim_create(1, &be);
    if (rc == TB_OK) {
        sim_graph_begin = be->graph_begin;
        be->graph_begin = counting_begin;
        captures = 0;
        rc = tb_config_validate(&c);
    }
    if (rc == TB_OK)
        rc = tb_trainer_create_with_data(&c, be, tr, te, &t);
    for (int s = 0; s < settle - 1 && rc == TB_OK; s++)
        rc = tb_trainer_step(t, &loss);
    long c_before_last = captures, l_before_last = rc == TB_OK ? tb_sim_graph_launches(be) : 0;
    if (rc == TB_OK)
        rc = tb_trainer_step(t, &loss);
    long c0 = captures, l0 = rc == TB_OK ? tb_sim_graph_launches(be) : 0;
    for (int s = 0; s < 2 && rc == TB_OK; s++)
        rc = tb_trainer_step(t, &loss);
    CHECK(rc == TB_OK, "accum %d: training failed: %s", accum, tb_error_message());
    tb_error_clear();
    if (rc == TB_OK) {
        CHECK(captures == c0 && tb_sim_graph_launches(be) == l0 + 2 * accum,
              "accum %d: after %d settling steps, 2 steps made %ld captures and %ld replays "
              "(want 0 and %d)", accum, settle, captures - c0, tb_sim_graph_launches(be) - l0,
              2 * accum);
        if (accum == 1)
            CHECK(captures > c_before_last || l0 - l_before_last < accum,
                  "accum 1: settling is tight: the step before it captured");
    }
    tb_trainer_destroy(t);
    if (be)
        be->destroy(be);
    CHECK(tb_trainer_graph_settle_steps(&(tb_config){.cuda_graphs = 0}) == 0,
          "no settling without graphs");
}

/* The sim's queued ops (generated wrappers, run on the worker) train what
 * the CPU backend trains when it runs them as they are called. */
static void check_sim_is_cpu(const tb_dataset *tr, const tb_dataset *te)
{
    run_out cpu = {0}, sim = {0};
    run_cfg ref = {.accum = 2, .steps = 3, .on_cpu = 1}, r = {.accum = 2, .steps = 3};
    compare(tr, te, &ref, &r, &cpu, &sim, "the sim backend without graphs vs the CPU backend");
    free(cpu.w);
    free(sim.w);
}

int main(void)
{
    tb_dataset *train_ds = NULL, *test_ds = NULL;
    tb_synthetic_cfg sc = {.n = 64, .c = 1, .h = 28, .w = 28, .num_classes = 10, .seed = 1,
                           .noise = -1, .split = TB_SPLIT_TRAIN};
    if (tb_dataset_synthetic_create(&sc, &train_ds) != TB_OK)
        return tb_test_exit(tb_error_last());
    sc.split = TB_SPLIT_TEST;
    if (tb_dataset_synthetic_create(&sc, &test_ds) != TB_OK)
        return tb_test_exit(tb_error_last());
    check_sim_is_cpu(train_ds, test_ds);
    for (int accum = 1; accum <= 4; accum++) {
        char what[96];
        snprintf(what, sizeof what, "--cuda-graphs, --accum-steps=%d, grads to none", accum);
        check_case(train_ds, test_ds, (run_cfg){.accum = accum, .steps = 4}, what);
    }
    check_case(train_ds, test_ds, (run_cfg){.accum = 2, .steps = 6, .scale_every = 2},
               "--cuda-graphs with loss scaling, the scale growing every 2 steps");
    check_case(train_ds, test_ds, (run_cfg){.accum = 3, .steps = 3, .zero_grads = 1},
               "--cuda-graphs, --accum-steps=3, grads zeroed (--grads-to-none=0)");
    check_case(train_ds, test_ds, (run_cfg){.accum = 2, .steps = 4, .read_every = 3},
               "--cuda-graphs, --accum-steps=2, --loss-read-every=3");
    for (int accum = 1; accum <= 4; accum++)
        check_settle(train_ds, test_ds, accum);
    tb_dataset_free(train_ds);
    tb_dataset_free(test_ds);
    return tb_test_exit(TB_OK);
}
