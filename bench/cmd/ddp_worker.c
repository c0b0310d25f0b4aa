/*
 * ddp_worker.c - the DDP worker: one MPI rank of a data-parallel training run of
 * the small CNN (or any model lib/train/config.h names), launched by mpirun.
 *
 *   bazel run //bench:ddp -- --ranks=2 --max-steps=20 --dataset=synthetic
 * (bench/cmd/ddp_launch.sh runs mpirun with the right flags on this binary).
 *
 * --batch-size is the GLOBAL micro-batch: every rank's loader builds the same
 * batch (same shuffle and augmentation, keyed by seed/epoch/index) and each
 * rank trains on its shard, so N ranks see what one process sees at the same
 * global batch. The loss of each shard is scaled by shard/batch * ranks, so
 * after DDP's average the gradient is the global batch's mean even for
 * unequal shards (--imbalance: rank r's share grows with r, the load
 * imbalance experiment). Accumulation steps use no_sync except the last.
 * Rank 0 alone prints and writes reports.
 *
 * --verify (the test, lib:ddp_test): after training, checks that the
 * weights are bitwise identical on every rank, that each synced step
 * all-reduced exactly the gradient bytes, that with overlap on a bucket
 * started before backward ended, and (rank 0) that a single-process run at
 * the same global batch whose batch norm sees each replica's share (micro-
 * batch B/N, accumulation N) ends at the same loss within 1e-4 relative.
 *
 * --sync-bn swaps the batch norms for SyncBatchNorm (lib/dist/syncbn.h): then
 * --verify's single-process run is the plain one at the same global batch
 * (batch norm over the whole batch), and the loss must match it within 1e-4.
 *
 * Rank 0 alone writes: --report=PATH gives PATH.steps.csv (per step: time
 * as the slowest rank saw it, rank 0's backward, all-reduce and exposed
 * time; rank 0 has the lightest shard under --imbalance, so its exposed
 * time is the waiting), PATH.trace.csv (the last step's buckets),
 * PATH.verify.csv (with --verify) and PATH.busbw.csv (with --busbw-max: the
 * blocking all-reduce timed over message sizes 4 KiB .. max, each size
 * --busbw-reps times, the slowest rank's time per repetition).
 * --checkpoint=PATH: rank 0 alone writes weights and optimizer state at
 * the end (lib/train/checkpoint.h); every rank prints whether it wrote.
 *
 * Test hooks: --test-hang-rank=R / --test-exit-rank=R make rank R sleep or
 * exit(3) at step --test-fail-step; the job must fail, not hang.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/atomic_file.h"
#include "lib/train/checkpoint.h"
#include "lib/dist/comm.h"
#include "lib/train/config.h"
#include "lib/dist/ddp.h"
#include "lib/core/flags.h"
#include "lib/core/stats.h"
#include "lib/dist/syncbn.h"
#include "lib/train/train.h"

typedef struct worker_flags {
    size_t bucket_bytes;
    int overlap;
    double comm_timeout;
    int comm;                 /* 0 auto, 1 mpi, 2 nccl */
    int verify;
    const char *report;       /* rank 0 writes PATH.steps.csv and PATH.trace.csv */
    double imbalance;
    int sync_bn;
    const char *checkpoint;   /* rank 0 writes weights + optimizer state here */
    size_t busbw_max;         /* > 0: time all-reduce up to this many bytes */
    int busbw_reps;
    int hang_rank, exit_rank, fail_step;
} worker_flags;

static const char *const comm_names[] = {"auto", "mpi", "nccl", NULL};

typedef struct step_rec {
    double step_s, forward_s, backward_s, allreduce_s, exposed_s, loss, bytes;
    int synced_steps;
} step_rec;

typedef struct worker {
    tb_config cfg;
    worker_flags wf;
    tb_comm *mpi, *comm;      /* comm: mpi or an NCCL communicator over it */
    tb_backend *be;
    tb_trainer *t;
    tb_ddp *ddp;
    step_rec *recs;
    int nrecs, cap;
    int local_max;            /* largest shard */
} worker;

/* ---- shards ---- */

/* Rank r's share of a batch of n: [lo, lo + cnt). Balanced: n/N each;
 * with imbalance x, rank r weighs 1 + x * r / (N - 1). */
static void shard(int n, int rank, int size, double imbalance, int *lo, int *cnt)
{
    double total = 0, before = 0;
    for (int r = 0; r < size; r++) {
        double w = 1.0 + (size > 1 ? imbalance * r / (size - 1) : 0);
        total += w;
        if (r < rank)
            before += w;
    }
    double mine = 1.0 + (size > 1 ? imbalance * rank / (size - 1) : 0);
    int a = (int)floor(n * before / total + 1e-9);
    int b = (int)floor(n * (before + mine) / total + 1e-9);
    if (rank == size - 1)
        b = n;
    *lo = a;
    *cnt = b - a;
}

/* This rank's samples [lo, lo + cnt) of b: images, or a token model's int32
 * ids (their bytes, (cnt, seq)) and its (cnt, seq) next-token labels. */
static int shard_to_device(worker *w, const tb_batch *b, int lo, int cnt)
{
    tb_trainer *t = w->t;
    size_t sample = (size_t)b->c * b->h * b->w, per = b->seq > 0 ? (size_t)b->seq : 1;
    TB_TRY(tb_tensor_set_batch(&t->x, cnt));
    if (b->tokens)
        TB_TRY(w->be->copy_h2d(w->be, t->x.data, b->tokens + (size_t)lo * sample,
                               (size_t)cnt * sample * sizeof(int32_t), NULL));
    else
        TB_TRY(tb_tensor_from_host(&t->x, b->images + (size_t)lo * sample));
    return w->be->copy_h2d(w->be, t->labels, b->labels + (size_t)lo * per,
                           (size_t)cnt * per * sizeof(int32_t), NULL);
}

static void test_hooks(const worker *w, int step)
{
    if (step != w->wf.fail_step)
        return;
    if (w->comm->rank == w->wf.hang_rank) {
        fprintf(stderr, "rank %d: hanging at step %d on purpose (--test-hang-rank)\n",
                w->comm->rank, step);
        sleep(3600);
    }
    if (w->comm->rank == w->wf.exit_rank) {
        fprintf(stderr, "rank %d: exiting with status 3 at step %d on purpose (--test-exit-rank)\n",
                w->comm->rank, step);
        exit(3);
    }
}

/* One micro-batch of a step: this rank's shard forward and DDP backward. */
static int micro_step(worker *w, const tb_batch *b, int last, step_rec *r)
{
    tb_model *m = w->t->model;
    int lo, cnt, accum = w->cfg.accum_steps, size = w->comm->size;
    shard(b->size, w->comm->rank, size, w->wf.imbalance, &lo, &cnt);
    if (cnt <= 0)
        return TB_FAIL(TB_ERR_INVALID, "rank %d has no samples of a batch of %d: use a batch of "
                       "at least %d (--batch-size is the global batch)", w->comm->rank, b->size, size);
    TB_TRY(shard_to_device(w, b, lo, cnt));
    double t0 = tb_comm_now();
    TB_TRY(tb_model_forward_loss(m, &w->t->x, w->t->labels, NULL));
    TB_TRY(w->be->sync(w->be));
    r->forward_s += tb_comm_now() - t0;
    float share = (float)cnt / (float)b->size;
    TB_TRY(tb_ddp_backward(w->ddp, share * (float)size / (float)accum, last));
    r->backward_s += w->ddp->step.backward_s;
    float loss;
    TB_TRY(tb_xent_read_loss(&m->loss, &loss));
    r->loss += (double)loss * share / accum; /* summed over ranks later */
    return TB_OK;
}

/* One optimizer step; *got = 0 when the epoch had no batch left. */
static int train_step(worker *w, int step, step_rec *r, int *got)
{
    tb_trainer *t = w->t;
    memset(r, 0, sizeof *r);
    double t0 = tb_comm_now();
    TB_TRY(tb_model_zero_grad(t->model, w->cfg.grads_to_none));
    int accum = w->cfg.accum_steps;
    for (int i = 0; i < accum; i++) {
        tb_batch b;
        int rc = tb_loader_next_batch(t->train_ld, &b);
        if (rc < 0)
            return -rc;
        if (rc == 0 || b.size < w->cfg.batch_size) { /* keep every step full */
            *got = 0;
            return TB_OK;
        }
        test_hooks(w, step);
        TB_TRY(micro_step(w, &b, i == accum - 1, r));
    }
    TB_TRY(tb_ddp_finish(w->ddp));
    TB_TRY(tb_optim_step(&t->opt));
    TB_TRY(w->be->sync(w->be));
    r->step_s = tb_comm_now() - t0;
    r->allreduce_s = w->ddp->step.allreduce_s;
    r->exposed_s = w->ddp->step.exposed_s;
    r->bytes = (double)w->ddp->step.bytes;
    *got = 1;
    return TB_OK;
}

static int recs_push(worker *w, const step_rec *r)
{
    if (w->nrecs == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        step_rec *p = realloc(w->recs, (size_t)cap * sizeof *p);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory recording steps");
        w->recs = p;
        w->cap = cap;
    }
    w->recs[w->nrecs++] = *r;
    return TB_OK;
}

static int train(worker *w)
{
    tb_trainer *t = w->t;
    tb_model_train_mode(t->model, 1);
    for (int e = 0; e < w->cfg.epochs; e++) {
        TB_TRY(tb_loader_epoch_begin(t->train_ld, e));
        for (int s = 0; w->cfg.max_steps <= 0 || s < w->cfg.max_steps; s++) {
            step_rec r;
            int got;
            TB_TRY(train_step(w, w->nrecs, &r, &got));
            if (!got)
                break;
            TB_TRY(recs_push(w, &r));
        }
        TB_TRY(tb_loader_epoch_end(t->train_ld));
    }
    return TB_OK;
}

/* ---- after training: losses summed over ranks, step times' max ---- */

static int gather_records(worker *w)
{
    int n = w->nrecs;
    double *v = calloc((size_t)n * 2 + 1, sizeof *v);
    if (!v)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < n; i++)
        v[i] = w->recs[i].loss;
    int rc = tb_comm_sum_double(w->mpi, v, n);
    for (int i = 0; rc == TB_OK && i < n; i++) {
        w->recs[i].loss = v[i];
        v[i] = w->recs[i].step_s;
    }
    if (rc == TB_OK)
        rc = tb_comm_max_double(w->mpi, v, n);
    for (int i = 0; rc == TB_OK && i < n; i++)
        w->recs[i].step_s = v[i];
    free(v);
    return rc;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int weights_host(worker *w, tb_model *m, float **out)
{
    size_t bytes = m->numel * sizeof(float);
    *out = malloc(bytes);
    if (!*out)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory copying weights");
    return w->be->copy_d2h(w->be, *out, m->flat_w, bytes, NULL);
}

/* Number of ranks whose weights differ from rank 0's, bit for bit. */
static int weights_differ(worker *w, int *ndiff)
{
    float *h;
    TB_TRY(weights_host(w, w->t->model, &h));
    uint64_t mine = fnv1a(h, w->t->model->numel * sizeof(float)), root = mine;
    free(h);
    TB_TRY(tb_comm_bcast(w->mpi, &root, sizeof root, 0));
    double d = mine != root;
    TB_TRY(tb_comm_sum_double(w->mpi, &d, 1));
    *ndiff = (int)d;
    return TB_OK;
}

/* Rank 0: the single-process run at the same global batch. Its batch norm
 * sees each replica's share (micro-batch B/N, accumulation N times ours),
 * or with SyncBatchNorm the whole batch (the same batch and accumulation). */
static int reference_run(worker *w, float *ref_loss, double *max_abs, double *max_w)
{
    tb_config rc = w->cfg;
    int n = w->wf.sync_bn ? 1 : w->comm->size;
    rc.batch_size = w->cfg.batch_size / n;
    rc.accum_steps = w->cfg.accum_steps * n;
    rc.max_steps = w->nrecs;
    rc.epochs = 1;
    TB_TRY(tb_config_validate(&rc));
    tb_trainer *t;
    TB_TRY(tb_trainer_create_with_data(&rc, w->be, w->t->train_ds, w->t->test_ds, &t));
    tb_epoch_stats st;
    float *a = NULL, *b = NULL;
    int r;
    TB_TRY_GOTO(r, tb_train_epoch(t, 0, &st), out_free);
    *ref_loss = st.last_loss;
    TB_TRY_GOTO(r, weights_host(w, t->model, &a), out_free);
    TB_TRY_GOTO(r, weights_host(w, w->t->model, &b), out_free);
    *max_abs = *max_w = 0;
    for (size_t i = 0; i < t->model->numel; i++) {
        *max_abs = fmax(*max_abs, fabs((double)a[i] - b[i]));
        *max_w = fmax(*max_w, fabs((double)a[i]));
    }
out_free:
    free(a);
    free(b);
    tb_trainer_destroy(t);
    return r;
}

#define VERIFY_LOSS_TOL 1e-4

typedef struct verify_rec {
    int weights_identical;
    double loss, ref_loss, rel, max_abs_w; /* NaN when no reference ran */
    int failed;
} verify_rec;

static int write_verify(const worker *w, const verify_rec *v)
{
    char path[1024];
    snprintf(path, sizeof path, "%s.verify.csv", w->wf.report);
    FILE *f = fopen(path, "w");
    TB_CHECK_IO(!f, "cannot write %s", path);
    fprintf(f, "ranks,reference,weights_identical,loss,ref_loss,rel_diff,tolerance,"
               "max_abs_weight_diff,failed_checks\n");
    fprintf(f, "%d,%s,%d,%.9g,%.9g,%.6g,%g,%.6g,%d\n", w->comm->size,
            w->wf.sync_bn ? "one process with batch norm over the global batch"
                          : "one process with batch norm over each replica's share",
            v->weights_identical, v->loss, v->ref_loss, v->rel, VERIFY_LOSS_TOL, v->max_abs_w,
            v->failed);
    TB_CHECK_IO(fclose(f) != 0, "cannot write %s", path);
    return TB_OK;
}

/* Returns TB_OK and *failed = number of failed checks (same on every rank). */
static int verify(worker *w, int *failed)
{
    int bad = 0, ndiff;
    verify_rec vr = {.loss = NAN, .ref_loss = NAN, .rel = NAN, .max_abs_w = NAN};
    TB_TRY(weights_differ(w, &ndiff));
    vr.weights_identical = ndiff == 0;
    size_t grad_bytes = w->t->model->numel * sizeof(float);
    const tb_ddp_step *st = &w->ddp->step;
    if (w->comm->rank == 0) {
        printf("verify: weights bitwise identical on all %d ranks: %s\n", w->comm->size,
               ndiff ? "NO" : "yes");
        bad += ndiff != 0;
        for (int i = 0; i < w->nrecs; i++) {
            if (w->recs[i].bytes != (double)grad_bytes) {
                printf("verify: step %d all-reduced %.0f bytes, gradients are %zu bytes\n", i,
                       w->recs[i].bytes, grad_bytes);
                bad++;
                break;
            }
        }
        printf("verify: bytes all-reduced per step %.0f == gradient bytes %zu\n",
               w->nrecs ? w->recs[0].bytes : 0.0, grad_bytes);
        if (w->wf.overlap && w->ddp->nbuckets > 1) {
            int early = st->nbuckets > 0 && st->trace[0].start < 0;
            printf("verify: overlap: bucket 0 started %.3f ms before backward ended: %s\n",
                   -1e3 * (st->nbuckets ? st->trace[0].start : 0), early ? "yes" : "NO");
            bad += !early;
        }
    }
    if (w->comm->rank == 0 && w->wf.imbalance == 0 && w->cfg.batch_size % w->comm->size == 0) {
        float ref;
        double max_abs, max_w;
        TB_TRY(reference_run(w, &ref, &max_abs, &max_w));
        double got = w->recs[w->nrecs - 1].loss;
        double rel = fabs(got - ref) / fmax(fabs(ref), 1e-30);
        printf("verify: loss after %d steps: DDP %.8f, single process %.8f, relative "
               "difference %.2e (tolerance %.0e): %s\n", w->nrecs, got, ref, rel,
               VERIFY_LOSS_TOL, rel <= VERIFY_LOSS_TOL ? "ok" : "DIFFERS");
        printf("verify: weights vs single process: max abs difference %.3e (max |w| %.3f)\n",
               max_abs, max_w);
        bad += !(rel <= VERIFY_LOSS_TOL);
        vr = (verify_rec){vr.weights_identical, got, ref, rel, max_abs, 0};
    }
    /* rank 0 ran the single-process reference alone, for as long as it
     * takes (a real model, many steps): the others wait for it at a barrier
     * the watchdog does not time, not in a collective that --comm-timeout
     * would call hung */
    if (w->mpi->size > 1 && MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        return TB_FAIL(TB_ERR_IO, "MPI_Barrier after the verify reference failed");
    double b = bad;
    TB_TRY(tb_comm_sum_double(w->mpi, &b, 1));
    *failed = (int)b;
    vr.failed = *failed;
    if (w->comm->rank == 0 && w->wf.report)
        TB_TRY(write_verify(w, &vr));
    return TB_OK;
}

/* ---- reporting (rank 0) ---- */

static int write_report(const worker *w)
{
    char path[1024];
    snprintf(path, sizeof path, "%s.steps.csv", w->wf.report);
    FILE *f = fopen(path, "w");
    TB_CHECK_IO(!f, "cannot write %s", path);
    fprintf(f, "ranks,step,step_s,forward_s,backward_s,allreduce_s,exposed_s,bytes,loss\n");
    for (int i = 0; i < w->nrecs; i++) {
        const step_rec *r = &w->recs[i];
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.0f,%.9g\n", w->comm->size, i, r->step_s,
                r->forward_s, r->backward_s, r->allreduce_s, r->exposed_s, r->bytes, r->loss);
    }
    TB_CHECK_IO(fclose(f) != 0, "cannot write %s", path);
    snprintf(path, sizeof path, "%s.trace.csv", w->wf.report);
    f = fopen(path, "w");
    TB_CHECK_IO(!f, "cannot write %s", path);
    fprintf(f, "bucket,bytes,start_s,end_s\n");
    const tb_ddp_step *st = &w->ddp->step;
    for (int i = 0; i < st->nbuckets; i++)
        fprintf(f, "%d,%zu,%.9g,%.9g\n", st->trace[i].bucket, st->trace[i].bytes,
                st->trace[i].start, st->trace[i].end);
    TB_CHECK_IO(fclose(f) != 0, "cannot write %s", path);
    return TB_OK;
}

static double median_of(const worker *w, size_t field_offset)
{
    int skip = w->nrecs > 3 ? 1 : 0; /* the first step warms up */
    int n = w->nrecs - skip;
    if (n <= 0)
        return NAN;
    double v[n], med = NAN;
    for (int i = 0; i < n; i++)
        v[i] = *(const double *)((const char *)&w->recs[i + skip] + field_offset);
    tb_stats_median(v, (size_t)n, &med);
    return med;
}

static void print_summary(const worker *w)
{
    printf("ddp: %d ranks (%s), global batch %d, %d steps, %d buckets of <= %zu KiB, overlap %s: "
           "median step %.2f ms, forward %.2f ms, backward %.2f ms, all-reduce %.2f ms, exposed "
           "%.2f ms, last loss %.5f\n",
           w->comm->size, w->comm->ops->name, w->cfg.batch_size, w->nrecs, w->ddp->nbuckets,
           w->wf.bucket_bytes >> 10, w->wf.overlap ? "on" : "off",
           1e3 * median_of(w, offsetof(step_rec, step_s)),
           1e3 * median_of(w, offsetof(step_rec, forward_s)),
           1e3 * median_of(w, offsetof(step_rec, backward_s)),
           1e3 * median_of(w, offsetof(step_rec, allreduce_s)),
           1e3 * median_of(w, offsetof(step_rec, exposed_s)),
           w->nrecs ? w->recs[w->nrecs - 1].loss : NAN);
}

/* ---- after training: all-reduce bus bandwidth, checkpoint ---- */

/* The blocking all-reduce over message sizes 4 KiB, 16 KiB, .. busbw_max;
 * rank 0 writes one row per repetition: the slowest rank's seconds. */
static int busbw_sweep(worker *w)
{
    size_t max_n = w->wf.busbw_max / sizeof(float);
    float *buf = NULL;
    FILE *f = NULL;
    char path[1024];
    int rc = TB_OK;
    TB_TRY(w->be->dev_alloc(w->be, (void **)&buf, max_n * sizeof(float)));
    if (w->comm->rank == 0) {
        snprintf(path, sizeof path, "%s.busbw.csv", w->wf.report);
        f = fopen(path, "w");
        if (!f) {
            rc = TB_FAIL(TB_ERR_IO, "cannot write %s", path);
            goto out_free;
        }
        fprintf(f, "ranks,bytes,rep,seconds\n");
    }
    for (size_t n = 1024; n <= max_n; n *= 4) {
        TB_TRY_GOTO(rc, w->be->memset(w->be, buf, 0, n * sizeof(float), NULL), out_free);
        TB_TRY_GOTO(rc, tb_comm_allreduce_sum(w->comm, buf, n), out_free); /* warm-up */
        for (int r = 0; r < w->wf.busbw_reps; r++) {
            TB_TRY_GOTO(rc, tb_comm_barrier(w->comm), out_free);
            double t0 = tb_comm_now();
            TB_TRY_GOTO(rc, tb_comm_allreduce_sum(w->comm, buf, n), out_free);
            TB_TRY_GOTO(rc, w->be->sync(w->be), out_free);
            double t = tb_comm_now() - t0;
            TB_TRY_GOTO(rc, tb_comm_max_double(w->mpi, &t, 1), out_free);
            if (f)
                fprintf(f, "%d,%zu,%d,%.9g\n", w->comm->size, n * sizeof(float), r, t);
        }
    }
out_free:
    if (f && fclose(f) != 0 && rc == TB_OK)
        rc = TB_FAIL(TB_ERR_IO, "cannot write %s", path);
    w->be->dev_free(w->be, buf);
    return rc;
}

/* Rank 0 alone writes; every rank says what it did, and all wait for it. */
static int write_checkpoint(worker *w)
{
    if (w->comm->rank == 0) {
        TB_TRY(tb_checkpoint_save(w->t->model, &w->t->opt, 0, w->comm->size, w->wf.checkpoint));
        printf("rank 0: wrote checkpoint %s\n", w->wf.checkpoint);
    } else {
        printf("rank %d: no checkpoint written (rank 0 alone writes)\n", w->comm->rank);
    }
    fflush(stdout);
    return tb_comm_barrier(w->mpi);
}

/* ---- setup ---- */

static int parse(worker *w, int *argc, char **argv, int *help)
{
    tb_config_defaults(&w->cfg);
    w->cfg.epochs = 1;
    w->wf = (worker_flags){.bucket_bytes = TB_DDP_DEFAULT_BUCKET_BYTES, .overlap = 1,
                           .comm_timeout = 600, .hang_rank = -1, .exit_rank = -1,
                           .fail_step = 2, .busbw_reps = 5};
    size_t nc;
    const tb_flag *cf = tb_config_flags(&w->cfg, &nc);
    tb_flag own[] = {
        {"bucket-size", TB_FLAG_SIZE, &w->wf.bucket_bytes, "DDP bucket size (bucket_cap_mb), K/M/G suffixes", NULL, TB_RANGE(1, 1024.0 * 1024 * 1024 * 1024)},
        {"overlap", TB_FLAG_BOOL, &w->wf.overlap, "start each bucket's all-reduce during backward", NULL},
        {"comm-timeout", TB_FLAG_DOUBLE, &w->wf.comm_timeout, "seconds a collective may wait before the job is aborted", NULL, TB_RANGE(0.001, 604800)},
        {"comm", TB_FLAG_CHOICE, &w->wf.comm, "auto (NCCL on CUDA, MPI on CPU), mpi or nccl", comm_names},
        {"verify", TB_FLAG_BOOL, &w->wf.verify, "check identical weights, bytes, overlap, loss vs one process", NULL},
        {"report", TB_FLAG_STRING, &w->wf.report, "rank 0 writes PATH.steps.csv and PATH.trace.csv", NULL},
        {"imbalance", TB_FLAG_DOUBLE, &w->wf.imbalance, "rank r's shard weighs 1 + x*r/(N-1): load imbalance", NULL, TB_RANGE(0, 1000)},
        {"sync-bn", TB_FLAG_BOOL, &w->wf.sync_bn, "SyncBatchNorm: batch statistics over all ranks (CPU backend)", NULL},
        {"checkpoint", TB_FLAG_STRING, &w->wf.checkpoint, "rank 0 writes weights and optimizer state here at the end", NULL},
        {"busbw-max", TB_FLAG_SIZE, &w->wf.busbw_max, "with --report: time all-reduce of 4K .. this many bytes (PATH.busbw.csv)", NULL, TB_RANGE(0, 1024.0 * 1024 * 1024 * 1024)},
        {"busbw-reps", TB_FLAG_INT, &w->wf.busbw_reps, "repetitions per all-reduce size", NULL, TB_RANGE(1, 100000)},
        {"test-hang-rank", TB_FLAG_INT, &w->wf.hang_rank, "test hook: this rank hangs", NULL, TB_RANGE_MIN(-1)},
        {"test-exit-rank", TB_FLAG_INT, &w->wf.exit_rank, "test hook: this rank exits with status 3", NULL, TB_RANGE_MIN(-1)},
        {"test-fail-step", TB_FLAG_INT, &w->wf.fail_step, "test hook: at this step", NULL, TB_RANGE_MIN(0)},
    };
    size_t n_own = sizeof own / sizeof own[0];
    tb_flag all[nc + n_own];
    memcpy(all, cf, nc * sizeof *cf);
    memcpy(all + nc, own, sizeof own);
    TB_TRY(tb_flags_parse(all, nc + n_own, argc, argv, NULL, help));
    if (*help) {
        tb_flags_usage(stdout, "ddp", "one rank of DistributedDataParallel training (run it "
                       "with bazel run //bench:ddp -- --ranks=N)", all, nc + n_own);
        return TB_OK;
    }
    if (*argc > 1)
        return TB_FAIL(TB_ERR_INVALID, "unexpected argument '%s' (see --help)", argv[1]);
    if (w->wf.busbw_max && (!w->wf.report || w->wf.busbw_reps < 1))
        return TB_FAIL(TB_ERR_INVALID, "--busbw-max needs --report=PATH and --busbw-reps >= 1");
    return tb_config_validate(&w->cfg);
}

/* Rank 0's outputs, written when the run ends: a place they cannot be
 * written to fails before training (a failing rank ends the job). */
static int check_outputs(const worker *w)
{
    char path[4096];
    if (w->wf.report) {
        snprintf(path, sizeof path, "%s.steps.csv", w->wf.report);
        TB_TRY(tb_atomic_check_writable(path, "--report"));
    }
    if (w->wf.checkpoint)
        TB_TRY(tb_atomic_check_writable(w->wf.checkpoint, "--checkpoint"));
    return TB_OK;
}

static int open_everything(worker *w)
{
    if (w->mpi->rank == 0)
        TB_TRY(check_outputs(w));
    tb_device_kind kind;
    int ordinal;
    TB_TRY(tb_device_parse(w->cfg.device, &kind, &ordinal));
    int threads = w->cfg.threads;
    if (threads == 0) { /* the cores shared among the ranks on this host */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / w->mpi->size > 0 ? cores / w->mpi->size : 1);
    }
    if (kind == TB_DEVICE_CUDA)
        ordinal += w->mpi->rank; /* one GPU per rank on a host */
    TB_TRY(tb_backend_open(kind, ordinal, threads, &w->be));
    int nccl = w->wf.comm == 2 || (w->wf.comm == 0 && strcmp(w->be->name, "cuda") == 0);
    if (nccl)
        TB_TRY(tb_comm_nccl_create(w->mpi, w->be, &w->comm));
    else
        w->comm = w->mpi;
    TB_TRY(tb_trainer_create(&w->cfg, w->be, &w->t));
    if (w->wf.sync_bn)
        TB_TRY(tb_syncbn_convert(w->t->model, w->mpi, NULL));
    tb_ddp_opts o = {.bucket_bytes = w->wf.bucket_bytes, .overlap = w->wf.overlap};
    TB_TRY(tb_ddp_create(w->comm, w->t->model, &o, &w->ddp));
    return tb_ddp_broadcast_params(w->ddp);
}

static void close_everything(worker *w)
{
    tb_ddp_destroy(w->ddp);
    tb_trainer_destroy(w->t);
    if (w->comm && w->comm != w->mpi && tb_comm_destroy(w->comm) != TB_OK) {
        /* The run's results stand; the teardown's failure is still news. */
        fprintf(stderr, "ddp: rank %d: closing the NCCL communicator failed\n", w->mpi->rank);
        tb_error_print(stderr);
        tb_error_clear();
    }
    if (w->be)
        tb_backend_close(w->be);
    free(w->recs);
}

static int run(worker *w, int *failed)
{
    TB_TRY(open_everything(w));
    TB_TRY(train(w));
    TB_TRY(gather_records(w));
    if (w->comm->rank == 0)
        print_summary(w);
    if (w->comm->rank == 0 && w->wf.report)
        TB_TRY(write_report(w));
    if (w->wf.verify)
        TB_TRY(verify(w, failed));
    if (w->wf.busbw_max)
        TB_TRY(busbw_sweep(w));
    if (w->wf.checkpoint)
        TB_TRY(write_checkpoint(w));
    return TB_OK;
}

int main(int argc, char **argv)
{
    static worker w;
    int help = 0, failed = 0;
    /* Flags first: the watchdog's limit is one of them. Every rank parses the
     * same command line, so every rank fails alike on a bad flag. */
    int rc = parse(&w, &argc, argv, &help);
    if (rc != TB_OK) {
        tb_error_print(stderr);
        return tb_exit_code(rc);
    }
    if (help)
        return 0;
    rc = tb_comm_mpi_init(&argc, &argv, w.wf.comm_timeout, &w.mpi);
    if (rc == TB_OK)
        rc = run(&w, &failed);
    if (rc != TB_OK) {
        fprintf(stderr, "ddp: rank %d failed\n", w.mpi ? w.mpi->rank : -1);
        tb_error_print(stderr);
        /* The other ranks may be inside a collective: end the job now. */
        if (w.mpi && w.mpi->size > 1)
            MPI_Abort(MPI_COMM_WORLD, tb_exit_code(rc));
    }
    close_everything(&w);
    if (w.wf.verify && rc == TB_OK && w.mpi->rank == 0)
        printf("verify: %s (%d failed checks)\n", failed ? "FAILED" : "PASSED", failed);
    if (tb_comm_destroy(w.mpi) != TB_OK) {
        tb_error_print(stderr);
        if (rc == TB_OK)
            rc = tb_error_last();
    }
    if (rc != TB_OK)
        return tb_exit_code(rc);
    return failed ? TB_DDP_EXIT_CHECK_FAILED : 0;
}
