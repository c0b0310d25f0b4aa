/*
 * fingerprint.c - collects, writes, reads and compares the environment
 * fingerprint; see fingerprint.h for the keys.
 *
 * Sources: the backend's tb_device_info, /proc/cpuinfo, sysconf, uname,
 * /etc/os-release, git (run as a child process), the compiler's predefined
 * macros, the clock. Nothing here links a vendor library: the caller passes
 * the versions it knows.
 *
 * Test: bazel test //lib/report:fingerprint_test
 */
#define _GNU_SOURCE
#include "lib/report/fingerprint.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/atomic_file.h"
#include "lib/core/json.h"
#include "lib/report/results.h"

/* ---- build facts, fixed when this file was compiled ---- */
#if defined(__clang__)
#define TB_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define TB_COMPILER "gcc " __VERSION__
#else
#define TB_COMPILER "unknown compiler"
#endif

#ifdef __OPTIMIZE__
#define TB_OPTIMIZED "yes (__OPTIMIZE__)"
#else
#define TB_OPTIMIZED "no (-O0)"
#endif

#ifdef NDEBUG
#define TB_NDEBUG "yes (asserts off)"
#else
#define TB_NDEBUG "no (asserts on)"
#endif

#ifdef __FAST_MATH__
#define TB_FAST_MATH "yes"
#else
#define TB_FAST_MATH "no"
#endif

/* The ISA the compiler was allowed to assume everywhere; AVX-512 paths are
 * chosen at run time, so a plain build shows none of these. */
#ifdef __AVX512F__
#define TB_ISA_AVX512 " avx512f"
#else
#define TB_ISA_AVX512 ""
#endif
#ifdef __AVX2__
#define TB_ISA_AVX2 " avx2"
#else
#define TB_ISA_AVX2 ""
#endif
#ifdef __FMA__
#define TB_ISA_FMA " fma"
#else
#define TB_ISA_FMA ""
#endif
#define TB_ISA_MACROS "baseline" TB_ISA_AVX2 TB_ISA_FMA TB_ISA_AVX512

#define NA_MACHINE "n/a (not exposed by this machine)"

/* cpuinfo flag names checked, and what the fingerprint calls them. */
static const char *const cpu_flags_checked[][2] = {
    {"avx2", "avx2"},
    {"avx512f", "avx512f"},
    {"avx512bw", "avx512bw"},
    {"avx512_bf16", "avx512_bf16"},
    {"avx512_fp16", "avx512_fp16"},
    {"amx_tile", "amx"},
};
#define N_CPU_FLAGS (sizeof cpu_flags_checked / sizeof cpu_flags_checked[0])

/* ---- entries ---- */

static tb_fp_entry *find(const tb_fingerprint *fp, const char *key)
{
    for (int i = 0; i < fp->n; i++) {
        if (strcmp(fp->entries[i].key, key) == 0)
            return (tb_fp_entry *)&fp->entries[i];
    }
    return NULL;
}

static int set_entry(tb_fingerprint *fp, const char *key, const char *value, int is_number)
{
    tb_fp_entry *e = find(fp, key);
    const char *dot = strchr(key, '.');
    if (!key[0] || strlen(key) >= sizeof e->key || (dot && strchr(dot + 1, '.')))
        return TB_FAIL(TB_ERR_INVALID, "bad fingerprint key '%s'", key);
    if (!e) {
        if (fp->n == TB_FP_MAX_ENTRIES)
            return TB_FAIL(TB_ERR_INVALID, "fingerprint full (%d entries) at '%s'",
                           TB_FP_MAX_ENTRIES, key);
        e = &fp->entries[fp->n++];
        snprintf(e->key, sizeof e->key, "%s", key);
    }
    snprintf(e->value, sizeof e->value, "%s", value);
    e->is_number = is_number;
    return TB_OK;
}

int tb_fingerprint_set(tb_fingerprint *fp, const char *key, const char *value)
{
    return set_entry(fp, key, value ? value : "", 0);
}

int tb_fingerprint_set_number(tb_fingerprint *fp, const char *key, double value)
{
    char buf[64];
    tb_format_number(buf, sizeof buf, value);
    if (!buf[0])
        return set_entry(fp, key, "n/a", 0);
    return set_entry(fp, key, buf, 1);
}

const char *tb_fingerprint_get(const tb_fingerprint *fp, const char *key)
{
    const tb_fp_entry *e = find(fp, key);
    return e ? e->value : NULL;
}

/* ---- collecting ---- */

/* Trims trailing whitespace (and newline) in place. */
static char *rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Runs a shell command, first line of stdout into out; "" on failure. */
static void command_line_output(const char *cmd, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (!fgets(out, (int)cap, p))
        out[0] = '\0';
    /* Drain the rest so the child does not die of SIGPIPE mid-write. */
    char sink[256];
    while (fgets(sink, sizeof sink, p))
        ;
    if (pclose(p) != 0)
        out[0] = '\0';
    rtrim(out);
}

/* Appends s to out single-quoted for a POSIX shell. */
static void shell_quote(char *out, size_t cap, const char *s)
{
    size_t n = strlen(out);
    int plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = isalnum((unsigned char)*p) || strchr("-_=./:,+@%", *p);
    if (plain) {
        snprintf(out + n, cap - n, "%s", s);
        return;
    }
    n += (size_t)snprintf(out + n, cap - n, "'");
    for (; *s && n + 5 < cap; s++)
        n += (size_t)(*s == '\'' ? snprintf(out + n, cap - n, "'\\''")
                                 : snprintf(out + n, cap - n, "%c", *s));
    snprintf(out + n, cap - n, "'");
}

static void git_revision(const char *dir, char *out, size_t cap)
{
    char cmd[PATH_MAX * 2 + 256] = "git -C ", rev[64], dirty[256];
    size_t base;
    shell_quote(cmd, sizeof cmd, dir);
    base = strlen(cmd);
    snprintf(cmd + base, sizeof cmd - base, " rev-parse --short HEAD 2>/dev/null");
    command_line_output(cmd, rev, sizeof rev);
    if (!rev[0]) {
        snprintf(out, cap, "unknown");
        return;
    }
    /* Dirty means tracked source changed; results/ and plots/ are what runs
     * write, so they do not count. */
    snprintf(cmd + base, sizeof cmd - base,
             " status --porcelain --untracked-files=no -- . ':(exclude)results' "
             "':(exclude)plots' 2>/dev/null");
    command_line_output(cmd, dirty, sizeof dirty);
    snprintf(out, cap, "%s%s", rev, dirty[0] ? "-dirty" : "");
}

/* Value of "key : value" lines in /proc/cpuinfo (first processor). */
static int cpuinfo_value(const char *key, char *out, size_t cap)
{
    char line[4096];
    size_t klen = strlen(key);
    int found = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, key, klen) != 0 || !colon || (line[klen] != ' ' && line[klen] != '\t'))
            continue;
        snprintf(out, cap, "%s", colon + 1 + (colon[1] == ' '));
        rtrim(out);
        found = 1;
    }
    fclose(f);
    return found;
}

/* 1 if word is one of the space-separated tokens in list. */
static int has_token(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(list, word); p; p = strstr(p + 1, word)) {
        int starts = p == list || p[-1] == ' ';
        int ends = p[n] == '\0' || p[n] == ' ';
        if (starts && ends)
            return 1;
    }
    return 0;
}

static int collect_cpu(tb_fingerprint *fp)
{
    char model[256], flags[4096], present[256] = "", checked[256] = "";
    char freq[128];
    if (!cpuinfo_value("model name", model, sizeof model))
        snprintf(model, sizeof model, "unknown (no model name in /proc/cpuinfo)");
    if (!cpuinfo_value("flags", flags, sizeof flags))
        flags[0] = '\0';
    for (size_t i = 0; i < N_CPU_FLAGS; i++) {
        size_t n = strlen(checked);
        snprintf(checked + n, sizeof checked - n, "%s%s", n ? " " : "", cpu_flags_checked[i][1]);
        if (!has_token(flags, cpu_flags_checked[i][0]))
            continue;
        n = strlen(present);
        snprintf(present + n, sizeof present - n, "%s%s", n ? " " : "", cpu_flags_checked[i][1]);
    }
    TB_TRY(tb_fingerprint_set(fp, "cpu.model", model));
    TB_TRY(tb_fingerprint_set(fp, "cpu.flags", present[0] ? present : "none of those checked"));
    TB_TRY(tb_fingerprint_set(fp, "cpu.flags_checked", checked));
    TB_TRY(tb_fingerprint_set_number(fp, "cpu.logical_cpus", (double)sysconf(_SC_NPROCESSORS_ONLN)));
    /* Only what cpufreq reports; /proc/cpuinfo's "cpu MHz" on a VM is the
     * hypervisor's nominal figure, not a measured clock. */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f && fscanf(f, "%ld", &khz) == 1 && khz > 0)
        snprintf(freq, sizeof freq, "max %ld MHz (cpufreq)", khz / 1000);
    else
        snprintf(freq, sizeof freq, NA_MACHINE);
    if (f)
        fclose(f);
    return tb_fingerprint_set(fp, "cpu.frequency", freq);
}

static int collect_os(tb_fingerprint *fp)
{
    struct utsname u;
    char kernel[4 * sizeof u.release], line[512], pretty[256] = "unknown (no /etc/os-release)";
    if (uname(&u) == 0)
        snprintf(kernel, sizeof kernel, "%s %s %s %s", u.sysname, u.release, u.version,
                 u.machine);
    else
        snprintf(kernel, sizeof kernel, "unknown");
    FILE *f = fopen("/etc/os-release", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0)
            continue;
        char *v = rtrim(line + 12);
        size_t n = strlen(v);
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
            v[n - 1] = '\0';
            v++;
        }
        snprintf(pretty, sizeof pretty, "%s", v);
    }
    if (f)
        fclose(f);
    TB_TRY(tb_fingerprint_set(fp, "os.kernel", kernel));
    return tb_fingerprint_set(fp, "os.pretty_name", pretty);
}

static int set_clock(tb_fingerprint *fp, const char *key, int khz)
{
    if (khz > 0)
        return tb_fingerprint_set_number(fp, key, khz);
    return tb_fingerprint_set(fp, key, "n/a (not exposed by this device)");
}

static int collect_device(tb_fingerprint *fp, const tb_device_info *d)
{
    char cc[32];
    TB_TRY(tb_fingerprint_set(fp, "device.backend", d->backend));
    TB_TRY(tb_fingerprint_set_number(fp, "device.index", d->index));
    TB_TRY(tb_fingerprint_set(fp, "device.name", d->name));
    TB_TRY(tb_fingerprint_set_number(fp, "device.total_mem_bytes", (double)d->total_mem));
    TB_TRY(tb_fingerprint_set_number(fp, "device.multiprocessors", d->multiprocessors));
    TB_TRY(tb_fingerprint_set_number(fp, "device.threads", d->threads));
    TB_TRY(set_clock(fp, "device.clock_khz", d->clock_khz));
    TB_TRY(set_clock(fp, "device.mem_clock_khz", d->mem_clock_khz));
    if (d->mem_bus_bits > 0)
        TB_TRY(tb_fingerprint_set_number(fp, "device.mem_bus_bits", d->mem_bus_bits));
    else
        TB_TRY(tb_fingerprint_set(fp, "device.mem_bus_bits", "n/a (not exposed by this device)"));
    if (d->cc_major > 0)
        snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    else
        snprintf(cc, sizeof cc, "n/a (not a CUDA device)");
    TB_TRY(tb_fingerprint_set(fp, "device.compute_capability", cc));
    TB_TRY(tb_fingerprint_set(fp, "device.cpu_flags", d->cpu_flags));
    TB_TRY(tb_fingerprint_set(fp, "device.runtime", d->runtime));
    TB_TRY(tb_fingerprint_set(fp, "device.driver", d->driver));
    return tb_fingerprint_set(fp, "device.libs", d->libs);
}

static int collect_run(tb_fingerprint *fp, int argc, char *const argv[], const char *dir)
{
    char when[32], host[256] = "unknown", cmdline[1024] = "";
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    for (int i = 0; i < argc && argv[i]; i++) {
        size_t n = strlen(cmdline);
        if (i)
            snprintf(cmdline + n, sizeof cmdline - n, " ");
        shell_quote(cmdline, sizeof cmdline, argv[i]);
    }
    TB_TRY(tb_fingerprint_set(fp, "run.time_utc", when));
    TB_TRY(tb_fingerprint_set(fp, "run.host", host));
    TB_TRY(tb_fingerprint_set(fp, "run.command_line", cmdline));
    return tb_fingerprint_set(fp, "run.source_dir", dir);
}

int tb_fingerprint_collect(tb_fingerprint *fp, const tb_device_info *dev, int argc,
                           char *const argv[])
{
    char dir[PATH_MAX], rev[128];
    const char *ws = getenv("BUILD_WORKSPACE_DIRECTORY");
    fp->n = 0;
    if (ws && ws[0])
        snprintf(dir, sizeof dir, "%s", ws);
    else if (!getcwd(dir, sizeof dir))
        snprintf(dir, sizeof dir, ".");
    TB_TRY(tb_fingerprint_set(fp, "schema", TB_FINGERPRINT_SCHEMA));
    TB_TRY(collect_run(fp, argc, argv, dir));
    git_revision(dir, rev, sizeof rev);
    TB_TRY(tb_fingerprint_set(fp, "git.revision", rev));
    if (dev)
        TB_TRY(collect_device(fp, dev));
    TB_TRY(collect_cpu(fp));
    TB_TRY(collect_os(fp));
    TB_TRY(tb_fingerprint_set(fp, "build.compiler", TB_COMPILER));
    TB_TRY(tb_fingerprint_set(fp, "build.optimized", TB_OPTIMIZED));
    TB_TRY(tb_fingerprint_set(fp, "build.ndebug", TB_NDEBUG));
    TB_TRY(tb_fingerprint_set(fp, "build.isa_macros", TB_ISA_MACROS));
    TB_TRY(tb_fingerprint_set(fp, "build.fast_math", TB_FAST_MATH));
    return TB_OK;
}

/* ---- JSON out ---- */

/* Length of key's section prefix ("device" of "device.name"); 0 if none. */
static size_t section_len(const char *key)
{
    const char *dot = strchr(key, '.');
    return dot ? (size_t)(dot - key) : 0;
}

static void put_value(FILE *f, const tb_fp_entry *e)
{
    if (e->is_number)
        fputs(e->value, f);
    else
        tb_json_write_string(f, e->value);
}

/* Writes the entries of one section (first seen at index first). */
static void write_section(const tb_fingerprint *fp, int first, FILE *f)
{
    size_t len = section_len(fp->entries[first].key);
    fprintf(f, "  \"%.*s\": {", (int)len, fp->entries[first].key);
    int written = 0;
    for (int i = first; i < fp->n; i++) {
        const tb_fp_entry *e = &fp->entries[i];
        if (section_len(e->key) != len || strncmp(e->key, fp->entries[first].key, len) != 0)
            continue;
        fprintf(f, "%s\n    ", written++ ? "," : "");
        tb_json_write_string(f, e->key + len + 1);
        fputs(": ", f);
        put_value(f, e);
    }
    fputs("\n  }", f);
}

/* 1 if entry i is the first of its section. */
static int first_of_section(const tb_fingerprint *fp, int i)
{
    const char *key = fp->entries[i].key;
    size_t len = section_len(key);
    for (int j = 0; j < i; j++) {
        const char *other = fp->entries[j].key;
        if (section_len(other) == len && strncmp(other, key, len) == 0)
            return 0;
    }
    return 1;
}

int tb_fingerprint_write_json(const tb_fingerprint *fp, FILE *f)
{
    int written = 0;
    fputs("{", f);
    for (int i = 0; i < fp->n; i++) {
        const tb_fp_entry *e = &fp->entries[i];
        int top = section_len(e->key) == 0;
        if (!top && !first_of_section(fp, i))
            continue;
        fputs(written++ ? ",\n" : "\n", f);
        if (top) {
            fputs("  ", f);
            tb_json_write_string(f, e->key);
            fputs(": ", f);
            put_value(f, e);
        } else {
            write_section(fp, i, f);
        }
    }
    fputs("\n}\n", f);
    if (ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write the fingerprint");
    return TB_OK;
}

static int write_json(const void *fp, FILE *f) { return tb_fingerprint_write_json(fp, f); }

int tb_fingerprint_save(const tb_fingerprint *fp, const char *path)
{
    return tb_atomic_write_with(path, write_json, fp);
}

/* ---- JSON in: a two-level object of scalars (lib/json parses) ---- */

/* Stores one scalar under key; numbers are re-formatted as the writer
 * formats them, so a loaded fingerprint compares equal to the saved one. */
static int load_scalar(tb_fingerprint *fp, const char *key, const tb_json *v, const char *path)
{
    char num[64];
    switch (v->type) {
    case TB_JSON_STRING:
        return tb_fingerprint_set(fp, key, v->string);
    case TB_JSON_NUMBER:
        tb_format_number(num, sizeof num, v->number);
        return set_entry(fp, key, num, 1);
    case TB_JSON_BOOL:
        return set_entry(fp, key, v->boolean ? "true" : "false", 1);
    case TB_JSON_NULL:
        return set_entry(fp, key, "null", 1);
    default:
        return TB_FAIL(TB_ERR_DATA, "%s: \"%s\" is an %s; a fingerprint holds only "
                       "sections of scalars", path, key, tb_json_type_name(v->type));
    }
}

static int load_tree(tb_fingerprint *fp, const tb_json *root, const char *path)
{
    char key[128];
    if (root->type != TB_JSON_OBJECT)
        return TB_FAIL(TB_ERR_DATA, "%s: not a JSON object", path);
    for (size_t i = 0; i < root->len; i++) {
        const tb_json *v = &root->items[i];
        if (v->type != TB_JSON_OBJECT) {
            TB_TRY(load_scalar(fp, root->keys[i], v, path));
            continue;
        }
        for (size_t k = 0; k < v->len; k++) {
            snprintf(key, sizeof key, "%s.%s", root->keys[i], v->keys[k]);
            TB_TRY(load_scalar(fp, key, &v->items[k], path));
        }
    }
    return TB_OK;
}

int tb_fingerprint_load(const char *path, tb_fingerprint *fp)
{
    tb_json *root = NULL;
    fp->n = 0;
    TB_TRY(tb_json_parse_file(path, 0, &root));
    int rc = load_tree(fp, root, path);
    tb_json_free(root);
    return rc;
}

/* ---- comparing ---- */

/* 1 if key belongs to scope. run.* and schema never count. */
static int in_scope(const char *key, tb_fp_scope scope)
{
    static const char *const software[] = {
        "git.", "build.", "software.", "os.", "device.runtime", "device.driver",
        "device.libs", "device.backend",
    };
    static const char *const hardware[] = {"device.", "cpu.model", "cpu.flags", "cpu.logical_cpus"};
    for (size_t i = 0; i < sizeof software / sizeof software[0]; i++) {
        if (strncmp(key, software[i], strlen(software[i])) == 0)
            return 1;
    }
    if (scope != TB_FP_RESUME)
        return 0;
    for (size_t i = 0; i < sizeof hardware / sizeof hardware[0]; i++) {
        if (strncmp(key, hardware[i], strlen(hardware[i])) == 0)
            return 1;
    }
    return 0;
}

static void note_diff(char *out, size_t cap, const char *key, const char *a, const char *b)
{
    if (!out)
        return;
    size_t n = strlen(out);
    if (n + 1 < cap)
        snprintf(out + n, cap - n, "%s: %s -> %s\n", key, a ? a : "(absent)", b ? b : "(absent)");
}

int tb_fingerprint_diff(const tb_fingerprint *a, const tb_fingerprint *b, tb_fp_scope scope,
                        char *out, size_t cap, int *ndiff)
{
    int count = 0;
    if (out && cap)
        out[0] = '\0';
    for (int i = 0; i < a->n; i++) {
        const tb_fp_entry *e = &a->entries[i];
        const char *other = tb_fingerprint_get(b, e->key);
        if (!in_scope(e->key, scope) || (other && strcmp(other, e->value) == 0))
            continue;
        note_diff(out, cap, e->key, e->value, other);
        count++;
    }
    for (int i = 0; i < b->n; i++) {
        const tb_fp_entry *e = &b->entries[i];
        if (!in_scope(e->key, scope) || tb_fingerprint_get(a, e->key))
            continue;
        note_diff(out, cap, e->key, NULL, e->value);
        count++;
    }
    *ndiff = count;
    return TB_OK;
}
