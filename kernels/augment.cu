/*
 * augment.cu - augmentation on the device (--augment-on-device): random
 * crop with zero padding, horizontal flip and normalization of a batch of
 * raw uint8 samples, and uint8 labels widened to int32 (--tensors-on-device).
 *
 * Variants: none. One thread per output element (grid-stride, launch.cuh);
 * each computes its (sample, channel, y, x) from its flat index in the
 * destination layout (NCHW or NHWC) and calls kernels/augment_math.h's
 * tb_augment_pixel, the function datasets/augment.c runs on the host, with
 * the sample's (dy, dx, flip) drawn on the host from (seed, epoch, index)
 * and uploaded (params). The bytes equal the loader's: the header's math is
 * checked against augment.c by //datasets:augment_test, and selfcheck
 * compares the slot with tb_augment_apply on a GPU.
 *
 * Reads are uint8 gathers from a window of the source plane; the kernel is
 * bound by the float writes (4 bytes per pixel out, 1 in).
 *
 * Build check (no GPU needed): bazel build //kernels:augment_cuda.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/augment.h"
#include "kernels/augment_math.h"
#include "kernels/launch.cuh"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

__global__ void augment_u8_kernel(tb_augment_desc d, const uint8_t *__restrict__ src,
                                  const int32_t *__restrict__ params, float *__restrict__ dst,
                                  size_t total)
{
    size_t plane = (size_t)d.h * d.w, sample = plane * d.c;
    TB_GRID_STRIDE(i, total) {
        size_t s = i / sample, r = i % sample;
        int ch, y, x;
        if (d.layout == TB_NHWC) {
            ch = (int)(r % d.c);
            size_t pix = r / d.c;
            y = (int)(pix / d.w);
            x = (int)(pix % d.w);
        } else {
            ch = (int)(r / plane);
            y = (int)(r % plane / d.w);
            x = (int)(r % d.w);
        }
        const int32_t *p = params + 3 * s;
        const uint8_t *in = src + s * sample + (size_t)ch * plane;
        dst[i] = tb_augment_pixel(in, d.h, d.w, d.pad, p[0], p[1], p[2], d.scale[ch],
                                  d.bias[ch], y, x);
    }
}

__global__ void labels_u8_to_i32_kernel(const uint8_t *__restrict__ src,
                                        int32_t *__restrict__ dst, size_t n)
{
    TB_GRID_STRIDE(i, n) dst[i] = (int32_t)src[i];
}

extern "C" int tb_cuda_augment_u8(const tb_augment_desc *d, const uint8_t *src,
                                  const int32_t *params, float *dst, int n, void *stream)
{
    size_t total = (size_t)n * d->c * d->h * d->w;
    if (total == 0)
        return TB_OK;
    augment_u8_kernel<<<tb_grid_for(total), TB_BLOCK, 0, (cudaStream_t)stream>>>(
        *d, src, params, dst, total);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_labels_u8_to_i32(const uint8_t *src, int32_t *dst, int n, void *stream)
{
    if (n <= 0)
        return TB_OK;
    labels_u8_to_i32_kernel<<<tb_grid_for((size_t)n), TB_BLOCK, 0, (cudaStream_t)stream>>>(
        src, dst, (size_t)n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
