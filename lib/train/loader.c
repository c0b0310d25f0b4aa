/*
 * loader.c - the data loader; see loader.h for the contract.
 *
 * Shared state (struct loader_ctl, the per-slot states, the permutation) lives
 * in one MAP_SHARED|MAP_ANONYMOUS mapping so the same code serves worker
 * threads and forked worker processes; with processes the mutex and condvars
 * are process-shared and robust, and the slot buffers are a second shared
 * mapping. Protocol, all under ctl->mu:
 *   - epoch_begin writes the permutation while no worker is busy, bumps
 *     ctl->gen and sets ctl->active;
 *   - worker w builds batches w, w+W, ... of that gen; batch b goes to slot
 *     (b % W) * (P+1) + (b / W) % (P+1) once fewer than W*P batches lie
 *     between the consumer and it (b < ctl->taken + W*P, taken: the batches
 *     handed to the consumer): W*P batches ahead of the one in use, as
 *     PyTorch's DataLoader keeps W*P indices outstanding, sending the next
 *     only when a batch comes back (until 2026-11-30 one fewer: a batch was
 *     built only once the one W*P before it was released, and the held one
 *     took a slot). Each worker's P+1 slots hold its P ahead and the one the
 *     consumer may hold: b's slot was last b - W(P+1) < taken - 1's, whose
 *     batch the consumer has released. The worker then stamps the slot
 *     (gen, b, status);
 *   - the consumer waits until the slot of its next batch carries (gen, b),
 *     bumps taken, and releases the batch on the following call;
 *   - epoch_end clears ctl->active and waits until no worker is busy (or
 *     joins non-persistent workers), so nothing of an old epoch is in flight.
 * A consumer waiting on a worker process polls every WAIT_POLL_MS whether the
 * process is still alive, so a crashed worker gives an error, not a hang.
 *
 * Tests: bazel test //lib/train:loader_test
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, robust mutexes under -std=c11 */
#include "lib/train/loader.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "lib/core/rng.h"

#define MAX_WORKERS 256
#define SLOT_MSG 384
#define WAIT_POLL_MS 50
#define REAP_TIMEOUT_MS 5000

typedef struct slot_state {
    int gen;      /* epoch generation of the content; 0 = never filled */
    int batch;    /* batch index within that epoch */
    int status;   /* tb_err of building it */
    int size;     /* samples in it */
    char msg[SLOT_MSG]; /* the worker's error message when status != 0 */
} slot_state;

typedef struct loader_ctl {
    pthread_mutex_t mu;
    pthread_cond_t ready; /* consumer waits: a slot was stamped, a worker went idle */
    pthread_cond_t work;  /* workers wait: new epoch, a batch taken, stop */
    /* Worker processes wait on these instead (futexes on the shared
     * mapping): glibc's process-shared condition variable blocks a
     * broadcast for good once a waiter has died inside its wait (a worker
     * killed while idle hung the consumer and tb_loader_destroy), and a
     * futex wake never waits for anyone. Bumped under mu. */
    int pshared;
    atomic_uint ready_seq, work_seq;
    pid_t consumer;       /* process mode: the process its workers serve */
    int gen;              /* bumped by each epoch_begin */
    int active;           /* 1 between epoch_begin and epoch_end */
    int stop;             /* 1: workers exit */
    int epoch;
    int nbatches;
    long taken;           /* batches [0, taken) of this gen are handed to the consumer */
} loader_ctl;

typedef struct worker_arg {
    tb_loader *ld;
    int w;
} worker_arg;

struct tb_loader {
    tb_loader_cfg cfg;
    tb_host_allocator alloc;
    const tb_dataset *ds;
    int nw, pf, nslots;       /* workers, prefetch per worker, slots */
    int nbatches;
    int seq;                  /* tokens per sample of a token dataset; 0 for images */
    size_t chw;               /* pixels of an image sample */
    /* one slot: images (float, or raw bytes) or tokens (size, seq) at 0, then
     * labels, sample ids, and the scratch an on-the-fly sample is made in */
    size_t img_bytes, off_lab, off_ids, off_scratch, off_hwc, slot_bytes;

    void *shared;             /* mapping: ctl, busy, slots, perm */
    size_t shared_bytes;
    loader_ctl *ctl;
    int *busy;                /* (nw) 1 while worker w builds a batch unlocked */
    slot_state *slots;        /* (nslots) */
    int32_t *perm;            /* (n) this epoch's sample order */

    unsigned char *data;      /* (nslots, slot_bytes) batch buffers */
    int data_mapped;          /* 1: shared mapping; 0: from the allocator */
    unsigned char *out;       /* processes + allocator: consumer's copy */

    worker_arg *args;         /* (nw) */
    pthread_t *threads;       /* (nw) */
    pid_t *pids;              /* (nw) */
    int *reaped;              /* (nw) 1 once waitpid returned for it */
    int *wstatus;             /* (nw) its wait status */
    int started;              /* workers currently started */

    int in_epoch, epoch, next, held;
    tb_loader_stats stats;
};

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- default allocator ---- */

static int default_alloc(void *user, void **p, size_t bytes)
{
    (void)user;
    if (posix_memalign(p, 64, bytes) != 0) {
        *p = NULL;
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate %zu bytes (%.1f MiB) of batch buffers "
                       "(every slot of every worker holds one batch): try a smaller "
                       "--batch-size, or fewer --workers or a smaller --prefetch-factor", bytes,
                       bytes / 1048576.0);
    }
    return TB_OK;
}

static void default_free(void *user, void *p)
{
    (void)user;
    free(p);
}

/* ---- locking that survives a worker process dying inside it ---- */

static void ctl_lock(loader_ctl *c)
{
    if (pthread_mutex_lock(&c->mu) == EOWNERDEAD)
        pthread_mutex_consistent(&c->mu);
}

static void ctl_unlock(loader_ctl *c) { pthread_mutex_unlock(&c->mu); }

/* The futex sequence standing for cv in process mode. */
static atomic_uint *ctl_seq(pthread_cond_t *cv, loader_ctl *c)
{
    return cv == &c->ready ? &c->ready_seq : &c->work_seq;
}

/* Wakes every waiter on cv. REQUIRES: mu held (a waiter reads the
 * sequence under it, after checking its condition: no wake is lost). */
static void ctl_broadcast(pthread_cond_t *cv, loader_ctl *c)
{
    if (!c->pshared) {
        pthread_cond_broadcast(cv);
        return;
    }
    atomic_uint *seq = ctl_seq(cv, c);
    atomic_fetch_add(seq, 1);
    syscall(SYS_futex, seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Process mode: unlocks, sleeps until cv's sequence moves or ms pass, locks
 * again. Returns ETIMEDOUT when ms passed. */
static int ctl_futex_wait(pthread_cond_t *cv, loader_ctl *c, int ms)
{
    atomic_uint *seq = ctl_seq(cv, c);
    unsigned v = atomic_load(seq);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    ctl_unlock(c);
    long r = syscall(SYS_futex, seq, FUTEX_WAIT, v, &ts, NULL, 0);
    int timed_out = r != 0 && errno == ETIMEDOUT;
    ctl_lock(c);
    return timed_out ? ETIMEDOUT : 0;
}

static void ctl_wait(pthread_cond_t *cv, loader_ctl *c)
{
    if (c->pshared) {
        ctl_futex_wait(cv, c, WAIT_POLL_MS);
        /* a worker process whose consumer died without tb_loader_destroy
         * (killed, crashed) ends: nobody will stop it (it waited forever) */
        if (cv == &c->work && getppid() != c->consumer) {
            ctl_unlock(c);
            _exit(0);
        }
        return;
    }
    if (pthread_cond_wait(cv, &c->mu) == EOWNERDEAD)
        pthread_mutex_consistent(&c->mu);
}

/* Returns ETIMEDOUT when ms passed without a signal. */
static int ctl_timedwait(pthread_cond_t *cv, loader_ctl *c, int ms)
{
    if (c->pshared)
        return ctl_futex_wait(cv, c, ms);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    int r = pthread_cond_timedwait(cv, &c->mu, &ts);
    if (r == EOWNERDEAD)
        pthread_mutex_consistent(&c->mu);
    return r;
}

static int ctl_init(loader_ctl *c, int pshared)
{
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    int r = pthread_mutexattr_init(&ma);
    r = r ? r : pthread_condattr_init(&ca);
    if (r)
        return TB_FAIL(TB_ERR_INTERNAL, "pthread attribute init failed (%d)", r);
    if (pshared) {
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    r = pthread_mutex_init(&c->mu, &ma);
    r = r ? r : pthread_cond_init(&c->ready, &ca);
    r = r ? r : pthread_cond_init(&c->work, &ca);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_destroy(&ca);
    if (r)
        return TB_FAIL(TB_ERR_INTERNAL, "loader mutex/condvar init failed (%d)", r);
    c->pshared = pshared;
    c->consumer = getpid();
    atomic_init(&c->ready_seq, 0);
    atomic_init(&c->work_seq, 0);
    return TB_OK;
}

/* ---- building one batch (any worker, or the consumer with 0 workers) ---- */

/* Channels-last images with more than one channel (one channel's (c, h, w)
 * is already its (h, w, c)). */
static int transposes(const tb_loader *ld)
{
    return ld->cfg.nhwc && !ld->cfg.raw_u8 && !ld->seq && ld->ds->c > 1;
}

static int slot_of(const tb_loader *ld, int b)
{
    int per_w = ld->pf + 1; /* a worker's slots: pf ahead + the one the consumer holds */
    return (b % ld->nw) * per_w + (b / ld->nw) % per_w;
}

static float *slot_images(const tb_loader *ld, unsigned char *base) { (void)ld; return (float *)base; }
static int32_t *slot_labels(const tb_loader *ld, unsigned char *base)
{
    return (int32_t *)(base + ld->off_lab);
}
static int32_t *slot_ids(const tb_loader *ld, unsigned char *base)
{
    return (int32_t *)(base + ld->off_ids);
}

static int batch_size_of(const tb_loader *ld, int b)
{
    int start = b * ld->cfg.batch_size, left = ld->ds->n - start;
    return left < ld->cfg.batch_size ? left : ld->cfg.batch_size;
}

/* Sample idx of an image dataset into row k of the slot at base. An
 * on-the-fly raw sample is made where it goes; any other is made (if on the
 * fly) into the slot's scratch, then augmented from there. */
static void image_sample(const tb_loader *ld, int epoch, int idx, int k, unsigned char *base)
{
    const tb_loader_cfg *cfg = &ld->cfg;
    int32_t *lab = slot_labels(ld, base) + k;
    if (cfg->raw_u8) {
        uint8_t *dst = base + (size_t)k * ld->chw;
        const uint8_t *px = tb_dataset_image(ld->ds, idx, dst, lab);
        if (px != dst)
            memcpy(dst, px, ld->chw);
        return;
    }
    const uint8_t *px = tb_dataset_image(ld->ds, idx, base + ld->off_scratch, lab);
    tb_augment_params p = tb_augment_draw(&cfg->augment, cfg->seed, epoch, idx);
    float *row = slot_images(ld, base) + (size_t)k * ld->chw;
    if (!transposes(ld)) {
        tb_augment_pixels(&cfg->augment, ld->ds, px, &p, row);
        return;
    }
    /* channels last: the sample in (c, h, w) in the slot's scratch, then
     * (h, w, c) into its row */
    const tb_dataset *ds = ld->ds;
    float *chw = (float *)(base + ld->off_hwc);
    size_t hw = (size_t)ds->h * ds->w;
    tb_augment_pixels(&cfg->augment, ds, px, &p, chw);
    for (size_t i = 0; i < hw; i++)
        for (int ch = 0; ch < ds->c; ch++)
            row[i * ds->c + ch] = chw[ch * hw + i];
}

/* Sample idx of a token dataset into row k: its ids 0..seq-1 as tokens,
 * 1..seq as labels, each checked against [0, vocab). */
static int token_sample(const tb_loader *ld, int idx, int k, unsigned char *base)
{
    const tb_dataset *ds = ld->ds;
    int T = ld->seq;
    int32_t *ids = (int32_t *)(base + ld->off_scratch);
    tb_dataset_tokens(ds, idx, ids);
    for (int t = 0; t <= T; t++)
        if (ids[t] < 0 || ids[t] >= ds->vocab)
            return TB_FAIL(TB_ERR_DATA, "dataset %s: sample %d holds token id %d at position %d, "
                           "outside the vocabulary [0, %d)", ds->name, idx, (int)ids[t], t,
                           ds->vocab);
    memcpy((int32_t *)base + (size_t)k * T, ids, (size_t)T * sizeof *ids);
    memcpy(slot_labels(ld, base) + (size_t)k * T, ids + 1, (size_t)T * sizeof *ids);
    return TB_OK;
}

/* Builds batch b of epoch into the buffer at base; *size gets its size. */
static int build_batch(const tb_loader *ld, int epoch, int b, unsigned char *base, int *size)
{
    const tb_loader_cfg *cfg = &ld->cfg;
    if (b == cfg->test_fail_batch)
        return TB_FAIL(TB_ERR_NOMEM, "test hook: injected allocation failure building batch %d", b);
    if (b == cfg->test_crash_batch && cfg->mode == TB_WORKERS_PROCESSES && ld->nw > 0)
        _exit(3); /* simulates a worker process crashing */
    int n = batch_size_of(ld, b), start = b * cfg->batch_size;
    int32_t *ids = slot_ids(ld, base);
    for (int k = 0; k < n; k++) {
        int idx = ld->perm[start + k];
        if (ld->seq)
            TB_TRY(token_sample(ld, idx, k, base));
        else
            image_sample(ld, epoch, idx, k, base);
        ids[k] = idx;
    }
    *size = n;
    return TB_OK;
}

/* ---- workers ---- */

/* Builds one claimed batch unlocked and stamps its slot. Called and returns
 * with ctl->mu held. */
static int worker_build_one(tb_loader *ld, int w, int gen, int epoch, int b)
{
    loader_ctl *c = ld->ctl;
    int slot = slot_of(ld, b), size = 0;
    ld->busy[w] = 1;
    ctl_unlock(c);
    int rc = build_batch(ld, epoch, b, ld->data + (size_t)slot * ld->slot_bytes, &size);
    char msg[SLOT_MSG] = "";
    if (rc != TB_OK) {
        snprintf(msg, sizeof msg, "%s", tb_error_message());
        tb_error_clear(); /* the chain is per thread; a persistent worker lives on */
    }
    ctl_lock(c);
    ld->busy[w] = 0;
    slot_state *s = &ld->slots[slot];
    s->gen = gen;
    s->batch = b;
    s->status = rc;
    s->size = size;
    memcpy(s->msg, msg, sizeof msg);
    ctl_broadcast(&c->ready, c);
    return rc;
}

/* Worker w's life: wait for an epoch, build its batches as slots free up,
 * repeat (persistent) or return after one epoch. */
static void worker_loop(tb_loader *ld, int w, int one_epoch)
{
    loader_ctl *c = ld->ctl;
    int seen = 0; /* gen starts at 0; the first epoch is gen 1 */
    ctl_lock(c);
    for (;;) {
        while (!c->stop && !(c->active && c->gen != seen))
            ctl_wait(&c->work, c);
        if (c->stop)
            break;
        seen = c->gen;
        int epoch = c->epoch, nb = c->nbatches;
        for (int b = w; b < nb; b += ld->nw) {
            while (!c->stop && c->active && c->gen == seen &&
                   b >= c->taken + (long)ld->nw * ld->pf)
                ctl_wait(&c->work, c);
            if (c->stop || !c->active || c->gen != seen)
                break;
            if (worker_build_one(ld, w, seen, epoch, b) != TB_OK)
                break; /* the consumer gets the error when it reaches batch b */
        }
        if (one_epoch)
            break;
    }
    ctl_unlock(c);
}

static void *worker_thread(void *p)
{
    worker_arg *a = p;
    worker_loop(a->ld, a->w, !a->ld->cfg.persistent_workers);
    return NULL;
}

/* Starts all nw workers. On failure ld->started says how many run; the
 * caller joins them. */
static int workers_start(tb_loader *ld)
{
    int one_epoch = !ld->cfg.persistent_workers;
    double t0 = tb_clock_s();
    /* Forked children would otherwise flush the parent's pending output twice. */
    fflush(NULL);
    for (int w = 0; w < ld->nw; w++) {
        ld->reaped[w] = 0;
        if (ld->cfg.mode == TB_WORKERS_THREADS) {
            int r = pthread_create(&ld->threads[w], NULL, worker_thread, &ld->args[w]);
            if (r != 0)
                return TB_FAIL(TB_ERR_INTERNAL, "cannot start loader worker thread %d (%s)",
                               w, strerror(r));
        } else {
            pid_t pid = fork();
            if (pid < 0)
                return tb_error_push_errno(TB_ERR_INTERNAL, __FILE__, __LINE__,
                                           "cannot fork loader worker process %d", w);
            if (pid == 0) {
                worker_loop(ld, w, one_epoch);
                _exit(0);
            }
            ld->pids[w] = pid;
        }
        ld->started = w + 1;
    }
    ld->stats.start_s += tb_clock_s() - t0;
    return TB_OK;
}

/* 1 if worker process w has exited (reaping it); 0 for threads. */
static int worker_dead(tb_loader *ld, int w)
{
    if (ld->cfg.mode != TB_WORKERS_PROCESSES || w >= ld->started)
        return 0;
    if (ld->reaped[w])
        return 1;
    int st;
    if (waitpid(ld->pids[w], &st, WNOHANG) == ld->pids[w]) {
        ld->reaped[w] = 1;
        ld->wstatus[w] = st;
        return 1;
    }
    return 0;
}

static void describe_exit(int st, char *out, size_t cap)
{
    if (WIFSIGNALED(st))
        snprintf(out, cap, "killed by signal %d", WTERMSIG(st));
    else
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
}

/* Waits for worker process w to exit; kills it after REAP_TIMEOUT_MS. */
static void process_reap(tb_loader *ld, int w)
{
    for (int ms = 0; ms < REAP_TIMEOUT_MS && !worker_dead(ld, w); ms++) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!worker_dead(ld, w)) {
        kill(ld->pids[w], SIGKILL);
        waitpid(ld->pids[w], &ld->wstatus[w], 0);
        ld->reaped[w] = 1;
    }
}

/* Tells every started worker to leave and joins them all. ctl->stop, not
 * just !active, is what a freshly started one-epoch worker must see: it may
 * take the lock only after the epoch already ended. */
static void workers_join(tb_loader *ld)
{
    double t0 = tb_clock_s();
    loader_ctl *c = ld->ctl;
    ctl_lock(c);
    c->active = 0;
    c->stop = 1;
    ctl_broadcast(&c->work, c);
    ctl_unlock(c);
    for (int w = 0; w < ld->started; w++) {
        if (ld->cfg.mode == TB_WORKERS_THREADS)
            pthread_join(ld->threads[w], NULL);
        else
            process_reap(ld, w);
    }
    ld->started = 0;
    ld->stats.start_s += tb_clock_s() - t0;
}

/* Persistent workers: park them at the end of an epoch. Waits until none is
 * building a batch (a dead process counts as idle). */
static void workers_park(tb_loader *ld)
{
    loader_ctl *c = ld->ctl;
    ctl_lock(c);
    c->active = 0;
    ctl_broadcast(&c->work, c);
    for (;;) {
        int busy = 0;
        for (int w = 0; w < ld->nw; w++)
            busy |= ld->busy[w] && !worker_dead(ld, w);
        if (!busy)
            break;
        ctl_timedwait(&c->ready, c, WAIT_POLL_MS);
    }
    ctl_unlock(c);
}

/* ---- creating ---- */

static int cfg_check(const tb_loader_cfg *cfg, const tb_dataset *ds)
{
    if (!ds || ds->n <= 0 || (!ds->make && (!ds->images || !ds->labels)))
        return TB_FAIL(TB_ERR_INVALID, "loader: empty dataset");
    if (ds->kind == TB_SAMPLES_TOKENS && (!ds->make || ds->seq <= 0 || ds->vocab <= 0))
        return TB_FAIL(TB_ERR_INVALID, "loader: token dataset %s without a generator, seq %d, "
                       "vocab %d", ds->name, ds->seq, ds->vocab);
    if (ds->kind == TB_SAMPLES_TOKENS && (cfg->augment.enabled || cfg->raw_u8))
        return TB_FAIL(TB_ERR_INVALID, "loader: token dataset %s: no crop/flip augmentation "
                       "and no raw uint8 batches for token ids", ds->name);
    if (cfg->batch_size <= 0 || cfg->num_workers < 0 || cfg->num_workers > MAX_WORKERS)
        return TB_FAIL(TB_ERR_INVALID, "loader: batch_size %d (> 0), num_workers %d (0..%d)",
                       cfg->batch_size, cfg->num_workers, MAX_WORKERS);
    if (cfg->num_workers > 0 && (cfg->prefetch_factor < 1 || cfg->prefetch_factor > 64))
        return TB_FAIL(TB_ERR_INVALID, "loader: prefetch_factor %d (1..64)", cfg->prefetch_factor);
    if (cfg->mode != TB_WORKERS_THREADS && cfg->mode != TB_WORKERS_PROCESSES)
        return TB_FAIL(TB_ERR_INVALID, "loader: worker mode %d", (int)cfg->mode);
    if (cfg->augment.enabled && (cfg->augment.pad < 0 || cfg->augment.pad > ds->h ||
                                 cfg->augment.pad > ds->w))
        return TB_FAIL(TB_ERR_INVALID, "loader: crop padding %d for %dx%d images",
                       cfg->augment.pad, ds->h, ds->w);
    if ((double)cfg->batch_size * ds->c * ds->h * ds->w * sizeof(float) > 1e11)
        return TB_FAIL(TB_ERR_INVALID, "loader: batch of %d samples is too large",
                       cfg->batch_size);
    return TB_OK;
}

static void *map_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The shared mapping: ctl, busy flags, slot states, permutation. */
static int shared_create(tb_loader *ld)
{
    size_t off_busy = align64(sizeof(loader_ctl));
    size_t off_slots = off_busy + align64(sizeof(int) * (size_t)(ld->nw ? ld->nw : 1));
    size_t off_perm = off_slots + align64(sizeof(slot_state) * (size_t)ld->nslots);
    ld->shared_bytes = off_perm + align64(sizeof(int32_t) * (size_t)ld->ds->n);
    ld->shared = map_shared(ld->shared_bytes);
    if (!ld->shared)
        return tb_error_push_errno(TB_ERR_NOMEM, __FILE__, __LINE__,
                                   "cannot map %zu bytes of loader state", ld->shared_bytes);
    unsigned char *base = ld->shared;
    ld->ctl = (loader_ctl *)base;
    ld->busy = (int *)(base + off_busy);
    ld->slots = (slot_state *)(base + off_slots);
    ld->perm = (int32_t *)(base + off_perm);
    return ctl_init(ld->ctl, ld->cfg.mode == TB_WORKERS_PROCESSES);
}

/* Batch buffers: shared memory for processes, else the allocator's. */
static int buffers_create(tb_loader *ld)
{
    size_t bytes = ld->slot_bytes * (size_t)ld->nslots;
    if (ld->nw > 0 && ld->cfg.mode == TB_WORKERS_PROCESSES) {
        ld->data = map_shared(bytes);
        if (!ld->data)
            return tb_error_push_errno(TB_ERR_NOMEM, __FILE__, __LINE__,
                                       "cannot map %zu bytes of batch slots", bytes);
        ld->data_mapped = 1;
        if (ld->cfg.allocator)
            TB_TRY(ld->alloc.alloc(ld->alloc.user, (void **)&ld->out, ld->slot_bytes));
        return TB_OK;
    }
    return ld->alloc.alloc(ld->alloc.user, (void **)&ld->data, bytes);
}

static int handles_create(tb_loader *ld)
{
    int n = ld->nw ? ld->nw : 1;
    ld->args = calloc((size_t)n, sizeof *ld->args);
    ld->threads = calloc((size_t)n, sizeof *ld->threads);
    ld->pids = calloc((size_t)n, sizeof *ld->pids);
    ld->reaped = calloc((size_t)n, sizeof *ld->reaped);
    ld->wstatus = calloc((size_t)n, sizeof *ld->wstatus);
    if (!ld->args || !ld->threads || !ld->pids || !ld->reaped || !ld->wstatus)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate loader worker handles");
    for (int w = 0; w < ld->nw; w++) {
        ld->args[w].ld = ld;
        ld->args[w].w = w;
    }
    return TB_OK;
}

/* Where a slot's parts go, per sample kind (see the struct). */
static void slot_layout(tb_loader *ld)
{
    const tb_dataset *ds = ld->ds;
    size_t B = (size_t)ld->cfg.batch_size, scratch = 0, lab_bytes;
    ld->seq = ds->kind == TB_SAMPLES_TOKENS ? ds->seq : 0;
    ld->chw = (size_t)ds->c * ds->h * ds->w;
    if (ld->seq) {
        ld->img_bytes = align64(B * ld->seq * sizeof(int32_t));
        lab_bytes = ld->img_bytes;
        scratch = ((size_t)ld->seq + 1) * sizeof(int32_t);
    } else {
        ld->img_bytes = align64(B * ld->chw * (ld->cfg.raw_u8 ? sizeof(uint8_t) : sizeof(float)));
        lab_bytes = align64(B * sizeof(int32_t));
        scratch = ds->make && !ld->cfg.raw_u8 ? ld->chw : 0;
    }
    ld->off_lab = ld->img_bytes;
    ld->off_ids = ld->off_lab + lab_bytes;
    ld->off_scratch = ld->off_ids + align64(B * sizeof(int32_t));
    ld->off_hwc = ld->off_scratch + align64(scratch);
    ld->slot_bytes = ld->off_hwc + (transposes(ld) ? align64(ld->chw * sizeof(float)) : 0);
}

tb_loader_cfg tb_loader_default_cfg(void)
{
    tb_loader_cfg cfg = {
        .batch_size = 64, .shuffle = 1, .drop_last = 0, .seed = 0,
        .num_workers = 0, .prefetch_factor = 2, .persistent_workers = 0,
        .mode = TB_WORKERS_THREADS, .allocator = NULL,
        .test_fail_batch = -1, .test_crash_batch = -1,
    };
    cfg.augment = tb_augment_eval_defaults();
    cfg.augment.normalize = 1;
    return cfg;
}

int tb_loader_create(const tb_loader_cfg *cfg, const tb_dataset *ds, tb_loader **out)
{
    *out = NULL;
    TB_TRY(cfg_check(cfg, ds));
    tb_loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate a loader");
    ld->cfg = *cfg;
    ld->ds = ds;
    ld->alloc = cfg->allocator ? *cfg->allocator
                               : (tb_host_allocator){default_alloc, default_free, NULL};
    ld->nw = cfg->num_workers;
    ld->pf = ld->nw ? cfg->prefetch_factor : 1;
    ld->nslots = ld->nw ? ld->nw * (ld->pf + 1) : 1;
    ld->nbatches = cfg->drop_last ? ds->n / cfg->batch_size
                                  : (ds->n + cfg->batch_size - 1) / cfg->batch_size;
    slot_layout(ld);
    ld->held = -1;
    int rc;
    TB_TRY_GOTO(rc, shared_create(ld), out_destroy);
    TB_TRY_GOTO(rc, buffers_create(ld), out_destroy);
    TB_TRY_GOTO(rc, handles_create(ld), out_destroy);
    if (ld->nw > 0 && cfg->persistent_workers)
        TB_TRY_GOTO(rc, workers_start(ld), out_destroy);
    *out = ld;
    return TB_OK;
out_destroy:
    tb_loader_destroy(ld);
    return rc;
}

int tb_loader_num_batches(const tb_loader *ld) { return ld->nbatches; }

/* ---- epochs ---- */

/* Fisher-Yates driven by tb_rng_make(seed, epoch, 0, TB_RNG_SHUFFLE). */
static void perm_make(tb_loader *ld, int epoch)
{
    int n = ld->ds->n;
    for (int i = 0; i < n; i++)
        ld->perm[i] = i;
    if (!ld->cfg.shuffle)
        return;
    tb_rng r = tb_rng_make(ld->cfg.seed, (uint64_t)epoch, 0, TB_RNG_SHUFFLE);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)tb_rng_below(&r, (uint32_t)i + 1);
        int32_t t = ld->perm[i];
        ld->perm[i] = ld->perm[j];
        ld->perm[j] = t;
    }
}

int tb_loader_epoch_begin(tb_loader *ld, int epoch)
{
    if (ld->in_epoch)
        TB_TRY(tb_loader_epoch_end(ld));
    perm_make(ld, epoch); /* no worker is busy: epoch_end saw to that */
    loader_ctl *c = ld->ctl;
    ctl_lock(c);
    c->gen++;
    c->epoch = epoch;
    c->nbatches = ld->nbatches;
    c->taken = 0;
    c->active = 1;
    c->stop = 0; /* only non-persistent workers were stopped, and joined */
    ctl_broadcast(&c->work, c);
    ctl_unlock(c);
    ld->epoch = epoch;
    ld->next = 0;
    ld->held = -1;
    ld->in_epoch = 1;
    if (ld->nw > 0 && !ld->cfg.persistent_workers) {
        int rc = workers_start(ld);
        if (rc != TB_OK) {
            workers_join(ld);
            ld->in_epoch = 0;
            return rc;
        }
    }
    return TB_OK;
}

int tb_loader_epoch_end(tb_loader *ld)
{
    if (!ld->in_epoch)
        return TB_OK;
    tb_loader_release_batch(ld);
    ld->in_epoch = 0;
    if (ld->nw == 0)
        return TB_OK;
    if (ld->cfg.persistent_workers)
        workers_park(ld);
    else
        workers_join(ld);
    return TB_OK;
}

void tb_loader_release_batch(tb_loader *ld)
{
    if (ld->held < 0)
        return;
    ld->held = -1; /* its slot is free once the next batch is taken (wait_for_batch) */
}

/* Waits until batch b's slot carries this epoch's batch b, or its worker
 * process is gone. Returns the worker's status for it. */
static int wait_for_batch(tb_loader *ld, int b, int *size)
{
    loader_ctl *c = ld->ctl;
    slot_state *s = &ld->slots[slot_of(ld, b)];
    int w = b % ld->nw, dead = 0;
    ctl_lock(c);
    while (!(s->gen == c->gen && s->batch == b)) {
        if (dead) {
            ctl_unlock(c);
            char how[64];
            describe_exit(ld->wstatus[w], how, sizeof how);
            return TB_FAIL(TB_ERR_INTERNAL, "loader worker process %d (pid %d) %s before "
                           "producing batch %d of epoch %d", w, (int)ld->pids[w], how, b,
                           ld->epoch);
        }
        /* A process that exited published its slots first, so one more look
         * at the slot after seeing it dead settles it. */
        if (ctl_timedwait(&c->ready, c, WAIT_POLL_MS) == ETIMEDOUT)
            dead = worker_dead(ld, w);
    }
    int status = s->status;
    char msg[SLOT_MSG];
    memcpy(msg, s->msg, sizeof msg);
    *size = s->size;
    c->taken = b + 1; /* one more batch may be built ahead */
    ctl_broadcast(&c->work, c);
    ctl_unlock(c);
    if (status != TB_OK)
        return TB_FAIL(status, "loader worker %d (%s) failed on batch %d of epoch %d: %s", w,
                       tb_loader_mode_name(ld->cfg.mode), b, ld->epoch, msg);
    return TB_OK;
}

static void batch_fill(const tb_loader *ld, unsigned char *base, int b, int size, tb_batch *out)
{
    out->epoch = ld->epoch;
    out->index = b;
    out->size = size;
    out->c = ld->ds->c;
    out->h = ld->ds->h;
    out->w = ld->ds->w;
    out->images = ld->cfg.raw_u8 || ld->seq ? NULL : slot_images(ld, base);
    out->nhwc = out->images && ld->cfg.nhwc;
    out->raw = ld->cfg.raw_u8 ? base : NULL;
    out->tokens = ld->seq ? (int32_t *)base : NULL;
    out->seq = ld->seq;
    out->labels = slot_labels(ld, base);
    out->sample_ids = slot_ids(ld, base);
}

/* Process workers with a caller's allocator: copy the slot into the
 * caller's buffer (e.g. pinned memory) and hand the slot back at once. */
static void batch_copy_out(tb_loader *ld, tb_batch *b)
{
    size_t per = ld->seq ? (size_t)ld->seq : 1; /* labels per sample */
    size_t img = ld->seq ? (size_t)b->size * ld->seq * sizeof(int32_t)
                         : (size_t)b->size * ld->chw *
                               (ld->cfg.raw_u8 ? sizeof(uint8_t) : sizeof(float));
    size_t ids = (size_t)b->size * sizeof(int32_t);
    memcpy(ld->out, ld->data + (size_t)slot_of(ld, b->index) * ld->slot_bytes, img);
    memcpy(slot_labels(ld, ld->out), b->labels, ids * per);
    memcpy(slot_ids(ld, ld->out), b->sample_ids, ids);
    batch_fill(ld, ld->out, b->index, b->size, b);
    tb_loader_release_batch(ld);
}

static int next_batch(tb_loader *ld, tb_batch *b)
{
    if (!ld->in_epoch)
        return TB_FAIL(TB_ERR_INVALID, "tb_loader_next_batch called outside an epoch");
    tb_loader_release_batch(ld);
    int bi = ld->next, size = 0;
    if (bi >= ld->nbatches)
        return TB_OK;
    double t0 = tb_clock_s();
    unsigned char *base = ld->data;
    if (ld->nw == 0) {
        int rc = build_batch(ld, ld->epoch, bi, base, &size);
        if (rc != TB_OK) {
            char why[SLOT_MSG]; /* copied: the push below may reuse its entry */
            snprintf(why, sizeof why, "%s", tb_error_message());
            return TB_FAIL(rc, "loader (0 workers) failed on batch %d of epoch %d: %s", bi,
                           ld->epoch, why);
        }
    } else {
        TB_TRY(wait_for_batch(ld, bi, &size));
        base += (size_t)slot_of(ld, bi) * ld->slot_bytes;
    }
    double waited = tb_clock_s() - t0;
    ld->stats.wait_s += waited;
    ld->stats.last_wait_s = waited;
    ld->stats.batches++;
    batch_fill(ld, base, bi, size, b);
    ld->held = bi;
    ld->next = bi + 1;
    if (ld->out)
        batch_copy_out(ld, b);
    return TB_OK;
}

int tb_loader_next_batch(tb_loader *ld, tb_batch *b)
{
    int had = ld->next;
    int rc = next_batch(ld, b);
    if (rc != TB_OK)
        return -rc;
    return ld->next > had ? 1 : 0;
}

void tb_loader_destroy(tb_loader *ld)
{
    if (!ld)
        return;
    if (ld->ctl) {
        tb_loader_epoch_end(ld);
        if (ld->started > 0)
            workers_join(ld);
        pthread_mutex_destroy(&ld->ctl->mu);
        pthread_cond_destroy(&ld->ctl->ready);
        pthread_cond_destroy(&ld->ctl->work);
    }
    if (ld->data_mapped)
        munmap(ld->data, ld->slot_bytes * (size_t)ld->nslots);
    else if (ld->data)
        ld->alloc.free(ld->alloc.user, ld->data);
    if (ld->out)
        ld->alloc.free(ld->alloc.user, ld->out);
    if (ld->shared)
        munmap(ld->shared, ld->shared_bytes);
    free(ld->args);
    free(ld->threads);
    free(ld->pids);
    free(ld->reaped);
    free(ld->wstatus);
    free(ld);
}

void tb_loader_get_stats(const tb_loader *ld, tb_loader_stats *st) { *st = ld->stats; }

void tb_loader_reset_stats(tb_loader *ld) { memset(&ld->stats, 0, sizeof ld->stats); }

const char *tb_loader_mode_name(tb_worker_mode mode)
{
    return mode == TB_WORKERS_PROCESSES ? "processes" : "threads";
}
