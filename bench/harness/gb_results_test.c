/*
 * gb_results_test.c - reads a fixed Google Benchmark 1.7.1 JSON document
 * (shaped like what the Debian library writes, trimmed) and checks the
 * grouping by run_name, that aggregates are dropped, unit conversion,
 * counters (including GB's bare NaN), labels, error rows and the context;
 * then that non-GB or broken files fail with TB_ERR_DATA.
 * Run: bazel test //bench/harness:gb_results_test
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */

#include "bench/harness/gb_results.h"
#include "lib/core/testing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

/* Two repetitions of "a/3" interleaved with "m/manual_time" (as
 * --benchmark_enable_random_interleaving writes them), GB's aggregates, a
 * failed run, and a counter that is NaN in one repetition and absent in
 * another. */
static const char doc[] =
    "{\n"
    "  \"context\": {\n"
    "    \"date\": \"2026-11-22T01:33:59+00:00\", \"host_name\": \"vm\",\n"
    "    \"executable\": \"./x\", \"num_cpus\": 2, \"mhz_per_cpu\": 2500,\n"
    "    \"cpu_scaling_enabled\": false, \"caches\": [{\"type\": \"Data\", \"level\": 1}],\n"
    "    \"load_avg\": [0.17,0.12,0.05], \"library_build_type\": \"debug\"\n"
    "  },\n"
    "  \"benchmarks\": [\n"
    "    {\"name\": \"a/3/iterations:10/repeats:2\", \"run_name\": \"a/3/iterations:10/repeats:2\",\n"
    "     \"run_type\": \"iteration\", \"repetitions\": 2, \"repetition_index\": 0, \"threads\": 1,\n"
    "     \"iterations\": 10, \"real_time\": 4.25e+02, \"cpu_time\": 2.45e+02, \"time_unit\": \"ns\",\n"
    "     \"c\": 0.3, \"bytes_per_second\": 1.5e9, \"label\": \"lab\"},\n"
    "    {\"name\": \"m/manual_time\", \"run_name\": \"m/manual_time\", \"run_type\": \"iteration\",\n"
    "     \"iterations\": 5, \"real_time\": 1.5, \"cpu_time\": 3e-4, \"time_unit\": \"ms\", \"d\": NaN},\n"
    "    {\"name\": \"a/3/iterations:10/repeats:2\", \"run_name\": \"a/3/iterations:10/repeats:2\",\n"
    "     \"run_type\": \"iteration\", \"repetitions\": 2, \"repetition_index\": 1, \"threads\": 1,\n"
    "     \"iterations\": 10, \"real_time\": 5.5e+01, \"cpu_time\": 5.3e+01, \"time_unit\": \"ns\",\n"
    "     \"c\": 0.5, \"bytes_per_second\": 1.4e9, \"label\": \"lab\"},\n"
    "    {\"name\": \"a/3/iterations:10/repeats:2_mean\", \"run_name\": \"a/3/iterations:10/repeats:2\",\n"
    "     \"run_type\": \"aggregate\", \"aggregate_name\": \"mean\", \"aggregate_unit\": \"time\",\n"
    "     \"iterations\": 2, \"real_time\": 240, \"cpu_time\": 149, \"time_unit\": \"ns\", \"c\": 0.4},\n"
    "    {\"name\": \"m/manual_time\", \"run_name\": \"m/manual_time\", \"run_type\": \"iteration\",\n"
    "     \"iterations\": 5, \"real_time\": 2.5, \"cpu_time\": 1e-4, \"time_unit\": \"us\"},\n"
    "    {\"name\": \"e/repeats:2\", \"run_name\": \"e/repeats:2\", \"run_type\": \"iteration\",\n"
    "     \"error_occurred\": true, \"error_message\": \"boom \\\"quoted\\\"\",\n"
    "     \"iterations\": 0, \"real_time\": 0, \"cpu_time\": 0, \"time_unit\": \"s\"},\n"
    "    {\"name\": \"e/repeats:2\", \"run_name\": \"e/repeats:2\", \"run_type\": \"iteration\",\n"
    "     \"error_occurred\": true, \"error_message\": \"boom \\\"quoted\\\"\",\n"
    "     \"iterations\": 0, \"real_time\": 0, \"cpu_time\": 0, \"time_unit\": \"s\"}\n"
    "  ]\n"
    "}\n";

static void test_document(void)
{
    printf("grouping, units, counters, labels, errors, context\n");
    gb_results *r = NULL;
    tb_error_clear();
    if (gb_results_parse(doc, sizeof doc - 1, &r) != TB_OK) {
        CHECK(0, "document parses");
        tb_error_print(stdout);
        return;
    }
    CHECK(r->n_runs == 3, "3 runs (aggregates dropped), got %zu", r->n_runs);
    for (size_t i = 0; i < r->n_runs; i++)
        printf("  run %-30s reps %d  first %.3e s  counters %zu  label \"%s\"  error %d \"%s\"\n",
               r->runs[i].name, r->runs[i].repetitions, r->runs[i].seconds[0], r->runs[i].n_counters,
               r->runs[i].label, r->runs[i].error_occurred, r->runs[i].error_message);
    CHECK(strcmp(r->runs[0].name, "a/3/iterations:10/repeats:2") == 0 &&
              strcmp(r->runs[1].name, "m/manual_time") == 0 && strcmp(r->runs[2].name, "e/repeats:2") == 0,
          "runs in the order first seen");

    const gb_run *a = gb_results_find(r, "a/3/iterations:10/repeats:2");
    CHECK(a && a->repetitions == 2, "a has 2 repetitions");
    if (a) {
        CHECK(NEAR(a->seconds[0], 425e-9) && NEAR(a->seconds[1], 55e-9), "ns to s: %g %g",
              a->seconds[0], a->seconds[1]);
        CHECK(NEAR(a->cpu_seconds[1], 53e-9), "cpu time");
        CHECK(a->iterations[0] == 10 && a->iterations[1] == 10, "iterations");
        CHECK(!a->manual_time && !a->error_occurred && strcmp(a->label, "lab") == 0, "flags, label");
        CHECK(a->n_counters == 2, "counters c and bytes_per_second, got %zu", a->n_counters);
        const gb_counter *c = gb_run_counter(a, "c");
        CHECK(c && c->values[0] == 0.3 && c->values[1] == 0.5, "counter c per repetition");
        const gb_counter *bps = gb_run_counter(a, "bytes_per_second");
        CHECK(bps && bps->values[1] == 1.4e9, "bytes_per_second is a counter");
        CHECK(gb_run_counter(a, "real_time") == NULL && gb_run_counter(a, "iterations") == NULL,
              "GB's own keys are not counters");
    }

    const gb_run *m = gb_results_find(r, "m/manual_time");
    CHECK(m && m->repetitions == 2 && m->manual_time, "manual time run");
    if (m) {
        CHECK(NEAR(m->seconds[0], 1.5e-3) && NEAR(m->seconds[1], 2.5e-6), "ms and us to s");
        const gb_counter *d = gb_run_counter(m, "d");
        CHECK(d && isnan(d->values[0]) && isnan(d->values[1]), "bare NaN and missing both read NaN");
        CHECK(strcmp(m->label, "") == 0 && strcmp(m->error_message, "") == 0, "empty strings, not NULL");
    }

    const gb_run *e = gb_results_find(r, "e/repeats:2");
    CHECK(e && e->repetitions == 2 && e->error_occurred, "error run keeps its rows");
    if (e)
        CHECK(strcmp(e->error_message, "boom \"quoted\"") == 0, "error message unescaped: %s", e->error_message);
    CHECK(gb_results_find(r, "nope") == NULL, "unknown run is NULL");

    const gb_context *cx = &r->context;
    printf("  context: host %s, %d cpus, %.0f MHz, build %s, scaling %d\n", cx->host_name, cx->num_cpus,
           cx->mhz_per_cpu, cx->library_build_type, cx->cpu_scaling_enabled);
    CHECK(strcmp(cx->host_name, "vm") == 0 && cx->num_cpus == 2 && cx->mhz_per_cpu == 2500, "context");
    CHECK(strcmp(cx->library_build_type, "debug") == 0 && cx->cpu_scaling_enabled == 0, "build type");
    CHECK(strcmp(cx->executable, "./x") == 0 && strncmp(cx->date, "2026-11-22", 10) == 0, "date, exe");
    gb_results_free(r);
}

static void expect_data_error(const char *text, const char *want)
{
    gb_results *r = (gb_results *)1;
    tb_error_clear();
    int rc = gb_results_parse(text, strlen(text), &r);
    CHECK(rc == TB_ERR_DATA && r == NULL, "expected TB_ERR_DATA for %s, got %d", text, rc);
    CHECK(strstr(tb_error_message(), want) != NULL, "message \"%s\" lacks \"%s\"", tb_error_message(), want);
    printf("  %-60s -> %s\n", text, tb_error_message());
}

static void test_bad(void)
{
    printf("files that are not GB JSON\n");
    expect_data_error("[1, 2]", "top level is an array, not an object");
    expect_data_error("{\"context\": {}}", "no \"benchmarks\" array");
    expect_data_error("{\"benchmarks\": [{\"run_name\": \"x\", \"real_time\": 1, \"time_unit\": \"fortnights\"}]}",
                      "time_unit fortnights unknown");
    expect_data_error("{\"benchmarks\": [{\"run_name\": \"x\", \"time_unit\": \"ns\"}]}", "no real_time");
    expect_data_error("{\"benchmarks\": [{\"real_time\": 1}]}", "has no run_name");
    expect_data_error("{\"benchmarks\": [3]}", "is a number, not an object");
    expect_data_error("{\"benchmarks\": [}", "line 1, column 17");

    gb_results *r = NULL;
    CHECK(gb_results_parse("{\"benchmarks\": []}", 18, &r) == TB_OK && r->n_runs == 0, "empty run list");
    CHECK(r && strcmp(r->context.host_name, "") == 0 && r->context.cpu_scaling_enabled == -1,
          "missing context gives defaults");
    gb_results_free(r);
}

static void test_file(void)
{
    printf("reading from a file, and a missing file\n");
    char path[] = "/tmp/gb_results_test_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs(doc, f);
    fclose(f);
    gb_results *r = NULL;
    tb_error_clear();
    CHECK(gb_results_read(path, &r) == TB_OK && r && r->n_runs == 3, "file reads");
    gb_results_free(r);
    remove(path);
    CHECK(gb_results_read("/nonexistent/gb.json", &r) == TB_ERR_IO && r == NULL, "missing file is TB_ERR_IO");
    tb_error_clear();
}

int main(void)
{
    test_document();
    test_bad();
    test_file();
    if (failures) {
        printf("gb_results_test: %d FAILED\n", failures);
        return 1;
    }
    printf("gb_results_test: all passed\n");
    return 0;
}
