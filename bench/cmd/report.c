/*
 * report.c - `bazel run //bench:report`: (re)writes REPORT.md, REPORT.html,
 * summary.md and summary.tex for results folders (lib/report/report.h).
 *
 *   bazel run //bench:report -- [--out-dir=ROOT] [--plots-dir=DIR] [RESULTS_DIR...]
 *
 * RESULTS_DIR: a device's results folder (results/<device>), results/
 * itself, or a root holding results/ (bench:all's --out-dir): every device
 * folder it holds. Without one: every folder under ROOT/results/ (ROOT as
 * for the technique binaries: --out-dir, else the source tree under bazel
 * run).
 * Relative paths are taken from the directory `bazel run` was typed in.
 * --plots-dir overrides the figures folder (default: the sibling
 * ROOT/plots/<device>/); it needs exactly one RESULTS_DIR.
 * bench:all writes the report itself at the end of a run; this binary is
 * for re-rendering after editing a plot or the report code.
 * Exit status: 0 written, 1 on an error, 2 on a bad flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cmd/cli.h"
#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/report/report.h"
#include "lib/core/status.h"

static int write_one(const char *dir, const char *plots)
{
    tb_report_folder *f = NULL;
    int rc = tb_report_load(dir, plots, &f);
    if (rc == TB_OK)
        rc = tb_report_write(f);
    if (rc == TB_OK) {
        printf("bench:report: wrote %s/REPORT.md, REPORT.html, summary.md, summary.tex\n", dir);
        printf("bench:report: findings:\n");
        rc = tb_report_print_findings(f, "  ", stdout);
    }
    tb_report_folder_free(f);
    return rc;
}

/* Every results folder that dir names (tb_report_results_folders: a
 * device's folder, results/ itself, or a root holding results/); with
 * plots, exactly one. */
static int write_named(const char *dir, const char *plots)
{
    enum { MAX_FOLDERS = 64 };
    char(*dirs)[PATH_MAX] = calloc(MAX_FOLDERS, PATH_MAX);
    int n = 0, rc;
    if (!dirs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory listing %s", dir);
    rc = tb_report_results_folders(dir, dirs[0], PATH_MAX, MAX_FOLDERS, &n);
    if (rc == TB_OK && plots && n != 1)
        rc = TB_FAIL(TB_ERR_INVALID, "--plots-dir needs one results folder; %s holds %d: name "
                     "one (results/<device>)", dir, n);
    for (int i = 0; i < n && rc == TB_OK; i++)
        rc = write_one(dirs[i], plots);
    free(dirs);
    return rc;
}

int main(int argc, char **argv)
{
    const char *out_dir = "", *plots_dir = "";
    tb_flag flags[] = {
        {"out-dir", TB_FLAG_STRING, &out_dir,
         "root holding results/ (default: the source tree under bazel run)", NULL},
        {"plots-dir", TB_FLAG_STRING, &plots_dir,
         "figures folder (default: ROOT/plots/<device>); needs one RESULTS_DIR", NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    int code = tb_cli_parse("bench:report", "[RESULTS_DIR...]",
                            "Writes REPORT.md, REPORT.html, summary.md and summary.tex for "
                            "results folders.", flags, nflags, 1, &argc, argv);
    if (code >= 0)
        return code;
    if (*plots_dir && argc != 2) {
        fprintf(stderr, "bench:report: --plots-dir needs exactly one RESULTS_DIR\n");
        return 2;
    }
    int rc = TB_OK;
    if (argc == 1) {
        char root[PATH_MAX];
        rc = tb_outdir_root(out_dir, root, sizeof root);
        if (rc == TB_OK)
            rc = write_named(root, NULL);
    }
    for (int i = 1; i < argc && rc == TB_OK; i++) {
        char dir[PATH_MAX], plots[PATH_MAX];
        tb_cli_path(argv[i], dir, sizeof dir);
        tb_cli_path(plots_dir, plots, sizeof plots);
        rc = write_named(dir, *plots_dir ? plots : NULL);
    }
    if (rc != TB_OK) {
        fprintf(stderr, "bench:report: failed\n");
        tb_error_print(stderr);
        return 1;
    }
    return 0;
}
