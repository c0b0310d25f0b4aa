/*
 * tokens.c - synthetic token streams for language models, made on the fly;
 * see dataset.h (tb_dataset_tokens_create).
 *
 * The chain: token v's j-th successor is the (j+1)-th draw of
 * tb_rng_make(seed, 0, v, TB_RNG_SYNTH_CHAIN) below vocab: a function of
 * (seed, v) only, so train and test share it and no table is stored (GPT-2's
 * 50,257 ids x 4 successors would be 800 KB per worker process otherwise).
 * A sequence draws, from tb_rng_make(seed, split, index, TB_RNG_SYNTH_TOKENS):
 * its first id uniformly, then per step one 4-bit number u that picks the
 * successor (u < 8: the first, < 12: the second, < 14: the third, < 15: the
 * fourth) or, for u = 15, a uniform id. The best possible next-token
 * accuracy is therefore a little over 1/2, whatever the vocabulary.
 * Tests: bazel test //datasets:tokens_test
 */
#include <stdio.h>
#include <stdlib.h>

#include "datasets/dataset.h"
#include "lib/core/rng.h"

typedef struct token_gen {
    tb_token_cfg cfg;
} token_gen;

/* Successor j (0-based) of token v. */
static int32_t successor(uint64_t seed, int vocab, int32_t v, int j)
{
    tb_rng r = tb_rng_make(seed, 0, (uint64_t)v, TB_RNG_SYNTH_CHAIN);
    uint32_t id = 0;
    for (int k = 0; k <= j; k++)
        id = tb_rng_below(&r, (uint32_t)vocab);
    return (int32_t)id;
}

/* tb_sample_fn: seq + 1 ids of sequence index. */
static void make_sequence(const tb_dataset *ds, int index, void *out, int32_t *label)
{
    (void)label;
    const tb_token_cfg *c = &((const token_gen *)ds->gen)->cfg;
    int32_t *ids = out;
    tb_rng r = tb_rng_make(c->seed, (uint64_t)c->split, (uint64_t)index, TB_RNG_SYNTH_TOKENS);
    ids[0] = (int32_t)tb_rng_below(&r, (uint32_t)c->vocab);
    for (int t = 1; t <= c->seq; t++) {
        uint32_t u = tb_rng_below(&r, 16);
        if (u == 15) {
            ids[t] = (int32_t)tb_rng_below(&r, (uint32_t)c->vocab);
            continue;
        }
        int j = u < 8 ? 0 : u < 12 ? 1 : u < 14 ? 2 : 3;
        ids[t] = successor(c->seed, c->vocab, ids[t - 1], j);
    }
}

int tb_dataset_tokens_create(const tb_token_cfg *cfg, tb_dataset **out)
{
    *out = NULL;
    if (cfg->n <= 0 || cfg->seq <= 0 || cfg->seq > (1 << 20) || cfg->vocab < 2 ||
        cfg->vocab > (1 << 24))
        return TB_FAIL(TB_ERR_INVALID, "synthetic tokens: n=%d (> 0), seq=%d (1..%d), "
                       "vocab=%d (2..%d)", cfg->n, cfg->seq, 1 << 20, cfg->vocab, 1 << 24);
    tb_dataset *ds = calloc(1, sizeof *ds);
    token_gen *g = malloc(sizeof *g);
    if (!ds || !g) {
        free(ds);
        free(g);
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a synthetic token dataset");
    }
    g->cfg = *cfg;
    ds->kind = TB_SAMPLES_TOKENS;
    ds->n = cfg->n;
    ds->c = 1;
    ds->h = cfg->seq;
    ds->w = 1;
    ds->seq = cfg->seq;
    ds->vocab = cfg->vocab;
    ds->num_classes = cfg->vocab;
    ds->make = make_sequence;
    ds->gen = g;
    ds->synthetic = 1;
    snprintf(ds->name, sizeof ds->name, "synthetic-tokens-%dx%d-%s", cfg->seq, cfg->vocab,
             cfg->split == TB_SPLIT_TRAIN ? "train" : "test");
    snprintf(ds->source, sizeof ds->source,
             "generated on the fly (synthetic: sparse Markov chain over %d ids, %d successors "
             "per id, seed %llu)", cfg->vocab, TB_TOKEN_SUCCESSORS,
             (unsigned long long)cfg->seed);
    *out = ds;
    return TB_OK;
}
