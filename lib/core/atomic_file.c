/*
 * atomic_file.c - temp file + fsync + rename, so results are never
 * half-written. See atomic_file.h for the contract.
 *
 * Test: bazel test //lib/core:atomic_file_test
 */
#define _GNU_SOURCE
#include "lib/core/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define TB_FILE_MODE 0644
#define TB_TMP_MARK ".tmp."

#define FAIL_ERRNO(...) tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, __VA_ARGS__)

/* The directory part of path ("." when there is none), for fsync. */
static void dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
    } else if (slash == path) {
        snprintf(dir, cap, "/");
    } else {
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    }
}

/* Makes the rename durable: without this a power cut after rename() may
 * bring back the old directory entry. */
static int fsync_dir(const char *path)
{
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return FAIL_ERRNO("cannot open directory %s to sync it", dir);
    /* Some file systems (tmpfs in old kernels, some FUSE) reject fsync on a
     * directory with EINVAL; the rename has still happened. */
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    if (rc != 0 && saved != EINVAL) {
        errno = saved;
        return FAIL_ERRNO("cannot sync directory %s", dir);
    }
    return TB_OK;
}

/* Creates NAME.tmp.PID.XXXXXX next to path; returns the open fd. */
static int make_temp(const char *path, char *tmp, size_t cap, int *fd_out)
{
    int n = snprintf(tmp, cap, "%s" TB_TMP_MARK "%ld.XXXXXX", path, (long)getpid());
    if (n < 0 || (size_t)n >= cap) {
        tmp[0] = '\0';
        return TB_FAIL(TB_ERR_INVALID, "path too long: %s", path);
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int rc = FAIL_ERRNO("cannot create a temporary file next to %s", path);
        tmp[0] = '\0';
        return rc;
    }
    *fd_out = fd;
    return TB_OK;
}

int tb_atomic_open(tb_atomic_file *af, const char *path)
{
    int fd = -1;
    af->fp = NULL;
    af->tmp[0] = '\0';
    if (snprintf(af->path, sizeof af->path, "%s", path) >= (int)sizeof af->path)
        return TB_FAIL(TB_ERR_INVALID, "path too long: %s", path);
    TB_TRY(make_temp(path, af->tmp, sizeof af->tmp, &fd));
    af->fp = fdopen(fd, "w");
    if (!af->fp) {
        int rc = FAIL_ERRNO("cannot open a stream on %s", af->tmp);
        close(fd);
        unlink(af->tmp);
        af->tmp[0] = '\0';
        return rc;
    }
    return TB_OK;
}

void tb_atomic_abort(tb_atomic_file *af)
{
    if (af->fp) {
        fclose(af->fp);
        af->fp = NULL;
    }
    if (af->tmp[0]) {
        unlink(af->tmp);
        af->tmp[0] = '\0';
    }
}

/* fsync + chmod + rename + fsync(dir) of an already closed temporary. */
static int publish(const char *tmp, const char *path)
{
    int fd = open(tmp, O_RDWR);
    if (fd < 0)
        return FAIL_ERRNO("cannot reopen %s to sync it", tmp);
    /* mkstemp makes 0600 files; results are meant to be shared. */
    if (fchmod(fd, TB_FILE_MODE) != 0 || fsync(fd) != 0) {
        int rc = FAIL_ERRNO("cannot sync %s (for %s)", tmp, path);
        close(fd);
        return rc;
    }
    if (close(fd) != 0)
        return FAIL_ERRNO("cannot close %s (for %s)", tmp, path);
    if (rename(tmp, path) != 0)
        return FAIL_ERRNO("cannot rename %s to %s", tmp, path);
    return fsync_dir(path);
}

int tb_atomic_publish(const char *tmp, const char *path)
{
    int rc = publish(tmp, path);
    if (rc != TB_OK)
        unlink(tmp); /* harmless when the rename already happened */
    return rc;
}

int tb_atomic_commit(tb_atomic_file *af)
{
    int rc = TB_OK;
    if (!af->fp)
        return TB_FAIL(TB_ERR_INTERNAL, "commit of %s that is not open", af->path);
    /* ferror catches a failed fprintf the caller did not check. */
    if (ferror(af->fp) || fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0) {
        rc = FAIL_ERRNO("cannot write %s", af->path);
        goto out_abort;
    }
    FILE *fp = af->fp;
    af->fp = NULL;
    if (fclose(fp) != 0) {
        rc = FAIL_ERRNO("cannot write %s", af->path);
        goto out_abort;
    }
    rc = publish(af->tmp, af->path);
    if (rc != TB_OK)
        goto out_abort;
    af->tmp[0] = '\0';
    return TB_OK;

out_abort:
    tb_atomic_abort(af);
    return rc;
}

int tb_atomic_write(const char *path, const void *buf, size_t len)
{
    tb_atomic_file af;
    TB_TRY(tb_atomic_open(&af, path));
    if (len && fwrite(buf, 1, len, af.fp) != len) {
        int rc = FAIL_ERRNO("cannot write %zu bytes to %s", len, path);
        tb_atomic_abort(&af);
        return rc;
    }
    return tb_atomic_commit(&af);
}

int tb_atomic_write_with(const char *path, tb_atomic_writer write, const void *arg)
{
    tb_atomic_file af;
    int rc;
    TB_TRY(tb_atomic_open(&af, path));
    TB_TRY_GOTO(rc, write(arg, af.fp), out_abort);
    TB_TRY_GOTO(rc, tb_atomic_commit(&af), out_fail);
    return TB_OK;
out_abort:
    tb_atomic_abort(&af);
out_fail:
    return TB_FAIL(rc, "cannot write %s", path);
}

int tb_atomic_copy(const char *src, const char *dst)
{
    int rc = TB_OK;
    char buf[1 << 16];
    tb_atomic_file af = {0};
    FILE *in = fopen(src, "rb");
    if (!in)
        return FAIL_ERRNO("cannot open %s to copy it to %s", src, dst);
    TB_TRY_GOTO(rc, tb_atomic_open(&af, dst), out_close_src);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (fwrite(buf, 1, n, af.fp) != n) {
            rc = FAIL_ERRNO("cannot write %s", dst);
            goto out_abort;
        }
    }
    if (ferror(in)) {
        rc = FAIL_ERRNO("cannot read %s", src);
        goto out_abort;
    }
    rc = tb_atomic_commit(&af);
    goto out_close_src;

out_abort:
    tb_atomic_abort(&af);
out_close_src:
    fclose(in);
    return rc;
}

int tb_atomic_reserve(const char *path, char *tmp, size_t cap)
{
    int fd = -1;
    TB_TRY(make_temp(path, tmp, cap, &fd));
    close(fd);
    return TB_OK;
}

int tb_atomic_check_writable(const char *path, const char *flag)
{
    char tmp[PATH_MAX + 64];
    struct stat st;
    /* the final rename cannot replace a directory: found now, not after the run */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return TB_FAIL(TB_ERR_INVALID, "%s=%s is a directory: name a file in it; nothing was "
                       "run", flag, path);
    int rc = tb_atomic_reserve(path, tmp, sizeof tmp);
    if (rc != TB_OK)
        return TB_FAIL(rc, "%s=%s: cannot write there (its folder must exist and be "
                       "writable); nothing was run", flag, path);
    unlink(tmp);
    return TB_OK;
}

static int mkdir_one(const char *path)
{
    struct stat st;
    if (mkdir(path, 0755) == 0)
        return TB_OK;
    if (errno != EEXIST)
        return FAIL_ERRNO("cannot create directory %s", path);
    if (stat(path, &st) != 0)
        return FAIL_ERRNO("cannot stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return TB_FAIL(TB_ERR_IO, "cannot create directory %s: a file of that name exists", path);
    return TB_OK;
}

long tb_read_head(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

int tb_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (!path || !path[0])
        return TB_FAIL(TB_ERR_INVALID, "empty directory name");
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return TB_FAIL(TB_ERR_INVALID, "path too long: %s", path);
    /* Create each prefix ending before a '/', then the whole path. */
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        int rc = mkdir_one(buf);
        *p = '/';
        if (rc != TB_OK)
            return TB_FAIL(rc, "cannot create directory %s", path);
    }
    return mkdir_one(buf);
}

/* PID of NAME.tmp.PID.XXXXXX, or 0 when name is not one of ours. */
static long temp_owner(const char *name)
{
    const char *mark = NULL;
    for (const char *p = strstr(name, TB_TMP_MARK); p; p = strstr(p + 1, TB_TMP_MARK))
        mark = p; /* the last one: NAME itself may contain ".tmp." */
    if (!mark)
        return 0;
    char *end = NULL;
    long pid = strtol(mark + strlen(TB_TMP_MARK), &end, 10);
    if (pid <= 0 || *end != '.' || strlen(end + 1) != 6)
        return 0;
    return pid;
}

int tb_atomic_sweep_stale(const char *dir, int *removed)
{
    int count = 0;
    char full[PATH_MAX];
    if (removed)
        *removed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return TB_OK;
        return FAIL_ERRNO("cannot list %s", dir);
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = temp_owner(e->d_name);
        /* kill(pid, 0) fails with ESRCH only when no such process exists;
         * EPERM means it is alive but someone else's. */
        if (pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0)
            count++;
    }
    closedir(d);
    if (removed)
        *removed = count;
    return TB_OK;
}
