/*
 * rounds.h - interleaved, paired, adaptive timing: the engine every
 * technique's comparisons run on (step techniques, op-level sweeps, the
 * waterfall, the DDP sweep).
 *
 * An experiment is a set of arms (one per setting, plus an A/A copy of each
 * baseline: the same setting timed as if it were another one). Each arm can
 * run its unit of work (a training step, an op call, an epoch) any number of
 * times. The engine:
 *   1. warms each arm up until its unit times stop falling (not a fixed
 *      count: a cold allocator, autotuner or page cache can take tens of
 *      units), within a cap;
 *   2. picks each arm's repetition length: the number of units that lasts
 *      at least cfg->min_rep_s (a profile value), as Google Benchmark picks
 *      iterations, once, after the warm-up; with cfg->min_rep_floor_s > 0
 *      and a budget, a shorter length when cfg->min_rounds + 1 rounds of
 *      min_rep_s (the earliest stop on the target) would not fit what the
 *      warm-up left of the budget (a sweep
 *      of 72 arms: the minimum rounds, not the budget, would end it),
 *      never below the floor; an arm whose single unit lasts longer runs
 *      one unit;
 *   3. runs rounds: each round times every arm still running once, one
 *      repetition each, in an order shuffled per round from cfg->seed
 *      (recorded in the results), with its baseline timed just before and
 *      just after it (B X1 B X2 B ...: a baseline's repetitions are shared by
 *      its neighbours; an A/A arm beside many compared arms runs up to
 *      TB_ROUNDS_AA_MAX_SLOTS times a round, see TB_ROUNDS_AA_PER_SLOT), so that the slow drift of a shared machine (its
 *      speed wanders over seconds: successive repetitions correlate at
 *      0.5-0.8 on a cloud VM) hits an arm and its reference alike: a
 *      compared arm's per-round reference is the mean of the two baseline
 *      repetitions around it, which cancels any drift linear over the three;
 *   4. after cfg->min_rounds, an arm stops once its paired interval
 *      (lib/core/stats.h, tb_stats_paired, of its per-round ratios to its
 *      reference) is at most cfg->target_half_width wide after two rounds
 *      in a row, both past the minimum (an A/A arm too: never on the noise
 *      floor its rows report); a baseline stops with the last arm compared with it; the
 *      experiment ends when every arm has stopped, or when cfg->budget_s of
 *      timing is spent, or at cfg->max_rounds; never on a verdict. Each arm
 *      says why it stopped and after how many rounds (the time then goes to
 *      the arms still wide).
 *   5. rebuilds (cfg->rounds_per_build > 0): every that many rounds each arm
 *      with a rebuild hook gets a fresh build of its state (untimed), and
 *      its rounds are grouped by build: a trainer's autotuner choice and
 *      where its tensors landed are drawn once a build, so two runs of the
 *      program differ by more than the rounds of one build show. The
 *      interval is over builds (tb_stats_paired_builds_pooled: the
 *      between-build spread, pooled over the experiment's compared arms,
 *      added; an arm on one build gets the pool's), and an arm stops on its
 *      target only once its rounds span TB_ROUNDS_MIN_BUILDS builds, or the
 *      pooled spread it was given has TB_ROUNDS_MIN_BUILDS - 1 degrees of
 *      freedom. An arm whose build is dear is
 *      rebuilt less often (TB_ROUNDS_REBUILD_SHARE), judged from its first
 *      build (the untimed part of its warm-up) until a rebuild is timed,
 *      and a baseline is rebuilt together with the arms compared with it
 *      (its A/A copy too), at the longest interval any of them needs: a
 *      compared arm's build is its own and its baseline's, and schedules
 *      of their own cut the rounds into overlapping builds whose spread
 *      went unseen.
 *      A build is not begun when the rounds left (the minimum, the cap, the
 *      budget at the last round's length) would give it less than half its
 *      interval, or one round: a last build of one round told the pool a
 *      spread on one degree of freedom, which t(1) = 12.7 made +-25% on
 *      arms that had not been rebuilt.
 * Google Benchmark times each repetition: every round registers its arms in
 * the round's order with fixed iterations and one repetition, and runs
 * them; the runs of all rounds go to one JSON file.
 *
 * Each round also samples the machine (lib/report/telemetry.h or /proc):
 * the load average, the CPU time other processes took, and the round trip
 * of a cache line between the first two CPUs (machine_probe.h), so a row
 * can say it was measured on a busy machine, or on one whose host moved
 * its CPUs mid-experiment.
 *
 * Tests: bazel test //bench/harness:rounds_test (fake arms with known
 * effects and drift).
 */
#ifndef TB_BENCH_ROUNDS_H
#define TB_BENCH_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/stats.h"

/* One arm: run(user, units, &seconds) runs `units` units of work back to
 * back and reports the seconds they took (device time: the caller times with
 * the backend's events, tb_bench_time_op). An arm whose state must be
 * rebuilt between rounds does so in prepare (not timed); NULL: nothing. */
typedef struct tb_arm {
    const char *name;      /* "set03", "again00": unique, used in the JSON */
    int base;              /* index of the arm it is compared with; its own
                              index: a baseline (no comparison of its own) */
    int aa;                /* 1: the A/A copy of arm `base` (the noise check) */
    int (*run)(void *user, long units, double *seconds);
    int (*prepare)(void *user);
    void *user;
    /* Replaces the arm's state with a fresh build of it (a new trainer from
     * the same seed, new buffers: what a rerun of the whole program would
     * get), warmed up, untimed; the engine calls it every
     * cfg->rounds_per_build rounds. NULL: the arm is never rebuilt (one
     * build; with a prepare hook every round is a build of its own). */
    int (*rebuild)(void *user);
    /* Brings the arm's state back before each of its repetitions and its
     * warm-up, untimed, after prepare: state it gave up while other arms
     * ran (a parked trainer's activations, step_harness.c). Not a build:
     * the rounds between rebuilds stay rounds of one build. NULL: nothing. */
    int (*resume)(void *user);
    /* What a rebuild costs where the caller knows it before the rounds (a
     * trainer first built for a check and kept: the warm-up's untimed part
     * is then no build); 0: the warm-up's untimed part. */
    double build_s;
} tb_arm;

/* The most child processes an experiment's arms may run in (cfg->own_pid). */
#define TB_ROUNDS_OWN_PIDS 4

typedef struct tb_rounds_cfg {
    double min_rep_s;          /* a repetition lasts at least this (e.g. 0.2 s on the CPU) */
    int min_rounds;            /* >= 5 */
    int max_rounds;            /* cap */
    double target_half_width;  /* relative, e.g. 0.02 */
    double budget_s;           /* wall time for warm-up + rounds; <= 0: no budget */
    double warmup_max_s;       /* cap of one arm's warm-up */
    uint64_t seed;             /* round orders */
    int rounds_per_build;      /* arms with a rebuild hook get a fresh build every this many
                                  rounds at least (more apart when a build is dear: see
                                  TB_ROUNDS_REBUILD_SHARE), and may stop on their target
                                  only once their rounds span TB_ROUNDS_MIN_BUILDS builds
                                  (or their pooled spread as many degrees of freedom, less
                                  one); 0: never */
    const char *gbench_json;   /* Google Benchmark's JSON of every round; NULL: none */
    int own_pid[TB_ROUNDS_OWN_PIDS]; /* > 0: child processes of the caller's that run arms
                                  (bench:vs_torch's PyTorch): their CPU time counts as this
                                  process's, not as other processes' (the busy rule); 0: none */
    double min_rep_floor_s;    /* > 0: when min_rounds rounds of min_rep_s repetitions would
                                  not fit the budget left after the warm-up, repetitions are
                                  shortened (never below this) so that they do (see step 2
                                  above); 0: min_rep_s always */
} tb_rounds_cfg;

/* An A/A arm runs 1 + k / TB_ROUNDS_AA_PER_SLOT times a round, at most
 * TB_ROUNDS_AA_MAX_SLOTS, k being the number of other arms compared with
 * its baseline; each time between two repetitions of the baseline, spread
 * over the round (tb_rounds_sequence), its round's ratio the geometric mean
 * of those. Its interval gives the baseline's noise floor, shared by
 * every row of that baseline: the farthest the interval strays from 1,
 * about 1.4 times its half-width when there is no bias, on one arm's
 * rounds (the small CNN's waterfall, 22 arms to one baseline, 13-14
 * rounds: 2.8-3.1% in three idle bench:all runs). Per-round ratios of
 * different arms were uncorrelated there (median correlation -0.03 to
 * 0.02 on the small CNN and GPT-2), so three slots narrow it by about
 * sqrt(3) for 4 repetitions more a round of about 45. With fewer than 8
 * arms to compare, an extra slot would cost more than it brings. */
#define TB_ROUNDS_AA_PER_SLOT 8
#define TB_ROUNDS_AA_MAX_SLOTS 3

/* With rebuilds, an arm's interval must span this many builds before it
 * may stop on its target: the between-build spread needs a few builds to
 * be seen at all. */
#define TB_ROUNDS_MIN_BUILDS 3
/* An arm's rebuilds (their measured time, warm-up included) take at most
 * about this share of its timed repetitions: a build that costs as much as
 * 4 repetitions comes every 16 rounds, not every round (a ResNet-50
 * trainer's, beside the small CNN's 0.05 s). */
#define TB_ROUNDS_REBUILD_SHARE 0.25

typedef enum tb_rounds_stop {
    TB_STOP_TARGET = 0,        /* every interval within target_half_width */
    TB_STOP_BUDGET = 1,        /* budget_s spent */
    TB_STOP_CAP = 2,           /* max_rounds reached */
} tb_rounds_stop;

typedef struct tb_rounds_arm_result {
    long units_per_rep;        /* chosen after the warm-up */
    long warmup_units;         /* units the warm-up ran */
    int rounds;                /* rounds this arm ran: the experiment's first `rounds` */
    tb_rounds_stop stop;       /* why it stopped: target (its own interval), budget or cap */
    double *seconds;           /* (rounds) seconds per UNIT in each round; a baseline's:
                                  the mean of its repetitions in the round; an A/A arm
                                  with several (TB_ROUNDS_AA_PER_SLOT): their geometric
                                  mean */
    int *build;                /* (rounds) the build each round ran on (0, 1, ...: the
                                  count of rebuilds of this arm, or of its base, before it) */
    double *ref;               /* (rounds) a compared arm's reference in each round: its
                                  base's seconds per unit around it (the mean of the
                                  base's repetitions just before and just after); NULL
                                  for a baseline */
    double *before, *after;    /* (rounds) those two repetitions of the base, each (with
                                  several slots: the geometric mean of each side's);
                                  NULL for a baseline */
    tb_paired cmp;             /* ref vs seconds over rounds (rounds == 0 for a baseline);
                                  over builds (tb_stats_paired_builds), centered on the
                                  single-sided ratios (tb_stats_paired_recenter) */
} tb_rounds_arm_result;

typedef struct tb_rounds_result {
    int rounds;                /* rounds completed (the longest-running arm's) */
    tb_rounds_stop stop;       /* target when every arm stopped on its own interval; else
                                  what ended the experiment (budget, cap) */
    uint64_t seed;
    double seconds;            /* wall time spent */
    double load_avg;           /* mean 1-minute load average over the rounds */
    double other_cpu_s;        /* CPU seconds other processes used meanwhile */
    int busy;                  /* 1: the machine was busy, or its cores' round trip moved
                                  (the rules are in rounds.c) */
    double xcore_ns;           /* median core-to-core round trip over the rounds, ns (NaN:
                                  not measured, fewer than 2 CPUs) */
    double xcore_lo_ns, xcore_hi_ns; /* its least and largest round */
    int xcore_moved;           /* 1: it moved between states during the rounds (rounds.c) */
    int n_arms;
    tb_rounds_arm_result *arms; /* (n_arms) */
} tb_rounds_result;

/* Runs the experiment. REQUIRES: n_arms >= 1; every arm's base indexes an
 * arm whose base is itself. Errors: an arm's run or prepare status, or
 * TB_ERR_INVALID for a bad cfg. *out is freed with tb_rounds_result_free. */
int tb_rounds_run(const tb_rounds_cfg *cfg, const tb_arm *arms, int n_arms,
                  tb_rounds_result *out);
void tb_rounds_result_free(tb_rounds_result *r);

/* The busy rule by the load average alone (rounds_internal.h's fallback:
 * above the online CPUs + 0.5), for timings whose own processes would
 * count as other processes' CPU time: the DDP sweep's MPI ranks, whose
 * threads add up to the cores (an idle run's load: 1.86 on 2 CPUs). */
int tb_rounds_busy_by_load(double load_avg);

/* /proc/loadavg's 1-minute value now; NaN where it cannot be read. */
double tb_rounds_load_avg(void);

const char *tb_rounds_stop_name(tb_rounds_stop s); /* "target", "budget", "cap" */

#endif
