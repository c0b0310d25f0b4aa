/*
 * scaling_model.c - `bazel run //bench:scaling_model`: an alpha-beta MODEL
 * of data-parallel scaling efficiency from 1 to 1024 devices, ring and
 * tree all-reduce, with and without overlap (lib/dist/scaling_model.h). It is a
 * prediction, not a measurement: every row says so in setting and note,
 * with its inputs, and so does the plot's title.
 *
 * Inputs, from the results folder's ddp.csv (bench:all runs ddp_sweep
 * first), or from flags:
 *   compute time per step   the 1-rank DDP step time (the baseline row's
 *                           median), or --compute-ms
 *   gradient bytes per step from the same row's note, or --grad-bytes
 *   backward share          --backward-fraction (default 2/3: backward
 *                           costs about twice forward), the window overlap
 *                           can hide communication in
 *   links                   presets, typical published figures, not
 *                           measured here:
 *                             nvlink      alpha 3 us, beta 150 GB/s
 *                             infiniband  alpha 5 us, beta 25 GB/s (HDR 200 Gb/s)
 *                           and, when ddp.csv has all-reduce rows, "measured":
 *                           alpha and beta fitted to this machine's smallest
 *                           and largest all-reduce with the ring formula.
 *                           --alpha-us with --beta-gbs replaces them all.
 * The model scales weakly: every device keeps the measured step's work
 * (its batch), where bench:ddp_sweep holds the global batch and splits it
 * (strong scaling); each row's note says so, and that the links are
 * presets while the compute is this machine's.
 * Writes results/<device>/scaling_model.csv (+ .json) and
 * plots/<device>/scaling_model.{png,svg,pdf}.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/harness.h"
#include "lib/report/plot.h"
#include "lib/dist/scaling_model.h"

#define MAX_LINKS 3
#define MAX_DEV_EXP 10 /* 1 .. 1024 devices */

typedef struct link_preset {
    char name[32];
    double alpha_s, beta_bytes_s;
} link_preset;

typedef struct model_inputs {
    double compute_ms, grad_bytes, backward_fraction;
    double alpha_us, beta_gbs;
    link_preset links[MAX_LINKS];
    int nlinks;
    char source[32];
} model_inputs;

/* The 1-rank baseline's step time and gradient bytes from ddp.csv. */
static void from_ddp_row(const tb_result_row *r, model_inputs *in)
{
    if (in->compute_ms <= 0 && !strcmp(r->unit, "ms"))
        in->compute_ms = r->median;
    const char *p = strstr(r->note, "; ");
    double bytes;
    if (in->grad_bytes <= 0 && p && sscanf(p + 2, "%lf gradient bytes", &bytes) == 1)
        in->grad_bytes = bytes;
}

/* alpha and beta from the smallest and largest all-reduce with the ring
 * formula t = 2 (n-1) alpha + 2 (n-1)/n B / beta. */
static void fit_measured(const tb_results *res, model_inputs *in)
{
    const tb_result_row *lo = NULL, *hi = NULL;
    int n = 0;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (strcmp(r->metric, "allreduce time") || isnan(r->median))
            continue;
        if (sscanf(r->setting, "all-reduce %d ranks", &n) != 1 || n < 2)
            continue;
        if (!lo || r->param_value < lo->param_value)
            lo = r;
        if (!hi || r->param_value > hi->param_value)
            hi = r;
    }
    if (!lo || lo == hi)
        return;
    double alpha = lo->median * 1e-6 / (2.0 * (n - 1));
    double t_bw = hi->median * 1e-6 - 2.0 * (n - 1) * alpha;
    if (t_bw <= 0)
        return;
    link_preset *l = &in->links[in->nlinks++];
    snprintf(l->name, sizeof l->name, "measured here");
    l->alpha_s = alpha;
    l->beta_bytes_s = 2.0 * (n - 1) / n * hi->param_value / t_bw;
}

static int gather_inputs(tb_bench *b, model_inputs *in)
{
    char path[PATH_MAX + 64];
    TB_TRY(tb_outdir_join(b->od.results, "ddp.csv", path, sizeof path));
    tb_results res;
    tb_results_init(&res);
    int have = access(path, R_OK) == 0;
    if (have)
        TB_TRY(tb_results_read_csv(path, &res));
    for (size_t i = 0; have && i < res.n; i++)
        if (res.rows[i].is_baseline && !strcmp(res.rows[i].metric, "step time"))
            from_ddp_row(&res.rows[i], in);
    if (in->alpha_us > 0 && in->beta_gbs > 0) {
        in->links[0] = (link_preset){"custom", in->alpha_us * 1e-6, in->beta_gbs * 1e9};
        in->nlinks = 1;
    } else {
        in->links[0] = (link_preset){"nvlink", 3e-6, 150e9};
        in->links[1] = (link_preset){"infiniband", 5e-6, 25e9};
        in->nlinks = 2;
        if (have)
            fit_measured(&res, in);
    }
    tb_results_free(&res);
    snprintf(in->source, sizeof in->source, "%s", have ? "ddp.csv of this folder" : "flags");
    if (in->compute_ms <= 0 || in->grad_bytes <= 0)
        return TB_FAIL(TB_ERR_INVALID, "no compute time or gradient bytes: run bench:ddp_sweep "
                       "into this results folder first (%s), or pass --compute-ms and "
                       "--grad-bytes", path);
    return TB_OK;
}

static int add_rows(tb_bench *b, const model_inputs *in)
{
    for (int l = 0; l < in->nlinks; l++)
        for (int a = 0; a < 2; a++)
            for (int ov = 1; ov >= 0; ov--) {
                tb_scaling_inputs si = {in->compute_ms * 1e-3, in->grad_bytes,
                                        in->links[l].alpha_s, in->links[l].beta_bytes_s, ov,
                                        in->backward_fraction};
                char setting[64];
                snprintf(setting, sizeof setting, "MODEL %s %s%s", in->links[l].name,
                         tb_scaling_algo_name((tb_allreduce_algo)a), ov ? " overlap" : "");
                for (int e = 0; e <= MAX_DEV_EXP; e++) {
                    tb_scaling_point pt = tb_scaling_predict(&si, (tb_allreduce_algo)a, 1 << e);
                    tb_result_row row;
                    tb_bench_row(b, &row, setting, 0, "devices", 1 << e, "predicted efficiency");
                    row.rate = pt.efficiency;
                    snprintf(row.rate_unit, sizeof row.rate_unit, "fraction");
                    snprintf(row.note, sizeof row.note,
                             "MODEL, not a measurement: step %.4g ms, all-reduce %.4g ms, exposed "
                             "%.4g ms; inputs compute %.4g ms, %.0f bytes, alpha %.3g us, beta "
                             "%.4g GB/s, backward share %.2f (%s); weak scaling: every device "
                             "keeps that step's work, where the DDP sweep holds the global batch",
                             pt.step_s * 1e3,
                             pt.allreduce_s * 1e3, pt.exposed_s * 1e3, in->compute_ms,
                             in->grad_bytes, in->links[l].alpha_s * 1e6,
                             in->links[l].beta_bytes_s / 1e9, in->backward_fraction, in->source);
                    TB_TRY(tb_results_add(&b->res, &row));
                }
            }
    return TB_OK;
}

static int plot_model(tb_bench *b, const model_inputs *in)
{
    enum { NS = MAX_LINKS * 4, NP = MAX_DEV_EXP + 1 };
    double x[NS][NP], y[NS][NP];
    char names[NS][64];
    tb_plot_series s[NS];
    size_t ns = 0;
    for (size_t i = 0; i < b->res.n; i++) {
        const tb_result_row *r = &b->res.rows[i];
        if (ns == 0 || strcmp(names[ns - 1], r->setting + 6)) {
            snprintf(names[ns], sizeof names[ns], "%s", r->setting + 6); /* past "MODEL " */
            s[ns] = (tb_plot_series){names[ns], x[ns], y[ns], NULL, NULL, 0};
            ns++;
        }
        x[ns - 1][s[ns - 1].n] = r->param_value;
        y[ns - 1][s[ns - 1].n++] = r->rate;
    }
    char title[256];
    snprintf(title, sizeof title, "MODEL, not a measurement: alpha-beta scaling efficiency "
             "(compute %.3g ms/step, %.3g MB gradients, backward share %.2f)", in->compute_ms,
             in->grad_bytes / 1e6, in->backward_fraction);
    tb_plot p = {title, "devices", "predicted scaling efficiency", 2, 0, s, ns, NULL, 0, 0};
    return tb_plot_render(&p, b->od.plots, "scaling_model", TB_PLOT_ALL);
}

static const tb_technique technique = {
    .name = "scaling_model",
    .what = "Alpha-beta MODEL of data-parallel scaling efficiency, 1..1024 "
            "devices, ring and tree, overlap on/off, from ddp.csv's measured "
            "compute time and gradient bytes. A prediction, not a measurement.",
    .est_seconds = {1, 2, 2, 3}, /* default, full, tiny, gpu */
    /* times nothing (reads ddp.csv); its run time, so bench:all's sum counts it */
    .budget_seconds = {1, 2, 2, 1},
    .order = 330,
    .after = {"ddp_sweep"}, /* reads its ddp.csv */
    .tiny = {.min_rows = 88, .plots = "scaling_model", .no_gbench = 1},
};

int main(int argc, char **argv)
{
    tb_bench b;
    int done = 0;
    model_inputs in = {.backward_fraction = 2.0 / 3.0};
    tb_flag extra[] = {
        {"compute-ms", TB_FLAG_DOUBLE, &in.compute_ms, "compute time per step at 1 device (0 = "
         "ddp.csv's 1-rank step time)", NULL, TB_RANGE_MIN(0)},
        {"grad-bytes", TB_FLAG_DOUBLE, &in.grad_bytes, "gradient bytes per step (0 = ddp.csv's)",
         NULL, TB_RANGE_MIN(0)},
        {"backward-fraction", TB_FLAG_DOUBLE, &in.backward_fraction, "share of compute that is "
         "backward, the overlap window", NULL, TB_RANGE(0, 1)},
        {"alpha-us", TB_FLAG_DOUBLE, &in.alpha_us, "link latency (us) instead of the presets "
         "(nvlink 3 us / 150 GB/s, infiniband 5 us / 25 GB/s)", NULL, TB_RANGE_MIN(0)},
        {"beta-gbs", TB_FLAG_DOUBLE, &in.beta_gbs, "link bandwidth (GB/s), with --alpha-us", NULL, TB_RANGE_MIN(0)},
    };
    int rc = tb_bench_init(&b, &technique, extra, TB_COUNT(extra), argc, argv, &done);
    if (rc == TB_OK && !done) {
        rc = gather_inputs(&b, &in);
        if (rc == TB_OK)
            rc = add_rows(&b, &in);
        if (rc == TB_OK)
            rc = tb_bench_save(&b);
        if (rc == TB_OK)
            rc = plot_model(&b, &in);
    }
    tb_bench_close(&b);
    if (rc != TB_OK)
        return tb_bench_fail("scaling_model", rc);
    return 0;
}
