/*
 * tensor.h - fp32 tensors owned by a backend.
 *
 * A tensor is a (n, c, h, w) block of device memory (host memory on the CPU
 * backend) plus its shape and layout. Layers allocate their activations once
 * for the largest batch (cap_n) and then run with any n <= cap_n, so a
 * smaller last batch needs no allocation. Memory goes through be->dev_alloc,
 * so the backend's allocator counts it (the batch-size sweep's --mem-limit).
 * A tensor holds fp32, or bf16 where autocast keeps activations in low
 * precision (dtype; lib/nn/amp.h: the conv trunk's activations when the
 * backend has low-precision activations; data then points at 2-byte
 * elements). layout says whether a (n, c, h, w) tensor is stored NCHW or
 * NHWC (channels last: layers set it, tb_tensor_alloc gives NCHW). The
 * shape fields are logical either way.
 *
 * Tests: through bazel test //lib/nn:layers_test.
 */
#ifndef TB_TENSOR_H
#define TB_TENSOR_H

#include <stddef.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_tensor {
    tb_backend *be;    /* owner of data; NULL for an empty tensor */
    float *data;       /* (n, c, h, w) in `layout`, device memory */
    int n, c, h, w;    /* current shape; n <= cap_n */
    int cap_n;         /* batch the allocation holds */
    tb_layout layout;
    tb_dtype dtype;
    int owned;         /* 1: tb_tensor_free releases data */
} tb_tensor;

/* Elements of the current shape: n * c * h * w. */
static inline size_t tb_tensor_numel(const tb_tensor *t)
{
    return (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

/* Elements per sample: c * h * w. */
static inline size_t tb_tensor_sample_numel(const tb_tensor *t)
{
    return (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

/* Bytes of one element of dtype (TB_F32, TB_I32: 4; TB_BF16, TB_F16: 2). */
static inline size_t tb_dtype_bytes(tb_dtype dtype)
{
    return dtype == TB_BF16 || dtype == TB_F16 ? 2 : 4;
}

/* Allocates an fp32 NCHW tensor of (n, c, h, w) on be; contents undefined.
 * REQUIRES: n, c, h, w > 0. Errors: TB_ERR_INVALID, TB_ERR_DEVICE_OOM. */
int tb_tensor_alloc(tb_backend *be, int n, int c, int h, int w, tb_tensor *t);
/* The same in dtype (tb_dtype_bytes an element). */
int tb_tensor_alloc_as(tb_backend *be, int n, int c, int h, int w, tb_dtype dtype,
                       tb_tensor *t);

/* Bytes the allocation holds: cap_n samples of the shape in t's dtype. */
static inline size_t tb_tensor_cap_bytes(const tb_tensor *t)
{
    return (size_t)t->cap_n * t->c * t->h * t->w * tb_dtype_bytes(t->dtype);
}

/* Releases an owned tensor's memory and empties it; a no-op on an empty or
 * borrowed tensor. */
void tb_tensor_free(tb_tensor *t);

/* A non-owning tensor over existing device memory of be. */
tb_tensor tb_tensor_view(tb_backend *be, float *data, int n, int c, int h, int w);

/* Sets the batch of the current shape. REQUIRES: 0 < n <= t->cap_n. */
int tb_tensor_set_batch(tb_tensor *t, int n);

/* Copies the current shape's elements to / from host memory (synchronous).
 * REQUIRES: host holds tb_tensor_numel(t) floats. */
int tb_tensor_to_host(const tb_tensor *t, float *host);
int tb_tensor_from_host(tb_tensor *t, const float *host);

/* dst (n, h, w, c) = src (n, c, h, w), host memory (channels last's input
 * conversion; PyTorch's x.to(memory_format=torch.channels_last)). */
void tb_tensor_host_nchw_to_nhwc(const float *src, float *dst, int n, int c, int h, int w);

/* Sets every element of the current shape to zero. */
int tb_tensor_zero(tb_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
