/*
 * run_state_fuzz.c - fuzz target for the state `bench:all --resume` reads
 * (lib/report/resume.h): run_state.json and run_state.fingerprint.json.
 *
 * The input is both files, split at its first NUL byte (JSON holds none):
 * before it run_state.json, after it the fingerprint (empty when there is
 * no NUL). A crash, a sanitizer report, or a broken contract aborts:
 *   - on success the state lists at most TB_RUN_STATE_MAX techniques, each
 *     found by tb_run_state_is_done, holds the file's thread count exactly,
 *     and is compatible with itself;
 *   - on failure the error chain says why.
 * Fuzz: tools/fuzz.sh run_state. Replayed on its corpus and past crashes by
 * bazel test //fuzz:run_state_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_files.h"
#include "lib/core/json.h"
#include "lib/core/status.h"
#include "lib/report/resume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "run_state_fuzz: broken contract: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t state_len = nul ? (size_t)(nul - data) : size;
    size_t fp_len = nul ? size - state_len - 1 : 0;
    tb_fuzz_write(TB_RUN_STATE_FILE, data, state_len);
    tb_fuzz_write(TB_RUN_STATE_FP_FILE, nul ? nul + 1 : data, fp_len);

    static tb_run_state s;
    static char why[4096];
    tb_error_clear();
    if (tb_run_state_load(tb_fuzz_dir(), &s) != TB_OK) {
        must(tb_error_message()[0] != '\0', "a failure says why");
        tb_error_clear();
        return 0;
    }
    must(s.ndone >= 0 && s.ndone <= TB_RUN_STATE_MAX, "done count within the table");
    /* The state says what the file says: its thread count, exactly. */
    tb_json *root = NULL;
    must(tb_json_parse((const char *)data, state_len, 0, &root) == TB_OK,
         "a state that loaded parses");
    must(s.threads == tb_json_get_number(root, "threads", -1), "threads as the file says");
    tb_json_free(root);
    for (int i = 0; i < s.ndone; i++)
        must(tb_run_state_is_done(&s, s.done[i]), "every listed technique is done");
    must(tb_run_state_compatible(&s, &s, why, sizeof why), "a state is compatible with itself");
    tb_error_clear();
    return 0;
}
