/*
 * latex.c - the LaTeX writer: the summary table as summary.tex (booktabs);
 * see summary.h.
 *
 * Test: bazel test //lib/report:report_test (golden: testdata/report_summary_golden.tex)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/report/cells.h"
#include "lib/report/summary.h"

static void tex_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': case '%': case '$': case '#': case '{': case '}':
            fputc('\\', f);
            fputc(*s, f);
            break;
        case '_': fputs("\\_\\allowbreak{}", f); break; /* large_batch_optimizers may wrap */
        case '<': fputs("$<$", f); break;
        case '>': fputs("$>$", f); break;
        case '~': fputs("\\textasciitilde{}", f); break;
        case '^': fputs("\\textasciicircum{}", f); break;
        case '\\': fputs("\\textbackslash{}", f); break;
        default:
            if (!strncmp(s, "×", strlen("×"))) {
                fputs("$\\times$", f);
                s += strlen("×") - 1;
            } else if (!strncmp(s, "≤", strlen("≤"))) {
                fputs("$\\le$", f);
                s += strlen("≤") - 1;
            } else if (!strncmp(s, "±", strlen("±"))) {
                fputs("$\\pm$", f);
                s += strlen("±") - 1;
            } else {
                fputc(*s, f);
            }
        }
    }
}

/* The flags of the shown row in a few words: "budget", "busy", "A/A",
 * and a width past TB_REPORT_IMPRECISE ("+-14%", the interval's or the
 * noise floor's, whichever is wider); the caption says what each means. */
static void tex_flags(const tb_report_pick *p, char *buf, size_t cap)
{
    const tb_result_row *r = p->best ? p->best : p->baseline;
    buf[0] = '\0';
    if (!r)
        return;
    int f = tb_report_row_flags(r);
    size_t n = 0;
    if (p->earlier[0])
        n += (size_t)snprintf(buf, cap, "earlier run");
    if (f & (TB_FLAG_BUDGET | TB_FLAG_CAP))
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "",
                              f & TB_FLAG_BUDGET ? "budget" : "cap");
    if ((f & TB_FLAG_BUSY || p->flags.busy) && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sbusy", n ? ", " : "");
    if (f & TB_FLAG_UNRELIABLE && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sA/A", n ? ", " : "");
    if (tb_report_pick_apart(p, r) && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sapart", n ? ", " : "");
    double h = tb_report_half_width(r), w = fmax(isnan(h) ? 0 : h,
                                                  isnan(r->noise_floor) ? 0 : r->noise_floor);
    if (w > TB_REPORT_IMPRECISE && n < cap) {
        char num[32];
        tb_report_num(num, sizeof num, 100 * w);
        snprintf(buf + n, cap - n, "%s±%s%%", n ? ", " : "", num);
    }
}

/* exact / within (err <= tol) / DIFFERS (err > tol) / not checked, with
 * a dagger where the loss check was weak (the caption says what it is). */
static void tex_correct(const tb_result_row *r, const tb_result_row *base, char *buf,
                        size_t cap)
{
    char e[32], t[32];
    double mine, theirs;
    if (!r) {
        snprintf(buf, cap, "--");
        return;
    }
    tb_report_num(e, sizeof e, r->max_rel_err);
    tb_report_num(t, sizeof t, r->tolerance);
    switch (r->correctness) {
    case TB_CORRECT_EXACT: snprintf(buf, cap, "exact"); break;
    case TB_CORRECT_WITHIN_TOL: snprintf(buf, cap, "%s ≤ %s", e, t); break;
    case TB_CORRECT_DIFFERS:
        if (isnan(r->max_rel_err)) /* its loss was not finite */
            snprintf(buf, cap, "DIFFERS: diverged");
        else
            snprintf(buf, cap, "DIFFERS: %s > %s", e, t);
        break;
    default:
        if (tb_report_accuracy_pair(r, base, &mine, &theirs))
            snprintf(buf, cap, "test acc. %.1f%% vs %.1f%%", mine, theirs);
        else
            snprintf(buf, cap, "not checked");
        break;
    }
    size_t n = strlen(buf);
    if (tb_report_weak_check(r) && n + 1 < cap)
        snprintf(buf + n, cap - n, "$^\\dagger$");
}

/* "within noise (MDE +-2.25%)" shortened: the verdict's name alone. */
static const char *tex_verdict(const tb_result_row *r)
{
    return r ? tb_timing_verdict_name(r->timing_verdict) : "--";
}

static const char *const group_caption[TB_GROUP_COUNT] = {
    [TB_GROUP_FASTER] = "faster", [TB_GROUP_NO_EFFECT] = "no detectable effect",
    [TB_GROUP_SLOWER] = "slower"};

/* One float of the group's rows. Raw text in cells that are TeX already
 * (the dagger) is written as it is; the rest is escaped. */
static void tex_group(const tb_report_pick *picks, const size_t *order, size_t n,
                      tb_report_group g, const char *device, int first, FILE *f)
{
    fputs("\\begin{table*}[tp]\n\\centering\n\\footnotesize\n\\setlength{\\tabcolsep}{3pt}\n",
          f);
    fputs("\\caption{", f);
    if (first) {
        fputs("Speedup of each technique's headline setting over its baseline on ", f);
        tex_escape(f, device);
        fputs(": the Hodges-Lehmann estimate of the per-round ratios, with its 95\\% interval, "
              "where the settings were timed in interleaved rounds, else the ratio of medians. "
              "Correctness: the result's largest relative error against the baseline and the "
              "tolerance; $^\\dagger$ a weak loss check, which a model predicting nothing "
              "would also pass (the first update is compared too: REPORT.md). Flags: stopped "
              "by the time budget (or the round cap), a busy machine, an A/A check whose "
              "interval excludes 1, an interval or noise floor wider than $\\pm$10\\%, a result "
              "from an earlier run than the others (earlier run), a row measured with the CPUs "
              "apart (a core-to-core round trip 3$\\times$ the run's least or more: another "
              "machine state). Medians, "
              "notes and every other setting are in REPORT.md and the CSVs", f);
    } else {
        fputs("Speedups on ", f);
        tex_escape(f, device);
        fputs(", continued (the columns of Table~\\ref{tab:tunebench-summary})", f);
    }
    fprintf(f, " --- %s.}\n", group_caption[g]);
    if (first)
        fputs("\\label{tab:tunebench-summary}\n", f);
    /* X columns share what \textwidth leaves: the table fits whatever the
     * paper's margins (pdflatex, two columns: 0.75 in and 1 in) */
    fputs("\\begin{tabularx}{\\textwidth}{@{}"
          ">{\\raggedright\\arraybackslash}X >{\\raggedright\\arraybackslash}X "
          ">{\\raggedright\\arraybackslash}X l >{\\raggedright\\arraybackslash}p{1.1cm} "
          ">{\\raggedright\\arraybackslash}p{2.0cm} >{\\raggedright\\arraybackslash}p{1.4cm}@{}}\n"
          "\\toprule\n"
          "Technique & Measured at & Shown vs baseline & Speedup [95\\% CI] & Verdict & "
          "Correctness & Flags \\\\\n\\midrule\n", f);
    for (size_t i = 0; i < n; i++) {
        const tb_report_pick *p = &picks[order[i]];
        if (tb_report_pick_group(p) != g)
            continue;
        char cells[SUM_COLS][TB_REPORT_CELL], vs[300], corr[96], flags[96];
        tb_report_summary_cells(p, cells);
        /* the workload is in the technique's cell: ", on <label>" goes */
        char *on = strstr(cells[1], ", on ");
        if (on && p->of_workload[0])
            *on = '\0';
        const tb_result_row *x = p->best, *b = p->baseline;
        snprintf(vs, sizeof vs, "%s vs %s", x ? x->setting : "--", b ? b->setting : "--");
        tex_correct(x, b, corr, sizeof corr);
        tex_flags(p, flags, sizeof flags);
        tex_escape(f, cells[0]);
        fputs(" & ", f);
        tex_escape(f, cells[1]);
        fputs(" & ", f);
        tex_escape(f, vs);
        fputs(" & ", f);
        tex_escape(f, cells[4]);
        fputs(" & ", f);
        tex_escape(f, tex_verdict(x));
        fputs(" & ", f);
        char *dag = strstr(corr, "$^\\dagger$");
        if (dag)
            *dag = '\0';
        tex_escape(f, corr);
        if (dag)
            fputs("$^\\dagger$", f);
        if (p->differs && p->differs != x) { /* the shown setting's is not the technique's */
            fputs("; ", f);
            tex_escape(f, p->differs->setting);
            fputs(" DIFFERS", f);
        }
        fputs(" & ", f);
        tex_escape(f, flags);
        fputs(" \\\\\n", f);
    }
    fputs("\\bottomrule\n\\end{tabularx}\n", f);
}

/* Under the last table: the techniques with nothing compared here, and
 * how many rows carry each flag, so a reader of the paper sees them
 * without REPORT.md. */
static void tex_notes(const tb_report_pick *picks, const size_t *order, size_t n, FILE *f)
{
    int rows = 0, budget = 0, busy = 0, unreliable = 0, imprecise = 0, na = 0;
    for (size_t i = 0; i < n; i++) {
        rows += picks[i].flags.rows;
        budget += picks[i].flags.budget;
        busy += picks[i].flags.busy;
        unreliable += picks[i].flags.unreliable;
        imprecise += picks[i].flags.imprecise;
    }
    fputs("\\par\\footnotesize ", f);
    for (size_t i = 0; i < n; i++) {
        const tb_report_pick *p = &picks[order[i]];
        if (tb_report_pick_group(p) != TB_GROUP_NA)
            continue;
        char cells[SUM_COLS][TB_REPORT_CELL];
        tb_report_summary_cells(p, cells);
        fputs(na++ ? ", " : "Not applicable here (the reasons are in REPORT.md): ", f);
        tex_escape(f, cells[0]);
    }
    fprintf(f, "%sFlags over the %d timed rows of the techniques above "
            "(not the waterfall's): %d stopped by the time budget, "
            "%d on a busy machine, %d unreliable (A/A interval excludes 1), %d imprecise "
            "(interval or noise floor above $\\pm$10\\%%).\n", na ? ". " : "", rows, budget,
            busy, unreliable, imprecise);
}

int tb_report_summary_tex(const tb_report_pick *picks, size_t n, const char *device, FILE *f)
{
    fputs("% tunebench summary tables, written by bench:report (lib/report/report.c).\n"
          "% Needs \\usepackage{booktabs,tabularx}. One row per technique (and workload); the rule is\n"
          "% in REPORT.md. One float per verdict group (faster, no detectable effect, slower),\n"
          "% each table* spanning both columns of a two-column paper (\\textwidth wide),\n"
          "% so that none is taller than a page; use table in one column.\n", f);
    size_t order[n ? n : 1];
    tb_report_order(picks, n, order);
    int present[TB_GROUP_COUNT] = {0}, first = 1, last = -1;
    for (size_t i = 0; i < n; i++)
        present[tb_report_pick_group(&picks[i])] = 1;
    for (int g = 0; g < TB_GROUP_NA; g++)
        if (present[g])
            last = g;
    for (int g = 0; g < TB_GROUP_NA; g++) {
        if (!present[g])
            continue;
        tex_group(picks, order, n, (tb_report_group)g, device, first, f);
        first = 0;
        if (g == last)
            tex_notes(picks, order, n, f);
        fputs("\\end{table*}\n", f);
    }
    if (last < 0) { /* nothing compared: the notes alone */
        fputs("\\begin{table*}[tp]\n", f);
        tex_notes(picks, order, n, f);
        fputs("\\end{table*}\n", f);
    }
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the LaTeX table") : TB_OK;
}
