/* guard.c - see guard.h. Tests: bench/cmd/orphan_test.sh. */
#define _GNU_SOURCE
#include "bench/cmd/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME ".bench_all.lock"

static volatile sig_atomic_t guard_signal; /* last SIGINT/SIGTERM/SIGHUP received */

static void on_guard_signal(int sig) { guard_signal = sig; }

/* The parent pid in /proc/PID/stat ("pid (comm) state ppid ..."; comm may
 * hold spaces and parentheses: read from the last ')'), or -1. */
static long ppid_of(const char *pid)
{
    char path[64] = "/proc/", buf[512];
    size_t len = strlen(pid);
    if (len > 32)
        return -1;
    memcpy(path + 6, pid, len);
    memcpy(path + 6 + len, "/stat", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
        return -1;
    long ppid = 0;
    for (p += 4; *p >= '0' && *p <= '9'; p++)
        ppid = ppid * 10 + (*p - '0');
    return ppid;
}

/* Sends sig to every child of this process, found by reading the parent
 * of each process in /proc. Async-signal-safe: raw getdents64, no stdio
 * streams, no malloc (the guard is forked from a threaded process). */
static void signal_children(int sig)
{
    int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    long self = (long)getpid();
    char buf[8192];
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 {
                unsigned long long ino;
                long long off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + off);
            off += d->reclen;
            if (d->name[0] < '1' || d->name[0] > '9' || ppid_of(d->name) != self)
                continue;
            long pid = 0;
            for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
                pid = pid * 10 + (*c - '0');
            kill((pid_t)pid, sig);
        }
    }
    close(dir);
}

/* Kills every descendant: orphans become the subreaper's children, so kill
 * the children, reap, and repeat until there are none. */
static void kill_all_below(void)
{
    for (;;) {
        signal_children(SIGKILL);
        int status;
        pid_t got = waitpid(-1, &status, 0);
        if (got < 0 && errno == ECHILD)
            return;
    }
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

static void on_child(int sig) { (void)sig; }

/* Waits for the technique (worker) while passing signals on; returns its
 * exit code, or does not return when bench:all dies. Signals stay blocked
 * except inside sigsuspend, so none slips in between a check and the wait. */
static int guard_wait(pid_t worker, const sigset_t *waiting)
{
    for (;;) {
        int status;
        pid_t got;
        /* the worker, or orphaned descendants that ended (reaped) */
        while ((got = waitpid(-1, &status, WNOHANG)) > 0)
            if (got == worker)
                return exit_code_of(status);
        int sig = guard_signal;
        guard_signal = 0;
        if (sig == SIGHUP) { /* bench:all is gone: nobody waits for the results */
            kill_all_below();
            _exit(128 + SIGKILL);
        }
        if (sig)
            kill(worker, sig);
        else
            sigsuspend(waiting);
    }
}

/* before: bench:all's signal mask before tb_guard_run blocked the signals
 * for the fork (the technique gets it back). */
static void guard_main(const char *bin, char *const args[], pid_t parent, sigset_t before)
{
    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGINT);
    sigaddset(&handled, SIGTERM);
    sigaddset(&handled, SIGHUP);
    sigaddset(&handled, SIGCHLD);
    sigprocmask(SIG_BLOCK, &handled, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_guard_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_child; /* SIGCHLD's default is to be ignored: sigsuspend would sleep on */
    sigaction(SIGCHLD, &sa, NULL);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, SIGHUP);
    if (getppid() != parent) /* bench:all died before the line above */
        _exit(128 + SIGKILL);
    pid_t self = getpid();
    pid_t worker = fork();
    if (worker < 0)
        _exit(127);
    if (worker == 0) {
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sigaction(SIGCHLD, &sa, NULL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        /* should the guard itself be killed, the technique goes too */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self) /* the guard died before the line above */
            _exit(128 + SIGKILL);
        execv(bin, args);
        static const char msg[] = "bench:all: cannot run a technique binary\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    sigset_t waiting = before;
    sigdelset(&waiting, SIGINT);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGHUP);
    sigdelset(&waiting, SIGCHLD);
    int code = guard_wait(worker, &waiting);
    /* whatever the technique left running (an mpirun's ranks) ends with it */
    kill_all_below();
    _exit(code);
}

int tb_guard_run(const char *bin, char *const args[], volatile pid_t *running,
                 volatile sig_atomic_t *stop)
{
    pid_t parent = getpid();
    /* The guard is born with the signals blocked: until it has its own
     * handlers it still has bench:all's, which would take a signal passed
     * to it for bench:all's and drop it (a Ctrl-C between two techniques
     * then let the next one run to its end). Blocked, the signal waits for
     * the guard's sigsuspend, which passes it on. */
    sigset_t block, before;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &before);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &before, NULL);
        return -1;
    }
    if (pid == 0)
        guard_main(bin, args, parent, before);
    *running = pid;
    /* a signal held while forking reaches bench:all's handler now, which
     * passes it to the guard (*running is set) */
    sigprocmask(SIG_SETMASK, &before, NULL);
    /* one that came after the caller's last look at *stop and before the
     * block found no one to pass it on to: pass it now (the guard forwards
     * it; a technique not yet started dies of it) */
    if (stop && *stop)
        kill(pid, *stop > 0 ? (int)*stop : SIGINT); /* the signal itself where it was kept */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *running = 0;
    return exit_code_of(status);
}

/* The pid written in the lock file, or 0. */
static long lock_holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    long pid = 0;
    return sscanf(buf, "%ld", &pid) == 1 ? pid : 0;
}

int tb_run_lock(const char *dir, double wait_s)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, LOCK_NAME);
    /* no O_CLOEXEC: the guards and techniques inherit the lock */
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        fprintf(stderr, "bench:all: cannot open the run lock %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* a killed run's processes take a moment to be reaped */
    struct timespec nap = {0, 100 * 1000 * 1000};
    for (double waited = 0;; waited += 0.1) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (errno != EWOULDBLOCK || waited >= wait_s) {
            fprintf(stderr, "bench:all: %s is in use by another run (bench:all pid %ld, or a "
                    "technique it started, still holds %s). Wait for it to end or stop it, "
                    "then run again (--resume continues it), or use another --out-dir.\n",
                    dir, lock_holder(fd), path);
            close(fd);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        fprintf(stderr, "bench:all: note: could not write the pid into %s\n", path);
    return 0;
}
