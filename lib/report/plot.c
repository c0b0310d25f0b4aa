/*
 * plot.c - writes gnuplot scripts and renders them; see plot.h.
 *
 * The script renders every format in one loop over terminals, so the plot
 * command is written once. Output names come from variables (tb_png,
 * tb_svg, tb_pdf) that default to the final names: by hand it renders in
 * place, and tunebench passes temporary names with -e and renames after.
 * Data goes into datablocks ($s0 ...) or an indexed NAME.dat; an n/a point
 * is written as NaN, which gnuplot leaves as a gap.
 *
 * Test: bazel test //lib/report:plot_test
 */
#define _GNU_SOURCE
#include "lib/report/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/atomic_file.h"
#include "lib/report/results.h"

#define INSTALL_HINT "install it with: apt-get install gnuplot-nox"

static const struct {
    tb_plot_format format;
    const char *ext;
    const char *var;
} formats_table[] = {
    {TB_PLOT_PNG, "png", "tb_png"},
    {TB_PLOT_SVG, "svg", "tb_svg"},
    {TB_PLOT_PDF, "pdf", "tb_pdf"},
};
#define N_FORMATS 3

static int render_script(const char *dir, const char *name, unsigned formats);

static int name_ok(const char *name)
{
    if (!name || !name[0] || name[0] == '.')
        return 0;
    for (const char *p = name; *p; p++) {
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *p))
            return 0;
    }
    return 1;
}

static int check_plot(const tb_plot *p, const char *name)
{
    if (!name_ok(name))
        return TB_FAIL(TB_ERR_INVALID, "bad plot name '%s': use [A-Za-z0-9._-]", name ? name : "");
    if (p->n_series == 0)
        return TB_FAIL(TB_ERR_INVALID, "plot %s has no series", name);
    for (size_t i = 0; i < p->n_series; i++) {
        const tb_plot_series *s = &p->series[i];
        if (s->n == 0 || !s->x || !s->y || (!s->y_low != !s->y_high))
            return TB_FAIL(TB_ERR_INVALID, "plot %s: series %zu (%s) has no points or half "
                           "its error bars", name, i, s->name ? s->name : "");
    }
    return TB_OK;
}

/* A gnuplot single-quoted string: only ' needs escaping (as ''); newlines
 * would end the command, so they become spaces. */
static void put_gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; s && *s; s++) {
        if (*s == '\'')
            fputs("''", f);
        else
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

static void put_number(FILE *f, double v)
{
    char buf[64];
    tb_format_number(buf, sizeof buf, v);
    /* NaN breaks the line at an n/a point; a "missing" value would join
     * its neighbours as if it had been measured. */
    fputs(buf[0] ? buf : "NaN", f);
}

/* Columns: x y [y_low y_high]. */
static void put_points(FILE *f, const tb_plot_series *s)
{
    for (size_t i = 0; i < s->n; i++) {
        put_number(f, s->x[i]);
        fputc(' ', f);
        put_number(f, s->y[i]);
        if (s->y_low) {
            fputc(' ', f);
            put_number(f, s->y_low[i]);
            fputc(' ', f);
            put_number(f, s->y_high[i]);
        }
        fputc('\n', f);
    }
}

static void put_axis(FILE *f, char axis, const char *label, int log_base)
{
    if (label) {
        fprintf(f, "set %clabel ", axis);
        put_gp_string(f, label);
        fputc('\n', f);
    }
    if (log_base > 1)
        fprintf(f, "set logscale %c %d\n", axis, log_base);
    if (log_base == 2) /* sizes read best as powers of two */
        fprintf(f, "set format %c '2^%%L'\n", axis);
}

/* All points at one x (a toggle with one setting compared, tf32 = 1):
 * gnuplot would span x +- 1.5% with ticks like 0.985; centre the point
 * with a single tick at its value instead. */
static void put_single_x(FILE *f, const tb_plot *p)
{
    double x = NAN;
    for (size_t i = 0; i < p->n_series; i++)
        for (size_t k = 0; k < p->series[i].n; k++) {
            double v = p->series[i].x[k];
            if (isnan(v))
                continue;
            if (!isnan(x) && v != x)
                return;
            x = v;
        }
    if (isnan(x) || p->x_log)
        return;
    double half = x != 0 ? fabs(x) : 1.0;
    fputs("set xrange [", f);
    put_number(f, x - half);
    fputc(':', f);
    put_number(f, x + half);
    fputs("]\nset xtics (", f);
    put_number(f, x);
    fputs(")\n", f);
}

const char *const tb_plot_colors[8] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                       "#e69f00", "#56b4e9", "#f0e442", "#000000"};

/* An integer parameter (workers, ranks, prefetch depth) on a linear axis:
 * ticks at whole numbers only, never "1.5 workers". */
static void put_integer_x(FILE *f, const tb_plot *p)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < p->n_series; i++)
        for (size_t k = 0; k < p->series[i].n; k++) {
            double v = p->series[i].x[k];
            if (isnan(v))
                continue;
            if (v != floor(v))
                return;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
    if (p->x_log || !(hi > lo))
        return;
    double step = fmax(1, ceil((hi - lo) / 10));
    /* the range ends half a step past the data: no tick at -1 workers */
    fprintf(f, "set xrange [%g:%g]\nset xtics %g, %g, %g\nset mxtics 1\nset format x '%%.0f'\n",
            lo - step / 2, hi + step / 2, lo, step, hi);
}

/* The one plot command, all series and reference lines. */
static void put_plot_command(FILE *f, const tb_plot *p, const char *name)
{
    fputs("        plot \\\n", f);
    for (size_t i = 0; i < p->n_series; i++) {
        const tb_plot_series *s = &p->series[i];
        if (p->data_file)
            fprintf(f, "            '%s.dat' index %zu", name, i);
        else
            fprintf(f, "            $s%zu", i);
        if (s->y_low)
            fputs(" using 1:2:3:4 with yerrorlines", f);
        else
            fputs(" using 1:2 with linespoints", f);
        if (s->style > 0)
            fprintf(f, " linestyle %d title ", (s->style - 1) % 8 + 1);
        else
            fprintf(f, " linestyle %zu title ", i % 8 + 1);
        put_gp_string(f, s->name ? s->name : "");
        fputs(i + 1 < p->n_series || p->n_hlines ? ", \\\n" : "\n", f);
    }
    for (size_t i = 0; i < p->n_hlines; i++) {
        fputs("            ", f);
        put_number(f, p->hlines[i].y);
        fputs(" with lines dashtype 2 linewidth 1.5 linecolor rgb 'gray30' title ", f);
        put_gp_string(f, p->hlines[i].name ? p->hlines[i].name : "");
        fputs(i + 1 < p->n_hlines ? ", \\\n" : "\n", f);
    }
}

static void put_data(FILE *f, const tb_plot *p)
{
    for (size_t i = 0; i < p->n_series; i++) {
        fprintf(f, "$s%zu << EOD\n", i);
        put_points(f, &p->series[i]);
        fputs("EOD\n", f);
    }
}

/* Datasets separated by two blank lines, addressed with `index`. */
static int write_data_file(const tb_plot *p, const char *dir, const char *name)
{
    char path[PATH_MAX];
    tb_atomic_file af;
    snprintf(path, sizeof path, "%s/%s.dat", dir, name);
    TB_TRY(tb_atomic_open(&af, path));
    for (size_t i = 0; i < p->n_series; i++) {
        fprintf(af.fp, "%s# ", i ? "\n\n" : "");
        fputs(p->series[i].name ? p->series[i].name : "", af.fp);
        fputs(p->series[i].y_low ? "\n# x y y_low y_high\n" : "\n# x y\n", af.fp);
        put_points(af.fp, &p->series[i]);
    }
    return tb_atomic_commit(&af);
}

/* The opening every script shares: how to re-render it, the output names. */
static void put_preamble(FILE *f, const char *name)
{
    fprintf(f, "# %s.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:\n"
               "#     cd <this directory> && gnuplot %s.gp\n"
               "# Set tb_png, tb_svg or tb_pdf (gnuplot -e \"tb_pdf=''\" ...) to change an\n"
               "# output name; an empty name skips that format.\n",
            name, name);
    for (int i = 0; i < N_FORMATS; i++)
        fprintf(f, "if (!exists(\"%s\")) %s = '%s.%s'\n", formats_table[i].var,
                formats_table[i].var, name, formats_table[i].ext);
    fputs("set encoding utf8\n", f);
}

/* The loop over terminals (PNG, SVG, PDF at w x h pixels; the PDF at the
 * same aspect), with draw() writing the plot commands inside it. */
static void put_terminals(FILE *f, int w, int h, void (*draw)(FILE *, const void *),
                          const void *arg)
{
    fprintf(f,
            "do for [tb_i = 1:3] {\n"
            "    tb_out = (tb_i == 1 ? tb_png : tb_i == 2 ? tb_svg : tb_pdf)\n"
            "    if (tb_out ne '') {\n"
            "        if (tb_i == 1) { set terminal pngcairo size %d,%d noenhanced font 'Sans,12' }\n"
            "        if (tb_i == 2) { set terminal svg size %d,%d noenhanced font 'Sans,12' }\n"
            "        if (tb_i == 3) { set terminal pdfcairo size 8in,%.2fin noenhanced font 'Sans,10' }\n"
            "        set output tb_out\n",
            w, h, w, h, 8.0 * h / w);
    draw(f, arg);
    fputs("        unset output\n    }\n}\n", f);
}

typedef struct generic_draw {
    const tb_plot *p;
    const char *name;
} generic_draw;

static void draw_generic(FILE *f, const void *arg)
{
    const generic_draw *g = arg;
    put_plot_command(f, g->p, g->name);
}

static void put_script(FILE *f, const tb_plot *p, const char *name)
{
    put_preamble(f, name);
    if (!p->data_file)
        put_data(f, p);
    if (p->title) {
        fputs("set title ", f);
        put_gp_string(f, p->title);
        fputc('\n', f);
    }
    put_axis(f, 'x', p->x_label, p->x_log);
    put_axis(f, 'y', p->y_label, p->y_log);
    put_single_x(f, p);
    put_integer_x(f, p);
    /* Offsets keep the first and last points off the frame. */
    fputs("set grid\nset key top left box opaque\nset errorbars small\n"
          "set offsets graph 0.03, graph 0.03, graph 0.05, 0\n", f);
    tb_plot_put_styles(f);
    generic_draw g = {p, name};
    put_terminals(f, 1200, 800, draw_generic, &g);
}

void tb_plot_put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

void tb_plot_put_styles(FILE *f)
{
    /* Colour-blind safe (Okabe-Ito), distinguishable in grey by point type. */
    for (int i = 0; i < 8; i++)
        fprintf(f, "set style line %d linecolor rgb '%s' linewidth 2 pointtype %d pointsize 1\n",
                i + 1, tb_plot_colors[i], 5 + 2 * (i % 4));
}

int tb_plot_write_script(const tb_plot *p, const char *dir, const char *name)
{
    char path[PATH_MAX];
    tb_atomic_file af;
    TB_TRY(check_plot(p, name));
    if (p->data_file)
        TB_TRY(write_data_file(p, dir, name));
    if (snprintf(path, sizeof path, "%s/%s.gp", dir, name) >= (int)sizeof path)
        return TB_FAIL(TB_ERR_INVALID, "path too long: %s/%s.gp", dir, name);
    TB_TRY(tb_atomic_open(&af, path));
    put_script(af.fp, p, name);
    return tb_atomic_commit(&af);
}

/* ---- running gnuplot ---- */

/* In the child: run gnuplot in dir with stderr into errfd. Never returns. */
static void exec_gnuplot(const char *bin, const char *dir, const char *defs, const char *script,
                         int errfd)
{
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
    }
    dup2(errfd, STDERR_FILENO);
    if (chdir(dir) != 0) {
        fprintf(stderr, "cannot enter %s: %s\n", dir, strerror(errno));
        _exit(126);
    }
    execlp(bin, bin, "-e", defs, script, (char *)NULL);
    fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* Reads everything from fd into buf (cap bytes, truncated, NUL-ended). */
static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t got;
    char sink[512];
    while ((got = read(fd, n + 1 < cap ? buf + n : sink,
                       n + 1 < cap ? cap - 1 - n : sizeof sink)) > 0 ||
           (got < 0 && errno == EINTR)) {
        if (got > 0 && n + 1 < cap)
            n += (size_t)got;
    }
    /* gnuplot's messages end in newlines; the error chain adds its own. */
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
}

/* Runs gnuplot; on failure the error carries its stderr. */
static int run_gnuplot(const char *dir, const char *name, const char *defs)
{
    const char *bin = getenv("TB_GNUPLOT");
    char script[PATH_MAX], err[2048];
    int pipefd[2], status = 0;
    if (!bin || !bin[0])
        bin = "gnuplot";
    snprintf(script, sizeof script, "%s.gp", name);
    if (pipe(pipefd) != 0)
        return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot run gnuplot");
    fflush(NULL); /* or the child's exit would flush our buffers twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot run gnuplot");
    }
    if (pid == 0) {
        close(pipefd[0]);
        exec_gnuplot(bin, dir, defs, script, pipefd[1]);
    }
    close(pipefd[1]);
    read_all(pipefd[0], err, sizeof err);
    close(pipefd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return TB_FAIL(TB_ERR_IO, "gnuplot not found (%s); %s", err, INSTALL_HINT);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return TB_FAIL(TB_ERR_IO, "gnuplot failed on %s/%s (exit %d): %s", dir, script,
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
    return TB_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* 1 if path is a non-empty regular file. */
static int has_content(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* 1 if the file at path ends as a whole file of its format does: PNG's
 * IEND chunk, SVG's closing tag, PDF's %%EOF near its end. gnuplot exits
 * 0 after a write that failed (a full disk), and a cut-off figure must not
 * be published under its final name. */
static int looks_whole(const char *path, const char *ext)
{
    unsigned char tail[1024];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    long n = 0;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0) {
        long k = n < (long)sizeof tail ? n : (long)sizeof tail;
        if (fseek(f, n - k, SEEK_SET) != 0 || fread(tail, 1, (size_t)k, f) != (size_t)k)
            n = 0;
        else
            n = k;
    }
    fclose(f);
    if (n <= 0)
        return 0;
    if (!strcmp(ext, "png")) {
        static const unsigned char iend[8] = {'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
        return n >= 8 && memcmp(tail + n - 8, iend, 8) == 0;
    }
    const char *mark = !strcmp(ext, "svg") ? "</svg>" : !strcmp(ext, "pdf") ? "%%EOF" : NULL;
    if (!mark)
        return 1;
    size_t m = strlen(mark);
    for (long i = n - (long)m; i >= 0; i--)
        if (memcmp(tail + i, mark, m) == 0)
            return 1;
    return 0;
}

int tb_plot_write_custom(const tb_plot_custom *c, const char *dir, const char *name)
{
    char path[PATH_MAX];
    tb_atomic_file af;
    if (!name_ok(name))
        return TB_FAIL(TB_ERR_INVALID, "bad plot name '%s': use [A-Za-z0-9._-]", name ? name : "");
    if (snprintf(path, sizeof path, "%s/%s.gp", dir, name) >= (int)sizeof path)
        return TB_FAIL(TB_ERR_INVALID, "path too long: %s/%s.gp", dir, name);
    TB_TRY(tb_atomic_open(&af, path));
    put_preamble(af.fp, name);
    tb_plot_put_styles(af.fp);
    c->setup(af.fp, c->arg);
    put_terminals(af.fp, c->width_px > 0 ? c->width_px : 1200,
                  c->height_px > 0 ? c->height_px : 800, c->draw, c->arg);
    return tb_atomic_commit(&af);
}

int tb_plot_render(const tb_plot *p, const char *dir, const char *name, unsigned formats)
{
    TB_TRY(tb_plot_write_script(p, dir, name));
    return render_script(dir, name, formats);
}

int tb_plot_render_custom(const tb_plot_custom *c, const char *dir, const char *name,
                          unsigned formats)
{
    TB_TRY(tb_plot_write_custom(c, dir, name));
    return render_script(dir, name, formats);
}

/* Runs dir/NAME.gp into temporary names and renames them into place. */
static int render_script(const char *dir, const char *name, unsigned formats)
{
    char finals[N_FORMATS][PATH_MAX], tmps[N_FORMATS][PATH_MAX], defs[N_FORMATS * 160];
    int rc = TB_OK, reserved = 0;
    size_t dl = 0;
    const char *bin = getenv("TB_GNUPLOT");
    if (bin && strcmp(bin, "none") == 0)
        return TB_OK; /* scripts only: `gnuplot NAME.gp` draws them later */
    for (int i = 0; i < N_FORMATS; i++) {
        int want = (formats & formats_table[i].format) != 0;
        snprintf(finals[i], sizeof finals[i], "%s/%s.%s", dir, name, formats_table[i].ext);
        tmps[i][0] = '\0';
        if (want)
            TB_TRY_GOTO(rc, tb_atomic_reserve(finals[i], tmps[i], sizeof tmps[i]), out_remove_tmps);
        reserved = i + 1;
        /* Temporary names are NAME.ext.tmp.PID.XXXXXX: no quotes to escape. */
        dl += (size_t)snprintf(defs + dl, sizeof defs - dl, "%s='%s'; ", formats_table[i].var,
                               want ? base_name(tmps[i]) : "");
    }
    TB_TRY_GOTO(rc, run_gnuplot(dir, name, defs), out_remove_tmps);
    for (int i = 0; i < N_FORMATS; i++) {
        if (tmps[i][0] && !has_content(tmps[i])) {
            rc = TB_FAIL(TB_ERR_IO, "gnuplot wrote nothing for %s (is the disk full?)",
                         finals[i]);
            goto out_remove_tmps;
        }
        if (tmps[i][0] && !looks_whole(tmps[i], formats_table[i].ext)) {
            rc = TB_FAIL(TB_ERR_IO, "gnuplot wrote %s cut off (is the disk full?): not "
                         "published; the earlier figure, if any, stays", finals[i]);
            goto out_remove_tmps;
        }
    }
    for (int i = 0; i < N_FORMATS; i++) {
        if (!tmps[i][0])
            continue;
        TB_TRY_GOTO(rc, tb_atomic_publish(tmps[i], finals[i]), out_remove_tmps);
        tmps[i][0] = '\0';
    }
    return TB_OK;

out_remove_tmps:
    for (int i = 0; i < reserved; i++) {
        if (tmps[i][0])
            unlink(tmps[i]);
    }
    return TB_FAIL(rc, "cannot render plot %s/%s", dir, name);
}
