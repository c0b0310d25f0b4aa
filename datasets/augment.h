/*
 * augment.h - per-sample augmentation and normalization into float32 CHW.
 *
 * The torchvision pipeline the tuning guides use for small images:
 * RandomCrop(size, padding=pad) with zero padding, RandomHorizontalFlip(),
 * ToTensor(), Normalize(mean, std). The crop offsets and the flip of a
 * sample are drawn from tb_rng_make(seed, epoch, index, TB_RNG_AUGMENT) only
 * (lib/core/rng.h): the same sample in the same epoch gets the same bytes whatever
 * thread or process builds it and in whatever order.
 *
 * Tests: bazel test //datasets:augment_test
 */
#ifndef TB_AUGMENT_H
#define TB_AUGMENT_H

#include <stdint.h>

#include "datasets/dataset.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_augment_cfg {
    int enabled;   /* 0: no crop, no flip, only normalize (the test set) */
    int pad;       /* random crop with this much zero padding; 0 = no crop */
    int flip;      /* random horizontal flip with probability 1/2 */
    int normalize; /* 1: (x/255 - mean) / std with the dataset's mean/std;
                      0: x/255 */
} tb_augment_cfg;

/* What augmentation decided for one sample. */
typedef struct tb_augment_params {
    int dy, dx;    /* crop origin in the padded image, each in [0, 2*pad] */
    int flip;      /* 1: mirrored left-right after the crop */
} tb_augment_params;

/* Training defaults for ds: pad 2 for images up to 28 pixels wide (the
 * Fashion-MNIST convention), 4 above (the CIFAR one); flip on; normalize. */
tb_augment_cfg tb_augment_train_defaults(const tb_dataset *ds);
/* Evaluation: no crop or flip, normalize. */
tb_augment_cfg tb_augment_eval_defaults(void);

/* The crop and flip for (seed, epoch, index); all zero when disabled. */
tb_augment_params tb_augment_draw(const tb_augment_cfg *cfg, uint64_t seed, int epoch, int index);

/* Writes sample `index` of ds, cropped, flipped and normalized as p says,
 * to out: float (C, H, W). Pixels the crop takes from the padding are 0
 * before normalization, as torchvision pads. REQUIRES: 0 <= index < ds->n,
 * ds held in memory (ds->images). */
void tb_augment_apply(const tb_augment_cfg *cfg, const tb_dataset *ds, int index,
                   const tb_augment_params *p, float *out);

/* tb_augment_apply for pixels held elsewhere: px is one sample (c, h, w)
 * of ds's shape (an on-the-fly sample made by tb_dataset_image); ds gives
 * the shape, mean and std. */
void tb_augment_pixels(const tb_augment_cfg *cfg, const tb_dataset *ds, const uint8_t *px,
                       const tb_augment_params *p, float *out);

/* tb_augment_draw then tb_augment_apply. REQUIRES: ds held in memory. */
void tb_augment_sample(const tb_augment_cfg *cfg, const tb_dataset *ds, uint64_t seed, int epoch,
                    int index, float *out);

#ifdef __cplusplus
}
#endif
#endif
