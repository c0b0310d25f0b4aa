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

#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/report/report.h"
#include "lib/core/status.h"

static void resolve(const char *arg, char *out, size_t cap)
{
    const char *wd = getenv("BUILD_WORKING_DIRECTORY");
    if (arg[0] != '/' && wd)
        snprintf(out, cap, "%s/%s", wd, arg);
    else
        snprintf(out, cap, "%s", arg);
}

static int write_one(const char *dir, const char *plots)
{
    int rc = tb_report_write_dir(dir, plots);
    if (rc == TB_OK)
        printf("bench:report: wrote %s/REPORT.md, REPORT.html, summary.md, summary.tex\n", dir);
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
    int help = 0;
    tb_flag flags[] = {
        {"out-dir", TB_FLAG_STRING, &out_dir,
         "root holding results/ (default: the source tree under bazel run)", NULL},
        {"plots-dir", TB_FLAG_STRING, &plots_dir,
         "figures folder (default: ROOT/plots/<device>); needs one RESULTS_DIR", NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    if (tb_flags_parse(flags, nflags, &argc, argv, NULL, &help) != TB_OK) {
        tb_error_print(stderr);
        return 2;
    }
    if (help) {
        tb_flags_usage(stdout, "bench:report [RESULTS_DIR...]",
                       "Writes REPORT.md, REPORT.html, summary.md and summary.tex for results "
                       "folders.", flags, nflags);
        return 0;
    }
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
        resolve(argv[i], dir, sizeof dir);
        resolve(plots_dir, plots, sizeof plots);
        rc = write_one(dir, *plots_dir ? plots : NULL);
    }
    if (rc != TB_OK) {
        fprintf(stderr, "bench:report: failed\n");
        tb_error_print(stderr);
        return 1;
    }
    return 0;
}
