/*
 * augment.c - random crop with zero padding, horizontal flip, normalize.
 * See augment.h. Tests: bazel test //datasets:augment_test
 */
#include "datasets/augment.h"

#include "kernels/augment_math.h"
#include "lib/core/rng.h"

tb_augment_cfg tb_augment_train_defaults(const tb_dataset *ds)
{
    tb_augment_cfg cfg = {.enabled = 1, .pad = ds->w <= 28 ? 2 : 4, .flip = 1, .normalize = 1};
    return cfg;
}

tb_augment_cfg tb_augment_eval_defaults(void)
{
    tb_augment_cfg cfg = {.enabled = 0, .pad = 0, .flip = 0, .normalize = 1};
    return cfg;
}

tb_augment_params tb_augment_draw(const tb_augment_cfg *cfg, uint64_t seed, int epoch, int index)
{
    tb_augment_params p = {0, 0, 0};
    if (!cfg->enabled)
        return p;
    /* Always three draws in the same order, so turning flip off does not
     * change the crops. */
    tb_rng r = tb_rng_make(seed, (uint64_t)epoch, (uint64_t)index, TB_RNG_AUGMENT);
    uint32_t span = (uint32_t)(cfg->pad > 0 ? 2 * cfg->pad + 1 : 1);
    p.dy = (int)tb_rng_below(&r, span);
    p.dx = (int)tb_rng_below(&r, span);
    int flip = (int)(tb_rng_next_u64(&r) >> 63);
    p.flip = cfg->flip ? flip : 0;
    return p;
}

/* One channel, pixel by pixel through kernels/augment_math.h (the device
 * path's math): out(y, x) = padded(y + dy, xf + dx), xf = flip ? W-1-x : x. */
static void crop_channel(const uint8_t *src, int h, int w, int pad, const tb_augment_params *p,
                         float scale, float bias, float *out)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            out[(size_t)y * w + x] =
                tb_augment_pixel(src, h, w, pad, p->dy, p->dx, p->flip, scale, bias, y, x);
}

void tb_augment_pixels(const tb_augment_cfg *cfg, const tb_dataset *ds, const uint8_t *px,
                       const tb_augment_params *p, float *out)
{
    size_t plane = (size_t)ds->h * ds->w;
    int pad = cfg->enabled ? cfg->pad : 0;
    for (int ch = 0; ch < ds->c; ch++) {
        float scale, bias;
        tb_augment_norm(cfg->normalize, ds->mean[ch], ds->std[ch], &scale, &bias);
        crop_channel(px + ch * plane, ds->h, ds->w, pad, p, scale, bias, out + ch * plane);
    }
}

void tb_augment_apply(const tb_augment_cfg *cfg, const tb_dataset *ds, int index,
                   const tb_augment_params *p, float *out)
{
    tb_augment_pixels(cfg, ds, ds->images + (size_t)index * ds->c * ds->h * ds->w, p, out);
}

void tb_augment_sample(const tb_augment_cfg *cfg, const tb_dataset *ds, uint64_t seed, int epoch,
                    int index, float *out)
{
    tb_augment_params p = tb_augment_draw(cfg, seed, epoch, index);
    tb_augment_apply(cfg, ds, index, &p, out);
}
