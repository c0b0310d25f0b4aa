/*
 * ddp_sim_test.c - DDP's overlap measured on the CUDA-semantics sim backend
 * (lib/backend/sim/sim.h), whose communicator (comm_sim.h) runs each
 * all-reduce on a side stream for 100 ms after the compute stream reaches
 * the bucket's gradients, as NCCL does on a GPU.
 *
 * With overlap on, the bucket of the first layer's gradients can only start
 * once the compute stream has finished backward, so at least one 100 ms
 * all-reduce runs after backward ends: the step's exposed communication
 * is about 100 ms or more, less only by how late the host thread wakes from
 * its wait for the compute stream; the test asks for half (a bound set by
 * the injected sleep, not a speed). A backward timed up to a device-wide
 * sync waits for every all-reduce as well, and then exposed reads ~0.
 * Also: the gradients after finish are the ones a plain backward gives
 * (one rank: the all-reduce leaves them as they are), to the bit.
 *
 * Run: bazel test //lib/dist:ddp_sim_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/sim/sim.h"
#include "lib/core/rng.h"
#include "lib/core/testing.h"
#include "lib/dist/comm_sim.h"
#include "lib/dist/ddp.h"
#include "lib/dist/dp.h"

#define MB 8
#define DELAY_S 0.1

typedef struct batch {
    float images[MB * 28 * 28];
    int32_t labels[MB];
} batch;

static void make_batch(batch *b)
{
    tb_rng r = tb_rng_seeded(11);
    for (size_t i = 0; i < sizeof b->images / sizeof b->images[0]; i++)
        b->images[i] = 2.0f * tb_rng_float01(&r) - 1.0f;
    for (int i = 0; i < MB; i++)
        b->labels[i] = (int32_t)tb_rng_below(&r, 10);
}

/* Forward and loss of b on m (gradients set to none before). */
static int forward(tb_model *m, const batch *b, tb_tensor *x, int32_t *labels)
{
    tb_backend *be = m->ctx.be;
    TB_TRY(tb_tensor_from_host(x, b->images));
    TB_TRY(be->copy_h2d(be, labels, b->labels, sizeof b->labels, NULL));
    TB_TRY(tb_model_zero_grad(m, 1));
    return tb_model_forward_loss(m, x, labels, NULL);
}

static int read_grads(tb_model *m, float **out)
{
    *out = malloc(m->numel * sizeof **out);
    if (!*out)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the gradients");
    return m->ctx.be->copy_d2h(m->ctx.be, *out, m->flat_g, m->numel * sizeof(float), NULL);
}

static int run(tb_backend *be, float **plain, float **ddp_g, size_t *numel, tb_ddp_step *step,
               int *nbuckets)
{
    tb_dp_check_net net = {0};
    tb_comm *comm = NULL;
    tb_ddp *d = NULL;
    tb_tensor x = {0};
    int32_t *labels = NULL;
    batch *b = malloc(sizeof *b);
    int rc;
    if (!b)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the batch");
    make_batch(b);
    TB_TRY_GOTO(rc, tb_dp_check_net_build(be, MB, &net), out_free);
    TB_TRY_GOTO(rc, tb_comm_sim_create(be, DELAY_S, &comm), out_free);
    tb_ddp_opts o = {.bucket_bytes = 64 << 10, .overlap = 1};
    TB_TRY_GOTO(rc, tb_ddp_create(comm, net.m, &o, &d), out_free);
    TB_TRY_GOTO(rc, tb_tensor_alloc(be, MB, 1, 28, 28, &x), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&labels, sizeof b->labels), out_free);
    TB_TRY_GOTO(rc, forward(net.m, b, &x, labels), out_free);
    TB_TRY_GOTO(rc, tb_model_backward(net.m, 1.0f), out_free);
    TB_TRY_GOTO(rc, read_grads(net.m, plain), out_free);
    TB_TRY_GOTO(rc, forward(net.m, b, &x, labels), out_free);
    TB_TRY_GOTO(rc, tb_ddp_backward(d, 1.0f, 1), out_free);
    TB_TRY_GOTO(rc, tb_ddp_finish(d), out_free);
    TB_TRY_GOTO(rc, read_grads(net.m, ddp_g), out_free);
    *step = d->step;
    step->trace = NULL;
    *nbuckets = d->nbuckets;
    *numel = net.m->numel;
out_free:
    if (labels)
        be->dev_free(be, labels);
    tb_tensor_free(&x);
    tb_ddp_destroy(d);
    {
        /* the sim communicator's destroy reports its side stream's failures */
        int drc = tb_comm_destroy(comm);
        if (rc == TB_OK && drc != TB_OK)
            rc = drc;
    }
    tb_dp_check_net_free(&net);
    free(b);
    return rc;
}

int main(void)
{
    tb_backend *be = NULL;
    float *plain = NULL, *ddp_g = NULL;
    tb_ddp_step step = {0};
    int nb = 0;
    size_t numel = 0;
    CHECK_OK(tb_backend_sim_create(1, &be));
    if (!be)
        return tb_test_exit(tb_error_last());
    int rc = run(be, &plain, &ddp_g, &numel, &step, &nb);
    CHECK(rc == TB_OK, "the DDP step failed: %s", tb_error_message());
    if (rc == TB_OK) {
        printf("%d buckets, backward %.1f ms, all-reduce %.1f ms, exposed %.1f ms "
               "(each all-reduce %.0f ms)\n", nb, 1e3 * step.backward_s,
               1e3 * step.allreduce_s, 1e3 * step.exposed_s, 1e3 * DELAY_S);
        CHECK(nb >= 2, "the small CNN in 64 KiB buckets: %d buckets, want several", nb);
        CHECK(step.exposed_s >= 0.5 * DELAY_S, "exposed communication %.1f ms < half of one "
              "all-reduce (%.0f ms) that can only start after backward: backward's time "
              "waited for the communication", 1e3 * step.exposed_s, 1e3 * DELAY_S);
        CHECK(memcmp(plain, ddp_g, numel * sizeof(float)) == 0,
              "DDP's gradients on one rank are the plain backward's, to the bit");
    }
    free(plain);
    free(ddp_g);
    be->destroy(be);
    return tb_test_exit(TB_OK);
}
