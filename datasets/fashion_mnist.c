/*
 * fashion_mnist.c - Fashion-MNIST from Debian's dataset-fashion-mnist package
 * (or raw IDX copies of its files). See dataset.h.
 *
 * Files: <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz, 60000 and
 * 10000 images of 28 x 28 bytes, labels 0..9.
 * Tests: bazel test //datasets:fashion_mnist_test
 */
#define _DEFAULT_SOURCE /* access() under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/dataset.h"

#define FMNIST_SIDE 28
#define FMNIST_CLASSES 10
/* Kept short: an error entry holds 384 characters and paths can be long. */
#define FMNIST_HINT "install Debian's dataset-fashion-mnist, or set " TB_DATA_DIR_ENV \
                    " to a copy (bench:train: --data-dir)"

const char *tb_dataset_default_dir(void)
{
    const char *env = getenv(TB_DATA_DIR_ENV);
    return env && env[0] ? env : TB_FASHION_MNIST_DIR;
}

int tb_dataset_fashion_mnist_path(const char *dir, tb_split split, int labels, int gz,
                               char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s-%s-ubyte%s", dir, split == TB_SPLIT_TRAIN ? "train" : "t10k",
                     labels ? "labels-idx1" : "images-idx3", gz ? ".gz" : "");
    if (n < 0 || (size_t)n >= cap)
        return TB_FAIL(TB_ERR_INVALID, "data directory path too long: %s", dir);
    return TB_OK;
}

/* The .gz file when it exists, else the raw one when it exists, else the
 * .gz name (so the error names the file the package installs). */
static int pick_file(const char *dir, tb_split split, int labels, char *out, size_t cap)
{
    TB_TRY(tb_dataset_fashion_mnist_path(dir, split, labels, 1, out, cap));
    if (access(out, F_OK) == 0)
        return TB_OK;
    char raw[4096];
    TB_TRY(tb_dataset_fashion_mnist_path(dir, split, labels, 0, raw, sizeof raw));
    if (access(raw, F_OK) == 0)
        snprintf(out, cap, "%s", raw);
    return TB_OK;
}

int tb_dataset_open_fashion_mnist(const char *dir, tb_split split, long limit, tb_dataset **out)
{
    char images[4096], labels[4096];
    const char *split_name = split == TB_SPLIT_TRAIN ? "train" : "test";
    char name[64];
    *out = NULL;
    int given = dir && dir[0];
    if (!given)
        dir = tb_dataset_default_dir();
    struct stat st;
    const char *env = getenv(TB_DATA_DIR_ENV);
    if ((given || (env && env[0])) && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        /* a mistyped folder is not a missing package */
        return TB_FAIL(TB_ERR_IO, "Fashion-MNIST folder %s (from %s) %s: give the folder that "
                       "holds its four files (" TB_DATA_DIR_ENV " or --data-dir), or install "
                       "Debian's dataset-fashion-mnist and leave both unset", dir,
                       given ? "--data-dir" : TB_DATA_DIR_ENV,
                       stat(dir, &st) != 0 ? "does not exist" : "is not a folder");
    TB_TRY(pick_file(dir, split, 0, images, sizeof images));
    TB_TRY(pick_file(dir, split, 1, labels, sizeof labels));
    snprintf(name, sizeof name, "fashion-mnist-%s", split_name);
    /* the published statistics, so a subset normalizes like the full set
     * (and no pass over the pixels: bench:data_format times this read) */
    int rc = tb_dataset_open_idx_with_stats(images, labels, name, FMNIST_CLASSES, limit,
                                            TB_FASHION_MNIST_MEAN, TB_FASHION_MNIST_STD, out);
    /* The entry below this one names the file and what is wrong with it. */
    if (rc == TB_ERR_DATA) /* there, but not what it should be */
        return TB_FAIL(rc, "cannot load Fashion-MNIST %s split from %s: a file is damaged "
                       "(below): reinstall it (apt-get install --reinstall "
                       "dataset-fashion-mnist), or set " TB_DATA_DIR_ENV " to an intact copy "
                       "(bench:train: --data-dir)", split_name, dir);
    if (rc != TB_OK)
        return TB_FAIL(rc, "cannot load Fashion-MNIST %s split from %s: " FMNIST_HINT,
                       split_name, dir);
    tb_dataset *ds = *out;
    if (ds->c != 1 || ds->h != FMNIST_SIDE || ds->w != FMNIST_SIDE) {
        rc = TB_FAIL(TB_ERR_DATA, "%s: images are %dx%dx%d, Fashion-MNIST's are 1x28x28: "
                     FMNIST_HINT, images, ds->c, ds->h, ds->w);
        tb_dataset_free(ds);
        *out = NULL;
        return rc;
    }
    return TB_OK;
}

int tb_dataset_write_fashion_mnist(const tb_dataset *ds, const char *dir, tb_split split)
{
    char images[4096], labels[4096];
    TB_TRY(tb_dataset_fashion_mnist_path(dir, split, 0, 0, images, sizeof images));
    TB_TRY(tb_dataset_fashion_mnist_path(dir, split, 1, 0, labels, sizeof labels));
    return tb_dataset_write_idx(ds, images, labels);
}
