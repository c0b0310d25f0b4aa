/*
 * all.c - `bazel run //bench:all`: runs every technique's benchmark, one
 * after another, and reports progress with an estimate of the time left.
 *
 *   bazel run //bench:all -- [--device=auto] [--profile=auto|default|full|tiny|gpu]
 *                            [--out-dir=DIR] [--only=a,b] [--skip=a,b] [--resume]
 *                            [--allow-over-budget]
 *
 * bench:all cannot call Bazel: the technique binaries are its data
 * dependencies, found in its runfiles tree, and their names come from the
 * build (TB_TECHNIQUES, one per file of bench/techniques/). It asks each for its
 * declaration (--describe; bench/cmd/plan.h) and runs them in their declared
 * order; bench:ceilings first, even with --only (unless --skip=ceilings):
 * the bounds every technique is read against.
 * Each binary writes its own results atomically, so an interrupted run keeps
 * every technique it finished; after each one bench:all records it in
 * results/<device>/run_state.json (lib/report/resume.h), and `--resume` skips what
 * is recorded there when the profile, threads and fingerprint are the same
 * (it refuses, saying what differs, otherwise). While techniques run, a
 * sampler records CPU load and frequency (and GPU clocks, temperature,
 * power and throttling through NVML) into results/<device>/telemetry.json.
 * Before it starts it adds up the time budgets the planned techniques
 * declare for the profile (bench/cmd/plan.h), prints the total against the
 * profile's limit, and refuses (exit 2) when they add up to more, unless
 * --allow-over-budget (then it warns and goes on); the plan, with the limit
 * that applied, goes to results/<device>/budget.json for the report.
 * While it runs, a time keeper (bench/cmd/plan.h: tb_plan_budget_cut) holds
 * it to that limit: when the techniques so far took longer than their
 * budgets (fixed work is slower on a slower CPU), the ones still to run get
 * their budgets cut in proportion (--extra-budget=-S, at most half), said
 * on stderr; and when they left time unused (tb_plan_budget_grant), the
 * ones still to run get part of it (--extra-budget=S, at most double),
 * aiming KEEPER_GRANT_MARGIN_S before the limit.
 * --profile=auto (the default) is gpu on the CUDA backend, default
 * elsewhere, said on stderr and in budget.json ("profile_auto"); gpu asked
 * for on the CPU runs, with a warning (bench/harness/technique.h).
 * At the end it writes REPORT.md, REPORT.html, summary.md and summary.tex
 * (lib/report/report.h).
 * Each technique runs in a guard (bench/cmd/guard.h): if bench:all dies,
 * even by SIGKILL, the technique and whatever it started (the ddp sweep's
 * MPI ranks) die with it; and a run holds a lock in its results folder, so
 * a second run or a --resume refuses while any process of an earlier one
 * lives.
 * Exit status: 0 when every technique succeeded, 1 when one failed, 128 + the
 * signal when interrupted (130 for SIGINT, 143 for SIGTERM), 2 on a bad flag, when --resume refuses, when another run
 * holds the folder, or when the budgets exceed the profile's limit.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/cmd/cli.h"
#include "bench/cmd/guard.h"
#include "bench/cmd/plan.h"
#include "bench/harness/machine_probe.h"
#include "lib/backend/backend.h"
#include "lib/core/atomic_file.h"
#include "lib/core/clock.h"
#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/core/status.h"
#include "lib/report/fingerprint.h"
#include "lib/report/report.h"
#include "lib/report/resume.h"
#include "lib/report/telemetry.h"

/* Runs before the techniques: the ceilings they are read against. */
#define CEILINGS "ceilings"

#ifndef TB_TECHNIQUES
#error "bench/BUILD defines TB_TECHNIQUES: the technique binaries, comma-separated"
#endif

static volatile sig_atomic_t interrupted; /* the signal that stopped the run; 0: none */
static volatile pid_t child;

static void on_signal(int sig)
{
    interrupted = sig;
    if (child > 0)
        kill(child, sig);
}

/* 128 + the signal, as a shell reports a command that a signal ended:
 * 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP. */
static int interrupted_status(void)
{
    return 128 + (interrupted > 0 ? (int)interrupted : SIGINT);
}

/* The machine's state before a technique (bench/harness/machine_probe.h):
 * one row of results/<device>/machine_probe.csv, appended (rows already
 * written stay whole), and ", machine: ..." for the progress line. A probe
 * that fails costs the row, never the run. */
static void probe_state(const tb_outdir *od, const char *technique, double at_s, char *state,
                        size_t cap)
{
    tb_machine_probe p;
    char path[PATH_MAX + 64];
    if (tb_machine_probe_run(3, &p) != TB_OK ||
        tb_outdir_join(od->results, TB_REPORT_MACHINE_PROBE_CSV, path, sizeof path) != TB_OK) {
        tb_error_clear();
        return;
    }
    FILE *f = fopen(path, "a");
    if (f) {
        if (ftell(f) == 0)
            tb_machine_probe_csv_header(f);
        tb_machine_probe_csv_row(f, technique, at_s, &p);
        fclose(f);
    }
    if (p.cpus == 2)
        snprintf(state, cap, "; two CPUs together: compute %.2fx, copy %.2fx their time "
                 "alone; cache walk %.0f ns a load; core-to-core round trip %.0f ns",
                 tb_machine_probe_fma_ratio(&p), tb_machine_probe_copy_ratio(&p),
                 1e9 * p.cache_load_s, 1e9 * p.xcore_s);
    else
        snprintf(state, cap, "; cache walk %.0f ns a load", 1e9 * p.cache_load_s);
}

/* The directory holding the technique binaries: RUNFILES_DIR, else the
 * runfiles tree next to argv[0], else the current directory (bazel run
 * starts binaries inside their runfiles tree). */
static void find_bin_dir(const char *argv0, char *out, size_t cap)
{
    const char *rf = getenv("RUNFILES_DIR");
    char probe[4096];
    if (rf) {
        snprintf(out, cap, "%s/tunebench/bench", rf);
        return;
    }
    snprintf(probe, sizeof probe, "%s.runfiles/tunebench/bench", argv0);
    if (access(probe, X_OK) == 0) {
        snprintf(out, cap, "%s", probe);
        return;
    }
    snprintf(out, cap, "bench");
}

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* 1 when every name of the comma-separated list is a technique of this
 * build; otherwise says which is not and returns 0. */
static int names_known(const char *flag, const char *list, const tb_plan_entry *techs, int ntech)
{
    for (const char *l = list; *l;) {
        const char *comma = strchr(l, ',');
        size_t len = comma ? (size_t)(comma - l) : strlen(l);
        if (len == 0 || (comma && !comma[1])) { /* ",a", "a,,b", "a," */
            fprintf(stderr, "bench:all: --%s=%s: an empty technique name; give names "
                    "separated by single commas\n", flag, list);
            return 0;
        }
        int known = 0;
        for (int i = 0; i < ntech; i++)
            known |= strlen(techs[i].name) == len && !strncmp(techs[i].name, l, len);
        if (!known) {
            fprintf(stderr, "bench:all: --%s=%s: unknown technique '%.*s'; see --help for the "
                    "list\n", flag, list, (int)len, l);
            return 0;
        }
        l = comma ? comma + 1 : l + len;
    }
    return 1;
}

static void format_secs(double s, char *out, size_t cap)
{
    if (s < 90)
        snprintf(out, cap, "%.0f s", s);
    else
        snprintf(out, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
}

/* The technique in a guard (bench/cmd/guard.h): it and everything it
 * starts end when it does, or when bench:all dies, even by SIGKILL. */
static int run_one(const char *bin, char *const args[])
{
    int rc = tb_guard_run(bin, args, &child, &interrupted);
    if (rc < 0)
        return TB_FAIL(TB_ERR_IO, "fork failed: %s", strerror(errno));
    return rc;
}

/* What budget.json holds (results/README.md): the profile, its limit, the
 * sum, and each technique's budget. */
typedef struct budget_src {
    const char *profile_name;
    int profile;
    const tb_plan_budget *b;
    const tb_plan_entry *const *todo;
    int ntodo;
    int allowed_over;
    int profile_auto;         /* the profile was chosen by --profile=auto */
} budget_src;

static int write_budget(const void *arg, FILE *f)
{
    const budget_src *s = arg;
    fprintf(f, "{\n  \"schema\": \"tunebench-budget/1\",\n  \"profile\": ");
    tb_json_write_string(f, s->profile_name);
    fprintf(f, ",\n  \"profile_auto\": %s", s->profile_auto ? "true" : "false");
    fprintf(f, ",\n  \"limit_s\": %g,\n  \"budget_s\": %g,\n  \"est_s\": %g,\n"
            "  \"undeclared\": %d,\n  \"over\": %s,\n  \"allowed_over\": %s,\n"
            "  \"techniques\": [", s->b->limit_s, s->b->total_s, s->b->est_s, s->b->undeclared,
            s->b->over ? "true" : "false", s->allowed_over ? "true" : "false");
    for (int k = 0; k < s->ntodo; k++) {
        fprintf(f, "%s\n    {\"name\": ", k ? "," : "");
        tb_json_write_string(f, s->todo[k]->name);
        fputs(", \"results\": ", f);
        tb_json_write_string(f, s->todo[k]->results[0] ? s->todo[k]->results : s->todo[k]->name);
        fprintf(f, ", \"budget_s\": %g, \"est_s\": %g}", s->todo[k]->budget_seconds[s->profile],
                s->todo[k]->est_seconds[s->profile]);
    }
    fputs(s->ntodo ? "\n  ]\n}\n" : "]\n}\n", f);
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write budget.json") : TB_OK;
}

/* Prints the plan's budget against the profile's limit. Returns 2 when it
 * is over and not allowed (after saying why), else 0. */
static int check_budget(const tb_plan_budget *b, const char *profile_name,
                        const tb_plan_entry *const *todo, int ntodo, int profile, int allow)
{
    char tot[64], lim[64], est[64];
    format_secs(b->total_s, tot, sizeof tot);
    format_secs(b->limit_s, lim, sizeof lim);
    format_secs(b->est_s, est, sizeof est);
    fprintf(stderr, "bench:all: profile %s: the time budgets of %d techniques add up to %s "
            "(limit %s; estimated run time %s)\n", profile_name, b->n, tot, lim, est);
    if (b->undeclared) {
        fprintf(stderr, "bench:all: WARNING: %d of them declare no budget for profile %s (the "
                "harness's default applies, not counted above):", b->undeclared, profile_name);
        for (int k = 0; k < ntodo; k++)
            if (todo[k]->budget_seconds[profile] <= 0)
                fprintf(stderr, " %s", todo[k]->name);
        fprintf(stderr, "\n");
    }
    if (b->est_s > b->limit_s)
        /* Only a warning: estimates are guesses, the budgets are the contract.
         * But the budgets must leave room for set-up, correctness passes and
         * the techniques without rounds. */
        fprintf(stderr, "bench:all: WARNING: the estimated run time (%s) is above profile %s's "
                "limit (%s): the budgets leave too little time for everything else\n", est,
                profile_name, lim);
    if (!b->over)
        return 0;
    fprintf(stderr, "bench:all: %s: the budgets add up to %s, more than profile %s's limit of "
            "%s, so the run would not keep its promise. ", allow ? "WARNING" : "refused", tot,
            profile_name, lim);
    if (allow)
        fprintf(stderr, "going on as --allow-over-budget asks; budget.json and the report say "
                "so.\n");
    else
        fprintf(stderr, "Lower budget_seconds in the techniques' declarations "
                "(bench/techniques/), run fewer with --only/--skip, or pass "
                "--allow-over-budget.\n");
    return allow ? 0 : 2;
}

/* Opens the device once to learn its results folder and fingerprint,
 * then closes it so the technique binaries have it to themselves. */
static int open_run(const char *device, int threads, const char *out_dir, int argc, char **argv,
                    tb_outdir *od, tb_fingerprint *fp, char *gpu_pci, size_t pci_cap)
{
    tb_device_kind kind;
    int ordinal;
    tb_backend *be = NULL;
    tb_device_info info;
    TB_TRY(tb_device_parse(device, &kind, &ordinal));
    TB_TRY(tb_backend_open(kind, ordinal, threads, &be));
    int rc = be->device_info(be, &info);
    tb_backend_close(be);
    TB_TRY(rc);
    char slug[128];
    tb_device_slug(&info, slug, sizeof slug);
    TB_TRY(tb_outdir_init(od, out_dir, slug));
    TB_TRY(tb_outdir_create(od));
    /* One run per folder: an earlier one's techniques may still be writing
     * (their temporaries are not stale then); a killed run's take a moment
     * to be reaped by their guards. */
    if (tb_run_lock(od->results, 5.0) != 0) /* it said why: in use, or cannot be opened */
        return TB_FAIL(TB_ERR_INVALID, "%s: cannot take this folder's run lock (above)",
                       od->results);
    /* Temporaries of a killed earlier run: nobody will finish them. */
    TB_TRY(tb_atomic_sweep_stale(od->results, NULL));
    TB_TRY(tb_atomic_sweep_stale(od->plots, NULL));
    /* NVML is asked by PCI bus id: its index is not the CUDA ordinal when
     * CUDA_VISIBLE_DEVICES or CUDA's fastest-first order renumbers. */
    snprintf(gpu_pci, pci_cap, "%s", strcmp(info.backend, "cuda") == 0 ? info.pci_bus_id : "");
    return tb_fingerprint_collect(fp, &info, argc, argv);
}

/* What the time keeper leaves of the limit for what follows the last
 * technique (the report, its figures: about 12 s), precedes the first
 * (bazel run's start), and what the last techniques' fixed work overruns
 * (set-up, checks and minimum rounds, which no cut reaches: the keeper
 * projects budgets only): with 15 s here an idle default run on a 2-core
 * AVX2 VM spent 901 s in its techniques, the op sweeps at its end
 * (fused_attention, ddp_sweep, conv_autotuner) 9-25 s past their cut
 * budgets each. (Running the waterfall last instead, so that the keeper
 * cut it, ended at 913 and 884 s but widened its 55 rows, half of the step
 * and loader rows: their median half-width 2.94% and 3.45%, against 1.76%.)
 * With 40 s three idle runs there spent 897, 889 and 905.5 s in their
 * techniques (the waterfall 128-158 s of a budget cut to 103-107 s: its
 * checks and 5 minimum rounds of 19-23 arms on three workloads). On a CPU
 * whose run ends within limit - reserve uncut (AVX-512: 720-790 s) the
 * reserve changes nothing. At 55 s, run 52 (2026-11-29) spent 896 s in its
 * techniques and ended 1.5 s within the limit: the techniques before the
 * waterfall ran 14 s faster than in runs 47-51, so the keeper cut the
 * waterfall 17 s instead of 30-37 s, and the fixed work after it (the
 * waterfall 41 s past its cut budget, conv_autotuner 38, validation_frequency
 * 30, fused_attention 26, ddp_sweep 22) overran as before. 75 s keeps that
 * run 20 s further within the limit. */
#define KEEPER_RESERVE_S 75.0

/* A technique's share of the plan: its budget, or its estimate where it
 * declares none. */
static double keeper_budget(const tb_plan_entry *t, int profile)
{
    double b = t->budget_seconds[profile];
    return b > 0 ? b : t->est_seconds[profile];
}

/* Where the time keeper's grants aim (tb_plan_budget_grant): this far
 * before its limit, so that a run that is ahead ends well within it. */
#define KEEPER_GRANT_MARGIN_S 60.0

/* The seconds bench:all's time keeper adds to todo[k]'s budget (> 0:
 * tb_plan_budget_grant, towards limit_s - KEEPER_GRANT_MARGIN_S) or takes
 * off it (< 0: tb_plan_budget_cut), spent_s into the run: the budgets of
 * todo[k..n) not yet done (their estimates where they declare none) are
 * what is still to run. */
static double keeper_extra(const tb_plan_entry *const *todo, int k, int n,
                           const tb_run_state *st, int profile, double limit_s, double spent_s,
                           double granted_s)
{
    double remaining = 0, budget = todo[k]->budget_seconds[profile];
    for (int i = k; i < n; i++) {
        if (tb_run_state_is_done(st, todo[i]->name))
            continue;
        remaining += keeper_budget(todo[i], profile);
    }
    double cut = tb_plan_budget_cut(limit_s, spent_s, granted_s, remaining, budget);
    if (cut > 0)
        return -cut;
    return tb_plan_budget_grant(limit_s - KEEPER_GRANT_MARGIN_S, spent_s, granted_s, remaining,
                                budget);
}

/* A technique the state lists as finished still has its results: its
 * CSV reads as a tunebench results file (deleted or cut off since, it
 * would leave the report without it, or fail it). */
static int results_readable(const tb_outdir *od, const tb_plan_entry *t)
{
    char name[80], path[PATH_MAX + 96];
    snprintf(name, sizeof name, "%s.csv", t->results[0] ? t->results : t->name);
    if (tb_outdir_join(od->results, name, path, sizeof path) != TB_OK)
        return 0;
    tb_results res;
    tb_results_init(&res);
    int rc = tb_results_read_csv(path, &res);
    tb_results_free(&res);
    return rc == TB_OK;
}

/* The state to continue (--resume) or a fresh one. Returns 2 when --resume
 * must refuse, after saying why. */
static int prepare_state(int resume, const tb_outdir *od, tb_run_state *now, tb_run_state *st)
{
    if (!resume) {
        *st = *now;
        return tb_run_state_save(st, od->results) == TB_OK ? 0 : 1;
    }
    if (tb_run_state_load(od->results, st) != TB_OK) {
        /* Only a folder with no state file holds no earlier run: a state
         * that cannot be read (cut off, edited, its fingerprint gone) must
         * not send the run back to the beginning, over results it lists. */
        char path[PATH_MAX + 64];
        struct stat sb;
        int none = tb_outdir_join(od->results, TB_RUN_STATE_FILE, path, sizeof path) == TB_OK &&
                   stat(path, &sb) != 0 && errno == ENOENT;
        if (!none) {
            fprintf(stderr, "bench:all: --resume refused: the earlier run's state in %s cannot "
                    "be read: %s. Its finished results are still there, untouched. Run without "
                    "--resume to start over (they are then overwritten technique by "
                    "technique), or use another --out-dir.\n", od->results, tb_error_message());
            tb_error_clear();
            return 2;
        }
        fprintf(stderr, "bench:all: --resume: no earlier run to continue in %s (", od->results);
        fprintf(stderr, "%s); starting from the beginning\n", tb_error_message());
        tb_error_clear();
        *st = *now;
        return tb_run_state_save(st, od->results) == TB_OK ? 0 : 1;
    }
    char why[4096];
    if (!tb_run_state_compatible(st, now, why, sizeof why)) {
        fprintf(stderr,
                "bench:all: --resume refused: this run would not measure the same thing as the "
                "interrupted one in %s. What differs:\n%s"
                "Run without --resume to start over (finished results are then overwritten "
                "technique by technique), or use another --out-dir.\n",
                od->results, why);
        return 2;
    }
    fprintf(stderr, "bench:all: resuming: %d finished earlier, kept as they are\n", st->ndone);
    st->complete = 0;
    return 0;
}

/* Saves the telemetry and the run state; with report non-NULL, writes the
 * report and hands back the folder it was written from (closing_lines). */
static int finish(const tb_outdir *od, tb_telemetry *tm, tb_run_state *st,
                  tb_report_folder **report)
{
    char path[PATH_MAX + 64];
    int rc = TB_OK;
    tb_telemetry_stop(tm);
    if (tm && tb_outdir_join(od->results, "telemetry.json", path, sizeof path) == TB_OK)
        rc = tb_telemetry_save(tm, path);
    if (rc == TB_OK)
        rc = tb_run_state_save(st, od->results);
    if (rc == TB_OK && report)
        rc = tb_report_load(od->results, od->plots, report);
    if (rc == TB_OK && report)
        rc = tb_report_write(*report);
    if (rc != TB_OK)
        tb_error_print(stderr);
    return rc;
}

/* --profile=auto made a tb_profile: gpu on the CUDA backend, else
 * default (tb_profile_resolve, which says so); the backend is opened for
 * its name only. */
static void resolve_profile(const char *device, int threads, int *profile)
{
    tb_device_kind kind;
    int ordinal;
    tb_backend *be = NULL;
    tb_device_info info;
    if (*profile != TB_PROFILE_AUTO && *profile != TB_PROFILE_GPU)
        return;
    /* A device that cannot be opened is said by open_run, after the plan:
     * here it only means not CUDA. */
    int rc = tb_device_parse(device, &kind, &ordinal);
    if (rc == TB_OK)
        rc = tb_backend_open(kind, ordinal, threads, &be);
    if (rc == TB_OK) {
        rc = be->device_info(be, &info);
        tb_backend_close(be);
    }
    if (rc != TB_OK)
        tb_error_clear();
    tb_profile_resolve(profile, rc == TB_OK ? info.backend : "cpu", "bench:all");
}

/* The last lines a run prints: its top results, as the report's findings
 * say them, and where the report is. */
static void closing_lines(const tb_outdir *od, const tb_report_folder *report)
{
    fprintf(stderr, "bench:all: top results on this machine (the report's findings):\n");
    if (tb_report_print_findings(report, "  ", stderr) != TB_OK)
        tb_error_print(stderr);
    fprintf(stderr, "bench:all: report: %s/REPORT.html (and REPORT.md, summary.tex); "
                    "figures in %s\n", od->results, od->plots);
}

int main(int argc, char **argv)
{
    /* the command line as given, for the fingerprint (parsing takes the
     * flags out of argv) */
    char *given[64];
    int ngiven = tb_flags_keep_argv(argc, argv, given, 64);
    /* only and skip stay NULL when not given: an empty --only= is refused,
     * not taken for every technique */
    const char *device = "auto", *out_dir = "", *only = NULL, *skip = NULL;
    int profile = TB_PROFILE_AUTO, threads = 0, resume = 0, allow_over = 0;
    /* tb_profile order, then auto */
    static const char *const profiles[] = {"default", "full", "tiny", "gpu", "auto", NULL};
    tb_flag flags[] = {
        {"device", TB_FLAG_STRING, &device, "auto, cpu, cuda or cuda:N", NULL},
        {"profile", TB_FLAG_CHOICE, &profile,
         "sweep length; auto: gpu on the CUDA backend (the real models, 10 minutes on one "
         "H100), else default (15 minutes on a 2-core CPU)", profiles},
        {"out-dir", TB_FLAG_STRING, &out_dir,
         "where results/ and plots/ go (default: the source tree under bazel run)", NULL},
        {"threads", TB_FLAG_INT, &threads, "CPU threads (0 = all cores)", NULL,
         TB_RANGE(0, TB_THREADS_MAX)},
        {"only", TB_FLAG_STRING, &only, "comma-separated techniques to run (default all)", NULL},
        {"skip", TB_FLAG_STRING, &skip,
         "comma-separated techniques to skip (ceilings: skip the ceilings run)", NULL},
        {"resume", TB_FLAG_BOOL, &resume,
         "continue an interrupted run: skip what it finished (same fingerprint only)", NULL},
        {"allow-over-budget", TB_FLAG_BOOL, &allow_over,
         "run even when the techniques' time budgets add up to more than the profile's limit",
         NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    int code = tb_cli_parse("bench:all", "",
                            "Runs the ceilings, then every technique benchmark, then writes the "
                            "report.", flags, nflags, 0, &argc, argv);
    if (code == 2)
        return code;
    char bin_dir[4096], first[4200];
    find_bin_dir(argv[0], bin_dir, sizeof bin_dir);
    snprintf(first, sizeof first, "%s/%s", bin_dir, CEILINGS);
    if (access(first, X_OK) != 0) {
        /* one line, not one failed --describe a technique */
        fprintf(stderr, "bench:all: the technique binaries are not at %s (%s): run it with "
                "`bazel run //bench:all`, or as .bazel/bin/bench/all (its runfiles tree is "
                "found beside it, not through a link to it), or set RUNFILES_DIR to that "
                "tree\n", bin_dir, strerror(errno));
        return 1;
    }
    tb_plan_entry *techs = NULL;
    int ntech = 0;
    if (tb_plan_describe(bin_dir, TB_TECHNIQUES, &techs, &ntech) != TB_OK) {
        tb_error_print(stderr);
        return 1;
    }
    if (code == 0) {
        /* --help: the usage, then what this build would run. */
        printf("\ntechniques:");
        for (int i = 0; i < ntech; i++)
            if (strcmp(techs[i].name, CEILINGS) != 0)
                printf(" %s", techs[i].name);
        printf("\n");
        return 0;
    }
    /* Catch typos before spending minutes on a run. */
    if ((only && !*only) || (skip && !*skip)) {
        fprintf(stderr, "bench:all: --%s= names no technique; leave the flag out to run "
                "them all\n", only && !*only ? "only" : "skip");
        return 2;
    }
    only = only ? only : "";
    skip = skip ? skip : "";
    if (!names_known("only", only, techs, ntech) || !names_known("skip", skip, techs, ntech))
        return 2;
    int profile_auto = profile == TB_PROFILE_AUTO;
    resolve_profile(device, threads, &profile);

    /* The techniques to run: the ceilings first whatever --only says. */
    const tb_plan_entry **todo = calloc((size_t)ntech + 1, sizeof *todo);
    int ntodo = 0;
    if (!todo) {
        fprintf(stderr, "bench:all: out of memory\n");
        return 1;
    }
    for (int i = 0; i < ntech; i++) {
        const tb_plan_entry *t = &techs[i];
        int ceilings = strcmp(t->name, CEILINGS) == 0;
        if ((*only && !ceilings && !in_list(only, t->name)) || in_list(skip, t->name))
            continue;
        todo[ntodo++] = t;
    }
    /* --only's techniques all skipped: the run would time the ceilings alone */
    int asked = 0;
    for (int i = 0; *only && i < ntodo; i++)
        asked += in_list(only, todo[i]->name);
    if (*only && asked == 0) {
        fprintf(stderr, "bench:all: --only=%s and --skip=%s leave none of --only's techniques "
                "to run\n", only, skip);
        free(todo);
        return 2;
    }
    /* Before anything is written: a refused plan leaves the results folder
     * (and an interrupted run's state) as it was. */
    tb_plan_budget budget;
    /* Every profile's total too, so that a declaration that breaks another
     * profile's limit shows before someone runs that profile. */
    fprintf(stderr, "bench:all: budgets of this plan per profile:");
    for (int p = 0; p < TB_PROFILES; p++) {
        tb_plan_budget_sum(todo, ntodo, p, &budget);
        fprintf(stderr, " %s %g s of %g s%s%s", profiles[p], budget.total_s, budget.limit_s,
                budget.over ? " (OVER)" : "", p + 1 < TB_PROFILES ? "," : "\n");
    }
    tb_plan_budget_sum(todo, ntodo, profile, &budget);
    int brc = check_budget(&budget, profiles[profile], todo, ntodo, profile, allow_over);
    if (brc != 0)
        return brc;

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal: interrupted, resumable */

    tb_outdir od;
    tb_fingerprint *fp = calloc(1, sizeof *fp);
    tb_run_state *now = calloc(1, sizeof *now), *st = calloc(1, sizeof *st);
    tb_telemetry *tm = NULL;
    char gpu_pci[32] = "";
    if (!fp || !now || !st) {
        fprintf(stderr, "bench:all: out of memory\n");
        return 1;
    }
    if (open_run(device, threads, out_dir, ngiven, given, &od, fp, gpu_pci, sizeof gpu_pci) != TB_OK) {
        tb_error_print(stderr);
        return tb_exit_code(tb_error_last());
    }
    tb_run_state_init(now, profiles[profile], threads, fp);
    int prc = prepare_state(resume, &od, now, st);
    if (prc != 0) {
        if (prc == 1)
            tb_error_print(stderr);
        return prc;
    }
    if (tb_telemetry_start(gpu_pci, 500, &tm) != TB_OK) {
        /* Telemetry is a help for reading the numbers, not a reason to stop. */
        fprintf(stderr, "bench:all: no telemetry this run: %s\n", tb_error_message());
        tb_error_clear();
        tm = NULL;
    }
    char tpath[PATH_MAX + 64];
    if (tm && resume && st->ndone > 0 &&
        (tb_outdir_join(od.results, "telemetry.json", tpath, sizeof tpath) != TB_OK ||
         tb_telemetry_keep_earlier(tm, tpath) != TB_OK)) {
        /* the techniques kept from the earlier session lose their telemetry */
        fprintf(stderr, "bench:all: the earlier session's telemetry is not kept: %s\n",
                tb_error_message());
        tb_error_clear();
    }

    /* Planned work, in estimated seconds for the chosen profile. */
    double planned = 0;
    for (int k = 0; k < ntodo; k++)
        if (!tb_run_state_is_done(st, todo[k]->name))
            planned += todo[k]->est_seconds[profile];

    char bpath[PATH_MAX + 64];
    budget_src bsrc = {profiles[profile], profile, &budget, todo, ntodo, allow_over,
                       profile_auto};
    if (tb_outdir_join(od.results, "budget.json", bpath, sizeof bpath) != TB_OK ||
        tb_atomic_write_with(bpath, write_budget, &bsrc) != TB_OK) {
        /* The report would only lose its budget section: say so, go on. */
        tb_error_print(stderr);
        tb_error_clear();
    }

    char a_dev[256], a_prof[64], a_out[4096], a_thr[64];
    snprintf(a_dev, sizeof a_dev, "--device=%s", device);
    snprintf(a_prof, sizeof a_prof, "--profile=%s", profiles[profile]);
    snprintf(a_out, sizeof a_out, "--out-dir=%s", out_dir);
    snprintf(a_thr, sizeof a_thr, "--threads=%d", threads);

    /* The time keeper (plan.h) holds the run to the profile's limit, or to
     * the plan's own total when --allow-over-budget let it exceed that. */
    double keeper_limit = (budget.limit_s > budget.total_s ? budget.limit_s : budget.total_s) -
                          KEEPER_RESERVE_S;
    double t0 = tb_clock_s(), done_est = 0, granted = 0;
    int failed = 0;
    for (int k = 0; k < ntodo && !interrupted; k++) {
        const tb_plan_entry *t = todo[k];
        if (tb_run_state_is_done(st, t->name)) {
            if (results_readable(&od, t)) {
                fprintf(stderr, "bench:all: [%d/%d] %s: finished in the interrupted run, kept\n",
                        k + 1, ntodo, t->name);
                continue;
            }
            fprintf(stderr, "bench:all: [%d/%d] %s: finished in the interrupted run, but its "
                    "results cannot be read now (%s): running it again\n", k + 1, ntodo,
                    t->name, tb_error_message());
            tb_error_clear();
        }
        double elapsed = tb_clock_s() - t0;
        /* Scale the remaining estimate by how fast this machine has been so far. */
        double speed = done_est > 0 ? elapsed / done_est : 1.0;
        char eta[64];
        format_secs((planned - done_est) * speed, eta, sizeof eta);
        char state[192] = "";
        probe_state(&od, t->name, elapsed, state, sizeof state);
        if (interrupted) /* a signal during the probe: start nothing more */
            break;
        fprintf(stderr, "bench:all: [%d/%d] %s (about %s left%s)\n", k + 1, ntodo, t->name, eta,
                state);
        if (tm && tb_telemetry_segment(tm, t->name) != TB_OK)
            tb_error_clear();
        char bin[4200], a_extra[64];
        snprintf(bin, sizeof bin, "%s/%s", bin_dir, t->name);
        double extra = keeper_extra(todo, k, ntodo, st, profile, keeper_limit, tb_clock_s() - t0,
                                    granted);
        snprintf(a_extra, sizeof a_extra, "--extra-budget=%.3f", extra);
        if (extra < 0)
            fprintf(stderr, "bench:all: time keeper: %s's budget cut by %.1f s to %.1f s, so "
                    "that the run ends within %.0f s (%.0f s spent)\n", t->name, -extra,
                    t->budget_seconds[profile] + extra, keeper_limit, tb_clock_s() - t0);
        else if (extra > 0)
            fprintf(stderr, "bench:all: time keeper: %s's budget raised by %.1f s to %.1f s: "
                    "the techniques so far left time unused (%.0f s spent; aiming to end "
                    "within %.0f s)\n", t->name, extra, t->budget_seconds[profile] + extra,
                    tb_clock_s() - t0, keeper_limit - KEEPER_GRANT_MARGIN_S);
        char *args[7] = {bin, a_dev, a_prof, a_thr};
        int nargs = 4;
        if (extra != 0)
            args[nargs++] = a_extra;
        if (*out_dir)
            args[nargs++] = a_out;
        args[nargs] = NULL;
        double s = tb_clock_s();
        int rc = run_one(bin, args);
        if (rc != 0 && !interrupted) {
            failed++;
            char how[96] = "";
            if (rc > 128 && rc < 128 + NSIG)
                snprintf(how, sizeof how, ", killed by signal %d (%s)", rc - 128,
                         strsignal(rc - 128));
            /* its files are replaced only whole (atomically), but a technique
             * that failed after writing its CSV leaves this run's there */
            fprintf(stderr, "bench:all: %s failed (exit %d%s): not recorded as finished, so "
                    "--resume runs it again; what it wrote before failing stays (each file "
                    "whole: its earlier results, or this run's)\n", t->name, rc, how);
        }
        if (rc == 0) {
            /* Recorded only once the technique's files are all in place. */
            if (tb_run_state_mark_done(st, t->name) != TB_OK ||
                tb_run_state_save(st, od.results) != TB_OK)
                tb_error_print(stderr);
        }
        fprintf(stderr, "bench:all: %s took %.1f s\n", t->name, tb_clock_s() - s);
        done_est += t->est_seconds[profile];
        granted += keeper_budget(t, profile) + extra;
    }
    if (interrupted) {
        /* A technique killed by the signal could not remove its temporaries
         * (its process is gone now, so they are stale): nothing half-written
         * stays behind. */
        if (tb_atomic_sweep_stale(od.results, NULL) != TB_OK ||
            tb_atomic_sweep_stale(od.plots, NULL) != TB_OK)
            tb_error_print(stderr);
        finish(&od, tm, st, NULL);
        fprintf(stderr, "bench:all: interrupted; every technique that finished keeps its "
                        "results; continue with --resume\n");
        return interrupted_status();
    }
    st->complete = failed == 0;
    tb_report_folder *report = NULL;
    int frc = finish(&od, tm, st, &report);
    if (interrupted) {
        /* during the report: the techniques' results are whole, the report
         * may not be; the state says unfinished, so --resume writes it */
        st->complete = 0;
        if (tb_run_state_save(st, od.results) != TB_OK)
            tb_error_print(stderr);
        fprintf(stderr, "bench:all: interrupted while writing the report; every technique "
                        "keeps its results; write it with bench:report, or continue with "
                        "--resume\n");
        tb_report_folder_free(report);
        return interrupted_status();
    }
    tb_telemetry_free(tm);
    fprintf(stderr, "bench:all: %d steps in %.1f s, %d failed\n", ntodo, tb_clock_s() - t0, failed);
    if (frc == TB_OK)
        closing_lines(&od, report);
    tb_report_folder_free(report);
    free(fp);
    free(now);
    free(st);
    free(todo);
    free(techs);
    return failed || frc != TB_OK ? 1 : 0;
}
