/*
 * backend_test.c - the CPU backend's memory, copies, events, device
 * info, and --device parsing.  bazel test //lib/backend/cpu:backend_cpu_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/core/testing.h"

static void test_alloc_and_stats(tb_backend *be)
{
    void *a = NULL, *b = NULL;
    size_t in_use = 0, peak = 0;
    CHECK(be->dev_alloc(be, &a, 1000) == TB_OK && a, "alloc 1000");
    CHECK(((uintptr_t)a % 64) == 0, "64-byte aligned");
    CHECK(be->dev_alloc(be, &b, 3000) == TB_OK && b, "alloc 3000");
    be->mem_stats(be, &in_use, &peak);
    CHECK(in_use == 4000 && peak == 4000, "in_use %zu peak %zu, want 4000", in_use, peak);
    CHECK(be->dev_free(be, b) == TB_OK, "free");
    be->mem_stats(be, &in_use, &peak);
    CHECK(in_use == 1000 && peak == 4000, "after free in_use %zu peak %zu", in_use, peak);
    be->mem_reset_peak(be);
    be->mem_stats(be, &in_use, &peak);
    CHECK(peak == 1000, "reset peak %zu", peak);

    be->mem_set_limit(be, 5000);
    void *c = NULL;
    int rc = be->dev_alloc(be, &c, 4500);
    CHECK(rc == TB_ERR_DEVICE_OOM && c == NULL, "limit refuses 4500 more bytes (rc %d)", rc);
    CHECK(strstr(tb_error_message(), "mem-limit") != NULL, "message names the limit: %s",
          tb_error_message());
    tb_error_clear();
    be->mem_stats(be, &in_use, NULL);
    CHECK(in_use == 1000, "refused allocation not counted (%zu)", in_use);
    CHECK(be->dev_alloc(be, &c, 4000) == TB_OK, "4000 fits under the limit");
    be->dev_free(be, c);
    be->mem_set_limit(be, 0);
    be->dev_free(be, a);
    CHECK(be->dev_free(be, NULL) == TB_OK, "free(NULL)");
}

static void test_copies(tb_backend *be)
{
    /* Odd sizes and unaligned offsets, random contents. */
    size_t sizes[] = {1, 7, 64, 4097, 1 << 20, (1 << 22) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *h = NULL, *back = NULL, *d = NULL, *d2 = NULL;
        be->host_alloc(be, (void **)&h, n + 1, 0);
        be->host_alloc(be, (void **)&back, n, 1);
        be->dev_alloc(be, (void **)&d, n);
        be->dev_alloc(be, (void **)&d2, n);
        srand((unsigned)n);
        for (size_t j = 0; j < n + 1; j++)
            h[j] = (unsigned char)rand();
        CHECK(be->copy_h2d(be, d, h + 1, n, NULL) == TB_OK, "h2d");
        CHECK(be->copy_d2d(be, d2, d, n, NULL) == TB_OK, "d2d");
        CHECK(be->copy_d2h(be, back, d2, n, NULL) == TB_OK, "d2h");
        CHECK(memcmp(back, h + 1, n) == 0, "round trip of %zu bytes", n);
        CHECK(be->memset(be, d, 0xab, n, NULL) == TB_OK, "memset");
        size_t bad = 0;
        for (size_t j = 0; j < n; j++)
            bad += d[j] != 0xab;
        CHECK(bad == 0, "memset of %zu bytes: %zu wrong", n, bad);
        be->dev_free(be, d);
        be->dev_free(be, d2);
        be->host_free(be, h, 0);
        be->host_free(be, back, 1);
    }
}

static void test_events(tb_backend *be)
{
    tb_event *a, *b;
    tb_stream *s;
    CHECK(be->stream_create(be, &s) == TB_OK, "stream");
    CHECK(be->event_create(be, &a) == TB_OK && be->event_create(be, &b) == TB_OK, "events");
    float ms = -1;
    CHECK(be->event_elapsed_ms(be, a, b, &ms) == TB_ERR_INVALID, "unrecorded events refused");
    tb_error_clear();
    be->event_record(be, a, s);
    volatile double x = 0;
    for (int i = 0; i < 1000000; i++)
        x += i;
    be->event_record(be, b, s);
    be->event_sync(be, b);
    CHECK(be->event_elapsed_ms(be, a, b, &ms) == TB_OK && ms >= 0, "elapsed %f", ms);
    be->event_destroy(be, a);
    be->event_destroy(be, b);
    be->stream_destroy(be, s);
}

static void test_device_info(tb_backend *be)
{
    tb_device_info info;
    CHECK(be->device_info(be, &info) == TB_OK, "device_info");
    CHECK(strcmp(info.backend, "cpu") == 0, "backend %s", info.backend);
    CHECK(info.name[0] && info.total_mem > 0 && info.threads > 0, "name/mem/threads");
    CHECK(strncmp(info.libs, "oneDNN ", 7) == 0, "libs %s", info.libs);
    char slug[128];
    tb_device_slug(&info, slug, sizeof slug);
    CHECK(strncmp(slug, "cpu-", 4) == 0 && !strchr(slug, ' ') && !strchr(slug, '('), "slug %s", slug);
    printf("device: %s, slug %s, flags [%s], %s\n", info.name, slug, info.cpu_flags, info.libs);
    /* headers name the CPU's threads, a GPU's memory (it uses no CPU threads) */
    char dev[200], want[200];
    tb_device_describe(&info, dev, sizeof dev);
    snprintf(want, sizeof want, "%s, %d thread", info.name, info.threads);
    CHECK(strncmp(dev, want, strlen(want)) == 0, "describe %s", dev);
    tb_device_info gpu = {.backend = "cuda", .name = "NVIDIA H200", .total_mem = 150012674048ull};
    tb_device_describe(&gpu, dev, sizeof dev);
    CHECK(strcmp(dev, "NVIDIA H200, 139.7 GiB") == 0, "describe gpu %s", dev);
}

static void test_parse(void)
{
    tb_device_kind k;
    int o;
    CHECK(tb_device_parse("auto", &k, &o) == TB_OK && k == TB_DEVICE_AUTO, "auto");
    CHECK(tb_device_parse("cpu", &k, &o) == TB_OK && k == TB_DEVICE_CPU, "cpu");
    CHECK(tb_device_parse("cuda", &k, &o) == TB_OK && k == TB_DEVICE_CUDA && o == 0, "cuda");
    CHECK(tb_device_parse("cuda:3", &k, &o) == TB_OK && k == TB_DEVICE_CUDA && o == 3, "cuda:3");
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cudax", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tb_device_parse(bad[i], &k, &o) == TB_ERR_INVALID, "'%s' refused", bad[i]);
        CHECK(strstr(tb_error_message(), "--device=") != NULL, "message says what to use");
        tb_error_clear();
    }
}

/* A thread count the machine cannot use is refused before any OpenMP
 * region sees it (--threads=100000 crashed inside libgomp). */
static void test_thread_limit(void)
{
    int limit = tb_cpu_threads_limit();
    CHECK(limit >= TB_THREADS_PER_CORE && limit <= TB_THREADS_MAX, "limit %d", limit);
    const int bad[] = {-1, limit + 1, 100000};
    for (int k = 0; k < 3; k++) {
        tb_backend *be = NULL;
        int rc = tb_backend_cpu_create(bad[k], &be);
        char want[32];
        snprintf(want, sizeof want, "--threads=%d:", bad[k]);
        CHECK(rc == TB_ERR_INVALID && !be && strstr(tb_error_message(), want),
              "%d threads: rc %d, '%s'", bad[k], rc, tb_error_message());
        tb_error_clear();
    }
    tb_backend *be = NULL;
    CHECK(tb_backend_cpu_create(limit, &be) == TB_OK && be, "%d threads (the limit)", limit);
    if (be) {
        tb_device_info info;
        CHECK(be->device_info(be, &info) == TB_OK && info.threads == limit, "threads kept");
        tb_backend_close(be);
    }
}

/* The allocator refuses, as out of memory, what would take its count past
 * what the machine has available (here an injected MemAvailable of 64 MiB),
 * instead of letting the kernel's OOM killer end the process later. */
static void test_mem_budget(void)
{
    char path[] = "/tmp/backend_test_meminfo_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temp file");
    if (fd < 0)
        return;
    const char text[] = "MemTotal:       1048576 kB\nMemFree:          1000 kB\n"
                        "MemAvailable:     65536 kB\n";
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "write");
    close(fd);
    setenv("TB_TEST_MEMINFO", path, 1);
    tb_backend *be = NULL;
    int rc = tb_backend_cpu_create(1, &be);
    unsetenv("TB_TEST_MEMINFO");
    unlink(path);
    CHECK(rc == TB_OK, "backend");
    if (rc != TB_OK)
        return;
    void *small = NULL, *big = NULL;
    CHECK(be->dev_alloc(be, &small, 32u << 20) == TB_OK, "32 MiB of 64 available");
    rc = be->dev_alloc(be, &big, 32u << 20);
    CHECK(rc == TB_ERR_DEVICE_OOM && !big && strstr(tb_error_message(), "MemAvailable"),
          "64 MiB held of 64 available: rc %d, '%s'", rc, tb_error_message());
    tb_error_clear();
    size_t in_use = 0;
    CHECK(be->mem_stats(be, &in_use, NULL) == TB_OK && in_use == 32u << 20,
          "a refused allocation is not counted: %zu", in_use);
    be->dev_free(be, small);
    CHECK(be->dev_alloc(be, &big, 48u << 20) == TB_OK, "48 MiB once the 32 are back");
    be->dev_free(be, big);
    tb_backend_close(be);
}

int main(void)
{
    tb_backend *be = NULL;
    if (tb_backend_open(TB_DEVICE_CPU, 0, 2, &be) != TB_OK) {
        tb_error_print(stdout);
        return 1;
    }
    test_alloc_and_stats(be);
    test_copies(be);
    test_events(be);
    test_device_info(be);
    test_parse();
    test_thread_limit();
    test_mem_budget();
    tb_backend_close(be);
    printf("%s\n", failures ? "FAILED" : "all backend_cpu checks passed");
    return failures != 0;
}
