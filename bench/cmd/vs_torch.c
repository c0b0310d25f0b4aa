/*
 * vs_torch.c - tunebench's training steps beside PyTorch's on the same
 * machine: bazel run //bench:vs_torch [-- --python=PATH --budget=S]
 *
 * Configurations (same shapes, same SGD with momentum, synthetic data on
 * both sides): ResNet-50 at 64x64 batch 16 in fp32 NCHW, channels-last,
 * bf16 autocast, channels-last + bf16; GPT-2 with 2 blocks, context 128,
 * batch 2 and the full vocabulary of 50,257.
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
 *
 * --only=TEXT times only the configurations whose name holds TEXT.
 * Python: --python, else $TB_TORCH_PYTHON, else python3. When `import
 * torch` fails there, every configuration gets an n/a row saying
 * "n/a: PyTorch not installed" and a line on stderr; exit 0. Not part of
 * bench:all's plan nor of CI (PyTorch stays out of them); its test runs
 * the n/a path only: bazel test //bench:vs_torch_na_test
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/harness/harness.h"
#include "bench/harness/rounds.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

#define NA_NOTE "n/a: PyTorch not installed"
#define TECHNIQUE "vs_torch"

typedef struct vs_config {
    const char *name;   /* the row's setting, after "pytorch " / "tunebench " */
    int gpt2;
    int channels_last;
    int bf16;
} vs_config;

static const vs_config configs[] = {
    {"resnet50 64x64 b16 fp32 nchw", 0, 0, 0},
    {"resnet50 64x64 b16 channels-last", 0, 1, 0},
    {"resnet50 64x64 b16 bf16 autocast", 0, 0, 1},
    {"resnet50 64x64 b16 channels-last bf16", 0, 1, 1},
    {"gpt2 2 layers ctx128 b2", 1, 0, 0},
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

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

static int torch_start(const vs_config *c, torch_proc *p)
{
    int in[2], out[2];
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
        const char *model = c->gpt2 ? "--model=gpt2" : "--model=resnet50";
        execlp(g_python, g_python, g_script, "--device=cpu", model, "--serve",
               c->gpt2 ? "--context=128" : "--image-size=64", c->gpt2 ? "--layers=2" : "--header=0",
               c->gpt2 ? "--batch-size=2" : "--batch-size=16",
               c->channels_last ? "--channels-last" : "--header=0",
               c->bf16 ? "--amp=bf16" : "--amp=off", (char *)NULL);
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
    cfg.model = c->gpt2 ? TB_MODEL_GPT2 : TB_MODEL_RESNET50;
    cfg.batch_size = c->gpt2 ? 2 : 16;
    if (c->gpt2) {
        cfg.context = 128;
        cfg.layers = 2;
    } else {
        cfg.image_size = 64;
    }
    cfg.channels_last = c->channels_last;
    cfg.amp_dtype = c->bf16 ? TB_AMP_BF16 : TB_AMP_OFF;
    cfg.optimizer = TB_OPT_SGD;
    TB_TRY(tb_config_validate(&cfg));
    return tb_trainer_create(&cfg, b->be, t);
}

/* The two rows of one configuration from its experiment. */
static int add_rows(tb_bench *b, const vs_config *c, const tb_rounds_result *r)
{
    char set[64];
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
            continue;
        }
        tb_bench_row(b, &row, set, a == 0, "", 0, "step time");
        gb_run run = {.name = set, .repetitions = ar->rounds, .seconds = ar->seconds};
        TB_TRY(tb_bench_fill_timing(&row, &run, 1e3, "ms"));
        row.rounds = ar->rounds;
        snprintf(row.stopped_by, sizeof row.stopped_by, "%s", tb_rounds_stop_name(ar->stop));
        row.busy = r->busy;
        row.load_avg = r->load_avg;
        if (a == 1) {
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

static int run_config(tb_bench *b, const vs_config *c)
{
    torch_proc p = {0};
    tb_trainer *t = NULL;
    tb_rounds_result res = {0};
    int rc;
    TB_TRY_GOTO(rc, make_trainer(b, c, &t), out);
    TB_TRY_GOTO(rc, torch_start(c, &p), out);
    tb_arm arms[2] = {
        {.name = "pytorch", .base = 0, .run = torch_run, .user = &p},
        {.name = "tunebench", .base = 0, .run = tb_run, .user = t},
    };
    tb_rounds_cfg cfg = {.min_rep_s = 1.0, .min_rounds = 5, .max_rounds = 30,
                         .target_half_width = 0.03, .budget_s = g_budget,
                         .warmup_max_s = g_budget / 4, .seed = 0x7b5e},
                  *cp = &cfg;
    fprintf(stderr, "vs_torch: %s: rounds of PyTorch and tunebench, budget %g s\n", c->name,
            g_budget);
    TB_TRY_GOTO(rc, tb_rounds_run(cp, arms, 2, &res), out);
    rc = add_rows(b, c, &res);
out:
    tb_rounds_result_free(&res);
    torch_stop(&p);
    tb_trainer_destroy(t);
    return rc;
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
            TB_TRY(run_config(b, &configs[i]));
    return tb_bench_save(b);
}

static const tb_technique technique = {
    .name = TECHNIQUE,
    .what = "tunebench's ResNet-50 and GPT-2 training steps beside PyTorch's, interleaved and "
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
