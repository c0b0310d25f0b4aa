/*
 * compare_test.c - bench:compare's merge on two results folders built here
 * (rows saved with lib/report/results.h, fingerprints that differ in one library):
 * the merged CSV's rows and normalization, per-dollar and per-watt numbers
 * for samples/s rates and n/a (with reason) for others, the software
 * warning, the side-by-side figures, and a self-contained COMPARE.html.
 * The second machine's CSVs are schema 1 (written before the paired
 * columns, by an older build): the merge reads them all the same.
 *
 * bazel test //lib/report:compare_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/report/compare.h"
#include "lib/report/results_testing.h"
#include "lib/core/testing.h"

static void row(tb_results *res, const char *tech, const char *setting, int base, double batch,
                double ms, double speedup, const char *rate_unit)
{
    tb_result_row r;
    tb_test_timed_row(&r, tech, "CPU", setting, base, "batch", batch, "step time", 5, ms,
                      (tb_test_spread){0.98, 1.02, 0.97, 1.05});
    r.timing_verdict = base ? TB_TIMING_BASELINE : TB_TIMING_FASTER;
    if (!base) {
        r.speedup = speedup;
        r.speedup_ci_low = speedup * 0.97;
        r.speedup_ci_high = speedup * 1.03;
    }
    r.rate = strcmp(rate_unit, "samples/s") == 0 ? batch / (ms * 1e-3) : 10.0 / ms;
    snprintf(r.rate_unit, sizeof r.rate_unit, "%s", rate_unit);
    tb_results_add(res, &r);
}

/* One machine: root/results/<slug>/ with two techniques; scale: how many
 * times slower than machine 1. */
static void make_machine(const char *root, const char *slug, double scale, const char *onednn)
{
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/results/%s", root, slug);
    CHECK_OK(tb_mkdir_p(dir));
    tb_results a, b;
    tb_results_init(&a), tb_results_init(&b);
    for (int i = 0; i < 2; i++) {
        double batch = i ? 256 : 64;
        row(&a, "loader", "workers=0", 1, batch, 40 * scale * (i + 1), NAN, "samples/s");
        row(&a, "loader", "workers=4", 0, batch, 10 * scale * (i + 1), 4.0, "samples/s");
        row(&b, "gelu", "unfused", 1, batch, 8 * scale, NAN, "GB/s");
        row(&b, "gelu", "fused", 0, batch, 2 * scale, 4.0, "GB/s");
    }
    snprintf(path, sizeof path, "%s/loader.csv", dir);
    CHECK_OK(tb_results_save_csv(&a, path));
    snprintf(path, sizeof path, "%s/gelu.csv", dir);
    CHECK_OK(tb_results_save_csv(&b, path));
    tb_results_free(&a), tb_results_free(&b);
    tb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    tb_fingerprint_set(&fp, "device.backend", "cpu");
    tb_fingerprint_set(&fp, "device.name", "CPU");
    tb_fingerprint_set_number(&fp, "device.threads", scale > 1 ? 1 : 2);
    tb_fingerprint_set(&fp, "software.onednn", onednn);
    snprintf(path, sizeof path, "%s/fingerprint.json", dir);
    CHECK_OK(tb_fingerprint_save(&fp, path));
}

/* A technique on two workloads (rows in the order given), for the
 * workload-matching check: base and variant times per workload. */
static void make_two_workloads(const char *root, const char *const wl[2],
                               const double ms[2][2], double threads)
{
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/results/cpu-test", root);
    CHECK_OK(tb_mkdir_p(dir));
    tb_results a;
    tb_results_init(&a);
    for (int w = 0; w < 2; w++)
        for (int base = 1; base >= 0; base--) {
            tb_result_row r;
            tb_test_timed_row(&r, "amp", "CPU", base ? "fp32" : "bf16", base, "amp", !base,
                              "step time", 5, ms[w][!base], (tb_test_spread){0.98, 1.02, 0.97, 1.05});
            r.timing_verdict = base ? TB_TIMING_BASELINE : TB_TIMING_FASTER;
            if (!base) {
                r.speedup = ms[w][0] / ms[w][1];
                r.speedup_ci_low = r.speedup * 0.97;
                r.speedup_ci_high = r.speedup * 1.03;
            }
            snprintf(r.workload, sizeof r.workload, "%s", wl[w]);
            /* a step technique's throughput: 64 images or 4096 tokens a step */
            int gpt = strncmp(wl[w], "gpt2", 4) == 0;
            r.rate = (gpt ? 4096 : 64) / (ms[w][!base] * 1e-3);
            snprintf(r.rate_unit, sizeof r.rate_unit, "%s", gpt ? "tokens/s" : "images/s");
            tb_results_add(&a, &r);
        }
    snprintf(path, sizeof path, "%s/amp.csv", dir);
    CHECK_OK(tb_results_save_csv(&a, path));
    tb_results_free(&a);
    tb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    tb_fingerprint_set(&fp, "device.backend", "cpu");
    tb_fingerprint_set(&fp, "device.name", "CPU");
    tb_fingerprint_set_number(&fp, "device.threads", threads);
    snprintf(path, sizeof path, "%s/fingerprint.json", dir);
    CHECK_OK(tb_fingerprint_save(&fp, path));
}

/* A technique measured on two workloads is compared workload for workload:
 * machine 2 lists them in the other order and is 2x slower on one, 3x on
 * the other, so its speed at the reference's pick says which row it took
 * (schema 1 took the first row of the same setting and point, whatever its
 * workload). */
static void test_workloads(const char *tmp)
{
    char r1[4096], r2[4096], out[4096];
    snprintf(r1, sizeof r1, "%s/cmp_wl/run1", tmp);
    snprintf(r2, sizeof r2, "%s/cmp_wl/run2", tmp);
    snprintf(out, sizeof out, "%s/cmp_wl/out", tmp);
    static const char *const wl1[2] = {"resnet50-x", "gpt2-x"}, *const wl2[2] = {"gpt2-x",
                                                                                   "resnet50-x"};
    const double ms1[2][2] = {{40, 20}, {100, 80}}, ms2[2][2] = {{300, 240}, {80, 40}};
    make_two_workloads(r1, wl1, ms1, 2);
    make_two_workloads(r2, wl2, ms2, 1);
    static tb_cmp_set s;
    CHECK_OK(tb_compare_add_dir(&s, r1));
    CHECK_OK(tb_compare_add_dir(&s, r2));
    double price[2] = {1.0, 1.0};
    CHECK_OK(tb_compare_set_prices(&s, TB_PRICE_PER_HOUR, price, 2));
    CHECK_OK(tb_compare_write(&s, out));
    tb_compare_free(&s);
    char *csv = tb_test_slurp(out, "compare.csv");
    CHECK(csv && strstr(csv, ",rate_per_watt,workload\n"));
    /* images/s and tokens/s are throughputs: per dollar, as samples/s (the
     * reference's pick: bf16 on resnet50-x, 20 ms, 3200 images/s, or on
     * gpt2-x, 80 ms, 51200 tokens/s; an hour at $1) */
    CHECK(csv && (strstr(csv, ",3200,images/s,1,per_hour,,11520000,,resnet50-x\n") ||
                  strstr(csv, ",51200,tokens/s,1,per_hour,,184320000,,gpt2-x\n")));
    /* machine 2's row: its workload's own slowdown (0.5 on resnet50-x, 1/3 on gpt2-x) */
    const char *m2 = csv ? strstr(csv, "amp,#2 CPU") : NULL;
    const char *eol = m2 ? strchr(m2, '\n') : NULL;
    char line[1024] = "";
    if (m2 && eol && (size_t)(eol - m2) < sizeof line)
        memcpy(line, m2, (size_t)(eol - m2));
    int on_resnet = strstr(line, ",resnet50-x") != NULL, on_gpt2 = strstr(line, ",gpt2-x") != NULL;
    CHECK(on_resnet != on_gpt2);
    CHECK(on_resnet ? strstr(line, ",0.5,") != NULL : strstr(line, ",0.333333,") != NULL);
    free(csv);
    char *md = tb_test_slurp(out, "COMPARE.md");
    CHECK(md && (strstr(md, "| amp | bf16, step time, amp = 1, on resnet50-x |") ||
                 strstr(md, "| amp | bf16, step time, amp = 1, on gpt2-x |")));
    free(md);
}

/* Rewrites the CSV at path as schema 1 wrote it: without its last eleven
 * columns (rounds .. load_avg of schema 2, workload .. mfu of schema 3,
 * xcore_ns of schema 4). The rows here quote nothing, so a field
 * ends at each comma. */
static void to_schema1(const char *path)
{
    /* Room for a newline added to a last line without one, and the NUL the
     * strstr checks below need. */
    char *text = slurp(path), *out = text ? malloc(strlen(text) + 2) : NULL;
    CHECK(text && out);
    if (!text || !out) {
        free(text);
        free(out);
        return;
    }
    size_t n = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        size_t keep = len;
        for (int commas = 0; keep > 0 && commas < 11; keep--)
            commas += line[keep - 1] == ',';
        memcpy(out + n, line, keep);
        n += keep;
        out[n++] = '\n';
        line = end ? end + 1 : line + len;
    }
    out[n] = '\0';
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(out, 1, n, f) == n && fclose(f) == 0);
    CHECK(strncmp(out, "technique,", 10) == 0 && !strstr(out, "rounds") &&
          strstr(out, ",memory_bytes,note\n"));
    free(text);
    free(out);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char r1[4096], r2[4096], out[4096], path[4200];
    snprintf(r1, sizeof r1, "%s/cmp/run1", tmp ? tmp : "/tmp");
    snprintf(r2, sizeof r2, "%s/cmp/run2", tmp ? tmp : "/tmp");
    snprintf(out, sizeof out, "%s/cmp/out", tmp ? tmp : "/tmp");
    make_machine(r1, "cpu-test", 1.0, "2.6.3");
    make_machine(r2, "cpu-test", 2.0, "3.0.0");
    snprintf(path, sizeof path, "%s/results/cpu-test/loader.csv", r2);
    to_schema1(path);
    snprintf(path, sizeof path, "%s/results/cpu-test/gelu.csv", r2);
    to_schema1(path);

    /* machine 1 ran on a GPU: its telemetry holds NVML's power samples */
    snprintf(path, sizeof path, "%s/results/cpu-test/telemetry.json", r1);
    FILE *tf = fopen(path, "w");
    CHECK(tf && fputs("{\"segments\": [{\"label\": \"a\", \"gpu_power_w_max\": 250.5}, "
                      "{\"label\": \"b\", \"gpu_power_w_max\": 310}, {\"label\": \"c\"}]}\n",
                      tf) >= 0 && fclose(tf) == 0);

    static tb_cmp_set s;
    CHECK_OK(tb_compare_add_dir(&s, r1));  /* a root holding results/ */
    CHECK(s.m[0].power_w == 310 && strstr(s.m[0].power_src, "NVML"));
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/results/cpu-test", r2);
    CHECK_OK(tb_compare_add_dir(&s, sub)); /* a results folder itself */
    CHECK(s.n == 2);
    {
        /* results/ itself (its device folders), and a folder with none */
        static tb_cmp_set t;
        snprintf(sub, sizeof sub, "%s/results", r2);
        CHECK_OK(tb_compare_add_dir(&t, sub));
        CHECK(t.n == 1 && strstr(t.m[0].dir, "/results/cpu-test"));
        snprintf(sub, sizeof sub, "%s/results/cpu-test/no-such", r2);
        CHECK(tb_compare_add_dir(&t, sub) == TB_ERR_IO && t.n == 1);
        tb_error_clear();
        /* the same folder again, by another path: refused, not a second machine */
        snprintf(sub, sizeof sub, "%s/results/./cpu-test", r2);
        CHECK(tb_compare_add_dir(&t, sub) == TB_ERR_INVALID && t.n == 1 &&
                  strstr(tb_error_message(), "given twice"),
              "%s", tb_error_message());
        tb_error_clear();
        tb_compare_free(&t);
    }
    CHECK(isnan(s.m[1].power_w)); /* no telemetry: nothing measured */
    double price[2] = {2.0, 1.0}, power[2] = {200, 100}, bad[1] = {1};
    CHECK(tb_compare_set_prices(&s, TB_PRICE_PER_HOUR, bad, 1) == TB_ERR_INVALID);
    tb_error_clear();
    CHECK_OK(tb_compare_set_prices(&s, TB_PRICE_PER_HOUR, price, 2));
    CHECK_OK(tb_compare_set_power(&s, power, 2));
    CHECK(strstr(s.m[0].label, "(2 threads)") && strstr(s.m[1].label, "(1 threads)"));
    CHECK(tb_compare_seconds(1500, "us") == 1.5e-3 && isnan(tb_compare_seconds(1, "h")));
    CHECK_OK(tb_compare_write(&s, out));
    tb_compare_free(&s);

    char *csv = tb_test_slurp(out, "compare.csv");
    if (csv) {
        int lines = 0;
        for (char *p = csv; *p; p++)
            lines += *p == '\n';
        CHECK(lines == 1 + 2 * 2); /* header + 2 techniques x 2 machines */
        /* loader at the reference's best (workers=4, batch 256): machine 2
         * is twice as slow: speed 0.5; 256 / 0.04 s = 6400 samples/s, per
         * dollar 6400 * 3600 / 1 and per watt 6400 / 100 = 64. */
        CHECK(strstr(csv, "loader,#2 CPU (1 threads),CPU,0,workers=4,step time,batch,256,ms,40,"));
        CHECK(strstr(csv, ",0.5,0.480392,0.520408,workers=4,4,6400,samples/s,1,per_hour,100,"
                          "23040000,64,\n"));
        CHECK(strstr(csv, "loader,#1 CPU (2 threads),CPU,1,workers=4,step time,batch,256,ms,20,"));
        /* GB/s rows: no per-dollar or per-watt number */
        CHECK(strstr(csv, ",GB/s,1,per_hour,100,,,\n")); /* and no workload: none trains */
    }
    free(csv);

    char *md = tb_test_slurp(out, "COMPARE.md");
    if (md) {
        CHECK(strstr(md, "Warning: software stacks differ"));
        CHECK(strstr(md, "software.onednn: 2.6.3 -> 3.0.0"));
        /* each machine's own point, and the speed ratio's interval from the
         * two medians' intervals */
        CHECK(strstr(md, "| loader | workers=4, step time, batch = 256 | workers=4: 4.00× [3.88, "
                         "4.12] (faster) at batch = 256 | 1.00× [0.961, 1.04] the reference's "
                         "speed | workers=4: 4.00× [3.88, 4.12] (faster) at batch = 256 | 0.500× "
                         "[0.480, 0.520] the reference's speed |"));
        CHECK(strstr(md, "n/a: rate is GB/s, not a training throughput"));
        CHECK(strstr(md, "6400000 samples per $") == NULL); /* 2.3e7: per hour, machine 2 */
        CHECK(strstr(md, "2.3e+07 samples per $"));
        CHECK(strstr(md, "64.0 samples/s per W (power: given with --power)"));
        /* at a glance first: the forest plot of both machines, side by side */
        const char *glance = strstr(md, "## At a glance"), *machines = strstr(md, "## Machines");
        CHECK(glance && machines && glance < machines &&
              strstr(glance, "![forest plot of every machine side by side]"
                             "(plots/forest_compare.png)"));
    }
    free(md);
    static const char *const figs[] = {"loader_compare_speedup", "loader_compare_vs_reference",
                                       "gelu_compare_speedup"};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            static const char *const ext[3] = {"png", "svg", "pdf"};
            snprintf(path, sizeof path, "%s/plots/%s.%s", out, figs[i], ext[k]);
            CHECK(access(path, R_OK) == 0);
        }
    /* one column per machine in the forest's script, both machines named */
    char *gp = tb_test_slurp(out, "plots/forest_compare.gp");
    CHECK(gp && strstr(gp, "$f1_0 << EOD") && strstr(gp, "$f1_1 << EOD") &&
          strstr(gp, "\"#1 CPU (2 threads)\"") && strstr(gp, "\"#2 CPU (1 threads)\""));
    free(gp);
    char *html = tb_test_slurp(out, "COMPARE.html");
    if (html) {
        CHECK(strstr(html, "src=\"data:image/png;base64,iVBORw0KGgo"));
        CHECK(!strstr(html, "http://") && !strstr(html, "https://") && !strstr(html, "href="));
    }
    free(html);
    test_workloads(tmp ? tmp : "/tmp");
    if (failures) {
        fprintf(stderr, "compare_test: %d failures\n", failures);
        return 1;
    }
    printf("compare_test: ok\n");
    return 0;
}
