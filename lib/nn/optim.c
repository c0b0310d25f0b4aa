/* optim.c - see optim.h. */
#include "lib/nn/optim.h"

#include <stdlib.h>
#include <string.h>

double tb_lr_at_step(const tb_lr_schedule *s, int step)
{
    if (s->warmup_steps <= 0 || step >= s->warmup_steps)
        return s->peak_lr;
    return s->peak_lr * (double)step / (double)s->warmup_steps;
}

/* Full-size state buffers: momentum (SGD, LARS, NovoGrad's m) and the
 * Adam moments (AdamW, LAMB); NovoGrad adds one float per tensor. */
static int states_needed(tb_opt_kind kind)
{
    return kind == TB_OPT_ADAMW || kind == TB_OPT_LAMB ? 2 : 1;
}

int tb_optim_no_adapt(const char *param_name)
{
    return !strcmp(param_name, "bias") || !strcmp(param_name, "gamma") ||
           !strcmp(param_name, "beta");
}

int tb_optim_init(tb_optim *o, tb_model *m, const tb_opt_hparams *hp, const tb_lr_schedule *s,
               int fused)
{
    memset(o, 0, sizeof *o);
    if (hp->kind < TB_OPT_SGD || hp->kind > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "optimizer kind %d unknown", (int)hp->kind);
    o->be = m->ctx.be;
    o->hp = *hp;
    o->hp.step = 0;
    if (o->hp.grad_scale == 0)
        o->hp.grad_scale = 1;
    o->sched = *s;
    o->fused = fused;
    o->numel = m->numel;
    o->count = m->nparams;
    int ns = states_needed(hp->kind);
    int per_tensor = hp->kind == TB_OPT_NOVOGRAD;
    size_t bytes = ((size_t)ns * m->numel + (per_tensor ? (size_t)m->nparams : 0)) * sizeof(float);
    int rc;
    o->views = calloc((size_t)m->nparams, sizeof *o->views);
    if (!o->views)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for optimizer views");
    TB_TRY_GOTO(rc, o->be->dev_alloc(o->be, (void **)&o->state, bytes), out_free);
    TB_TRY_GOTO(rc, o->be->memset(o->be, o->state, 0, bytes, NULL), out_free);
    size_t at = 0;
    for (int i = 0; i < m->nparams; i++) {
        const tb_param *p = m->params[i];
        o->views[i] = (tb_param_view){.param = p->w, .grad = p->g, .state1 = o->state + at,
                                      .state2 = ns > 1 ? o->state + m->numel + at : NULL,
                                      .n = p->n,
                                      .tensor_state = per_tensor ? o->state + (size_t)ns * m->numel + i
                                                                 : NULL,
                                      .no_adapt = tb_optim_no_adapt(p->name)};
        at += p->n;
    }
    return TB_OK;

out_free:
    tb_optim_free(o);
    return rc;
}

void tb_optim_free(tb_optim *o)
{
    if (o->state)
        o->be->dev_free(o->be, o->state);
    free(o->views);
    memset(o, 0, sizeof *o);
}

int tb_optim_step(tb_optim *o)
{
    o->hp.step++;
    o->hp.lr = (float)tb_lr_at_step(&o->sched, o->hp.step);
    return o->be->opt_step(o->be, &o->hp, o->views, o->count, o->fused);
}
