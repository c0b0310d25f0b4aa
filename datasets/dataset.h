/*
 * dataset.h - an image classification dataset held in host memory.
 *
 * A dataset is N samples of C x H x W uint8 images with int32 labels in
 * [0, num_classes). Two kinds exist behind the same struct:
 *   - Fashion-MNIST (fashion_mnist.c), read from the IDX files of Debian's
 *     dataset-fashion-mnist package (gzip) or from raw IDX copies of them;
 *   - synthetic (synthetic.c), generated from a seed with class-dependent
 *     patterns plus noise, so a model trained on it converges. Its name starts
 *     with "synthetic-" and its `synthetic` flag is set: whatever reports
 *     results from it must say so.
 * The loader (lib/train/loader.h) turns a dataset into augmented float batches.
 *
 * Tests: bazel test //datasets:fashion_mnist_test //datasets:synthetic_test
 */
#ifndef TB_DATASET_H
#define TB_DATASET_H

#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_DATASET_MAX_CHANNELS 4

/* Where Debian's dataset-fashion-mnist installs its files. */
#define TB_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
/* Environment variable that overrides that directory (a --data-dir flag,
 * when given, overrides both). */
#define TB_DATA_DIR_ENV "TB_DATA_DIR"

/* Fashion-MNIST's per-pixel statistics over the training set, in [0, 1]. */
#define TB_FASHION_MNIST_MEAN 0.2860f
#define TB_FASHION_MNIST_STD 0.3530f

typedef struct tb_dataset {
    char name[64];        /* "fashion-mnist-train", "synthetic-3x32x32-train" */
    char source[512];     /* files read, or how it was generated */
    int synthetic;        /* 1 for generated data; report it as such */
    int n, c, h, w;       /* samples and image shape */
    int num_classes;
    float mean[TB_DATASET_MAX_CHANNELS]; /* per-channel mean of pixel/255 */
    float std[TB_DATASET_MAX_CHANNELS];  /* per-channel std of pixel/255 */
    uint8_t *images;      /* (n, c, h, w) */
    int32_t *labels;      /* (n), each in [0, num_classes) */
} tb_dataset;

typedef enum tb_split { TB_SPLIT_TRAIN = 0, TB_SPLIT_TEST = 1 } tb_split;

/* The data directory to use when the caller has no --data-dir: $TB_DATA_DIR
 * when set and non-empty, else TB_FASHION_MNIST_DIR. Never NULL. */
const char *tb_dataset_default_dir(void);

/* Writes "<dir>/<train|t10k>-<images-idx3|labels-idx1>-ubyte[.gz]" into out.
 * Fails with TB_ERR_INVALID when it does not fit in cap. */
int tb_dataset_fashion_mnist_path(const char *dir, tb_split split, int labels, int gz,
                               char *out, size_t cap);

/* Opens Fashion-MNIST's train or test split from dir (NULL: the default dir).
 * In dir it reads "<stem>.gz" when present, else the raw "<stem>" (a copy
 * written by tb_dataset_write_fashion_mnist). limit > 0 keeps only the first
 * min(limit, count) samples (and reads no further); limit <= 0 reads all and
 * checks each file's exact size. Images must be 28 x 28, image and label
 * counts equal, labels below 10.
 * Errors: TB_ERR_IO (missing or unreadable file) or TB_ERR_DATA (corrupt or
 * truncated); the message names the file and how to fix it.
 * On success *out is a new dataset to free with tb_dataset_free. */
int tb_dataset_open_fashion_mnist(const char *dir, tb_split split, long limit, tb_dataset **out);

/* Opens any pair of uint8 IDX files (gzip or raw) as a dataset named name:
 * images (N, H, W) or (N, C, H, W), labels (N) below num_classes. mean/std
 * are computed from the pixels read. Same limit and errors as above. */
int tb_dataset_open_idx(const char *images_path, const char *labels_path, const char *name,
                     int num_classes, long limit, tb_dataset **out);

/* Writes ds as raw (uncompressed) IDX files, each through a temp file and a
 * rename. Images are (N, H, W) when C == 1, else (N, C, H, W); labels (N).
 * REQUIRES: labels in 0..255. */
int tb_dataset_write_idx(const tb_dataset *ds, const char *images_path, const char *labels_path);

/* Writes ds as raw Fashion-MNIST-named files in dir, so that
 * tb_dataset_open_fashion_mnist(dir, split, ...) reads them back (the "data in
 * RAM / better format" technique points dir at /dev/shm). */
int tb_dataset_write_fashion_mnist(const tb_dataset *ds, const char *dir, tb_split split);

typedef struct tb_synthetic_cfg {
    int n;                /* samples; > 0 */
    int c, h, w;          /* e.g. 3x32x32 or 1x28x28; c <= TB_DATASET_MAX_CHANNELS */
    int num_classes;      /* 2..256; 0 means 10 */
    uint64_t seed;        /* same seed, same bytes */
    int noise;            /* uniform noise amplitude in pixel levels; < 0 means 48 */
    tb_split split;       /* train and test draw different samples from the
                             same class patterns */
} tb_synthetic_cfg;

/* Generates a synthetic dataset: each class has a fixed blocky pattern
 * (4 x 4 cells per channel, mirror-symmetric so horizontal flips keep the
 * class), each sample is its class pattern plus uniform noise. Everything is
 * a function of (seed, split, sample index). Named
 * "synthetic-<c>x<h>x<w>-<train|test>", flagged synthetic.
 * REQUIRES: h, w >= 4. */
int tb_dataset_synthetic_create(const tb_synthetic_cfg *cfg, tb_dataset **out);

/* Frees a dataset from any of the constructors; NULL is a no-op. */
void tb_dataset_free(tb_dataset *ds);

/* Allocates an empty dataset with room for n samples of c x h x w (internal
 * to datasets/, exposed for tests that build a dataset by hand). */
int tb_dataset_alloc(int n, int c, int h, int w, int num_classes, tb_dataset **out);

/* Sets ds->mean/std from its pixels. */
void tb_dataset_compute_stats(tb_dataset *ds);

#ifdef __cplusplus
}
#endif
#endif
