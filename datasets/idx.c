/*
 * idx.c - IDX reader (gzip or raw) and atomic raw writer; see idx.h.
 * Tests: bazel test //datasets:idx_test
 */
#define _DEFAULT_SOURCE /* mkstemp, fchmod under -std=c11 */
#include "datasets/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* One open input: either a zlib stream or a plain stdio file. */
typedef struct idx_stream {
    const char *path;
    gzFile gz;
    FILE *f;
    size_t most;   /* the most bytes it can yield; SIZE_MAX when unknown */
} idx_stream;

/* Deflate turns one input byte into at most 1032 output bytes (its best
 * ratio is 258 bytes per 2 bits): the most a gzip file of n bytes inflates to. */
#define GZIP_MAX_RATIO 1032u

/* What a regular file of its size can yield, raw or inflated: a bound for a
 * header's claim, so a corrupt header cannot make the reader allocate
 * terabytes before it finds the file short. */
static void stream_bound(idx_stream *s, FILE *f)
{
    struct stat st;
    s->most = SIZE_MAX;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        return;
    size_t n = (size_t)st.st_size;
    if (s->gz == NULL)
        s->most = n;
    else if (n <= SIZE_MAX / GZIP_MAX_RATIO)
        s->most = n * GZIP_MAX_RATIO;
}

static int stream_open(idx_stream *s, const char *path)
{
    unsigned char magic[2] = {0, 0};
    memset(s, 0, sizeof *s);
    s->path = path;
    /* a FIFO or a device would block the open (or the read) for ever, a
     * directory fails later with a puzzling error: a regular file only */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return TB_FAIL(TB_ERR_IO, "%s is not a regular file (%s): point the dataset at the "
                       "IDX files themselves", path,
                       S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                                                   : "a device");
    FILE *f = fopen(path, "rb");
    TB_CHECK_IO(!f, "cannot open %s", path);
    size_t got = fread(magic, 1, 2, f);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        /* gzopen on a file that just opened fine fails only for lack of memory. */
        s->gz = gzopen(path, "rb");
        stream_bound(s, f);
        fclose(f);
        if (!s->gz)
            return TB_FAIL(TB_ERR_IO, "cannot open %s through zlib", path);
        gzbuffer(s->gz, 1 << 17);
        return TB_OK;
    }
    rewind(f);
    s->f = f;
    stream_bound(s, f);
    return TB_OK;
}

static void stream_close(idx_stream *s)
{
    if (s->gz)
        gzclose(s->gz);
    if (s->f)
        fclose(s->f);
    s->gz = NULL;
    s->f = NULL;
}

/* Reads up to n bytes; *got says how many arrived before end of file.
 * Fails on a read error or on corrupt gzip data (not on a short read). */
static int stream_read(idx_stream *s, void *buf, size_t n, size_t *got)
{
    *got = 0;
    if (s->f) {
        *got = fread(buf, 1, n, s->f);
        TB_CHECK_IO(*got < n && ferror(s->f), "cannot read %s", s->path);
        return TB_OK;
    }
    /* gzread takes an unsigned count: go in chunks below 1 GiB. */
    unsigned char *p = buf;
    while (*got < n) {
        size_t want = n - *got;
        unsigned chunk = want > (1u << 30) ? (1u << 30) : (unsigned)want;
        int r = gzread(s->gz, p + *got, chunk);
        if (r < 0) {
            int zerr = 0;
            const char *why = gzerror(s->gz, &zerr);
            if (zerr == Z_ERRNO)
                return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot read %s", s->path);
            return TB_FAIL(TB_ERR_DATA, "%s: corrupt gzip data (%s)", s->path, why);
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    /* zlib reports a stream cut short as an error only on the next read;
     * a short read is reported as truncation by the caller either way. */
    return TB_OK;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Reads and checks the magic and dimensions; fills ndim, dims, file_count. */
static int read_header(idx_stream *s, int ndim_min, int ndim_max, idx_array *a)
{
    unsigned char b[4 * (1 + IDX_MAX_DIMS)];
    size_t got;
    TB_TRY(stream_read(s, b, 4, &got));
    if (got < 4)
        return TB_FAIL(TB_ERR_DATA, "%s: truncated: %zu bytes, too short for an IDX header",
                       s->path, got);
    uint32_t magic = be32(b);
    int type = (magic >> 8) & 0xff, ndim = magic & 0xff;
    if ((magic >> 16) != 0 || ndim < 1 || ndim > IDX_MAX_DIMS)
        return TB_FAIL(TB_ERR_DATA, "%s: not an IDX file (magic 0x%08x); expected a gzip-"
                       "compressed or raw IDX file", s->path, magic);
    if (type != IDX_TYPE_U8)
        return TB_FAIL(TB_ERR_DATA, "%s: IDX element type 0x%02x, expected 0x08 (uint8)",
                       s->path, type);
    if (ndim < ndim_min || ndim > ndim_max)
        return TB_FAIL(TB_ERR_DATA, "%s: IDX magic 0x%08x has %d dimensions, expected %d..%d",
                       s->path, magic, ndim, ndim_min, ndim_max);
    TB_TRY(stream_read(s, b, 4 * (size_t)ndim, &got));
    if (got < 4 * (size_t)ndim)
        return TB_FAIL(TB_ERR_DATA, "%s: truncated inside the IDX header", s->path);
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        a->dims[i] = be32(b + 4 * i);
        if (a->dims[i] == 0 || a->dims[i] > (1u << 28))
            return TB_FAIL(TB_ERR_DATA, "%s: dimension %d is %u, outside 1..2^28",
                           s->path, i, a->dims[i]);
    }
    a->file_count = a->dims[0];
    return TB_OK;
}

/* Bytes of one item (the product of dims[1..]); fails on overflow. */
static int item_bytes(const char *path, const idx_array *a, size_t *out)
{
    size_t item = 1;
    for (int i = 1; i < a->ndim; i++) {
        if (item > ((size_t)1 << 40) / a->dims[i])
            return TB_FAIL(TB_ERR_DATA, "%s: item size overflows", path);
        item *= a->dims[i];
    }
    *out = item;
    return TB_OK;
}

/* Reads the body into a->data; checks the exact byte count when whole. */
static int read_body(idx_stream *s, long limit, idx_array *a)
{
    size_t item = 0;
    TB_TRY(item_bytes(s->path, a, &item));
    int whole = limit <= 0 || (unsigned long)limit >= a->file_count;
    uint32_t count = whole ? a->file_count : (uint32_t)limit;
    size_t want, got;
    /* dimensions up to 2^28 each can multiply past 2^64, which would wrap to
     * a small size and read as an empty, valid file */
    if (__builtin_mul_overflow(item, (size_t)count, &want))
        return TB_FAIL(TB_ERR_DATA, "%s: the header announces %u items of %zu bytes, more "
                       "than memory can address; not a real IDX file", s->path, count, item);
    if (want > s->most)
        return TB_FAIL(TB_ERR_DATA, "%s: truncated: the header announces %zu bytes of items, "
                       "more than this %s file can hold", s->path, want,
                       s->gz ? "gzip" : "raw");
    a->data = malloc(want ? want : 1);
    if (!a->data)
        return TB_FAIL(TB_ERR_NOMEM, "%s: cannot allocate %zu bytes", s->path, want);
    TB_TRY(stream_read(s, a->data, want, &got));
    if (got < want)
        return TB_FAIL(TB_ERR_DATA, "%s: truncated: header announces %u items of %zu bytes "
                       "(%zu bytes), file ends after %zu", s->path, a->file_count, item,
                       item * a->file_count, got);
    if (whole) {
        unsigned char extra;
        TB_TRY(stream_read(s, &extra, 1, &got));
        if (got != 0)
            return TB_FAIL(TB_ERR_DATA, "%s: trailing bytes after the %zu the header announces",
                           s->path, want);
    }
    a->dims[0] = count;
    a->bytes = want;
    return TB_OK;
}

int tb_idx_read(const char *path, int ndim_min, int ndim_max, long limit, idx_array *out)
{
    idx_stream s;
    memset(out, 0, sizeof *out);
    TB_TRY(stream_open(&s, path));
    out->gzipped = s.gz != NULL;
    int rc;
    TB_TRY_GOTO(rc, read_header(&s, ndim_min, ndim_max, out), out_close);
    TB_TRY_GOTO(rc, read_body(&s, limit, out), out_close);
    stream_close(&s);
    return TB_OK;
out_close:
    stream_close(&s);
    tb_idx_free(out);
    return rc;
}

void tb_idx_free(idx_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

static int write_all(int fd, const void *buf, size_t n, const char *path)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        TB_CHECK_IO(w < 0, "cannot write %s", path);
        p += w;
        n -= (size_t)w;
    }
    return TB_OK;
}

int tb_idx_write(const char *path, int ndim, const uint32_t *dims, const uint8_t *data)
{
    if (ndim < 1 || ndim > IDX_MAX_DIMS)
        return TB_FAIL(TB_ERR_INVALID, "tb_idx_write %s: %d dimensions", path, ndim);
    unsigned char hdr[4 * (1 + IDX_MAX_DIMS)];
    uint32_t words[1 + IDX_MAX_DIMS];
    size_t total = 1;
    words[0] = (uint32_t)IDX_TYPE_U8 << 8 | (uint32_t)ndim;
    for (int i = 0; i < ndim; i++) {
        words[1 + i] = dims[i];
        total *= dims[i];
    }
    for (int i = 0; i <= ndim; i++) {
        hdr[4 * i] = words[i] >> 24;
        hdr[4 * i + 1] = words[i] >> 16;
        hdr[4 * i + 2] = words[i] >> 8;
        hdr[4 * i + 3] = words[i];
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
        return TB_FAIL(TB_ERR_INVALID, "tb_idx_write: path too long: %s", path);
    int fd = mkstemp(tmp);
    TB_CHECK_IO(fd < 0, "cannot create a temp file beside %s", path);
    int rc;
    /* mkstemp makes the file 0600; a data file is meant to be shared. */
    if (fchmod(fd, 0644) != 0) {
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot chmod %s", tmp);
        goto out_unlink;
    }
    TB_TRY_GOTO(rc, write_all(fd, hdr, 4 * (size_t)(ndim + 1), tmp), out_unlink);
    TB_TRY_GOTO(rc, write_all(fd, data, total, tmp), out_unlink);
    if (close(fd) != 0) {
        fd = -1;
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot write %s", tmp);
        goto out_unlink;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot rename %s to %s", tmp, path);
        goto out_unlink;
    }
    return TB_OK;
out_unlink:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}
