/*
 * replay_main.c - runs a fuzz target's entry point on stored inputs, so the
 * seed corpus and every crash input found once stay tested in the normal
 * suite (bazel test //fuzz:all, built with gcc; under ASan too through
 * tools/sanitize.sh).
 *
 *   <target>_replay_test DIR...
 *
 * Feeds every regular file in each DIR to LLVMFuzzerTestOneInput, one call
 * per file, in name order. The entry point aborts on a broken contract, and
 * a sanitizer build reports what it finds; so a file that once crashed
 * fails this test until the bug is fixed. Fails when a DIR holds no file
 * (a corpus that went missing is not a pass).
 */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads path whole; NULL (and a message) when it cannot be read. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *bigger = realloc(buf, cap);
            if (!bigger) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = bigger;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *size = n;
    return buf;
}

/* Replays every file in dir; returns how many, or -1 on an error. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more || !(more[n] = strdup(e->d_name))) {
            closedir(d);
            return -1;
        }
        names = more;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            size_t size = 0;
            uint8_t *data = read_file(path, &size);
            if (!data)
                return -1;
            printf("replay: %s (%zu bytes)\n", path, size);
            fflush(stdout);
            LLVMFuzzerTestOneInput(data, size);
            free(data);
            count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR...: replays every file in each DIR\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        int n = replay_dir(argv[i]);
        if (n <= 0) {
            printf("FAIL: %s: %s\n", argv[i], n == 0 ? "no input file" : "cannot be read");
            return 1;
        }
        printf("replayed %d inputs from %s\n", n, argv[i]);
    }
    printf("PASS\n");
    return 0;
}
