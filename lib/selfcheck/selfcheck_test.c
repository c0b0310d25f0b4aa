/*
 * selfcheck_test.c - tests the selfcheck walk (lib/selfcheck/selfcheck.c) itself.
 *
 *   bazel test //lib/selfcheck:selfcheck_test             # the walk, coverage, broken ops
 *   bazel test //bench:selfcheck_binary_test    # bench:selfcheck's exit codes
 *
 * What it checks:
 *  1. The generated op table (lib/backend/optable.h) matches struct tb_backend:
 *     known slots are there with the right kind, and reading a slot through
 *     it gives the member's value.
 *  2. Coverage: every op slot has a selfcheck case, every runtime slot is
 *     listed as not an op (a new slot in lib/backend/backend.h fails this until
 *     lib/selfcheck/selfcheck.c checks it; the message names the slot).
 *  3. The walk on the CPU backend's fast paths against the plain reference:
 *     no failure, the slots backend.h lets the CPU leave NULL reported n/a,
 *     and the pinned-memory step checks n/a with the CPU's reason.
 *  4. Broken ops are caught: a relu_fwd that leaks negatives, one that
 *     leaves an element unwritten, a conv_fwd off by 1e-3 in one element, a
 *     dropout_fwd whose mask flips one bit, an op slot set to NULL, an
 *     op returning TB_ERR_UNSUPPORTED for its fp32 case, an embedding_fwd one
 *     ulp off in one element, an embedding_bwd that writes dwte when asked
 *     to add, a gelu_tanh_fwd / gelu_tanh_bwd that runs the erf form, an
 *     xent_lse_fwd with one loss off by 1e-4, an xent_lse_bwd with its lse
 *     off by 1e-3, and one that is right out of place but wrong in place:
 *     each is a FAIL line for that slot.
 *  5. The training-toggle cases (lib/selfcheck/toggles.c): each has its line
 *     in the CPU walk, PASS, or n/a with the trainer's reason for the
 *     toggles only a GPU has; a GEMM that writes where it should add
 *     (gradient accumulation broken) fails the accum-steps case, and a
 *     fused attention that masks the future of a non-causal model fails
 *     the fused-attention case (so the toggle reaches the op);
 *     --tensors-on-device and --augment-on-device pass on the CPU given
 *     host stand-ins for the labels_u8_to_i32 and augment_u8 slots
 *     (tb_selfcheck_host_*).
 * With --selfcheck-binary=PATH it instead runs bench:selfcheck: the default
 * (--device=cuda) exits 0 saying there is nothing to check when no GPU is
 * usable; --device=auto exits 0 with the summary (the CPU, or the GPU);
 * --help exits 0; a bad --device exits 2.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/backend/backend.h"
#include "lib/backend/optable.h"
#include "lib/selfcheck/selfcheck.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

/* ---- 1. the generated table ---- */

static void test_optable(tb_backend *be)
{
    const tb_slot_info *relu = tb_optable_find("relu_fwd");
    const tb_slot_info *alloc = tb_optable_find("dev_alloc");
    const tb_slot_info *opt = tb_optable_find("opt_step");
    CHECK(relu && relu->kind == TB_SLOT_OP && strcmp(relu->section, "element-wise ops") == 0,
          "relu_fwd missing from the op table or not an element-wise op");
    CHECK(alloc && alloc->kind == TB_SLOT_RUNTIME, "dev_alloc missing or not a runtime slot");
    CHECK(opt && opt->kind == TB_SLOT_OP, "opt_step missing or not an op");
    CHECK(!tb_optable_find("name") && !tb_optable_find("ctx"),
          "data members of tb_backend listed as slots");
    CHECK(tb_optable_find("destroy") != NULL, "destroy missing");
    if (relu)
        CHECK(tb_slot_get(be, relu) == (tb_slot_fn)be->relu_fwd,
              "tb_slot_get(relu_fwd) is not be->relu_fwd");
    if (alloc)
        CHECK(tb_slot_get(be, alloc) == (tb_slot_fn)be->dev_alloc,
              "tb_slot_get(dev_alloc) is not be->dev_alloc");
    int ops = 0;
    for (size_t i = 0; i < tb_optable_count; i++)
        ops += tb_optable[i].kind == TB_SLOT_OP;
    printf("optable: %zu slots of struct tb_backend, %d ops, %zu runtime\n", tb_optable_count, ops,
           tb_optable_count - (size_t)ops);
}

/* ---- 2. coverage ---- */

static void test_coverage(void)
{
    int problems = tb_selfcheck_coverage(stdout);
    CHECK(problems == 0, "%d slots of lib/backend/backend.h without a selfcheck case (listed above)",
          problems);
    printf("coverage: %d problems\n", problems);
}

/* ---- 3. the walk on the CPU fast paths ---- */

/* Runs the walk with its lines in a memory buffer (echoed to stdout). */
static char *walk(tb_backend *be, const char *filter, tb_selfcheck_counts *counts)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        CHECK(0, "open_memstream failed");
        return NULL;
    }
    tb_selfcheck_opts o = {.out = f, .filter = filter};
    int rc = tb_selfcheck_run(be, &o, counts);
    fclose(f);
    CHECK(rc == TB_OK, "tb_selfcheck_run returned %s: %s", tb_err_name(rc), tb_error_message());
    fputs(text, stdout);
    return text;
}

/* Every toggle case of lib/selfcheck/toggles.c and what the CPU backend
 * makes of it: a PASS line (the toggle ran on the CPU against its fp32
 * equivalent on another CPU backend) or n/a with the reason the trainer
 * gives for a toggle only a GPU has. */
typedef struct toggle_line {
    const char *name;
    const char *na_why; /* NULL: must pass on the CPU */
} toggle_line;

#define NA_GRAPHS "--cuda-graphs: n/a on the CPU backend: no kernel launches to capture"
#define NA_FP16 "--amp=fp16 is not available on the cpu backend"

static const toggle_line toggle_lines[] = {
    {"cuda-graphs (vs launches)", NA_GRAPHS},
    {"cuda-graphs amp=fp16 (vs fp32 launches)", NA_FP16},
    {"cuda-graphs accum-steps=2", NA_GRAPHS},
    {"tensors-on-device", "--tensors-on-device: n/a on the CPU backend: host and device memory "
                          "are the same"},
    {"augment-on-device (vs the loader's)", "--augment-on-device: n/a on the CPU backend"},
    {"amp=bf16 (vs fp32)", NULL},
    {"amp=fp16 loss scaling (vs fp32)", NA_FP16},
    {"tf32 (vs fp32)", NULL},
    {"transformer tf32 (test loss, vs fp32)", NULL},
    {"wide_cnn channels-last (vs NCHW)", NULL},
    {"conv-autotune (vs default algorithms)", NULL},
    {"transformer fused-gelu (test loss, vs unfused)", NULL},
    {"transformer fused-layernorm (test loss, vs unfused)", NULL},
    {"transformer fused-attention (test loss, vs manual)", NULL},
    {"optimizer=adamw", NULL},
    {"optimizer=adamw fused-optimizer (vs unfused)", NULL},
    {"grads-to-none=false (vs none)", NULL},
    {"transformer accum-steps=2 batch 16 (vs batch 32)", NULL},
    {"optimizer=sgd first step (test loss)", NULL},
    {"optimizer=lars first step (test loss)", NULL},
    {"optimizer=novograd first step (test loss)", NULL},
    {"workers=2 (vs 0)", NULL},
    {"conv-bias=false", NULL},
    {"wide_cnn dropout=0.2", NULL},
    {"preallocation, partial last batch", "preallocation: n/a on the cpu backend: "
                                          "mem_set_mode is NULL there"},
    {"retry after an out-of-memory", NULL},
    {"DDP one rank, NCCL on CUDA / MPI on the CPU (vs plain backward)", NULL},
    {"resnet50 32x32 one step (test loss)", NULL},
    {"resnet50 32x32 channels-last one step (test loss, vs NCHW)", NULL},
    {"gpt2 1 layer", NULL},
    {"gpt2 1 layer fused attention, layernorm, gelu (vs unfused)", NULL},
};

static void check_toggle_lines(const char *text)
{
    int passed = 0, na = 0;
    for (size_t i = 0; i < sizeof toggle_lines / sizeof toggle_lines[0]; i++) {
        const toggle_line *t = &toggle_lines[i];
        char want[256];
        if (t->na_why)
            snprintf(want, sizeof want, "n/a  step %s: %s", t->name, t->na_why);
        else
            snprintf(want, sizeof want, "PASS step %s dtype=", t->name);
        int found = text && strstr(text, want);
        CHECK(found, "toggle case \"%s\": no line \"%s\"", t->name, want);
        passed += found && !t->na_why;
        na += found && t->na_why;
    }
    printf("toggle cases: %d passed on the CPU, %d n/a with the CPU's reason\n", passed, na);
}

static void test_cpu_walk(tb_backend *be)
{
    tb_selfcheck_counts c;
    char *text = walk(be, NULL, &c);
    CHECK(c.failed == 0, "the CPU fast paths failed %d checks against the reference", c.failed);
    CHECK(c.passed >= 100, "only %d checks passed", c.passed);
    CHECK(text && strstr(text, "n/a  mem_empty_cache: NULL on cpu"),
          "mem_empty_cache (NULL on the CPU, allowed) not reported n/a");
    CHECK(text && strstr(text, "PASS conv_fwd NCHW 2x3x7x7 k5 3x3 s1 p1 bias algo=default:"),
          "no conv_fwd line for the default algorithm");
    CHECK(text && strstr(text, "n/a  step pin-memory (vs pageable, same backend): --pin-memory: "
                               "n/a on the CPU backend: no copy to a device"),
          "the pin-memory step check is not n/a on the CPU with its reason");
    CHECK(text && strstr(text, "n/a  step pin-memory non-blocking (vs pageable, same backend): "
                               "--pin-memory: n/a on the CPU backend"),
          "the pin-memory non-blocking step check is not n/a on the CPU with its reason");
    /* parking between steps is never parking, to the bit (the step harness
     * parks arms between their repetitions); with graphs only a GPU says */
    CHECK(text && strstr(text, "PASS step parked between steps (vs never parked, same backend) "
                               "dtype=fp32"),
          "parking between steps did not train as never parking on the CPU");
    CHECK(text && strstr(text, "n/a  step cuda-graphs parked between steps (vs never parked, "
                               "same backend): " NA_GRAPHS),
          "the parked cuda-graphs step check is not n/a on the CPU with its reason");
    check_toggle_lines(text);
    char want[64];
    snprintf(want, sizeof want, "selfcheck: %d passed, %d failed, %d n/a\n", c.passed, c.failed,
             c.na);
    CHECK(text && strstr(text, want), "summary line missing or wrong (want \"%s\")", want);
    printf("cpu walk: %d passed, %d failed, %d n/a\n", c.passed, c.failed, c.na);
    free(text);
}

/* ---- 4. broken ops ---- */

static int (*real_conv_fwd)(tb_backend *, const tb_conv_desc *, int, const float *,
                            const float *, const float *, float *);
static int (*real_dropout_fwd)(tb_backend *, float, uint64_t, uint64_t, const float *, float *,
                               uint8_t *, size_t);

static int leaky_relu(tb_backend *be, const float *x, float *y, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0.01f * x[i];
    return TB_OK;
}

static int relu_skips_last(tb_backend *be, const float *x, float *y, size_t n)
{
    (void)be;
    for (size_t i = 0; i + 1 < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0.0f;
    return TB_OK;
}

static int conv_fwd_off(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                        const float *w, const float *bias, float *y)
{
    int rc = real_conv_fwd(be, d, algo, x, w, bias, y);
    y[3] *= 1.001f; /* 1e-3 relative: 100x the conv tolerance */
    return rc;
}

static int dropout_flips_bit(tb_backend *be, float p, uint64_t seed, uint64_t offset,
                             const float *x, float *y, uint8_t *mask, size_t n)
{
    int rc = real_dropout_fwd(be, p, seed, offset, x, y, mask, n);
    mask[n / 2] ^= 1;
    return rc;
}

static int (*real_gelu_fwd)(tb_backend *, tb_gelu_variant, const float *, float *, size_t);
static int (*real_gelu_bwd)(tb_backend *, tb_gelu_variant, const float *, const float *, float *,
                            size_t);
static int (*real_xent_lse_fwd)(tb_backend *, const float *, const int32_t *, int, int, float *,
                                float *);
static int (*real_xent_lse_bwd)(tb_backend *, const float *, const float *, const int32_t *, int,
                                int, float, float *);

/* The tanh slots running the erf form: the two differ by up to ~2e-4. */
static int gelu_tanh_is_erf_fwd(tb_backend *be, tb_gelu_variant v, const float *x, float *y,
                                size_t n)
{
    return real_gelu_fwd(be, v, x, y, n);
}

static int gelu_tanh_is_erf_bwd(tb_backend *be, tb_gelu_variant v, const float *x,
                                const float *dy, float *dx, size_t n)
{
    return real_gelu_bwd(be, v, x, dy, dx, n);
}

static int xent_lse_fwd_loss_off(tb_backend *be, const float *logits, const int32_t *labels,
                                 int rows, int classes, float *loss, float *lse)
{
    int rc = real_xent_lse_fwd(be, logits, labels, rows, classes, loss, lse);
    loss[rows / 2] *= 1.0001f;
    return rc;
}

/* The CPU backend's pointers are host memory: a shifted copy of lse. */
static int xent_lse_bwd_lse_off(tb_backend *be, const float *logits, const float *lse,
                                const int32_t *labels, int rows, int classes, float scale,
                                float *dlogits)
{
    float *off = malloc((size_t)rows * sizeof *off);
    if (!off)
        return TB_FAIL(TB_ERR_NOMEM, "xent_lse_bwd_lse_off");
    for (int r = 0; r < rows; r++)
        off[r] = lse[r] + 1e-3f;
    int rc = real_xent_lse_bwd(be, logits, off, labels, rows, classes, scale, dlogits);
    free(off);
    return rc;
}

/* Right out of place; in place, the label's entry is recomputed from a
 * logit the row's pass has already overwritten. */
static int xent_lse_bwd_not_in_place(tb_backend *be, const float *logits, const float *lse,
                                     const int32_t *labels, int rows, int classes, float scale,
                                     float *dlogits)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * classes;
        float *d = dlogits + (size_t)r * classes;
        for (int j = 0; j < classes; j++)
            d[j] = scale * expf(z[j] - lse[r]);
        d[labels[r]] = scale * (expf(z[labels[r]] - lse[r]) - 1.0f);
    }
    return TB_OK;
}

static int (*real_embedding_fwd)(tb_backend *, const int32_t *, const float *, const float *,
                                 int, int, int, int, float *);
static int (*real_embedding_bwd)(tb_backend *, const int32_t *, const float *, int, int, int,
                                 int, float *, int, float *, int);

static int embedding_fwd_ulp_off(tb_backend *be, const int32_t *tokens, const float *wte,
                                 const float *wpe, int rows, int seq, int d, int vocab, float *y)
{
    int rc = real_embedding_fwd(be, tokens, wte, wpe, rows, seq, d, vocab, y);
    size_t last = (size_t)rows * d - 1;
    y[last] = nextafterf(y[last], INFINITY); /* one ulp: TOL_EXACT catches it */
    return rc;
}

static int embedding_bwd_writes_wte(tb_backend *be, const int32_t *tokens, const float *dy,
                                    int rows, int seq, int d, int vocab, float *dwte,
                                    int accumulate_wte, float *dwpe, int accumulate_wpe)
{
    (void)accumulate_wte;
    return real_embedding_bwd(be, tokens, dy, rows, seq, d, vocab, dwte, 0, dwpe,
                              accumulate_wpe);
}

static int add_unsupported(tb_backend *be, const float *a, const float *b, float *y, size_t n)
{
    (void)be, (void)a, (void)b, (void)y, (void)n;
    return TB_FAIL(TB_ERR_UNSUPPORTED, "add: not on this backend (deliberately broken)");
}

/* Runs the walk on the checks filter picks with be's copy whose slot is
 * f: a FAIL line must start with fail_line (or with fail_line2 when not
 * NULL). */
static void expect_fail_line(tb_backend *be, const char *slot, tb_slot_fn f, const char *filter,
                             const char *fail_line, const char *fail_line2, const char *what)
{
    tb_backend broken = *be; /* shares ctx; never destroyed */
    const tb_slot_info *s = tb_optable_find(slot);
    if (!s) {
        CHECK(0, "no slot %s", slot);
        return;
    }
    tb_slot_set(&broken, s, f);
    tb_selfcheck_counts c;
    char *text = walk(&broken, filter, &c);
    int named = text && (strstr(text, fail_line) || (fail_line2 && strstr(text, fail_line2)));
    CHECK(c.failed > 0 && named, "%s (%s) was not caught: %d failed", slot, what, c.failed);
    printf("broken %s (%s): caught, %d of %d checks failed\n", slot, what, c.failed,
           c.failed + c.passed);
    free(text);
}

/* Runs the walk on slot only with be's copy whose slot is f: it must fail. */
static void expect_caught(tb_backend *be, const char *slot, tb_slot_fn f, const char *what)
{
    char case_line[64], slot_line[64]; /* "FAIL relu_fwd n=3: ..." or "FAIL bias_add: NULL" */
    snprintf(case_line, sizeof case_line, "FAIL %s ", slot);
    snprintf(slot_line, sizeof slot_line, "FAIL %s:", slot);
    expect_fail_line(be, slot, f, slot, case_line, slot_line, what);
}

static int (*real_gemm)(tb_backend *, int, int, int, int, int, float, const float *, int,
                        const float *, int, float, float *, int, tb_math);

/* A GEMM that writes C when asked to add to it: gradient accumulation over
 * micro-batches keeps the last micro-batch's weight gradients only. */
static int gemm_drops_beta(tb_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc, tb_math math)
{
    (void)beta;
    return real_gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, math);
}

static int (*real_attention_fwd)(tb_backend *, tb_attn_variant, const tb_attn_desc *,
                                 const float *, const float *, const float *, float *, float *);

/* The fused attention masking the future when asked not to (a causal
 * flag taken from the wrong place): the manual variant, which the CPU
 * reference runs, is untouched. */
static int attention_fused_causal(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                                  const float *q, const float *k, const float *v, float *out,
                                  float *saved)
{
    tb_attn_desc as_run = *d;
    if (variant == TB_ATTN_FUSED)
        as_run.causal = 1;
    return real_attention_fwd(be, variant, &as_run, q, k, v, out, saved);
}

/* A toggle case with a broken op under it: the walk of that case alone
 * must fail it (the CPU reference it compares with is a fresh backend). */
static void test_broken_toggle(tb_backend *be)
{
    real_gemm = be->gemm;
    expect_fail_line(be, "gemm", (tb_slot_fn)gemm_drops_beta, "transformer accum-steps=2",
                     "FAIL step transformer accum-steps=2 batch 16 (vs batch 32): ", NULL,
                     "accumulation overwrites: the accum-steps case");
    real_attention_fwd = be->attention_fwd;
    expect_fail_line(be, "attention_fwd", (tb_slot_fn)attention_fused_causal,
                     "transformer fused-attention",
                     "FAIL step transformer fused-attention (test loss, vs manual): ", NULL,
                     "fused variant causal when asked not to: the fused-attention case");
}

/* --tensors-on-device and --augment-on-device on the CPU: with the host
 * stand-ins for the slots the CPU lacks (labels_u8_to_i32, augment_u8, NULL
 * there), the trainer's device-data paths run and both cases pass against
 * the CPU's host-made labels and loader augmentation. */
static void test_device_data_paths(tb_backend *be)
{
    tb_backend with = *be; /* shares ctx; never destroyed */
    with.labels_u8_to_i32 = tb_selfcheck_host_labels_u8_to_i32;
    with.augment_u8 = tb_selfcheck_host_augment_u8;
    tb_selfcheck_counts c;
    char *text = walk(&with, "on-device", &c);
    CHECK(text && strstr(text, "PASS step tensors-on-device dtype=fp32 ") &&
              strstr(text, "PASS step augment-on-device (vs the loader's) dtype=fp32 ") &&
              c.failed == 0,
          "tensors-on-device / augment-on-device with host stand-ins did not pass");
    free(text);
}

static void test_broken_ops(tb_backend *be)
{
    real_conv_fwd = be->conv_fwd;
    real_dropout_fwd = be->dropout_fwd;
    real_embedding_fwd = be->embedding_fwd;
    real_embedding_bwd = be->embedding_bwd;
    expect_caught(be, "relu_fwd", (tb_slot_fn)leaky_relu, "leaky for negatives");
    expect_caught(be, "relu_fwd", (tb_slot_fn)relu_skips_last, "last element unwritten");
    expect_caught(be, "conv_fwd", (tb_slot_fn)conv_fwd_off, "one element off by 1e-3");
    expect_caught(be, "dropout_fwd", (tb_slot_fn)dropout_flips_bit, "one mask bit flipped");
    expect_caught(be, "bias_add", NULL, "NULL where backend.h does not allow it");
    expect_caught(be, "add", (tb_slot_fn)add_unsupported, "TB_ERR_UNSUPPORTED for fp32");
    expect_caught(be, "embedding_fwd", (tb_slot_fn)embedding_fwd_ulp_off,
                  "last element one ulp off");
    expect_caught(be, "embedding_bwd", (tb_slot_fn)embedding_bwd_writes_wte,
                  "dwte written when asked to add (a tied head's gradient lost)");
    real_gelu_fwd = be->gelu_fwd;
    real_gelu_bwd = be->gelu_bwd;
    real_xent_lse_fwd = be->xent_lse_fwd;
    real_xent_lse_bwd = be->xent_lse_bwd;
    expect_caught(be, "gelu_tanh_fwd", (tb_slot_fn)gelu_tanh_is_erf_fwd, "the erf form");
    expect_caught(be, "gelu_tanh_bwd", (tb_slot_fn)gelu_tanh_is_erf_bwd, "the erf form");
    expect_caught(be, "xent_lse_fwd", (tb_slot_fn)xent_lse_fwd_loss_off, "a loss off by 1e-4");
    expect_caught(be, "xent_lse_bwd", (tb_slot_fn)xent_lse_bwd_lse_off, "lse off by 1e-3");
    expect_caught(be, "xent_lse_bwd", (tb_slot_fn)xent_lse_bwd_not_in_place,
                  "wrong in place only");
}

/* ---- the binary (bench:selfcheck_binary_test) ---- */

/* Runs cmd; returns its exit status (-1 if it did not exit) and its stdout. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = 0, got;
    while (len + 1 < cap && (got = fread(out + len, 1, cap - 1 - len, p)) > 0)
        len += got;
    out[len] = 0;
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    printf("$ %s  -> exit %d\n", cmd, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int test_binary(const char *bin)
{
    static char out[1 << 20];
    char cmd[4096];
    const char *why = NULL;
    int gpus = tb_cuda_device_count(&why);

    snprintf(cmd, sizeof cmd, "%s", bin);
    int st = run(cmd, out, sizeof out);
    if (gpus == 0) {
        CHECK(st == 0, "default run without a GPU exited %d, want 0", st);
        CHECK(strstr(out, "selfcheck: no CUDA device (") && strstr(out, "); nothing to check\n"),
              "no 'nothing to check' line without a GPU; got:\n%s", out);
    } else {
        CHECK(st == 0 && strstr(out, "selfcheck: ") && strstr(out, " 0 failed, "),
              "default run on the GPU: exit %d; got:\n%s", st, out);
    }

    snprintf(cmd, sizeof cmd, "%s --device=auto 2>&1", bin);
    st = run(cmd, out, sizeof out);
    CHECK(st == 0, "--device=auto exited %d, want 0; output:\n%s", st, out);
    CHECK(strstr(out, " 0 failed, ") && strstr(out, "selfcheck: "),
          "--device=auto: no summary line with 0 failed; output:\n%s", out);
    if (gpus == 0)
        CHECK(strstr(out, "using the CPU backend"), "--device=auto did not say it fell back");
    const char *sum = strstr(out, "selfcheck: ");
    while (sum && strstr(sum + 1, "selfcheck: "))
        sum = strstr(sum + 1, "selfcheck: ");
    if (sum)
        printf("  %.*s", (int)strcspn(sum, "\n") + 1, sum);

    snprintf(cmd, sizeof cmd, "%s --help", bin);
    st = run(cmd, out, sizeof out);
    CHECK(st == 0 && strstr(out, "--device"), "--help exited %d or lists no --device", st);

    snprintf(cmd, sizeof cmd, "%s --device=tpu 2>&1", bin);
    st = run(cmd, out, sizeof out);
    CHECK(st == 2 && strstr(out, "unknown device"), "--device=tpu exited %d, want 2:\n%s", st,
          out);

    /* an --only that matches nothing checked nothing: not a pass */
    snprintf(cmd, sizeof cmd, "%s --device=cpu --only=zzz_no_such_slot 2>&1", bin);
    st = run(cmd, out, sizeof out);
    CHECK(st == 2 && strstr(out, "matches no slot"), "--only matching nothing exited %d, want "
          "2:\n%s", st, out);
    return failures;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--selfcheck-binary=", 19) == 0) {
            int f = test_binary(argv[i] + 19);
            printf("%s\n", f ? "FAILED" : "PASSED");
            return f ? 1 : 0;
        }

    tb_backend *be = NULL;
    int rc = tb_backend_cpu_create(2, &be);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    test_optable(be);
    test_coverage();
    test_cpu_walk(be);
    test_broken_ops(be);
    test_broken_toggle(be);
    test_device_data_paths(be);
    tb_backend_close(be);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
