/*
 * ddp.c - selfcheck's one-rank DistributedDataParallel case (an entry of
 * sc_toggle_checks[], lib/selfcheck/toggles.c): the small CNN of
 * lib/dist/dp.h (tb_dp_check_net) trained 3 SGD steps through
 * lib/dist/ddp.h on one rank, gradients in 64 KiB buckets all-reduced
 * during backward (NCCL on a CUDA backend, MPI on the CPU backend), against
 * plain backward on the CPU. With one rank the all-reduce sums one
 * contribution and divides by 1: the loss after the steps is the CPU's
 * within the fp32 tolerance.
 *
 * MPI starts as a singleton (no mpirun) for the case and is finalized
 * after it; MPI cannot start again in the same process, so a later walk in
 * that process reports the case n/a, saying so.
 *
 *   bazel run //bench:selfcheck -- --device=cuda --only=ddp
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <stdint.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"
#include "lib/dist/comm.h"
#include "lib/dist/ddp.h"
#include "lib/dist/dp.h"
#include "lib/nn/tensor.h"
#include "lib/selfcheck/internal.h"

#define DDP_B 32
#define DDP_STEPS 3
#define DDP_BUCKET_BYTES ((size_t)64 << 10) /* several buckets over 517 KB of gradients */

typedef struct ddp_batch {
    float img[DDP_B * 784]; /* (B, 1, 28, 28) */
    int32_t lab[DDP_B];
} ddp_batch;

/* The loss of a forward after DDP_STEPS steps on be; comm NULL: plain
 * backward, else DDP over comm. */
static int net_loss(tb_backend *be, tb_comm *comm, const ddp_batch *b, double *loss)
{
    tb_dp_check_net net = {0};
    tb_ddp *ddp = NULL;
    tb_tensor x = {0};
    int32_t *lab = NULL;
    float l = 0;
    int rc;
    TB_TRY_GOTO(rc, tb_dp_check_net_build(be, DDP_B, &net), out_free);
    TB_TRY_GOTO(rc, tb_tensor_alloc(be, DDP_B, 1, 28, 28, &x), out_free);
    TB_TRY_GOTO(rc, tb_tensor_from_host(&x, b->img), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&lab, sizeof b->lab), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, lab, b->lab, sizeof b->lab, NULL), out_free);
    if (comm) {
        tb_ddp_opts o = {.bucket_bytes = DDP_BUCKET_BYTES, .overlap = 1};
        TB_TRY_GOTO(rc, tb_ddp_create(comm, net.m, &o, &ddp), out_free);
        TB_TRY_GOTO(rc, tb_ddp_broadcast_params(ddp), out_free);
    }
    for (int step = 0; step < DDP_STEPS; step++) {
        TB_TRY_GOTO(rc, tb_model_zero_grad(net.m, 1), out_free);
        TB_TRY_GOTO(rc, tb_model_forward_loss(net.m, &x, lab, NULL), out_free);
        if (ddp) {
            TB_TRY_GOTO(rc, tb_ddp_backward(ddp, 1.0f, 1), out_free);
            TB_TRY_GOTO(rc, tb_ddp_finish(ddp), out_free);
        } else {
            TB_TRY_GOTO(rc, tb_model_backward(net.m, 1.0f), out_free);
        }
        TB_TRY_GOTO(rc, tb_optim_step(&net.opt), out_free);
    }
    TB_TRY_GOTO(rc, tb_model_forward_loss(net.m, &x, lab, NULL), out_free);
    TB_TRY_GOTO(rc, tb_xent_read_loss(&net.m->loss, &l), out_free);
    *loss = l;
out_free:
    if (lab)
        be->dev_free(be, lab);
    tb_tensor_free(&x);
    tb_ddp_destroy(ddp);
    tb_dp_check_net_free(&net);
    return rc;
}

/* DDP's loss on be over a one-rank communicator: NCCL for a CUDA backend
 * (TB_ERR_UNSUPPORTED in a build without CUDA), MPI otherwise. */
static int ddp_loss(tb_backend *be, const ddp_batch *b, double *loss)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "DDP: MPI was finalized by an earlier walk in this "
                       "process and cannot start again: run this case in a process of its own "
                       "(--only=ddp)");
    tb_comm *mpi = NULL, *nccl = NULL;
    int rc;
    TB_TRY_GOTO(rc, tb_comm_mpi_init(NULL, NULL, 0, &mpi), out_free);
    if (strcmp(be->name, "cuda") == 0)
        TB_TRY_GOTO(rc, tb_comm_nccl_create(mpi, be, &nccl), out_free);
    rc = net_loss(be, nccl ? nccl : mpi, b, loss);
out_free:
    tb_comm_destroy(nccl);
    tb_comm_destroy(mpi);
    return rc;
}

int sc_step_ddp_one_rank(tb_backend *be, double *got, double *ref)
{
    static ddp_batch batch;
    tb_rng_fill(batch.img, (size_t)DDP_B * 784, 54321, -1, 1);
    for (int i = 0; i < DDP_B; i++)
        batch.lab[i] = (i * 3 + 1) % 10;
    TB_TRY(ddp_loss(be, &batch, got));
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = net_loss(cpu, NULL, &batch, ref);
    tb_backend_close(cpu);
    return rc;
}
