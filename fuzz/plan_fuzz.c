/*
 * plan_fuzz.c - fuzz target for the line bench:all reads from each
 * technique binary's --describe (bench/cmd/plan.h: tb_plan_parse_entry):
 * a stale, foreign or broken binary answers it.
 *
 * The input is the line, up to its first NUL byte. A crash, a sanitizer
 * report, or a broken contract aborts:
 *   - on success the entry has a name, its budgets are not negative, and
 *     its name, results and `after` names are terminated strings;
 *   - on failure the error chain says why.
 * Fuzz: tools/fuzz.sh plan. Replayed on its corpus and past crashes by
 * bazel test //fuzz:plan_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cmd/plan.h"
#include "lib/core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "plan_fuzz: broken contract: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    char *text = malloc(len + 1);
    if (!text)
        return 0;
    memcpy(text, data, len);
    text[len] = '\0';
    static tb_plan_entry e;
    tb_error_clear();
    if (tb_plan_parse_entry("fuzzed", text, &e) != TB_OK) {
        must(tb_error_message()[0] != '\0', "a failure says why");
        tb_error_clear();
        free(text);
        return 0;
    }
    free(text);
    must(e.name[0] != '\0' && memchr(e.name, 0, sizeof e.name), "a terminated name");
    must(memchr(e.results, 0, sizeof e.results) != NULL, "terminated results");
    for (int p = 0; p < TB_PROFILES; p++)
        must(e.budget_seconds[p] >= 0, "budgets not negative");
    for (int i = 0; i < TB_MAX_AFTER; i++)
        must(memchr(e.after[i], 0, sizeof e.after[i]) != NULL, "terminated after names");
    return 0;
}
