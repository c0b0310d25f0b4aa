/*
 * results_test.c - pins the technique CSV schema byte for byte.
 *
 * Checks: a fixed set of rows (every verdict, an n/a row, strings with a
 * comma, quotes and a newline, integers, tiny and huge numbers) writes
 * exactly lib/report/testdata/results_golden.csv; reading the golden file back and
 * writing it again gives the same bytes; the JSON has the same rows (and
 * parses, when python3 is there); a schema-1 CSV (before the paired
 * columns) still loads; a decimal-comma locale (de_DE, built
 * with localedef when not installed) changes nothing;
 * malformed CSVs fail with the file, line and column.
 *
 * Run: bazel test //lib/report:results_test
 * After an intended schema change (update results/README.md too):
 *   TB_UPDATE_GOLDEN=$PWD/lib/report/testdata/results_golden.csv bazel run //lib/report:results_test
 */
#define _GNU_SOURCE
#include "lib/report/results.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/atomic_file.h"
#include "lib/core/testing.h"
#include "lib/report/results_testing.h"

#define GOLDEN "lib/report/testdata/results_golden.csv"
/* The golden file as it was before the paired columns (schema 1), kept
 * verbatim. */
#define SCHEMA1 "lib/report/testdata/results_schema1.csv"

static const char *DEVICE = "Intel(R) Xeon(R) Platinum 8480C";

/* A timed GELU row; the caller sets what differs. */
static tb_result_row gelu_row(const char *setting, int baseline, double elements,
                              const char *metric, double median)
{
    tb_result_row r;
    tb_test_timed_row(&r, "gelu", DEVICE, setting, baseline, "elements", elements, metric, 10,
                      median, (tb_test_spread){0.99, 1.01, 0.98, 1.05});
    r.noise_floor = 0.012;
    r.correctness = TB_CORRECT_WITHIN_TOL;
    snprintf(r.checked_against, sizeof r.checked_against, "float64 reference");
    r.tolerance = 1e-6;
    r.max_rel_err = 2.384185791015625e-07;
    snprintf(r.rate_unit, sizeof r.rate_unit, "GB/s");
    snprintf(r.ceiling_name, sizeof r.ceiling_name, "copy bandwidth");
    r.ceiling_rate = 22.1;
    r.rate = elements * 8 / (median * 1e-3) / 1e9;
    r.fraction_of_ceiling = r.rate / r.ceiling_rate;
    r.memory_bytes = elements * 8;
    return r;
}

static int build_rows(tb_results *res)
{
    tb_result_row r = gelu_row("unfused", 1, 16777216, "fwd time", 61.234567891);
    r.speedup = 1;
    r.speedup_ci_low = 0.981;
    r.speedup_ci_high = 1.019;
    r.timing_verdict = TB_TIMING_BASELINE;
    r.rounds = 12; /* the experiment's rounds, which the baseline took part in */
    snprintf(r.stopped_by, sizeof r.stopped_by, "target");
    r.load_avg = 0.12;
    TB_TRY(tb_results_add(res, &r));

    r = gelu_row("fused", 0, 16777216, "fwd time", 12.5);
    r.speedup = 61.234567891 / 12.5;
    r.speedup_ci_low = 4.81;
    r.speedup_ci_high = 4.99;
    r.timing_verdict = TB_TIMING_FASTER;
    r.rounds = 12;
    r.mde = 0.021;
    snprintf(r.stopped_by, sizeof r.stopped_by, "target");
    r.load_avg = 0.12;
    snprintf(r.note, sizeof r.note, "vectorized erf, \"poly\" variant");
    TB_TRY(tb_results_add(res, &r));

    r = gelu_row("fused", 0, 1024, "bwd time", 0.000123456789);
    r.speedup = 0.997;
    r.speedup_ci_low = 0.95;
    r.speedup_ci_high = 1.04;
    r.timing_verdict = TB_TIMING_WITHIN_NOISE;
    r.correctness = TB_CORRECT_EXACT;
    snprintf(r.checked_against, sizeof r.checked_against, "baseline");
    r.max_rel_err = 0;
    /* every flag: stopped on the budget, on a busy machine, A/A biased */
    r.rounds = 40;
    r.mde = 0.0875;
    snprintf(r.stopped_by, sizeof r.stopped_by, "budget");
    r.unreliable = 1;
    r.busy = 1;
    r.load_avg = 3.5;
    /* schema 3: a workload and its model FLOP rate against a GEMM ceiling */
    snprintf(r.workload, sizeof r.workload, "gpt2-reduced-synthetic");
    r.model_gflops = 12.5;
    r.gemm_ceiling = 100;
    r.mfu = 0.125;
    snprintf(r.note, sizeof r.note, "two lines:\nsecond line");
    TB_TRY(tb_results_add(res, &r));

    r = gelu_row("fused-bf16", 0, 67108864, "bwd time", 1.5e12 + 0.5);
    r.speedup = 0.5;
    r.speedup_ci_low = 0.45;
    r.speedup_ci_high = 0.55;
    r.timing_verdict = TB_TIMING_SLOWER;
    r.correctness = TB_CORRECT_DIFFERS;
    r.tolerance = 0.0078125;
    r.max_rel_err = 0.035;
    r.memory_bytes = NAN; /* not measured: empty */
    TB_TRY(tb_results_add(res, &r));

    return tb_results_add_na(res, "pinned_memory", "cpu", DEVICE, "pinned", "step time",
                             "no copy to a device on the CPU backend");
}

/* Writes res as CSV into a malloc'ed string. */
static char *csv_string(const tb_results *res)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (tb_results_write_csv(res, f) != TB_OK)
        printf("  write failed: %s\n", tb_error_message());
    fclose(f);
    return buf;
}

/* Prints where two strings first differ, to make a golden failure readable. */
static void show_diff(const char *want, const char *got)
{
    size_t i = 0;
    int line = 1;
    while (want[i] && want[i] == got[i])
        line += want[i++] == '\n';
    printf("  first difference at line %d, byte %zu:\n  want: %.80s\n  got:  %.80s\n", line,
           i, want + i, got + i);
}

static void test_golden(const tb_results *res)
{
    printf("CSV output matches %s byte for byte\n", GOLDEN);
    char *got = csv_string(res);
    const char *update = getenv("TB_UPDATE_GOLDEN");
    if (update) {
        CHECK(tb_atomic_write(update, got, strlen(got)) == TB_OK, "golden rewritten: %s",
              update);
    }
    char *want = slurp(update ? update : GOLDEN);
    CHECK(want != NULL, "golden file readable");
    if (want) {
        int same = strcmp(want, got) == 0;
        CHECK(same, "bytes equal (%zu bytes)", strlen(got));
        if (!same)
            show_diff(want, got);
    }
    free(want);
    free(got);
}

static void test_round_trip(void)
{
    tb_results back;
    printf("reading the golden CSV back and writing it gives the same bytes\n");
    tb_results_init(&back);
    int rc = tb_results_read_csv(GOLDEN, &back);
    CHECK(rc == TB_OK, "read (%s)", rc ? tb_error_message() : "ok");
    CHECK(back.n == 5, "5 rows (got %zu)", back.n);
    if (back.n == 5) {
        CHECK(isnan(back.rows[4].median) && back.rows[4].reps == 0, "n/a row has empty numbers");
        CHECK(strcmp(back.rows[4].note, "no copy to a device on the CPU backend") == 0,
              "n/a reason kept");
        CHECK(strcmp(back.rows[1].note, "vectorized erf, \"poly\" variant") == 0,
              "quoted comma and quotes unescaped");
        CHECK(strcmp(back.rows[2].note, "two lines:\nsecond line") == 0, "newline kept");
        CHECK(back.rows[3].correctness == TB_CORRECT_DIFFERS &&
                  back.rows[2].timing_verdict == TB_TIMING_WITHIN_NOISE,
              "verdicts parsed");
        CHECK(back.rows[0].param_value == 16777216 && back.rows[0].is_baseline == 1,
              "integers exact");
        CHECK(back.rows[1].rounds == 12 && back.rows[1].mde == 0.021 &&
                  !strcmp(back.rows[1].stopped_by, "target") && !back.rows[1].busy &&
                  !back.rows[1].unreliable && back.rows[1].load_avg == 0.12,
              "paired columns parsed (rounds, mde, stopped_by, load_avg)");
        CHECK(!strcmp(back.rows[2].workload, "gpt2-reduced-synthetic") &&
                  back.rows[2].model_gflops == 12.5 && back.rows[2].gemm_ceiling == 100 &&
                  back.rows[2].mfu == 0.125 && !back.rows[1].workload[0] &&
                  isnan(back.rows[1].mfu),
              "schema-3 columns parsed (workload, model_gflops, gemm_ceiling, mfu)");
        CHECK(back.rows[2].busy == 1 && back.rows[2].unreliable == 1 &&
                  !strcmp(back.rows[2].stopped_by, "budget") && back.rows[2].load_avg == 3.5,
              "flags parsed (busy, unreliable, stopped by budget)");
        CHECK(back.rows[4].rounds == 0 && isnan(back.rows[4].mde) &&
                  !back.rows[4].stopped_by[0] && isnan(back.rows[4].load_avg),
              "n/a row: not paired, paired columns empty");
    }
    char *again = csv_string(&back);
    char *want = slurp(GOLDEN);
    CHECK(want && strcmp(again, want) == 0, "rewrite equals the golden file");
    free(want);
    free(again);
    tb_results_free(&back);
}

/* Sets a decimal-comma locale: an installed one, or one compiled with
 * localedef into dir (Debian's minimal images ship only C and POSIX). */
static const char *set_comma_locale(const char *dir)
{
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", NULL};
    const char *got = NULL;
    char cmd[768];
    for (int i = 0; names[i] && !got; i++)
        got = setlocale(LC_ALL, names[i]);
    if (got)
        return got;
    snprintf(cmd, sizeof cmd,
             "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
    if (system(cmd) != 0)
        return NULL;
    setenv("LOCPATH", dir, 1);
    return setlocale(LC_ALL, "de_DE.UTF-8");
}

static void test_locale(const tb_results *res, const char *dir)
{
    printf("a decimal-comma locale does not change the output\n");
    const char *got_locale = set_comma_locale(dir);
    if (!got_locale) {
        printf("  skipped: no decimal-comma locale installed and localedef failed\n");
        return;
    }
    char probe[16];
    snprintf(probe, sizeof probe, "%.1f", 1.5);
    printf("  %s formats 1.5 as %s\n", got_locale, probe);
    char *got = csv_string(res);
    char *want = slurp(GOLDEN);
    CHECK(want && strcmp(got, want) == 0, "bytes equal under %s", got_locale);
    setlocale(LC_ALL, "C");
    free(got);
    free(want);
}

static void test_json(const tb_results *res, const char *dir)
{
    char path[512], cmd[1024];
    printf("JSON has the same rows\n");
    snprintf(path, sizeof path, "%s/gelu.json", dir);
    CHECK(tb_results_save_json(res, path) == TB_OK, "saved %s", path);
    char *json = slurp(path);
    CHECK(json && strstr(json, "\"schema\": \"" TB_RESULTS_SCHEMA "\""), "schema named");
    CHECK(json && strstr(json, "\"median\": null") && strstr(json, "\"is_baseline\": true"),
          "null for missing numbers, booleans for is_baseline");
    CHECK(json && strstr(json, "\"busy\": true") && strstr(json, "\"unreliable\": false") &&
              strstr(json, "\"rounds\": 40") && strstr(json, "\"stopped_by\": \"budget\""),
          "paired columns in the JSON, flags as booleans");
    CHECK(json && strstr(json, "\"note\": \"two lines:\\nsecond line\""), "strings escaped");
    free(json);
    if (system("python3 -c pass >/dev/null 2>&1") != 0) {
        printf("  skipped: python3 not found for the parse check\n");
        return;
    }
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "assert len(d[\"rows\"])==5 and len(d[\"rows\"][0])==%zu' %s",
             tb_results_ncolumns(), path);
    CHECK(system(cmd) == 0, "python3 json.load: 5 rows of %zu columns", tb_results_ncolumns());
}

/* A CSV of schema 1 (before rounds, mde, stopped_by, unreliable, busy,
 * load_avg): bench:compare merges folders from older builds, so it must
 * load, its rows unpaired and unflagged, and be written back in schema 2. */
static void test_schema1(void)
{
    tb_results old;
    printf("a schema-1 CSV (no paired columns) still loads\n");
    tb_results_init(&old);
    int rc = tb_results_read_csv(SCHEMA1, &old);
    CHECK(rc == TB_OK, "read %s (%s)", SCHEMA1, rc ? tb_error_message() : "ok");
    CHECK(old.n == 5, "5 rows (got %zu)", old.n);
    int unpaired = 1;
    for (size_t i = 0; i < old.n; i++) {
        const tb_result_row *r = &old.rows[i];
        unpaired &= r->rounds == 0 && isnan(r->mde) && !r->stopped_by[0] && !r->unreliable &&
                    !r->busy && isnan(r->load_avg);
    }
    CHECK(unpaired, "every row: rounds 0, mde and load_avg empty, no flags");
    if (old.n == 5)
        CHECK(old.rows[1].speedup_ci_low == 4.81 && old.rows[3].timing_verdict == TB_TIMING_SLOWER,
              "schema-1 columns read as before");
    char *again = csv_string(&old);
    char header[1024] = "";
    for (size_t i = 0; i < tb_results_ncolumns(); i++)
        snprintf(header + strlen(header), sizeof header - strlen(header), "%s%s", i ? "," : "",
                 tb_results_column(i));
    CHECK(again && !strncmp(again, header, strlen(header)) && strstr(header, ",load_avg"),
          "written back with the schema-2 header");
    free(again);
    tb_results_free(&old);
}

static int parse_text(const char *text, tb_results *res)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    int rc = tb_results_parse_csv(f, "bad.csv", res);
    fclose(f);
    return rc;
}

static void test_malformed(void)
{
    tb_results res;
    char *golden = slurp(GOLDEN);
    printf("malformed CSVs fail with file, line and column\n");
    tb_results_init(&res);
    tb_error_clear();
    CHECK(parse_text("technique,backend\ngelu,cpu\n", &res) == TB_ERR_DATA &&
              strstr(tb_error_message(), "bad.csv") && strstr(tb_error_message(), "missing"),
          "missing column: %s", tb_error_message());
    if (!golden)
        return;
    /* The golden header, then a row whose median is not a number. */
    char *header_end = strchr(golden, '\n');
    char *bad = malloc(strlen(golden) + 8);
    size_t hl = (size_t)(header_end - golden) + 1;
    memcpy(bad, golden, hl);
    strcpy(bad + hl, "gelu,cpu,x,unfused,1,elements,16777216,fwd time,ms,10,fast,");
    tb_error_clear();
    int rc = parse_text(bad, &res);
    CHECK(rc == TB_ERR_DATA && strstr(tb_error_message(), "bad.csv:2") &&
              strstr(tb_error_message(), "median"),
          "bad number: %s", tb_error_message());
    tb_error_clear();
    /* A count beyond an int (found by fuzz/results_csv_fuzz.c). */
    strcpy(bad + hl, "gelu,cpu,x,unfused,1,elements,16777216,fwd time,ms,1.5e12,");
    rc = parse_text(bad, &res);
    CHECK(rc == TB_ERR_DATA && strstr(tb_error_message(), "reps"),
          "reps out of an int's range: %s", tb_error_message());
    tb_error_clear();
    strcpy(bad + hl, "\"unterminated,cpu\n");
    rc = parse_text(bad, &res);
    CHECK(rc == TB_ERR_DATA, "unterminated quote: %s", tb_error_message());
    tb_error_clear();
    tb_results_free(&res);
    free(bad);
    free(golden);
}

int main(void)
{
    tb_test_verbose = 1; /* a checklist: every check printed */
    tb_results res;
    char dir[256];
    if (tb_test_tmpdir(dir, sizeof dir, "results") != 0)
        return 1;
    /* bazel run starts in the runfiles tree; the golden file is there too. */
    tb_results_init(&res);
    if (build_rows(&res) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    test_golden(&res);
    test_round_trip();
    test_schema1();
    test_locale(&res, dir);
    test_json(&res, dir);
    test_malformed();
    tb_results_free(&res);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
