/*
 * fashion_mnist_test.c - the real Fashion-MNIST files from Debian's
 * dataset-fashion-mnist (a required dependency: a missing package fails this
 * test with the loader's own message). Checks: train with limit 1000 and the
 * whole test split open with the right shape, counts, label range and name,
 * are not flagged synthetic, and the limited read is a prefix of the full one;
 * the whole train split has 60000 samples and its exact byte count. A
 * directory without the files and one with a truncated copy fail with
 * messages that say which (install the package / reinstall a damaged file).
 * Run: bazel test //datasets:fashion_mnist_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/dataset.h"
#include "lib/core/testing.h"

static tb_dataset *open_or_report(tb_split split, long limit)
{
    tb_dataset *ds = NULL;
    if (tb_dataset_open_fashion_mnist(NULL, split, limit, &ds) != TB_OK) {
        tb_error_print(stdout);
        failures++;
        return NULL;
    }
    return ds;
}

static void check_shape(const tb_dataset *ds, int n, const char *name)
{
    CHECK(ds->n == n && ds->c == 1 && ds->h == 28 && ds->w == 28 && ds->num_classes == 10,
          "%s: %d samples of %dx%dx%d, %d classes", name, ds->n, ds->c, ds->h, ds->w,
          ds->num_classes);
    CHECK(!ds->synthetic, "%s flagged synthetic", name);
    CHECK(strcmp(ds->name, name) == 0, "name %s, want %s", ds->name, name);
    int counts[10] = {0}, bad = 0;
    for (int i = 0; i < ds->n; i++) {
        if (ds->labels[i] < 0 || ds->labels[i] > 9)
            bad++;
        else
            counts[ds->labels[i]]++;
    }
    CHECK(bad == 0, "%s: %d labels out of range", name, bad);
    for (int k = 0; k < 10; k++)
        CHECK(counts[k] > 0, "%s: class %d absent", name, k);
    CHECK(ds->mean[0] == TB_FASHION_MNIST_MEAN && ds->std[0] == TB_FASHION_MNIST_STD,
          "%s: mean/std %g/%g", name, ds->mean[0], ds->std[0]);
    printf("  %s: %d x %dx%dx%d from %s\n", ds->name, ds->n, ds->c, ds->h, ds->w, ds->source);
}

/* Opening the train split from dir fails with rc, and the first error
 * line (the loader's advice) holds want. */
static void check_refused(const char *dir, int rc_want, const char *want)
{
    tb_dataset *ds = NULL;
    int rc = tb_dataset_open_fashion_mnist(dir, TB_SPLIT_TRAIN, 0, &ds);
    const char *msg = tb_error_message();
    CHECK(rc == rc_want && ds == NULL, "%s: rc %d, want %d", dir, rc, rc_want);
    CHECK(msg && strstr(msg, want), "%s: message '%s' lacks '%s'", dir, msg ? msg : "", want);
    printf("  %s: %s\n", dir, msg ? msg : "");
    tb_error_clear();
    tb_dataset_free(ds);
}

/* A copy of the train images cut after 5,000 compressed bytes, beside the
 * real labels, in a fresh directory under dir. */
static int damaged_copy(const char *tmp, char *dir, size_t cap)
{
    char cmd[8192];
    snprintf(dir, cap, "%s/fmnist_damaged", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && head -c 5000 '%s/train-images-idx3-ubyte.gz' > "
             "'%s/train-images-idx3-ubyte.gz' && cp '%s/train-labels-idx1-ubyte.gz' '%s/'", dir,
             tb_dataset_default_dir(), dir, tb_dataset_default_dir(), dir);
    return system(cmd);
}

int main(void)
{
    printf("Fashion-MNIST from %s\n", tb_dataset_default_dir());
    printf("train, first 1000 samples\n");
    tb_dataset *train1k = open_or_report(TB_SPLIT_TRAIN, 1000);
    if (train1k)
        check_shape(train1k, 1000, "fashion-mnist-train");

    printf("test split, whole (exact byte count checked)\n");
    tb_dataset *test = open_or_report(TB_SPLIT_TEST, 0);
    if (test)
        check_shape(test, 10000, "fashion-mnist-test");

    printf("train split, whole: 60000 samples; the first 1000 equal the limited read\n");
    tb_dataset *train = open_or_report(TB_SPLIT_TRAIN, 0);
    if (train) {
        check_shape(train, 60000, "fashion-mnist-train");
        if (train1k)
            CHECK(memcmp(train->images, train1k->images, 1000 * 784) == 0 &&
                      memcmp(train->labels, train1k->labels, 1000 * sizeof(int32_t)) == 0,
                  "limited read is not a prefix of the full one");
        /* Pixels really are images: the measured mean is the published one. */
        tb_dataset tmp = *train;
        tb_dataset_compute_stats(&tmp);
        CHECK(tmp.mean[0] > 0.28f && tmp.mean[0] < 0.29f && tmp.std[0] > 0.35f && tmp.std[0] < 0.36f,
              "measured mean/std %g/%g", tmp.mean[0], tmp.std[0]);
        printf("  measured mean %.4f std %.4f\n", tmp.mean[0], tmp.std[0]);
    }
    printf("bad directories: missing files, a damaged file\n");
    const char *tmp = getenv("TEST_TMPDIR");
    char empty[4096], damaged[4096];
    snprintf(empty, sizeof empty, "%s/fmnist_empty", tmp ? tmp : "/tmp");
    char mk[4200];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", empty);
    CHECK(system(mk) == 0, "cannot make %s", empty);
    check_refused(empty, TB_ERR_IO, "install Debian's dataset-fashion-mnist");
    /* a mistyped folder is said as such, not as a missing package */
    char nosuch[4200];
    snprintf(nosuch, sizeof nosuch, "%s/no-such-folder", empty);
    check_refused(nosuch, TB_ERR_IO, "no-such-folder (from --data-dir) does not exist");
    if (damaged_copy(tmp ? tmp : "/tmp", damaged, sizeof damaged) == 0)
        check_refused(damaged, TB_ERR_DATA, "a file is damaged (below): reinstall it");
    else
        CHECK(0, "cannot make a damaged copy in %s", damaged);

    tb_dataset_free(train1k);
    tb_dataset_free(test);
    tb_dataset_free(train);
    printf(failures ? "fashion_mnist_test: %d FAILED\n" : "fashion_mnist_test: all passed\n", failures);
    return failures != 0;
}
