/*
 * backend.c - the CPU backend: the default wherever no GPU is found, and
 * the oracle the tests trust.
 *
 * "Device" memory is host memory from an allocator that counts bytes in use
 * and the high-water mark, and can refuse allocations past a limit
 * (--mem-limit): Linux never refuses a malloc, so the out-of-memory point of
 * the batch-size sweep has to be counted. The same count is held under what
 * the machine had available when the backend opened (memavail.c), so that a
 * batch too big for the machine is an out-of-memory error, not a process
 * the kernel's OOM killer ends. Work runs synchronously on the
 * calling thread plus OpenMP worker threads, so streams are tokens and an
 * event is a CLOCK_MONOTONIC time stamp taken when it is recorded.
 * Pinned host memory has no meaning without a device to copy to: host_alloc
 * ignores the flag (the pin_memory technique reports n/a on this backend).
 */
#define _GNU_SOURCE
#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/copy.h"
#include "lib/backend/cpu/gelu.h"

#define CPU_ALIGN 64

/* Sits in front of every dev_alloc block so dev_free knows its size. */
typedef struct cpu_block_header {
    size_t bytes;
    uint64_t magic;
    char pad[CPU_ALIGN - sizeof(size_t) - sizeof(uint64_t)];
} cpu_block_header;

#define CPU_BLOCK_MAGIC 0x7475626e62656e63ull

struct tb_stream { int token; };
struct tb_event { double t; int recorded; };

static tb_cpu_ctx *ctx_of(tb_backend *be) { return (tb_cpu_ctx *)be->ctx; }

/* Raises *peak to at least v; loses no update under concurrent allocations. */
static void peak_raise(size_t *peak, size_t v)
{
    size_t cur = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(peak, &cur, v, 1, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED))
        ;
}

static int cpu_dev_alloc(tb_backend *be, void **p, size_t bytes)
{
    tb_cpu_ctx *c = ctx_of(be);
    *p = NULL;
    size_t in_use = __atomic_add_fetch(&c->in_use, bytes, __ATOMIC_RELAXED);
    if (c->limit && in_use > c->limit) {
        __atomic_sub_fetch(&c->in_use, bytes, __ATOMIC_RELAXED);
        return TB_FAIL(TB_ERR_DEVICE_OOM,
                       "out of memory: allocating %zu bytes would use %zu of the %zu-byte "
                       "--mem-limit; use a smaller batch or raise the limit",
                       bytes, in_use, c->limit);
    }
    if (c->budget && in_use > c->budget) {
        /* past this, the kernel's OOM killer would end the process, silently,
         * once the pages are touched: a clean error instead */
        __atomic_sub_fetch(&c->in_use, bytes, __ATOMIC_RELAXED);
        return TB_FAIL(TB_ERR_DEVICE_OOM,
                       "out of memory: allocating %zu MiB would hold %zu MiB, more than the "
                       "%zu MiB this machine had to spare (%s); use a smaller batch",
                       bytes >> 20, in_use >> 20, c->budget >> 20, c->budget_source);
    }
    size_t rounded = ((bytes + CPU_ALIGN - 1) / CPU_ALIGN) * CPU_ALIGN;
    cpu_block_header *h = aligned_alloc(CPU_ALIGN, sizeof *h + rounded);
    if (!h) {
        __atomic_sub_fetch(&c->in_use, bytes, __ATOMIC_RELAXED);
        return TB_FAIL(TB_ERR_DEVICE_OOM, "out of host memory allocating %zu bytes", bytes);
    }
    h->bytes = bytes;
    h->magic = CPU_BLOCK_MAGIC;
    peak_raise(&c->peak, in_use);
    *p = h + 1;
    return TB_OK;
}

static int cpu_dev_free(tb_backend *be, void *p)
{
    if (!p)
        return TB_OK;
    cpu_block_header *h = (cpu_block_header *)p - 1;
    if (h->magic != CPU_BLOCK_MAGIC)
        return TB_FAIL(TB_ERR_INTERNAL, "dev_free of a pointer the CPU backend did not allocate");
    h->magic = 0;
    __atomic_sub_fetch(&ctx_of(be)->in_use, h->bytes, __ATOMIC_RELAXED);
    free(h);
    return TB_OK;
}

static int cpu_host_alloc(tb_backend *be, void **p, size_t bytes, int pinned)
{
    (void)be;
    (void)pinned;
    *p = aligned_alloc(CPU_ALIGN, ((bytes + CPU_ALIGN - 1) / CPU_ALIGN) * CPU_ALIGN);
    if (!*p && bytes)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory allocating %zu bytes", bytes);
    return TB_OK;
}

static int cpu_host_free(tb_backend *be, void *p, int pinned)
{
    (void)be;
    (void)pinned;
    free(p);
    return TB_OK;
}

static int cpu_copy(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s)
{
    (void)s;
    return tb_cpu_copy(dst, src, bytes, ctx_of(be)->threads);
}

/* Between CPU backends host memory is shared: a copy is a copy. Ops run
 * when called, so the ordering copy_peer promises holds already. */
static int cpu_copy_peer(tb_backend *be, void *dst, tb_backend *src_be, const void *src,
                         size_t bytes)
{
    if (!src_be || src_be->copy_peer != cpu_copy_peer)
        return TB_FAIL(TB_ERR_INVALID, "copy_peer to cpu from a %s backend: only between CPU "
                       "backends; copy through host memory (copy_d2h, copy_h2d) instead",
                       src_be ? src_be->name : "NULL");
    return tb_cpu_copy(dst, src, bytes, ctx_of(be)->threads);
}

static int cpu_memset(tb_backend *be, void *p, int value, size_t bytes, tb_stream *s)
{
    (void)be;
    (void)s;
    memset(p, value, bytes);
    return TB_OK;
}

static int cpu_mem_stats(tb_backend *be, size_t *in_use, size_t *peak)
{
    if (in_use)
        *in_use = ctx_of(be)->in_use;
    if (peak)
        *peak = ctx_of(be)->peak;
    return TB_OK;
}

static int cpu_mem_reset_peak(tb_backend *be)
{
    ctx_of(be)->peak = ctx_of(be)->in_use;
    return TB_OK;
}

static int cpu_mem_set_limit(tb_backend *be, size_t bytes)
{
    ctx_of(be)->limit = bytes;
    return TB_OK;
}

static int cpu_stream_create(tb_backend *be, tb_stream **s)
{
    (void)be;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a stream");
    return TB_OK;
}

static int cpu_stream_destroy(tb_backend *be, tb_stream *s)
{
    (void)be;
    free(s);
    return TB_OK;
}

static int cpu_nothing_to_wait(tb_backend *be, tb_stream *s)
{
    (void)be;
    (void)s;
    return TB_OK;
}

static int cpu_event_create(tb_backend *be, tb_event **e)
{
    (void)be;
    *e = calloc(1, sizeof **e);
    if (!*e)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating an event");
    return TB_OK;
}

static int cpu_event_destroy(tb_backend *be, tb_event *e)
{
    (void)be;
    free(e);
    return TB_OK;
}

double tb_cpu_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cpu_event_record(tb_backend *be, tb_event *e, tb_stream *s)
{
    (void)be;
    (void)s;
    e->t = tb_cpu_now_seconds();
    e->recorded = 1;
    return TB_OK;
}

static int cpu_stream_wait_event(tb_backend *be, tb_stream *s, tb_event *e)
{
    (void)be;
    (void)s;
    (void)e;
    return TB_OK;
}

static int cpu_event_sync(tb_backend *be, tb_event *e)
{
    (void)be;
    (void)e;
    return TB_OK;
}

static int cpu_event_elapsed_ms(tb_backend *be, tb_event *start, tb_event *end, float *ms)
{
    (void)be;
    if (!start->recorded || !end->recorded)
        return TB_FAIL(TB_ERR_INVALID, "event_elapsed_ms on an event never recorded");
    *ms = (float)((end->t - start->t) * 1e3);
    return TB_OK;
}

static int cpu_sync(tb_backend *be)
{
    (void)be;
    return TB_OK;
}

static int cpu_device_info(tb_backend *be, tb_device_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "cpu");
    info->index = be->device;
    tb_cpu_model_name(info->name, sizeof info->name);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->total_mem = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    const char *source;
    info->avail_mem = tb_cpu_mem_budget(&source);
    info->multiprocessors = omp_get_num_procs();
    info->threads = ctx_of(be)->threads;
    tb_cpu_flags(info->cpu_flags, sizeof info->cpu_flags);
    const dnnl_version_t *v = dnnl_version();
    snprintf(info->libs, sizeof info->libs, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    return TB_OK;
}

static int cpu_gelu_fwd(tb_backend *be, tb_gelu_variant v, const float *x, float *y, size_t n)
{
    return tb_cpu_gelu_fwd(v, x, y, n, ctx_of(be)->threads);
}

static int cpu_gelu_bwd(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                        float *dx, size_t n)
{
    return tb_cpu_gelu_bwd(v, x, dy, dx, n, ctx_of(be)->threads);
}

static int cpu_gelu_tanh_fwd(tb_backend *be, tb_gelu_variant v, const float *x, float *y,
                             size_t n)
{
    return tb_cpu_gelu_tanh_fwd(v, x, y, n, ctx_of(be)->threads);
}

static int cpu_gelu_tanh_bwd(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                             float *dx, size_t n)
{
    return tb_cpu_gelu_tanh_bwd(v, x, dy, dx, n, ctx_of(be)->threads);
}

static int cpu_destroy(tb_backend *be)
{
    tb_cpu_release_dnnl_ops(be);
    tb_cpu_release_ops(be);
    free(be->ctx);
    free(be);
    return TB_OK;
}

void tb_cpu_model_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *p = strchr(line, ':');
        if (!p)
            break;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        snprintf(out, cap, "%s", p);
        out[strcspn(out, "\n")] = 0;
        break;
    }
    fclose(f);
}

void tb_cpu_flags(char *out, size_t cap)
{
    static const char *names[] = {
        "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
    };
    int on[7];
    __builtin_cpu_init();
    on[0] = __builtin_cpu_supports("avx2");
    on[1] = __builtin_cpu_supports("fma");
    on[2] = __builtin_cpu_supports("avx512f");
    on[3] = __builtin_cpu_supports("avx512bw");
    on[4] = __builtin_cpu_supports("avx512vl");
    on[5] = __builtin_cpu_supports("avx512bf16");
    on[6] = tb_cpu_has_avx512_fp16();
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < 7; i++) {
        if (on[i] && len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", names[i]);
    }
}

/* GCC 12's __builtin_cpu_supports does not know avx512fp16: ask cpuid
 * (leaf 7, subleaf 0, EDX bit 23). */
int tb_cpu_has_avx512_fp16(void)
{
    unsigned a = 7, b = 0, c = 0, d = 0;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return (d >> 23) & 1;
}

int tb_cpu_threads_limit(void)
{
    int cap = TB_THREADS_PER_CORE * omp_get_num_procs();
    return cap < TB_THREADS_MAX ? cap : TB_THREADS_MAX;
}

int tb_backend_cpu_create(int threads, tb_backend **out)
{
    *out = NULL;
    /* before any OpenMP region sizes its thread pool from it */
    if (threads < 0 || threads > tb_cpu_threads_limit())
        return TB_FAIL(TB_ERR_INVALID, "--threads=%d: this machine takes 0 (all %d cores) to "
                       "%d (%d per core)", threads, omp_get_num_procs(), tb_cpu_threads_limit(),
                       TB_THREADS_PER_CORE);
    tb_backend *be = calloc(1, sizeof *be);
    tb_cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating the CPU backend");
    }
    c->threads = threads > 0 ? threads : omp_get_num_procs();
    c->budget = tb_cpu_mem_budget(&c->budget_source);
    *be = (tb_backend){
        .name = "cpu",
        .device = 0,
        .ctx = c,
        .dev_alloc = cpu_dev_alloc,
        .dev_free = cpu_dev_free,
        .host_alloc = cpu_host_alloc,
        .host_free = cpu_host_free,
        .copy_h2d = cpu_copy,
        .copy_d2h = cpu_copy,
        .copy_d2d = cpu_copy,
        .copy_peer = cpu_copy_peer,
        .memset = cpu_memset,
        .mem_stats = cpu_mem_stats,
        .mem_reset_peak = cpu_mem_reset_peak,
        .mem_set_limit = cpu_mem_set_limit,
        .stream_create = cpu_stream_create,
        .stream_destroy = cpu_stream_destroy,
        .stream_sync = cpu_nothing_to_wait,
        .event_create = cpu_event_create,
        .event_destroy = cpu_event_destroy,
        .event_record = cpu_event_record,
        .stream_wait_event = cpu_stream_wait_event,
        .event_sync = cpu_event_sync,
        .event_elapsed_ms = cpu_event_elapsed_ms,
        .sync = cpu_sync,
        .device_info = cpu_device_info,
        .destroy = cpu_destroy,
        .gelu_fwd = cpu_gelu_fwd,
        .gelu_bwd = cpu_gelu_bwd,
        .gelu_tanh_fwd = cpu_gelu_tanh_fwd,
        .gelu_tanh_bwd = cpu_gelu_tanh_bwd,
    };
    int rc;
    TB_TRY_GOTO(rc, tb_cpu_install_dnnl_ops(be), out_free_backend);
    TB_TRY_GOTO(rc, tb_cpu_install_ops(be), out_release_dnnl);
    TB_TRY_GOTO(rc, tb_cpu_install_attn_ops(be), out_release_dnnl);
    TB_TRY_GOTO(rc, tb_cpu_install_ln_ops(be), out_release_dnnl);
    TB_TRY_GOTO(rc, tb_cpu_install_cast_ops(be), out_release_dnnl);
    TB_TRY_GOTO(rc, tb_cpu_install_token_ops(be), out_release_dnnl);
    *out = be;
    return TB_OK;

out_release_dnnl:
    tb_cpu_release_dnnl_ops(be);
out_free_backend:
    free(c);
    free(be);
    return rc;
}
