/*
 * testing.h - the checks the C tests of lib/, datasets/ and bench/ share,
 * so that each test says what it checks and not again how to report it.
 * Header only, for tests (//lib/core:testing is testonly). A test program is one
 * .c file: the counters below are that program's.
 *
 *   CHECK(cond, "fmt", ...)  counts a check; when cond is false, counts a
 *                            failure and prints "FAIL file:line: message"
 *                            (no message: the condition's text), then the
 *                            pending error chain of lib/core/status.h, which it
 *                            clears so the next failure prints only its own.
 *   CHECK_OK(expr)           CHECK that expr returns TB_OK.
 *   CHECK_WHAT(cond, what)   CHECK with a message built beforehand.
 *   tb_test_verbose = 1;     also prints "  ok: message" for every check
 *                            that passes (tests that read as a checklist).
 *   failures, checks         failed and run checks, for main to report.
 *   return tb_test_exit(rc); the end of main: rc's error chain, PASS or FAIL
 *                            with the counts, and the exit status.
 *   slurp(path)              the whole file as a string (malloc'ed; NULL
 *                            when it cannot be read).
 *   tb_test_slurp(dir, name) slurp(dir/name), and a CHECK that it was read.
 *   tb_test_tmpdir(dir, cap, name)  a fresh folder for the test's files.
 *   tb_test_count_temps(dir) atomic-write temporaries left in dir.
 *
 * Output goes to stdout, errors included, so a failure and its cause stay
 * together in the test log.
 */
#ifndef TB_TESTING_H
#define TB_TESTING_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/status.h"

static int failures __attribute__((unused));
static int checks __attribute__((unused));
static int tb_test_verbose __attribute__((unused));

/* fmt starts with a space that is not printed: CHECK passes " " __VA_ARGS__
 * so that a check without a message still has a non-empty format. */
__attribute__((format(printf, 5, 6), unused))
static void tb_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    checks++;
    if (ok && !tb_test_verbose)
        return;
    if (ok)
        printf("  ok: ");
    else
        printf("FAIL %s:%d: ", file, line);
    if (fmt[0] && fmt[1]) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt + 1, ap);
        va_end(ap);
    } else {
        fputs(expr, stdout);
    }
    printf("\n");
    fflush(stdout); /* in order with what the test writes to stderr */
    if (!ok) {
        failures++;
        tb_error_print(stdout);
        tb_error_clear();
    }
}

#define CHECK(cond, ...) tb_check(!!(cond), __FILE__, __LINE__, #cond, " " __VA_ARGS__)
#define CHECK_OK(expr) CHECK((expr) == TB_OK, "%s returned an error", #expr)
#define CHECK_WHAT(cond, what) CHECK(cond, "%s", what)

/* rc: TB_OK, or the status that stopped the test before its checks ran out
 * (its error chain is printed). Exit status 0 only when rc is TB_OK and no
 * check failed. */
__attribute__((unused))
static int tb_test_exit(int rc)
{
    if (rc != TB_OK)
        tb_error_print(stdout);
    int ok = rc == TB_OK && !failures;
    printf("%s: %d checks, %d failed%s\n", ok ? "PASS" : "FAIL", checks, failures,
           rc != TB_OK ? ", stopped by an error" : "");
    return ok ? 0 : 1;
}

__attribute__((unused))
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    long n;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto out_close;
    s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
out_close:
    fclose(f);
    return s;
}

/* slurp(dir/name), counted as a check that it could be read. */
__attribute__((unused))
static char *tb_test_slurp(const char *dir, const char *name)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = slurp(path);
    CHECK(s, "%s is readable", path);
    return s;
}

/* A fresh directory $TEST_TMPDIR/<name>_XXXXXX (under /tmp without
 * TEST_TMPDIR) in dir; 0, or -1 with the reason printed. */
__attribute__((unused))
static int tb_test_tmpdir(char *dir, size_t cap, const char *name)
{
    const char *base = getenv("TEST_TMPDIR");
    snprintf(dir, cap, "%s/%s_XXXXXX", base && base[0] ? base : "/tmp", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Entries in dir whose name holds ".tmp.": temporaries that an atomic
 * write (lib/core/atomic_file.h) left behind. */
__attribute__((unused))
static int tb_test_count_temps(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

#endif
