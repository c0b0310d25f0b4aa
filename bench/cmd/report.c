/*
 * report.c - `bazel run //bench:report`: (re)writes REPORT.md, REPORT.html,
 * summary.md and summary.tex for results folders (lib/report/report.h).
 *
 *   bazel run //bench:report -- [--out-dir=ROOT] [--plots-dir=DIR] [RESULTS_DIR...]
 *
 * Without RESULTS_DIR: every folder under ROOT/results/ (ROOT as for the
 * technique binaries: --out-dir, else the source tree under bazel run).
 * Relative paths are taken from the directory `bazel run` was typed in.
 * --plots-dir overrides the figures folder (default: the sibling
 * ROOT/plots/<device>/); it needs exactly one RESULTS_DIR.
 * bench:all writes the report itself at the end of a run; this binary is
 * for re-rendering after editing a plot or the report code.
 * Exit status: 0 written, 1 on an error, 2 on a bad flag.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/cmd/cli.h"
#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/report/report.h"
#include "lib/core/status.h"

static int write_one(const char *dir, const char *plots)
{
    int rc = tb_report_write_dir(dir, plots);
    if (rc == TB_OK) {
        printf("bench:report: wrote %s/REPORT.md, REPORT.html, summary.md, summary.tex\n", dir);
        printf("bench:report: findings:\n");
        rc = tb_report_print_findings(dir, "  ", stdout);
    }
    return rc;
}

/* Every folder of root/results/ that holds a fingerprint or a CSV. */
static int write_all(const char *root)
{
    char results[PATH_MAX + 16];
    snprintf(results, sizeof results, "%s/results", root);
    DIR *d = opendir(results);
    if (!d)
        return TB_FAIL(TB_ERR_IO, "%s: no results folder (run bench:all first)", results);
    int rc = TB_OK, n = 0;
    struct dirent *e;
    while (rc == TB_OK && (e = readdir(d)) != NULL) {
        char dir[PATH_MAX * 2], fp[PATH_MAX * 2 + 32];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof dir, "%s/%s", results, e->d_name);
        snprintf(fp, sizeof fp, "%s/fingerprint.json", dir);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || stat(fp, &st) != 0)
            continue;
        rc = write_one(dir, NULL);
        n++;
    }
    closedir(d);
    if (rc == TB_OK && n == 0)
        return TB_FAIL(TB_ERR_IO, "%s holds no results folder (run bench:all first)", results);
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
            rc = write_all(root);
    }
    for (int i = 1; i < argc && rc == TB_OK; i++) {
        char dir[PATH_MAX], plots[PATH_MAX];
        tb_cli_path(argv[i], dir, sizeof dir);
        tb_cli_path(plots_dir, plots, sizeof plots);
        rc = write_one(dir, *plots_dir ? plots : NULL);
    }
    if (rc != TB_OK) {
        fprintf(stderr, "bench:report: failed\n");
        tb_error_print(stderr);
        return 1;
    }
    return 0;
}
