/*
 * telemetry.c - CPU load/frequency and NVML sampling during a run; see
 * telemetry.h for what is recorded and why.
 *
 * Test: bazel test //lib/report:telemetry_test
 */
#include "lib/report/telemetry.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/backend/nvml_dl.h"
#include "lib/core/atomic_file.h"
#include "lib/core/clock.h"
#include "lib/core/grow.h"
#include "lib/core/json.h"

#define FREQ_PATH "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq"

typedef struct tm_sample {
    double t;                 /* seconds since start */
    int seg;                  /* index into segs */
    double cpu_util;          /* fraction of all CPUs busy since the last sample; NaN first */
    double cpu_mhz;           /* NaN when not exposed */
    tb_nvml_sample gpu;       /* available == 0 without a GPU */
    int throttled;
} tm_sample;

typedef struct tm_segment {
    char label[64];
    double t0, t1;            /* seconds since start */
    double load_before, load_after; /* 1-minute load average; NaN if unreadable */
} tm_segment;

struct tb_telemetry {
    pthread_t thread;
    int running;
    atomic_int stop;          /* set by tb_telemetry_stop while the sampler reads it */
    pthread_mutex_t mu;       /* guards samples and segments */
    char gpu_pci[32];         /* "" without a GPU */
    int period_ms;
    double t_start;
    uint64_t prev_busy, prev_total;
    int have_prev;
    tm_sample *samples;
    size_t n, cap;
    tm_segment *segs;
    int nseg;
    size_t segcap;
    char freq_why[160];       /* "" when the frequency is exposed */
    char gpu_why[160];        /* "" when NVML answered or no GPU was asked for */
    tb_json *earlier;         /* an earlier session's file (tb_telemetry_keep_earlier), or NULL */
};

int tb_telemetry_parse_stat(const char *line, uint64_t *busy, uint64_t *total)
{
    uint64_t v[10] = {0};
    if (strncmp(line, "cpu ", 4) != 0)
        return TB_FAIL(TB_ERR_DATA, "/proc/stat: first line is not the 'cpu' total");
    int got = sscanf(line + 4, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                     " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                     &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    if (got < 4)
        return TB_FAIL(TB_ERR_DATA, "/proc/stat: 'cpu' line has %d fields, expected at least 4",
                       got < 0 ? 0 : got);
    /* guest and guest_nice (8, 9) are already counted in user and nice */
    uint64_t t = 0;
    for (int i = 0; i < got && i < 8; i++)
        t += v[i];
    *total = t;
    *busy = t - v[3] - (got > 4 ? v[4] : 0);
    return TB_OK;
}

int tb_telemetry_parse_loadavg(const char *text, double *load1)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || v < 0)
        return TB_FAIL(TB_ERR_DATA, "/proc/loadavg: cannot read the 1-minute load");
    *load1 = v;
    return TB_OK;
}

int tb_telemetry_is_throttled(int64_t reasons)
{
    if (reasons < 0)
        return 0;
    const int64_t mask = TB_NVML_THROTTLE_SW_POWER_CAP | TB_NVML_THROTTLE_HW_SLOWDOWN |
                         TB_NVML_THROTTLE_SW_THERMAL | TB_NVML_THROTTLE_HW_THERMAL |
                         TB_NVML_THROTTLE_HW_POWER_BRAKE;
    return (reasons & mask) != 0;
}

static double read_loadavg(void)
{
    char buf[128];
    double v;
    if (tb_read_head("/proc/loadavg", buf, sizeof buf) <= 0)
        return NAN;
    if (tb_telemetry_parse_loadavg(buf, &v) != TB_OK) {
        tb_error_clear();
        return NAN;
    }
    return v;
}

static double read_cpu_mhz(void)
{
    char buf[64];
    if (tb_read_head(FREQ_PATH, buf, sizeof buf) <= 0)
        return NAN;
    return strtod(buf, NULL) / 1000.0; /* kHz */
}

/* Utilization since the previous call; NaN on the first. */
static double read_cpu_util(tb_telemetry *t)
{
    char buf[512];
    uint64_t busy, total;
    if (tb_read_head("/proc/stat", buf, sizeof buf) <= 0)
        return NAN;
    if (tb_telemetry_parse_stat(buf, &busy, &total) != TB_OK) {
        tb_error_clear();
        return NAN;
    }
    double u = NAN;
    if (t->have_prev && total > t->prev_total)
        u = (double)(busy - t->prev_busy) / (double)(total - t->prev_total);
    t->prev_busy = busy;
    t->prev_total = total;
    t->have_prev = 1;
    return u;
}

static void take_sample(tb_telemetry *t)
{
    tm_sample s;
    memset(&s, 0, sizeof s);
    s.cpu_util = read_cpu_util(t);
    s.cpu_mhz = read_cpu_mhz();
    s.gpu.available = 0;
    if (t->gpu_pci[0])
        tb_nvml_read_pci(t->gpu_pci, &s.gpu);
    s.throttled = s.gpu.available && tb_telemetry_is_throttled(s.gpu.throttle);
    pthread_mutex_lock(&t->mu);
    s.t = tb_clock_s() - t->t_start;
    s.seg = t->nseg - 1;
    tm_sample *p = tb_grow(t->samples, &t->cap, t->n, sizeof *p, 1024);
    if (!p) {
        /* Out of memory for telemetry: drop the sample, keep the run going. */
        pthread_mutex_unlock(&t->mu);
        return;
    }
    t->samples = p;
    t->samples[t->n++] = s;
    pthread_mutex_unlock(&t->mu);
}

static void *sampler(void *arg)
{
    tb_telemetry *t = arg;
    while (!t->stop) {
        take_sample(t);
        /* Sleep in short steps so stop is prompt. */
        for (int slept = 0; slept < t->period_ms && !t->stop; slept += 10) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static int open_segment(tb_telemetry *t, const char *label)
{
    tm_segment *p = tb_grow(t->segs, &t->segcap, (size_t)t->nseg, sizeof *p, 16);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "telemetry: out of memory for segments");
    t->segs = p;
    tm_segment *s = &t->segs[t->nseg++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    s->t0 = tb_clock_s() - t->t_start;
    s->t1 = NAN;
    s->load_before = read_loadavg();
    s->load_after = NAN;
    return TB_OK;
}

static void close_segment(tb_telemetry *t)
{
    if (t->nseg == 0)
        return;
    tm_segment *s = &t->segs[t->nseg - 1];
    if (!isnan(s->t1))
        return;
    s->t1 = tb_clock_s() - t->t_start;
    s->load_after = read_loadavg();
}

int tb_telemetry_start(const char *gpu_pci, int period_ms, tb_telemetry **out)
{
    *out = NULL;
    if (period_ms < 10)
        return TB_FAIL(TB_ERR_INVALID, "telemetry period %d ms: at least 10 ms", period_ms);
    tb_telemetry *t = calloc(1, sizeof *t);
    if (!t)
        return TB_FAIL(TB_ERR_NOMEM, "telemetry: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    if (gpu_pci && strlen(gpu_pci) >= sizeof t->gpu_pci) {
        free(t);
        return TB_FAIL(TB_ERR_INVALID, "telemetry: PCI bus id '%.40s' is longer than %zu "
                       "characters", gpu_pci, sizeof t->gpu_pci - 1);
    }
    snprintf(t->gpu_pci, sizeof t->gpu_pci, "%s", gpu_pci ? gpu_pci : "");
    t->period_ms = period_ms;
    t->t_start = tb_clock_s();
    if (isnan(read_cpu_mhz()))
        snprintf(t->freq_why, sizeof t->freq_why,
                 "n/a (this machine exposes no CPU frequency: no %s)", FREQ_PATH);
    const char *why = NULL;
    if (t->gpu_pci[0] && !tb_nvml_available(&why))
        snprintf(t->gpu_why, sizeof t->gpu_why, "%s", why ? why : "NVML not available");
    int rc = open_segment(t, "start");
    if (rc != TB_OK)
        goto out_free;
    int err = pthread_create(&t->thread, NULL, sampler, t);
    if (err != 0) {
        rc = TB_FAIL(TB_ERR_INTERNAL, "telemetry: cannot start the sampler thread: %s",
                     strerror(err));
        goto out_free;
    }
    t->running = 1;
    *out = t;
    return TB_OK;
out_free:
    free(t->segs);
    pthread_mutex_destroy(&t->mu);
    free(t);
    return rc;
}

int tb_telemetry_segment(tb_telemetry *t, const char *label)
{
    pthread_mutex_lock(&t->mu);
    close_segment(t);
    int rc = open_segment(t, label);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int tb_telemetry_stop(tb_telemetry *t)
{
    if (!t || !t->running)
        return TB_OK;
    t->stop = 1;
    pthread_join(t->thread, NULL);
    t->running = 0;
    close_segment(t);
    return TB_OK;
}

void tb_telemetry_free(tb_telemetry *t)
{
    if (!t)
        return;
    tb_telemetry_stop(t);
    free(t->samples);
    free(t->segs);
    tb_json_free(t->earlier);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* ---- JSON ---- */

typedef struct seg_summary {
    size_t samples, gpu_samples, throttled;
    double util_sum, util_max;
    size_t util_n;
    double mhz_min, mhz_max, temp_max, power_max_w, sm_min, sm_max;
} seg_summary;

static void upd_min(double *m, double v) { if (isnan(*m) || v < *m) *m = v; }
static void upd_max(double *m, double v) { if (isnan(*m) || v > *m) *m = v; }

static void summarize(const tb_telemetry *t, int seg, seg_summary *s)
{
    memset(s, 0, sizeof *s);
    s->util_max = s->mhz_min = s->mhz_max = s->temp_max = s->power_max_w = NAN;
    s->sm_min = s->sm_max = NAN;
    for (size_t i = 0; i < t->n; i++) {
        const tm_sample *x = &t->samples[i];
        if (x->seg != seg)
            continue;
        s->samples++;
        if (!isnan(x->cpu_util)) {
            s->util_sum += x->cpu_util;
            s->util_n++;
            upd_max(&s->util_max, x->cpu_util);
        }
        if (!isnan(x->cpu_mhz)) {
            upd_min(&s->mhz_min, x->cpu_mhz);
            upd_max(&s->mhz_max, x->cpu_mhz);
        }
        if (!x->gpu.available)
            continue;
        s->gpu_samples++;
        s->throttled += (size_t)x->throttled;
        if (x->gpu.temp_c >= 0)
            upd_max(&s->temp_max, x->gpu.temp_c);
        if (x->gpu.power_mw >= 0)
            upd_max(&s->power_max_w, (double)x->gpu.power_mw / 1000.0);
        if (x->gpu.sm_clock_mhz >= 0) {
            upd_min(&s->sm_min, x->gpu.sm_clock_mhz);
            upd_max(&s->sm_max, x->gpu.sm_clock_mhz);
        }
    }
}

static void put_num(FILE *f, const char *key, double v, int last)
{
    fprintf(f, "\"%s\": ", key);
    tb_json_write_number(f, v);
    fputs(last ? "" : ", ", f);
}

static void write_segment(const tb_telemetry *t, int i, FILE *f)
{
    const tm_segment *g = &t->segs[i];
    seg_summary s;
    summarize(t, i, &s);
    fputs("    {\"label\": ", f);
    tb_json_write_string(f, g->label);
    fputs(", ", f);
    put_num(f, "t_start_s", g->t0, 0);
    put_num(f, "seconds", g->t1 - g->t0, 0);
    put_num(f, "loadavg_before", g->load_before, 0);
    put_num(f, "loadavg_after", g->load_after, 0);
    put_num(f, "samples", (double)s.samples, 0);
    put_num(f, "cpu_util_mean", s.util_n ? s.util_sum / (double)s.util_n : NAN, 0);
    put_num(f, "cpu_util_max", s.util_max, 0);
    put_num(f, "cpu_mhz_min", s.mhz_min, 0);
    put_num(f, "cpu_mhz_max", s.mhz_max, 0);
    put_num(f, "gpu_samples", (double)s.gpu_samples, 0);
    put_num(f, "gpu_sm_clock_mhz_min", s.sm_min, 0);
    put_num(f, "gpu_sm_clock_mhz_max", s.sm_max, 0);
    put_num(f, "gpu_temp_c_max", s.temp_max, 0);
    put_num(f, "gpu_power_w_max", s.power_max_w, 0);
    put_num(f, "throttled_samples", (double)s.throttled, 1);
    fputs("}", f);
}

static void write_sample(const tb_telemetry *t, const tm_sample *x, FILE *f)
{
    fputs("    {", f);
    put_num(f, "t", x->t, 0);
    fputs("\"segment\": ", f);
    tb_json_write_string(f, x->seg >= 0 ? t->segs[x->seg].label : "");
    fputs(", ", f);
    put_num(f, "cpu_util", x->cpu_util, 0);
    put_num(f, "cpu_mhz", x->cpu_mhz, x->gpu.available ? 0 : 1);
    if (x->gpu.available) {
        char why[128];
        put_num(f, "gpu_sm_clock_mhz", x->gpu.sm_clock_mhz, 0);
        put_num(f, "gpu_mem_clock_mhz", x->gpu.mem_clock_mhz, 0);
        put_num(f, "gpu_temp_c", x->gpu.temp_c, 0);
        put_num(f, "gpu_power_w", x->gpu.power_mw < 0 ? NAN : x->gpu.power_mw / 1000.0, 0);
        put_num(f, "gpu_power_limit_w",
                x->gpu.power_limit_mw < 0 ? NAN : x->gpu.power_limit_mw / 1000.0, 0);
        tb_nvml_throttle_string(x->gpu.throttle, why, sizeof why);
        fputs("\"gpu_throttle_reasons\": ", f);
        tb_json_write_string(f, why);
        fprintf(f, ", \"throttled\": %s", x->throttled ? "true" : "false");
    }
    fputs("}", f);
}

/* The earlier sessions' items of list key, one a line, each followed by
 * a comma when more follow (more: this session has items too). */
static int write_earlier(const tb_telemetry *t, const char *key, FILE *f, int more)
{
    const tb_json *list = t->earlier ? tb_json_get(t->earlier, key) : NULL;
    for (size_t i = 0; list && list->type == TB_JSON_ARRAY && i < list->len; i++) {
        fputs("    ", f);
        TB_TRY(tb_json_write_value(f, tb_json_at(list, i)));
        fputs(i + 1 < list->len || more ? ",\n" : "\n", f);
    }
    return TB_OK;
}

int tb_telemetry_keep_earlier(tb_telemetry *t, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return TB_OK;
    tb_json *j = NULL;
    TB_TRY(tb_json_parse_file(path, 0, &j));
    const tb_json *seg = tb_json_get(j, "segments"), *smp = tb_json_get(j, "samples");
    if (strcmp(tb_json_get_string(j, "schema", ""), TB_TELEMETRY_SCHEMA) != 0 || !seg ||
        seg->type != TB_JSON_ARRAY || !smp || smp->type != TB_JSON_ARRAY) {
        tb_json_free(j);
        return TB_FAIL(TB_ERR_DATA, "%s: not a %s file with segments and samples", path,
                       TB_TELEMETRY_SCHEMA);
    }
    tb_json_free(t->earlier);
    t->earlier = j;
    return TB_OK;
}

int tb_telemetry_write_json(const tb_telemetry *t, FILE *f)
{
    fprintf(f, "{\n  \"schema\": \"%s\",\n", TB_TELEMETRY_SCHEMA);
    fprintf(f, "  \"period_ms\": %d,\n  \"cpu_frequency\": ", t->period_ms);
    tb_json_write_string(f, t->freq_why[0] ? t->freq_why : "sampled (cpu_mhz)");
    fputs(",\n  \"gpu\": ", f);
    tb_json_write_string(f, !t->gpu_pci[0] ? "n/a (no GPU in this run)"
                            : t->gpu_why[0] ? t->gpu_why
                                            : "sampled through NVML");
    if (t->gpu_pci[0]) {
        fputs(",\n  \"gpu_pci_bus_id\": ", f);
        tb_json_write_string(f, t->gpu_pci);
    }
    fputs(",\n  \"throttled_means\": \"an NVML power or thermal reason was set "
          "(sw_power_cap, hw_slowdown, sw_thermal, hw_thermal, hw_power_brake)\",\n", f);
    fputs("  \"segments\": [\n", f);
    TB_TRY(write_earlier(t, "segments", f, t->nseg > 0));
    for (int i = 0; i < t->nseg; i++) {
        write_segment(t, i, f);
        fputs(i + 1 < t->nseg ? ",\n" : "\n", f);
    }
    fputs("  ],\n  \"samples\": [\n", f);
    TB_TRY(write_earlier(t, "samples", f, t->n > 0));
    for (size_t i = 0; i < t->n; i++) {
        write_sample(t, &t->samples[i], f);
        fputs(i + 1 < t->n ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    if (ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write the telemetry JSON");
    return TB_OK;
}

static int write_json(const void *t, FILE *f) { return tb_telemetry_write_json(t, f); }

int tb_telemetry_save(const tb_telemetry *t, const char *path)
{
    return tb_atomic_write_with(path, write_json, t);
}
