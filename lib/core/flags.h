/*
 * flags.h - command-line flags for every tunebench binary.
 *
 * A binary declares a table of tb_flag (name, kind, where to store, default
 * shown in --help, help text) and calls tb_flags_parse. `--name=value`,
 * `--name value` and, for booleans, `--name` / `--no-name` are accepted.
 * An unknown flag or a bad value is TB_ERR_INVALID with a message naming it
 * and pointing at --help; nothing is guessed. A numeric flag takes the
 * values its range admits (tb_flag.range; without one, any value its type
 * holds); a double is never NaN or infinite, and a size never wraps, so no
 * caller checks for those itself. Arguments that are not flags
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
    TB_FLAG_DOUBLE_AUTO, /* double*: a number, or "auto" (TB_FLAG_UNSET) when
                            the program picks it (e.g. a recipe's lr) */
} tb_flag_kind;

#define TB_FLAG_AUTO (-1)
/* The value of a TB_FLAG_DOUBLE_AUTO flag left to "auto": NaN, which no
 * command line can give (the parser refuses it). Test with tb_flag_unset. */
#define TB_FLAG_UNSET (__builtin_nan(""))
static inline int tb_flag_unset(double v) { return v != v; }

/* The values a numeric flag accepts: [min, max], an end left out where its
 * *_open says so. Integer and size flags compare their value as a double.
 * Build one with the macros below, e.g. TB_RANGE(0, 4096). */
typedef struct tb_flag_range {
    double min, max;
    int min_open, max_open; /* 1: min (max) itself is refused */
} tb_flag_range;

#define TB_RANGE_(lo, hi, lo_open, hi_open) (&(const tb_flag_range){(lo), (hi), (lo_open), (hi_open)})
#define TB_RANGE(lo, hi) TB_RANGE_(lo, hi, 0, 0)             /* lo <= v <= hi */
#define TB_RANGE_HALF_OPEN(lo, hi) TB_RANGE_(lo, hi, 0, 1)   /* lo <= v < hi */
#define TB_RANGE_MIN(lo) TB_RANGE_(lo, __builtin_inf(), 0, 0) /* v >= lo */
#define TB_RANGE_ABOVE(lo) TB_RANGE_(lo, __builtin_inf(), 1, 0) /* v > lo */

typedef struct tb_flag {
    const char *name;        /* without the leading "--" */
    tb_flag_kind kind;
    void *value;             /* holds the default on entry */
    const char *help;
    const char *const *choices; /* TB_FLAG_CHOICE only */
    const tb_flag_range *range; /* numeric kinds; NULL: what the type holds */
} tb_flag;

/* The command line as given, for a record of it (the fingerprint) taken
 * after tb_flags_parse took the flags out of argv: up to cap - 1 of argv's
 * pointers into out, then NULL. Returns how many. REQUIRES: cap >= 1. */
int tb_flags_keep_argv(int argc, char *const *argv, char **out, int cap);

/* Parses argv in place. Returns TB_OK, or TB_ERR_INVALID on an unknown flag
 * or bad value. *help_asked is set when --help or -h was seen (the caller
 * prints tb_flags_usage and exits 0). Flags starting with pass_prefix (e.g.
 * "benchmark_"; NULL for none) and non-flag arguments stay in argv, and
 * *argc is updated. */
int tb_flags_parse(const tb_flag *flags, size_t nflags, int *argc, char **argv,
                   const char *pass_prefix, int *help_asked);

/* Sets f's value from text as `--name=text` would (a string flag then points
 * at text, which must outlive it). TB_OK, or TB_ERR_INVALID naming the flag,
 * the value and what it expects ("--lr=nan: not a finite number (expected a
 * number > 0)"); the value is then left as it was. */
int tb_flag_set(const tb_flag *f, const char *text);

/* Checks f's current value as tb_flag_set would have checked it (finite,
 * within f's range): for values set by code rather than parsed, e.g. a
 * configuration a technique fills in. TB_OK, or TB_ERR_INVALID as
 * tb_flag_set words it. */
int tb_flag_check(const tb_flag *f);

/* Prints "usage: PROG [flags]", the summary, and one line per flag with
 * its current value (the default, before parsing). */
void tb_flags_usage(FILE *f, const char *prog, const char *summary, const tb_flag *flags,
                    size_t nflags);

/* Formats a flag's current value, e.g. for the fingerprint's command line. */
void tb_flag_value_str(const tb_flag *f, char *out, size_t cap);

#endif
