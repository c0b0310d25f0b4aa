/*
 * atomic_file_test.c - checks that results are never half-written.
 *
 * Checks: a commit replaces the content; an abort, and a writer killed with
 * SIGKILL mid-write, leave the old file intact; the stale temporary of the
 * killed writer is swept; errors name the path; mkdir -p; copy.
 *
 * Run: bazel test //lib/core:atomic_file_test
 */
#define _GNU_SOURCE
#include "lib/core/atomic_file.h"
#include "lib/core/outdir.h"
#include "lib/core/testing.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[2048]; /* short enough that root + a file name fits PATH_MAX */

static void test_commit_replaces(void)
{
    char path[PATH_MAX], buf[256];
    printf("commit replaces the content\n");
    snprintf(path, sizeof path, "%s/a.csv", root);
    CHECK(tb_atomic_write(path, "old\n", 4) == TB_OK, "first write");
    tb_atomic_file af;
    CHECK(tb_atomic_open(&af, path) == TB_OK, "open");
    fprintf(af.fp, "new,%d\n", 42);
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "old\n") == 0, "old content visible until commit");
    CHECK(tb_test_count_temps(root) == 1, "one temporary during the write");
    CHECK(tb_atomic_commit(&af) == TB_OK, "commit");
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "new,42\n") == 0, "new content after commit (got '%s')", buf);
    CHECK(tb_test_count_temps(root) == 0, "no temporary left");
    struct stat st;
    stat(path, &st);
    CHECK((st.st_mode & 0777) == 0644, "mode 0644 (got %o)", st.st_mode & 0777);
    tb_atomic_abort(&af); /* after commit: a no-op */
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "new,42\n") == 0, "abort after commit changes nothing");
}

static void test_abort_keeps_old(void)
{
    char path[PATH_MAX], buf[256];
    printf("abort keeps the old file\n");
    snprintf(path, sizeof path, "%s/b.csv", root);
    tb_atomic_write(path, "keep me\n", 8);
    tb_atomic_file af;
    CHECK(tb_atomic_open(&af, path) == TB_OK, "open");
    fprintf(af.fp, "half a ro");
    tb_atomic_abort(&af);
    tb_atomic_abort(&af); /* twice is fine */
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "keep me\n") == 0, "old content intact");
    CHECK(tb_test_count_temps(root) == 0, "temporary removed");
}

static int write_line(const void *arg, FILE *f)
{
    fprintf(f, "%s\n", (const char *)arg);
    return TB_OK;
}

static int write_half_then_fail(const void *arg, FILE *f)
{
    fputs((const char *)arg, f);
    return TB_FAIL(TB_ERR_DATA, "the writer gave up");
}

static void test_write_with(void)
{
    char path[PATH_MAX], buf[256];
    printf("write_with commits what the writer wrote, or nothing when it fails\n");
    snprintf(path, sizeof path, "%s/w.csv", root);
    CHECK(tb_atomic_write_with(path, write_line, "first") == TB_OK, "write");
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "first\n") == 0, "content (got '%s')", buf);
    int rc = tb_atomic_write_with(path, write_half_then_fail, "half a ro");
    CHECK(rc == TB_ERR_DATA && tb_error_depth() == 2 && strstr(tb_error_message(), "w.csv"),
          "the writer's error, then the path (%s)", tb_error_message());
    tb_error_clear();
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "first\n") == 0, "old content intact");
    CHECK(tb_test_count_temps(root) == 0, "temporary removed");
}

/* A child starts a write, tells the parent, and is killed mid-write. */
static void test_killed_writer(void)
{
    char path[PATH_MAX], buf[256];
    int ready[2];
    printf("a writer killed with SIGKILL mid-write leaves the old file\n");
    snprintf(path, sizeof path, "%s/c.csv", root);
    tb_atomic_write(path, "before\n", 7);
    if (pipe(ready) != 0) {
        CHECK(0, "pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        tb_atomic_file af;
        if (tb_atomic_open(&af, path) != TB_OK)
            _exit(3);
        for (int i = 0; i < 10000; i++)
            fprintf(af.fp, "row %d,partial\n", i);
        fflush(af.fp); /* the half-written data is really on disk */
        if (write(ready[1], "x", 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "child wrote half a file");
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(ready[0]);
    close(ready[1]);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child died of SIGKILL");
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "before\n") == 0, "old content intact (got '%.20s')", buf);
    CHECK(tb_test_count_temps(root) == 1, "the dead writer's temporary is left over");
    int removed = -1;
    CHECK(tb_atomic_sweep_stale(root, &removed) == TB_OK && removed == 1,
          "sweep removes it (removed %d)", removed);
    CHECK(tb_test_count_temps(root) == 0, "no temporary left");

    /* A live writer's temporary must survive a sweep. */
    tb_atomic_file af;
    tb_atomic_open(&af, path);
    tb_atomic_sweep_stale(root, &removed);
    CHECK(removed == 0 && tb_test_count_temps(root) == 1, "a live writer's temporary is kept");
    tb_atomic_abort(&af);
}

static void test_errors_name_path(void)
{
    char file[2100], bad[PATH_MAX];
    printf("errors name the path\n");
    /* A regular file used as a directory: fails even for root, unlike
     * permission bits. */
    snprintf(file, sizeof file, "%s/plainfile", root);
    tb_atomic_write(file, "x", 1);
    snprintf(bad, sizeof bad, "%s/out.csv", file);
    tb_error_clear();
    int rc = tb_atomic_write(bad, "y", 1);
    CHECK(rc == TB_ERR_IO, "write under a file fails with TB_ERR_IO (%d)", rc);
    CHECK(strstr(tb_error_message(), bad) != NULL, "message names the path: %s",
          tb_error_message());
    tb_error_clear();
    snprintf(bad, sizeof bad, "%s/sub/dir", file);
    rc = tb_mkdir_p(bad);
    CHECK(rc == TB_ERR_IO, "mkdir -p under a file fails");
    CHECK(strstr(tb_error_message(), file) != NULL, "message names the path: %s",
          tb_error_message());
    tb_error_clear();
    snprintf(bad, sizeof bad, "%s/missing.json", root);
    rc = tb_atomic_copy(bad, file);
    CHECK(rc == TB_ERR_IO && strstr(tb_error_message(), bad), "copy of a missing file: %s",
          tb_error_message());
    tb_error_clear();
}

static void test_mkdir_and_copy(void)
{
    char dir[PATH_MAX], src[PATH_MAX], dst[PATH_MAX], buf[256];
    struct stat st;
    printf("mkdir -p and copy\n");
    snprintf(dir, sizeof dir, "%s/results/cpu-test//deep/", root);
    CHECK(tb_mkdir_p(dir) == TB_OK, "mkdir -p %s", dir);
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "directory exists");
    CHECK(tb_mkdir_p(dir) == TB_OK, "mkdir -p again is fine");
    snprintf(src, sizeof src, "%s/gb.json", root);
    snprintf(dst, sizeof dst, "%s/results/cpu-test/gelu.gbench.json", root);
    tb_atomic_write(src, "{\"benchmarks\": []}\n", 19);
    CHECK(tb_atomic_copy(src, dst) == TB_OK, "copy");
    tb_read_head(dst, buf, sizeof buf);
    CHECK(strcmp(buf, "{\"benchmarks\": []}\n") == 0, "copy has the same bytes");
}

static void test_reserve_publish(void)
{
    char path[PATH_MAX], tmp[PATH_MAX], buf[64];
    printf("reserve + publish, for files another program writes\n");
    snprintf(path, sizeof path, "%s/plot.png", root);
    CHECK(tb_atomic_reserve(path, tmp, sizeof tmp) == TB_OK, "reserve %s", tmp);
    FILE *f = fopen(tmp, "w");
    fputs("png", f);
    fclose(f);
    CHECK(access(path, F_OK) != 0, "final name absent before publish");
    CHECK(tb_atomic_publish(tmp, path) == TB_OK, "publish");
    tb_read_head(path, buf, sizeof buf);
    CHECK(strcmp(buf, "png") == 0 && access(tmp, F_OK) != 0, "renamed into place");
}

/* How many entries (beside . and ..) folder dir holds. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static void test_check_writable(void)
{
    char dir[PATH_MAX], path[PATH_MAX];
    printf("check_writable: for outputs written when a run ends\n");
    snprintf(dir, sizeof dir, "%s/writable", root);
    CHECK(tb_mkdir_p(dir) == TB_OK, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    CHECK(tb_atomic_check_writable(path, "--trace") == TB_OK && entries(dir) == 0,
          "a writable place: OK, and nothing left there");
    snprintf(path, sizeof path, "%s/no_such_folder/trace.json", root);
    int rc = tb_atomic_check_writable(path, "--trace");
    CHECK(rc == TB_ERR_IO && strstr(tb_error_message(), "--trace=") &&
              strstr(tb_error_message(), "no_such_folder"),
          "a missing folder: TB_ERR_IO naming the flag and the path (%s)", tb_error_message());
    tb_error_clear();
    /* a directory passes the temporary's test but fails the rename at the end */
    rc = tb_atomic_check_writable(dir, "--trace");
    CHECK(rc == TB_ERR_INVALID && strstr(tb_error_message(), "is a directory"),
          "a directory: refused before the run (%s)", tb_error_message());
    tb_error_clear();
}

static void test_outdir(void)
{
    tb_outdir od;
    char want[PATH_MAX], cwd[PATH_MAX];
    struct stat st;
    printf("output folders: --out-dir, then BUILD_WORKSPACE_DIRECTORY, then cwd\n");
    unsetenv("BUILD_WORKING_DIRECTORY");
    setenv("BUILD_WORKSPACE_DIRECTORY", "/src/tree", 1);
    CHECK(tb_outdir_init(&od, root, "cpu-xeon") == TB_OK && strcmp(od.root, root) == 0,
          "--out-dir wins: %s", od.root);
    snprintf(want, sizeof want, "%s/results/cpu-xeon", root);
    CHECK(strcmp(od.results, want) == 0, "results folder %s", od.results);
    snprintf(want, sizeof want, "%s/plots/cpu-xeon", root);
    CHECK(strcmp(od.plots, want) == 0, "plots folder %s", od.plots);
    CHECK(tb_outdir_create(&od) == TB_OK && stat(od.results, &st) == 0 && stat(od.plots, &st) == 0,
          "both created");
    CHECK(tb_outdir_init(&od, "", "cpu-xeon") == TB_OK && strcmp(od.root, "/src/tree") == 0,
          "bazel run: the source tree (%s)", od.root);
    setenv("BUILD_WORKING_DIRECTORY", "/home/me", 1);
    CHECK(tb_outdir_init(&od, "runs/a", "cpu-xeon") == TB_OK &&
              strcmp(od.root, "/home/me/runs/a") == 0,
          "relative --out-dir under bazel run is taken from where it was typed (%s)", od.root);
    unsetenv("BUILD_WORKING_DIRECTORY");
    unsetenv("BUILD_WORKSPACE_DIRECTORY");
    CHECK(tb_outdir_init(&od, NULL, "cpu-xeon") == TB_OK && getcwd(cwd, sizeof cwd) &&
              strcmp(od.root, cwd) == 0,
          "otherwise the current directory (%s)", od.root);
    CHECK(tb_outdir_init(&od, NULL, "../up") == TB_ERR_INVALID, "a slug that climbs is refused");
    CHECK(tb_outdir_init(&od, NULL, "a/b") == TB_ERR_INVALID, "a slug with / is refused");
    tb_error_clear();
}

int main(void)
{
    tb_test_verbose = 1; /* a checklist: every check printed */
    if (tb_test_tmpdir(root, sizeof root, "atomic") != 0)
        return 1;
    test_commit_replaces();
    test_abort_keeps_old();
    test_write_with();
    test_killed_writer();
    test_errors_name_path();
    test_mkdir_and_copy();
    test_reserve_publish();
    test_check_writable();
    test_outdir();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
