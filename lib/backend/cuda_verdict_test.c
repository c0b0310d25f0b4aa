/*
 * cuda_verdict_test.c - the CUDA probe's decision on simulated readings of
 * machines this one is not: no driver, a driver too old for the runtime
 * (R570 under CUDA 13), no device, a GPU below sm_80, other errors. Each gives
 * its verdict and exactly one line naming the cause and what to do; odd
 * readings (tiny buffers, negative versions) never crash.
 *
 * Run: bazel test //lib/backend:cuda_verdict_test
 */
#include <string.h>

#include "lib/backend/cuda_verdict.h"
#include "lib/core/testing.h"

static int one_line(const char *s) { return s[0] && !strchr(s, '\n'); }

static void check_machine(tb_cuda_probe in, tb_cuda_verdict want, const char *must1,
                          const char *must2)
{
    char why[512];
    tb_cuda_verdict v = tb_cuda_verdict_machine(&in, why, sizeof why);

    CHECK(v == want, "error %d, driver %d, runtime %d: verdict %d (want %d): \"%s\"",
          in.count_error, in.driver_version, in.runtime_version, (int)v, (int)want, why);
    if (want == TB_CUDA_USABLE) {
        CHECK(why[0] == '\0', "usable: no reason written (got \"%s\")", why);
        return;
    }
    CHECK(one_line(why), "one line: \"%s\"", why);
    CHECK(strstr(why, must1) != NULL, "\"%s\" says \"%s\"", why, must1);
    CHECK(strstr(why, must2) != NULL, "\"%s\" says \"%s\"", why, must2);
}

static void check_driver_cases(void)
{
    /* No libcuda at all: what this machine reports. */
    check_machine((tb_cuda_probe){35, 0, 0, 13000, NULL}, TB_CUDA_NO_DRIVER,
                  "no NVIDIA driver", "R580");
    /* R570 (CUDA 12.8) under a CUDA 13.0 runtime: the same error 35. */
    check_machine((tb_cuda_probe){35, 0, 12080, 13000, NULL}, TB_CUDA_DRIVER_TOO_OLD,
                  "supports CUDA up to 12.8", "R580 or newer");
    check_machine((tb_cuda_probe){35, 0, 11040, 12090, NULL}, TB_CUDA_DRIVER_TOO_OLD,
                  "this build's runtime is CUDA 12.9", "R525 or newer");
    /* A runtime the table does not know still gets advice. */
    check_machine((tb_cuda_probe){35, 0, 13000, 14000, NULL}, TB_CUDA_DRIVER_TOO_OLD,
                  "CUDA 14.0", "driver one for CUDA 14.0 or newer");
}

static void check_device_cases(void)
{
    check_machine((tb_cuda_probe){0, 1, 13000, 13000, NULL}, TB_CUDA_USABLE, "", "");
    check_machine((tb_cuda_probe){0, 8, 13020, 13000, "0,1"}, TB_CUDA_USABLE, "", "");
    check_machine((tb_cuda_probe){100, 0, 13000, 13000, NULL}, TB_CUDA_NO_DEVICE,
                  "no CUDA device", "nvidia-smi");
    check_machine((tb_cuda_probe){0, 0, 13000, 13000, ""}, TB_CUDA_NO_DEVICE,
                  "CUDA_VISIBLE_DEVICES=)", "no GPU");
    check_machine((tb_cuda_probe){100, 0, 13000, 13000, "7"}, TB_CUDA_NO_DEVICE,
                  "CUDA_VISIBLE_DEVICES=7", "no CUDA device");
    check_machine((tb_cuda_probe){999, 0, 13000, 13000, NULL}, TB_CUDA_UNUSABLE,
                  "error 999", "not usable");
}

static void check_cc(int major, int minor, tb_cuda_verdict want)
{
    char why[512];
    tb_cuda_verdict v = tb_cuda_verdict_device(0, "Tesla T4", major, minor, why, sizeof why);

    CHECK(v == want, "cc %d.%d: verdict %d (want %d): \"%s\"", major, minor, (int)v, (int)want,
          why);
    if (want == TB_CUDA_USABLE)
        CHECK(why[0] == '\0', "cc %d.%d usable: no reason", major, minor);
    else
        CHECK(one_line(why) && strstr(why, "compute capability 7.5") && strstr(why, "8.0") &&
                  strstr(why, "Tesla T4") && strstr(why, "--device=cpu"),
              "cc %d.%d: one line naming the GPU, its capability and the minimum: \"%s\"",
              major, minor, why);
}

/* Buffers of 1 byte, NULL names, negative and absurd versions: a line or
 * nothing, never a crash or an overrun. */
static void check_odd_inputs(void)
{
    char tiny[2] = {'x', 'y'};
    tb_cuda_probe odd = {35, -1, -5, -13000, NULL};

    tb_cuda_verdict_machine(&odd, tiny, 1);
    CHECK(tiny[0] == '\0' && tiny[1] == 'y', "a 1-byte buffer gets only the terminator");
    char why[64];
    tb_cuda_probe big = {35, 0, 2000000000, 2000000000, NULL};
    CHECK(tb_cuda_verdict_machine(&big, why, sizeof why) == TB_CUDA_DRIVER_TOO_OLD &&
              strlen(why) == sizeof why - 1, "a long line is cut to the buffer");
    CHECK(tb_cuda_verdict_device(3, NULL, 5, 2, why, sizeof why) == TB_CUDA_CC_TOO_OLD,
          "no name: still a verdict");
    CHECK(tb_cuda_min_driver_branch(0) == 0 && tb_cuda_min_driver_branch(13010) == 580,
          "driver branch table");
}

int main(void)
{
    tb_test_verbose = 1;
    check_driver_cases();
    check_device_cases();
    check_cc(7, 5, TB_CUDA_CC_TOO_OLD);
    check_cc(0, 0, TB_CUDA_USABLE);
    check_cc(8, 0, TB_CUDA_USABLE);
    check_cc(8, 9, TB_CUDA_USABLE);
    check_cc(9, 0, TB_CUDA_USABLE);
    check_cc(12, 0, TB_CUDA_USABLE);
    check_odd_inputs();
    return tb_test_exit(TB_OK);
}
