/*
 * toggles_sim_test.c - the trainer's toggles on the CUDA-semantics sim
 * backend (lib/backend/sim/sim.h), where every op is queued and runs later
 * on a worker thread, as on a GPU. A trainer that read a device result on
 * the host without waiting for it, or freed or rewrote a buffer that queued
 * work still reads, trains other weights there than on the CPU backend,
 * where every op has run when it returns.
 *
 * Each setting (a command line, parsed through the config's flag table)
 * trains 3 optimizer steps of its model on synthetic 1x28x28 data, once on
 * the CPU backend and once on the sim; the weights must agree within
 * 1e-5 x max |w| (the same kernels in the same order: usually to the bit).
 *
 * Run: bazel test //lib/train:toggles_sim_test
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

#define STEPS 3

static const char *const settings[] = {
    "",
    "--channels-last",
    "--optimizer=adamw --fused-optimizer",
    "--optimizer=lamb",
    "--optimizer=novograd --fused-optimizer",
    "--checkpointing",
    "--detect-anomaly",
    "--grads-to-none=0", /* zero_grad's memset queued (TB_ON_COMPUTE) */
    /* the op breakdown's events, read at each phase's end (never written) */
    "--trace=/tmp/tb_toggles_sim_trace.json",
    "--accum-steps=2 --grads-to-none=0",
    "--accum-steps=3",
    "--loss-read-every=2",
    "--model=wide_cnn --dropout=0.2",
    "--model=wide_cnn --fused-gelu",
    "--amp=bf16",
    "--model=transformer",
    "--model=transformer --fused-attention --fused-layernorm",
};

/* cfg from a command line of space-separated flags. */
static int parse(const char *line, tb_config *cfg)
{
    char buf[256], *argv[16] = {"toggles_sim_test"};
    int argc = 1, help = 0;
    size_t n;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 15; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    tb_config_defaults(cfg);
    cfg->dataset = TB_DATA_SYNTHETIC;
    cfg->batch_size = 8;
    cfg->seed = 3;
    const tb_flag *flags = tb_config_flags(cfg, &n);
    TB_TRY(tb_flags_parse(flags, n, &argc, argv, NULL, &help));
    return tb_config_validate(cfg);
}

/* STEPS steps of cfg on a fresh backend (sim or CPU); *w: the weights. */
static int train(const tb_config *cfg, int sim, const tb_dataset *tr, const tb_dataset *te,
                 float **w, size_t *numel)
{
    tb_backend *be = NULL;
    tb_trainer *t = NULL;
    int rc;
    TB_TRY(sim ? tb_backend_sim_create(1, &be) : tb_backend_cpu_create(1, &be));
    TB_TRY_GOTO(rc, tb_trainer_create_with_data(cfg, be, tr, te, &t), out_close);
    for (int s = 0; s < STEPS; s++) {
        float loss;
        TB_TRY_GOTO(rc, tb_trainer_step(t, &loss), out_destroy);
    }
    *numel = t->model->numel;
    *w = malloc(*numel * sizeof **w);
    if (!*w) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of host memory for the weights");
        goto out_destroy;
    }
    rc = be->copy_d2h(be, *w, t->model->flat_w, *numel * sizeof(float), NULL);
out_destroy:
    tb_trainer_destroy(t);
out_close:
    be->destroy(be);
    return rc;
}

static void check_setting(const char *line, const tb_dataset *tr, const tb_dataset *te)
{
    tb_config cfg;
    float *w_cpu = NULL, *w_sim = NULL;
    size_t n_cpu = 0, n_sim = 0;
    printf("'%s'\n", line);
    int rc = parse(line, &cfg);
    rc = rc == TB_OK ? train(&cfg, 0, tr, te, &w_cpu, &n_cpu) : rc;
    rc = rc == TB_OK ? train(&cfg, 1, tr, te, &w_sim, &n_sim) : rc;
    CHECK(rc == TB_OK && n_cpu == n_sim, "'%s': %s", line, tb_error_message());
    tb_error_clear();
    if (rc == TB_OK && n_cpu == n_sim) {
        double d = 0, m = 0;
        for (size_t i = 0; i < n_cpu; i++) {
            d = fmax(d, fabs((double)w_sim[i] - (double)w_cpu[i]));
            m = fmax(m, fabs((double)w_cpu[i]));
        }
        printf("    max |w_sim - w_cpu| / max |w_cpu| = %.3g\n", m > 0 ? d / m : d);
        CHECK(d <= 1e-5 * m, "'%s': the sim trained other weights (%.3g)", line, d / m);
    }
    free(w_cpu);
    free(w_sim);
}

int main(void)
{
    tb_dataset *tr = NULL, *te = NULL;
    tb_synthetic_cfg sc = {.n = 64, .c = 1, .h = 28, .w = 28, .num_classes = 10, .seed = 1,
                           .noise = -1, .split = TB_SPLIT_TRAIN};
    if (tb_dataset_synthetic_create(&sc, &tr) != TB_OK)
        return tb_test_exit(tb_error_last());
    sc.split = TB_SPLIT_TEST;
    if (tb_dataset_synthetic_create(&sc, &te) != TB_OK)
        return tb_test_exit(tb_error_last());
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        check_setting(settings[i], tr, te);
    tb_dataset_free(tr);
    tb_dataset_free(te);
    return tb_test_exit(TB_OK);
}
