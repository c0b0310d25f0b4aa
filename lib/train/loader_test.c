/*
 * loader_test.c - the data loader. Checks:
 *   - with 0 workers: every sample exactly once per epoch, labels follow
 *     their samples, batch sizes (the last one partial), epochs reshuffled,
 *     shuffle off keeps order, drop_last drops the partial batch;
 *   - bitwise-identical batches for num_workers 1,2,3 x prefetch 1,2,4 x
 *     persistent on/off x threads/processes over 2 epochs of 1000 samples;
 *   - a caller-supplied allocator is used and balanced (threads: slots;
 *     processes: the copy-out buffer), with the same batch bytes;
 *   - destroying mid-epoch and restarting an epoch mid-way are clean;
 *   - an error injected in a worker comes back as a status naming the batch,
 *     and a worker process that dies gives an error instead of a hang, also
 *     one killed while it waits for a free slot (glibc's process-shared
 *     condition variables hung the next wake-up then); worker processes
 *     whose consumer exits without destroying the loader end too;
 *   - bad configurations are refused;
 *   - on-the-fly images (made per sample by the worker) give the stored
 *     dataset's batches bit for bit, float and raw_u8, 0 workers, 2 threads,
 *     2 processes (also through a caller's allocator);
 *   - token batches: tokens = each sample's ids 0..T-1, labels = ids 1..T,
 *     every sample once, identical for 0 workers, 2 threads and 2 processes
 *     (with and without a caller's allocator); an id outside [0, vocab) is an
 *     error naming the sample; augmentation and raw_u8 on tokens are refused.
 * Run: bazel test //lib/train:loader_test   (valgrind: see datasets/BUILD notes)
 */
#include "lib/train/loader.h"
#include "lib/core/testing.h"

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_SAMPLES 1000
#define BATCH 64
#define EPOCHS 2
#define CHW 784

static tb_dataset *ds;

/* Everything one run produced, epoch by epoch, in batch order. */
typedef struct run_out {
    int nbatches[EPOCHS];
    int sizes[EPOCHS][N_SAMPLES / BATCH + 2];
    float *images;  /* (EPOCHS, N_SAMPLES, CHW) */
    int32_t labels[EPOCHS][N_SAMPLES];
    int32_t ids[EPOCHS][N_SAMPLES];
} run_out;

static run_out ref;

static tb_loader_cfg base_cfg(void)
{
    tb_loader_cfg cfg = tb_loader_default_cfg();
    cfg.batch_size = BATCH;
    cfg.seed = 1234;
    cfg.augment = tb_augment_train_defaults(ds);
    return cfg;
}

/* Runs EPOCHS epochs into out; returns a tb_err (chain printed). */
static int run(const tb_loader_cfg *cfg, run_out *out)
{
    tb_loader *ld;
    int rc = tb_loader_create(cfg, ds, &ld);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        return rc;
    }
    for (int e = 0; e < EPOCHS && rc == TB_OK; e++) {
        rc = tb_loader_epoch_begin(ld, e);
        int nb = 0, at = 0, more;
        tb_batch b;
        while (rc == TB_OK && (more = tb_loader_next_batch(ld, &b)) == 1) {
            if (b.index != nb || b.epoch != e || b.c != 1 || b.h != 28 || b.w != 28 ||
                at + b.size > N_SAMPLES) {
                printf("  bad batch header: index %d (want %d) epoch %d size %d\n", b.index, nb,
                       b.epoch, b.size);
                rc = TB_ERR_INTERNAL;
                break;
            }
            out->sizes[e][nb] = b.size;
            memcpy(out->images + ((size_t)e * N_SAMPLES + at) * CHW, b.images,
                   (size_t)b.size * CHW * sizeof(float));
            memcpy(&out->labels[e][at], b.labels, (size_t)b.size * sizeof(int32_t));
            memcpy(&out->ids[e][at], b.sample_ids, (size_t)b.size * sizeof(int32_t));
            at += b.size;
            nb++;
        }
        if (rc == TB_OK && more < 0) {
            tb_error_print(stdout);
            rc = -more;
        }
        out->nbatches[e] = nb;
        if (rc == TB_OK)
            rc = tb_loader_epoch_end(ld);
    }
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    if (rc == TB_OK && (st.batches != out->nbatches[0] + out->nbatches[1] || st.wait_s < 0))
        rc = TB_ERR_INTERNAL;
    tb_loader_destroy(ld);
    return rc;
}

static int same_as_ref(const run_out *o)
{
    for (int e = 0; e < EPOCHS; e++) {
        if (o->nbatches[e] != ref.nbatches[e] ||
            memcmp(o->sizes[e], ref.sizes[e], sizeof ref.sizes[e]) != 0 ||
            memcmp(o->labels[e], ref.labels[e], sizeof ref.labels[e]) != 0 ||
            memcmp(o->ids[e], ref.ids[e], sizeof ref.ids[e]) != 0)
            return 0;
    }
    return memcmp(o->images, ref.images, (size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float)) == 0;
}

static void run_out_init(run_out *o)
{
    float *keep = o->images;
    memset(o, 0, sizeof *o);
    o->images = keep;
    memset(o->images, 0xff, (size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float));
}

static void test_reference(void)
{
    printf("0 workers: each sample once per epoch, labels follow samples, sizes, reshuffle\n");
    tb_loader_cfg cfg = base_cfg();
    run_out_init(&ref);
    CHECK(run(&cfg, &ref) == TB_OK, "reference run failed");
    for (int e = 0; e < EPOCHS; e++) {
        int seen[N_SAMPLES] = {0}, bad_label = 0;
        for (int i = 0; i < N_SAMPLES; i++) {
            int id = ref.ids[e][i];
            if (id >= 0 && id < N_SAMPLES)
                seen[id]++;
            bad_label += ref.labels[e][i] != ds->labels[id];
        }
        int once = 0;
        for (int i = 0; i < N_SAMPLES; i++)
            once += seen[i] == 1;
        CHECK(once == N_SAMPLES, "epoch %d: %d of %d samples seen exactly once", e, once, N_SAMPLES);
        CHECK(bad_label == 0, "epoch %d: %d labels do not match their sample", e, bad_label);
        CHECK(ref.nbatches[e] == 16 && ref.sizes[e][0] == 64 && ref.sizes[e][15] == 1000 - 15 * 64,
              "epoch %d: %d batches, last %d", e, ref.nbatches[e], ref.sizes[e][15]);
    }
    CHECK(memcmp(ref.ids[0], ref.ids[1], sizeof ref.ids[0]) != 0, "epochs 0 and 1 same order");
    /* The first sample of batch 0 is sample ids[0][0] augmented for epoch 0. */
    float one[CHW];
    tb_augment_sample(&cfg.augment, ds, cfg.seed, 0, ref.ids[0][0], one);
    CHECK(memcmp(one, ref.images, sizeof one) == 0, "batch 0 sample 0 is not its augmentation");

    printf("shuffle off keeps dataset order; drop_last drops the partial batch\n");
    tb_loader_cfg c2 = base_cfg();
    c2.shuffle = 0;
    c2.drop_last = 1;
    run_out o;
    o.images = malloc((size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float));
    run_out_init(&o);
    CHECK(run(&c2, &o) == TB_OK, "run failed");
    int in_order = 1;
    for (int i = 0; i < 15 * 64; i++)
        in_order &= o.ids[0][i] == i && o.ids[1][i] == i;
    CHECK(in_order, "shuffle off reordered samples");
    CHECK(o.nbatches[0] == 15 && o.nbatches[1] == 15 && o.sizes[0][14] == 64,
          "drop_last: %d batches", o.nbatches[0]);
    free(o.images);
}

static void test_matrix(void)
{
    printf("bitwise-identical batches: workers 1..3 x prefetch 1,2,4 x persistent x mode\n");
    run_out o;
    o.images = malloc((size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float));
    int configs = 0;
    for (int mode = 0; mode <= 1; mode++)
        for (int workers = 1; workers <= 3; workers++)
            for (int pf = 1; pf <= 4; pf *= 2)
                for (int pers = 0; pers <= 1; pers++) {
                    tb_loader_cfg cfg = base_cfg();
                    cfg.num_workers = workers;
                    cfg.prefetch_factor = pf;
                    cfg.persistent_workers = pers;
                    cfg.mode = (tb_worker_mode)mode;
                    run_out_init(&o);
                    int rc = run(&cfg, &o);
                    CHECK(rc == TB_OK, "%s workers=%d prefetch=%d persistent=%d: rc %d",
                          tb_loader_mode_name(cfg.mode), workers, pf, pers, rc);
                    CHECK(rc != TB_OK || same_as_ref(&o),
                          "%s workers=%d prefetch=%d persistent=%d: batches differ from 0 workers",
                          tb_loader_mode_name(cfg.mode), workers, pf, pers);
                    configs++;
                }
    printf("  %d configurations x %d epochs identical to num_workers=0\n", configs, EPOCHS);
    free(o.images);
}

typedef struct counting_alloc {
    int allocs, frees;
} counting_alloc;

static int count_alloc(void *user, void **p, size_t bytes)
{
    ((counting_alloc *)user)->allocs++;
    *p = malloc(bytes);
    return *p ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "test allocator");
}

static void count_free(void *user, void *p)
{
    ((counting_alloc *)user)->frees++;
    free(p);
}

static void test_allocator(void)
{
    printf("caller's allocator: used, balanced, same bytes (threads, processes, 0 workers)\n");
    run_out o;
    o.images = malloc((size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float));
    int workers[3] = {0, 2, 2};
    tb_worker_mode modes[3] = {TB_WORKERS_THREADS, TB_WORKERS_THREADS, TB_WORKERS_PROCESSES};
    for (int k = 0; k < 3; k++) {
        counting_alloc ca = {0, 0};
        tb_host_allocator a = {count_alloc, count_free, &ca};
        tb_loader_cfg cfg = base_cfg();
        cfg.num_workers = workers[k];
        cfg.mode = modes[k];
        cfg.persistent_workers = 1;
        cfg.allocator = &a;
        run_out_init(&o);
        int rc = run(&cfg, &o);
        CHECK(rc == TB_OK && same_as_ref(&o), "%s workers=%d: rc %d or batches differ",
              tb_loader_mode_name(modes[k]), workers[k], rc);
        CHECK(ca.allocs >= 1 && ca.allocs == ca.frees, "%s workers=%d: %d allocs, %d frees",
              tb_loader_mode_name(modes[k]), workers[k], ca.allocs, ca.frees);
    }
    free(o.images);
}

static void test_mid_epoch(void)
{
    printf("destroy mid-epoch and restart an epoch mid-way, every mode\n");
    for (int mode = 0; mode <= 1; mode++)
        for (int pers = 0; pers <= 1; pers++) {
            tb_loader_cfg cfg = base_cfg();
            cfg.num_workers = 3;
            cfg.prefetch_factor = 2;
            cfg.persistent_workers = pers;
            cfg.mode = (tb_worker_mode)mode;
            tb_loader *ld;
            if (tb_loader_create(&cfg, ds, &ld) != TB_OK) {
                failures++;
                tb_error_print(stdout);
                continue;
            }
            tb_batch b;
            /* Epoch 1 abandoned after 3 batches, then epoch 0 from the start
             * must equal the reference, then destroy mid-way through epoch 1. */
            int ok = tb_loader_epoch_begin(ld, 1) == TB_OK;
            for (int i = 0; i < 3 && ok; i++)
                ok = tb_loader_next_batch(ld, &b) == 1;
            ok = ok && tb_loader_epoch_begin(ld, 0) == TB_OK;
            for (int i = 0; i < ref.nbatches[0] && ok; i++) {
                ok = tb_loader_next_batch(ld, &b) == 1 && b.index == i &&
                     memcmp(b.images, ref.images + (size_t)i * BATCH * CHW,
                            (size_t)b.size * CHW * sizeof(float)) == 0;
            }
            ok = ok && tb_loader_next_batch(ld, &b) == 0;
            ok = ok && tb_loader_epoch_begin(ld, 1) == TB_OK && tb_loader_next_batch(ld, &b) == 1;
            CHECK(ok, "%s persistent=%d: restart mid-epoch went wrong", tb_loader_mode_name(cfg.mode),
                  pers);
            tb_loader_destroy(ld); /* mid-epoch: workers busy or blocked on full slots */
        }
}

/* Epoch 0 of a loader for cfg, whose workers fail on purpose, up to the
 * failure: *got batches came, *rc is what next_batch (or epoch_begin) said
 * last. 0 when the loader could not be created (a failed check). */
static int run_failing_epoch(const tb_loader_cfg *cfg, const tb_dataset *ds, tb_loader **ld,
                             int *got, int *rc)
{
    int created = tb_loader_create(cfg, ds, ld) == TB_OK;
    CHECK(created, "tb_loader_create");
    if (!created)
        return 0;
    tb_error_clear();
    tb_batch b;
    *got = 0;
    *rc = tb_loader_epoch_begin(*ld, 0);
    while (*rc == TB_OK && (*rc = tb_loader_next_batch(*ld, &b)) == 1) {
        (*got)++;
        *rc = TB_OK;
    }
    return 1;
}

static void test_errors(void)
{
    printf("an error injected in a worker comes back as a status naming the batch\n");
    int workers[5] = {0, 2, 2, 2, 2};
    int modes[5] = {0, 0, 0, 1, 1};
    int pers[5] = {0, 0, 1, 0, 1};
    for (int k = 0; k < 5; k++) {
        tb_loader_cfg cfg = base_cfg();
        cfg.num_workers = workers[k];
        cfg.mode = (tb_worker_mode)modes[k];
        cfg.persistent_workers = pers[k];
        cfg.test_fail_batch = 5;
        tb_loader *ld;
        int got, rc;
        if (!run_failing_epoch(&cfg, ds, &ld, &got, &rc))
            continue;
        CHECK(got == 5 && rc == -TB_ERR_NOMEM, "%s workers=%d persistent=%d: %d batches, rc %d",
              tb_loader_mode_name(cfg.mode), workers[k], pers[k], got, rc);
        CHECK(strstr(tb_error_message(), "batch 5") && strstr(tb_error_message(), "injected"),
              "message: %s", tb_error_message());
        if (k == 3)
            printf("    %s\n", tb_error_message());
        CHECK(tb_loader_epoch_end(ld) == TB_OK, "epoch_end after an error");
        tb_loader_destroy(ld);
    }

    printf("a worker process that dies gives an error, not a hang\n");
    for (int p = 0; p <= 1; p++) {
        tb_loader_cfg cfg = base_cfg();
        cfg.num_workers = 2;
        cfg.mode = TB_WORKERS_PROCESSES;
        cfg.persistent_workers = p;
        cfg.test_crash_batch = 4;
        tb_loader *ld;
        int got, rc;
        if (!run_failing_epoch(&cfg, ds, &ld, &got, &rc))
            continue;
        CHECK(got == 4 && rc == -TB_ERR_INTERNAL, "persistent=%d: %d batches, rc %d", p, got, rc);
        CHECK(strstr(tb_error_message(), "exited with status 3") != NULL, "message: %s",
              tb_error_message());
        if (p)
            printf("    %s\n", tb_error_message());
        tb_loader_destroy(ld);
    }
}

/* The children of process parent (from /proc), at most max, into pids. */
static int children_of(pid_t parent, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL && n < max) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        const char *close_paren = strrchr(buf, ')');
        char state;
        int pid = atoi(buf), ppid;
        if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 &&
            ppid == parent && state != 'Z')
            pids[n++] = pid;
    }
    if (d)
        closedir(d);
    return n;
}

/* 1 while pid runs (a zombie or a gone process does not). */
static int alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    const char *p = strrchr(buf, ')');
    char state = 'Z';
    return p && sscanf(p + 1, " %c", &state) == 1 && state != 'Z' && state != 'X';
}

/* In a child process (so that a hang is a test failure, not a stuck test):
 * two persistent worker processes, prefetch 1, fill their slots and wait;
 * one is killed there. mode 0: the next batches give an error; 1: destroy
 * returns; 2: the consumer exits without destroying, and its workers end.
 * Exit status: 0 as expected, 1 wrong, 42 hung. */
static void on_hang(int sig)
{
    (void)sig;
    static const char m[] = "    HUNG: still blocked after 20 s\n";
    ssize_t w = write(1, m, sizeof m - 1);
    (void)w;
    _exit(42);
}

static int killed_idle_child(int mode, int report_fd)
{
    tb_loader_cfg cfg = base_cfg();
    cfg.batch_size = 4;
    cfg.num_workers = 2;
    cfg.prefetch_factor = 1;
    cfg.persistent_workers = 1;
    cfg.mode = TB_WORKERS_PROCESSES;
    tb_loader *ld;
    tb_batch b;
    if (tb_loader_create(&cfg, ds, &ld) != TB_OK || tb_loader_epoch_begin(ld, 0) != TB_OK ||
        tb_loader_next_batch(ld, &b) < 0)
        return 1;
    usleep(300 * 1000); /* both workers have filled their slot and wait for a free one */
    pid_t pids[8];
    int n = children_of(getpid(), pids, 8);
    if (n != 2)
        return 1;
    if (mode == 2) {
        ssize_t w = write(report_fd, pids, sizeof pids[0] * (size_t)n);
        (void)w;
        _exit(0); /* no destroy */
    }
    kill(pids[1], SIGKILL);
    usleep(200 * 1000);
    signal(SIGALRM, on_hang);
    alarm(20);
    int rc = 0;
    if (mode == 0)
        for (int i = 1; i < 40 && rc >= 0; i++)
            rc = tb_loader_next_batch(ld, &b);
    tb_loader_destroy(ld);
    return mode == 0 && rc >= 0; /* mode 0 must have met the dead worker's batch */
}

static void test_killed_idle_worker(void)
{
    printf("a worker process killed while it waits: an error, no hang; orphans end\n");
    for (int mode = 0; mode <= 2; mode++) {
        int fd[2];
        if (pipe(fd) != 0)
            return;
        fflush(NULL);
        pid_t child = fork();
        if (child == 0) {
            close(fd[0]);
            _exit(killed_idle_child(mode, fd[1]));
        }
        close(fd[1]);
        pid_t workers[2] = {0, 0};
        ssize_t got = mode == 2 ? read(fd[0], workers, sizeof workers) : 0;
        close(fd[0]);
        int status = 0;
        waitpid(child, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        CHECK(code == 0, "mode %d (%s): exit %d%s", mode,
              mode == 0 ? "next batches" : mode == 1 ? "destroy" : "consumer gone", code,
              code == 42 ? " (hung)" : "");
        if (mode == 2 && got == (ssize_t)sizeof workers) {
            int left = 2;
            for (int t = 0; t < 100 && left; t++) { /* 2 s */
                left = alive(workers[0]) + alive(workers[1]);
                if (left)
                    usleep(20 * 1000);
            }
            CHECK(left == 0, "the workers of a consumer gone without destroy end (%d left)",
                  left);
            for (int k = 0; k < 2 && left; k++)
                kill(workers[k], SIGKILL);
        }
    }
}

static void test_invalid(void)
{
    printf("bad configurations are refused\n");
    tb_loader *ld = NULL;
    tb_loader_cfg cfg = base_cfg();
    cfg.batch_size = 0;
    CHECK(tb_loader_create(&cfg, ds, &ld) == TB_ERR_INVALID && !ld, "batch_size 0 accepted");
    cfg = base_cfg();
    cfg.num_workers = 2;
    cfg.prefetch_factor = 0;
    CHECK(tb_loader_create(&cfg, ds, &ld) == TB_ERR_INVALID && !ld, "prefetch 0 accepted");
    cfg = base_cfg();
    cfg.augment.pad = 100;
    CHECK(tb_loader_create(&cfg, ds, &ld) == TB_ERR_INVALID && !ld, "pad 100 accepted");
    cfg = base_cfg();
    if (tb_loader_create(&cfg, ds, &ld) == TB_OK) {
        tb_batch b;
        CHECK(tb_loader_next_batch(ld, &b) == -TB_ERR_INVALID, "next_batch outside an epoch");
        tb_loader_destroy(ld);
    }
}

/* raw_u8 (--augment-on-device): each sample's dataset bytes, unaugmented,
 * with the same order, labels and ids as the float batches, for 0 workers,
 * 2 threads and 2 processes. */
static void test_raw_u8(void)
{
    printf("raw_u8: dataset bytes + sample ids, same order as float batches, every worker mode\n");
    const int workers[3] = {0, 2, 2};
    const tb_worker_mode modes[3] = {TB_WORKERS_THREADS, TB_WORKERS_THREADS, TB_WORKERS_PROCESSES};
    for (int m = 0; m < 3; m++) {
        tb_loader_cfg cfg = base_cfg();
        cfg.raw_u8 = 1;
        cfg.num_workers = workers[m];
        cfg.mode = modes[m];
        tb_loader *ld;
        if (tb_loader_create(&cfg, ds, &ld) != TB_OK) {
            CHECK(0, "tb_loader_create: %s", tb_error_message());
            tb_error_clear();
            continue;
        }
        int bad = 0, pos = 0, rc = 0, null_images = 1;
        if (tb_loader_epoch_begin(ld, 0) == TB_OK) {
            tb_batch b;
            while ((rc = tb_loader_next_batch(ld, &b)) == 1) {
                null_images &= b.images == NULL && b.raw != NULL;
                for (int k = 0; k < b.size; k++, pos++) {
                    int id = b.sample_ids[k];
                    bad += id != ref.ids[0][pos] || b.labels[k] != ref.labels[0][pos];
                    bad += memcmp(b.raw + (size_t)k * CHW, ds->images + (size_t)id * CHW, CHW) != 0;
                }
            }
            tb_loader_epoch_end(ld);
        }
        CHECK(rc == 0 && pos == N_SAMPLES && bad == 0 && null_images,
              "raw_u8 workers=%d %s: rc %d, %d samples, %d mismatches", workers[m],
              tb_loader_mode_name(modes[m]), rc, pos, bad);
        tb_loader_destroy(ld);
    }
}

/* Every batch of epoch 0 of ld: the float images (or raw bytes) into
 * images and the labels into labels, in batch order; rc of the epoch. */
static int collect_epoch(tb_loader *ld, unsigned char *images, size_t per_sample, int32_t *labels,
                         int *samples)
{
    int rc = tb_loader_epoch_begin(ld, 0), more;
    tb_batch b;
    *samples = 0;
    while (rc == TB_OK && (more = tb_loader_next_batch(ld, &b)) == 1) {
        const void *src = b.raw ? (const void *)b.raw : (const void *)b.images;
        memcpy(images + (size_t)*samples * per_sample, src, (size_t)b.size * per_sample);
        memcpy(labels + *samples, b.labels, (size_t)b.size * sizeof *labels);
        *samples += b.size;
    }
    if (rc == TB_OK && more < 0)
        rc = -more;
    tb_loader_epoch_end(ld);
    return rc;
}

/* An on-the-fly twin of ds (same seed and shape), with ds's mean/std so
 * that normalization matches: its batches must be the stored ones. */
static void test_on_the_fly_images(void)
{
    printf("on-the-fly images: the stored dataset's batches, float and raw, every worker mode\n");
    tb_synthetic_cfg sc = {.n = N_SAMPLES, .c = 1, .h = 28, .w = 28, .seed = 99, .noise = -1,
                           .on_the_fly = 1};
    tb_dataset *fly;
    if (tb_dataset_synthetic_create(&sc, &fly) != TB_OK) {
        CHECK(0, "on-the-fly dataset: %s", tb_error_message());
        return;
    }
    fly->mean[0] = ds->mean[0];
    fly->std[0] = ds->std[0];
    size_t max_bytes = (size_t)N_SAMPLES * CHW * sizeof(float);
    unsigned char *got = malloc(max_bytes), *want = malloc(max_bytes);
    int32_t labels[N_SAMPLES], want_labels[N_SAMPLES];
    const int workers[4] = {0, 2, 2, 2};
    const tb_worker_mode modes[4] = {TB_WORKERS_THREADS, TB_WORKERS_THREADS,
                                     TB_WORKERS_PROCESSES, TB_WORKERS_PROCESSES};
    counting_alloc ca = {0, 0};
    tb_host_allocator a = {count_alloc, count_free, &ca};
    for (int raw = 0; raw <= 1; raw++)
        for (int m = 0; m < 4; m++) {
            tb_loader_cfg cfg = base_cfg();
            cfg.raw_u8 = raw;
            cfg.num_workers = workers[m];
            cfg.mode = modes[m];
            cfg.allocator = m == 3 ? &a : NULL;
            size_t per = raw ? CHW : CHW * sizeof(float);
            tb_loader *held, *made;
            int n_want = 0, n_got = 0, rc = tb_loader_create(&cfg, ds, &held);
            rc = rc ? rc : collect_epoch(held, want, per, want_labels, &n_want);
            if (rc == TB_OK)
                tb_loader_destroy(held);
            rc = rc ? rc : tb_loader_create(&cfg, fly, &made);
            rc = rc ? rc : collect_epoch(made, got, per, labels, &n_got);
            if (rc == TB_OK)
                tb_loader_destroy(made);
            CHECK(rc == TB_OK && n_got == N_SAMPLES && n_want == N_SAMPLES &&
                      memcmp(got, want, (size_t)N_SAMPLES * per) == 0 &&
                      memcmp(labels, want_labels, sizeof labels) == 0,
                  "%s workers=%d%s%s: rc %d, on-the-fly batches differ from the stored ones",
                  tb_loader_mode_name(modes[m]), workers[m], raw ? " raw_u8" : "",
                  m == 3 ? " allocator" : "", rc);
        }
    CHECK(ca.allocs >= 1 && ca.allocs == ca.frees, "allocator: %d allocs, %d frees", ca.allocs,
          ca.frees);
    free(got);
    free(want);
    tb_dataset_free(fly);
}

/* nhwc: a 3-channel dataset's batches in (h, w, c), each the (c, h, w)
 * batch of the same loader without nhwc transposed, with 0 and 2 workers;
 * one channel needs no transpose and gives the same bytes. */
static void test_nhwc(void)
{
    printf("nhwc: channels-last batches are the NCHW ones transposed, built by the workers\n");
    enum { C = 3, H = 5, W = 7, N = 40 };
    tb_synthetic_cfg sc = {.n = N, .c = C, .h = H, .w = W, .seed = 7, .noise = -1,
                           .on_the_fly = 1};
    tb_dataset *rgb;
    if (tb_dataset_synthetic_create(&sc, &rgb) != TB_OK) {
        CHECK(0, "3-channel dataset: %s", tb_error_message());
        return;
    }
    size_t chw = (size_t)C * H * W, per = chw * sizeof(float);
    float *nchw = malloc(N * per), *nhwc = malloc(N * per);
    int32_t la[N], lb[N];
    for (int workers = 0; workers <= 2; workers += 2) {
        tb_loader_cfg cfg = base_cfg();
        cfg.num_workers = workers;
        tb_loader *ld;
        int na = 0, nb = 0, rc = tb_loader_create(&cfg, rgb, &ld);
        rc = rc ? rc : collect_epoch(ld, (unsigned char *)nchw, per, la, &na);
        if (rc == TB_OK)
            tb_loader_destroy(ld);
        cfg.nhwc = 1;
        rc = rc ? rc : tb_loader_create(&cfg, rgb, &ld);
        rc = rc ? rc : collect_epoch(ld, (unsigned char *)nhwc, per, lb, &nb);
        if (rc == TB_OK)
            tb_loader_destroy(ld);
        int bad = rc != TB_OK || na != N || nb != N || memcmp(la, lb, sizeof la) != 0;
        for (int k = 0; k < N && !bad; k++)
            for (int ch = 0; ch < C; ch++)
                for (int i = 0; i < H * W; i++)
                    bad |= nhwc[k * chw + (size_t)i * C + ch] != nchw[k * chw + (size_t)ch * H * W + i];
        CHECK(!bad, "workers=%d: rc %d, %d / %d samples, the nhwc batches are not the NCHW ones "
              "transposed", workers, rc, na, nb);
    }
    free(nchw);
    free(nhwc);
    tb_dataset_free(rgb);
    /* one channel: the same bytes, flagged nhwc */
    tb_loader_cfg cfg = base_cfg();
    cfg.nhwc = 1;
    tb_loader *ld;
    tb_batch b;
    int rc = tb_loader_create(&cfg, ds, &ld);
    rc = rc ? rc : tb_loader_epoch_begin(ld, 0);
    int got = rc ? 0 : tb_loader_next_batch(ld, &b);
    CHECK(got == 1 && b.nhwc == 1 && b.images, "one channel: rc %d, got %d", rc, got);
    if (rc == TB_OK)
        tb_loader_destroy(ld);
}

#define TOK_N 300
#define TOK_T 16
#define TOK_V 50

typedef struct token_run {
    int32_t tokens[TOK_N * TOK_T], labels[TOK_N * TOK_T], ids[TOK_N];
    int samples, bad_header;
} token_run;

/* Epoch 0 of tok with cfg into r; rc. */
static int run_tokens(const tb_loader_cfg *cfg, const tb_dataset *tok, token_run *r)
{
    memset(r, 0, sizeof *r);
    tb_loader *ld;
    TB_TRY(tb_loader_create(cfg, tok, &ld));
    int rc = tb_loader_epoch_begin(ld, 0), more = 0;
    tb_batch b;
    while (rc == TB_OK && (more = tb_loader_next_batch(ld, &b)) == 1) {
        r->bad_header |= b.images || b.raw || !b.tokens || b.seq != TOK_T || b.c != 1 ||
                         b.h != TOK_T || b.w != 1 || r->samples + b.size > TOK_N;
        if (r->bad_header)
            break;
        size_t row = (size_t)b.size * TOK_T;
        memcpy(r->tokens + (size_t)r->samples * TOK_T, b.tokens, row * sizeof(int32_t));
        memcpy(r->labels + (size_t)r->samples * TOK_T, b.labels, row * sizeof(int32_t));
        memcpy(r->ids + r->samples, b.sample_ids, (size_t)b.size * sizeof(int32_t));
        r->samples += b.size;
    }
    if (rc == TB_OK && more < 0)
        rc = -more;
    tb_loader_destroy(ld);
    return rc;
}

static void test_tokens(void)
{
    printf("token batches: inputs, next-token labels, every worker mode identical\n");
    tb_token_cfg tc = {.n = TOK_N, .seq = TOK_T, .vocab = TOK_V, .seed = 5};
    tb_dataset *tok;
    if (tb_dataset_tokens_create(&tc, &tok) != TB_OK) {
        CHECK(0, "token dataset: %s", tb_error_message());
        return;
    }
    static token_run ref_tok, r;
    tb_loader_cfg cfg = base_cfg();
    cfg.augment = tb_augment_eval_defaults(); /* tokens take no crop or flip */
    cfg.batch_size = 32;
    CHECK_OK(run_tokens(&cfg, tok, &ref_tok));
    int seen[TOK_N] = {0}, once = 0, bad = 0;
    for (int i = 0; i < ref_tok.samples; i++) {
        int32_t ids[TOK_T + 1];
        int id = ref_tok.ids[i];
        seen[id]++;
        tb_dataset_tokens(tok, id, ids);
        bad += memcmp(ref_tok.tokens + (size_t)i * TOK_T, ids, TOK_T * sizeof(int32_t)) != 0;
        bad += memcmp(ref_tok.labels + (size_t)i * TOK_T, ids + 1, TOK_T * sizeof(int32_t)) != 0;
    }
    for (int i = 0; i < TOK_N; i++)
        once += seen[i] == 1;
    CHECK(!ref_tok.bad_header && ref_tok.samples == TOK_N && once == TOK_N,
          "%d samples, %d seen once, bad header %d", ref_tok.samples, once, ref_tok.bad_header);
    CHECK(bad == 0, "%d rows are not the sample's ids / the ids shifted by one", bad);

    counting_alloc ca = {0, 0};
    tb_host_allocator a = {count_alloc, count_free, &ca};
    const int workers[4] = {2, 2, 2, 3};
    const tb_worker_mode modes[4] = {TB_WORKERS_THREADS, TB_WORKERS_PROCESSES,
                                     TB_WORKERS_PROCESSES, TB_WORKERS_THREADS};
    for (int m = 0; m < 4; m++) {
        tb_loader_cfg c = cfg;
        c.num_workers = workers[m];
        c.mode = modes[m];
        c.persistent_workers = m == 3;
        c.allocator = m == 2 ? &a : NULL;
        int rc = run_tokens(&c, tok, &r);
        CHECK(rc == TB_OK && !r.bad_header && memcmp(&r, &ref_tok, sizeof r) == 0,
              "%s workers=%d%s: rc %d, token batches differ from 0 workers",
              tb_loader_mode_name(c.mode), c.num_workers, m == 2 ? " allocator" : "", rc);
    }
    CHECK(ca.allocs == 1 && ca.frees == 1, "allocator: %d allocs, %d frees", ca.allocs, ca.frees);

    printf("token datasets refuse augmentation and raw_u8\n");
    tb_loader *ld = NULL;
    tb_loader_cfg bad_cfg = cfg;
    bad_cfg.augment.enabled = 1;
    CHECK(tb_loader_create(&bad_cfg, tok, &ld) == TB_ERR_INVALID && !ld, "augment accepted");
    bad_cfg = cfg;
    bad_cfg.raw_u8 = 1;
    CHECK(tb_loader_create(&bad_cfg, tok, &ld) == TB_ERR_INVALID && !ld, "raw_u8 accepted");
    tb_error_clear();
    tb_dataset_free(tok);
}

/* A token generator whose sample 7 holds the id vocab (one past the end). */
static void bad_sequence(const tb_dataset *d, int index, void *out, int32_t *label)
{
    (void)label;
    int32_t *ids = out;
    for (int t = 0; t <= d->seq; t++)
        ids[t] = (index + t) % d->vocab;
    if (index == 7)
        ids[3] = d->vocab;
}

static void test_token_range(void)
{
    printf("a token id outside [0, vocab) is an error naming the sample, every worker mode\n");
    tb_dataset bad = {.name = "bad-tokens", .n = 64, .c = 1, .h = 8, .w = 1, .num_classes = 10,
                      .kind = TB_SAMPLES_TOKENS, .seq = 8, .vocab = 10, .make = bad_sequence};
    const int workers[3] = {0, 2, 2};
    const tb_worker_mode modes[3] = {TB_WORKERS_THREADS, TB_WORKERS_THREADS,
                                     TB_WORKERS_PROCESSES};
    for (int m = 0; m < 3; m++) {
        tb_loader_cfg cfg = base_cfg();
        cfg.augment = tb_augment_eval_defaults();
        cfg.batch_size = 4;
        cfg.shuffle = 0;
        cfg.num_workers = workers[m];
        cfg.mode = modes[m];
        tb_loader *ld;
        int got, rc;
        if (!run_failing_epoch(&cfg, &bad, &ld, &got, &rc))
            continue;
        CHECK(got == 1 && rc == -TB_ERR_DATA, "%s workers=%d: %d batches, rc %d",
              tb_loader_mode_name(modes[m]), workers[m], got, rc);
        CHECK(strstr(tb_error_message(), "bad-tokens: sample 7 holds token id 10 at position 3") &&
                  strstr(tb_error_message(), "[0, 10)"),
              "message: %s", tb_error_message());
        if (m == 2)
            printf("    %s\n", tb_error_message());
        tb_error_clear();
        tb_loader_destroy(ld);
    }
}

/* Prefetch depth as PyTorch's DataLoader: while the caller holds batch k,
 * W*P batches (k+1 .. k+W*P) are built ahead, never more; before the
 * first batch is taken, W*P. Counted by an on-the-fly dataset whose
 * samples (one a batch) record that they were made. */
static atomic_int made[64];

static void counting_sample(const tb_dataset *d, int index, void *out, int32_t *label)
{
    memset(out, 0, (size_t)d->c * d->h * d->w);
    *label = 0;
    atomic_store(&made[index], 1);
}

static int made_count(void)
{
    int n = 0;
    for (int i = 0; i < 64; i++)
        n += atomic_load(&made[i]);
    return n;
}

static void test_prefetch_depth(void)
{
    printf("batches built ahead: W*P beside the one held, as PyTorch's DataLoader\n");
    tb_dataset cd = {.name = "counting", .n = 64, .c = 1, .h = 4, .w = 4, .num_classes = 10,
                     .make = counting_sample};
    cd.mean[0] = 0.5f, cd.std[0] = 0.25f;
    const int ws[3] = {1, 2, 2}, ps[3] = {1, 1, 2};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 64; i++)
            atomic_store(&made[i], 0);
        tb_loader_cfg cfg = tb_loader_default_cfg();
        cfg.batch_size = 1;
        cfg.shuffle = 0;
        cfg.num_workers = ws[k];
        cfg.prefetch_factor = ps[k];
        tb_loader *ld;
        tb_batch b;
        int ahead = ws[k] * ps[k];
        if (tb_loader_create(&cfg, &cd, &ld) != TB_OK || tb_loader_epoch_begin(ld, 0) != TB_OK) {
            CHECK(0, "workers=%d prefetch=%d: cannot start", ws[k], ps[k]);
            continue;
        }
        usleep(200 * 1000);
        int before = made_count();
        int rc = tb_loader_next_batch(ld, &b);
        usleep(200 * 1000);
        int holding0 = made_count();
        rc = rc == 1 ? tb_loader_next_batch(ld, &b) : rc;
        usleep(200 * 1000);
        int holding1 = made_count();
        CHECK(rc == 1 && before == ahead && holding0 == ahead + 1 && holding1 == ahead + 2,
              "workers=%d prefetch=%d: %d built before the first batch (want %d), %d while "
              "holding batch 0 (want %d), %d while holding batch 1 (want %d)", ws[k], ps[k],
              before, ahead, holding0, ahead + 1, holding1, ahead + 2);
        tb_loader_destroy(ld);
    }
}

int main(void)
{
    tb_synthetic_cfg sc = {.n = N_SAMPLES, .c = 1, .h = 28, .w = 28, .seed = 99, .noise = -1};
    if (tb_dataset_synthetic_create(&sc, &ds) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    ref.images = malloc((size_t)EPOCHS * N_SAMPLES * CHW * sizeof(float));
    test_reference();
    test_matrix();
    test_allocator();
    test_mid_epoch();
    test_errors();
    test_killed_idle_worker();
    test_invalid();
    test_raw_u8();
    test_on_the_fly_images();
    test_nhwc();
    test_tokens();
    test_token_range();
    test_prefetch_depth();
    free(ref.images);
    tb_dataset_free(ds);
    printf(failures ? "loader_test: %d FAILED\n" : "loader_test: all passed\n", failures);
    return failures != 0;
}
