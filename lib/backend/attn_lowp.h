/*
 * attn_lowp.h - the manual attention's operand copies under autocast
 * (tb_attn_desc.lowp, backend.h): one allocation from the backend's
 * allocator per call, as eager PyTorch's casts come from its caching
 * allocator, split into the 2-byte copies the call's products take. Built on
 * the backend's own slots (dev_alloc, cast_f32_to_lowp), so the CPU and CUDA
 * manual attentions share it.
 */
#ifndef TB_BACKEND_ATTN_LOWP_H
#define TB_BACKEND_ATTN_LOWP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/backend/backend.h"

typedef struct tb_attn_lowp {
    uint16_t *buf;
    uint16_t *q, *k, *v, *dout; /* (B*H, T, D) each, those the call needs */
    uint16_t *p, *ds;           /* (B*H, T, T) */
} tb_attn_lowp;

/* Copies for n_hd (B*H, T, D) operands (q, k, v, dout in that order) and
 * n_tt (B*H, T, T) ones (p, ds); all NULL when d->lowp is TB_F32. */
int tb_attn_lowp_get(tb_backend *be, const tb_attn_desc *d, int n_hd, int n_tt,
                     tb_attn_lowp *m);

/* Frees what tb_attn_lowp_get made; returns rc, or the free's failure. */
int tb_attn_lowp_put(tb_backend *be, tb_attn_lowp *m, int rc);

/* x's copy (n floats) in d->lowp; nothing when lowp is NULL. */
int tb_attn_lowp_cast(tb_backend *be, const tb_attn_desc *d, const float *x, uint16_t *lowp,
                      size_t n);

/* The backward's copies in bytes (q, k, v, dO; P, dS), the most a manual
 * call holds; 0 in fp32. */
size_t tb_attn_lowp_bytes(const tb_attn_desc *d);

#endif
