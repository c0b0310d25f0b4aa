/*
 * cast_math.h - per-element conversions between fp32 and the two 16-bit
 * float formats of mixed precision, shared by the CPU backend (lib/backend/cpu/cast.c)
 * and the CUDA kernels (kernels/cast.cu), so the CPU tests
 * (lib/backend/cpu/cast_test.c) check the arithmetic the GPU runs.
 *
 *   bf16: the top 16 bits of an fp32 (8-bit exponent, 7-bit mantissa),
 *         rounded to nearest even; same range as fp32, denormals kept.
 *   fp16: IEEE 754 binary16 (5-bit exponent, 10-bit mantissa), rounded to
 *         nearest even; |x| >= 65520 becomes Inf, |x| < 2^-25 (and 2^-25
 *         itself, a tie) becomes a signed zero, the rest below 2^-14
 *         become fp16 denormals.
 * NaN stays NaN (quiet, sign kept); Inf stays Inf. Everything works on the
 * bit patterns, so FTZ/DAZ on the host threads and -ffast-math change
 * nothing. Storage is uint16_t: the same bits as __nv_bfloat16 / __half.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_CAST_MATH_H
#define TB_CAST_MATH_H

#include <stdint.h>
#include <string.h>

/* Same tokens as kernels/gelu_math.h: identical redefinitions are legal C,
 * so either header may come first. */
#include "kernels/host_device.h"

TB_HD uint32_t tb_cast_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TB_HD float tb_cast_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> bf16, round to nearest even. */
TB_HD uint16_t tb_f32_to_bf16(float f)
{
    uint32_t u = tb_cast_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN: quiet, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);            /* ties to even; may carry into Inf */
    return (uint16_t)(u >> 16);
}

TB_HD float tb_bf16_to_f32(uint16_t h) { return tb_cast_bits_f32((uint32_t)h << 16); }

/* |x| below 2^-14 (fp32 bits a): an fp16 denormal count of 2^-24 units,
 * rounded to nearest even (0x400 when it rounds up to the smallest normal). */
TB_HD uint16_t tb_f16_denormal_bits(uint32_t a)
{
    if (a <= 0x33000000u) /* |x| <= 2^-25: zero (2^-25 is a tie, 0 is even) */
        return 0;
    uint32_t e = a >> 23;                        /* 102 .. 112 */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;    /* |x| = m * 2^(e - 150) */
    uint32_t s = 126u - e;                       /* units of 2^-24: m >> s */
    uint32_t r = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)r;
}

/* fp32 -> fp16 (IEEE binary16), round to nearest even. */
TB_HD uint16_t tb_f32_to_f16(float f)
{
    uint32_t u = tb_cast_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);       /* NaN: quiet, sign kept */
    if (a >= 0x477ff000u)                        /* >= 65520 (and Inf): Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u)                         /* < 2^-14 */
        return (uint16_t)(sign | tb_f16_denormal_bits(a));
    uint32_t h = (a >> 13) - (112u << 10);       /* rebias the exponent 127 -> 15 */
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;                                     /* may carry into the exponent */
    return (uint16_t)(sign | h);
}

/* fp16 -> fp32, exact. */
TB_HD float tb_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu;
    if (e == 0) { /* zero or denormal: m * 2^-24, exact in fp32 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (e == 31)
        return tb_cast_bits_f32(sign | 0x7f800000u | (m << 13));
    return tb_cast_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
