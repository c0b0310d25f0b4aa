/*
 * rounds_internal.h - the pieces of bench/harness/rounds.c that its test
 * reaches directly: the clock (so fake arms can advance a fake one and the
 * test never waits), the warm-up rule, the round orders and sequences, and
 * the busy rule.
 * Not for techniques: they use rounds.h only.
 *
 * Test: bazel test //bench/harness:rounds_test
 */
#ifndef TB_BENCH_ROUNDS_INTERNAL_H
#define TB_BENCH_ROUNDS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bench/harness/rounds.h"

/* The clock behind warm-up caps and budgets (seconds, any origin).
 * NULL restores CLOCK_MONOTONIC. The machine checks keep the real clock. */
void tb_rounds_set_clock(double (*now)(void *ctx), void *ctx);

/* Warm-up rule: 1 when the per-unit times t[0..n) have settled, i.e.
 * n >= 6 and the median of the last 3 is not below the median of the 3
 * before by more than TB_ROUNDS_SETTLE (relative). */
#define TB_ROUNDS_SETTLE 0.015
int tb_rounds_settled(const double *t, int n);

/* The rounds still to run from round r (0-based) on if no arm stops on its
 * target: at least min_rounds - r, at most max_rounds - r, else those that
 * fit cfg->budget_s at `last` seconds a round after `spent` (the stop
 * rule's: another round runs while spent + last fits; at least 1). */
int tb_rounds_left(const tb_rounds_cfg *cfg, int r, double spent, double last);

/* 1 when a new build due every `interval` rounds is worth beginning with
 * `left` rounds to go: at least half its interval, and 2 rounds (1 for a
 * build every round). */
int tb_rounds_build_worth(int interval, int left);

/* Round r's order of n arms (a permutation of 0..n-1 in perm), a pure
 * function of (seed, r). */
void tb_rounds_order(uint64_t seed, int r, int n, int *perm);

/* The order arms are built in (a permutation of 0..n-1 in perm): before
 * the first round (r = 0: each arm's first build, by its warm-up) and for
 * the rebuilds before round r; a pure function of (seed, r), on a stream of
 * its own. Drawn, not arm 0 first: a trainer built earlier ran steadily
 * slower than its copies built after it (the reduced ResNet-50: an A/A
 * copy of the baseline, built after it, 0.3-2.9% faster in 11 of 13
 * experiments of an idle bench:all, with or without rebuilds; built before
 * it, 0.2-0.7% slower; the cause not found), and in index order the
 * baseline came first, which made every setting look faster by that. */
void tb_rounds_build_order(uint64_t seed, int r, int n, int *perm);

/* The repetitions an arm gets in a round: 1, but an A/A arm of a baseline
 * compared with k other arms 1 + k / TB_ROUNDS_AA_PER_SLOT, at most
 * TB_ROUNDS_AA_MAX_SLOTS (rounds.h says why). base[i]: arm i's baseline;
 * aa[i]: 1 for an A/A arm. Writes slots[0..n). */
void tb_rounds_slots(const int *base, const int *aa, int n, int *slots);

/* Room tb_rounds_sequence needs in seq for n arms: at most
 * (2 TB_ROUNDS_AA_MAX_SLOTS + 1) n slots, then its scratch. */
#define TB_ROUNDS_SEQ_ROOM(n) ((4 * TB_ROUNDS_AA_MAX_SLOTS + 2) * (size_t)(n))

/* Round r's repetitions, in the order they run: the arms in
 * tb_rounds_order(seed, r, n), each baseline b with active[b] in that order
 * followed by its active compared arms in that order, each between two
 * repetitions of b (b x1 b x2 b ... xk b); an arm with slots[i] > 1 (an A/A
 * arm, tb_rounds_slots; NULL: 1 each) comes back that many times, its
 * extra repetitions spread evenly over its baseline's list (after the arm
 * m * j / slots places on, cyclically, m being the list's length), each
 * between two repetitions of b as well; a baseline without active
 * compared arms runs once. base[i] is arm i's baseline (base[i] == i: a
 * baseline); an inactive baseline's arms are not run. Writes seq (room:
 * TB_ROUNDS_SEQ_ROOM(n); the slots, then scratch) and returns its length. */
int tb_rounds_sequence(uint64_t seed, int r, const int *base, const int *active,
                       const int *slots, int n, int *seq);

/* Whether per-round core-to-core round trips x[0..n) (any unit) moved
 * between two states: at least 2 rounds above 3 times the least one and
 * at least 2 at or below it (one odd round is an interrupt, not a state;
 * the two states of the EPYC VM are 55-80 and 315-570 ns, and one state's
 * rounds spread up to 2.3x under a test's load). */
int tb_rounds_xcore_moved(const double *x, int n);

/* Busy rule: 1 when other processes used more than TB_ROUNDS_BUSY_CORES of
 * one core on average over wall_s. other_cpu_s NaN (not measured: no
 * /proc/stat, or under a second of rounds, where 10 ms jiffies are too
 * coarse): 1 when the mean 1-minute load average was above ncpu + 0.5.
 * The load average is only the fallback because it counts this process's
 * own threads: a technique running 4 loader workers beside its kernel
 * threads on 2 cores has a load near 6 on an idle machine. */
#define TB_ROUNDS_BUSY_CORES 0.10
int tb_rounds_busy_rule(double load_avg, double other_cpu_s, double wall_s, int ncpu);

#endif
