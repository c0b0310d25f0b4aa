/*
 * tokens_test.c - the synthetic token stream: named and flagged synthetic,
 * kind tokens with the (1, T, 1) shape, deterministic from its seed (same
 * seed same ids, other seed other ids), every id in [0, vocab) (GPT-2's
 * 50,257 too), train and test other sequences of the same chain, and
 * learnable: a bigram table counted on the train split predicts the test
 * split's next tokens far above chance (about 1/2: the chain's first
 * successor; chance is 1/vocab). Bad configurations are refused.
 * Run: bazel test //datasets:tokens_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/core/testing.h"

static tb_dataset *make(int n, int seq, int vocab, uint64_t seed, tb_split split)
{
    tb_token_cfg cfg = {.n = n, .seq = seq, .vocab = vocab, .seed = seed, .split = split};
    tb_dataset *ds = NULL;
    CHECK_OK(tb_dataset_tokens_create(&cfg, &ds));
    return ds;
}

/* Every sample's seq + 1 ids, one after the other. */
static int32_t *all_ids(const tb_dataset *ds)
{
    size_t row = (size_t)ds->seq + 1;
    int32_t *ids = malloc((size_t)ds->n * row * sizeof *ids);
    for (int i = 0; ids && i < ds->n; i++)
        tb_dataset_tokens(ds, i, ids + i * row);
    return ids;
}

/* Next-token accuracy on test of the most frequent successor counted on train. */
static double bigram_accuracy(const tb_dataset *train, const int32_t *tr, const int32_t *te,
                              int test_n)
{
    int V = train->vocab, T = train->seq;
    int *counts = calloc((size_t)V * V, sizeof *counts);
    for (int i = 0; i < train->n; i++)
        for (int t = 0; t < T; t++) {
            const int32_t *s = tr + (size_t)i * (T + 1);
            counts[(size_t)s[t] * V + s[t + 1]]++;
        }
    long right = 0, all = 0;
    for (int i = 0; i < test_n; i++)
        for (int t = 0; t < T; t++) {
            const int32_t *s = te + (size_t)i * (T + 1);
            const int *row = counts + (size_t)s[t] * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best])
                    best = v;
            right += best == s[t + 1];
            all++;
        }
    free(counts);
    return (double)right / all;
}

static int in_range(const int32_t *ids, size_t n, int vocab)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= vocab)
            return 0;
    return 1;
}

int main(void)
{
    printf("header: name, flag, kind, shape\n");
    tb_dataset *a = make(400, 64, 100, 7, TB_SPLIT_TRAIN);
    if (!a)
        return 1;
    CHECK(a->synthetic && a->kind == TB_SAMPLES_TOKENS && a->make && !a->images && !a->labels,
          "kind / flag");
    CHECK(strcmp(a->name, "synthetic-tokens-64x100-train") == 0, "name %s", a->name);
    CHECK(strstr(a->source, "synthetic") && strstr(a->source, "on the fly"), "source %s",
          a->source);
    CHECK(a->n == 400 && a->seq == 64 && a->vocab == 100 && a->num_classes == 100 &&
              a->c == 1 && a->h == 64 && a->w == 1, "shape");

    printf("deterministic from the seed; ids in range\n");
    tb_dataset *a2 = make(400, 64, 100, 7, TB_SPLIT_TRAIN);
    tb_dataset *b = make(400, 64, 100, 8, TB_SPLIT_TRAIN);
    tb_dataset *t = make(400, 64, 100, 7, TB_SPLIT_TEST);
    int32_t *ia = all_ids(a), *ia2 = all_ids(a2), *ib = all_ids(b), *it = all_ids(t);
    size_t bytes = 400 * 65 * sizeof(int32_t);
    CHECK(memcmp(ia, ia2, bytes) == 0, "same seed, different ids");
    CHECK(memcmp(ia, ib, bytes) != 0, "different seed, same ids");
    CHECK(memcmp(ia, it, bytes) != 0, "train and test are the same sequences");
    CHECK(in_range(ia, 400 * 65, 100) && in_range(it, 400 * 65, 100), "an id out of [0, 100)");
    int used[100] = {0}, distinct = 0;
    for (size_t k = 0; k < 400 * 65; k++)
        distinct += !used[ia[k]]++;
    CHECK(distinct == 100, "%d of 100 ids appear", distinct);

    printf("learnable: a bigram table from train predicts test\n");
    double acc = bigram_accuracy(a, ia, it, 400);
    printf("  next-token accuracy %.3f (chance 0.010, best possible ~0.50)\n", acc);
    CHECK(acc > 0.40 && acc < 0.60, "accuracy %.3f", acc);
    tb_dataset *other = make(400, 64, 100, 8, TB_SPLIT_TEST);
    int32_t *io = all_ids(other);
    double cross = bigram_accuracy(a, ia, io, 400);
    printf("  on another seed's chain %.3f\n", cross);
    CHECK(cross < 0.1, "the chain does not depend on the seed: %.3f", cross);

    printf("GPT-2's vocabulary: ids in [0, 50257), a long sequence\n");
    tb_dataset *g = make(1000000, 1024, 50257, 1, TB_SPLIT_TRAIN);
    int32_t *seq = malloc(1025 * sizeof *seq);
    tb_dataset_tokens(g, 999999, seq);
    int hi = 0;
    for (int k = 0; k < 1025; k++)
        hi = seq[k] > hi ? seq[k] : hi;
    CHECK(in_range(seq, 1025, 50257) && hi > 25000, "ids of sample 999999 (max %d)", hi);

    printf("bad configuration is refused\n");
    tb_token_cfg bad[] = {{.n = 0, .seq = 8, .vocab = 10}, {.n = 4, .seq = 0, .vocab = 10},
                          {.n = 4, .seq = 8, .vocab = 1}, {.n = 4, .seq = 8, .vocab = 1 << 25}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tb_dataset *none = NULL;
        CHECK(tb_dataset_tokens_create(&bad[k], &none) == TB_ERR_INVALID && !none,
              "case %zu accepted", k);
        CHECK(strstr(tb_error_message(), "synthetic tokens") != NULL, "message %s",
              tb_error_message());
        tb_error_clear();
    }

    free(ia);
    free(ia2);
    free(ib);
    free(it);
    free(io);
    free(seq);
    tb_dataset_free(a);
    tb_dataset_free(a2);
    tb_dataset_free(b);
    tb_dataset_free(t);
    tb_dataset_free(other);
    tb_dataset_free(g);
    printf(failures ? "tokens_test: %d FAILED\n" : "tokens_test: all passed\n", failures);
    return failures != 0;
}
