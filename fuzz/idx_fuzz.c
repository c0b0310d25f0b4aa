/*
 * idx_fuzz.c - fuzz target for the IDX reader (datasets/idx.h), raw and
 * gzip-compressed.
 *
 * The input is a file's bytes; it is read as the loaders do (images: 3
 * dimensions; labels: 1; any of 1..4) and with a limit of 2 items. A crash,
 * a sanitizer report, or a broken contract aborts:
 *   - on success the array holds exactly the product of its dimensions
 *     (computed without overflow), ndim is in the range asked for, and the
 *     count read is the file's count or the limit;
 *   - on failure the array is zeroed and the error chain says why.
 * An input that announces more bytes than the reader may allocate must be
 * refused with an error, not abort in malloc (libFuzzer's -malloc_limit_mb).
 * Fuzz: tools/fuzz.sh idx. Replayed on its corpus and past crashes by
 * bazel test //fuzz:idx_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/idx.h"
#include "fuzz/fuzz_files.h"
#include "lib/core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "idx_fuzz: broken contract: %s\n", what);
        abort();
    }
}

static void read_one(const char *path, int ndim_min, int ndim_max, long limit)
{
    idx_array a;
    memset(&a, 0xa5, sizeof a);
    tb_error_clear();
    int rc = tb_idx_read(path, ndim_min, ndim_max, limit, &a);
    if (rc != TB_OK) {
        must(a.data == NULL && a.bytes == 0 && a.ndim == 0, "a failed read leaves *out zeroed");
        must(tb_error_message()[0] != '\0', "a failure says why");
        tb_error_clear();
        return;
    }
    must(a.ndim >= ndim_min && a.ndim <= ndim_max, "ndim within the range asked for");
    unsigned __int128 product = 1;
    for (int i = 0; i < a.ndim; i++)
        product *= a.dims[i];
    must(product == a.bytes, "bytes == the product of the dimensions");
    must(limit > 0 ? a.dims[0] == (a.file_count < limit ? a.file_count : (uint32_t)limit)
                   : a.dims[0] == a.file_count,
         "the count read is the file's, or the limit");
    /* Touch every byte: ASan reports a buffer shorter than bytes says. */
    unsigned sum = 0;
    for (size_t i = 0; i < a.bytes; i++)
        sum += a.data[i];
    (void)sum;
    tb_idx_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = tb_fuzz_write("input.idx", data, size);
    read_one(path, 3, 3, 0);
    read_one(path, 1, 1, 0);
    read_one(path, 1, IDX_MAX_DIMS, 0);
    read_one(path, 1, IDX_MAX_DIMS, 2);
    return 0;
}
