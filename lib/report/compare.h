/*
 * compare.h - one table from results folders of several machines.
 *
 * For each technique: every machine's own best setting and speedup (the
 * report's summary rule, lib/report/report.h), and the reference machine's best
 * setting timed on each machine, as speed relative to the reference
 * (reference median / this machine's median at the same setting, metric and
 * point; above 1 is faster than the reference). Given prices and power,
 * rows whose rate is in samples/s also get samples/s per dollar (purchase
 * price), samples per dollar (price per hour) and samples/s per watt;
 * other rates say n/a and why. Power is the --power figure, else the
 * highest NVML power sample in the machine's telemetry.json (a GPU run of
 * bench:all); every per-watt number says which. When software stacks differ
 * (tb_fingerprint_diff, TB_FP_SOFTWARE) the page warns and lists what
 * differs: a speedup may come from a library, not the hardware.
 *
 * The page opens with the forest plot of every machine side by side
 * (forest.h; plots/forest_compare.*): each technique's speedup over its own
 * baseline, same rows, one column per machine.
 *
 * Writes, under out_dir: COMPARE.md, COMPARE.html (self-contained),
 * compare.csv (schema tunebench-compare/2, results/README.md), and
 * plots/<technique>_compare_{speedup,vs_reference}.{png,svg,pdf,gp}.
 *
 * Run: bazel run //bench:compare -- DIR... [--reference=DIR]
 * Test: bazel test //lib/report:compare_test
 */
#ifndef TB_COMPARE_H
#define TB_COMPARE_H

#include <stddef.h>

#include "lib/report/report.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_COMPARE_SCHEMA "tunebench-compare/2"
#define TB_COMPARE_MAX 16

typedef enum tb_price_kind {
    TB_PRICE_NONE = 0,
    TB_PRICE_PER_HOUR = 1,     /* cloud: dollars per hour */
    TB_PRICE_PURCHASE = 2,     /* dollars, once */
} tb_price_kind;

typedef struct tb_cmp_machine {
    char label[200];           /* "#1 <device> (<threads> threads)" */
    char dir[PATH_MAX];        /* its results folder */
    tb_report_folder *f;
    double price;              /* NaN when not given */
    double power_w;            /* NaN when neither given nor measured */
    char power_src[96];        /* where power_w comes from: "--power", or NVML */
} tb_cmp_machine;

typedef struct tb_cmp_set {
    tb_cmp_machine m[TB_COMPARE_MAX];
    int n;
    int reference;             /* index into m */
    tb_price_kind price_kind;
} tb_cmp_set;

/* Adds the machines in dir: a results folder (holds fingerprint.json or a
 * CSV); else, in name order, the device folders (each with its
 * fingerprint.json) of dir/results, or of dir itself when that has none
 * (results/ given as such). TB_ERR_IO, saying which forms it takes, when
 * neither holds one. */
int tb_compare_add_dir(tb_cmp_set *s, const char *dir);

/* Sets prices / power from n values, one per machine in order.
 * REQUIRES: n == s->n (TB_ERR_INVALID otherwise). */
int tb_compare_set_prices(tb_cmp_set *s, tb_price_kind kind, const double *v, int n);
int tb_compare_set_power(tb_cmp_set *s, const double *v, int n);

/* Writes everything listed above into out_dir (created if missing). */
int tb_compare_write(const tb_cmp_set *s, const char *out_dir);

void tb_compare_free(tb_cmp_set *s);

/* A median converted to seconds from its unit ("ms", "us", "s", "ns");
 * NaN for an unknown unit. */
double tb_compare_seconds(double v, const char *unit);

#ifdef __cplusplus
}
#endif
#endif
