/*
 * trace_ops_test.c - the shape of --trace's op breakdown on a tiny GPT-2
 * (1 layer, context 16, vocabulary 64, batch 2, AdamW, 3 steps). Checks
 * structure, never timings:
 *   - every op family of a GPT-2 step has forward and backward events
 *     (embedding, layernorm, qkv_gemm, attention, attn_proj_gemm,
 *     token_linear, gelu, tied_head, xent);
 *   - every op event lies inside its step's forward or backward phase
 *     (as its "dir" says), and attention's ops inside an "mha" event;
 *   - per step, the op self times add up to at most forward + backward;
 *   - PATH.ops.txt has the table's header and a row per family;
 *   - without --trace the layers have no hook (tracing costs nothing).
 * Run: bazel test //lib/train:trace_ops_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"
#include "lib/core/testing.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

#define STEPS 3
#define SLACK_US 0.01 /* the JSON's microseconds have 3 decimals */

static const char *const families[] = {"embedding", "layernorm", "qkv_gemm", "attention",
                                       "attn_proj_gemm", "token_linear", "gelu", "tied_head",
                                       "xent"};
#define NFAM (int)(sizeof families / sizeof families[0])

static void gpt2_config(tb_config *c, const char *trace)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->model = TB_MODEL_GPT2;
    c->dataset = TB_DATA_SYNTHETIC;
    c->context = 16;
    c->layers = 1;
    c->vocab = 64;
    c->batch_size = 2;
    c->data_limit = 64;
    c->test_limit = 4;
    c->optimizer = TB_OPT_ADAMW;
    c->max_steps = STEPS;
    c->trace = trace;
}

static int train_steps(tb_backend *be, const char *trace, int *hook_after)
{
    tb_config c;
    gpt2_config(&c, trace);
    TB_TRY(tb_config_validate(&c));
    tb_trainer *t;
    TB_TRY(tb_trainer_create(&c, be, &t));
    tb_epoch_stats es;
    int rc = tb_train_epoch(t, 0, &es);
    if (rc == TB_OK)
        rc = tb_trainer_write_trace(t);
    *hook_after = t->model->ctx.hook != NULL;
    tb_trainer_destroy(t);
    return rc;
}

/* e lies within the span of [ts, ts + dur]. */
static int inside(const tb_json *e, double ts, double dur)
{
    double ets = tb_json_get_number(e, "ts", -1), edur = tb_json_get_number(e, "dur", -1);
    return ets >= ts - SLACK_US && ets + edur <= ts + dur + SLACK_US;
}

static const tb_json *args_of(const tb_json *e) { return tb_json_get(e, "args"); }

static int is_op(const tb_json *e) { return !strcmp(tb_json_get_string(e, "cat", ""), "op"); }

/* The phase event named phase of step s, or NULL. */
static const tb_json *phase_event(const tb_json *ev, const char *phase, long s)
{
    for (size_t i = 0; i < ev->len; i++) {
        const tb_json *e = tb_json_at(ev, i);
        if (!is_op(e) && !strcmp(tb_json_get_string(e, "name", ""), phase) &&
            (long)tb_json_get_number(args_of(e), "step", -1) == s)
            return e;
    }
    return NULL;
}

/* Some "mha" event of the same step and direction contains e. */
static int inside_mha(const tb_json *ev, const tb_json *e)
{
    const tb_json *a = args_of(e);
    for (size_t i = 0; i < ev->len; i++) {
        const tb_json *m = tb_json_at(ev, i), *ma = args_of(m);
        if (is_op(m) && !strcmp(tb_json_get_string(ma, "family", ""), "mha") &&
            tb_json_get_number(ma, "step", -1) == tb_json_get_number(a, "step", -2) &&
            !strcmp(tb_json_get_string(ma, "dir", ""), tb_json_get_string(a, "dir", "")) &&
            inside(e, tb_json_get_number(m, "ts", 0), tb_json_get_number(m, "dur", 0)))
            return 1;
    }
    return 0;
}

static void check_events(const tb_json *ev)
{
    int seen[NFAM][2] = {{0}}, nested = 1, in_mha = 1, ops = 0;
    double self_ms[STEPS] = {0};
    for (size_t i = 0; i < ev->len; i++) {
        const tb_json *e = tb_json_at(ev, i), *a = args_of(e);
        if (!is_op(e))
            continue;
        ops++;
        const char *fam = tb_json_get_string(a, "family", ""), *dir = tb_json_get_string(a, "dir", "");
        long s = (long)tb_json_get_number(a, "step", -1);
        int bwd = !strcmp(dir, "bwd");
        for (int f = 0; f < NFAM; f++)
            seen[f][bwd] |= !strcmp(fam, families[f]);
        const tb_json *ph = phase_event(ev, bwd ? "backward" : "forward", s);
        nested &= ph && inside(e, tb_json_get_number(ph, "ts", 0), tb_json_get_number(ph, "dur", 0));
        if (!strcmp(fam, "qkv_gemm") || !strcmp(fam, "attention") || !strcmp(fam, "attn_proj_gemm"))
            in_mha &= inside_mha(ev, e);
        if (s >= 0 && s < STEPS)
            self_ms[s] += tb_json_get_number(a, "self_ms", 0);
    }
    CHECK(ops > 0, "op events: %d", ops);
    for (int f = 0; f < NFAM; f++)
        CHECK(seen[f][0] && seen[f][1], "family %s: forward %d, backward %d", families[f],
              seen[f][0], seen[f][1]);
    CHECK_WHAT(nested, "every op event inside its step's forward or backward phase");
    CHECK_WHAT(in_mha, "attention's ops inside an mha event");
    for (long s = 0; s < STEPS; s++) {
        const tb_json *f = phase_event(ev, "forward", s), *b = phase_event(ev, "backward", s);
        double phases_ms = f && b ? (tb_json_get_number(f, "dur", 0) +
                                     tb_json_get_number(b, "dur", 0)) / 1e3 : -1;
        CHECK(self_ms[s] <= phases_ms + 1e-3, "step %ld: op self times %.3f ms <= forward + "
              "backward %.3f ms", s, self_ms[s], phases_ms);
    }
}

static void check_summary(const char *trace)
{
    char path[1100];
    snprintf(path, sizeof path, "%s.ops.txt", trace);
    char *text = slurp(path);
    CHECK(text != NULL, "summary %s written", path);
    if (!text)
        return;
    CHECK_WHAT(strstr(text, "op breakdown:") && strstr(text, "family") &&
               strstr(text, "GFLOP/s") && strstr(text, "GB/s"), "summary: header");
    for (int f = 0; f < NFAM; f++)
        CHECK(strstr(text, families[f]) != NULL, "summary: a row for %s", families[f]);
    CHECK_WHAT(strstr(text, "optimizer") != NULL, "summary: the optimizer's row");
    free(text);
}

int main(void)
{
    tb_test_verbose = 1;
    tb_backend *be;
    if (tb_backend_open(TB_DEVICE_CPU, 0, 2, &be) != TB_OK)
        return tb_error_print(stderr), 1;
    const char *dir = getenv("TEST_TMPDIR");
    char trace[1024];
    snprintf(trace, sizeof trace, "%s/ops_trace.json", dir ? dir : "/tmp");
    int hook = -1;
    int rc = train_steps(be, trace, &hook);
    CHECK_WHAT(rc == TB_OK, "3 traced GPT-2 steps");
    CHECK_WHAT(hook == 0, "the hook is off outside a traced step's forward and backward");
    tb_json *root = NULL;
    if (rc == TB_OK)
        rc = tb_json_parse_file(trace, 0, &root);
    const tb_json *ev = root ? tb_json_get(root, "traceEvents") : NULL;
    CHECK_WHAT(ev && ev->type == TB_JSON_ARRAY, "trace: valid JSON with traceEvents");
    if (ev)
        check_events(ev);
    tb_json_free(root);
    check_summary(trace);
    hook = -1;
    rc = train_steps(be, NULL, &hook);
    CHECK_WHAT(rc == TB_OK && hook == 0, "without --trace: no hook");
    tb_backend_close(be);
    return tb_test_exit(TB_OK);
}
