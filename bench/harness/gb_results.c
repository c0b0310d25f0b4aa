/*
 * gb_results.c - Google Benchmark JSON to per-run arrays; see gb_results.h.
 * Test: bazel test //bench/harness:gb_results_test
 */
#include "bench/harness/gb_results.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/grow.h"
#include "lib/core/json.h"

/* Keys GB writes itself; any other numeric key of a row is a user counter. */
static const char *const gb_own_keys[] = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type",
    "repetitions", "repetition_index", "threads", "iterations", "real_time",
    "cpu_time", "time_unit", "label", "error_occurred", "error_message",
    "aggregate_name", "aggregate_unit", "big_o", "rms", "cpu_coefficient",
    "real_coefficient", "allocs_per_iter", "max_bytes_used",
};

static int gb_is_own_key(const char *key)
{
    for (size_t i = 0; i < sizeof gb_own_keys / sizeof gb_own_keys[0]; i++)
        if (strcmp(key, gb_own_keys[i]) == 0)
            return 1;
    return 0;
}

double gb_time_unit_seconds(const char *unit)
{
    if (!unit)
        return 0;
    if (strcmp(unit, "ns") == 0)
        return 1e-9;
    if (strcmp(unit, "us") == 0)
        return 1e-6;
    if (strcmp(unit, "ms") == 0)
        return 1e-3;
    if (strcmp(unit, "s") == 0)
        return 1;
    return 0;
}

static int gb_strdup(const char *s, char **out)
{
    size_t n = strlen(s ? s : "") + 1;
    *out = malloc(n);
    if (!*out)
        return TB_FAIL(TB_ERR_NOMEM, "gb_results: string copy");
    memcpy(*out, s ? s : "", n);
    return TB_OK;
}

static void gb_run_free(gb_run *run)
{
    free(run->name);
    free(run->seconds);
    free(run->cpu_seconds);
    free(run->iterations);
    for (size_t i = 0; i < run->n_counters; i++) {
        free(run->counters[i].name);
        free(run->counters[i].values);
    }
    free(run->counters);
    free(run->label);
    free(run->error_message);
}

void gb_results_free(gb_results *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_runs; i++)
        gb_run_free(&r->runs[i]);
    free(r->runs);
    free(r->context.date);
    free(r->context.host_name);
    free(r->context.executable);
    free(r->context.library_build_type);
    free(r);
}

const gb_run *gb_results_find(const gb_results *r, const char *run_name)
{
    for (size_t i = 0; i < r->n_runs; i++)
        if (strcmp(r->runs[i].name, run_name) == 0)
            return &r->runs[i];
    return NULL;
}

const gb_counter *gb_run_counter(const gb_run *run, const char *name)
{
    for (size_t i = 0; i < run->n_counters; i++)
        if (strcmp(run->counters[i].name, name) == 0)
            return &run->counters[i];
    return NULL;
}

static int gb_read_context(const tb_json *ctx, gb_context *c)
{
    c->num_cpus = (int)tb_json_get_number(ctx, "num_cpus", 0);
    c->mhz_per_cpu = tb_json_get_number(ctx, "mhz_per_cpu", 0);
    c->cpu_scaling_enabled = tb_json_get_bool(ctx, "cpu_scaling_enabled", -1);
    TB_TRY(gb_strdup(tb_json_get_string(ctx, "date", ""), &c->date));
    TB_TRY(gb_strdup(tb_json_get_string(ctx, "host_name", ""), &c->host_name));
    TB_TRY(gb_strdup(tb_json_get_string(ctx, "executable", ""), &c->executable));
    TB_TRY(gb_strdup(tb_json_get_string(ctx, "library_build_type", ""), &c->library_build_type));
    return TB_OK;
}

static int gb_is_iteration_row(const tb_json *row)
{
    /* Files from GB before run_type existed have no aggregates to skip. */
    const char *type = tb_json_get_string(row, "run_type", "iteration");
    return strcmp(type, "iteration") == 0;
}

/* Finds or appends the run called name; *idx gets its index. */
static int gb_run_slot(gb_results *r, size_t *cap, const char *name, size_t *idx)
{
    for (size_t i = 0; i < r->n_runs; i++) {
        if (strcmp(r->runs[i].name, name) == 0) {
            *idx = i;
            return TB_OK;
        }
    }
    gb_run *runs = tb_grow(r->runs, cap, r->n_runs, sizeof *runs, 16);
    if (!runs)
        return TB_FAIL(TB_ERR_NOMEM, "gb_results: no room for run %zu", r->n_runs + 1);
    r->runs = runs;
    gb_run *run = &r->runs[r->n_runs];
    memset(run, 0, sizeof *run);
    r->n_runs++;
    TB_TRY(gb_strdup(name, &run->name));
    size_t len = strlen(name), tag = strlen("/manual_time");
    run->manual_time = len >= tag && strcmp(name + len - tag, "/manual_time") == 0;
    *idx = r->n_runs - 1;
    return TB_OK;
}

/* Pass 1: one gb_run per run_name with its repetition count, arrays sized. */
static int gb_count_runs(const tb_json *rows, gb_results *r)
{
    size_t cap = 0;
    for (size_t i = 0; i < rows->len; i++) {
        const tb_json *row = &rows->items[i];
        if (row->type != TB_JSON_OBJECT)
            return TB_FAIL(TB_ERR_DATA, "benchmarks[%zu] is a %s, not an object", i,
                           tb_json_type_name(row->type));
        if (!gb_is_iteration_row(row))
            continue;
        const char *name = tb_json_get_string(row, "run_name", tb_json_get_string(row, "name", NULL));
        if (!name)
            return TB_FAIL(TB_ERR_DATA, "benchmarks[%zu] has no run_name", i);
        size_t idx = 0;
        TB_TRY(gb_run_slot(r, &cap, name, &idx));
        r->runs[idx].repetitions++;
    }
    for (size_t i = 0; i < r->n_runs; i++) {
        gb_run *run = &r->runs[i];
        size_t n = (size_t)run->repetitions;
        run->seconds = calloc(n, sizeof *run->seconds);
        run->cpu_seconds = calloc(n, sizeof *run->cpu_seconds);
        run->iterations = calloc(n, sizeof *run->iterations);
        if (!run->seconds || !run->cpu_seconds || !run->iterations)
            return TB_FAIL(TB_ERR_NOMEM, "gb_results: %zu repetitions", n);
    }
    return TB_OK;
}

/* Sets counter name of run to value at repetition rep; a new counter starts
 * as NaN in every repetition. */
static int gb_set_counter(gb_run *run, const char *name, size_t rep, double value)
{
    gb_counter *c = NULL;
    for (size_t i = 0; i < run->n_counters && !c; i++)
        if (strcmp(run->counters[i].name, name) == 0)
            c = &run->counters[i];
    if (!c) {
        size_t total = (size_t)run->repetitions;
        gb_counter *cs = realloc(run->counters, (run->n_counters + 1) * sizeof *cs);
        if (!cs)
            return TB_FAIL(TB_ERR_NOMEM, "gb_results: counters");
        run->counters = cs;
        c = &cs[run->n_counters];
        c->values = malloc(total * sizeof *c->values);
        if (!c->values)
            return TB_FAIL(TB_ERR_NOMEM, "gb_results: counter values");
        if (gb_strdup(name, &c->name) != TB_OK) {
            free(c->values);
            return TB_ERR_NOMEM;
        }
        for (size_t i = 0; i < total; i++)
            c->values[i] = NAN;
        run->n_counters++;
    }
    c->values[rep] = value;
    return TB_OK;
}

/* Pass 2: row i, repetition rep of run, into the run's arrays. */
static int gb_fill_row(const tb_json *row, size_t i, gb_run *run, size_t rep)
{
    const char *unit = tb_json_get_string(row, "time_unit", NULL);
    double scale = gb_time_unit_seconds(unit);
    if (scale == 0)
        return TB_FAIL(TB_ERR_DATA, "benchmarks[%zu] (%s): time_unit %s unknown", i, run->name,
                       unit ? unit : "missing");
    const tb_json *real = tb_json_get(row, "real_time");
    if (!real || real->type != TB_JSON_NUMBER)
        return TB_FAIL(TB_ERR_DATA, "benchmarks[%zu] (%s): no real_time", i, run->name);
    run->seconds[rep] = real->number * scale;
    run->cpu_seconds[rep] = tb_json_get_number(row, "cpu_time", NAN) * scale;
    run->iterations[rep] = (int64_t)tb_json_get_number(row, "iterations", 0);

    const char *label = tb_json_get_string(row, "label", NULL);
    if (label && !run->label)
        TB_TRY(gb_strdup(label, &run->label));
    if (tb_json_get_bool(row, "error_occurred", 0)) {
        run->error_occurred = 1;
        if (!run->error_message)
            TB_TRY(gb_strdup(tb_json_get_string(row, "error_message", ""), &run->error_message));
    }
    for (size_t k = 0; k < row->len; k++)
        if (row->items[k].type == TB_JSON_NUMBER && !gb_is_own_key(row->keys[k]))
            TB_TRY(gb_set_counter(run, row->keys[k], rep, row->items[k].number));
    return TB_OK;
}

/* Pass 2 over all rows; filled[j] counts the repetitions of run j so far. */
static int gb_fill_runs(const tb_json *rows, gb_results *r, size_t *filled)
{
    for (size_t i = 0; i < rows->len; i++) {
        const tb_json *row = &rows->items[i];
        if (!gb_is_iteration_row(row))
            continue;
        const char *name = tb_json_get_string(row, "run_name", tb_json_get_string(row, "name", ""));
        size_t j = (size_t)(gb_results_find(r, name) - r->runs);
        TB_TRY(gb_fill_row(row, i, &r->runs[j], filled[j]++));
    }
    for (size_t j = 0; j < r->n_runs; j++) {
        if (!r->runs[j].label)
            TB_TRY(gb_strdup("", &r->runs[j].label));
        if (!r->runs[j].error_message)
            TB_TRY(gb_strdup("", &r->runs[j].error_message));
    }
    return TB_OK;
}

static int gb_results_from_json(const tb_json *doc, gb_results *r)
{
    if (doc->type != TB_JSON_OBJECT)
        return TB_FAIL(TB_ERR_DATA, "not Google Benchmark JSON: top level is %s %s, not an object",
                       doc->type == TB_JSON_ARRAY ? "an" : "a",
                       tb_json_type_name(doc->type));
    const tb_json *rows = tb_json_get(doc, "benchmarks");
    if (!rows || rows->type != TB_JSON_ARRAY)
        return TB_FAIL(TB_ERR_DATA, "not Google Benchmark JSON: no \"benchmarks\" array");
    TB_TRY(gb_read_context(tb_json_get(doc, "context"), &r->context));
    TB_TRY(gb_count_runs(rows, r));
    size_t *filled = calloc(r->n_runs ? r->n_runs : 1, sizeof *filled);
    if (!filled)
        return TB_FAIL(TB_ERR_NOMEM, "gb_results: %zu runs", r->n_runs);
    int rc = gb_fill_runs(rows, r, filled);
    free(filled);
    return rc;
}

/* A gb_results from a parsed document; frees doc. path: for the error
 * chain, or NULL. */
static int results_of_doc(tb_json *doc, const char *path, gb_results **out)
{
    gb_results *r = calloc(1, sizeof *r);
    int rc;
    if (!r) {
        rc = TB_FAIL(TB_ERR_NOMEM, "gb_results");
        goto out_free_doc;
    }
    rc = gb_results_from_json(doc, r);
    if (rc != TB_OK) {
        if (path)
            TB_FAIL(rc, "reading Google Benchmark results %s", path);
        gb_results_free(r);
        goto out_free_doc;
    }
    *out = r;
out_free_doc:
    tb_json_free(doc);
    return rc;
}

int gb_results_parse(const char *text, size_t len, gb_results **out)
{
    *out = NULL;
    tb_json *doc;
    /* GB writes NaN and Infinity bare for non-finite counters. */
    TB_TRY(tb_json_parse(text, len, TB_JSON_ALLOW_NONFINITE, &doc));
    return results_of_doc(doc, NULL, out);
}

int gb_results_read(const char *path, gb_results **out)
{
    *out = NULL;
    tb_json *doc;
    TB_TRY(tb_json_parse_file(path, TB_JSON_ALLOW_NONFINITE, &doc));
    return results_of_doc(doc, path, out);
}
