/* machine_probe.c - see machine_probe.h. */
#define _GNU_SOURCE
#include "bench/harness/machine_probe.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/clock.h"
#include "lib/core/status.h"

#define FMA_ITERS 8000000L
#define COPY_BYTES ((size_t)16 << 20)
#define CHASE_BYTES ((size_t)8 << 20)
#define CHASE_STEPS 200000L
#define MAX_REPS 64
#define XCORE_BURSTS 5
#define XCORE_TRIPS 2000 /* a probe's round trips: 0.1-0.7 ms on the EPYC VM */
#define XCORE_BURST_MAX_S 0.002
#define XCORE_STOP (-1L)

/* Three dependent chains: latency-bound, the same work on any core. */
static double fma_chain(long n)
{
    double a = 1.0, b = 1.0, c = 1.0;
    for (long i = 0; i < n; i++) {
        a = a * 1.0000001 + 1e-9;
        b = b * 0.9999999 + 1e-9;
        c = c * 1.0000001 - 1e-9;
    }
    return a + b + c;
}

/* A cyclic walk through every 64-byte line of buf (CHASE_BYTES), in an
 * order fixed by a seed: each line holds the index of the next. */
static void chase_build(uint64_t *buf)
{
    size_t n = CHASE_BYTES / 64;
    uint32_t *order = malloc(n * sizeof *order);
    if (!order) { /* a sequential walk still times the memory */
        for (size_t i = 0; i < n; i++)
            buf[i * 8] = (i + 1) % n * 8;
        return;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    uint64_t x = 0x636163686521ull;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        buf[(size_t)order[i] * 8] = (uint64_t)order[(i + 1) % n] * 8;
    free(order);
}

/* CHASE_STEPS dependent loads along the walk: seconds per load. */
static double chase_time(const uint64_t *buf, double *sink)
{
    uint64_t i = 0;
    for (long k = 0; k < (long)(CHASE_BYTES / 64); k++) /* warm: one lap */
        i = buf[i];
    double t0 = tb_clock_s();
    for (long k = 0; k < CHASE_STEPS; k++)
        i = buf[i];
    double t = tb_clock_s() - t0;
    *sink = (double)i;
    return t / CHASE_STEPS;
}

enum { PROBE_FMA, PROBE_COPY, PROBE_WALK };

typedef struct probe_job {
    int cpu;
    int kind;                  /* PROBE_FMA, PROBE_COPY, PROBE_WALK (src: the walk) */
    char *src, *dst;
    pthread_barrier_t *start;  /* NULL: alone */
    double seconds;
    double sink;
} probe_job;

/* Pins the calling thread to cpu; best effort: unpinned still measures. */
static void pin_self(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
}

static void *probe_thread(void *arg)
{
    probe_job *j = arg;
    pin_self(j->cpu);
    if (j->start)
        pthread_barrier_wait(j->start);
    if (j->kind == PROBE_WALK) {
        j->seconds = chase_time((const uint64_t *)j->src, &j->sink);
        return NULL;
    }
    double t0 = tb_clock_s();
    if (j->kind == PROBE_COPY) {
        memcpy(j->dst, j->src, COPY_BYTES);
        j->sink = j->dst[COPY_BYTES / 2];
    } else {
        j->sink = fma_chain(FMA_ITERS);
    }
    j->seconds = tb_clock_s() - t0;
    return NULL;
}

/* Runs jobs[0..n) at once (n = 2: behind a barrier); the slowest's time. */
static int run_jobs(probe_job *jobs, int n, double *seconds)
{
    pthread_t th[2];
    pthread_barrier_t b;
    if (n == 2 && pthread_barrier_init(&b, NULL, 2) != 0)
        return TB_FAIL(TB_ERR_INTERNAL, "machine probe: no barrier");
    int started = 0, rc = TB_OK;
    for (int i = 0; i < n; i++) {
        jobs[i].start = n == 2 ? &b : NULL;
        if (pthread_create(&th[i], NULL, probe_thread, &jobs[i]) != 0) {
            rc = TB_FAIL(TB_ERR_INTERNAL, "machine probe: cannot start a thread");
            break;
        }
        started++;
    }
    if (rc != TB_OK && started == 1 && n == 2)
        pthread_barrier_wait(&b); /* take the place of the one that never came */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (n == 2)
        pthread_barrier_destroy(&b);
    *seconds = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].seconds > *seconds)
            *seconds = jobs[i].seconds;
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- core to core: a cache line passed back and forth ----
 * Thread A (CPU a) writes 2k + 1 and waits for 2k + 2; thread B (CPU b)
 * waits for 2k + 1 and writes 2k + 2. Both spin (a sleeping waiter would
 * time the scheduler, not the caches). */
typedef struct xcore_job {
    int cpu, first;            /* first: the side that starts each trip */
    long trips;
    _Atomic long *line;
    pthread_barrier_t *start;
    const int *both;           /* 0 after the barrier: the other thread never started */
    double seconds;
} xcore_job;

static void *xcore_thread(void *arg)
{
    xcore_job *j = arg;
    pin_self(j->cpu);
    pthread_barrier_wait(j->start);
    if (!*j->both)
        return NULL;
    double t0 = tb_clock_s();
    long k = 0;
    for (; k < j->trips; k++) {
        long mine = j->first ? 2 * k + 1 : 2 * k + 2, theirs = j->first ? 2 * k : 2 * k + 1, v;
        while ((v = atomic_load_explicit(j->line, memory_order_acquire)) != theirs)
            if (v == XCORE_STOP)
                return NULL;
        /* a busy machine that deschedules one side makes each trip a time
         * slice: the starting side gives up after XCORE_BURST_MAX_S */
        if (j->first && (k & 15) == 15 && tb_clock_s() - t0 > XCORE_BURST_MAX_S) {
            atomic_store_explicit(j->line, XCORE_STOP, memory_order_release);
            break;
        }
        atomic_store_explicit(j->line, mine, memory_order_release);
    }
    if (j->first && k == j->trips) /* the last answer */
        while (atomic_load_explicit(j->line, memory_order_acquire) != 2 * j->trips)
            ;
    j->seconds = tb_clock_s() - t0;
    j->trips = k;
    return NULL;
}

/* The first two CPUs this process may use; how many there are (0..2). */
static int first_two_cpus(int cpu[2])
{
    cpu_set_t allowed;
    int n = 0;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &allowed))
                cpu[n++] = c;
    return n;
}

/* One burst of `trips` round trips between cpu[0] and cpu[1]: seconds per
 * round trip, or 0 when a thread could not start. */
static double xcore_burst(const int cpu[2], long trips)
{
    static _Alignas(64) _Atomic long line;
    pthread_barrier_t b;
    if (pthread_barrier_init(&b, NULL, 2) != 0)
        return 0;
    atomic_store(&line, 0);
    int both = 1;
    xcore_job jobs[2] = {{cpu[0], 1, trips, &line, &b, &both, 0},
                         {cpu[1], 0, trips, &line, &b, &both, 0}};
    pthread_t th[2];
    int started = 0;
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&th[i], NULL, xcore_thread, &jobs[i]) != 0)
            break;
        started++;
    }
    if (started == 1) { /* take the place of the one that never came; it returns */
        both = 0;
        pthread_barrier_wait(&b);
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&b);
    return started == 2 && jobs[0].trips > 0 ? jobs[0].seconds / (double)jobs[0].trips : 0;
}

double tb_machine_probe_xcore_s(int trips)
{
    int cpu[2];
    if (first_two_cpus(cpu) < 2 || trips < XCORE_BURSTS)
        return 0;
    double t[XCORE_BURSTS];
    for (int i = 0; i < XCORE_BURSTS; i++)
        if ((t[i] = xcore_burst(cpu, trips / XCORE_BURSTS)) <= 0)
            return 0;
    return median(t, XCORE_BURSTS);
}

int tb_machine_probe_run(int reps, tb_machine_probe *out)
{
    memset(out, 0, sizeof *out);
    if (reps < 1)
        reps = 1;
    if (reps > MAX_REPS)
        reps = MAX_REPS;
    int cpu[2] = {0, 0}, n = first_two_cpus(cpu);
    if (n == 0)
        n = 1;
    out->cpus = n;
    char *buf[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 5; i++) {
        buf[i] = aligned_alloc(64, COPY_BYTES);
        if (!buf[i]) {
            for (int k = 0; k < i; k++)
                free(buf[k]);
            return TB_FAIL(TB_ERR_NOMEM, "machine probe: no memory for its buffers");
        }
        memset(buf[i], i + 1, COPY_BYTES); /* faulted in: the copy times the copy */
    }
    chase_build((uint64_t *)buf[4]);
    double fa[2 * MAX_REPS], fp[MAX_REPS], ca[2 * MAX_REPS], cp[MAX_REPS], wa[2 * MAX_REPS];
    int rc = TB_OK;
    for (int r = 0; r < reps && rc == TB_OK; r++) {
        for (int i = 0; i < n && rc == TB_OK; i++) {
            probe_job j = {cpu[i], PROBE_WALK, buf[4], NULL, NULL, 0, 0};
            rc = run_jobs(&j, 1, &wa[r * n + i]);
        }
        for (int kind = PROBE_FMA; kind <= PROBE_COPY && rc == TB_OK; kind++) {
            double *alone = kind == PROBE_COPY ? ca : fa, *pair = kind == PROBE_COPY ? cp : fp;
            for (int i = 0; i < n && rc == TB_OK; i++) {
                probe_job j = {cpu[i], kind, buf[2 * i], buf[2 * i + 1], NULL, 0, 0};
                rc = run_jobs(&j, 1, &alone[r * n + i]);
            }
            if (n == 2 && rc == TB_OK) {
                probe_job jobs[2] = {{cpu[0], kind, buf[0], buf[1], NULL, 0, 0},
                                     {cpu[1], kind, buf[2], buf[3], NULL, 0, 0}};
                rc = run_jobs(jobs, 2, &pair[r]);
            }
        }
    }
    for (int i = 0; i < 5; i++)
        free(buf[i]);
    if (rc != TB_OK)
        return rc;
    out->cache_load_s = median(wa, reps * n);
    out->fma_alone_s = median(fa, reps * n);
    out->copy_alone_s = median(ca, reps * n);
    if (n == 2) {
        out->fma_pair_s = median(fp, reps);
        out->copy_pair_s = median(cp, reps);
        out->xcore_s = tb_machine_probe_xcore_s(XCORE_TRIPS);
    }
    return TB_OK;
}

double tb_machine_probe_fma_ratio(const tb_machine_probe *p)
{
    return p->fma_pair_s > 0 && p->fma_alone_s > 0 ? p->fma_pair_s / p->fma_alone_s : 0;
}

double tb_machine_probe_copy_ratio(const tb_machine_probe *p)
{
    return p->copy_pair_s > 0 && p->copy_alone_s > 0 ? p->copy_pair_s / p->copy_alone_s : 0;
}

void tb_machine_probe_csv_header(FILE *f)
{
    fputs("technique,at_s,cpus,fma_alone_ms,fma_pair_ms,fma_pair_ratio,copy_alone_ms,"
          "copy_pair_ms,copy_pair_ratio,cache_load_ns,xcore_ns\n", f);
}

void tb_machine_probe_csv_row(FILE *f, const char *technique, double at_s,
                              const tb_machine_probe *p)
{
    fprintf(f, "%s,%.1f,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%.1f\n", technique, at_s, p->cpus,
            1e3 * p->fma_alone_s, 1e3 * p->fma_pair_s, tb_machine_probe_fma_ratio(p),
            1e3 * p->copy_alone_s, 1e3 * p->copy_pair_s, tb_machine_probe_copy_ratio(p),
            1e9 * p->cache_load_s, 1e9 * p->xcore_s);
}
