/*
 * telemetry.h - what the machine was doing while the numbers were measured.
 *
 * A slow result on a throttled GPU or on a CPU shared with another job is
 * not the technique's fault; the report has to say so. A sampler thread
 * records, every period:
 *   - CPU utilization of the whole machine (all CPUs, from /proc/stat),
 *   - the CPU frequency where the kernel exposes it
 *     (/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq); on machines
 *     without it (this VM) the file says "n/a" and why, never a guess,
 *   - on CUDA, through NVML (lib/backend/nvml_dl.h, loaded with dlopen): SM and
 *     memory clocks, temperature, power and throttle reasons. A sample is
 *     flagged `throttled` when a power or thermal reason is set (software
 *     power cap, hardware slowdown, software/hardware thermal, power brake);
 *     idle, application-clock and display reasons are not throttling.
 * Samples carry the label of the segment they fall in (bench:all starts one
 * segment per technique), and each segment keeps /proc/loadavg at its start
 * and end.
 *
 * Written as results/<device>/telemetry.json beside fingerprint.json
 * (schema tunebench-telemetry/1, described in results/README.md).
 *
 * The GPU is read by NVML index. NVML numbers devices in PCI order and CUDA
 * fastest-first, so with several different GPUs set
 * CUDA_DEVICE_ORDER=PCI_BUS_ID to make the two agree.
 *
 * Test: bazel test //lib/report:telemetry_test
 */
#ifndef TB_TELEMETRY_H
#define TB_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_TELEMETRY_SCHEMA "tunebench-telemetry/1"

typedef struct tb_telemetry tb_telemetry;

/* Starts the sampler thread. gpu_pci: the PCI bus id of the GPU to read
 * through NVML (tb_device_info.pci_bus_id; NVML's indices are not CUDA's
 * ordinals), or NULL / "" for none (the CPU backend). period_ms: time
 * between samples (>= 10).
 * The first segment is labelled "start" until tb_telemetry_segment names one. */
int tb_telemetry_start(const char *gpu_pci, int period_ms, tb_telemetry **out);

/* Closes the current segment and opens one named label (a technique name).
 * Reads /proc/loadavg at the boundary. */
int tb_telemetry_segment(tb_telemetry *t, const char *label);

/* Stops the thread, closing the last segment. Safe to call twice. */
int tb_telemetry_stop(tb_telemetry *t);

/* Writes the JSON (see results/README.md). REQUIRES: stopped. */
int tb_telemetry_write_json(const tb_telemetry *t, FILE *f);
/* Atomically writes path. */
int tb_telemetry_save(const tb_telemetry *t, const char *path);

/* A resumed run's telemetry (bench:all --resume): the segments and samples
 * of the earlier sessions' file at path are written before this session's,
 * so that the file still covers the techniques whose results the folder
 * keeps. No file there: nothing kept. One that cannot be read: TB_ERR_DATA
 * naming it (the caller says so and goes on without it). */
int tb_telemetry_keep_earlier(tb_telemetry *t, const char *path);

/* Stops (if running) and frees. NULL is fine. */
void tb_telemetry_free(tb_telemetry *t);

/* ---- parsing helpers, exposed for the test ---- */

/* The first "cpu " line of /proc/stat: busy and total jiffies (busy =
 * total - idle - iowait). Returns TB_ERR_DATA when the line is malformed. */
int tb_telemetry_parse_stat(const char *line, uint64_t *busy, uint64_t *total);

/* 1-minute load average from /proc/loadavg's text. */
int tb_telemetry_parse_loadavg(const char *text, double *load1);

/* 1 when an NVML throttle reason mask means power or thermal throttling. */
int tb_telemetry_is_throttled(int64_t reasons);

#ifdef __cplusplus
}
#endif
#endif
