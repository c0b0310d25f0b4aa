/* loss_scaler.c - see loss_scaler.h. */
#include "lib/nn/loss_scaler.h"

#include "lib/core/status.h"

int tb_loss_scaler_init(tb_loss_scaler *s, tb_backend *be)
{
    *s = (tb_loss_scaler){
        .scale = 65536.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
        .growth_interval = 2000, .be = be,
    };
    return be->dev_alloc(be, (void **)&s->count_dev, sizeof(float));
}

void tb_loss_scaler_free(tb_loss_scaler *s)
{
    if (s->count_dev)
        s->be->dev_free(s->be, s->count_dev);
    s->count_dev = NULL;
}

void tb_loss_scaler_apply(tb_loss_scaler *s, long nonfinite, int *skip)
{
    s->steps++;
    *skip = nonfinite > 0;
    if (*skip) {
        s->scale *= s->backoff_factor;
        s->good_steps = 0;
        s->skipped_steps++;
        return;
    }
    if (++s->good_steps >= s->growth_interval) {
        s->scale *= s->growth_factor;
        s->good_steps = 0;
    }
}

int tb_loss_scaler_update(tb_loss_scaler *s, const float *grads, size_t n, int *skip)
{
    tb_backend *be = s->be;
    float count = 0;
    TB_TRY(be->count_nonfinite(be, grads, n, s->count_dev));
    TB_TRY(be->copy_d2h(be, &count, s->count_dev, sizeof count, NULL));
    tb_loss_scaler_apply(s, (long)count, skip);
    return TB_OK;
}
