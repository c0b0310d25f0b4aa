/*
 * all.c - `bazel run //bench:all`: runs every technique's benchmark, one
 * after another, and reports progress with an estimate of the time left.
 *
 *   bazel run //bench:all -- [--device=auto] [--profile=default|full|tiny]
 *                            [--out-dir=DIR] [--only=a,b] [--skip=a,b]
 *
 * bench:all cannot call Bazel: the technique binaries are its data
 * dependencies, found in its runfiles tree. Each one writes its own results
 * atomically, so an interrupted run keeps every technique it finished.
 * Exit status: 0 when every technique succeeded, 1 when one failed, 130 when
 * interrupted, 2 on a bad flag.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/techniques.h"
#include "lib/flags.h"
#include "lib/status.h"

static volatile sig_atomic_t interrupted;
static volatile pid_t child;

static void on_signal(int sig)
{
    interrupted = 1;
    if (child > 0)
        kill(child, sig);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static void format_secs(double s, char *out, size_t cap)
{
    if (s < 90)
        snprintf(out, cap, "%.0f s", s);
    else
        snprintf(out, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
}

static int run_one(const char *bin, char *const args[])
{
    pid_t pid = fork();
    if (pid < 0)
        return TB_FAIL(TB_ERR_IO, "fork failed: %s", strerror(errno));
    if (pid == 0) {
        execv(bin, args);
        fprintf(stderr, "bench:all: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    child = pid;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    child = 0;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    const char *device = "auto", *out_dir = "", *only = "", *skip = "";
    int profile = 0, threads = 0, help = 0;
    static const char *const profiles[] = {"default", "full", "tiny", NULL};
    tb_flag flags[] = {
        {"device", TB_FLAG_STRING, &device, "auto, cpu, cuda or cuda:N", NULL},
        {"profile", TB_FLAG_CHOICE, &profile, "sweep length", profiles},
        {"out-dir", TB_FLAG_STRING, &out_dir,
         "where results/ and plots/ go (default: the source tree under bazel run)", NULL},
        {"threads", TB_FLAG_INT, &threads, "CPU threads (0 = all cores)", NULL},
        {"only", TB_FLAG_STRING, &only, "comma-separated techniques to run (default all)", NULL},
        {"skip", TB_FLAG_STRING, &skip, "comma-separated techniques to skip", NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    if (tb_flags_parse(flags, nflags, &argc, argv, NULL, &help) != TB_OK) {
        tb_error_print(stderr);
        return 2;
    }
    if (help) {
        tb_flags_usage(stdout, "bench:all", "Runs every technique benchmark.", flags, nflags);
        printf("\ntechniques:");
        for (int i = 0; i < tb_technique_count; i++)
            printf(" %s", tb_techniques[i].name);
        printf("\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "bench:all: unexpected argument '%s'; see --help\n", argv[1]);
        return 2;
    }
    for (const char *l = only; *l;) {
        /* Catch typos in --only before spending minutes on a run. */
        const char *comma = strchr(l, ',');
        size_t len = comma ? (size_t)(comma - l) : strlen(l);
        int known = 0;
        for (int i = 0; i < tb_technique_count; i++)
            known |= strlen(tb_techniques[i].name) == len && !strncmp(tb_techniques[i].name, l, len);
        if (!known) {
            fprintf(stderr, "bench:all: unknown technique '%.*s' in --only; see --help\n", (int)len, l);
            return 2;
        }
        l = comma ? comma + 1 : l + len;
    }

    char bin_dir[4096];
    find_bin_dir(argv[0], bin_dir, sizeof bin_dir);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* Planned work, in estimated seconds for the chosen profile. */
    double planned = 0;
    int todo[64], ntodo = 0;
    for (int i = 0; i < tb_technique_count && ntodo < 64; i++) {
        const tb_technique_entry *t = &tb_techniques[i];
        if ((*only && !in_list(only, t->name)) || in_list(skip, t->name))
            continue;
        todo[ntodo++] = i;
        planned += t->est_seconds[profile];
    }

    char a_dev[256], a_prof[64], a_out[4096], a_thr[64];
    snprintf(a_dev, sizeof a_dev, "--device=%s", device);
    snprintf(a_prof, sizeof a_prof, "--profile=%s", profiles[profile]);
    snprintf(a_out, sizeof a_out, "--out-dir=%s", out_dir);
    snprintf(a_thr, sizeof a_thr, "--threads=%d", threads);

    double t0 = now(), done_est = 0;
    int failed = 0;
    for (int k = 0; k < ntodo && !interrupted; k++) {
        const tb_technique_entry *t = &tb_techniques[todo[k]];
        double elapsed = now() - t0;
        /* Scale the remaining estimate by how fast this machine has been so far. */
        double speed = done_est > 0 ? elapsed / done_est : 1.0;
        char eta[64];
        format_secs((planned - done_est) * speed, eta, sizeof eta);
        fprintf(stderr, "bench:all: [%d/%d] %s (about %s left)\n", k + 1, ntodo, t->name, eta);
        char bin[4200];
        snprintf(bin, sizeof bin, "%s/%s", bin_dir, t->name);
        char *args[] = {bin, a_dev, a_prof, a_thr, *out_dir ? a_out : NULL, NULL};
        double s = now();
        int rc = run_one(bin, args);
        if (rc != 0 && !interrupted) {
            failed++;
            fprintf(stderr, "bench:all: %s failed (exit %d); its earlier results are kept\n",
                    t->name, rc);
        }
        fprintf(stderr, "bench:all: %s took %.1f s\n", t->name, now() - s);
        done_est += t->est_seconds[profile];
    }
    if (interrupted) {
        fprintf(stderr, "bench:all: interrupted; every technique that finished keeps its results\n");
        return 130;
    }
    fprintf(stderr, "bench:all: %d techniques in %.1f s, %d failed\n", ntodo, now() - t0, failed);
    return failed ? 1 : 0;
}
