/*
 * plan.h - what bench:all runs and in which order, read from the technique
 * binaries themselves: each answers --describe with its declaration
 * (bench/harness/technique.h). Ordered by the declared order (ties by
 * name), each technique after those it names in `after`.
 */
#ifndef TB_BENCH_PLAN_H
#define TB_BENCH_PLAN_H

#include "bench/harness/technique.h"

typedef struct tb_plan_entry {
    char name[64];
    double est_seconds[3];    /* per tb_profile */
    int order;
    char after[TB_MAX_AFTER][64];
} tb_plan_entry;

/* Runs `<bin_dir>/<name> --describe` for each name of the comma-separated
 * list names and returns the entries in run order in *out (free() it),
 * their count in *n. Fails (TB_ERR_IO, TB_ERR_DATA) when a binary cannot be
 * run or answers no valid description, or when `after` forms a cycle. */
int tb_plan_describe(const char *bin_dir, const char *names, tb_plan_entry **out, int *n);

#endif
