/*
 * alloc.c - the CUDA backend's device allocator: the slots dev_alloc,
 * dev_free, mem_stats, mem_reset_peak, mem_set_limit, mem_empty_cache and
 * mem_set_mode of lib/backend/backend.h. It is what the "caching allocator"
 * technique measures.
 *
 * Modes (tb_mem_mode, set with mem_set_mode):
 *   TB_MEM_CACHING (default) as PyTorch's CUDA caching allocator: sizes are
 *                  rounded up to 512 bytes; freed blocks go to free lists
 *                  binned by floor(log2(size)) and are reused best-fit
 *                  (smallest block that fits, lowest address among equals).
 *                  Two pools, as PyTorch's: requests of at most 1 MiB come
 *                  from 2 MiB segments shared by many small blocks, larger
 *                  ones from segments rounded up to 2 MiB (cudaMalloc's own
 *                  granularity). Blocks are SPLIT: a free block larger than
 *                  the request by 512 bytes or more is cut, the rest stays
 *                  free; a freed block merges with free neighbours of its
 *                  segment. Nothing goes back to the device until
 *                  mem_empty_cache (or an allocation that would otherwise fail).
 *   TB_MEM_PLAIN   one cudaMalloc per dev_alloc (of the exact size asked)
 *                  and one cudaFree per dev_free, as with
 *                  PYTORCH_NO_CUDA_MEMORY_CACHING=1: the baseline whose cost
 *                  (cudaFree synchronizes the device) the technique shows.
 *   preallocation  mem_set_mode(TB_MEM_CACHING, N): one segment of N bytes
 *                  reserved up front, which the large pool splits for any
 *                  request; sized for the largest batch, it serves varying
 *                  batch sizes without new cudaMallocs or fragmentation.
 *                  mem_empty_cache keeps it; mem_set_mode(..., 0) returns it.
 *   empty cache    mem_empty_cache: cudaFree of every segment with no live
 *                  block (torch.cuda.empty_cache()); calling it every step
 *                  is the technique's "what not to do" setting.
 *
 * Counting: in_use and peak are the bytes callers asked for (not rounded),
 * exact, so they compare with the CPU backend's. The limit (--mem-limit)
 * applies to in_use too, as on the CPU backend, so "the largest batch that
 * fits in N bytes" means the same on both and does not depend on how the
 * cache happens to be fragmented; a request that would cross it fails with
 * TB_ERR_DEVICE_OOM at once.
 *
 * Out of memory: as PyTorch does, a failed cudaMalloc first
 * returns every cached unused segment to the device and tries once more;
 * if that fails too, TB_ERR_DEVICE_OOM names the bytes and suggests a
 * smaller --batch-size.
 *
 * Streams: a freed block is reused by later work in compute-stream order,
 * which is safe for everything on the compute stream. Memory written or
 * read on another stream must be synchronized before dev_free (the staging
 * module keeps its buffers for that reason). cudaFree waits for the device.
 *
 * CUDA graphs: see tb_cuda_alloc_capture_begin (cuda.h). A held block
 * stays allocated in its segment (no neighbour merges with it, empty cache
 * does not release its segment) until graph_release gives it back.
 *
 * Threads: one thread drives a backend at a time; nothing here is locked.
 * Host bookkeeping (block structs) uses malloc; a host OOM is TB_ERR_NOMEM.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define ROUND 512u                      /* PyTorch's kMinBlockSize */
#define SMALL_MAX ((size_t)1 << 20)      /* kSmallSize: 1 MiB */
#define SMALL_SEGMENT ((size_t)2 << 20)  /* kSmallBuffer: 2 MiB */
#define LARGE_ROUND ((size_t)2 << 20)    /* kRoundLarge: 2 MiB */

struct cuda_block {
    char *ptr;
    size_t size;                  /* bytes of the block */
    size_t requested;             /* bytes asked for; 0 while free */
    int allocated;
    int bin;                      /* free list index while free */
    cuda_segment *seg;
    cuda_block *prev, *next;      /* address neighbours in the segment */
    cuda_block *free_prev, *free_next;
    int graph;                    /* 1: a capture allocated, freed or used it
                                     (tb_cuda_alloc_mark_graph): freed while a
                                     graph lives, it is held */
    unsigned cap_gen;             /* the capture that allocated it (0: none) */
};

struct cuda_segment {
    void *base;
    size_t size;
    int small;                    /* part of the small pool */
    int plain;                    /* TB_MEM_PLAIN: one block, released on free */
    int is_reserve;               /* the preallocated segment */
    cuda_block *first;
    cuda_segment *next;
};

static cuda_allocator *alloc_of(tb_backend *be) { return &tb_cuda_ctx(be)->alloc; }

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static int bin_of(size_t size) { return 63 - __builtin_clzll((unsigned long long)size); }

static cuda_pool *pool_of(cuda_allocator *a, const cuda_segment *seg)
{
    return seg->small ? &a->small : &a->large;
}

/* ---------------------------------------------------------------------
 * Free lists
 * ------------------------------------------------------------------- */

static void free_push(cuda_allocator *a, cuda_block *b)
{
    cuda_pool *pool = pool_of(a, b->seg);
    b->bin = bin_of(b->size);
    b->free_prev = NULL;
    b->free_next = pool->bins[b->bin];
    if (b->free_next)
        b->free_next->free_prev = b;
    pool->bins[b->bin] = b;
}

static void free_remove(cuda_allocator *a, cuda_block *b)
{
    cuda_pool *pool = pool_of(a, b->seg);
    if (b->free_prev)
        b->free_prev->free_next = b->free_next;
    else
        pool->bins[b->bin] = b->free_next;
    if (b->free_next)
        b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = NULL;
}

/* Smallest free block of at least size bytes (lowest address among equal
 * sizes), taken off its list; NULL if none. Every block of a higher bin
 * than size's fits, so the search stops at the first bin with a fit. */
static cuda_block *take_best(cuda_allocator *a, cuda_pool *pool, size_t size)
{
    for (int bin = bin_of(size); bin < TB_CUDA_NBINS; bin++) {
        cuda_block *best = NULL;
        for (cuda_block *b = pool->bins[bin]; b; b = b->free_next) {
            if (b->size < size)
                continue;
            if (!best || b->size < best->size || (b->size == best->size && b->ptr < best->ptr))
                best = b;
        }
        if (best) {
            free_remove(a, best);
            return best;
        }
    }
    return NULL;
}

/* Cuts b to size bytes when the rest is a usable block; the rest is free. */
static int split(cuda_allocator *a, cuda_block *b, size_t size)
{
    if (b->seg->plain || b->size - size < ROUND)
        return TB_OK;
    cuda_block *rest = calloc(1, sizeof *rest);
    if (!rest)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a block record of the CUDA allocator");
    rest->ptr = b->ptr + size;
    rest->size = b->size - size;
    rest->seg = b->seg;
    rest->prev = b;
    rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_push(a, rest);
    return TB_OK;
}

/* b (free, on no list) absorbs its free right neighbour. */
static void absorb_next(cuda_allocator *a, cuda_block *b)
{
    cuda_block *n = b->next;
    free_remove(a, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    free(n);
}

/* Marks b free, merges it with free neighbours; returns the merged block
 * (not yet on a free list). */
static cuda_block *merge_free(cuda_allocator *a, cuda_block *b)
{
    b->allocated = 0;
    b->requested = 0;
    if (b->next && !b->next->allocated)
        absorb_next(a, b);
    if (b->prev && !b->prev->allocated) {
        cuda_block *p = b->prev;
        free_remove(a, p);
        /* as absorb_next, but b is on no list */
        p->size += b->size;
        p->next = b->next;
        if (b->next)
            b->next->prev = p;
        free(b);
        b = p;
    }
    return b;
}

/* ---------------------------------------------------------------------
 * Segments: the cudaMalloc'd regions
 * ------------------------------------------------------------------- */

/* cudaMalloc, counted. Returns the raw CUDA status so that the
 * caller can retry after emptying the cache without leaving an entry on
 * the error chain; the sticky error is cleared. */
static cudaError_t device_malloc(cuda_allocator *a, void **p, size_t size)
{
    *p = NULL;
    cudaError_t e;
    if (a->capturing) {
        /* the capturing thread's cudaMalloc is refused in thread-local
         * mode (graph.c) and would invalidate the capture: relaxed for it */
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        e = cudaThreadExchangeStreamCaptureMode(&mode);
        if (e == cudaSuccess) {
            e = cudaMalloc(p, size);
            cudaError_t back = cudaThreadExchangeStreamCaptureMode(&mode);
            e = e != cudaSuccess ? e : back;
        }
    } else {
        e = cudaMalloc(p, size);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return e;
    }
    a->reserved += size;
    a->device_mallocs++;
    return cudaSuccess;
}

static void segment_unlink(cuda_allocator *a, cuda_segment *seg)
{
    for (cuda_segment **s = &a->segments; *s; s = &(*s)->next) {
        if (*s == seg) {
            *s = seg->next;
            return;
        }
    }
}

/* cudaFree of a segment whose only block is free and on no list. */
static int segment_release(cuda_allocator *a, cuda_segment *seg)
{
    segment_unlink(a, seg);
    if (a->reserve == seg)
        a->reserve = NULL;
    a->reserved -= seg->size;
    a->device_frees++;
    cudaError_t e = cudaFree(seg->base);
    free(seg->first);
    free(seg);
    TB_CHECK_CUDA(e);
    return TB_OK;
}

static int segment_is_empty(const cuda_segment *seg)
{
    return !seg->first->allocated && !seg->first->next;
}

/* Releases every segment with no live block (the reserve too if
 * keep_reserve is 0). Keeps going after a failure; returns the first. */
static int release_unused(cuda_allocator *a, int keep_reserve)
{
    int rc = TB_OK;
    cuda_segment *seg = a->segments;
    while (seg) {
        cuda_segment *next = seg->next;
        if (segment_is_empty(seg) && !(keep_reserve && seg->is_reserve)) {
            free_remove(a, seg->first);
            int r = segment_release(a, seg);
            if (r != TB_OK && rc == TB_OK)
                rc = r;
        }
        seg = next;
    }
    return rc;
}

static int oom_error(tb_backend *be, cudaError_t e, size_t bytes, size_t seg_size)
{
    cuda_allocator *a = alloc_of(be);
    if (e != cudaErrorMemoryAllocation)
        return TB_FAIL(TB_ERR_CUDA, "cuda:%d: cudaMalloc(%zu bytes) failed: %s (%s, %d)",
                       be->device, seg_size, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
    return TB_FAIL(TB_ERR_DEVICE_OOM,
                   "cuda:%d: out of memory: cannot allocate %zu bytes (%.1f MiB) %s (%zu bytes "
                   "in use, %zu held from the device); try a smaller --batch-size", be->device,
                   bytes, bytes / 1048576.0,
                   a->capturing ? "during a graph capture, which cannot empty the cache"
                                : "even after emptying the cache",
                   a->in_use, a->reserved);
}

/* A new segment of seg_size bytes holding one free block (on no list).
 * On a device OOM, empties the cache and tries once more. */
static int segment_new(tb_backend *be, size_t bytes, size_t seg_size, int small, int plain,
                       int is_reserve, cuda_segment **out)
{
    cuda_allocator *a = alloc_of(be);
    cuda_segment *seg = calloc(1, sizeof *seg);
    cuda_block *b = calloc(1, sizeof *b);
    void *p;
    int rc;

    *out = NULL;
    if (!seg || !b) {
        rc = TB_FAIL(TB_ERR_NOMEM, "cannot allocate a segment record of the CUDA allocator");
        goto out_free_records;
    }
    cudaError_t e = device_malloc(a, &p, seg_size);
    if (e == cudaErrorMemoryAllocation && !a->capturing) { /* no cudaFree inside a capture */
        TB_TRY_GOTO(rc, release_unused(a, 1), out_free_records);
        e = device_malloc(a, &p, seg_size);
    }
    if (e != cudaSuccess) {
        rc = oom_error(be, e, bytes, seg_size);
        goto out_free_records;
    }
    *seg = (cuda_segment){.base = p, .size = seg_size, .small = small, .plain = plain,
                          .is_reserve = is_reserve, .first = b, .next = a->segments};
    *b = (cuda_block){.ptr = p, .size = seg_size, .seg = seg};
    a->segments = seg;
    *out = seg;
    return TB_OK;

out_free_records:
    free(seg);
    free(b);
    return rc;
}

/* ---------------------------------------------------------------------
 * The live table: allocated blocks by address, for dev_free
 * ------------------------------------------------------------------- */

static size_t live_find(const cuda_allocator *a, const void *p)
{
    size_t lo = 0, hi = a->n_live;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)a->live[mid]->ptr < (const char *)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for one more entry, made before any device work so that a host OOM
 * cannot strand a block nobody counts. */
static int live_reserve(cuda_allocator *a)
{
    if (a->n_live < a->cap_live)
        return TB_OK;
    size_t cap = a->cap_live ? 2 * a->cap_live : 64;
    cuda_block **l = realloc(a->live, cap * sizeof *l);
    if (!l)
        return TB_FAIL(TB_ERR_NOMEM, "cannot grow the CUDA allocation table to %zu entries", cap);
    a->live = l;
    a->cap_live = cap;
    return TB_OK;
}

static void live_insert(cuda_allocator *a, cuda_block *b, size_t bytes)
{
    size_t i = live_find(a, b->ptr);
    memmove(&a->live[i + 1], &a->live[i], (a->n_live - i) * sizeof a->live[0]);
    a->live[i] = b;
    a->n_live++;
    b->allocated = 1;
    b->requested = bytes;
    a->in_use += bytes;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
}

/* ---------------------------------------------------------------------
 * The table's slots
 * ------------------------------------------------------------------- */

static int alloc_plain(tb_backend *be, size_t bytes, cuda_block **out)
{
    cuda_segment *seg;
    TB_TRY(segment_new(be, bytes, bytes, 0, 1, 0, &seg));
    *out = seg->first;
    return TB_OK;
}

/* The smallest block the capture in progress freed that holds size bytes
 * of its pool (a large one at most twice size), off a->cap_free; NULL
 * when none. */
static cuda_block *take_capture_freed(cuda_allocator *a, size_t size, int small)
{
    cuda_block **best = NULL;
    for (cuda_block **b = &a->cap_free; *b; b = &(*b)->free_next) {
        size_t n = (*b)->size;
        if ((*b)->seg->small != small || n < size || (!small && n > 2 * size))
            continue;
        if (!best || n < (*best)->size)
            best = b;
    }
    if (!best)
        return NULL;
    cuda_block *got = *best;
    *best = got->free_next;
    got->free_next = NULL;
    return got;
}

static int alloc_cached(tb_backend *be, size_t bytes, cuda_block **out)
{
    cuda_allocator *a = alloc_of(be);
    size_t size = round_up(bytes, ROUND);
    int small = size <= SMALL_MAX;
    cuda_pool *pool = small ? &a->small : &a->large;
    cuda_block *b = a->capturing ? take_capture_freed(a, size, small) : NULL;
    if (b) { /* whole, not split: it stays the capture's */
        *out = b;
        return TB_OK;
    }
    b = take_best(a, pool, size);

    if (!b) {
        cuda_segment *seg;
        size_t seg_size = small ? SMALL_SEGMENT : round_up(size, LARGE_ROUND);
        TB_TRY(segment_new(be, bytes, seg_size, small, 0, 0, &seg));
        b = seg->first;
    }
    int rc = split(a, b, size);
    if (rc != TB_OK) {
        free_push(a, b);
        return rc;
    }
    *out = b;
    return TB_OK;
}

/* ENSURES: on success *p is counted in in_use; on failure *p == NULL and the
 * error is TB_ERR_DEVICE_OOM (limit or device), TB_ERR_NOMEM or TB_ERR_CUDA. */
int tb_cuda_dev_alloc(tb_backend *be, void **p, size_t bytes)
{
    cuda_allocator *a = alloc_of(be);
    cuda_block *b;

    *p = NULL;
    if (bytes == 0)
        return TB_OK;
    if (a->limit && a->in_use + bytes > a->limit)
        return TB_FAIL(TB_ERR_DEVICE_OOM,
                       "cuda:%d: out of memory: %zu bytes (%.1f MiB) more would exceed the "
                       "memory limit of %zu bytes (--mem-limit; %zu bytes in use); try a "
                       "smaller --batch-size", be->device, bytes, bytes / 1048576.0, a->limit,
                       a->in_use);
    TB_TRY(live_reserve(a));
    TB_TRY(tb_cuda_bind(be));
    if (a->mode == TB_MEM_PLAIN)
        TB_TRY(alloc_plain(be, bytes, &b));
    else
        TB_TRY(alloc_cached(be, bytes, &b));
    live_insert(a, b, bytes);
    b->graph = a->capturing;
    b->cap_gen = a->capturing ? a->cap_gen : 0;
    *p = b->ptr;
    return TB_OK;
}

/* A block whose caller is done with it back on the free lists, or its
 * segment back to the device (plain mode). */
static int give_back(tb_backend *be, cuda_allocator *a, cuda_block *b)
{
    b->graph = 0;
    b = merge_free(a, b);
    cuda_segment *seg = b->seg;
    /* Plain mode gives memory back at once, also a cached block's segment
     * once it is empty (blocks allocated before a switch to plain). */
    if (seg->plain || (a->mode == TB_MEM_PLAIN && !seg->is_reserve && segment_is_empty(seg))) {
        TB_TRY(tb_cuda_bind(be));
        return segment_release(a, seg);
    }
    free_push(a, b);
    return TB_OK;
}

/* No capture in progress and no graph alive: every held block back, and
 * the marks of live blocks cleared (no graph can read them any more). */
static int graph_release(tb_backend *be, cuda_allocator *a)
{
    int rc = TB_OK;
    if (a->capturing || a->live_graphs > 0)
        return TB_OK;
    while (a->held) {
        cuda_block *b = a->held;
        a->held = b->free_next;
        b->free_next = NULL;
        int b_rc = give_back(be, a, b);
        rc = rc == TB_OK ? b_rc : rc;
    }
    a->held_bytes = 0;
    for (size_t i = 0; i < a->n_live; i++)
        a->live[i]->graph = 0;
    return rc;
}

void tb_cuda_alloc_capture_begin(tb_backend *be)
{
    cuda_allocator *a = alloc_of(be);
    a->capturing = 1;
    a->cap_gen++;
}

/* b, freed while a graph may use it, onto *list (the capture's own
 * cap_free, or held): still marked allocated in its segment, so no
 * neighbour merges with it and no other allocation takes it. */
static void park(cuda_block *b, cuda_block **list)
{
    b->requested = 0;
    b->graph = 1;
    b->free_prev = NULL;
    b->free_next = *list;
    *list = b;
}

int tb_cuda_alloc_capture_end(tb_backend *be, int made)
{
    cuda_allocator *a = alloc_of(be);
    a->capturing = 0;
    while (a->cap_free) { /* its replays write them: held with the rest */
        cuda_block *b = a->cap_free;
        a->cap_free = b->free_next;
        a->held_bytes += b->size;
        park(b, &a->held);
    }
    if (made)
        a->live_graphs++;
    return graph_release(be, a);
}

int tb_cuda_alloc_graph_destroyed(tb_backend *be)
{
    cuda_allocator *a = alloc_of(be);
    if (a->live_graphs > 0)
        a->live_graphs--;
    return graph_release(be, a);
}

void tb_cuda_alloc_mark_graph(tb_backend *be, const void *p)
{
    cuda_allocator *a = alloc_of(be);
    if (!a->capturing || !p)
        return;
    size_t i = live_find(a, p);
    if (i < a->n_live && a->live[i]->ptr == (const char *)p)
        a->live[i]->graph = 1;
}

int tb_cuda_dev_free(tb_backend *be, void *p)
{
    cuda_allocator *a = alloc_of(be);

    if (!p)
        return TB_OK;
    size_t i = live_find(a, p);
    if (i == a->n_live || a->live[i]->ptr != (char *)p)
        return TB_FAIL(TB_ERR_INVALID, "cuda:%d: dev_free of %p, which this backend did not "
                       "allocate (or freed already)", be->device, p);
    cuda_block *b = a->live[i];
    memmove(&a->live[i], &a->live[i + 1], (a->n_live - i - 1) * sizeof a->live[0]);
    a->n_live--;
    a->in_use -= b->requested;
    if (a->capturing && b->cap_gen == a->cap_gen) {
        /* allocated by this capture: its later allocations may take it (the
         * graph replays them in this order); no one else may. A block from
         * before the capture is held below: another live graph may use it */
        park(b, &a->cap_free);
        return TB_OK;
    }
    if (a->capturing || (b->graph && a->live_graphs > 0)) {
        /* a graph may still write it: held */
        a->held_bytes += b->size;
        park(b, &a->held);
        return TB_OK;
    }
    return give_back(be, a, b);
}

int tb_cuda_transient_alloc(tb_backend *be, void **p, size_t bytes)
{
    *p = NULL;
    if (bytes == 0)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *p = NULL;
        return TB_FAIL(TB_ERR_DEVICE_OOM, "cuda:%d: out of memory for %zu bytes of scratch "
                       "(%.1f MiB)", be->device, bytes, bytes / 1048576.0);
    }
    TB_CHECK_CUDA(e);
    return TB_OK;
}

int tb_cuda_transient_free(tb_backend *be, void *p)
{
    if (!p)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaFree(p));
    return TB_OK;
}

static int cuda_mem_stats(tb_backend *be, size_t *in_use, size_t *peak)
{
    if (in_use)
        *in_use = alloc_of(be)->in_use;
    if (peak)
        *peak = alloc_of(be)->peak;
    return TB_OK;
}

static int cuda_mem_reset_peak(tb_backend *be)
{
    alloc_of(be)->peak = alloc_of(be)->in_use;
    return TB_OK;
}

static int cuda_mem_set_limit(tb_backend *be, size_t bytes)
{
    alloc_of(be)->limit = bytes;
    return TB_OK;
}

static int cuda_mem_empty_cache(tb_backend *be)
{
    TB_TRY(tb_cuda_bind(be));
    return release_unused(alloc_of(be), 1);
}

/* Gives back the reserve when a different one (or none) is wanted. With
 * blocks of it live, it becomes an ordinary cached segment instead, which
 * mem_empty_cache returns once they are freed. */
static int reserve_drop(tb_backend *be, size_t want)
{
    cuda_allocator *a = alloc_of(be);
    cuda_segment *r = a->reserve;
    if (!r || r->size == want)
        return TB_OK;
    a->reserve = NULL;
    r->is_reserve = 0;
    if (!segment_is_empty(r))
        return TB_OK;
    free_remove(a, r->first);
    return segment_release(a, r);
}

static int cuda_mem_set_mode(tb_backend *be, tb_mem_mode mode, size_t reserve_bytes)
{
    cuda_allocator *a = alloc_of(be);
    size_t want = round_up(reserve_bytes, ROUND);

    if (mode != TB_MEM_CACHING && mode != TB_MEM_PLAIN)
        return TB_FAIL(TB_ERR_INVALID, "mem_set_mode: unknown mode %d", (int)mode);
    if (mode == TB_MEM_PLAIN && reserve_bytes)
        return TB_FAIL(TB_ERR_INVALID, "mem_set_mode: preallocation (%zu bytes) needs the "
                       "caching mode", reserve_bytes);
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(reserve_drop(be, want));
    a->mode = mode;
    if (mode == TB_MEM_PLAIN)
        return release_unused(a, 0);
    if (want && !a->reserve) {
        cuda_segment *seg;
        TB_TRY(segment_new(be, want, want, 0, 0, 1, &seg));
        a->reserve = seg;
        free_push(a, seg->first);
    }
    return TB_OK;
}

/* Destroy: every segment goes back, live blocks included. */
int tb_cuda_alloc_release(tb_backend *be)
{
    cuda_allocator *a = alloc_of(be);
    int rc = TB_OK;

    while (a->segments) {
        cuda_segment *seg = a->segments;
        a->segments = seg->next;
        cudaError_t e = cudaFree(seg->base);
        if (e != cudaSuccess && rc == TB_OK)
            rc = TB_FAIL(TB_ERR_CUDA, "cudaFree at backend destroy: %s", cudaGetErrorString(e));
        for (cuda_block *b = seg->first; b;) {
            cuda_block *n = b->next;
            free(b);
            b = n;
        }
        free(seg);
    }
    free(a->live);
    memset(a, 0, sizeof *a);
    return rc;
}

int tb_cuda_scratch_get(tb_backend *be, cuda_scratch *s, size_t bytes, void **p)
{
    if (s->bytes < bytes || !s->p) {
        TB_TRY(tb_cuda_dev_free(be, s->p));
        s->p = NULL;
        s->bytes = 0;
        TB_TRY(tb_cuda_dev_alloc(be, &s->p, bytes ? bytes : 1));
        s->bytes = bytes ? bytes : 1;
    }
    /* used by the capture in progress: if it grows while the graph lives,
     * the old buffer is held (a replay still writes it), not reused */
    tb_cuda_alloc_mark_graph(be, s->p);
    *p = s->p;
    return TB_OK;
}

void tb_cuda_install_alloc(tb_backend *be)
{
    be->dev_alloc = tb_cuda_dev_alloc;
    be->dev_free = tb_cuda_dev_free;
    be->mem_stats = cuda_mem_stats;
    be->mem_reset_peak = cuda_mem_reset_peak;
    be->mem_set_limit = cuda_mem_set_limit;
    be->mem_empty_cache = cuda_mem_empty_cache;
    be->mem_set_mode = cuda_mem_set_mode;
}
