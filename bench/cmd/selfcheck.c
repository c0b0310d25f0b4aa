/*
 * selfcheck.c - is this GPU's backend right? Runs every slot of the backend
 * table (memory, streams, events, every op, every conv algorithm conv_find
 * returns) against the plain CPU reference, one line per check, and a
 * summary (lib/selfcheck/selfcheck.h says what is checked and with which tolerance).
 *
 *   bazel run //bench:selfcheck                     # CUDA device 0
 *   bazel run //bench:selfcheck -- --device=cuda:1
 *   bazel run //bench:selfcheck -- --device=cpu     # the CPU fast paths
 *   bazel run //bench:selfcheck -- --only=conv      # slots matching "conv"
 *   bazel run //bench:selfcheck -- --only=amp       # the training-toggle cases of --amp
 *
 * With --device=cuda (the default) and no usable GPU it says there is
 * nothing to check and exits 0; --device=auto falls back to the CPU with one
 * line on stderr. Exit status: 0 all passed (n/a allowed), 1 a check
 * failed, 2 a bad flag or an unusable --device=cuda:N.
 */
#include <stdio.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "bench/cmd/cli.h"
#include "lib/core/flags.h"
#include "lib/selfcheck/selfcheck.h"
#include "lib/core/status.h"

static const char *const SUMMARY =
    "Runs every op of the backend table on the chosen device and on the plain CPU "
    "reference and compares them.";

int main(int argc, char **argv)
{
    const char *device = "cuda", *only = "";
    int threads = 0;
    long long seed = 0;
    tb_flag flags[] = {
        {"device", TB_FLAG_STRING, &device,
         "cuda, cuda:N, cpu (checks the CPU fast paths) or auto", NULL},
        {"threads", TB_FLAG_INT, &threads, "CPU kernel threads (0 = all cores)", NULL,
         TB_RANGE(0, TB_THREADS_MAX)},
        {"only", TB_FLAG_STRING, &only,
         "only slots and step cases whose name contains this (\"step\": every step case; "
         "default all)", NULL},
        {"seed", TB_FLAG_LONG, &seed, "seed of the random inputs (0 = the fixed default)", NULL},
    };
    size_t nflags = sizeof flags / sizeof flags[0];
    int code = tb_cli_parse("bench:selfcheck", "", SUMMARY, flags, nflags, 0, &argc, argv);
    if (code >= 0)
        return code;

    tb_device_kind kind;
    int ordinal, rc = tb_device_parse(device, &kind, &ordinal);
    if (rc != TB_OK) {
        tb_error_print(stderr);
        return tb_exit_code(rc);
    }
    const char *why = NULL;
    if (kind == TB_DEVICE_CUDA && tb_cuda_device_count(&why) == 0) {
        printf("selfcheck: no CUDA device (%s); nothing to check\n",
               why ? why : "unknown reason");
        return 0;
    }
    tb_backend *be = NULL;
    rc = tb_backend_open(kind, ordinal, threads, &be);
    if (rc != TB_OK) {
        tb_error_print(stderr);
        return tb_exit_code(rc);
    }

    tb_selfcheck_opts opts = {.out = stdout, .seed = (uint64_t)seed, .filter = *only ? only : NULL};
    tb_selfcheck_counts counts;
    rc = tb_selfcheck_run(be, &opts, &counts);
    /* destroy is a slot too: its status counts */
    int rc_close = be->destroy(be);
    if (rc != TB_OK) {
        tb_error_print(stderr);
        return tb_exit_code(rc);
    }
    if (rc_close != TB_OK) {
        printf("FAIL destroy: returned %s: %s\n", tb_err_name(rc_close), tb_error_message());
        return 1;
    }
    if (*only && counts.passed + counts.failed + counts.na == 0) {
        /* "0 passed, 0 failed" read as a pass: a mistyped --only checked nothing */
        fprintf(stderr, "selfcheck: --only=%s matches no slot or step case: nothing was "
                "checked (run without --only for the list)\n", only);
        return 2;
    }
    return counts.failed ? 1 : 0;
}
