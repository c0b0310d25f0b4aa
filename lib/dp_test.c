/*
 * dp_test.c - DataParallel with 2 replica threads trains the small CNN for
 * 3 steps and matches one model trained on the same batches whose batch
 * norm sees each replica's share (micro-batch B/2, accumulation 2): loss
 * per step within 1e-4 relative, weights within 1e-5 absolute.
 *   bazel test //lib:dp_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/backend.h"
#include "lib/dp.h"
#include "lib/optim.h"
#include "lib/testing.h"

#define B 32
#define STEPS 3

static int setup(tb_backend **be, tb_model **m, tb_optim *opt, int max_batch)
{
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = max_batch, .conv_bias = 1,
                       .seed = 7};
    TB_TRY(tb_backend_cpu_create(1, be));
    TB_TRY(model_build(*be, tb_spec_small_cnn, &o, m));
    tb_opt_hparams hp = {.kind = TB_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .grad_scale = 1.0f};
    tb_lr_schedule s = {.peak_lr = 0.05};
    return optim_init(opt, *m, &hp, &s, 0);
}

/* The reference: two micro-batches of B/2, loss scaled by 1/2 each. */
static int ref_step(tb_model *m, tb_optim *opt, const float *img, const int32_t *lab, float *loss)
{
    tb_backend *be = m->ctx.be;
    tb_tensor x;
    int32_t *dl;
    TB_TRY(tensor_alloc(be, B / 2, 1, 28, 28, &x));
    TB_TRY(be->dev_alloc(be, (void **)&dl, B / 2 * sizeof(int32_t)));
    TB_TRY(model_zero_grad(m, 1));
    *loss = 0;
    for (int k = 0; k < 2; k++) {
        float l;
        TB_TRY(tensor_from_host(&x, img + (size_t)k * (B / 2) * 784));
        TB_TRY(be->copy_h2d(be, dl, lab + k * (B / 2), B / 2 * sizeof(int32_t), NULL));
        TB_TRY(model_forward_loss(m, &x, dl, NULL));
        TB_TRY(model_backward(m, 0.5f));
        TB_TRY(xent_read_loss(&m->loss, &l));
        *loss += 0.5f * l;
    }
    tensor_free(&x);
    be->dev_free(be, dl);
    return optim_step(opt);
}

int main(void)
{
    tb_backend *be = NULL, *be_ref = NULL;
    tb_model *m = NULL, *ref = NULL;
    tb_optim opt = {0}, opt_ref = {0};
    tb_dp *dp = NULL;
    float *img = malloc((size_t)B * 784 * sizeof(float));
    int32_t lab[B];
    uint64_t s = 12345;
    for (int i = 0; i < B * 784; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        img[i] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < B; i++)
        lab[i] = (i * 7 + 3) % 10;
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = B, .conv_bias = 1, .seed = 7};
    CHECK(setup(&be, &m, &opt, B) == TB_OK, "DP model");
    CHECK(setup(&be_ref, &ref, &opt_ref, B / 2) == TB_OK, "reference model");
    CHECK(dp_create(m, tb_spec_small_cnn, &o, 2, 1, &dp) == TB_OK, "dp_create");
    if (failures)
        return 1;
    for (int step = 0; step < STEPS; step++) {
        float l_dp = 0, l_ref = 0;
        CHECK(model_zero_grad(m, 1) == TB_OK, "zero_grad");
        CHECK(dp_step(dp, img, lab, B, 1.0f, &l_dp) == TB_OK, "dp_step");
        CHECK(optim_step(&opt) == TB_OK, "step");
        CHECK(ref_step(ref, &opt_ref, img, lab, &l_ref) == TB_OK, "reference step");
        double rel = fabs((double)l_dp - l_ref) / fabs((double)l_ref);
        printf("step %d: DP loss %.8f, reference %.8f, relative difference %.2e\n", step, l_dp,
               l_ref, rel);
        CHECK(rel <= 1e-4, "step %d: loss differs by %.2e", step, rel);
    }
    double max_abs = 0;
    for (size_t i = 0; i < m->numel; i++)
        max_abs = fmax(max_abs, fabs((double)m->flat_w[i] - ref->flat_w[i]));
    printf("weights: max abs difference %.3e after %d steps\n", max_abs, STEPS);
    CHECK(max_abs <= 1e-5, "weights differ by %.3e", max_abs);
    dp_destroy(dp);
    optim_free(&opt);
    optim_free(&opt_ref);
    model_destroy(m);
    model_destroy(ref);
    tb_backend_close(be);
    tb_backend_close(be_ref);
    free(img);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
