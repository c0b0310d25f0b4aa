/*
 * cuda_verdict.c - the CUDA probe's decision (cuda_verdict.h): pure
 * functions of the readings, so that every branch is tested on the CPU.
 *
 * Test: bazel test //lib/backend:cuda_verdict_test
 */
#include <stdio.h>

#include "lib/backend/cuda_verdict.h"

/* cudaError_t values the decision needs (cuda_runtime_api.h; stable across
 * CUDA 11-13). Spelled out so that this file builds without the toolkit. */
enum { CUDA_SUCCESS_ = 0, CUDA_INSUFFICIENT_DRIVER_ = 35, CUDA_NO_DEVICE_ = 100 };

int tb_cuda_min_driver_branch(int runtime_version)
{
    /* With minor-version compatibility a driver runs every runtime of its
     * own CUDA major release and older ones. */
    switch (runtime_version / 1000) {
    case 13: return 580;
    case 12: return 525;
    case 11: return 450;
    default: return 0;
    }
}

static void version_text(int v, char *out, size_t cap)
{
    snprintf(out, cap, "%d.%d", v / 1000, v % 1000 / 10);
}

static tb_cuda_verdict too_old_driver(const tb_cuda_probe *in, char *why, size_t cap)
{
    char drv[16], rt[16], branch[48] = "";
    int min = tb_cuda_min_driver_branch(in->runtime_version);

    version_text(in->driver_version, drv, sizeof drv);
    version_text(in->runtime_version, rt, sizeof rt);
    if (min)
        snprintf(branch, sizeof branch, "R%d or newer", min);
    else
        snprintf(branch, sizeof branch, "one for CUDA %s or newer", rt);
    snprintf(why, cap,
             "the NVIDIA driver is too old: it supports CUDA up to %s, this build's runtime is "
             "CUDA %s (cudaGetDeviceCount: error 35); install an NVIDIA driver %s, or rebuild "
             "tunebench against a CUDA toolkit no newer than %s (CUDA_PATH), or use --device=cpu",
             drv, rt, branch, drv);
    return TB_CUDA_DRIVER_TOO_OLD;
}

tb_cuda_verdict tb_cuda_verdict_machine(const tb_cuda_probe *in, char *why, size_t cap)
{
    why[0] = '\0';
    if (in->count_error == CUDA_INSUFFICIENT_DRIVER_ && in->driver_version <= 0) {
        char rt[16];
        int min = tb_cuda_min_driver_branch(in->runtime_version);
        version_text(in->runtime_version, rt, sizeof rt);
        snprintf(why, cap,
                 "no NVIDIA driver found (libcuda.so.1 is not loadable; cudaGetDeviceCount: "
                 "error 35): install the NVIDIA driver (R%d or newer for this build's CUDA %s) "
                 "on a machine with an NVIDIA GPU, or use --device=cpu",
                 min ? min : 580, rt);
        return TB_CUDA_NO_DRIVER;
    }
    if (in->count_error == CUDA_INSUFFICIENT_DRIVER_)
        return too_old_driver(in, why, cap);
    if (in->count_error == CUDA_NO_DEVICE_ ||
        (in->count_error == CUDA_SUCCESS_ && in->device_count <= 0)) {
        snprintf(why, cap, "no CUDA device%s%s%s: the driver is loaded but sees no GPU; check "
                 "nvidia-smi%s", in->visible ? " (CUDA_VISIBLE_DEVICES=" : "",
                 in->visible ? in->visible : "", in->visible ? ")" : "",
                 in->visible ? " and CUDA_VISIBLE_DEVICES" : "");
        return TB_CUDA_NO_DEVICE;
    }
    if (in->count_error != CUDA_SUCCESS_) {
        snprintf(why, cap, "CUDA is not usable (cudaGetDeviceCount: error %d); check nvidia-smi "
                 "and the driver's kernel messages (dmesg)", in->count_error);
        return TB_CUDA_UNUSABLE;
    }
    return TB_CUDA_USABLE;
}

tb_cuda_verdict tb_cuda_verdict_device(int ordinal, const char *name, int cc_major,
                                       int cc_minor, char *why, size_t cap)
{
    why[0] = '\0';
    if (cc_major <= 0)
        return TB_CUDA_USABLE;
    if (cc_major > TB_CUDA_MIN_CC_MAJOR ||
        (cc_major == TB_CUDA_MIN_CC_MAJOR && cc_minor >= TB_CUDA_MIN_CC_MINOR))
        return TB_CUDA_USABLE;
    snprintf(why, cap,
             "cuda:%d (%s) has compute capability %d.%d, older than this build supports: its "
             "kernels are compiled for sm_80 and sm_90 (plus compute_90 PTX), so it needs %d.%d "
             "or newer (A100, RTX 30xx, L4, H100 and later); use --device=cpu on this machine",
             ordinal, name && name[0] ? name : "unnamed GPU", cc_major, cc_minor,
             TB_CUDA_MIN_CC_MAJOR, TB_CUDA_MIN_CC_MINOR);
    return TB_CUDA_CC_TOO_OLD;
}
