/*
 * dataset.h - a dataset: N samples of images with labels, or of token ids.
 *
 * An image dataset is N samples of C x H x W uint8 images with int32 labels
 * in [0, num_classes). Its kinds behind the same struct:
 *   - Fashion-MNIST (fashion_mnist.c), read from the IDX files of Debian's
 *     dataset-fashion-mnist package (gzip) or from raw IDX copies of them;
 *   - synthetic (synthetic.c), generated from a seed with class-dependent
 *     patterns plus noise, so a model trained on it converges. Its name starts
 *     with "synthetic-" and its `synthetic` flag is set: whatever reports
 *     results from it must say so. Held in memory, or (on_the_fly, for
 *     ImageNet-shaped data: 50,000 samples of 3x224x224 would be 7.5 GB)
 *     made per sample when the loader asks for it, from (seed, split, index).
 * A token dataset (tokens.c, kind TB_SAMPLES_TOKENS) holds int32 token ids,
 * not pixels: sample i is seq + 1 ids in [0, vocab); a language model reads
 * the first seq and predicts the seq next ones (ids 1..seq). The synthetic
 * one is made on the fly from a seeded sparse Markov chain.
 * On-the-fly datasets have images == labels == NULL and a generator (make);
 * read samples through tb_dataset_image / tb_dataset_tokens, which serve
 * both. The loader (lib/train/loader.h) turns a dataset into batches.
 *
 * Tests: bazel test //datasets:fashion_mnist_test //datasets:synthetic_test
 *        //datasets:tokens_test
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

/* What one sample is. */
typedef enum tb_sample_kind {
    TB_SAMPLES_IMAGES = 0, /* c x h x w uint8 pixels and one int32 label */
    TB_SAMPLES_TOKENS = 1, /* seq + 1 int32 token ids; c = 1, h = seq, w = 1 (the
                              model's (1, T, 1) input), num_classes = vocab */
} tb_sample_kind;

typedef struct tb_dataset tb_dataset;

/* An on-the-fly dataset's generator: sample index of ds into out. Images:
 * c x h x w pixels to out (uint8), the label to *label. Tokens: seq + 1 ids
 * to out (int32), label unused (NULL). A pure function of (ds, index): any
 * thread or forked process may call it. */
typedef void (*tb_sample_fn)(const tb_dataset *ds, int index, void *out, int32_t *label);

struct tb_dataset {
    char name[64];        /* "fashion-mnist-train", "synthetic-3x32x32-train" */
    char source[512];     /* files read, or how it was generated */
    int synthetic;        /* 1 for generated data; report it as such */
    int n, c, h, w;       /* samples and image shape */
    int num_classes;
    float mean[TB_DATASET_MAX_CHANNELS]; /* per-channel mean of pixel/255 */
    float std[TB_DATASET_MAX_CHANNELS];  /* per-channel std of pixel/255 */
    uint8_t *images;      /* (n, c, h, w) */
    int32_t *labels;      /* (n), each in [0, num_classes) */
    /* Zero for every dataset held in memory (images, labels above). */
    tb_sample_kind kind;
    int seq, vocab;       /* tokens: ids per input (T) and the id range [0, vocab) */
    tb_sample_fn make;    /* non-NULL: made on the fly; images == labels == NULL */
    void *gen;            /* make's state, one malloc block (tb_dataset_free frees it) */
};

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

/* As tb_dataset_open_idx, with a dataset's published statistics (one mean
 * and std for every channel) instead of a pass over the pixels read: a
 * reader that re-reads its files each epoch (bench:data_format) times
 * reading, not arithmetic whose result would be replaced. */
int tb_dataset_open_idx_with_stats(const char *images_path, const char *labels_path,
                                   const char *name, int num_classes, long limit, float mean,
                                   float std, tb_dataset **out);

/* Writes ds as raw (uncompressed) IDX files, each through a temp file and a
 * rename. Images are (N, H, W) when C == 1, else (N, C, H, W); labels (N).
 * REQUIRES: labels in 0..255. An on-the-fly dataset is TB_ERR_INVALID. */
int tb_dataset_write_idx(const tb_dataset *ds, const char *images_path, const char *labels_path);

/* Writes ds as raw Fashion-MNIST-named files in dir, so that
 * tb_dataset_open_fashion_mnist(dir, split, ...) reads them back (the "data in
 * RAM / better format" technique points dir at /dev/shm). */
int tb_dataset_write_fashion_mnist(const tb_dataset *ds, const char *dir, tb_split split);

typedef struct tb_synthetic_cfg {
    int n;                /* samples; > 0 */
    int c, h, w;          /* e.g. 3x32x32 or 1x28x28; c <= TB_DATASET_MAX_CHANNELS */
    int num_classes;      /* 2..256 (on the fly: 2..65536); 0 means 10 */
    uint64_t seed;        /* same seed, same bytes */
    int noise;            /* uniform noise amplitude in pixel levels; < 0 means 48 */
    tb_split split;       /* train and test draw different samples from the
                             same class patterns */
    int on_the_fly;       /* 1: store nothing, make sample i when asked (the same
                             bytes as sample i of the stored dataset) */
} tb_synthetic_cfg;

/* Generates a synthetic dataset: each class has a fixed blocky pattern
 * (4 x 4 cells per channel, mirror-symmetric so horizontal flips keep the
 * class), each sample is its class pattern plus uniform noise. Everything is
 * a function of (seed, split, sample index). Named
 * "synthetic-<c>x<h>x<w>-<train|test>", flagged synthetic. Stored datasets
 * get mean/std from every pixel; on-the-fly ones from their first
 * min(n, TB_SYNTH_STATS_SAMPLES) samples (the same values in every process).
 * Errors: TB_ERR_INVALID (h or w below 4, classes or noise out of range).
 */
#define TB_SYNTH_STATS_SAMPLES 64
int tb_dataset_synthetic_create(const tb_synthetic_cfg *cfg, tb_dataset **out);

typedef struct tb_token_cfg {
    int n;                /* samples (sequences); > 0 */
    int seq;              /* T: input tokens per sample (the sample holds T + 1) */
    int vocab;            /* ids in [0, vocab); 2..2^24 */
    uint64_t seed;        /* same seed, same ids */
    tb_split split;       /* train and test: other sequences, the same chain */
} tb_token_cfg;

/* A synthetic token stream, made on the fly: a sparse Markov chain whose
 * successor table is drawn from the seed. Token v is followed by its j-th
 * successor (TB_TOKEN_SUCCESSORS of them, a function of (seed, v)) with
 * probability 2^-(j+1) (the last one takes the remainder minus 1/16), by a
 * uniform random id with probability 1/16. A model that learns the chain's
 * most likely successor predicts about half the next tokens; chance is
 * 1/vocab. The first id and every draw come from (seed, split, index).
 * Named "synthetic-tokens-<seq>x<vocab>-<train|test>", flagged synthetic.
 * Errors: TB_ERR_INVALID (n, seq or vocab out of range). */
#define TB_TOKEN_SUCCESSORS 4
int tb_dataset_tokens_create(const tb_token_cfg *cfg, tb_dataset **out);

/* Sample index of an image dataset: returns its pixels (c, h, w) and sets
 * *label. Held in memory: a pointer into ds->images (scratch unused); on the
 * fly: made into scratch (c * h * w bytes), which is returned.
 * REQUIRES: ds->kind == TB_SAMPLES_IMAGES, 0 <= index < ds->n. */
const uint8_t *tb_dataset_image(const tb_dataset *ds, int index, uint8_t *scratch,
                                int32_t *label);

/* Sample index of a token dataset: seq + 1 ids to out.
 * REQUIRES: ds->kind == TB_SAMPLES_TOKENS, 0 <= index < ds->n. */
void tb_dataset_tokens(const tb_dataset *ds, int index, int32_t *out);

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
