/*
 * staging.c - lib/backend/staging.h in a build with CUDA: host batches to a
 * CUDA backend's device per pin_memory and non_blocking (the table of the
 * four combinations is in lib/backend/staging.h); for any other backend, put
 * passes the host pointers through.
 *
 * Two slots, used in turn. A slot holds a page-locked staging buffer
 * (pin_memory only), a device buffer, and two events:
 *   copied    recorded on the copy stream after the slot's copy; the
 *             compute stream waits on it before using the batch, and the
 *             host waits on it before refilling the page-locked buffer;
 *   consumed  recorded on the compute stream when the NEXT batch is put,
 *             i.e. after every op queued on this batch; the copy stream
 *             waits on it before overwriting the slot's device buffer.
 * Only the pin_memory + non_blocking path uses the copy stream and the
 * events; the others copy on the compute stream, where stream order keeps
 * the slots safe.
 *
 * Growing a buffer (a larger batch) first waits for both streams: the
 * caching allocator hands out blocks in compute-stream order, and a block
 * the copy stream writes must not be one that queued compute work still
 * reads (PyTorch's record_stream problem, solved here by the sync, which
 * happens only when a batch is larger than any before).
 *
 * All CUDA calls are checked; the device buffers come from the backend's
 * allocator, so peak memory counts them.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/staging_pass.h"
#include "lib/backend/cuda/check.h"
#include "lib/backend/staging.h"
#include "lib/core/status.h"

#define PART_ALIGN 256

typedef struct staging_slot {
    void *pinned;
    size_t pinned_cap;
    void *dev;
    size_t dev_cap;
    cudaEvent_t copied, consumed;
    int copied_pending, consumed_pending;
} staging_slot;

struct tb_staging {
    tb_backend *be;
    tb_staging_cfg cfg;
    int passthrough;
    cudaStream_t copy;    /* pin_memory + non_blocking only */
    staging_slot slot[2];
    int next;             /* slot of the next put */
    int prev;             /* slot of the previous put; -1 before the first */
};

static cudaStream_t compute_of(tb_staging *st) { return tb_cuda_ctx(st->be)->compute; }

static int async_path(const tb_staging *st)
{
    return st->cfg.pin_memory && st->cfg.non_blocking;
}

static int slot_events_create(staging_slot *s)
{
    TB_CHECK_CUDA(cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming));
    TB_CHECK_CUDA(cudaEventCreateWithFlags(&s->consumed, cudaEventDisableTiming));
    return TB_OK;
}

int tb_staging_create(tb_backend *be, const tb_staging_cfg *cfg, tb_staging **out)
{
    tb_staging *st;
    int rc;

    if (!be || !cfg || !out)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_create: NULL argument");
    *out = NULL;
    st = calloc(1, sizeof *st);
    if (!st)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a staging");
    st->be = be;
    st->cfg = *cfg;
    st->prev = -1;
    st->passthrough = !tb_cuda_owns(be);
    if (st->passthrough) {
        *out = st;
        return TB_OK;
    }
    TB_TRY_GOTO(rc, tb_cuda_bind(be), out_destroy);
    if (async_path(st))
        TB_CHECK_CUDA_GOTO(rc, cudaStreamCreateWithFlags(&st->copy, cudaStreamNonBlocking),
                           out_destroy);
    for (int i = 0; i < 2; i++)
        TB_TRY_GOTO(rc, slot_events_create(&st->slot[i]), out_destroy);
    *out = st;
    return TB_OK;

out_destroy:
    tb_staging_destroy(st);
    return rc;
}

int tb_staging_copies(const tb_staging *st) { return st && !st->passthrough; }

/* ---------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------- */

/* Both streams idle: nothing queued reads or writes any slot. */
static int streams_drain(tb_staging *st)
{
    if (st->copy)
        TB_CHECK_CUDA(cudaStreamSynchronize(st->copy));
    TB_CHECK_CUDA(cudaStreamSynchronize(compute_of(st)));
    return TB_OK;
}

static int slot_grow(tb_staging *st, staging_slot *s, size_t total)
{
    if (s->dev_cap < total) {
        TB_TRY(streams_drain(st));
        TB_TRY(tb_cuda_dev_free(st->be, s->dev));
        s->dev = NULL;
        s->dev_cap = 0;
        TB_TRY(tb_cuda_dev_alloc(st->be, &s->dev, total));
        s->dev_cap = total;
    }
    if (st->cfg.pin_memory && s->pinned_cap < total) {
        TB_TRY(streams_drain(st));
        if (s->pinned)
            TB_CHECK_CUDA(cudaFreeHost(s->pinned));
        s->pinned = NULL;
        s->pinned_cap = 0;
        TB_CHECK_CUDA(cudaHostAlloc(&s->pinned, total, cudaHostAllocDefault));
        s->pinned_cap = total;
    }
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * put
 * ------------------------------------------------------------------- */

static int parts_layout(int nparts, const size_t bytes[], size_t off[], size_t *total)
{
    if (nparts < 1 || nparts > TB_STAGING_MAX_PARTS)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_put: %d parts (1..%d)", nparts,
                       TB_STAGING_MAX_PARTS);
    size_t t = 0;
    for (int i = 0; i < nparts; i++) {
        off[i] = t;
        t += (bytes[i] + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
    }
    *total = t ? t : PART_ALIGN;
    return TB_OK;
}

/* pin_memory: the batch into the slot's page-locked buffer, once the
 * slot's previous copy out of it is done. */
static int fill_pinned(staging_slot *s, int nparts, const void *const host[],
                       const size_t bytes[], const size_t off[])
{
    if (s->copied_pending) {
        TB_CHECK_CUDA(cudaEventSynchronize(s->copied));
        s->copied_pending = 0;
    }
    for (int i = 0; i < nparts; i++)
        memcpy((char *)s->pinned + off[i], host[i], bytes[i]);
    return TB_OK;
}

/* pin_memory + non_blocking: one copy on the copy stream, ordered after the
 * compute that last read the slot and before the compute that reads it next. */
static int copy_async(tb_staging *st, staging_slot *s, size_t total)
{
    if (s->consumed_pending) {
        TB_CHECK_CUDA(cudaStreamWaitEvent(st->copy, s->consumed, 0));
        s->consumed_pending = 0;
    }
    TB_CHECK_CUDA(cudaMemcpyAsync(s->dev, s->pinned, total, cudaMemcpyHostToDevice, st->copy));
    TB_CHECK_CUDA(cudaEventRecord(s->copied, st->copy));
    s->copied_pending = 1;
    TB_CHECK_CUDA(cudaStreamWaitEvent(compute_of(st), s->copied, 0));
    return TB_OK;
}

/* The other three combinations: on the compute stream; waited for unless
 * non_blocking (from pageable memory the driver stages the data before
 * cudaMemcpyAsync returns, so that is synchronous for the host anyway). */
static int copy_on_compute(tb_staging *st, staging_slot *s, int nparts, const void *const host[],
                           const size_t bytes[], const size_t off[], size_t total)
{
    cudaStream_t c = compute_of(st);
    if (st->cfg.pin_memory) {
        TB_CHECK_CUDA(cudaMemcpyAsync(s->dev, s->pinned, total, cudaMemcpyHostToDevice, c));
    } else {
        for (int i = 0; i < nparts; i++)
            if (bytes[i])
                TB_CHECK_CUDA(cudaMemcpyAsync((char *)s->dev + off[i], host[i], bytes[i],
                                              cudaMemcpyHostToDevice, c));
    }
    if (!st->cfg.non_blocking)
        TB_CHECK_CUDA(cudaStreamSynchronize(c));
    return TB_OK;
}

int tb_staging_put(tb_staging *st, int nparts, const void *const host[], const size_t bytes[],
                   void *dev[])
{
    size_t off[TB_STAGING_MAX_PARTS], total = 0;

    if (!st || !host || !bytes || !dev)
        return TB_FAIL(TB_ERR_INVALID, "tb_staging_put: NULL argument");
    TB_TRY(parts_layout(nparts, bytes, off, &total));
    if (st->passthrough) {
        for (int i = 0; i < nparts; i++)
            dev[i] = (void *)host[i];
        return TB_OK;
    }
    TB_TRY(tb_cuda_bind(st->be));
    /* Everything for the previous batch is queued by now. */
    if (st->prev >= 0 && async_path(st)) {
        TB_CHECK_CUDA(cudaEventRecord(st->slot[st->prev].consumed, compute_of(st)));
        st->slot[st->prev].consumed_pending = 1;
    }
    staging_slot *s = &st->slot[st->next];
    TB_TRY(slot_grow(st, s, total));
    if (st->cfg.pin_memory)
        TB_TRY(fill_pinned(s, nparts, host, bytes, off));
    if (async_path(st))
        TB_TRY(copy_async(st, s, total));
    else
        TB_TRY(copy_on_compute(st, s, nparts, host, bytes, off, total));
    for (int i = 0; i < nparts; i++)
        dev[i] = (char *)s->dev + off[i];
    st->prev = st->next;
    st->next ^= 1;
    return TB_OK;
}

int tb_staging_to_fixed(tb_staging *st, int nparts, void *dev[], void *const fixed[],
                        const size_t bytes[])
{
    TB_TRY(staging_fixed_args(st, nparts, dev, fixed, bytes));
    if (st->passthrough)
        return staging_pass_to_fixed(st->be, nparts, dev, fixed, bytes);
    TB_TRY(tb_cuda_bind(st->be));
    for (int i = 0; i < nparts; i++) {
        if (!fixed[i] || fixed[i] == dev[i])
            continue;
        if (bytes[i])
            TB_CHECK_CUDA(cudaMemcpyAsync(fixed[i], dev[i], bytes[i], cudaMemcpyDeviceToDevice,
                                          compute_of(st)));
        dev[i] = fixed[i];
    }
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * destroy: keeps going after a failure, returns the first
 * ------------------------------------------------------------------- */

static void keep_first(int *rc, int r)
{
    if (r != TB_OK && *rc == TB_OK)
        *rc = r;
}

static int cuda_status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return TB_OK;
    return TB_FAIL(TB_ERR_CUDA, "staging destroy: %s: %s", what, cudaGetErrorString(e));
}

int tb_staging_destroy(tb_staging *st)
{
    int rc = TB_OK;

    if (!st)
        return TB_OK;
    if (st->passthrough)
        goto out_free_staging;
    keep_first(&rc, tb_cuda_bind(st->be));
    keep_first(&rc, streams_drain(st));
    for (int i = 0; i < 2; i++) {
        staging_slot *s = &st->slot[i];
        keep_first(&rc, tb_cuda_dev_free(st->be, s->dev));
        if (s->pinned)
            keep_first(&rc, cuda_status(cudaFreeHost(s->pinned), "cudaFreeHost"));
        if (s->copied)
            keep_first(&rc, cuda_status(cudaEventDestroy(s->copied), "cudaEventDestroy"));
        if (s->consumed)
            keep_first(&rc, cuda_status(cudaEventDestroy(s->consumed), "cudaEventDestroy"));
    }
    if (st->copy)
        keep_first(&rc, cuda_status(cudaStreamDestroy(st->copy), "cudaStreamDestroy"));
out_free_staging:
    free(st);
    return rc;
}
