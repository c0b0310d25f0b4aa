/*
 * rng.h - a counter-based random number generator.
 *
 * Every random choice in tunebench's data path (shuffling, crops, flips,
 * synthetic images) is a pure function of a few counters: (seed, epoch,
 * sample index, stream). tb_rng_make() hashes those into a key, and the numbers
 * that follow are a splitmix64 sequence started at that key. Nothing depends
 * on which thread or process draws them, or in what order samples are
 * visited, which is what makes loader batches bitwise identical whatever
 * num_workers is.
 *
 * Header only; no state outside the tb_rng value. Tested through
 * datasets/augment_test.c and lib/train/loader_test.c, and (tb_rng_index)
 * the bootstrap intervals of lib/core/stats_test.c.
 */
#ifndef TB_RNG_H
#define TB_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Streams keep independent uses of the same (seed, epoch, index) apart. */
typedef enum tb_rng_stream {
    TB_RNG_SHUFFLE = 1,        /* epoch permutation; index is 0 */
    TB_RNG_AUGMENT = 2,        /* crop offsets and flip of one sample */
    TB_RNG_SYNTH_LABEL = 3,    /* synthetic dataset: label of a sample */
    TB_RNG_SYNTH_NOISE = 4,    /* synthetic dataset: pixel noise of a sample */
    TB_RNG_SYNTH_TEMPLATE = 5, /* synthetic dataset: class templates; index = class */
    TB_RNG_SYNTH_TOKENS = 6,   /* synthetic tokens: the draws of one sequence */
    TB_RNG_SYNTH_CHAIN = 7,    /* synthetic tokens: successors of a token; index = id */
} tb_rng_stream;

typedef struct tb_rng {
    uint64_t state;
} tb_rng;

#define TB_RNG_GOLDEN 0x9e3779b97f4a7c15ULL

/* splitmix64's finalizer: a bijection on 64 bits with good avalanche. */
static inline uint64_t tb_rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The generator for one (seed, epoch, index, stream). Each counter goes
 * through the finalizer in turn, so changing any one of them gives an
 * unrelated sequence. */
static inline tb_rng tb_rng_make(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream)
{
    uint64_t k = tb_rng_mix64(seed + TB_RNG_GOLDEN);
    k = tb_rng_mix64(k + epoch * TB_RNG_GOLDEN + 1);
    k = tb_rng_mix64(k + index * TB_RNG_GOLDEN + 2);
    k = tb_rng_mix64(k + stream * TB_RNG_GOLDEN + 3);
    tb_rng r = {k};
    return r;
}

/* Next 64 random bits of this generator's sequence. */
static inline uint64_t tb_rng_next_u64(tb_rng *r)
{
    r->state += TB_RNG_GOLDEN;
    return tb_rng_mix64(r->state);
}

/* Uniform integer in [0, n). REQUIRES: n > 0. Multiply-shift on the high 32
 * bits; the bias (below n / 2^32) does not matter for crops and shuffles. */
static inline uint32_t tb_rng_below(tb_rng *r, uint32_t n)
{
    return (uint32_t)(((tb_rng_next_u64(r) >> 32) * (uint64_t)n) >> 32);
}

/* Fisher-Yates over a[0..n), from the last element down, each swapped
 * with one drawn at or below it (tb_rng_below): the same order for the
 * same generator state wherever it runs. */
static inline void tb_rng_shuffle(tb_rng *r, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)tb_rng_below(r, (uint32_t)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float tb_rng_float01(tb_rng *r)
{
    return (float)(tb_rng_next_u64(r) >> 40) * (1.0f / 16777216.0f);
}

/* A plain splitmix64 stream started at seed: for test inputs, benchmark
 * operands and parameter initialisation, where no counters are needed. */
static inline tb_rng tb_rng_seeded(uint64_t seed)
{
    tb_rng r = {seed};
    return r;
}

/* Uniform index in [0, n) from all 64 bits (multiply-shift): the bias is
 * below n / 2^64. For resampling and picking among many. REQUIRES: n > 0. */
static inline size_t tb_rng_index(tb_rng *r, size_t n)
{
    return (size_t)(((unsigned __int128)tb_rng_next_u64(r) * n) >> 64);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double tb_rng_double01(tb_rng *r)
{
    return (double)(tb_rng_next_u64(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi). */
static inline double tb_rng_uniform(tb_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * tb_rng_double01(r);
}

/* x[0..n) uniform in [lo, hi) from the stream started at seed, with no
 * exact zeros (a zero hides a missing multiply): a zero draw becomes
 * (hi - lo) / 4. The one random fill of tests and benchmarks. */
static inline void tb_rng_fill(float *x, size_t n, uint64_t seed, double lo, double hi)
{
    tb_rng r = tb_rng_seeded(seed);
    for (size_t i = 0; i < n; i++) {
        float v = (float)tb_rng_uniform(&r, lo, hi);
        x[i] = v != 0.0f ? v : (float)((hi - lo) / 4);
    }
}

#ifdef __cplusplus
}
#endif
#endif
