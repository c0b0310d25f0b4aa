/*
 * config_test.c - the configuration table: tb_config_defaults gives the
 * defaults config.h documents, every flag parses into its field, and
 * tb_config_describe names every flag of the table with its value.
 *
 *   bazel test //lib/train:config_test
 */
#include "lib/train/config.h"

#include <string.h>

#include "lib/core/testing.h"

static void check_defaults(void)
{
    tb_config c;
    tb_config_defaults(&c);
    CHECK(strcmp(c.device, "auto") == 0 && c.threads == 0 && c.epochs == 1 && c.seed == 0);
    CHECK(c.dataset == TB_DATA_FASHION_MNIST && c.data_dir == NULL && c.data_limit == 0);
    CHECK(c.batch_size == 256 && c.workers == 0 && c.prefetch_factor == 2 &&
          c.persistent_workers == 0 && c.worker_mode == 0 && c.pin_memory == 0);
    CHECK(c.model == TB_MODEL_SMALL_CNN && c.conv_bias == 1 && c.fused_gelu == 0 &&
          c.dropout == 0.1);
    CHECK(c.optimizer == 0 && c.lr == -1 && c.momentum == 0.9 && c.weight_decay == -1 &&
          c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.trust_coef == 0.001);
    CHECK(c.grads_to_none == 1 && c.accum_steps == 1 && c.loss_read_every == 1 &&
          c.val_every == 1 && c.amp_dtype == TB_AMP_OFF && c.trace == NULL &&
          c.cuda_graphs == 0 && c.max_time == 0);
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

int main(void)
{
    check_defaults();
    check_flags_parse();
    check_describe();
    printf("config_test: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
