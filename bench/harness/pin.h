/*
 * pin.h - pins the OpenMP threads of a technique binary to CPUs, where the
 * OS allows it, so that the kernels' threads do not migrate between cores
 * in the middle of a measurement (bench/harness/rounds.h: the noise the
 * rounds must average away).
 *
 * The rule (tb_pin_threads): with T threads (the backend's) and the CPUs
 * this process may use c[0..n) (sched_getaffinity), OpenMP thread t >= 1 is
 * pinned to c[t % n] from inside a parallel region of T threads (libgomp
 * keeps those threads for later regions of the same size). The main thread
 * (t = 0) is left free: a thread it starts later (the loader's workers)
 * inherits its mask, and a main thread pinned to one CPU would put every
 * loader worker on that CPU too. Nothing is pinned when n < 2 or T < 2, or
 * when OMP_PROC_BIND is set (the OpenMP runtime binds by itself then).
 * bench/harness/harness.c calls it from tb_bench_init, after the backend is
 * open and before anything is timed, and records what it did in the
 * fingerprint (run.pinning) and on stderr.
 *
 * Test: bazel test //bench/harness:pin_test
 */
#ifndef TB_BENCH_PIN_H
#define TB_BENCH_PIN_H

#include <stddef.h>

/* Pins as above; what (cap bytes) gets one line saying what was pinned or
 * why nothing was. threads <= 0: omp_get_max_threads(). Returns the number
 * of threads pinned (0: none); never fails (pinning is best effort). */
int tb_pin_threads(int threads, char *what, size_t cap);

#endif
