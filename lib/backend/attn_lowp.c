/* attn_lowp.c - see attn_lowp.h. */
#include "lib/backend/attn_lowp.h"

#include "lib/core/status.h"

static size_t hd_elems(const tb_attn_desc *d)
{
    return (size_t)d->batch * d->heads * d->seq * d->head_dim;
}

static size_t tt_elems(const tb_attn_desc *d)
{
    return (size_t)d->batch * d->heads * d->seq * d->seq;
}

int tb_attn_lowp_get(tb_backend *be, const tb_attn_desc *d, int n_hd, int n_tt,
                     tb_attn_lowp *m)
{
    *m = (tb_attn_lowp){0};
    if (d->lowp == TB_F32)
        return TB_OK;
    size_t hd = hd_elems(d), tt = tt_elems(d);
    TB_TRY(be->dev_alloc(be, (void **)&m->buf, sizeof(uint16_t) * (n_hd * hd + n_tt * tt)));
    uint16_t **slot[6] = {&m->q, &m->k, &m->v, &m->dout, &m->p, &m->ds};
    uint16_t *at = m->buf;
    for (int i = 0; i < n_hd; i++, at += hd)
        *slot[i] = at;
    for (int i = 0; i < n_tt; i++, at += tt)
        *slot[4 + i] = at;
    return TB_OK;
}

int tb_attn_lowp_put(tb_backend *be, tb_attn_lowp *m, int rc)
{
    int r = m->buf ? be->dev_free(be, m->buf) : TB_OK;
    return rc != TB_OK ? rc : r;
}

int tb_attn_lowp_cast(tb_backend *be, const tb_attn_desc *d, const float *x, uint16_t *lowp,
                      size_t n)
{
    return lowp ? be->cast_f32_to_lowp(be, d->lowp, x, lowp, n) : TB_OK;
}

size_t tb_attn_lowp_bytes(const tb_attn_desc *d)
{
    return d->lowp == TB_F32 ? 0 : sizeof(uint16_t) * (4 * hd_elems(d) + 2 * tt_elems(d));
}
