/*
 * absent.c - the CUDA backend's entry points in a build
 * without the CUDA toolkit.
 *
 * lib/backend/cuda/BUILD compiles this file instead of backend.c when
 * tools/local_config.bzl did not find the toolkit, so callers (lib/backend/device.c)
 * need no #ifdef: they ask tb_cuda_device_count() and get 0 with the reason,
 * and an explicit --device=cuda fails with TB_ERR_NO_DEVICE saying the same.
 *
 * Test: bazel test //lib/backend/cuda:cuda_absent_probe_test
 */
#include "lib/backend/backend.h"
#include "lib/core/status.h"

static const char absent_reason[] =
    "this build has no CUDA backend (the CUDA toolkit was not found at build time; "
    "set CUDA_PATH or install it, see README)";

int tb_cuda_built(void) { return 0; }

int tb_cuda_device_count(const char **why)
{
    if (why)
        *why = absent_reason;
    return 0;
}

/* Always fails: TB_ERR_INVALID when out is NULL, else TB_ERR_NO_DEVICE. */
int tb_backend_cuda_create(int ordinal, tb_backend **out)
{
    if (!out)
        return TB_FAIL(TB_ERR_INVALID, "tb_backend_cuda_create: out is NULL");
    *out = NULL;
    return TB_FAIL(TB_ERR_NO_DEVICE, "cuda:%d requested, but %s", ordinal, absent_reason);
}
