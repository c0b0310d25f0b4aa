/*
 * clock.h - the monotonic clock every wall-time measurement reads.
 *
 * tb_clock_s(): seconds on CLOCK_MONOTONIC (never steps back when the wall
 * clock is set), as a double: differences of two readings are durations,
 * precise to well under a microsecond over a day. Device work is timed with
 * the backend's events instead (bench/harness/harness.h, tb_bench_time_op);
 * this clock times what the host waits for: budgets, fits, epochs, loader
 * waits, the rounds engine's own bookkeeping.
 *
 * Header only.
 */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <time.h>

static inline double tb_clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
