/*
 * loader.h - the data loader: a dataset in, float32 NCHW batches out (or,
 * from a token dataset, int32 token ids and next-token labels).
 *
 * Mirrors PyTorch's DataLoader so each of its knobs can be benchmarked:
 *   num_workers         0 = build batches in the calling thread;
 *   prefetch_factor     batches queued ahead per worker (default 2): W*P
 *                       batches are built ahead of the one the caller
 *                       holds, as PyTorch's W*P outstanding indices;
 *   persistent_workers  keep workers across epochs, or start and join them
 *                       every epoch (so their start-up cost shows);
 *   worker mode         threads (pthreads) or processes (fork; batches in
 *                       MAP_SHARED memory, process-shared mutex/condvars).
 * Worker w builds batches w, w+W, w+2W, ... into its own prefetch_factor + 1
 * slots; the consumer takes them strictly in order. The shuffle depends only
 * on (seed, epoch) and each sample's augmentation only on (seed, epoch,
 * index), so batch i of an epoch has the same bytes whatever the knobs.
 * On-the-fly datasets (dataset.h) are made sample by sample in the worker
 * that builds the batch (images: made, then augmented and normalized as a
 * stored sample is); a token batch holds each sample's first seq ids as
 * tokens and the seq next ones as labels, every id checked against
 * [0, vocab) on the host before a kernel indexes a table with it.
 *
 * Use:
 *   tb_loader_cfg cfg = tb_loader_default_cfg();   cfg.batch_size = 256; ...
 *   tb_loader *ld;  TB_TRY(tb_loader_create(&cfg, ds, &ld));
 *   for each epoch e:
 *       TB_TRY(tb_loader_epoch_begin(ld, e));
 *       tb_batch b;  int rc;
 *       while ((rc = tb_loader_next_batch(ld, &b)) == 1) { ... use b ... }
 *       if (rc < 0) return -rc;     // a tb_err, the chain says what failed
 *       TB_TRY(tb_loader_epoch_end(ld));
 *   tb_loader_destroy(ld);
 *
 * A worker's failure (or a worker process dying) comes back from
 * tb_loader_next_batch as a status; nothing hangs. Destroying mid-epoch stops
 * and joins every worker.
 *
 * Tests: bazel test //lib/train:loader_test
 */
#ifndef TB_LOADER_H
#define TB_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/augment.h"
#include "datasets/dataset.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_worker_mode {
    TB_WORKERS_THREADS = 0,
    TB_WORKERS_PROCESSES = 1,
} tb_worker_mode;

/* Where batch buffers come from; lets a CUDA backend hand in pinned memory.
 * alloc returns a tb_err status. With process workers the slots must be
 * shared memory, so the allocator instead provides the one buffer the
 * consumer copies each batch into (what PyTorch's pin-memory thread does). */
typedef struct tb_host_allocator {
    int (*alloc)(void *user, void **p, size_t bytes);
    void (*free)(void *user, void *p);
    void *user;
} tb_host_allocator;

typedef struct tb_loader_cfg {
    int batch_size;           /* > 0 */
    int shuffle;              /* 1: permutation from (seed, epoch); 0: in order */
    int drop_last;            /* 1: drop the last, smaller batch */
    uint64_t seed;
    int num_workers;          /* >= 0; 0 = in the calling thread */
    int prefetch_factor;      /* >= 1; batches queued per worker */
    int persistent_workers;   /* 1: workers live from create to destroy */
    tb_worker_mode mode;
    tb_augment_cfg augment;
    const tb_host_allocator *allocator; /* NULL: aligned malloc */
    /* 1: batches carry the samples as the dataset stores them (raw, uint8,
     * no augmentation, images NULL) for a consumer that augments on the
     * device (--augment-on-device); augment is then ignored. */
    int raw_u8;
    /* 1: images (size, h, w, c), channels last, transposed by whoever builds
     * the batch (a worker, not the consumer: --channels-last on a GPU, where
     * the main thread's time is the step's). Images only; raw_u8 ignores it. */
    int nhwc;
    /* Test hooks; -1 = off. The worker building this batch index fails as
     * if an allocation failed (TB_ERR_NOMEM) / a worker process _exits. */
    int test_fail_batch;
    int test_crash_batch;
} tb_loader_cfg;

/* PyTorch's defaults: batch 64, shuffle on, drop_last off, num_workers 0,
 * prefetch_factor 2, persistent off, threads; augmentation off; hooks off. */
tb_loader_cfg tb_loader_default_cfg(void);

typedef struct tb_batch {
    int epoch;
    int index;        /* batch number within the epoch, from 0 */
    int size;         /* samples; < batch_size only for a last partial batch */
    int c, h, w;      /* tokens: 1, seq, 1 */
    float *images;    /* (size, c, h, w), normalized, or (size, h, w, c) when nhwc;
                         NULL with raw_u8 or tokens */
    int nhwc;         /* images are channels last (cfg.nhwc) */
    uint8_t *raw;     /* (size, c, h, w) the dataset's bytes with raw_u8; else NULL */
    int32_t *tokens;  /* (size, seq) token ids of a token dataset; else NULL */
    int seq;          /* tokens per sample; 0 for images */
    int32_t *labels;  /* (size); tokens: (size, seq), labels[k][t] = sample k's id t + 1 */
    const int32_t *sample_ids; /* (size) dataset index of each sample */
} tb_batch;

typedef struct tb_loader_stats {
    double wait_s;        /* total time next_batch spent waiting for (or,
                             with 0 workers, building) batches */
    double last_wait_s;   /* the same for the newest batch */
    double start_s;       /* time spent starting and joining workers */
    long batches;         /* batches handed out */
} tb_loader_stats;

typedef struct tb_loader tb_loader;

/* Validates cfg and creates a loader over ds (borrowed: it must outlive the
 * loader and not change). Persistent workers start here. A token dataset
 * takes no augmentation and no raw_u8.
 * Errors: TB_ERR_INVALID (bad cfg), TB_ERR_NOMEM, TB_ERR_INTERNAL (a thread
 * or process could not be started). */
int tb_loader_create(const tb_loader_cfg *cfg, const tb_dataset *ds, tb_loader **out);

/* Batches per epoch: ceil(n / batch_size), or floor with drop_last. */
int tb_loader_num_batches(const tb_loader *ld);

/* Starts an epoch (ends the current one first if needed): computes the
 * permutation for (seed, epoch) and, for non-persistent workers, starts them. */
int tb_loader_epoch_begin(tb_loader *ld, int epoch);

/* Returns 1 and fills *b with the next batch in order, 0 at the end of the
 * epoch, or a negative tb_err code (-TB_ERR_...) with the error chain set
 * when a worker failed or died, or a token id was out of [0, vocab)
 * (-TB_ERR_DATA naming the dataset, sample and id). The batch's buffers stay valid until the
 * next call to next_batch, tb_loader_release_batch or tb_loader_epoch_end. */
int tb_loader_next_batch(tb_loader *ld, tb_batch *b);

/* Hands the current batch's slot back to the workers early (e.g. once it is
 * copied to a device). Optional. */
void tb_loader_release_batch(tb_loader *ld);

/* Ends the epoch, even part-way: non-persistent workers are stopped and
 * joined, persistent ones are parked (it waits for a batch being built to
 * finish; a dead worker process is not waited for). Worker errors are
 * reported by next_batch, not here; returns TB_OK. */
int tb_loader_epoch_end(tb_loader *ld);

/* Stops and joins every worker and frees everything; NULL is a no-op. */
void tb_loader_destroy(tb_loader *ld);

void tb_loader_get_stats(const tb_loader *ld, tb_loader_stats *st);
void tb_loader_reset_stats(tb_loader *ld);

const char *tb_loader_mode_name(tb_worker_mode mode); /* "threads" / "processes" */

#ifdef __cplusplus
}
#endif
#endif
