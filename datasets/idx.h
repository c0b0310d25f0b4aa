/*
 * idx.h - reading and writing IDX files (the MNIST / Fashion-MNIST format).
 *
 * An IDX file is a 4-byte big-endian magic 0x0000TTDD (TT = element type,
 * 0x08 for uint8; DD = number of dimensions), DD big-endian uint32 sizes,
 * then the elements in row-major order. Fashion-MNIST ships images as
 * 0x00000803 (N, 28, 28) and labels as 0x00000801 (N).
 *
 * tb_idx_read() takes a gzip-compressed file (what Debian's dataset-fashion-mnist
 * installs; detected by the gzip magic 1f 8b and read through zlib) or a raw
 * uncompressed one (read with stdio; what the "data format" technique writes
 * under /dev/shm). tb_idx_write() writes the raw form through a temp file and a
 * rename, so a reader never sees half a file.
 *
 * Errors name the file and say what is wrong: TB_ERR_IO when it cannot be
 * opened or read, TB_ERR_DATA when it is not IDX, has a bad type, bad or
 * mismatched dimensions, is truncated, has trailing bytes or corrupt gzip.
 * Tests: datasets/idx_test.c (bazel test //datasets:idx_test).
 */
#ifndef TB_IDX_H
#define TB_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IDX_MAX_DIMS 4
#define IDX_TYPE_U8 0x08

typedef struct idx_array {
    int ndim;
    uint32_t dims[IDX_MAX_DIMS]; /* dims[0] is the count actually read */
    uint32_t file_count;         /* dims[0] as the file's header says */
    int gzipped;                 /* 1 if the file was gzip-compressed */
    uint8_t *data;               /* (dims[0], dims[1], ...) row-major; malloc'd */
    size_t bytes;
} idx_array;

/* Reads a uint8 IDX file with ndim dimensions, gzip or raw.
 * limit > 0 reads only the first min(limit, count) items (and does not read
 * on to check for trailing bytes); limit <= 0 reads all of it and checks the
 * file holds exactly the bytes its header announces.
 * REQUIRES: path, out non-NULL; 1 <= ndim_min <= ndim_max <= IDX_MAX_DIMS.
 * On success *out owns data (free with tb_idx_free); on failure *out is zeroed. */
int tb_idx_read(const char *path, int ndim_min, int ndim_max, long limit, idx_array *out);

void tb_idx_free(idx_array *a);

/* Writes a raw (uncompressed) uint8 IDX file atomically: to "path.tmp.XXXXXX"
 * in the same directory, then rename(2). REQUIRES: 1 <= ndim <= IDX_MAX_DIMS,
 * data holds the product of dims bytes. */
int tb_idx_write(const char *path, int ndim, const uint32_t *dims, const uint8_t *data);

#ifdef __cplusplus
}
#endif
#endif
