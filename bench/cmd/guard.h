/*
 * guard.h - what keeps the processes of a bench:all run in check.
 *
 * A technique runs inside a guard process that bench:all forks. The guard is
 * a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every descendant
 * whose parent dies (an MPI rank whose mpirun was killed) becomes its child,
 * and it is told when bench:all dies (PR_SET_PDEATHSIG), even by SIGKILL:
 * it then kills every process below it and exits. When the technique exits
 * on its own, whatever it left running is killed too. SIGINT and SIGTERM
 * sent to the guard are passed on to the technique, which removes its
 * temporaries and exits. The guard uses only async-signal-safe calls: it is
 * forked from bench:all, which has a telemetry thread.
 *
 * A run also holds an exclusive lock on a file in its results folder, which
 * every process it starts inherits: a second run (or --resume) on the same
 * folder refuses while any of them lives, instead of racing with it.
 *
 * Tested by bench/cmd/orphan_test.sh (bazel test //bench:orphan_test).
 */
#ifndef TB_BENCH_GUARD_H
#define TB_BENCH_GUARD_H

#include <signal.h>
#include <sys/types.h>

/* Runs bin with args (NULL-terminated, args[0] = bin) in a guard, waits, and
 * returns its exit status, or 128 + the signal that ended it, or -1 when it
 * could not start (errno set). *running is set to the guard's pid while it
 * runs (for a signal handler to pass signals on) and back to 0; when *stop
 * (may be NULL) is already set then, the guard is sent that signal (*stop
 * holds its number; SIGINT where it holds 1) at once (the handler that set
 * it had no pid to pass the signal to). */
int tb_guard_run(const char *bin, char *const args[], volatile pid_t *running,
                 volatile sig_atomic_t *stop);

/* Takes the run lock DIR/.bench_all.lock and writes this pid into it. The
 * descriptor stays open (and inherited) for the life of the process.
 * Returns 0, or -1 after printing to stderr who holds it (when waiting up to
 * wait_s seconds did not free it) or why it could not be taken. */
int tb_run_lock(const char *dir, double wait_s);

#endif
