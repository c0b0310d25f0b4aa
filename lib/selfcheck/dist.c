/*
 * dist.c - selfcheck's step checks of how data reaches the
 * device(s): DataParallel over 2 GPUs against the same driver on 2 CPU
 * backends, and --pin-memory / --non-blocking against pageable copies on
 * the same backend. Entries of sc_step_checks[] (lib/selfcheck/train.c).
 *
 *   bazel run //bench:selfcheck -- --device=cuda:0
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/dist/dp.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"
#include "lib/train/train.h"

/* DataParallel over 2 GPUs from one thread (lib/dist/dp.h, TB_DP_ONE_THREAD):
 * the model on the device under test, its replica on the other GPU, the
 * copies between them copy_peer; against the same driver on 2 CPU
 * backends. 3 SGD steps of batch 32, small CNN, seed 7, synthetic batch. */
#define DP_CHECK_B 32
#define DP_CHECK_STEPS 3

typedef struct dp_batch {
    float img[DP_CHECK_B * 784];
    int32_t lab[DP_CHECK_B];
} dp_batch;

static int dp_check_loss(tb_backend *be, const void *arg, double *loss)
{
    const dp_batch *batch = arg;
    tb_dp_check_net net = {0};
    tb_dp *dp = NULL;
    float l = 0;
    int rc;
    TB_TRY_GOTO(rc, tb_dp_check_net_build(be, DP_CHECK_B, &net), out_free);
    TB_TRY_GOTO(rc, tb_dp_create(net.m, tb_spec_small_cnn, &net.opts, 2, TB_DP_ONE_THREAD, 0, &dp),
                out_free);
    for (int step = 0; step < DP_CHECK_STEPS; step++) {
        TB_TRY_GOTO(rc, tb_model_zero_grad(net.m, 1), out_free);
        TB_TRY_GOTO(rc, tb_dp_step(dp, batch->img, batch->lab, DP_CHECK_B, 1.0f, &l), out_free);
        TB_TRY_GOTO(rc, tb_optim_step(&net.opt), out_free);
    }
    *loss = l;
out_free:
    tb_dp_destroy(dp);
    tb_dp_check_net_free(&net);
    return rc;
}

/* TB_ERR_UNSUPPORTED (n/a), saying why, unless be is a GPU and a second
 * one is there. */
static int dp_check_usable(tb_backend *be)
{
    const char *why = NULL;
    int count = tb_cuda_device_count(&why);
    if (count == 0)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "needs 2 GPUs: no GPU (%s)", why ? why : "none found");
    if (count == 1)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "needs 2 GPUs, this machine has 1");
    tb_device_kind kind;
    int ord;
    if (tb_device_parse(be->name, &kind, &ord) != TB_OK || kind != TB_DEVICE_CUDA) {
        tb_error_clear();
        return TB_FAIL(TB_ERR_UNSUPPORTED, "the backend under test is %s: run with "
                       "--device=cuda to check DataParallel on %d GPUs", be->name, count);
    }
    return TB_OK;
}

int sc_step_dp_two_gpus(tb_backend *be, double *got, double *ref)
{
    dp_batch batch;
    TB_TRY(dp_check_usable(be));
    tb_rng_fill(batch.img, (size_t)DP_CHECK_B * 784, 12345, -1, 1);
    for (int i = 0; i < DP_CHECK_B; i++)
        batch.lab[i] = (i * 7 + 3) % 10;
    return sc_on_be_and_cpu(be, dp_check_loss, &batch, got, ref);
}

/* --pin-memory and --non-blocking change how each batch reaches the
 * device, not its bytes: the loss after the steps is pageable's on the same
 * backend, bitwise. Pageable runs twice: on a backend whose training does
 * not repeat bitwise (a non-deterministic algorithm) the comparison could
 * not tell a bad copy from that, and the check says so instead. */
/* Deterministic cuDNN algorithms in all three: with cuDNN's default choice
 * two pageable runs on an H100 gave 2.07752246 and 2.0775224 (first GPU run,
 * 2026-11-24), so the comparison could not have told anything. */
static void tweak_pageable(tb_config *c) { c->cudnn_deterministic = 1; }
static void tweak_pinned(tb_config *c) { c->cudnn_deterministic = 1; c->pin_memory = 1; }
static void tweak_pinned_async(tb_config *c)
{
    c->cudnn_deterministic = 1;
    c->pin_memory = 1;
    c->non_blocking = 1;
}

static int staged_vs_pageable(tb_backend *be, void (*tweak)(tb_config *), double *got,
                              double *ref)
{
    double again;
    TB_TRY(sc_step_loss(be, tweak, got)); /* first: refused at once where n/a */
    TB_TRY(sc_step_loss(be, tweak_pageable, ref));
    TB_TRY(sc_step_loss(be, tweak_pageable, &again));
    return sc_ref_repeats(be, *ref, again, "pageable", "pinned vs pageable");
}

int sc_step_pinned(tb_backend *be, double *got, double *ref)
{
    return staged_vs_pageable(be, tweak_pinned, got, ref);
}

int sc_step_pinned_async(tb_backend *be, double *got, double *ref)
{
    return staged_vs_pageable(be, tweak_pinned_async, got, ref);
}
