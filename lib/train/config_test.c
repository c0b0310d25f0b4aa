/*
 * config_test.c - the configuration table: tb_config_defaults gives the
 * defaults config.h documents, every flag parses into its field, and
 * tb_config_describe names every flag of the table with its value. The big
 * models: tb_config_validate resolves each model's own batch, sizes,
 * conv bias and GELU (twice gives the same), keeps --conv-bias's four
 * spellings and auto, and refuses with a message naming the flag: size flags
 * on other models or out of range, resnet50/gpt2 on Fashion-MNIST, image
 * toggles on gpt2, --conv-bias on gpt2, --gelu on resnet50.
 *
 *   bazel test //lib/train:config_test
 */
#include "lib/train/config.h"

#include <math.h>
#include <string.h>

#include "lib/core/testing.h"

static void check_defaults(void)
{
    tb_config c;
    tb_config_defaults(&c);
    CHECK(strcmp(c.device, "auto") == 0 && c.threads == 0 && c.epochs == 1 && c.seed == 0);
    CHECK(c.dataset == TB_DATA_FASHION_MNIST && c.data_dir == NULL && c.data_limit == 0);
    CHECK(c.batch_size == 0 && c.workers == 0 && c.prefetch_factor == 2 &&
          c.persistent_workers == 0 && c.worker_mode == 0 && c.pin_memory == 0);
    CHECK(c.model == TB_MODEL_SMALL_CNN && c.conv_bias == TB_FLAG_AUTO && c.fused_gelu == 0 &&
          c.dropout == 0.1 && c.gelu == TB_GELU_CHOICE_AUTO);
    CHECK(c.image_size == 0 && c.context == 0 && c.layers == 0 && c.vocab == 0);
    CHECK(c.optimizer == 0 && tb_flag_unset(c.lr) && c.momentum == 0.9 && tb_flag_unset(c.weight_decay) &&
          c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.trust_coef == 0.001);
    CHECK(c.grads_to_none == 1 && c.accum_steps == 1 && c.loss_read_every == 1 &&
          c.val_every == 1 && c.amp_dtype == TB_AMP_OFF && c.trace == NULL &&
          c.cuda_graphs == 0 && c.max_time == 0);
    CHECK_OK(tb_config_validate(&c));
    CHECK(c.batch_size == 256 && c.conv_bias == 1 && c.gelu == TB_GELU_CHOICE_ERF &&
              c.image_size == 0 && c.context == 0,
          "small_cnn resolves to batch 256, bias on (nn.Conv2d), erf GELU: %d %d %d",
          c.batch_size, c.conv_bias, c.gelu);
}

/* TF32 as PyTorch defaults it: GEMMs off (matmul.allow_tf32), cuDNN's
 * convolutions on (cudnn.allow_tf32); on the CPU (no cuDNN) convolutions
 * follow --tf32; --cudnn-tf32 overrides either. */
static void check_conv_tf32(void)
{
    tb_config c;
    tb_config_defaults(&c);
    CHECK(c.tf32 == 0 && c.cudnn_tf32 == TB_FLAG_AUTO, "defaults: tf32 off, cudnn-tf32 auto");
    CHECK(tb_config_conv_tf32(&c, "cuda") == 1 && tb_config_conv_tf32(&c, "cpu") == 0,
          "auto: on for cuDNN, off on the CPU");
    c.tf32 = 1;
    CHECK(tb_config_conv_tf32(&c, "cuda") == 1 && tb_config_conv_tf32(&c, "cpu") == 1,
          "--tf32: the CPU's convolutions follow");
    c.cudnn_tf32 = 0;
    CHECK(tb_config_conv_tf32(&c, "cuda") == 0 && tb_config_conv_tf32(&c, "cpu") == 0,
          "--cudnn-tf32=false: fp32 convolutions everywhere");
    c.tf32 = 0;
    c.cudnn_tf32 = 1;
    CHECK(tb_config_conv_tf32(&c, "cpu") == 1, "--cudnn-tf32=true on the CPU too");
    c.cudnn_tf32 = 7;
    CHECK(tb_config_validate(&c) == TB_ERR_INVALID, "--cudnn-tf32=7 refused");
    tb_error_clear();
}

/* Each flag set on a command line lands in its own field. */
static void check_flags_parse(void)
{
    tb_config c;
    tb_config_defaults(&c);
    size_t n;
    const tb_flag *flags = tb_config_flags(&c, &n);
    char *argv[] = {"prog", "--tf32", "--batch-size=7", "--seed=9", "--amp=bf16",
                    "--trace=t.json", "--max-time=2.5", "--no-grads-to-none", NULL};
    int argc = 8, help = 0;
    CHECK_OK(tb_flags_parse(flags, n, &argc, argv, NULL, &help));
    CHECK(c.tf32 == 1 && c.batch_size == 7 && c.seed == 9 && c.amp_dtype == TB_AMP_BF16 &&
          strcmp(c.trace, "t.json") == 0 && c.max_time == 2.5 && c.grads_to_none == 0);
}

static void check_describe(void)
{
    tb_config c;
    tb_config_defaults(&c);
    c.tf32 = 1;
    c.amp_dtype = TB_AMP_FP16;
    char line[TB_CONFIG_DESC_CAP];
    tb_config_describe(&c, line, sizeof line);
    CHECK(strlen(line) + 1 < sizeof line, "the line fits: %zu characters", strlen(line));
    size_t n;
    tb_config scratch;
    const tb_flag *flags = tb_config_flags(&scratch, &n);
    for (size_t i = 0; i < n; i++) {
        char key[80];
        snprintf(key, sizeof key, "%s%s=", i ? " " : "", flags[i].name);
        int found = i ? strstr(line, key) != NULL : strncmp(line, key, strlen(key)) == 0;
        CHECK(found, "--%s is described", flags[i].name);
    }
    CHECK(strstr(line, " tf32=true ") && strstr(line, " amp=fp16 ") &&
          strstr(line, " checkpointing=false ") && strstr(line, " fused-attention=false ") &&
          strstr(line, " cuda-graphs=false"), "%s", line);
    char small[16];
    tb_config_describe(&c, small, sizeof small);
    CHECK(strcmp(small, "device=auto thr") == 0, "cut to the buffer: '%s'", small);
}

/* A config for argv (defaults first), and what tb_config_validate says. */
static int parse_validate(char **argv, int argc, tb_config *c)
{
    tb_config_defaults(c);
    size_t n;
    const tb_flag *flags = tb_config_flags(c, &n);
    int help = 0;
    TB_TRY(tb_flags_parse(flags, n, &argc, argv, NULL, &help));
    return tb_config_validate(c);
}

static void check_big_models(void)
{
    tb_config c;
    char *resnet[] = {"prog", "--model=resnet50", "--dataset=synthetic", NULL};
    CHECK_OK(parse_validate(resnet, 3, &c));
    CHECK(c.image_size == 224 && c.batch_size == tb_config_model_batch(TB_MODEL_RESNET50) &&
              c.conv_bias == 0 && c.gelu == TB_GELU_CHOICE_AUTO && c.context == 0,
          "resnet50: 224, its batch, no conv bias (torchvision): %d %d %d", c.image_size,
          c.batch_size, c.conv_bias);
    CHECK(c.lr == 0.1 * c.batch_size / 256, "resnet50's SGD lr: 0.1 per 256 samples, %g", c.lr);
    CHECK_OK(tb_config_validate(&c)); /* resolved values validate again */
    CHECK(c.image_size == 224 && c.conv_bias == 0, "validating twice changes nothing");

    char *gpt2[] = {"prog", "--model=gpt2", "--dataset=synthetic", NULL};
    CHECK_OK(parse_validate(gpt2, 3, &c));
    CHECK(c.context == 1024 && c.layers == 12 && c.vocab == 50257 && c.image_size == 0 &&
              c.batch_size == tb_config_model_batch(TB_MODEL_GPT2) &&
              c.gelu == TB_GELU_CHOICE_TANH && c.conv_bias == TB_FLAG_AUTO &&
              tb_config_gelu_approx(&c) == TB_GELU_TANH && tb_config_token_model(&c),
          "gpt2: 1024 x 12 x 50257, tanh GELU: %d %d %d %d", c.context, c.layers, c.vocab,
          c.gelu);
    CHECK_OK(tb_config_validate(&c));
    CHECK(tb_config_model_batch(TB_MODEL_GPT2) >= 1 && tb_config_model_batch(TB_MODEL_GPT2) < 256 &&
              tb_config_model_batch(TB_MODEL_RESNET50) < 256 &&
              tb_config_model_batch(TB_MODEL_WIDE_CNN) == 256,
          "per-model batches");

    char *small[] = {"prog", "--model=gpt2", "--dataset=synthetic", "--context=256",
                     "--layers=2", "--vocab=1000", "--batch-size=3", "--gelu=erf", NULL};
    CHECK_OK(parse_validate(small, 8, &c));
    CHECK(c.context == 256 && c.layers == 2 && c.vocab == 1000 && c.batch_size == 3 &&
              tb_config_gelu_approx(&c) == TB_GELU_ERF, "gpt2 sized by flags");

    /* --conv-bias: its four spellings and auto on the models with convolutions */
    const char *spell[] = {"--conv-bias", "--no-conv-bias", "--conv-bias=true",
                           "--conv-bias=false", "--conv-bias=auto"};
    const int want_small[] = {1, 0, 1, 0, 1}, want_resnet[] = {1, 0, 1, 0, 0};
    for (int k = 0; k < 5; k++) {
        char *a1[] = {"prog", (char *)spell[k], NULL};
        CHECK(parse_validate(a1, 2, &c) == TB_OK && c.conv_bias == want_small[k],
              "small_cnn %s: %d", spell[k], c.conv_bias);
        char *a2[] = {"prog", "--model=resnet50", "--dataset=synthetic", (char *)spell[k], NULL};
        CHECK(parse_validate(a2, 4, &c) == TB_OK && c.conv_bias == want_resnet[k],
              "resnet50 %s: %d", spell[k], c.conv_bias);
    }

    /* refusals, each naming its flag */
    struct {
        const char *args[4];
        const char *want;
    } bad[] = {
        {{"--image-size=64"}, "--image-size=64: --model=small_cnn has no image-size"},
        {{"--context=64"}, "--context=64: --model=small_cnn has no context"},
        {{"--model=resnet50", "--dataset=synthetic", "--layers=2"}, "--layers=2"},
        {{"--model=gpt2", "--dataset=synthetic", "--image-size=64"}, "--image-size=64"},
        {{"--model=resnet50", "--dataset=synthetic", "--image-size=16"},
         "--image-size=16: resnet50 takes 32..1024"},
        {{"--model=gpt2", "--dataset=synthetic", "--context=-3"},
         "--context=-3: out of range (expected an integer in 0..8192)"},
        {{"--model=gpt2", "--dataset=synthetic", "--vocab=1"}, "--vocab=1: gpt2 takes 2.."},
        {{"--model=gpt2", "--dataset=synthetic", "--layers=97"}, "--layers=97"},
        {{"--model=resnet50"}, "--model=resnet50 trains on --dataset=synthetic only"},
        {{"--model=gpt2", "--dataset=fashion_mnist"}, "--model=gpt2 trains on --dataset=synthetic"},
        {{"--model=gpt2", "--dataset=synthetic", "--channels-last"}, "--channels-last: n/a on gpt2"},
        {{"--model=gpt2", "--dataset=synthetic", "--augment"}, "--augment: n/a on gpt2"},
        {{"--model=gpt2", "--dataset=synthetic", "--tensors-on-device"},
         "--tensors-on-device: n/a on gpt2"},
        {{"--model=gpt2", "--dataset=synthetic", "--no-conv-bias"},
         "--conv-bias: gpt2 has no convolutions"},
        {{"--model=resnet50", "--dataset=synthetic", "--gelu=tanh"},
         "--gelu=tanh: resnet50 has no GELU"},
        {{"--batch-size=-1"}, "--batch-size=-1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *argv[6] = {"prog"};
        int argc = 1;
        for (int i = 0; i < 4 && bad[k].args[i]; i++)
            argv[argc++] = (char *)bad[k].args[i];
        argv[argc] = NULL;
        int rc = parse_validate(argv, argc, &c);
        CHECK(rc == TB_ERR_INVALID && strstr(tb_error_message(), bad[k].want),
              "case %zu (%s): rc %d, message '%s'", k, bad[k].want, rc, tb_error_message());
        tb_error_clear();
    }
}

/* NaN, infinities and values outside a flag's range: refused naming the
 * flag, whether typed or set by code; "auto" (or nothing) is the recipe. */
static void check_hostile_values(void)
{
    static const struct {
        const char *arg, *want;
    } bad[] = {
        {"--lr=nan", "--lr=nan: not a finite number (expected auto or a finite number > 0)"},
        {"--lr=inf", "--lr=inf: not a finite number"},
        {"--lr=-1e30", "--lr=-1e30: out of range"},
        {"--lr=-1", "--lr=-1: out of range"},
        {"--lr=0", "--lr=0: out of range"},
        {"--momentum=nan", "--momentum=nan: not a finite number (expected a finite number in [0, 1))"},
        {"--momentum=1", "--momentum=1: out of range"},
        {"--weight-decay=-1", "--weight-decay=-1: out of range"},
        {"--threads=-1", "--threads=-1: out of range (expected an integer in 0..4096)"},
        {"--threads=100000", "--threads=100000: out of range"},
        {"--batch-size=100000000", "--batch-size=100000000: out of range"},
        {"--max-time=inf", "--max-time=inf: not a finite number"},
        {"--target-accuracy=1.5", "--target-accuracy=1.5: out of range"},
        {"--dropout=nan", "--dropout=nan: not a finite number"},
        {"--beta2=1", "--beta2=1: out of range"},
        {"--eps=0", "--eps=0: out of range"},
        {"--workers=100000", "--workers=100000: out of range"},
    };
    tb_config c;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *argv[] = {"prog", (char *)bad[k].arg, NULL};
        int rc = parse_validate(argv, 2, &c);
        CHECK(rc == TB_ERR_INVALID && strstr(tb_error_message(), bad[k].want),
              "%s: rc %d, message '%s'", bad[k].arg, rc, tb_error_message());
        tb_error_clear();
    }
    char *recipe[] = {"prog", "--optimizer=adamw", "--lr=auto", "--weight-decay=auto", NULL};
    CHECK_OK(parse_validate(recipe, 4, &c));
    CHECK(c.lr == 0.002 && c.weight_decay == 0.01, "auto is adamw's recipe: %g %g", c.lr,
          c.weight_decay);
    char *given[] = {"prog", "--lr=1e-30", "--weight-decay=0", NULL};
    CHECK_OK(parse_validate(given, 3, &c));
    CHECK(c.lr == 1e-30 && c.weight_decay == 0, "a tiny lr and no decay are kept: %g %g",
          c.lr, c.weight_decay);
    /* a technique filling in the config in code gets the same checks */
    tb_config_defaults(&c);
    c.momentum = NAN;
    CHECK(tb_config_validate(&c) == TB_ERR_INVALID &&
              strstr(tb_error_message(), "--momentum=nan: not a finite number"),
          "momentum NaN set in code: %s", tb_error_message());
    tb_error_clear();
    tb_config_defaults(&c);
    c.lr = -1;
    CHECK(tb_config_validate(&c) == TB_ERR_INVALID && strstr(tb_error_message(), "--lr=-1"),
          "the old -1 sentinel set in code is refused: %s", tb_error_message());
    tb_error_clear();
}

int main(void)
{
    check_defaults();
    check_conv_tf32();
    check_flags_parse();
    check_describe();
    check_big_models();
    check_hostile_values();
    printf("config_test: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
