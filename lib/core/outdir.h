/*
 * outdir.h - where results and plots go.
 *
 * The root is --out-dir when given; otherwise BUILD_WORKSPACE_DIRECTORY
 * (the source tree: `bazel run` sets it), otherwise the current directory.
 * A relative --out-dir is taken relative to BUILD_WORKING_DIRECTORY (the
 * directory `bazel run` was typed in) when set, since `bazel run` starts the
 * binary inside its runfiles tree. Under the root:
 *   results/<device-slug>/  CSV, JSON, fingerprint.json, Google Benchmark JSON
 *   plots/<device-slug>/    gnuplot scripts and data, PNG, SVG, PDF
 * (layouts: results/README.md, plots/README.md).
 *
 * Test: bazel test //lib/core:atomic_file_test (the output-folder part)
 */
#ifndef TB_OUTDIR_H
#define TB_OUTDIR_H

#include <stddef.h>

#include "lib/core/atomic_file.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_outdir {
    char root[PATH_MAX];
    char results[PATH_MAX];   /* root/results/<slug> */
    char plots[PATH_MAX];     /* root/plots/<slug> */
    char slug[128];
} tb_outdir;

/* Resolves the root as described above into out (cap bytes). out_dir_flag
 * may be NULL or "" when --out-dir was not given. */
int tb_outdir_root(const char *out_dir_flag, char *out, size_t cap);

/* Fills od with the root and folder names; touches nothing on disk.
 * REQUIRES: device_slug (tb_device_slug()) made of [A-Za-z0-9._-], not
 * starting with '.', so it cannot climb out of results/. */
int tb_outdir_init(tb_outdir *od, const char *out_dir_flag, const char *device_slug);

/* Creates results/<slug>/ and plots/<slug>/ (mkdir -p). */
int tb_outdir_create(const tb_outdir *od);

/* dir/file into out, e.g. tb_outdir_join(od->results, "gelu.csv", ...). */
int tb_outdir_join(const char *dir, const char *file, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
