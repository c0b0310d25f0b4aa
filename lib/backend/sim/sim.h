/*
 * sim.h - a test-only backend with CUDA's ordering semantics, for the
 * machines with no GPU: the CPU backend's ops, run later on a worker thread
 * per stream instead of when they are called.
 *
 * What it keeps of CUDA (what lib/backend/backend.h promises the CUDA backend does):
 *   - ops are queued on the compute stream and return at once; a worker
 *     thread runs each stream's queue in order (with an optional delay per
 *     op, so tests can make the device slow and see who waits for it);
 *   - copies and memsets with s == NULL are synchronous (the host waits for
 *     the compute stream, as cudaMemcpy does); with a stream they are queued;
 *   - an event marks a point in its stream's queue; stream_wait_event makes
 *     a stream wait for it; event_sync waits for that point only, and
 *     elapsed time is measured between the points' completions;
 *   - stream_sync waits for one stream, sync for every stream (cudaDeviceSynchronize);
 *   - dev_free waits for every stream first (cudaFree's implicit sync), and
 *     is refused inside a capture (replays would read freed memory);
 *   - graph_begin .. graph_end records the compute stream's queued calls,
 *     with the arguments they were given, instead of running them;
 *     graph_launch queues the recording again (with the same arguments);
 *     synchronizing, synchronous copies and events inside a capture fail,
 *     as they invalidate a CUDA capture;
 *   - a failed queued op makes every later synchronization fail with its
 *     message (CUDA's sticky errors).
 * Not modelled: device memory apart from host memory (pointers are host
 * pointers), kernel concurrency inside a stream, augment_u8 and
 * labels_u8_to_i32 (the CPU has none), argument errors returned at the call
 * (the CUDA backend checks arguments on the host; here they surface at the
 * next synchronization, so bench:selfcheck's walk, which expects them at
 * the call, does not run on the sim), events recorded inside a capture.
 * The CPU allocator's byte counters are updated from the worker too when
 * an op allocates temporaries (layer norm, attention): mem_stats may be off
 * while the host allocates at the same time. Destroy a sim backend only
 * after the work of other sim backends that waits for it (copy_peer) ran.
 *
 * It is never a device users can pick (tb_device_parse does not know it);
 * tests create it with tb_backend_sim_create.
 * Tests: bazel test //lib/backend/sim:sim_test
 */
#ifndef TB_SIM_H
#define TB_SIM_H

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A sim backend over a new CPU backend of `threads` kernel threads
 * (0 = all cores). Its name is "sim". */
int tb_backend_sim_create(int threads, tb_backend **out);

/* 1 when be is a sim backend. */
int tb_sim_is(const tb_backend *be);

/* From now on every op the compute stream runs first sleeps `seconds`
 * on the worker (a slow device); ops already queued may take either.
 * REQUIRES: seconds >= 0. */
int tb_sim_set_op_delay(tb_backend *be, double seconds);

/* Queues fn(arg) on stream s (NULL: compute) after `delay_s` seconds of
 * sleep on the worker (cudaLaunchHostFunc; the sim communicator's wire).
 * fn's failure is sticky like an op's. arg must live until fn ran. */
int tb_sim_host_fn(tb_backend *be, tb_stream *s, int (*fn)(void *arg), void *arg,
                   double delay_s);

/* *done = 1 when e's last record has run (cudaEventQuery), or e was never
 * recorded. */
int tb_sim_event_done(tb_backend *be, tb_event *e, int *done);

/* Graph launches so far (each a replay of a capture). */
long tb_sim_graph_launches(const tb_backend *be);

/* For the generated op wrappers (sim_ops.c): queues run(cpu, args) on the
 * compute stream, or records it when capturing. args is malloc'd; the sim
 * frees it. */
typedef int (*tb_sim_run_fn)(tb_backend *cpu, void *args);
int tb_sim_queue_op(tb_backend *be, tb_sim_run_fn run, void *args);
/* The CPU backend under be, for calls that run on the host at once. */
tb_backend *tb_sim_cpu(tb_backend *be);
/* Fills be's op slots with queueing wrappers of the CPU backend's (sim_ops.c). */
void tb_sim_install_ops(tb_backend *be, const tb_backend *cpu);

#ifdef __cplusplus
}
#endif
#endif
