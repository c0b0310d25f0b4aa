/*
 * internal.h - what the files of the selfcheck share, internal to
 * //lib/selfcheck:selfcheck (the public side is lib/selfcheck/selfcheck.h).
 *
 *   lib/selfcheck/selfcheck.c          the tables (op slots -> checks, runtime slots)
 *                            and the walk, coverage, one line per check
 *   lib/selfcheck/case.c     the check context: inputs, buffers, one case,
 *                            compare and print (the helpers below)
 *   lib/selfcheck/ops.c      element-wise, gemm, casts, bias, loss,
 *                            reductions, dropout, optimizers
 *   lib/selfcheck/conv.c     convolution, batch norm, pooling
 *   lib/selfcheck/attention.c     layer norm, attention
 *   lib/selfcheck/tokens.c   token-model embeddings
 *   lib/selfcheck/runtime.c  memory, streams, device info, graph capture,
 *                            device-side data (augment, labels)
 *   lib/selfcheck/train.c    training step checks (the sc_step_checks[] table)
 *   lib/selfcheck/toggles.c  training-toggle cases (sc_toggle_checks[]): each
 *                            toggle against its fp32 equivalent on the CPU
 *   lib/selfcheck/dist.c     DataParallel on 2 GPUs, pinned vs pageable
 *   lib/selfcheck/ddp.c      DDP on one rank (NCCL on CUDA, MPI on the CPU)
 *
 * A check reads as: inputs from sc_randf (host and device), outputs from
 * sc_outf (NaN-filled), the reference on the host, then one case per
 * size/variant: sc_case_start, then SC_FINISH with the op's status and the
 * outputs to compare. All buffers go at sc_release.
 *
 * Tolerances: the max relative error against the largest reference value
 * (tb_max_rel_err, lib/core/stats.h), chosen by why the two sides may differ:
 *   TOL_EXACT 0      selections and single IEEE operations both sides do
 *                    alike: relu fwd/bwd, add, bias_add (one rounded add),
 *                    embedding_fwd (one rounded add of two table rows),
 *                    dropout (mask from kernels/rng_math.h, one multiply by
 *                    the same float scale), max pooling and its argmax,
 *                    count_nonfinite (a small integer). Masks and argmax are
 *                    compared bitwise.
 *   TOL_ROUND 1e-6   (~8 ulp) a few float roundings where the reference
 *                    rounds once from double: axpby, average pooling,
 *                    pool_bwd (overlapping windows add in another order),
 *                    softmax_xent_bwd, xent_lse_bwd (exp's ~2 ulp of p <= 1
 *                    and the float rounding of lse - z: 1.0e-7 of scale
 *                    measured on the CPU, lib/backend/cpu/ops_test.c).
 *   TOL_SUM 1e-5     (~100 ulp, TB_TOL_F32) sums in another order, or other
 *                    exp/log/erf/sqrt implementations: gemm, convolution,
 *                    bias_grad, reduce_sum, batch norm, softmax_xent_fwd,
 *                    embedding_bwd (float sums over rows vs double),
 *                    xent_lse_fwd (loss and lse), gelu and gelu_tanh
 *                    (both within 1e-6 max(1, |x|) of their double
 *                    reference, lib/backend/cpu/gelu_test.c: an absolute bound, so
 *                    its error is scaled by max(1, max |ref|); the tanh
 *                    form's tanh and sech^2 come from the same exp, so it
 *                    needs no tolerance of its own), optimizers.
 *   TOL_CANCEL 1e-4  gradients that subtract means which cancel most of
 *                    them: batch norm's and layer norm's dx (dy minus two
 *                    means; with n*hw = 2 samples per channel rounding grows
 *                    ~10x: 1.1e-5 seen on the CPU fast path, and
 *                    lib/backend/cpu/ops_test.c uses 1e-4 too), attention's dq, dk,
 *                    dv (dS = P (dP - rowsum(dO * O))).
 *   TOL_TRANSFORM 1e-4  Winograd and FFT convolution algorithms: they sum
 *                    transformed data, which amplifies rounding.
 *   TOL_WINOGRAD_LARGE 3e-3  cuDNN's WINOGRAD_NONFUSED on filters larger
 *                    than 3x3: its tiles for them have transform
 *                    coefficients large enough to lose about 10 bits; on an
 *                    H100 (cuDNN 9, fp32 with FMA math, 5x5 filter) it was
 *                    4.2e-4 off forward, 2.3e-4 backward data and 1.1e-3
 *                    backward filter, while its 3x3 tiles and every other
 *                    algorithm stayed within 1e-4.
 *   TOL_TF32 1e-2    TF32 math keeps 10 mantissa bits (oneDNN's bf16
 *                    fpmath, the CPU's analogue, 8): ~4e-3 per product.
 *   TOL_LOWP 2e-2    fp16/bf16 inputs with fp32 accumulation (TB_TOL_BF16).
 * Inputs are uniform in ranges that keep results of order one and are
 * never zero; reduce_sum's are positive so the sum cannot cancel to noise.
 * All inputs come from one stream in the walk's order, so a check's
 * numbers depend on the checks run before it (the seed fixes them all).
 */
#ifndef TB_SELFCHECK_INT_H
#define TB_SELFCHECK_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/train/config.h"
#include "lib/selfcheck/selfcheck.h"
#include "lib/core/status.h"

#define TOL_EXACT 0.0
#define TOL_ROUND 1e-6
#define TOL_SUM 1e-5
#define TOL_CANCEL 1e-4
#define TOL_TRANSFORM 1e-4
#define TOL_WINOGRAD_LARGE 3e-3
#define TOL_TF32 1e-2
#define TOL_LOWP 2e-2

#define SC_MAX_BUFS 64

/* One walk: the backend, where lines go, the input stream, and the
 * buffers of the check running now (freed by sc_release after it). */
typedef struct sc_ctx {
    tb_backend *be;
    FILE *out;
    tb_rng rng;               /* every input of the run, from --seed */
    tb_selfcheck_counts *counts;
    const char *slot;
    void *dev[SC_MAX_BUFS];
    int ndev;
    void *host[SC_MAX_BUFS];
    int nhost;
} sc_ctx;

/* One line of output: a slot at one size / variant / algorithm. */
typedef struct sc_case {
    char desc[192];
    int failed, na;
    char why[320];     /* the first failure, or the n/a reason */
    double rel, tol;   /* of the float output nearest its tolerance */
    double ratio;      /* rel / tol of that output; < 0 before any */
    int nfloat;        /* float outputs compared */
    char what[32];
    char exact[64];    /* outputs compared bitwise */
    char note[192];    /* extra facts for a PASS line */
} sc_case;

/* One output to compare: the reference on the host (want) against the
 * device's (got), n elements. elem 0: floats within tol, scaled by at least
 * floor (see sc_cmp_floor); elem > 0: bitwise, elements of elem bytes.
 * want NULL: the output does not exist in this case, nothing compared. */
typedef struct sc_expect {
    const char *what;
    const void *want;
    const void *got;
    size_t n;
    double tol;
    double floor;
    size_t elem;
} sc_expect;

/* ---- inputs (lib/selfcheck/case.c) ---- */
/* x[0..n) uniform in [lo, hi], never exactly 0, from the run's stream.
 * Raw draws: tb_rng_next_u64(&sc->rng). */
void sc_fill(sc_ctx *sc, float *x, size_t n, float lo, float hi);

/* ---- buffers, all freed by sc_release; host ones 0xff-filled, device
 * ones too (NaN floats: an output the op fails to write shows) ---- */
int sc_host(sc_ctx *sc, void **p, size_t bytes);
int sc_dev(sc_ctx *sc, void **p, size_t bytes);
int sc_upload(sc_ctx *sc, void **dev, const void *host, size_t bytes);
/* n random floats in [lo, hi] on the host only. */
int sc_host_randf(sc_ctx *sc, float **host, size_t n, float lo, float hi);
/* n random floats in [lo, hi] on the host (*host) and the device (*dev). */
int sc_randf(sc_ctx *sc, float **host, float **dev, size_t n, float lo, float hi);
/* A reference output on the host (NaN-filled) and the device's (NaN-filled). */
int sc_outf(sc_ctx *sc, float **host, float **dev, size_t n);
/* An output the op may read first (accumulate, beta != 0): random in
 * [-1, 1] on both sides when reads, else NaN, which the op must not read. */
int sc_inoutf(sc_ctx *sc, float **host, float **dev, size_t n, int reads);
/* n random floats in [-1, 1] (host) rounded to dt, the bits on the device. */
int sc_rand_lowp(sc_ctx *sc, tb_dtype dt, float **f, void **dev, size_t n);
int sc_release(sc_ctx *sc);

/* ---- one case ---- */
void sc_case_start(sc_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the first failure of a case; later ones add nothing. */
void sc_case_fail(sc_case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A call on the backend under test failed: the case fails with its error. */
void sc_case_fail_rc(sc_case *c, const char *call, int rc);
/* n/a with the error's message (a variant the backend lacks). */
void sc_case_na_rc(sc_case *c);
/* Takes the op's status and waits for it. Returns 1 when the op ran and
 * its outputs are to be compared. optional: TB_ERR_UNSUPPORTED means n/a
 * (a math mode or optimizer the backend lacks), not a failure. */
int sc_ran(sc_ctx *sc, sc_case *c, int rc, int optional);
int sc_cmp_floor(sc_ctx *sc, sc_case *c, const char *what, const float *ref, const float *dev,
                 size_t n, double tol, double min_scale);
int sc_cmp(sc_ctx *sc, sc_case *c, const char *what, const float *ref, const float *dev, size_t n,
           double tol);
int sc_cmp_exact(sc_ctx *sc, sc_case *c, const char *what, const void *ref, const void *dev,
                 size_t n, size_t elem);
/* Runs one(sc, rows, cols) for each of n {rows, cols} shapes, calling
 * sc_release after each. */
int sc_each_shape(sc_ctx *sc, const int (*shapes)[2], size_t n, int (*one)(sc_ctx *, int, int));
#define SC_EACH_SHAPE(sc, shapes, one) \
    sc_each_shape((sc), (shapes), sizeof(shapes) / sizeof((shapes)[0]), (one))
/* Prints the case's line and counts it. */
void sc_case_end(sc_ctx *sc, sc_case *c);
/* The end of most cases: when the op's status rc says it ran (sc_ran),
 * compares each of e[0..ne), then prints the line. An error (not a
 * verdict) returns before the line; the walk reports the check stopped. */
int sc_finish(sc_ctx *sc, sc_case *c, int rc, int optional, const sc_expect *e, size_t ne);
/* Compares each of e[0..ne) (the op has run and was waited for). */
int sc_cmp_all(sc_ctx *sc, sc_case *c, const sc_expect *e, size_t ne);
#define SC_CMP_ALL(sc, c, ...)                                                       \
    sc_cmp_all((sc), (c), (const sc_expect[]){__VA_ARGS__},                          \
               sizeof((const sc_expect[]){__VA_ARGS__}) / sizeof(sc_expect))
#define SC_FINISH(sc, c, rc, optional, ...)                                          \
    sc_finish((sc), (c), (rc), (optional), (const sc_expect[]){__VA_ARGS__},         \
              sizeof((const sc_expect[]){__VA_ARGS__}) / sizeof(sc_expect))
/* One line that is only a failure (e.g. a slot a check needs is NULL). */
void sc_fail_line(sc_ctx *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Calls a slot of the backend under test; a failure fails case c and jumps. */
#define SC_CALL(c, label, expr)                   \
    do {                                          \
        int sc_rc_ = (expr);                      \
        if (sc_rc_ != TB_OK) {                    \
            sc_case_fail_rc((c), #expr, sc_rc_);  \
            goto label;                           \
        }                                         \
    } while (0)

/* Names of enum values in case descriptions. */
extern const char *const sc_lowp_names[]; /* by tb_dtype: "f32", "bf16", "fp16" */

/* ---- the checks, one per slot, listed in op_checks[] (lib/selfcheck/selfcheck.c) ---- */
/* lib/selfcheck/ops.c */
int check_gelu_fwd(sc_ctx *sc);
int check_gelu_bwd(sc_ctx *sc);
int check_relu_fwd(sc_ctx *sc);
int check_relu_bwd(sc_ctx *sc);
int check_add(sc_ctx *sc);
int check_relu_fwd_lowp(sc_ctx *sc);
int check_relu_bwd_lowp(sc_ctx *sc);
int check_add_lowp(sc_ctx *sc);
int check_axpby(sc_ctx *sc);
int check_gemm(sc_ctx *sc);
int check_gemm_lowp(sc_ctx *sc);
int check_cast_f32_to_lowp(sc_ctx *sc);
int check_cast_lowp_to_f32(sc_ctx *sc);
int check_bias_add(sc_ctx *sc);
int check_bias_grad(sc_ctx *sc);
int check_softmax_xent_fwd(sc_ctx *sc);
int check_softmax_xent_bwd(sc_ctx *sc);
int check_gelu_tanh_fwd(sc_ctx *sc);
int check_gelu_tanh_bwd(sc_ctx *sc);
int check_xent_lse_fwd(sc_ctx *sc);
int check_xent_lse_bwd(sc_ctx *sc);
int check_reduce_sum(sc_ctx *sc);
int check_count_nonfinite(sc_ctx *sc);
int check_dropout_fwd(sc_ctx *sc);
int check_dropout_bwd(sc_ctx *sc);
int check_opt_step(sc_ctx *sc);
/* lib/selfcheck/conv.c */
int check_conv_algo_default(sc_ctx *sc);
int check_conv_find(sc_ctx *sc);
int check_conv_fwd(sc_ctx *sc);
int check_conv_bwd_data(sc_ctx *sc);
int check_conv_bwd_filter(sc_ctx *sc);
int check_conv_bwd(sc_ctx *sc);
int check_bn_fwd_train(sc_ctx *sc);
int check_bn_fwd_infer(sc_ctx *sc);
int check_bn_bwd(sc_ctx *sc);
int check_pool_fwd(sc_ctx *sc);
int check_pool_bwd(sc_ctx *sc);
/* lib/selfcheck/attention.c */
int check_layernorm_fwd(sc_ctx *sc);
int check_layernorm_bwd(sc_ctx *sc);
int check_attention_workspace(sc_ctx *sc);
int check_attention_fwd(sc_ctx *sc);
int check_attention_bwd(sc_ctx *sc);
/* lib/selfcheck/tokens.c */
int check_embedding_fwd(sc_ctx *sc);
int check_embedding_bwd(sc_ctx *sc);
/* lib/selfcheck/runtime.c */
int check_mem_roundtrip(sc_ctx *sc);
int check_mem_accounting(sc_ctx *sc);
int check_streams(sc_ctx *sc);
int check_device_info(sc_ctx *sc);
int check_graph_capture(sc_ctx *sc);
int check_augment_u8(sc_ctx *sc);
int check_labels_u8_to_i32(sc_ctx *sc);

/* ---- training step checks ---- */
/* The table, ended by a NULL name (lib/selfcheck/train.c). */
extern const tb_step_check sc_step_checks[];
/* The toggle cases, ended by a NULL name (lib/selfcheck/toggles.c). */
extern const tb_step_check sc_toggle_checks[];
/* The default step config: 4 steps of batch 32 on 256 synthetic samples
 * (64 test samples), small CNN, lr 0.01, seed 7 (lib/selfcheck/train.c). */
void sc_step_defaults(tb_config *c);
/* The loss of cfg's first epoch on be: the epoch's mean training loss, or
 * with evaluate the test loss after the steps. cfg is left as it was. */
int sc_config_loss(tb_backend *be, const tb_config *cfg, int evaluate, double *loss);
/* The fp32 tolerance of a step check's loss: a few fp32 steps whose
 * conv/gemm algorithms and reduction orders differ by backend. */
#define SC_STEP_TOL_F32 1e-3
#define SC_STEP_WHY_F32 "fp32 steps; conv/gemm algorithms and reduction orders differ by backend"
/* The mean loss of the epoch's few steps of the small CNN on be, the
 * default step config changed by tweak (lib/selfcheck/train.c). */
int sc_step_loss(tb_backend *be, void (*tweak)(tb_config *), double *loss);
/* Runs loss_of(be, arg) for *got, then the same on a CPU backend it opens
 * for *ref (lib/selfcheck/train.c). */
int sc_on_be_and_cpu(tb_backend *be, int (*loss_of)(tb_backend *, const void *, double *),
                     const void *arg, double *got, double *ref);
/* A same-backend bitwise check's reference ran twice, ref and again: TB_OK
 * where they are equal to the bit, else TB_ERR_NUMERIC saying that be's
 * training does not repeat, so the comparison (what: "pinned vs pageable")
 * cannot be bitwise; ref_name names the runs ("pageable")
 * (lib/selfcheck/train.c). */
int sc_ref_repeats(const tb_backend *be, double ref, double again, const char *ref_name,
                   const char *what);
/* lib/selfcheck/dist.c */
int sc_step_dp_two_gpus(tb_backend *be, double *got, double *ref);
int sc_step_pinned(tb_backend *be, double *got, double *ref);
int sc_step_pinned_async(tb_backend *be, double *got, double *ref);
/* lib/selfcheck/ddp.c */
int sc_step_ddp_one_rank(tb_backend *be, double *got, double *ref);

#endif
