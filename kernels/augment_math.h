/*
 * augment_math.h - the per-pixel math of random crop (zero padding),
 * horizontal flip and normalization, shared by datasets/augment.c (the
 * loader's CPU path) and kernels/augment.cu (--augment-on-device), so both
 * give the same bytes.
 *
 * A sample's crop origin (dy, dx) and flip come from its (seed, epoch,
 * index) through datasets/augment.c's tb_augment_draw on the host; the
 * device path uploads them (three int32 per sample) rather than running
 * the RNG in the kernel: B * 12 bytes a step, and one RNG.
 *
 * Normalization is one multiply and one add per pixel,
 * x * scale + bias with scale = 1/(255 std), bias = -mean/std
 * (tb_augment_norm); the multiply and the add are rounded separately on
 * both sides (TB_MUL/TB_ADD of kernels/host_device.h: __fmul_rn/__fadd_rn on the device, so
 * nvcc cannot contract them into an FMA that the host does not do).
 *
 * Tests: bazel test //datasets:augment_test (the refactor left
 * tb_augment_apply's bytes unchanged; this header gives the same bytes).
 */
#ifndef TB_AUGMENT_MATH_H
#define TB_AUGMENT_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/host_device.h"


/* (x/255 - mean)/std folded into x * scale + bias; normalize == 0: x/255. */
TB_HD void tb_augment_norm(int normalize, float mean, float std, float *scale, float *bias)
{
    float inv_std = normalize ? 1.0f / std : 1.0f;
    float m = normalize ? mean : 0.0f;
    *scale = inv_std / 255.0f;
    *bias = -m * inv_std;
}

/* Source column of output column x: mirrored first, then shifted by the
 * crop; may fall in the padding (< 0 or >= w). */
TB_HD int tb_augment_src_x(int x, int w, int pad, int dx, int flip)
{
    return (flip ? w - 1 - x : x) + dx - pad;
}

TB_HD int tb_augment_src_y(int y, int pad, int dy) { return y + dy - pad; }

/* Output pixel (y, x) of one channel plane src (h x w, uint8): the padded,
 * cropped, flipped source pixel, normalized; padding is 0 before
 * normalization (torchvision pads with zeros), so it becomes bias. */
TB_HD float tb_augment_pixel(const uint8_t *src, int h, int w, int pad, int dy, int dx,
                             int flip, float scale, float bias, int y, int x)
{
    int sy = tb_augment_src_y(y, pad, dy);
    int sx = tb_augment_src_x(x, w, pad, dx, flip);
    if (sy < 0 || sy >= h || sx < 0 || sx >= w)
        return bias;
    return TB_ADD(TB_MUL((float)src[(size_t)sy * w + sx], scale), bias);
}

#endif
