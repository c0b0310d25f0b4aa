/*
 * flags.h - command-line flags for every tunebench binary.
 *
 * A binary declares a table of tb_flag (name, kind, where to store, default
 * shown in --help, help text) and calls tb_flags_parse. `--name=value`,
 * `--name value` and, for booleans, `--name` / `--no-name` are accepted.
 * An unknown flag or a bad value is TB_ERR_INVALID with a message naming it
 * and pointing at --help; nothing is guessed. Arguments that are not flags
 * are left in argv (compacted) for the caller, e.g. Google Benchmark's own
 * --benchmark_* flags when pass_unknown_prefix says so.
 */
#ifndef TB_FLAGS_H
#define TB_FLAGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum tb_flag_kind {
    TB_FLAG_BOOL,    /* int*: 0/1 */
    TB_FLAG_INT,     /* int* */
    TB_FLAG_LONG,    /* long long* */
    TB_FLAG_DOUBLE,  /* double* */
    TB_FLAG_STRING,  /* const char**: points into argv */
    TB_FLAG_SIZE,    /* size_t*: bytes, with optional K/M/G suffix (binary) */
    TB_FLAG_CHOICE,  /* int*: index into choices (NULL-terminated) */
    TB_FLAG_BOOL_AUTO, /* int*: a boolean that may also be left to its user:
                          1, 0, or TB_FLAG_AUTO for "auto"; --name, --no-name */
} tb_flag_kind;

#define TB_FLAG_AUTO (-1)

typedef struct tb_flag {
    const char *name;        /* without the leading "--" */
    tb_flag_kind kind;
    void *value;             /* holds the default on entry */
    const char *help;
    const char *const *choices; /* TB_FLAG_CHOICE only */
} tb_flag;

/* Parses argv in place. Returns TB_OK, or TB_ERR_INVALID on an unknown flag
 * or bad value. *help_asked is set when --help or -h was seen (the caller
 * prints tb_flags_usage and exits 0). Flags starting with pass_prefix (e.g.
 * "benchmark_"; NULL for none) and non-flag arguments stay in argv, and
 * *argc is updated. */
int tb_flags_parse(const tb_flag *flags, size_t nflags, int *argc, char **argv,
                   const char *pass_prefix, int *help_asked);

/* Sets f's value from text as `--name=text` would (a string flag then points
 * at text, which must outlive it). TB_OK, or TB_ERR_INVALID naming the flag
 * and what it expects. */
int tb_flag_set(const tb_flag *f, const char *text);

/* Prints "usage: PROG [flags]", the summary, and one line per flag with
 * its current value (the default, before parsing). */
void tb_flags_usage(FILE *f, const char *prog, const char *summary, const tb_flag *flags,
                    size_t nflags);

/* Formats a flag's current value, e.g. for the fingerprint's command line. */
void tb_flag_value_str(const tb_flag *f, char *out, size_t cap);

#endif
