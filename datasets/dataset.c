/*
 * dataset.c - what every dataset shares: allocation, statistics, reading and
 * writing a pair of IDX files, reading one sample whether held or made on
 * the fly. See dataset.h; Fashion-MNIST specifics are in fashion_mnist.c,
 * generation in synthetic.c and tokens.c.
 * Tests: bazel test //datasets:idx_test //datasets:fashion_mnist_test
 */
#include "datasets/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/idx.h"

int tb_dataset_alloc(int n, int c, int h, int w, int num_classes, tb_dataset **out)
{
    *out = NULL;
    if (n <= 0 || c <= 0 || c > TB_DATASET_MAX_CHANNELS || h <= 0 || w <= 0 || num_classes <= 0)
        return TB_FAIL(TB_ERR_INVALID, "dataset shape n=%d c=%d h=%d w=%d classes=%d",
                       n, c, h, w, num_classes);
    size_t pixels;
    if (__builtin_mul_overflow((size_t)n * (size_t)c, (size_t)h * (size_t)w, &pixels))
        return TB_FAIL(TB_ERR_INVALID, "dataset shape n=%d c=%d h=%d w=%d: %d x %d x %d x %d "
                       "bytes is more than memory can address", n, c, h, w, n, c, h, w);
    tb_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a dataset");
    ds->images = malloc(pixels);
    ds->labels = malloc((size_t)n * sizeof *ds->labels);
    if (!ds->images || !ds->labels) {
        tb_dataset_free(ds);
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate %zu bytes of images", pixels);
    }
    ds->n = n;
    ds->c = c;
    ds->h = h;
    ds->w = w;
    ds->num_classes = num_classes;
    for (int ch = 0; ch < TB_DATASET_MAX_CHANNELS; ch++) {
        ds->mean[ch] = 0.5f;
        ds->std[ch] = 0.25f;
    }
    *out = ds;
    return TB_OK;
}

void tb_dataset_free(tb_dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    free(ds->gen);
    free(ds);
}

const uint8_t *tb_dataset_image(const tb_dataset *ds, int index, uint8_t *scratch,
                                int32_t *label)
{
    if (ds->make) {
        ds->make(ds, index, scratch, label);
        return scratch;
    }
    *label = ds->labels[index];
    return ds->images + (size_t)index * ds->c * ds->h * ds->w;
}

void tb_dataset_tokens(const tb_dataset *ds, int index, int32_t *out)
{
    ds->make(ds, index, out, NULL);
}

void tb_dataset_compute_stats(tb_dataset *ds)
{
    size_t plane = (size_t)ds->h * ds->w;
    for (int ch = 0; ch < ds->c; ch++) {
        double sum = 0, sq = 0;
        for (int i = 0; i < ds->n; i++) {
            const uint8_t *p = ds->images + ((size_t)i * ds->c + ch) * plane;
            for (size_t k = 0; k < plane; k++) {
                double v = p[k] / 255.0;
                sum += v;
                sq += v * v;
            }
        }
        double cnt = (double)ds->n * plane;
        double mean = sum / cnt, var = sq / cnt - mean * mean;
        ds->mean[ch] = (float)mean;
        /* A constant image would give std 0 and normalize to inf. */
        ds->std[ch] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    }
}

/* Moves the decoded arrays into a new dataset after checking they agree. */
static int dataset_from_idx(const idx_array *im, const idx_array *lb, const char *images_path,
                            const char *labels_path, int num_classes, tb_dataset **out)
{
    if (im->file_count != lb->file_count)
        return TB_FAIL(TB_ERR_DATA, "%s holds %u images but %s holds %u labels",
                       images_path, im->file_count, labels_path, lb->file_count);
    int c = im->ndim == 4 ? (int)im->dims[1] : 1;
    int h = (int)im->dims[im->ndim - 2], w = (int)im->dims[im->ndim - 1];
    if (c > TB_DATASET_MAX_CHANNELS)
        return TB_FAIL(TB_ERR_DATA, "%s: %d channels, at most %d supported", images_path, c,
                       TB_DATASET_MAX_CHANNELS);
    for (uint32_t i = 0; i < lb->dims[0]; i++)
        if (lb->data[i] >= num_classes)
            return TB_FAIL(TB_ERR_DATA, "%s: label %u of sample %u is out of range 0..%d",
                           labels_path, lb->data[i], i, num_classes - 1);
    tb_dataset *ds;
    TB_TRY(tb_dataset_alloc((int)im->dims[0], c, h, w, num_classes, &ds));
    memcpy(ds->images, im->data, im->bytes);
    for (int i = 0; i < ds->n; i++)
        ds->labels[i] = lb->data[i];
    *out = ds;
    return TB_OK;
}

/* tb_dataset_open_idx with the statistics computed (mean < 0) or given. */
static int open_idx(const char *images_path, const char *labels_path, const char *name,
                    int num_classes, long limit, float mean, float std, tb_dataset **out)
{
    idx_array im, lb;
    int rc;
    *out = NULL;
    memset(&lb, 0, sizeof lb);
    TB_TRY(tb_idx_read(images_path, 3, 4, limit, &im));
    TB_TRY_GOTO(rc, tb_idx_read(labels_path, 1, 1, limit, &lb), out_free_arrays);
    TB_TRY_GOTO(rc, dataset_from_idx(&im, &lb, images_path, labels_path, num_classes, out),
                out_free_arrays);
    snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    snprintf((*out)->source, sizeof (*out)->source, "%s%s + %s%s", images_path,
             im.gzipped ? " (gzip)" : " (raw)", labels_path, lb.gzipped ? " (gzip)" : " (raw)");
    if (mean < 0) {
        tb_dataset_compute_stats(*out);
    } else {
        for (int ch = 0; ch < (*out)->c; ch++)
            (*out)->mean[ch] = mean, (*out)->std[ch] = std;
    }
    rc = TB_OK;
out_free_arrays:
    tb_idx_free(&im);
    tb_idx_free(&lb);
    return rc;
}

int tb_dataset_open_idx(const char *images_path, const char *labels_path, const char *name,
                     int num_classes, long limit, tb_dataset **out)
{
    return open_idx(images_path, labels_path, name, num_classes, limit, -1, 0, out);
}

int tb_dataset_open_idx_with_stats(const char *images_path, const char *labels_path,
                                   const char *name, int num_classes, long limit, float mean,
                                   float std, tb_dataset **out)
{
    if (!(mean >= 0) || !(std > 0))
        return TB_FAIL(TB_ERR_INVALID, "%s: mean %g and std %g: want mean >= 0, std > 0",
                       name, mean, std);
    return open_idx(images_path, labels_path, name, num_classes, limit, mean, std, out);
}

int tb_dataset_write_idx(const tb_dataset *ds, const char *images_path, const char *labels_path)
{
    if (ds->make)
        return TB_FAIL(TB_ERR_INVALID, "%s: dataset %s is made on the fly and holds no samples "
                       "to write", images_path, ds->name);
    uint8_t *labels = malloc((size_t)ds->n);
    if (!labels)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate %d labels", ds->n);
    int rc = TB_OK;
    for (int i = 0; i < ds->n; i++) {
        if (ds->labels[i] < 0 || ds->labels[i] > 255) {
            rc = TB_FAIL(TB_ERR_INVALID, "%s: label %d of sample %d does not fit a byte",
                         labels_path, ds->labels[i], i);
            goto out_free_labels;
        }
        labels[i] = (uint8_t)ds->labels[i];
    }
    uint32_t dims4[4] = {(uint32_t)ds->n, (uint32_t)ds->c, (uint32_t)ds->h, (uint32_t)ds->w};
    uint32_t dims3[3] = {(uint32_t)ds->n, (uint32_t)ds->h, (uint32_t)ds->w};
    uint32_t count = (uint32_t)ds->n;
    if (ds->c == 1)
        TB_TRY_GOTO(rc, tb_idx_write(images_path, 3, dims3, ds->images), out_free_labels);
    else
        TB_TRY_GOTO(rc, tb_idx_write(images_path, 4, dims4, ds->images), out_free_labels);
    TB_TRY_GOTO(rc, tb_idx_write(labels_path, 1, &count, labels), out_free_labels);
out_free_labels:
    free(labels);
    return rc;
}
