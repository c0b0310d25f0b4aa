/*
 * selfcheck.c - every slot of a backend's table against the plain CPU
 * reference (see lib/selfcheck/selfcheck.h for what a walk does and prints).
 *
 *   bazel run //bench:selfcheck [-- --device=cuda:N | --device=cpu]
 *   bazel test //lib/selfcheck:selfcheck_test
 *
 * Adding an op: add its slot to lib/backend/backend.h (the generated op table picks
 * it up), write check_<slot> in the file of its family (lib/selfcheck/internal.h
 * lists them and shows how a check reads), declare it there, and add
 * {"<slot>", check_<slot>, NULL} to op_checks[] below. Until then
 * //lib/selfcheck:selfcheck_test fails naming the slot, and bench:selfcheck reports it
 * as a failure. Tolerances: lib/selfcheck/internal.h.
 */
#include <stdio.h>
#include <string.h>

#include "lib/backend/optable.h"
#include "lib/selfcheck/selfcheck.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/stats.h"
#include "lib/core/status.h"

#define SC_DEFAULT_SEED 0x73656c66636b3031ull /* "selfck01" */

/* ------------------------------------------------------------ the tables */

/* Op slots and their checks. null_ok: the reason lib/backend/backend.h gives for
 * allowing the slot to be NULL (then NULL is n/a), or NULL. */
#define SC_NULL_LOWP_ACTS "lib/backend/backend.h: NULL where the backend keeps activations fp32"
#define SC_NULL_CONV_BWD "lib/backend/backend.h: NULL where callers make the two calls"
#define SC_NULL_GRAPH "lib/backend/backend.h: n/a on the CPU backend, no kernel launches to capture"

typedef struct sc_op_check {
    const char *slot;
    int (*check)(sc_ctx *sc);
    const char *null_ok;
} sc_op_check;

static const sc_op_check op_checks[] = {
    {"gelu_fwd", check_gelu_fwd, NULL},
    {"gelu_bwd", check_gelu_bwd, NULL},
    {"relu_fwd", check_relu_fwd, NULL},
    {"relu_bwd", check_relu_bwd, NULL},
    {"add", check_add, NULL},
    {"axpby", check_axpby, NULL},
    {"relu_fwd_lowp", check_relu_fwd_lowp, SC_NULL_LOWP_ACTS},
    {"relu_bwd_lowp", check_relu_bwd_lowp, SC_NULL_LOWP_ACTS},
    {"add_lowp", check_add_lowp, SC_NULL_LOWP_ACTS},
    {"gemm", check_gemm, NULL},
    {"gemm_lowp", check_gemm_lowp, NULL},
    {"cast_f32_to_lowp", check_cast_f32_to_lowp, NULL},
    {"cast_lowp_to_f32", check_cast_lowp_to_f32, NULL},
    {"bias_add", check_bias_add, NULL},
    {"bias_grad", check_bias_grad, NULL},
    {"conv_algo_default", check_conv_algo_default, NULL},
    {"conv_find", check_conv_find, NULL},
    {"conv_fwd", check_conv_fwd, NULL},
    {"conv_bwd_data", check_conv_bwd_data, NULL},
    {"conv_bwd_filter", check_conv_bwd_filter, NULL},
    {"conv_bwd", check_conv_bwd, SC_NULL_CONV_BWD},
    {"bn_fwd_train", check_bn_fwd_train, NULL},
    {"bn_fwd_infer", check_bn_fwd_infer, NULL},
    {"bn_bwd", check_bn_bwd, NULL},
    {"pool_fwd", check_pool_fwd, NULL},
    {"pool_bwd", check_pool_bwd, NULL},
    {"softmax_xent_fwd", check_softmax_xent_fwd, NULL},
    {"softmax_xent_bwd", check_softmax_xent_bwd, NULL},
    {"gelu_tanh_fwd", check_gelu_tanh_fwd, NULL},
    {"gelu_tanh_bwd", check_gelu_tanh_bwd, NULL},
    {"xent_lse_fwd", check_xent_lse_fwd, NULL},
    {"xent_lse_bwd", check_xent_lse_bwd, NULL},
    {"reduce_sum", check_reduce_sum, NULL},
    {"count_nonfinite", check_count_nonfinite, NULL},
    {"dropout_fwd", check_dropout_fwd, NULL},
    {"dropout_bwd", check_dropout_bwd, NULL},
    {"opt_step", check_opt_step, NULL},
    {"layernorm_fwd", check_layernorm_fwd, NULL},
    {"layernorm_bwd", check_layernorm_bwd, NULL},
    {"attention_workspace", check_attention_workspace, NULL},
    {"attention_fwd", check_attention_fwd, NULL},
    {"attention_bwd", check_attention_bwd, NULL},
    {"embedding_fwd", check_embedding_fwd, NULL},
    {"embedding_bwd", check_embedding_bwd, NULL},
    /* one capture case walks all four graph slots; it runs under each name */
    {"graph_begin", check_graph_capture, SC_NULL_GRAPH},
    {"graph_end", check_graph_capture, SC_NULL_GRAPH},
    {"graph_launch", check_graph_capture, SC_NULL_GRAPH},
    {"graph_destroy", check_graph_capture, SC_NULL_GRAPH},
    {"augment_u8", check_augment_u8,
     "lib/backend/backend.h: n/a on the CPU backend, the CPU is the device: augmentation already "
     "runs where the model runs"},
    {"labels_u8_to_i32", check_labels_u8_to_i32,
     "lib/backend/backend.h: n/a on the CPU backend, host and device memory are the same"},
};
#define N_OP_CHECKS (sizeof op_checks / sizeof op_checks[0])

/* The runtime checks, run before the ops (which need memory to work). */
typedef struct sc_runtime_check {
    const char *name;
    int (*check)(sc_ctx *sc);
} sc_runtime_check;

static const sc_runtime_check runtime_checks[] = {
    {"memory", check_mem_roundtrip},
    {"memory", check_mem_accounting},
    {"streams", check_streams},
    {"device_info", check_device_info},
};
#define N_RUNTIME_CHECKS (sizeof runtime_checks / sizeof runtime_checks[0])

/* The slots that are not ops: which check exercises each, and where
 * lib/backend/backend.h allows NULL, its reason. */
typedef struct sc_runtime_slot {
    const char *slot;
    const char *covered_by; /* a runtime_checks name, or who else calls it */
    const char *null_ok;
} sc_runtime_slot;

static const sc_runtime_slot runtime_slots[] = {
    {"dev_alloc", "memory", NULL},
    {"dev_free", "memory", NULL},
    {"host_alloc", "memory", NULL},
    {"host_free", "memory", NULL},
    {"copy_h2d", "memory", NULL},
    {"copy_d2h", "memory", NULL},
    {"copy_d2d", "memory", NULL},
    {"copy_peer", "memory", NULL},
    {"memset", "memory", NULL},
    {"mem_stats", "memory", NULL},
    {"mem_reset_peak", "memory", NULL},
    {"mem_set_limit", "memory", NULL},
    {"mem_empty_cache", "memory", "lib/backend/backend.h: NULL where the backend keeps no cache"},
    {"mem_set_mode", "memory", "lib/backend/backend.h: NULL where the backend has one policy only"},
    {"stream_create", "streams", NULL},
    {"stream_destroy", "streams", NULL},
    {"stream_sync", "streams", NULL},
    {"event_create", "streams", NULL},
    {"event_destroy", "streams", NULL},
    {"event_record", "streams", NULL},
    {"stream_wait_event", "streams", NULL},
    {"event_sync", "streams", NULL},
    {"event_elapsed_ms", "streams", NULL},
    {"sync", "streams", NULL},
    {"device_info", "device_info", NULL},
    {"destroy", "the caller, closing the backend it checked", NULL},
};
#define N_RUNTIME_SLOTS (sizeof runtime_slots / sizeof runtime_slots[0])

/* ------------------------------------------------------------ the walk */

static const sc_op_check *find_op_check(const char *slot)
{
    for (size_t i = 0; i < N_OP_CHECKS; i++)
        if (strcmp(op_checks[i].slot, slot) == 0)
            return &op_checks[i];
    return NULL;
}

static const sc_runtime_slot *find_runtime_slot(const char *slot)
{
    for (size_t i = 0; i < N_RUNTIME_SLOTS; i++)
        if (strcmp(runtime_slots[i].slot, slot) == 0)
            return &runtime_slots[i];
    return NULL;
}

int tb_selfcheck_coverage(FILE *out)
{
    int problems = 0;
    for (size_t i = 0; i < tb_optable_count; i++) {
        const tb_slot_info *s = &tb_optable[i];
        const sc_op_check *oc = find_op_check(s->name);
        const sc_runtime_slot *rs = find_runtime_slot(s->name);
        if (s->kind == TB_SLOT_OP && !oc) {
            fprintf(out, "coverage: op slot '%s' (%s) has no selfcheck case: add check_%s to "
                         "op_checks[] in lib/selfcheck/selfcheck.c\n", s->name, s->section, s->name);
            problems++;
        }
        if (s->kind == TB_SLOT_OP && rs) {
            fprintf(out, "coverage: '%s' is an op (under backend.h's \"%s\" heading) but "
                         "lib/selfcheck/selfcheck.c lists it as not an op\n", s->name, s->section);
            problems++;
        }
        if (s->kind == TB_SLOT_RUNTIME && !rs) {
            fprintf(out, "coverage: runtime slot '%s' is not in runtime_slots[] of "
                         "lib/selfcheck/selfcheck.c: say which check exercises it\n", s->name);
            problems++;
        }
        if (s->kind == TB_SLOT_RUNTIME && oc) {
            fprintf(out, "coverage: '%s' is a runtime slot (before backend.h's first ---- "
                         "heading) but has an op check\n", s->name);
            problems++;
        }
    }
    for (size_t i = 0; i < N_OP_CHECKS; i++)
        if (!tb_optable_find(op_checks[i].slot)) {
            fprintf(out, "coverage: op_checks[] names '%s', which struct tb_backend does not "
                         "have\n", op_checks[i].slot);
            problems++;
        }
    for (size_t i = 0; i < N_RUNTIME_SLOTS; i++)
        if (!tb_optable_find(runtime_slots[i].slot)) {
            fprintf(out, "coverage: runtime_slots[] names '%s', which struct tb_backend does "
                         "not have\n", runtime_slots[i].slot);
            problems++;
        }
    return problems;
}

static int wanted(const tb_selfcheck_opts *o, const char *name)
{
    return !o->filter || strstr(name, o->filter) != NULL;
}

/* NULL runtime slots: n/a where backend.h allows it, else a failure.
 * Returns 1 when every slot the op checks need is there. */
static int runtime_slots_present(sc_ctx *sc, const tb_selfcheck_opts *o)
{
    int ok = 1;
    for (size_t i = 0; i < tb_optable_count; i++) {
        const tb_slot_info *s = &tb_optable[i];
        if (s->kind != TB_SLOT_RUNTIME)
            continue;
        const sc_runtime_slot *rs = find_runtime_slot(s->name);
        if (!rs) {
            sc_fail_line(sc, "%s: runtime slot not in lib/selfcheck/selfcheck.c's runtime_slots[] "
                             "(nothing checks it)", s->name);
            continue;
        }
        if (tb_slot_get(sc->be, s))
            continue;
        if (rs->null_ok) {
            if (!wanted(o, s->name) && !wanted(o, rs->covered_by))
                continue;
            sc->counts->na++;
            fprintf(sc->out, "n/a  %s: NULL on %s (%s)\n", s->name, sc->be->name, rs->null_ok);
        } else {
            sc_fail_line(sc, "%s: NULL on %s, and lib/backend/backend.h does not allow NULL there",
                         s->name, sc->be->name);
            ok = 0;
        }
    }
    return ok;
}

/* Runs one check function; an error from it (not a verdict) is a FAIL. */
static void run_check(sc_ctx *sc, const char *slot, const char *label, int (*check)(sc_ctx *))
{
    sc->slot = slot;
    int rc = check(sc);
    int rel = sc_release(sc);
    if (rc == TB_OK && rel != TB_OK)
        rc = rel;
    if (rc != TB_OK) {
        sc_fail_line(sc, "%s %s: the check stopped: %s: %s", slot, label, tb_err_name(rc),
                     tb_error_message());
        tb_error_clear();
    }
}

static void run_op(sc_ctx *sc, const tb_slot_info *s)
{
    const sc_op_check *oc = find_op_check(s->name);
    if (!oc) {
        sc_fail_line(sc, "%s (%s): no selfcheck case in lib/selfcheck/selfcheck.c's op_checks[]",
                     s->name, s->section);
        return;
    }
    if (!tb_slot_get(sc->be, s)) {
        if (oc->null_ok) {
            sc->counts->na++;
            fprintf(sc->out, "n/a  %s: NULL on %s (%s)\n", s->name, sc->be->name, oc->null_ok);
        } else {
            sc_fail_line(sc, "%s: NULL on %s, and lib/backend/backend.h does not allow NULL there",
                         s->name, sc->be->name);
        }
        return;
    }
    run_check(sc, s->name, "", oc->check);
}

/* One line per step check: the loss on the backend under test against
 * the reference's, within the check's tolerance. */
static void run_step_check(sc_ctx *sc, const tb_step_check *st)
{
    sc->slot = "step";
    sc_case c;
    sc_case_start(&c, "%s", st->name);
    const char *dtype = st->dtype ? st->dtype : "fp32";
    const char *ref_name = st->ref ? st->ref : "cpu";
    double got = 0, ref = 0;
    int rc = st->run(sc->be, &got, &ref);
    if (rc == TB_ERR_UNSUPPORTED) {
        sc_case_na_rc(&c);
    } else if (rc != TB_OK) {
        sc_case_fail_rc(&c, "the steps", rc);
    } else {
        tb_compare cmp;
        tb_compare_values(ref, got, st->tol, &cmp);
        if (cmp.verdict == TB_MATCH_DIFFERS)
            sc_case_fail(&c, "dtype=%s loss %.9g, %s %.9g: rel_err=%.2g > tol=%g (%s)", dtype,
                         got, ref_name, ref, cmp.max_rel, st->tol, st->why);
        else
            snprintf(c.note, sizeof c.note, "dtype=%s loss=%.9g %s=%.9g rel_err=%.2g tol=%g",
                     dtype, got, ref_name, ref, cmp.max_rel, st->tol);
    }
    sc_case_end(sc, &c);
}

/* The step checks and the toggle cases; a filter picks the lot ("step")
 * or the cases whose name holds it ("amp"). */
static void run_step_checks(sc_ctx *sc, const tb_selfcheck_opts *o)
{
    const tb_step_check *const tables[] = {sc_step_checks, sc_toggle_checks};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const tb_step_check *st = tables[t]; st->name; st++)
            if (wanted(o, "step") || wanted(o, st->name))
                run_step_check(sc, st);
}

int tb_selfcheck_run(tb_backend *be, const tb_selfcheck_opts *opts, tb_selfcheck_counts *counts)
{
    tb_selfcheck_opts o = {0};
    if (opts)
        o = *opts;
    if (!o.out)
        o.out = stdout;
    memset(counts, 0, sizeof *counts);
    sc_ctx sc = {.be = be, .out = o.out, .rng = tb_rng_seeded(o.seed ? o.seed : SC_DEFAULT_SEED),
                 .counts = counts};
    fprintf(o.out, "selfcheck: %s:%d against the plain CPU reference, %zu slots, seed 0x%llx%s%s\n",
            be->name, be->device, tb_optable_count, (unsigned long long)sc.rng.state,
            o.filter ? ", only slots matching " : "", o.filter ? o.filter : "");
    if (runtime_slots_present(&sc, &o)) {
        for (size_t i = 0; i < N_RUNTIME_CHECKS; i++)
            if (wanted(&o, runtime_checks[i].name))
                run_check(&sc, runtime_checks[i].name, "", runtime_checks[i].check);
        for (size_t i = 0; i < tb_optable_count; i++)
            if (tb_optable[i].kind == TB_SLOT_OP && wanted(&o, tb_optable[i].name))
                run_op(&sc, &tb_optable[i]);
        run_step_checks(&sc, &o);
    } else {
        sc_fail_line(&sc, "ops: not run, the backend's runtime slots above are missing");
    }
    fprintf(o.out, "selfcheck: %d passed, %d failed, %d n/a\n", counts->passed, counts->failed,
            counts->na);
    fflush(o.out);
    return TB_OK;
}
