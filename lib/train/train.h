/*
 * train.h - training and evaluation: one step, one epoch, the test set.
 *
 * A trainer ties together what a tb_config asks for: the datasets, a loader
 * for each split (PyTorch DataLoader knobs), the model, the optimizer, and
 * the device buffers a batch is copied into. One optimizer step is
 * accum_steps micro-batches: zero_grad (memset or set_to_none), then for
 * each micro-batch copy, forward, loss, backward (gradients accumulate,
 * the loss scaled by 1/accum_steps), then the optimizer. The last step of
 * an epoch may hold fewer micro-batches.
 *
 * Token models (--model=gpt2) read a (B, 1, T, 1) TB_I32 batch of token ids
 * (copied to the device as the loader's int32 bytes) and B x T labels, the
 * next token at every position; their evaluation accuracy is next-token
 * accuracy over every position. resnet50 and gpt2 train on synthetic data
 * made on the fly (datasets/dataset.h), of tb_train_split_sizes samples.
 *
 * Use:
 *   tb_trainer *t;  TB_TRY(tb_trainer_create(&cfg, be, &t));
 *   for e in 0..epochs-1: tb_train_epoch(t, e, &es); tb_trainer_evaluate(t, &ev);
 *   tb_trainer_destroy(t);
 *
 * Tests: bazel test //lib/train:train_test
 */
#ifndef TB_TRAIN_H
#define TB_TRAIN_H

#include <stdint.h>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/train/loader.h"
#include "lib/nn/loss_scaler.h"
#include "lib/nn/model.h"
#include "lib/nn/optim.h"
#include "lib/backend/staging.h"
#include "lib/train/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_trainer {
    tb_config cfg;            /* validated copy */
    tb_backend *be;           /* borrowed */
    const tb_dataset *train_ds, *test_ds;
    tb_dataset *owned_train, *owned_test; /* freed by tb_trainer_destroy */
    tb_loader *train_ld, *test_ld;
    tb_model *model;
    tb_optim opt;
    tb_tensor x;              /* (B, C, H, W) the batch on the device; token models:
                                 (B, 1, T, 1), dtype TB_I32 */
    int32_t *labels;          /* (B) on the device; token models (B, T) */
    /* What the model reads: x and labels, or the staged copies */
    const tb_tensor *x_in;    /* &x, or &x_staged */
    const int32_t *labels_in; /* (B) labels, or the staged labels */
    /* --pin-memory, --non-blocking (lib/train/train_device.c) */
    tb_staging *staging;      /* every batch goes through it on a backend with its own
                                 device memory (CUDA); NULL on the CPU. With
                                 --cuda-graphs, whose replays read x and labels,
                                 the staged copies are copied into them */
    tb_tensor x_staged;       /* (B, C, H, W) view of the staged images */
    long steps;               /* optimizer steps so far, over all epochs */
    int step_epoch;           /* the training loader's epoch under tb_trainer_next_batch
                                 (tb_trainer_step), -1 before its first batch */
    /* toggles' state: deferred loss reads, anomaly checks, device-side data */
    float *loss_acc;          /* (1) device: loss sums not read yet (--loss-read-every > 1) */
    int loss_unread_steps;    /* steps accumulated in loss_acc since the last read */
    long loss_unread_images;
    float *anomaly_count;     /* (1) device counter of --detect-anomaly's checks */
    tb_trace *trace;          /* --trace: the step timeline; NULL when off */
    tb_layer_hook op_hook;    /* --trace's op breakdown: the model's ctx.hook during
                                 a traced step's forward and backward */
    double deadline;          /* --max-time: CLOCK_MONOTONIC seconds; 0 = none */
    int timed_out;            /* tb_train_epoch stopped at the deadline */
    /* --amp */
    tb_loss_scaler scaler;    /* dynamic loss scaling (GradScaler) */
    int loss_scaling;         /* 1: every step scales the loss by scaler.scale,
                                 unscales in the optimizer (grad_scale) and skips
                                 steps whose gradients hold Inf/NaN */
    /* --tensors-on-device, --augment-on-device, --cuda-graphs (lib/train/train_device.c) */
    uint8_t *labels_u8;       /* (B) device: the labels as the dataset stores them */
    uint8_t *labels_u8_host;  /* (B) */
    uint8_t *x_u8;            /* (B, C, H, W) device: raw samples to augment */
    int32_t *aug_params;      /* (B, 3) device: each sample's (dy, dx, flip) */
    int32_t *aug_params_host; /* (B, 3) */
    tb_graph *graph[2];       /* the captured forward + backward, indexed by the
                                 model's grad_accumulate when captured (0: the
                                 backward writes the gradients, 1: adds); NULL before */
    float graph_scale;        /* the loss scale both captures were made with */
    int graph_warm;           /* warm-up micro-batches run before the capture */
    int parked;               /* 1: its activations freed (tb_trainer_park) */
} tb_trainer;

typedef struct tb_epoch_stats {
    int epoch;
    long steps;               /* optimizer steps in this epoch */
    long images;              /* training samples seen */
    double mean_loss;         /* over the epoch's micro-batches, sample-weighted */
    float last_loss;          /* mean loss of the last step's micro-batches; with
                                 --loss-read-every=N, of the steps since the last read */
    double seconds;           /* wall time of the epoch (training only) */
    double images_per_s;
    double tokens_per_s;      /* token models: images_per_s x T; 0 for images */
    double loader_wait_s;     /* time spent waiting for (or building) batches */
} tb_epoch_stats;

typedef struct tb_eval_stats {
    long images;              /* samples */
    long predictions;         /* rows judged: images, or samples x T for a token model */
    long correct;
    double accuracy;          /* correct / predictions (next-token accuracy for tokens) */
    double mean_loss;
    double seconds;
    size_t mem_peak;          /* bytes in use at the evaluation's peak (be->mem_stats,
                                 reset at its start; --eval-no-grad lowers it) */
} tb_eval_stats;

/* The synthetic splits' sizes for cfg (--data-limit / --test-limit when
 * > 0, else the model's default): 50,000 / 10,000 for the small models;
 * resnet50 50,000 / TB_RESNET50_TEST_SAMPLES, gpt2 10,000 /
 * TB_GPT2_TEST_SAMPLES sequences, because evaluation runs the whole test
 * split and a CPU forward of these models costs seconds per sample. */
#define TB_RESNET50_TEST_SAMPLES 128
#define TB_GPT2_TEST_SAMPLES 4
void tb_train_split_sizes(const tb_config *cfg, long *train, long *test);

/* GPT-2 small with --context, --layers and --vocab of c (0: GPT-2's). */
tb_gpt2_dims tb_train_gpt2_dims(const tb_config *c);

/* Opens cfg's data for split: Fashion-MNIST (--data-limit / --test-limit
 * samples) or the synthetic images or tokens of cfg's model, sized by
 * tb_train_split_sizes. The caller frees *out (tb_dataset_free). */
int tb_train_open_split(const tb_config *cfg, tb_split split, tb_dataset **out);

/* Opens the datasets cfg names (Fashion-MNIST from cfg->data_dir, or
 * synthetic data shaped for cfg->model) and builds everything.
 * REQUIRES: cfg passed tb_config_validate. be is borrowed.
 * Errors: the datasets' (TB_ERR_IO, TB_ERR_DATA naming the file), the
 * model's, TB_ERR_DEVICE_OOM. */
int tb_trainer_create(const tb_config *cfg, tb_backend *be, tb_trainer **out);

/* The same over datasets the caller owns (they must outlive the trainer),
 * so tests can build several trainers over one copy of the data. */
int tb_trainer_create_with_data(const tb_config *cfg, tb_backend *be, const tb_dataset *train,
                             const tb_dataset *test, tb_trainer **out);

void tb_trainer_destroy(tb_trainer *t);

/* Turns dynamic loss scaling on. --amp=fp16 does at creation, as PyTorch
 * recipes pair fp16 with GradScaler; bf16 and fp32 run without, and tests
 * use this to drive the scaler's wiring on a backend without fp16. */
int tb_trainer_enable_loss_scaling(tb_trainer *t);

/* The optimizer cfg asks for over m's parameters, as the trainer builds it:
 * kind and hyper-parameters, the warm-up and linear-scaling schedule,
 * fused or not. REQUIRES: cfg passed tb_config_validate. opt is freed with
 * tb_optim_free. Errors: tb_optim_init's. */
int tb_train_optim_init(const tb_config *cfg, tb_model *m, tb_optim *opt);

/* Copies one batch to the device, forward, loss, backward with the loss
 * scaled by loss_scale. *loss is its mean loss (read from the device). */
int tb_train_micro_batch(tb_trainer *t, const tb_batch *b, float loss_scale, float *loss);

/* One epoch (or cfg->max_steps steps of it) in training mode. */
int tb_train_epoch(tb_trainer *t, int epoch, tb_epoch_stats *st);

/* One optimizer step for benchmarks: accum_steps micro-batches pulled from
 * the training loader, which starts its next epoch transparently when it
 * runs out (so a step is always accum_steps full-or-last batches; no epoch
 * statistics). *loss is the step's mean micro-batch loss, read from the
 * device every step whatever --loss-read-every says. The step runs the same
 * phases (and --trace timeline) as a step of tb_train_epoch. Work may still be
 * queued on the device when it returns: tb_trainer_sync waits for it.
 * REQUIRES: not mixed with tb_train_epoch on the same trainer (both drive the
 * training loader's epochs). */
int tb_trainer_step(tb_trainer *t, float *loss);

/* The next training batch for code that runs its own steps (a benchmark
 * that cuts batches, say): the loader's next epoch begins whenever the
 * previous one runs out, as in tb_trainer_step, whose epochs it shares.
 * REQUIRES: not mixed with tb_train_epoch on the same trainer. *b stays valid
 * until the next call (the loader's batch memory).
 * Errors: the loader's; TB_ERR_DATA when the training set has no batches. */
int tb_trainer_next_batch(tb_trainer *t, tb_batch *b);

/* Waits until the device has finished every step queued so far. */
int tb_trainer_sync(tb_trainer *t);

/* Parking: a trainer that waits its turn beside others gives back its
 * activation memory (every layer's outputs and backward buffers: what
 * PyTorch frees at the end of each step) and keeps its parameters,
 * gradients, optimizer and loss-scaler state, loader and algorithm
 * choices. tb_trainer_park waits for the device, drops its CUDA graphs
 * (they baked in the activations' addresses; the next step after
 * tb_trainer_unpark captures again, past the warm-up it already ran) and
 * frees the activations; tb_trainer_unpark allocates them again (from the
 * CUDA allocator's cache, where the freed blocks wait). Training after a
 * park and an unpark is the training without them, to the bit. A parked
 * trainer refuses to step or evaluate (TB_ERR_INVALID); destroying one is
 * fine. Both are no-ops in the state they would reach. Errors: the
 * device's; TB_ERR_DEVICE_OOM from tb_trainer_unpark (it stays parked). */
int tb_trainer_park(tb_trainer *t);
int tb_trainer_unpark(tb_trainer *t);

/* Steps a freshly built trainer of configuration c runs before every one
 * of its steps is a graph replay: with --cuda-graphs, the warm-up
 * micro-batches run as launches and each graph (one per grad_accumulate
 * value) is captured on its first need after them; 0 without. A check
 * that means to witness replays runs more steps than this, and a timing
 * that means to time them starts after it. */
int tb_trainer_graph_settle_steps(const tb_config *c);

/* Training with validation (Lightning's check_val_every_n_epoch, max_time,
 * early stopping at a target): up to cfg->epochs epochs, evaluating after
 * every cfg->val_every-th epoch and after the last one; stops early when an
 * evaluation reaches cfg->target_accuracy (> 0) or when cfg->max_time (> 0)
 * seconds of training and evaluation have passed (checked between steps;
 * the test set is then evaluated once more, for the fit's accuracy: an
 * evaluation the time limit forced, after an epoch cut short or off the
 * schedule, never counts as reaching the target, which the schedule would
 * not have seen then; target_at_deadline says it would have). */
typedef struct tb_fit_stats {
    int epochs;               /* epochs trained (the last one maybe cut short) */
    int evaluations;
    double last_accuracy, best_accuracy;
    int reached_target;
    double time_to_target_s;  /* wall time from the start to the evaluation that
                                 reached the target; < 0 when not reached */
    const char *stopped_by;   /* "epochs", "target" or "time" */
    int target_at_deadline;   /* 1: an evaluation the time limit forced was at
                                 or past the target (not counted as reached) */
    double train_s, eval_s, total_s;
} tb_fit_stats;

/* on_epoch, when not NULL, sees each epoch's stats and its evaluation
 * (NULL when that epoch was not evaluated). */
typedef void (*tb_fit_epoch_fn)(const tb_epoch_stats *es, const tb_eval_stats *ev, void *user);
int tb_trainer_fit(tb_trainer *t, tb_fit_stats *st, tb_fit_epoch_fn on_epoch, void *user);

/* Writes the --trace timeline collected so far (no-op when off). */
int tb_trainer_write_trace(tb_trainer *t);

/* The whole test set in evaluation mode. With --eval-no-grad the training
 * activations are freed and stay freed after it (the next training step
 * allocates them again), so that evaluations in a row reuse the no_grad
 * scratch. */
int tb_trainer_evaluate(tb_trainer *t, tb_eval_stats *st);

/* For checks and one-off runs that want only the statistics: builds a
 * trainer for cfg, trains epoch 0 (*es), evaluates the test set when ev is
 * not NULL (*ev), and destroys the trainer. cfg is validated here (its
 * recipe values are resolved in place). train and test: datasets the caller
 * owns, or both NULL for those cfg names (as tb_trainer_create).
 * Errors: tb_config_validate's, the trainer's, tb_train_epoch's, tb_trainer_evaluate's. */
int tb_trainer_one_epoch(tb_config *cfg, tb_backend *be, const tb_dataset *train,
                         const tb_dataset *test, tb_epoch_stats *es, tb_eval_stats *ev);

#ifdef __cplusplus
}
#endif
#endif
