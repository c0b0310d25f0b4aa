/*
 * data_format.c - bench:data_format: where the training data comes from
 * each epoch. Baseline: the gzip IDX files re-read and decompressed every
 * epoch (a reader that keeps nothing); a raw uint8 IDX copy under /dev/shm
 * (RAM-backed; written once with tb_dataset_write_fashion_mnist) re-read every
 * epoch; or decoded once into RAM before training. Each unit timed (an
 * epoch) reads the images and labels it trains, the setting's way (the
 * first N of each file: gzip is decompressed from its start up to them),
 * then trains one epoch of them (the profile's subset; default: 128 images,
 * 4 steps, so the units stay short and every round times every source).
 * Reading what the epoch trains keeps the ratio a real epoch has between
 * reading an image and training on it. Until 2026-11-30 every unit read
 * the whole 60000-image file and trained 128 images: the read was 88% of
 * the baseline's unit, and "decoded once in RAM" read 8.3x faster where a
 * whole epoch of 60000 images would gain about 1.6% (0.38 s of reading in
 * about 24 s of training on the 2-core VM). The read also no longer runs
 * a statistics pass over the pixels (the published mean and std are
 * used): 57% of the raw /dev/shm read was that arithmetic.
 * The check reads each source back and requires the same bytes as the
 * decoded subset.
 *
 *   bazel run //bench:data_format -- [--device=cpu] [--profile=...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/harness/step_harness.h"

enum { SRC_GZIP = 0, SRC_SHM = 1, SRC_RAM = 2 };

static char shm_dir[96];

static void remove_shm_copy(void)
{
    char p[256];
    for (int labels = 0; labels < 2; labels++)
        if (tb_dataset_fashion_mnist_path(shm_dir, TB_SPLIT_TRAIN, labels, 0, p, sizeof p) == TB_OK)
            unlink(p);
    rmdir(shm_dir);
}

/* The raw copy under /dev/shm, written on first use, removed at exit. */
static int shm_copy(const char *data_dir, const char **dir)
{
    if (!shm_dir[0]) {
        tb_dataset *ds = NULL;
        snprintf(shm_dir, sizeof shm_dir, "/dev/shm/tunebench-data-%d", (int)getpid());
        if (mkdir(shm_dir, 0700) != 0)
            return TB_FAIL(TB_ERR_IO, "cannot create %s", shm_dir);
        atexit(remove_shm_copy);
        /* and if a signal ends the run: 45 MB of RAM otherwise stay taken */
        char p[256];
        for (int labels = 0; labels < 2; labels++)
            if (tb_dataset_fashion_mnist_path(shm_dir, TB_SPLIT_TRAIN, labels, 0, p, sizeof p) ==
                TB_OK)
                TB_TRY(tb_bench_remove_on_signal(p));
        TB_TRY(tb_bench_remove_on_signal(shm_dir));
        TB_TRY(tb_dataset_open_fashion_mnist(data_dir, TB_SPLIT_TRAIN, 0, &ds));
        int rc = tb_dataset_write_fashion_mnist(ds, shm_dir, TB_SPLIT_TRAIN);
        tb_dataset_free(ds);
        TB_TRY(rc);
    }
    *dir = shm_dir;
    return TB_OK;
}

static int read_source(const tb_step_ctx *c, long limit, tb_dataset **out)
{
    const char *dir = c->cfg.data_dir;
    if (c->setting->param == SRC_SHM)
        TB_TRY(shm_copy(c->cfg.data_dir, &dir));
    return tb_dataset_open_fashion_mnist(dir, TB_SPLIT_TRAIN, limit, out);
}

static int epoch(tb_step_ctx *c, float *loss)
{
    for (int i = tb_loader_num_batches(c->t->train_ld); i > 0; i--)
        TB_TRY(tb_trainer_step(c->t, loss));
    return TB_OK;
}

static int read_then_epoch(tb_step_ctx *c, float *loss)
{
    tb_dataset *ds = NULL;
    TB_TRY(read_source(c, c->train->n, &ds));
    tb_dataset_free(ds);
    return epoch(c, loss);
}

static int same_bytes_note(tb_step_ctx *c, char *note, size_t cap)
{
    if (c->setting->param == SRC_RAM)
        return TB_OK;
    tb_dataset *ds = NULL;
    TB_TRY(read_source(c, c->train->n, &ds));
    const tb_dataset *ram = c->train;
    size_t px = (size_t)ram->n * ram->c * ram->h * ram->w;
    int same = ds->n == ram->n && !memcmp(ds->images, ram->images, px) &&
               !memcmp(ds->labels, ram->labels, (size_t)ram->n * sizeof *ram->labels);
    tb_dataset_free(ds);
    if (!same)
        return TB_FAIL(TB_ERR_DATA, "%s: the data read differs from the decoded subset",
                       c->setting->name);
    /* the reader takes raw IDX files where a folder has no .gz ones (a
     * TB_DATA_DIR of raw copies): the baseline then reads no gzip, and its
     * row must say so, or "raw in /dev/shm" reads as no faster than gzip */
    char gz[4096];
    const char *dir = c->cfg.data_dir ? c->cfg.data_dir : tb_dataset_default_dir();
    int raw = c->setting->param == SRC_GZIP &&
              tb_dataset_fashion_mnist_path(dir, TB_SPLIT_TRAIN, 0, 1, gz, sizeof gz) == TB_OK &&
              access(gz, F_OK) != 0;
    if (raw)
        fprintf(stderr, "data_format: %s has no gzip files (%s): the baseline reads the raw "
                "IDX files from disk instead, and its rows say so\n", dir, gz);
    snprintf(note, cap, "%sits read gives the same %d images and labels, bitwise",
             raw ? "NOT gzip: the data folder holds raw IDX files only (no .gz), so this row "
                   "timed raw reads from disk; " : "", ram->n);
    return TB_OK;
}

static void setup(tb_config *cfg, int profile)
{
    cfg->augment = 1;
    if (profile == TB_PROFILE_DEFAULT)
        cfg->data_limit = 128;
}

static const tb_step_setting settings[] = {
    {"gzip IDX every epoch", SRC_GZIP, 0, NULL, read_then_epoch, NULL},
    {"raw in /dev/shm every epoch", SRC_SHM, 0, NULL, read_then_epoch, NULL},
    {"decoded once in RAM", SRC_RAM, 0, NULL, epoch, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "data_format",
        .headline = "decoded once in RAM",
        .what = "gzip IDX read per epoch vs raw uint8 in /dev/shm vs decoded once in RAM",
        .est_seconds = {31, 150, 10, 20}, /* default, full, tiny, gpu */
        .budget_seconds = {28, 140, 2, 12}, /* of its rounds, same order */
        .order = 50,
        .tiny = {.min_rows = 3, .plots = "data_format"},
    },
    .param_name = "source",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_EPOCH,
    .own_loader = 1,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .check_note = same_bytes_note,
};

TB_STEP_MAIN(tech)
