/*
 * comm_sim.h - a test-only communicator on the sim backend
 * (lib/backend/sim/sim.h), shaped like comm_nccl.c: each all-reduce runs
 * on a side stream after an event recorded on the compute stream, takes
 * `delay_s` seconds there (the wire), and records a completion event that
 * test polls, wait synchronizes on, and the compute stream then waits for.
 * One rank: the sum over ranks is the buffer itself, so what it shows is
 * ordering and timing, not arithmetic (comm_test checks that on MPI).
 *
 * Tests: bazel test //lib/dist:ddp_sim_test
 */
#ifndef TB_COMM_SIM_H
#define TB_COMM_SIM_H

#include "lib/dist/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A one-rank communicator whose collectives run on a side stream of the
 * sim backend be. REQUIRES: tb_sim_is(be), delay_s >= 0, be outlives it. */
int tb_comm_sim_create(tb_backend *be, double delay_s, tb_comm **out);

#ifdef __cplusplus
}
#endif
#endif
