/*
 * tokens.c - selfcheck's checks of the token-model embedding slots
 * (embedding_fwd, embedding_bwd) against lib/backend/ref/tokens.h, at odd
 * widths, repeated tokens (vocab below the rows), a width past one CUDA
 * column tile (256) and a vocabulary split into many CUDA buckets, each
 * accumulate flag both ways.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 *
 * Tolerances (lib/selfcheck/internal.h): the forward is one float add on
 * both sides, and the reference's double add of two floats rounds to the
 * same float: TOL_EXACT. The backward's float sums (in rows order) against
 * the reference's double sums: TOL_SUM. Every case reads a position table
 * one row longer than seq (the op must not need it) and starts write-mode
 * gradients as NaN (the op must not read them).
 */
#include <stdint.h>

#include "lib/backend/ref/tokens.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

typedef struct emb_shape {
    int batch, seq, d, vocab;
} emb_shape;

static const emb_shape emb_shapes[] = {
    {1, 1, 1, 1},
    {2, 7, 33, 5},      /* tokens repeat */
    {2, 9, 300, 37},    /* two CUDA column tiles, the second partly idle */
    {3, 65, 100, 2053}, /* hundreds of CUDA vocabulary buckets */
};
#define N_EMB_SHAPES (sizeof emb_shapes / sizeof emb_shapes[0])

static int emb_tokens(sc_ctx *sc, int rows, int vocab, int32_t **host, int32_t **dev)
{
    TB_TRY(sc_host(sc, (void **)host, (size_t)rows * sizeof **host));
    for (int r = 0; r < rows; r++)
        (*host)[r] = (int32_t)(tb_rng_next_u64(&sc->rng) % (uint64_t)vocab);
    return sc_upload(sc, (void **)dev, *host, (size_t)rows * sizeof **host);
}

static int emb_fwd_one(sc_ctx *sc, const emb_shape *s)
{
    tb_backend *be = sc->be;
    int rows = s->batch * s->seq;
    size_t ny = (size_t)rows * s->d;
    int32_t *tok, *dtok;
    float *wte, *dwte, *wpe, *dwpe, *y, *dy;
    TB_TRY(emb_tokens(sc, rows, s->vocab, &tok, &dtok));
    TB_TRY(sc_randf(sc, &wte, &dwte, (size_t)s->vocab * s->d, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &wpe, &dwpe, (size_t)(s->seq + 1) * s->d, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &y, &dy, ny));
    TB_TRY(tb_ref_embedding_fwd(tok, wte, wpe, rows, s->seq, s->d, s->vocab, y));
    sc_case c;
    sc_case_start(&c, "B=%d T=%d d=%d vocab=%d", s->batch, s->seq, s->d, s->vocab);
    return SC_FINISH(sc, &c,
                     be->embedding_fwd(be, dtok, dwte, dwpe, rows, s->seq, s->d, s->vocab, dy),
                     0, {"y", y, dy, ny, TOL_EXACT});
}

static int emb_bwd_case(sc_ctx *sc, const emb_shape *s, int acc_wte, int acc_wpe)
{
    tb_backend *be = sc->be;
    int rows = s->batch * s->seq;
    size_t nte = (size_t)s->vocab * s->d, npe = (size_t)s->seq * s->d;
    int32_t *tok, *dtok;
    float *g, *dg, *wte, *owte, *wpe, *owpe;
    TB_TRY(emb_tokens(sc, rows, s->vocab, &tok, &dtok));
    TB_TRY(sc_randf(sc, &g, &dg, (size_t)rows * s->d, -1.0f, 1.0f));
    TB_TRY(sc_inoutf(sc, &wte, &owte, nte, acc_wte));
    TB_TRY(sc_inoutf(sc, &wpe, &owpe, npe, acc_wpe));
    TB_TRY(tb_ref_embedding_bwd(tok, g, rows, s->seq, s->d, s->vocab, wte, acc_wte, wpe,
                                acc_wpe));
    sc_case c;
    sc_case_start(&c, "B=%d T=%d d=%d vocab=%d accumulate_wte=%d accumulate_wpe=%d", s->batch,
                  s->seq, s->d, s->vocab, acc_wte, acc_wpe);
    TB_TRY(SC_FINISH(sc, &c,
                     be->embedding_bwd(be, dtok, dg, rows, s->seq, s->d, s->vocab, owte,
                                       acc_wte, owpe, acc_wpe), 0,
                     {"dwte", wte, owte, nte, TOL_SUM}, {"dwpe", wpe, owpe, npe, TOL_SUM}));
    return sc_release(sc);
}

int check_embedding_fwd(sc_ctx *sc)
{
    for (size_t i = 0; i < N_EMB_SHAPES; i++) {
        TB_TRY(emb_fwd_one(sc, &emb_shapes[i]));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_embedding_bwd(sc_ctx *sc)
{
    for (size_t i = 0; i < N_EMB_SHAPES; i++)
        for (int acc = 0; acc < 4; acc++)
            TB_TRY(emb_bwd_case(sc, &emb_shapes[i], acc & 1, acc >> 1));
    return TB_OK;
}
