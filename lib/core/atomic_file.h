/*
 * atomic_file.h - results that are never half-written.
 *
 * Every CSV, JSON, gnuplot script and rendered plot tunebench writes goes
 * through here: the bytes go to a temporary file in the same directory
 * (NAME.tmp.PID.XXXXXX, made by mkstemp), are flushed and fsync'ed, and the
 * temporary is renamed over NAME; then the directory is fsync'ed so the
 * rename itself survives a power cut. rename() within one file system is
 * atomic, so a reader (or a later --resume) sees either the old file or the
 * new one, never a mix. On any failure the temporary is removed and the old
 * file is left as it was.
 *
 * A process killed mid-write (SIGKILL, OOM killer) cannot remove its
 * temporary; tb_atomic_sweep_stale() removes those whose PID is gone.
 *
 * Test: bazel test //lib/core:atomic_file_test
 */
#ifndef TB_ATOMIC_FILE_H
#define TB_ATOMIC_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* An atomic write in progress. fp is where the caller writes. */
typedef struct tb_atomic_file {
    FILE *fp;                 /* NULL when not open (after commit or abort) */
    char path[PATH_MAX];      /* final name */
    char tmp[PATH_MAX];       /* temporary name, same directory */
} tb_atomic_file;

/* Starts an atomic write of path: creates the temporary next to it.
 * REQUIRES: path's directory exists (see tb_mkdir_p).
 * On failure af->fp is NULL, nothing is left on disk, and the error names
 * the path. */
int tb_atomic_open(tb_atomic_file *af, const char *path);

/* Finishes the write: checks the stream for earlier write errors, flushes,
 * fsyncs, renames into place, fsyncs the directory. The file gets mode 0644.
 * On failure the temporary is removed and the old file (if any) is intact.
 * Either way af is closed afterwards. */
int tb_atomic_commit(tb_atomic_file *af);

/* Throws the write away: closes and removes the temporary. Safe to call on
 * a closed af (after commit, or twice), so cleanup paths can always call it. */
void tb_atomic_abort(tb_atomic_file *af);

/* Writes a whole buffer to path atomically. */
int tb_atomic_write(const char *path, const void *buf, size_t len);

/* Writes the whole of one file to f from arg; a status. */
typedef int (*tb_atomic_writer)(const void *arg, FILE *f);

/* Writes path atomically with write(arg, f): committed when write returns
 * TB_OK, else the temporary is removed and the old file is left as it was.
 * For every file tunebench builds with fprintf (CSV, JSON, Markdown).
 * The error names path. */
int tb_atomic_write_with(const char *path, tb_atomic_writer write, const void *arg);

/* Copies src to dst atomically (dst's directory must exist). For keeping a
 * file another program wrote, e.g. Google Benchmark's JSON. */
int tb_atomic_copy(const char *src, const char *dst);

/* For files another program writes by name (gnuplot's output): creates an
 * empty temporary next to path and returns its name in tmp (cap bytes).
 * The caller has the program write to tmp, then calls tb_atomic_publish,
 * or removes tmp with unlink() on failure. */
int tb_atomic_reserve(const char *path, char *tmp, size_t cap);

/* Whether a file can be written at path later (a temporary made next to it
 * and removed): for outputs written when a long run ends, checked before it
 * begins. flag names the option in the message, e.g. "--trace". */
int tb_atomic_check_writable(const char *path, const char *flag);

/* fsyncs tmp, sets mode 0644, renames it to path, fsyncs the directory.
 * On failure removes tmp and leaves path intact.
 * REQUIRES: tmp and path in the same directory. */
int tb_atomic_publish(const char *tmp, const char *path);

/* The first cap - 1 bytes of path into buf, NUL-terminated (a /proc or
 * /sys file, or what a test wants to look at). Returns how many bytes were
 * read, or -1 when path cannot be opened; never pushes an error.
 * REQUIRES: cap >= 1. */
long tb_read_head(const char *path, char *buf, size_t cap);

/* mkdir -p: creates path and any missing parents with mode 0755. An
 * existing directory is fine; an existing non-directory is an error. */
int tb_mkdir_p(const char *path);

/* Removes temporaries (NAME.tmp.PID.XXXXXX) in dir left by processes that
 * no longer exist. *removed (may be NULL) gets how many went. A missing dir
 * is not an error. */
int tb_atomic_sweep_stale(const char *dir, int *removed);

#ifdef __cplusplus
}
#endif
#endif
