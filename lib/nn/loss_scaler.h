/*
 * loss_scaler.h - dynamic loss scaling for fp16 mixed precision, with
 * PyTorch GradScaler's defaults and rules.
 *
 * The loss is multiplied by `scale` before backward, so small fp16
 * gradients do not flush to zero; the optimizer divides them back
 * (tb_opt_hparams.grad_scale = scale). After each backward,
 * tb_loss_scaler_update counts the non-finite gradients (the backend's
 * count_nonfinite over the flat gradient buffer, one device scalar read):
 *   any Inf/NaN: the step is skipped (*skip = 1, the caller does not call
 *                the optimizer), scale *= backoff_factor (0.5), the good
 *                step count restarts, skipped_steps++;
 *   none:        good_steps++; after growth_interval (2000) good steps in a
 *                row, scale *= growth_factor (2).
 * Initial scale 65536 (2^16). bf16 has fp32's range and needs no scaling:
 * PyTorch recipes leave the scaler off for it, and so does tunebench's
 * trainer (scale 1, no check).
 *
 * Tests: bazel test //lib/nn:loss_scaler_test
 */
#ifndef TB_LOSS_SCALER_H
#define TB_LOSS_SCALER_H

#include <stddef.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_loss_scaler {
    float scale;            /* current loss scale */
    float growth_factor;    /* 2.0 */
    float backoff_factor;   /* 0.5 */
    int growth_interval;    /* 2000 good steps */
    int good_steps;         /* finite steps since the last change of scale */
    long skipped_steps;     /* steps skipped for Inf/NaN gradients, ever */
    long steps;             /* updates, ever */
    float *count_dev;       /* (1) device scalar for count_nonfinite */
    tb_backend *be;
} tb_loss_scaler;

/* GradScaler's defaults: init_scale 65536, growth 2, backoff 0.5, interval
 * 2000. Allocates one device float on be. */
int tb_loss_scaler_init(tb_loss_scaler *s, tb_backend *be);
void tb_loss_scaler_free(tb_loss_scaler *s);

/* Counts NaN/Inf in grads (n floats, device memory; reads one float back,
 * a host sync on a GPU) and applies the rule above. *skip = 1: do not step
 * the optimizer (its gradients are not finite). */
int tb_loss_scaler_update(tb_loss_scaler *s, const float *grads, size_t n, int *skip);

/* The rule alone, given how many gradients were non-finite (the unit test
 * drives it directly, as update does). */
void tb_loss_scaler_apply(tb_loss_scaler *s, long nonfinite, int *skip);

#ifdef __cplusplus
}
#endif
#endif
