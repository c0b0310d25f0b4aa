/*
 * vs_torch.c - tunebench's training steps beside PyTorch's on the same
 * machine: bazel run //bench:vs_torch [-- --python=PATH --budget=S]
 *
 * Configurations (same shapes, same SGD with momentum, synthetic data on
 * both sides): ResNet-50 at 64x64 batch 16 in fp32 NCHW, channels-last,
 * bf16 autocast, channels-last + bf16; GPT-2 with 2 blocks, context 128,
 * batch 2 and the full vocabulary of 50,257, in fp32 and under bf16
 * autocast; the small CNN (1x28x28, batch 32) in fp32 and under bf16
 * autocast.
 *
 * Per configuration one long-lived PyTorch process (tools/torch_step.py
 * --serve, driven over a pipe: "run K" answers the seconds K steps took,
 * so its start-up is never timed) and one tunebench trainer are two arms
 * of an interleaved, paired experiment (bench/harness/rounds.h): PyTorch
 * is the baseline arm, tunebench the compared one; each round runs one
 * repetition of each (K steps, K chosen after the warm-up), and the row's
 * speedup is the paired ratio PyTorch time / tunebench time over rounds
 * with its 95% interval (> 1: tunebench is faster). Rows: per
 * configuration "pytorch <config>" (baseline) and "tunebench <config>",
 * step time in ms, in results/<device>/vs_torch.csv (results/README.md).
 *
 * A model's fp32 and bf16 configurations (same layout) share one
 * experiment of four arms (groups[]): every round times all four, in a
 * shuffled order, so both precisions and both frameworks meet the same
 * machine. That experiment also gives the row "bf16 gain <model>" (metric
 * "bf16 gain", unit x): tunebench's bf16 speedup over its fp32 (median,
 * the two configurations' medians) and, as its speedup column, that gain
 * over PyTorch's, estimated per round (the round's bf16 speedup over
 * PyTorch divided by its fp32 one) with its paired 95% interval over the
 * rounds (lib/core/stats.h); its arms all run every round, to the budget
 * or the round cap (stopped each on its own interval, they left the gain
 * the rounds of whichever stopped first). > 1: tunebench gains more from bf16
 * than PyTorch does (issue 17 asks for >= 1). Run as two experiments a
 * minute apart, the gain mixed the host's machine state (rounds.h: the
 * VM's CPUs run together or apart) into both sides: on the EPYC VM, fp32
 * measured apart and bf16 together made PyTorch's channels-last bf16 gain
 * 1.87x, against 1.52x in one state. Rounds in which the state moved flag
 * the rows busy, as in every experiment.
 *
 * --only=TEXT times only the configurations whose name holds TEXT. The
 * CSV is written after each experiment (atomically, as every results file),
 * so an interrupted run keeps the experiments it finished.
 * A PyTorch step that outlasts the budget is not timed: before the rounds,
 * each PyTorch side runs one step (its first, untimed otherwise), given
 * 2 * budget / TB_MIN_REPS seconds (the minimum rounds at that pace would
 * take twice the budget); past that its process is stopped, the
 * configuration's rows are n/a saying so (a larger --budget times it), and
 * the model's other precision is timed alone, its bf16 gain row n/a (on a
 * CPU without avx512_bf16 PyTorch's bf16 GPT-2 step took 102 s, and that
 * experiment 15 minutes whatever --budget said; bench:vs_torch_slow_test).
 * Python: --python, else $TB_TORCH_PYTHON, else python3. When `import
 * torch` fails there, every configuration gets an n/a row saying
 * "n/a: PyTorch not installed" and a line on stderr; exit 0. A Python that
 * cannot be run at all, an --only that matches no configuration, or
 * --budget <= 0 is refused before anything is written (exit 2). Not part of
 * bench:all's plan nor of CI (PyTorch stays out of them); its test runs
 * the n/a path only: bazel test //bench:vs_torch_na_test
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/harness/harness.h"
#include "bench/harness/rounds.h"
#include "lib/core/clock.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

#define NA_NOTE "n/a: PyTorch not installed"
#define TECHNIQUE "vs_torch"

typedef enum vs_model { VS_RESNET50, VS_GPT2, VS_SMALL_CNN } vs_model;

typedef struct vs_config {
    const char *name;   /* the row's setting, after "pytorch " / "tunebench " */
    vs_model model;
    int channels_last;
    int bf16;
} vs_config;

static const vs_config configs[] = {
    {"resnet50 64x64 b16 fp32 nchw", VS_RESNET50, 0, 0},
    {"resnet50 64x64 b16 channels-last", VS_RESNET50, 1, 0},
    {"resnet50 64x64 b16 bf16 autocast", VS_RESNET50, 0, 1},
    {"resnet50 64x64 b16 channels-last bf16", VS_RESNET50, 1, 1},
    {"gpt2 2 layers ctx128 b2", VS_GPT2, 0, 0},
    {"small_cnn 28x28 b32 fp32", VS_SMALL_CNN, 0, 0},
    {"small_cnn 28x28 b32 bf16 autocast", VS_SMALL_CNN, 0, 1},
    {"gpt2 2 layers ctx128 b2 bf16 autocast", VS_GPT2, 0, 1},
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

/* The experiments: one configuration, or a model's fp32 and bf16
 * configurations (indices in configs[]) with its bf16 gain row's name. */
static const struct {
    int fp32, bf16; /* bf16 < 0: a configuration alone (fp32: its index) */
    const char *gain;
} groups[] = {
    {0, 2, "resnet50 64x64 b16 nchw"},
    {1, 3, "resnet50 64x64 b16 channels-last"},
    {4, 7, "gpt2 2 layers ctx128 b2"},
    {5, 6, "small_cnn 28x28 b32"},
};
#define NGROUPS (int)(sizeof groups / sizeof groups[0])

/* The PyTorch side: a torch_step.py --serve child. */
typedef struct torch_proc {
    pid_t pid;
    FILE *to, *from;    /* its stdin, its stdout */
} torch_proc;

static const char *g_python, *g_script, *g_only = "";
static double g_budget = 120;

/* 1 when `python -c "import torch"` succeeds. */
/* 1 if python imports torch; 0 if it runs and cannot; -1 if it cannot be
 * run at all (no such file, not executable). */
static int torch_importable(const char *python)
{
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execlp(python, python, "-c", "import torch", (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Starts PyTorch's side of configuration c with `threads` CPU threads
 * (0: PyTorch's default, as tunebench's 0 is all cores). */
static int torch_start(const vs_config *c, int threads, torch_proc *p)
{
    int in[2], out[2];
    char threads_arg[32];
    snprintf(threads_arg, sizeof threads_arg, "--threads=%d", threads);
    if (pipe(in) || pipe(out))
        return TB_FAIL(TB_ERR_IO, "pipe: %s", strerror(errno));
    p->pid = fork();
    if (p->pid < 0)
        return TB_FAIL(TB_ERR_IO, "fork: %s", strerror(errno));
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        int gpt2 = c->model == VS_GPT2, small = c->model == VS_SMALL_CNN;
        const char *model = gpt2 ? "--model=gpt2" : small ? "--model=small_cnn" : "--model=resnet50";
        execlp(g_python, g_python, g_script, "--device=cpu", model, "--serve",
               gpt2 ? "--context=128" : "--image-size=64", gpt2 ? "--layers=2" : "--header=0",
               gpt2 ? "--batch-size=2" : small ? "--batch-size=32" : "--batch-size=16",
               c->channels_last ? "--channels-last" : "--header=0",
               c->bf16 ? "--amp=bf16" : "--amp=off", threads_arg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    char line[256];
    if (!p->to || !p->from || !fgets(line, sizeof line, p->from) || strncmp(line, "ready", 5))
        return TB_FAIL(TB_ERR_IO, "%s %s --serve did not start (no \"ready\")", g_python,
                       g_script);
    return TB_OK;
}

static void torch_stop(torch_proc *p)
{
    if (p->to) {
        fputs("quit\n", p->to);
        fclose(p->to);
    }
    if (p->from)
        fclose(p->from);
    if (p->pid > 0)
        waitpid(p->pid, NULL, 0);
    memset(p, 0, sizeof *p);
}

/* Asks for `units` steps; torch_answer reads what they took. */
static void torch_ask(torch_proc *p, long units)
{
    fprintf(p->to, "run %ld\n", units);
    fflush(p->to);
}

static int torch_answer(torch_proc *p, double *seconds)
{
    char line[256] = "";
    if (!fgets(line, sizeof line, p->from) || sscanf(line, "%lf", seconds) != 1)
        return TB_FAIL(TB_ERR_IO, "torch_step.py --serve answered %s", line);
    return TB_OK;
}

static int torch_run(void *user, long units, double *seconds)
{
    torch_proc *p = user;
    torch_ask(p, units);
    return torch_answer(p, seconds);
}

/* PyTorch's first step, given limit_s; 0 in *in_time when it was still
 * stepping then (its process is then stopped). */
static int torch_first_step(torch_proc *p, double limit_s, int *in_time)
{
    torch_ask(p, 1);
    struct pollfd fd = {.fd = fileno(p->from), .events = POLLIN};
    int ms = limit_s * 1e3 < INT_MAX ? (int)(limit_s * 1e3) : INT_MAX;
    int ready;
    do
        ready = poll(&fd, 1, ms);
    while (ready < 0 && errno == EINTR);
    *in_time = ready > 0;
    if (ready < 0)
        return TB_FAIL(TB_ERR_IO, "poll on torch_step.py --serve: %s", strerror(errno));
    if (*in_time) {
        double seconds;
        return torch_answer(p, &seconds);
    }
    kill(p->pid, SIGKILL);
    return TB_OK;
}

static int tb_run(void *user, long units, double *seconds)
{
    tb_trainer *t = user;
    float loss;
    double t0 = tb_clock_s();
    for (long i = 0; i < units; i++)
        TB_TRY(tb_trainer_step(t, &loss));
    TB_TRY(t->be->sync(t->be));
    *seconds = tb_clock_s() - t0;
    return TB_OK;
}

static int make_trainer(tb_bench *b, const vs_config *c, tb_trainer **t)
{
    tb_config cfg;
    tb_config_defaults(&cfg);
    cfg.device = b->device_spec;
    cfg.threads = b->threads;
    cfg.dataset = TB_DATA_SYNTHETIC;
    cfg.model = c->model == VS_GPT2 ? TB_MODEL_GPT2
                : c->model == VS_SMALL_CNN ? TB_MODEL_SMALL_CNN : TB_MODEL_RESNET50;
    cfg.batch_size = c->model == VS_GPT2 ? 2 : c->model == VS_SMALL_CNN ? 32 : 16;
    if (c->model == VS_GPT2) {
        cfg.context = 128;
        cfg.layers = 2;
    } else if (c->model == VS_RESNET50) {
        cfg.image_size = 64;
    }
    cfg.channels_last = c->channels_last;
    cfg.amp_dtype = c->bf16 ? TB_AMP_BF16 : TB_AMP_OFF;
    cfg.optimizer = TB_OPT_SGD;
    TB_TRY(tb_config_validate(&cfg));
    return tb_trainer_create(&cfg, b->be, t);
}

/* The two rows of one configuration: arms pa (PyTorch) and pa + 1
 * (tunebench) of experiment r. 0 in *ok when either has too few rounds. */
static int add_rows(tb_bench *b, const vs_config *c, const tb_rounds_result *r, int pa, int *ok)
{
    char set[64];
    *ok = 1;
    for (int a = 0; a < 2; a++) {
        const tb_rounds_arm_result *ar = &r->arms[pa + a];
        tb_result_row row;
        snprintf(set, sizeof set, "%s %s", a ? "tunebench" : "pytorch", c->name);
        if (ar->rounds < TB_MIN_REPS) {
            char why[128];
            snprintf(why, sizeof why, "n/a: %d rounds within the budget (%g s), %d needed: "
                     "raise --budget", ar->rounds, g_budget, TB_MIN_REPS);
            TB_TRY(tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                                     "step time", why));
            *ok = 0;
            continue;
        }
        tb_bench_row(b, &row, set, a == 0, "", 0, "step time");
        gb_run run = {.name = set, .repetitions = ar->rounds, .seconds = ar->seconds};
        TB_TRY(tb_bench_fill_timing(&row, &run, 1e3, "ms"));
        row.rounds = ar->rounds;
        snprintf(row.stopped_by, sizeof row.stopped_by, "%s", tb_rounds_stop_name(ar->stop));
        row.busy = r->busy;
        row.load_avg = r->load_avg;
        row.xcore_ns = r->xcore_ns;
        if (a == 1) {
            row.speedup = ar->cmp.speedup;
            row.speedup_ci_low = ar->cmp.lo;
            row.speedup_ci_high = ar->cmp.hi;
            row.mde = ar->cmp.mde;
            row.timing_verdict =
                tb_bench_timing_verdict(tb_stats_paired_verdict(&ar->cmp, NULL, NULL));
            snprintf(row.note, sizeof row.note, "speedup: PyTorch step time / tunebench's, "
                     "paired per round (> 1: tunebench faster)");
        }
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

/* An arm's median step time (a rows' median column: same unit either side). */
static double arm_median(const tb_rounds_arm_result *ar)
{
    double m;
    return tb_stats_median(ar->seconds, (size_t)ar->rounds, &m) == TB_OK ? m : NAN;
}

/* The "bf16 gain" row of a model from its four-arm experiment (arms 0-1:
 * fp32 PyTorch, tunebench; 2-3: bf16): per round, tunebench's speedup over
 * PyTorch in bf16 divided by the one in fp32, over the rounds both ran. */
static int add_gain_row(tb_bench *b, const char *name, const tb_rounds_result *r)
{
    const tb_rounds_arm_result *f = &r->arms[1], *h = &r->arms[3];
    int n = f->rounds < h->rounds ? f->rounds : h->rounds;
    char set[96];
    snprintf(set, sizeof set, "bf16 gain %s", name);
    if (n < TB_MIN_REPS) {
        char why[128];
        snprintf(why, sizeof why, "n/a: %d rounds of both precisions within the budget, %d "
                 "needed: raise --budget", n, TB_MIN_REPS);
        return tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                                 "bf16 gain", why);
    }
    double *s16 = malloc(2 * (size_t)n * sizeof *s16), *s32 = s16 + n;
    if (!s16)
        return TB_FAIL(TB_ERR_NOMEM, "vs_torch: %d rounds' gains", n);
    for (int i = 0; i < n; i++) {
        s16[i] = h->ref[i] / h->seconds[i];
        s32[i] = f->ref[i] / f->seconds[i];
    }
    tb_paired g;
    int rc = tb_stats_paired(s16, s32, (size_t)n, 0x6a1e, &g);
    free(s16);
    TB_TRY(rc);
    double tb_gain = arm_median(&r->arms[1]) / arm_median(&r->arms[3]);
    double pt_gain = arm_median(&r->arms[0]) / arm_median(&r->arms[2]);
    tb_result_row row;
    tb_bench_row(b, &row, set, 0, "", 0, "bf16 gain");
    row.median = tb_gain;
    snprintf(row.unit, sizeof row.unit, "x");
    row.rounds = n;
    row.speedup = g.speedup;
    row.speedup_ci_low = g.lo;
    row.speedup_ci_high = g.hi;
    row.mde = g.mde;
    row.timing_verdict = tb_bench_timing_verdict(tb_stats_paired_verdict(&g, NULL, NULL));
    row.busy = r->busy;
    row.load_avg = r->load_avg;
    row.xcore_ns = r->xcore_ns;
    snprintf(row.note, sizeof row.note,
             "bf16 speedup over fp32 (step-time medians): tunebench %.3fx, PyTorch %.3fx; "
             "speedup column: tunebench's gain / PyTorch's per round, paired over %d rounds "
             "of one four-arm experiment (> 1: tunebench gains more)", tb_gain, pt_gain, n);
    return tb_results_add(&b->res, &row);
}

/* The rows of configuration c when PyTorch's first step outlasted limit_s
 * (torch_first_step): n/a, saying so, for both sides. */
static int add_slow_rows(tb_bench *b, const vs_config *c, double limit_s)
{
    char why[256];
    snprintf(why, sizeof why, "n/a: PyTorch's first step was still running after %.0f s, so "
             "its %d rounds (the minimum) would take over twice the %g s budget: not timed "
             "(a larger --budget times it)", limit_s, TB_MIN_REPS, g_budget);
    fprintf(stderr, "vs_torch: %s: %s\n", c->name, why + 5);
    for (int a = 0; a < 2; a++) {
        char set[64];
        snprintf(set, sizeof set, "%s %s", a ? "tunebench" : "pytorch", c->name);
        TB_TRY(tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                                 "step time", why));
    }
    return TB_OK;
}

/* One experiment: configurations idx[0..n) (n 1 or 2), each a PyTorch arm
 * and a tunebench arm compared with it; with two, the gain row too. A
 * configuration whose PyTorch step outlasts the budget is left out of it
 * (add_slow_rows), and the gain row is then n/a. */
static int run_group(tb_bench *b, const int *idx, int n, const char *gain)
{
    torch_proc p[2] = {{0}};
    tb_trainer *t[2] = {NULL, NULL};
    tb_rounds_result res = {0};
    tb_arm arms[4];
    char names[4][80];
    int kept[2], k = 0; /* the configurations timed, as indices into idx */
    double limit = 2 * g_budget / TB_MIN_REPS;
    int rc = TB_OK;
    for (int i = 0; i < n; i++) {
        const vs_config *c = &configs[idx[i]];
        int in_time = 0;
        TB_TRY_GOTO(rc, torch_start(c, b->threads, &p[i]), out);
        TB_TRY_GOTO(rc, torch_first_step(&p[i], limit, &in_time), out);
        if (!in_time) {
            torch_stop(&p[i]);
            TB_TRY_GOTO(rc, add_slow_rows(b, c, limit), out);
            continue;
        }
        TB_TRY_GOTO(rc, make_trainer(b, c, &t[i]), out);
        snprintf(names[2 * k], sizeof names[0], "pytorch %s", c->name);
        snprintf(names[2 * k + 1], sizeof names[0], "tunebench %s", c->name);
        arms[2 * k] = (tb_arm){.name = names[2 * k], .base = 2 * k, .run = torch_run,
                               .user = &p[i]};
        arms[2 * k + 1] = (tb_arm){.name = names[2 * k + 1], .base = 2 * k, .run = tb_run,
                                   .user = t[i]};
        kept[k++] = i;
    }
    int ok[2] = {0, 0};
    if (k > 0) {
        /* the PyTorch arms' processes: this process's own, not "other
         * processes" (the busy rule) */
        tb_rounds_cfg cfg = {.min_rep_s = 1.0, .min_rounds = 5, .max_rounds = 30,
                             .target_half_width = 0.03, .budget_s = k * g_budget,
                             .warmup_max_s = g_budget / 4, .seed = 0x7b5e,
                             .own_pid = {p[0].pid, p[1].pid}};
        /* The gain row pairs the two precisions round by round, over the
         * rounds all four arms ran: none stops on its own interval (a target
         * no interval meets), so the experiment ends on its budget or at
         * max_rounds, every arm with every round */
        if (k == 2)
            cfg.target_half_width = 1e-9;
        fprintf(stderr, "vs_torch: %s%s: rounds of PyTorch and tunebench%s, budget %g s\n",
                configs[idx[kept[0]]].name, k > 1 ? " and its bf16 twin" : "",
                k > 1 ? ", both precisions" : "", cfg.budget_s);
        TB_TRY_GOTO(rc, tb_rounds_run(&cfg, arms, 2 * k, &res), out);
        for (int j = 0; j < k; j++)
            TB_TRY_GOTO(rc, add_rows(b, &configs[idx[kept[j]]], &res, 2 * j, &ok[j]), out);
    }
    if (n == 2 && gain && k == 2 && ok[0] && ok[1]) {
        rc = add_gain_row(b, gain, &res);
    } else if (n == 2 && gain && k < 2) {
        char set[96];
        snprintf(set, sizeof set, "bf16 gain %s", gain);
        rc = tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                               "bf16 gain", "n/a: a precision's PyTorch step outlasted the "
                               "budget and was not timed (its rows say so)");
    }
out:
    tb_rounds_result_free(&res);
    for (int i = 0; i < 2; i++) {
        torch_stop(&p[i]);
        tb_trainer_destroy(t[i]);
    }
    return rc;
}

static int run(tb_bench *b)
{
    /* a mistyped --only would time nothing and write a header-only CSV over
     * the results of an earlier run: refused before anything is written */
    int any = 0;
    for (int i = 0; i < NCONFIGS; i++)
        any |= strstr(configs[i].name, g_only) != NULL;
    if (!any) {
        char names[1024] = "";
        for (int i = 0; i < NCONFIGS; i++) {
            size_t n = strlen(names);
            snprintf(names + n, sizeof names - n, "%s\"%s\"", i ? ", " : "", configs[i].name);
        }
        return TB_FAIL(TB_ERR_INVALID, "--only=%s matches no configuration (they are %s); "
                       "nothing was run or written", g_only, names);
    }
    int importable = torch_importable(g_python);
    if (importable < 0)
        return TB_FAIL(TB_ERR_INVALID, "cannot run `%s` (--python or TB_TORCH_PYTHON): no such "
                       "program, or not executable; nothing was written", g_python);
    if (!importable) {
        fprintf(stderr, "vs_torch: `%s -c \"import torch\"` failed: PyTorch is not installed "
                "there; writing n/a rows (--python=PATH or TB_TORCH_PYTHON picks another "
                "Python)\n", g_python);
        for (int i = 0; i < NCONFIGS; i++) {
            char set[64];
            snprintf(set, sizeof set, "tunebench %s", configs[i].name);
            TB_TRY(tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                                     "step time", NA_NOTE));
        }
        return tb_bench_save(b);
    }
    /* the file is written again after each experiment: an interrupted run
     * keeps those it finished (an experiment is its warm-ups and at least 5
     * rounds of 1 s or more per arm: minutes for the slower configurations) */
    int saved = 0;
    for (int g = 0; g < NGROUPS; g++) {
        int idx[2], n = 0;
        if (strstr(configs[groups[g].fp32].name, g_only))
            idx[n++] = groups[g].fp32;
        if (groups[g].bf16 >= 0 && strstr(configs[groups[g].bf16].name, g_only))
            idx[n++] = groups[g].bf16;
        if (!n)
            continue;
        TB_TRY(run_group(b, idx, n, groups[g].gain));
        TB_TRY(tb_bench_save(b));
        saved = 1;
    }
    return saved ? TB_OK : tb_bench_save(b);
}

static const tb_technique technique = {
    .name = TECHNIQUE,
    .what = "tunebench's ResNet-50, GPT-2 and small-CNN training steps beside PyTorch's, interleaved and "
            "paired (needs PyTorch; not in bench:all)",
    .est_seconds = {400, 900, 5, 0},
    .budget_seconds = {300, 800, 4, 0},
    .order = 99,
    .tiny = {.min_rows = NCONFIGS, .na_note = NA_NOTE, .no_gbench = 1},
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *env = getenv("TB_TORCH_PYTHON");
    g_python = env && env[0] ? env : "python3";
    g_script = "tools/torch_step.py";
    tb_flag extra[] = {
        {.name = "python", .kind = TB_FLAG_STRING, .value = &g_python,
         .help = "Python with torch (default $TB_TORCH_PYTHON, else python3)"},
        {.name = "torch-step", .kind = TB_FLAG_STRING, .value = &g_script,
         .help = "path of tools/torch_step.py"},
        {.name = "only", .kind = TB_FLAG_STRING, .value = &g_only,
         .help = "time only the configurations whose name holds this (e.g. gpt2)"},
        {.name = "budget", .kind = TB_FLAG_DOUBLE, .value = &g_budget,
         .help = "seconds of rounds per configuration", .range = TB_RANGE_ABOVE(0)},
    };
    tb_bench b;
    int done = 0;
    int rc = tb_bench_init(&b, &technique, extra, sizeof extra / sizeof extra[0], argc, argv,
                           &done);
    if (rc == TB_OK && !done)
        rc = run(&b);
    tb_bench_close(&b);
    if (rc != TB_OK)
        return tb_bench_fail(TECHNIQUE, rc);
    return 0;
}
