/*
 * machine_probe.h - how fast this machine's first two CPUs are right now,
 * alone and together, measured in a fraction of a second between
 * techniques (bench:all) so that a run's results can be read against the
 * state the machine was in.
 *
 * Why: on the 2-vCPU VMs tunebench is developed on, the same technique's
 * baseline ran 1.3-1.9x slower in one idle run than in the next, in blocks
 * of consecutive techniques (issue 14's agreement check), while a
 * one-thread compute loop timed for minutes stayed within 0.2%. A VM's two
 * vCPUs can land on two hyperthreads of one host core, or share it with
 * another guest, and then they slow each other down only when both run:
 * one thread alone cannot see it. So the probe times the same work on one
 * CPU, then on the two at once.
 *
 * What it times, reps times each, medians kept:
 *   fma   a chain of dependent multiply-adds, 8M iterations (about 17 ms
 *         on this VM): the core's speed;
 *   copy  memcpy of 16 MiB (a fresh destination page-faulted in advance):
 *         the memory system;
 *   cache a walk of 200k dependent loads through the lines of 8 MiB in a
 *         seeded random order, on each CPU alone: the last-level cache
 *         this guest gets. On the 2-vCPU AVX-512 EPYC VM a load took
 *         15 ns at 4 MiB, 18-60 ns at 8 MiB (from minute to minute) and
 *         100-130 ns (DRAM) from 12 MiB of a nominal 32 MiB L3: other
 *         guests hold the rest. In one session the same bench:waterfall
 *         ran its small-CNN steps in 3.6 ms, then 2.8 ms a minute later, its
 *         ratios moving by up to 8%, while fma held; whether the cache is
 *         what moved them is not established, this column is there to tell.
 *   xcore the round trip of one cache line between c0 and c1 (two pinned
 *         threads pass a counter back and forth, 2,000 trips in 5 bursts,
 *         the bursts' median): the distance between the two CPUs. This is
 *         the one that tells the EPYC VM's two states apart: 55-80 ns while
 *         the host runs the two vCPUs on cores sharing a last-level cache,
 *         315-570 ns while it runs them apart (seconds to minutes at a
 *         time, seen within one process and between processes), and then
 *         two threads train the small CNN no faster than one (4,500
 *         against 7,100-9,000 images/s at batch 16), while fma, copy and
 *         even a throughput-bound multiply-add loop on both CPUs at once
 *         show no difference at all (2026-11-28, alternating 2-thread
 *         epochs with the probe for minutes). So the slowdown above is the
 *         threads' hand-offs (every parallel region's barrier and the data
 *         one thread wrote and the other reads), not a shared core.
 * Each on CPU c0 alone, on c1 alone, then on both at once (a barrier
 * starts them together; the pair's time is the slower thread's). The pair
 * ratio is pair / mean(alone): 1.0 when the two CPUs do not interfere,
 * up to 2 when they share one core's execution units (or one CPU is
 * taken away).
 * c0 and c1 are the first two CPUs this process may use; with one, the
 * pair fields are 0.
 *
 * Test: bazel test //bench/harness:machine_probe_test
 */
#ifndef TB_BENCH_MACHINE_PROBE_H
#define TB_BENCH_MACHINE_PROBE_H

#include <stdio.h>

typedef struct tb_machine_probe {
    int cpus;              /* CPUs used: 1 or 2 */
    double fma_alone_s;    /* median of both CPUs' alone times */
    double fma_pair_s;     /* 0 when cpus < 2 */
    double copy_alone_s;
    double copy_pair_s;
    double cache_load_s;   /* seconds per load of the cache walk, median */
    double xcore_s;        /* seconds per core-to-core round trip (tb_machine_probe_xcore_s);
                              0 when cpus < 2 */
} tb_machine_probe;

/* Runs the probe (reps >= 1 of each measurement). Returns TB_OK or an
 * error (no memory, a thread that could not start). */
int tb_machine_probe_run(int reps, tb_machine_probe *out);

/* Seconds per round trip of one cache line between the first two CPUs
 * this process may use: two threads pinned there pass a counter back and
 * forth, trips round trips in 5 bursts (median of the bursts). 0 with
 * fewer than 2 CPUs or when a thread cannot start. 2000 trips take
 * 0.1-0.7 ms on the EPYC VM; the rounds engine (rounds.c) takes one after
 * every round. */
double tb_machine_probe_xcore_s(int trips);

/* Two round trips this many times apart are two machine states (the EPYC
 * VM's: 55-80 and 315-570 ns; one state's samples spread up to 2.3x under
 * a test's load). rounds.c, vs_torch's gain rows; lib/report/summary.c and
 * tools/compare_runs.py use the same factor. */
#define TB_MACHINE_XCORE_STATES 3.0

/* pair / alone; 0 when there is no pair. */
double tb_machine_probe_fma_ratio(const tb_machine_probe *p);
double tb_machine_probe_copy_ratio(const tb_machine_probe *p);

/* The CSV header of machine_probe.csv, and one row (no newline inside). */
void tb_machine_probe_csv_header(FILE *f);
void tb_machine_probe_csv_row(FILE *f, const char *technique, double at_s,
                              const tb_machine_probe *p);

#endif
