/*
 * model_build.h - private to lib/nn: what every model builder shares.
 * tb_model_build (model.c, from a description) and tb_model_build_gpt2
 * (model_gpt2.c, its own layer tree) both start a model shell, put their
 * root sequence in m->net, and finish it here: the parameters' flat buffers
 * and initial values, the activations, the loss. A builder of a token model
 * sets m->in_dtype and m->labels_per_sample before finishing.
 *
 * Tests: bazel test //lib/nn:layers_test //lib/nn:gpt2_test
 */
#ifndef TB_MODEL_BUILD_H
#define TB_MODEL_BUILD_H

#include "lib/nn/model.h"

/* A model with its layer context set from o (toggles, seed, layout, autocast,
 * GELU form), no layers yet: image defaults (TB_F32 input, one label per
 * sample, m->in = o->in). Errors: TB_ERR_INVALID (o->max_batch <= 0 or
 * o->classes <= 1), TB_ERR_NOMEM. Free with tb_model_destroy. */
int tb_model_shell_create(tb_backend *be, const tb_model_opts *o, tb_model **out);

/* With m->net built: marks checkpoints (o->checkpointing), binds every
 * parameter to the flat buffers and initializes them from o->seed,
 * allocates the activations for m->max_batch and the loss (the lse path
 * for token models: m->labels_per_sample > 1 or m->in_dtype == TB_I32).
 * On failure m is left for the caller to destroy. */
int tb_model_shell_finish(tb_model *m, const tb_model_opts *o);

#endif
