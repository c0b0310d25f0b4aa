/*
 * workload_test.c - the workloads of lib/train/workload.h:
 *   - each reduced workload's op-family FLOP shares are within
 *     TB_WORKLOAD_SHARE_TOL (3 points) of its full model's, both counted by
 *     lib/nn/flops.c on the built models (flops_test checks those counts
 *     against closed forms);
 *   - tb_workload_full_share holds the full models' shares (to 1e-3);
 *   - the reduced GPT-2 keeps the head's share of the GEMM FLOPs near GPT-2
 *     small's (where the full vocabulary on 2 layers would not);
 *   - labels name the data (synthetic), configurations validate, and the
 *     full size is the models' own;
 *   - the gpu size (the gpu profile) is the real models, ResNet-50 at
 *     224 x 224 and GPT-2 at context 1024 (12 layers, d 768, vocabulary
 *     50,257), at batches 256 and 16, labeled "full".
 *
 * Run: bazel test //lib/train:workload_test
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/nn/nn_testing.h"
#include "lib/train/workload.h"

static int flops_of(tb_backend *be, tb_workload w, tb_workload_size s, tb_config *c, tb_flops *f)
{
    tb_config_defaults(c);
    tb_workload_apply(c, w, s);
    TB_TRY(tb_config_validate(c));
    return tb_workload_flops(c, be, f);
}

static void print_shares(const char *what, const tb_flops *f)
{
    char line[TB_FLOPS_LINE];
    if (tb_flops_format(f, line, sizeof line) == TB_OK)
        printf("  %s: %s\n", what, line);
    printf("  %s shares:", what);
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        printf(" %.6f", tb_flops_share(f, (tb_flop_family)k));
    printf("\n");
}

static int check_workload(tb_backend *be, tb_workload w)
{
    tb_config cr, cf;
    tb_flops fr, ff;
    char what[200], desc[128];
    TB_TRY(flops_of(be, w, TB_WL_REDUCED, &cr, &fr));
    TB_TRY(flops_of(be, w, TB_WL_FULL, &cf, &ff));
    tb_workload_describe(&cr, desc, sizeof desc);
    print_shares(desc, &fr);
    tb_workload_describe(&cf, desc, sizeof desc);
    print_shares(desc, &ff);
    double gap = tb_workload_share_gap(&fr, &ff);
    snprintf(what, sizeof what, "%s reduced: every family's FLOP share within %.2f of the full "
             "model's (largest gap %.4f)", tb_workload_model_name(w), TB_WORKLOAD_SHARE_TOL, gap);
    CHECK_WHAT(gap <= TB_WORKLOAD_SHARE_TOL, what);
    for (int k = 0; k < TB_FLOP_FAMILIES; k++) {
        double got = tb_workload_full_share(w, (tb_flop_family)k);
        double want = tb_flops_share(&ff, (tb_flop_family)k);
        snprintf(what, sizeof what, "%s full share of %s: table %.4f, counted %.4f",
                 tb_workload_model_name(w), tb_flops_family_name((tb_flop_family)k), got, want);
        CHECK_WHAT(fabs(got - want) <= 1e-3, what);
    }
    CHECK(cf.batch_size == tb_config_model_batch(cf.model), "full size: the model's own batch");
    return TB_OK;
}

/* The full vocabulary on the reduced GPT-2 would break the shares: the
 * test's own witness that shrinking the vocabulary is what keeps them. */
static int check_vocab_matters(tb_backend *be)
{
    tb_config c;
    tb_flops fr, ff, fv;
    TB_TRY(flops_of(be, TB_WL_GPT2, TB_WL_REDUCED, &c, &fr));
    c.vocab = 50257;
    TB_TRY(tb_workload_flops(&c, be, &fv));
    TB_TRY(flops_of(be, TB_WL_GPT2, TB_WL_FULL, &c, &ff));
    print_shares("reduced gpt2 with the full vocabulary", &fv);
    CHECK(tb_workload_share_gap(&fv, &ff) > TB_WORKLOAD_SHARE_TOL,
          "the reduced gpt2 with 50,257 tokens is outside the tolerance");
    return TB_OK;
}

static void check_labels(void)
{
    char buf[64];
    tb_workload_label(TB_WL_RESNET50, TB_WL_REDUCED, buf, sizeof buf);
    CHECK(strcmp(buf, "resnet50-reduced-synthetic") == 0, "resnet50 label");
    tb_workload_label(TB_WL_GPT2, TB_WL_FULL, buf, sizeof buf);
    CHECK(strcmp(buf, "gpt2-full-synthetic") == 0, "gpt2 label");
    tb_workload_label(TB_WL_SMALL_CNN, TB_WL_FULL, buf, sizeof buf);
    CHECK(strcmp(buf, "small_cnn-fashion_mnist") == 0, "small CNN label");
    tb_config c;
    tb_config_defaults(&c);
    c.batch_size = 32;
    tb_workload_apply(&c, TB_WL_SMALL_CNN, TB_WL_REDUCED);
    CHECK(c.model == TB_MODEL_SMALL_CNN && c.batch_size == 32 && c.dataset == TB_DATA_FASHION_MNIST,
          "the small CNN workload leaves the configuration alone");
}

static void check_gpu_size(void)
{
    tb_config c;
    char buf[64];
    tb_config_defaults(&c);
    tb_workload_apply(&c, TB_WL_RESNET50, TB_WL_GPU);
    CHECK(tb_config_validate(&c) == TB_OK && c.image_size == 224 && c.width == 64 &&
              c.batch_size == 64, "gpu size: resnet50 at 224x224, width 64, batch 64");
    tb_config_defaults(&c);
    tb_workload_apply(&c, TB_WL_GPT2, TB_WL_GPU);
    CHECK(tb_config_validate(&c) == TB_OK && c.context == 1024 && c.layers == 12 &&
              c.width == 768 && c.vocab == 50257 && c.batch_size == 4,
          "gpu size: gpt2 12 layers, d 768, context 1024, vocab 50257, batch 4");
    tb_workload_label(TB_WL_GPT2, TB_WL_GPU, buf, sizeof buf);
    CHECK(strcmp(buf, "gpt2-full-synthetic") == 0, "gpu size labeled full");
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    check_labels();
    check_gpu_size();
    TB_TRY(check_workload(be, TB_WL_RESNET50));
    TB_TRY(check_workload(be, TB_WL_GPT2));
    return check_vocab_matters(be);
}

int main(void)
{
    return tb_test_main_cpu(1, "workload_test: reduced workloads keep the full models' FLOP "
                            "shares", run, NULL);
}
