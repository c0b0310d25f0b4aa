/*
 * telemetry_nvml_test.c - the telemetry samples the GPU the run uses, found
 * by its PCI bus id, not NVML's device of the same number as the CUDA
 * ordinal. Under CUDA_VISIBLE_DEVICES=1 a run's cuda:0 is NVML's device 1:
 * reading NVML index 0 would sample another GPU.
 *
 * Runs against lib/report/fake_nvml.c (two GPUs, 40 C at index 0 / PCI
 * 17:00.0, 71 C at index 1 / PCI 65:00.0), put on LD_LIBRARY_PATH by
 * telemetry_nvml_test.sh; fails when the fake is not the NVML it loaded.
 *
 * Run: bazel test //lib/report:telemetry_nvml_test
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/backend/nvml_dl.h"
#include "lib/core/testing.h"
#include "lib/report/telemetry.h"

/* The telemetry JSON of a short run on the GPU at pci; malloc'ed. */
static char *sample_json(const char *pci)
{
    tb_telemetry *t = NULL;
    char *buf = NULL;
    size_t len = 0;
    struct timespec ts = {0, 60 * 1000 * 1000};

    CHECK_OK(tb_telemetry_start(pci, 10, &t));
    if (!t)
        return NULL;
    nanosleep(&ts, NULL);
    CHECK_OK(tb_telemetry_stop(t));
    FILE *f = open_memstream(&buf, &len);
    if (f) {
        CHECK_OK(tb_telemetry_write_json(t, f));
        fclose(f);
    }
    tb_telemetry_free(t);
    return buf;
}

int main(void)
{
    const char *why = NULL;
    char drv[32];
    tb_nvml_sample s;

    tb_test_verbose = 1;
    if (!tb_nvml_available(&why)) {
        CHECK(0, "the fake NVML is loaded (%s)", why);
        return tb_test_exit(TB_OK);
    }
    CHECK_OK(tb_nvml_driver_version(drv, sizeof drv));
    CHECK(strcmp(drv, "580.00.fake") == 0, "the NVML loaded is the fake (driver %s)", drv);

    /* What reading by the ordinal did: index 0 is the other GPU. */
    CHECK_OK(tb_nvml_read(0, &s));
    CHECK(s.available && s.temp_c == 40, "NVML index 0 is the 40 C GPU (got %d)", s.temp_c);
    /* cudaDeviceGetPCIBusId's form for the run's GPU. */
    CHECK_OK(tb_nvml_read_pci("0000:65:00.0", &s));
    CHECK(s.available && s.temp_c == 71, "PCI 0000:65:00.0 is the 71 C GPU (got %d)", s.temp_c);

    char *json = sample_json("0000:65:00.0");
    CHECK(json && strstr(json, "\"gpu_temp_c\": 71") && !strstr(json, "\"gpu_temp_c\": 40"),
          "the telemetry sampled the run's GPU (71 C), never NVML index 0 (40 C)");
    CHECK(json && strstr(json, "\"gpu_pci_bus_id\": \"0000:65:00.0\"") &&
              strstr(json, "sampled through NVML"),
          "the JSON names the GPU it sampled");
    free(json);

    json = sample_json(NULL);
    CHECK(json && strstr(json, "n/a (no GPU in this run)") &&
              !strstr(json, "\"gpu_temp_c\":"),
          "no GPU: nothing sampled");
    free(json);
    json = sample_json("0000:99:00.0");
    CHECK(json && !strstr(json, "\"gpu_temp_c\""), "an unknown bus id samples nothing");
    free(json);

    tb_telemetry *t = NULL;
    CHECK(tb_telemetry_start("0000:65:00.0-and-far-too-long-for-a-bus-id", 10, &t) ==
              TB_ERR_INVALID && !t, "an overlong bus id is refused");
    tb_error_clear();
    return tb_test_exit(TB_OK);
}
