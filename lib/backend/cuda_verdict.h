/*
 * cuda_verdict.h - whether a CUDA device is usable by this build, and the one
 * line that says why not, decided from the probe's readings alone.
 *
 * lib/backend/cuda/backend.c reads the runtime (cudaGetDeviceCount's error,
 * cudaDriverGetVersion, cudaRuntimeGetVersion, the device's compute
 * capability) and hands the numbers here; this file calls no CUDA function,
 * so a CPU test feeds it the readings of machines it cannot be on (no
 * driver, a driver too old for the runtime, a GPU below sm_80).
 *
 * Test: bazel test //lib/backend:cuda_verdict_test
 */
#ifndef TB_CUDA_VERDICT_H
#define TB_CUDA_VERDICT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The oldest compute capability this build has machine code or PTX for:
 * tools/cuda.bzl compiles sm_80, sm_90 and compute_90 PTX, so 8.0 and newer
 * run (8.x on the sm_80 code, 9.0 on sm_90, later GPUs JIT the PTX). */
#define TB_CUDA_MIN_CC_MAJOR 8
#define TB_CUDA_MIN_CC_MINOR 0

/* What the probe read. Versions are CUDA's encoding, 1000 * major +
 * 10 * minor (13000 = 13.0); 0 = none or unknown. */
typedef struct tb_cuda_probe {
    int count_error;     /* cudaGetDeviceCount's cudaError_t (0 = success) */
    int device_count;    /* what it counted (ignored when count_error != 0) */
    int driver_version;  /* cudaDriverGetVersion: 0 when no driver is loadable */
    int runtime_version; /* cudaRuntimeGetVersion: the runtime this build links */
    const char *visible; /* CUDA_VISIBLE_DEVICES, or NULL when unset */
} tb_cuda_probe;

typedef enum tb_cuda_verdict {
    TB_CUDA_USABLE = 0,
    TB_CUDA_NO_DRIVER,       /* error 35 and no driver version: nothing installed */
    TB_CUDA_DRIVER_TOO_OLD,  /* error 35 with a driver older than the runtime */
    TB_CUDA_NO_DEVICE,       /* a driver, but no device (or none visible) */
    TB_CUDA_CC_TOO_OLD,      /* a device below TB_CUDA_MIN_CC */
    TB_CUDA_UNUSABLE,        /* any other runtime error */
} tb_cuda_verdict;

/* The verdict for the machine as a whole; when it is not TB_CUDA_USABLE,
 * writes one line to why saying what is wrong and what to install or do.
 * REQUIRES: in != NULL, why != NULL, cap > 0. Never fails. */
tb_cuda_verdict tb_cuda_verdict_machine(const tb_cuda_probe *in, char *why, size_t cap);

/* The verdict for device `ordinal` of compute capability major.minor
 * (0.0 = unknown, taken as usable: the runtime says more when it fails).
 * REQUIRES: why != NULL, cap > 0. */
tb_cuda_verdict tb_cuda_verdict_device(int ordinal, const char *name, int cc_major,
                                       int cc_minor, char *why, size_t cap);

/* The oldest NVIDIA driver branch that runs CUDA runtime `runtime_version`
 * (580 for 13.x, 525 for 12.x, 450 for 11.x); 0 when not known. */
int tb_cuda_min_driver_branch(int runtime_version);

#ifdef __cplusplus
}
#endif
#endif
