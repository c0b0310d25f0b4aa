/*
 * plot_test.c - renders a real plot with gnuplot and checks the files.
 *
 * Checks: the script is kept next to the images; PNG has the PNG signature
 * and a plausible size, SVG starts with <?xml or <svg, PDF with %PDF; the
 * .dat variant works; no temporaries are left; a missing gnuplot names the
 * install command; a failing gnuplot's stderr reaches the error and leaves
 * the earlier images intact; bad arguments are refused.
 *
 * Run: bazel test //lib/report:plot_test   (needs gnuplot-nox)
 */
#define _GNU_SOURCE
#include "lib/report/plot.h"
#include "lib/core/atomic_file.h"
#include "lib/core/testing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* First bytes of dir/file into buf; returns the file size or -1. */
static long head(const char *file, char *buf, size_t cap)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (stat(path, &st) != 0 || tb_read_head(path, buf, cap) < 0)
        return -1;
    return (long)st.st_size;
}

#define NPTS 9
static double xs[NPTS], fused[NPTS], unfused[NPTS], lo[NPTS], hi[NPTS];
static tb_plot_series series[2];
static tb_plot_hline ceiling = {"copy bandwidth (22.1 GB/s)", 22.1};

/* GELU-like bandwidth curves over 2^10..2^26 elements, one n/a point. */
static tb_plot make_plot(int data_file)
{
    for (int i = 0; i < NPTS; i++) {
        xs[i] = ldexp(1.0, 10 + 2 * i);
        fused[i] = 20.0 * (1 - exp(-(double)(i + 1) / 2));
        unfused[i] = fused[i] / 4;
        lo[i] = fused[i] * 0.95;
        hi[i] = fused[i] * 1.05;
    }
    unfused[3] = NAN;
    series[0] = (tb_plot_series){"fused (1 pass)", xs, fused, lo, hi, NPTS};
    series[1] = (tb_plot_series){"unfused (5 passes), it's slower", xs, unfused, NULL, NULL, NPTS};
    return (tb_plot){
        .title = "GELU forward: effective bandwidth",
        .x_label = "elements",
        .y_label = "GB/s",
        .x_log = 2,
        .series = series,
        .n_series = 2,
        .hlines = &ceiling,
        .n_hlines = 1,
        .data_file = data_file,
    };
}

static void check_images(const char *name)
{
    char buf[64], file[128];
    snprintf(file, sizeof file, "%s.png", name);
    long size = head(file, buf, sizeof buf);
    CHECK(size > 0 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0, "%s has the PNG signature", file);
    CHECK(size > 10000 && size < 5000000, "%s size plausible (%ld bytes)", file, size);
    snprintf(file, sizeof file, "%s.svg", name);
    size = head(file, buf, sizeof buf);
    CHECK(size > 1000 && (strncmp(buf, "<?xml", 5) == 0 || strncmp(buf, "<svg", 4) == 0),
          "%s starts with <?xml or <svg (%ld bytes)", file, size);
    snprintf(file, sizeof file, "%s.pdf", name);
    size = head(file, buf, sizeof buf);
    CHECK(size > 1000 && strncmp(buf, "%PDF", 4) == 0, "%s starts with %%PDF (%ld bytes)", file,
          size);
}

static void test_render(void)
{
    char buf[8192];
    printf("render inline-data plot\n");
    tb_plot p = make_plot(0);
    int rc = tb_plot_render(&p, dir, "gelu", TB_PLOT_ALL);
    CHECK(rc == TB_OK, "rendered (%s)", rc ? tb_error_message() : "ok");
    check_images("gelu");
    CHECK(head("gelu.gp", buf, sizeof buf) > 0 && strstr(buf, "$s0 << EOD") &&
              strstr(buf, "set logscale x 2") && strstr(buf, "'unfused (5 passes), it''s slower'"),
          "gelu.gp kept, with datablocks, log x and escaped titles");
    CHECK(strstr(buf, "NaN\n") != NULL, "the n/a point is NaN (a gap in the line)");
    CHECK(tb_test_count_temps(dir) == 0, "no temporaries left");

    printf("render with a .dat file, PNG only\n");
    p = make_plot(1);
    rc = tb_plot_render(&p, dir, "gelu_dat", TB_PLOT_PNG);
    CHECK(rc == TB_OK, "rendered (%s)", rc ? tb_error_message() : "ok");
    CHECK(head("gelu_dat.png", buf, sizeof buf) > 10000, "gelu_dat.png written");
    CHECK(head("gelu_dat.svg", buf, sizeof buf) < 0, "no SVG when not asked");
    CHECK(head("gelu_dat.dat", buf, sizeof buf) > 0 && strstr(buf, "# fused (1 pass)"),
          "gelu_dat.dat kept");
    CHECK(tb_test_count_temps(dir) == 0, "no temporaries left");
}

/* One point (a toggle with one setting compared): the x range is centred
 * on it with one tick, not gnuplot's +-1.5% with ticks like 0.985. */
static void test_single_x(void)
{
    char buf[8192];
    printf("render a one-point plot\n");
    static double x1[1] = {1}, y1[1] = {1.2}, l1[1] = {1.1}, h1[1] = {1.3};
    tb_plot_series s = {"speedup", x1, y1, l1, h1, 1};
    tb_plot p = {"one point", "tf32", "speedup (x)", 0, 0, &s, 1, NULL, 0, 0};
    CHECK(tb_plot_render(&p, dir, "one", TB_PLOT_PNG) == TB_OK, "rendered");
    CHECK(head("one.gp", buf, sizeof buf) > 0 && strstr(buf, "set xrange [0:2]\nset xtics (1)\n"),
          "one.gp centres the point with one tick");
    CHECK(head("gelu.gp", buf, sizeof buf) > 0 && !strstr(buf, "set xtics ("),
          "a sweep keeps gnuplot's own range");
}

/* An integer parameter (workers 0..4): whole-number ticks from the first
 * value to the last, never 1.5 workers or -1; a series' fixed style is
 * the one it gets, wherever it stands in the figure. */
static void test_integer_x(void)
{
    char buf[8192];
    printf("integer ticks and fixed styles\n");
    static double x[5] = {0, 1, 2, 3, 4}, y[5] = {1, 0.8, 0.9, 1.1, 0.85};
    tb_plot_series s = {"speedup", x, y, NULL, NULL, 5, 3};
    tb_plot p = {"workers", "workers", "speedup (x)", 0, 0, &s, 1, NULL, 0, 0};
    CHECK(tb_plot_write_script(&p, dir, "ints") == TB_OK, "written");
    CHECK(head("ints.gp", buf, sizeof buf) > 0 &&
              strstr(buf, "set xrange [-0.5:4.5]\nset xtics 0, 1, 4\n") &&
              strstr(buf, "with linespoints linestyle 3 title 'speedup'"),
          "ints.gp has whole-number ticks over the data and linestyle 3");
    CHECK(head("gelu.gp", buf, sizeof buf) > 0 && !strstr(buf, "set xtics 0, 1"),
          "a sweep of sizes keeps its log axis ticks");
}

/* Renders p as gelu with TB_GNUPLOT=gnuplot, the error chain into chain
 * (cap bytes); returns the status. */
static int render_with(const char *gnuplot, const tb_plot *p, char *chain, size_t cap)
{
    setenv("TB_GNUPLOT", gnuplot, 1);
    tb_error_clear();
    chain[0] = '\0';
    int rc = tb_plot_render(p, dir, "gelu", TB_PLOT_ALL);
    FILE *f = fmemopen(chain, cap - 1, "w");
    tb_error_print(f);
    fclose(f);
    unsetenv("TB_GNUPLOT");
    tb_error_clear();
    return rc;
}

static void test_failures(void)
{
    char before[64], after[64];
    printf("failures are clear and keep earlier images\n");
    tb_plot p = make_plot(0);
    long size_before = head("gelu.png", before, sizeof before);

    char chain[4096];
    int rc = render_with("/nonexistent/gnuplot", &p, chain, sizeof chain);
    CHECK(rc == TB_ERR_IO && strstr(chain, "apt-get install gnuplot-nox"),
          "a missing gnuplot says what to install:\n%s", chain);

    /* sh reading a gnuplot script fails with messages on stderr. */
    rc = render_with("sh", &p, chain, sizeof chain);
    CHECK(rc == TB_ERR_IO && strstr(chain, "gnuplot failed") && strstr(chain, "gelu.gp"),
          "a failing gnuplot's stderr is in the error:\n%s", chain);
    long size_after = head("gelu.png", after, sizeof after);
    CHECK(size_after == size_before && memcmp(before, after, 8) == 0, "earlier gelu.png intact");
    CHECK(tb_test_count_temps(dir) == 0, "no temporaries left");

    /* A gnuplot that exits 0 after its writes were cut short (a full
     * disk): nothing published, the earlier figure stays. */
    char fake[4200];
    snprintf(fake, sizeof fake, "%s/cut_gnuplot.sh", dir);
    FILE *f = fopen(fake, "w");
    CHECK(f && fputs("#!/bin/sh\n"
                     "gnuplot \"$@\" || exit $?\n"
                     "eval \"$2\"\n"
                     "for o in \"$tb_png\" \"$tb_svg\" \"$tb_pdf\"; do\n"
                     "  [ -n \"$o\" ] && truncate -s 200 \"$o\"\n"
                     "done\n"
                     "exit 0\n", f) >= 0 && fclose(f) == 0 && chmod(fake, 0755) == 0,
          "the cut-off gnuplot is written");
    rc = render_with(fake, &p, chain, sizeof chain);
    CHECK(rc == TB_ERR_IO && strstr(chain, "cut off"),
          "a figure cut off with exit 0 is an error:\n%s", chain);
    size_after = head("gelu.png", after, sizeof after);
    CHECK(size_after == size_before && memcmp(before, after, 8) == 0,
          "earlier gelu.png intact after a cut-off write");
    CHECK(tb_test_count_temps(dir) == 0, "no temporaries left after a cut-off write");

    /* TB_GNUPLOT=none: the script, no images, no error. */
    char probe[64];
    setenv("TB_GNUPLOT", "none", 1);
    CHECK(tb_plot_render(&p, dir, "scripts_only", TB_PLOT_ALL) == TB_OK &&
              head("scripts_only.gp", probe, sizeof probe) > 0 &&
              head("scripts_only.png", probe, sizeof probe) < 0 &&
              head("scripts_only.svg", probe, sizeof probe) < 0,
          "TB_GNUPLOT=none writes scripts_only.gp and draws nothing");
    unsetenv("TB_GNUPLOT");

    CHECK(tb_plot_render(&p, dir, "../escape", TB_PLOT_PNG) == TB_ERR_INVALID, "bad name refused");
    p.n_series = 0;
    CHECK(tb_plot_render(&p, dir, "empty", TB_PLOT_PNG) == TB_ERR_INVALID, "no series refused");
    tb_error_clear();
}

int main(void)
{
    tb_test_verbose = 1; /* a checklist: every check printed */
    if (tb_test_tmpdir(dir, sizeof dir, "plot") != 0)
        return 1;
    if (system("gnuplot --version >/dev/null 2>&1") != 0) {
        printf("FAILED: gnuplot not on PATH; install it with: apt-get install gnuplot-nox\n");
        return 1;
    }
    test_render();
    test_single_x();
    test_integer_x();
    test_failures();
    printf("images in %s\n", dir);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
