/*
 * tb_comm_test.c - the communicator under mpirun: blocking and non-blocking
 * all-reduce on odd sizes (several in flight, completed out of order),
 * broadcast, barrier, the byte counters, nccl-tests' bus bandwidth formula,
 * the NCCL entry point's refusal on a CPU backend, and the failure paths:
 *   --hang-rank=R   rank R sleeps instead of joining the all-reduce: the
 *                   others' watchdog must abort the job (--comm-timeout);
 *   --exit-rank=R   rank R exits with status 3: mpirun must end the job.
 * Run by lib/dist/ddp_test.sh (bazel test //lib/dist:comm_test //lib/dist:comm_hang_test
 * //lib/dist:comm_exit_test); alone it is a single-rank run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/dist/comm.h"
#include "lib/core/testing.h"

/* Rank r's element i: small integers and halves, so every sum is exact. */
static float value(int rank, size_t i) { return (float)(rank + 1) + 0.5f * (float)(i % 1000); }

static float expected(int size, size_t i)
{
    return (float)(size * (size + 1) / 2) + (float)size * 0.5f * (float)(i % 1000);
}

static float *filled(int rank, size_t n)
{
    float *b = malloc(n * sizeof *b);
    for (size_t i = 0; b && i < n; i++)
        b[i] = value(rank, i);
    return b;
}

static size_t count_wrong(const float *b, size_t n, int size)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += b[i] != expected(size, i);
    return bad;
}

static void test_blocking(tb_comm *c)
{
    size_t sizes[] = {1, 7, 4097, 100003};
    for (int k = 0; k < 4; k++) {
        float *b = filled(c->rank, sizes[k]);
        CHECK(tb_comm_allreduce_sum(c, b, sizes[k]) == TB_OK, "all-reduce %zu", sizes[k]);
        size_t bad = count_wrong(b, sizes[k], c->size);
        CHECK(bad == 0, "blocking all-reduce of %zu: %zu wrong", sizes[k], bad);
        free(b);
    }
}

/* Three in flight, progressed with test, waited for in reverse order. */
static void test_nonblocking(tb_comm *c)
{
    size_t n[3] = {5, 65537, 300001};
    float *b[3];
    tb_comm_req req[3] = {{.mpi = MPI_REQUEST_NULL}, {.mpi = MPI_REQUEST_NULL},
                          {.mpi = MPI_REQUEST_NULL}};
    for (int k = 0; k < 3; k++) {
        b[k] = filled(c->rank, n[k]);
        CHECK(tb_comm_iallreduce_sum(c, b[k], n[k], &req[k]) == TB_OK, "start %d", k);
        CHECK(req[k].active, "request %d active", k);
    }
    CHECK(tb_comm_iallreduce_sum(c, b[0], n[0], &req[0]) == TB_ERR_INVALID,
          "a second start on an active request is refused");
    tb_error_clear();
    int done = 0;
    for (int spins = 0; spins < 1000 && !done; spins++)
        CHECK(tb_comm_test(c, &req[0], &done) == TB_OK, "test");
    for (int k = 2; k >= 0; k--) {
        CHECK(tb_comm_wait(c, &req[k]) == TB_OK, "wait %d", k);
        CHECK(!req[k].active && req[k].t_end >= req[k].t_start, "request %d finished", k);
        size_t bad = count_wrong(b[k], n[k], c->size);
        CHECK(bad == 0, "non-blocking all-reduce %d of %zu: %zu wrong", k, n[k], bad);
        free(b[k]);
    }
    CHECK(tb_comm_test(c, &req[0], &done) == TB_OK && done, "an inactive request is done");
}

static void test_counters(tb_comm *c)
{
    tb_comm_reset_stats(c);
    float *b = filled(c->rank, 1001);
    tb_comm_req r = {.mpi = MPI_REQUEST_NULL};
    tb_comm_allreduce_sum(c, b, 1001);
    tb_comm_iallreduce_sum(c, b, 500, &r);
    tb_comm_wait(c, &r);
    CHECK(c->stats.allreduce_bytes == 1501 * sizeof(float), "bytes %llu, want %zu",
          (unsigned long long)c->stats.allreduce_bytes, 1501 * sizeof(float));
    CHECK(c->stats.allreduce_calls == 2, "calls %llu", (unsigned long long)c->stats.allreduce_calls);
    free(b);
}

static void test_bcast_barrier(tb_comm *c)
{
    int root = c->size - 1;
    char msg[64] = {0};
    if (c->rank == root)
        snprintf(msg, sizeof msg, "from rank %d", root);
    CHECK(tb_comm_bcast(c, msg, sizeof msg, root) == TB_OK, "bcast");
    char want[64];
    snprintf(want, sizeof want, "from rank %d", root);
    CHECK(strcmp(msg, want) == 0, "bcast got '%s'", msg);
    CHECK(tb_comm_barrier(c) == TB_OK, "barrier");
    double v[2] = {(double)c->rank, 1.0};
    CHECK(tb_comm_sum_double(c, v, 2) == TB_OK, "sum doubles");
    CHECK(v[0] == c->size * (c->size - 1) / 2.0 && v[1] == c->size, "sums %g %g", v[0], v[1]);
    double m = c->rank;
    CHECK(tb_comm_max_double(c, &m, 1) == TB_OK && m == c->size - 1, "max %g", m);
}

static void test_busbw(void)
{
    CHECK(tb_comm_algbw(1000000000, 0.5) == 2e9, "algbw");
    CHECK(tb_comm_busbw(1000000000, 1.0, 1) == 0, "1 rank moves nothing");
    CHECK(tb_comm_busbw(1000000000, 1.0, 2) == 1e9, "2 ranks: busbw = algbw");
    CHECK(fabs(tb_comm_busbw(1000000000, 1.0, 4) - 1.5e9) < 1, "4 ranks: 2*3/4");
    CHECK(fabs(tb_comm_busbw(1000000000, 2.0, 8) - 0.875e9) < 1, "8 ranks, 2 s: 0.5 * 14/8");
}

static void test_nccl_refused(tb_comm *c)
{
    tb_backend *be = NULL;
    if (tb_backend_cpu_create(1, &be) != TB_OK) {
        CHECK(0, "cpu backend");
        return;
    }
    tb_comm *n = (tb_comm *)1;
    int rc = tb_comm_nccl_create(c, be, &n);
    CHECK(rc == TB_ERR_UNSUPPORTED || rc == TB_ERR_INVALID, "NCCL on a CPU backend: rc %d", rc);
    CHECK(n == NULL, "no communicator on failure");
    CHECK(strlen(tb_error_message()) > 10, "a message says why: %s", tb_error_message());
    tb_error_clear();
    tb_backend_close(be);
}

static int arg_int(int argc, char **argv, const char *name, int dflt)
{
    size_t len = strlen(name);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=')
            return atoi(argv[i] + len + 1);
    return dflt;
}

/* The failure paths: the job must end with an error, never hang. */
static void misbehave(tb_comm *c, int hang_rank, int exit_rank)
{
    float x = 1;
    if (c->rank == hang_rank) {
        fprintf(stderr, "rank %d: hanging on purpose (test)\n", c->rank);
        sleep(600);
    }
    if (c->rank == exit_rank) {
        fprintf(stderr, "rank %d: exiting with status 3 on purpose (test)\n", c->rank);
        exit(3);
    }
    tb_comm_allreduce_sum(c, &x, 1);
    printf("rank %d: the all-reduce returned, the job should have failed\n", c->rank);
}

int main(int argc, char **argv)
{
    double timeout = arg_int(argc, argv, "--comm-timeout", 60);
    int hang_rank = arg_int(argc, argv, "--hang-rank", -1);
    int exit_rank = arg_int(argc, argv, "--exit-rank", -1);
    tb_comm *c;
    if (tb_comm_mpi_init(&argc, &argv, timeout, &c) != TB_OK) {
        tb_error_print(stderr);
        return 1;
    }
    if (hang_rank >= 0 || exit_rank >= 0) {
        misbehave(c, hang_rank, exit_rank);
        return tb_comm_destroy(c) == TB_OK ? 0 : 1;
    }
    CHECK(c->size >= 1 && c->rank >= 0 && c->rank < c->size, "rank %d of %d", c->rank, c->size);
    test_blocking(c);
    test_nonblocking(c);
    test_counters(c);
    test_bcast_barrier(c);
    test_busbw();
    test_nccl_refused(c);
    double f = failures;
    tb_comm_sum_double(c, &f, 1);
    if (c->rank == 0)
        printf("%s: %d ranks, %g failures\n", f ? "FAILED" : "PASSED", c->size, f);
    if (tb_comm_destroy(c) != TB_OK) {
        tb_error_print(stderr); /* MPI_Comm_free or MPI_Finalize failed */
        return 1;
    }
    return f ? 1 : 0;
}
