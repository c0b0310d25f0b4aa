/*
 * fingerprint_test.c - the environment fingerprint has every key, parses as
 * JSON, reads back unchanged, and its comparison finds what differs.
 *
 * Checks: required keys present; CPU frequency is the n/a text when cpufreq
 * is absent (never a guess); JSON parses (python3, when there); save + load
 * round trip; git revision and -dirty in a scratch repository; diff scopes
 * (software vs resume; run.* ignored).
 *
 * Run: bazel test //lib/report:fingerprint_test
 */
#define _GNU_SOURCE
#include "lib/report/fingerprint.h"
#include "lib/core/testing.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const required[] = {
    "schema", "run.time_utc", "run.host", "run.command_line", "run.source_dir",
    "git.revision", "device.backend", "device.name", "device.total_mem_bytes",
    "device.multiprocessors", "device.threads", "device.clock_khz", "device.compute_capability",
    "device.runtime", "device.driver", "device.libs", "cpu.model", "cpu.flags",
    "cpu.flags_checked", "cpu.logical_cpus", "cpu.frequency", "os.kernel", "os.pretty_name",
    "build.compiler", "build.optimized", "build.ndebug", "software.onednn", "software.mpi",
};

static tb_device_info fake_cpu(void)
{
    tb_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "cpu");
    snprintf(d.name, sizeof d.name, "Test CPU \"quoted\", with comma");
    d.total_mem = 8ull << 30;
    d.multiprocessors = 2;
    d.threads = 2;
    snprintf(d.cpu_flags, sizeof d.cpu_flags, "avx2 avx512f");
    snprintf(d.libs, sizeof d.libs, "oneDNN 2.6");
    return d;
}

static int collect(tb_fingerprint *fp)
{
    tb_device_info d = fake_cpu();
    char *argv[] = {"bench/gelu", "--device=cpu", "--out-dir", "/tmp/with space", NULL};
    TB_TRY(tb_fingerprint_collect(fp, &d, 4, argv));
    TB_TRY(tb_fingerprint_set(fp, "software.onednn", "2.6.0"));
    TB_TRY(tb_fingerprint_set(fp, "software.mpi", "Open MPI v4.1.4"));
    return TB_OK;
}

static void test_keys(const tb_fingerprint *fp)
{
    printf("every required key is present\n");
    int missing = 0;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (!tb_fingerprint_get(fp, required[i])) {
            printf("  missing: %s\n", required[i]);
            missing++;
        }
    }
    CHECK(missing == 0, "%zu keys", sizeof required / sizeof required[0]);
    const char *freq = tb_fingerprint_get(fp, "cpu.frequency");
    if (access("/sys/devices/system/cpu/cpu0/cpufreq", F_OK) != 0)
        CHECK(strcmp(freq, "n/a (not exposed by this machine)") == 0,
              "no cpufreq here: cpu.frequency says so (%s)", freq);
    else
        CHECK(strstr(freq, "MHz") != NULL, "cpufreq here: %s", freq);
    CHECK(strcmp(tb_fingerprint_get(fp, "device.clock_khz"), "n/a (not exposed by this device)") == 0,
          "a zero clock is n/a, not 0");
    CHECK(strstr(tb_fingerprint_get(fp, "run.command_line"), "'/tmp/with space'") != NULL,
          "command line quoted: %s", tb_fingerprint_get(fp, "run.command_line"));
    const char *when = tb_fingerprint_get(fp, "run.time_utc");
    CHECK(strlen(when) == 20 && when[10] == 'T' && when[19] == 'Z', "UTC ISO 8601: %s", when);
    printf("  cpu: %s | flags: %s\n", tb_fingerprint_get(fp, "cpu.model"),
           tb_fingerprint_get(fp, "cpu.flags"));
    printf("  os: %s | git: %s\n", tb_fingerprint_get(fp, "os.pretty_name"),
           tb_fingerprint_get(fp, "git.revision"));
}

static void test_json_round_trip(const tb_fingerprint *fp, const char *dir)
{
    char path[512], cmd[1024], diffs[1024];
    tb_fingerprint back;
    int n = -1;
    printf("JSON parses and reads back unchanged\n");
    snprintf(path, sizeof path, "%s/fingerprint.json", dir);
    CHECK(tb_fingerprint_save(fp, path) == TB_OK, "saved %s", path);
    if (system("python3 -c pass >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                 "assert d[\"schema\"]==\"%s\"; "
                 "assert isinstance(d[\"device\"][\"total_mem_bytes\"], int); "
                 "assert d[\"device\"][\"name\"]==\"Test CPU \\\"quoted\\\", with comma\"; "
                 "assert set(d)>={\"run\",\"git\",\"device\",\"cpu\",\"os\",\"build\",\"software\"}' %s",
                 TB_FINGERPRINT_SCHEMA, path);
        CHECK(system(cmd) == 0, "python3 json.load: sections, types and escapes");
    } else {
        printf("  skipped: python3 not found for the parse check\n");
    }
    int rc = tb_fingerprint_load(path, &back);
    CHECK(rc == TB_OK, "load (%s)", rc ? tb_error_message() : "ok");
    CHECK(back.n == fp->n, "same number of entries (%d vs %d)", back.n, fp->n);
    tb_fingerprint_diff(fp, &back, TB_FP_RESUME, diffs, sizeof diffs, &n);
    CHECK(n == 0, "no differences after the round trip%s%s", n ? ":\n" : "", diffs);
    CHECK(strcmp(tb_fingerprint_get(&back, "device.name"), "Test CPU \"quoted\", with comma") == 0,
          "escaped string read back");
}

static void test_diff(const tb_fingerprint *fp)
{
    tb_fingerprint other = *fp;
    char diffs[1024];
    int n = -1;
    printf("diff lists what differs, by scope\n");
    tb_fingerprint_set(&other, "run.time_utc", "2030-01-01T00:00:00Z");
    tb_fingerprint_set(&other, "run.host", "elsewhere");
    tb_fingerprint_diff(fp, &other, TB_FP_RESUME, diffs, sizeof diffs, &n);
    CHECK(n == 0, "time and host are not compared");
    tb_fingerprint_set(&other, "software.onednn", "3.0.0");
    tb_fingerprint_set(&other, "software.nccl", "2.28.3");
    tb_fingerprint_set(&other, "device.name", "Another CPU");
    tb_fingerprint_diff(fp, &other, TB_FP_SOFTWARE, diffs, sizeof diffs, &n);
    CHECK(n == 2 && strstr(diffs, "software.onednn: 2.6.0 -> 3.0.0") &&
              strstr(diffs, "software.nccl: (absent) -> 2.28.3"),
          "software scope: %d differences\n%s", n, diffs);
    tb_fingerprint_diff(fp, &other, TB_FP_RESUME, diffs, sizeof diffs, &n);
    CHECK(n == 3 && strstr(diffs, "device.name"), "resume scope adds the device: %d", n);
}

static void test_git(const char *dir)
{
    char repo[512], cmd[2048];
    tb_fingerprint fp;
    printf("git revision and -dirty in a scratch repository\n");
    if (system("git --version >/dev/null 2>&1") != 0) {
        printf("  skipped: git not found\n");
        return;
    }
    snprintf(repo, sizeof repo, "%s/repo", dir);
    snprintf(cmd, sizeof cmd,
             "set -e; mkdir -p %s/results; cd %s; git init -q .; echo a > f.c; git add f.c; "
             "git -c user.email=t@t -c user.name=t commit -q -m one; "
             "echo r > results/x.csv; echo u > untracked.c",
             repo, repo);
    CHECK(system(cmd) == 0, "scratch repository made");
    setenv("BUILD_WORKSPACE_DIRECTORY", repo, 1);
    tb_fingerprint_collect(&fp, NULL, 0, NULL);
    const char *rev = tb_fingerprint_get(&fp, "git.revision");
    CHECK(strlen(rev) >= 7 && !strstr(rev, "dirty") && strcmp(rev, "unknown") != 0,
          "clean tree (untracked files and results/ do not count): %s", rev);
    CHECK(tb_fingerprint_get(&fp, "device.name") == NULL, "no device section without a device");
    snprintf(cmd, sizeof cmd, "echo b >> %s/f.c", repo);
    system(cmd);
    tb_fingerprint_collect(&fp, NULL, 0, NULL);
    rev = tb_fingerprint_get(&fp, "git.revision");
    CHECK(strstr(rev, "-dirty") != NULL, "modified tracked file: %s", rev);
    setenv("BUILD_WORKSPACE_DIRECTORY", dir, 1);
    tb_fingerprint_collect(&fp, NULL, 0, NULL);
    rev = tb_fingerprint_get(&fp, "git.revision");
    CHECK(strcmp(rev, "unknown") == 0, "not a git tree: %s", rev);
    unsetenv("BUILD_WORKSPACE_DIRECTORY");
}

int main(void)
{
    tb_test_verbose = 1; /* a checklist: every check printed */
    tb_fingerprint *fp = malloc(sizeof *fp);
    char dir[256];
    if (!fp || tb_test_tmpdir(dir, sizeof dir, "fp") != 0)
        return 1;
    printf("collect\n");
    int rc = collect(fp);
    CHECK(rc == TB_OK, "collected %d entries", fp->n);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    test_keys(fp);
    test_json_round_trip(fp, dir);
    test_diff(fp);
    test_git(dir);
    free(fp);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
