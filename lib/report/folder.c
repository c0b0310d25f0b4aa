/*
 * folder.c - loads a results folder (its CSVs, fingerprint.json,
 * telemetry.json and the PNGs beside it) for the report; see report.h.
 *
 * Test: bazel test //lib/report:report_test
 */
#define _GNU_SOURCE /* strptime, timegm */
#include "lib/report/folder.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/atomic_file.h"
#include "lib/core/json.h"
#include "lib/core/status.h"
#include "lib/report/resume.h"

int tb_report_has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* dir holds fingerprint.json or a CSV. */
static int is_results_folder(const char *dir)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/fingerprint.json", dir);
    if (access(p, R_OK) == 0)
        return 1;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int csv = 0;
    while (!csv && (e = readdir(d)) != NULL)
        csv = tb_report_has_suffix(e->d_name, ".csv") && strlen(e->d_name) > 4;
    closedir(d);
    return csv;
}

/* parent's subfolders holding fingerprint.json, in name order, appended to
 * out from *n on. */
static int device_folders(const char *parent, char *out, size_t cap, int max, int *n)
{
    DIR *d = opendir(parent);
    if (!d)
        return TB_OK;
    int first = *n, rc = TB_OK;
    struct dirent *e;
    while (rc == TB_OK && (e = readdir(d)) != NULL) {
        char sub[PATH_MAX], fp[PATH_MAX + 32];
        if (e->d_name[0] == '.' || tb_outdir_join(parent, e->d_name, sub, sizeof sub) != TB_OK) {
            tb_error_clear(); /* a name too long to be a folder of ours */
            continue;
        }
        snprintf(fp, sizeof fp, "%s/fingerprint.json", sub);
        if (access(fp, R_OK) != 0)
            continue;
        if (*n == max)
            rc = TB_FAIL(TB_ERR_INVALID, "%s: more than %d results folders", parent, max);
        else if (strlen(sub) >= cap)
            rc = TB_FAIL(TB_ERR_INVALID, "%s: path too long", sub);
        else
            snprintf(out + (size_t)(*n)++ * cap, cap, "%s", sub);
    }
    closedir(d);
    if (rc == TB_OK)
        qsort(out + (size_t)first * cap, (size_t)(*n - first), cap, cmp_name);
    return rc;
}

int tb_report_results_folders(const char *dir, char *out, size_t cap, int max, int *n)
{
    *n = 0;
    if (is_results_folder(dir)) {
        if (max < 1 || strlen(dir) >= cap)
            return TB_FAIL(TB_ERR_INVALID, "%s: path too long", dir);
        snprintf(out, cap, "%s", dir);
        *n = 1;
        return TB_OK;
    }
    char results[PATH_MAX];
    if (tb_outdir_join(dir, "results", results, sizeof results) == TB_OK)
        TB_TRY(device_folders(results, out, cap, max, n));
    else
        tb_error_clear();
    if (*n == 0)
        TB_TRY(device_folders(dir, out, cap, max, n));
    if (*n == 0)
        return TB_FAIL(TB_ERR_IO, "%s: no results here: give a results folder "
                       "(results/<device>), results/ itself, or a root holding results/", dir);
    return TB_OK;
}

/* 1 when the file is not one of tunebench's: its first line is no results
 * header (columns beginning "technique,"), it has no JSON sidecar beside
 * it (every technique writes <id>.json) and it is none of the special CSVs
 * (a user's notes.csv), or bench:compare's compare.csv written into a
 * results folder. Such a file is skipped, with a warning; a results CSV
 * that is damaged, even empty, still fails the report. */
static int foreign_csv(const tb_report_folder *f, const char *path, const char *id)
{
    char head[64], side[PATH_MAX + 200], name[200];
    /* bench:compare's table, written into a results folder with --out-dir:
     * its header begins "technique," too, but its rows are several
     * machines' (no backend column), and no technique writes compare.csv */
    if (!strcmp(id, "compare"))
        return 1;
    long n = tb_read_head(path, head, sizeof head);
    if (n < 0 || strncmp(head, "technique,", strlen("technique,")) == 0)
        return 0;
    if (!strcmp(id, TB_REPORT_CEILINGS) || !strcmp(id, TB_REPORT_WATERFALL) ||
        !strcmp(id, TB_REPORT_TTA))
        return 0;
    snprintf(name, sizeof name, "%s.json", id);
    return tb_outdir_join(f->results_dir, name, side, sizeof side) != TB_OK ||
           access(side, F_OK) != 0;
}

static int load_csv(tb_report_folder *f, const char *name)
{
    char path[PATH_MAX + 160], id[160];
    snprintf(id, sizeof id, "%.*s", (int)(strlen(name) - 4), name);
    TB_TRY(tb_outdir_join(f->results_dir, name, path, sizeof path));
    if (foreign_csv(f, path, id)) {
        fprintf(stderr, "report: %s is not a tunebench results CSV (its header does not "
                "begin with \"technique,\"): left out; move it elsewhere to silence this\n",
                path);
        return TB_OK;
    }
    tb_results *dst;
    if (!strcmp(id, TB_REPORT_CEILINGS))
        dst = &f->ceilings, f->have_ceilings = 1;
    else if (!strcmp(id, TB_REPORT_WATERFALL))
        dst = &f->waterfall, f->have_waterfall = 1;
    else if (!strcmp(id, TB_REPORT_TTA))
        dst = &f->tta, f->have_tta = 1;
    else if (f->ntech < TB_REPORT_MAX_TECH && strlen(id) < sizeof f->tech[0]) {
        snprintf(f->tech[f->ntech], sizeof f->tech[0], "%s", id);
        dst = &f->rows[f->ntech++];
    } else
        return TB_FAIL(TB_ERR_DATA, "%s: too many technique CSVs (or a name over 31 bytes)", path);
    TB_TRY(tb_results_read_csv(path, dst));
    int tech = f->ntech > 0 && dst == &f->rows[f->ntech - 1];
    int own = !tech || dst->n == 0;
    for (size_t i = 0; i < dst->n && !own; i++)
        own = !strcmp(dst->rows[i].technique, id);
    if (!own) {
        /* a renamed copy (gelu_h100.csv of gelu's rows): its rows would show
         * under a technique of that name with nothing in it, and again
         * under their own */
        fprintf(stderr, "report: %s holds rows of technique '%s', not '%s' (a renamed copy?): "
                "left out; keep another machine's results in its own folder and compare them "
                "with bench:compare\n", path, dst->rows[0].technique, id);
        tb_results_free(dst);
        f->ntech--;
    }
    return TB_OK;
}

/* f->other_device: the techniques whose rows name another device than the
 * folder's fingerprint (a CSV copied in from another machine). */
static void mark_other_devices(tb_report_folder *f)
{
    const char *mine = f->have_fp ? tb_fingerprint_get(&f->fp, "device.name") : NULL;
    size_t at = 0;
    for (int t = 0; mine && t < f->ntech; t++)
        for (size_t i = 0; i < f->rows[t].n; i++) {
            const char *dev = f->rows[t].rows[i].device;
            if (!dev[0] || !strcmp(dev, mine))
                continue;
            fprintf(stderr, "report: %s's rows name device '%s', not this folder's '%s' "
                    "(fingerprint.json): another machine's numbers?\n", f->tech[t], dev, mine);
            if (at < sizeof f->other_device)
                at += (size_t)snprintf(f->other_device + at, sizeof f->other_device - at,
                                       "%s%s (%s)", at ? ", " : "", f->tech[t], dev);
            break;
        }
}

/* The headline and workload of technique t from its JSON sidecar, when
 * there is one: a missing or unreadable sidecar leaves them "" (the CSV
 * holds every number; these only label them). */
static void load_sidecar(tb_report_folder *f, int t)
{
    char name[64], path[PATH_MAX + 64];
    tb_json *j = NULL;
    snprintf(name, sizeof name, "%s.json", f->tech[t]);
    if (tb_outdir_join(f->results_dir, name, path, sizeof path) != TB_OK ||
        access(path, R_OK) != 0 || tb_json_parse_file(path, 0, &j) != TB_OK) {
        tb_error_clear();
        return;
    }
    snprintf(f->headline[t], sizeof f->headline[t], "%s", tb_json_get_string(j, "headline", ""));
    snprintf(f->headline_metric[t], sizeof f->headline_metric[t], "%s",
             tb_json_get_string(j, "headline_metric", ""));
    const tb_json *rows = tb_json_get(j, "rows");
    for (size_t i = 0; rows && i < rows->len && !f->workload[t][0]; i++)
        snprintf(f->workload[t], sizeof f->workload[t], "%s",
                 tb_json_get_string(tb_json_at(rows, i), "workload", ""));
    tb_json_free(j);
}

static int list_dir(const char *dir, const char *suffix, char (*names)[160], int max, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return TB_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !tb_report_has_suffix(e->d_name, suffix) || strstr(e->d_name, ".tmp."))
            continue;
        if (*n < max && strlen(e->d_name) < 160)
            snprintf(names[(*n)++], 160, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, 160, cmp_name);
    return TB_OK;
}

/* <root>/results/<slug> -> <root>/plots/<slug> */
void tb_report_sibling_plots_dir(const char *results_dir, const char *slug, char *out, size_t cap)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", results_dir);
    char *slash = strrchr(tmp, '/');
    if (slash)
        *slash = '\0';
    char *parent = strrchr(tmp, '/');
    const char *root = tmp;
    if (parent) {
        *parent = '\0';
        if (!tmp[0])
            root = "/";
    } else {
        root = slash ? "." : "..";
    }
    snprintf(out, cap, "%s/plots/%s", root, slug);
}

/* out (96 bytes): why results/<id>.csv is not the run's, begun at start;
 * "" when it is, or when there is no such CSV. by_state: 1 when
 * run_state.json says another run wrote it, 0 when it says this one did,
 * -1 when it cannot say (then the CSV's time decides). */
static void csv_earlier(const tb_report_folder *f, const char *id, time_t start, int by_state,
                        char *out)
{
    char name[96], path[PATH_MAX + 96], when[32];
    struct stat st;
    struct tm w;
    snprintf(name, sizeof name, "%s.csv", id);
    if (by_state == 0 || tb_outdir_join(f->results_dir, name, path, sizeof path) != TB_OK ||
        stat(path, &st) != 0)
        return;
    if (st.st_mtime < start) {
        gmtime_r(&st.st_mtime, &w);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &w);
        snprintf(out, 96, "its CSV written %s, before this run began", when);
    } else if (by_state == 1) {
        /* a copy's times are the copy's: the state says, the time cannot */
        snprintf(out, 96, "not among the techniques this run finished, run_state.json");
    }
}

/* The entry of budget.json's plan that writes <id>.csv (its "results";
 * time_to_accuracy.csv is the waterfall's second file), or NULL. */
static const tb_json *producer(const tb_json *techs, const char *id)
{
    const char *want = !strcmp(id, TB_REPORT_TTA) ? TB_REPORT_WATERFALL : id;
    for (size_t i = 0; techs && i < techs->len; i++) {
        const tb_json *t = tb_json_at(techs, i);
        if (!strcmp(tb_json_get_string(t, "results", ""), want))
            return t;
    }
    return NULL;
}

/* 1: another run wrote <id>.csv (the technique of plan that writes it is
 * not among those the run finished); 0: this one did; -1: no state, or no
 * plan (NULL: a budget.json from before it named each technique's CSV). */
static int state_says(const tb_report_folder *f, const tb_run_state *s, const tb_json *plan,
                      const char *id)
{
    if (!f->have_state || !plan)
        return -1;
    const tb_json *t = producer(plan, id);
    return t && tb_run_state_is_done(s, tb_json_get_string(t, "name", "")) ? 0 : 1;
}

/* The planned techniques the run did not finish, into f->unfinished. */
static void list_unfinished(tb_report_folder *f, const tb_run_state *s)
{
    const tb_json *techs = f->budget ? tb_json_get(f->budget, "techniques") : NULL;
    size_t at = 0;
    for (size_t i = 0; techs && i < techs->len; i++) {
        const tb_json *t = tb_json_at(techs, i);
        const char *name = tb_json_get_string(t, "name", "");
        if (!name[0] || tb_run_state_is_done(s, name))
            continue;
        char csv[96], path[PATH_MAX + 96];
        snprintf(csv, sizeof csv, "%s.csv", tb_json_get_string(t, "results", name));
        int rows = tb_outdir_join(f->results_dir, csv, path, sizeof path) == TB_OK &&
                   access(path, R_OK) == 0;
        if (at < sizeof f->unfinished)
            at += (size_t)snprintf(f->unfinished + at, sizeof f->unfinished - at, "%s%s (%s)",
                                   f->nunfinished ? ", " : "", name,
                                   rows ? "its rows below are an earlier run's" : "no results");
        f->nunfinished++;
    }
}

/* f->earlier[t] for every technique whose CSV another run than the
 * bench:all run the folder holds wrote (`bench:all --only=x` rewrites x
 * and leaves the rest, which the report would otherwise present as this
 * run's), and what the run left unfinished. */
static void mark_earlier(tb_report_folder *f)
{
    char path[PATH_MAX + 64];
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tb_run_state *s = calloc(1, sizeof *s);
    if (!s)
        return; /* nothing to say is what a folder without a state gets too */
    /* the state and the fingerprint the run started in (both files), else
     * the fingerprint alone */
    if (tb_outdir_join(f->results_dir, TB_RUN_STATE_FILE, path, sizeof path) == TB_OK &&
        access(path, R_OK) == 0 && tb_run_state_load(f->results_dir, s) == TB_OK) {
        f->have_state = 1;
        f->complete = s->complete;
    } else {
        tb_error_clear();
        memset(s, 0, sizeof *s);
        if (tb_outdir_join(f->results_dir, TB_RUN_STATE_FP_FILE, path, sizeof path) != TB_OK ||
            access(path, R_OK) != 0 || tb_fingerprint_load(path, &s->fp) != TB_OK) {
            tb_error_clear(); /* no bench:all run here, or an unreadable state: nothing to say */
            free(s);
            return;
        }
    }
    const char *when = tb_fingerprint_get(&s->fp, "run.time_utc");
    if (!when || !strptime(when, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
        free(s);
        return;
    }
    snprintf(f->run_started, sizeof f->run_started, "%s", when);
    time_t start = timegm(&tm);
    /* the plan, where its budget.json names every technique's CSV (this
     * build's); NULL otherwise */
    const tb_json *plan = f->budget ? tb_json_get(f->budget, "techniques") : NULL;
    int named = plan && plan->len > 0;
    for (size_t i = 0; plan && i < plan->len; i++)
        named = named && tb_json_get(tb_json_at(plan, i), "results") != NULL;
    plan = named ? plan : NULL;
    for (int t = 0; t < f->ntech; t++)
        csv_earlier(f, f->tech[t], start, state_says(f, s, plan, f->tech[t]), f->earlier[t]);
    csv_earlier(f, TB_REPORT_CEILINGS, start, state_says(f, s, plan, TB_REPORT_CEILINGS),
                f->earlier_ceilings);
    csv_earlier(f, TB_REPORT_WATERFALL, start, state_says(f, s, plan, TB_REPORT_WATERFALL),
                f->earlier_waterfall);
    csv_earlier(f, TB_REPORT_TTA, start, state_says(f, s, plan, TB_REPORT_TTA), f->earlier_tta);
    if (f->have_state)
        list_unfinished(f, s);
    free(s);
}

static void optional_damaged(const char *path, tb_json **j)
{
    fprintf(stderr, "report: %s cannot be read (%s): its section is left out; bench:all "
            "writes it again on the next run\n", path, tb_error_message());
    tb_error_clear();
    tb_json_free(*j);
    *j = NULL;
}

int tb_report_load(const char *results_dir, const char *plots_dir, tb_report_folder **out)
{
    *out = NULL;
    tb_report_folder *f = calloc(1, sizeof *f);
    char (*names)[160] = calloc(TB_REPORT_MAX_PLOTS, 160);
    int rc = TB_OK, n = 0;
    if (!f || !names) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory loading %s", results_dir);
        goto out_fail;
    }
    snprintf(f->results_dir, sizeof f->results_dir, "%s", results_dir);
    size_t len = strlen(f->results_dir);
    while (len > 1 && f->results_dir[len - 1] == '/')
        f->results_dir[--len] = '\0';
    const char *base = strrchr(f->results_dir, '/');
    snprintf(f->slug, sizeof f->slug, "%s", base ? base + 1 : f->results_dir);
    if (plots_dir)
        snprintf(f->plots_dir, sizeof f->plots_dir, "%s", plots_dir);
    else
        tb_report_sibling_plots_dir(f->results_dir, f->slug, f->plots_dir, sizeof f->plots_dir);
    struct stat st;
    if (stat(f->results_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = TB_FAIL(TB_ERR_IO, "%s is not a results folder (it does not exist)", results_dir);
        goto out_fail;
    }
    TB_TRY_GOTO(rc, list_dir(f->results_dir, ".csv", names, TB_REPORT_MAX_PLOTS, &n), out_fail);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], TB_REPORT_MACHINE_PROBE_CSV) != 0)
            TB_TRY_GOTO(rc, load_csv(f, names[i]), out_fail);
    for (int t = 0; t < f->ntech; t++)
        load_sidecar(f, t);
    char path[PATH_MAX + 64];
    TB_TRY_GOTO(rc, tb_outdir_join(f->results_dir, "fingerprint.json", path, sizeof path), out_fail);
    if (access(path, R_OK) == 0) {
        TB_TRY_GOTO(rc, tb_fingerprint_load(path, &f->fp), out_fail);
        f->have_fp = 1;
    }
    mark_other_devices(f);
    /* telemetry and the plan only add sections: a damaged one is left out,
     * said on stderr, and the report says "not measured" there */
    TB_TRY_GOTO(rc, tb_outdir_join(f->results_dir, "telemetry.json", path, sizeof path), out_fail);
    if (access(path, R_OK) == 0 && tb_json_parse_file(path, 0, &f->telemetry) != TB_OK)
        optional_damaged(path, &f->telemetry);
    TB_TRY_GOTO(rc, tb_outdir_join(f->results_dir, "budget.json", path, sizeof path), out_fail);
    if (access(path, R_OK) == 0 && tb_json_parse_file(path, 0, &f->budget) != TB_OK)
        optional_damaged(path, &f->budget);
    mark_earlier(f); /* after budget.json: its plan names each technique's CSV */
    if (f->ntech == 0 && !f->have_ceilings && !f->have_waterfall && !f->have_tta &&
        !f->have_state) {
        /* a report of nothing would read "no technique changed the time"; a
         * bench:all run whose every technique failed is reported (its
         * findings name them, run_state.json) */
        rc = TB_FAIL(TB_ERR_DATA, "%s holds no tunebench results (no technique's CSV; a "
                     "folder with only fingerprint.json is what a technique that failed before "
                     "writing its results leaves): give a results folder (results/<device>), "
                     "or run bazel run //bench:all first", results_dir);
        goto out_fail;
    }
    TB_TRY_GOTO(rc, list_dir(f->plots_dir, ".png", names, TB_REPORT_MAX_PLOTS, &n), out_fail);
    for (int i = 0; i < n; i++)
        snprintf(f->plots[f->nplots++], sizeof f->plots[0], "%.*s", (int)(strlen(names[i]) - 4),
                 names[i]);
    free(names);
    *out = f;
    return TB_OK;
out_fail:
    free(names);
    tb_report_folder_free(f);
    return rc;
}

void tb_report_folder_free(tb_report_folder *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->ntech; i++)
        tb_results_free(&f->rows[i]);
    tb_results_free(&f->ceilings);
    tb_results_free(&f->waterfall);
    tb_results_free(&f->tta);
    tb_json_free(f->telemetry);
    tb_json_free(f->budget);
    free(f);
}
