/*
 * resume.h - the state file that lets `bench:all --resume` continue an
 * interrupted run.
 *
 * bench:all writes results/<device>/run_state.json after every technique
 * that finished (atomically, like every result), and beside it
 * run_state.fingerprint.json, the environment the run started in. Each
 * technique writes its own results atomically too, so an interrupted run
 * keeps everything it finished. `--resume` skips the techniques the state
 * lists as done, but only when the run would measure the same thing: the
 * same profile and thread count, and a fingerprint equal over
 * TB_FP_RESUME (device, CPU, software stack, git revision, build). When they
 * differ it refuses and says what changed: mixing two environments in one
 * results folder would make the report compare numbers that are not
 * comparable.
 *
 *   {"schema": "tunebench-run-state/1", "profile": "tiny", "threads": 0,
 *    "complete": false, "done": ["ceilings", "gelu"]}
 *
 * Test: bench/cmd/resume_test.sh (bazel test //bench:resume_test)
 */
#ifndef TB_RESUME_H
#define TB_RESUME_H

#include <stddef.h>

#include "lib/report/fingerprint.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_RUN_STATE_SCHEMA "tunebench-run-state/1"
#define TB_RUN_STATE_FILE "run_state.json"
#define TB_RUN_STATE_FP_FILE "run_state.fingerprint.json"
#define TB_RUN_STATE_MAX 128

typedef struct tb_run_state {
    char profile[16];
    int threads;
    int complete;             /* every planned technique ran */
    int ndone;
    char done[TB_RUN_STATE_MAX][32]; /* finished with exit status 0, in order */
    tb_fingerprint fp;        /* the environment the run started in */
} tb_run_state;

/* An empty state for a new run. */
void tb_run_state_init(tb_run_state *s, const char *profile, int threads,
                       const tb_fingerprint *fp);

int tb_run_state_is_done(const tb_run_state *s, const char *technique);
/* Adds technique to done (once). */
int tb_run_state_mark_done(tb_run_state *s, const char *technique);

/* Writes dir/run_state.fingerprint.json, then dir/run_state.json, each
 * atomically. */
int tb_run_state_save(const tb_run_state *s, const char *dir);

/* Reads both files from dir. TB_ERR_IO (with a message naming the file)
 * when there is no state, TB_ERR_DATA when it is malformed. */
int tb_run_state_load(const char *dir, tb_run_state *s);

/* 1 when a run described by now may continue old; otherwise 0, and why
 * (cap bytes) lists every difference, one per line. */
int tb_run_state_compatible(const tb_run_state *old, const tb_run_state *now, char *why,
                            size_t cap);

#ifdef __cplusplus
}
#endif
#endif
