/*
 * rng_math.h - the dropout mask as a pure function of (seed, index), shared
 * by the CPU backend (lib/backend/cpu/dropout.c), the reference (lib/backend/ref/ops.c) and the
 * CUDA kernels, so every backend and every thread count draws the same mask.
 *
 * For element i of a call with (seed, offset), the stream index is
 * idx = offset + i. Its 32 high bits and the seed give a 64-bit block key
 * (splitmix64's finalizer, once per 2^32 indices, so a CPU loop hoists it);
 * the low 32 bits go through two rounds of a 32-bit integer hash
 * (Wellons' "lowbias32") keyed by the two halves of the block key. Two
 * rounds because one keyed by XOR alone would make the masks of two seeds
 * permutations of each other. 32-bit multiplies vectorize on the baseline
 * x86-64 ISA and are native on the GPU.
 *
 * The element is kept when the top 24 bits of the hash are >= p * 2^24:
 * probability 1 - p to within 2^-24; p == 0 keeps all, p == 1 drops all.
 *
 * Tested in lib/backend/cpu/ops_test.c: the same mask for 1 and 2 threads and for
 * a range split in two with offsets, and a kept fraction near 1 - p.
 */
#ifndef TB_RNG_MATH_H
#define TB_RNG_MATH_H

#include <stdint.h>

#include "kernels/host_device.h"

/* A bijection on 32 bits with low bias (C. Wellons, "hash prospector"). */
TB_HD uint32_t tb_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Key of the block of 2^32 stream indices whose high bits are hi. */
TB_HD uint64_t tb_dropout_block_key(uint64_t seed, uint32_t hi)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * ((uint64_t)hi + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 32 random bits for the stream index (hi << 32) | lo. */
TB_HD uint32_t tb_dropout_bits(uint64_t block_key, uint32_t lo)
{
    uint32_t h = tb_hash32(lo ^ (uint32_t)block_key);
    return tb_hash32(h + (uint32_t)(block_key >> 32));
}

/* p in [0, 1] as a threshold on 24 bits: drop when bits >> 8 < threshold. */
TB_HD uint32_t tb_dropout_threshold(float p) { return (uint32_t)((double)p * 16777216.0); }

TB_HD uint8_t tb_dropout_keep(uint32_t bits, uint32_t threshold) { return (bits >> 8) >= threshold; }

/* The whole function: keep bit of stream index idx. */
TB_HD uint8_t tb_dropout_keep_at(uint64_t seed, uint64_t idx, uint32_t threshold)
{
    uint64_t key = tb_dropout_block_key(seed, (uint32_t)(idx >> 32));
    return tb_dropout_keep(tb_dropout_bits(key, (uint32_t)idx), threshold);
}

#endif
