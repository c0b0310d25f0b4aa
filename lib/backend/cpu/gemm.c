/*
 * gemm.c - the CPU backend's gemm and gemm_lowp, through oneDNN 2.6
 * (shared state and helpers: dnnl.h). Test:
 *   bazel test //lib/backend/cpu:cpu_dnnl_test
 *
 * GEMM: one oneDNN matmul primitive per (transposes, m, n, k, leading
 * dimensions, alpha, beta, math), cached. alpha is an output scale, beta a
 * sum post-op: both are fixed when the primitive is created, so they are
 * part of the key. TB_MATH_TF32 sets oneDNN's fpmath mode to bf16 (f32 data,
 * bf16 multiplies where an implementation supports it): the CPU's nearest
 * analogue of TF32. dnnl_sgemm would be simpler but has no fpmath mode.
 * oneDNN only uses bf16 for it on CPUs with AVX512_BF16 (or AMX); the VM
 * this was written on has AVX-512 with VNNI only, where oneDNN accepts the
 * mode and computes in f32 (bitwise identical results; the test prints
 * which case it sees).
 *
 * Dense B and C: oneDNN 2.6's brgemm matmul (brg:avx512_core, its fast
 * AVX-512 one) takes only dense weights and destination. A B or C whose
 * leading dimension is wider than its rows (attention's per-head slices of
 * d-wide rows in lib/nn/layer_attn.c) got gemm:jit instead, whose median
 * was about 30x slower on the same 512x768x64 shapes (ONEDNN_VERBOSE=1 on a
 * GPT-2 step: 8.7-9.8 ms against 0.3 ms). So such a B is packed into the
 * workspace before the call, and such a C computed in the workspace (its
 * values copied in first when beta != 0) and copied out after: k*n and m*n
 * element copies against m*n*k multiply-adds. The primitive is the dense
 * one; on a CPU without AVX-512 (gemm:jit for every shape) the copies are
 * still correct. tb_cpu_gemm_set_pack(0) turns the packing off (tests).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/dnnl.h"
#include "lib/core/status.h"

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void gemm_entry_destroy(gemm_entry *e)
{
    primitive_destroy(&e->prim);
    memory_destroy(&e->a);
    memory_destroy(&e->b);
    memory_destroy(&e->c);
    memory_destroy(&e->scratch);
    memset(e, 0, sizeof *e);
}

/* A 2-D md of rows x cols where a stored transpose swaps the strides. */
static int md_2d(dnnl_memory_desc_t *md, int rows, int cols, int ld, int transposed,
                 dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
    return TB_OK;
}

static int gemm_attr_create(dnnl_primitive_attr_t *attr, float alpha, float beta, tb_math math)
{
    TB_TRY(attr_create(attr, math));
    int rc = TB_OK;
    dnnl_post_ops_t post = NULL;
    if (alpha != 1.0f)
        TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_attr_set_output_scales(*attr, 1, 0, &alpha),
                           out_destroy_attr);
    if (beta == 0.0f)
        return TB_OK;
    TB_CHECK_DNNL_GOTO(rc, dnnl_post_ops_create(&post), out_destroy_attr);
    TB_CHECK_DNNL_GOTO(rc, dnnl_post_ops_append_sum(post, beta), out_destroy_post);
    TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_attr_set_post_ops(*attr, post), out_destroy_post);
    dnnl_post_ops_destroy(post);
    return TB_OK;

out_destroy_post:
    dnnl_post_ops_destroy(post);
out_destroy_attr:
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return rc;
}

/* Creates the matmul primitive and its memory objects in e (key filled). */
static int gemm_entry_create(dnnl_state *st, gemm_entry *e, float alpha,
                             float beta)
{
    dnnl_memory_desc_t a_md, b_md, c_md;
    TB_TRY(md_2d(&a_md, e->m, e->k, e->lda, e->ta, dnnl_dt(e->dtype)));
    TB_TRY(md_2d(&b_md, e->k, e->n, e->ldb, e->tb, dnnl_dt(e->dtype)));
    TB_TRY(md_2d(&c_md, e->m, e->n, e->ldc, 0, dnnl_f32));
    dnnl_matmul_desc_t md;
    TB_CHECK_DNNL(dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md));
    dnnl_primitive_attr_t attr = NULL;
    TB_TRY(gemm_attr_create(&attr, alpha, beta, e->math));
    int rc = TB_OK;
    dnnl_primitive_desc_t pd = NULL;
    TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_desc_create(&pd, &md, attr, st->engine, NULL),
                       out_destroy_attr);
    TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_create(&e->prim, pd), out_destroy_pd);
    TB_CHECK_DNNL_GOTO(rc, dnnl_memory_create(&e->a, &a_md, st->engine, DNNL_MEMORY_NONE),
                       out_destroy_entry);
    TB_CHECK_DNNL_GOTO(rc, dnnl_memory_create(&e->b, &b_md, st->engine, DNNL_MEMORY_NONE),
                       out_destroy_entry);
    TB_CHECK_DNNL_GOTO(rc, dnnl_memory_create(&e->c, &c_md, st->engine, DNNL_MEMORY_NONE),
                       out_destroy_entry);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->ws_bytes = dnnl_memory_desc_get_size(smd);
    TB_TRY_GOTO(rc, memory_unbound(st, smd, &e->scratch), out_destroy_entry);
    pd_destroy(&pd);
    dnnl_primitive_attr_destroy(attr);
    return TB_OK;

out_destroy_entry:
    gemm_entry_destroy(e);
out_destroy_pd:
    pd_destroy(&pd);
out_destroy_attr:
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int gemm_key_equal(const gemm_entry *e, const gemm_entry *k)
{
    return e->used && e->ta == k->ta && e->tb == k->tb && e->m == k->m && e->n == k->n &&
           e->k == k->k && e->lda == k->lda && e->ldb == k->ldb && e->ldc == k->ldc &&
           e->alpha_bits == k->alpha_bits && e->beta_bits == k->beta_bits &&
           e->math == k->math && e->dtype == k->dtype;
}

/* The hash of what gemm_key_equal compares. */
static uint32_t gemm_key_hash(const gemm_entry *k)
{
    int f[9] = {k->ta, k->tb, k->m, k->n, k->k, k->lda, k->ldb, k->ldc, (int)k->math};
    uint32_t h = cache_hash(2166136261u, f, sizeof f);
    h = cache_hash(h, &k->alpha_bits, sizeof k->alpha_bits);
    h = cache_hash(h, &k->beta_bits, sizeof k->beta_bits);
    int dt = (int)k->dtype;
    return cache_hash(h, &dt, sizeof dt);
}

/* The cached entry for key, created (evicting the least recently used) if
 * missing. */
static int gemm_lookup(dnnl_state *st, const gemm_entry *key, float alpha,
                       float beta, gemm_entry **out)
{
    uint32_t h = gemm_key_hash(key);
    for (int s = cache_index_first(&st->gemm_ix, h); s; s = st->gemm_ix.next[s - 1]) {
        gemm_entry *e = &st->gemm[s - 1];
        if (st->gemm_ix.hash[s - 1] == h && gemm_key_equal(e, key)) {
            e->last_use = ++st->clock;
            *out = e;
            return TB_OK;
        }
    }
    int v = cache_victim(&st->gemm[0].used, &st->gemm[0].last_use, sizeof st->gemm[0],
                         GEMM_CACHE_SIZE);
    gemm_entry *victim = &st->gemm[v];
    if (victim->used)
        cache_index_remove(&st->gemm_ix, v);
    gemm_entry_destroy(victim);
    *victim = *key;
    int rc = gemm_entry_create(st, victim, alpha, beta);
    if (rc != TB_OK) {
        gemm_entry_destroy(victim);
        return rc;
    }
    victim->used = 1;
    victim->last_use = ++st->clock;
    cache_index_add(&st->gemm_ix, v, h);
    *out = victim;
    return TB_OK;
}

static int gemm_check_args(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return TB_FAIL(TB_ERR_INVALID, "gemm: m %d, n %d, k %d must all be > 0", m, n, k);
    if (lda < (ta ? m : k) || ldb < (tb ? k : n) || ldc < n)
        return TB_FAIL(TB_ERR_INVALID,
                       "gemm: leading dimensions lda %d ldb %d ldc %d too small for m %d n %d "
                       "k %d (trans %d %d)", lda, ldb, ldc, m, n, k, ta, tb);
    return TB_OK;
}

static int pack_enabled = 1;

void tb_cpu_gemm_set_pack(int on) { pack_enabled = !!on; }

/* rows of row_bytes from src (a row every sld bytes) to dst (every dld). */
static void copy_rows(char *dst, size_t dld, const char *src, size_t sld, int rows,
                      size_t row_bytes)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * dld, src + (size_t)r * sld, row_bytes);
}

/* Where B and C go when they are packed (see the file header): the caller's
 * strided operand, and the dense copy the primitive reads or writes. */
typedef struct gemm_pack {
    int b_rows, b_cols;       /* B as stored: (tb ? n x k : k x n); b_ld 0: not packed */
    int b_ld;
    const void *b_user;
    int c_ld;                 /* 0: C not packed */
    float *c_user;
    size_t esize;             /* bytes of an A or B element */
} gemm_pack;

/* Fills key's dense leading dimensions and p for a strided B or C. */
static void gemm_pack_plan(gemm_entry *key, const void *b, float *c, size_t esize, gemm_pack *p)
{
    memset(p, 0, sizeof *p);
    p->esize = esize;
    int b_dense = key->tb ? key->k : key->n;
    if (pack_enabled && key->ldb != b_dense) {
        p->b_rows = key->tb ? key->n : key->k;
        p->b_cols = b_dense;
        p->b_ld = key->ldb;
        p->b_user = b;
        key->ldb = b_dense;
    }
    if (pack_enabled && key->ldc != key->n) {
        p->c_ld = key->ldc;
        p->c_user = c;
        key->ldc = key->n;
    }
}

static size_t pack_b_bytes(const gemm_pack *p)
{
    return p->b_ld ? ws_round((size_t)p->b_rows * p->b_cols * p->esize) : 0;
}

/* Copies a packed B in (and C when beta reads it) at the workspace's
 * offset `at`; *b and *c then point at the dense copies. */
static void pack_in(const gemm_pack *p, const gemm_entry *e, char *at, float beta,
                    const void **b, float **c)
{
    if (p->b_ld) {
        copy_rows(at, (size_t)p->b_cols * p->esize, p->b_user, (size_t)p->b_ld * p->esize,
                  p->b_rows, (size_t)p->b_cols * p->esize);
        *b = at;
    }
    if (p->c_ld) {
        float *dense = (float *)(at + pack_b_bytes(p));
        if (beta != 0.0f)
            copy_rows((char *)dense, (size_t)e->n * sizeof(float), (const char *)p->c_user,
                      (size_t)p->c_ld * sizeof(float), e->m, (size_t)e->n * sizeof(float));
        *c = dense;
    }
}

static int gemm_run(tb_backend *be, gemm_entry *key, float alpha, const void *a,
                    const void *b, float beta, float *c, size_t esize)
{
    dnnl_state *st = state_of(be);
    gemm_entry *e;
    gemm_pack p;
    gemm_pack_plan(key, b, c, esize, &p);
    TB_TRY(gemm_lookup(st, key, alpha, beta, &e));
    size_t at = ws_round(e->ws_bytes);
    size_t c_bytes = p.c_ld ? (size_t)e->m * e->n * sizeof(float) : 0;
    TB_TRY(workspace_reserve(be, st, at + pack_b_bytes(&p) + c_bytes));
    pack_in(&p, e, (char *)st->ws + at, beta, &b, &c);
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->a, (void *)a));
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->b, (void *)b));
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->c, c));
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->scratch, e->ws_bytes ? st->ws : NULL));
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, e->a},
        {DNNL_ARG_WEIGHTS, e->b},
        {DNNL_ARG_DST, e->c},
        {DNNL_ARG_SCRATCHPAD, e->scratch},
    };
    TB_CHECK_DNNL(dnnl_primitive_execute(e->prim, st->stream, 4, args));
    TB_CHECK_DNNL(dnnl_stream_wait(st->stream));
    if (p.c_ld)
        copy_rows((char *)p.c_user, (size_t)p.c_ld * sizeof(float), (const char *)c,
                  (size_t)e->n * sizeof(float), e->m, (size_t)e->n * sizeof(float));
    return TB_OK;
}

static int cpu_gemm(tb_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc, tb_math math)
{
    if (math == TB_MATH_LOWP)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "gemm: TB_MATH_LOWP takes bf16 operands: use the "
                       "gemm_lowp slot");
    TB_TRY(check_math(TB_F32, math, "gemm"));
    int prev;
    lock_enter(be, &prev);
    int rc = tb_cpu_gemm_locked(be, TB_F32, math, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                ldb, beta, c, ldc);
    lock_leave(be, prev);
    return rc;
}

/* Values an operand of rows x cols at leading dimension ld spans. */
static size_t span(int rows, int cols, int ld) { return (size_t)(rows - 1) * ld + cols; }

int tb_cpu_gemm_locked(tb_backend *be, tb_dtype dtype, tb_math math, int trans_a, int trans_b,
                       int m, int n, int k, float alpha, const void *a, int lda, const void *b,
                       int ldb, float beta, float *c, int ldc)
{
    TB_TRY(gemm_check_args(trans_a, trans_b, m, n, k, lda, ldb, ldc));
    if (dtype != TB_F32 && bf16_mode(state_of(be)) == BF16_WIDENED) {
        /* no bf16 matmul in oneDNN on this CPU (dnnl.h): A and B widened to
         * fp32, then the fp32 matmul */
        float *wa, *wb;
        size_t na = trans_a ? span(k, m, lda) : span(m, k, lda);
        size_t nb = trans_b ? span(n, k, ldb) : span(k, n, ldb);
        TB_TRY(bf16_widen2(be, state_of(be), a, na, b, nb, &wa, &wb));
        return tb_cpu_gemm_locked(be, TB_F32, TB_MATH_F32, trans_a, trans_b, m, n, k, alpha, wa,
                                  lda, wb, ldb, beta, c, ldc);
    }
    gemm_entry key = {
        .ta = !!trans_a, .tb = !!trans_b, .m = m, .n = n, .k = k,
        .lda = lda, .ldb = ldb, .ldc = ldc,
        .alpha_bits = float_bits(alpha), .beta_bits = float_bits(beta),
        .math = dtype == TB_F32 ? math : TB_MATH_LOWP, .dtype = dtype,
    };
    /* bf16 and fp16: 2 bytes */
    return gemm_run(be, &key, alpha, a, b, beta, c, dtype == TB_F32 ? sizeof(float) : 2);
}

static int cpu_gemm_lowp(tb_backend *be, tb_dtype dtype, int trans_a, int trans_b, int m, int n,
                         int k, float alpha, const void *a, int lda, const void *b, int ldb,
                         float beta, float *c, int ldc)
{
    if (dtype == TB_F32)
        return TB_FAIL(TB_ERR_INVALID, "gemm_lowp: dtype fp32 (use gemm)");
    TB_TRY(check_math(dtype, TB_MATH_LOWP, "gemm_lowp"));
    int prev;
    lock_enter(be, &prev);
    int rc = tb_cpu_gemm_locked(be, dtype, TB_MATH_LOWP, trans_a, trans_b, m, n, k, alpha, a,
                                lda, b, ldb, beta, c, ldc);
    lock_leave(be, prev);
    return rc;
}

void tb_cpu_gemm_cache_release(tb_backend *be)
{
    dnnl_state *st = state_of(be);
    for (int i = 0; i < GEMM_CACHE_SIZE; i++)
        gemm_entry_destroy(&st->gemm[i]);
    memset(st->gemm_head, 0, sizeof st->gemm_head);
    memset(st->gemm_next, 0, sizeof st->gemm_next);
}

void tb_cpu_install_gemm(tb_backend *be)
{
    be->gemm = cpu_gemm;
    be->gemm_lowp = cpu_gemm_lowp;
}
