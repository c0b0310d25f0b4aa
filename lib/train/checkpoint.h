/*
 * checkpoint.h - a minimal training checkpoint: the model's parameters and
 * the optimizer's full-size state buffers (momentum, Adam moments) in one
 * binary file, written atomically (lib/core/atomic_file.h: a temporary, fsync,
 * rename), so a reader never sees half a checkpoint.
 *
 * Layout (little-endian, as the host writes it):
 *   "TBCKPT1\n"                      8 bytes
 *   uint32 writer_rank, world_size   who wrote it (DDP: rank 0 alone)
 *   uint64 step                      optimizer steps taken
 *   uint64 numel                     floats per buffer
 *   uint32 nstate                    state buffers that follow the weights
 *   uint32 reserved (0)
 *   float weights[numel], then nstate x float state[numel]
 *
 * In data-parallel training every rank holds the same weights, so rank 0
 * alone writes (DDP's rule); bench/cmd/ddp_worker.c --checkpoint=PATH does that.
 *
 * Test: bazel test //lib/dist:checkpoint_test (2 ranks; only rank 0 wrote)
 */
#ifndef TB_CHECKPOINT_H
#define TB_CHECKPOINT_H

#include <stdint.h>

#include "lib/nn/model.h"
#include "lib/nn/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_CHECKPOINT_MAGIC "TBCKPT1\n"

typedef struct tb_checkpoint_header {
    char magic[8];
    uint32_t writer_rank, world_size;
    uint64_t step;
    uint64_t numel;
    uint32_t nstate;
    uint32_t reserved;
} tb_checkpoint_header;

/* Writes m's parameters and o's state to path atomically.
 * REQUIRES: path's directory exists; o was built for m. */
int tb_checkpoint_save(const tb_model *m, const tb_optim *o, int writer_rank, int world_size,
                    const char *path);

#ifdef __cplusplus
}
#endif
#endif
