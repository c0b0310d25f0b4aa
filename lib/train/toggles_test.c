/*
 * toggles_test.c - the trainer's debugging and pacing toggles on the CPU
 * backend, on small synthetic data:
 *   --detect-anomaly   no false alarm on a clean run; a NaN injected into
 *                      one layer's forward output (or backward input
 *                      gradient) stops the step with TB_ERR_NUMERIC naming
 *                      that layer, the first one, not a later one
 *   --loss-read-every  N = 3 over 7 steps gives the same epoch loss (1e-6
 *                      relative) and bitwise the same weights as N = 1
 *   --trace            valid JSON (lib/core/json.h), traceEvents of ph "X" with
 *                      ts, dur, pid, tid, one event per phase per step
 *   --val-every, --target-accuracy, --max-time: evaluations on the right
 *                      epochs, stopping at the target and at the time limit
 *
 * Run: bazel test //lib/train:toggles_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/core/json.h"
#include "lib/train/train.h"
#include "lib/core/testing.h"

static const tb_dataset *g_train, *g_test;

static void base_config(tb_config *c)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->dataset = TB_DATA_SYNTHETIC;
    c->batch_size = 32;
    c->max_steps = 3;
    c->lr = 0.01;
}

static int make(tb_config *c, tb_backend *be, tb_trainer **t)
{
    TB_TRY(tb_config_validate(c));
    return tb_trainer_create_with_data(c, be, g_train, g_test, t);
}

/* The k-th leaf layer (depth first), or NULL. */
static tb_layer *nth_leaf(tb_layer *l, int *k)
{
    if (l->nchildren == 0)
        return (*k)-- == 0 ? l : NULL;
    for (int i = 0; i < l->nchildren; i++) {
        tb_layer *f = nth_leaf(l->children[i], k);
        if (f)
            return f;
    }
    return NULL;
}

static void anomaly_case(tb_backend *be, int leaf, int backward)
{
    tb_config c;
    base_config(&c);
    c.detect_anomaly = 1;
    tb_trainer *t;
    if (make(&c, be, &t) != TB_OK) {
        CHECK_WHAT(0, tb_error_message());
        return;
    }
    int k = leaf;
    tb_layer *l = nth_leaf(t->model->net, &k);
    char what[200], name[TB_LAYER_NAME];
    snprintf(name, sizeof name, "%s", l ? l->name : "?");
    t->model->ctx.anomaly_inject = name;
    t->model->ctx.anomaly_inject_bwd = backward;
    tb_epoch_stats es;
    int rc = tb_train_epoch(t, 0, &es);
    char want[160];
    snprintf(want, sizeof want, "%s of layer %s ", backward ? "backward" : "forward", name);
    const char *msg = tb_error_message();
    snprintf(what, sizeof what, "NaN in %s %s: TB_ERR_NUMERIC naming it", name,
             backward ? "backward" : "forward");
    CHECK_WHAT(l && rc == TB_ERR_NUMERIC && strstr(msg, want) != NULL, what);
    if (rc != TB_ERR_NUMERIC || !strstr(msg, want))
        printf("    got rc %d: %s\n", rc, msg);
    tb_error_clear();
    tb_trainer_destroy(t);
}

static void test_anomaly(tb_backend *be)
{
    tb_config c;
    base_config(&c);
    c.detect_anomaly = 1;
    tb_trainer *t;
    tb_epoch_stats es;
    int rc = make(&c, be, &t);
    if (rc == TB_OK)
        rc = tb_train_epoch(t, 0, &es);
    CHECK_WHAT(rc == TB_OK, "detect-anomaly: a clean run passes every check");
    tb_error_clear();
    tb_trainer_destroy(t);
    anomaly_case(be, 1, 0);
    anomaly_case(be, 4, 0);
    anomaly_case(be, 4, 1);
}

static int run_loss_read(tb_backend *be, int every, double *mean_loss, float **w, size_t *n)
{
    tb_config c;
    base_config(&c);
    c.max_steps = 7;
    c.loss_read_every = every;
    tb_trainer *t;
    tb_epoch_stats es;
    int rc;
    TB_TRY(make(&c, be, &t));
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, &es), out);
    *mean_loss = es.mean_loss;
    *n = t->model->numel;
    *w = malloc(*n * sizeof(float));
    memcpy(*w, t->model->flat_w, *n * sizeof(float)); /* CPU backend: host memory */
out:
    tb_trainer_destroy(t);
    return rc;
}

static void test_loss_read(tb_backend *be)
{
    double l1 = 0, l3 = 0;
    float *w1 = NULL, *w3 = NULL;
    size_t n1 = 0, n3 = 0;
    int ok = run_loss_read(be, 1, &l1, &w1, &n1) == TB_OK &&
             run_loss_read(be, 3, &l3, &w3, &n3) == TB_OK;
    CHECK_WHAT(ok, "loss-read-every 1 and 3 train");
    if (ok) {
        char what[160];
        snprintf(what, sizeof what, "loss-read-every=3: epoch loss %.7f vs %.7f (1e-6 rel)", l3, l1);
        CHECK_WHAT(fabs(l3 - l1) <= 1e-6 * fabs(l1) && l1 > 0, what);
        CHECK_WHAT(n1 == n3 && memcmp(w1, w3, n1 * sizeof(float)) == 0,
              "loss-read-every=3: weights bitwise equal to every step");
    }
    free(w1);
    free(w3);
}

/* rel under the test's temporary folder (/tmp outside Bazel), into path. */
static void tmp_path(char *path, size_t cap, const char *rel)
{
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(path, cap, "%s/%s", dir ? dir : "/tmp", rel);
}

static void test_trace(tb_backend *be)
{
    char path[1024];
    tmp_path(path, sizeof path, "trace.json");
    tb_config c;
    base_config(&c);
    c.max_steps = 4;
    c.trace = path;
    tb_trainer *t;
    tb_epoch_stats es;
    int rc = make(&c, be, &t);
    if (rc == TB_OK)
        rc = tb_train_epoch(t, 0, &es);
    if (rc == TB_OK)
        rc = tb_trainer_write_trace(t);
    CHECK_WHAT(rc == TB_OK, "trace: 4 steps traced and written");
    tb_trainer_destroy(t);
    tb_json *root = NULL;
    rc = tb_json_parse_file(path, 0, &root);
    CHECK_WHAT(rc == TB_OK, "trace: valid JSON");
    const tb_json *ev = root ? tb_json_get(root, "traceEvents") : NULL;
    CHECK_WHAT(ev && ev->type == TB_JSON_ARRAY, "trace: has a traceEvents array");
    int count[TB_PHASE_COUNT] = {0}, well_formed = 1;
    for (size_t i = 0; ev && i < ev->len; i++) {
        const tb_json *e = tb_json_at(ev, i);
        const char *name = tb_json_get_string(e, "name", "");
        well_formed &= strcmp(tb_json_get_string(e, "ph", ""), "X") == 0 &&
                       tb_json_get_number(e, "ts", -1) >= 0 &&
                       tb_json_get_number(e, "dur", -1) >= 0 &&
                       tb_json_get_number(e, "pid", -1) == 1 &&
                       tb_json_get_number(e, "tid", -1) == 1;
        for (int p = 0; p < TB_PHASE_COUNT; p++)
            count[p] += strcmp(name, tb_phase_names[p]) == 0;
    }
    CHECK_WHAT(well_formed, "trace: every event has ph X, ts, dur, pid, tid");
    CHECK_WHAT(count[TB_PHASE_DATA] == 4 && count[TB_PHASE_COPY] == 4 &&
              count[TB_PHASE_FORWARD] == 4 && count[TB_PHASE_BACKWARD] == 4 &&
              count[TB_PHASE_OPTIMIZER] == 4 && count[TB_PHASE_ALLREDUCE] == 0,
          "trace: one data, copy, forward, backward, optimizer event per step (no DDP)");
    tb_json_free(root);
}

/* A trace that could not be written when the run ends fails at once: the
 * trainer is not made (nothing runs, so nothing is lost at the end). */
static void test_trace_unwritable(tb_backend *be)
{
    char path[1024];
    tmp_path(path, sizeof path, "no_such_folder/trace.json");
    tb_config c;
    base_config(&c);
    c.trace = path;
    tb_trainer *t = NULL;
    int rc = make(&c, be, &t);
    CHECK_WHAT(rc == TB_ERR_IO && !t, "trace: a folder that does not exist fails at creation");
    tb_error_clear();
    tb_trainer_destroy(t);
}

static int fit(tb_backend *be, int epochs, int val_every, double target, double max_time,
               tb_fit_stats *st)
{
    tb_config c;
    base_config(&c);
    c.max_steps = 2;
    c.epochs = epochs;
    c.val_every = val_every;
    c.target_accuracy = target;
    c.max_time = max_time;
    tb_trainer *t;
    TB_TRY(make(&c, be, &t));
    int rc = tb_trainer_fit(t, st, NULL, NULL);
    tb_trainer_destroy(t);
    return rc;
}

static void test_fit(tb_backend *be)
{
    tb_fit_stats st;
    int rc = fit(be, 3, 2, 0, 0, &st);
    CHECK_WHAT(rc == TB_OK && st.epochs == 3 && st.evaluations == 2 && !strcmp(st.stopped_by, "epochs"),
          "val-every=2 over 3 epochs: evaluated after epochs 2 and 3");
    rc = fit(be, 3, 0, 0, 0, &st);
    CHECK_WHAT(rc == TB_OK && st.evaluations == 1, "val-every=0: evaluated after the last epoch only");
    rc = fit(be, 3, 1, 0.01, 0, &st);
    CHECK_WHAT(rc == TB_OK && st.epochs == 1 && st.reached_target && st.time_to_target_s >= 0 &&
              !strcmp(st.stopped_by, "target"),
          "target-accuracy=0.01: stops after the first evaluation, time to target set");
    rc = fit(be, 3, 5, 0, 1e-9, &st);
    CHECK_WHAT(rc == TB_OK && st.epochs == 1 && st.evaluations == 1 && !strcmp(st.stopped_by, "time"),
          "max-time: stops in the first epoch and evaluates once");
    rc = fit(be, 3, 5, 0.01, 1e-9, &st);
    CHECK_WHAT(rc == TB_OK && st.evaluations == 1 && !st.reached_target && st.time_to_target_s < 0 &&
                   st.target_at_deadline && !strcmp(st.stopped_by, "time"),
          "max-time with a target its forced evaluation reaches: not counted as reached "
          "(off the every-5 schedule, its epoch cut)");
    tb_error_clear();
}

int main(void)
{
    tb_test_verbose = 1;
    tb_backend *be;
    tb_dataset *train = NULL, *test = NULL;
    tb_synthetic_cfg sc = {.n = 256, .c = 1, .h = 28, .w = 28, .num_classes = 10, .seed = 1,
                           .noise = -1, .split = TB_SPLIT_TRAIN};
    if (tb_backend_open(TB_DEVICE_CPU, 0, 2, &be) != TB_OK ||
        tb_dataset_synthetic_create(&sc, &train) != TB_OK)
        return tb_error_print(stderr), 1;
    sc.n = 64;
    sc.split = TB_SPLIT_TEST;
    if (tb_dataset_synthetic_create(&sc, &test) != TB_OK)
        return tb_error_print(stderr), 1;
    g_train = train;
    g_test = test;
    test_anomaly(be);
    test_loss_read(be);
    test_trace(be);
    test_trace_unwritable(be);
    test_fit(be);
    tb_dataset_free(train);
    tb_dataset_free(test);
    tb_backend_close(be);
    return tb_test_exit(TB_OK);
}
