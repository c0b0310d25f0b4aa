/*
 * vs_torch.c - tunebench's training steps beside PyTorch's on the same
 * machine: bazel run //bench:vs_torch [-- --python=PATH --budget=S]
 *
 * Configurations (same shapes, same SGD with momentum, synthetic data on
 * both sides): ResNet-50 at 64x64 batch 16 in fp32 NCHW, channels-last,
 * bf16 autocast, channels-last + bf16; GPT-2 with 2 blocks, context 128,
 * batch 2 and the full vocabulary of 50,257; the small CNN (1x28x28, batch
 * 32) in fp32 and under bf16 autocast.
 *
 * Per configuration one long-lived PyTorch process (tools/torch_step.py
 * --serve, driven over a pipe: "run K" answers the seconds K steps took,
 * so its start-up is never timed) and one tunebench trainer are two arms
 * of one interleaved, paired experiment (bench/harness/rounds.h): PyTorch
 * is the baseline arm, tunebench the compared one; each round runs one
 * repetition of each (K steps, K chosen after the warm-up), and the row's
 * speedup is the paired ratio PyTorch time / tunebench time over rounds
 * with its 95% interval (> 1: tunebench is faster). Rows: per
 * configuration "pytorch <config>" (baseline) and "tunebench <config>",
 * step time in ms, in results/<device>/vs_torch.csv (results/README.md).
 * Then, per model with an fp32 and a bf16 configuration (same layout),
 * a row "bf16 gain <model>" (metric "bf16 gain", unit x): tunebench's bf16
 * speedup over its fp32 (median, the two configurations' medians) and, as
 * its speedup column, that gain over PyTorch's, which is the bf16
 * configuration's speedup over PyTorch divided by the fp32 one's; its 95%
 * interval adds the two intervals' log half-widths in quadrature (the two
 * experiments are independent). > 1: tunebench gains more from bf16 than
 * PyTorch does (issue 17 asks for >= 1). The two experiments run a minute
 * or more apart; when their core-to-core round trips (rounds.h: the host
 * running the VM's CPUs together or apart) differ by
 * TB_MACHINE_XCORE_STATES, the gain row is flagged busy and says so: on
 * the EPYC VM, fp32 measured apart and bf16 together made PyTorch's
 * channels-last bf16 gain 1.87x, against 1.52x in a run without the
 * state recorded.
 *
 * --only=TEXT times only the configurations whose name holds TEXT.
 * Python: --python, else $TB_TORCH_PYTHON, else python3. When `import
 * torch` fails there, every configuration gets an n/a row saying
 * "n/a: PyTorch not installed" and a line on stderr; exit 0. Not part of
 * bench:all's plan nor of CI (PyTorch stays out of them); its test runs
 * the n/a path only: bazel test //bench:vs_torch_na_test
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/harness/harness.h"
#include "bench/harness/machine_probe.h"
#include "bench/harness/rounds.h"
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
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

/* The bf16 gain rows: a model's fp32 and bf16 configurations (indices in
 * configs[]) and the row's name. */
static const struct {
    int fp32, bf16;
    const char *name;
} gains[] = {
    {0, 2, "resnet50 64x64 b16 nchw"},
    {1, 3, "resnet50 64x64 b16 channels-last"},
    {5, 6, "small_cnn 28x28 b32"},
};

/* What a configuration's experiment gave, for the gain rows. */
typedef struct vs_outcome {
    int ok;                       /* both arms have rows */
    double tb_ms, pt_ms;          /* medians */
    double speedup, lo, hi;       /* PyTorch time / tunebench's, paired, 95% */
    double xcore_ns;              /* the machine state it ran in (rounds.h) */
    int busy;                     /* its rows were flagged busy (rounds.h) */
} vs_outcome;
static vs_outcome outcomes[NCONFIGS];

/* The PyTorch side: a torch_step.py --serve child. */
typedef struct torch_proc {
    pid_t pid;
    FILE *to, *from;    /* its stdin, its stdout */
} torch_proc;

static const char *g_python, *g_script, *g_only = "";
static double g_budget = 120;

/* 1 when `python -c "import torch"` succeeds. */
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

static int torch_run(void *user, long units, double *seconds)
{
    torch_proc *p = user;
    char line[256];
    fprintf(p->to, "run %ld\n", units);
    fflush(p->to);
    if (!fgets(line, sizeof line, p->from) || sscanf(line, "%lf", seconds) != 1)
        return TB_FAIL(TB_ERR_IO, "torch_step.py --serve answered %s", line);
    return TB_OK;
}

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int tb_run(void *user, long units, double *seconds)
{
    tb_trainer *t = user;
    float loss;
    double t0 = mono_seconds();
    for (long i = 0; i < units; i++)
        TB_TRY(tb_trainer_step(t, &loss));
    TB_TRY(t->be->sync(t->be));
    *seconds = mono_seconds() - t0;
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

/* The two rows of one configuration from its experiment; what they say
 * goes to *o too. */
static int add_rows(tb_bench *b, const vs_config *c, const tb_rounds_result *r, vs_outcome *o)
{
    char set[64];
    *o = (vs_outcome){.ok = 1, .xcore_ns = r->xcore_ns, .busy = r->busy};
    for (int a = 0; a < 2; a++) {
        const tb_rounds_arm_result *ar = &r->arms[a];
        tb_result_row row;
        snprintf(set, sizeof set, "%s %s", a ? "tunebench" : "pytorch", c->name);
        if (ar->rounds < TB_MIN_REPS) {
            char why[128];
            snprintf(why, sizeof why, "n/a: %d rounds within the budget (%g s), %d needed: "
                     "raise --budget", ar->rounds, g_budget, TB_MIN_REPS);
            TB_TRY(tb_results_add_na(&b->res, TECHNIQUE, b->info.backend, b->info.name, set,
                                     "step time", why));
            o->ok = 0;
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
        *(a ? &o->tb_ms : &o->pt_ms) = row.median;
        if (a == 1) {
            o->speedup = ar->cmp.speedup;
            o->lo = ar->cmp.lo;
            o->hi = ar->cmp.hi;
            row.speedup = ar->cmp.speedup;
            row.speedup_ci_low = ar->cmp.lo;
            row.speedup_ci_high = ar->cmp.hi;
            row.mde = ar->cmp.mde;
            row.timing_verdict = ar->cmp.lo > 1 ? TB_TIMING_FASTER
                                 : ar->cmp.hi < 1 ? TB_TIMING_SLOWER : TB_TIMING_WITHIN_NOISE;
            snprintf(row.note, sizeof row.note, "speedup: PyTorch step time / tunebench's, "
                     "paired per round (> 1: tunebench faster)");
        }
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

static int run_config(tb_bench *b, const vs_config *c, vs_outcome *o)
{
    torch_proc p = {0};
    tb_trainer *t = NULL;
    tb_rounds_result res = {0};
    int rc;
    TB_TRY_GOTO(rc, make_trainer(b, c, &t), out);
    TB_TRY_GOTO(rc, torch_start(c, b->threads, &p), out);
    tb_arm arms[2] = {
        {.name = "pytorch", .base = 0, .run = torch_run, .user = &p},
        {.name = "tunebench", .base = 0, .run = tb_run, .user = t},
    };
    tb_rounds_cfg cfg = {.min_rep_s = 1.0, .min_rounds = 5, .max_rounds = 30,
                         .target_half_width = 0.03, .budget_s = g_budget,
                         .warmup_max_s = g_budget / 4, .seed = 0x7b5e,
                         /* the PyTorch arm's process: not "other processes" */
                         .own_pid = p.pid},
                  *cp = &cfg;
    fprintf(stderr, "vs_torch: %s: rounds of PyTorch and tunebench, budget %g s\n", c->name,
            g_budget);
    TB_TRY_GOTO(rc, tb_rounds_run(cp, arms, 2, &res), out);
    rc = add_rows(b, c, &res, o);
out:
    tb_rounds_result_free(&res);
    torch_stop(&p);
    tb_trainer_destroy(t);
    return rc;
}

/* The "bf16 gain" row of a model from its fp32 and bf16 experiments
 * (nothing when either did not run or has no rows). */
static int add_gain_row(tb_bench *b, const char *name, const vs_outcome *f, const vs_outcome *h)
{
    if (!f->ok || !h->ok || !(f->lo > 0) || !(h->lo > 0))
        return TB_OK;
    char set[96];
    snprintf(set, sizeof set, "bf16 gain %s", name);
    tb_result_row row;
    tb_bench_row(b, &row, set, 0, "", 0, "bf16 gain");
    double tb_gain = f->tb_ms / h->tb_ms, pt_gain = f->pt_ms / h->pt_ms;
    /* the ratio of the two paired speedups; log half-widths in quadrature */
    double r = h->speedup / f->speedup;
    double hf = 0.5 * log(f->hi / f->lo), hh = 0.5 * log(h->hi / h->lo);
    double hw = sqrt(hf * hf + hh * hh);
    row.median = tb_gain;
    snprintf(row.unit, sizeof row.unit, "x");
    row.speedup = r;
    row.speedup_ci_low = r * exp(-hw);
    row.speedup_ci_high = r * exp(hw);
    row.timing_verdict = row.speedup_ci_low > 1   ? TB_TIMING_FASTER
                         : row.speedup_ci_high < 1 ? TB_TIMING_SLOWER
                                                   : TB_TIMING_WITHIN_NOISE;
    snprintf(row.note, sizeof row.note,
             "bf16 speedup over fp32 (step-time medians): tunebench %.3fx, PyTorch %.3fx; "
             "speedup column: tunebench's gain / PyTorch's (> 1: tunebench gains more), "
             "interval from the two configurations' (log half-widths in quadrature)",
             tb_gain, pt_gain);
    /* a configuration measured on a busy machine, or while its state moved */
    row.busy = f->busy || h->busy;
    /* Two experiments: the state may have changed between them, and with it
     * both sides' step times (the machine's two states are two machines) */
    int known = f->xcore_ns > 0 && h->xcore_ns > 0; /* NaN: not measured */
    double x_hi = fmax(f->xcore_ns, h->xcore_ns);
    if (known && x_hi >= TB_MACHINE_XCORE_STATES * fmin(f->xcore_ns, h->xcore_ns)) {
        row.busy = 1;
        size_t n = strlen(row.note);
        snprintf(row.note + n, sizeof row.note - n, "; the fp32 and bf16 configurations ran in "
                 "different machine states (core-to-core round trip %.0f vs %.0f ns, "
                 "machine_probe.h): both gains mix the state change, so the row is flagged; "
                 "rerun until both run in one state", f->xcore_ns, h->xcore_ns);
    } else if (known) {
        row.xcore_ns = x_hi;
    }
    return tb_results_add(&b->res, &row);
}

static int run(tb_bench *b)
{
    if (!torch_importable(g_python)) {
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
    for (int i = 0; i < NCONFIGS; i++)
        if (strstr(configs[i].name, g_only))
            TB_TRY(run_config(b, &configs[i], &outcomes[i]));
    for (size_t g = 0; g < sizeof gains / sizeof gains[0]; g++)
        TB_TRY(add_gain_row(b, gains[g].name, &outcomes[gains[g].fp32], &outcomes[gains[g].bf16]));
    return tb_bench_save(b);
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
         .help = "seconds of rounds per configuration"},
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
