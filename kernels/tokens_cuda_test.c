/*
 * tokens_cuda_test.c - the CUDA embedding launchers (kernels/tokens.cu)
 * link, start, and fail cleanly without a GPU; with one, they compute the
 * embedding and its gradients with the CPU backend's bits.
 *
 *   bazel test //kernels:tokens_cuda_test
 *
 * No usable device (this build machine: no driver): both launchers return
 * TB_ERR_CUDA with the CUDA error on the chain, no crash.
 * A device (not run where this was written): at GPT-2 small's width and
 * vocabulary (d 768, vocab 50,257, 2 x 256 tokens) and at odd sizes
 * (d 1, 33 and 300 over two column tiles; vocab 5 with repeated tokens and
 * 2053 over many buckets), forward and backward with each accumulate flag
 * both ways:
 *   forward   bitwise the reference (one float add both sides);
 *   backward  bitwise a plain float loop adding the rows in increasing
 *             order (the order lib/backend/backend.h promises, which the
 *             CPU backend also follows), and within 1e-5 of the double
 *             reference relative to the table's largest value;
 *   bad ids   a token of -1 or vocab: NaN in its row of y, nothing added
 *             to dwte (its position still gets dy).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tokens.h"
#include "lib/backend/ref/tokens.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"

#define TOL 1e-5

static int failures;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            failures++;                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

typedef struct shape {
    int rows, seq, d, vocab;
} shape;

static const shape SHAPES[] = {
    {1, 1, 1, 1}, {14, 7, 33, 5}, {18, 9, 300, 37}, {195, 65, 100, 2053}, {512, 256, 768, 50257},
};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])

static void test_no_device(void)
{
    const void *p = (const void *)(uintptr_t)256; /* never dereferenced */
    int rf = tb_cuda_embedding_fwd(p, p, p, 4, 2, 8, 3, (float *)p, NULL);
    int rb = tb_cuda_embedding_bwd(p, p, 4, 2, 8, 3, (float *)p, 0, (float *)p, 0, NULL);
    CHECK(rf == TB_ERR_CUDA && rb == TB_ERR_CUDA, "fwd %d bwd %d, want %d", rf, rb, TB_ERR_CUDA);
    printf("no device: launchers return TB_ERR_CUDA; the chain says:\n");
    tb_error_print(stdout);
    tb_error_clear();
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("out of memory\n");
        exit(1);
    }
    return p;
}

static void *upload(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 4) != cudaSuccess ||
        cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        printf("cudaMalloc/cudaMemcpy of %zu bytes failed\n", bytes);
        exit(1);
    }
    return d;
}

static void download(void *host, const void *dev, size_t bytes)
{
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("cudaMemcpy back of %zu bytes failed\n", bytes);
        exit(1);
    }
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        e = d > e || isnan(d) ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / (m > 1e-30 ? m : 1e-30);
}

/* The promised order in float: from 0 or the old value, rows increasing;
 * ids outside [0, vocab) add nothing to dwte. */
static void bwd_in_order(const shape *s, const int32_t *tok, const float *dy, float *te,
                         int acc_te, float *pe, int acc_pe)
{
    if (!acc_te)
        memset(te, 0, sizeof *te * (size_t)s->vocab * s->d);
    if (!acc_pe)
        memset(pe, 0, sizeof *pe * (size_t)s->seq * s->d);
    for (int r = 0; r < s->rows; r++)
        for (int c = 0; c < s->d; c++) {
            float g = dy[(size_t)r * s->d + c];
            if (tok[r] >= 0 && tok[r] < s->vocab)
                te[(size_t)tok[r] * s->d + c] += g;
            pe[(size_t)(r % s->seq) * s->d + c] += g;
        }
}

static void test_shape(const shape *s, tb_rng *rng)
{
    size_t ny = (size_t)s->rows * s->d, nte = (size_t)s->vocab * s->d;
    size_t npe = (size_t)s->seq * s->d;
    int32_t *tok = xmalloc(sizeof *tok * (size_t)s->rows);
    float *wte = xmalloc(nte * 4), *wpe = xmalloc(npe * 4), *dy = xmalloc(ny * 4);
    float *y = xmalloc(ny * 4), *want = xmalloc(ny * 4);
    for (int r = 0; r < s->rows; r++)
        tok[r] = (int32_t)tb_rng_below(rng, (uint32_t)s->vocab);
    tb_rng_fill(wte, nte, tb_rng_next_u64(rng), -1, 1);
    tb_rng_fill(wpe, npe, tb_rng_next_u64(rng), -1, 1);
    tb_rng_fill(dy, ny, tb_rng_next_u64(rng), -1, 1);
    int32_t *dtok = upload(tok, sizeof *tok * (size_t)s->rows);
    float *dwte = upload(wte, nte * 4), *dwpe = upload(wpe, npe * 4), *ddy = upload(dy, ny * 4);
    float *dout = upload(y, ny * 4);

    int rc = tb_cuda_embedding_fwd(dtok, dwte, dwpe, s->rows, s->seq, s->d, s->vocab, dout, NULL);
    download(y, dout, ny * 4);
    tb_ref_embedding_fwd(tok, wte, wpe, s->rows, s->seq, s->d, s->vocab, want);
    CHECK(rc == TB_OK && !memcmp(y, want, ny * 4),
          "forward rows=%d d=%d vocab=%d: not bitwise the reference (rel err %.2g)", s->rows,
          s->d, s->vocab, rel_err(y, want, ny));

    float *te = xmalloc(nte * 4), *pe = xmalloc(npe * 4), *te_ord = xmalloc(nte * 4);
    float *pe_ord = xmalloc(npe * 4), *te_ref = xmalloc(nte * 4), *pe_ref = xmalloc(npe * 4);
    float *gte = upload(wte, nte * 4), *gpe = upload(wpe, npe * 4);
    for (int acc = 0; acc < 4; acc++) {
        int at = acc & 1, ap = acc >> 1;
        /* start from the tables' values: random, what accumulate adds to */
        memcpy(te_ord, wte, nte * 4), memcpy(pe_ord, wpe, npe * 4);
        memcpy(te_ref, wte, nte * 4), memcpy(pe_ref, wpe, npe * 4);
        cudaMemcpy(gte, wte, nte * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(gpe, wpe, npe * 4, cudaMemcpyHostToDevice);
        rc = tb_cuda_embedding_bwd(dtok, ddy, s->rows, s->seq, s->d, s->vocab, gte, at, gpe, ap,
                                   NULL);
        download(te, gte, nte * 4);
        download(pe, gpe, npe * 4);
        bwd_in_order(s, tok, dy, te_ord, at, pe_ord, ap);
        tb_ref_embedding_bwd(tok, dy, s->rows, s->seq, s->d, s->vocab, te_ref, at, pe_ref, ap);
        double e = fmax(rel_err(te, te_ref, nte), rel_err(pe, pe_ref, npe));
        CHECK(rc == TB_OK && !memcmp(te, te_ord, nte * 4) && !memcmp(pe, pe_ord, npe * 4) &&
                  e <= TOL,
              "backward rows=%d d=%d vocab=%d acc_wte=%d acc_wpe=%d: rc %d, bitwise in order "
              "%d/%d, rel err %.2g", s->rows, s->d, s->vocab, at, ap, rc,
              !memcmp(te, te_ord, nte * 4), !memcmp(pe, pe_ord, npe * 4), e);
        printf("rows=%d seq=%d d=%d vocab=%d acc_wte=%d acc_wpe=%d: rel err %.2g\n", s->rows,
               s->seq, s->d, s->vocab, at, ap, e);
    }

    /* bad ids: NaN rows forward, nothing added to dwte backward */
    tok[0] = -1;
    tok[s->rows - 1] = s->vocab;
    cudaMemcpy(dtok, tok, sizeof *tok * (size_t)s->rows, cudaMemcpyHostToDevice);
    rc = tb_cuda_embedding_fwd(dtok, dwte, dwpe, s->rows, s->seq, s->d, s->vocab, dout, NULL);
    download(y, dout, ny * 4);
    CHECK(rc == TB_OK && isnan(y[0]) && isnan(y[ny - 1]), "bad ids: rows of y not NaN");
    memcpy(te_ord, wte, nte * 4), memcpy(pe_ord, wpe, npe * 4);
    cudaMemcpy(gte, wte, nte * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(gpe, wpe, npe * 4, cudaMemcpyHostToDevice);
    rc = tb_cuda_embedding_bwd(dtok, ddy, s->rows, s->seq, s->d, s->vocab, gte, 1, gpe, 1, NULL);
    download(te, gte, nte * 4);
    download(pe, gpe, npe * 4);
    bwd_in_order(s, tok, dy, te_ord, 1, pe_ord, 1);
    CHECK(rc == TB_OK && !memcmp(te, te_ord, nte * 4) && !memcmp(pe, pe_ord, npe * 4),
          "bad ids: backward not the in-order sums without them");

    cudaFree(dtok), cudaFree(dwte), cudaFree(dwpe), cudaFree(ddy), cudaFree(dout);
    cudaFree(gte), cudaFree(gpe);
    free(tok), free(wte), free(wpe), free(dy), free(y), free(want), free(te), free(pe);
    free(te_ord), free(pe_ord), free(te_ref), free(pe_ref);
}

int main(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("no usable CUDA device (%s, %d)\n", cudaGetErrorName(e), (int)e);
        test_no_device();
    } else {
        printf("%d CUDA device(s): running the kernels\n", count);
        tb_rng rng = tb_rng_seeded(0x746f6b656e733032ull);
        for (size_t i = 0; i < N_SHAPES; i++)
            test_shape(&SHAPES[i], &rng);
    }
    if (failures) {
        printf("tokens_cuda_test: %d FAILED\n", failures);
        return 1;
    }
    printf("tokens_cuda_test: all passed\n");
    return 0;
}
