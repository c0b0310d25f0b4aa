/*
 * ops_common.c - the CPU backend's own-kernel op families (every op slot of
 * lib/backend/backend.h except gelu_* (gelu.c), gemm and conv_* (dnnl.c),
 * layernorm_* (layernorm.c), attention_* (attention.c), cast_* (cast.c), embedding_*
 * (tokens.c)): their shared scratch memory and the one call that installs
 * them all.
 *
 *   elementwise.c  relu_fwd/bwd, add, axpby, bias_add
 *   reduce.c       bias_grad, reduce_sum, count_nonfinite
 *   dropout.c      dropout_fwd/bwd
 *   batchnorm.c    bn_fwd_train, bn_fwd_infer, bn_bwd (NCHW and NHWC)
 *   pool.c         pool_fwd/bwd, max (with argmax) and average (NCHW, NHWC)
 *   xent.c         softmax_xent_fwd/bwd, xent_lse_fwd/bwd
 *   optim.c        opt_step: SGD and AdamW, per tensor or fused; LARS, LAMB
 *                  and NovoGrad
 */
#include <stdlib.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

int tb_cpu_install_ops(tb_backend *be)
{
    tb_cpu_ctx *c = be->ctx;
    if (!c->ops) {
        c->ops = calloc(1, sizeof(cpu_ops_ws));
        if (!c->ops)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the CPU op workspaces");
    }
    tb_cpu_install_elementwise(be);
    tb_cpu_install_reduce(be);
    tb_cpu_install_dropout(be);
    tb_cpu_install_batchnorm(be);
    tb_cpu_install_pool(be);
    tb_cpu_install_xent(be);
    tb_cpu_install_optim(be);
    return TB_OK;
}

void tb_cpu_release_ops(tb_backend *be)
{
    tb_cpu_ctx *c = be->ctx;
    cpu_ops_ws *w = c->ops;
    if (!w)
        return;
    free(w->tmp);
    free(w->off);
    free(w->lb);
    free(w);
    c->ops = NULL;
}
