/*
 * fingerprint.h - the environment a result was measured in.
 *
 * Written as results/<device>/fingerprint.json next to the CSVs, so a number
 * in a paper can be traced to the device, clocks, driver, library versions,
 * CPU, OS, git revision and build flags that produced it. --resume and
 * bench:compare read it back and compare software stacks.
 *
 * A fingerprint is an ordered list of "section.key" -> value entries; the
 * JSON groups them by section:
 *   {"schema": "tunebench-fingerprint/1",
 *    "run":    {time_utc, host, command_line, source_dir},
 *    "git":    {revision},                 "abc1234", "abc1234-dirty", "unknown"
 *    "device": {backend, index, name, total_mem_bytes, multiprocessors, threads,
 *               clock_khz, mem_clock_khz, mem_bus_bits, compute_capability,
 *               cpu_flags, runtime, driver, libs},
 *    "cpu":    {model, flags, flags_checked, logical_cpus, frequency},
 *    "os":     {kernel, pretty_name},
 *    "build":  {compiler, optimized, ndebug, isa_macros, fast_math},
 *    "software": {...}}                    what the caller adds: onednn, mpi, ...
 * A value the machine does not expose is "n/a (...why...)", never a guess.
 *
 * Test: bazel test //lib/report:fingerprint_test
 */
#ifndef TB_FINGERPRINT_H
#define TB_FINGERPRINT_H

#include <stddef.h>
#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_FINGERPRINT_SCHEMA "tunebench-fingerprint/1"
#define TB_FP_MAX_ENTRIES 96

typedef struct tb_fp_entry {
    char key[48];             /* "section.name", or "name" at top level */
    char value[1024];
    int is_number;            /* written unquoted in JSON */
} tb_fp_entry;

typedef struct tb_fingerprint {
    tb_fp_entry entries[TB_FP_MAX_ENTRIES];
    int n;
} tb_fingerprint;

/* Collects everything this process can see. dev: the open backend's device
 * info (NULL leaves the device section out). argv: the tunebench command
 * line (argc may be 0). The git revision is read from
 * BUILD_WORKSPACE_DIRECTORY, else the current directory.
 * Library versions the caller knows (oneDNN, MPI, Google Benchmark) are
 * added afterwards with tb_fingerprint_set("software.onednn", ...). */
int tb_fingerprint_collect(tb_fingerprint *fp, const tb_device_info *dev, int argc,
                           char *const argv[]);

/* Sets key to value (a string), replacing an existing entry. Keys are
 * "section.name" with at most one dot. */
int tb_fingerprint_set(tb_fingerprint *fp, const char *key, const char *value);
/* Same for a number, written unquoted. */
int tb_fingerprint_set_number(tb_fingerprint *fp, const char *key, double value);

/* The value of key, or NULL when absent. */
const char *tb_fingerprint_get(const tb_fingerprint *fp, const char *key);

int tb_fingerprint_write_json(const tb_fingerprint *fp, FILE *f);
/* Atomically writes path (usually results/<device>/fingerprint.json). */
int tb_fingerprint_save(const tb_fingerprint *fp, const char *path);
/* Reads a file written by tb_fingerprint_save (any two-level JSON object of
 * strings, numbers, booleans and nulls). */
int tb_fingerprint_load(const char *path, tb_fingerprint *fp);

typedef enum tb_fp_scope {
    /* libraries, runtime, driver, compiler, build flags, git revision, OS:
     * what bench:compare warns about when machines differ */
    TB_FP_SOFTWARE = 0,
    /* the software stack plus the device and CPU: what must match for
     * --resume to continue an earlier run */
    TB_FP_RESUME = 1,
} tb_fp_scope;

/* Compares a and b over scope. *ndiff gets the number of keys that differ
 * (present in one only counts); out (cap bytes, may be NULL) gets one line
 * per difference: "software.onednn: 2.6.0 -> 3.0.0\n". run.* (time, host,
 * command line) is never compared. */
int tb_fingerprint_diff(const tb_fingerprint *a, const tb_fingerprint *b, tb_fp_scope scope,
                        char *out, size_t cap, int *ndiff);

#ifdef __cplusplus
}
#endif
#endif
