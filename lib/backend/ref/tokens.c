/*
 * tokens.c - plain double-precision token and position embedding: see
 * lib/backend/ref/tokens.h. Tested by lib/backend/cpu/tokens_test.c (which
 * also checks the double versions against finite differences of the
 * forward).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/backend/ref/tokens.h"
#include "lib/core/status.h"

static int check_args(const char *op, const int32_t *tokens, int rows, int seq, int d, int vocab)
{
    if (rows < 0 || seq < 1 || d < 1 || vocab < 1)
        return TB_FAIL(TB_ERR_INVALID, "%s (reference): rows %d, seq %d, d %d, vocab %d", op,
                       rows, seq, d, vocab);
    for (int r = 0; r < rows; r++)
        if (tokens[r] < 0 || tokens[r] >= vocab)
            return TB_FAIL(TB_ERR_INVALID, "%s (reference): token %d of row %d is not in [0, %d)",
                           op, (int)tokens[r], r, vocab);
    return TB_OK;
}

void tb_ref_embedding_fwd_f64(const int32_t *tokens, const double *wte, const double *wpe,
                              int rows, int seq, int d, double *y)
{
    for (int r = 0; r < rows; r++) {
        const double *te = wte + (size_t)tokens[r] * d, *pe = wpe + (size_t)(r % seq) * d;
        for (int c = 0; c < d; c++)
            y[(size_t)r * d + c] = te[c] + pe[c];
    }
}

void tb_ref_embedding_bwd_f64(const int32_t *tokens, const double *dy, int rows, int seq, int d,
                              int vocab, double *dwte, int accumulate_wte, double *dwpe,
                              int accumulate_wpe)
{
    if (!accumulate_wte)
        memset(dwte, 0, sizeof *dwte * (size_t)vocab * d);
    if (!accumulate_wpe)
        memset(dwpe, 0, sizeof *dwpe * (size_t)seq * d);
    for (int r = 0; r < rows; r++) {
        double *te = dwte + (size_t)tokens[r] * d, *pe = dwpe + (size_t)(r % seq) * d;
        for (int c = 0; c < d; c++) {
            te[c] += dy[(size_t)r * d + c];
            pe[c] += dy[(size_t)r * d + c];
        }
    }
}

int tb_ref_embedding_fwd(const int32_t *tokens, const float *wte, const float *wpe, int rows,
                         int seq, int d, int vocab, float *y)
{
    TB_TRY(check_args("embedding_fwd", tokens, rows, seq, d, vocab));
    for (int r = 0; r < rows; r++) {
        const float *te = wte + (size_t)tokens[r] * d, *pe = wpe + (size_t)(r % seq) * d;
        for (int c = 0; c < d; c++)
            y[(size_t)r * d + c] = (float)((double)te[c] + (double)pe[c]);
    }
    return TB_OK;
}

/* Sums in double tables, then rounds each element once. */
int tb_ref_embedding_bwd(const int32_t *tokens, const float *dy, int rows, int seq, int d,
                         int vocab, float *dwte, int accumulate_wte, float *dwpe,
                         int accumulate_wpe)
{
    TB_TRY(check_args("embedding_bwd", tokens, rows, seq, d, vocab));
    size_t nte = (size_t)vocab * d, npe = (size_t)seq * d, ndy = (size_t)rows * d;
    double *te = malloc(sizeof *te * nte), *pe = malloc(sizeof *pe * npe);
    double *g = malloc(sizeof *g * (ndy ? ndy : 1));
    int rc = TB_OK;
    if (!te || !pe || !g) {
        rc = TB_FAIL(TB_ERR_NOMEM, "embedding_bwd (reference): out of host memory for %zu "
                     "doubles", nte + npe + ndy);
        goto out_free;
    }
    for (size_t i = 0; i < nte; i++)
        te[i] = accumulate_wte ? dwte[i] : 0.0;
    for (size_t i = 0; i < npe; i++)
        pe[i] = accumulate_wpe ? dwpe[i] : 0.0;
    for (size_t i = 0; i < ndy; i++)
        g[i] = dy[i];
    tb_ref_embedding_bwd_f64(tokens, g, rows, seq, d, vocab, te, 1, pe, 1);
    for (size_t i = 0; i < nte; i++)
        dwte[i] = (float)te[i];
    for (size_t i = 0; i < npe; i++)
        dwpe[i] = (float)pe[i];
out_free:
    free(g);
    free(pe);
    free(te);
    return rc;
}
