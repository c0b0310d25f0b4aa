/*
 * cli.h - what the commands of bench/cmd share on their command line: flags
 * with --help, and paths given relative to where `bazel run` was started.
 */
#ifndef TB_BENCH_CLI_H
#define TB_BENCH_CLI_H

#include <stddef.h>

#include "lib/core/flags.h"

/* Parses flags for the command prog ("bench:report"); usage follows prog
 * in --help's first line ("[RESULTS_DIR...]", or ""). Without `positional`
 * an argument left over is an error. Returns -1 when the command goes on,
 * else its exit code: 0 after --help was printed (stdout), 2 after a bad
 * flag or argument (said on stderr). */
int tb_cli_parse(const char *prog, const char *usage, const char *summary, tb_flag *flags,
                 size_t nflags, int positional, int *argc, char **argv);

/* arg, made absolute against the folder `bazel run` was started in
 * (BUILD_WORKING_DIRECTORY) when it is relative and that folder is known. */
void tb_cli_path(const char *arg, char *out, size_t cap);

#endif
