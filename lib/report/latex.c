/*
 * latex.c - the LaTeX writer: the summary table as summary.tex (booktabs);
 * see summary.h.
 *
 * Test: bazel test //lib/report:report_test (golden: testdata/report_summary_golden.tex)
 */
#include <string.h>

#include "lib/report/summary.h"

static void tex_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': case '%': case '$': case '#': case '_': case '{': case '}':
            fputc('\\', f);
            fputc(*s, f);
            break;
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

/* Under the table, as its note: how many rows carry each flag, so a reader
 * of the paper sees them without REPORT.md. */
static void tex_counts(const tb_report_pick *picks, size_t n, FILE *f)
{
    int rows = 0, budget = 0, busy = 0, unreliable = 0, imprecise = 0;
    for (size_t i = 0; i < n; i++) {
        rows += picks[i].flags.rows;
        budget += picks[i].flags.budget;
        busy += picks[i].flags.busy;
        unreliable += picks[i].flags.unreliable;
        imprecise += picks[i].flags.imprecise;
    }
    fprintf(f, "\\par\\footnotesize Flags over the %d timed rows of the techniques above "
            "(not the waterfall's): %d stopped by the time budget, "
            "%d on a busy machine, %d unreliable (A/A interval excludes 1), %d imprecise "
            "(interval or noise floor above $\\pm$10\\%%).\n", rows, budget, busy, unreliable,
            imprecise);
}

int tb_report_summary_tex(const tb_report_pick *picks, size_t n, const char *device, FILE *f)
{
    fputs("% tunebench summary table, written by bench:report (lib/report/report.c).\n"
          "% Needs \\usepackage{booktabs}. One row per technique (and workload); the rule is in REPORT.md.\n"
          "% table* spans both columns of a two-column paper; use table in one column.\n"
          "\\begin{table*}[t]\n\\centering\n\\small\n", f);
    fputs("\\caption{Speedup of each technique over its baseline on ", f);
    tex_escape(f, device);
    fputs(" (times: medians; speedup: the Hodges-Lehmann estimate of the per-round ratios, "
          "with its 95\\% interval, where the settings were timed in interleaved rounds, else "
          "the ratio of medians).}\n"
          "\\label{tab:tunebench-summary}\n"
          "\\begin{tabular}{@{}l p{2.1cm} p{2.4cm} p{2.4cm} p{2.1cm} p{2.0cm} p{2.8cm} p{2.3cm}@{}}\n"
          "\\toprule\n", f);
    static const char *const tex_header[SUM_COLS] = {
        "Technique", "Measured at", "Baseline", "Setting shown", "Speedup [95\\% CI]", "Verdict",
        "Correctness", "Flags"};
    for (int c = 0; c < SUM_COLS; c++)
        fprintf(f, "%s%s", tex_header[c], c + 1 < SUM_COLS ? " & " : " \\\\\n\\midrule\n");
    size_t order[n ? n : 1];
    tb_report_order(picks, n, order);
    for (size_t i = 0; i < n; i++) {
        char cells[SUM_COLS][TB_REPORT_CELL];
        tb_report_group g = tb_report_pick_group(&picks[order[i]]);
        if (i == 0 || g != tb_report_pick_group(&picks[order[i - 1]]))
            fprintf(f, "%s\\multicolumn{%d}{@{}l}{\\textit{%s}} \\\\\n", i ? "\\midrule\n" : "",
                    SUM_COLS, tb_report_group_name(g));
        tb_report_summary_cells(&picks[order[i]], cells);
        for (int c = 0; c < SUM_COLS; c++) {
            tex_escape(f, cells[c]);
            fputs(c + 1 < SUM_COLS ? " & " : " \\\\\n", f);
        }
    }
    fputs("\\bottomrule\n\\end{tabular}\n", f);
    tex_counts(picks, n, f);
    fputs("\\end{table*}\n", f);
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the LaTeX table") : TB_OK;
}
