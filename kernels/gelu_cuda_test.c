/*
 * gelu_cuda_test.c - the CUDA GELU launchers (kernels/gelu.cu) link, start,
 * and fail cleanly without a GPU; with one, they compute GELU.
 *
 *   bazel test //kernels:gelu_cuda_test
 *
 * Always: argument errors come back as TB_ERR_INVALID before any CUDA call.
 * No usable device (this build machine: no driver, error 35): every
 * launcher returns TB_ERR_CUDA with the CUDA error on the chain, no crash.
 * A device: both forms (erf, tanh), fused and unfused, forward and backward, at n = 100003 on an
 * aligned and a misaligned address (float4 and scalar kernels), within
 * 1e-6 * max(1, |x|) (forward) and 1e-6 * max(1, |dy|) (backward) of the
 * float64 reference, fused bitwise equal to unfused; also reports how many
 * elements differ from the CPU's bitwise result (expected: none).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gelu.h"
#include "kernels/gelu_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/ref/gelu.h"
#include "lib/core/status.h"
#include "lib/core/rng.h"

#define N 100003
#define TOL 1e-6

static int failures;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            failures++;                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

static void test_bad_arguments(void)
{
    float *p = (float *)(uintptr_t)256; /* never dereferenced: checks come first */
    CHECK(tb_cuda_gelu_fwd(9, p, p, 10, NULL, NULL, NULL) == TB_ERR_INVALID, "bad variant");
    CHECK(tb_cuda_gelu_fwd(TB_GELU_UNFUSED, p, p, 10, NULL, NULL, NULL) == TB_ERR_INVALID,
          "unfused without temporaries");
    CHECK(tb_cuda_gelu_bwd(TB_GELU_FUSED, p, NULL, p, 10, NULL, NULL, NULL) == TB_ERR_INVALID,
          "NULL dy");
    CHECK(tb_cuda_gelu_fwd(TB_GELU_UNFUSED, NULL, NULL, 0, NULL, NULL, NULL) == TB_OK,
          "n = 0 is a no-op");
    CHECK(tb_cuda_gelu_tanh_fwd(9, p, p, 10, NULL, NULL, NULL) == TB_ERR_INVALID,
          "tanh: bad variant");
    CHECK(tb_cuda_gelu_tanh_bwd(TB_GELU_UNFUSED, p, p, p, 10, p, p, NULL, NULL) ==
              TB_ERR_INVALID,
          "tanh: unfused backward without its third temporary");
    CHECK(tb_cuda_gelu_tanh_bwd(TB_GELU_FUSED, p, NULL, p, 10, NULL, NULL, NULL, NULL) ==
              TB_ERR_INVALID,
          "tanh: NULL dy");
    tb_error_clear();
    printf("argument errors: checked\n");
}

/* Without a device every launch must fail with TB_ERR_CUDA. */
static void test_no_device(void)
{
    float *p = (float *)(uintptr_t)256;
    for (int v = 0; v <= 1; v++) {
        int rf = tb_cuda_gelu_fwd(v, p, p, N, p, p, NULL);
        int rb = tb_cuda_gelu_bwd(v, p, p, p, N, p, p, NULL);
        CHECK(rf == TB_ERR_CUDA && rb == TB_ERR_CUDA, "variant %d: fwd %d bwd %d, want %d", v,
              rf, rb, TB_ERR_CUDA);
        rf = tb_cuda_gelu_tanh_fwd(v, p, p, N, p, p, NULL);
        rb = tb_cuda_gelu_tanh_bwd(v, p, p, p, N, p, p, p, NULL);
        CHECK(rf == TB_ERR_CUDA && rb == TB_ERR_CUDA, "tanh variant %d: fwd %d bwd %d, want %d",
              v, rf, rb, TB_ERR_CUDA);
    }
    printf("no device: launchers return TB_ERR_CUDA; the chain says:\n");
    tb_error_print(stdout);
    tb_error_clear();
}


/* Runs both variants of one form (tanh: 0 erf, 1 tanh) at offset off
 * floats into the device buffers. */
static int run_device(int tanh, size_t off, float *hx, float *hdy, float *out[4])
{
    float *x = NULL, *dy = NULL, *y = NULL, *dx = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL;
    size_t bytes = (N + 4) * sizeof(float);
    int rc = TB_ERR_CUDA;
    if (cudaMalloc((void **)&x, bytes) || cudaMalloc((void **)&dy, bytes) ||
        cudaMalloc((void **)&y, bytes) || cudaMalloc((void **)&dx, bytes) ||
        cudaMalloc((void **)&t1, bytes) || cudaMalloc((void **)&t2, bytes) ||
        cudaMalloc((void **)&t3, bytes))
        goto out_free;
    if (cudaMemcpy(x + off, hx, N * sizeof(float), cudaMemcpyHostToDevice) ||
        cudaMemcpy(dy + off, hdy, N * sizeof(float), cudaMemcpyHostToDevice))
        goto out_free;
    for (int v = 0; v <= 1; v++) {
        rc = tanh ? tb_cuda_gelu_tanh_fwd(v, x + off, y + off, N, t1, t2, NULL)
                  : tb_cuda_gelu_fwd(v, x + off, y + off, N, t1, t2, NULL);
        if (rc == TB_OK)
            rc = tanh ? tb_cuda_gelu_tanh_bwd(v, x + off, dy + off, dx + off, N, t1, t2, t3, NULL)
                      : tb_cuda_gelu_bwd(v, x + off, dy + off, dx + off, N, t1, t2, NULL);
        if (rc != TB_OK)
            goto out_free;
        if (cudaMemcpy(out[2 * v], y + off, N * sizeof(float), cudaMemcpyDeviceToHost) ||
            cudaMemcpy(out[2 * v + 1], dx + off, N * sizeof(float), cudaMemcpyDeviceToHost)) {
            rc = TB_ERR_CUDA;
            goto out_free;
        }
    }
    rc = TB_OK;
out_free:
    cudaFree(x);
    cudaFree(dy);
    cudaFree(y);
    cudaFree(dx);
    cudaFree(t1);
    cudaFree(t2);
    cudaFree(t3);
    return rc;
}

static void test_device(void)
{
    float *hx = malloc(N * 4), *hdy = malloc(N * 4);
    float *out[4] = {malloc(N * 4), malloc(N * 4), malloc(N * 4), malloc(N * 4)};
    if (!hx || !hdy || !out[0] || !out[1] || !out[2] || !out[3]) {
        CHECK(0, "out of memory");
        goto out_free;
    }
    tb_rng_fill(hx, N, 1, -8.0, 8.0);
    tb_rng_fill(hdy, N, 2, -8.0, 8.0);
    for (int tanh = 0; tanh <= 1; tanh++)
    for (size_t off = 0; off <= 1; off++) {
        if (run_device(tanh, off, hx, hdy, out) != TB_OK) {
            tb_error_print(stdout);
            CHECK(0, "device run failed");
            continue;
        }
        /* out: unfused y, unfused dx, fused y, fused dx */
        size_t vs_cpu = 0;
        for (int k = 0; k < 4; k++) {
            tb_ref_err e = tanh ? (k % 2 ? tb_ref_gelu_tanh_bwd_err(hx, hdy, out[k], N)
                                         : tb_ref_gelu_tanh_fwd_err(hx, out[k], N))
                                : (k % 2 ? tb_ref_gelu_bwd_err(hx, hdy, out[k], N)
                                         : tb_ref_gelu_fwd_err(hx, out[k], N));
            CHECK(e.max_scaled <= TOL, "%s offset %zu output %d: error %g", tanh ? "tanh" : "erf",
                  off, k, e.max_scaled);
            printf("%s offset %zu %s %s: max scaled error %.3g (tol %.0e)\n",
                   tanh ? "tanh" : "erf", off, k < 2 ? "unfused" : "fused", k % 2 ? "bwd" : "fwd",
                   e.max_scaled, TOL);
            for (size_t i = 0; i < N; i++) {
                float cpu = tanh ? (k % 2 ? tb_gelu_tanh_bwd_f(hx[i], hdy[i])
                                          : tb_gelu_tanh_fwd_f(hx[i]))
                                 : (k % 2 ? tb_gelu_bwd_f(hx[i], hdy[i]) : tb_gelu_fwd_f(hx[i]));
                vs_cpu += memcmp(&cpu, &out[k][i], sizeof cpu) != 0;
            }
        }
        CHECK(!memcmp(out[0], out[2], N * 4) && !memcmp(out[1], out[3], N * 4),
              "%s offset %zu: fused and unfused differ", tanh ? "tanh" : "erf", off);
        printf("%s offset %zu: %zu elements differ bitwise from the CPU math\n",
               tanh ? "tanh" : "erf", off, vs_cpu);
    }
out_free:
    free(hx);
    free(hdy);
    for (int k = 0; k < 4; k++)
        free(out[k]);
}

int main(void)
{
    test_bad_arguments();
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("no usable CUDA device (%s, %d)\n", cudaGetErrorName(e), (int)e);
        test_no_device();
    } else {
        printf("%d CUDA device(s): running the kernels\n", count);
        test_device();
    }
    if (failures) {
        printf("gelu_cuda_test: %d FAILED\n", failures);
        return 1;
    }
    printf("gelu_cuda_test: all passed\n");
    return 0;
}
