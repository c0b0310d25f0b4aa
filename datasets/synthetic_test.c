/*
 * synthetic_test.c - the generated dataset: named and flagged synthetic,
 * deterministic from its seed (same seed same bytes, other seed other bytes),
 * labels cover every class, train and test differ but share class patterns,
 * and the labels are learnable: a nearest-class-mean classifier fitted on
 * the train split classifies the test split almost perfectly.
 * Run: bazel test //datasets:synthetic_test
 */
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

int main(void)
{
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

    printf("bad configuration is refused\n");
    tb_synthetic_cfg bad = {.n = 10, .c = 3, .h = 2, .w = 2, .seed = 1};
    tb_dataset *none = NULL;
    CHECK(tb_dataset_synthetic_create(&bad, &none) == TB_ERR_INVALID && none == NULL, "2x2 accepted");

    tb_dataset_free(a);
    tb_dataset_free(a2);
    tb_dataset_free(b);
    tb_dataset_free(g);
    tb_dataset_free(t);
    tb_dataset_free(gt);
    printf(failures ? "synthetic_test: %d FAILED\n" : "synthetic_test: all passed\n", failures);
    return failures != 0;
}
