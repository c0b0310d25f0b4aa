/*
 * embed_test.c - the token + position embedding and the tied vocabulary
 * head (lib/nn/layer_embed.c) against float64 central finite differences,
 * their FLOPs, their argument checks, and TB_INIT_NORMAL
 * (tb_param_init_host, lib/nn/model.c).
 *
 * Three graphs on the CPU backend, each with grad_accumulate 0 (gradients
 * pre-filled with 1e30: the backward must write them) and 1 (pre-filled
 * with random values it must add to), at batch 3 of an allocated 4:
 *   embedding   L = sum(emb(tokens) * dy)
 *   head        L = sum((x wte^T) * dy), wte owned by an embedding that
 *               does not run; dwpe must stay as it was
 *   tied        L = sum((emb(tokens) wte^T) * dy): both ends add into dwte
 * vocab 11 < 21 rows (tokens repeat), d 5, context 9 > T 7 (rows 7, 8 of
 * dwpe get no gradient: zero when writing, kept when adding). The float64
 * function is written here from lib/backend/ref/tokens.h's embedding and a
 * plain x wte^T; dL/d(wte, wpe, x) by central differences (h = 1e-6; L is
 * at most quadratic in the parameters, so they are exact to ~1e-9).
 * Tolerances, as max |a - r| over max |r| of the tensor: forward 1e-5 and
 * gradients 1e-4 (fp32 sums of at most 21 terms: ~1e-7 measured; a wrong
 * formula is off by O(1)). Autocast bf16 for the tied graph, where the
 * backend has it: within 2e-2 (8-bit mantissas, TB_TOL_BF16).
 *
 * Run: bazel test //lib/nn:embed_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/ref/tokens.h"
#include "lib/core/rng.h"
#include "lib/nn/amp.h"
#include "lib/nn/layers.h"
#include "lib/nn/model.h"
#include "lib/nn/nn_testing.h"
#include "lib/nn/tensor.h"

#define FD_H 1e-6
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define TOL_BF16 2e-2

#define V 11   /* vocab */
#define D 5    /* width */
#define CTX 9  /* position table rows */
#define T 7    /* tokens per sample */
#define N 3    /* batch run */
#define NMAX 4 /* batch allocated */
#define ROWS (N * T)

typedef enum graph { G_EMBED = 0, G_HEAD = 1, G_TIED = 2 } graph;
static const char *const graph_names[] = {"embedding", "head", "tied"};

static tb_rng rng = {0x656d626564303031ull}; /* "embed001" */

static double urand(void) { return tb_rng_uniform(&rng, -1, 1); }

/* ---- the float64 function ---- */

typedef struct f64_model {
    graph g;
    int32_t tokens[ROWS];
    double wte[V * D], wpe[CTX * D], x[ROWS * D]; /* x: the head's input (G_HEAD) */
    double dy[ROWS * V];                          /* upstream gradient of the output */
} f64_model;

static size_t out_cols(graph g) { return g == G_EMBED ? D : V; }

/* y = the graph's output (ROWS, out_cols) */
static void f64_forward(const f64_model *m, double *y)
{
    double e[ROWS * D];
    if (m->g != G_HEAD)
        tb_ref_embedding_fwd_f64(m->tokens, m->wte, m->wpe, ROWS, T, D, e);
    if (m->g == G_EMBED) {
        memcpy(y, e, sizeof e);
        return;
    }
    const double *x = m->g == G_HEAD ? m->x : e;
    for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < D; c++)
                s += x[r * D + c] * m->wte[v * D + c];
            y[r * V + v] = s;
        }
}

static double f64_loss(const f64_model *m)
{
    double y[ROWS * V];
    f64_forward(m, y);
    double l = 0;
    for (size_t i = 0; i < ROWS * out_cols(m->g); i++)
        l += y[i] * m->dy[i];
    return l;
}

/* dL/dp[i] for every i < n, by central differences */
static void f64_numeric(f64_model *m, double *p, size_t n, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = f64_loss(m);
        p[i] = keep - FD_H;
        double lm = f64_loss(m);
        p[i] = keep;
        grad[i] = (lp - lm) / (2 * FD_H);
    }
}

/* max |a - r| / max |r| within tol; counted as one check */
static void compare(const char *what, const float *a, const double *r, size_t n, double tol)
{
    double diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]);
        diff = d > diff || isnan(d) ? d : diff;
        mag = fabs(r[i]) > mag ? fabs(r[i]) : mag;
    }
    double rel = diff / (mag > 1e-12 ? mag : 1e-12);
    CHECK(rel <= tol, "%-40s rel err %.2e (tol %.0e, |ref| %.3g)", what, rel, tol, mag);
}

/* ---- the fp32 layers ---- */

typedef struct net {
    tb_layer_ctx ctx;
    tb_layer *emb, *head;
    float *w, *g;        /* the embedding's flat parameters and gradients: wte, wpe */
    int32_t *tokens;     /* device (ROWS) */
    tb_tensor ids, x, dy;
} net;

static void net_free(net *n)
{
    tb_backend *be = n->ctx.be;
    tb_layer_destroy(n->head);
    tb_layer_destroy(n->emb);
    tb_tensor_free(&n->x);
    tb_tensor_free(&n->dy);
    if (n->tokens)
        be->dev_free(be, n->tokens);
    if (n->w)
        be->dev_free(be, n->w);
    if (n->g)
        be->dev_free(be, n->g);
}

static int net_make(tb_backend *be, graph g, tb_dtype amp, net *n)
{
    memset(n, 0, sizeof *n);
    n->ctx = (tb_layer_ctx){.be = be, .training = 1, .amp = amp};
    TB_TRY(tb_layer_embedding_create(&n->ctx, (tb_shape){1, T, 1}, V, D, CTX, &n->emb));
    if (g != G_EMBED)
        TB_TRY(tb_layer_tied_head_create(&n->ctx, (tb_shape){1, T, D}, n->emb, &n->head));
    size_t bytes = tb_layer_param_count(n->emb) * sizeof(float);
    TB_TRY(be->dev_alloc(be, (void **)&n->w, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&n->g, bytes));
    tb_layer_params_bind(n->emb, n->w, n->g);
    TB_TRY(tb_layer_alloc(n->emb, NMAX));
    if (n->head)
        TB_TRY(tb_layer_alloc(n->head, NMAX));
    TB_TRY(be->dev_alloc(be, (void **)&n->tokens, ROWS * sizeof(int32_t)));
    n->ids = tb_tensor_view(be, (float *)n->tokens, N, 1, T, 1);
    n->ids.dtype = TB_I32;
    TB_TRY(tb_tensor_alloc(be, N, 1, T, D, &n->x));
    return tb_tensor_alloc(be, N, 1, T, (int)out_cols(g), &n->dy);
}

/* Random tokens, parameters, head input and dy, in float and in double. */
static void draw(f64_model *m, float *w32, float *x32, float *dy32)
{
    for (int r = 0; r < ROWS; r++)
        m->tokens[r] = (int32_t)tb_rng_below(&rng, V);
    for (int i = 0; i < (V + CTX) * D; i++) {
        w32[i] = (float)urand();
        *(i < V * D ? &m->wte[i] : &m->wpe[i - V * D]) = w32[i];
    }
    for (int i = 0; i < ROWS * D; i++)
        m->x[i] = x32[i] = (float)urand();
    for (size_t i = 0; i < ROWS * out_cols(m->g); i++)
        m->dy[i] = dy32[i] = (float)urand();
}

/* Forward and backward of graph g on the fp32 layers: out (ROWS, cols),
 * the parameters' gradients g32 (from g0 as ctx says) and, for the head,
 * dx32. */
static int run_fp32(net *n, graph g, int acc, const f64_model *m, const float *w32,
                    const float *x32, const float *dy32, const float *g0, float *out,
                    float *g32, float *dx32)
{
    tb_backend *be = n->ctx.be;
    size_t np = (V + CTX) * D;
    TB_TRY(be->copy_h2d(be, n->tokens, m->tokens, sizeof m->tokens, NULL));
    TB_TRY(be->copy_h2d(be, n->w, w32, np * sizeof(float), NULL));
    TB_TRY(be->copy_h2d(be, n->g, g0, np * sizeof(float), NULL));
    TB_TRY(tb_tensor_from_host(&n->x, x32));
    TB_TRY(tb_tensor_from_host(&n->dy, dy32));
    n->ctx.grad_accumulate = acc;
    const tb_tensor *e = NULL, *y, *dx = NULL, *dnone = NULL;
    if (g != G_HEAD)
        TB_TRY(tb_layer_forward(n->emb, &n->ids, &e));
    if (g == G_EMBED)
        y = e;
    else
        TB_TRY(tb_layer_forward(n->head, g == G_HEAD ? &n->x : e, &y));
    TB_TRY(tb_tensor_to_host(y, out));
    if (g == G_EMBED) {
        TB_TRY(tb_layer_backward(n->emb, &n->dy, &dnone));
    } else {
        TB_TRY(tb_layer_backward(n->head, &n->dy, &dx));
        TB_TRY(tb_tensor_to_host(dx, dx32));
        if (g == G_TIED)
            TB_TRY(tb_layer_backward(n->emb, dx, &dnone));
    }
    if (g != G_HEAD)
        CHECK(dnone == NULL, "%s: the embedding's backward returns no input gradient",
              graph_names[g]);
    return be->copy_d2h(be, g32, n->g, np * sizeof(float), NULL);
}

static int check_graph(tb_backend *be, graph g, int acc)
{
    static f64_model m;
    static float w32[(V + CTX) * D], g0[(V + CTX) * D], g32[(V + CTX) * D];
    static float x32[ROWS * D], dy32[ROWS * V], out[ROWS * V], dx32[ROWS * D];
    static double yref[ROWS * V], num[(V + CTX) * D], numx[ROWS * D];
    m.g = g;
    draw(&m, w32, x32, dy32);
    for (int i = 0; i < (V + CTX) * D; i++)
        g0[i] = acc ? (float)urand() : 1e30f;
    net n;
    int rc;
    TB_TRY_GOTO(rc, net_make(be, g, TB_F32, &n), out_free);
    TB_TRY_GOTO(rc, run_fp32(&n, g, acc, &m, w32, x32, dy32, g0, out, g32, dx32), out_free);

    char what[96];
    f64_forward(&m, yref);
    snprintf(what, sizeof what, "%s acc=%d: forward", graph_names[g], acc);
    compare(what, out, yref, ROWS * out_cols(g), TOL_FWD);
    /* expected gradients: the finite differences, plus g0 when adding
     * (the head alone must leave dwpe as it was: compared bitwise) */
    f64_numeric(&m, m.wte, V * D, num);
    if (g != G_HEAD)
        f64_numeric(&m, m.wpe, CTX * D, num + V * D);
    for (int i = 0; i < (V + CTX) * D; i++)
        num[i] += acc ? g0[i] : 0;
    snprintf(what, sizeof what, "%s acc=%d: dwte", graph_names[g], acc);
    compare(what, g32, num, V * D, TOL_GRAD);
    snprintf(what, sizeof what, "%s acc=%d: dwpe (rows %d..%d unused)", graph_names[g], acc, T,
             CTX - 1);
    if (g == G_HEAD)
        CHECK(memcmp(g32 + V * D, g0 + V * D, CTX * D * sizeof(float)) == 0,
              "%s acc=%d: dwpe untouched", graph_names[g], acc);
    else
        compare(what, g32 + V * D, num + V * D, CTX * D, TOL_GRAD);
    if (g == G_HEAD) {
        f64_numeric(&m, m.x, ROWS * D, numx);
        snprintf(what, sizeof what, "%s acc=%d: dx", graph_names[g], acc);
        compare(what, dx32, numx, ROWS * D, TOL_GRAD);
    }
out_free:
    net_free(&n);
    return rc;
}

/* The tied graph under bf16 autocast against the same float64 truth. */
static int check_tied_bf16(tb_backend *be)
{
    if (tb_amp_probe(be, TB_BF16) != TB_OK) {
        printf("  skip: bf16 autocast is not available on this CPU (%s)\n", tb_error_message());
        tb_error_clear();
        return TB_OK;
    }
    static f64_model m;
    static float w32[(V + CTX) * D], g0[(V + CTX) * D], g32[(V + CTX) * D];
    static float x32[ROWS * D], dy32[ROWS * V], out[ROWS * V], dx32[ROWS * D];
    static double yref[ROWS * V], num[(V + CTX) * D];
    m.g = G_TIED;
    draw(&m, w32, x32, dy32);
    for (int i = 0; i < (V + CTX) * D; i++)
        g0[i] = 1e30f;
    net n;
    int rc;
    TB_TRY_GOTO(rc, net_make(be, G_TIED, TB_BF16, &n), out_free);
    TB_TRY_GOTO(rc, run_fp32(&n, G_TIED, 0, &m, w32, x32, dy32, g0, out, g32, dx32), out_free);
    f64_forward(&m, yref);
    compare("tied bf16 autocast: forward", out, yref, ROWS * V, TOL_BF16);
    f64_numeric(&m, m.wte, V * D, num);
    f64_numeric(&m, m.wpe, CTX * D, num + V * D);
    compare("tied bf16 autocast: dwte", g32, num, V * D, TOL_BF16);
    compare("tied bf16 autocast: dwpe", g32 + V * D, num + V * D, CTX * D, TOL_BF16);
out_free:
    net_free(&n);
    return rc;
}

/* vtbl->flops against the formulas of layer_embed.c's header. */
static int check_flops(tb_backend *be)
{
    tb_layer_ctx ctx = {.be = be};
    const int t = 1024, d = 768, v = 50257;
    tb_layer *emb = NULL, *head = NULL;
    int rc;
    TB_TRY_GOTO(rc, tb_layer_embedding_create(&ctx, (tb_shape){1, t, 1}, v, d, t, &emb), out);
    TB_TRY_GOTO(rc, tb_layer_tied_head_create(&ctx, (tb_shape){1, t, d}, emb, &head), out);
    tb_flops fe = {{0}}, fh = {{0}}, fh0 = {{0}};
    emb->vt->flops(emb, &fe);
    head->vt->flops(head, &fh);
    head->need_dx = 0;
    head->vt->flops(head, &fh0);
    double td = (double)t * d, gemm = 2.0 * t * d * v;
    CHECK(fe.fwd[TB_FLOPS_ELEMENTWISE] == td && fe.bwd[TB_FLOPS_ELEMENTWISE] == 2 * td &&
              fe.fwd[TB_FLOPS_GEMM] == 0 && fe.bwd[TB_FLOPS_GEMM] == 0,
          "embedding T=%d d=%d: %.0f element-wise FLOPs forward, %.0f backward", t, d,
          fe.fwd[TB_FLOPS_ELEMENTWISE], fe.bwd[TB_FLOPS_ELEMENTWISE]);
    CHECK(fh.fwd[TB_FLOPS_GEMM] == gemm && fh.bwd[TB_FLOPS_GEMM] == 2 * gemm &&
              fh0.bwd[TB_FLOPS_GEMM] == gemm && fh.fwd[TB_FLOPS_ELEMENTWISE] == 0,
          "tied head T=%d d=%d V=%d: 2TdV = %.4g GEMM FLOPs forward, twice that backward "
          "(once without dx)", t, d, v, fh.fwd[TB_FLOPS_GEMM]);
out:
    tb_layer_destroy(head);
    tb_layer_destroy(emb);
    return rc;
}

/* Refused shapes and inputs: each TB_ERR_INVALID. */
static int check_refused(tb_backend *be)
{
    tb_layer_ctx ctx = {.be = be, .training = 1};
    tb_layer *l = NULL, *relu = NULL;
    int rc = tb_layer_embedding_create(&ctx, (tb_shape){1, CTX + 1, 1}, V, D, CTX, &l);
    tb_error_clear();
    CHECK(rc == TB_ERR_INVALID && !l, "embedding with T %d > context %d refused", CTX + 1, CTX);
    rc = tb_layer_embedding_create(&ctx, (tb_shape){1, T, 2}, V, D, CTX, &l);
    tb_error_clear();
    CHECK(rc == TB_ERR_INVALID && !l, "embedding on (1, T, 2) refused");
    TB_TRY(tb_layer_relu_create(&ctx, (tb_shape){1, T, D}, &relu));
    rc = tb_layer_tied_head_create(&ctx, (tb_shape){1, T, D}, relu, &l);
    tb_error_clear();
    tb_layer_destroy(relu);
    CHECK(rc == TB_ERR_INVALID && !l, "a head tied to a relu layer refused");

    net n;
    TB_TRY_GOTO(rc, net_make(be, G_TIED, TB_F32, &n), out_free);
    rc = tb_layer_tied_head_create(&n.ctx, (tb_shape){1, T, D + 1}, n.emb, &l);
    tb_error_clear();
    CHECK(rc == TB_ERR_INVALID && !l, "a head of width %d on a %d-wide embedding refused",
          D + 1, D);
    const tb_tensor *y;
    rc = tb_layer_forward(n.emb, &n.x, &y); /* float data, not TB_I32 */
    tb_error_clear();
    CHECK(rc == TB_ERR_INVALID, "embedding forward on an fp32 tensor refused");
    int32_t bad[ROWS] = {0};
    bad[ROWS - 1] = V;
    TB_TRY_GOTO(rc, be->copy_h2d(be, n.tokens, bad, sizeof bad, NULL), out_free);
    rc = tb_layer_forward(n.emb, &n.ids, &y);
    tb_error_clear();
    CHECK(rc == TB_ERR_INVALID, "token id %d (vocab %d) refused by the CPU backend", V, V);
    rc = TB_OK;
out_free:
    net_free(&n);
    return rc;
}

/* TB_INIT_NORMAL: N(0, bound^2) statistics on 200,001 draws (odd: the last
 * Box-Muller pair is half used), the same bits from the same stream, and
 * the embedding's parameters declared as GPT-2's N(0, 0.02^2). Bounds are
 * 5 standard errors: mean 5 * 0.02 / sqrt(n), std 5 / sqrt(2n) relative,
 * the share within one std 5 * sqrt(p (1 - p) / n) around 0.6827. */
static int check_init_normal(tb_backend *be)
{
    const size_t n = 200001;
    tb_param p = {.n = n, .init = TB_INIT_NORMAL, .bound = 0.02f};
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        return TB_FAIL(TB_ERR_NOMEM, "init test buffers");
    tb_rng r1 = tb_rng_seeded(42), r2 = tb_rng_seeded(42), r3 = tb_rng_seeded(43);
    tb_param_init_host(&p, &r1, a);
    tb_param_init_host(&p, &r2, b);
    tb_param_init_host(&p, &r3, c);
    double s = 0, s2 = 0;
    size_t inside = 0, finite = 0;
    for (size_t i = 0; i < n; i++) {
        s += a[i];
        s2 += (double)a[i] * a[i];
        inside += fabs(a[i]) <= 0.02;
        finite += isfinite(a[i]) != 0;
    }
    double mean = s / n, sd = sqrt(s2 / n - mean * mean), share = (double)inside / n;
    CHECK(finite == n && fabs(mean) < 5 * 0.02 / sqrt((double)n) &&
              fabs(sd / 0.02 - 1) < 5 / sqrt(2.0 * n) &&
              fabs(share - 0.682689) < 5 * sqrt(0.682689 * 0.317311 / n),
          "TB_INIT_NORMAL std 0.02: mean %.2e, std %.6f, %.4f within one std (n %zu)", mean, sd,
          share, n);
    CHECK(memcmp(a, b, n * sizeof *a) == 0 && memcmp(a, c, n * sizeof *a) != 0,
          "TB_INIT_NORMAL: the same stream gives the same bits, another stream others");
    free(a), free(b), free(c);

    tb_layer_ctx ctx = {.be = be};
    tb_layer *l;
    TB_TRY(tb_layer_embedding_create(&ctx, (tb_shape){1, T, 1}, V, D, CTX, &l));
    CHECK(l->nparams == 2 && l->params[0].n == V * D && l->params[1].n == CTX * D &&
              l->params[0].init == TB_INIT_NORMAL && l->params[0].bound == 0.02f &&
              l->params[1].init == TB_INIT_NORMAL && l->params[1].bound == 0.02f,
          "embedding parameters: wte (%d x %d) then wpe (%d x %d), N(0, 0.02^2)", V, D, CTX, D);
    tb_layer_destroy(l);
    return TB_OK;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    for (int g = 0; g < 3; g++)
        for (int acc = 0; acc < 2; acc++)
            TB_TRY(check_graph(be, (graph)g, acc));
    TB_TRY(check_tied_bf16(be));
    TB_TRY(check_flops(be));
    TB_TRY(check_refused(be));
    return check_init_normal(be);
}

int main(void)
{
    return tb_test_main_cpu(2, "embed_test: embedding and tied head vs float64 finite "
                            "differences, FLOPs, refusals, TB_INIT_NORMAL", run, NULL);
}
