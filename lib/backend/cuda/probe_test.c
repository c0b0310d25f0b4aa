/*
 * probe_test.c - the CUDA backend's entry points do the right thing on
 * whatever machine runs them, and NVML is optional.
 *
 * Built twice from this one file (lib/backend/cuda/BUILD):
 *   cuda_probe_test         links lib/backend/cuda/backend.c (CUDA builds only),
 *                           run with --expect-built=1;
 *   cuda_absent_probe_test  links lib/backend/cuda/absent.c, --expect-built=0.
 * Checks:
 *   - libcuda and NVML are not loaded when main starts (nothing links them;
 *     that the binary starts at all on a machine with no driver is the point);
 *   - tb_cuda_built() is what the build says;
 *   - with no usable device: tb_cuda_device_count() is 0 with a reason, and
 *     tb_backend_cuda_create() fails with TB_ERR_NO_DEVICE repeating it;
 *   - with a device (a GPU machine): memory, copies, memset, counting and the
 *     limit, streams and events, device info, GELU against a double reference;
 *   - NVML: missing is "NVML not available" and readings are unknown (-1).
 *
 * Run: bazel test //lib/backend/cuda:cuda_probe_test //lib/backend/cuda:cuda_absent_probe_test
 */
#define _GNU_SOURCE
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/nvml_dl.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

/* ---- nothing links libcuda or NVML ---- */

static int find_driver_lib(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (strstr(info->dlpi_name, "libcuda.so") || strstr(info->dlpi_name, "libnvidia-ml.so")) {
        printf("      loaded at start: %s\n", info->dlpi_name);
        *(int *)found = 1;
    }
    return 0;
}

/* Must run before any CUDA call: cudart itself dlopens libcuda on first use. */
static void check_no_driver_lib_linked(void)
{
    int found = 0;
    dl_iterate_phdr(find_driver_lib, &found);
    CHECK(!found, "neither libcuda nor libnvidia-ml is linked into this binary");
}

/* ---- no usable device ---- */

static int reason_is_clear(const char *why, int built)
{
    if (!built)
        return strstr(why, "this build has no CUDA backend") == why &&
               strstr(why, "CUDA_PATH") != NULL;
    /* Error 35 (insufficient driver) must talk about the driver. */
    if (strstr(why, "error 35"))
        return strstr(why, "driver") != NULL;
    return strncmp(why, "no NVIDIA driver found", 22) == 0 ||
           strncmp(why, "the NVIDIA driver is too old", 28) == 0 ||
           strncmp(why, "no CUDA device", 14) == 0 ||
           strncmp(why, "CUDA is not usable", 18) == 0;
}

static void check_no_device(int built, const char *why)
{
    tb_backend *be = (tb_backend *)&be; /* must be reset to NULL */
    char reason[512];

    snprintf(reason, sizeof reason, "%s", why);
    CHECK(reason_is_clear(reason, built), "the reason is clear: \"%s\"", reason);

    tb_error_clear();
    int rc = tb_backend_cuda_create(0, &be);
    CHECK(rc == TB_ERR_NO_DEVICE, "create(cuda:0) fails with TB_ERR_NO_DEVICE (got %s)",
          tb_err_name(rc));
    CHECK(be == NULL, "create(cuda:0) leaves *out NULL");
    CHECK(strstr(tb_error_message(), "cuda:0") && strstr(tb_error_message(), reason),
          "its message names the device and the reason: \"%s\"", tb_error_message());

    tb_error_clear();
    rc = tb_backend_cuda_create(3, &be);
    CHECK(rc == TB_ERR_NO_DEVICE, "create(cuda:3) fails with TB_ERR_NO_DEVICE (got %s)",
          tb_err_name(rc));
    tb_error_clear();
    rc = tb_backend_cuda_create(0, NULL);
    CHECK(rc == TB_ERR_INVALID, "create with out == NULL is TB_ERR_INVALID (got %s)",
          tb_err_name(rc));
    tb_error_clear();
}

/* ---- with a device (runs only on a GPU machine) ---- */

static float rand_float(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) * (1.0 / 16777216.0)) * 8.0f - 4.0f; /* [-4, 4) */
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static void check_memory(tb_backend *be)
{
    enum { N = 1001 }; /* odd on purpose */
    float host[N], back[N];
    void *a = NULL, *b = NULL, *c = NULL;
    size_t in_use = 0, peak = 0;
    unsigned seed = 12345;

    for (int i = 0; i < N; i++)
        host[i] = rand_float(&seed);
    CHECK(be->dev_alloc(be, &a, sizeof host) == TB_OK && a, "dev_alloc %zu bytes", sizeof host);
    CHECK(be->dev_alloc(be, &b, sizeof host) == TB_OK && b, "dev_alloc a second buffer");
    be->mem_stats(be, &in_use, &peak);
    CHECK(in_use == 2 * sizeof host && peak == in_use, "in use %zu, peak %zu", in_use, peak);

    CHECK(be->copy_h2d(be, a, host, sizeof host, NULL) == TB_OK, "copy_h2d (sync)");
    CHECK(be->copy_d2d(be, b, a, sizeof host, NULL) == TB_OK, "copy_d2d (sync)");
    CHECK(be->copy_d2h(be, back, b, sizeof host, NULL) == TB_OK, "copy_d2h (sync)");
    CHECK(memcmp(host, back, sizeof host) == 0, "round trip h2d, d2d, d2h is exact");

    CHECK(be->memset(be, b, 0, sizeof host, NULL) == TB_OK, "memset (sync)");
    be->copy_d2h(be, back, b, sizeof host, NULL);
    int zero = 1;
    for (int i = 0; i < N; i++)
        zero &= back[i] == 0.0f;
    CHECK(zero, "memset wrote zeros");

    CHECK(be->mem_set_limit(be, 3 * sizeof host) == TB_OK, "limit set to 3 buffers");
    tb_error_clear();
    int rc = be->dev_alloc(be, &c, 2 * sizeof host);
    CHECK(rc == TB_ERR_DEVICE_OOM && c == NULL, "allocating past the limit is TB_ERR_DEVICE_OOM");
    tb_error_clear();
    be->mem_set_limit(be, 0);
    rc = be->dev_free(be, host);
    CHECK(rc == TB_ERR_INVALID, "dev_free of a foreign pointer is TB_ERR_INVALID");
    tb_error_clear();

    CHECK(be->dev_free(be, b) == TB_OK, "dev_free");
    be->mem_stats(be, &in_use, &peak);
    CHECK(in_use == sizeof host && peak == 2 * sizeof host, "after free: in use %zu, peak %zu",
          in_use, peak);
    be->mem_reset_peak(be);
    be->mem_stats(be, &in_use, &peak);
    CHECK(peak == in_use, "mem_reset_peak brings the peak down to what is in use");
    be->dev_free(be, a);
}

static void check_streams(tb_backend *be)
{
    enum { N = 4097 };
    float *pinned = NULL, *back = NULL;
    void *d = NULL;
    tb_stream *s = NULL;
    tb_event *e0 = NULL, *e1 = NULL;
    float ms = -1.0f;

    CHECK(be->host_alloc(be, (void **)&pinned, N * sizeof(float), 1) == TB_OK, "pinned host_alloc");
    CHECK(be->host_alloc(be, (void **)&back, N * sizeof(float), 0) == TB_OK, "pageable host_alloc");
    CHECK(be->dev_alloc(be, &d, N * sizeof(float)) == TB_OK, "dev_alloc");
    for (int i = 0; i < N; i++)
        pinned[i] = (float)i;
    CHECK(be->stream_create(be, &s) == TB_OK && s, "stream_create");
    CHECK(be->event_create(be, &e0) == TB_OK && be->event_create(be, &e1) == TB_OK,
          "event_create x2");
    CHECK(be->event_record(be, e0, s) == TB_OK, "event_record on a side stream");
    CHECK(be->copy_h2d(be, d, pinned, N * sizeof(float), s) == TB_OK, "async copy_h2d");
    CHECK(be->event_record(be, e1, s) == TB_OK, "event_record after the copy");
    CHECK(be->stream_wait_event(be, NULL, e1) == TB_OK, "compute stream waits for the copy");
    CHECK(be->copy_d2h(be, back, d, N * sizeof(float), NULL) == TB_OK, "sync copy_d2h");
    CHECK(memcmp(pinned, back, N * sizeof(float)) == 0, "async copy then event wait is ordered");
    CHECK(be->event_sync(be, e1) == TB_OK, "event_sync");
    CHECK(be->event_elapsed_ms(be, e0, e1, &ms) == TB_OK && ms >= 0.0f, "event_elapsed_ms >= 0");
    CHECK(be->stream_sync(be, s) == TB_OK && be->sync(be) == TB_OK, "stream_sync and sync");
    be->event_destroy(be, e0);
    be->event_destroy(be, e1);
    CHECK(be->stream_destroy(be, s) == TB_OK, "stream_destroy");
    be->dev_free(be, d);
    be->host_free(be, back, 0);
    be->host_free(be, pinned, 1);
}

static void check_gelu(tb_backend *be, tb_gelu_variant v, size_t n)
{
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    void *dx_d = NULL, *x_d = NULL, *y_d = NULL, *dy_d = NULL;
    unsigned seed = 7u + (unsigned)n;
    double err_f = 0.0, err_b = 0.0;

    for (size_t i = 0; i < n; i++) {
        x[i] = rand_float(&seed);
        dy[i] = rand_float(&seed);
    }
    be->dev_alloc(be, &x_d, n * sizeof(float));
    be->dev_alloc(be, &y_d, n * sizeof(float));
    be->dev_alloc(be, &dy_d, n * sizeof(float));
    be->dev_alloc(be, &dx_d, n * sizeof(float));
    be->copy_h2d(be, x_d, x, n * sizeof(float), NULL);
    be->copy_h2d(be, dy_d, dy, n * sizeof(float), NULL);
    int rc = be->gelu_fwd(be, v, x_d, y_d, n);
    rc |= be->gelu_bwd(be, v, x_d, dy_d, dx_d, n);
    rc |= be->copy_d2h(be, y, y_d, n * sizeof(float), NULL);
    rc |= be->copy_d2h(be, dx, dx_d, n * sizeof(float), NULL);
    for (size_t i = 0; i < n; i++) {
        double xi = x[i];
        double dgelu = 0.5 * (1.0 + erf(xi / sqrt(2.0))) + xi * exp(-0.5 * xi * xi) / sqrt(2.0 * M_PI);
        err_f = fmax(err_f, fabs(y[i] - gelu_ref(xi)) / fmax(1.0, fabs(gelu_ref(xi))));
        err_b = fmax(err_b, fabs(dx[i] - dy[i] * dgelu) / fmax(1.0, fabs(dy[i] * dgelu)));
    }
    CHECK(rc == TB_OK && err_f < 1e-4 && err_b < 1e-4,
          "gelu %s n=%zu: max rel error fwd %.2e, bwd %.2e", v == TB_GELU_FUSED ? "fused" : "unfused",
          n, err_f, err_b);
    be->dev_free(be, x_d);
    be->dev_free(be, y_d);
    be->dev_free(be, dy_d);
    be->dev_free(be, dx_d);
    free(x);
    free(y);
    free(dy);
    free(dx);
}

static void check_device(int ordinal)
{
    tb_backend *be = NULL;
    tb_device_info info;

    int rc = tb_backend_cuda_create(ordinal, &be);
    CHECK(rc == TB_OK && be, "create(cuda:%d)", ordinal);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        return;
    }
    CHECK(be->device_info(be, &info) == TB_OK, "device_info");
    printf("      %s: %s, %zu MiB, %d SMs, cc %d.%d, %s, %s, %s\n", info.backend, info.name,
           info.total_mem >> 20, info.multiprocessors, info.cc_major, info.cc_minor, info.runtime,
           info.driver, info.libs);
    CHECK(strcmp(info.backend, "cuda") == 0 && info.name[0] && info.total_mem > 0 &&
          info.multiprocessors > 0 && info.cc_major >= 7, "device_info is filled in");
    check_memory(be);
    check_streams(be);
    check_gelu(be, TB_GELU_FUSED, 1);
    check_gelu(be, TB_GELU_FUSED, 100003);
    check_gelu(be, TB_GELU_UNFUSED, 100003);
    check_gelu(be, TB_GELU_UNFUSED, 300007); /* grows the scratch */
    CHECK(be->destroy(be) == TB_OK, "destroy");
}

/* ---- NVML ---- */

static void check_nvml(void)
{
    const char *why = NULL;
    tb_nvml_sample s;
    char buf[64], tiny[8];

    int ok = tb_nvml_available(&why);
    printf("      NVML: %s\n", ok ? "available" : why);
    CHECK(ok || strncmp(why, "NVML not available", 18) == 0, "NVML is there or says why not");
    CHECK(tb_nvml_read(0, &s) == TB_OK, "tb_nvml_read returns TB_OK");
    if (!ok)
        CHECK(!s.available && s.sm_clock_mhz == -1 && s.temp_c == -1 && s.power_mw == -1 &&
              s.throttle == -1, "without NVML every reading is unknown (-1)");
    CHECK(tb_nvml_read_pci("0000:00:00.0", &s) == TB_OK, "tb_nvml_read_pci returns TB_OK");
    CHECK(tb_nvml_driver_version(buf, sizeof buf) == TB_OK && (ok || buf[0] == '\0'),
          "driver version: \"%s\"", buf);
    tb_error_clear();

    tb_nvml_throttle_string(0, buf, sizeof buf);
    CHECK(strcmp(buf, "none") == 0, "throttle 0 is \"%s\"", buf);
    tb_nvml_throttle_string(-1, buf, sizeof buf);
    CHECK(strcmp(buf, "unknown") == 0, "throttle -1 is \"%s\"", buf);
    tb_nvml_throttle_string(TB_NVML_THROTTLE_SW_POWER_CAP | TB_NVML_THROTTLE_HW_THERMAL, buf,
                            sizeof buf);
    CHECK(strcmp(buf, "sw_power_cap,hw_thermal") == 0, "throttle 0x44 is \"%s\"", buf);
    tb_nvml_throttle_string(0x401, buf, sizeof buf);
    CHECK(strcmp(buf, "gpu_idle,other(0x400)") == 0, "throttle 0x401 is \"%s\"", buf);
    tb_nvml_throttle_string(0x1FF, tiny, sizeof tiny);
    CHECK(strlen(tiny) < sizeof tiny, "a short buffer is truncated, not overrun: \"%s\"", tiny);
}

int main(int argc, char **argv)
{
    tb_test_verbose = 1; /* a checklist: every check printed */
    int expect_built = -1;
    const char *why = NULL;

    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--expect-built=", 15) == 0)
            expect_built = atoi(argv[i] + 15);

    check_no_driver_lib_linked();
    int built = tb_cuda_built();
    CHECK(expect_built < 0 || built == expect_built, "tb_cuda_built() = %d (expected %d)", built,
          expect_built);

    int count = tb_cuda_device_count(&why);
    CHECK(count >= 0 && why != NULL, "tb_cuda_device_count() = %d, why = \"%s\"", count,
          why ? why : "(null)");
    CHECK(!built ? count == 0 : 1, "a build without CUDA sees no device");
    if (count == 0)
        check_no_device(built, why);
    for (int d = 0; d < count; d++)
        check_device(d);
    check_nvml();

    printf("%s: %d failure%s\n", failures ? "FAILED" : "PASSED", failures,
           failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
