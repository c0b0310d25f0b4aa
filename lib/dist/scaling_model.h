/*
 * scaling_model.h - an alpha-beta model of data-parallel scaling: from a
 * measured compute time per step and gradient size, and a link's latency
 * (alpha, seconds per message) and bandwidth (beta, bytes per second),
 * predicts the all-reduce time and the scaling efficiency at n devices.
 * It is a MODEL, not a measurement: bench/scaling_model labels it so.
 *
 * All-reduce of B bytes over n devices:
 *   ring:  2 (n-1) alpha + 2 (n-1)/n * B / beta
 *          (reduce-scatter then all-gather, each n-1 steps of B/n bytes;
 *          Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
 *          clusters of workstations", JPDC 2009).
 *   tree:  2 ceil(log2 n) alpha + 2 B / beta
 *          (NCCL's double binary tree: a pipelined reduce up and broadcast
 *          down two complementary binary trees, each carrying half the data,
 *          so every node sends and receives B once each way; latency grows
 *          with the depth. Sanders, Speck & Traeff, "Two-tree algorithms for
 *          full bandwidth broadcast, reduction and scan", Parallel Computing
 *          2009; NVIDIA, "Massively Scale Your Deep Learning Training with
 *          NCCL 2.4", 2019.)
 *   n == 1: 0.
 * Weak scaling (the per-device batch fixed): a step at n devices takes
 * compute + exposed communication, where exposed is the all-reduce time
 * without overlap, and max(0, allreduce - backward_fraction * compute)
 * with it (buckets hide behind the rest of backward); efficiency is
 * compute / step.
 *
 * Test: bazel test //lib/dist:scaling_model_test
 */
#ifndef TB_SCALING_MODEL_H
#define TB_SCALING_MODEL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_allreduce_algo { TB_ALLREDUCE_RING = 0, TB_ALLREDUCE_TREE = 1 } tb_allreduce_algo;

typedef struct tb_scaling_inputs {
    double compute_s;         /* measured step time at 1 device (no communication) */
    double bytes;             /* gradient bytes all-reduced per step */
    double alpha_s;           /* link latency per message */
    double beta_bytes_s;      /* link bandwidth */
    int overlap;              /* all-reduce overlapped with backward */
    double backward_fraction; /* share of compute that is backward (overlap window) */
} tb_scaling_inputs;

/* Seconds for one all-reduce. REQUIRES: n >= 1, beta > 0. */
double tb_scaling_allreduce_s(tb_allreduce_algo algo, int n, double bytes, double alpha_s,
                           double beta_bytes_s);

typedef struct tb_scaling_point {
    int n;
    double allreduce_s, exposed_s, step_s, efficiency;
} tb_scaling_point;

/* The prediction at n devices. */
tb_scaling_point tb_scaling_predict(const tb_scaling_inputs *in, tb_allreduce_algo algo, int n);

const char *tb_scaling_algo_name(tb_allreduce_algo algo); /* "ring", "tree" */

#ifdef __cplusplus
}
#endif
#endif
