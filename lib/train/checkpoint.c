/*
 * checkpoint.c - see checkpoint.h.
 */
#include "lib/train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/atomic_file.h"

/* count floats of device buffer src through host memory into f. */
static int write_device(tb_backend *be, FILE *f, const float *src, size_t count, float *tmp,
                        const char *path)
{
    TB_TRY(be->copy_d2h(be, tmp, src, count * sizeof(float), NULL));
    TB_CHECK_IO(fwrite(tmp, sizeof(float), count, f) != count, "cannot write %s", path);
    return TB_OK;
}

int tb_checkpoint_save(const tb_model *m, const tb_optim *o, int writer_rank, int world_size,
                    const char *path)
{
    tb_backend *be = m->ctx.be;
    const float *states[2] = {NULL, NULL};
    uint32_t nstate = 0;
    if (o->count > 0 && o->views[0].state1)
        states[nstate++] = o->views[0].state1;
    if (o->count > 0 && o->views[0].state2)
        states[nstate++] = o->views[0].state2;
    tb_checkpoint_header h = {.writer_rank = (uint32_t)writer_rank,
                              .world_size = (uint32_t)world_size,
                              .step = (uint64_t)o->hp.step, .numel = m->numel, .nstate = nstate};
    memcpy(h.magic, TB_CHECKPOINT_MAGIC, sizeof h.magic);
    float *tmp = malloc(m->numel * sizeof(float));
    if (!tmp)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory writing %s", path);
    tb_atomic_file af;
    int rc;
    TB_TRY_GOTO(rc, tb_atomic_open(&af, path), out_free);
    if (fwrite(&h, sizeof h, 1, af.fp) != 1) {
        rc = TB_FAIL(TB_ERR_IO, "cannot write %s", path);
        goto out_abort;
    }
    TB_TRY_GOTO(rc, write_device(be, af.fp, m->flat_w, m->numel, tmp, path), out_abort);
    for (uint32_t k = 0; k < nstate; k++)
        TB_TRY_GOTO(rc, write_device(be, af.fp, states[k], m->numel, tmp, path), out_abort);
    rc = tb_atomic_commit(&af);
out_abort:
    tb_atomic_abort(&af);
out_free:
    free(tmp);
    return rc;
}
