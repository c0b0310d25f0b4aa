/*
 * synthetic.c - a generated dataset with learnable labels; see dataset.h.
 *
 * Each class owns a pattern: per channel, a 4 x 4 grid of cell intensities
 * drawn from (seed, class), mirrored left-right so a horizontal flip keeps
 * the class. A sample is its class pattern scaled up to h x w plus uniform
 * noise; its label and noise are drawn from (seed, split, index). Cells of
 * 7-8 pixels survive the loader's 2-4 pixel random crops, so a CNN learns it
 * in a few hundred steps.
 * On the fly (cfg->on_the_fly), the class patterns are the dataset's only
 * storage (classes x c x 16 bytes: 48 KB for 1000 classes of 3 channels)
 * and sample i is made by the same sample_make into the loader's scratch,
 * so it has the bytes sample i of the stored dataset would have. Making one
 * costs one RNG draw per pixel (about 1 ms for 3x224x224), small beside a
 * ResNet-50 step on it.
 * Tests: bazel test //datasets:synthetic_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/core/rng.h"

#define SYNTH_GRID 4
#define SYNTH_LO 32  /* cell intensities span [SYNTH_LO, SYNTH_LO + SYNTH_SPAN) */
#define SYNTH_SPAN 192

typedef struct synth_templates {
    int classes, c;
    uint8_t *cells; /* (classes, c, SYNTH_GRID, SYNTH_GRID) */
} synth_templates;

/* What an on-the-fly dataset keeps (ds->gen): one block, the cells after it. */
typedef struct synth_gen {
    tb_synthetic_cfg cfg;
    int noise;
    synth_templates t;
} synth_gen;

/* The cells of t are at cells, room for classes x c x 16 bytes. */
static void templates_make(const tb_synthetic_cfg *cfg, int classes, uint8_t *cells,
                           synth_templates *t)
{
    t->classes = classes;
    t->c = cfg->c;
    t->cells = cells;
    for (int k = 0; k < classes; k++) {
        tb_rng r = tb_rng_make(cfg->seed, 0, (uint64_t)k, TB_RNG_SYNTH_TEMPLATE);
        for (int ch = 0; ch < cfg->c; ch++) {
            uint8_t *g = t->cells + ((size_t)k * cfg->c + ch) * SYNTH_GRID * SYNTH_GRID;
            for (int gy = 0; gy < SYNTH_GRID; gy++)
                for (int gx = 0; gx < SYNTH_GRID / 2; gx++) {
                    uint8_t v = (uint8_t)(SYNTH_LO + tb_rng_below(&r, SYNTH_SPAN));
                    g[gy * SYNTH_GRID + gx] = v;
                    g[gy * SYNTH_GRID + SYNTH_GRID - 1 - gx] = v;
                }
        }
    }
}

static uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* Makes sample i (pixels (c, h, w) to px, its label to *label) from its
 * class pattern and its own noise stream. */
static void sample_make(const tb_synthetic_cfg *cfg, const synth_templates *t, int noise, int i,
                        uint8_t *px, int32_t *label)
{
    uint64_t split = (uint64_t)cfg->split;
    tb_rng lr = tb_rng_make(cfg->seed, split, (uint64_t)i, TB_RNG_SYNTH_LABEL);
    tb_rng nr = tb_rng_make(cfg->seed, split, (uint64_t)i, TB_RNG_SYNTH_NOISE);
    int k = (int)tb_rng_below(&lr, (uint32_t)t->classes);
    int h = cfg->h, w = cfg->w;
    *label = k;
    for (int ch = 0; ch < cfg->c; ch++) {
        const uint8_t *g = t->cells + ((size_t)k * cfg->c + ch) * SYNTH_GRID * SYNTH_GRID;
        uint8_t *p = px + (size_t)ch * h * w;
        for (int y = 0; y < h; y++) {
            int gy = y * SYNTH_GRID / h;
            for (int x = 0; x < w; x++) {
                int gx = x * SYNTH_GRID / w;
                int jitter = (int)tb_rng_below(&nr, (uint32_t)(2 * noise + 1)) - noise;
                p[y * w + x] = clamp_u8(g[gy * SYNTH_GRID + gx] + jitter);
            }
        }
    }
}

/* tb_sample_fn of an on-the-fly synthetic image dataset. */
static void make_on_the_fly(const tb_dataset *ds, int index, void *out, int32_t *label)
{
    const synth_gen *g = ds->gen;
    sample_make(&g->cfg, &g->t, g->noise, index, out, label);
}

/* mean/std of an on-the-fly dataset from its first samples (made twice:
 * the stats must not hold them all). */
static int stats_on_the_fly(tb_dataset *ds)
{
    size_t chw = (size_t)ds->c * ds->h * ds->w, plane = (size_t)ds->h * ds->w;
    int m = ds->n < TB_SYNTH_STATS_SAMPLES ? ds->n : TB_SYNTH_STATS_SAMPLES;
    uint8_t *px = malloc(chw);
    if (!px)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate one %zu-byte synthetic sample", chw);
    for (int ch = 0; ch < ds->c; ch++) {
        double sum = 0, sq = 0;
        for (int i = 0; i < m; i++) {
            int32_t label;
            ds->make(ds, i, px, &label);
            for (size_t k = 0; k < plane; k++) {
                double v = px[ch * plane + k] / 255.0;
                sum += v;
                sq += v * v;
            }
        }
        double cnt = (double)m * plane, mean = sum / cnt, var = sq / cnt - mean * mean;
        ds->mean[ch] = (float)mean;
        ds->std[ch] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    }
    free(px);
    return TB_OK;
}

/* The on-the-fly dataset: a header, no pixels; the patterns in ds->gen. */
static int create_on_the_fly(const tb_synthetic_cfg *cfg, int classes, int noise,
                             tb_dataset **out)
{
    if (cfg->n <= 0 || cfg->c <= 0 || cfg->c > TB_DATASET_MAX_CHANNELS)
        return TB_FAIL(TB_ERR_INVALID, "synthetic dataset: n=%d (> 0), c=%d (1..%d)", cfg->n,
                       cfg->c, TB_DATASET_MAX_CHANNELS);
    size_t cells = (size_t)classes * cfg->c * SYNTH_GRID * SYNTH_GRID;
    tb_dataset *ds = calloc(1, sizeof *ds);
    synth_gen *g = malloc(sizeof *g + cells);
    if (!ds || !g) {
        free(ds);
        free(g);
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate an on-the-fly synthetic dataset");
    }
    g->cfg = *cfg;
    g->noise = noise;
    templates_make(cfg, classes, (uint8_t *)(g + 1), &g->t);
    ds->n = cfg->n;
    ds->c = cfg->c;
    ds->h = cfg->h;
    ds->w = cfg->w;
    ds->num_classes = classes;
    ds->make = make_on_the_fly;
    ds->gen = g;
    int rc = stats_on_the_fly(ds);
    if (rc != TB_OK) {
        tb_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return TB_OK;
}

int tb_dataset_synthetic_create(const tb_synthetic_cfg *cfg, tb_dataset **out)
{
    *out = NULL;
    int classes = cfg->num_classes ? cfg->num_classes : 10;
    int noise = cfg->noise < 0 ? 48 : cfg->noise;
    /* held in memory: labels stay bytes (IDX files, --tensors-on-device) */
    int max_classes = cfg->on_the_fly ? 65536 : 256;
    if (classes < 2 || classes > max_classes || cfg->h < SYNTH_GRID || cfg->w < SYNTH_GRID ||
        noise > 255)
        return TB_FAIL(TB_ERR_INVALID, "synthetic dataset: classes=%d (2..%d), %dx%d (>= 4x4), "
                       "noise=%d (0..255)", classes, max_classes, cfg->h, cfg->w, noise);
    tb_dataset *ds;
    if (cfg->on_the_fly) {
        TB_TRY(create_on_the_fly(cfg, classes, noise, &ds));
    } else {
        TB_TRY(tb_dataset_alloc(cfg->n, cfg->c, cfg->h, cfg->w, classes, &ds));
        size_t chw = (size_t)cfg->c * cfg->h * cfg->w;
        uint8_t *cells = malloc((size_t)classes * cfg->c * SYNTH_GRID * SYNTH_GRID);
        if (!cells) {
            tb_dataset_free(ds);
            return TB_FAIL(TB_ERR_NOMEM, "cannot allocate synthetic class patterns");
        }
        synth_templates t;
        templates_make(cfg, classes, cells, &t);
        for (int i = 0; i < cfg->n; i++)
            sample_make(cfg, &t, noise, i, ds->images + (size_t)i * chw, &ds->labels[i]);
        free(cells);
        tb_dataset_compute_stats(ds);
    }
    const char *split = cfg->split == TB_SPLIT_TRAIN ? "train" : "test";
    snprintf(ds->name, sizeof ds->name, "synthetic-%dx%dx%d-%s", cfg->c, cfg->h, cfg->w, split);
    snprintf(ds->source, sizeof ds->source,
             "generated%s (synthetic: %d classes of 4x4 block patterns + noise %d, seed %llu)",
             cfg->on_the_fly ? " on the fly" : "", classes, noise,
             (unsigned long long)cfg->seed);
    ds->synthetic = 1;
    *out = ds;
    return TB_OK;
}
