/*
 * alloc_test.c - the caching allocator (lib/backend/cuda/alloc.c) without a
 * GPU: the test links with -Wl,--wrap for cudaMalloc, cudaFree and
 * cudaSetDevice, so "device memory" is host memory from a fake with a
 * capacity, and every decision of the allocator can be checked: size
 * rounding, small and large pools, best-fit reuse, splitting, merging,
 * plain mode, empty cache, preallocation, the limit, and the OOM path that
 * empties the cache and retries once.
 *
 * Run: bazel test //lib/backend/cuda:cuda_alloc_test
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

/* ---- the fake device ---- */
static size_t fake_capacity = (size_t)256 << 20;
static size_t fake_used;
static long fake_mallocs, fake_frees;

typedef struct fake_block {
    void *p;
    size_t n;
} fake_block;
static fake_block fake[1024];

/* A stream capture in thread-local mode (graph.c), as the device sees it:
 * the capturing thread's cudaMalloc is refused unless it switched to
 * relaxed mode first (cudaThreadExchangeStreamCaptureMode). */
static int fake_capturing;
static enum cudaStreamCaptureMode fake_mode = cudaStreamCaptureModeThreadLocal;

cudaError_t __wrap_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old = fake_mode;
    fake_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

cudaError_t __wrap_cudaMalloc(void **p, size_t n)
{
    if (fake_capturing && fake_mode != cudaStreamCaptureModeRelaxed) {
        *p = NULL;
        return cudaErrorStreamCaptureUnsupported;
    }
    if (fake_used + n > fake_capacity) {
        *p = NULL;
        return cudaErrorMemoryAllocation;
    }
    for (int i = 0; i < 1024; i++) {
        if (!fake[i].p) {
            fake[i].p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
            fake[i].n = n;
            fake_used += n;
            fake_mallocs++;
            *p = fake[i].p;
            return cudaSuccess;
        }
    }
    return cudaErrorMemoryAllocation;
}

cudaError_t __wrap_cudaFree(void *p)
{
    if (fake_capturing)
        return cudaErrorStreamCaptureUnsupported;
    for (int i = 0; i < 1024; i++) {
        if (fake[i].p == p) {
            free(p);
            fake_used -= fake[i].n;
            fake[i].p = NULL;
            fake_frees++;
            return cudaSuccess;
        }
    }
    return cudaErrorInvalidValue;
}

cudaError_t __wrap_cudaSetDevice(int d)
{
    (void)d;
    return cudaSuccess;
}

/* ---- checks ---- */

#define MiB ((size_t)1 << 20)

static size_t cuda_ctx_alloc_held(tb_backend *be)
{
    return tb_cuda_ctx(be)->alloc.held_bytes + (tb_cuda_ctx(be)->alloc.held != NULL);
}

static size_t in_use(tb_backend *be)
{
    size_t u, p;
    be->mem_stats(be, &u, &p);
    return u;
}

static void check_small_pool(tb_backend *be)
{
    void *a, *b, *c, *d;
    long m0 = fake_mallocs;
    CHECK(be->dev_alloc(be, &a, 1000) == TB_OK, "alloc 1000");
    CHECK(be->dev_alloc(be, &b, 3000) == TB_OK, "alloc 3000");
    CHECK(fake_mallocs == m0 + 1, "two small requests share one segment (%ld mallocs)",
          fake_mallocs - m0);
    CHECK((char *)b - (char *)a == 1024, "1000 bytes round up to 1024 (b - a = %td)",
          (char *)b - (char *)a);
    CHECK(in_use(be) == 4000, "in use counts requested bytes exactly: %zu", in_use(be));
    CHECK(be->dev_alloc(be, &c, 512) == TB_OK, "alloc 512");
    CHECK(be->dev_free(be, b) == TB_OK && be->dev_free(be, a) == TB_OK, "free b, a");
    /* a (1024) and b (3072) merged: a 4096-byte request fits there exactly */
    CHECK(be->dev_alloc(be, &d, 4096) == TB_OK && d == a, "freed neighbours merge and are reused");
    CHECK(fake_mallocs == m0 + 1, "no new segment for reuse");
    be->dev_free(be, c);
    be->dev_free(be, d);
    CHECK(in_use(be) == 0, "all freed: in use %zu", in_use(be));
    long f0 = fake_frees;
    CHECK(be->mem_empty_cache(be) == TB_OK, "empty_cache");
    CHECK(fake_frees == f0 + 1 && fake_used == 0, "empty_cache returns the idle segment");
}

static void check_large_pool(tb_backend *be)
{
    void *a, *b, *c;
    long m0 = fake_mallocs;
    CHECK(be->dev_alloc(be, &a, 3 * MiB) == TB_OK, "alloc 3 MiB");
    CHECK(fake_used == 4 * MiB, "large segments round up to 2 MiB: %zu", fake_used);
    be->dev_free(be, a);
    CHECK(be->dev_alloc(be, &b, MiB + 1) == TB_OK && b == a, "cached block reused best-fit");
    CHECK(be->dev_alloc(be, &c, MiB + MiB / 2) == TB_OK, "alloc 1.5 MiB");
    CHECK(fake_mallocs == m0 + 1 && (char *)c == (char *)b + MiB + 512,
          "the rest of a split block serves the next request");
    be->dev_free(be, b);
    be->dev_free(be, c);
    be->mem_empty_cache(be);
    CHECK(fake_used == 0, "large segment returned");
}

static void check_plain(tb_backend *be)
{
    void *a;
    CHECK(be->mem_set_mode(be, TB_MEM_PLAIN, 0) == TB_OK, "plain mode");
    long m0 = fake_mallocs, f0 = fake_frees;
    CHECK(be->dev_alloc(be, &a, 1000) == TB_OK, "plain alloc");
    CHECK(fake_mallocs == m0 + 1 && fake_used == 1000, "one cudaMalloc of the exact size");
    be->dev_free(be, a);
    CHECK(fake_frees == f0 + 1 && fake_used == 0, "one cudaFree per free");
    CHECK(be->mem_set_mode(be, TB_MEM_PLAIN, MiB) == TB_ERR_INVALID, "no reserve in plain mode");
    tb_error_clear();
    CHECK(be->mem_set_mode(be, TB_MEM_CACHING, 0) == TB_OK, "back to caching");
}

static void check_reserve(tb_backend *be)
{
    void *a, *b;
    CHECK(be->mem_set_mode(be, TB_MEM_CACHING, 64 * MiB) == TB_OK, "reserve 64 MiB");
    long m0 = fake_mallocs;
    CHECK(be->dev_alloc(be, &a, 10 * MiB) == TB_OK && be->dev_alloc(be, &b, 20 * MiB) == TB_OK,
          "allocs from the reserve");
    CHECK(fake_mallocs == m0, "no cudaMalloc while the reserve has room");
    be->dev_free(be, a);
    be->dev_free(be, b);
    be->mem_empty_cache(be);
    CHECK(fake_used == 64 * MiB, "empty_cache keeps the reserve");
    CHECK(be->mem_set_mode(be, TB_MEM_CACHING, 0) == TB_OK && fake_used == 0,
          "reserve 0 returns it");
}

static void check_oom(tb_backend *be)
{
    void *a, *b, *c;
    fake_capacity = 100 * MiB;
    CHECK(be->dev_alloc(be, &a, 64 * MiB) == TB_OK, "64 MiB");
    be->dev_free(be, a); /* cached, 64 MiB held */
    CHECK(be->dev_alloc(be, &b, 80 * MiB) == TB_OK, "80 MiB fits after the cache is emptied");
    CHECK(fake_used == 80 * MiB, "the cached 64 MiB went back first: %zu", fake_used);
    tb_error_clear();
    int rc = be->dev_alloc(be, &c, 200 * MiB);
    CHECK(rc == TB_ERR_DEVICE_OOM && c == NULL, "200 MiB is TB_ERR_DEVICE_OOM");
    CHECK(strstr(tb_error_message(), "--batch-size") != NULL, "OOM suggests a smaller batch: %s",
          tb_error_message());
    CHECK(tb_error_depth() == 1, "one error entry, not one per attempt (%d)", tb_error_depth());
    tb_error_clear();
    be->dev_free(be, b);
    be->mem_empty_cache(be);
    fake_capacity = (size_t)256 << 20;
}

static void check_limit_and_peak(tb_backend *be)
{
    void *a, *b = NULL;
    size_t u, p;
    be->mem_reset_peak(be);
    be->mem_set_limit(be, 5000);
    CHECK(be->dev_alloc(be, &a, 4000) == TB_OK, "4000 within the limit");
    CHECK(be->dev_alloc(be, &b, 2000) == TB_ERR_DEVICE_OOM && !b, "past the limit: OOM");
    tb_error_clear();
    be->mem_set_limit(be, 0);
    be->mem_stats(be, &u, &p);
    CHECK(u == 4000 && p == 4000, "in use %zu, peak %zu", u, p);
    be->dev_free(be, a);
    be->mem_stats(be, &u, &p);
    CHECK(u == 0 && p == 4000, "after free: in use %zu, peak %zu", u, p);
    be->mem_reset_peak(be);
    be->mem_stats(be, &u, &p);
    CHECK(p == 0, "reset peak");
    int x;
    CHECK(be->dev_free(be, &x) == TB_ERR_INVALID, "foreign pointer");
    tb_error_clear();
}

/* The autotuner's scratch: straight to the device and back, never cached,
 * never counted (a 100 MiB workspace must not be the run's peak). */
static void check_transient(tb_backend *be)
{
    size_t u0, p0, u1, p1;
    void *ws = NULL;
    be->mem_stats(be, &u0, &p0);
    size_t used0 = fake_used;
    long m0 = fake_mallocs, f0 = fake_frees;
    CHECK(tb_cuda_transient_alloc(be, &ws, 100 * MiB) == TB_OK && ws, "transient 100 MiB");
    CHECK(fake_mallocs == m0 + 1 && fake_used == used0 + 100 * MiB,
          "one cudaMalloc of exactly the size asked");
    be->mem_stats(be, &u1, &p1);
    CHECK(u1 == u0 && p1 == p0, "not counted: in_use %zu -> %zu, peak %zu -> %zu", u0, u1, p0,
          p1);
    CHECK(tb_cuda_transient_free(be, ws) == TB_OK && fake_frees == f0 + 1 && fake_used == used0,
          "freed to the device at once: nothing stays reserved");
    CHECK(tb_cuda_transient_alloc(be, &ws, fake_capacity + MiB) == TB_ERR_DEVICE_OOM && !ws,
          "more than the device has: TB_ERR_DEVICE_OOM");
    tb_error_clear();
    CHECK(tb_cuda_transient_alloc(be, &ws, 0) == TB_OK && !ws &&
              tb_cuda_transient_free(be, NULL) == TB_OK, "0 bytes and NULL: nothing to do");
}

/* CUDA graphs: what a capture freed, allocated or used is held while a
 * graph lives (a replay writes those addresses), and reused after; within
 * the capture, what it freed serves its later allocations, and a segment
 * it still needs is allocated in relaxed capture mode. */
static void check_graph_hold(tb_backend *be)
{
    void *before, *tmp, *other, *kept, *again, *scratch_p, *pre, *pre_again;
    CHECK(be->dev_alloc(be, &before, 4096) == TB_OK, "alloc before the capture");
    CHECK(be->dev_alloc(be, &pre, 8192) == TB_OK, "another, freed during the capture");
    tb_cuda_alloc_capture_begin(be);
    fake_capturing = 1;
    /* a block from before the capture (another live graph may use it) is
     * held, not handed to the capture's own allocations */
    CHECK(be->dev_free(be, pre) == TB_OK &&
              be->dev_alloc(be, &pre_again, 8192) == TB_OK && pre_again != pre,
          "a block from before the capture, freed in it, is not reused in it");
    CHECK(be->dev_alloc(be, &tmp, 4096) == TB_OK, "a captured step's temporary");
    CHECK(be->dev_free(be, tmp) == TB_OK, "freed within the capture");
    CHECK(in_use(be) == 4096 + 8192, "held bytes are out of in_use: %zu", in_use(be));
    long m0 = fake_mallocs;
    CHECK(be->dev_alloc(be, &other, 4096) == TB_OK && other == tmp && fake_mallocs == m0,
          "the capture's freed temporary serves its next allocation of that size (as eager "
          "execution's would)");
    /* a per-layer temporary of GPT-2's size, freed and asked for again layer
     * after layer: one segment, not one a layer */
    void *big;
    CHECK(be->dev_alloc(be, &big, 64 * MiB) == TB_OK && fake_mallocs == m0 + 1,
          "a segment the capture needs: cudaMalloc in relaxed mode (%ld mallocs)",
          fake_mallocs - m0);
    CHECK(fake_mode == cudaStreamCaptureModeThreadLocal, "the capture mode restored after it");
    for (int layer = 0; layer < 12; layer++) {
        void *t = NULL;
        CHECK(be->dev_free(be, big) == TB_OK && be->dev_alloc(be, &t, 64 * MiB) == TB_OK &&
                  t == big, "layer %d's temporary reuses the last one's", layer);
        big = t;
    }
    CHECK(fake_mallocs == m0 + 1, "12 layers, one segment: %ld mallocs", fake_mallocs - m0);
    CHECK(be->dev_free(be, big) == TB_OK, "the last layer's temporary freed in the capture");
    long f0 = fake_frees;
    void *huge = NULL;
    CHECK(be->dev_alloc(be, &huge, fake_capacity) == TB_ERR_DEVICE_OOM && !huge &&
              fake_frees == f0, "out of memory inside a capture: no cudaFree there");
    tb_error_clear();
    cuda_scratch s = {0};
    CHECK(tb_cuda_scratch_get(be, &s, 2048, &scratch_p) == TB_OK, "scratch used by the capture");
    fake_capturing = 0;
    CHECK(tb_cuda_alloc_capture_end(be, 1) == TB_OK, "capture made a graph");
    void *after_big;
    CHECK(be->dev_alloc(be, &after_big, 64 * MiB) == TB_OK && after_big != big,
          "the capture's freed temporaries are held once it ends");
    be->dev_free(be, after_big);
    CHECK(be->dev_alloc(be, &kept, 4096) == TB_OK && kept != tmp,
          "after the capture, the graph's temporary stays held");
    CHECK(be->dev_free(be, other) == TB_OK, "a block the capture allocated, freed after it");
    CHECK(be->dev_alloc(be, &again, 4096) == TB_OK && again != other && again != tmp,
          "...held too");
    void *bigger;
    CHECK(tb_cuda_scratch_get(be, &s, 8192, &bigger) == TB_OK && bigger != scratch_p,
          "scratch grown while the graph lives");
    void *small;
    CHECK(be->dev_alloc(be, &small, 2048) == TB_OK && small != scratch_p,
          "the scratch the graph used is held, not reused");
    CHECK(be->dev_free(be, before) == TB_OK, "a block from before the capture: its owner's");
    void *reuse;
    CHECK(be->dev_alloc(be, &reuse, 4096) == TB_OK && reuse == before,
          "freed normally: reused at once");
    CHECK(tb_cuda_alloc_graph_destroyed(be) == TB_OK, "the graph destroyed");
    void *back;
    CHECK(be->dev_alloc(be, &back, 4096) == TB_OK && back == tmp,
          "the held blocks go back to the free lists");
    void *ptrs[] = {back, reuse, small, bigger, again, kept, pre_again};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        be->dev_free(be, ptrs[i]);
    CHECK(in_use(be) == 0, "all freed: in use %zu", in_use(be));
    CHECK(cuda_ctx_alloc_held(be) == 0, "nothing held once no graph lives");
    /* a capture that failed holds nothing after it */
    tb_cuda_alloc_capture_begin(be);
    CHECK(be->dev_alloc(be, &tmp, 4096) == TB_OK && be->dev_free(be, tmp) == TB_OK, "temp");
    CHECK(tb_cuda_alloc_capture_end(be, 0) == TB_OK && cuda_ctx_alloc_held(be) == 0,
          "a failed capture's temporaries go back at its end");
    be->mem_empty_cache(be);
}

int main(void)
{
    tb_backend *be = calloc(1, sizeof *be);
    be->ctx = calloc(1, sizeof(cuda_ctx));
    tb_backend_cuda_fill_table(be);

    check_small_pool(be);
    check_large_pool(be);
    check_plain(be);
    check_reserve(be);
    check_oom(be);
    check_limit_and_peak(be);
    check_transient(be);
    check_graph_hold(be);

    void *leak;
    be->dev_alloc(be, &leak, 12345);
    CHECK(tb_cuda_alloc_release(be) == TB_OK && fake_used == 0,
          "release returns everything, live blocks too");
    CHECK(fake_mallocs == fake_frees, "%ld cudaMalloc, %ld cudaFree", fake_mallocs, fake_frees);
    free(be->ctx);
    free(be);
    printf("%s (%d failure%s)\n", failures ? "FAILED" : "ok", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
