/*
 * gelu.c - fused and unfused GELU on the CPU, the exact-erf form and the
 * tanh form (TB_GELU_TANH); see gelu.h.
 *
 * Structure: a pass is one element-wise op over [0, n) (the fused GELU, or
 * one step of the unfused chain). run_pass splits it into one contiguous
 * chunk per OpenMP thread and runs the chunk with the selected ISA's loop.
 * The unfused variant is a list of passes, exactly the steps of
 * kernels/gelu_math.h, so fused and unfused agree bitwise. The tanh form
 * is the same machinery with its own fused passes and steps (cube, tanh,
 * sech^2).
 *
 * ISA paths, all computing the same operations (fmaf where gelu_math.h says
 * fmaf), so they agree bitwise too (lib/backend/cpu/gelu_test.c checks):
 *   generic: plain loops over the gelu_math.h functions, baseline ISA.
 *            Without hardware FMA each fmaf is a libm call: correct, slow.
 *   avx2:    the same loops compiled with target("avx2,fma"); GCC
 *            vectorizes them 8 wide (#pragma omp simd).
 *   avx512:  intrinsics, 16 wide, masked tail. Only AVX-512F is used.
 *
 * The fused passes are meant to run near the copy ceiling
 * (lib/backend/cpu/copy.c); bench:gelu measures both against it.
 * Regular stores: streaming stores did not help measurably.
 *
 * Build flags: -fopenmp (threads and omp simd); never -march=native, the
 * AVX paths are chosen at run time with __builtin_cpu_supports.
 */
#include "lib/backend/cpu/gelu.h"

#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/gelu_math.h"
#include "lib/core/status.h"

/* Below this many elements one thread is faster than waking a second. */
#define TB_GELU_PAR_MIN ((size_t)16384)
/* Chunk boundaries fall on 16 floats (one cache line, one AVX-512 vector). */
#define TB_GELU_CHUNK_ALIGN ((size_t)16)

/* ---- one pass: what runs over memory ---- */

typedef enum pass_kind {
    PASS_GELU_FWD,   /* out = gelu(a) */
    PASS_GELU_BWD,   /* out = b * gelu'(a)   (a = x, b = dy) */
    PASS_SCALE,      /* out = a * k */
    PASS_ADD_SCALAR, /* out = a + k */
    PASS_ERF,        /* out = erf(a) */
    PASS_EXP_NEG,    /* out = exp(-a) */
    PASS_MUL,        /* out = a * b */
    PASS_ADD,        /* out = a + b */
    PASS_GELU_TANH_FWD, /* out = gelu_tanh(a) */
    PASS_GELU_TANH_BWD, /* out = b * gelu_tanh'(a)   (a = x, b = dy) */
    PASS_CUBE,       /* out = a * a * a */
    PASS_TANH,       /* out = tanh(a) */
    PASS_SECH2,      /* out = sech^2(a) */
} pass_kind;

typedef struct pass {
    pass_kind kind;
    const float *a, *b;
    float *out;
    float k;
} pass;

/* One ISA's loops; each runs a pass's op over n elements from offset 0. */
typedef struct isa_loops {
    void (*unary)(pass_kind kind, const float *a, float k, float *out, size_t n);
    void (*binary)(pass_kind kind, const float *a, const float *b, float *out, size_t n);
} isa_loops;

/* ---- generic and AVX2: plain loops over the shared scalar math ----
 * One definition, compiled twice: once for the baseline ISA and once with
 * AVX2+FMA, where GCC vectorizes the omp simd loops and turns fmaf into
 * vfmadd. The switch sits outside the loops so each loop is branch-free. */
#define TB_PLAIN_LOOP(expr)                        \
    do {                                           \
        _Pragma("omp simd")                        \
        for (size_t i = 0; i < n; i++)             \
            out[i] = (expr);                       \
    } while (0)

#define TB_DEFINE_PLAIN_LOOPS(isa, attr)                                                   \
    attr static void unary_##isa(pass_kind kind, const float *a, float k, float *out,     \
                                 size_t n)                                                 \
    {                                                                                      \
        switch (kind) {                                                                    \
        case PASS_GELU_FWD: TB_PLAIN_LOOP(tb_gelu_fwd_f(a[i])); break;                     \
        case PASS_SCALE: TB_PLAIN_LOOP(tb_gelu_step_scale(a[i], k)); break;                \
        case PASS_ADD_SCALAR: TB_PLAIN_LOOP(tb_gelu_step_add_scalar(a[i], k)); break;      \
        case PASS_ERF: TB_PLAIN_LOOP(tb_gelu_step_erf(a[i])); break;                       \
        case PASS_EXP_NEG: TB_PLAIN_LOOP(tb_gelu_step_exp_neg(a[i])); break;               \
        case PASS_GELU_TANH_FWD: TB_PLAIN_LOOP(tb_gelu_tanh_fwd_f(a[i])); break;           \
        case PASS_CUBE: TB_PLAIN_LOOP(tb_gelu_step_cube(a[i])); break;                     \
        case PASS_TANH: TB_PLAIN_LOOP(tb_gelu_step_tanh(a[i])); break;                     \
        case PASS_SECH2: TB_PLAIN_LOOP(tb_gelu_step_sech2(a[i])); break;                   \
        default: break;                                                                    \
        }                                                                                  \
    }                                                                                      \
    attr static void binary_##isa(pass_kind kind, const float *a, const float *b,         \
                                  float *out, size_t n)                                    \
    {                                                                                      \
        switch (kind) {                                                                    \
        case PASS_GELU_BWD: TB_PLAIN_LOOP(tb_gelu_bwd_f(a[i], b[i])); break;               \
        case PASS_MUL: TB_PLAIN_LOOP(tb_gelu_step_mul(a[i], b[i])); break;                 \
        case PASS_ADD: TB_PLAIN_LOOP(tb_gelu_step_add(a[i], b[i])); break;                 \
        case PASS_GELU_TANH_BWD: TB_PLAIN_LOOP(tb_gelu_tanh_bwd_f(a[i], b[i])); break;     \
        default: break;                                                                    \
        }                                                                                  \
    }

TB_DEFINE_PLAIN_LOOPS(generic, )
TB_DEFINE_PLAIN_LOOPS(avx2, __attribute__((target("avx2,fma"))))

/* ---- AVX-512: the gelu_math.h operations, op for op, 16 lanes ---- */
#define TB_AVX512 __attribute__((target("avx512f,avx512dq")))

TB_AVX512 static inline __m512 v_set(float f) { return _mm512_set1_ps(f); }

/* tb_erf_f. min_ps(a, b) is (a < b ? a : b), so min_ps(4, x) is
 * (x > 4 ? 4 : x) including NaN handling, as in the scalar code. */
TB_AVX512 static inline __m512 v_erf(__m512 x)
{
    __m512 c = _mm512_min_ps(v_set(TB_ERF_CLAMP), x);
    c = _mm512_max_ps(v_set(-TB_ERF_CLAMP), c);
    __m512 s = _mm512_mul_ps(c, c);
    __m512 p = _mm512_fmadd_ps(v_set(TB_ERF_P13), s, v_set(TB_ERF_P11));
    p = _mm512_fmadd_ps(p, s, v_set(TB_ERF_P9));
    p = _mm512_fmadd_ps(p, s, v_set(TB_ERF_P7));
    p = _mm512_fmadd_ps(p, s, v_set(TB_ERF_P5));
    p = _mm512_fmadd_ps(p, s, v_set(TB_ERF_P3));
    p = _mm512_fmadd_ps(p, s, v_set(TB_ERF_P1));
    __m512 q = _mm512_fmadd_ps(v_set(TB_ERF_Q8), s, v_set(TB_ERF_Q6));
    q = _mm512_fmadd_ps(q, s, v_set(TB_ERF_Q4));
    q = _mm512_fmadd_ps(q, s, v_set(TB_ERF_Q2));
    q = _mm512_fmadd_ps(q, s, v_set(TB_ERF_Q0));
    return _mm512_div_ps(_mm512_mul_ps(c, p), q);
}

/* tb_exp_neg_f */
TB_AVX512 static inline __m512 v_exp_neg(__m512 s)
{
    __m512 c = _mm512_min_ps(v_set(TB_EXP_FLUSH), s);
    __m512 z = _mm512_sub_ps(_mm512_setzero_ps(), c);
    __m512 t = _mm512_fmadd_ps(z, v_set(TB_EXP_LOG2E), v_set(TB_EXP_ROUND));
    __m512 kf = _mm512_sub_ps(t, v_set(TB_EXP_ROUND));
    __m512 r = _mm512_fmadd_ps(kf, v_set(-TB_EXP_LN2_HI), z);
    r = _mm512_fmadd_ps(kf, v_set(-TB_EXP_LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(v_set(TB_EXP_C5), r, v_set(TB_EXP_C4));
    p = _mm512_fmadd_ps(p, r, v_set(TB_EXP_C3));
    p = _mm512_fmadd_ps(p, r, v_set(TB_EXP_C2));
    p = _mm512_fmadd_ps(p, r, v_set(TB_EXP_C1));
    p = _mm512_fmadd_ps(p, r, v_set(TB_EXP_C0));
    __m512 e = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    e = _mm512_add_ps(e, v_set(1.0f));
    __m512i bits = _mm512_castps_si512(t);
    bits = _mm512_add_epi32(bits, _mm512_set1_epi32((int)(127u - TB_EXP_ROUND_BITS)));
    bits = _mm512_slli_epi32(bits, 23);
    e = _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
    __mmask16 flush = _mm512_cmp_ps_mask(s, v_set(TB_EXP_FLUSH), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(flush, e, _mm512_setzero_ps());
}

/* tb_gelu_fwd_f */
TB_AVX512 static inline __m512 v_gelu_fwd(__m512 x)
{
    __m512 t = _mm512_mul_ps(x, v_set(TB_GELU_SQRT1_2));
    t = v_erf(t);
    t = _mm512_add_ps(t, v_set(1.0f));
    __m512 u = _mm512_mul_ps(x, v_set(0.5f));
    return _mm512_mul_ps(u, t);
}

/* tb_gelu_bwd_f */
TB_AVX512 static inline __m512 v_gelu_bwd(__m512 x, __m512 dy)
{
    __m512 t = _mm512_mul_ps(x, v_set(TB_GELU_SQRT1_2));
    __m512 c = v_erf(t);
    c = _mm512_add_ps(c, v_set(1.0f));
    c = _mm512_mul_ps(c, v_set(0.5f));
    __m512 s = _mm512_mul_ps(t, t);
    __m512 g = v_exp_neg(s);
    g = _mm512_mul_ps(g, x);
    g = _mm512_mul_ps(g, v_set(TB_GELU_INV_SQRT_2PI));
    return _mm512_mul_ps(dy, _mm512_add_ps(c, g));
}

/* -x, by flipping the sign bit as C's unary minus does (0 - x would turn
 * -0 into +0). */
TB_AVX512 static inline __m512 v_neg(__m512 x)
{
    return _mm512_xor_ps(x, v_set(-0.0f));
}

/* |a| and whether a < 0, as tb_tanh_f's ternaries: NaN compares false. */
TB_AVX512 static inline __m512 v_abs_lt0(__m512 a, __mmask16 *neg)
{
    *neg = _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(*neg, a, v_neg(a));
}

/* tb_tanh_f */
TB_AVX512 static inline __m512 v_tanh(__m512 a)
{
    __mmask16 neg;
    __m512 s = v_abs_lt0(a, &neg);
    __m512 e = v_exp_neg(_mm512_add_ps(s, s));
    __m512 r = _mm512_div_ps(_mm512_add_ps(v_set(1.0f), v_neg(e)), _mm512_add_ps(v_set(1.0f), e));
    return _mm512_mask_blend_ps(neg, r, v_neg(r));
}

/* tb_sech2_f */
TB_AVX512 static inline __m512 v_sech2(__m512 a)
{
    __mmask16 neg;
    __m512 s = v_abs_lt0(a, &neg);
    __m512 e = v_exp_neg(_mm512_add_ps(s, s));
    __m512 q = _mm512_add_ps(v_set(1.0f), e);
    return _mm512_div_ps(_mm512_mul_ps(e, v_set(4.0f)), _mm512_mul_ps(q, q));
}

/* tb_gelu_step_cube */
TB_AVX512 static inline __m512 v_cube(__m512 x)
{
    return _mm512_mul_ps(_mm512_mul_ps(x, x), x);
}

/* tb_gelu_tanh_arg_f */
TB_AVX512 static inline __m512 v_gelu_tanh_arg(__m512 x)
{
    __m512 c = _mm512_mul_ps(v_cube(x), v_set(TB_GELU_TANH_C));
    c = _mm512_add_ps(x, c);
    return _mm512_mul_ps(c, v_set(TB_GELU_TANH_K));
}

/* tb_gelu_tanh_fwd_f */
TB_AVX512 static inline __m512 v_gelu_tanh_fwd(__m512 x)
{
    __m512 t = v_tanh(v_gelu_tanh_arg(x));
    t = _mm512_add_ps(t, v_set(1.0f));
    __m512 u = _mm512_mul_ps(x, v_set(0.5f));
    return _mm512_mul_ps(u, t);
}

/* tb_gelu_tanh_bwd_f */
TB_AVX512 static inline __m512 v_gelu_tanh_bwd(__m512 x, __m512 dy)
{
    __m512 a = v_gelu_tanh_arg(x);
    __m512 t = v_tanh(a);
    t = _mm512_add_ps(t, v_set(1.0f));
    t = _mm512_mul_ps(t, v_set(0.5f));
    __m512 h = v_sech2(a);
    h = _mm512_mul_ps(h, x);
    h = _mm512_mul_ps(h, v_set(0.5f));
    __m512 s = _mm512_mul_ps(x, x);
    s = _mm512_mul_ps(s, v_set(TB_GELU_TANH_3C));
    s = _mm512_add_ps(s, v_set(1.0f));
    s = _mm512_mul_ps(s, v_set(TB_GELU_TANH_K));
    h = _mm512_mul_ps(h, s);
    return _mm512_mul_ps(dy, _mm512_add_ps(t, h));
}

/* Run expr over n elements, 16 at a time, then one masked step for the
 * rest: LOOP1 with va = a[i..], LOOP2 also with vb = b[i..]. */
#define TB_AVX512_LOOP1(expr)                                             \
    do {                                                                  \
        size_t i = 0;                                                     \
        for (; i + 16 <= n; i += 16) {                                    \
            __m512 va = _mm512_loadu_ps(a + i);                           \
            _mm512_storeu_ps(out + i, (expr));                            \
        }                                                                 \
        if (i < n) {                                                      \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);              \
            __m512 va = _mm512_maskz_loadu_ps(m, a + i);                  \
            _mm512_mask_storeu_ps(out + i, m, (expr));                    \
        }                                                                 \
    } while (0)

#define TB_AVX512_LOOP2(expr)                                             \
    do {                                                                  \
        size_t i = 0;                                                     \
        for (; i + 16 <= n; i += 16) {                                    \
            __m512 va = _mm512_loadu_ps(a + i);                           \
            __m512 vb = _mm512_loadu_ps(b + i);                           \
            _mm512_storeu_ps(out + i, (expr));                            \
        }                                                                 \
        if (i < n) {                                                      \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);              \
            __m512 va = _mm512_maskz_loadu_ps(m, a + i);                  \
            __m512 vb = _mm512_maskz_loadu_ps(m, b + i);                  \
            _mm512_mask_storeu_ps(out + i, m, (expr));                    \
        }                                                                 \
    } while (0)

TB_AVX512 static void unary_avx512(pass_kind kind, const float *a, float k, float *out,
                                   size_t n)
{
    __m512 vk = v_set(k);
    switch (kind) {
    case PASS_GELU_FWD: TB_AVX512_LOOP1(v_gelu_fwd(va)); break;
    case PASS_SCALE: TB_AVX512_LOOP1(_mm512_mul_ps(va, vk)); break;
    case PASS_ADD_SCALAR: TB_AVX512_LOOP1(_mm512_add_ps(va, vk)); break;
    case PASS_ERF: TB_AVX512_LOOP1(v_erf(va)); break;
    case PASS_EXP_NEG: TB_AVX512_LOOP1(v_exp_neg(va)); break;
    case PASS_GELU_TANH_FWD: TB_AVX512_LOOP1(v_gelu_tanh_fwd(va)); break;
    case PASS_CUBE: TB_AVX512_LOOP1(v_cube(va)); break;
    case PASS_TANH: TB_AVX512_LOOP1(v_tanh(va)); break;
    case PASS_SECH2: TB_AVX512_LOOP1(v_sech2(va)); break;
    default: break;
    }
}

TB_AVX512 static void binary_avx512(pass_kind kind, const float *a, const float *b,
                                    float *out, size_t n)
{
    switch (kind) {
    case PASS_GELU_BWD: TB_AVX512_LOOP2(v_gelu_bwd(va, vb)); break;
    case PASS_MUL: TB_AVX512_LOOP2(_mm512_mul_ps(va, vb)); break;
    case PASS_ADD: TB_AVX512_LOOP2(_mm512_add_ps(va, vb)); break;
    case PASS_GELU_TANH_BWD: TB_AVX512_LOOP2(v_gelu_tanh_bwd(va, vb)); break;
    default: break;
    }
}

/* ---- ISA selection ---- */

static const isa_loops loops_by_isa[] = {
    [TB_ISA_GENERIC] = {unary_generic, binary_generic},
    [TB_ISA_AVX2] = {unary_avx2, binary_avx2},
    [TB_ISA_AVX512] = {unary_avx512, binary_avx512},
};

static tb_cpu_isa selected_isa = TB_ISA_AUTO; /* resolved on first use */

int tb_cpu_isa_supported(tb_cpu_isa isa)
{
    __builtin_cpu_init();
    switch (isa) {
    case TB_ISA_GENERIC: return 1;
    case TB_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TB_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    default: return 0;
    }
}

const char *tb_cpu_isa_name(tb_cpu_isa isa)
{
    switch (isa) {
    case TB_ISA_AUTO: return "auto";
    case TB_ISA_GENERIC: return "generic";
    case TB_ISA_AVX2: return "avx2";
    case TB_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

static tb_cpu_isa best_isa(void)
{
    if (tb_cpu_isa_supported(TB_ISA_AVX512))
        return TB_ISA_AVX512;
    if (tb_cpu_isa_supported(TB_ISA_AVX2))
        return TB_ISA_AVX2;
    return TB_ISA_GENERIC;
}

int tb_cpu_gelu_set_isa(tb_cpu_isa isa)
{
    if (isa == TB_ISA_AUTO) {
        selected_isa = best_isa();
        return TB_OK;
    }
    if (isa != TB_ISA_GENERIC && isa != TB_ISA_AVX2 && isa != TB_ISA_AVX512)
        return TB_FAIL(TB_ERR_INVALID, "unknown CPU ISA %d", (int)isa);
    if (!tb_cpu_isa_supported(isa))
        return TB_FAIL(TB_ERR_UNSUPPORTED, "this CPU cannot run the %s GELU path",
                       tb_cpu_isa_name(isa));
    selected_isa = isa;
    return TB_OK;
}

tb_cpu_isa tb_cpu_gelu_isa(void)
{
    /* atomic: DataParallel's replicas may make their first call at once */
    tb_cpu_isa isa = __atomic_load_n(&selected_isa, __ATOMIC_RELAXED);
    if (isa == TB_ISA_AUTO) {
        isa = best_isa();
        __atomic_store_n(&selected_isa, isa, __ATOMIC_RELAXED);
    }
    return isa;
}

/* ---- running passes ---- */

static int is_unary(pass_kind kind)
{
    return kind != PASS_GELU_BWD && kind != PASS_MUL && kind != PASS_ADD &&
           kind != PASS_GELU_TANH_BWD;
}

static void run_chunk(const isa_loops *l, const pass *p, size_t begin, size_t len)
{
    if (is_unary(p->kind))
        l->unary(p->kind, p->a + begin, p->k, p->out + begin, len);
    else
        l->binary(p->kind, p->a + begin, p->b + begin, p->out + begin, len);
}

/* One pass over n elements: one contiguous chunk per thread (static). */
static void run_pass(const pass *p, size_t n, int threads)
{
    const isa_loops *l = &loops_by_isa[tb_cpu_gelu_isa()];
    int parts = n < TB_GELU_PAR_MIN ? 1 : threads;
    size_t chunk = (n + (size_t)parts - 1) / (size_t)parts;
    chunk = (chunk + TB_GELU_CHUNK_ALIGN - 1) / TB_GELU_CHUNK_ALIGN * TB_GELU_CHUNK_ALIGN;
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int i = 0; i < parts; i++) {
        size_t begin = (size_t)i * chunk;
        if (begin < n)
            run_chunk(l, p, begin, n - begin < chunk ? n - begin : chunk);
    }
}

static void run_passes(const pass *ps, int count, size_t n, int threads)
{
    for (int i = 0; i < count; i++)
        run_pass(&ps[i], n, threads);
}

/* Eager PyTorch's forward: t = x * M_SQRT1_2; t = erf(t); t = t + 1;
 * u = x * 0.5; y = u * t. Temporaries ping-pong so no pass reads what it
 * writes, and y is written last (so y may equal x). */
static void gelu_fwd_unfused(const float *x, float *y, size_t n, int threads, float *t1,
                             float *t2)
{
    const pass ps[] = {
        {PASS_SCALE, x, NULL, t1, TB_GELU_SQRT1_2},
        {PASS_ERF, t1, NULL, t2, 0.0f},
        {PASS_ADD_SCALAR, t2, NULL, t1, 1.0f},
        {PASS_SCALE, x, NULL, t2, 0.5f},
        {PASS_MUL, t2, t1, y, 0.0f},
    };
    run_passes(ps, (int)(sizeof ps / sizeof ps[0]), n, threads);
}

/* The backward as separate element-wise passes, one op each, in the order
 * of tb_gelu_grad_f: as many kernels as eager autograd launches for the
 * decomposed forward (mul, erf backward's pow/exp/mul, the adds), with the
 * forward's intermediates recomputed since only x and dy come in. */
static void gelu_bwd_unfused(const float *x, const float *dy, float *dx, size_t n, int threads,
                             float *t1, float *t2)
{
    const pass ps[] = {
        {PASS_SCALE, x, NULL, t1, TB_GELU_SQRT1_2},     /* t1 = x / sqrt2        */
        {PASS_ERF, t1, NULL, t2, 0.0f},                 /* t2 = erf(t1)          */
        {PASS_ADD_SCALAR, t2, NULL, t2, 1.0f},          /* t2 = t2 + 1           */
        {PASS_SCALE, t2, NULL, t2, 0.5f},               /* t2 = Phi(x)           */
        {PASS_MUL, t1, t1, t1, 0.0f},                   /* t1 = x^2 / 2          */
        {PASS_EXP_NEG, t1, NULL, t1, 0.0f},             /* t1 = exp(-x^2 / 2)    */
        {PASS_MUL, t1, x, t1, 0.0f},                    /* t1 = t1 * x           */
        {PASS_SCALE, t1, NULL, t1, TB_GELU_INV_SQRT_2PI}, /* t1 = x phi(x)       */
        {PASS_ADD, t2, t1, t2, 0.0f},                   /* t2 = gelu'(x)         */
        {PASS_MUL, dy, t2, dx, 0.0f},                   /* dx = dy * gelu'(x)    */
    };
    run_passes(ps, (int)(sizeof ps / sizeof ps[0]), n, threads);
}

/* nanoGPT's NewGELU in eager PyTorch, 0.5 * x * (1.0 + torch.tanh(
 * sqrt(2/pi) * (x + 0.044715 * torch.pow(x, 3.0)))): eight passes, the
 * steps of tb_gelu_tanh_fwd_f; y is written last (so y may equal x). */
static void gelu_tanh_fwd_unfused(const float *x, float *y, size_t n, int threads, float *t1,
                                  float *t2)
{
    const pass ps[] = {
        {PASS_CUBE, x, NULL, t1, 0.0f},                  /* t1 = x^3              */
        {PASS_SCALE, t1, NULL, t1, TB_GELU_TANH_C},      /* t1 = 0.044715 x^3     */
        {PASS_ADD, x, t1, t1, 0.0f},                     /* t1 = x + t1           */
        {PASS_SCALE, t1, NULL, t1, TB_GELU_TANH_K},      /* t1 = a                */
        {PASS_TANH, t1, NULL, t1, 0.0f},                 /* t1 = tanh(a)          */
        {PASS_ADD_SCALAR, t1, NULL, t1, 1.0f},           /* t1 = 1 + tanh(a)      */
        {PASS_SCALE, x, NULL, t2, 0.5f},                 /* t2 = 0.5 x            */
        {PASS_MUL, t2, t1, y, 0.0f},                     /* y = t2 * t1           */
    };
    run_passes(ps, (int)(sizeof ps / sizeof ps[0]), n, threads);
}

/* The backward as seventeen passes, the steps of tb_gelu_tanh_grad_f, then
 * dx = dy * gelu_tanh'(x); three temporaries since tanh(a), sech^2(a) and
 * da/dx are all alive before they combine. */
static void gelu_tanh_bwd_unfused(const float *x, const float *dy, float *dx, size_t n,
                                  int threads, float *t1, float *t2, float *t3)
{
    const pass ps[] = {
        {PASS_CUBE, x, NULL, t1, 0.0f},                  /* t1 = x^3                  */
        {PASS_SCALE, t1, NULL, t1, TB_GELU_TANH_C},      /* t1 = 0.044715 x^3         */
        {PASS_ADD, x, t1, t1, 0.0f},                     /* t1 = x + t1               */
        {PASS_SCALE, t1, NULL, t1, TB_GELU_TANH_K},      /* t1 = a                    */
        {PASS_TANH, t1, NULL, t2, 0.0f},                 /* t2 = tanh(a)              */
        {PASS_ADD_SCALAR, t2, NULL, t2, 1.0f},           /* t2 = 1 + tanh(a)          */
        {PASS_SCALE, t2, NULL, t2, 0.5f},                /* t2 = 0.5 (1 + tanh(a))    */
        {PASS_SECH2, t1, NULL, t1, 0.0f},                /* t1 = sech^2(a)            */
        {PASS_MUL, t1, x, t1, 0.0f},                     /* t1 = t1 * x               */
        {PASS_SCALE, t1, NULL, t1, 0.5f},                /* t1 = 0.5 x sech^2(a)      */
        {PASS_MUL, x, x, t3, 0.0f},                      /* t3 = x^2                  */
        {PASS_SCALE, t3, NULL, t3, TB_GELU_TANH_3C},     /* t3 = 3 0.044715 x^2       */
        {PASS_ADD_SCALAR, t3, NULL, t3, 1.0f},           /* t3 = t3 + 1               */
        {PASS_SCALE, t3, NULL, t3, TB_GELU_TANH_K},      /* t3 = da/dx                */
        {PASS_MUL, t1, t3, t1, 0.0f},                    /* t1 = t1 * t3              */
        {PASS_ADD, t2, t1, t2, 0.0f},                    /* t2 = gelu_tanh'(x)        */
        {PASS_MUL, dy, t2, dx, 0.0f},                    /* dx = dy * gelu_tanh'(x)   */
    };
    run_passes(ps, (int)(sizeof ps / sizeof ps[0]), n, threads);
}

/* ---- argument checks and the temporaries cache ---- */

static int check_args(const char *what, tb_gelu_variant v, int threads, size_t n, int ptrs_ok)
{
    if (v != TB_GELU_FUSED && v != TB_GELU_UNFUSED)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown GELU variant %d", what, (int)v);
    if (threads < 0)
        return TB_FAIL(TB_ERR_INVALID, "%s: threads = %d", what, threads);
    if (n > 0 && !ptrs_ok)
        return TB_FAIL(TB_ERR_INVALID, "%s: NULL pointer for %zu elements", what, n);
    return TB_OK;
}

static int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_num_procs(); }

/* Per calling thread: callers running GELU from several threads (the
 * data-parallel technique) must not share temporaries. */
#define TB_GELU_TMPS 3 /* the tanh backward's; the others use two */
typedef struct ws_cache {
    float *t[TB_GELU_TMPS];
    size_t n[TB_GELU_TMPS]; /* floats t[i] holds */
} ws_cache;

/* The calling thread's cache, heap-allocated and owned through a pthread key
 * whose destructor frees it when the thread exits: a _Thread_local alone has
 * no destructor, and every DataParallel replica thread leaked its cache. */
static pthread_key_t ws_key;
static pthread_once_t ws_key_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_release(ws_cache *c)
{
    for (int i = 0; i < TB_GELU_TMPS; i++) {
        free(c->t[i]);
        c->t[i] = NULL;
        c->n[i] = 0;
    }
}

static void ws_destroy(void *p)
{
    ws_release(p);
    free(p);
}

static void ws_key_create(void) { ws_key_ok = pthread_key_create(&ws_key, ws_destroy) == 0; }

/* The calling thread's cache, made on first use; NULL when out of memory. */
static ws_cache *ws_mine(void)
{
    pthread_once(&ws_key_once, ws_key_create);
    if (!ws_key_ok)
        return NULL;
    ws_cache *c = pthread_getspecific(ws_key);
    if (c)
        return c;
    c = calloc(1, sizeof *c);
    if (c && pthread_setspecific(ws_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

void tb_cpu_gelu_ws_free(void)
{
    pthread_once(&ws_key_once, ws_key_create);
    ws_cache *c = ws_key_ok ? pthread_getspecific(ws_key) : NULL;
    if (c)
        ws_release(c);
}

static float *alloc_floats(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

/* The first count temporaries of n floats each, grown one by one (the erf
 * GELU never pays for the tanh backward's third). */
static int ws_get_n(size_t n, int count, float **t)
{
    if (n > SIZE_MAX / sizeof(float) - 64)
        return TB_FAIL(TB_ERR_NOMEM, "GELU temporaries: %zu floats is too many", n);
    ws_cache *c = ws_mine();
    if (!c)
        return TB_FAIL(TB_ERR_NOMEM, "GELU temporaries: cannot make this thread's cache");
    for (int i = 0; i < count; i++) {
        if (c->n[i] < n) {
            free(c->t[i]);
            c->n[i] = 0;
            c->t[i] = alloc_floats(n);
            if (!c->t[i])
                return TB_FAIL(TB_ERR_NOMEM, "GELU temporaries: cannot allocate %d x %zu floats",
                               count, n);
            c->n[i] = n;
        }
        t[i] = c->t[i];
    }
    return TB_OK;
}

static int ws_get(size_t n, float **t1, float **t2)
{
    float *t[2];
    TB_TRY(ws_get_n(n, 2, t));
    *t1 = t[0];
    *t2 = t[1];
    return TB_OK;
}

/* ---- public entry points ---- */

int tb_cpu_gelu_fwd_ws(tb_gelu_variant v, const float *x, float *y, size_t n, int threads,
                       float *tmp1, float *tmp2)
{
    TB_TRY(check_args("tb_cpu_gelu_fwd", v, threads, n, x && y));
    if (n == 0)
        return TB_OK;
    threads = resolve_threads(threads);
    if (v == TB_GELU_FUSED) {
        const pass p = {PASS_GELU_FWD, x, NULL, y, 0.0f};
        run_pass(&p, n, threads);
        return TB_OK;
    }
    if (!tmp1 || !tmp2)
        return TB_FAIL(TB_ERR_INVALID, "tb_cpu_gelu_fwd: unfused needs two temporaries");
    gelu_fwd_unfused(x, y, n, threads, tmp1, tmp2);
    return TB_OK;
}

int tb_cpu_gelu_bwd_ws(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                       int threads, float *tmp1, float *tmp2)
{
    TB_TRY(check_args("tb_cpu_gelu_bwd", v, threads, n, x && dy && dx));
    if (n == 0)
        return TB_OK;
    threads = resolve_threads(threads);
    if (v == TB_GELU_FUSED) {
        const pass p = {PASS_GELU_BWD, x, dy, dx, 0.0f};
        run_pass(&p, n, threads);
        return TB_OK;
    }
    if (!tmp1 || !tmp2)
        return TB_FAIL(TB_ERR_INVALID, "tb_cpu_gelu_bwd: unfused needs two temporaries");
    gelu_bwd_unfused(x, dy, dx, n, threads, tmp1, tmp2);
    return TB_OK;
}

int tb_cpu_gelu_fwd(tb_gelu_variant v, const float *x, float *y, size_t n, int threads)
{
    float *t1 = NULL, *t2 = NULL;
    TB_TRY(check_args("tb_cpu_gelu_fwd", v, threads, n, x && y));
    if (v == TB_GELU_UNFUSED && n > 0)
        TB_TRY(ws_get(n, &t1, &t2));
    return tb_cpu_gelu_fwd_ws(v, x, y, n, threads, t1, t2);
}

int tb_cpu_gelu_bwd(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                    int threads)
{
    float *t1 = NULL, *t2 = NULL;
    TB_TRY(check_args("tb_cpu_gelu_bwd", v, threads, n, x && dy && dx));
    if (v == TB_GELU_UNFUSED && n > 0)
        TB_TRY(ws_get(n, &t1, &t2));
    return tb_cpu_gelu_bwd_ws(v, x, dy, dx, n, threads, t1, t2);
}

/* ---- the tanh GELU ---- */

int tb_cpu_gelu_tanh_fwd(tb_gelu_variant v, const float *x, float *y, size_t n, int threads)
{
    float *t[2];
    TB_TRY(check_args("tb_cpu_gelu_tanh_fwd", v, threads, n, x && y));
    if (n == 0)
        return TB_OK;
    threads = resolve_threads(threads);
    if (v == TB_GELU_FUSED) {
        const pass p = {PASS_GELU_TANH_FWD, x, NULL, y, 0.0f};
        run_pass(&p, n, threads);
        return TB_OK;
    }
    TB_TRY(ws_get_n(n, 2, t));
    gelu_tanh_fwd_unfused(x, y, n, threads, t[0], t[1]);
    return TB_OK;
}

int tb_cpu_gelu_tanh_bwd(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                         int threads)
{
    float *t[3];
    TB_TRY(check_args("tb_cpu_gelu_tanh_bwd", v, threads, n, x && dy && dx));
    if (n == 0)
        return TB_OK;
    threads = resolve_threads(threads);
    if (v == TB_GELU_FUSED) {
        const pass p = {PASS_GELU_TANH_BWD, x, dy, dx, 0.0f};
        run_pass(&p, n, threads);
        return TB_OK;
    }
    TB_TRY(ws_get_n(n, 3, t));
    gelu_tanh_bwd_unfused(x, dy, dx, n, threads, t[0], t[1], t[2]);
    return TB_OK;
}
