/*
 * resume.c - bench:all's run state; see resume.h.
 *
 * Test: bench/cmd/resume_test.sh
 */
#include "lib/report/resume.h"

#include <stdio.h>
#include <limits.h>
#include <string.h>

#include "lib/core/atomic_file.h"
#include "lib/core/json.h"
#include "lib/core/outdir.h"

void tb_run_state_init(tb_run_state *s, const char *profile, int threads,
                       const tb_fingerprint *fp)
{
    memset(s, 0, sizeof *s);
    snprintf(s->profile, sizeof s->profile, "%s", profile);
    s->threads = threads;
    if (fp)
        s->fp = *fp;
}

int tb_run_state_is_done(const tb_run_state *s, const char *technique)
{
    for (int i = 0; i < s->ndone; i++)
        if (!strcmp(s->done[i], technique))
            return 1;
    return 0;
}

int tb_run_state_mark_done(tb_run_state *s, const char *technique)
{
    if (tb_run_state_is_done(s, technique))
        return TB_OK;
    if (s->ndone == TB_RUN_STATE_MAX || strlen(technique) >= sizeof s->done[0])
        return TB_FAIL(TB_ERR_INVALID, "run state: cannot record technique '%s'", technique);
    snprintf(s->done[s->ndone++], sizeof s->done[0], "%s", technique);
    return TB_OK;
}

static int write_state(const void *arg, FILE *f)
{
    const tb_run_state *s = arg;
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"profile\": ", TB_RUN_STATE_SCHEMA);
    tb_json_write_string(f, s->profile);
    fprintf(f, ",\n  \"threads\": %d,\n  \"complete\": %s,\n  \"done\": [", s->threads,
            s->complete ? "true" : "false");
    for (int i = 0; i < s->ndone; i++) {
        fputs(i ? ", " : "", f);
        tb_json_write_string(f, s->done[i]);
    }
    fputs("]\n}\n", f);
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the run state") : TB_OK;
}

int tb_run_state_save(const tb_run_state *s, const char *dir)
{
    char path[PATH_MAX + 64];
    TB_TRY(tb_outdir_join(dir, TB_RUN_STATE_FP_FILE, path, sizeof path));
    TB_TRY(tb_fingerprint_save(&s->fp, path));
    TB_TRY(tb_outdir_join(dir, TB_RUN_STATE_FILE, path, sizeof path));
    return tb_atomic_write_with(path, write_state, s);
}

static int parse_state(const tb_json *root, const char *path, tb_run_state *s)
{
    if (strcmp(tb_json_get_string(root, "schema", ""), TB_RUN_STATE_SCHEMA) != 0)
        return TB_FAIL(TB_ERR_DATA, "%s: not a %s file", path, TB_RUN_STATE_SCHEMA);
    snprintf(s->profile, sizeof s->profile, "%s", tb_json_get_string(root, "profile", ""));
    /* A thread count; converting a number beyond an int would be undefined. */
    const tb_json *th = tb_json_get(root, "threads");
    if (!th || th->type != TB_JSON_NUMBER)
        return TB_FAIL(TB_ERR_DATA, "%s: \"threads\" is missing or not a number", path);
    double threads = tb_json_get_number(root, "threads", -1);
    if (!(threads >= -1 && threads <= INT_MAX) || threads != (int)threads)
        return TB_FAIL(TB_ERR_DATA, "%s: \"threads\" is %g, not a thread count", path, threads);
    s->threads = (int)threads;
    s->complete = tb_json_get_bool(root, "complete", 0);
    const tb_json *done = tb_json_get(root, "done");
    if (!done || done->type != TB_JSON_ARRAY)
        return TB_FAIL(TB_ERR_DATA, "%s: \"done\" is not a list", path);
    for (size_t i = 0; i < done->len; i++) {
        const tb_json *v = tb_json_at(done, i);
        if (v->type != TB_JSON_STRING)
            return TB_FAIL(TB_ERR_DATA, "%s: \"done\" holds a non-string", path);
        TB_TRY(tb_run_state_mark_done(s, v->string));
    }
    return TB_OK;
}

int tb_run_state_load(const char *dir, tb_run_state *s)
{
    char path[PATH_MAX + 64];
    memset(s, 0, sizeof *s);
    TB_TRY(tb_outdir_join(dir, TB_RUN_STATE_FILE, path, sizeof path));
    tb_json *root = NULL;
    TB_TRY(tb_json_parse_file(path, 0, &root));
    int rc = parse_state(root, path, s);
    tb_json_free(root);
    TB_TRY(rc);
    TB_TRY(tb_outdir_join(dir, TB_RUN_STATE_FP_FILE, path, sizeof path));
    return tb_fingerprint_load(path, &s->fp);
}

int tb_run_state_compatible(const tb_run_state *old, const tb_run_state *now, char *why,
                            size_t cap)
{
    size_t used = 0;
    int ok = 1;
    why[0] = '\0';
    if (strcmp(old->profile, now->profile) != 0) {
        used += (size_t)snprintf(why + used, cap - used, "profile: %s -> %s\n", old->profile,
                                 now->profile);
        ok = 0;
    }
    if (old->threads != now->threads && used < cap) {
        used += (size_t)snprintf(why + used, cap - used, "threads: %d -> %d\n", old->threads,
                                 now->threads);
        ok = 0;
    }
    int ndiff = 0;
    if (used < cap &&
        tb_fingerprint_diff(&old->fp, &now->fp, TB_FP_RESUME, why + used, cap - used, &ndiff) !=
            TB_OK) {
        tb_error_clear();
        return 0;
    }
    return ok && ndiff == 0;
}
