/*
 * rounds.c - the interleaved, paired, adaptive timing engine of rounds.h.
 *
 * What it does, in order (the rules are stated where they live below):
 *   warm-up    each arm alone, in tb_rounds_build_order(seed, 0) (an arm's
 *              first run builds it: the baseline is not always built
 *              first), in probes of `batch` units; a probe shorter
 *              than PROBE_MIN_S doubles the batch (the arm's own timer
 *              overhead then stays small) and restarts the history; the arm
 *              has settled when tb_rounds_settled says so (the median of the
 *              last 3 per-unit times is not below the median of the 3
 *              before by more than 1.5%), or at cfg->warmup_max_s (wall
 *              time from its first call, lazy setup included; but never
 *              before 3 probes of the final batch size, which the estimate
 *              below needs), or after WARMUP_MAX_PROBES probes;
 *   rep length units_per_rep = ceil(1.05 min_rep_s / unit time), the unit
 *              time being the median of the last 3 probes when settled,
 *              their minimum when the cap cut a still-falling warm-up (its
 *              latest, warmest units; a cold first unit of 1.3 s must not
 *              make a 0.15 s step a repetition of its own); 5% headroom:
 *              it is an estimate. An A/A arm with its base's run and user
 *              (the same code on the same state) is not warmed up again:
 *              it takes its base's units_per_rep and reports 0 warm-up
 *              units;
 *   fit        with cfg->min_rep_floor_s > 0 and a budget: when min_rounds
 *              rounds (each arm's repetitions in tb_rounds_sequence's slots,
 *              a whole number of units each) would take more than 85% of
 *              the budget the warm-up left, the longest repetition length
 *              down to the floor at which they take no more (bisection);
 *              the rounds then run with it as their min_rep_s;
 *   recalibrate after round 1, an arm whose repetition lasted under half of
 *              min_rep_s takes its length from that round instead (once);
 *   rounds     round r runs tb_rounds_sequence(seed, r, ...): every arm
 *              still running once (an A/A arm tb_rounds_slots times), in
 *              tb_rounds_order(seed, r), each
 *              compared arm between two repetitions of its baseline (why:
 *              rounds.h); Google Benchmark times each repetition: the
 *              sequence is registered in order with iterations =
 *              units_per_rep, one repetition and manual time (a baseline's
 *              several slots under one name: GB reports them as its
 *              repetitions, in order), run quietly (tbb_run_quiet), read
 *              back with gb_results_parse and cleared; the arm's run() does
 *              all units in one call and each GB iteration reports
 *              seconds / units, so GB's time per iteration is the seconds
 *              per unit;
 *   stop       per arm, after min_rounds of it: a compared arm (an A/A
 *              arm too) stops on "target" when its tb_stats_paired
 *              half-width is at most target_half_width after this round and
 *              the one before, both at least min_rounds (arm_met_target
 *              says why two, and why never on the noise floor); a baseline
 *              stops when its last compared arm does (one with none at all
 *              runs min_rounds); the experiment ends when no arm runs, or,
 *              after min_rounds, on "cap" at max_rounds, or on "budget" when
 *              the time spent (warm-up included) plus the last round's would
 *              pass budget_s
 *              (rounds only shrink as arms stop, so a run ends within its
 *              budget unless a round is longer than the one before); the
 *              arms still running then stop for that reason. Never on a
 *              verdict.
 *   rebuilds   with cfg->rounds_per_build > 0, before each round: each
 *              group (a baseline and the arms compared with it) whose
 *              running arms with a rebuild hook (not an A/A arm on its
 *              base's state) have all run the longest build_interval of
 *              theirs since their last build (rounds_per_build, or more
 *              when a last rebuild took over TB_ROUNDS_REBUILD_SHARE of that
 *              many repetitions) has those arms rebuilt together, untimed,
 *              in tb_rounds_build_order(seed, r), unless
 *              too few rounds are left for the new build (tb_rounds_build_worth:
 *              half its interval, at least 2), and its build count grows; each
 *              round records the build of each arm
 *              (a compared arm's: its own count plus its base's, so it
 *              changes when either is rebuilt); comparisons are
 *              tb_stats_paired_builds_pooled over those (the spread
 *              between builds pooled over the experiment's arms,
 *              pool_builds), and arm_met_target
 *              waits for TB_ROUNDS_MIN_BUILDS builds;
 *   machine    over the rounds: the mean of /proc/loadavg's 1-minute value
 *              (read after every round) and the CPU seconds other processes
 *              took = (busy jiffies of /proc/stat's "cpu" line: user, nice,
 *              system, irq, softirq, steal) minus this process's utime +
 *              stime (/proc/self/stat, all its threads) and its children's:
 *              the waited-for ones' (cutime + cstime), the live ones'
 *              (/proc/self/task/<tid>/children: forked loader workers) and
 *              cfg->own_pid's, children running arms, over the same
 *              interval; grandchildren count as others (the DDP sweep's
 *              ranks under mpirun would: that sweep judges by the load
 *              alone). busy = tb_rounds_busy_rule: others above 10% of
 *              one core on average over the rounds; only where that cannot
 *              be measured (no /proc/stat, or under 1 s of real time, a
 *              jiffy being 10 ms) the load average above cores + 0.5 (it
 *              counts this process's own threads, loader workers included,
 *              so it is no more than a fallback). Reading /proc twice per
 *              experiment and loadavg once per round costs microseconds;
 *              scanning every process would cost more and say the same.
 *              And after every round the round trip of a cache line
 *              between the first two CPUs (tb_machine_probe_xcore_s,
 *              XCORE_TRIPS trips, 0.1-0.7 ms): on the 2-vCPU EPYC VM it is
 *              55-80 ns while the two vCPUs share a last-level cache and
 *              315-570 ns while the host runs them apart, and two threads
 *              then step no faster than one (small CNN, batch 16: 4,500
 *              against 7,100-9,000 images/s), for seconds to minutes at a
 *              time. The experiment's median goes to its rows (xcore_ns);
 *              it moved (xcore_moved) when at least XCORE_MIN_SLOW rounds
 *              and at least XCORE_MIN_SLOW others lie on either side of
 *              XCORE_MOVED (3) times the least round: its ratios then mix two
 *              machines, and the rows say busy.
 *   JSON       every round's GB rows go into cfg->gbench_json as one GB JSON
 *              file (the first round's context, all rows; a run's name is
 *              the same in every round, so GB's compare.py sees the rounds
 *              as repetitions), written atomically.
 *   test hold  with TB_TEST_HOLD_ROUNDS=1 in the environment, the engine stops
 *              after round 1, says so on stderr, and waits for a signal:
 *              bench:resume_test interrupts a technique mid-run with it,
 *              whatever the machine's speed (a tiny run lasts a second).
 *   GB flags   the rounds run every registered arm whatever
 *              --benchmark_filter says (a filtered-out arm would leave a
 *              round without its pair); --benchmark_enable_random_interleaving
 *              must stay off (it would reorder a round behind the engine's
 *              back: the recorded orders would then be wrong).
 *
 * Test: bazel test //bench/harness:rounds_test
 */
#include "bench/harness/rounds.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/harness/gb_results.h"
#include "bench/harness/gbench_shim.h"
#include "bench/harness/machine_probe.h"
#include "bench/harness/rounds_internal.h"
#include "lib/core/atomic_file.h"
#include "lib/core/rng.h"

#define PROBE_MIN_S 0.002         /* a warm-up probe shorter than this doubles its batch */
#define WARMUP_MAX_PROBES 256
#define REP_HEADROOM 1.05         /* aim 5% above min_rep_s: the settled time is an estimate */
#define BUSY_MIN_WALL_S 1.0       /* jiffies (10 ms) are too coarse to judge a shorter span */
#define XCORE_TRIPS 1000          /* round trips sampled after each round */
#define XCORE_MOVED TB_MACHINE_XCORE_STATES /* a round this many times the least one's is
                                              another state */
#define XCORE_MIN_SLOW 2          /* rounds on each side before the experiment 'moved' */
#define MAX_BATCH (1L << 40)
#define MAX_UNITS_PER_REP (1L << 40)
#define ORDER_STREAM 0x726f756e6473ull /* "rounds": apart from rng.h's data streams */
#define BUILD_STREAM 0x6275696c6473ull /* "builds": the order arms are built in */

/* TB_TEST_HOLD_ROUNDS (the header comment): waits here until a signal
 * ends the process. */
static void hold_if_asked(void)
{
    const char *hold = getenv("TB_TEST_HOLD_ROUNDS");
    if (!hold || strcmp(hold, "1") != 0)
        return;
    fprintf(stderr, "rounds: held after round 1 (TB_TEST_HOLD_ROUNDS=1): waiting for a signal\n");
    for (;;)
        pause();
}

/* ---- clock ---- */

static double real_now(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double (*clock_fn)(void *) = real_now;
static void *clock_ctx;

void tb_rounds_set_clock(double (*now)(void *ctx), void *ctx)
{
    clock_fn = now ? now : real_now;
    clock_ctx = now ? ctx : NULL;
}

static double now_s(void) { return clock_fn(clock_ctx); }

/* ---- pure rules ---- */

static double median3(const double *t)
{
    double a = t[0], b = t[1], c = t[2];
    if (a > b) { double x = a; a = b; b = x; }
    if (b > c) { double x = b; b = c; c = x; }
    if (a > b) { double x = a; a = b; b = x; }
    return b;
}

static double min3(const double *t)
{
    return fmin(t[0], fmin(t[1], t[2]));
}

int tb_rounds_settled(const double *t, int n)
{
    if (n < 6)
        return 0;
    return median3(t + n - 3) >= median3(t + n - 6) * (1.0 - TB_ROUNDS_SETTLE);
}

/* A permutation of 0..n-1 into perm from (seed, r) on its own stream. */
static void shuffle(uint64_t seed, int r, uint64_t stream, int n, int *perm)
{
    tb_rng g = tb_rng_make(seed, (uint64_t)r, 0, stream);
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)tb_rng_below(&g, (uint32_t)(i + 1));
        int x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
}

void tb_rounds_order(uint64_t seed, int r, int n, int *perm)
{
    shuffle(seed, r, ORDER_STREAM, n, perm);
}

void tb_rounds_build_order(uint64_t seed, int r, int n, int *perm)
{
    shuffle(seed, r, BUILD_STREAM, n, perm);
}

void tb_rounds_slots(const int *base, const int *aa, int n, int *slots)
{
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; j < n && aa[i] && base[i] != i; j++)
            k += j != base[i] && base[j] == base[i] && !aa[j];
        int s = 1 + k / TB_ROUNDS_AA_PER_SLOT;
        slots[i] = s < TB_ROUNDS_AA_MAX_SLOTS ? s : TB_ROUNDS_AA_MAX_SLOTS;
    }
}

int tb_rounds_sequence(uint64_t seed, int r, const int *base, const int *active,
                       const int *slots, int n, int *seq)
{
    /* a common multiple of every slot count: extra repetitions' places are
     * whole numbers in units of 1 / (2 AA_LCM) of a list entry */
    enum { AA_LCM = 6 };
    _Static_assert(AA_LCM % 2 == 0 && AA_LCM % TB_ROUNDS_AA_MAX_SLOTS == 0,
                   "AA_LCM must be a multiple of every slot count");
    const int most = TB_ROUNDS_AA_MAX_SLOTS;
    int *order = seq + (size_t)(2 * most + 1) * n; /* n entries */
    int *list = order + n;                         /* one baseline's repetitions, their */
    int *key = list + (size_t)most * n;            /* places: most * n entries each */
    int len = 0;
    tb_rounds_order(seed, r, n, order);
    for (int k = 0; k < n; k++) {
        int b = order[k];
        if (base[b] != b || !active[b])
            continue;
        int m = 0;
        for (int j = 0; j < n; j++) {
            int x = order[j];
            if (x != b && base[x] == b && active[x]) {
                key[m] = 2 * AA_LCM * m;
                list[m++] = x;
            }
        }
        /* an arm's j-th extra repetition goes m * j / slots places after it
         * (cyclically), behind whatever entry is there */
        int cnt = m;
        for (int p = 0; p < m; p++) {
            int sl = slots ? slots[list[p]] : 1;
            for (int j = 1; j < sl; j++) {
                list[cnt] = list[p];
                key[cnt++] = 2 * ((AA_LCM * p + j * m * AA_LCM / sl) % (m * AA_LCM)) + 1;
            }
        }
        for (int i = 1; i < cnt; i++) { /* insertion sort by place, stable */
            int x = list[i], kx = key[i], j = i - 1;
            for (; j >= 0 && key[j] > kx; j--) {
                list[j + 1] = list[j];
                key[j + 1] = key[j];
            }
            list[j + 1] = x;
            key[j + 1] = kx;
        }
        seq[len++] = b;
        for (int i = 0; i < cnt; i++) {
            seq[len++] = list[i];
            seq[len++] = b;
        }
    }
    return len;
}

int tb_rounds_xcore_moved(const double *x, int n)
{
    double least = INFINITY;
    for (int i = 0; i < n; i++)
        least = x[i] < least ? x[i] : least;
    int slow = 0;
    for (int i = 0; i < n; i++)
        slow += x[i] > XCORE_MOVED * least;
    return slow >= XCORE_MIN_SLOW && n - slow >= XCORE_MIN_SLOW;
}

int tb_rounds_busy_rule(double load_avg, double other_cpu_s, double wall_s, int ncpu)
{
    if (!isnan(other_cpu_s) && wall_s > 0)
        return other_cpu_s / wall_s > TB_ROUNDS_BUSY_CORES;
    return !isnan(load_avg) && load_avg > ncpu + 0.5;
}

int tb_rounds_busy_by_load(double load_avg)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return tb_rounds_busy_rule(load_avg, NAN, 0, ncpu > 0 ? (int)ncpu : 1);
}

const char *tb_rounds_stop_name(tb_rounds_stop s)
{
    switch (s) {
    case TB_STOP_TARGET: return "target";
    case TB_STOP_BUDGET: return "budget";
    case TB_STOP_CAP: return "cap";
    }
    return "?";
}

/* ---- machine checks (/proc) ---- */

typedef struct machine_snap {
    int ok;                 /* 0: /proc unreadable (not Linux): no numbers */
    double busy_s, self_s;  /* all CPUs' busy seconds; this process's CPU seconds */
} machine_snap;

static int read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

/* utime + stime of /proc/<what>/stat in clock ticks, with its waited-for
 * children's (cutime + cstime) when `reaped`; 0 and *ok = 0 when
 * unreadable. */
static unsigned long long proc_ticks(const char *what, int reaped, int *ok)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%s/stat", what);
    *ok = 0;
    if (!read_text(path, buf, sizeof buf))
        return 0;
    /* fields after the command's closing parenthesis: 3 state ... 14 utime
     * 15 stime 16 cutime 17 cstime */
    const char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    long long cut = 0, cst = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                     &ut, &st, &cut, &cst) != 4)
        return 0;
    *ok = 1;
    return ut + st + (reaped && cut > 0 ? (unsigned long long)cut : 0) +
           (reaped && cst > 0 ? (unsigned long long)cst : 0);
}

/* The CPU ticks of this process's live children (each thread's
 * /proc/self/task/<tid>/children), those in own_pid left out (counted
 * there); 0 where the kernel does not list them. Forked loader workers
 * (bench:workers, prefetch, persistent_workers) are this run's own work:
 * counted as others, every row of theirs read busy. A child reaped between
 * two samples moves from here to the parent's cutime: its total counts
 * once. */
static unsigned long long live_children_ticks(const int *own_pid)
{
    unsigned long long sum = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[96], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%.32s/children", e->d_name);
        if (!read_text(path, buf, sizeof buf))
            continue;
        char *save = NULL;
        for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
            int pid = atoi(tok), own = 0, ok;
            for (int i = 0; i < TB_ROUNDS_OWN_PIDS; i++)
                own |= own_pid[i] == pid;
            if (pid > 0 && !own)
                sum += proc_ticks(tok, 0, &ok);
        }
    }
    closedir(d);
    return sum;
}

/* Each own_pid > 0: that child's CPU time counts as this process's. */
static machine_snap machine_sample(const int *own_pid)
{
    machine_snap s = {0, 0, 0};
    char buf[4096];
    double tick = (double)sysconf(_SC_CLK_TCK);
    if (tick <= 0 || !read_text("/proc/stat", buf, sizeof buf))
        return s;
    unsigned long long v[8] = {0};
    if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) < 7)
        return s;
    /* user nice system idle iowait irq softirq steal: all but idle and iowait */
    s.busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick;
    int ok;
    unsigned long long self = proc_ticks("self", 1, &ok);
    if (!ok)
        return s;
    self += live_children_ticks(own_pid);
    for (int i = 0; i < TB_ROUNDS_OWN_PIDS; i++) {
        if (own_pid[i] <= 0)
            continue;
        char pid[32];
        snprintf(pid, sizeof pid, "%d", own_pid[i]);
        unsigned long long child = proc_ticks(pid, 0, &ok);
        if (!ok)
            return s;
        self += child;
    }
    s.self_s = (double)self / tick;
    s.ok = 1;
    return s;
}

double tb_rounds_load_avg(void)
{
    char buf[256];
    double l;
    if (!read_text("/proc/loadavg", buf, sizeof buf) || sscanf(buf, "%lf", &l) != 1)
        return NAN;
    return l;
}

/* ---- one arm's repetition under Google Benchmark ---- */

typedef struct arm_job {
    const tb_arm *arm;
    long units;
    int rc;              /* status of prepare/run in the last round */
    int active;          /* 1 while the arm still runs in the rounds */
    int met_before;      /* its interval was within the target after the last round */
    int builds;          /* rebuilds of its state so far (cfg->rounds_per_build) */
    int since_build;     /* rounds it ran since its last build */
    double rebuild_s;    /* what its last rebuild took (0: none yet) */
    double unit_s;       /* seconds a unit, from the warm-up */
} arm_job;

static void gb_arm_fn(tbb_state *st, void *user)
{
    arm_job *job = user;
    const tb_arm *arm = job->arm;
    job->rc = TB_OK;
    if ((arm->prepare && (job->rc = arm->prepare(arm->user)) != TB_OK) ||
        (arm->resume && (job->rc = arm->resume(arm->user)) != TB_OK)) {
        tbb_skip_with_error(st, tb_error_message());
        return;
    }
    double per_unit = 0;
    int first = 1;
    while (tbb_keep_running(st)) {
        if (first) {
            double s = 0;
            job->rc = arm->run(arm->user, job->units, &s);
            if (job->rc == TB_OK && !(s > 0))
                job->rc = TB_FAIL(TB_ERR_DATA, "arm %s reported %g s for %ld units", arm->name,
                                  s, job->units);
            if (job->rc != TB_OK) {
                tbb_skip_with_error(st, tb_error_message());
                return;
            }
            per_unit = s / (double)job->units;
            first = 0;
        }
        tbb_set_iteration_time(st, per_unit);
    }
}

/* ---- warm-up ---- */

static int warm_up(const tb_rounds_cfg *cfg, const tb_arm *arm, long *units_run,
                   double *unit_s, double *untimed_s)
{
    double hist[WARMUP_MAX_PROBES];
    int n = 0, probes = 0;
    long batch = 1;
    double t0 = now_s(), last = 0, timed = 0;
    *units_run = 0;
    if (arm->prepare)
        TB_TRY(arm->prepare(arm->user));
    if (arm->resume)
        TB_TRY(arm->resume(arm->user));
    for (;;) {
        double s = 0;
        TB_TRY(arm->run(arm->user, batch, &s));
        if (!(s >= 0))
            return TB_FAIL(TB_ERR_DATA, "arm %s reported %g s", arm->name, s);
        *units_run += batch;
        timed += s;
        probes++;
        last = s / (double)batch;
        /* the time cap waits for 3 probes of the final batch: fewer give
         * no estimate (a first call that builds or compiles is no unit) */
        int capped = (n >= 2 && now_s() - t0 >= cfg->warmup_max_s) || probes >= WARMUP_MAX_PROBES;
        if (s < PROBE_MIN_S && batch < MAX_BATCH) {
            batch *= 2;
            n = 0; /* per-unit times of different batches are not compared */
        } else {
            hist[n++] = last;
            if (tb_rounds_settled(hist, n))
                break;
        }
        if (capped)
            break;
    }
    *untimed_s = now_s() - t0 - timed;
    if (n >= 3)
        *unit_s = tb_rounds_settled(hist, n) ? median3(hist + n - 3) : min3(hist + n - 3);
    else
        *unit_s = last;
    return TB_OK;
}

static long reps_units(double min_rep_s, double unit_s)
{
    if (!(unit_s > 0))
        return MAX_UNITS_PER_REP;
    double u = ceil(REP_HEADROOM * min_rep_s / unit_s);
    if (u < 1)
        return 1;
    return u > (double)MAX_UNITS_PER_REP ? MAX_UNITS_PER_REP : (long)u;
}

/* ---- Google Benchmark's JSON of all rounds ---- */

typedef struct gb_json {
    char *head;    /* the first round's text up to and including "benchmarks": [ */
    char *rows;    /* every round's rows, comma separated */
    size_t rows_len, rows_cap;
} gb_json;

static int rows_append(gb_json *j, const char *s, size_t n)
{
    if (j->rows_len + n + 1 > j->rows_cap) {
        size_t cap = j->rows_cap ? j->rows_cap : 4096;
        while (cap < j->rows_len + n + 1)
            cap *= 2;
        char *p = realloc(j->rows, cap);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "Google Benchmark JSON rows (%zu bytes)", cap);
        j->rows = p;
        j->rows_cap = cap;
    }
    memcpy(j->rows + j->rows_len, s, n);
    j->rows_len += n;
    j->rows[j->rows_len] = 0;
    return TB_OK;
}

/* Keeps the rows of one round's JSON text (and the head of the first). */
static int json_add_round(gb_json *j, const char *text)
{
    const char *key = strstr(text, "\"benchmarks\"");
    const char *open = key ? strchr(key, '[') : NULL;
    const char *close = strrchr(text, ']');
    if (!open || !close || close < open)
        return TB_FAIL(TB_ERR_DATA, "Google Benchmark's JSON has no benchmarks array");
    if (!j->head) {
        size_t n = (size_t)(open - text) + 1;
        j->head = malloc(n + 1);
        if (!j->head)
            return TB_FAIL(TB_ERR_NOMEM, "Google Benchmark JSON head");
        memcpy(j->head, text, n);
        j->head[n] = 0;
    }
    const char *a = open + 1, *b = close;
    while (a < b && (*a == ' ' || *a == '\n' || *a == '\r' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t'))
        b--;
    if (a == b)
        return TB_OK;
    TB_TRY(rows_append(j, j->rows_len ? ",\n    " : "\n    ", j->rows_len ? 6 : 5));
    return rows_append(j, a, (size_t)(b - a));
}

static int json_write(const gb_json *j, const char *path)
{
    if (!j->head)
        return TB_FAIL(TB_ERR_INTERNAL, "no round ran: no Google Benchmark JSON for %s", path);
    size_t nh = strlen(j->head), tail = 8;
    char *buf = malloc(nh + j->rows_len + tail + 1);
    if (!buf)
        return TB_FAIL(TB_ERR_NOMEM, "Google Benchmark JSON (%zu bytes)", nh + j->rows_len);
    memcpy(buf, j->head, nh);
    if (j->rows_len)
        memcpy(buf + nh, j->rows, j->rows_len);
    size_t n = nh + j->rows_len;
    n += (size_t)sprintf(buf + n, "\n  ]\n}\n");
    int rc = tb_atomic_write(path, buf, n);
    free(buf);
    return rc;
}

static void json_free(gb_json *j)
{
    free(j->head);
    free(j->rows);
    memset(j, 0, sizeof *j);
}

/* ---- one round ---- */

/* 1 when arm i is an A/A copy that runs its base's code on its base's
 * state (same run and user): one warm-up serves both. */
static int shares_base(const tb_arm *arms, int i)
{
    const tb_arm *a = &arms[i], *b = &arms[a->base];
    return a->aa && a->base != i && a->run == b->run && a->user == b->user;
}

/* The round's per-slot times into arm i's result: a compared arm gets its
 * slot, the two baseline slots around it and their mean (its reference;
 * with several slots, an A/A arm, the geometric means of each), a
 * baseline the mean of its slots. */
static void store_round(const tb_arm *arms, const arm_job *jobs, int n_arms, const int *seq,
                        int len, const double *slot_s, tb_rounds_result *out)
{
    for (int i = 0; i < n_arms; i++) {
        tb_rounds_arm_result *a = &out->arms[i];
        double sum = 0, log_s = 0, log_ref = 0, log_before = 0, log_after = 0, s = 0, ref = 0;
        int n = 0;
        /* a compared arm's build changes when it or its base is rebuilt;
         * an arm with a prepare hook (or on a base with one) is built
         * afresh every round (rounds.h), so each round is a build of its
         * own: counted as one build, its ratios (which carry the spread
         * between builds already) were widened by the pool once more */
        int fresh = arms[i].prepare || arms[arms[i].base].prepare;
        a->build[a->rounds] = fresh ? a->rounds
                                    : jobs[i].builds +
                                          (arms[i].base != i ? jobs[arms[i].base].builds : 0);
        for (int p = 0; p < len; p++) {
            if (seq[p] != i)
                continue;
            if (arms[i].base != i) {
                /* tb_rounds_sequence puts the base on both sides */
                s = slot_s[p];
                ref = 0.5 * (slot_s[p - 1] + slot_s[p + 1]);
                log_s += log(s);
                log_ref += log(ref);
                log_before += log(slot_s[p - 1]);
                log_after += log(slot_s[p + 1]);
            } else {
                sum += slot_s[p];
            }
            n++;
        }
        if (n && arms[i].base == i) {
            a->seconds[a->rounds] = sum / n;
        } else if (n) {
            /* several slots (an A/A arm): geometric means, so that ref /
             * seconds is the geometric mean of the slots' ratios */
            a->seconds[a->rounds] = n == 1 ? s : exp(log_s / n);
            a->ref[a->rounds] = n == 1 ? ref : exp(log_ref / n);
            a->before[a->rounds] = exp(log_before / n);
            a->after[a->rounds] = exp(log_after / n);
        }
        if (n)
            a->rounds++;
    }
}

/* Registers round r's sequence of repetitions (seq, len slots), runs it
 * under GB, and stores the times (store_round). slot_s: room for len. */
static int run_round(arm_job *jobs, const tb_arm *arms, int n_arms, const int *seq, int len,
                     int r, double *slot_s, gb_json *json, tb_rounds_result *out)
{
    int rc = TB_OK;
    char *text = NULL;
    size_t len_text = 0, n_run = 0;
    gb_results *res = NULL;
    tbb_clear();
    for (int k = 0; k < len; k++) {
        arm_job *job = &jobs[seq[k]];
        tbb_options o = tbb_options_default();
        o.iterations = job->units;
        o.repetitions = 1;
        o.manual_time = 1;
        o.unit = TBB_US;
        TB_TRY_GOTO(rc, tbb_register(job->arm->name, gb_arm_fn, job, &o), out_clear);
    }
    TB_TRY_GOTO(rc, tbb_run_quiet(&text, &len_text, &n_run), out_clear);
    for (int k = 0; k < len; k++)
        if (jobs[seq[k]].rc != TB_OK) {
            rc = TB_FAIL(jobs[seq[k]].rc, "arm %s failed in round %d", arms[seq[k]].name, r);
            goto out_free_text;
        }
    TB_TRY_GOTO(rc, gb_results_parse(text, len_text, &res), out_free_text);
    /* an arm's slots are its GB repetitions, in the order they ran */
    for (int k = 0; k < len; k++) {
        char prefix[160];
        int i = seq[k], nth = 0, slots = 0;
        for (int j = 0; j < len; j++) {
            slots += seq[j] == i;
            nth += j < k && seq[j] == i;
        }
        snprintf(prefix, sizeof prefix, "%s/", arms[i].name);
        const gb_run *run = NULL;
        for (size_t q = 0; q < res->n_runs && !run; q++)
            if (strncmp(res->runs[q].name, prefix, strlen(prefix)) == 0)
                run = &res->runs[q];
        if (!run || run->repetitions != slots || run->error_occurred) {
            rc = TB_FAIL(TB_ERR_DATA, "round %d: Google Benchmark has no usable run of arm %s "
                         "(%d repetitions expected)", r, arms[i].name, slots);
            goto out_free_res;
        }
        slot_s[k] = run->seconds[nth];
    }
    store_round(arms, jobs, n_arms, seq, len, slot_s, out);
    TB_TRY_GOTO(rc, json_add_round(json, text), out_free_res);
out_free_res:
    gb_results_free(res);
out_free_text:
    free(text);
out_clear:
    tbb_clear();
    return rc;
}

/* ---- the stop rule ---- */

/* The between-build spread pooled over the compared arms with 2 rounds
 * or more (tb_stats_build_pool: one machine, one workload, one way of
 * building). An A/A copy on its base's state (an op sweep's) is left out:
 * it shares every build with its base, so its ratio's between-build sum
 * of squares is 0 by construction and its degrees of freedom would only
 * dilute the variants' estimate (halved it in a simulated op sweep of one
 * variant and its copy). It still takes the pool's spread in its own
 * interval: its noise floor is what a setting without effect, on buffers
 * of its own, would show. */
static int pool_builds(const tb_arm *arms, int n_arms, const tb_rounds_result *out,
                       tb_build_pool *pool)
{
    tb_build_anova *an = calloc((size_t)n_arms, sizeof *an);
    if (!an)
        return TB_FAIL(TB_ERR_NOMEM, "%d arms' build ANOVAs", n_arms);
    size_t k = 0;
    int rc = TB_OK;
    for (int i = 0; i < n_arms && rc == TB_OK; i++) {
        const tb_rounds_arm_result *a = &out->arms[i];
        if (arms[i].base != i && !shares_base(arms, i) && a->rounds >= 2 && a->build)
            rc = tb_stats_build_anova(a->ref, a->seconds, a->build, (size_t)a->rounds, &an[k++]);
    }
    if (rc == TB_OK)
        *pool = tb_stats_build_pool(an, k);
    free(an);
    return rc;
}

/* Pairs compared arm i with its reference over its rounds, its builds'
 * spread from pool; the estimate centered on the single-sided ratios
 * (tb_stats_paired_recenter: the mean of two repetitions against one
 * leans toward "faster"). */
static int compare_arm(const tb_rounds_cfg *cfg, int i, const tb_build_pool *pool,
                       tb_rounds_result *out)
{
    tb_rounds_arm_result *a = &out->arms[i];
    size_t n = (size_t)a->rounds;
    TB_TRY(tb_stats_paired_builds_pooled(a->ref, a->seconds, a->build, n, cfg->seed, pool,
                                         &a->cmp));
    return tb_stats_paired_recenter(a->before, a->after, a->seconds, n, &a->cmp);
}

static int check_cfg(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms)
{
    if (!cfg || !arms || n_arms < 1)
        return TB_FAIL(TB_ERR_INVALID, "tb_rounds_run: no arms");
    if (!(cfg->min_rep_s > 0) || cfg->min_rounds < 5 || cfg->max_rounds < cfg->min_rounds ||
        !(cfg->target_half_width > 0) || !(cfg->warmup_max_s >= 0))
        return TB_FAIL(TB_ERR_INVALID,
                       "tb_rounds_run: bad cfg (min_rep_s %g, rounds %d..%d, target %g, "
                       "warm-up cap %g s)", cfg->min_rep_s, cfg->min_rounds, cfg->max_rounds,
                       cfg->target_half_width, cfg->warmup_max_s);
    for (int i = 0; i < n_arms; i++) {
        int b = arms[i].base;
        if (!arms[i].name || !*arms[i].name || !arms[i].run)
            return TB_FAIL(TB_ERR_INVALID, "tb_rounds_run: arm %d has no name or run", i);
        if (b < 0 || b >= n_arms || arms[b].base != b)
            return TB_FAIL(TB_ERR_INVALID, "tb_rounds_run: arm %s's base %d is not a baseline",
                           arms[i].name, b);
        if (arms[i].aa && b == i)
            return TB_FAIL(TB_ERR_INVALID, "tb_rounds_run: A/A arm %s compares with itself",
                           arms[i].name);
        for (int k = 0; k < i; k++)
            if (strcmp(arms[k].name, arms[i].name) == 0)
                return TB_FAIL(TB_ERR_INVALID, "tb_rounds_run: two arms named %s", arms[i].name);
    }
    return TB_OK;
}

static int result_alloc(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms,
                        tb_rounds_result *out)
{
    memset(out, 0, sizeof *out);
    out->seed = cfg->seed;
    out->n_arms = n_arms;
    out->load_avg = NAN;
    out->other_cpu_s = NAN;
    out->xcore_ns = out->xcore_lo_ns = out->xcore_hi_ns = NAN;
    out->arms = calloc((size_t)n_arms, sizeof *out->arms);
    if (!out->arms)
        return TB_FAIL(TB_ERR_NOMEM, "rounds result");
    for (int i = 0; i < n_arms; i++) {
        out->arms[i].seconds = calloc((size_t)cfg->max_rounds, sizeof(double));
        out->arms[i].build = calloc((size_t)cfg->max_rounds, sizeof(int));
        if (!out->arms[i].build)
            return TB_FAIL(TB_ERR_NOMEM, "rounds result (%d rounds)", cfg->max_rounds);
        tb_rounds_arm_result *a = &out->arms[i];
        if (arms[i].base != i) {
            a->ref = calloc((size_t)cfg->max_rounds, sizeof(double));
            a->before = calloc((size_t)cfg->max_rounds, sizeof(double));
            a->after = calloc((size_t)cfg->max_rounds, sizeof(double));
        }
        if (!a->seconds || (arms[i].base != i && (!a->ref || !a->before || !a->after)))
            return TB_FAIL(TB_ERR_NOMEM, "rounds result (%d rounds)", cfg->max_rounds);
    }
    return TB_OK;
}

void tb_rounds_result_free(tb_rounds_result *r)
{
    if (!r)
        return;
    for (int i = 0; r->arms && i < r->n_arms; i++) {
        free(r->arms[i].seconds);
        free(r->arms[i].build);
        free(r->arms[i].ref);
        free(r->arms[i].before);
        free(r->arms[i].after);
    }
    free(r->arms);
    memset(r, 0, sizeof *r);
}

/* The machine over the rounds: real time, /proc snapshots, load samples. */
typedef struct machine_watch {
    double real0;
    machine_snap m0;
    const int *own_pid;     /* cfg->own_pid */
    double load_sum;
    int load_n;
    double *xcore;          /* (max_rounds) seconds a round trip, one per round */
    int xcore_n;
} machine_watch;

static void watch_start(machine_watch *w, const int *own_pid, double *xcore)
{
    memset(w, 0, sizeof *w);
    w->xcore = xcore;
    w->real0 = real_now(NULL);
    w->own_pid = own_pid;
    w->m0 = machine_sample(own_pid);
}

static void watch_round(machine_watch *w)
{
    double l = tb_rounds_load_avg();
    if (!isnan(l)) {
        w->load_sum += l;
        w->load_n++;
    }
    double x = tb_machine_probe_xcore_s(XCORE_TRIPS);
    if (x > 0)
        w->xcore[w->xcore_n++] = x;
}

/* The round trips' median, least and largest, and whether they moved. */
static void xcore_finish(const machine_watch *w, tb_rounds_result *out)
{
    out->xcore_ns = out->xcore_lo_ns = out->xcore_hi_ns = NAN;
    out->xcore_moved = 0;
    int n = w->xcore_n;
    double med;
    if (n == 0 || tb_stats_median(w->xcore, (size_t)n, &med) != TB_OK)
        return;
    double lo = w->xcore[0], hi = w->xcore[0];
    for (int i = 1; i < n; i++) {
        lo = w->xcore[i] < lo ? w->xcore[i] : lo;
        hi = w->xcore[i] > hi ? w->xcore[i] : hi;
    }
    out->xcore_ns = 1e9 * med;
    out->xcore_lo_ns = 1e9 * lo;
    out->xcore_hi_ns = 1e9 * hi;
    out->xcore_moved = tb_rounds_xcore_moved(w->xcore, n);
}

static void watch_finish(const machine_watch *w, tb_rounds_result *out)
{
    xcore_finish(w, out);
    double wall = real_now(NULL) - w->real0;
    machine_snap m1 = machine_sample(w->own_pid);
    out->load_avg = w->load_n ? w->load_sum / w->load_n : NAN;
    if (w->m0.ok && m1.ok) {
        double other = (m1.busy_s - w->m0.busy_s) - (m1.self_s - w->m0.self_s);
        out->other_cpu_s = other > 0 ? other : 0;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double other = wall < BUSY_MIN_WALL_S ? NAN : out->other_cpu_s;
    out->busy = tb_rounds_busy_rule(out->load_avg, other, wall, ncpu > 0 ? (int)ncpu : 1) ||
                out->xcore_moved;
}

/* Arm i's own stop rule after a round: 1 when it stops on its target.
 * The target must hold after two rounds in a row, both at least the
 * minimum rounds: stopping the first time an interval dips under it picks
 * rounds whose spread happened to come out low. Simulated with the
 * engine's brackets and recentering (one arm, its A/A copy, +-2% target,
 * 5..60 rounds, no true effect), the interval covers the truth in 95.0%,
 * 93.9% and 93.5% of runs at 1.5%, 2% and 3% noise a repetition; counting
 * the streak from round 2, as until 2026-11-30, let a quarter of the runs
 * stop at round 5 and gave 93.7%, 92.8% and 93.1%. Every arm, its A/A
 * copy too, stops on its half-width: an A/A arm that stopped once its
 * interval lay within the target of 1 (its noise floor, the figure its
 * rows report) stopped on the very number it reports, and the noise
 * floors came out about 20% low (1.74% instead of 2.18% at 2% noise), an
 * A/A interval excluding 1 half as often as it should. */
static int arm_met_target(const tb_rounds_cfg *cfg, const tb_arm *arms, arm_job *job,
                          const tb_rounds_arm_result *a)
{
    int met = a->cmp.half_width <= cfg->target_half_width && a->rounds >= cfg->min_rounds;
    int twice = met && job->met_before;
    job->met_before = met;
    /* with rebuilds, the interval must have seen a few builds: its own, or
     * the experiment's (a pooled spread on as many degrees of freedom) */
    int rebuilt = cfg->rounds_per_build > 0 &&
                  (job->arm->rebuild || arms[job->arm->base].rebuild);
    if (rebuilt && a->cmp.builds < TB_ROUNDS_MIN_BUILDS &&
        a->cmp.between_df < TB_ROUNDS_MIN_BUILDS - 1)
        return 0;
    return twice && a->rounds >= cfg->min_rounds;
}

/* After round `rounds`: compares every running arm, stops those on their
 * target and the baselines left without running arms. *widest gets the
 * largest half-width among the arms still running (0: none) and *widest_arm
 * its index (-1: none). Returns the number of arms still running. */
static int update_arms(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms, arm_job *jobs,
                       int rounds, tb_rounds_result *out, double *widest, int *widest_arm,
                       int *rc)
{
    int running = 0;
    *widest = 0;
    *widest_arm = -1;
    tb_build_pool pool;
    if ((*rc = pool_builds(arms, n_arms, out, &pool)) != TB_OK)
        return 0;
    for (int i = 0; i < n_arms; i++) {
        if (!jobs[i].active || arms[i].base == i || out->arms[i].rounds < 2)
            continue;
        if ((*rc = compare_arm(cfg, i, &pool, out)) != TB_OK)
            return 0;
        if (arm_met_target(cfg, arms, &jobs[i], &out->arms[i])) {
            jobs[i].active = 0;
            out->arms[i].stop = TB_STOP_TARGET;
        } else if (!(out->arms[i].cmp.half_width <= *widest)) {
            *widest = out->arms[i].cmp.half_width;
            *widest_arm = i;
        }
    }
    for (int b = 0; b < n_arms; b++) {
        if (arms[b].base != b || !jobs[b].active)
            continue;
        int has = 0, runs = 0;
        for (int i = 0; i < n_arms; i++)
            if (i != b && arms[i].base == b) {
                has = 1;
                runs |= jobs[i].active;
            }
        if (has ? !runs : rounds >= cfg->min_rounds) {
            jobs[b].active = 0;
            out->arms[b].stop = TB_STOP_TARGET;
        }
    }
    for (int i = 0; i < n_arms; i++)
        running += jobs[i].active;
    return running;
}

/* The experiment-wide rule once arms are updated: 1 and out->stop set when
 * the rounds end here; the arms still running then stop for that reason.
 * spent: seconds since the warm-up began; last: the last round's. */
static int stop_here(const tb_rounds_cfg *cfg, int rounds, int running, double spent,
                     double last, arm_job *jobs, int n_arms, tb_rounds_result *out)
{
    if (!running)
        out->stop = TB_STOP_TARGET;
    else if (rounds < cfg->min_rounds)
        return 0; /* the budget buys at least min_rounds, as the cap allows */
    else if (rounds >= cfg->max_rounds)
        out->stop = TB_STOP_CAP;
    else if (cfg->budget_s > 0 && spent + last > cfg->budget_s)
        out->stop = TB_STOP_BUDGET;
    else
        return 0;
    for (int i = 0; i < n_arms; i++)
        if (jobs[i].active) {
            jobs[i].active = 0;
            out->arms[i].stop = out->stop;
        }
    return 1;
}

/* After the first round: an arm whose repetition came out shorter than
 * half of min_rep_s (its warm-up estimate was taken on a slow, busy or
 * still-cold stretch) gets its repetition length again from the round's
 * own per-unit time, once; an A/A arm sharing its base's code follows its
 * base. Times stay per unit, so the rounds before and after compare. */
static void recalibrate(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms,
                        arm_job *jobs, tb_rounds_result *out)
{
    for (int i = 0; i < n_arms; i++) {
        double unit_s = out->arms[i].seconds[0];
        if (shares_base(arms, i) || !(unit_s > 0) ||
            unit_s * (double)jobs[i].units >= 0.5 * cfg->min_rep_s)
            continue;
        double lasted = unit_s * (double)jobs[i].units;
        jobs[i].units = reps_units(cfg->min_rep_s, unit_s);
        out->arms[i].units_per_rep = jobs[i].units;
        fprintf(stderr, "rounds: %s: repetition of round 1 lasted %.3g s, under half of "
                "%.3g s: now %ld units a repetition\n", arms[i].name, lasted, cfg->min_rep_s,
                jobs[i].units);
    }
    for (int i = 0; i < n_arms; i++)
        if (shares_base(arms, i)) {
            jobs[i].units = jobs[arms[i].base].units;
            out->arms[i].units_per_rep = jobs[i].units;
        }
}

/* Rounds between arm i's builds: cfg->rounds_per_build, or more when its
 * last rebuild took more than TB_ROUNDS_REBUILD_SHARE of that many of its
 * repetitions (the last round's length). */
static int build_interval(const tb_rounds_cfg *cfg, const arm_job *job,
                          const tb_rounds_arm_result *a)
{
    int k = cfg->rounds_per_build;
    double rep_s = a->rounds > 0 ? a->seconds[a->rounds - 1] * (double)job->units : 0;
    if (job->rebuild_s > 0 && rep_s > 0) {
        double need = ceil(job->rebuild_s / (TB_ROUNDS_REBUILD_SHARE * rep_s));
        if (need > k)
            k = need > 1e6 ? 1000000 : (int)need;
    }
    return k;
}

/* rounds_internal.h; mirrors stop_here's budget rule. */
int tb_rounds_left(const tb_rounds_cfg *cfg, int r, double spent, double last)
{
    int left = cfg->max_rounds - r;
    if (cfg->budget_s > 0 && last > 0) {
        double fit = floor((cfg->budget_s - spent) / last);
        int n = fit < 1 ? 1 : fit > left ? left : (int)fit;
        left = n > cfg->min_rounds - r ? n : cfg->min_rounds - r;
    }
    return left < 0 ? 0 : left;
}

int tb_rounds_build_worth(int interval, int left)
{
    if (interval < 2)
        return left >= interval;
    int half = (interval + 1) / 2;
    return left >= (half > 2 ? half : 2);
}

/* Before round r (cfg->rounds_per_build > 0): a fresh build of every
 * running arm that has a rebuild hook and is due (build_interval rounds
 * since its last; an A/A arm on its base's state is rebuilt with its
 * base), in tb_rounds_build_order(seed, r) (into order: room for n_arms).
 * Untimed, but inside the budget's wall time. A build is not begun when
 * the rounds left (tb_rounds_left) would give it less than half its
 * interval, and less than 2 rounds (build_worth): the arm stays on the
 * build it has. A build of one last round added a between-build spread on
 * one degree of freedom to the experiment's pool, which every arm on one
 * build then took in full: t's 12.7 turned data_format's +-3% into +-25%
 * (its fast arm rebuilt before the budget's last round, the other arms'
 * dear builds not due).
 * A baseline and the arms compared with it (its A/A copy included) are
 * rebuilt together, at the longest interval any of them needs: a compared
 * arm's build is its own and its baseline's (store_round), and arms
 * rebuilt on their own schedules (a cheap baseline every round, a dear arm
 * every 8) cut the rounds into builds of a round or two that overlap,
 * where the between-build spread went unseen: intervals covered the truth
 * in 74-90% of simulated runs, against 94.5% for aligned rebuilds (the
 * review of 2026-11-30). */
static int rebuildable(const tb_arm *arms, const arm_job *jobs, int i)
{
    return jobs[i].active && arms[i].rebuild && !shares_base(arms, i);
}

/* Whether baseline b's group is due for a rebuild before this round. */
static int group_due(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms,
                     const arm_job *jobs, const tb_rounds_result *out, int b, int left)
{
    int due = 0, since = INT_MAX;
    for (int j = 0; j < n_arms; j++) {
        if ((j != b && arms[j].base != b) || !rebuildable(arms, jobs, j))
            continue;
        int d = build_interval(cfg, &jobs[j], &out->arms[j]);
        due = d > due ? d : due;
        since = jobs[j].since_build < since ? jobs[j].since_build : since;
    }
    return due > 0 && since >= due && tb_rounds_build_worth(due, left);
}

static int rebuild_arms(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms, arm_job *jobs,
                        const tb_rounds_result *out, int r, int left, int *order)
{
    int n = 0;
    /* decided for every group before any of its arms is rebuilt */
    int *go = calloc((size_t)n_arms, sizeof *go);
    if (!go)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning %d rebuilds", n_arms);
    for (int b = 0; b < n_arms; b++)
        go[b] = arms[b].base == b && group_due(cfg, arms, n_arms, jobs, out, b, left);
    tb_rounds_build_order(cfg->seed, r, n_arms, order);
    double t0 = now_s();
    for (int k = 0; k < n_arms; k++) {
        int i = order[k];
        if (!rebuildable(arms, jobs, i) || !go[arms[i].base])
            continue;
        double t1 = now_s();
        int rc = arms[i].rebuild(arms[i].user);
        if (rc != TB_OK) {
            free(go);
            return TB_FAIL(rc, "arm %s: rebuild before round %d failed", arms[i].name, r + 1);
        }
        jobs[i].rebuild_s = now_s() - t1;
        jobs[i].since_build = 0;
        jobs[i].builds++;
        n++;
    }
    free(go);
    if (n)
        fprintf(stderr, "rounds: %d arm%s rebuilt before round %d (%.2f s)\n", n,
                n == 1 ? "" : "s", r + 1, now_s() - t0);
    return TB_OK;
}

/* Each arm's baseline, A/A flag and repetitions a round (tb_rounds_slots):
 * what tb_rounds_sequence takes. */
static void arm_tables(const tb_arm *arms, int n_arms, int *base, int *aa, int *slots)
{
    for (int i = 0; i < n_arms; i++) {
        base[i] = arms[i].base;
        aa[i] = arms[i].aa;
    }
    tb_rounds_slots(base, aa, n_arms, slots);
}

/* Runs rounds until the stop rule says so. */
static int run_rounds(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms, arm_job *jobs,
                      double t_start, gb_json *json, tb_rounds_result *out)
{
    int tty = isatty(STDERR_FILENO), rc = TB_OK;
    int *seq = malloc(TB_ROUNDS_SEQ_ROOM(n_arms) * sizeof *seq);
    int *base = malloc((size_t)n_arms * sizeof *base), *aa = malloc((size_t)n_arms * sizeof *aa);
    int *slots = malloc((size_t)n_arms * sizeof *slots);
    int *active = malloc((size_t)n_arms * sizeof *active);
    int *order = malloc((size_t)n_arms * sizeof *order); /* rebuild_arms' */
    double *slot_s = malloc(TB_ROUNDS_SEQ_ROOM(n_arms) * sizeof *slot_s);
    double *xcore = malloc((size_t)cfg->max_rounds * sizeof *xcore);
    machine_watch w;
    if (!seq || !base || !aa || !slots || !active || !order || !slot_s || !xcore) {
        rc = TB_FAIL(TB_ERR_NOMEM, "rounds: %d arms", n_arms);
        goto out_free;
    }
    arm_tables(arms, n_arms, base, aa, slots);
    for (int i = 0; i < n_arms; i++)
        jobs[i].active = 1;
    watch_start(&w, cfg->own_pid, xcore);
    double last = 0; /* the last round's seconds */
    for (int r = 0; r < cfg->max_rounds; r++) {
        if (cfg->rounds_per_build > 0 && r > 0) {
            int left = tb_rounds_left(cfg, r, now_s() - t_start, last);
            TB_TRY_GOTO(rc, rebuild_arms(cfg, arms, n_arms, jobs, out, r, left, order), out_free);
        }
        double t_round = now_s(), widest;
        int wi;
        for (int i = 0; i < n_arms; i++)
            active[i] = jobs[i].active;
        int len = tb_rounds_sequence(cfg->seed, r, base, active, slots, n_arms, seq);
        TB_TRY_GOTO(rc, run_round(jobs, arms, n_arms, seq, len, r, slot_s, json, out), out_free);
        for (int i = 0; i < n_arms; i++)
            jobs[i].since_build += active[i];
        out->rounds = r + 1;
        watch_round(&w);
        double t = now_s();
        last = t - t_round;
        if (out->rounds == 1) {
            recalibrate(cfg, arms, n_arms, jobs, out);
            hold_if_asked();
        }
        int running = update_arms(cfg, arms, n_arms, jobs, out->rounds, out, &widest, &wi, &rc);
        if (rc != TB_OK)
            goto out_free;
        if (out->rounds >= 2) {
            /* on a terminal the line is rewritten in place; in a log, one a round */
            char width[32];
            snprintf(width, sizeof width, widest > 1 ? "over 100%%" : "+-%.1f%%", 100 * widest);
            fprintf(stderr, "%srounds: round %d: %d arm%s running, widest interval %s (%s), "
                    "%.1f s spent%s", tty ? "\r" : "", out->rounds, running,
                    running == 1 ? "" : "s", width, wi >= 0 ? arms[wi].name : "none",
                    t - t_start, tty ? "\033[K" : "\n");
        }
        if (stop_here(cfg, out->rounds, running, t - t_start, t - t_round, jobs, n_arms, out))
            break;
    }
    if (tty && out->rounds >= 2)
        fputc('\n', stderr);
    /* the final comparisons, over each arm's own rounds */
    tb_build_pool pool;
    if (rc == TB_OK)
        rc = pool_builds(arms, n_arms, out, &pool);
    for (int i = 0; i < n_arms && rc == TB_OK; i++)
        if (arms[i].base != i)
            rc = compare_arm(cfg, i, &pool, out);
    watch_finish(&w, out);
out_free:
    free(seq);
    free(base);
    free(aa);
    free(slots);
    free(active);
    free(order);
    free(slot_s);
    free(xcore);
    return rc;
}

static int warm_up_arm(const tb_rounds_cfg *cfg, const tb_arm *arms, int i, arm_job *jobs,
                       tb_rounds_result *out)
{
    double unit_s = 0, untimed_s = 0;
    TB_TRY(warm_up(cfg, &arms[i], &out->arms[i].warmup_units, &unit_s, &untimed_s));
    jobs[i].unit_s = unit_s;
    /* The warm-up's untimed part is the arm's first build (and prepare):
     * what a rebuild costs, known before the first rebuild is due, so that
     * a dear build (a ResNet-50 trainer's 0.8 s beside its 0.05 s
     * repetitions) is spaced by TB_ROUNDS_REBUILD_SHARE from the start; the
     * caller's build_s where that build came before the warm-up. */
    if (arms[i].rebuild && !(jobs[i].rebuild_s > 0))
        jobs[i].rebuild_s = arms[i].build_s > untimed_s ? arms[i].build_s : untimed_s;
    jobs[i].units = reps_units(cfg->min_rep_s, unit_s);
    out->arms[i].units_per_rep = jobs[i].units;
    fprintf(stderr, "rounds: %s warmed up in %ld units, %.3g s a unit (build %.3g s), %ld units a "
            "repetition\n", arms[i].name, out->arms[i].warmup_units, unit_s, untimed_s, jobs[i].units);
    return TB_OK;
}

/* Seconds one round of every arm takes with repetitions of at least rep
 * seconds: reps[i] repetitions of arm i, each a whole number of its units. */
static double round_seconds(const arm_job *jobs, const int *reps, int n_arms, double rep)
{
    double s = 0;
    for (int i = 0; i < n_arms; i++)
        s += reps[i] * (double)reps_units(rep, jobs[i].unit_s) * jobs[i].unit_s;
    return s;
}

/* Share of the budget left after the warm-up that the minimum rounds may
 * take by the estimate: the rest is for rebuilds, the stop rule's last
 * round and the estimate's error. */
#define FIT_SHARE 0.85

/* The repetition length (cfg->min_rep_s, or shorter down to
 * cfg->min_rep_floor_s) at which cfg->min_rounds + 1 rounds of every arm
 * fit FIT_SHARE of the budget left (rounds.h, step 2): one past the
 * minimum, the earliest an arm can stop on its target (arm_met_target);
 * fitted to the minimum alone, the budget ended every such run at it.
 * Sets every arm's units_per_rep. *rep_s gets the length chosen. */
static int fit_reps(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms, arm_job *jobs,
                    double left, tb_rounds_result *out, double *rep_s)
{
    *rep_s = cfg->min_rep_s;
    if (!(cfg->min_rep_floor_s > 0) || !(cfg->budget_s > 0) ||
        cfg->min_rep_floor_s >= cfg->min_rep_s)
        return TB_OK;
    int *seq = malloc(TB_ROUNDS_SEQ_ROOM(n_arms) * sizeof *seq);
    int *base = malloc((size_t)n_arms * sizeof *base), *aa = malloc((size_t)n_arms * sizeof *aa);
    int *active = malloc((size_t)n_arms * sizeof *active), *slots = malloc((size_t)n_arms * sizeof *slots);
    int *reps = calloc((size_t)n_arms, sizeof *reps); /* each arm's repetitions in round 0 */
    int rc = TB_OK;
    if (!seq || !base || !aa || !active || !slots || !reps) {
        rc = TB_FAIL(TB_ERR_NOMEM, "rounds: %d arms", n_arms);
        goto out_free;
    }
    arm_tables(arms, n_arms, base, aa, slots);
    for (int i = 0; i < n_arms; i++)
        active[i] = 1;
    int len = tb_rounds_sequence(cfg->seed, 0, base, active, slots, n_arms, seq);
    for (int k = 0; k < len; k++)
        reps[seq[k]]++;
    int fit_rounds = cfg->min_rounds + 1;
    double room = FIT_SHARE * left / fit_rounds;
    if (round_seconds(jobs, reps, n_arms, cfg->min_rep_s) <= room)
        goto out_free;
    /* round_seconds grows with rep: the longest rep that fits, by bisection */
    double lo = cfg->min_rep_floor_s, hi = cfg->min_rep_s;
    if (round_seconds(jobs, reps, n_arms, lo) <= room)
        for (int it = 0; it < 30; it++) {
            double mid = 0.5 * (lo + hi);
            if (round_seconds(jobs, reps, n_arms, mid) <= room)
                lo = mid;
            else
                hi = mid;
        }
    *rep_s = lo;
    for (int i = 0; i < n_arms; i++) {
        jobs[i].units = reps_units(lo, jobs[i].unit_s);
        out->arms[i].units_per_rep = jobs[i].units;
    }
    fprintf(stderr, "rounds: %d rounds of >= %g s repetitions would take %.1f s of the %.1f s "
            "left: repetitions of >= %.3g s instead (%.1f s)\n", fit_rounds,
            cfg->min_rep_s, fit_rounds * round_seconds(jobs, reps, n_arms, cfg->min_rep_s),
            left, lo, fit_rounds * round_seconds(jobs, reps, n_arms, lo));
out_free:
    free(seq);
    free(base);
    free(aa);
    free(active);
    free(slots);
    free(reps);
    return rc;
}

int tb_rounds_run(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms,
                  tb_rounds_result *out)
{
    int rc;
    arm_job *jobs = NULL;
    gb_json json = {0};
    memset(out, 0, sizeof *out);
    TB_TRY(check_cfg(cfg, arms, n_arms));
    double t_start = now_s();
    TB_TRY_GOTO(rc, result_alloc(cfg, arms, n_arms, out), out_fail);
    jobs = calloc((size_t)n_arms, sizeof *jobs);
    if (!jobs) {
        rc = TB_FAIL(TB_ERR_NOMEM, "rounds: %d arms", n_arms);
        goto out_fail;
    }
    for (int i = 0; i < n_arms; i++)
        jobs[i].arm = &arms[i];
    /* arms are built (lazily, by their first run) and warmed up in an order
     * drawn from the seed: see tb_rounds_build_order */
    int *order = malloc((size_t)n_arms * sizeof *order);
    if (!order) {
        rc = TB_FAIL(TB_ERR_NOMEM, "rounds: %d arms", n_arms);
        goto out_fail;
    }
    tb_rounds_build_order(cfg->seed, 0, n_arms, order);
    rc = TB_OK;
    for (int k = 0; k < n_arms && rc == TB_OK; k++)
        if (!shares_base(arms, order[k]))
            rc = warm_up_arm(cfg, arms, order[k], jobs, out);
    free(order);
    if (rc != TB_OK)
        goto out_fail;
    for (int i = 0; i < n_arms; i++)
        if (shares_base(arms, i)) {
            /* the same code on the same state as its base: the base's
             * warm-up warmed it, and its repetitions must be as long */
            jobs[i].unit_s = jobs[arms[i].base].unit_s;
            jobs[i].units = jobs[arms[i].base].units;
            out->arms[i].units_per_rep = jobs[i].units;
            out->arms[i].warmup_units = 0;
        }
    /* the rounds run on a copy of cfg whose min_rep_s is the length chosen */
    tb_rounds_cfg run_cfg = *cfg;
    TB_TRY_GOTO(rc, fit_reps(cfg, arms, n_arms, jobs, cfg->budget_s - (now_s() - t_start), out,
                             &run_cfg.min_rep_s), out_fail);
    TB_TRY_GOTO(rc, run_rounds(&run_cfg, arms, n_arms, jobs, t_start, &json, out), out_fail);
    out->seconds = now_s() - t_start;
    if (cfg->gbench_json)
        TB_TRY_GOTO(rc, json_write(&json, cfg->gbench_json), out_fail);
    char xc[160] = "";
    if (!isnan(out->xcore_ns))
        snprintf(xc, sizeof xc, "; core-to-core round trip %.0f ns (%.0f-%.0f)%s", out->xcore_ns,
                 out->xcore_lo_ns, out->xcore_hi_ns,
                 out->xcore_moved ? ": it moved, the host ran the CPUs apart part of the time"
                                  : "");
    fprintf(stderr, "rounds: stopped on %s after %d rounds, %.1f s (seed %llu)%s%s\n",
            tb_rounds_stop_name(out->stop), out->rounds, out->seconds,
            (unsigned long long)cfg->seed, xc, out->busy ? "; the machine was busy" : "");
    rc = TB_OK;
    goto out_free;
out_fail:
    tb_rounds_result_free(out);
out_free:
    json_free(&json);
    free(jobs);
    return rc;
}
