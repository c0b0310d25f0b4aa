/*
 * optim.h - optimizer glue: SGD with momentum, AdamW, and the large-batch
 * LARS, LAMB and NovoGrad over a model's flat parameter buffer, per-tensor
 * or fused, with an LR schedule.
 *
 * The optimizer state (momentum buffer; Adam's first and second moments)
 * lives in flat buffers parallel to the model's, and the backend's opt_step
 * sees one tb_param_view per parameter tensor: fused == 0 runs PyTorch's
 * for-loop optimizer (several passes per tensor), fused == 1 one pass over
 * all of them (fused=True / multi-tensor apply).
 *
 * LR schedule: peak = lr, times batch*accum/lr_base_batch when the linear
 * scaling rule is on; a linear warm-up from peak/warmup to peak over the
 * first warmup_steps steps; constant after. Zeroing gradients (memset or
 * set_to_none) and accumulation are the model's (tb_model_zero_grad,
 * tb_model_backward); a step is `accum_steps` micro-batches, see lib/train/train.h.
 *
 * Tests: bazel test //lib/train:train_test
 */
#ifndef TB_OPTIM_H
#define TB_OPTIM_H

#include "lib/backend/backend.h"
#include "lib/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_lr_schedule {
    double peak_lr;       /* after warm-up and scaling */
    int warmup_steps;     /* 0 = none */
} tb_lr_schedule;

/* lr for 1-based step: linear warm-up, then peak_lr. */
double tb_lr_at_step(const tb_lr_schedule *s, int step);

typedef struct tb_optim {
    tb_backend *be;
    tb_opt_hparams hp;    /* lr updated each step from the schedule */
    tb_lr_schedule sched;
    int fused;
    tb_param_view *views; /* (count) one per parameter tensor */
    int count;
    float *state;         /* (1 or 2, numel) momentum / Adam moments, then NovoGrad's
                             (nparams) per-tensor scalars; device memory */
    size_t numel;
} tb_optim;

/* Creates the optimizer state for m (zeroed, as PyTorch starts it).
 * hp->kind: any tb_opt_kind; hp->step is managed here.
 * REQUIRES: m outlives the optimizer. */
/* 1 for a parameter LARS and LAMB leave unadapted (no trust ratio, no
 * weight decay): batch and layer norm's gamma and beta, and biases, as
 * MLPerf's LARS and BERT's LAMB exclude them (You et al.'s ResNet-50
 * recipe; torchlars and apex adapt every tensor unless told). */
int tb_optim_no_adapt(const char *param_name);

int tb_optim_init(tb_optim *o, tb_model *m, const tb_opt_hparams *hp, const tb_lr_schedule *s,
               int fused);
void tb_optim_free(tb_optim *o);

/* One update of every parameter from its gradient; advances the step and
 * the learning rate. */
int tb_optim_step(tb_optim *o);

#ifdef __cplusplus
}
#endif
#endif
