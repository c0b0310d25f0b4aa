/*
 * telemetry_test.c - the /proc parsers, the throttle rule, and a short real
 * sampling run whose JSON parses and has the documented shape.
 *
 * bazel test //lib/report:telemetry_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/json.h"
#include "lib/backend/nvml_dl.h"
#include "lib/report/telemetry.h"
#include "lib/core/testing.h"

static void test_parsers(void)
{
    uint64_t busy = 0, total = 0;
    CHECK(tb_telemetry_parse_stat("cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 ...", &busy, &total) == 0);
    CHECK(total == 980);
    CHECK(busy == 980 - 800 - 20);
    CHECK(tb_telemetry_parse_stat("intr 1 2 3", &busy, &total) != 0);
    tb_error_clear();
    double l = 0;
    CHECK(tb_telemetry_parse_loadavg("1.52 0.90 0.40 2/300 1234\n", &l) == 0 && l == 1.52);
    CHECK(tb_telemetry_parse_loadavg("", &l) != 0);
    tb_error_clear();
    CHECK(tb_telemetry_is_throttled(TB_NVML_THROTTLE_HW_THERMAL));
    CHECK(tb_telemetry_is_throttled(TB_NVML_THROTTLE_SW_POWER_CAP | TB_NVML_THROTTLE_GPU_IDLE));
    CHECK(!tb_telemetry_is_throttled(TB_NVML_THROTTLE_GPU_IDLE));
    CHECK(!tb_telemetry_is_throttled(0));
    CHECK(!tb_telemetry_is_throttled(-1));
}

static void test_run(void)
{
    tb_telemetry *t = NULL;
    CHECK(tb_telemetry_start(NULL, 20, &t) == 0 && t);
    if (!t)
        return;
    struct timespec ts = {0, 120 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK(tb_telemetry_segment(t, "gelu") == 0);
    nanosleep(&ts, NULL);
    CHECK(tb_telemetry_stop(t) == 0);
    CHECK(tb_telemetry_stop(t) == 0);
    const char *dir = getenv("TEST_TMPDIR");
    char file[4096];
    snprintf(file, sizeof file, "%s/telemetry.json", dir ? dir : "/tmp");
    CHECK(tb_telemetry_save(t, file) == 0);
    tb_telemetry_free(t);

    tb_json *root = NULL;
    CHECK(tb_json_parse_file(file, 0, &root) == 0);
    if (!root)
        return;
    CHECK(!strcmp(tb_json_get_string(root, "schema", ""), TB_TELEMETRY_SCHEMA));
    CHECK(strlen(tb_json_get_string(root, "cpu_frequency", "")) > 0);
    CHECK(!strncmp(tb_json_get_string(root, "gpu", ""), "n/a", 3));
    const tb_json *segs = tb_json_get(root, "segments");
    CHECK(segs && segs->len == 2);
    const tb_json *g = tb_json_at(segs, 1);
    CHECK(!strcmp(tb_json_get_string(g, "label", ""), "gelu"));
    CHECK(tb_json_get_number(g, "seconds", -1) > 0.05);
    CHECK(tb_json_get_number(g, "samples", 0) >= 2);
    double u = tb_json_get_number(g, "cpu_util_mean", -1);
    CHECK(u >= 0 && u <= 1);
    const tb_json *samples = tb_json_get(root, "samples");
    CHECK(samples && samples->len >= 4);
    tb_json_free(root);
}

int main(void)
{
    test_parsers();
    test_run();
    if (failures) {
        fprintf(stderr, "telemetry_test: %d failures\n", failures);
        return 1;
    }
    printf("telemetry_test: ok\n");
    return 0;
}
