/*
 * synthetic_test.c - the generated dataset: named and flagged synthetic,
 * deterministic from its seed (same seed same bytes, other seed other bytes),
 * labels cover every class, train and test differ but share class patterns,
 * and the labels are learnable: a nearest-class-mean classifier fitted on
 * the train split classifies the test split almost perfectly. On the fly:
 * nothing stored, sample i has the bytes and label of the stored dataset's
 * sample i, 1000 classes of 3x224x224 (ImageNet's shape) are accepted and
 * every class appears, and the held-in-memory limit of 256 classes stays.
 * Golden: the stored datasets the small models train on have the bytes
 * (FNV-1a of pixels then labels) the generator gave before on-the-fly data
 * existed (commit a28c13f), so earlier results stay comparable.
 * Run: bazel test //datasets:synthetic_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/core/testing.h"

static tb_dataset *make(int n, int c, int h, int w, uint64_t seed, tb_split split)
{
    tb_synthetic_cfg cfg = {.n = n, .c = c, .h = h, .w = w, .seed = seed, .noise = -1,
                            .split = split};
    tb_dataset *ds = NULL;
    if (tb_dataset_synthetic_create(&cfg, &ds) != TB_OK) {
        tb_error_print(stdout);
        failures++;
    }
    return ds;
}

/* Accuracy on test of the nearest class mean fitted on train. */
static double nearest_mean_accuracy(const tb_dataset *train, const tb_dataset *test)
{
    size_t chw = (size_t)train->c * train->h * train->w;
    int k = train->num_classes;
    double *means = calloc((size_t)k * chw, sizeof *means);
    int *counts = calloc((size_t)k, sizeof *counts);
    for (int i = 0; i < train->n; i++) {
        int y = train->labels[i];
        counts[y]++;
        for (size_t p = 0; p < chw; p++)
            means[y * chw + p] += train->images[i * chw + p];
    }
    for (int y = 0; y < k; y++)
        for (size_t p = 0; p < chw; p++)
            means[y * chw + p] /= counts[y] ? counts[y] : 1;
    int right = 0;
    for (int i = 0; i < test->n; i++) {
        int best = 0;
        double best_d = 1e300;
        for (int y = 0; y < k; y++) {
            double d = 0;
            for (size_t p = 0; p < chw; p++) {
                double e = test->images[i * chw + p] - means[y * chw + p];
                d += e * e;
            }
            if (d < best_d) {
                best_d = d;
                best = y;
            }
        }
        right += best == test->labels[i];
    }
    free(means);
    free(counts);
    return (double)right / test->n;
}

static unsigned long long fnv(const void *data, size_t n, unsigned long long h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Hashes printed by the generator of commit a28c13f for n = 1000, seed 0,
 * 10 classes, default noise. */
static void check_golden(void)
{
    const int shape[4][3] = {{1, 28, 28}, {1, 28, 28}, {3, 32, 32}, {3, 32, 32}};
    const unsigned long long want[4] = {0x9977d8ef705bc5c9ULL, 0x01de77dc11586e75ULL,
                                        0x90d5bd42ef051f5fULL, 0xb6b515fda77022f7ULL};
    for (int k = 0; k < 4; k++) {
        tb_synthetic_cfg c = {.n = 1000, .c = shape[k][0], .h = shape[k][1], .w = shape[k][2],
                              .num_classes = 10, .seed = 0, .noise = -1,
                              .split = (tb_split)(k % 2)};
        tb_dataset *ds = NULL;
        CHECK_OK(tb_dataset_synthetic_create(&c, &ds));
        if (!ds)
            continue;
        unsigned long long h = fnv(ds->images, (size_t)ds->n * ds->c * ds->h * ds->w,
                                   14695981039346656037ULL);
        h = fnv(ds->labels, (size_t)ds->n * sizeof(int32_t), h);
        CHECK(h == want[k], "%dx%dx%d split %d: 0x%016llx, before 0x%016llx", c.c, c.h, c.w,
              k % 2, h, want[k]);
        tb_dataset_free(ds);
    }
}

int main(void)
{
    printf("golden: the stored datasets' bytes are the ones of before\n");
    check_golden();
    printf("3x32x32 and 1x28x28: name, flag, shape\n");
    tb_dataset *a = make(500, 3, 32, 32, 7, TB_SPLIT_TRAIN);
    tb_dataset *g = make(300, 1, 28, 28, 7, TB_SPLIT_TRAIN);
    if (!a || !g)
        return 1;
    CHECK(a->synthetic && strcmp(a->name, "synthetic-3x32x32-train") == 0, "name %s", a->name);
    CHECK(g->synthetic && strcmp(g->name, "synthetic-1x28x28-train") == 0, "name %s", g->name);
    CHECK(strstr(a->source, "synthetic") != NULL, "source %s", a->source);
    CHECK(a->n == 500 && a->c == 3 && a->h == 32 && a->w == 32 && a->num_classes == 10, "shape");

    printf("deterministic from the seed\n");
    tb_dataset *a2 = make(500, 3, 32, 32, 7, TB_SPLIT_TRAIN);
    tb_dataset *b = make(500, 3, 32, 32, 8, TB_SPLIT_TRAIN);
    CHECK(memcmp(a->images, a2->images, 500 * 3072) == 0 &&
              memcmp(a->labels, a2->labels, 500 * sizeof(int32_t)) == 0,
          "same seed, different bytes");
    CHECK(memcmp(a->images, b->images, 500 * 3072) != 0, "different seed, same bytes");

    printf("every class present; mean/std computed and sane\n");
    int counts[10] = {0};
    for (int i = 0; i < a->n; i++)
        counts[a->labels[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK(counts[k] > 20, "class %d has %d samples", k, counts[k]);
    for (int ch = 0; ch < 3; ch++)
        CHECK(a->mean[ch] > 0.2f && a->mean[ch] < 0.8f && a->std[ch] > 0.1f && a->std[ch] < 0.5f,
              "channel %d mean %g std %g", ch, a->mean[ch], a->std[ch]);

    printf("learnable: nearest class mean, train -> test\n");
    tb_dataset *t = make(500, 3, 32, 32, 7, TB_SPLIT_TEST);
    CHECK(memcmp(a->images, t->images, 500 * 3072) != 0, "train and test are the same samples");
    double acc = nearest_mean_accuracy(a, t);
    printf("  accuracy %.3f\n", acc);
    CHECK(acc > 0.95, "accuracy %.3f", acc);
    tb_dataset *gt = make(300, 1, 28, 28, 7, TB_SPLIT_TEST);
    double gacc = nearest_mean_accuracy(g, gt);
    printf("  1x28x28 accuracy %.3f\n", gacc);
    CHECK(gacc > 0.9, "1x28x28 accuracy %.3f", gacc);

    printf("on the fly: same bytes as the stored dataset, nothing stored\n");
    tb_synthetic_cfg fc = {.n = 500, .c = 3, .h = 32, .w = 32, .seed = 7, .noise = -1,
                           .split = TB_SPLIT_TEST, .on_the_fly = 1};
    tb_dataset *f = NULL;
    CHECK_OK(tb_dataset_synthetic_create(&fc, &f));
    if (!f)
        return 1;
    CHECK(f->images == NULL && f->labels == NULL && f->make && f->synthetic &&
              f->kind == TB_SAMPLES_IMAGES && strcmp(f->name, "synthetic-3x32x32-test") == 0 &&
              strstr(f->source, "on the fly") != NULL,
          "on-the-fly header: %s / %s", f->name, f->source);
    uint8_t scratch[3072];
    int same = 1;
    for (int i = 0; i < 500; i++) {
        int32_t label = -1;
        const uint8_t *px = tb_dataset_image(f, i, scratch, &label);
        int32_t held_label;
        const uint8_t *held = tb_dataset_image(t, i, NULL, &held_label);
        same &= px == scratch && label == held_label && memcmp(px, held, 3072) == 0;
    }
    CHECK(same, "on-the-fly samples differ from the stored ones");
    for (int ch = 0; ch < 3; ch++)
        CHECK(fabsf(f->mean[ch] - t->mean[ch]) < 0.05f && fabsf(f->std[ch] - t->std[ch]) < 0.05f,
              "channel %d: on-the-fly mean/std %g/%g vs all pixels %g/%g", ch, f->mean[ch],
              f->std[ch], t->mean[ch], t->std[ch]);

    printf("on the fly: ImageNet-shaped, 1000 classes\n");
    tb_synthetic_cfg ic = {.n = 50000, .c = 3, .h = 224, .w = 224, .num_classes = 1000,
                           .seed = 3, .noise = -1, .split = TB_SPLIT_TRAIN, .on_the_fly = 1};
    tb_dataset *in = NULL;
    CHECK_OK(tb_dataset_synthetic_create(&ic, &in));
    if (!in)
        return 1;
    CHECK(in->n == 50000 && in->num_classes == 1000 && in->h == 224, "shape");
    uint8_t *big = malloc(3 * 224 * 224), *big2 = malloc(3 * 224 * 224);
    int32_t l1, l2;
    tb_dataset_image(in, 49999, big, &l1);
    tb_dataset_image(in, 49999, big2, &l2);
    CHECK(l1 == l2 && memcmp(big, big2, 3 * 224 * 224) == 0, "sample 49999 is not deterministic");
    /* labels depend on (seed, split, index, classes) only: a 3x4x4 twin
     * draws them cheaply, and agrees with the 224 one */
    tb_synthetic_cfg tc = ic;
    tc.h = tc.w = 4;
    tb_dataset *twin = NULL;
    CHECK_OK(tb_dataset_synthetic_create(&tc, &twin));
    if (!twin)
        return 1;
    int seen[1000] = {0}, distinct = 0, bad_label = 0;
    uint8_t tiny[48];
    for (int i = 0; i < 3000; i++) {
        int32_t label;
        tb_dataset_image(twin, i, tiny, &label);
        bad_label |= label < 0 || label >= 1000;
        if (!bad_label)
            distinct += !seen[label]++;
    }
    tb_dataset_image(twin, 49999, tiny, &l2);
    CHECK(!bad_label, "a label out of range");
    CHECK(l1 == l2, "labels depend on the image size: %d vs %d", l1, l2);
    CHECK(distinct > 900, "%d of 1000 classes in 3000 samples", distinct);
    tb_dataset_free(twin);
    free(big);
    free(big2);
    tb_dataset_free(in);
    tb_dataset_free(f);

    printf("bad configuration is refused\n");
    tb_synthetic_cfg bad = {.n = 10, .c = 3, .h = 2, .w = 2, .seed = 1};
    tb_dataset *none = NULL;
    CHECK(tb_dataset_synthetic_create(&bad, &none) == TB_ERR_INVALID && none == NULL, "2x2 accepted");
    tb_synthetic_cfg many = {.n = 10, .c = 3, .h = 8, .w = 8, .num_classes = 1000, .seed = 1};
    CHECK(tb_dataset_synthetic_create(&many, &none) == TB_ERR_INVALID && none == NULL,
          "1000 classes held in memory accepted (labels must fit a byte there)");
    tb_error_clear();

    tb_dataset_free(a);
    tb_dataset_free(a2);
    tb_dataset_free(b);
    tb_dataset_free(g);
    tb_dataset_free(t);
    tb_dataset_free(gt);
    printf(failures ? "synthetic_test: %d FAILED\n" : "synthetic_test: all passed\n", failures);
    return failures != 0;
}
