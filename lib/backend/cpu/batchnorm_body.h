/*
 * batchnorm_body.h - batch norm's loops over activations, written once and
 * instantiated by batchnorm.c for each element type of x, y, dy and dx:
 * fp32 and bf16 (tb_bn_desc.dtype). No include guard: batchnorm.c includes
 * it once per type (it #undefs them at its end), after defining
 *
 *   BN_T               the element type (float; uint16_t holding bf16 bits)
 *   BN_LOAD(p, i)      element i of p widened to float (exact)
 *   BN_NAME(f)         f with the type's suffix (f##_f32, f##_bf16)
 *
 * and may define BN_FLOAT_RUNS (bf16): the NCHW statistics sum runs of at
 * most that many elements of a row in float, each run's sums added into
 * the channel's double ones (batchnorm.c says why that is enough there).
 *
 * The arithmetic is the same for both types, in fp32 and (the statistics'
 * sums) double on the widened values. Outputs are written through a stage
 * (bf16_rows.h: in place for fp32; for bf16 a small fp32 buffer rounded
 * out to nearest even by bf16_rows.c), so a bf16 tensor gets the fp32
 * kernel's results on the same values, rounded once. Everything else
 * (splits, chunking, the per-channel finishers, the workspace) is
 * batchnorm.c's and is shared.
 *
 * Every omp simd loop over elements says safelen(16), the fp32 loops'
 * widest vectors (so their code is unchanged): 2-byte elements let GCC
 * take 32 lanes, which left rows of 16 channels (NHWC, the small CNN) all
 * to the scalar remainder, and added up 64 partial sums after each row of
 * the NCHW statistics (the bf16 backward on 7x7 planes ran 1.7x as long).
 */

/* dst[r * C + c] = expr for rows r in [lo, hi) and c < C (expr reads r
 * and c), written through the stage st: as many whole rows a run as fit
 * in STAGE_COLS (all of them for fp32), or a row in runs of STAGE_COLS.
 * Runs of several rows matter to NHWC with 16 channels: a run a row spent
 * more on the stage than on the row. */
#define BN_MAP_ROWS(st, dst, lo, hi, C, r, c, expr)                                             \
    for (size_t r0_ = (lo), step_ = (C) <= BN_NAME(STAGE_COLS) ? BN_NAME(STAGE_COLS) / (C) : 1; \
         r0_ < (hi); r0_ += step_) {                                                            \
        size_t r1_ = (hi) - r0_ < step_ ? (hi) : r0_ + step_;                                   \
        for (size_t c0_ = 0; c0_ < (C); c0_ += BN_NAME(STAGE_COLS)) {                           \
            size_t m_ = (C) - c0_ < BN_NAME(STAGE_COLS) ? (C) - c0_ : BN_NAME(STAGE_COLS);      \
            float *out_ = BN_NAME(stage_at)(&(st), (dst) + r0_ * (C) + c0_,                     \
                                            (r1_ - r0_ - 1) * (C) + m_);                        \
            for (size_t r = r0_; r < r1_; r++) {                                                \
                float *row_ = out_ + (r - r0_) * (C);                                           \
                _Pragma("omp simd safelen(16)") for (size_t j_ = 0; j_ < m_; j_++)              \
                {                                                                               \
                    size_t c = c0_ + j_;                                                        \
                    row_[j_] = (expr);                                                          \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

/* s += the sum over i < hw of ea, q += of eb (expressions of i): in
 * double (BN_SUM_T), or with BN_FLOAT_RUNS in float (BN_SUM_T) over runs of
 * that many elements, each run's sums added into s and q. BN_RUN_SUMS sums
 * one run, i from lo to hi, in BN_SUM_T. */
#define BN_RUN_SUMS(s, q, lo, hi, i, ea, eb)                                                      \
    do {                                                                                         \
        size_t lo_ = (lo), hi_ = (hi);                                                           \
        BN_SUM_T a_ = 0, b_ = 0;                                                                 \
        _Pragma("omp simd reduction(+ : a_, b_) safelen(16)") for (size_t i = lo_; i < hi_; i++) \
        {                                                                                        \
            a_ += (ea);                                                                          \
            b_ += (eb);                                                                          \
        }                                                                                        \
        (s) += a_;                                                                               \
        (q) += b_;                                                                               \
    } while (0)
#ifdef BN_FLOAT_RUNS
#define BN_SUM_T float
#define BN_ROW_SUMS(s, q, hw, i, ea, eb)                                                         \
    for (size_t i0_ = 0; i0_ < (hw); i0_ += BN_FLOAT_RUNS)                                       \
    BN_RUN_SUMS(s, q, i0_, (hw) - i0_ < BN_FLOAT_RUNS ? (hw) : i0_ + BN_FLOAT_RUNS, i, ea, eb)
#else
#define BN_SUM_T double
#define BN_ROW_SUMS(s, q, hw, i, ea, eb) BN_RUN_SUMS(s, q, 0, hw, i, ea, eb)
#endif

/* NCHW: channel c is n runs of hw elements, C * hw apart. The statistics in
 * one pass over x, sum and sum of squares in double: var = E[x^2] - mean^2
 * loses ~1e-16 * mean^2 / var of var to cancellation, far below the float
 * it is rounded to for any activation (a pass fewer than mean, then
 * squared deviations: batch norm forward on ResNet-50 is ~5% of a step). */
BN_CLONES static void BN_NAME(bn_train_channel_nchw)(const tb_bn_desc *d, int c, const BN_T *x,
                                                     const float *gamma, const float *beta,
                                                     BN_T *y, float *rm, float *rv, float *sm,
                                                     float *si)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw;
    double m = (double)d->n * hw, s = 0.0, q = 0.0;
    const BN_T *xc = x + (size_t)c * hw;
    for (int n = 0; n < d->n; n++) {
        const BN_T *xr = xc + n * stride;
        BN_ROW_SUMS(s, q, hw, i, (BN_SUM_T)BN_LOAD(xr, i),
                    (BN_SUM_T)BN_LOAD(xr, i) * (BN_SUM_T)BN_LOAD(xr, i));
    }
    double mean = s / m, var = q / m - mean * mean;
    bn_finish_channel(d, c, mean, var > 0.0 ? var : 0.0, rm, rv, sm, si);
    float mu = sm[c], inv = si[c], g = gamma[c], b = beta[c];
    BN_NAME(stage) st;
    BN_NAME(stage_init)(&st);
    for (int n = 0; n < d->n; n++) {
        const BN_T *xr = xc + n * stride;
        BN_MAP_ROWS(st, y + (size_t)c * hw + n * stride, 0, 1, hw, r, i,
                    tb_bn_fwd_f(BN_LOAD(xr, i), mu, inv, g, b));
    }
    BN_NAME(stage_flush)(&st);
}

/* part[c] = sum over rows [lo, hi) of x[r][c], part[C + c] = of x[r][c]^2,
 * for channels [c0, c1), in double (the NCHW statistics' one pass,
 * bn_train_channel_nchw says why the cancellation is harmless). */
BN_CLONES static void BN_NAME(nhwc_rows_sum)(const BN_T *x, size_t C, size_t c0, size_t c1,
                                             size_t lo, size_t hi, double *part)
{
    double *sq = part + C;
    memset(part + c0, 0, (c1 - c0) * sizeof *part);
    memset(sq + c0, 0, (c1 - c0) * sizeof *sq);
    for (size_t r = lo; r < hi; r++) {
        const BN_T *xr = x + r * C;
#pragma omp simd safelen(16)
        for (size_t c = c0; c < c1; c++) {
            double v = BN_LOAD(xr, c);
            part[c] += v;
            sq[c] += v * v;
        }
    }
}

/* y = gamma (x - mean) invstd + beta over rows [lo, hi) of C channels,
 * the per-channel factors in arrays of C (NHWC; the NCHW small-plane path
 * passes one image of C * hw positions as a row). */
BN_CLONES static void BN_NAME(bn_rows_fwd)(const BN_T *x, size_t C, size_t lo, size_t hi,
                                           const float *mu, const float *inv, const float *g,
                                           const float *b, BN_T *y)
{
    BN_NAME(stage) st;
    BN_NAME(stage_init)(&st);
    BN_MAP_ROWS(st, y, lo, hi, C, r, c,
                tb_bn_fwd_f(BN_LOAD(x, r * C + c), mu[c], inv[c], g[c], b[c]));
    BN_NAME(stage_flush)(&st);
}

static int BN_NAME(bn_fwd_train_nhwc)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                      const float *gamma, const float *beta, BN_T *y, float *rm,
                                      float *rv, float *sm, float *si)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws = NULL;
    TB_TRY(ws_floats(be, 2 * (2 * kc * C + 2 * C), &ws));
    double *part = (double *)ws, *mean = part + 2 * kc * C, *var = mean + C;
    int par = rows * C >= PAR_MIN;
    size_t nb = bn_col_blocks(C);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t task = 0; task < kc * nb; task++) {
        size_t k = task / nb, lo, hi, c0, c1;
        bn_chunk(rows, kc, k, &lo, &hi);
        bn_cols(C, task % nb, &c0, &c1);
        BN_NAME(nhwc_rows_sum)(x, C, c0, c1, lo, hi, part + 2 * k * C);
    }
    /* chunk k's sums are part[2kC, 2kC + C), its squares the C after them:
     * bn_combine over 2C-wide chunks adds both in chunk order */
    bn_combine(t, part, kc, 2 * C, mean); /* mean[0, C): sums, var = mean + C: squares */
    for (size_t c = 0; c < C; c++) {
        mean[c] /= (double)rows;
        double v = var[c] / (double)rows - mean[c] * mean[c];
        var[c] = v > 0.0 ? v : 0.0;
    }
    for (size_t c = 0; c < C; c++)
        bn_finish_channel(d, (int)c, mean[c], var[c], rm, rv, sm, si);
#pragma omp parallel num_threads(t) if (par)
    {
        size_t lo, hi;
        thread_range(rows, &lo, &hi);
        BN_NAME(bn_rows_fwd)(x, C, lo, hi, sm, si, gamma, beta, y);
    }
    return TB_OK;
}

/* a[j] = sum over images of u[j], b[j] = sum of u[j] * w[j] (x == NULL: of
 * u[j]^2; else w[j] = x[j] - mean_e[j]), for j in [lo, hi) of the L. */
BN_CLONES static void BN_NAME(bn_plane_sums)(const BN_T *u, const BN_T *x, const float *mean_e,
                                             size_t N, size_t L, size_t lo, size_t hi, double *a,
                                             double *b)
{
    for (size_t j = lo; j < hi; j++)
        a[j] = b[j] = 0.0;
    for (size_t n = 0; n < N; n++) {
        const BN_T *un = u + n * L, *xn = x ? x + n * L : NULL;
        if (!xn) {
#pragma omp simd safelen(16)
            for (size_t j = lo; j < hi; j++) {
                double v = BN_LOAD(un, j);
                a[j] += v;
                b[j] += v * v;
            }
        } else {
#pragma omp simd safelen(16)
            for (size_t j = lo; j < hi; j++) {
                float v = BN_LOAD(un, j);
                a[j] += v;
                b[j] += v * (BN_LOAD(xn, j) - mean_e[j]);
            }
        }
    }
}

/* Both sums of bn_plane_sums over all L positions, in parallel. */
static void BN_NAME(bn_plane_sums_all)(int t, const BN_T *u, const BN_T *x, const float *mean_e,
                                       size_t N, size_t L, double *a, double *b)
{
    size_t kc = bn_plane_chunks(L);
#pragma omp parallel for num_threads(t) schedule(static) if (N * L >= PAR_MIN)
    for (size_t k = 0; k < kc; k++) {
        size_t lo = k * BN_PLANE_CHUNK, hi = lo + BN_PLANE_CHUNK < L ? lo + BN_PLANE_CHUNK : L;
        BN_NAME(bn_plane_sums)(u, x, mean_e, N, L, lo, hi, a, b);
    }
}

static int BN_NAME(bn_fwd_train_small)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                       const float *gamma, const float *beta, BN_T *y, float *rm,
                                       float *rv, float *sm, float *si)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, hw = (size_t)d->hw, L = C * hw, N = (size_t)d->n;
    float *ws = NULL;
    TB_TRY(ws_floats(be, 4 * L + 4 * L, &ws));
    double *a = (double *)ws, *b = a + L;
    float *mu_e = (float *)(b + L), *inv_e = mu_e + L, *g_e = inv_e + L, *b_e = g_e + L;
    BN_NAME(bn_plane_sums_all)(t, x, NULL, NULL, N, L, a, b);
    double m = (double)N * hw;
    for (size_t c = 0; c < C; c++) {
        double mean = bn_plane_channel(a, c, hw) / m;
        double var = bn_plane_channel(b, c, hw) / m - mean * mean;
        bn_finish_channel(d, (int)c, mean, var > 0.0 ? var : 0.0, rm, rv, sm, si);
    }
    bn_expand(sm, C, hw, mu_e);
    bn_expand(si, C, hw, inv_e);
    bn_expand(gamma, C, hw, g_e);
    bn_expand(beta, C, hw, b_e);
#pragma omp parallel num_threads(t) if (N * L >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(N, &lo, &hi);
        BN_NAME(bn_rows_fwd)(x, L, lo, hi, mu_e, inv_e, g_e, b_e, y);
    }
    return TB_OK;
}

static int BN_NAME(bn_fwd_train)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                 const float *gamma, const float *beta, BN_T *y,
                                 float *running_mean, float *running_var, float *save_mean,
                                 float *save_invstd)
{
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    if (d->layout == TB_NCHW && d->hw < BN_SMALL_HW)
        return BN_NAME(bn_fwd_train_small)(be, d, x, gamma, beta, y, running_mean, running_var,
                                           save_mean, save_invstd);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            BN_NAME(bn_train_channel_nchw)(d, c, x, gamma, beta, y, running_mean, running_var,
                                           save_mean, save_invstd);
        return TB_OK;
    }
    return BN_NAME(bn_fwd_train_nhwc)(be, d, x, gamma, beta, y, running_mean, running_var,
                                      save_mean, save_invstd);
}

/* Planes [lo, hi) of NCHW: y = gamma (x - mean) invstd + beta with the
 * factors of each plane's channel. */
BN_CLONES static void BN_NAME(bn_planes_fwd)(const BN_T *x, size_t C, size_t hw, size_t lo,
                                             size_t hi, const float *mu, const float *inv,
                                             const float *g, const float *b, BN_T *y)
{
    BN_NAME(stage) st;
    BN_NAME(stage_init)(&st);
    for (size_t pl = lo; pl < hi; pl++) {
        size_t c = pl % C;
        float m = mu[c], is = inv[c], gc = g[c], bc = b[c];
        const BN_T *xp = x + pl * hw;
        BN_MAP_ROWS(st, y + pl * hw, 0, 1, hw, r, i, tb_bn_fwd_f(BN_LOAD(xp, i), m, is, gc, bc));
    }
    BN_NAME(stage_flush)(&st);
}

/* inv: C floats of workspace holding 1 / sqrt(running_var + eps). */
static void BN_NAME(bn_fwd_infer)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                  const float *gamma, const float *beta,
                                  const float *running_mean, const float *inv, BN_T *y)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, hw = (size_t)d->hw, total = (size_t)d->n * C * hw;
    size_t rows = d->layout == TB_NCHW ? (size_t)d->n * C : (size_t)d->n * hw;
#pragma omp parallel num_threads(t) if (total >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(rows, &lo, &hi);
        if (d->layout == TB_NCHW)
            BN_NAME(bn_planes_fwd)(x, C, hw, lo, hi, running_mean, inv, gamma, beta, y);
        else
            BN_NAME(bn_rows_fwd)(x, C, lo, hi, running_mean, inv, gamma, beta, y);
    }
}

BN_CLONES static void BN_NAME(bn_bwd_channel_nchw)(const tb_bn_desc *d, int c, const BN_T *x,
                                                   const BN_T *dy, const float *gamma,
                                                   const float *sm, const float *si,
                                                   const bn_grads *gr)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw, off = (size_t)c * hw;
    double mu = sm[c], s = 0.0, sx = 0.0;
    BN_SUM_T mu_sum = (BN_SUM_T)mu;
    for (int n = 0; n < d->n; n++) {
        const BN_T *xr = x + off + n * stride, *gr_ = dy + off + n * stride;
        BN_ROW_SUMS(s, sx, hw, i, BN_LOAD(gr_, i), BN_LOAD(gr_, i) * (BN_LOAD(xr, i) - mu_sum));
    }
    float k, mdy, mdyx;
    bn_bwd_finish(d, c, s, sx, gamma, si, gr, &k, &mdy, &mdyx);
    float muf = sm[c], inv = si[c];
    BN_T *dx = gr->dx;
    BN_NAME(stage) st;
    BN_NAME(stage_init)(&st);
    for (int n = 0; n < d->n; n++) {
        const BN_T *xr = x + off + n * stride, *dyr = dy + off + n * stride;
        BN_MAP_ROWS(st, dx + off + n * stride, 0, 1, hw, r, i,
                    tb_bn_bwd_dx_f(BN_LOAD(xr, i), BN_LOAD(dyr, i), muf, inv, k, mdy, mdyx));
    }
    BN_NAME(stage_flush)(&st);
}

/* Backward sums over rows [lo, hi) for channels [c0, c1): part[c] =
 * sum dy, part[C + c] = sum dy (x - mean). */
BN_CLONES static void BN_NAME(nhwc_rows_bwd_sums)(const BN_T *x, const BN_T *dy, size_t C,
                                                  size_t c0, size_t c1, size_t lo, size_t hi,
                                                  const float *mean, double *part)
{
    memset(part + c0, 0, (c1 - c0) * sizeof *part);
    memset(part + C + c0, 0, (c1 - c0) * sizeof *part);
    for (size_t r = lo; r < hi; r++) {
        const BN_T *xr = x + r * C, *dyr = dy + r * C;
#pragma omp simd safelen(16)
        for (size_t c = c0; c < c1; c++) {
            float g = BN_LOAD(dyr, c);
            part[c] += g;
            part[C + c] += g * (BN_LOAD(xr, c) - mean[c]);
        }
    }
}

/* dx = k (dy - mean_dy - xhat mean_dy_xhat) over rows [lo, hi) of C
 * channels, the per-channel factors in arrays of C (NHWC; the NCHW
 * small-plane path passes one image of C * hw positions as a row). */
BN_CLONES static void BN_NAME(bn_rows_bwd)(const BN_T *x, const BN_T *dy, size_t C, size_t lo,
                                           size_t hi, const float *mu, const float *inv,
                                           const float *k, const float *mdy, const float *mdyx,
                                           BN_T *dx)
{
    BN_NAME(stage) st;
    BN_NAME(stage_init)(&st);
    BN_MAP_ROWS(st, dx, lo, hi, C, r, c,
                tb_bn_bwd_dx_f(BN_LOAD(x, r * C + c), BN_LOAD(dy, r * C + c), mu[c], inv[c], k[c],
                               mdy[c], mdyx[c]));
    BN_NAME(stage_flush)(&st);
}

static int BN_NAME(bn_bwd_nhwc)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                const BN_T *dy, const float *gamma, const float *sm,
                                const float *si, const bn_grads *gr)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws = NULL;
    TB_TRY(ws_floats(be, 2 * (2 * kc * C + 2 * C) + 3 * C, &ws));
    double *part = (double *)ws, *sums = part + 2 * kc * C;
    float *k = (float *)(sums + 2 * C), *mdy = k + C, *mdyx = mdy + C;
    int par = rows * C >= PAR_MIN;
    size_t nb = bn_col_blocks(C);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t task = 0; task < kc * nb; task++) {
        size_t q = task / nb, lo, hi, c0, c1;
        bn_chunk(rows, kc, q, &lo, &hi);
        bn_cols(C, task % nb, &c0, &c1);
        BN_NAME(nhwc_rows_bwd_sums)(x, dy, C, c0, c1, lo, hi, sm, part + 2 * q * C);
    }
    bn_combine(t, part, kc, 2 * C, sums);
    for (size_t c = 0; c < C; c++)
        bn_bwd_finish(d, (int)c, sums[c], sums[C + c], gamma, si, gr, &k[c], &mdy[c], &mdyx[c]);
#pragma omp parallel num_threads(t) if (par)
    {
        size_t lo, hi;
        thread_range(rows, &lo, &hi);
        BN_NAME(bn_rows_bwd)(x, dy, C, lo, hi, sm, si, k, mdy, mdyx, gr->dx);
    }
    return TB_OK;
}

/* bn_fwd_train_small's backward: the sums per position, then per channel,
 * then dx in one contiguous pass per image. */
static int BN_NAME(bn_bwd_small)(tb_backend *be, const tb_bn_desc *d, const BN_T *x,
                                 const BN_T *dy, const float *gamma, const float *sm,
                                 const float *si, const bn_grads *gr)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, hw = (size_t)d->hw, L = C * hw, N = (size_t)d->n;
    float *ws = NULL;
    TB_TRY(ws_floats(be, 4 * L + 5 * L + 3 * C, &ws));
    double *a = (double *)ws, *b = a + L;
    float *mu_e = (float *)(b + L), *inv_e = mu_e + L, *k_e = inv_e + L, *mdy_e = k_e + L,
          *mdyx_e = mdy_e + L, *k = mdyx_e + L, *mdy = k + C, *mdyx = mdy + C;
    bn_expand(sm, C, hw, mu_e);
    bn_expand(si, C, hw, inv_e);
    BN_NAME(bn_plane_sums_all)(t, dy, x, mu_e, N, L, a, b);
    for (size_t c = 0; c < C; c++)
        bn_bwd_finish(d, (int)c, bn_plane_channel(a, c, hw), bn_plane_channel(b, c, hw), gamma,
                      si, gr, &k[c], &mdy[c], &mdyx[c]);
    bn_expand(k, C, hw, k_e);
    bn_expand(mdy, C, hw, mdy_e);
    bn_expand(mdyx, C, hw, mdyx_e);
#pragma omp parallel num_threads(t) if (N * L >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(N, &lo, &hi);
        BN_NAME(bn_rows_bwd)(x, dy, L, lo, hi, mu_e, inv_e, k_e, mdy_e, mdyx_e, gr->dx);
    }
    return TB_OK;
}

static int BN_NAME(bn_bwd)(tb_backend *be, const tb_bn_desc *d, const BN_T *x, const BN_T *dy,
                           const float *gamma, const float *save_mean, const float *save_invstd,
                           const bn_grads *gr)
{
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    if (d->layout == TB_NCHW && d->hw < BN_SMALL_HW)
        return BN_NAME(bn_bwd_small)(be, d, x, dy, gamma, save_mean, save_invstd, gr);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            BN_NAME(bn_bwd_channel_nchw)(d, c, x, dy, gamma, save_mean, save_invstd, gr);
        return TB_OK;
    }
    return BN_NAME(bn_bwd_nhwc)(be, d, x, dy, gamma, save_mean, save_invstd, gr);
}

#undef BN_MAP_ROWS
/* the parameters of this instantiation: the next one defines its own */
#undef BN_T
#undef BN_LOAD
#undef BN_NAME
#undef BN_FLOAT_RUNS
#undef BN_SUM_T
#undef BN_RUN_SUMS
#undef BN_ROW_SUMS
