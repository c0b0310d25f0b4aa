/*
 * compare.c - `bazel run //bench:compare`: one table and side-by-side
 * figures from results folders of several machines (lib/report/compare.h).
 *
 *   bazel run //bench:compare -- DIR... [--reference=DIR]
 *       [--price-per-hour=D1,D2 | --purchase-price=D1,D2] [--power=W1,W2]
 *       [--out-dir=OUT]
 *
 * DIR: a results folder (results/<device>/) or a root holding results/
 * (what --out-dir of bench:all names). Relative paths are taken from the
 * directory `bazel run` was typed in. Prices and power: one value per
 * machine, in the order the machines are listed on the page.
 * --reference: the DIR the others are normalized to (default: the first).
 * OUT (default: <source tree>/results/compare under bazel run) gets
 * COMPARE.md, COMPARE.html, compare.csv and plots/.
 * Exit status: 0 written, 1 on an error, 2 on a bad flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/report/compare.h"
#include "bench/cmd/cli.h"
#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/core/status.h"

/* "1.5,2" -> {1.5, 2}; TB_ERR_INVALID naming the flag on a bad number. */
static int parse_list(const char *flag, const char *s, double *v, int max, int *n)
{
    *n = 0;
    while (*s) {
        char *end = NULL;
        double x = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !(x > 0) || *n == max)
            return TB_FAIL(TB_ERR_INVALID, "--%s: '%s' is not a list of positive numbers, one "
                           "per machine (e.g. 2.5,4.1)", flag, s);
        v[(*n)++] = x;
        s = *end ? end + 1 : end;
    }
    return TB_OK;
}

static int run(int argc, char **argv, const char *reference, const char *per_hour,
               const char *purchase, const char *power, const char *out_dir)
{
    static tb_cmp_set set;
    char dir[PATH_MAX], ref[PATH_MAX] = "", out[PATH_MAX];
    int rc = TB_OK;
    set.reference = 0;
    if (*reference)
        tb_cli_path(reference, ref, sizeof ref);
    for (int i = 1; i < argc; i++) {
        tb_cli_path(argv[i], dir, sizeof dir);
        int before = set.n;
        TB_TRY_GOTO(rc, tb_compare_add_dir(&set, dir), out_free);
        if (*ref && !strcmp(dir, ref))
            set.reference = before;
    }
    if (*ref && set.reference == 0 && strcmp(ref, set.m[0].dir) != 0) {
        tb_cli_path(argv[1], dir, sizeof dir);
        if (strcmp(dir, ref) != 0) {
            rc = TB_FAIL(TB_ERR_INVALID, "--reference=%s is not one of the DIRs", reference);
            goto out_free;
        }
    }
    double v[TB_COMPARE_MAX];
    int n;
    if (*per_hour && *purchase) {
        rc = TB_FAIL(TB_ERR_INVALID, "give --price-per-hour or --purchase-price, not both");
        goto out_free;
    }
    if (*per_hour || *purchase) {
        TB_TRY_GOTO(rc, parse_list(*per_hour ? "price-per-hour" : "purchase-price",
                                   *per_hour ? per_hour : purchase, v, TB_COMPARE_MAX, &n),
                    out_free);
        TB_TRY_GOTO(rc, tb_compare_set_prices(&set, *per_hour ? TB_PRICE_PER_HOUR
                                                              : TB_PRICE_PURCHASE, v, n),
                    out_free);
    }
    if (*power) {
        TB_TRY_GOTO(rc, parse_list("power", power, v, TB_COMPARE_MAX, &n), out_free);
        TB_TRY_GOTO(rc, tb_compare_set_power(&set, v, n), out_free);
    }
    if (*out_dir) {
        TB_TRY_GOTO(rc, tb_outdir_root(out_dir, out, sizeof out), out_free);
    } else {
        char root[PATH_MAX - 32];
        TB_TRY_GOTO(rc, tb_outdir_root(NULL, root, sizeof root), out_free);
        snprintf(out, sizeof out, "%s/results/compare", root);
    }
    TB_TRY_GOTO(rc, tb_compare_write(&set, out), out_free);
    printf("bench:compare: %d machines; wrote %s/COMPARE.md, COMPARE.html, compare.csv, plots/\n",
           set.n, out);
out_free:
    tb_compare_free(&set);
    return rc;
}

int main(int argc, char **argv)
{
    const char *reference = "", *per_hour = "", *purchase = "", *power = "", *out_dir = "";
    tb_flag flags[] = {
        {"reference", TB_FLAG_STRING, &reference, "the DIR others are normalized to (default: "
         "the first)", NULL},
        {"price-per-hour", TB_FLAG_STRING, &per_hour, "dollars per hour, one per machine: D1,D2",
         NULL},
        {"purchase-price", TB_FLAG_STRING, &purchase, "dollars, one per machine: D1,D2", NULL},
        {"power", TB_FLAG_STRING, &power, "watts, one per machine: W1,W2", NULL},
        {"out-dir", TB_FLAG_STRING, &out_dir,
         "where COMPARE.md etc. go (default: <source tree>/results/compare)", NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    static const char *const summary =
        "Merges results folders of several machines into one table and figures.";
    int code = tb_cli_parse("bench:compare", "DIR...", summary, flags, nflags, 1, &argc, argv);
    if (code >= 0)
        return code;
    if (argc < 2) {
        tb_flags_usage(stderr, "bench:compare DIR...", summary, flags, nflags);
        return 2;
    }
    int rc = run(argc, argv, reference, per_hour, purchase, power, out_dir);
    if (rc != TB_OK) {
        fprintf(stderr, "bench:compare: failed\n");
        tb_error_print(stderr);
        return tb_exit_code(rc);
    }
    return 0;
}
