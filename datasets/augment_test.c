/*
 * augment_test.c - augmentation: crop and flip against a plain reference
 * (pad the image with zeros, cut the window, mirror it) for every offset and
 * flip on a small non-square 3-channel image; normalization values; the
 * draws' ranges; determinism (same (seed, epoch, index) gives the same bytes,
 * another epoch other crops); eval mode is identity plus normalization;
 * the per-pixel math moved to kernels/augment_math.h leaves tb_augment_apply's
 * bytes as they were (a copy of the old formulas) and equals the header's
 * per-element path that kernels/augment.cu runs.
 * Run: bazel test //datasets:augment_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "kernels/augment_math.h"
#include "lib/core/testing.h"

/* The reference: torchvision's RandomCrop(padding=pad) then HFlip, then
 * ToTensor + Normalize, written the slow obvious way. */
static void reference(const tb_dataset *ds, int index, int pad, const tb_augment_params *p,
                      float *out)
{
    int H = ds->h, W = ds->w, PH = H + 2 * pad, PW = W + 2 * pad;
    float *padded = calloc((size_t)PH * PW, sizeof *padded);
    for (int ch = 0; ch < ds->c; ch++) {
        memset(padded, 0, (size_t)PH * PW * sizeof *padded);
        const uint8_t *src = ds->images + ((size_t)index * ds->c + ch) * H * W;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                padded[(y + pad) * PW + x + pad] = src[y * W + x];
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float v = padded[(y + p->dy) * PW + x + p->dx];   /* crop */
                int ox = p->flip ? W - 1 - x : x;                  /* then flip */
                out[(ch * H + y) * W + ox] = (v / 255.0f - ds->mean[ch]) / ds->std[ch];
            }
    }
    free(padded);
}

static tb_dataset *tiny(void)
{
    tb_dataset *ds = NULL;
    if (tb_dataset_alloc(2, 3, 4, 5, 10, &ds) != TB_OK)
        return NULL;
    for (int i = 0; i < 2 * 3 * 4 * 5; i++)
        ds->images[i] = (uint8_t)(10 + i * 2);
    ds->labels[0] = 1;
    ds->labels[1] = 2;
    float m[3] = {0.1f, 0.4f, 0.5f}, s[3] = {0.2f, 0.3f, 0.25f};
    for (int ch = 0; ch < 3; ch++) {
        ds->mean[ch] = m[ch];
        ds->std[ch] = s[ch];
    }
    return ds;
}

static void test_crop_flip(void)
{
    printf("crop+flip matches the reference for every offset and flip (3x4x5, pad 2)\n");
    tb_dataset *ds = tiny();
    tb_augment_cfg cfg = {.enabled = 1, .pad = 2, .flip = 1, .normalize = 1};
    float got[60], want[60];
    int cases = 0;
    for (int index = 0; index < 2; index++)
        for (int dy = 0; dy <= 4; dy++)
            for (int dx = 0; dx <= 4; dx++)
                for (int flip = 0; flip <= 1; flip++) {
                    tb_augment_params p = {dy, dx, flip};
                    tb_augment_apply(&cfg, ds, index, &p, got);
                    reference(ds, index, 2, &p, want);
                    double err = 0;
                    for (int k = 0; k < 60; k++)
                        err = fmax(err, fabs(got[k] - want[k]));
                    CHECK(err < 1e-5, "index %d dy %d dx %d flip %d: max err %g", index, dy, dx,
                          flip, err);
                    cases++;
                }
    printf("  %d cases\n", cases);

    printf("a hand-checked case: dy=dx=0, pad 2 moves the image down-right by 2\n");
    tb_augment_cfg raw = {.enabled = 1, .pad = 2, .flip = 0, .normalize = 0};
    tb_augment_params p = {0, 0, 0};
    tb_augment_apply(&raw, ds, 0, &p, got);
    /* out(2,2) = img(0,0) = 10; out(3,4) = img(1,2) = 10 + 2*7 = 24. */
    CHECK(got[0] == 0.0f && fabsf(got[2 * 5 + 2] * 255 - 10) < 1e-4f &&
              fabsf(got[3 * 5 + 4] * 255 - 24) < 1e-4f,
          "got %g %g %g", got[0] * 255, got[12] * 255, got[19] * 255);
    printf("a hand-checked flip: no crop offset (dy=dx=pad), row 0 reversed\n");
    tb_augment_params f = {2, 2, 1};
    tb_augment_apply(&raw, ds, 0, &f, got);
    for (int x = 0; x < 5; x++)
        CHECK(fabsf(got[x] * 255 - (float)(10 + (4 - x) * 2)) < 1e-4f, "x %d: %g", x, got[x] * 255);
    tb_dataset_free(ds);
}

static void test_eval(void)
{
    printf("eval mode: identity, normalized\n");
    tb_dataset *ds = tiny();
    tb_augment_cfg cfg = tb_augment_eval_defaults();
    float got[60];
    tb_augment_sample(&cfg, ds, 123, 5, 1, got);
    for (int ch = 0; ch < 3; ch++)
        for (int k = 0; k < 20; k++) {
            float px = ds->images[60 + ch * 20 + k];
            float want = (px / 255.0f - ds->mean[ch]) / ds->std[ch];
            CHECK(fabsf(got[ch * 20 + k] - want) < 1e-5f, "ch %d k %d: %g vs %g", ch, k,
                  got[ch * 20 + k], want);
        }
    tb_augment_params p = tb_augment_draw(&cfg, 123, 5, 1);
    CHECK(p.dx == 0 && p.dy == 0 && p.flip == 0, "eval params not zero");
    tb_dataset_free(ds);
}

static void test_determinism(void)
{
    printf("determinism: same (seed, epoch, index) same bytes; other epoch other crops\n");
    tb_synthetic_cfg sc = {.n = 200, .c = 1, .h = 28, .w = 28, .seed = 3, .noise = -1};
    tb_dataset *ds = NULL;
    if (tb_dataset_synthetic_create(&sc, &ds) != TB_OK) {
        failures++;
        return;
    }
    tb_augment_cfg cfg = tb_augment_train_defaults(ds);
    CHECK(cfg.pad == 2 && cfg.flip && cfg.enabled, "train defaults for 28x28");
    float a[784], b[784];
    int same_params = 0, diff_bytes = 0, hist[5] = {0}, flips = 0;
    /* Visit samples in a scrambled order the second time: order must not matter. */
    for (int i = 0; i < 200; i++) {
        int idx = (i * 77) % 200;
        tb_augment_sample(&cfg, ds, 42, 1, idx, a);
        tb_augment_sample(&cfg, ds, 42, 1, idx, b);
        CHECK(memcmp(a, b, sizeof a) == 0, "index %d differs between two calls", idx);
        tb_augment_params p1 = tb_augment_draw(&cfg, 42, 1, idx), p2 = tb_augment_draw(&cfg, 42, 2, idx);
        same_params += p1.dx == p2.dx && p1.dy == p2.dy && p1.flip == p2.flip;
        tb_augment_sample(&cfg, ds, 42, 2, idx, b);
        diff_bytes += memcmp(a, b, sizeof a) != 0;
        CHECK(p1.dx >= 0 && p1.dx <= 4 && p1.dy >= 0 && p1.dy <= 4, "offsets %d %d", p1.dy, p1.dx);
        hist[p1.dx]++;
        flips += p1.flip;
    }
    printf("  epoch 1 vs 2: %d/200 samples drew the same crop+flip, %d/200 bytes differ\n",
           same_params, diff_bytes);
    /* 1 chance in 50 per sample of the same draw. */
    CHECK(same_params < 20, "%d of 200 samples kept their crop across epochs", same_params);
    CHECK(diff_bytes > 180, "only %d of 200 samples changed across epochs", diff_bytes);
    for (int k = 0; k < 5; k++)
        CHECK(hist[k] > 15, "dx %d drawn %d times of 200", k, hist[k]);
    CHECK(flips > 70 && flips < 130, "%d flips of 200", flips);
    tb_augment_params s1 = tb_augment_draw(&cfg, 42, 1, 7), s2 = tb_augment_draw(&cfg, 43, 1, 7);
    tb_augment_sample(&cfg, ds, 42, 1, 7, a);
    tb_augment_sample(&cfg, ds, 43, 1, 7, b);
    printf("  seed 42 vs 43, sample 7: (%d,%d,%d) vs (%d,%d,%d)\n", s1.dy, s1.dx, s1.flip, s2.dy,
           s2.dx, s2.flip);
    tb_augment_cfg wide = tb_augment_train_defaults(&(tb_dataset){.w = 32});
    CHECK(wide.pad == 4, "train defaults for 32 wide: pad %d", wide.pad);
    tb_dataset_free(ds);
}

/* ---- the shared math refactor (kernels/augment_math.h) ----
 * augment.c's per-pixel formulas before they moved into the shared header,
 * copied verbatim: tb_augment_apply must still give exactly these bytes. */
static void old_crop_channel(const uint8_t *src, int h, int w, int pad,
                             const tb_augment_params *p, float scale, float bias, float *out)
{
    float zero = bias;
    for (int y = 0; y < h; y++) {
        int sy = y + p->dy - pad;
        float *row = out + (size_t)y * w;
        if (sy < 0 || sy >= h) {
            for (int x = 0; x < w; x++)
                row[x] = zero;
            continue;
        }
        const uint8_t *srow = src + (size_t)sy * w;
        for (int x = 0; x < w; x++) {
            int sx = (p->flip ? w - 1 - x : x) + p->dx - pad;
            row[x] = sx >= 0 && sx < w ? (float)srow[sx] * scale + bias : zero;
        }
    }
}

static void old_augment_apply(const tb_augment_cfg *cfg, const tb_dataset *ds, int index,
                              const tb_augment_params *p, float *out)
{
    size_t plane = (size_t)ds->h * ds->w;
    int pad = cfg->enabled ? cfg->pad : 0;
    for (int ch = 0; ch < ds->c; ch++) {
        float inv_std = cfg->normalize ? 1.0f / ds->std[ch] : 1.0f;
        float mean = cfg->normalize ? ds->mean[ch] : 0.0f;
        float scale = inv_std / 255.0f, bias = -mean * inv_std;
        const uint8_t *src = ds->images + ((size_t)index * ds->c + ch) * plane;
        old_crop_channel(src, ds->h, ds->w, pad, p, scale, bias, out + ch * plane);
    }
}

/* What kernels/augment.cu computes for output element i of a batch
 * (one thread each), run on the host: the header's functions, indexed
 * from the flat NCHW position as the kernel does. */
static void shared_math_apply(const tb_augment_cfg *cfg, const tb_dataset *ds, int index,
                              const tb_augment_params *p, float *out)
{
    size_t plane = (size_t)ds->h * ds->w, total = plane * ds->c;
    int pad = cfg->enabled ? cfg->pad : 0;
    for (size_t i = 0; i < total; i++) {
        int x = (int)(i % ds->w), y = (int)(i / ds->w % ds->h), ch = (int)(i / plane);
        float scale, bias;
        tb_augment_norm(cfg->normalize, ds->mean[ch], ds->std[ch], &scale, &bias);
        const uint8_t *src = ds->images + ((size_t)index * ds->c + ch) * plane;
        out[i] = tb_augment_pixel(src, ds->h, ds->w, pad, p->dy, p->dx, p->flip, scale, bias,
                                  y, x);
    }
}

/* Synthetic data shaped like Fashion-MNIST (1x28x28) and CIFAR (3x32x32),
 * a few samples each, every epoch's crops and flips plus all-disabled and
 * normalize-off configurations: bitwise equal three ways. */
static void test_shared_math(void)
{
    const int shapes[2][3] = {{1, 28, 28}, {3, 32, 32}};
    for (int s = 0; s < 2; s++) {
        tb_dataset *ds = NULL;
        int c = shapes[s][0], h = shapes[s][1], w = shapes[s][2];
        if (tb_dataset_alloc(6, c, h, w, 10, &ds) != TB_OK) {
            CHECK(0, "tb_dataset_alloc");
            return;
        }
        for (size_t i = 0; i < (size_t)6 * c * h * w; i++)
            ds->images[i] = (uint8_t)((i * 2654435761u) >> 13);
        for (int ch = 0; ch < c; ch++) {
            ds->mean[ch] = 0.2860f + 0.1f * ch;
            ds->std[ch] = 0.3530f - 0.05f * ch;
        }
        tb_augment_cfg cfgs[3] = {tb_augment_train_defaults(ds), tb_augment_eval_defaults(),
                                  tb_augment_train_defaults(ds)};
        cfgs[2].normalize = 0;
        size_t n = (size_t)c * h * w;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *m = malloc(n * sizeof *m);
        int mismatches = 0, flips = 0;
        for (int k = 0; k < 3; k++)
            for (int epoch = 0; epoch < 4; epoch++)
                for (int idx = 0; idx < 6; idx++) {
                    tb_augment_params p = tb_augment_draw(&cfgs[k], 42, epoch, idx);
                    flips += p.flip;
                    tb_augment_apply(&cfgs[k], ds, idx, &p, a);
                    old_augment_apply(&cfgs[k], ds, idx, &p, b);
                    shared_math_apply(&cfgs[k], ds, idx, &p, m);
                    mismatches += memcmp(a, b, n * sizeof *a) != 0;
                    mismatches += memcmp(a, m, n * sizeof *a) != 0;
                }
        CHECK(mismatches == 0, "%dx%dx%d: %d samples differ from the pre-refactor bytes or "
              "the shared math", c, h, w, mismatches);
        CHECK(flips > 0, "%dx%dx%d: no flip drawn, the flip path is untested", c, h, w);
        printf("  shared math %dx%dx%d: 72 samples bitwise equal (old formulas, header)\n", c,
               h, w);
        free(a);
        free(b);
        free(m);
        tb_dataset_free(ds);
    }
}

int main(void)
{
    test_crop_flip();
    test_eval();
    test_determinism();
    test_shared_math();
    printf(failures ? "augment_test: %d FAILED\n" : "augment_test: all passed\n", failures);
    return failures != 0;
}
