/*
 * waterfall_configs_test.c - every configuration bench:waterfall applies is
 * one the trainer accepts, on each backend's stages and each workload, so
 * that the GPU profile cannot fail where no test machine has a GPU: a stage
 * the workload's model has nothing for (an image toggle on GPT-2, uint8
 * labels on ResNet-50's 1,000 classes) must be an n/a row saying so, never
 * a configuration refused mid-run. Also: "all on" holds exactly the stages
 * that run there, and each n/a row says why.
 *
 *   bazel test //bench:waterfall_configs_test
 */
#define main waterfall_main
#include "bench/techniques/waterfall.c"
#undef main

#include "lib/core/testing.h"

static void check_backend_workload(const char *backend, int wl)
{
    build_masks(backend, wl);
    unsigned runs = stages_on(backend, wl);
    int timed = 0;
    for (int i = 0; i < NSETTINGS; i++) {
        const char *na = na_reason(backend, &settings[i]);
        if (na) {
            CHECK(na[0] != '\0', "%s on %s: %s is n/a without a reason", backend,
                  tb_workload_model_name((tb_workload)wl), settings[i].name);
            continue;
        }
        timed++;
        tb_config c;
        tb_config_defaults(&c);
        if (wl != TB_WL_SMALL_CNN)
            tb_workload_apply(&c, (tb_workload)wl, TB_WL_TINY);
        apply_mask(&c, settings[i].param);
        int rc = tb_config_validate(&c);
        CHECK(rc == TB_OK, "%s on %s: %s refused: %s", backend,
              tb_workload_model_name((tb_workload)wl), settings[i].name, tb_error_message());
        tb_error_clear();
        /* a timed row switches on only stages that run on this workload */
        CHECK(((unsigned)settings[i].param & ~runs) == 0, "%s on %s: %s holds a stage n/a there",
              backend, tb_workload_model_name((tb_workload)wl), settings[i].name);
    }
    /* all on (row NSTAGES + 1) holds every stage that runs there */
    CHECK((unsigned)settings[NSTAGES + 1].param == runs, "%s on %s: all on is %#x, want %#x",
          backend, tb_workload_model_name((tb_workload)wl), (unsigned)settings[NSTAGES + 1].param,
          runs);
    printf("%s on %s: %d configurations timed, all accepted\n", backend,
           tb_workload_model_name((tb_workload)wl), timed);
}

int main(void)
{
    build_names();
    static const char *const backends[2] = {"cpu", "cuda"};
    for (int b = 0; b < 2; b++)
        for (int wl = 0; wl < TB_WORKLOADS; wl++)
            check_backend_workload(backends[b], wl);
    /* GPT-2 on CUDA: no image toggle is switched on anywhere */
    build_masks("cuda", TB_WL_GPT2);
    for (int k = 0; k < NSTAGES; k++)
        if (!strcmp(stages[k].name, "tensors_on_device") ||
            !strcmp(stages[k].name, "augment_on_device") ||
            !strcmp(stages[k].name, "channels last"))
            CHECK(!(stages_on("cuda", TB_WL_GPT2) >> k & 1), "GPT-2 on CUDA runs %s",
                  stages[k].name);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
