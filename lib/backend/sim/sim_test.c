/*
 * sim_test.c - the sim backend keeps CUDA's ordering: ops are queued, not
 * run, and so are a memset and a copy on TB_ON_COMPUTE; stream_sync waits
 * for its stream only; events order streams; a
 * capture records calls with their arguments and a launch replays them;
 * copy_peer orders both devices; an event may be destroyed while a wait
 * still names it;
 * synchronizing inside a capture fails; a queued failure is sticky. No
 * check depends on a timing: streams are held back by gates the test
 * opens.
 *
 * Run: bazel test //lib/backend/sim:sim_test
 */
#include <pthread.h>
#include <string.h>

#include "lib/backend/sim/sim.h"
#include "lib/core/testing.h"

/* A host function that blocks its stream until the test opens the gate. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static int gate_pass(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return TB_OK;
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void test_ops_are_queued(tb_backend *be)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    CHECK_OK(tb_sim_host_fn(be, NULL, gate_pass, &g, 0));
    CHECK_OK(be->axpby(be, 3.0f, x, 0.0f, y, 4));
    CHECK(y[3] == 0.0f, "axpby ran before the compute stream reached it");
    gate_open(&g);
    CHECK_OK(be->stream_sync(be, NULL));
    CHECK(y[0] == 3.0f && y[3] == 12.0f, "after stream_sync y = %g %g", y[0], y[3]);
}

/* TB_ON_COMPUTE: a memset and a copy queued on the compute stream, in
 * order, the host not waiting (NULL would wait). */
static void test_on_compute_is_queued(tb_backend *be)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    float y[2] = {5, 5}, z[2] = {7, 7};
    CHECK_OK(tb_sim_host_fn(be, NULL, gate_pass, &g, 0));
    CHECK_OK(be->memset(be, y, 0, sizeof y, TB_ON_COMPUTE));
    CHECK_OK(be->copy_d2d(be, z, y, sizeof y, TB_ON_COMPUTE));
    CHECK(y[0] == 5.0f && z[1] == 7.0f, "TB_ON_COMPUTE ran before its stream reached it");
    gate_open(&g);
    CHECK_OK(be->stream_sync(be, NULL));
    CHECK(y[0] == 0.0f && y[1] == 0.0f, "memset on compute: y = %g %g", y[0], y[1]);
    CHECK(z[0] == 0.0f && z[1] == 0.0f, "the copy after the memset: z = %g %g", z[0], z[1]);
}

/* stream_sync(compute) returns while a side stream is still held; sync
 * waits for it too. */
static void test_sync_waits_for_what_it_names(tb_backend *be)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    tb_stream *side = NULL;
    tb_event *e = NULL;
    int done = -1;
    CHECK_OK(be->stream_create(be, &side));
    CHECK_OK(be->event_create(be, &e));
    CHECK_OK(tb_sim_host_fn(be, side, gate_pass, &g, 0));
    CHECK_OK(be->event_record(be, e, side));
    float v = 1.0f, w = 0.0f;
    CHECK_OK(be->copy_d2d(be, &w, &v, sizeof v, NULL)); /* synchronous: compute only */
    CHECK(w == 1.0f, "a synchronous copy returned before it ran");
    CHECK_OK(be->stream_sync(be, NULL));
    CHECK_OK(tb_sim_event_done(be, e, &done));
    CHECK(done == 0, "the side stream ran past its gate");
    gate_open(&g);
    CHECK_OK(be->sync(be));
    CHECK_OK(tb_sim_event_done(be, e, &done));
    CHECK(done == 1, "sync returned before the side stream finished");
    CHECK_OK(be->event_destroy(be, e));
    CHECK_OK(be->stream_destroy(be, side));
}

/* side waits for an event recorded on compute behind a gate. */
static void test_events_order_streams(tb_backend *be)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    tb_stream *side = NULL;
    tb_event *on_compute = NULL, *on_side = NULL;
    float buf[8];
    int done = -1;
    memset(buf, 0, sizeof buf);
    CHECK_OK(be->stream_create(be, &side));
    CHECK_OK(be->event_create(be, &on_compute));
    CHECK_OK(be->event_create(be, &on_side));
    CHECK_OK(tb_sim_host_fn(be, NULL, gate_pass, &g, 0));
    CHECK_OK(be->event_record(be, on_compute, NULL));
    CHECK_OK(be->stream_wait_event(be, side, on_compute));
    CHECK_OK(be->memset(be, buf, 0xff, sizeof buf, side));
    CHECK_OK(be->event_record(be, on_side, side));
    CHECK_OK(tb_sim_event_done(be, on_side, &done));
    CHECK(done == 0 && buf[0] == 0.0f, "the side stream did not wait for the event");
    gate_open(&g);
    CHECK_OK(be->event_sync(be, on_side));
    unsigned char b0;
    memcpy(&b0, buf, 1);
    CHECK(b0 == 0xff, "event_sync returned before the memset ran");
    float ms = -1;
    CHECK_OK(be->event_elapsed_ms(be, on_compute, on_side, &ms));
    CHECK(ms >= 0, "elapsed %g ms between ordered events", ms);
    CHECK_OK(be->event_destroy(be, on_compute));
    CHECK_OK(be->event_destroy(be, on_side));
    CHECK_OK(be->stream_destroy(be, side));
}

/* A capture records axpby with alpha = 2 and runs nothing; each launch
 * reads x as it is then, with the recorded alpha. */
static void test_graph_records_and_replays(tb_backend *be)
{
    float x[3] = {1, 2, 3}, y[3] = {0};
    tb_graph *g = NULL;
    long before = tb_sim_graph_launches(be);
    CHECK_OK(be->graph_begin(be));
    CHECK_OK(be->axpby(be, 2.0f, x, 0.0f, y, 3));
    int rc = be->sync(be);
    CHECK(rc == TB_ERR_INVALID && strstr(tb_error_message(), "during a graph capture"),
          "sync inside a capture: rc %d, '%s'", rc, tb_error_message());
    tb_error_clear();
    CHECK_OK(be->graph_end(be, &g));
    CHECK_OK(be->sync(be));
    CHECK(y[0] == 0.0f, "the captured axpby ran at capture time");
    x[0] = 10.0f;
    CHECK_OK(be->graph_launch(be, g));
    CHECK_OK(be->graph_launch(be, g));
    CHECK_OK(be->sync(be));
    CHECK(y[0] == 20.0f && y[2] == 6.0f, "replay gave %g %g, want 20 6", y[0], y[2]);
    CHECK(tb_sim_graph_launches(be) == before + 2, "launches counted");
    CHECK_OK(be->graph_destroy(be, g));
}

/* An event destroyed while a record and a wait still name it (CUDA
 * allows it: the wait still orders the streams). Under AddressSanitizer a
 * freed event read by the worker fails here. */
static void test_event_destroyed_while_named(tb_backend *be)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    tb_stream *side = NULL;
    tb_event *e = NULL;
    unsigned char buf[4] = {0};
    int done = -1;
    CHECK_OK(be->stream_create(be, &side));
    CHECK_OK(be->event_create(be, &e));
    CHECK_OK(tb_sim_host_fn(be, NULL, gate_pass, &g, 0));
    CHECK_OK(be->event_record(be, e, NULL));
    CHECK_OK(be->stream_wait_event(be, side, e));
    CHECK_OK(be->event_destroy(be, e));
    CHECK_OK(be->memset(be, buf, 7, sizeof buf, side));
    tb_event *after = NULL;
    CHECK_OK(be->event_create(be, &after));
    CHECK_OK(be->event_record(be, after, side));
    CHECK_OK(tb_sim_event_done(be, after, &done));
    CHECK(done == 0 && buf[0] == 0, "the wait on a destroyed event did not hold the side stream");
    gate_open(&g);
    CHECK_OK(be->sync(be));
    CHECK(buf[3] == 7, "the side stream ran after the gate");
    CHECK_OK(be->event_destroy(be, after));
    CHECK_OK(be->stream_destroy(be, side));
}

/* copy_peer from a device held by a gate: the copy waits for the source
 * device's earlier work, and the source's later work waits for the copy. */
static void test_copy_peer_orders_both_devices(tb_backend *a)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    tb_backend *b = NULL;
    float src[4] = {0}, one[4] = {1, 1, 1, 1}, dst[4] = {0};
    CHECK_OK(tb_backend_sim_create(1, &b));
    if (!b)
        return;
    CHECK_OK(tb_sim_host_fn(a, NULL, gate_pass, &g, 0));
    CHECK_OK(a->axpby(a, 5.0f, one, 0.0f, src, 4)); /* src = 5 behind the gate */
    CHECK_OK(b->copy_peer(b, dst, a, src, sizeof src));
    CHECK_OK(a->axpby(a, 1.0f, one, 0.0f, src, 4)); /* src = 1 after the copy */
    tb_event *copied = NULL;
    int done = -1;
    CHECK_OK(b->event_create(b, &copied));
    CHECK_OK(b->event_record(b, copied, NULL));
    CHECK_OK(tb_sim_event_done(b, copied, &done));
    CHECK(done == 0 && dst[0] == 0.0f, "the copy did not wait for the source device");
    gate_open(&g);
    CHECK_OK(a->sync(a));
    CHECK_OK(b->sync(b));
    CHECK(dst[0] == 5.0f && src[0] == 1.0f, "copy_peer gave %g (want 5), source then %g "
          "(want 1)", dst[0], src[0]);
    CHECK_OK(b->event_destroy(b, copied));
    b->destroy(b);
}

/* An op that fails on the worker: the call returned OK, the next sync
 * says what failed, and so does every sync after it. */
static void test_failure_is_sticky(void)
{
    tb_backend *be = NULL;
    CHECK_OK(tb_backend_sim_create(1, &be));
    if (!be)
        return;
    float y[2] = {0};
    CHECK_OK(be->gemm(be, 0, 0, -1, 2, 2, 1.0f, y, 2, y, 2, 0.0f, y, 2, TB_MATH_F32));
    for (int k = 0; k < 2; k++) {
        int rc = be->sync(be);
        CHECK(rc != TB_OK && strstr(tb_error_message(), "sim: a queued op failed"),
              "sync %d after a failed op: rc %d, '%s'", k, rc, tb_error_message());
        tb_error_clear();
    }
    be->destroy(be);
}

int main(void)
{
    tb_backend *be = NULL;
    CHECK_OK(tb_backend_sim_create(1, &be));
    if (!be)
        return tb_test_exit(1);
    CHECK(tb_sim_is(be) && strcmp(be->name, "sim") == 0, "a sim backend");
    test_ops_are_queued(be);
    test_on_compute_is_queued(be);
    test_sync_waits_for_what_it_names(be);
    test_events_order_streams(be);
    test_graph_records_and_replays(be);
    test_copy_peer_orders_both_devices(be);
    test_event_destroyed_while_named(be);
    CHECK_OK(be->destroy(be));
    test_failure_is_sticky();
    return tb_test_exit(0);
}
