/*
 * conv.c - the CPU backend's convolution through oneDNN 2.6, and its
 * autotuner (the analogue of cudnn.benchmark): conv_algo_default, conv_find,
 * conv_fwd, conv_bwd_data, conv_bwd_filter (shared state and helpers:
 * dnnl.h). Test:
 *   bazel test //lib/backend/cpu:cpu_dnnl_test
 *
 * Convolution algorithms. An algorithm id is an index into the list of
 * oneDNN implementations for the problem (the primitive descriptor iterator
 * order), built in parts:
 *   1. the implementations that take x and y in the caller's layout
 *      (nchw or nhwc) with weights in the layout each prefers;
 *   2. then those that want blocked activations (format "any", e.g.
 *      nChw16c), which are not already in part 1; their names get a
 *      "+reorder" suffix;
 *   3. for bf16 on a CPU with bf16 kernels, the fp32 twin's direct
 *      implementations ("+widen" suffix), described below;
 * and between parts 1 and 2, for any convolution: "matmul", each direction one
 * oneDNN matrix product (the gemm slot's cache, no reorders) on the patch
 * matrix of x: (N*P*Q) x (R*S*C), built here (im2col; on NHWC at 1x1,
 * stride 1, no padding it is x itself), against the filters as a
 * K x (R*S*C) matrix (ohwi; on NCHW oihw, the patches' columns in its
 * order) and y as (N*P*Q) x K (NHWC's own layout; NCHW's y and dy are
 * copied to and from it); the data gradient is the patches' gradient added
 * back into dx (col2im), the bias and its gradient
 * through the bias_add and bias_grad slots (the ops family's; a bf16 dy
 * widened by cast_lowp_to_f32 first).
 * Any operand whose layout differs from the caller's (always the weights,
 * unless an implementation takes oihw/ohwi; the activations in part 2) is
 * reordered into and out of the caller's memory inside each conv_* call,
 * and conv_find times the whole call: reorders included, just what training
 * pays (one warm-up call, then the median of FIND_TIMED_RUNS (or the warm-up alone when it is
 * FIND_CUTOFF times slower than the best so far), on scratch
 * tensors of random values from be->dev_alloc). The default algorithm is the first non-`ref:` entry: oneDNN's own
 * choice for the caller's layout, as cuDNN's heuristic is cuDNN's, except
 * where that is an im2col `gemm:` implementation (oneDNN's only one for
 * plain NCHW activations, fp32 and bf16 alike) and part 2 has a direct
 * one: then the first of those, reorders and all. On ResNet-50 (64x64,
 * batch 16, 1 thread, shared machine) that made the NCHW step 1.2x (fp32)
 * and 1.4x (bf16, whose gemm path gained nothing over fp32) faster, as
 * PyTorch's NCHW convolutions reorder to blocked layouts too. Where the
 * gemm is no im2col (1x1, stride 1, no padding) it stays for the filter
 * gradient, and for the other directions from 128 pixels an image
 * (gemm_stays, with its measurements): ResNet-50's bf16 NCHW step a further
 * ~7% faster (1 thread, shared machine). And where oneDNN 2.6's first
 * choice for a forward convolution is a `brgconv` kernel and the output
 * has at most 64 pixels an image, the default is the jit kernel listed
 * after it (default_of says why: ResNet-50's channels-last step at 64x64,
 * batch 16, 2 threads, 7-8% faster in fp32 and bf16). With at most 16
 * output pixels an image on NHWC, the default is matmul for every filter
 * gradient and for a 1x1's other directions, and on NCHW for filter
 * gradients with at most 4 (matmul_default; MATMUL_MAX_PIXELS and
 * MATMUL_NCHW_MAX_PIXELS say why: ResNet-50's last two stages, their
 * filter gradients 40.1 -> 28.4 ms a channels-last bf16 step). On NCHW a
 * bf16 filter gradient of a strided convolution to at most 49 output
 * pixels an image goes to im2col's gemm (strided_lowp_gemm: oneDNN's
 * jit_bf16 kernel there is up to 3x slower), or with at most 32 input
 * channels to part 3's fp32 kernel (STRIDED_WIDEN_MAX_C). Part 3's
 * operand reorders convert bf16 to fp32 and back (its kernels compute in
 * fp32 on the widened bf16 values); it lists no im2col or reference
 * implementations. The
 * `ref:` entries (slow, for checking oneDNN itself) keep their ids but
 * conv_find skips them. A conv bias does not change the list (a test
 * checks that), so an id found without bias is valid with one.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/dnnl.h"
#include "lib/core/clock.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"

/* ---- convolution: describing the problem ---- */

static int conv_check_desc(const tb_conv_desc *d, const char *op)
{
    TB_TRY(check_math(d->dtype, d->math, op));
    if (d->lowp_out && d->dtype != TB_BF16)
        return TB_FAIL(TB_ERR_INVALID, "%s: low-precision outputs need dtype bf16", op);
    if (d->layout != TB_NCHW && d->layout != TB_NHWC)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown layout %d", op, (int)d->layout);
    if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->k <= 0 || d->r <= 0 ||
        d->s <= 0 || d->stride <= 0 || d->pad < 0 || tb_conv_out_h(d) <= 0 ||
        tb_conv_out_w(d) <= 0)
        return TB_FAIL(TB_ERR_INVALID,
                       "%s: bad shape n %d c %d h %d w %d k %d r %d s %d stride %d pad %d",
                       op, d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->stride, d->pad);
    return TB_OK;
}

/* The caller's memory descriptors for x, w, y and bias. */
typedef struct conv_mds {
    dnnl_memory_desc_t x, w, y, b;
} conv_mds;

/* Inputs of each direction in d->dtype, outputs f32, or y and dx in
 * d->dtype with d->lowp_out (lib/backend/backend.h). */
static int conv_user_mds(const tb_conv_desc *d, tb_conv_kind kind, conv_mds *m)
{
    int nhwc = d->layout == TB_NHWC;
    dnnl_data_type_t lp = dnnl_dt(d->dtype), out = d->lowp_out ? lp : dnnl_f32;
    dnnl_data_type_t xt = kind == TB_CONV_BWD_DATA ? out : lp;
    dnnl_data_type_t wt = kind == TB_CONV_BWD_FILTER ? dnnl_f32 : lp;
    dnnl_data_type_t yt = kind == TB_CONV_FWD ? out : lp;
    dnnl_dims_t x = {d->n, d->c, d->h, d->w};
    dnnl_dims_t w = {d->k, d->c, d->r, d->s};
    dnnl_dims_t y = {d->n, d->k, tb_conv_out_h(d), tb_conv_out_w(d)};
    dnnl_dims_t b = {d->k};
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->x, 4, x, xt, nhwc ? dnnl_nhwc : dnnl_nchw));
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->w, 4, w, wt, nhwc ? dnnl_ohwi : dnnl_oihw));
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->y, 4, y, yt, nhwc ? dnnl_nhwc : dnnl_nchw));
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->b, 1, b, dnnl_f32, dnnl_x));
    return TB_OK;
}

/* x, w, y mds of one direction: activations in the caller's layout
 * (blocked == 0) or "any" (blocked == 1); weights "any". */
static int conv_op_mds(const tb_conv_desc *d, tb_conv_kind kind, int blocked, conv_mds *m)
{
    TB_TRY(conv_user_mds(d, kind, m));
    dnnl_dims_t wd = {d->k, d->c, d->r, d->s};
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->w, 4, wd, m->w.data_type,
                                               dnnl_format_tag_any));
    if (!blocked)
        return TB_OK;
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->x, 4, m->x.dims, m->x.data_type,
                                               dnnl_format_tag_any));
    TB_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&m->y, 4, m->y.dims, m->y.data_type,
                                               dnnl_format_tag_any));
    return TB_OK;
}

/* The op descs of one part of the algorithm list, and the forward desc a
 * backward one is made from (its dtypes are the forward's: bf16 x and w). */
static int conv_op_descs(const tb_conv_desc *d, tb_conv_kind kind, int has_bias, int blocked,
                         dnnl_convolution_desc_t *fwd, dnnl_convolution_desc_t *op)
{
    conv_mds f, m;
    TB_TRY(conv_op_mds(d, TB_CONV_FWD, blocked, &f));
    TB_TRY(conv_op_mds(d, kind, blocked, &m));
    dnnl_dims_t strides = {d->stride, d->stride}, pad = {d->pad, d->pad};
    /* Right padding so the last window fits exactly, as oneDNN requires. */
    dnnl_dims_t pad_r = {
        (tb_conv_out_h(d) - 1) * d->stride + d->r - d->h - d->pad,
        (tb_conv_out_w(d) - 1) * d->stride + d->s - d->w - d->pad,
    };
    const dnnl_memory_desc_t *b = has_bias ? &m.b : NULL;
    TB_CHECK_DNNL(dnnl_convolution_forward_desc_init(fwd, dnnl_forward_training,
                                                     dnnl_convolution_direct, &f.x, &f.w, b,
                                                     &f.y, strides, pad, pad_r));
    if (kind == TB_CONV_FWD)
        *op = *fwd;
    else if (kind == TB_CONV_BWD_DATA)
        TB_CHECK_DNNL(dnnl_convolution_backward_data_desc_init(
            op, dnnl_convolution_direct, &m.x, &m.w, &m.y, strides, pad, pad_r));
    else
        TB_CHECK_DNNL(dnnl_convolution_backward_weights_desc_init(
            op, dnnl_convolution_direct, &m.x, &m.w, b, &m.y, strides, pad, pad_r));
    return TB_OK;
}

/* The activation mds an implementation chose (x-side and y-side). */
static void conv_pd_act_mds(const dnnl_primitive_desc_t pd, tb_conv_kind kind,
                            const dnnl_memory_desc_t **x, const dnnl_memory_desc_t **y)
{
    *x = dnnl_primitive_desc_query_md(pd, kind == TB_CONV_BWD_DATA ? dnnl_query_diff_src_md
                                                                   : dnnl_query_src_md, 0);
    *y = dnnl_primitive_desc_query_md(pd, kind == TB_CONV_FWD ? dnnl_query_dst_md
                                                              : dnnl_query_diff_dst_md, 0);
}

static const char *pd_impl_name(const dnnl_primitive_desc_t pd)
{
    const char *name = "?";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success)
        return "?";
    return name;
}

static int is_ref_impl(const char *name) { return strncmp(name, "ref:", 4) == 0; }

static int is_gemm_impl(const char *name) { return strstr(name, "gemm:") != NULL; }

/* What walking the algorithm list collects: names of the first max entries,
 * and the pd (plus its forward hint) of entry `want`, if want >= 0. */
typedef struct conv_walk {
    int want;
    int max;
    char (*names)[64];
    int count;
    dnnl_primitive_desc_t pd, hint;
    int matmul; /* `want` is the matmul entry */
} conv_walk;

/* The parts of the list (see the file header). */
typedef enum conv_part { PART_PLAIN = 0, PART_BLOCKED = 1, PART_WIDENED = 2 } conv_part;

static const char *const part_suffix[] = {"", "+reorder", "+widen"};

/* Walks one part of the list; *done once `want` was found. For
 * PART_WIDENED, d is the fp32 twin of a bf16 problem. */
static int conv_walk_part(dnnl_state *st, const tb_conv_desc *d, tb_conv_kind kind,
                          int has_bias, conv_part part, dnnl_primitive_attr_t attr,
                          conv_walk *w, int *done)
{
    int blocked = part != PART_PLAIN;
    dnnl_convolution_desc_t fwd, op;
    TB_TRY(conv_op_descs(d, kind, has_bias, blocked, &fwd, &op));
    conv_mds u;
    TB_TRY(conv_user_mds(d, kind, &u));
    int rc = TB_OK;
    dnnl_primitive_desc_t hint = NULL;
    if (kind != TB_CONV_FWD) {
        dnnl_status_t s = dnnl_primitive_desc_create(&hint, &fwd, attr, st->engine, NULL);
        if (s == dnnl_unimplemented)
            return TB_OK; /* nothing for this part */
        TB_CHECK_DNNL(s);
    }
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t s = dnnl_primitive_desc_iterator_create(&it, &op, attr, st->engine, hint);
    if (s == dnnl_unimplemented)
        goto out_destroy_hint;
    TB_CHECK_DNNL_GOTO(rc, s, out_destroy_hint);
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd) {
            rc = TB_FAIL(TB_ERR_DNNL, "dnnl_primitive_desc_iterator_fetch returned NULL");
            goto out_destroy_iterator;
        }
        const dnnl_memory_desc_t *x, *y;
        conv_pd_act_mds(pd, kind, &x, &y);
        /* Part 2 holds only what part 1 does not: blocked activations;
         * part 3 only direct kernels (no im2col, no reference). */
        const char *name = pd_impl_name(pd);
        int skip = part == PART_BLOCKED ? dnnl_memory_desc_equal(x, &u.x) &&
                                              dnnl_memory_desc_equal(y, &u.y)
                 : part == PART_WIDENED ? is_ref_impl(name) || is_gemm_impl(name)
                                        : 0;
        if (skip) {
            dnnl_primitive_desc_destroy(pd);
            continue;
        }
        if (w->count < w->max)
            snprintf(w->names[w->count], 64, "%s%s", name, part_suffix[part]);
        if (w->count++ == w->want) {
            w->pd = pd;
            w->hint = hint;
            hint = NULL;
            *done = 1;
            goto out_destroy_iterator;
        }
        dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);

out_destroy_iterator:
    dnnl_primitive_desc_iterator_destroy(it);
out_destroy_hint:
    pd_destroy(&hint);
    return rc;
}

/* Elements of d's x (input), w (filters) and y (output). */
static void conv_sizes(const tb_conv_desc *d, size_t *nx, size_t *nw, size_t *ny)
{
    *nx = (size_t)d->n * d->c * d->h * d->w;
    *nw = (size_t)d->k * d->c * d->r * d->s;
    *ny = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
}

/* The problem oneDNN runs for d: d itself, or its fp32 twin when bf16 runs
 * widened on this CPU (dnnl.h: bf16_mode). Caller holds the lock. */
static tb_conv_desc as_run(dnnl_state *st, const tb_conv_desc *d)
{
    tb_conv_desc r = *d;
    if (d->dtype == TB_BF16 && bf16_mode(st) == BF16_WIDENED) {
        r.dtype = TB_F32;
        r.math = TB_MATH_F32;
        r.lowp_out = 0; /* conv_run narrows the fp32 output */
    }
    return r;
}

/* The list's matmul entry (see the file header): a convolution as matrix
 * products on its patch matrix, in either layout. */
#define MATMUL_NAME "matmul"

/* NHWC, 1x1, stride 1, no padding: the patch matrix is x itself. */
static int matmul_direct(const tb_conv_desc *d)
{
    return d->layout == TB_NHWC && d->r == 1 && d->s == 1 && d->stride == 1 && d->pad == 0;
}

static int is_matmul_impl(const char *name) { return strcmp(name, MATMUL_NAME) == 0; }

/* Walks the whole algorithm list (see the file header). */
static int conv_walk_list(dnnl_state *st, const tb_conv_desc *d0, tb_conv_kind kind,
                          int has_bias, conv_walk *w)
{
    tb_conv_desc run = as_run(st, d0);
    const tb_conv_desc *d = &run;
    dnnl_primitive_attr_t attr;
    TB_TRY(attr_create(&attr, d->math));
    int rc = TB_OK, done = 0;
    for (int part = PART_PLAIN; part <= PART_BLOCKED && !done && rc == TB_OK; part++) {
        rc = conv_walk_part(st, d, kind, has_bias, part, attr, w, &done);
        /* matmul between parts 1 and 2, where oneDNN has anything for
         * the problem at all: within the TB_MAX_CONV_ALGOS a caller sees
         * (fp32 lists run to 16 entries and more) */
        if (part == PART_PLAIN && rc == TB_OK && !done && w->count > 0) {
            if (w->count < w->max)
                snprintf(w->names[w->count], 64, "%s", MATMUL_NAME);
            if (w->count++ == w->want) {
                w->matmul = 1;
                done = 1;
            }
        }
    }
    dnnl_primitive_attr_destroy(attr);
    /* part 3: a bf16 problem on a CPU with bf16 kernels also lists its fp32
     * twin's direct kernels (a widened bf16 problem is its twin already) */
    if (rc == TB_OK && !done && d->dtype == TB_BF16) {
        tb_conv_desc twin = *d;
        twin.dtype = TB_F32, twin.math = TB_MATH_F32, twin.lowp_out = 0;
        TB_TRY(attr_create(&attr, TB_MATH_F32));
        rc = conv_walk_part(st, &twin, kind, has_bias, PART_WIDENED, attr, w, &done);
        dnnl_primitive_attr_destroy(attr);
    }
    return rc;
}

/* For lib/backend/cpu/dnnl_test.c only (declared there): the names of the
 * algorithm list, to check that a bias does not change it. */
int tb_cpu_dnnl_algo_names(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                           int has_bias, char (*names)[64], int max, int *count);
int tb_cpu_dnnl_algo_names(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                           int has_bias, char (*names)[64], int max, int *count)
{
    conv_walk w = {.want = -1, .max = max, .names = names};
    int prev;
    lock_enter(be, &prev);
    int rc = conv_walk_list(state_of(be), d, kind, has_bias, &w);
    lock_leave(be, prev);
    *count = w.count;
    return rc;
}

/* ---- convolution: cached primitives ---- */

static void conv_entry_destroy(tb_backend *be, conv_entry *e)
{
    primitive_destroy(&e->prim);
    for (int i = 0; i < 3; i++) {
        conv_operand *o = &e->op[i];
        primitive_destroy(&o->reorder);
        if (o->impl != o->user)
            memory_destroy(&o->impl);
        memory_destroy(&o->user);
        o->impl = NULL;
    }
    memory_destroy(&e->bias);
    memory_destroy(&e->scratch);
    dev_free_ptr(be, (void **)&e->acc_w);
    dev_free_ptr(be, (void **)&e->acc_b);
    dev_free_ptr(be, &e->col);
    dev_free_ptr(be, (void **)&e->dcol);
    dev_free_ptr(be, &e->rows);
    pd_destroy(&e->pd);
    pd_destroy(&e->hint);
    memset(e, 0, sizeof *e);
}

/* Sets up operand o: user memory in the caller's layout, and when the
 * implementation's md differs, a workspace slice at *ws_end (advanced) and
 * a reorder between them. */
static int conv_operand_init(dnnl_state *st, conv_operand *o, int arg, int is_output,
                             const dnnl_memory_desc_t *user_md,
                             const dnnl_memory_desc_t *impl_md, size_t *ws_end)
{
    o->arg = arg;
    o->is_output = is_output;
    TB_CHECK_DNNL(dnnl_memory_create(&o->user, user_md, st->engine, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(user_md, impl_md)) {
        o->impl = o->user;
        return TB_OK;
    }
    TB_TRY(memory_unbound(st, impl_md, &o->impl));
    o->offset = *ws_end;
    *ws_end += ws_round(dnnl_memory_desc_get_size(impl_md));
    const dnnl_memory_desc_t *from = is_output ? impl_md : user_md;
    const dnnl_memory_desc_t *to = is_output ? user_md : impl_md;
    dnnl_primitive_desc_t rpd;
    TB_CHECK_DNNL(dnnl_reorder_primitive_desc_create(&rpd, from, st->engine, to, st->engine,
                                                     NULL));
    dnnl_status_t s = dnnl_primitive_create(&o->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    TB_CHECK_DNNL(s);
    return TB_OK;
}

/* The three operands of each kind: DNNL argument, output or not, and which
 * of the caller's mds describes it. */
static int conv_entry_operands(dnnl_state *st, conv_entry *e)
{
    conv_mds u;
    TB_TRY(conv_user_mds(&e->d, e->kind, &u));
    static const struct {
        int arg[3], out[3];
        dnnl_query_t q[3];
    } kinds[3] = {
        [TB_CONV_FWD] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, {0, 0, 1},
                         {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md}},
        [TB_CONV_BWD_DATA] = {{DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                              {0, 0, 1},
                              {dnnl_query_diff_dst_md, dnnl_query_weights_md,
                               dnnl_query_diff_src_md}},
        [TB_CONV_BWD_FILTER] = {{DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
                                {0, 0, 1},
                                {dnnl_query_src_md, dnnl_query_diff_dst_md,
                                 dnnl_query_diff_weights_md}},
    };
    const dnnl_memory_desc_t *user[3][3] = {
        [TB_CONV_FWD] = {&u.x, &u.w, &u.y},
        [TB_CONV_BWD_DATA] = {&u.y, &u.w, &u.x},
        [TB_CONV_BWD_FILTER] = {&u.x, &u.y, &u.w},
    };
    for (int i = 0; i < 3; i++) {
        const dnnl_memory_desc_t *impl = dnnl_primitive_desc_query_md(e->pd, kinds[e->kind].q[i], 0);
        TB_TRY(conv_operand_init(st, &e->op[i], kinds[e->kind].arg[i], kinds[e->kind].out[i],
                                 user[e->kind][i], impl, &e->ws_bytes));
    }
    if (e->has_bias && e->kind != TB_CONV_BWD_DATA)
        TB_CHECK_DNNL(dnnl_memory_create(&e->bias, &u.b, st->engine, DNNL_MEMORY_NONE));
    return TB_OK;
}

/* Creates entry e (key fields filled): pd, primitive, operands, scratchpad. */
static int conv_entry_create(tb_backend *be, dnnl_state *st, conv_entry *e)
{
    conv_walk w = {.want = e->algo, .max = 0, .names = NULL};
    int rc;
    TB_TRY_GOTO(rc, conv_walk_list(st, &e->d, e->kind, e->has_bias, &w), out_destroy_entry);
    if (w.matmul) {
        e->matmul = 1;
        snprintf(e->name, sizeof e->name, "%s", MATMUL_NAME);
        return TB_OK;
    }
    if (!w.pd && w.count == 0) {
        /* Nothing at all for this problem: the CPU lacks the ISA for its
         * dtype (bf16 without AVX-512), not a wrong algorithm id. */
        rc = TB_FAIL(TB_ERR_UNSUPPORTED, "oneDNN has no %s convolution on this CPU (%s)",
                     e->d.dtype == TB_F32 ? "fp32" : "bf16", tb_cpu_dnnl_isa());
        goto out_destroy_entry;
    }
    if (!w.pd) {
        rc = TB_FAIL(TB_ERR_INVALID, "convolution algorithm %d does not exist for this shape "
                     "(%d algorithms); use conv_algo_default or conv_find", e->algo, w.count);
        goto out_destroy_entry;
    }
    e->pd = w.pd;
    e->hint = w.hint;
    snprintf(e->name, sizeof e->name, "%s", pd_impl_name(e->pd));
    TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_create(&e->prim, e->pd), out_destroy_entry);
    /* The scratchpad first in the workspace, then the reorder buffers. */
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->ws_bytes = ws_round(dnnl_memory_desc_get_size(smd));
    TB_TRY_GOTO(rc, memory_unbound(st, smd, &e->scratch), out_destroy_entry);
    TB_TRY_GOTO(rc, conv_entry_operands(st, e), out_destroy_entry);
    return TB_OK;

out_destroy_entry:
    conv_entry_destroy(be, e);
    return rc;
}

static int conv_key_equal(const conv_entry *e, const conv_entry *k)
{
    return e->used && memcmp(&e->d, &k->d, sizeof e->d) == 0 && e->kind == k->kind &&
           e->algo == k->algo && e->has_bias == k->has_bias;
}

/* A key with every byte of the desc defined, so memcmp compares fields. */
static conv_entry conv_key(const tb_conv_desc *d, tb_conv_kind kind, int algo, int has_bias)
{
    conv_entry key;
    memset(&key, 0, sizeof key);
    key.d.n = d->n, key.d.c = d->c, key.d.h = d->h, key.d.w = d->w;
    key.d.k = d->k, key.d.r = d->r, key.d.s = d->s;
    key.d.stride = d->stride, key.d.pad = d->pad;
    key.d.layout = d->layout, key.d.dtype = d->dtype, key.d.math = d->math;
    key.d.lowp_out = d->lowp_out;
    key.kind = kind;
    key.algo = algo;
    key.has_bias = has_bias;
    return key;
}

/* The hash of what conv_key_equal compares (conv_key defines every byte of
 * the desc). */
static uint32_t conv_key_hash(const conv_entry *k)
{
    uint32_t h = cache_hash(2166136261u, &k->d, sizeof k->d);
    h = cache_hash(h, &k->kind, sizeof k->kind);
    h = cache_hash(h, &k->algo, sizeof k->algo);
    return cache_hash(h, &k->has_bias, sizeof k->has_bias);
}

/* Puts a created entry into the cache, evicting the least recently used. */
static conv_entry *conv_cache_insert(tb_backend *be, dnnl_state *st, const conv_entry *e)
{
    int v = cache_victim(&st->conv[0].used, &st->conv[0].last_use, sizeof st->conv[0],
                         CONV_CACHE_SIZE);
    conv_entry *victim = &st->conv[v];
    if (victim->used)
        cache_index_remove(&st->conv_ix, v);
    conv_entry_destroy(be, victim);
    *victim = *e;
    victim->used = 1;
    victim->last_use = ++st->clock;
    cache_index_add(&st->conv_ix, v, conv_key_hash(victim));
    return victim;
}

/* The cached entry equal to key, NULL if none. */
static conv_entry *conv_find_entry(dnnl_state *st, const conv_entry *key)
{
    uint32_t h = conv_key_hash(key);
    for (int s = cache_index_first(&st->conv_ix, h); s; s = st->conv_ix.next[s - 1])
        if (st->conv_ix.hash[s - 1] == h && conv_key_equal(&st->conv[s - 1], key))
            return &st->conv[s - 1];
    return NULL;
}

static int conv_cached(dnnl_state *st, const conv_entry *key)
{
    return conv_find_entry(st, key) != NULL;
}

static int conv_lookup(tb_backend *be, dnnl_state *st, const conv_entry *key, conv_entry **out)
{
    conv_entry *e = conv_find_entry(st, key);
    if (e) {
        e->last_use = ++st->clock;
        *out = e;
        return TB_OK;
    }
    conv_entry fresh = *key;
    TB_TRY(conv_entry_create(be, st, &fresh));
    *out = conv_cache_insert(be, st, &fresh);
    return TB_OK;
}

/* ---- convolution: running one ---- */

/* The patch matrix of NHWC x (elements of es bytes): row m = (n, p, q)
 * holds, for r < R and s < S in order, the C channels of x at (n, p*stride
 * - pad + r, q*stride - pad + s), zeros where that is padding. */
static void im2col_nhwc(const tb_conv_desc *d, const void *x, size_t es, void *col)
{
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d), M = d->n * P * Q;
    size_t row = (size_t)es * d->c, kc = (size_t)d->r * d->s * row;
#pragma omp parallel for schedule(static) if ((size_t)M * kc >= 65536)
    for (int m = 0; m < M; m++) {
        int n = m / (P * Q), p = m / Q % P, q = m % Q;
        char *dst = (char *)col + (size_t)m * kc;
        for (int r = 0; r < d->r; r++)
            for (int s = 0; s < d->s; s++, dst += row) {
                int h = p * d->stride - d->pad + r, w = q * d->stride - d->pad + s;
                if (h < 0 || h >= d->h || w < 0 || w >= d->w)
                    memset(dst, 0, row);
                else
                    memcpy(dst, (const char *)x + (((size_t)n * d->h + h) * d->w + w) * row,
                           row);
            }
    }
}

/* dx = the patches' gradient dcol added back where each patch came from
 * (im2col_nhwc's inverse as a sum); one image per thread, each in patch
 * order: the same bits for any thread count. */
static void col2im_nhwc(const tb_conv_desc *d, const float *dcol, float *dx)
{
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d), C = d->c;
    size_t image = (size_t)d->h * d->w * C, kc = (size_t)d->r * d->s * C;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < d->n; n++) {
        float *dxn = dx + (size_t)n * image;
        memset(dxn, 0, image * sizeof *dxn);
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++) {
                const float *src = dcol + (((size_t)n * P + p) * Q + q) * kc;
                for (int r = 0; r < d->r; r++)
                    for (int s = 0; s < d->s; s++, src += C) {
                        int h = p * d->stride - d->pad + r, w = q * d->stride - d->pad + s;
                        if (h < 0 || h >= d->h || w < 0 || w >= d->w)
                            continue;
                        float *to = dxn + ((size_t)h * d->w + w) * C;
                        for (int c = 0; c < C; c++)
                            to[c] += src[c];
                    }
            }
    }
}

/* NCHW x's patch matrix: row m = (n, p, q) holds x[n][c][h][w] at column
 * (c*R + r)*S + s, the order of oihw filters' rows, where (h, w) = (p *
 * stride - pad + r, q * stride - pad + s); zeros where that is padding. */
static void im2col_nchw(const tb_conv_desc *d, const void *x, size_t es, void *col)
{
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d), M = d->n * P * Q;
    size_t kc = (size_t)d->c * d->r * d->s, plane = (size_t)d->h * d->w;
#pragma omp parallel for schedule(static) if ((size_t)M * kc >= 65536)
    for (int m = 0; m < M; m++) {
        int n = m / (P * Q), p = m / Q % P, q = m % Q;
        size_t at = (size_t)m * kc;
        for (int c = 0; c < d->c; c++) {
            size_t xc = ((size_t)n * d->c + c) * plane;
            for (int r = 0; r < d->r; r++)
                for (int s = 0; s < d->s; s++, at++) {
                    int h = p * d->stride - d->pad + r, w = q * d->stride - d->pad + s;
                    int in = h >= 0 && h < d->h && w >= 0 && w < d->w;
                    size_t from = xc + (size_t)h * d->w + w;
                    if (es == 2)
                        ((uint16_t *)col)[at] = in ? ((const uint16_t *)x)[from] : 0;
                    else
                        ((float *)col)[at] = in ? ((const float *)x)[from] : 0.0f;
                }
        }
    }
}

/* col2im_nhwc for an NCHW dx, from im2col_nchw's columns; the same
 * bits for any thread count. */
static void col2im_nchw(const tb_conv_desc *d, const float *dcol, float *dx)
{
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d);
    size_t plane = (size_t)d->h * d->w, kc = (size_t)d->c * d->r * d->s;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < d->n; n++) {
        float *dxn = dx + (size_t)n * d->c * plane;
        memset(dxn, 0, (size_t)d->c * plane * sizeof *dxn);
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++) {
                const float *src = dcol + (((size_t)n * P + p) * Q + q) * kc;
                for (int c = 0; c < d->c; c++)
                    for (int r = 0; r < d->r; r++)
                        for (int s = 0; s < d->s; s++, src++) {
                            int h = p * d->stride - d->pad + r, w = q * d->stride - d->pad + s;
                            if (h >= 0 && h < d->h && w >= 0 && w < d->w)
                                dxn[(size_t)c * plane + (size_t)h * d->w + w] += *src;
                        }
            }
    }
}

/* n matrices of rows x cols es-byte elements, each transposed into dst:
 * an NCHW tensor (rows = channels, cols = pixels) to the rows of its
 * pixels (NHWC order), and back (rows = pixels, cols = channels). */
static void transpose_each(const void *src, void *dst, int n, size_t rows, size_t cols,
                           size_t es)
{
#pragma omp parallel for schedule(static) if ((size_t)n * rows * cols >= 65536)
    for (int i = 0; i < n; i++)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t from = ((size_t)i * rows + r) * cols + c;
                size_t to = ((size_t)i * cols + c) * rows + r;
                if (es == 2)
                    ((uint16_t *)dst)[to] = ((const uint16_t *)src)[from];
                else
                    ((float *)dst)[to] = ((const float *)src)[from];
            }
}

/* The matmul entry: with M = N*P*Q and KC = R*S*C, the patch matrix is
 * M x KC, y M x K and the filters K x KC (ohwi; oihw on NCHW, whose
 * patches' columns are in its order, and whose y and dy go through an
 * M x K copy, e->rows); ptr as conv_execute. Its buffers are the entry's
 * (be->dev_alloc, kept while it is cached). */
static int conv_matmul_run(tb_backend *be, conv_entry *e, void *ptr[3], void *bias,
                           int accumulate)
{
    const tb_conv_desc *d = &e->d;
    size_t pq = (size_t)tb_conv_out_h(d) * tb_conv_out_w(d);
    int m = d->n * (int)pq, kc = d->r * d->s * d->c, k = d->k, nchw = d->layout == TB_NCHW;
    tb_dtype dt = d->dtype;
    size_t es = dt == TB_F32 ? sizeof(float) : 2, cells = (size_t)m * kc;
    int direct = matmul_direct(d);
    const void *cols = ptr[0];
    if (!direct && e->kind != TB_CONV_BWD_DATA) { /* x's patches */
        if (!e->col)
            TB_TRY(be->dev_alloc(be, &e->col, cells * es));
        (nchw ? im2col_nchw : im2col_nhwc)(d, ptr[0], es, e->col);
        cols = e->col;
    }
    if (nchw && !e->rows) /* y (fp32) or dy as M x K */
        TB_TRY(be->dev_alloc(be, &e->rows, (size_t)m * k * sizeof(float)));
    if (e->kind == TB_CONV_FWD) { /* y = patches w^T (+ bias) */
        float *y = nchw ? e->rows : ptr[2];
        TB_TRY(tb_cpu_gemm_locked(be, dt, d->math, 0, 1, m, k, kc, 1.0f, cols, kc, ptr[1], kc,
                                  0.0f, y, k));
        if (bias)
            TB_TRY(be->bias_add(be, y, bias, m, k));
        if (nchw)
            transpose_each(y, ptr[2], d->n, pq, (size_t)k, sizeof(float));
        return TB_OK;
    }
    const void *dy = ptr[e->kind == TB_CONV_BWD_FILTER ? 1 : 0];
    if (nchw) {
        transpose_each(dy, e->rows, d->n, (size_t)k, pq, es);
        dy = e->rows;
    }
    if (e->kind == TB_CONV_BWD_FILTER) { /* dw (+)= dy^T patches, into dw directly */
        TB_TRY(tb_cpu_gemm_locked(be, dt, d->math, 1, 0, k, kc, m, 1.0f, dy, k, cols, kc,
                                  accumulate ? 1.0f : 0.0f, ptr[2], kc));
        if (!bias)
            return TB_OK;
        const float *dy32 = dy;
        if (dt != TB_F32) { /* the bias gradient sums dy in fp32: widened, exactly */
            if (!e->dcol)
                TB_TRY(be->dev_alloc(be, (void **)&e->dcol, (size_t)m * k * sizeof(float)));
            TB_TRY(be->cast_lowp_to_f32(be, dt, dy, e->dcol, (size_t)m * k));
            dy32 = e->dcol;
        }
        return be->bias_grad(be, dy32, bias, m, k, accumulate);
    }
    /* the patches' gradient dy w, added back into dx */
    if (direct)
        return tb_cpu_gemm_locked(be, dt, d->math, 0, 0, m, kc, k, 1.0f, dy, k, ptr[1], kc,
                                  0.0f, ptr[2], kc);
    if (!e->dcol)
        TB_TRY(be->dev_alloc(be, (void **)&e->dcol, cells * sizeof(float)));
    TB_TRY(tb_cpu_gemm_locked(be, dt, d->math, 0, 0, m, kc, k, 1.0f, dy, k, ptr[1], kc, 0.0f,
                              e->dcol, kc));
    (nchw ? col2im_nchw : col2im_nhwc)(d, e->dcol, ptr[2]);
    return TB_OK;
}

/* Input operand o, reordered from the caller's memory into the
 * implementation's (both handles set). */
static int operand_reorder_in(dnnl_state *st, const conv_operand *o)
{
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, o->user}, {DNNL_ARG_TO, o->impl}};
    TB_CHECK_DNNL(dnnl_primitive_execute(o->reorder, st->stream, 2, args));
    return TB_OK;
}

/* conv_execute, where pre[i] (if pre and pre[i]) already holds input
 * operand i in the implementation's layout (conv_bwd_both's dy): no
 * reorder for it. */
static int conv_execute_pre(tb_backend *be, dnnl_state *st, conv_entry *e, void *ptr[3],
                            void *bias, void *const *pre)
{
    if (e->matmul)
        return conv_matmul_run(be, e, ptr, bias, 0);
    TB_TRY(workspace_reserve(be, st, e->ws_bytes));
    char *ws = st->ws;
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->scratch, e->ws_bytes ? ws : NULL));
    for (int i = 0; i < 3; i++) {
        TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->op[i].user, ptr[i]));
        if (e->op[i].reorder)
            TB_CHECK_DNNL(dnnl_memory_set_data_handle(
                e->op[i].impl, pre && pre[i] ? pre[i] : ws + e->op[i].offset));
    }
    if (e->bias)
        TB_CHECK_DNNL(dnnl_memory_set_data_handle(e->bias, bias));
    for (int i = 0; i < 3; i++) {
        conv_operand *o = &e->op[i];
        if (o->reorder && !o->is_output && !(pre && pre[i]))
            TB_TRY(operand_reorder_in(st, o));
    }
    dnnl_exec_arg_t args[5];
    int nargs = 0;
    for (int i = 0; i < 3; i++)
        args[nargs++] = (dnnl_exec_arg_t){e->op[i].arg, e->op[i].impl};
    if (e->bias)
        args[nargs++] = (dnnl_exec_arg_t){e->kind == TB_CONV_FWD ? DNNL_ARG_BIAS
                                                                 : DNNL_ARG_DIFF_BIAS, e->bias};
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    TB_CHECK_DNNL(dnnl_primitive_execute(e->prim, st->stream, nargs, args));
    for (int i = 0; i < 3; i++) {
        conv_operand *o = &e->op[i];
        if (o->reorder && o->is_output) {
            dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, o->impl}, {DNNL_ARG_TO, o->user}};
            TB_CHECK_DNNL(dnnl_primitive_execute(o->reorder, st->stream, 2, rargs));
        }
    }
    TB_CHECK_DNNL(dnnl_stream_wait(st->stream));
    return TB_OK;
}

static int conv_execute(tb_backend *be, dnnl_state *st, conv_entry *e, void *ptr[3],
                        void *bias)
{
    return conv_execute_pre(be, st, e, ptr, bias, NULL);
}

static void add_into(float *dst, const float *src, size_t n)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* Backward filter; with accumulate, computes into scratch and adds. pre
 * as conv_execute_pre's. */
static int conv_bwd_filter_run(tb_backend *be, dnnl_state *st, conv_entry *e, const float *x,
                               const float *dy, float *dw, float *dbias, int accumulate,
                               void *const *pre)
{
    const tb_conv_desc *d = &e->d;
    size_t nw = (size_t)d->k * d->c * d->r * d->s;
    if (e->matmul) /* accumulates in its product */
        return conv_matmul_run(be, e, (void *[3]){(void *)x, (void *)dy, dw}, dbias, accumulate);
    if (!accumulate)
        return conv_execute_pre(be, st, e, (void *[3]){(void *)x, (void *)dy, dw}, dbias, pre);
    if (!e->acc_w)
        TB_TRY(be->dev_alloc(be, (void **)&e->acc_w, nw * sizeof(float)));
    if (e->has_bias && !e->acc_b)
        TB_TRY(be->dev_alloc(be, (void **)&e->acc_b, (size_t)d->k * sizeof(float)));
    TB_TRY(conv_execute_pre(be, st, e, (void *[3]){(void *)x, (void *)dy, e->acc_w}, e->acc_b,
                            pre));
    add_into(dw, e->acc_w, nw);
    if (e->has_bias)
        add_into(dbias, e->acc_b, (size_t)d->k);
    return TB_OK;
}

/* Looks up (or creates) the primitive and runs it; ptr as conv_execute. */
static int conv_run(tb_backend *be, const tb_conv_desc *d0, tb_conv_kind kind, int algo,
                    void *ptr[3], void *bias, float *dbias, int accumulate)
{
    dnnl_state *st = state_of(be);
    tb_conv_desc run = as_run(st, d0);
    const tb_conv_desc *d = &run;
    void *widened[3];
    if (run.dtype != d0->dtype) {
        /* bf16 widened: the two inputs of every direction come in bf16. */
        size_t nx, nw, ny;
        conv_sizes(d, &nx, &nw, &ny);
        size_t n0 = kind == TB_CONV_BWD_DATA ? ny : nx;
        size_t n1 = kind == TB_CONV_BWD_FILTER ? ny : nw;
        float *in0, *in1;
        TB_TRY(bf16_widen2(be, st, ptr[0], n0, ptr[1], n1, &in0, &in1));
        widened[0] = in0, widened[1] = in1, widened[2] = ptr[2];
        ptr = widened;
    }
    conv_entry key = conv_key(d, kind, algo, kind == TB_CONV_BWD_FILTER ? dbias != NULL
                                                                        : bias != NULL);
    conv_entry *e;
    TB_TRY(conv_lookup(be, st, &key, &e));
    if (kind == TB_CONV_BWD_FILTER)
        return conv_bwd_filter_run(be, st, e, ptr[0], ptr[1], ptr[2], dbias, accumulate, NULL);
    /* a low-precision output that the primitive writes in fp32 (the matmul
     * entry, bf16 widened): into scratch, then narrowed */
    if (!d0->lowp_out || (d->lowp_out && !e->matmul))
        return conv_execute(be, st, e, ptr, bias);
    size_t nx, nw, ny;
    conv_sizes(d, &nx, &nw, &ny);
    size_t n_out = kind == TB_CONV_FWD ? ny : nx;
    TB_TRY(buffer_reserve(be, (void **)&st->out_f32, &st->out_f32_bytes, n_out * sizeof(float)));
    TB_TRY(conv_execute(be, st, e, (void *[3]){ptr[0], ptr[1], st->out_f32}, bias));
    return be->cast_f32_to_lowp(be, d0->dtype, st->out_f32, ptr[2], n_out);
}

static int conv_run_locked(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind, int algo,
                           void *ptr[3], void *bias, float *dbias, int accumulate,
                           const char *op)
{
    TB_TRY(conv_check_desc(d, op));
    if (algo < 0)
        return TB_FAIL(TB_ERR_INVALID, "%s: algorithm id %d < 0", op, algo);
    int prev;
    lock_enter(be, &prev);
    int rc = conv_run(be, d, kind, algo, ptr, bias, dbias, accumulate);
    lock_leave(be, prev);
    return rc;
}

static int cpu_conv_fwd(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                         const float *w, const float *bias, float *y)
{
    return conv_run_locked(be, d, TB_CONV_FWD, algo, (void *[3]){(void *)x, (void *)w, y},
                           (void *)bias, NULL, 0, "conv_fwd");
}

static int cpu_conv_bwd_data(tb_backend *be, const tb_conv_desc *d, int algo, const float *dy,
                              const float *w, float *dx)
{
    return conv_run_locked(be, d, TB_CONV_BWD_DATA, algo,
                           (void *[3]){(void *)dy, (void *)w, dx}, NULL, NULL, 0,
                           "conv_bwd_data");
}

static int cpu_conv_bwd_filter(tb_backend *be, const tb_conv_desc *d, int algo,
                                const float *x, const float *dy, float *dw, float *dbias,
                                int accumulate)
{
    return conv_run_locked(be, d, TB_CONV_BWD_FILTER, algo,
                           (void *[3]){(void *)x, (void *)dy, dw}, dbias, dbias, accumulate,
                           "conv_bwd_filter");
}

/* conv_bwd calls that reordered dy once, over every CPU backend of the
 * process (tests; atomic: backends hold their own locks) */
static long bwd_shared_calls;

long tb_cpu_conv_bwd_shared_calls(void)
{
    return __atomic_load_n(&bwd_shared_calls, __ATOMIC_RELAXED);
}

/* Both gradients (backend.h: conv_bwd). Where both implementations reorder
 * dy into the same layout, dy is reordered once, into st->dy_blocked, and
 * both run on that copy: the same bits as the two calls (a reorder is a
 * copy). Elsewhere (matmul, bf16 widened, different layouts or none) the two
 * calls. The small CNN's NCHW step reorders 5 dy a step fewer (fp32: ~0.02
 * ms each at 32x16x14x14, 2 threads). */
static int conv_bwd_both(tb_backend *be, const tb_conv_desc *d0, int algo_f, int algo_d,
                         const float *x, const float *dy, const float *w, float *dw,
                         float *dbias, int accumulate, float *dx)
{
    dnnl_state *st = state_of(be);
    tb_conv_desc run = as_run(st, d0);
    conv_entry *ef = NULL, *ed = NULL;
    const dnnl_memory_desc_t *mf = NULL, *md = NULL;
    int shared = run.dtype == d0->dtype; /* bf16 widened: conv_run widens dy per call */
    if (shared) {
        conv_entry kf = conv_key(&run, TB_CONV_BWD_FILTER, algo_f, dbias != NULL);
        conv_entry kd = conv_key(&run, TB_CONV_BWD_DATA, algo_d, 0);
        TB_TRY(conv_lookup(be, st, &kf, &ef));
        TB_TRY(conv_lookup(be, st, &kd, &ed));
        shared = !ef->matmul && !ed->matmul && ef->op[1].reorder && ed->op[0].reorder &&
                 conv_key_equal(ef, &kf); /* still cached: kd's insert did not evict it */
    }
    if (shared) {
        TB_CHECK_DNNL(dnnl_memory_get_memory_desc(ef->op[1].impl, &mf));
        TB_CHECK_DNNL(dnnl_memory_get_memory_desc(ed->op[0].impl, &md));
        shared = dnnl_memory_desc_equal(mf, md);
    }
    if (!shared) {
        TB_TRY(conv_run(be, d0, TB_CONV_BWD_FILTER, algo_f,
                        (void *[3]){(void *)x, (void *)dy, dw}, dbias, dbias, accumulate));
        return conv_run(be, d0, TB_CONV_BWD_DATA, algo_d, (void *[3]){(void *)dy, (void *)w, dx},
                        NULL, NULL, 0);
    }
    __atomic_fetch_add(&bwd_shared_calls, 1, __ATOMIC_RELAXED);
    TB_TRY(buffer_reserve(be, &st->dy_blocked, &st->dy_blocked_bytes,
                          dnnl_memory_desc_get_size(md)));
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(ed->op[0].user, (void *)dy));
    TB_CHECK_DNNL(dnnl_memory_set_data_handle(ed->op[0].impl, st->dy_blocked));
    TB_TRY(operand_reorder_in(st, &ed->op[0]));
    TB_TRY(conv_bwd_filter_run(be, st, ef, x, dy, dw, dbias, accumulate,
                               (void *[3]){NULL, st->dy_blocked, NULL}));
    return conv_execute_pre(be, st, ed, (void *[3]){(void *)dy, (void *)w, dx}, NULL,
                            (void *[3]){st->dy_blocked, NULL, NULL});
}

static int cpu_conv_bwd(tb_backend *be, const tb_conv_desc *d, int algo_filter, int algo_data,
                        const float *x, const float *dy, const float *w, float *dw, float *dbias,
                        int accumulate, float *dx)
{
    TB_TRY(conv_check_desc(d, "conv_bwd"));
    if (algo_filter < 0 || algo_data < 0)
        return TB_FAIL(TB_ERR_INVALID, "conv_bwd: algorithm ids %d and %d: an id < 0",
                       algo_filter, algo_data);
    int prev;
    lock_enter(be, &prev);
    int rc = conv_bwd_both(be, d, algo_filter, algo_data, x, dy, w, dw, dbias, accumulate, dx);
    lock_leave(be, prev);
    return rc;
}

/* ---- convolution: default algorithm and the autotuner ---- */

/* Part 2 of the list: an implementation on blocked activations. */
static int is_reorder_impl(const char *name) { return strstr(name, "+reorder") != NULL; }

/* Whether im2col stays the default over a direct kernel on blocked
 * activations: for the data gradient when x has so few input taps per
 * output (c * r * s < 16: the small CNN's first layer, c = 1, 3x3; a model
 * skips that layer's dx, a lone conv does not) that the direct kernel
 * writes mostly padding (dx's channels padded to a block of 16). Measured
 * with conv_find (1 thread, shared machine, bf16, batch 32, 1x28x28 -> 16,
 * ms gemm vs direct+reorder): bwd-data 0.21 vs 0.90, but fwd 0.20 vs 0.12
 * and bwd-filter 0.40 vs 0.12, which keep the direct one.
 * And a 1x1, stride-1, unpadded conv on plain NCHW, where the `gemm:` entry
 * is one matrix product per image with no im2col and no activation
 * reorders: it stays for the filter gradient, and forward and data gradient
 * with at least 128 pixels an image; with fewer (ResNet-50's stages 3 and 4
 * at 64x64: 16 and 4) its skinny products lose to the direct kernel.
 * Measured with conv_find (1 thread, shared machine, batch 16, ms gemm vs
 * direct+reorder): 64->256 at 16x16 bf16 fwd 0.64 vs 0.92, bwd-data 0.75
 * vs 0.83, bwd-filter 0.74 vs 0.89; 256->128 at 16x16 bf16 1.26 vs 1.45,
 * 1.34 vs 1.50, 1.57 vs 1.85, fp32 2.50 vs 2.94, 2.62 vs 2.94, 2.84 vs
 * 2.95; 512->128 at 8x8 bf16 ties (0.71 vs 0.68, 0.77 vs 0.69) but
 * bwd-filter 0.66 vs 0.75; 1024->256 at 4x4 bf16 fwd 1.01 vs 0.67,
 * bwd-data 2.17 vs 0.76, bwd-filter 0.83 vs 1.50. */
static int gemm_stays(const tb_conv_desc *d, tb_conv_kind kind)
{
    if (kind == TB_CONV_BWD_DATA && d->c * d->r * d->s < 16)
        return 1;
    int plain_1x1 = d->layout == TB_NCHW && d->r == 1 && d->s == 1 && d->stride == 1 &&
                    d->pad == 0;
    return plain_1x1 && (kind == TB_CONV_BWD_FILTER || d->h * d->w >= 128);
}

/* Forward with few output pixels an image, where oneDNN 2.6 puts its
 * brgemm kernels (`brgconv`, `brgconv_1x1`) first: its jit direct kernel,
 * listed right after them, is faster there. Measured with conv_find on
 * ResNet-50's convolutions at 64x64, batch 16, NHWC, 2 threads, AVX-512
 * BF16 (ms brgconv vs jit): outputs of 2x2 and 4x4 pixels lose 1.4-4.4x in
 * fp32 (2048->512 1x1 at 2x2: 2.99 vs 0.68; 512->512 3x3 stride 2 to 2x2:
 * 4.47 vs 1.85) and 1.2-2.2x in bf16 (1.10 vs 0.62; 1.42 vs 0.87); outputs
 * of 8x8 1.05-1.22x in fp32 (128->128 3x3: 1.31 vs 1.14) and 1.00-1.17x in
 * bf16; 16x16 and above within 6% either way. A step's forward
 * convolutions: fp32 77.0 -> 47.9 ms, bf16 30.9 -> 25.9 ms. PyTorch's
 * oneDNN (3.x) picks the faster kernel there by itself. */
#define BRG_FWD_MAX_PIXELS 64

static int is_brg_impl(const char *name) { return strncmp(name, "brgconv", 7) == 0; }

/* On NHWC the matmul entry is the default where the output has at most
 * MATMUL_MAX_PIXELS pixels an image: for the filter gradient of any
 * convolution, and for the forward and data gradient of a 1x1 one (any
 * stride). There oneDNN 2.6's kernels lose to the products, weight
 * reorders included (the products need none); on larger outputs they tie
 * or win, and a 3x3's forward and data gradient keep its direct kernel
 * (bf16 256->256 at 4x4: fwd 0.51 vs 0.72 ms). Measured with conv_find on
 * ResNet-50's convolutions at 64x64, batch 16, NHWC, 2 threads, AVX-512
 * BF16 (ms, oneDNN's default vs matmul): filter gradients in bf16 of
 * 512->512 3x3 at 2x2 4.29 vs 0.81, its strided twin 2.55 vs 0.78,
 * 1024->2048 1x1 stride 2 3.27 vs 0.69, 256->256 3x3 stride 2 to 4x4 1.55
 * vs 0.80, 2048->512 1x1 0.97 vs 0.35; in fp32 256->256 3x3 stride 2 1.90
 * vs 1.45, 2048->512 1x1 1.18 vs 0.66; forward of 2048->512 1x1 at 2x2
 * bf16 0.66 vs 0.35, of 1024->2048 1x1 stride 2 0.87 vs 0.67. A step's
 * filter gradients in bf16 40.1 -> 28.4 ms. */
#define MATMUL_MAX_PIXELS 16
/* On NCHW, where the patch matrix is a gather and y and dy are copied to
 * and from matrix rows, the matmul entry is the default for filter
 * gradients with at most this many output pixels an image, and only for
 * them. ResNet-50 NCHW bf16 as above (ms, oneDNN's best vs matmul): at 2x2
 * every filter gradient is faster as matmul (512->512 3x3 1.04, 2048->512
 * 1x1 0.64, the others less); at 4x4 the 3x3 one is not (0.92 vs 1.25),
 * and the forward and data gradients of 1x1s lose 1.1-2.2x (1024->256 at
 * 4x4 fwd 0.38 vs 0.84). The NCHW step (--trace, alternated pairs, one
 * machine state): bf16 171.2 -> 148.1 ms, fp32 230.4 -> 220.3 ms. */
#define MATMUL_NCHW_MAX_PIXELS 4

static int matmul_default(const tb_conv_desc *d, tb_conv_kind kind)
{
    int px = tb_conv_out_h(d) * tb_conv_out_w(d);
    if (d->layout == TB_NCHW)
        return kind == TB_CONV_BWD_FILTER && px <= MATMUL_NCHW_MAX_PIXELS;
    return px <= MATMUL_MAX_PIXELS && (kind == TB_CONV_BWD_FILTER || (d->r == 1 && d->s == 1));
}

/* On NCHW, the bf16/fp16 filter gradient of a strided convolution whose
 * output has at most STRIDED_LOWP_GEMM_MAX_PIXELS pixels an image goes to
 * im2col's gemm unless matmul_default takes it: oneDNN 2.6's jit_bf16
 * kernel there is slow, and far slower when the host puts the two vCPUs on
 * cores apart (a core-to-core round trip of ~320 ns instead of ~65; it
 * synchronises its threads often). Measured with conv_find (2 threads,
 * AVX-512 BF16, ms gemm vs oneDNN's choice, together and apart): the small
 * CNN's 16->32 3x3 stride 2 to 7x7 at batch 32 0.14 vs 0.18 and 0.17 vs
 * 0.53 (fp32's direct kernel: 0.08 and 0.10; at batch 64 0.28 vs 0.35);
 * ResNet-50's 256->256 3x3 stride 2 to 4x4 at batch 16 1.20 vs 1.43 and
 * 1.68 vs 2.10; but 128->128 stride 2 to 8x8 1.22 vs 1.03 and 1.48 vs
 * 1.48, which keeps oneDNN's kernel. The small CNN's bf16 NCHW step, conv
 * backward (--trace, 400 steps, old and new in one state): 1.93-2.00 ->
 * 1.69 ms apart, 1.25-1.27 -> 1.26 ms together; ResNet-50's (64x64, batch
 * 16) 67.2-67.5 -> 66.7-68.5 ms together. On NHWC conv_find favoured the
 * gemm too (with its activation reorders), but the channels-last bf16
 * small CNN's conv backward went 0.98 -> 1.06-1.09 ms together, so NHWC
 * keeps oneDNN's choice. */
#define STRIDED_LOWP_GEMM_MAX_PIXELS 49
/* Where strided_lowp_gemm applies and x has at most this many channels,
 * the default is the fp32 twin's direct kernel instead ("+widen": the
 * reorders into and out of its blocked layout widen x and dy), faster than
 * the gemm there. Measured with conv_find (2 threads, AVX-512 BF16, the
 * vCPUs together, ms widened jit vs gemm vs oneDNN's jit_bf16): the small
 * CNN's 16->32 3x3 stride 2 to 7x7 at batch 32 0.115 vs 0.195 vs 0.196, at
 * 64 0.190 vs 0.282 vs 0.352; 24->24 to 4x4 at batch 32 0.111 vs 0.139 vs
 * 0.117. With 256 channels the twin loses (ResNet-50's 256->256 to 4x4 at
 * batch 16: 1.84-1.96 vs gemm 2.21-2.76 vs jit_bf16 1.49-1.62), and those
 * keep strided_lowp_gemm's choice. In the small CNN's bf16 step (--trace,
 * DNNL_VERBOSE, vCPUs apart) the gemm had taken 0.27 ms a step against the
 * fp32 step's 0.09 for the same gradient. */
#define STRIDED_WIDEN_MAX_C 32

static int is_widen_impl(const char *name) { return strstr(name, "+widen") != NULL; }

static int strided_lowp_gemm(const tb_conv_desc *d, tb_conv_kind kind)
{
    return d->layout == TB_NCHW && kind == TB_CONV_BWD_FILTER && d->dtype != TB_F32 &&
           d->stride > 1 && tb_conv_out_h(d) * tb_conv_out_w(d) <= STRIDED_LOWP_GEMM_MAX_PIXELS;
}

/* The default among the n names of the list: matmul where
 * matmul_default says; im2col's gemm where strided_lowp_gemm says; else the first non-`ref:` entry,
 * unless that is an im2col `gemm:` one, gemm_stays says no, and a direct
 * implementation on blocked activations exists (part 2): then the first
 * such; and unless that is a forward `brgconv` with at most
 * BRG_FWD_MAX_PIXELS output pixels: then the first `jit` entry after it in
 * the same part. */
static int default_of(const tb_conv_desc *d, tb_conv_kind kind, char (*names)[64], int n)
{
    for (int i = 0; i < n && matmul_default(d, kind); i++)
        if (is_matmul_impl(names[i]))
            return i;
    for (int i = 0; i < n && strided_lowp_gemm(d, kind) && d->c <= STRIDED_WIDEN_MAX_C; i++)
        if (is_widen_impl(names[i]))
            return i;
    for (int i = 0; i < n && strided_lowp_gemm(d, kind); i++)
        if (is_gemm_impl(names[i]) && !is_ref_impl(names[i]))
            return i;
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (!is_ref_impl(names[i]))
            first = i;
    if (first < 0)
        return 0;
    int pick = first;
    if (is_gemm_impl(names[first]) && !gemm_stays(d, kind))
        for (int i = first + 1; i < n; i++)
            if (is_reorder_impl(names[i]) && !is_ref_impl(names[i]) && !is_gemm_impl(names[i])) {
                pick = i;
                break;
            }
    if (kind != TB_CONV_FWD || !is_brg_impl(names[pick]) ||
        tb_conv_out_h(d) * tb_conv_out_w(d) > BRG_FWD_MAX_PIXELS)
        return pick;
    for (int i = pick + 1; i < n; i++)
        if (strncmp(names[i], "jit", 3) == 0 &&
            is_reorder_impl(names[i]) == is_reorder_impl(names[pick]))
            return i;
    return pick;
}

static int cpu_conv_algo_default(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                                  int *algo)
{
    TB_TRY(conv_check_desc(d, "conv_algo_default"));
    char names[TB_MAX_CONV_ALGOS][64];
    conv_walk w = {.want = -1, .max = TB_MAX_CONV_ALGOS, .names = names};
    int prev;
    lock_enter(be, &prev);
    int rc = conv_walk_list(state_of(be), d, kind, 0, &w);
    lock_leave(be, prev);
    TB_TRY(rc);
    *algo = default_of(d, kind, names, w.count < TB_MAX_CONV_ALGOS ? w.count : TB_MAX_CONV_ALGOS);
    return TB_OK;
}

/* Scratch operands for timing: (x-side, w, y-side) in the caller's layout. */
typedef struct find_buffers {
    float *x, *w, *y;
} find_buffers;

static void find_buffers_free(tb_backend *be, find_buffers *b)
{
    dev_free_ptr(be, (void **)&b->x);
    dev_free_ptr(be, (void **)&b->w);
    dev_free_ptr(be, (void **)&b->y);
}

static int find_buffers_alloc(tb_backend *be, const tb_conv_desc *d, find_buffers *b)
{
    size_t nx, nw, ny;
    conv_sizes(d, &nx, &nw, &ny);
    int rc;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&b->x, nx * sizeof(float)), out_free_buffers);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&b->w, nw * sizeof(float)), out_free_buffers);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&b->y, ny * sizeof(float)), out_free_buffers);
    /* the autotuner never times zeros (some paths skip them) */
    tb_rng_fill(b->x, nx, 1, -1.0, 1.0);
    tb_rng_fill(b->w, nw, 2, -1.0, 1.0);
    tb_rng_fill(b->y, ny, 3, -1.0, 1.0);
    return TB_OK;

out_free_buffers:
    find_buffers_free(be, b);
    return rc;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One warm-up call, then the median of FIND_TIMED_RUNS timed calls. A
 * warm-up slower than cutoff_ms (when > 0) is the result: that algorithm
 * has lost already, and some take seconds (gemm:jit bwd-data on NHWC). */
static int find_time_one(tb_backend *be, dnnl_state *st, conv_entry *e, find_buffers *b,
                         float cutoff_ms, float *ms)
{
    void *ptr[3];
    if (e->kind == TB_CONV_FWD)
        memcpy(ptr, (void *[3]){b->x, b->w, b->y}, sizeof ptr);
    else if (e->kind == TB_CONV_BWD_DATA)
        memcpy(ptr, (void *[3]){b->y, b->w, b->x}, sizeof ptr);
    else
        memcpy(ptr, (void *[3]){b->x, b->y, b->w}, sizeof ptr);
    float t[FIND_TIMED_RUNS];
    double t0 = tb_clock_s();
    TB_TRY(conv_execute(be, st, e, ptr, NULL));
    *ms = (float)((tb_clock_s() - t0) * 1e3);
    if (cutoff_ms > 0 && *ms > cutoff_ms)
        return TB_OK;
    for (int i = 0; i < FIND_TIMED_RUNS; i++) {
        double t0 = tb_clock_s();
        TB_TRY(conv_execute(be, st, e, ptr, NULL));
        t[i] = (float)((tb_clock_s() - t0) * 1e3);
    }
    qsort(t, FIND_TIMED_RUNS, sizeof t[0], cmp_float);
    *ms = t[FIND_TIMED_RUNS / 2];
    return TB_OK;
}

static int cmp_perf(const void *a, const void *b)
{
    const tb_conv_algo_perf *x = a, *y = b;
    /* Failed ones (ms < 0) last. */
    if ((x->ms < 0) != (y->ms < 0))
        return x->ms < 0 ? 1 : -1;
    return (x->ms > y->ms) - (x->ms < y->ms);
}

/* Times every non-ref algorithm; the fastest one's primitive goes into the
 * cache, ready for the conv_* call that will use it. */
static int conv_find_run(tb_backend *be, const tb_conv_desc *d0, tb_conv_kind kind,
                         tb_conv_algo_perf *perf, int max, int *returned)
{
    dnnl_state *st = state_of(be);
    tb_conv_desc run = as_run(st, d0); /* a widened bf16 problem times its fp32 kernels */
    const tb_conv_desc *d = &run;
    char names[TB_MAX_CONV_ALGOS][64];
    conv_walk w = {.want = -1, .max = TB_MAX_CONV_ALGOS, .names = names};
    TB_TRY(conv_walk_list(st, d, kind, 0, &w));
    find_buffers b = {0};
    TB_TRY(find_buffers_alloc(be, d, &b));
    int rc = TB_OK, n = 0;
    conv_entry best = {0};
    int have_best = 0;
    float best_ms = 0.0f;
    for (int algo = 0; algo < w.count && algo < TB_MAX_CONV_ALGOS && n < max; algo++) {
        if (is_ref_impl(names[algo]))
            continue;
        conv_entry e = conv_key(d, kind, algo, 0);
        tb_conv_algo_perf *p = &perf[n++];
        *p = (tb_conv_algo_perf){.algo = algo, .ms = -1.0f};
        snprintf(p->name, sizeof p->name, "%s", names[algo]);
        TB_TRY_GOTO(rc, conv_entry_create(be, st, &e), out_destroy_best);
        p->workspace = e.ws_bytes;
        rc = find_time_one(be, st, &e, &b, have_best ? FIND_CUTOFF * best_ms : 0.0f, &p->ms);
        if (rc != TB_OK) {
            conv_entry_destroy(be, &e);
            goto out_destroy_best;
        }
        if (have_best && p->ms >= best_ms) {
            conv_entry_destroy(be, &e);
            continue;
        }
        conv_entry_destroy(be, &best);
        best = e;
        have_best = 1;
        best_ms = p->ms;
    }
    qsort(perf, (size_t)n, sizeof perf[0], cmp_perf);
    *returned = n;
    if (have_best && !conv_cached(st, &best)) {
        conv_cache_insert(be, st, &best);
        memset(&best, 0, sizeof best); /* the cache owns it now */
    }

out_destroy_best:
    conv_entry_destroy(be, &best);
    find_buffers_free(be, &b);
    return rc;
}

static int cpu_conv_find(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                          tb_conv_algo_perf *perf, int max, int *returned)
{
    *returned = 0;
    TB_TRY(conv_check_desc(d, "conv_find"));
    if (max <= 0)
        return TB_FAIL(TB_ERR_INVALID, "conv_find: max %d must be > 0", max);
    int prev;
    lock_enter(be, &prev);
    int rc = conv_find_run(be, d, kind, perf, max, returned);
    lock_leave(be, prev);
    return rc;
}

void tb_cpu_conv_cache_release(tb_backend *be)
{
    dnnl_state *st = state_of(be);
    for (int i = 0; i < CONV_CACHE_SIZE; i++)
        conv_entry_destroy(be, &st->conv[i]);
    memset(st->conv_head, 0, sizeof st->conv_head);
    memset(st->conv_next, 0, sizeof st->conv_next);
}

void tb_cpu_install_conv(tb_backend *be)
{
    be->conv_algo_default = cpu_conv_algo_default;
    be->conv_find = cpu_conv_find;
    be->conv_fwd = cpu_conv_fwd;
    be->conv_bwd_data = cpu_conv_bwd_data;
    be->conv_bwd_filter = cpu_conv_bwd_filter;
    be->conv_bwd = cpu_conv_bwd;
}
