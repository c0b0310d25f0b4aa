/*
 * device_toggles_test.c - the device-side toggles on the CPU backend.
 * Each of --tensors-on-device, --augment-on-device, --cuda-graphs,
 * --pin-memory and --non-blocking is
 * parsed from a command line through tb_config_flags (so it is in the flag
 * table), passes tb_config_validate, and is refused at trainer creation with
 * TB_ERR_UNSUPPORTED and its reason ("n/a on the CPU backend: ..."), the
 * status bench programs turn into their exit code (tb_exit_code). The CUDA
 * paths (lib/train/train_device.c, lib/backend/cuda/graph.c, kernels/augment.cu,
 * lib/backend/cuda/staging.c) cannot run here: bench:selfcheck checks their slots,
 * and pinned vs pageable training, on a GPU. Also: the two staging flags
 * default off (PyTorch's pin_memory=False, non_blocking=False), and with
 * them off the CPU trainer still trains (no staging on the CPU); and
 * tb_staging_to_fixed (--cuda-graphs with a staging) on a pass-through
 * staging.
 *
 * Run: bazel test //lib/train:device_toggles_test
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/backend/staging.h"
#include "lib/train/train.h"
#include "lib/core/testing.h"

typedef struct refusal {
    const char *flag;
    const char *why;
} refusal;

static const refusal refusals[] = {
    {"--tensors-on-device", "n/a on the CPU backend: host and device memory are the same"},
    {"--augment-on-device", "n/a on the CPU backend: the CPU is the device: augmentation "
                            "already runs where the model runs"},
    {"--cuda-graphs", "n/a on the CPU backend: no kernel launches to capture"},
    {"--pin-memory", "n/a on the CPU backend: no copy to a device: batches are already where "
                     "the kernels read them"},
    {"--non-blocking", "n/a on the CPU backend: no copy to a device: batches are already where "
                       "the kernels read them"},
};

static void test_refusal(tb_backend *be, const tb_dataset *train, const tb_dataset *test,
                         const refusal *r)
{
    tb_config c;
    tb_config_defaults(&c);
    c.device = "cpu";
    c.dataset = TB_DATA_SYNTHETIC;
    c.batch_size = 32;
    char prog[] = "device_toggles_test", flag[64];
    snprintf(flag, sizeof flag, "%s", r->flag);
    char *argv[] = {prog, flag, NULL};
    int argc = 2, help = 0;
    size_t n;
    const tb_flag *flags = tb_config_flags(&c, &n);
    char what[160];
    printf("%s\n", r->flag);
    snprintf(what, sizeof what, "%s parses (it is in the config flag table)", r->flag);
    CHECK_WHAT(tb_flags_parse(flags, n, &argc, argv, NULL, &help) == TB_OK, what);
    CHECK_WHAT(tb_config_validate(&c) == TB_OK, "tb_config_validate accepts it (no \"not implemented\")");
    tb_error_clear();
    tb_trainer *t = NULL;
    int rc = tb_trainer_create_with_data(&c, be, train, test, &t);
    snprintf(what, sizeof what, "tb_trainer_create: %s (want TB_ERR_UNSUPPORTED)", tb_err_name(rc));
    CHECK_WHAT(rc == TB_ERR_UNSUPPORTED && t == NULL, what);
    const char *msg = tb_error_message();
    printf("    message: %s\n", msg);
    CHECK_WHAT(strstr(msg, r->flag) != NULL && strstr(msg, r->why) != NULL,
          "the message names the flag and the reason");
    CHECK_WHAT(tb_exit_code(rc) != 0, "a bench program exits non-zero with it");
    tb_error_clear();
    tb_trainer_destroy(t);
}

/* Both flags off (the defaults): the CPU trainer builds and takes a step,
 * the model reading the batch buffers themselves. */
static void test_staging_off(tb_backend *be, const tb_dataset *train, const tb_dataset *test)
{
    tb_config c;
    tb_config_defaults(&c);
    printf("--pin-memory / --non-blocking off\n");
    CHECK_WHAT(!c.pin_memory && !c.non_blocking, "both default off (PyTorch's defaults)");
    c.device = "cpu";
    c.dataset = TB_DATA_SYNTHETIC;
    c.batch_size = 32;
    CHECK_WHAT(tb_config_validate(&c) == TB_OK, "tb_config_validate");
    tb_trainer *t = NULL;
    float loss = 0;
    int rc = tb_trainer_create_with_data(&c, be, train, test, &t);
    CHECK_WHAT(rc == TB_OK && t && !t->staging, "tb_trainer_create: no staging on the CPU");
    if (rc == TB_OK) {
        rc = tb_trainer_step(t, &loss);
        CHECK_WHAT(rc == TB_OK && isfinite(loss) && loss > 0, "a step trains (finite, positive loss)");
        CHECK_WHAT(t->x_in == &t->x && t->labels_in == t->labels,
              "the model read the trainer's own batch buffers");
    }
    tb_error_clear();
    tb_trainer_destroy(t);
}

/* tb_staging_to_fixed where the staging passes through (the CPU): the
 * parts asked for are copied into their fixed buffers and dev points there;
 * a part without a fixed buffer keeps its pointer. On CUDA it is the
 * trainer's --cuda-graphs path with a staging (unverified here). */
static void test_staging_to_fixed(tb_backend *be)
{
    printf("tb_staging_to_fixed (pass-through)\n");
    tb_staging *st = NULL;
    tb_staging_cfg sc = {0};
    float img[5] = {1.5f, -2, 3, 4.25f, 5}, img_fixed[5] = {0};
    int32_t lab[3] = {7, 1, 9}, lab_fixed[3] = {0};
    const void *host[2] = {img, lab};
    size_t bytes[2] = {sizeof img, sizeof lab};
    void *dev[2] = {0}, *fixed[2] = {img_fixed, NULL};
    int ok = tb_staging_create(be, &sc, &st) == TB_OK &&
             tb_staging_put(st, 2, host, bytes, dev) == TB_OK;
    CHECK_WHAT(ok && dev[0] == img && dev[1] == lab, "put passes the host pointers through");
    ok = ok && tb_staging_to_fixed(st, 2, dev, fixed, bytes) == TB_OK;
    CHECK_WHAT(ok && dev[0] == img_fixed && !memcmp(img_fixed, img, sizeof img),
          "a part with a fixed buffer is copied there, dev points to it");
    CHECK_WHAT(ok && dev[1] == lab && lab_fixed[0] == 0, "a part without one keeps its pointer");
    fixed[1] = lab_fixed;
    ok = ok && tb_staging_to_fixed(st, 2, dev, fixed, bytes) == TB_OK;
    CHECK_WHAT(ok && dev[1] == lab_fixed && !memcmp(lab_fixed, lab, sizeof lab),
          "called again: the second part too; the first (already there) is left alone");
    CHECK_WHAT(tb_staging_to_fixed(st, 0, dev, fixed, bytes) == TB_ERR_INVALID,
          "0 parts: TB_ERR_INVALID");
    tb_error_clear();
    CHECK_WHAT(tb_staging_destroy(st) == TB_OK, "destroy");
}

int main(void)
{
    tb_test_verbose = 1;
    tb_backend *be;
    tb_dataset *train = NULL, *test = NULL;
    tb_synthetic_cfg sc = {.n = 64, .c = 1, .h = 28, .w = 28, .num_classes = 10, .seed = 1,
                           .noise = -1, .split = TB_SPLIT_TRAIN};
    if (tb_backend_open(TB_DEVICE_CPU, 0, 1, &be) != TB_OK ||
        tb_dataset_synthetic_create(&sc, &train) != TB_OK)
        return tb_error_print(stderr), 1;
    sc.split = TB_SPLIT_TEST;
    if (tb_dataset_synthetic_create(&sc, &test) != TB_OK)
        return tb_error_print(stderr), 1;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        test_refusal(be, train, test, &refusals[i]);
    test_staging_off(be, train, test);
    test_staging_to_fixed(be);
    tb_dataset_free(train);
    tb_dataset_free(test);
    tb_backend_close(be);
    return tb_test_exit(TB_OK);
}
