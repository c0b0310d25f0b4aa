/*
 * staging.h - the loader's host batches to the device: the "pinned memory +
 * async copy" technique (PyTorch's DataLoader(pin_memory=...) and
 * tensor.to(device, non_blocking=...)). Callable on any backend.
 *
 *   pin_memory non_blocking  what happens to each batch (CUDA)
 *   0          0             cudaMemcpyAsync from the pageable batch on the
 *                            compute stream, then wait for it (the defaults)
 *   0          1             the same copy, not waited for; from pageable
 *                            memory the driver stages it before returning,
 *                            so it is effectively synchronous, as in PyTorch
 *   1          0             memcpy into a page-locked (cudaHostAlloc) staging
 *                            buffer, copy on the compute stream, wait
 *   1          1             memcpy into one of two page-locked buffers, copy
 *                            on a dedicated copy stream, record an event the
 *                            compute stream waits on: the host returns at once
 *                            and the copy overlaps earlier compute
 * The device copies live in two device buffers owned by the staging (double
 * buffered), so batch k+1 can be copied while batch k is computed on.
 * On a backend whose device memory is host memory (the CPU backend, and any
 * build without CUDA) put passes the host pointers through: no copy, which is
 * why the technique is n/a there.
 *
 * Typical use, once per step:
 *   const void *host[2] = {b.images, b.labels};
 *   size_t bytes[2] = {...};
 *   void *dev[2];
 *   TB_TRY(tb_staging_put(st, 2, host, bytes, dev));
 *   ... queue forward/backward on dev[0], dev[1] ...
 *
 * Threads: one thread drives a staging, the one that drives its backend.
 */
#ifndef TB_STAGING_H
#define TB_STAGING_H

#include <stddef.h>

#include "lib/backend/backend.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_staging tb_staging;

typedef struct tb_staging_cfg {
    int pin_memory;   /* 1: through page-locked staging buffers */
    int non_blocking; /* 1: asynchronous copies (overlap needs pin_memory too) */
} tb_staging_cfg;

#define TB_STAGING_MAX_PARTS 8

/* Creates a staging for be (borrowed: it must outlive the staging).
 * Buffers are allocated on the first put and grown as batches grow. */
int tb_staging_create(tb_backend *be, const tb_staging_cfg *cfg, tb_staging **out);

/* Copies one batch of nparts host buffers (1..TB_STAGING_MAX_PARTS) to the
 * device and sets dev[i] to the device copy of host[i] (each 256-byte
 * aligned). dev[i] stays valid for work queued on the compute stream until
 * the second put after this one; the host buffers may be reused as soon as
 * put returns. Passing through: dev[i] = host[i]. */
int tb_staging_put(tb_staging *st, int nparts, const void *const host[], const size_t bytes[],
                   void *dev[]);

/* After a put, for a consumer that reads fixed device buffers (a CUDA
 * graph's replay; PyTorch's CUDA-graphs recipe: static_input.copy_(batch)
 * before g.replay()): for each part with fixed[i] != NULL and != dev[i],
 * copies bytes[i] from dev[i] (as put set it) into fixed[i], device to
 * device, and sets dev[i] = fixed[i]. CUDA: asynchronous on the compute
 * stream, so ordered after the put's copy (also the side-stream one of
 * pin_memory + non_blocking) and before work queued later; the host does
 * not wait. Passing through: the backend's synchronous copy_d2d from the
 * host pointer (host memory is the device's there). */
int tb_staging_to_fixed(tb_staging *st, int nparts, void *dev[], void *const fixed[],
                        const size_t bytes[]);

/* 1 when put copies to a device, 0 when it passes host pointers through. */
int tb_staging_copies(const tb_staging *st);

/* Waits for the staging's copies, frees everything. NULL is fine. */
int tb_staging_destroy(tb_staging *st);

#ifdef __cplusplus
}
#endif
#endif
