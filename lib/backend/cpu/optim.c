/*
 * optim.c - the CPU backend's opt_step: SGD and AdamW, per tensor or fused;
 * LARS, LAMB and NovoGrad (per-tensor norms: two phases over fixed
 * chunks). The per-element steps are kernels/optim_math.h's.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/optim_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

/* ---------------------------------------------------------------- optimizers
 * Per tensor: one pass per PyTorch op, each over the whole tensor (the
 * pass_* functions, named after the in-place op they stand for).
 * Fused: one parallel region over the elements of all tensors, each
 * element updated once in registers by the same steps (kernels/optim_math.h). */

/* dst = src * k (a.mul(k); dst == src is a.mul_(k)) */
static void pass_mul(int t, float *dst, const float *src, float k, size_t n)
{
    PAR_MAP(t, n, dst, tb_opt_step_mul(src[i], k));
}

/* dst = a + k b (a.add(b, alpha=k); dst == a is in place) */
static void pass_add(int t, float *dst, const float *a, const float *b, float k, size_t n)
{
    PAR_MAP(t, n, dst, tb_opt_step_add(a[i], b[i], k));
}

static void pass_copy(int t, float *dst, const float *src, size_t n)
{
    PAR_MAP(t, n, dst, src[i]);
}

/* a.addcmul_(b, c, value=k) */
static void pass_addcmul(int t, float *a, const float *b, const float *c, float k, size_t n)
{
    PAR_MAP(t, n, a, tb_opt_step_addcmul(a[i], b[i], c[i], k));
}

/* dst = src.sqrt() */
static void pass_sqrt(int t, float *dst, const float *src, size_t n)
{
    PAR_MAP(t, n, dst, tb_opt_step_sqrt(src[i]));
}

/* a.div_(k) */
static void pass_div(int t, float *a, float k, size_t n)
{
    PAR_MAP(t, n, a, tb_opt_step_div(a[i], k));
}

/* a.add_(k), k a scalar */
static void pass_add_scalar(int t, float *a, float k, size_t n)
{
    PAR_MAP(t, n, a, tb_opt_step_add_scalar(a[i], k));
}

/* a.addcdiv_(b, c, value=k) */
static void pass_addcdiv(int t, float *a, const float *b, const float *c, float k, size_t n)
{
    PAR_MAP(t, n, a, tb_opt_step_addcdiv(a[i], b[i], c[i], k));
}

/* PyTorch's _single_tensor_sgd for one tensor; d lives in scratch. */
static int sgd_tensor(tb_backend *be, const tb_sgd_coef *k, const tb_param_view *tv)
{
    int t = threads_of(be);
    size_t n = tv->n;
    float *tmp = NULL;
    TB_TRY(ws_floats(be, n, &tmp));
    const float *d = tv->grad;
    if (k->b.inv_scale != 1.0f) { /* GradScaler's unscale */
        pass_mul(t, tmp, d, k->b.inv_scale, n);
        d = tmp;
    }
    if (k->b.weight_decay != 0.0f) { /* d_p = d_p.add(param, alpha=wd) */
        pass_add(t, tmp, d, tv->param, k->b.weight_decay, n);
        d = tmp;
    }
    if (k->momentum != 0.0f) {
        if (k->b.first) {
            pass_copy(t, tv->state1, d, n); /* buf = clone(d_p) */
        } else {
            pass_mul(t, tv->state1, tv->state1, k->momentum, n); /* buf.mul_(momentum) */
            pass_add(t, tv->state1, tv->state1, d, 1.0f, n);     /* .add_(d_p) */
        }
        d = tv->state1;
    }
    pass_add(t, tv->param, tv->param, d, k->b.neg_lr, n); /* param.add_(d_p, alpha=-lr) */
    return TB_OK;
}

/* PyTorch's _single_tensor_adamw for one tensor: ten passes (eleven with
 * grad scaling); the unscaled grads and denom live in scratch. */
static int adamw_tensor(tb_backend *be, const tb_adamw_coef *k, const tb_param_view *tv)
{
    int t = threads_of(be);
    size_t n = tv->n;
    float *tmp = NULL;
    TB_TRY(ws_floats(be, 2 * n, &tmp));
    float *denom = tmp + n, *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
    if (k->inv_scale != 1.0f) {
        pass_mul(t, tmp, g, k->inv_scale, n);
        g = tmp;
    }
    pass_mul(t, p, p, k->decay, n);
    pass_mul(t, m, m, k->beta1, n);
    pass_add(t, m, m, g, k->one_minus_beta1, n);
    pass_mul(t, v, v, k->beta2, n);
    pass_addcmul(t, v, g, g, k->one_minus_beta2, n);
    pass_sqrt(t, denom, v, n);
    pass_div(t, denom, k->bc2_sqrt, n);
    pass_add_scalar(t, denom, k->eps, n);
    pass_addcdiv(t, p, m, denom, k->neg_step_size, n);
    return TB_OK;
}

/* Elements [a, b) of one tensor, in registers. */
static void sgd_slice(const tb_sgd_coef *k, const tb_param_view *tv, size_t a, size_t b)
{
    tb_sgd_coef kk = *k;
    float *p = tv->param, *buf = tv->state1;
    const float *g = tv->grad;
    if (kk.momentum == 0.0f) { /* no buffer: a per-element dummy */
#pragma omp simd
        for (size_t i = a; i < b; i++) {
            float unused = 0.0f;
            tb_sgd_elem(&kk, &p[i], g[i], &unused);
        }
        return;
    }
#pragma omp simd
    for (size_t i = a; i < b; i++)
        tb_sgd_elem(&kk, &p[i], g[i], &buf[i]);
}

static void adamw_slice(const tb_adamw_coef *k, const tb_param_view *tv, size_t a, size_t b)
{
    tb_adamw_coef kk = *k;
    float *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
#pragma omp simd
    for (size_t i = a; i < b; i++)
        tb_adamw_elem(&kk, &p[i], g[i], &m[i], &v[i]);
}

/* The fused step: threads split the concatenated elements of all tensors
 * into equal static ranges, whatever the tensor boundaries. */
static int opt_fused(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                     int count, const tb_sgd_coef *sgd, const tb_adamw_coef *adamw)
{
    size_t *off;
    TB_TRY(ws_offsets(be, (size_t)count + 1, &off));
    off[0] = 0;
    for (int i = 0; i < count; i++)
        off[i + 1] = off[i] + tensors[i].n;
    size_t total = off[count];
    int t = threads_of(be);
#pragma omp parallel num_threads(t) if (total >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(total, &lo, &hi);
        int i = 0;
        while (i < count && off[i + 1] <= lo)
            i++;
        for (; i < count && off[i] < hi; i++) {
            size_t a = (lo > off[i] ? lo : off[i]) - off[i];
            size_t b = (hi < off[i + 1] ? hi : off[i + 1]) - off[i];
            if (hp->kind == TB_OPT_SGD)
                sgd_slice(sgd, &tensors[i], a, b);
            else
                adamw_slice(adamw, &tensors[i], a, b);
        }
    }
    return TB_OK;
}

/* ---- large-batch optimizers (LARS, LAMB, NovoGrad; kernels/optim_math.h).
 * Every tensor is cut into chunks of LB_CHUNK elements; phase 1 reduces
 * each chunk's sums of squares into two doubles, the chunks of a tensor are
 * added in order (so the norms depend on the sizes only, not on threads),
 * the per-tensor scalar (trust ratio, step scale, NovoGrad's denominator)
 * is computed on the host, and phase 2 updates the elements. Fused: both
 * phases are one parallel loop over the chunks of all tensors; per tensor:
 * two parallel loops per tensor, as a for-loop optimizer runs. The two are
 * bitwise equal. */
#define LB_CHUNK ((size_t)16384)

typedef struct lb_chunk {
    int t;                    /* tensor */
    size_t a, b;              /* elements [a, b) of it */
} lb_chunk;

static int lb_workspace(tb_backend *be, size_t nchunks, int count, lb_chunk **ch, double **part,
                        float **scal)
{
    cpu_ops_ws *w = ws_of(be);
    size_t bytes = nchunks * (sizeof(lb_chunk) + 2 * sizeof(double)) + (size_t)count * sizeof(float);
    if (bytes > w->lb_cap) {
        void *p = malloc(bytes);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for a %zu-byte optimizer workspace",
                           bytes);
        free(w->lb);
        w->lb = p;
        w->lb_cap = bytes;
    }
    *part = w->lb;
    *ch = (lb_chunk *)(*part + 2 * nchunks);
    *scal = (float *)(*ch + nchunks);
    return TB_OK;
}

static void lb_phase1(const tb_lb_coefs *k, const tb_param_view *tv, size_t a, size_t b,
                      double *out)
{
    double s0 = 0.0, s1 = 0.0;
    float *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
    if (k->kind == TB_OPT_LAMB) {
        tb_lamb_coef kk = k->lamb;
        for (size_t i = a; i < b; i++) {
            tb_lamb_moments(&kk, g[i], &m[i], &v[i]);
            float u = tb_lamb_dir(&kk, p[i], m[i], v[i]);
            s0 += (double)p[i] * p[i];
            s1 += (double)u * u;
        }
    } else {
        float inv = k->kind == TB_OPT_LARS ? k->lars.b.inv_scale : k->novo.b.inv_scale;
        for (size_t i = a; i < b; i++) {
            float gg = tb_lb_unscale(g[i], inv);
            s0 += (double)p[i] * p[i];
            s1 += (double)gg * gg;
        }
    }
    out[0] = s0;
    out[1] = s1;
}

/* The per-tensor scalar from its norms; NovoGrad's tensor state advances. */
static float lb_scalar(const tb_lb_coefs *k, const tb_param_view *tv, double s0, double s1)
{
    float fixed;
    if (tb_lb_scalar_unadapted(k, tv->no_adapt, &fixed))
        return fixed;
    float w_norm = (float)sqrt(s0), o_norm = (float)sqrt(s1);
    if (k->kind == TB_OPT_LARS)
        return tb_lars_trust(&k->lars, w_norm, o_norm);
    if (k->kind == TB_OPT_LAMB)
        return tb_lamb_scale(&k->lamb, w_norm, o_norm);
    float v = tb_novograd_v(&k->novo, tv->tensor_state[0], (float)s1);
    tv->tensor_state[0] = v;
    return tb_novograd_denom(&k->novo, v);
}

static void lb_phase2(const tb_lb_coefs *k, float scalar, const tb_param_view *tv, size_t a,
                      size_t b)
{
    float *p = tv->param, *s1 = tv->state1, *s2 = tv->state2;
    const float *g = tv->grad;
    if (k->kind == TB_OPT_LARS) {
        tb_lars_coef kk = k->lars;
        float unused = 0.0f;
        for (size_t i = a; i < b; i++)
            tb_lars_elem(&kk, scalar, &p[i], g[i], kk.momentum != 0.0f ? &s1[i] : &unused);
    } else if (k->kind == TB_OPT_LAMB) {
        tb_lamb_coef kk = k->lamb;
#pragma omp simd
        for (size_t i = a; i < b; i++)
            tb_lamb_apply(&kk, scalar, &p[i], s1[i], s2[i]);
    } else {
        tb_novograd_coef kk = k->novo;
#pragma omp simd
        for (size_t i = a; i < b; i++)
            tb_novograd_elem(&kk, scalar, &p[i], g[i], &s1[i]);
    }
}

/* Both phases over tensors[0..count). */
static int lb_run(tb_backend *be, const tb_lb_coefs *k, const tb_param_view *tensors, int count)
{
    size_t nchunks = 0, c = 0, total = 0;
    for (int i = 0; i < count; i++) {
        nchunks += (tensors[i].n + LB_CHUNK - 1) / LB_CHUNK;
        total += tensors[i].n;
    }
    lb_chunk *ch;
    double *part;
    float *scal;
    TB_TRY(lb_workspace(be, nchunks, count, &ch, &part, &scal));
    for (int i = 0; i < count; i++)
        for (size_t a = 0; a < tensors[i].n; a += LB_CHUNK, c++)
            ch[c] = (lb_chunk){i, a, a + LB_CHUNK < tensors[i].n ? a + LB_CHUNK : tensors[i].n};
    int t = threads_of(be);
    long nc = (long)nchunks;
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (long j = 0; j < nc; j++) {
        tb_lb_coefs kt = tb_lb_for_tensor(k, tensors[ch[j].t].no_adapt);
        lb_phase1(&kt, &tensors[ch[j].t], ch[j].a, ch[j].b, part + 2 * j);
    }
    c = 0;
    for (int i = 0; i < count; i++) {
        double s0 = 0.0, s1 = 0.0;
        for (; c < nchunks && ch[c].t == i; c++) {
            s0 += part[2 * c];
            s1 += part[2 * c + 1];
        }
        if (tensors[i].n)
            scal[i] = lb_scalar(k, &tensors[i], s0, s1);
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (long j = 0; j < nc; j++) {
        tb_lb_coefs kt = tb_lb_for_tensor(k, tensors[ch[j].t].no_adapt);
        lb_phase2(&kt, scal[ch[j].t], &tensors[ch[j].t], ch[j].a, ch[j].b);
    }
    return TB_OK;
}

static int opt_large_batch(tb_backend *be, const tb_opt_hparams *hp,
                           const tb_param_view *tensors, int count, int fused)
{
    tb_lb_coefs k = tb_lb_coefs_make(hp);
    if (fused)
        return lb_run(be, &k, tensors, count);
    for (int i = 0; i < count; i++)
        TB_TRY(lb_run(be, &k, &tensors[i], 1));
    return TB_OK;
}

static int cpu_opt_step(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                        int count, int fused)
{
    TB_TRY(tb_check_opt_step(hp, tensors, count));
    if (hp->kind >= TB_OPT_LARS)
        return opt_large_batch(be, hp, tensors, count, fused);
    tb_opt_coefs k = tb_opt_coefs_make(hp);
    if (fused)
        return opt_fused(be, hp, tensors, count, &k.sgd, &k.adamw);
    for (int i = 0; i < count; i++) {
        if (hp->kind == TB_OPT_SGD)
            TB_TRY(sgd_tensor(be, &k.sgd, &tensors[i]));
        else
            TB_TRY(adamw_tensor(be, &k.adamw, &tensors[i]));
    }
    return TB_OK;
}

void tb_cpu_install_optim(tb_backend *be)
{
    be->opt_step = cpu_opt_step;
}
