/*
 * idx_test.c - the IDX reader and writer on small files made here: valid gzip
 * and raw files read back exactly; bad magic, truncated data, a cut gzip
 * stream, a file that is not gzip, a missing file, out-of-range labels,
 * mismatched counts and trailing bytes each give TB_ERR_IO / TB_ERR_DATA with
 * a message naming the file.
 * Run: bazel test //datasets:idx_test
 */
#define _DEFAULT_SOURCE /* mkdtemp, open_memstream under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "datasets/dataset.h"
#include "datasets/idx.h"
#include "lib/core/testing.h"

static char dir[512];

/* The whole error chain as one string (static buffer). */
static const char *chain_text(void)
{
    static char text[8192];
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tb_error_print(f);
    fclose(f);
    snprintf(text, sizeof text, "%s", buf ? buf : "");
    free(buf);
    return text;
}

static void header(unsigned char *h, int ndim, const uint32_t *dims)
{
    h[0] = h[1] = 0;
    h[2] = 0x08;
    h[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        h[4 + 4 * i] = dims[i] >> 24;
        h[5 + 4 * i] = dims[i] >> 16;
        h[6 + 4 * i] = dims[i] >> 8;
        h[7 + 4 * i] = dims[i];
    }
}

/* Writes an IDX file (gzip when gz) whose header says dims but whose body
 * has body_bytes bytes of the pattern; magic_override != 0 replaces the magic. */
static void write_file(const char *path, int gz, int ndim, const uint32_t *dims,
                       size_t body_bytes, int label_mod, uint32_t magic_override)
{
    unsigned char h[20];
    header(h, ndim, dims);
    if (magic_override) {
        h[0] = magic_override >> 24;
        h[1] = magic_override >> 16;
        h[2] = magic_override >> 8;
        h[3] = magic_override;
    }
    unsigned char *body = malloc(body_bytes + 1);
    for (size_t i = 0; i < body_bytes; i++)
        body[i] = (unsigned char)(label_mod ? i % label_mod : (i * 7 + 3) & 0xff);
    size_t hlen = 4 + 4 * (size_t)ndim;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, h, (unsigned)hlen);
        if (body_bytes)
            gzwrite(f, body, (unsigned)body_bytes);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(h, 1, hlen, f);
        fwrite(body, 1, body_bytes, f);
        fclose(f);
    }
    free(body);
}

static void path_of(char *out, const char *name) { snprintf(out, 1024, "%s/%s", dir, name); }

/* A valid Fashion-MNIST-shaped pair of n samples, gzip, in a subdirectory. */
static void write_fmnist(const char *sub, int n, int gz)
{
    char d[1024], im[1100], lb[1100];
    path_of(d, sub);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    if (system(cmd) != 0)
        printf("mkdir failed\n");
    uint32_t idims[3] = {(uint32_t)n, 28, 28}, ldims[1] = {(uint32_t)n};
    tb_dataset_fashion_mnist_path(d, TB_SPLIT_TRAIN, 0, gz, im, sizeof im);
    tb_dataset_fashion_mnist_path(d, TB_SPLIT_TRAIN, 1, gz, lb, sizeof lb);
    write_file(im, gz, 3, idims, (size_t)n * 784, 0, 0);
    write_file(lb, gz, 1, ldims, (size_t)n, 10, 0);
}

static void test_valid(void)
{
    printf("valid gzip pair reads back exactly, whole and limited\n");
    write_fmnist("ok", 20, 1);
    char d[1024];
    path_of(d, "ok");
    tb_dataset *ds = NULL;
    int rc = tb_dataset_open_fashion_mnist(d, TB_SPLIT_TRAIN, 0, &ds);
    CHECK(rc == TB_OK, "open: %s", chain_text());
    if (rc != TB_OK)
        return;
    CHECK(ds->n == 20 && ds->c == 1 && ds->h == 28 && ds->w == 28 && ds->num_classes == 10,
          "shape %d %dx%dx%d", ds->n, ds->c, ds->h, ds->w);
    CHECK(!ds->synthetic, "flagged synthetic");
    CHECK(strcmp(ds->name, "fashion-mnist-train") == 0, "name %s", ds->name);
    int bad = 0;
    for (int i = 0; i < 20 * 784; i++)
        bad += ds->images[i] != (uint8_t)((i * 7 + 3) & 0xff);
    for (int i = 0; i < 20; i++)
        bad += ds->labels[i] != i % 10;
    CHECK(bad == 0, "%d bytes differ", bad);
    tb_dataset_free(ds);

    rc = tb_dataset_open_fashion_mnist(d, TB_SPLIT_TRAIN, 7, &ds);
    CHECK(rc == TB_OK && ds->n == 7, "limit 7: rc %d", rc);
    tb_dataset_free(ds);
}

static void test_raw_roundtrip(void)
{
    printf("raw IDX written through temp+rename reads back the same bytes\n");
    char d[1024], raw[1024];
    path_of(d, "ok");
    path_of(raw, "raw");
    tb_dataset *ds = NULL, *back = NULL;
    int rc = tb_dataset_open_fashion_mnist(d, TB_SPLIT_TRAIN, 0, &ds);
    CHECK(rc == TB_OK, "open: %s", chain_text());
    if (rc != TB_OK)
        return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", raw);
    CHECK(system(cmd) == 0, "mkdir");
    rc = tb_dataset_write_fashion_mnist(ds, raw, TB_SPLIT_TRAIN);
    CHECK(rc == TB_OK, "write: %s", chain_text());
    rc = tb_dataset_open_fashion_mnist(raw, TB_SPLIT_TRAIN, 0, &back);
    CHECK(rc == TB_OK, "reopen: %s", chain_text());
    if (rc == TB_OK) {
        CHECK(back->n == ds->n && memcmp(back->images, ds->images, (size_t)ds->n * 784) == 0 &&
              memcmp(back->labels, ds->labels, (size_t)ds->n * sizeof(int32_t)) == 0,
              "raw copy differs");
        CHECK(strstr(back->source, "(raw)") != NULL, "source %s", back->source);
    }
    /* No temp files left behind. */
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", raw);
    CHECK(system(cmd) != 0, "temp file left in %s", raw);
    tb_dataset_free(back);

    /* A 3-channel dataset goes through a 4-dimensional IDX. */
    tb_synthetic_cfg sc = {.n = 5, .c = 3, .h = 8, .w = 8, .seed = 1, .noise = -1};
    tb_dataset *syn = NULL, *syn_back = NULL;
    char im[1100], lb[1100];
    path_of(im, "syn-images");
    path_of(lb, "syn-labels");
    CHECK(tb_dataset_synthetic_create(&sc, &syn) == TB_OK, "synthetic");
    CHECK(tb_dataset_write_idx(syn, im, lb) == TB_OK, "write 4-d: %s", chain_text());
    rc = tb_dataset_open_idx(im, lb, "back", 10, 0, &syn_back);
    CHECK(rc == TB_OK && syn_back->c == 3 && syn_back->h == 8 &&
              memcmp(syn_back->images, syn->images, 5 * 3 * 64) == 0,
          "4-d roundtrip: %s", chain_text());
    tb_dataset_free(syn);
    tb_dataset_free(syn_back);
    tb_dataset_free(ds);
}

/* Expects tb_dataset_open_idx(images, labels) to fail with code and a chain
 * mentioning both want_file and want_text. */
static void expect_fail(const char *what, const char *images, const char *labels, long limit,
                        int code, const char *want_file, const char *want_text)
{
    printf("%s -> %s\n", what, tb_err_name(code));
    tb_error_clear();
    tb_dataset *ds = NULL;
    int rc = tb_dataset_open_idx(images, labels, "t", 10, limit, &ds);
    const char *text = chain_text();
    CHECK(rc == code, "%s: rc %d (%s), want %d; chain:\n%s", what, rc, tb_err_name(rc), code, text);
    CHECK(ds == NULL, "%s: dataset returned on failure", what);
    CHECK(strstr(tb_error_message(), want_file) != NULL, "%s: message does not name %s: %s",
          what, want_file, tb_error_message());
    CHECK(strstr(text, want_text) != NULL, "%s: chain lacks \"%s\":\n%s", what, want_text, text);
    printf("    %s\n", tb_error_message());
    tb_dataset_free(ds);
}

/* Images with a 3-dimension header of dims over a 64-byte body, written raw
 * (name) and gzipped (name.gz), beside labels: each must fail as TB_ERR_DATA
 * saying want_raw / want_gz. */
static void expect_fail_raw_and_gz(const char *what, const char *name, const uint32_t *dims,
                                   const char *labels, const char *want_raw,
                                   const char *want_gz)
{
    char p[1100], gz_name[256], gz_what[256];
    path_of(p, name);
    write_file(p, 0, 3, dims, 64, 0, 0);
    expect_fail(what, p, labels, 0, TB_ERR_DATA, p, want_raw);
    snprintf(gz_name, sizeof gz_name, "%s.gz", name);
    snprintf(gz_what, sizeof gz_what, "%s, gzip", what);
    path_of(p, gz_name);
    write_file(p, 1, 3, dims, 64, 0, 0);
    expect_fail(gz_what, p, labels, 0, TB_ERR_DATA, p, want_gz);
}

static void test_errors(void)
{
    char im[1100], lb[1100], p[1100], q[1100];
    uint32_t idims[3] = {20, 28, 28}, ldims[1] = {20};
    path_of(im, "good-images.gz");
    path_of(lb, "good-labels.gz");
    write_file(im, 1, 3, idims, 20 * 784, 0, 0);
    write_file(lb, 1, 1, ldims, 20, 10, 0);

    path_of(p, "bad-magic.gz");
    write_file(p, 1, 3, idims, 20 * 784, 0, 0x12345678);
    expect_fail("bad magic", p, lb, 0, TB_ERR_DATA, p, "not an IDX file");

    path_of(p, "bad-type.gz");
    write_file(p, 1, 3, idims, 20 * 784, 0, 0x00000d03);
    expect_fail("float element type", p, lb, 0, TB_ERR_DATA, p, "element type");

    path_of(p, "labels-as-images.gz");
    expect_fail("labels file where images belong", lb, lb, 0, TB_ERR_DATA, lb, "dimensions");

    /* a FIFO blocked the open for ever; a directory: named as such */
    path_of(p, "a-fifo");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    expect_fail("a FIFO where the images belong", p, lb, 0, TB_ERR_IO, p, "a FIFO");
    path_of(p, "a-dir");
    CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    expect_fail("a directory where the images belong", p, lb, 0, TB_ERR_IO, p, "a directory");

    path_of(p, "truncated.gz");
    write_file(p, 1, 3, idims, 15 * 784 + 100, 0, 0);
    expect_fail("truncated images", p, lb, 0, TB_ERR_DATA, p, "truncated");
    printf("  a limit inside the data that is there still reads\n");
    tb_dataset *ds = NULL;
    CHECK(tb_dataset_open_idx(p, lb, "t", 10, 10, &ds) == TB_OK && ds->n == 10, "limit 10 of truncated");
    tb_dataset_free(ds);

    /* The compressed stream itself cut in half. */
    path_of(q, "cut-stream.gz");
    {
        FILE *f = fopen(im, "rb");
        unsigned char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        f = fopen(q, "wb");
        fwrite(buf, 1, n / 2, f);
        fclose(f);
    }
    expect_fail("gzip stream cut in half", q, lb, 0, TB_ERR_DATA, q, q);

    path_of(p, "garbage-inside.gz");
    {
        FILE *f = fopen(im, "rb");
        unsigned char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        for (size_t i = 20; i < n - 8; i++)
            buf[i] ^= 0x5a;
        f = fopen(p, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
    }
    expect_fail("corrupt deflate data", p, lb, 0, TB_ERR_DATA, p, "gzip");

    path_of(p, "not-gzip.gz");
    {
        FILE *f = fopen(p, "wb");
        fputs("<html>404 not found</html>\n", f);
        fclose(f);
    }
    expect_fail("not gzip (an HTML page)", p, lb, 0, TB_ERR_DATA, p, "not an IDX file");

    path_of(p, "missing-images.gz");
    expect_fail("missing file", p, lb, 0, TB_ERR_IO, p, "No such file");

    path_of(p, "labels-11.gz");
    write_file(p, 1, 1, ldims, 20, 11, 0);
    expect_fail("label 10 with 10 classes", im, p, 0, TB_ERR_DATA, p, "out of range");

    path_of(p, "labels-19.gz");
    uint32_t l19[1] = {19};
    write_file(p, 1, 1, l19, 19, 10, 0);
    expect_fail("19 labels for 20 images", im, p, 0, TB_ERR_DATA, p, "19 labels");

    path_of(p, "trailing-raw");
    write_file(p, 0, 3, idims, 20 * 784 + 1, 0, 0);
    expect_fail("raw file with a trailing byte", p, lb, 0, TB_ERR_DATA, p, "trailing");

    path_of(p, "zero-dim.gz");
    uint32_t zero[3] = {20, 0, 28};
    write_file(p, 1, 3, zero, 0, 0, 0);
    expect_fail("zero dimension", p, lb, 0, TB_ERR_DATA, p, "dimension 1");

    /* 2^24 items of 2^20 x 2^20 bytes: each dimension is allowed, their
     * product is 2^64, which wrapped to 0 and read as an empty valid file */
    uint32_t huge[3] = {1u << 24, 1u << 20, 1u << 20};
    expect_fail_raw_and_gz("dimensions multiplying to 2^64", "wrapping-dims", huge, lb,
                           "more than memory can address", "more than memory can address");

    /* A 64-byte body under a header announcing 2^28 items of 64 x 64 bytes
     * (1 TiB): refused as truncated before any allocation, where it was
     * malloc'ed first (found by fuzz/idx_fuzz.c: ASan's
     * allocation-size-too-big; without ASan "cannot allocate"). */
    uint32_t tib[3] = {1u << 28, 64, 64};
    expect_fail_raw_and_gz("1 TiB announced by a file of 80 bytes", "terabyte-claim", tib, lb,
                           "truncated: the header announces 1099511627776 bytes",
                           "more than this gzip file can hold");

    tb_dataset *big = NULL;
    CHECK(tb_dataset_alloc(1 << 30, 1, 1 << 30, 1 << 30, 10, &big) == TB_ERR_INVALID && !big &&
              strstr(tb_error_message(), "more than memory can address"),
          "a dataset of 2^90 bytes is refused: %s", tb_error_message());
    tb_error_clear();
}

static void test_fmnist_errors(void)
{
    char d[1024];
    printf("Fashion-MNIST open: a missing directory is said as such, with the package\n");
    path_of(d, "nowhere");
    tb_error_clear();
    tb_dataset *ds = NULL;
    int rc = tb_dataset_open_fashion_mnist(d, TB_SPLIT_TEST, 0, &ds);
    CHECK(rc == TB_ERR_IO, "rc %d", rc);
    /* The newest entry says what to do, the one below names the file. */
    CHECK(strstr(tb_error_message(), "dataset-fashion-mnist") != NULL &&
              strstr(tb_error_message(), "TB_DATA_DIR") != NULL &&
              strstr(tb_error_message(), d) != NULL,
          "message: %s", tb_error_message());
    CHECK(strstr(tb_error_message(), "nowhere (from --data-dir) does not exist") != NULL,
          "message: %s", tb_error_message());
    printf("%s", chain_text());

    printf("Fashion-MNIST open: 20x20 images are refused\n");
    path_of(d, "small");
    char cmd[1200], im[1100], lb[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    CHECK(system(cmd) == 0, "mkdir");
    uint32_t idims[3] = {4, 20, 20}, ldims[1] = {4};
    tb_dataset_fashion_mnist_path(d, TB_SPLIT_TRAIN, 0, 1, im, sizeof im);
    tb_dataset_fashion_mnist_path(d, TB_SPLIT_TRAIN, 1, 1, lb, sizeof lb);
    write_file(im, 1, 3, idims, 4 * 400, 0, 0);
    write_file(lb, 1, 1, ldims, 4, 10, 0);
    tb_error_clear();
    rc = tb_dataset_open_fashion_mnist(d, TB_SPLIT_TRAIN, 0, &ds);
    CHECK(rc == TB_ERR_DATA && ds == NULL, "rc %d", rc);
    CHECK(strstr(tb_error_message(), im) != NULL, "message: %s", tb_error_message());
    printf("    %s\n", tb_error_message());

    printf("TB_DATA_DIR overrides the default directory\n");
    setenv(TB_DATA_DIR_ENV, d, 1);
    CHECK(strcmp(tb_dataset_default_dir(), d) == 0, "default dir %s", tb_dataset_default_dir());
    unsetenv(TB_DATA_DIR_ENV);
    CHECK(strcmp(tb_dataset_default_dir(), TB_FASHION_MNIST_DIR) == 0, "default dir %s",
          tb_dataset_default_dir());
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s/idx_test.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid();
    test_raw_roundtrip();
    test_errors();
    test_fmnist_errors();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    printf(failures ? "idx_test: %d FAILED\n" : "idx_test: all passed\n", failures);
    return failures != 0;
}
