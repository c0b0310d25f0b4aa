/*
 * synthetic.c - a generated dataset with learnable labels; see dataset.h.
 *
 * Each class owns a pattern: per channel, a 4 x 4 grid of cell intensities
 * drawn from (seed, class), mirrored left-right so a horizontal flip keeps
 * the class. A sample is its class pattern scaled up to h x w plus uniform
 * noise; its label and noise are drawn from (seed, split, index). Cells of
 * 7-8 pixels survive the loader's 2-4 pixel random crops, so a CNN learns it
 * in a few hundred steps.
 * Tests: bazel test //datasets:synthetic_test
 */
#include <stdio.h>
#include <stdlib.h>

#include "datasets/dataset.h"
#include "lib/core/rng.h"

#define SYNTH_GRID 4
#define SYNTH_LO 32  /* cell intensities span [SYNTH_LO, SYNTH_LO + SYNTH_SPAN) */
#define SYNTH_SPAN 192

typedef struct synth_templates {
    int classes, c;
    uint8_t *cells; /* (classes, c, SYNTH_GRID, SYNTH_GRID) */
} synth_templates;

static int templates_make(const tb_synthetic_cfg *cfg, int classes, synth_templates *t)
{
    t->classes = classes;
    t->c = cfg->c;
    t->cells = malloc((size_t)classes * cfg->c * SYNTH_GRID * SYNTH_GRID);
    if (!t->cells)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate synthetic class patterns");
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
    return TB_OK;
}

static uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* Fills sample i of ds from its class pattern and its own noise stream. */
static void sample_make(const tb_synthetic_cfg *cfg, const synth_templates *t, int noise,
                        tb_dataset *ds, int i)
{
    uint64_t split = (uint64_t)cfg->split;
    tb_rng lr = tb_rng_make(cfg->seed, split, (uint64_t)i, TB_RNG_SYNTH_LABEL);
    tb_rng nr = tb_rng_make(cfg->seed, split, (uint64_t)i, TB_RNG_SYNTH_NOISE);
    int label = (int)tb_rng_below(&lr, (uint32_t)t->classes);
    ds->labels[i] = label;
    for (int ch = 0; ch < ds->c; ch++) {
        const uint8_t *g = t->cells + ((size_t)label * ds->c + ch) * SYNTH_GRID * SYNTH_GRID;
        uint8_t *p = ds->images + ((size_t)i * ds->c + ch) * ds->h * ds->w;
        for (int y = 0; y < ds->h; y++) {
            int gy = y * SYNTH_GRID / ds->h;
            for (int x = 0; x < ds->w; x++) {
                int gx = x * SYNTH_GRID / ds->w;
                int jitter = (int)tb_rng_below(&nr, (uint32_t)(2 * noise + 1)) - noise;
                p[y * ds->w + x] = clamp_u8(g[gy * SYNTH_GRID + gx] + jitter);
            }
        }
    }
}

int tb_dataset_synthetic_create(const tb_synthetic_cfg *cfg, tb_dataset **out)
{
    *out = NULL;
    int classes = cfg->num_classes ? cfg->num_classes : 10;
    int noise = cfg->noise < 0 ? 48 : cfg->noise;
    if (classes < 2 || classes > 256 || cfg->h < SYNTH_GRID || cfg->w < SYNTH_GRID || noise > 255)
        return TB_FAIL(TB_ERR_INVALID, "synthetic dataset: classes=%d (2..256), %dx%d (>= 4x4), "
                       "noise=%d (0..255)", classes, cfg->h, cfg->w, noise);
    tb_dataset *ds;
    TB_TRY(tb_dataset_alloc(cfg->n, cfg->c, cfg->h, cfg->w, classes, &ds));
    synth_templates t;
    int rc = templates_make(cfg, classes, &t);
    if (rc != TB_OK) {
        tb_dataset_free(ds);
        return rc;
    }
    for (int i = 0; i < cfg->n; i++)
        sample_make(cfg, &t, noise, ds, i);
    free(t.cells);
    const char *split = cfg->split == TB_SPLIT_TRAIN ? "train" : "test";
    snprintf(ds->name, sizeof ds->name, "synthetic-%dx%dx%d-%s", cfg->c, cfg->h, cfg->w, split);
    snprintf(ds->source, sizeof ds->source,
             "generated (synthetic: %d classes of 4x4 block patterns + noise %d, seed %llu)",
             classes, noise, (unsigned long long)cfg->seed);
    ds->synthetic = 1;
    tb_dataset_compute_stats(ds);
    *out = ds;
    return TB_OK;
}
