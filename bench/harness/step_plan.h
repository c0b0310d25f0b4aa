/*
 * step_plan.h - how a training-step technique's settings become the arms of
 * one interleaved experiment (bench/harness/rounds.h), and whether the arms'
 * trainers can all stay alive across its rounds. Pure bookkeeping, apart
 * from the trainers, so that it is tested on its own:
 *   bazel test //bench/harness:step_plan_test
 *
 * Arms: every timed baseline, then every timed compared setting (each in
 * the order of the settings), then one A/A arm per timed baseline (a second trainer of the baseline's setting, built
 * independently, compared with the baseline as if it were another setting:
 * what it sees is the noise a real comparison sees). A compared setting
 * whose baseline is not timed (it ran out of memory in the check) cannot be
 * compared: it gets no arm, and the caller writes it as n/a.
 */
#ifndef TB_BENCH_STEP_PLAN_H
#define TB_BENCH_STEP_PLAN_H

typedef struct tb_step_plan {
    int n_settings;
    int n_arms;
    int *arm_setting;  /* (n_arms) the setting an arm times */
    int *arm_base;     /* (n_arms) the arm it is compared with; its own index: a baseline */
    int *arm_aa;       /* (n_arms) 1: the A/A copy of arm arm_base */
    int *set_arm;      /* (n_settings) the arm timing setting i; -1: none */
    int *aa_arm;       /* (n_settings) the A/A arm of baseline i; -1: none */
} tb_step_plan;

/* base[i]: the setting i is compared with (base[i] == i: a baseline);
 * timed[i]: 1 when setting i is to be timed (not n/a). REQUIRES: n >= 1,
 * every base[i] in [0, n) with base[base[i]] == base[i] (TB_ERR_INVALID
 * otherwise). Free with tb_step_plan_free. */
int tb_step_plan_make(const int *base, const int *timed, int n, tb_step_plan *p);
void tb_step_plan_free(tb_step_plan *p);

/* Which arms' trainers cannot stay alive across the rounds. peak_bytes per
 * setting (from the check pass); limit_bytes <= 0: no limit known. Fills
 * alone[n_arms]: 1 for an arm rebuilt every round, one such arm alive at a
 * time beside the others, which stay alive; returns how many. When the
 * arms' peaks add up to at most the limit, none. Else whole groups go, a
 * group being a baseline arm, the arms compared with it and its A/A arm
 * (the arms of one comparison are treated alike: a fresh trainer against a
 * long-lived one could differ for that alone), the group with the largest
 * sum first, until the arms left alive plus the largest rebuilt one fit.
 * (checkpointing's GPT-2 on the H200: its 4x-batch group of 106 GB went,
 * its 30 GB group stayed alive, where all six arms were rebuilt.) */
int tb_step_plan_alone(const tb_step_plan *p, const double *peak_bytes, double limit_bytes,
                       int *alone);

/* What becomes of an arm's trainer across the rounds (TB_ARM_ALIVE and
 * TB_ARM_REBUILT are tb_step_plan_alone's 0 and 1). */
enum { TB_ARM_ALIVE = 0, TB_ARM_REBUILT = 1, TB_ARM_PARKED };

/* Parking before rebuilding: an arm whose trainer cannot stay alive whole
 * can still stay alive parked (lib/train/train.h, tb_trainer_park: its
 * activations freed while other arms run, brought back before each of its
 * repetitions), holding only kept_bytes (per setting: its parameters,
 * gradients and optimizer state; <= 0: not known, then it cannot park).
 * The groups tb_step_plan_alone sends away park instead, one of them
 * unparked at a time, where the arms left alive, every parked arm's kept
 * bytes and the largest parked arm's activations fit in limit_bytes; when
 * they do not, or when an arm left alive captures CUDA graphs (graphs[i]
 * nonzero for setting i: a block its capture used stays held while any
 * graph lives, lib/backend/cuda/alloc.c, so activations parked beside it
 * would never be freed), every group parks if that fits; else the groups
 * go as tb_step_plan_alone says (rebuilt every round). Whole groups
 * again: the arms of one comparison are treated alike. Fills
 * mode[n_arms] with TB_ARM_*; returns how many are not TB_ARM_ALIVE. */
int tb_step_plan_park(const tb_step_plan *p, const double *peak_bytes, const double *kept_bytes,
                      const int *graphs, double limit_bytes, int *mode);

#endif
